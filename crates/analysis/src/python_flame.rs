//! The `python` tool's flame graph: the sampled Python stacks (the `/host:python`
//! planes `mlprof run` and `mlprof attach` write) merged into one call tree, each node a
//! frame (function, file, line) with its self and total samples, for one thread or all,
//! over the whole recording, one step or a time range.
//!
//! The one design decision to know: [`FlameIndex::of`] walks the planes once into a
//! merged call tree of every thread and a list of *self runs* (a run of samples in
//! which a frame stayed on the stack, less what its callees took, as the `python` tool
//! counts self samples); [`FlameIndex::flame`] then adds up the self runs a filter keeps,
//! without the model, so a server keeps the index and answers each thread, step or
//! waiting-threads choice from it. A run's self samples are spread evenly over its time
//! exactly as the `python` tool's per-step table spreads them (`python_code::spread`),
//! so a step's flame graph counts the samples that table counts. Counted samples are the running ones (all less idle ones), as py-spy and the
//! `python` tool count; waiting threads' samples are counted on request. The answer is
//! bounded: frames below 0.1 % of the root's total are merged into one `(other)` child
//! per parent, and nodes deeper than [`MAX_DEPTH`] are not listed (their samples stay
//! in their ancestors' totals).

use std::collections::{BTreeMap, HashMap};

use mlprof_model::Host;
use mlprof_model::names::sampled as names;
use serde::Serialize;

use crate::python_code::{self, counts, frame, nests, sample_keys, spread, steps_for};
use crate::steps::HostSteps;
use crate::tool::Analysis;

/// Nodes deeper than this (the root is at depth 0) are not listed.
pub const MAX_DEPTH: usize = 128;

/// A frame whose total is below the root's total divided by this (0.1 %) is merged
/// into its parent's `(other)` child.
const OTHER_DIVISOR: u64 = 1000;

/// The name of the node that stands for the frames too small to list.
pub const OTHER: &str = "(other)";

/// The sampled stacks of an analysis, ready to be drawn for any thread and step.
#[derive(Clone, Debug, Default)]
pub struct FlameIndex {
    /// Whether some host had a `/host:python` plane.
    found: bool,
    frames: Vec<FrameName>,
    /// The merged call tree of every thread: node 0 is the root, a child comes after
    /// its parent.
    nodes: Vec<TreeNode>,
    runs: Vec<SelfRun>,
    /// Every line walked, in walk order (what [`SelfRun::thread`] indexes).
    threads: Vec<FlameThread>,
    /// Per sampled host (the threads' `host_index`), its steps on the samples' clock.
    host_steps: Vec<Vec<StepSpan>>,
}

/// A frame as the flame graph names it (two files with one short name stay apart).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FrameName {
    function: String,
    file: String,
    short_file: String,
    line: u32,
}

#[derive(Clone, Copy, Debug)]
struct TreeNode {
    parent: u32,
    frame: u32,
}

/// What one run of one frame counts as the node's own: running samples and all samples.
#[derive(Clone, Copy, Debug)]
struct SelfRun {
    thread: u32,
    node: u32,
    start_ps: i64,
    end_ps: i64,
    running: u64,
    all: u64,
}

#[derive(Clone, Debug)]
struct StepSpan {
    num: i64,
    name: String,
    begin_ps: i64,
    end_ps: i64,
}

/// One sampled thread.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct FlameThread {
    /// The host (file) it was sampled in.
    pub host: String,
    /// The thread as its line names it (`MainThread (pid 1, tid 1)`).
    pub name: String,
    /// Its OS thread id.
    pub tid: i64,
    /// Its samples, running or not.
    pub samples: u64,
    /// Its running samples (holding the GIL, or in native code).
    pub running_samples: u64,
    #[serde(skip)]
    host_index: usize,
}

/// A step the flame graph can be filtered by.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FlameStep {
    /// The step's number.
    pub num: i64,
    /// The step's name.
    pub name: String,
}

/// Which samples a flame graph counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct FlameOptions {
    /// One thread: its line's name, or its OS thread id (every thread with that id);
    /// `None` for all threads.
    pub thread: Option<String>,
    /// The time the samples are counted in.
    pub window: Window,
    /// Count waiting threads' samples too.
    pub include_idle: bool,
}

