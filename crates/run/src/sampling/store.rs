//! What the sampler has recorded and not yet forgotten: Python and native stack samples
//! and counter readings, in time order, with frames and stacks interned so a sample is a
//! few integers (a native frame is a function in a module: `file` is the module's path,
//! `line` 0). Memory is bounded: past [`MAX_SAMPLES`] Python or
//! [`MAX_NATIVE_SAMPLES`] native samples or [`MAX_READINGS`] readings the oldest go
//! first, and past [`MAX_FRAMES`] distinct frames or
//! [`MAX_STACKS`] distinct stacks new ones become one placeholder frame.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// The most samples kept (24 bytes each: about 96 MiB).
pub const MAX_SAMPLES: usize = 4_000_000;
/// The most native stack samples kept (24 bytes each: about 48 MiB).
pub const MAX_NATIVE_SAMPLES: usize = 2_000_000;
/// The most counter readings kept (32 bytes each: about 64 MiB).
pub const MAX_READINGS: usize = 2_000_000;
/// The most distinct frames (function, file, line) kept.
pub const MAX_FRAMES: usize = 1_000_000;
/// The most distinct stacks kept.
pub const MAX_STACKS: usize = 1_000_000;
/// The longest stack kept, frames (deeper frames are dropped from the leaf end).
pub const MAX_DEPTH: usize = 512;

/// One Python frame: a function at a line of a file.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function's name.
    pub function: Box<str>,
    /// The source file, as the interpreter knows it.
    pub file: Box<str>,
    /// The file's name as people read it (the path below `site-packages`, or the file).
    pub short_file: Box<str>,
    /// The line the frame was at (1-based; 0 when unknown).
    pub line: u32,
}

impl Frame {
    /// How a timeline names the frame: `function (short_file:line)`.
    pub fn label(&self) -> String {
        format!("{} ({}:{})", self.function, self.short_file, self.line)
    }
}

/// What a thread was doing when sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadState {
    /// Holding the GIL: running Python.
    Gil,
    /// Running on a CPU without the GIL: in native code.
    Native,
    /// Not running: waiting or sleeping.
    Idle,
}

/// One thread's stack at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sample {
    /// When, Unix epoch nanoseconds.
    pub at_ns: i64,
    /// Process id.
    pub pid: u32,
    /// OS thread id.
    pub tid: u32,
    /// The stack (an index into [`Frames::stack`]).
    pub stack: u32,
    /// What the thread was doing.
    pub state: ThreadState,
}

/// One thread's native stack at one moment (taken by the kernel while it ran).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NativeSample {
    /// When, Unix epoch nanoseconds.
    pub at_ns: i64,
    /// Process id.
    pub pid: u32,
    /// OS thread id.
    pub tid: u32,
    /// The stack (an index into [`Frames::stack`]), outermost first.
    pub stack: u32,
}

/// What a counter reading is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// A process.
    Process(u32),
    /// One thread of a process: `(pid, tid)`.
    Thread(u32, u32),
    /// A GPU, by NVML index.
    Gpu(u32),
}

/// The counters mlprof reads, with their units in their names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Counter {
    /// CPU time over wall time, percent (100 = one core busy).
    CpuPercent,
    /// Resident memory, MiB.
    ResidentMib,
    /// Storage reads, MB/s.
    ReadMbPerSecond,
    /// Storage writes, MB/s.
    WriteMbPerSecond,
    /// GPU busy (a kernel running), percent of the last sample period.
    GpuUtilizationPercent,
    /// GPU memory reads or writes, percent of the last sample period.
    GpuMemoryUtilizationPercent,
    /// GPU memory used, MiB.
    GpuMemoryUsedMib,
    /// SM clock, MHz.
    SmClockMhz,
    /// Power draw, W.
    PowerWatts,
    /// Temperature, °C.
    TemperatureCelsius,
    /// GPU memory a process of the job holds on this GPU, MiB (by pid).
    ProcessGpuMemoryMib(u32),
}

