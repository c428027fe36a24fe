//! A window of samples and readings as XSpace planes (names in
//! `mlprof_model::names::sampled`): on `/host:python` and `/host:native`, one line per
//! thread whose events are the runs of consecutive samples a frame stayed on the stack
//! for, nested as the frames are (one merging for both, [`Runs`]); on
//! `/host:counters`, one line per process or GPU with each reading as an instant
//! carrying `counter_value`.

use std::collections::BTreeMap;

use mlprof_model::names::sampled as names;
use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue, time::PS_PER_NS};

use super::store::{Frame, Recorded, Source, ThreadState};

/// Plane ids of the planes (any ids unique in the file do).
const PYTHON_PLANE_ID: i64 = 1000;
const COUNTERS_PLANE_ID: i64 = 1001;
const NATIVE_PLANE_ID: i64 = 1002;
/// Samples further apart than this many intervals are not one run: the thread was not
/// seen in between (failed reads, mlprof stalled; for native samples, off the CPU).
const GAP_INTERVALS: i64 = 3;

/// `recorded`'s samples and readings from `start_ns` to `stop_ns` (Unix epoch ns) as
/// the planes of a host named `hostname`; `interval_ns` is the sampling interval.
pub fn to_host(recorded: &Recorded, hostname: &str, start_ns: i64, stop_ns: i64, interval_ns: i64) -> Host {
    let mut host = Host::new(hostname, "", SourceFormat::Xspace);
    host.hostnames.push(hostname.to_string());
    host.profile_start_ns = Some(start_ns);
    host.profile_stop_ns = Some(stop_ns);
    if recorded.samples_dropped > 0 {
        host.warnings.push(format!(
            "{} Python stack samples were dropped: mlprof keeps at most {} at once",
            recorded.samples_dropped,
            super::store::MAX_SAMPLES
        ));
    }
    if recorded.native_dropped > 0 {
        host.warnings.push(format!(
            "{} native stack samples were dropped: mlprof keeps at most {} at once",
            recorded.native_dropped,
            super::store::MAX_NATIVE_SAMPLES
        ));
    }
    if recorded.native_lost > 0 {
        host.warnings.push(format!(
            "the kernel lost {} native stack samples: their ring buffers filled before mlprof read them",
            recorded.native_lost
        ));
    }
    let runs = Runs { recorded, start_ns, stop_ns, interval_ns: interval_ns.max(1) };
    if !recorded.samples.is_empty() {
        let threads = by_thread(recorded.samples.iter().map(|s| (s.pid, s.tid, s.at_ns, s.stack, Some(s.state))));
        host.planes.push(runs.plane(Stacks::Python, threads));
    }
    if !recorded.native_samples.is_empty() {
        let threads = by_thread(recorded.native_samples.iter().map(|s| (s.pid, s.tid, s.at_ns, s.stack, None)));
        host.planes.push(runs.plane(Stacks::Native, threads));
    }
    if !recorded.readings.is_empty() {
        host.planes.push(counters_plane(recorded, start_ns));
    }
    host
}

/// A sample as the run merging sees it.
#[derive(Clone, Copy)]
struct Point {
    at_ns: i64,
    stack: u32,
    /// What the thread was doing (Python samples only).
    state: Option<ThreadState>,
}

/// `(pid, tid, at_ns, stack, state)` samples by thread, each thread's in time order.
fn by_thread(
    samples: impl Iterator<Item = (u32, u32, i64, u32, Option<ThreadState>)>,
) -> BTreeMap<(u32, u32), Vec<Point>> {
    let mut threads: BTreeMap<(u32, u32), Vec<Point>> = BTreeMap::new();
    for (pid, tid, at_ns, stack, state) in samples {
        threads.entry((pid, tid)).or_default().push(Point { at_ns, stack, state });
    }
    for points in threads.values_mut() {
        points.sort_by_key(|p| p.at_ns);
    }
    threads
}

/// Which stack plane.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stacks {
    /// Python frames (`function (file:line)`), with the threads' states.
    Python,
    /// Native frames (`function (module)`), samples only.
    Native,
}

/// One frame's run of samples, open or closed.
#[derive(Clone, Copy)]
struct Run {
    frame: u32,
    /// Its depth in the stack (0: the outermost frame).
    depth: usize,
    start_ns: i64,
    last_ns: i64,
    samples: u64,
    gil: u64,
    native: u64,
    idle: u64,
}

/// Merging consecutive samples into runs, for both stack planes.
struct Runs<'r> {
    recorded: &'r Recorded,
    start_ns: i64,
    stop_ns: i64,
    interval_ns: i64,
}