/// The time a flame graph counts samples in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Window {
    /// The whole recording.
    #[default]
    All,
    /// The step with this number (on each host, its own step or the steps of the trace
    /// beside it, as the `python` tool finds them).
    Step(i64),
    /// From `begin_ps` (inclusive) to `end_ps` (exclusive), ps from the samples' profile start.
    Range {
        /// Start, ps.
        begin_ps: i64,
        /// End, ps.
        end_ps: i64,
    },
}

/// Why a flame graph cannot be drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FlameError {
    /// The hosts hold no sampled Python stacks.
    NoSamples,
    /// No thread has this name or id.
    UnknownThread(String),
    /// No host has a step with this number.
    UnknownStep(i64),
    /// A time range that ends before it starts.
    EmptyRange,
}

impl std::fmt::Display for FlameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlameError::NoSamples => f.write_str(python_code::NO_SAMPLES),
            FlameError::UnknownThread(thread) => {
                write!(f, "no sampled thread named {thread:?} or with that tid (the answer's `threads` lists them)")
            }
            FlameError::UnknownStep(step) => write!(f, "no step {step} among the steps the samples are counted in"),
            FlameError::EmptyRange => f.write_str("the time range must end after it starts"),
        }
    }
}

impl std::error::Error for FlameError {}

/// A flame graph.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Flame {
    /// Samples counted: the root's total (running samples only, unless waiting ones
    /// were asked for).
    pub total: u64,
    /// Every thread with samples, most first, whatever the filter (what a thread
    /// selector lists).
    pub threads: Vec<FlameThread>,
    /// Every step the samples can be filtered by, by number.
    pub steps: Vec<FlameStep>,
    /// The call tree; its root stands for the threads counted.
    pub root: FlameNode,
}

/// One frame of the call tree.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct FlameNode {
    /// The function (`all` for the root, [`OTHER`] for merged small frames).
    pub name: String,
    /// The file as people read it ("" for the root and `(other)`).
    pub file: String,
    /// The line (0 when unknown).
    pub line: u32,
    /// Samples with this frame innermost.
    #[serde(rename = "self")]
    pub self_samples: u64,
    /// Samples with this frame on the stack.
    pub total: u64,
    /// How many frames an `(other)` node stands for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merged: Option<u64>,
    /// Callees, most samples first, `(other)` last.
    pub children: Vec<FlameNode>,
}

impl FlameIndex {
    /// The index of an analysis's sampled hosts, with the steps the `python` tool
    /// counts their samples in.
    pub fn of(analysis: &Analysis<'_>) -> FlameIndex {
        // Grouped first, as `Analysis::run` does, before the step databases.
        analysis.groups();
        FlameIndex::build(analysis.all_hosts(), analysis.hosts(), analysis.host_steps())
    }

    /// The index of the sampled hosts among `hosts`; `step_hosts` are the hosts whose
    /// step databases `steps` are (in the same order).
    pub fn build(hosts: &[&Host], step_hosts: &[&Host], steps: &[HostSteps]) -> FlameIndex {
        let mut index = FlameIndex { nodes: vec![TreeNode { parent: 0, frame: u32::MAX }], ..FlameIndex::default() };
        let mut builder = Builder { frames: HashMap::new(), children: HashMap::new() };
        for host in hosts {
            let Some(plane) = host.plane(names::PYTHON_PLANE) else { continue };
            index.found = true;
            let host_index = index.host_steps.len();
            let spans = steps_for(host, plane, step_hosts, steps).map_or_else(Vec::new, |(_, host_steps, shift_ps)| {
                let span = |s: &crate::steps::StepInfo| StepSpan {
                    num: s.step_num,
                    name: s.step_name.clone(),
                    begin_ps: s.begin_ps.saturating_add(shift_ps),
                    end_ps: s.begin_ps.saturating_add(shift_ps).saturating_add(s.duration_ps),
                };
                host_steps.iter().map(span).collect()
            });
            index.host_steps.push(spans);
            let mut frame_of_metadata = vec![None; plane.event_metadata.len()];
            for line in &plane.lines {
                let thread = FlameThread {
                    host: host.name.clone(),
                    name: line.shown_name().to_string(),
                    tid: line.id,
                    host_index,
                    ..FlameThread::default()
                };
                builder.line(&mut index, plane, line, thread, &mut frame_of_metadata);
            }
        }
        index
    }

