//! Native (C/C++) stacks of every thread of the job, taken by the kernel: one
//! `perf_event_open` CPU-clock sampling event per thread ([`perf`]), its ring buffer
//! drained by the sampling thread at each tick ([`records`]), every address named from
//! the process's mappings and the ELF files behind them ([`symbols`], [`elf`]).
//!
//! The design decision to know: the kernel walks the user stack by frame pointers, so
//! the innermost function of every sample is exact but callers are found only through
//! code built with frame pointers (most distribution libraries, and PyTorch's wheels,
//! omit them): the chain stops, or goes astray, at the first function without one. A
//! return address outside executable memory ends the chain there. Samples count CPU
//! time, user space only: a thread waiting or inside a system call is not sampled.
//!
//! Where the kernel refuses (`kernel.perf_event_paranoid`, seccomp in a container,
//! another user's process), one note says why and what would allow it, and sampling
//! goes on without native stacks.

pub mod elf;
pub mod perf;
pub mod records;
pub mod symbols;

use std::collections::{HashMap, HashSet};
use std::io;
use std::time::{Duration, Instant};

use perf::{Clock, Ring};
use records::{Parsed, RawSample};
use symbols::{Resolved, Symbolizer};

use super::store::{Frame, NativeSample, Store};

/// The most threads sampled at once (one descriptor and one ring buffer each).
pub const MAX_THREADS: usize = 1024;
/// Data pages per ring buffer (16 KiB with 4 KiB pages: a second of 100 Hz samples of a
/// deep stack; the ring is read every tick).
const DATA_PAGES: usize = 4;
/// Addresses whose frames are remembered per process before the memory is cleared.
const MAX_CACHED_ADDRESSES: usize = 200_000;
/// What the address cache holds for an address outside executable memory.
const NOT_CODE: u32 = u32::MAX;

/// Whether the kernel lets mlprof sample, as far as it knows.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// No event opened yet.
    Untried,
    /// At least one event opened, on this clock.
    Sampling(Clock),
    /// Refused; said once.
    Off,
}

/// How long native sampling is on in each [`DUTY_PERIOD`]: an enabled CPU-clock event
/// costs its thread a timer at every context switch (about 4 % of a PyTorch loop's steps
/// with DataLoader workers on one core), so events sample in bursts.
pub const DUTY_ON: Duration = Duration::from_secs(1);

/// The period of native sampling's bursts ([`DUTY_ON`]).
pub const DUTY_PERIOD: Duration = Duration::from_secs(5);

/// The native sampling of one job.
pub struct NativeSampler {
    hz: u32,
    /// When sampling started: bursts are counted from it.
    started: Instant,
    /// Whether the events are enabled now (in a burst).
    enabled: bool,
    state: State,
    /// `CLOCK_REALTIME - CLOCK_MONOTONIC` at start, ns.
    monotonic_offset_ns: i64,
    rings: HashMap<(u32, u32), Ring>,
    symbolizer: Symbolizer,
    /// Per process: address (less one for return addresses) to frame id.
    addresses: HashMap<u32, HashMap<u64, u32>>,
    /// Processes that exited: their caches go after the next record.
    retired: HashSet<u32>,
    /// Processes whose mappings changed: their address caches go before the next batch.
    stale: HashSet<u32>,
    /// Records read and not yet recorded.
    pending: Parsed,
    buffer: Vec<u8>,
    notes: Vec<String>,
    said: HashSet<&'static str>,
    /// Ring buffers whose positions made no sense.
    pub corrupt_rings: u64,
}

impl NativeSampler {
    /// Native sampling at `hz` samples per second of each thread's CPU time.
    pub fn new(hz: u32) -> NativeSampler {
        NativeSampler {
            hz,
            started: Instant::now(),
            enabled: true,
            state: State::Untried,
            monotonic_offset_ns: perf::monotonic_to_realtime_ns(),
            rings: HashMap::new(),
            symbolizer: Symbolizer::default(),
            addresses: HashMap::new(),
            retired: HashSet::new(),
            stale: HashSet::new(),
            pending: Parsed::default(),
            buffer: Vec::new(),
            notes: Vec::new(),
            said: HashSet::new(),
            corrupt_rings: 0,
        }
    }