impl Runs<'_> {
    fn plane(&self, stacks: Stacks, threads: BTreeMap<(u32, u32), Vec<Point>>) -> mlprof_model::Plane {
        let mut plane = match stacks {
            Stacks::Python => PlaneBuilder::new(PYTHON_PLANE_ID, names::PYTHON_PLANE),
            Stacks::Native => PlaneBuilder::new(NATIVE_PLANE_ID, names::NATIVE_PLANE),
        };
        let count_names: &[&str] = match stacks {
            Stacks::Python => {
                &[names::SAMPLES_STAT, names::GIL_SAMPLES_STAT, names::NATIVE_SAMPLES_STAT, names::IDLE_SAMPLES_STAT]
            }
            Stacks::Native => &[names::SAMPLES_STAT],
        };
        let keys: Vec<u32> = count_names.iter().map(|name| plane.stat_key(name)).collect();
        let interval_key = plane.stat_key(names::SAMPLE_INTERVAL_NS_STAT);
        let (failures, failed) = match stacks {
            Stacks::Python => (names::FAILED_SAMPLES_STAT, self.recorded.failed_samples),
            Stacks::Native => (names::LOST_SAMPLES_STAT, self.recorded.native_lost),
        };
        let failed_key = plane.stat_key(failures);
        plane.set_plane_stats(vec![
            (interval_key, StatValue::Uint(self.interval_ns as u64)),
            (failed_key, StatValue::Uint(failed)),
        ]);
        for ((pid, tid), points) in threads {
            let name = self.recorded.thread_names.get(&(pid, tid)).map_or("thread", String::as_str);
            let mut line = Line::new(i64::from(tid), format!("{name} (pid {pid}, tid {tid})"));
            for run in self.of_thread(&points) {
                self.push_run(&mut plane, stacks, &keys, &mut line, &run);
            }
            plane.push_line(line);
        }
        plane.finish()
    }

    /// The runs of one thread's samples (in time order), parents before their children.
    fn of_thread(&self, points: &[Point]) -> Vec<Run> {
        let mut open: Vec<Run> = Vec::new();
        let mut closed: Vec<Run> = Vec::new();
        let mut previous_ns = None;
        for point in points {
            if previous_ns.is_some_and(|p| point.at_ns - p > GAP_INTERVALS * self.interval_ns) {
                self.close(&mut open, 0, None, &mut closed);
            }
            let stack = self.recorded.frames.stack_at(point.stack);
            let kept = open.iter().zip(stack).take_while(|(run, frame)| run.frame == **frame).count();
            self.close(&mut open, kept, Some(point.at_ns), &mut closed);
            for (depth, &frame) in stack.iter().enumerate().skip(kept) {
                let at = point.at_ns;
                open.push(Run { frame, depth, start_ns: at, last_ns: at, samples: 0, gil: 0, native: 0, idle: 0 });
            }
            for run in &mut open {
                run.last_ns = point.at_ns;
                run.samples += 1;
                match point.state {
                    Some(ThreadState::Gil) => run.gil += 1,
                    Some(ThreadState::Native) => run.native += 1,
                    Some(ThreadState::Idle) => run.idle += 1,
                    None => {}
                }
            }
            previous_ns = Some(point.at_ns);
        }
        self.close(&mut open, 0, None, &mut closed);
        // Parents before their children: by start, then longest first, then outermost.
        closed.sort_by_key(|run| (run.start_ns, std::cmp::Reverse(run.last_ns), run.depth));
        closed
    }

    /// Closes the open runs from depth `keep` on: each ends one interval after its last
    /// sample, or at `next_ns` (the sample that ended it) if that is sooner.
    fn close(&self, open: &mut Vec<Run>, keep: usize, next_ns: Option<i64>, closed: &mut Vec<Run>) {
        for mut run in open.drain(keep..).rev() {
            let end = (run.last_ns + self.interval_ns).min(next_ns.unwrap_or(i64::MAX)).min(self.stop_ns);
            // `last_ns` holds the end from here on.
            run.last_ns = end.max(run.start_ns);
            closed.push(run);
        }
    }

    fn push_run(&self, plane: &mut PlaneBuilder, stacks: Stacks, keys: &[u32], line: &mut Line, run: &Run) {
        let Some(frame) = self.recorded.frames.frame_at(run.frame) else { return };
        let label = match stacks {
            Stacks::Python => frame.label(),
            Stacks::Native => native_label(frame),
        };
        let metadata = plane.event_metadata(&label, run.frame, |plane| {
            let function = plane.stat_key(names::FUNCTION_STAT);
            let file = plane.stat_key(names::FILE_STAT);
            let short_file = plane.stat_key(names::SHORT_FILE_STAT);
            let mut stats = Vec::new();
            if stacks == Stacks::Python {
                let line = plane.stat_key(names::LINE_NUMBER_STAT);
                stats.push((line, StatValue::Uint(u64::from(frame.line))));
            }
            for (key, text) in [(function, &frame.function), (file, &frame.file), (short_file, &frame.short_file)] {
                if let Ok(value) = plane.metadata_str(text) {
                    stats.push((key, value));
                }
            }
            stats
        });
        for (&key, value) in keys.iter().zip([run.samples, run.gil, run.native, run.idle]) {
            line.stats.push(key, StatValue::Uint(value));
        }
        let offset = run.start_ns.saturating_sub(self.start_ns).saturating_mul(PS_PER_NS);
        let duration = run.last_ns.saturating_sub(run.start_ns).saturating_mul(PS_PER_NS);
        line.push_event(metadata, offset, duration);
    }
}

