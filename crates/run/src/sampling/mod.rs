//! Sampling a job from outside, with no code in it: the Python stacks of every thread
//! of every Python process in the job's process tree (py-spy, [`python`]), the native
//! stacks of every thread of every process of it where the kernel allows
//! `perf_event_open` ([`native`]), each process's CPU, memory and storage I/O from
//! `/proc` ([`procfs`]), and the NVIDIA GPUs' counters where a driver is installed
//! ([`crate::nvml`]), recorded into a bounded [`store`] that windows are cut from and
//! laid out as XSpace planes ([`layout`]).
//!
//! One thread does it all, at the sampling rate (the kernel takes native samples on its
//! own; the thread empties their ring buffers each tick); whatever fails (a process
//! that is not Python, one that exits, a read that races the interpreter, a kernel that
//! refuses perf events) costs that process or that sample, and says so once in a note,
//! never more.

pub mod file;
pub mod layout;
pub mod native;
pub mod procfs;
pub mod python;
pub mod store;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::nvml::{GpuReading, Nvml};
use native::NativeSampler;
use python::PythonProcess;
use store::{Counter, Reading, Recorded, Source, Store};

/// The clock samples are stamped with: now, Unix epoch nanoseconds (`CLOCK_REALTIME`).
pub use mlprof_cupti::wire::realtime_ns;

/// The default sampling rate, samples per second (py-spy's).
pub const DEFAULT_HZ: u32 = 100;
/// The highest sampling rate accepted, samples per second.
pub const MAX_HZ: u32 = 1000;
/// The sampling thread's nice value: where the job keeps every core busy, its threads
/// mostly run first, and samples still come when they are due. Measured inside a PyTorch
/// loop sharing both cores of a 2-core machine (`scripts/bench_watch_cost --toggle`,
/// 100 Hz): at nice 10 its steps took 6.3-6.6 % longer (mlprof 4.9-5.9 % of a core: a
/// sampler that preempts one of a parallel region's threads holds up the others too). At
/// nice 19 they took 1.0-1.9 % longer, but only because samples then came in the job's
/// gaps: 37-46 Hz of the 100 asked, skewed toward where its threads wait (two 15 s
/// windows each: the model's `Linear.forward` read 7.8-9.3 % of running samples against
/// 11.6-12.9 % at nice 10, the wait for the next batch 7.3-8.9 % against 3.9-6.4 %). A
/// profile that misplaces time costs more than the 5 % it saves, so the sampler stays at
/// 10; [`RateCheck`] says when samples fall short anyway.
const SAMPLER_NICE: libc::c_int = 10;

/// Lowers the calling thread's priority to [`SAMPLER_NICE`] (on Linux a thread has its
/// own nice value); failing that, samples simply compete as before.
fn yield_to_the_job() {
    // SAFETY: gettid has no arguments; setpriority on this thread's own id only changes
    // its scheduling weight.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, SAMPLER_NICE);
    }
}

/// The longest [`Sampler::stop`] waits for the sampling thread.
const STOP_WAIT: Duration = Duration::from_secs(2);
/// How often `/proc` counters are read.
const COUNTER_INTERVAL: Duration = Duration::from_millis(100);
/// How often the process tree is looked at for new processes, at least (see
/// [`tree_interval`]).
const TREE_INTERVAL: Duration = Duration::from_millis(250);
/// At a low sample rate the tree is looked at once every this many samples: a look reads
/// a file per thread of the tree (a JAX process on a GPU has 68 threads), which at the
/// agent's 5 Hz cost more than the samples themselves.
const SAMPLES_PER_TREE_LOOK: u32 = 5;
/// How often the process tree is looked at, at most: a new process (a DataLoader worker)
/// is sampled within a second.
const TREE_INTERVAL_MAX: Duration = Duration::from_secs(1);
/// How long a process that maps Python is given to bring its interpreter up before
/// mlprof stops trying to read its stacks.
const ATTACH_PATIENCE: Duration = Duration::from_secs(10);
/// Between the first two tries to attach to one process; each later wait doubles, up to
/// [`ATTACH_RETRY_MAX`]. A try that fails can cost py-spy a scan of the process's memory
/// for an interpreter (a program that maps `libpython` without running it: perf, gdb),
/// so a process that keeps failing is tried less and less often.
const ATTACH_RETRY: Duration = Duration::from_millis(100);
/// The longest wait between two tries to attach.
const ATTACH_RETRY_MAX: Duration = Duration::from_secs(2);

