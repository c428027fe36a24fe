//! The `python` tool: where the job's Python time goes, by line of code, from the
//! stacks `mlprof run` and `mlprof attach` sample (the `/host:python` plane, names in
//! `mlprof_model::names::sampled`).
//!
//! Each function at a line (`file:line:function`) gets its self samples (the frame was
//! the innermost one) and total samples (the frame was anywhere on the stack, once per
//! sample however deep the recursion). As py-spy does by default, only samples of
//! threads that were running count (holding the GIL, or in native code without it);
//! samples of waiting threads show in the threads table.
//!
//! Steps come from the samples' own host if it has any, else from the first other host
//! of the analysis whose steps overlap the samples in wall-clock time (`mlprof run`
//! writes the samples beside the framework's trace of the same window): each step gets
//! its samples and its top lines. A run of samples is spread evenly over the time it
//! covers, so at most one sample per run can land in a neighbouring step.

use std::collections::HashMap;

use mlprof_model::names::sampled as names;
use mlprof_model::time::PS_PER_MS_F64;
use mlprof_model::{Host, Line, Plane, StatValue};
use serde::Serialize;

use crate::report::{Cell, Report, Section, Table};
use crate::steps::HostSteps;

mod native;
pub use native::NativeRow;

/// Lines of code per step shown in the step table.
const TOP_PER_STEP: usize = 3;

/// Where Python time goes, by line of code.
#[derive(Clone, Debug, Default, Serialize)]
pub struct PythonCode {
    /// The sampling interval, ms (of the first host with samples).
    pub sample_interval_ms: f64,
    /// Samples of every thread, running or not.
    pub samples: u64,
    /// Samples of running threads: what the percentages are of.
    pub running_samples: u64,
    /// Every line of code seen running, most self samples first.
    pub lines: Vec<CodeRow>,
    /// Every sampled thread.
    pub threads: Vec<ThreadRow>,
    /// Per step, where steps were found.
    pub steps: Vec<StepRow>,
    /// Native stack samples (`/host:native`, every thread of the job while on a CPU).
    pub native_samples: u64,
    /// The native functions those samples were in, most self samples first.
    pub native: Vec<NativeRow>,
}

/// One function at one line.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct CodeRow {
    /// The function.
    pub function: String,
    /// Its source file.
    pub file: String,
    /// The file as people read it (below `site-packages`).
    pub short_file: String,
    /// The line (0 when unknown).
    pub line: u32,
    /// Running samples with this frame innermost.
    pub self_samples: u64,
    /// Running samples with this frame anywhere on the stack.
    pub total_samples: u64,
    /// Of the self samples, those running without the GIL (native code).
    pub self_native_samples: u64,
}

/// One sampled thread.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ThreadRow {
    /// The host (file) it was sampled in.
    pub host: String,
    /// The thread, as its line names it (`MainThread (pid 1, tid 1)`).
    pub thread: String,
    /// Its samples.
    pub samples: u64,
    /// Samples holding the GIL.
    pub gil_samples: u64,
    /// Samples running without the GIL.
    pub native_samples: u64,
    /// Samples waiting.
    pub idle_samples: u64,
}

/// One step's samples.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct StepRow {
    /// The host whose step this is (the samples' own, or the framework trace's beside them).
    pub host: String,
    /// The step's number.
    pub step_num: i64,
    /// The step's name.
    pub step_name: String,
    /// The step's time, ms.
    pub step_time_ms: f64,
    /// Running samples in the step.
    pub running_samples: u64,
    /// The lines with the most self samples in the step: `(index into lines, samples)`.
    pub top: Vec<(usize, u64)>,
}

/// Why the tool has nothing to show.
pub const NO_SAMPLES: &str = "no sampled Python stacks in this profile: record them with `mlprof run -- CMD` or \
                              `mlprof attach PID`";