/// How a timeline names a native frame: `function (module)`.
fn native_label(frame: &Frame) -> String {
    if frame.short_file.is_empty() || frame.function.starts_with(&*frame.short_file) {
        frame.function.to_string()
    } else {
        format!("{} ({})", frame.function, frame.short_file)
    }
}

fn counters_plane(recorded: &Recorded, start_ns: i64) -> mlprof_model::Plane {
    let mut plane = PlaneBuilder::new(COUNTERS_PLANE_ID, names::COUNTERS_PLANE);
    let value_key = plane.stat_key(names::COUNTER_VALUE_STAT);
    let mut lines: BTreeMap<i64, Line> = BTreeMap::new();
    for reading in &recorded.readings {
        let (line_id, event_name) = match reading.source {
            Source::Process(pid) => (i64::from(pid), reading.counter.name()),
            Source::Thread(pid, tid) => {
                let thread = recorded.thread_names.get(&(pid, tid)).map_or("thread", String::as_str);
                (i64::from(pid), format!("{} of {thread} (tid {tid})", reading.counter.name()))
            }
            Source::Gpu(index) => (names::GPU_COUNTER_LINE_BASE + i64::from(index), reading.counter.name()),
        };
        let line =
            lines.entry(line_id).or_insert_with(|| Line::new(line_id, counter_line_name(recorded, reading.source)));
        let metadata = plane.event_metadata(&event_name, 0, |_| Vec::new());
        line.stats.push(value_key, StatValue::Double(reading.value));
        line.push_event(metadata, reading.at_ns.saturating_sub(start_ns).saturating_mul(PS_PER_NS), 0);
    }
    for (_, line) in lines {
        plane.push_line(line);
    }
    plane.finish()
}