/// The interval between stack samples at `hz`, ns (the counters' interval at 0 Hz).
pub fn interval_ns(hz: u32) -> i64 {
    if hz == 0 { COUNTER_INTERVAL.as_nanos() as i64 } else { 1_000_000_000 / i64::from(hz.min(MAX_HZ)) }
}

/// How often the process tree is looked at when sampling at `hz`: every
/// [`TREE_INTERVAL`], or every [`SAMPLES_PER_TREE_LOOK`] samples when that is longer, up
/// to [`TREE_INTERVAL_MAX`] (1 s at the agent's 5 Hz).
fn tree_interval(hz: u32) -> Duration {
    let samples = Duration::from_nanos(interval_ns(hz).unsigned_abs()) * SAMPLES_PER_TREE_LOOK;
    if hz == 0 { TREE_INTERVAL } else { samples.clamp(TREE_INTERVAL, TREE_INTERVAL_MAX) }
}

/// What to sample.
#[derive(Clone, Copy, Debug)]
pub struct SamplerOptions {
    /// Python stack samples per second per thread (0: no stacks, counters only).
    pub hz: u32,
    /// Whether native stacks are sampled too (perf_event_open, `hz` per second of each
    /// thread's CPU time).
    pub native: bool,
    /// Whether `/proc` and GPU counters are read (every 100 ms); a caller that reads
    /// them itself (the agent) turns them off.
    pub counters: bool,
}

/// The sampling thread and what it recorded.
pub struct Sampler {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

struct Shared {
    store: Mutex<Store>,
    notes: Mutex<Vec<String>>,
    stop: AtomicBool,
}

impl Shared {
    fn store(&self) -> MutexGuard<'_, Store> {
        // A panic while holding the lock left a store that is still consistent
        // (every change is one push or pop).
        self.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn note(&self, note: String) {
        self.notes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(note);
    }
}

impl Sampler {
    /// [`Sampler::start`], or `None` after saying why sampling is off.
    pub fn start_or_say(root: u32, options: SamplerOptions, say: &(dyn Fn(String) + Sync)) -> Option<Sampler> {
        match Sampler::start(root, options) {
            Ok(sampler) => Some(sampler),
            Err(error) => {
                say(format!("sampling is off: cannot start its thread: {error}"));
                None
            }
        }
    }

    /// Starts sampling `root` and the processes it starts.
    pub fn start(root: u32, options: SamplerOptions) -> std::io::Result<Sampler> {
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::default()),
            notes: Mutex::default(),
            stop: AtomicBool::new(false),
        });
        let thread = std::thread::Builder::new().name("mlprof-sampler".into()).spawn({
            let shared = shared.clone();
            move || Sampling::new(root, options, shared).run()
        })?;
        Ok(Sampler { shared, thread: Some(thread) })
    }

    /// Everything recorded from `from_ns` to `to_ns` (Unix epoch nanoseconds).
    pub fn window(&self, from_ns: i64, to_ns: i64) -> Recorded {
        self.shared.store().window(from_ns, to_ns)
    }

    /// Forgets what was recorded before `before_ns` (no window will want it).
    pub fn forget_before(&self, before_ns: i64) {
        self.shared.store().forget_before(before_ns);
    }

    /// The notes since the last call: one line each.
    pub fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.shared.notes.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Stops sampling and waits for the thread, [`STOP_WAIT`] at most: a read stuck in
    /// the kernel (a hung file system under `/proc`, a process in an odd state) must not
    /// keep mlprof from writing what it has and exiting.
    pub fn stop(mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let deadline = Instant::now() + STOP_WAIT;
            while !thread.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }
}