    /// Every thread with samples, most samples first.
    pub fn threads(&self) -> Vec<FlameThread> {
        let mut threads: Vec<FlameThread> = self.threads.iter().filter(|t| t.samples > 0).cloned().collect();
        threads.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.name.cmp(&b.name)));
        threads
    }

    /// Every step the samples can be filtered by, by number, each once.
    pub fn steps(&self) -> Vec<FlameStep> {
        let mut steps: BTreeMap<i64, &str> = BTreeMap::new();
        for span in self.host_steps.iter().flatten() {
            steps.entry(span.num).or_insert(&span.name);
        }
        steps.into_iter().map(|(num, name)| FlameStep { num, name: name.to_string() }).collect()
    }

    /// The flame graph of the samples `options` keep.
    pub fn flame(&self, options: &FlameOptions) -> Result<Flame, FlameError> {
        if !self.found {
            return Err(FlameError::NoSamples);
        }
        let selected = self.selected_threads(options.thread.as_deref())?;
        let windows = self.windows(options.window)?;
        let mut self_samples = vec![0u64; self.nodes.len()];
        for run in &self.runs {
            let Some(&(keep, host)) = selected.get(run.thread as usize) else { continue };
            if !keep {
                continue;
            }
            let samples = if options.include_idle { run.all } else { run.running };
            let counted = match windows.get(host).copied().flatten() {
                Some(window) => in_window(run, samples, window),
                None if options.window == Window::All => samples,
                None => 0,
            };
            if let Some(slot) = self_samples.get_mut(run.node as usize) {
                *slot = slot.saturating_add(counted);
            }
        }
        let mut totals = self_samples.clone();
        for i in (1..self.nodes.len()).rev() {
            let parent = self.nodes[i].parent as usize;
            totals[parent] = totals[parent].saturating_add(totals[i]);
        }
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); self.nodes.len()];
        for (i, node) in self.nodes.iter().enumerate().skip(1) {
            if totals[i] > 0 {
                children[node.parent as usize].push(i as u32);
            }
        }
        let tree = Tree { index: self, self_samples: &self_samples, totals: &totals, children: &children };
        let mut root = tree.node(0, 0, totals[0]);
        // The thread's own name when one thread is shown, whatever named it.
        let mut kept = self.threads.iter().zip(&selected).filter(|(_, (keep, _))| *keep);
        root.name = match (&options.thread, kept.next(), kept.next()) {
            (None, ..) => "all".into(),
            (Some(_), Some((only, _)), None) => only.name.clone(),
            (Some(thread), ..) => thread.clone(),
        };
        Ok(Flame { total: totals[0], threads: self.threads(), steps: self.steps(), root })
    }

    /// Per thread (in walk order): whether `thread` keeps it, and its host.
    fn selected_threads(&self, thread: Option<&str>) -> Result<Vec<(bool, usize)>, FlameError> {
        let tid: Option<i64> = thread.and_then(|t| t.trim().parse().ok());
        let selected: Vec<(bool, usize)> = self
            .threads
            .iter()
            .map(|t| (thread.is_none_or(|name| t.name == name || tid == Some(t.tid)), t.host_index))
            .collect();
        match thread {
            Some(name) if !selected.iter().any(|&(keep, _)| keep) => Err(FlameError::UnknownThread(name.to_string())),
            _ => Ok(selected),
        }
    }

    /// Per sampled host, the time its samples are counted in (`None`: all of it for
    /// [`Window::All`], none of it for a step the host does not have).
    fn windows(&self, window: Window) -> Result<Vec<Option<(i64, i64)>>, FlameError> {
        match window {
            Window::All => Ok(vec![None; self.host_steps.len()]),
            Window::Range { begin_ps, end_ps } if end_ps <= begin_ps => Err(FlameError::EmptyRange),
            Window::Range { begin_ps, end_ps } => Ok(vec![Some((begin_ps, end_ps)); self.host_steps.len()]),
            Window::Step(num) => {
                let spans: Vec<Option<(i64, i64)>> = self
                    .host_steps
                    .iter()
                    .map(|steps| steps.iter().find(|s| s.num == num).map(|s| (s.begin_ps, s.end_ps)))
                    .collect();
                if spans.iter().all(Option::is_none) {
                    return Err(FlameError::UnknownStep(num));
                }
                Ok(spans)
            }
        }
    }
}

