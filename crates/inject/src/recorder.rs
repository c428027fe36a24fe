//! The injection's life in one process: load CUPTI, claim it (subscribe), register the
//! buffer callbacks, and record the activity kinds below while the parent asks for it.
//! Buffers are handed to [`crate::link`]'s sender thread untouched; the buffer callback
//! itself only checks the buffer is one of ours and queues it.

use std::collections::HashSet;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use mlprof_cupti::layout;
use mlprof_cupti::wire::{FromInjection, Hello, PROTOCOL_VERSION, realtime_ns};

use crate::cupti::Cupti;
use crate::frameworks;
use crate::link::{Link, Outgoing};

/// Bytes of one activity buffer (NVIDIA recommends 1–10 MB; Kineto uses 4 MiB).
pub const BUFFER_BYTES: usize = 4 << 20;
/// The most buffers alive at once (held by CUPTI or waiting to be sent): 128 MiB. When
/// all are in use, CUPTI drops records and says how many.
pub const MAX_BUFFERS: usize = 32;

/// Activity kinds recorded while tracing. Driver API calls only with
/// `MLPROF_INJECT_DRIVER_API=1`: recording them all costs a host record per driver call,
/// and choosing some with `cuptiActivityEnableDriverApi` while a PyTorch job ran stopped
/// every kernel record on the H200 (CUPTI 13.0; `scripts/gpu_checks/README.md`).
const KINDS: &[(u32, &str)] = &[
    (layout::KIND_CONTEXT, "CONTEXT"),
    (layout::KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"),
    (layout::KIND_MEMCPY, "MEMCPY"),
    (layout::KIND_MEMCPY2, "MEMCPY2"),
    (layout::KIND_MEMSET, "MEMSET"),
    (layout::KIND_RUNTIME, "RUNTIME"),
    (layout::KIND_SYNCHRONIZATION, "SYNCHRONIZATION"),
    (layout::KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION"),
    (layout::KIND_MEMORY2, "MEMORY2"),
    (layout::KIND_OVERHEAD, "OVERHEAD"),
    (layout::KIND_MARKER, "MARKER"),
];

/// The injection of this process, once it is recording-capable.
pub struct Injection {
    /// libcupti.
    pub cupti: Cupti,
    /// The process that initialised it (a `fork`ed child must not act on it).
    pub pid: u32,
    /// Whether activities are enabled now.
    pub recording: AtomicBool,
    /// The buffers handed to CUPTI and not yet freed, by address.
    outstanding: Mutex<HashSet<usize>>,
    /// Records CUPTI dropped, not yet reported.
    pub dropped: AtomicU64,
    /// Completed buffers freed unsent because the queue to the parent was full, not yet
    /// reported.
    lost_buffers: AtomicU64,
    /// Kinds enabled by the last start.
    enabled: Mutex<Vec<u32>>,
    /// The GPUs' properties have been sent.
    devices_sent: AtomicBool,
    /// A framework tracer appeared after `cuInit`: CUPTI was given up for good.
    retired: AtomicBool,
    /// `MLPROF_INJECT_DRIVER_API=1`, read at start.
    driver_api: bool,
    /// `MLPROF_INJECT_FRAMEWORKS=1`, read at start.
    beside_frameworks: bool,
    /// The queue to the sender thread.
    pub link: Link,
}

static INJECTION: OnceLock<Injection> = OnceLock::new();
/// `start` has run (whatever it decided).
static STARTED: AtomicBool = AtomicBool::new(false);
/// The process is exiting: the injection's threads touch neither CUPTI nor the driver
/// any more (their libraries may be tearing down), and only free buffers.
pub static EXITING: AtomicBool = AtomicBool::new(false);

/// Whether `InitializeInjection` has decided (recording-capable or passive).
pub fn started() -> bool {
    STARTED.load(Ordering::SeqCst)
}

/// The injection, in the process that started it.
pub fn current() -> Option<&'static Injection> {
    INJECTION.get().filter(|i| i.pid == std::process::id())
}

/// Starts the injection: connects to the parent, decides whether to record, and claims
/// CUPTI. Any failure leaves the process untouched (and says why when it can).
pub fn start() {
    STARTED.store(true, Ordering::SeqCst);
    let Some(socket) = std::env::var_os("MLPROF_INJECT_SOCKET").filter(|s| !s.is_empty()) else { return };
    let Ok(stream) = std::os::unix::net::UnixStream::connect(&socket) else { return };
    let pid = std::process::id();
    crate::log(|| "InitializeInjection: connected".to_string());
    let beside_frameworks = std::env::var_os("MLPROF_INJECT_FRAMEWORKS").is_some_and(|v| v == "1");
    if !beside_frameworks && let Some(reason) = framework_owns_cupti() {
        return stay_passive(stream, pid, reason);
    }
    let (cupti, version) = match claim_cupti() {
        Ok(claimed) => claimed,
        Err(reason) => return stay_passive(stream, pid, reason),
    };
    // Set by `mlprof run` when the first window is due at launch: record from the very
    // first kernel, before the parent could answer.
    let record_now = std::env::var_os("MLPROF_INJECT_RECORD_AT_START").is_some_and(|v| v == "1");
    let cupti_timestamp_ns = cupti.timestamp();
    let hello = Hello {
        protocol: PROTOCOL_VERSION,
        pid,
        cupti_api_version: version,
        cupti_timestamp_ns,
        realtime_ns: realtime_ns(),
        recording: record_now,
    };
    let Some(link) = Link::open(stream, hello) else {
        cupti.unsubscribe();
        return;
    };
    let driver_api = std::env::var_os("MLPROF_INJECT_DRIVER_API").is_some_and(|v| v == "1");
    let injection = Injection {
        cupti,
        pid,
        recording: AtomicBool::new(false),
        outstanding: Mutex::new(HashSet::new()),
        dropped: AtomicU64::new(0),
        lost_buffers: AtomicU64::new(0),
        enabled: Mutex::new(Vec::new()),
        devices_sent: AtomicBool::new(false),
        retired: AtomicBool::new(false),
        driver_api,
        beside_frameworks,
        link,
    };
    install(injection, record_now);
}

/// Why a framework's (or another tool's) tracer owns CUPTI in this process, if one
/// does.
fn framework_owns_cupti() -> Option<String> {
    let (framework, library) = frameworks::framework_tracer()?;
    Some(if framework == frameworks::OTHER_TOOL {
        format!("another tool loaded libcupti ({library}) before CUDA started: the GPU activity is that tool's")
    } else {
        format!("{framework} is loaded ({library}) and runs its own CUPTI tracer; mlprof drives that tracer instead")
    })
}

/// Loads libcupti, checks its version and subscribes with the buffer callbacks; returns
/// it and its API version, or why not (nothing stays registered then).
fn claim_cupti() -> Result<(Cupti, u32), String> {
    let cupti = Cupti::load()?;
    let version = cupti
        .version()
        .and_then(|v| mlprof_cupti::records::check_version(v).map(|()| v))
        .map_err(|reason| format!("{}: {reason}", cupti.path))?;
    let (subscribed, holder) = cupti.subscribe(on_callback);
    if subscribed == layout::ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED {
        let holder = holder.map_or_else(|| "another tool".to_string(), |name| format!("another tool ({name})"));
        return Err(format!(
            "{holder} holds CUPTI (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED): the GPU activity is that \
             tool's, not mlprof's"
        ));
    }
    cupti.check(subscribed, "cuptiSubscribe")?;
    if let Err(reason) = cupti.register_callbacks(on_buffer_requested, on_buffer_completed) {
        cupti.unsubscribe();
        return Err(reason);
    }
    cupti.use_system_thread_ids();
    Ok((cupti, version))
}

/// Tells the parent this process stays passive, and why, then closes the link.
fn stay_passive(stream: std::os::unix::net::UnixStream, pid: u32, reason: String) {
    crate::log(|| format!("passive: {reason}"));
    let hello = Hello {
        protocol: PROTOCOL_VERSION,
        pid,
        cupti_api_version: 0,
        cupti_timestamp_ns: 0,
        realtime_ns: realtime_ns(),
        recording: false,
    };
    crate::link::say_and_close(stream, &[FromInjection::Hello(hello), FromInjection::Passive(reason)]);
}

/// Makes `injection` the process's, starts its threads and its exit flush, and
/// records from now on when `record_now`.
fn install(injection: Injection, record_now: bool) {
    if INJECTION.set(injection).is_ok()
        && let Some(injection) = current()
    {
        if record_now {
            injection.start_recording();
        }
        if !crate::link::start_threads() {
            // Nothing would ever stop or receive the recording.
            injection.link.close();
            injection.retire("mlprof-inject could not start its threads");
            return;
        }
        // SAFETY: registers a plain `extern "C" fn()` that catches its own panics.
        unsafe { libc::atexit(at_exit) };
    }
}

impl Injection {
    /// Enables the recorded kinds; a kind this CUPTI refuses is reported, not fatal.
    pub fn start_recording(&self) {
        if self.retired.load(Ordering::SeqCst) || EXITING.load(Ordering::SeqCst) {
            return;
        }
        let driver = self.driver_api;
        let mut enabled = lock(&self.enabled);
        let kinds = KINDS.iter().copied().chain(driver.then_some((layout::KIND_DRIVER, "DRIVER")));
        for (kind, name) in kinds {
            if enabled.contains(&kind) {
                continue;
            }
            match self.cupti.check(self.cupti.enable(kind), &format!("cuptiActivityEnable({name})")) {
                Ok(()) => enabled.push(kind),
                Err(reason) => self.link.send(FromInjection::Note(reason)),
            }
        }
        self.recording.store(true, Ordering::SeqCst);
        crate::log(|| format!("recording {} kinds", enabled.len()));
    }

    /// Sends the GPUs' properties once the driver gives them (it does once `cuInit`
    /// has returned); true when they have been sent.
    pub fn send_devices(&self) -> bool {
        if self.devices_sent.load(Ordering::SeqCst) {
            return true;
        }
        let Ok(Some(devices)) = std::panic::catch_unwind(crate::device::query) else { return false };
        if !self.devices_sent.swap(true, Ordering::SeqCst) {
            devices.into_iter().for_each(|d| self.link.send(FromInjection::Device(d)));
        }
        true
    }

    /// Disables what [`Self::start_recording`] enabled and flushes every record out
    /// (after the GPUs' properties, so a window has them even in a short process).
    pub fn stop_recording(&self) {
        self.stop_recording_after(std::time::Duration::ZERO);
    }

    /// [`Self::stop_recording`], waiting `settle` between disabling the kinds and the
    /// forced flush, so kernels launched before the stop finish and come back whole
    /// (a forced flush hands over records of unfinished work without their end).
    pub fn stop_recording_after(&self, settle: std::time::Duration) {
        crate::log(|| "stop recording".to_string());
        self.send_devices();
        self.recording.store(false, Ordering::SeqCst);
        for kind in std::mem::take(&mut *lock(&self.enabled)) {
            let _ = self.cupti.disable(kind);
        }
        if !settle.is_zero() {
            std::thread::sleep(settle);
        }
        self.flush(true);
    }

    /// Hands every completed buffer to the sender (`forced`: also the ones CUPTI is
    /// still filling).
    pub fn flush(&self, forced: bool) {
        let result = self.cupti.flush_all(if forced { layout::FLAG_FLUSH_FORCED } else { 0 });
        if forced {
            crate::log(|| format!("forced flush: {result}"));
        }
        let dropped = self.dropped.swap(0, Ordering::SeqCst);
        if dropped > 0 {
            self.link.send(FromInjection::Dropped(dropped));
        }
        let lost = self.lost_buffers.swap(0, Ordering::SeqCst);
        if lost > 0 {
            self.link.send(FromInjection::Note(format!(
                "{lost} buffers of CUPTI records were lost: mlprof did not take them fast enough"
            )));
        }
    }

    /// Frees a buffer CUPTI gave back (called by the sender once it is sent).
    pub fn release(&self, address: usize) {
        let ours = lock(&self.outstanding).remove(&address);
        if ours {
            // SAFETY: allocated in `on_buffer_requested` with this layout, and removed
            // from the set above so it is freed once.
            unsafe { std::alloc::dealloc(address as *mut u8, buffer_layout()) };
        }
    }

    /// Stops recording and gives CUPTI up for the rest of the process, saying why: a
    /// framework tracer appeared after `cuInit` (its CUPTI client would receive our
    /// buffers), or the injection cannot work.
    pub fn retire(&self, reason: &str) {
        if self.retired.swap(true, Ordering::SeqCst) {
            return;
        }
        crate::log(|| format!("retired: {reason}"));
        if self.recording.load(Ordering::SeqCst) {
            self.stop_recording();
        }
        self.cupti.unsubscribe();
        self.link.send(FromInjection::Passive(reason.to_string()));
    }

    /// Retires when a framework tracer has been loaded since `cuInit` (unless asked to
    /// record beside frameworks).
    pub fn check_frameworks(&self) {
        if self.beside_frameworks || self.retired.load(Ordering::SeqCst) {
            return;
        }
        if let Some((framework, library)) = frameworks::framework_tracer() {
            self.retire(&format!(
                "{framework} was loaded after CUDA started ({library}); mlprof-inject gave CUPTI up to its tracer"
            ));
        }
    }
}

fn buffer_layout() -> std::alloc::Layout {
    // 4 MiB aligned to 8, as CUPTI requires: a valid layout.
    std::alloc::Layout::from_size_align(BUFFER_BYTES, 8).unwrap_or_else(|_| std::alloc::Layout::new::<u64>())
}

/// Locks `mutex`, going on with the data when a holder panicked (the data is a set of
/// addresses or kinds, valid after any panic).
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The subscriber's callback: mlprof subscribes to hold CUPTI (so a second tool is told
/// so, rather than taking its buffers), not for callbacks; none is enabled.
extern "C" fn on_callback(_user: *mut c_void, _domain: u32, _cbid: u32, _data: *const c_void) {}

extern "C" fn on_buffer_requested(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize) {
    // SAFETY: CUPTI passes valid out pointers. Set first, so a panic below still leaves
    // CUPTI an answer (no buffer: it drops and counts the records).
    unsafe {
        *buffer = std::ptr::null_mut();
        *size = 0;
        *max_records = 0;
    }
    let _ = std::panic::catch_unwind(|| {
        let mut given: *mut u8 = std::ptr::null_mut();
        if let Some(injection) = current().filter(|i| !i.retired.load(Ordering::SeqCst)) {
            let mut outstanding = lock(&injection.outstanding);
            if outstanding.len() < MAX_BUFFERS {
                // SAFETY: a non-zero-sized layout. Zeroed: bytes CUPTI leaves unwritten
                // (padding) are then never stale heap.
                let p = unsafe { std::alloc::alloc_zeroed(buffer_layout()) };
                if !p.is_null() {
                    outstanding.insert(p as usize);
                    given = p;
                }
            }
        }
        // SAFETY: CUPTI passes valid out pointers. A null buffer of size 0 tells CUPTI
        // to drop records (it counts them).
        unsafe {
            *buffer = given;
            *size = if given.is_null() { 0 } else { BUFFER_BYTES };
            *max_records = 0;
        }
    });
}

extern "C" fn on_buffer_completed(context: *mut c_void, stream_id: u32, buffer: *mut u8, _size: usize, valid: usize) {
    let _ = std::panic::catch_unwind(|| {
        let Some(injection) = current() else { return };
        // Kineto saw buffers it did not allocate on the H200: never touch those.
        if buffer.is_null() || !lock(&injection.outstanding).contains(&(buffer as usize)) {
            return;
        }
        // SAFETY: the context CUPTI passed to this callback.
        let dropped = unsafe { injection.cupti.dropped(context, stream_id) };
        if dropped > 0 {
            injection.dropped.fetch_add(dropped, Ordering::SeqCst);
        }
        if valid == 0 {
            injection.release(buffer as usize);
        } else if !injection.link.queue(Outgoing::Buffer { address: buffer as usize, valid: valid.min(BUFFER_BYTES) }) {
            injection.lost_buffers.fetch_add(1, Ordering::SeqCst);
            injection.release(buffer as usize);
        }
    });
}

/// How long the job's exit may wait for mlprof's last flush.
pub const EXIT_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// At exit: stop recording, flush, say goodbye, and give the sender a bounded time to
/// drain. The work runs on its own thread and the exit waits for it at most
/// [`EXIT_WAIT`]: a CUPTI flush that never returns must not hold the job.
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        if current().is_none() {
            return;
        }
        // The control thread stops touching CUPTI now; this thread does the last flush.
        EXITING.store(true, Ordering::SeqCst);
        let (done, finished) = std::sync::mpsc::channel();
        let worker = std::thread::Builder::new().name("mlprof-exit".into()).spawn(move || {
            let _ = std::panic::catch_unwind(|| {
                crate::log(|| "exit: flushing".to_string());
                if let Some(injection) = current() {
                    if injection.recording.load(Ordering::SeqCst) {
                        injection.stop_recording();
                    }
                    injection.link.send(FromInjection::Bye);
                    injection.link.drain(EXIT_WAIT);
                }
            });
            let _ = done.send(());
        });
        if worker.is_ok() {
            let waited = finished.recv_timeout(EXIT_WAIT);
            crate::log(|| format!("exit: {}", if waited.is_ok() { "done" } else { "gave up waiting" }));
            if waited.is_err()
                && let Some(injection) = current()
            {
                // The sender may be stuck on the parent: it must not go on into CUPTI
                // while the process tears down.
                injection.link.close();
            }
        }
    });
}