/// One process of the tree, as the sampler knows it.
enum Watched {
    /// Maps Python (or may yet: exec); attaching is tried until `give_up_at`.
    Attaching { exe: Option<PathBuf>, next_try: Instant, give_up_at: Instant, wait: Duration },
    /// Its stacks are read.
    Python(Box<PythonProcess>),
    /// Not Python, or never readable: only its counters.
    Counted { exe: Option<PathBuf> },
}

/// The last `/proc` reading of a process, for rates.
struct LastCounters {
    at: Instant,
    cpu_ticks: u64,
    io: Option<procfs::Io>,
    thread_ticks: HashMap<u32, u64>,
    /// Threads whose last CPU reading was above 0 (so a return to 0 is drawn).
    busy_threads: Vec<u32>,
}

/// NVML, once the sampling thread has tried to open it (opening can take a second per
/// GPU, so it is never done on the job's launch path).
enum Gpus {
    NotTried,
    Open(Nvml),
    Unavailable,
}

/// The sampling thread's state.
struct Sampling {
    root: u32,
    options: SamplerOptions,
    shared: Arc<Shared>,
    watched: HashMap<u32, Watched>,
    last: HashMap<u32, LastCounters>,
    ticks_per_second: f64,
    page_size: f64,
    gpus: Gpus,
    /// Native stacks, while the kernel allows them.
    native: Option<NativeSampler>,
}

impl Sampling {
    fn new(root: u32, options: SamplerOptions, shared: Arc<Shared>) -> Sampling {
        Sampling {
            root,
            options,
            shared,
            watched: HashMap::new(),
            last: HashMap::new(),
            ticks_per_second: procfs::ticks_per_second() as f64,
            page_size: procfs::page_size() as f64,
            gpus: Gpus::NotTried,
            native: (options.hz > 0 && options.native).then(|| NativeSampler::new(options.hz.min(MAX_HZ))),
        }
    }