/// How many of a run's `samples` self samples land in `[begin, end)`, spread as the
/// `python` tool spreads them over the steps.
fn in_window(run: &SelfRun, samples: u64, (begin, end): (i64, i64)) -> u64 {
    if run.start_ps >= begin && run.end_ps <= end && run.start_ps < end {
        samples
    } else if run.end_ps < begin || run.start_ps >= end {
        0
    } else {
        spread(run.start_ps, run.end_ps, samples).filter(|&at| at >= begin && at < end).count() as u64
    }
}

/// Interns frames and tree nodes while the lines are walked.
struct Builder {
    frames: HashMap<FrameName, u32>,
    children: HashMap<(u32, u32), u32>,
}

/// A run on the walk down one line.
struct OpenRun {
    node: u32,
    start_ps: i64,
    end_ps: i64,
    running: u64,
    all: u64,
    children_running: u64,
    children_all: u64,
}

impl Builder {
    fn line(
        &mut self,
        index: &mut FlameIndex,
        plane: &mlprof_model::Plane,
        line: &mlprof_model::Line,
        mut thread: FlameThread,
        frame_of_metadata: &mut [Option<u32>],
    ) {
        let keys = sample_keys(plane);
        let thread_id = index.threads.len() as u32;
        let mut stack: Vec<OpenRun> = Vec::new();
        for event in line.iter() {
            let (start_ps, end_ps) = (event.start_ps(), event.end_ps());
            while stack.last().is_some_and(|top| !nests((top.start_ps, top.end_ps), start_ps, end_ps)) {
                if let Some(done) = stack.pop() {
                    close(index, thread_id, done);
                }
            }
            let Some(metadata) = plane.metadata_of(&event) else { continue };
            let [samples, _, _, idle] = counts(plane, &keys, &event);
            let running = samples.saturating_sub(idle);
            let slot = event.metadata_index() as usize;
            let frame_id = match frame_of_metadata.get(slot).copied().flatten() {
                Some(id) => id,
                None => {
                    let id = self.frame(index, plane, metadata);
                    if let Some(cached) = frame_of_metadata.get_mut(slot) {
                        *cached = Some(id);
                    }
                    id
                }
            };
            let parent = stack.last().map_or(0, |top| top.node);
            let node = self.child(index, parent, frame_id);
            match stack.last_mut() {
                Some(top) => {
                    top.children_running = top.children_running.saturating_add(running);
                    top.children_all = top.children_all.saturating_add(samples);
                }
                None => {
                    thread.samples = thread.samples.saturating_add(samples);
                    thread.running_samples = thread.running_samples.saturating_add(running);
                }
            }
            stack.push(OpenRun { node, start_ps, end_ps, running, all: samples, children_running: 0, children_all: 0 });
        }
        while let Some(done) = stack.pop() {
            close(index, thread_id, done);
        }
        index.threads.push(thread);
    }

    fn frame(
        &mut self,
        index: &mut FlameIndex,
        plane: &mlprof_model::Plane,
        metadata: &mlprof_model::EventMetadata,
    ) -> u32 {
        let python_code::Frame { function, file, short_file, line } = frame(plane, metadata);
        let name = FrameName { function, file, short_file, line };
        *self.frames.entry(name).or_insert_with_key(|name| {
            index.frames.push(name.clone());
            (index.frames.len() - 1) as u32
        })
    }

    fn child(&mut self, index: &mut FlameIndex, parent: u32, frame: u32) -> u32 {
        *self.children.entry((parent, frame)).or_insert_with(|| {
            index.nodes.push(TreeNode { parent, frame });
            (index.nodes.len() - 1) as u32
        })
    }
}

/// A run is over: what its callees did not take is its node's own.
fn close(index: &mut FlameIndex, thread: u32, done: OpenRun) {
    let running = done.running.saturating_sub(done.children_running);
    let all = done.all.saturating_sub(done.children_all);
    if all > 0 || running > 0 {
        index.runs.push(SelfRun {
            thread,
            node: done.node,
            start_ps: done.start_ps,
            end_ps: done.end_ps,
            running,
            all,
        });
    }
}

/// The counted tree, turned into the answer.
struct Tree<'a> {
    index: &'a FlameIndex,
    self_samples: &'a [u64],
    totals: &'a [u64],
    children: &'a [Vec<u32>],
}