/// The Python code of the sampled hosts among `hosts`; `step_hosts` are the hosts
/// whose step databases `steps` are (in the same order).
pub fn analyze(hosts: &[&Host], step_hosts: &[&Host], steps: &[HostSteps]) -> Option<PythonCode> {
    let mut code = Collector::default();
    let mut found = false;
    for host in hosts {
        let Some(plane) = host.plane(names::PYTHON_PLANE) else { continue };
        found = true;
        if code.result.sample_interval_ms == 0.0 {
            code.result.sample_interval_ms = interval_ms(plane);
        }
        let (source, host_steps, shift_ps) = steps_for(host, plane, step_hosts, steps).unwrap_or(("", &[], 0));
        let spans: Vec<(i64, i64)> =
            host_steps.iter().map(|s| (s.begin_ps + shift_ps, s.begin_ps + shift_ps + s.duration_ps)).collect();
        let first_step = code.step_samples.len();
        code.step_samples.extend(spans.iter().map(|_| HashMap::new()));
        code.plane_rows = vec![None; plane.event_metadata.len()];
        for line in &plane.lines {
            code.line(&host.name, plane, line, &spans, first_step);
        }
        for (step, counts) in host_steps.iter().zip(&code.step_samples[first_step..]) {
            code.result.steps.push(StepRow {
                host: source.to_string(),
                step_num: step.step_num,
                step_name: step.step_name.clone(),
                step_time_ms: step.duration_ps as f64 / PS_PER_MS_F64,
                running_samples: counts.values().sum(),
                top: Vec::new(),
            });
        }
    }
    found.then(|| {
        let mut result = code.finish();
        (result.native_samples, result.native) = native::leaves(hosts);
        result
    })
}

/// The steps the samples of `host` are counted in: the name of the host they are from,
/// the steps, and how far (ps) to move them onto `host`'s time.
pub(crate) fn steps_for<'s>(
    host: &Host,
    plane: &Plane,
    step_hosts: &[&'s Host],
    steps: &'s [HostSteps],
) -> Option<(&'s str, &'s [crate::steps::StepInfo], i64)> {
    let own = step_hosts.iter().position(|h| std::ptr::eq(*h, host));
    if let Some(own) = own.and_then(|i| steps.get(i)).filter(|s| !s.steps.is_empty()) {
        return Some((&own.host, &own.steps, 0));
    }
    let start_ns = host.profile_start_ns?;
    let (first, last) = plane.span_ps()?;
    step_hosts.iter().zip(steps).find_map(|(other, other_steps)| {
        let shift_ps = other.profile_start_ns?.checked_sub(start_ns)?.checked_mul(mlprof_model::time::PS_PER_NS)?;
        let overlaps = other_steps
            .steps
            .iter()
            .any(|s| s.begin_ps + shift_ps < last && s.begin_ps + shift_ps + s.duration_ps > first);
        overlaps.then_some((other_steps.host.as_str(), &other_steps.steps[..], shift_ps))
    })
}

fn interval_ms(plane: &Plane) -> f64 {
    match plane.plane_stat(names::SAMPLE_INTERVAL_NS_STAT) {
        Some(StatValue::Uint(ns)) => ns as f64 / 1e6,
        Some(StatValue::Int(ns)) => ns as f64 / 1e6,
        _ => 0.0,
    }
}

/// A frame on the walk down one line: its row, end, running samples and those of its
/// children.
struct Open {
    row: usize,
    start_ps: i64,
    end_ps: i64,
    running: u64,
    native: u64,
    children_running: u64,
    children_native: u64,
}

impl Open {
    /// Whether a run from `start_ps` to `end_ps` is inside this one.
    fn contains(&self, start_ps: i64, end_ps: i64) -> bool {
        nests((self.start_ps, self.end_ps), start_ps, end_ps)
    }
}

/// Whether a run from `start_ps` to `end_ps` (ps) is inside the run `outer` spans (runs
/// nest as frames: a child starts at or after its parent and ends no later).
pub(crate) fn nests((outer_start, outer_end): (i64, i64), start_ps: i64, end_ps: i64) -> bool {
    start_ps >= outer_start && end_ps <= outer_end && (start_ps < outer_end || start_ps == outer_start)
}

/// The times (ps) at which `samples` samples of a run from `start_ps` to `end_ps` are
/// counted for the steps: spread evenly over the run, each in the middle of its share.
pub(crate) fn spread(start_ps: i64, end_ps: i64, samples: u64) -> impl Iterator<Item = i64> {
    let length = (end_ps - start_ps).max(0) as f64;
    (0..samples).map(move |i| start_ps + (length * (i as f64 + 0.5) / samples as f64) as i64)
}