    fn run(mut self) {
        yield_to_the_job();
        let interval = Duration::from_nanos(interval_ns(self.options.hz).unsigned_abs());
        let mut next_sample = Instant::now();
        let mut next_tree = next_sample;
        let mut next_counters = next_sample;
        let tree_every = tree_interval(self.options.hz);
        let mut rate = RateCheck::new(next_sample);
        while !self.shared.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= next_tree {
                if !self.look_at_tree(now) {
                    break;
                }
                next_tree = now + tree_every;
            }
            if self.options.hz > 0 {
                self.sample_stacks();
                if let Some(native) = &mut self.native {
                    native.pace(now);
                }
                self.sample_native();
                let sampling = self.watched.values().any(|w| matches!(w, Watched::Python(_)));
                if let Some(note) = rate.tick(now, sampling, self.options.hz) {
                    self.shared.note(note);
                }
            }
            if self.options.counters && now >= next_counters {
                self.read_counters();
                next_counters = now + COUNTER_INTERVAL;
            }
            // Evenly spaced samples; after a stall, start again from now rather than
            // catch up in a burst.
            next_sample += interval;
            let now = Instant::now();
            if next_sample < now {
                next_sample = now + interval;
            }
            std::thread::sleep(next_sample - now);
        }
        // What the kernel sampled since the last tick, and in the threads that ended.
        self.sample_native();
    }

    /// Adds new processes of the tree and drops exited ones; false once the root and all
    /// its descendants are gone.
    fn look_at_tree(&mut self, now: Instant) -> bool {
        // Each process's stat once per look: whether it is alive, and its name.
        let stats: Vec<(u32, procfs::Stat)> = procfs::process_tree(self.root)
            .into_iter()
            .filter_map(|pid| Some((pid, procfs::process_stat(pid)?)))
            .collect();
        let alive: std::collections::HashSet<u32> = stats.iter().map(|(pid, _)| *pid).collect();
        if let Some(native) = &mut self.native {
            for pid in self.watched.keys().filter(|pid| !alive.contains(pid)) {
                native.forget(*pid);
            }
        }
        self.watched.retain(|pid, _| alive.contains(pid));
        self.last.retain(|pid, _| alive.contains(pid));
        for (pid, stat) in &stats {
            let pid = *pid;
            let exe = procfs::executable(pid);
            let restart = match self.watched.get(&pid) {
                None => true,
                // An exec: the process may now be Python.
                Some(Watched::Counted { exe: known } | Watched::Attaching { exe: known, .. }) => *known != exe,
                Some(Watched::Python(_)) => false,
            };
            if restart && let Some(native) = &mut self.native {
                native.exec(pid);
            }
            if let Some(native) = &mut self.native {
                native.watch(pid, &procfs::thread_ids(pid));
            }
            if restart {
                let watched = if self.options.hz > 0 && procfs::maps_python(pid) {
                    Watched::Attaching { exe, next_try: now, give_up_at: now + ATTACH_PATIENCE, wait: ATTACH_RETRY }
                } else {
                    Watched::Counted { exe }
                };
                self.watched.insert(pid, watched);
            }
            self.shared.store().name_process(pid, &stat.comm);
        }
        self.attach_waiting(now);
        !alive.is_empty()
    }

    fn attach_waiting(&mut self, now: Instant) {
        for (&pid, watched) in &mut self.watched {
            let Watched::Attaching { exe, next_try, give_up_at, wait } = watched else { continue };
            if now < *next_try {
                continue;
            }
            match PythonProcess::attach(pid) {
                Ok(process) => {
                    self.shared.note(format!(
                        "pid {pid}: sampling Python {} stacks at {} Hz",
                        process.version, self.options.hz
                    ));
                    *watched = Watched::Python(Box::new(process));
                }
                Err(error) if now >= *give_up_at => {
                    self.shared.note(format!("pid {pid}: no Python stacks: {error}{}", ptrace_hint(&error)));
                    *watched = Watched::Counted { exe: exe.take() };
                }
                Err(_) => {
                    *next_try = now + *wait;
                    *wait = (*wait * 2).min(ATTACH_RETRY_MAX);
                }
            }
        }
    }

    /// Reads every Python process's stacks, then records them: the store is locked only
    /// to record, so a sampler kept off the CPU while reading holds up nothing else.
    fn sample_stacks(&mut self) {
        let at_ns = mlprof_cupti::wire::realtime_ns();
        let mut traces = Vec::new();
        let mut failed = 0;
        for watched in self.watched.values_mut() {
            let Watched::Python(process) = watched else { continue };
            match process.read() {
                Ok(read) => traces.extend(read),
                Err(_) => failed += 1,
            }
        }
        let mut store = self.shared.store();
        store.failed_samples += failed;
        for thread in python::intern(&traces, at_ns, &mut store.frames) {
            if let Some(name) = &thread.name {
                store.name_thread(thread.sample.pid, thread.sample.tid, name);
            }
            store.push_sample(thread.sample);
        }
    }

    /// Records what the kernel sampled since the last tick; naming new addresses (which
    /// reads ELF files) happens before the store is locked.
    fn sample_native(&mut self) {
        let Some(native) = &mut self.native else { return };
        let batch = native.drain();
        let resolved = native.resolve(&batch);
        let now_ns = mlprof_cupti::wire::realtime_ns();
        native.record(batch, resolved, now_ns, &mut self.shared.store());
        for note in native.take_notes() {
            self.shared.note(note);
        }
        if native.is_off() {
            self.native = None;
        }
    }

    fn read_counters(&mut self) {
        let at_ns = mlprof_cupti::wire::realtime_ns();
        let now = Instant::now();
        let mut readings = Vec::new();
        let mut names = Vec::new();
        for &pid in self.watched.keys() {
            let Some(stat) = procfs::process_stat(pid) else { continue };
            let io = procfs::process_io(pid);
            let threads = procfs::thread_stats(pid);
            let source = Source::Process(pid);
            readings.push((source, Counter::ResidentMib, stat.rss_pages as f64 * self.page_size / 1_048_576.0));
            let thread_ticks: HashMap<u32, u64> = threads.iter().map(|(&tid, s)| (tid, s.cpu_ticks)).collect();
            let mut busy_threads = Vec::new();
            if let Some(last) = self.last.get(&pid) {
                let seconds = now.duration_since(last.at).as_secs_f64().max(1e-3);
                let percent = |ticks: u64, before: u64| {
                    ticks.saturating_sub(before) as f64 / self.ticks_per_second / seconds * 100.0
                };
                readings.push((source, Counter::CpuPercent, percent(stat.cpu_ticks, last.cpu_ticks)));
                if let (Some(io), Some(before)) = (io, last.io) {
                    let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / 1e6 / seconds;
                    readings.push((source, Counter::ReadMbPerSecond, rate(io.read_bytes, before.read_bytes)));
                    readings.push((source, Counter::WriteMbPerSecond, rate(io.write_bytes, before.write_bytes)));
                }
                for (&tid, &ticks) in &thread_ticks {
                    let before = last.thread_ticks.get(&tid).copied().unwrap_or(ticks);
                    let value = percent(ticks, before);
                    // Idle threads stay off the timeline, but a thread that was busy is
                    // drawn back down to 0.
                    if value > 0.0 || last.busy_threads.contains(&tid) {
                        readings.push((Source::Thread(pid, tid), Counter::CpuPercent, value));
                    }
                    if value > 0.0 {
                        busy_threads.push(tid);
                    }
                }
            }
            for (&tid, thread) in &threads {
                names.push((pid, tid, thread.comm.clone()));
            }
            self.last.insert(pid, LastCounters { at: now, cpu_ticks: stat.cpu_ticks, io, thread_ticks, busy_threads });
        }
        self.read_gpus(&mut readings);
        let mut store = self.shared.store();
        for (pid, tid, name) in names {
            // Python's own thread names (from samples) win over the kernel's.
            if !store.has_thread_name(pid, tid) {
                store.name_thread(pid, tid, &name);
            }
        }
        for (source, counter, value) in readings {
            store.push_reading(Reading { at_ns, source, counter, value });
        }
    }
}