impl Counter {
    /// The counter's name as a timeline shows it.
    pub fn name(self) -> String {
        match self {
            Counter::CpuPercent => "CPU (%)".into(),
            Counter::ResidentMib => "Resident memory (MiB)".into(),
            Counter::ReadMbPerSecond => "Storage read (MB/s)".into(),
            Counter::WriteMbPerSecond => "Storage write (MB/s)".into(),
            Counter::GpuUtilizationPercent => "GPU utilization (%)".into(),
            Counter::GpuMemoryUtilizationPercent => "GPU memory utilization (%)".into(),
            Counter::GpuMemoryUsedMib => "GPU memory used (MiB)".into(),
            Counter::SmClockMhz => "SM clock (MHz)".into(),
            Counter::PowerWatts => "Power (W)".into(),
            Counter::TemperatureCelsius => "Temperature (C)".into(),
            Counter::ProcessGpuMemoryMib(pid) => format!("GPU memory of pid {pid} (MiB)"),
        }
    }
}

/// One counter reading.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reading {
    /// When, Unix epoch nanoseconds.
    pub at_ns: i64,
    /// Of what.
    pub source: Source,
    /// Which counter.
    pub counter: Counter,
    /// Its value, in the counter's unit.
    pub value: f64,
}

/// Interned frames and stacks.
#[derive(Debug, Default, Clone)]
pub struct Frames {
    frames: Vec<Frame>,
    frame_ids: HashMap<Frame, u32>,
    stacks: Vec<Arc<[u32]>>,
    stack_ids: HashMap<Arc<[u32]>, u32>,
}

impl Frames {
    /// The id of `frame`, interning it (the placeholder once [`MAX_FRAMES`] are known).
    pub fn frame(&mut self, frame: Frame) -> u32 {
        if let Some(&id) = self.frame_ids.get(&frame) {
            return id;
        }
        if self.frames.len() >= MAX_FRAMES {
            return self.placeholder();
        }
        let id = self.frames.len() as u32;
        self.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        id
    }

    /// The id of the stack of `frames`, root first (the placeholder stack once
    /// [`MAX_STACKS`] are known).
    pub fn stack(&mut self, frames: &[u32]) -> u32 {
        let frames = &frames[..frames.len().min(MAX_DEPTH)];
        if let Some(&id) = self.stack_ids.get(frames) {
            return id;
        }
        if self.stacks.len() >= MAX_STACKS {
            let placeholder = [self.placeholder()];
            return match self.stack_ids.get(&placeholder[..]) {
                Some(&id) => id,
                None => self.insert_stack(&placeholder),
            };
        }
        self.insert_stack(frames)
    }

    fn insert_stack(&mut self, frames: &[u32]) -> u32 {
        let id = self.stacks.len() as u32;
        let stack: Arc<[u32]> = frames.into();
        self.stacks.push(stack.clone());
        self.stack_ids.insert(stack, id);
        id
    }

    /// The frame standing for every frame past the limits.
    fn placeholder(&mut self) -> u32 {
        let frame = Frame {
            function: "[more distinct frames than mlprof keeps]".into(),
            file: "".into(),
            short_file: "".into(),
            line: 0,
        };
        if let Some(&id) = self.frame_ids.get(&frame) {
            return id;
        }
        let id = self.frames.len() as u32;
        self.frames.push(frame.clone());
        self.frame_ids.insert(frame, id);
        id
    }

    /// Frame `id`.
    pub fn frame_at(&self, id: u32) -> Option<&Frame> {
        self.frames.get(id as usize)
    }

    /// Stack `id`, root first.
    pub fn stack_at(&self, id: u32) -> &[u32] {
        self.stacks.get(id as usize).map_or(&[], |s| s)
    }
}