/// The frame an event's metadata names.
pub(crate) struct Frame {
    /// The function.
    pub(crate) function: String,
    /// Its source file.
    pub(crate) file: String,
    /// The file as people read it.
    pub(crate) short_file: String,
    /// The line (0 when unknown).
    pub(crate) line: u32,
}

/// The frame `metadata` (of an event of `plane`) names: its stats, or its name.
pub(crate) fn frame(plane: &Plane, metadata: &mlprof_model::EventMetadata) -> Frame {
    let text = |name: &str| {
        let key = plane.find_stat_key(name)?;
        let value = plane.metadata_stat(metadata, key)?;
        plane.str_value(&plane.metadata_stats, value).map(str::to_string)
    };
    let function = text(names::FUNCTION_STAT).unwrap_or_else(|| metadata.name.clone());
    let file = text(names::FILE_STAT).unwrap_or_default();
    let short_file = text(names::SHORT_FILE_STAT).unwrap_or_else(|| file.clone());
    let line = match plane.find_stat_key(names::LINE_NUMBER_STAT).and_then(|k| plane.metadata_stat(metadata, k)) {
        Some(StatValue::Uint(n)) => u32::try_from(n).unwrap_or(0),
        Some(StatValue::Int(n)) => u32::try_from(n).unwrap_or(0),
        _ => 0,
    };
    Frame { function, file, short_file, line }
}

#[derive(Default)]
struct Collector {
    result: PythonCode,
    rows: HashMap<(String, String, u32), usize>,
    /// The row of each event metadata of the plane being read, once looked up (a frame's
    /// strings are read and compared once per plane, not once per event).
    plane_rows: Vec<Option<usize>>,
    /// Per step (all hosts' steps in order), self samples by row.
    step_samples: Vec<HashMap<usize, u64>>,
}

/// The keys of the four sample counts of an event of `plane` (see [`counts`]).
pub(crate) fn sample_keys(plane: &Plane) -> [Option<u32>; 4] {
    [
        plane.find_stat_key(names::SAMPLES_STAT),
        plane.find_stat_key(names::GIL_SAMPLES_STAT),
        plane.find_stat_key(names::NATIVE_SAMPLES_STAT),
        plane.find_stat_key(names::IDLE_SAMPLES_STAT),
    ]
}

/// The four sample counts of an event: all, GIL, native, idle (`keys` from [`sample_keys`]).
pub(crate) fn counts(plane: &Plane, keys: &[Option<u32>; 4], event: &mlprof_model::Event<'_>) -> [u64; 4] {
    keys.map(|key| match key.and_then(|k| event.stat(plane, k)) {
        Some(StatValue::Uint(n)) => n,
        Some(StatValue::Int(n)) => u64::try_from(n).unwrap_or(0),
        _ => 0,
    })
}

impl Collector {
    fn line(&mut self, host: &str, plane: &Plane, line: &Line, spans: &[(i64, i64)], first_step: usize) {
        let keys = sample_keys(plane);
        let mut thread =
            ThreadRow { host: host.to_string(), thread: line.shown_name().to_string(), ..ThreadRow::default() };
        let mut stack: Vec<Open> = Vec::new();
        for event in line.iter() {
            let (start_ps, end_ps) = (event.start_ps(), event.end_ps());
            while stack.last().is_some_and(|top| !top.contains(start_ps, end_ps)) {
                if let Some(done) = stack.pop() {
                    self.close(done, spans, first_step);
                }
            }
            let [samples, gil, native, idle] = counts(plane, &keys, &event);
            let running = samples.saturating_sub(idle);
            let Some(row) = self.row(plane, &event) else { continue };
            match stack.last_mut() {
                Some(parent) => {
                    parent.children_running += running;
                    parent.children_native += native;
                }
                None => {
                    thread.samples += samples;
                    thread.gil_samples += gil;
                    thread.native_samples += native;
                    thread.idle_samples += idle;
                }
            }
            // Recursion: a frame already on the stack has these samples in its total.
            if !stack.iter().any(|open| open.row == row) {
                self.result.lines[row].total_samples += running;
            }
            stack.push(Open { row, start_ps, end_ps, running, native, children_running: 0, children_native: 0 });
        }
        while let Some(done) = stack.pop() {
            self.close(done, spans, first_step);
        }
        self.result.samples += thread.samples;
        self.result.running_samples += thread.samples.saturating_sub(thread.idle_samples);
        if thread.samples > 0 {
            self.result.threads.push(thread);
        }
    }