fn counter_line_name(recorded: &Recorded, source: Source) -> String {
    match source {
        Source::Process(pid) | Source::Thread(pid, _) => match recorded.process_names.get(&pid) {
            Some(name) => format!("{name} (pid {pid})"),
            None => format!("pid {pid}"),
        },
        Source::Gpu(index) => format!("GPU {index}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampling::store::{Counter, Frame, Frames, NativeSample, Reading, Sample};

    fn frame(frames: &mut Frames, function: &str) -> u32 {
        frames.frame(Frame { function: function.into(), file: "/w/t.py".into(), short_file: "t.py".into(), line: 1 })
    }

    /// Events of the first line: (name, offset ns, duration ns, samples).
    fn events(host: &Host) -> Vec<(String, i64, i64, u64)> {
        let plane = &host.planes[0];
        let key = plane.find_stat_key(names::SAMPLES_STAT).unwrap();
        plane.lines[0]
            .iter()
            .map(|e| {
                let name = plane.event_metadata[e.metadata_index() as usize].name.clone();
                let samples = match e.own_stat(key) {
                    Some(StatValue::Uint(n)) => n,
                    _ => 0,
                };
                (name, e.offset_ps() / PS_PER_NS, e.duration_ps() / PS_PER_NS, samples)
            })
            .collect()
    }

    #[test]
    fn consecutive_samples_become_nested_runs() {
        let mut recorded = Recorded::default();
        let main = frame(&mut recorded.frames, "main");
        let step = frame(&mut recorded.frames, "step");
        let load = frame(&mut recorded.frames, "load");
        let main_step = recorded.frames.stack(&[main, step]);
        let main_load = recorded.frames.stack(&[main, load]);
        let sample = |at_ns, stack, state| Sample { at_ns, pid: 7, tid: 8, stack, state };
        // main > step for 3 samples, main > load for 2, then the thread is not seen
        // for 10 intervals, then main > step again.
        recorded.samples = vec![
            sample(1000, main_step, ThreadState::Gil),
            sample(1010, main_step, ThreadState::Native),
            sample(1020, main_step, ThreadState::Native),
            sample(1030, main_load, ThreadState::Idle),
            sample(1040, main_load, ThreadState::Idle),
            sample(1140, main_step, ThreadState::Gil),
        ];
        recorded.thread_names.insert((7, 8), "MainThread".into());
        let host = to_host(&recorded, "h", 1000, 2000, 10);
        assert_eq!(host.planes[0].name, names::PYTHON_PLANE);
        assert_eq!(host.planes[0].lines[0].name, "MainThread (pid 7, tid 8)");
        assert_eq!(
            events(&host),
            [
                ("main (t.py:1)".to_string(), 0, 50, 5),
                ("step (t.py:1)".to_string(), 0, 30, 3),
                ("load (t.py:1)".to_string(), 30, 20, 2),
                ("main (t.py:1)".to_string(), 140, 10, 1),
                ("step (t.py:1)".to_string(), 140, 10, 1),
            ]
        );
    }

    #[test]
    fn native_samples_become_runs_on_their_own_plane() {
        let mut recorded = Recorded::default();
        let native = |frames: &mut Frames, function: &str| {
            frames.frame(Frame {
                function: function.into(),
                file: "/usr/lib/libz.so.1".into(),
                short_file: "libz.so.1".into(),
                line: 0,
            })
        };
        let deflate = native(&mut recorded.frames, "deflate");
        let slow = native(&mut recorded.frames, "libz.so.1+0x3c40");
        let stack = recorded.frames.stack(&[deflate, slow]);
        // Out of order across threads and within one (rings are read a tick late).
        recorded.native_samples = vec![
            NativeSample { at_ns: 1010, pid: 7, tid: 9, stack },
            NativeSample { at_ns: 1000, pid: 7, tid: 9, stack },
            NativeSample { at_ns: 1000, pid: 7, tid: 8, stack },
        ];
        recorded.native_lost = 3;
        let host = to_host(&recorded, "h", 1000, 2000, 10);
        assert_eq!(host.planes.len(), 1);
        let plane = &host.planes[0];
        assert_eq!(plane.name, names::NATIVE_PLANE);
        assert_eq!(plane.plane_stat(names::LOST_SAMPLES_STAT), Some(StatValue::Uint(3)));
        assert_eq!(plane.lines.len(), 2);
        assert_eq!(plane.lines[1].name, "thread (pid 7, tid 9)");
        assert_eq!(
            events(&host),
            [("deflate (libz.so.1)".to_string(), 0, 10, 1), ("libz.so.1+0x3c40".to_string(), 0, 10, 1)]
        );
        let runs: Vec<i64> = plane.lines[1].iter().map(|e| e.duration_ps() / PS_PER_NS).collect();
        assert_eq!(runs, [20, 20]);
        assert!(plane.find_stat_key(names::GIL_SAMPLES_STAT).is_none());
        assert!(host.warnings.iter().any(|w| w.contains("lost 3 native stack samples")), "{:?}", host.warnings);
    }

    #[test]
    fn readings_are_counter_instants_per_process() {
        let mut recorded = Recorded::default();
        recorded.process_names.insert(5, "python3".into());
        recorded.thread_names.insert((5, 6), "loader".into());
        recorded.readings = vec![
            Reading { at_ns: 1100, source: Source::Process(5), counter: Counter::ResidentMib, value: 12.5 },
            Reading { at_ns: 1100, source: Source::Thread(5, 6), counter: Counter::CpuPercent, value: 80.0 },
            Reading { at_ns: 1200, source: Source::Gpu(0), counter: Counter::PowerWatts, value: 300.0 },
        ];
        let host = to_host(&recorded, "h", 1000, 2000, 10);
        let plane = &host.planes[0];
        assert_eq!(plane.name, names::COUNTERS_PLANE);
        let names: Vec<_> = plane.lines.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["python3 (pid 5)", "GPU 0"]);
        let event_names: Vec<_> = plane.event_metadata.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(event_names, ["Resident memory (MiB)", "CPU (%) of loader (tid 6)", "Power (W)"]);
        let key = plane.find_stat_key(names::COUNTER_VALUE_STAT).unwrap();
        let first = plane.lines[0].event(0).unwrap();
        assert_eq!(first.own_stat(key), Some(StatValue::Double(12.5)));
        assert_eq!(first.offset_ps(), 100 * PS_PER_NS);
    }
}