    /// Whether the kernel refused and nothing is sampled.
    pub fn is_off(&self) -> bool {
        self.state == State::Off
    }

    /// Samples the threads `tids` of `pid` (those not sampled yet), and stops sampling
    /// its threads that are gone.
    pub fn watch(&mut self, pid: u32, tids: &[u32]) {
        let alive: HashSet<u32> = tids.iter().copied().collect();
        let gone: Vec<(u32, u32)> =
            self.rings.keys().filter(|&&(p, t)| p == pid && !alive.contains(&t)).copied().collect();
        for key in gone {
            if let Some(mut ring) = self.rings.remove(&key) {
                self.read(&mut ring);
            }
        }
        for &tid in tids {
            if self.state == State::Off {
                return;
            }
            if self.rings.contains_key(&(pid, tid)) {
                continue;
            }
            if self.rings.len() >= MAX_THREADS {
                self.say_once("threads", format!(
                    "sampling native stacks: of the first {MAX_THREADS} threads only (one descriptor and ring buffer each)"
                ));
                return;
            }
            self.open(pid, tid);
        }
    }

    fn open(&mut self, pid: u32, tid: u32) {
        let clocks: &[Clock] = match self.state {
            State::Sampling(clock) => &[clock],
            _ => &Clock::ALL,
        };
        let mut opened = Err(io::Error::from_raw_os_error(libc::EINVAL));
        for &clock in clocks {
            opened = perf::open(tid, self.hz, clock).map(|fd| (fd, clock));
            // An older kernel refuses `use_clockid` (or that clock) with EINVAL.
            if !matches!(&opened, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
                break;
            }
        }
        let ring = opened
            .map_err(Failure::Open)
            .and_then(|(fd, clock)| Ring::map(fd, &[DATA_PAGES, 1]).map(|ring| (ring, clock)).map_err(Failure::Map));
        match ring {
            Ok((ring, clock)) => {
                if self.state == State::Untried {
                    self.notes.push(format!(
                        "sampling native stacks of every thread at {} Hz of its CPU time, {} s in every {} s \
                         (perf_event_open, user space; callers only through frame pointers, so code built without \
                         them shows its innermost function)",
                        self.hz,
                        DUTY_ON.as_secs(),
                        DUTY_PERIOD.as_secs()
                    ));
                }
                self.state = State::Sampling(clock);
                if !self.enabled {
                    let _ = ring.set_enabled(false);
                }
                self.rings.insert((pid, tid), ring);
            }
            // The thread ended meanwhile.
            Err(Failure::Open(error)) if error.raw_os_error() == Some(libc::ESRCH) => {}
            Err(failure) if self.state == State::Untried => {
                self.state = State::Off;
                self.notes.push(format!("no native stacks: {}", failure.why()));
            }
            Err(failure) => {
                // Sampling works, but not for this thread (another user's, out of
                // descriptors or locked memory): said once.
                self.say_once(
                    "refused",
                    format!("sampling native stacks: not for some threads (pid {pid}, tid {tid}: {})", failure.why()),
                );
            }
        }
    }

    /// Starts or ends a burst of sampling as `now` falls in or out of one (the first
    /// [`DUTY_ON`] of each [`DUTY_PERIOD`]).
    pub fn pace(&mut self, now: Instant) {
        let into_period = now.saturating_duration_since(self.started).as_nanos() % DUTY_PERIOD.as_nanos();
        let on = into_period < DUTY_ON.as_nanos();
        if on != self.enabled {
            for ring in self.rings.values() {
                let _ = ring.set_enabled(on);
            }
            self.enabled = on;
        }
    }

    /// `pid` exited: its rings are read a last time and closed, its caches go after the
    /// next record.
    pub fn forget(&mut self, pid: u32) {
        self.watch(pid, &[]);
        self.retired.insert(pid);
    }

    /// `pid` runs another program: its mappings and frames are read afresh.
    pub fn exec(&mut self, pid: u32) {
        self.symbolizer.forget(pid);
        self.addresses.remove(&pid);
    }

    fn read(&mut self, ring: &mut Ring) {
        self.buffer.clear();
        if let perf::Read::Corrupt = ring.read(&mut self.buffer) {
            self.corrupt_rings += 1;
        }
        records::parse(&self.buffer, &mut self.pending);
    }