impl Sampling {
    /// Every GPU's counters, and the memory each process of the job holds on it.
    fn read_gpus(&mut self, readings: &mut Vec<(Source, Counter, f64)>) {
        if let Gpus::NotTried = self.gpus {
            self.gpus = match Nvml::open() {
                Ok(nvml) => {
                    let names: Vec<String> = nvml.devices().iter().map(|d| format!("{} {}", d.index, d.name)).collect();
                    self.shared.note(format!("GPU counters through NVML: {}", names.join(", ")));
                    Gpus::Open(nvml)
                }
                Err(unavailable) => {
                    self.shared.note(format!("no GPU counters: {unavailable}"));
                    Gpus::Unavailable
                }
            };
        }
        let Gpus::Open(nvml) = &mut self.gpus else { return };
        for reading in nvml.read() {
            gpu_readings(&reading, |pid| self.watched.contains_key(&pid), readings);
        }
    }
}

/// One GPU reading as counters; `ours` says which pids belong to the job.
fn gpu_readings(reading: &GpuReading, ours: impl Fn(u32) -> bool, out: &mut Vec<(Source, Counter, f64)>) {
    const MIB: f64 = 1_048_576.0;
    let source = Source::Gpu(reading.index);
    let values = [
        (Counter::GpuUtilizationPercent, reading.utilization_gpu_percent.map(f64::from)),
        (Counter::GpuMemoryUtilizationPercent, reading.utilization_memory_percent.map(f64::from)),
        (Counter::GpuMemoryUsedMib, reading.memory_used_bytes.map(|b| b as f64 / MIB)),
        (Counter::SmClockMhz, reading.sm_clock_mhz.map(f64::from)),
        (Counter::PowerWatts, reading.power_milliwatts.map(|mw| f64::from(mw) / 1000.0)),
        (Counter::TemperatureCelsius, reading.temperature_celsius.map(f64::from)),
    ];
    out.extend(values.into_iter().filter_map(|(counter, value)| Some((source, counter, value?))));
    for process in reading.processes.iter().filter(|p| ours(p.pid)) {
        if let Some(bytes) = process.used_bytes {
            out.push((source, Counter::ProcessGpuMemoryMib(process.pid), bytes as f64 / MIB));
        }
    }
}