/// Samples and readings in time order, bounded.
#[derive(Debug, Default)]
pub struct Store {
    /// The interned frames and stacks.
    pub frames: Frames,
    samples: VecDeque<Sample>,
    native: VecDeque<NativeSample>,
    readings: VecDeque<Reading>,
    /// Thread names by `(pid, tid)`.
    thread_names: HashMap<(u32, u32), String>,
    /// Process names (`comm`) by pid.
    process_names: HashMap<u32, String>,
    /// Samples dropped because [`MAX_SAMPLES`] were held.
    pub samples_dropped: u64,
    /// Samples that could not be read (the process was between states).
    pub failed_samples: u64,
    /// Native samples dropped because [`MAX_NATIVE_SAMPLES`] were held.
    pub native_dropped: u64,
    /// Native samples the kernel could not hand over (its ring buffer was full).
    pub native_lost: u64,
}

/// What a window holds: everything recorded in it, detached from the store.
#[derive(Debug, Default, Clone)]
pub struct Recorded {
    /// Frames and stacks.
    pub frames: Frames,
    /// Samples in time order.
    pub samples: Vec<Sample>,
    /// Native samples, each thread's in time order.
    pub native_samples: Vec<NativeSample>,
    /// Readings in time order.
    pub readings: Vec<Reading>,
    /// Thread names by `(pid, tid)`.
    pub thread_names: HashMap<(u32, u32), String>,
    /// Process names by pid.
    pub process_names: HashMap<u32, String>,
    /// Samples that could not be read, in the whole run so far.
    pub failed_samples: u64,
    /// Samples dropped for memory, in the whole run so far.
    pub samples_dropped: u64,
    /// Native samples dropped for memory, in the whole run so far.
    pub native_dropped: u64,
    /// Native samples the kernel lost, in the whole run so far.
    pub native_lost: u64,
}

impl Recorded {
    /// What the window holds, in words: "1200 samples of 3 threads in 1 process, 40
    /// counter readings".
    pub fn summary(&self) -> String {
        let threads: std::collections::HashSet<(u32, u32)> = self.samples.iter().map(|s| (s.pid, s.tid)).collect();
        let processes: std::collections::HashSet<u32> = self.samples.iter().map(|s| s.pid).collect();
        let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let native = match self.native_samples.len() {
            0 => String::new(),
            n => format!(", {}", plural(n, "native stack sample", "native stack samples")),
        };
        format!(
            "{} of {} in {}{native}, {}",
            plural(self.samples.len(), "Python stack sample", "Python stack samples"),
            plural(threads.len(), "thread", "threads"),
            plural(processes.len(), "process", "processes"),
            plural(self.readings.len(), "counter reading", "counter readings"),
        )
    }
}

impl Store {
    /// Records a sample (dropping the oldest past [`MAX_SAMPLES`]).
    pub fn push_sample(&mut self, sample: Sample) {
        if self.samples.len() >= MAX_SAMPLES {
            self.samples.pop_front();
            self.samples_dropped += 1;
        }
        self.samples.push_back(sample);
    }

    /// Records a native sample (dropping the oldest past [`MAX_NATIVE_SAMPLES`]).
    pub fn push_native(&mut self, sample: NativeSample) {
        if self.native.len() >= MAX_NATIVE_SAMPLES {
            self.native.pop_front();
            self.native_dropped += 1;
        }
        self.native.push_back(sample);
    }

    /// Records a reading (dropping the oldest past [`MAX_READINGS`]).
    pub fn push_reading(&mut self, reading: Reading) {
        if self.readings.len() >= MAX_READINGS {
            self.readings.pop_front();
        }
        self.readings.push_back(reading);
    }

    /// Names thread `(pid, tid)`.
    pub fn name_thread(&mut self, pid: u32, tid: u32, name: &str) {
        if self.thread_names.get(&(pid, tid)).is_none_or(|known| known != name) {
            self.thread_names.insert((pid, tid), name.to_string());
        }
    }