    /// Every record the rings hold now, and those read from closed rings since.
    pub fn drain(&mut self) -> Parsed {
        let mut rings = std::mem::take(&mut self.rings);
        for ring in rings.values_mut() {
            self.read(ring);
        }
        self.rings = rings;
        if self.pending.throttled > 0 {
            self.say_once(
                "throttled",
                "sampling native stacks: the kernel throttled sampling \
                                        (kernel.perf_event_max_sample_rate); some samples are missing"
                    .to_string(),
            );
        }
        std::mem::take(&mut self.pending)
    }

    /// Names every address of `batch` not named before (reading maps and ELF files; call
    /// it without holding the store).
    pub fn resolve(&mut self, batch: &Parsed) -> Vec<(u32, u64, Resolved)> {
        // Frames named from old mappings may be wrong now, and the caches are bounded:
        // both are cleared here, between batches, so a batch is named consistently.
        for pid in self.stale.drain() {
            self.addresses.remove(&pid);
        }
        self.addresses.retain(|_, known| known.len() <= MAX_CACHED_ADDRESSES);
        let mut resolved = Vec::new();
        // Named in this batch already: whether it is code.
        let mut seen: HashMap<(u32, u64), bool> = HashMap::new();
        for sample in &batch.samples {
            let known = self.addresses.get(&sample.pid);
            for (depth, &ip) in sample.user_ips.iter().enumerate() {
                let key = key(ip, depth);
                let cached = known.and_then(|k| k.get(&key)).copied();
                let code = match (cached, seen.get(&(sample.pid, key))) {
                    (Some(id), _) => id != NOT_CODE,
                    (None, Some(&code)) => code,
                    (None, None) => {
                        let mut changed = false;
                        let what = self.symbolizer.resolve(sample.pid, ip, depth == 0, &mut changed);
                        if changed {
                            self.stale.insert(sample.pid);
                        }
                        let code = what != Resolved::NotCode;
                        seen.insert((sample.pid, key), code);
                        resolved.push((sample.pid, key, what));
                        code
                    }
                };
                // The chain ends at a return address outside code: nothing after it is named.
                if !code && depth > 0 {
                    break;
                }
            }
        }
        resolved
    }

    /// Records `batch`, named by `resolved`, into `store`; `now_ns` stamps samples
    /// where the kernel's clock is not the epoch's.
    pub fn record(&mut self, batch: Parsed, resolved: Vec<(u32, u64, Resolved)>, now_ns: i64, store: &mut Store) {
        for (pid, key, what) in resolved {
            let id = match what {
                Resolved::Code(frame) => store.frames.frame(frame),
                Resolved::NotCode => NOT_CODE,
            };
            self.addresses.entry(pid).or_default().insert(key, id);
        }
        let unknown =
            store.frames.frame(Frame { function: "[unknown]".into(), file: "".into(), short_file: "".into(), line: 0 });
        for sample in batch.samples {
            let known = self.addresses.get(&sample.pid);
            let stack = stack_of(&sample, unknown, |key| known.and_then(|k| k.get(&key)).copied());
            let at_ns = match self.state {
                State::Sampling(Clock::Realtime) => i64::try_from(sample.time_ns).unwrap_or(now_ns),
                State::Sampling(Clock::Monotonic) => {
                    i64::try_from(sample.time_ns).map_or(now_ns, |t| t.saturating_add(self.monotonic_offset_ns))
                }
                _ => now_ns,
            };
            let stack = store.frames.stack(&stack);
            store.push_native(NativeSample { at_ns, pid: sample.pid, tid: sample.tid, stack });
        }
        store.native_lost = store.native_lost.saturating_add(batch.lost);
        for pid in self.retired.drain() {
            if !self.rings.keys().any(|&(p, _)| p == pid) {
                self.symbolizer.forget(pid);
                self.addresses.remove(&pid);
            }
        }
        if self.symbolizer.budget_spent {
            self.say_once(
                "symbols",
                format!(
                    "sampling native stacks: {} function symbols read, mlprof's limit: code in libraries read later is named \
                 module+0xADDRESS",
                    symbols::MAX_CACHED_ENTRIES
                ),
            );
        }
    }

    /// The notes since the last call.
    pub fn take_notes(&mut self) -> Vec<String> {
        std::mem::take(&mut self.notes)
    }