    /// The row of an event's frame, created on first sight.
    fn row(&mut self, plane: &Plane, event: &mlprof_model::Event<'_>) -> Option<usize> {
        let cached = self.plane_rows.get(event.metadata_index() as usize).copied().flatten();
        if cached.is_some() {
            return cached;
        }
        let Frame { function, file, short_file, line } = frame(plane, plane.metadata_of(event)?);
        let key = (function, file, line);
        let row = match self.rows.get(&key) {
            Some(&row) => row,
            None => {
                let row = self.result.lines.len();
                let (function, file, line) = key.clone();
                self.result.lines.push(CodeRow { function, file, short_file, line, ..CodeRow::default() });
                self.rows.insert(key, row);
                row
            }
        };
        if let Some(slot) = self.plane_rows.get_mut(event.metadata_index() as usize) {
            *slot = Some(row);
        }
        Some(row)
    }

    /// A frame's run is over: its self samples are what its children did not take,
    /// spread evenly over its time for the steps.
    fn close(&mut self, done: Open, spans: &[(i64, i64)], first_step: usize) {
        let own = done.running.saturating_sub(done.children_running);
        let row = &mut self.result.lines[done.row];
        row.self_samples += own;
        row.self_native_samples += done.native.saturating_sub(done.children_native).min(own);
        if own == 0 || spans.is_empty() {
            return;
        }
        for at in spread(done.start_ps, done.end_ps, own) {
            let Some(step) = spans.iter().position(|&(begin, end)| at >= begin && at < end) else { continue };
            if let Some(counts) = self.step_samples.get_mut(first_step + step) {
                *counts.entry(done.row).or_default() += 1;
            }
        }
    }

    fn finish(self) -> PythonCode {
        let Collector { mut result, step_samples, .. } = self;
        for (step, counts) in result.steps.iter_mut().zip(&step_samples) {
            let mut top: Vec<(usize, u64)> = counts.iter().map(|(&row, &n)| (row, n)).collect();
            top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
            top.truncate(TOP_PER_STEP);
            step.top = top;
        }
        // Most self samples first; rows keep their indices for the steps' `top`.
        let mut order: Vec<usize> = (0..result.lines.len()).collect();
        let lines = &result.lines;
        order.sort_by(|&a, &b| {
            let (x, y) = (&lines[a], &lines[b]);
            y.self_samples
                .cmp(&x.self_samples)
                .then(y.total_samples.cmp(&x.total_samples))
                .then_with(|| (&x.file, x.line, &x.function).cmp(&(&y.file, y.line, &y.function)))
        });
        let mut new_index = vec![0; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        result.lines = order.iter().map(|&old| lines[old].clone()).collect();
        for step in &mut result.steps {
            for (row, _) in &mut step.top {
                *row = new_index[*row];
            }
        }
        result.threads.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.thread.cmp(&b.thread)));
        result
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 * 100.0 / whole as f64 }
}

impl CodeRow {
    /// `short_file:line`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.short_file, self.line)
    }
}

impl PythonCode {
    /// The lines of code, the threads and the steps for people.
    pub fn report(&self) -> Report {
        let running = self.running_samples;
        let mut table = Table::new([
            "Function",
            "File:line",
            "Self samples",
            "Self (%)",
            "Total samples",
            "Total (%)",
            "Self in native code (%)",
        ]);
        for row in self.lines.iter().filter(|r| r.total_samples > 0) {
            table.push(vec![
                Cell::text(&row.function),
                Cell::text(row.location()),
                Cell::Int(row.self_samples as i64),
                Cell::num(percent(row.self_samples, running), 1),
                Cell::Int(row.total_samples as i64),
                Cell::num(percent(row.total_samples, running), 1),
                Cell::num(percent(row.self_native_samples, row.self_samples), 1),
            ]);
        }
        let mut code = Section::new("Python code by self samples").note(format!(
            "{} samples of {} threads, one every {}; {} found the thread running (holding the GIL, or in native \
             code without it) and are what the percentages are of. Waiting threads' samples are left out, as py-spy \
             leaves them out; the threads table shows them.",
            self.samples,
            self.threads.len(),
            mlprof_model::human::duration_ms(self.sample_interval_ms),
            running
        ));
        if let Some(top) = self.lines.first().filter(|r| r.self_samples > 0) {
            code = code.note(format!(
                "Most time: {} at {} ({:.1}% of running samples, {:.1}% with its callees).",
                top.function,
                top.location(),
                percent(top.self_samples, running),
                percent(top.total_samples, running)
            ));
        }
        let mut sections = vec![code.with_table(table).main(), self.thread_section()];
        sections.extend(self.native_section());
        if !self.steps.is_empty() {
            sections.push(self.step_section());
        }
        Report { tool: "python".into(), sections }
    }