/// How long a stretch of sampling [`RateCheck`] counts over.
const RATE_STRETCH: Duration = Duration::from_secs(5);
/// The share of the samples asked for below which a stretch is said to have fallen short.
const RATE_SHORT: f64 = 0.75;

/// Watches the rate stack samples are taken at: a sampler below the job's priority on
/// cores the job keeps busy, or with more threads to read than its rate allows, falls
/// behind, and the run should say so (once).
struct RateCheck {
    since: Instant,
    ticks: u32,
    said: bool,
}

impl RateCheck {
    fn new(now: Instant) -> RateCheck {
        RateCheck { since: now, ticks: 0, said: false }
    }

    /// Counts a tick at `now` (`sampling`: whether a Python process was sampled); a note
    /// the first time a stretch of [`RATE_STRETCH`] took fewer than [`RATE_SHORT`] of the
    /// `hz` asked.
    fn tick(&mut self, now: Instant, sampling: bool, hz: u32) -> Option<String> {
        if !sampling {
            *self = RateCheck { said: self.said, ..RateCheck::new(now) };
            return None;
        }
        self.ticks += 1;
        let seconds = now.duration_since(self.since).as_secs_f64();
        if seconds < RATE_STRETCH.as_secs_f64() {
            return None;
        }
        let achieved = f64::from(self.ticks) / seconds;
        *self = RateCheck { said: self.said, ..RateCheck::new(now) };
        if self.said || achieved >= RATE_SHORT * f64::from(hz) {
            return None;
        }
        self.said = true;
        Some(format!(
            "stack samples came at {achieved:.0} Hz for {seconds:.0} s, not the {hz} Hz asked: the sampler fell \
             behind (it runs below the job, at nice {SAMPLER_NICE}, on cores the job keeps busy; or it has more \
             threads to read than that rate allows)"
        ))
    }
}

/// What to do about a refused read of another process's memory (`""` for another
/// error).
pub fn ptrace_hint(error: &str) -> &'static str {
    if error.contains("Permission denied") || error.contains("Operation not permitted") {
        " (reading another process's memory needs the same user with kernel.yama.ptrace_scope <= 1, or \
         CAP_SYS_PTRACE: in a container, --cap-add SYS_PTRACE)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stretch_of_too_few_samples_is_said_once() {
        let start = Instant::now();
        let mut rate = RateCheck::new(start);
        let at = |ms: u64| start + Duration::from_millis(ms);
        // 100 Hz for 5 s: nothing to say.
        let said: Vec<String> = (1..=500).filter_map(|i| rate.tick(at(i * 10), true, 100)).collect();
        assert!(said.is_empty());
        // 40 Hz for the next 5 s: said, once.
        let said: Vec<String> = (1..=200).filter_map(|i| rate.tick(at(5000 + i * 25), true, 100)).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].starts_with("stack samples came at 40 Hz for 5 s, not the 100 Hz asked"), "{}", said[0]);
        let again: Vec<String> = (1..=200).filter_map(|i| rate.tick(at(10_000 + i * 25), true, 100)).collect();
        assert!(again.is_empty());
    }

    #[test]
    fn time_with_no_python_process_to_sample_is_not_counted() {
        let start = Instant::now();
        let mut rate = RateCheck::new(start);
        let at = |ms: u64| start + Duration::from_millis(ms);
        // Waiting 8 s for an interpreter to come up, then 100 Hz.
        assert!(rate.tick(at(8000), false, 100).is_none());
        let said: Vec<String> = (1..=600).filter_map(|i| rate.tick(at(8000 + i * 10), true, 100)).collect();
        assert!(said.is_empty(), "{said:?}");
    }

    #[test]
    fn the_tree_is_looked_at_every_quarter_second_or_every_five_samples_up_to_a_second() {
        assert_eq!(tree_interval(100), Duration::from_millis(250));
        assert_eq!(tree_interval(1000), Duration::from_millis(250));
        assert_eq!(tree_interval(10), Duration::from_millis(500));
        assert_eq!(tree_interval(5), Duration::from_secs(1));
        assert_eq!(tree_interval(1), Duration::from_secs(1));
        assert_eq!(tree_interval(0), Duration::from_millis(250));
    }
}