    fn say_once(&mut self, what: &'static str, note: String) {
        if self.said.insert(what) {
            self.notes.push(note);
        }
    }
}

/// The cache key of the address at `depth` of a chain: a return address (below the
/// innermost) points after its call, so the byte before it is the caller's.
fn key(ip: u64, depth: usize) -> u64 {
    if depth == 0 { ip } else { ip.saturating_sub(1) }
}

/// The frame ids of `sample`'s chain, outermost first: an innermost address outside
/// code (or no address at all) is `unknown`, and the chain ends at the first return
/// address outside code or not named.
fn stack_of(sample: &RawSample, unknown: u32, id: impl Fn(u64) -> Option<u32>) -> Vec<u32> {
    let mut stack = Vec::with_capacity(sample.user_ips.len().max(1));
    for (depth, &ip) in sample.user_ips.iter().enumerate() {
        match id(key(ip, depth)) {
            Some(NOT_CODE) | None if depth > 0 => break,
            Some(NOT_CODE) | None => stack.push(unknown),
            Some(frame) => stack.push(frame),
        }
    }
    if stack.is_empty() {
        stack.push(unknown);
    }
    stack.reverse();
    stack
}

/// Why a thread's event could not be had.
enum Failure {
    /// `perf_event_open` refused.
    Open(io::Error),
    /// Mapping the ring buffer failed.
    Map(io::Error),
}

impl Failure {
    /// The failure, and what would allow sampling, on one line.
    fn why(&self) -> String {
        match self {
            Failure::Open(error) => format!("perf_event_open: {}", refusal(error, paranoid_level())),
            Failure::Map(error) => format!(
                "mapping its ring buffer: {} (the locked memory allowed for perf ring buffers is spent: \
                 kernel.perf_event_mlock_kb, ulimit -l)",
                without_errno(error)
            ),
        }
    }
}

/// "Permission denied (os error 13)" less the number, which adds nothing for people.
fn without_errno(error: &io::Error) -> String {
    let text = error.to_string();
    text.rsplit_once(" (os error").map_or(text.clone(), |(text, _)| text.to_string())
}

/// `kernel.perf_event_paranoid`, where the kernel has perf events.
fn paranoid_level() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").ok()?.trim().parse().ok()
}

