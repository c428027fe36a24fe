//! A window of samples and readings as XSpace planes (names in
//! `mlprof_model::names::sampled`): on `/host:python`, one line per thread whose events
//! are the runs of consecutive samples a frame stayed on the stack for, nested as the
//! frames are; on `/host:counters`, one line per process or GPU with each reading as an
//! instant carrying `counter_value`.

use std::collections::BTreeMap;

use mlprof_model::names::sampled as names;
use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue, time::PS_PER_NS};

use super::store::{Recorded, Sample, Source, ThreadState};

/// Plane ids of the two planes (any ids unique in the file do).
const PYTHON_PLANE_ID: i64 = 1000;
const COUNTERS_PLANE_ID: i64 = 1001;
/// Samples further apart than this many intervals are not one run: the thread was not
/// seen in between (failed reads, mlprof stalled).
const GAP_INTERVALS: i64 = 3;
/// GPU lines' ids start here (process lines use the pid).
const GPU_LINE_BASE: i64 = 1 << 32;

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
    if !recorded.samples.is_empty() {
        host.planes.push(python_plane(recorded, start_ns, stop_ns, interval_ns.max(1)));
    }
    if !recorded.readings.is_empty() {
        host.planes.push(counters_plane(recorded, start_ns));
    }
    host
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

struct PythonPlane<'r> {
    recorded: &'r Recorded,
    plane: PlaneBuilder,
    keys: [u32; 4],
    start_ns: i64,
    stop_ns: i64,
    interval_ns: i64,
}

fn python_plane(recorded: &Recorded, start_ns: i64, stop_ns: i64, interval_ns: i64) -> mlprof_model::Plane {
    let mut plane = PlaneBuilder::new(PYTHON_PLANE_ID, names::PYTHON_PLANE);
    let keys = [
        plane.stat_key(names::SAMPLES_STAT),
        plane.stat_key(names::GIL_SAMPLES_STAT),
        plane.stat_key(names::NATIVE_SAMPLES_STAT),
        plane.stat_key(names::IDLE_SAMPLES_STAT),
    ];
    let interval_key = plane.stat_key(names::SAMPLE_INTERVAL_NS_STAT);
    let failed_key = plane.stat_key(names::FAILED_SAMPLES_STAT);
    plane.set_plane_stats(vec![
        (interval_key, StatValue::Uint(interval_ns as u64)),
        (failed_key, StatValue::Uint(recorded.failed_samples)),
    ]);
    let mut threads: BTreeMap<(u32, u32), Vec<&Sample>> = BTreeMap::new();
    for sample in &recorded.samples {
        threads.entry((sample.pid, sample.tid)).or_default().push(sample);
    }
    let mut builder = PythonPlane { recorded, plane, keys, start_ns, stop_ns, interval_ns };
    for ((pid, tid), samples) in threads {
        let line = builder.thread_line(pid, tid, &samples);
        builder.plane.push_line(line);
    }
    builder.plane.finish()
}

impl PythonPlane<'_> {
    fn thread_line(&mut self, pid: u32, tid: u32, samples: &[&Sample]) -> Line {
        let name = self.recorded.thread_names.get(&(pid, tid)).map_or("thread", String::as_str);
        let mut line = Line::new(i64::from(tid), format!("{name} (pid {pid}, tid {tid})"));
        let mut open: Vec<Run> = Vec::new();
        let mut closed: Vec<Run> = Vec::new();
        let mut previous_ns = None;
        for sample in samples {
            if previous_ns.is_some_and(|p| sample.at_ns - p > GAP_INTERVALS * self.interval_ns) {
                self.close(&mut open, 0, None, &mut closed);
            }
            let stack = self.recorded.frames.stack_at(sample.stack);
            let kept = open.iter().zip(stack).take_while(|(run, frame)| run.frame == **frame).count();
            self.close(&mut open, kept, Some(sample.at_ns), &mut closed);
            for (depth, &frame) in stack.iter().enumerate().skip(kept) {
                let at = sample.at_ns;
                open.push(Run { frame, depth, start_ns: at, last_ns: at, samples: 0, gil: 0, native: 0, idle: 0 });
            }
            for run in &mut open {
                run.last_ns = sample.at_ns;
                run.samples += 1;
                match sample.state {
                    ThreadState::Gil => run.gil += 1,
                    ThreadState::Native => run.native += 1,
                    ThreadState::Idle => run.idle += 1,
                }
            }
            previous_ns = Some(sample.at_ns);
        }
        self.close(&mut open, 0, None, &mut closed);
        // Parents before their children: by start, then longest first, then outermost.
        closed.sort_by_key(|run| (run.start_ns, std::cmp::Reverse(run.last_ns), run.depth));
        for run in closed {
            self.push_run(&mut line, &run);
        }
        line
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

    fn push_run(&mut self, line: &mut Line, run: &Run) {
        let Some(frame) = self.recorded.frames.frame_at(run.frame) else { return };
        let metadata = self.plane.event_metadata(&frame.label(), run.frame, |plane| {
            let function = plane.stat_key(names::FUNCTION_STAT);
            let file = plane.stat_key(names::FILE_STAT);
            let short_file = plane.stat_key(names::SHORT_FILE_STAT);
            let line = plane.stat_key(names::LINE_NUMBER_STAT);
            let mut stats = vec![(line, StatValue::Uint(u64::from(frame.line)))];
            for (key, text) in [(function, &frame.function), (file, &frame.file), (short_file, &frame.short_file)] {
                if let Ok(value) = plane.metadata_str(text) {
                    stats.push((key, value));
                }
            }
            stats
        });
        let [samples, gil, native, idle] = self.keys;
        for (key, value) in [(samples, run.samples), (gil, run.gil), (native, run.native), (idle, run.idle)] {
            line.stats.push(key, StatValue::Uint(value));
        }
        let offset = run.start_ns.saturating_sub(self.start_ns).saturating_mul(PS_PER_NS);
        let duration = run.last_ns.saturating_sub(run.start_ns).saturating_mul(PS_PER_NS);
        line.push_event(metadata, offset, duration);
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
            Source::Gpu(index) => (GPU_LINE_BASE + i64::from(index), reading.counter.name()),
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
    use crate::sampling::store::{Counter, Frame, Frames, Reading};

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