    /// Whether thread `(pid, tid)` has a name.
    pub fn has_thread_name(&self, pid: u32, tid: u32) -> bool {
        self.thread_names.contains_key(&(pid, tid))
    }

    /// Names process `pid`.
    pub fn name_process(&mut self, pid: u32, name: &str) {
        if self.process_names.get(&pid).is_none_or(|known| known != name) {
            self.process_names.insert(pid, name.to_string());
        }
    }

    /// Everything recorded from `from_ns` to `to_ns` (Unix epoch nanoseconds).
    pub fn window(&self, from_ns: i64, to_ns: i64) -> Recorded {
        let in_window = |at: i64| at >= from_ns && at <= to_ns;
        Recorded {
            frames: self.frames.clone(),
            samples: self.samples.iter().filter(|s| in_window(s.at_ns)).copied().collect(),
            native_samples: self.native.iter().filter(|s| in_window(s.at_ns)).copied().collect(),
            readings: self.readings.iter().filter(|r| in_window(r.at_ns)).copied().collect(),
            thread_names: self.thread_names.clone(),
            process_names: self.process_names.clone(),
            failed_samples: self.failed_samples,
            samples_dropped: self.samples_dropped,
            native_dropped: self.native_dropped,
            native_lost: self.native_lost,
        }
    }

    /// Forgets every sample and reading before `before_ns` (native samples arrive a tick
    /// late and threads out of step, so a few older ones may stay a little longer).
    pub fn forget_before(&mut self, before_ns: i64) {
        while self.samples.front().is_some_and(|s| s.at_ns < before_ns) {
            self.samples.pop_front();
        }
        while self.native.front().is_some_and(|s| s.at_ns < before_ns) {
            self.native.pop_front();
        }
        while self.readings.front().is_some_and(|r| r.at_ns < before_ns) {
            self.readings.pop_front();
        }
    }

    /// Samples held.
    pub fn sample_count(&self) -> usize {
        self.samples.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, line: u32) -> Frame {
        Frame { function: function.into(), file: "/x/a.py".into(), short_file: "a.py".into(), line }
    }

    #[test]
    fn frames_and_stacks_are_interned_once() {
        let mut frames = Frames::default();
        let a = frames.frame(frame("a", 1));
        let b = frames.frame(frame("b", 2));
        assert_eq!(frames.frame(frame("a", 1)), a);
        assert_ne!(frames.frame(frame("a", 3)), a, "another line is another frame");
        let ab = frames.stack(&[a, b]);
        assert_eq!(frames.stack(&[a, b]), ab);
        assert_ne!(frames.stack(&[b, a]), ab);
        assert_eq!(frames.stack_at(ab), &[a, b]);
        assert_eq!(frames.frame_at(b).map(Frame::label).as_deref(), Some("b (a.py:2)"));
        assert_eq!(frames.stack_at(999), &[] as &[u32]);
    }

    #[test]
    fn windows_and_forgetting_go_by_time() {
        let mut store = Store::default();
        for at in 0..10 {
            store.push_sample(Sample { at_ns: at * 10, pid: 1, tid: 1, stack: 0, state: ThreadState::Gil });
            store.push_native(NativeSample { at_ns: at * 10, pid: 1, tid: 2, stack: 0 });
            store.push_reading(Reading {
                at_ns: at * 10,
                source: Source::Process(1),
                counter: Counter::CpuPercent,
                value: 1.0,
            });
        }
        let window = store.window(20, 50);
        assert_eq!(window.samples.iter().map(|s| s.at_ns).collect::<Vec<_>>(), [20, 30, 40, 50]);
        assert_eq!(window.readings.len(), 4);
        assert_eq!(window.native_samples.len(), 4);
        assert!(window.summary().contains(", 4 native stack samples, 4 counter readings"), "{}", window.summary());
        store.forget_before(75);
        assert_eq!(store.sample_count(), 2);
        assert_eq!(store.window(0, 1000).native_samples.len(), 2);
    }
}