/// Why the kernel refused an event, and what would allow it, on one line.
pub fn refusal(error: &io::Error, paranoid: Option<i32>) -> String {
    let why = match (error.raw_os_error(), paranoid) {
        (Some(libc::EACCES | libc::EPERM), Some(level)) if level > 2 => format!(
            "kernel.perf_event_paranoid is {level}; 2 or lower lets a user sample their own processes \
             (sysctl kernel.perf_event_paranoid=2), or give mlprof CAP_PERFMON"
        ),
        (Some(libc::EACCES | libc::EPERM), level) => format!(
            "kernel.perf_event_paranoid is {}, so a seccomp filter (a container's default profile) or missing rights \
             over the process refuse it; CAP_PERFMON allows it (docker run --cap-add PERFMON)",
            level.map_or("unknown".to_string(), |l| l.to_string())
        ),
        (Some(libc::ENOSYS), _) => "the kernel has no perf events (CONFIG_PERF_EVENTS), or a seccomp filter hides \
                                     the call"
            .to_string(),
        (Some(libc::ENOENT | libc::EOPNOTSUPP | libc::EINVAL), _) => {
            "the kernel offers no software CPU-clock sampling event".to_string()
        }
        (Some(libc::EMFILE | libc::ENFILE), _) => "out of file descriptors (raise ulimit -n)".to_string(),
        (Some(libc::ENOMEM), _) => {
            "out of locked memory for ring buffers (kernel.perf_event_mlock_kb, ulimit -l)".to_string()
        }
        _ => return error.to_string(),
    };
    format!("{} ({why})", without_errno(error))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_what_would_allow_sampling() {
        let denied = io::Error::from_raw_os_error(libc::EACCES);
        let text = refusal(&denied, Some(3));
        assert!(text.starts_with("Permission denied (kernel."), "{text}");
        assert!(text.contains("kernel.perf_event_paranoid is 3; 2 or lower") && text.contains("CAP_PERFMON"), "{text}");
        assert!(refusal(&io::Error::from_raw_os_error(libc::EPERM), Some(2)).contains("seccomp"));
        assert!(refusal(&io::Error::from_raw_os_error(libc::ENOSYS), None).contains("CONFIG_PERF_EVENTS"));
        assert!(!refusal(&io::Error::other("odd"), None).contains('('));
    }

    #[test]
    fn chains_end_at_the_first_return_address_outside_code() {
        let sample = RawSample { pid: 1, tid: 1, time_ns: 0, user_ips: vec![0x10, 0x21, 0x31, 0x41] };
        // 0x10 (leaf) → 1, 0x20 → 2, 0x30 → not code, 0x40 → 4.
        let ids = |key: u64| match key {
            0x10 => Some(1),
            0x20 => Some(2),
            0x30 => Some(NOT_CODE),
            0x40 => Some(4),
            _ => None,
        };
        assert_eq!(stack_of(&sample, 99, ids), [2, 1]);
        // An innermost address outside code is unknown; its callers are still named.
        let sample = RawSample { user_ips: vec![0x30, 0x21], ..sample };
        assert_eq!(stack_of(&sample, 99, ids), [2, 99]);
        let sample = RawSample { user_ips: Vec::new(), ..sample };
        assert_eq!(stack_of(&sample, 99, ids), [99]);
    }

    /// Spins in a function of this test binary for about `ms` of CPU time.
    #[inline(never)]
    fn spin_for(ms: u64) -> u64 {
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed().as_millis() < u128::from(ms) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        x
    }

    #[test]
    fn a_busy_thread_of_this_process_is_sampled_where_the_kernel_allows() {
        let mut sampler = NativeSampler::new(1000);
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() } as u32;
            let _ = tx.send(tid);
            spin_for(300)
        });
        let tid = rx.recv().unwrap();
        let pid = std::process::id();
        sampler.watch(pid, &[tid]);
        let notes = sampler.take_notes();
        if sampler.is_off() {
            eprintln!("SKIPPED: {notes:?}");
            let _ = worker.join();
            return;
        }
        let _ = worker.join();
        let batch = sampler.drain();
        assert!(batch.samples.len() > 20, "{} samples at 1000 Hz over 300 ms", batch.samples.len());
        let resolved = sampler.resolve(&batch);
        let mut store = Store::default();
        let before = mlprof_cupti::wire::realtime_ns();
        sampler.record(batch, resolved, before, &mut store);
        let recorded = store.window(0, i64::MAX);
        let sample = recorded.native_samples[0];
        assert_eq!((sample.pid, sample.tid), (pid, tid));
        // On the epoch's clock, within the last seconds.
        assert!((before - sample.at_ns).abs() < 5_000_000_000, "{} vs {before}", sample.at_ns);
        let leaves: Vec<String> = recorded
            .native_samples
            .iter()
            .filter_map(|s| recorded.frames.stack_at(s.stack).last())
            .filter_map(|&f| recorded.frames.frame_at(f))
            .map(|f| f.function.to_string())
            .collect();
        assert!(leaves.iter().any(|f| f.contains("spin_for")), "{leaves:?}");
    }

    #[test]
    fn out_of_a_burst_the_events_sample_nothing() {
        let mut sampler = NativeSampler::new(1000);
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_on, wait) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() } as u32;
            let _ = tx.send(tid);
            while wait.recv().is_ok() {
                spin_for(200);
                let _ = tx.send(tid);
            }
        });
        let tid = rx.recv().unwrap();
        sampler.watch(std::process::id(), &[tid]);
        if sampler.is_off() {
            eprintln!("SKIPPED: {:?}", sampler.take_notes());
            drop(go_on);
            let _ = worker.join();
            return;
        }
        let spin = |sampler: &mut NativeSampler, at: Duration| {
            let started = sampler.started;
            sampler.pace(started + at);
            let _ = sampler.drain();
            go_on.send(()).unwrap();
            rx.recv().unwrap();
            sampler.drain().samples.len()
        };
        let off = spin(&mut sampler, DUTY_ON + Duration::from_millis(1));
        let on = spin(&mut sampler, DUTY_PERIOD);
        drop(go_on);
        let _ = worker.join();
        assert_eq!(off, 0, "samples between bursts");
        assert!(on > 20, "{on} samples at 1000 Hz over 200 ms in a burst");
    }
}