impl Tree<'_> {
    /// Node `id` at `depth` with its children, those below 0.1 % of `root_total`
    /// merged into one `(other)` child.
    fn node(&self, id: usize, depth: usize, root_total: u64) -> FlameNode {
        let frame = self.index.nodes.get(id).and_then(|n| self.index.frames.get(n.frame as usize));
        let mut node = FlameNode {
            name: frame.map_or_else(String::new, |f| f.function.clone()),
            file: frame.map_or_else(String::new, |f| f.short_file.clone()),
            line: frame.map_or(0, |f| f.line),
            self_samples: self.self_samples.get(id).copied().unwrap_or(0),
            total: self.totals.get(id).copied().unwrap_or(0),
            merged: None,
            children: Vec::new(),
        };
        if depth >= MAX_DEPTH {
            return node;
        }
        let mut kids: Vec<usize> =
            self.children.get(id).map_or_else(Vec::new, |k| k.iter().map(|&k| k as usize).collect());
        let name = |k: usize| self.index.nodes.get(k).and_then(|n| self.index.frames.get(n.frame as usize));
        let total = |k: usize| self.totals.get(k).copied().unwrap_or(0);
        kids.sort_by(|&a, &b| {
            let key = |k| name(k).map(|f| (&f.function, &f.short_file, f.line));
            total(b).cmp(&total(a)).then_with(|| key(a).cmp(&key(b)))
        });
        let mut other = FlameNode { name: OTHER.into(), merged: Some(0), ..FlameNode::default() };
        for kid in kids {
            if total(kid).saturating_mul(OTHER_DIVISOR) < root_total {
                other.total = other.total.saturating_add(total(kid));
                other.merged = other.merged.map(|n| n + 1);
            } else {
                node.children.push(self.node(kid, depth + 1, root_total));
            }
        }
        if other.total > 0 {
            node.children.push(other);
        }
        node
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::StepInfo;
    use mlprof_model::{Line, PlaneBuilder, SourceFormat, StatValue};

    /// One run of samples: `(function, line, start ms, end ms, samples, idle)`.
    type Run = (&'static str, u32, i64, i64, u64, u64);

    const MS: i64 = 1_000_000_000;

    /// A host whose python plane has one line per `(tid, thread name, runs)`, runs
    /// parents before children, every frame in `/w/train.py`.
    fn sampled(name: &str, threads: &[(i64, &str, &[Run])]) -> Host {
        let mut plane = PlaneBuilder::new(1, names::PYTHON_PLANE);
        let interval = plane.stat_key(names::SAMPLE_INTERVAL_NS_STAT);
        plane.set_plane_stats(vec![(interval, StatValue::Uint(10_000_000))]);
        let [samples_key, idle_key] = [names::SAMPLES_STAT, names::IDLE_SAMPLES_STAT].map(|n| plane.stat_key(n));
        for &(tid, thread, runs) in threads {
            let mut line = Line::new(tid, thread);
            for &(function, number, start, end, samples, idle) in runs {
                let metadata = plane.event_metadata(&format!("{function} (train.py:{number})"), 0, |p| {
                    let keys =
                        [names::FUNCTION_STAT, names::FILE_STAT, names::SHORT_FILE_STAT, names::LINE_NUMBER_STAT]
                            .map(|n| p.stat_key(n));
                    let text = |p: &mut PlaneBuilder, t: &str| p.metadata_str(t).expect("interned");
                    let values = [text(p, function), text(p, "/w/train.py"), text(p, "train.py")];
                    let mut stats: Vec<(u32, StatValue)> = keys.into_iter().zip(values).collect();
                    stats.push((keys[3], StatValue::Uint(u64::from(number))));
                    stats
                });
                line.stats.push(samples_key, StatValue::Uint(samples));
                line.stats.push(idle_key, StatValue::Uint(idle));
                line.push_event(metadata, start * MS, (end - start) * MS);
            }
            plane.push_line(line);
        }
        let mut host = Host::new(name, "", SourceFormat::Xspace);
        host.planes.push(plane.finish());
        host
    }

    /// The main thread: main (10 samples, 2 idle) > walk (6) > walk (4) > leaf (4), then
    /// main > wait (2, both idle); a worker: work (5) > leaf (3).
    fn two_threads() -> Host {
        sampled(
            "h",
            &[
                (
                    8,
                    "MainThread (pid 7, tid 8)",
                    &[
                        ("main", 1, 0, 100, 10, 2),
                        ("walk", 5, 0, 60, 6, 0),
                        ("walk", 5, 0, 40, 4, 0),
                        ("leaf", 9, 0, 30, 4, 0),
                        ("wait", 3, 60, 100, 2, 2),
                    ],
                ),
                (9, "worker (pid 7, tid 9)", &[("work", 2, 0, 50, 5, 0), ("leaf", 9, 0, 30, 3, 0)]),
            ],
        )
    }

    fn flame(host: &Host, options: FlameOptions) -> Result<Flame, FlameError> {
        FlameIndex::build(&[host], &[], &[]).flame(&options)
    }

    fn child<'a>(node: &'a FlameNode, name: &str) -> &'a FlameNode {
        node.children.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("{name} under {}", node.name))
    }

    fn step(num: i64, begin_ms: i64, duration_ms: i64) -> StepInfo {
        StepInfo {
            step_num: num,
            step_name: format!("step {num}"),
            profile_step: num,
            begin_ps: begin_ms * MS,
            duration_ps: duration_ms * MS,
            type_ps: Default::default(),
        }
    }

    #[test]
    fn the_tree_counts_running_samples_as_the_python_tool_does() {
        let host = two_threads();
        let flame = flame(&host, FlameOptions::default()).expect("samples");
        let code = python_code::analyze(&[&host], &[], &[]).expect("samples");
        assert_eq!(flame.total, code.running_samples);
        assert_eq!((flame.root.name.as_str(), flame.root.total, flame.root.self_samples), ("all", 13, 0));
        // Children by total: main (8) before work (5).
        let names: Vec<&str> = flame.root.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["main", "work"]);
        let main = child(&flame.root, "main");
        assert_eq!((main.total, main.self_samples, main.file.as_str(), main.line), (8, 2, "train.py", 1));
        // Recursion is a path: walk > walk > leaf; the idle `wait` counts nothing.
        let walk = child(main, "walk");
        assert_eq!((walk.total, walk.self_samples), (6, 2));
        let inner = child(walk, "walk");
        assert_eq!((inner.total, inner.self_samples, child(inner, "leaf").total), (4, 0, 4));
        assert!(main.children.iter().all(|c| c.name != "wait"), "{main:?}");
        assert_eq!(child(child(&flame.root, "work"), "leaf").self_samples, 3);
        let threads: Vec<(&str, i64, u64, u64)> =
            flame.threads.iter().map(|t| (t.name.as_str(), t.tid, t.samples, t.running_samples)).collect();
        assert_eq!(threads, [("MainThread (pid 7, tid 8)", 8, 10, 8), ("worker (pid 7, tid 9)", 9, 5, 5)]);
    }

    #[test]
    fn waiting_samples_count_on_request() {
        let host = two_threads();
        let flame = flame(&host, FlameOptions { include_idle: true, ..FlameOptions::default() }).expect("samples");
        assert_eq!(flame.total, 15);
        let main = child(&flame.root, "main");
        assert_eq!((main.total, child(main, "wait").self_samples), (10, 2));
    }

    #[test]
    fn one_thread_by_name_or_tid() {
        let host = two_threads();
        for thread in ["worker (pid 7, tid 9)", "9"] {
            let only = flame(&host, FlameOptions { thread: Some(thread.into()), ..FlameOptions::default() });
            let only = only.expect("a thread");
            assert_eq!(only.total, 5, "{thread}");
            assert_eq!(only.root.name, "worker (pid 7, tid 9)");
            assert_eq!(only.root.children.len(), 1);
            assert_eq!(only.threads.len(), 2, "the selector still lists every thread");
        }
        let unknown = flame(&host, FlameOptions { thread: Some("nope".into()), ..FlameOptions::default() });
        assert_eq!(unknown, Err(FlameError::UnknownThread("nope".into())));
    }

    #[test]
    fn a_step_counts_the_samples_the_python_tools_step_table_counts() {
        // Steps of 0..35 ms and 35..100 ms cut through every run.
        let host = two_threads();
        let steps =
            HostSteps { host: "h".into(), steps: vec![step(1, 0, 35), step(2, 35, 65)], ..HostSteps::default() };
        let code = python_code::analyze(&[&host], &[&host], std::slice::from_ref(&steps)).expect("samples");
        let index = FlameIndex::build(&[&host], &[&host], std::slice::from_ref(&steps));
        let listed = index.steps();
        let names: Vec<(i64, &str)> = listed.iter().map(|s| (s.num, s.name.as_str())).collect();
        assert_eq!(names, [(1, "step 1"), (2, "step 2")]);
        let mut sum = 0;
        for row in &code.steps {
            let options = FlameOptions { window: Window::Step(row.step_num), ..FlameOptions::default() };
            let flame = index.flame(&options).expect("a step");
            assert_eq!(flame.total, row.running_samples, "step {}", row.step_num);
            sum += flame.total;
        }
        assert_eq!(sum, 13, "every running sample lands in one of the steps");
        assert_eq!(
            index.flame(&FlameOptions { window: Window::Step(7), ..FlameOptions::default() }),
            Err(FlameError::UnknownStep(7))
        );
        // A time range is the same as the step it spans.
        let range = Window::Range { begin_ps: 0, end_ps: 35 * MS };
        let by_range = index.flame(&FlameOptions { window: range, ..FlameOptions::default() }).expect("a range");
        assert_eq!(
            by_range.root,
            index.flame(&FlameOptions { window: Window::Step(1), ..FlameOptions::default() }).expect("step").root
        );
        let empty = Window::Range { begin_ps: 5, end_ps: 5 };
        assert_eq!(
            index.flame(&FlameOptions { window: empty, ..FlameOptions::default() }),
            Err(FlameError::EmptyRange)
        );
    }

    #[test]
    fn steps_of_another_host_are_moved_onto_the_samples_clock() {
        // The samples start 50 ms after the trace: its step 2 (50..100 ms) is the
        // samples' 0..50 ms.
        let mut samples = sampled("s", &[(1, "MainThread (pid 1, tid 1)", &[("main", 1, 0, 100, 10, 0)])]);
        samples.profile_start_ns = Some(1_000_050_000_000);
        let mut trace = Host::new("trace", "", SourceFormat::Kineto);
        trace.profile_start_ns = Some(1_000_000_000_000);
        let steps = vec![
            HostSteps::default(),
            HostSteps { host: "trace".into(), steps: vec![step(1, 0, 50), step(2, 50, 50)], ..HostSteps::default() },
        ];
        let index = FlameIndex::build(&[&samples, &trace], &[&samples, &trace], &steps);
        let in_step = |num| index.flame(&FlameOptions { window: Window::Step(num), ..FlameOptions::default() });
        assert_eq!(in_step(1).expect("step 1").total, 0);
        assert_eq!(in_step(2).expect("step 2").total, 5);
    }

    #[test]
    fn small_frames_merge_into_other_and_depth_is_capped() {
        // 2000 samples in `big`, 1 in each of `tiny_a` and `tiny_b` (below 0.1 %), and a
        // 200-deep recursion under `deep`.
        let mut runs: Vec<Run> = vec![
            ("main", 1, 0, 1000, 2005, 0),
            ("big", 2, 0, 500, 2000, 0),
            ("tiny_a", 3, 500, 510, 1, 0),
            ("tiny_b", 4, 510, 520, 1, 0),
        ];
        runs.extend((0..200).map(|_| ("deep", 5, 600, 700, 3, 0)));
        let host = sampled("h", &[(1, "MainThread", &runs)]);
        let flame = flame(&host, FlameOptions::default()).expect("samples");
        let main = child(&flame.root, "main");
        let names: Vec<&str> = main.children.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["big", "deep", OTHER]);
        let other = child(main, OTHER);
        assert_eq!((other.total, other.merged), (2, Some(2)));
        let mut depth = 0;
        let mut node = &flame.root;
        while let Some(next) = node.children.first() {
            node = if next.name == "big" { main.children.get(1).expect("deep") } else { next };
            depth += 1;
        }
        assert_eq!(depth, MAX_DEPTH);
        assert_eq!(node.total, 3, "the deepest node listed keeps its callees' samples");
    }

    #[test]
    fn no_python_plane_is_an_error() {
        let host = Host::new("h", "", SourceFormat::Xspace);
        assert_eq!(flame(&host, FlameOptions::default()), Err(FlameError::NoSamples));
    }
}