    fn thread_section(&self) -> Section {
        let mut table =
            Table::new(["Host", "Thread", "Samples", "Holding the GIL (%)", "Native code (%)", "Waiting (%)"]);
        for t in &self.threads {
            table.push(vec![
                Cell::text(&t.host),
                Cell::text(&t.thread),
                Cell::Int(t.samples as i64),
                Cell::num(percent(t.gil_samples, t.samples), 1),
                Cell::num(percent(t.native_samples, t.samples), 1),
                Cell::num(percent(t.idle_samples, t.samples), 1),
            ]);
        }
        Section::new("Threads").with_table(table)
    }

    fn step_section(&self) -> Section {
        let mut columns =
            vec!["Host".to_string(), "Step".into(), "Name".into(), "Step time (ms)".into(), "Running samples".into()];
        columns.extend((1..=TOP_PER_STEP).map(|n| format!("Top {n} (% of the step's samples)")));
        let mut table = Table::new(columns);
        for step in &self.steps {
            let mut row = vec![
                Cell::text(&step.host),
                Cell::Int(step.step_num),
                Cell::text(&step.step_name),
                Cell::num(step.step_time_ms, 3),
                Cell::Int(step.running_samples as i64),
            ];
            for n in 0..TOP_PER_STEP {
                row.push(Cell::text(step.top.get(n).map_or(String::new(), |&(index, samples)| {
                    let line = &self.lines[index];
                    format!("{} {} ({:.1}%)", line.function, line.location(), percent(samples, step.running_samples))
                })));
            }
            table.push(row);
        }
        Section::new("Per step")
            .note("Running samples in each step of the host named in the first column (its steps, moved onto the samples' clock), with the lines that had the most self samples in it.")
            .with_table(table)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlprof_model::{PlaneBuilder, SourceFormat};

    /// A thread line from `(function, line, start ms, end ms, samples, idle)` runs, parents
    /// before children.
    fn host(runs: &[(&str, u32, i64, i64, u64, u64)]) -> Host {
        let mut plane = PlaneBuilder::new(1, names::PYTHON_PLANE);
        let keys = [names::SAMPLES_STAT, names::GIL_SAMPLES_STAT, names::NATIVE_SAMPLES_STAT, names::IDLE_SAMPLES_STAT]
            .map(|name| plane.stat_key(name));
        let interval = plane.stat_key(names::SAMPLE_INTERVAL_NS_STAT);
        plane.set_plane_stats(vec![(interval, StatValue::Uint(10_000_000))]);
        let mut line = Line::new(8, "MainThread (pid 7, tid 8)");
        for &(function, number, start, end, samples, idle) in runs {
            let metadata = plane.event_metadata(&format!("{function}:{number}"), 0, |p| {
                let f = p.stat_key(names::FUNCTION_STAT);
                let file = p.stat_key(names::FILE_STAT);
                let l = p.stat_key(names::LINE_NUMBER_STAT);
                let function = p.metadata_str(function).unwrap();
                let path = p.metadata_str("/w/train.py").unwrap();
                vec![(f, function), (file, path), (l, StatValue::Uint(u64::from(number)))]
            });
            for (key, value) in keys.iter().zip([samples, samples - idle, 0, idle]) {
                line.stats.push(*key, StatValue::Uint(value));
            }
            line.push_event(metadata, start * 1_000_000_000, (end - start) * 1_000_000_000);
        }
        plane.push_line(line);
        let mut host = Host::new("h", "", SourceFormat::Xspace);
        host.planes.push(plane.finish());
        host
    }

    fn row<'a>(code: &'a PythonCode, function: &str) -> &'a CodeRow {
        code.lines.iter().find(|r| r.function == function).unwrap()
    }

    #[test]
    fn self_and_total_samples_with_recursion_and_idle_samples() {
        // main (10 samples, 2 idle) > walk (6) > walk (4, recursive) > leaf (4); then
        // main > wait (2, both idle).
        let h = host(&[
            ("main", 1, 0, 100, 10, 2),
            ("walk", 5, 0, 60, 6, 0),
            ("walk", 5, 0, 40, 4, 0),
            ("leaf", 9, 0, 30, 4, 0),
            ("wait", 3, 60, 100, 2, 2),
        ]);
        let code = analyze(&[&h], &[], &[]).unwrap();
        assert_eq!(code.samples, 10);
        assert_eq!(code.running_samples, 8);
        assert_eq!(code.sample_interval_ms, 10.0);
        assert_eq!(code.lines[0].function, "leaf", "most self samples first");
        assert_eq!((row(&code, "leaf").self_samples, row(&code, "leaf").total_samples), (4, 4));
        // walk's own samples: 6 - 4 + 4 - 4 = 2; its total counts the recursion once.
        assert_eq!((row(&code, "walk").self_samples, row(&code, "walk").total_samples), (2, 6));
        // main: 8 running, 6 in walk, 0 in wait (idle).
        assert_eq!((row(&code, "main").self_samples, row(&code, "main").total_samples), (2, 8));
        assert_eq!(row(&code, "wait").total_samples, 0);
        assert_eq!(code.threads[0].idle_samples, 2);
        let report = code.report();
        assert!(report.sections[0].notes.iter().any(|n| n.contains("leaf at /w/train.py:9")), "{report:?}");
    }

    #[test]
    fn self_samples_are_spread_over_the_steps_their_runs_cover() {
        // main > step_fn covers two 50 ms steps with 10 samples: 5 in each.
        let h = host(&[("main", 1, 0, 100, 10, 0), ("step_fn", 4, 0, 100, 10, 0)]);
        let step = |num: i64, begin_ms: i64| crate::steps::StepInfo {
            step_num: num,
            step_name: num.to_string(),
            profile_step: num,
            begin_ps: begin_ms * 1_000_000_000,
            duration_ps: 50 * 1_000_000_000,
            type_ps: Default::default(),
        };
        let steps = HostSteps { host: "h".into(), steps: vec![step(1, 0), step(2, 50)], ..HostSteps::default() };
        let code = analyze(&[&h], &[&h], &[steps]).unwrap();
        assert_eq!(code.steps.len(), 2);
        for step in &code.steps {
            assert_eq!(step.running_samples, 5);
            assert_eq!(code.lines[step.top[0].0].function, "step_fn");
        }
    }

    #[test]
    fn no_python_plane_is_none() {
        let h = Host::new("h", "", SourceFormat::Xspace);
        assert!(analyze(&[&h], &[], &[]).is_none());
    }

    #[test]
    fn steps_of_another_host_are_moved_onto_the_samples_clock() {
        // The samples start 50 ms after the framework's trace: its steps at 50..100 ms
        // and 100..150 ms are the samples' 0..50 ms and 50..100 ms.
        let mut samples = host(&[("main", 1, 0, 100, 10, 0), ("step_fn", 4, 0, 100, 10, 0)]);
        samples.profile_start_ns = Some(1_000_050_000_000);
        let mut trace = Host::new("trace", "", SourceFormat::Kineto);
        trace.profile_start_ns = Some(1_000_000_000_000);
        let step = |num: i64, begin_ms: i64| crate::steps::StepInfo {
            step_num: num,
            step_name: format!("OptimizerStep#{num}"),
            profile_step: num,
            begin_ps: begin_ms * 1_000_000_000,
            duration_ps: 50 * 1_000_000_000,
            type_ps: Default::default(),
        };
        let steps = vec![
            HostSteps::default(),
            HostSteps {
                host: "trace".into(),
                steps: vec![step(1, 0), step(2, 50), step(3, 100)],
                ..HostSteps::default()
            },
        ];
        let code = analyze(&[&samples, &trace], &[&samples, &trace], &steps).unwrap();
        let counted: Vec<(i64, u64)> = code.steps.iter().map(|s| (s.step_num, s.running_samples)).collect();
        assert_eq!(counted, [(1, 0), (2, 5), (3, 5)]);
        assert!(code.steps.iter().all(|s| s.host == "trace"));
    }
}
