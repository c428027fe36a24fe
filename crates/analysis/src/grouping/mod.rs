//! Event grouping: which step (XProf's `group_id`) each event belongs to, following
//! XProf's `GroupTfEvents`, plus a fallback for profiles XProf cannot group.
//!
//! How XProf groups (and so do we): every event is a node; an event is the child of
//! the innermost enclosing event on its thread; producer/consumer stats (`_pt/_p`,
//! `_ct/_c`) connect threads, as do `ExecutorState::Process` → `IteratorGetNext…`
//! (same `id`, `iter_num`) and kernel launch → kernel (same `correlation_id`). Roots
//! are events with `_r` (or `TraceContext`); each root that no same-level root
//! encloses gets the next group id, which spreads to every descendant not yet grouped.
//! A root's group is named `<graph_type or event name> <iter_num|step_num|group id>`.
//!
//! Beyond XProf: when no root exists, events that carry `step_num` (Keras 3 marks each
//! profiled batch so, without `_r`) become the roots, and [`StepSource`] says so. When
//! there is no step marker at all (a JAX or TensorFlow job captured without profiler
//! code of its own), the steps are inferred from the program it executes again and
//! again ([`executions`]).
//!
//! The one design decision to know: group ids are not written into the model; they
//! live in [`HostGroups`], a side table parallel to the host's planes and lines, so
//! the model stays immutable and shared across analyses.

pub mod executions;
mod forest;
pub mod profiler_steps;

use std::collections::{HashMap, VecDeque};

use mlprof_model::fxhash::FxMap;
use mlprof_model::{Host, Plane, names};
use serde::Serialize;

use forest::{EAGER_KERNEL_EXECUTE, Forest, IS_FUNC, Kind};

use crate::xstats::StatSlots;

/// A group id as stored for each event: an index into [`HostGroups::names`], or
/// [`NO_GROUP`]. 32 bits are plenty (every group has a root event and a name) and keep
/// the table at 4 bytes an event; readers get group ids as `i64`, XProf's `group_id`.
pub type GroupId = i32;

/// "No group" in [`HostGroups`].
pub const NO_GROUP: GroupId = -1;

/// How the steps of a host were found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepSource {
    /// No step markers at all.
    #[default]
    None,
    /// XProf's rule: root events (`_r` stat or `TraceContext`).
    RootEvents {
        /// Number of groups.
        groups: usize,
    },
    /// TensorFlow loop iterations (`ExecutorState::Process` with `iter_num`).
    TfLoop {
        /// Number of groups.
        groups: usize,
    },
    /// mlprof's fallback: events that carry `step_num` but no root flag.
    StepNumEvents {
        /// The event name used (e.g. `Profiled batch`).
        event_name: String,
        /// Number of groups.
        groups: usize,
    },
    /// XProf skips grouping when TF loop ops (`WhileOp-EvalCond`, …) are present.
    SkippedLoopOps,
    /// PyTorch's `ProfilerStep#N` annotations (Kineto traces), see
    /// [`profiler_steps`].
    ProfilerSteps {
        /// Number of steps.
        groups: usize,
        /// Without `ProfilerStep#N` markers: the optimizer-step annotation the steps were
        /// inferred from (`Optimizer.step#SGD.step`), see [`profiler_steps`].
        #[serde(skip_serializing_if = "Option::is_none")]
        inferred_from: Option<String>,
    },
    /// mlprof's inference where there is no step marker at all: each step runs from the
    /// start of one execution of the program the job executes again and again to the
    /// start of the next, see [`executions`].
    ProgramExecutions {
        /// The program or function executed (`train_step`); the steps are named after it.
        program: String,
        /// What its executions are in the profile, in words.
        evidence: String,
        /// Number of executions found.
        executions: usize,
        /// Number of steps (one fewer than the executions).
        groups: usize,
    },
}

/// `1 step`, `3 steps`.
fn steps(n: usize) -> String {
    mlprof_model::human::counted(n, "step", "steps")
}

/// `1 step group`, `3 step groups`.
fn step_groups(n: usize) -> String {
    mlprof_model::human::counted(n, "step group", "step groups")
}

impl StepSource {
    /// One sentence saying how the steps were found.
    pub fn describe(&self) -> String {
        match self {
            StepSource::None => "No step markers found.".to_string(),
            StepSource::RootEvents { groups } => {
                format!("{} from root events (stat `_r` or TraceContext), as XProf finds them.", step_groups(*groups))
            }
            StepSource::TfLoop { groups } => format!("{} from TensorFlow loop iterations.", step_groups(*groups)),
            StepSource::StepNumEvents { event_name, groups } => format!(
                "{} from events named \"{event_name}\" with step_num (no root flag `_r`; XProf finds no steps here).",
                steps(*groups)
            ),
            StepSource::SkippedLoopOps => {
                "Step grouping skipped: the profile has TensorFlow loop ops (as XProf does).".to_string()
            }
            StepSource::ProfilerSteps { groups, inferred_from: None } => format!(
                "{} from PyTorch's ProfilerStep#N annotations (host events by time, GPU events by their launch).",
                steps(*groups)
            ),
            StepSource::ProfilerSteps { groups, inferred_from: Some(annotation) } => format!(
                "{} inferred from PyTorch's \"{annotation}\" annotations: no ProfilerStep#N markers, so a \
                 step runs from the end of one optimizer step to the end of the next (host events by time, GPU events \
                 by their launch).",
                steps(*groups)
            ),
            StepSource::ProgramExecutions { evidence, executions, groups, .. } => format!(
                "{} inferred from {executions} repeated executions of {evidence}: no step markers, so a \
                 step runs from the start of one execution to the start of the next (host events by time, GPU events \
                 by their launch).",
                steps(*groups)
            ),
        }
    }
}

/// The group id of every event of one host ([`HostGroups::group_of`]; indices as in
/// `Host::planes`), [`NO_GROUP`] when ungrouped.
///
/// The ids sit in one array, line after line in host order (planes, their lines, their
/// events): the order grouping numbers its nodes in, so grouping hands its array over
/// without a copy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostGroups {
    /// Every event's group, line after line in host order.
    groups: Vec<GroupId>,
    /// Per plane, where each of its lines starts in `groups`, then where its last ends.
    line_starts: Vec<Vec<usize>>,
    /// Per group id (index), the group's name (e.g. `train 6`).
    pub names: Vec<String>,
    /// Events XProf marks `is_eager=1` (TF ops and GPU kernels executed op by op
    /// under an `EagerKernelExecute` that is not a compiled function), as
    /// `(plane, line, event)` indices, sorted.
    pub eager: Vec<(u32, u32, u32)>,
    /// The user-defined root events that were grouped (XProf adds a `step_name` stat
    /// to these), as sorted `(plane, line, event)` indices.
    pub step_name_events: Vec<(u32, u32, u32)>,
    /// How the groups were found.
    pub source: StepSource,
    /// Per group, its step's span `(begin_ps, end_ps)` where the steps were inferred
    /// without marker events ([`StepSource::ProgramExecutions`]); empty otherwise (a
    /// marked step's span comes from its markers).
    pub step_spans: Vec<(i64, i64)>,
}

impl HostGroups {
    /// A table with every event of `host` ungrouped.
    pub fn none(host: &Host) -> HostGroups {
        let mut table = HostGroups::default();
        table.set_groups(host, Vec::new());
        table
    }

    /// Takes `groups`, every event's group in host order, as the table's (`groups` is
    /// filled up with [`NO_GROUP`] or cut to the host's number of events).
    fn set_groups(&mut self, host: &Host, mut groups: Vec<GroupId>) {
        let mut next = 0;
        self.line_starts = host
            .planes
            .iter()
            .map(|plane| {
                let mut starts = Vec::with_capacity(plane.lines.len() + 1);
                starts.push(next);
                for line in &plane.lines {
                    next += line.len();
                    starts.push(next);
                }
                starts
            })
            .collect();
        groups.resize(next, NO_GROUP);
        self.groups = groups;
    }

    /// The groups of the events of line `line` of plane `plane` (empty when there is no
    /// such line).
    pub fn line(&self, plane: usize, line: usize) -> &[GroupId] {
        self.line_range(plane, line).map_or(&[], |range| &self.groups[range])
    }

    /// [`HostGroups::line`], to change.
    pub fn line_mut(&mut self, plane: usize, line: usize) -> &mut [GroupId] {
        match self.line_range(plane, line) {
            Some(range) => &mut self.groups[range],
            None => &mut [],
        }
    }

    fn line_range(&self, plane: usize, line: usize) -> Option<std::ops::Range<usize>> {
        let starts = self.line_starts.get(plane)?;
        Some(*starts.get(line)?..*starts.get(line + 1)?)
    }

    /// Whether event `event` of line `line` of plane `plane` ran eagerly (XProf's
    /// `is_eager` stat, set by grouping).
    pub fn is_eager(&self, plane: usize, line: usize, event: usize) -> bool {
        self.eager.binary_search(&(plane as u32, line as u32, event as u32)).is_ok()
    }

    /// Which events grouping gave a `step_name` (grouped user roots), for events asked
    /// in file order: see [`StepNames`].
    pub fn step_names(&self) -> StepNames<'_> {
        StepNames { rest: &self.step_name_events }
    }

    /// The group of event `event` of line `line` of plane `plane`, if grouped.
    pub fn group_of(&self, plane: usize, line: usize, event: usize) -> Option<i64> {
        let group = *self.line(plane, line).get(event)?;
        (group != NO_GROUP).then_some(i64::from(group))
    }

    /// The name of group `group` (`train 6`), if known.
    pub fn name_of(&self, group: i64) -> Option<&str> {
        usize::try_from(group).ok().and_then(|index| self.names.get(index)).map(String::as_str)
    }

    /// The number the profile gives group `group`'s step ([`profile_step_number`] of its
    /// name): how mlprof's own outputs number steps. A group without a step name (a part
    /// of a step cut by the profiling window) continues the numbering of the nearest
    /// named group (the one before `train 5` is 4); the group id when none is named.
    pub fn profile_step(&self, group: i64) -> i64 {
        let named = |g: i64| self.name_of(g).filter(|name| name.parse::<i64>().is_err()).and_then(profile_step_number);
        let count = self.names.len() as i64;
        for distance in 0..count.max(1) {
            if let Some(number) = named(group - distance) {
                return number.saturating_add(distance);
            }
            if let Some(number) = named(group + distance) {
                return number.saturating_sub(distance);
            }
        }
        group
    }
}

/// The step number a step's name ends with, as the profile numbers its steps: `train 5`
/// (TensorFlow's and JAX's `step_num` / `iter_num`) → 5, `ProfilerStep#551` → 551.
/// mlprof's outputs number steps this way everywhere; only `xprof-json` keeps XProf's
/// group ids and positions.
pub fn profile_step_number(name: &str) -> Option<i64> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    name[name.len() - digits..].parse().ok()
}

const LOOP_OPS: [&str; 5] = ["WhileOp-EvalCond", "WhileOp-StartBody", "ForOp", "ParallelForOp", "ForeverOp"];

/// What grouping may do beyond XProf's `GroupTfEvents` when a host has no step
/// markers (both described in the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fallbacks {
    /// Events that carry `step_num` become the roots.
    pub step_num_events: bool,
    /// Then, steps are inferred from repeated executions of one compiled program
    /// ([`executions`]).
    pub repeated_executions: bool,
}

impl Fallbacks {
    /// None: exactly as XProf groups.
    pub const NONE: Fallbacks = Fallbacks { step_num_events: false, repeated_executions: false };
}

/// Groups the events of `host` into steps by its step markers: XProf's
/// `GroupTfEvents` for non-TPU profiles, then the `fallbacks` allowed when there are
/// none. Which rules apply to a host is its source's choice:
/// [`crate::facts::step_groups`].
pub fn group_by_markers(host: &Host, fallbacks: Fallbacks) -> HostGroups {
    let has_loop_ops =
        host.planes.iter().any(|plane| plane.event_metadata.iter().any(|m| LOOP_OPS.contains(&m.name.as_str())));
    if has_loop_ops {
        return HostGroups { source: StepSource::SkippedLoopOps, ..HostGroups::none(host) };
    }
    let forest = Forest::build(host);
    let loop_roots = tf_loop_roots(&forest);
    let mut roots: Vec<(i64, i64, u32)> = forest
        .roots
        .iter()
        .filter(|root| root.step_id.is_none_or(|id| !forest.tf_data_step_ids.contains(&id)))
        .map(|root| (-root.level, root.start_ps, root.node))
        .collect();
    roots.sort_unstable();
    let roots: Vec<(i64, u32)> = roots.into_iter().map(|(level, _, node)| (-level, node)).collect();

    let mut grouper = Grouper::new(&forest);
    let mut step_spans = Vec::new();
    let source = if !loop_roots.is_empty() {
        for (root, members) in &loop_roots {
            grouper.process_root(*root, members);
        }
        StepSource::TfLoop { groups: grouper.names.len() }
    } else {
        grouper.group_roots(&roots);
        let mut source = StepSource::RootEvents { groups: grouper.names.len() };
        if fallbacks.step_num_events && !grouper.found_step_markers() {
            if let Some((event_name, fallback_roots)) = step_num_roots(&forest) {
                grouper = Grouper::new(&forest);
                for &root in &fallback_roots {
                    if grouper.group_of[root as usize] == NO_GROUP {
                        grouper.process_root(root, &[]);
                    }
                }
                let found = grouper.names.len();
                grouper.group_roots(&roots);
                source = StepSource::StepNumEvents { event_name, groups: found };
            } else if fallbacks.repeated_executions
                && let Some(steps) = executions::infer(host)
            {
                grouper = executions::group(&forest, &steps);
                source = steps.source();
                step_spans = steps.spans;
            }
        }
        source
    };
    let eager = eager_events(&forest);
    let mut step_name_events: Vec<(u32, u32, u32)> = grouper
        .step_name_nodes
        .iter()
        .map(|&node| {
            let at = forest.locate(node);
            (at.plane, at.line, at.event)
        })
        .collect();
    step_name_events.sort_unstable();
    let Grouper { group_of, names, .. } = grouper;
    drop(forest);
    let source = if names.is_empty() { StepSource::None } else { source };
    // The forest numbers its nodes in host order: `group_of` is the table as it is.
    let mut table = HostGroups { names, eager, step_name_events, source, step_spans, ..HostGroups::default() };
    table.set_groups(host, group_of);
    for (plane_index, plane) in host.planes.iter().enumerate() {
        if plane.is_gpu() {
            inherit_groups(plane, plane_index, &mut table);
        }
    }
    table
}

/// XProf's `ProcessUngroupedEvents` on a GPU plane: in time order over all its
/// streams, an event without a group takes the group of the latest grouped event
/// before it (kernels whose launch grouping missed, eager kernels amid graph ones).
/// The `Steps` line, which XProf derives afterwards, is left alone.
fn inherit_groups(plane: &Plane, plane_index: usize, groups: &mut HostGroups) {
    let mut order: Vec<(i64, usize, usize)> = Vec::new();
    for (line_index, line) in plane.lines.iter().enumerate() {
        if line.name != names::STEPS_LINE {
            order.extend(line.iter().map(|event| (event.start_ps(), line_index, event.index())));
        }
    }
    order.sort_unstable();
    let mut last = NO_GROUP;
    for (_, line, index) in order {
        let Some(group) = groups.line_mut(plane_index, line).get_mut(index) else { continue };
        if *group != NO_GROUP {
            last = *group;
        } else {
            *group = last;
        }
    }
}

struct Grouper<'f, 'h> {
    forest: &'f Forest<'h>,
    group_of: Vec<GroupId>,
    names: Vec<String>,
    /// Grouped user-defined roots (they get a `step_name`).
    step_name_nodes: Vec<u32>,
}

impl<'f, 'h> Grouper<'f, 'h> {
    fn new(forest: &'f Forest<'h>) -> Grouper<'f, 'h> {
        Grouper {
            forest,
            group_of: vec![NO_GROUP; forest.len() as usize],
            names: Vec::new(),
            step_name_nodes: Vec::new(),
        }
    }

    /// Groups `roots` (`(level, node)`, already in XProf's order) that still need it.
    fn group_roots(&mut self, roots: &[(i64, u32)]) {
        for &(level, root) in roots {
            if self.needs_grouping(root, level) {
                self.process_root(root, &[]);
            }
        }
    }

    /// Whether any group has something XProf accepts as a step marker: a user root
    /// (it gets `step_name`), a grouped host event named `train…`/`test…`/
    /// `TraceContext…` without `/`, or a grouped device event (device steps).
    fn found_step_markers(&self) -> bool {
        if !self.step_name_nodes.is_empty() {
            return true;
        }
        self.forest.line_ranges().any(|(plane, _, first, count)| {
            let on_device = self.forest.host.planes[plane].name.starts_with(names::DEVICE_PLANE_PREFIX);
            (first..first + count as u32).any(|node| {
                self.group_of[node as usize] != NO_GROUP
                    && (on_device || is_explicit_step_marker(self.forest.name(node)))
            })
        })
    }

    /// XProf groups a root unless it is grouped already or an ancestor is a root of
    /// the same level.
    fn needs_grouping(&self, root: u32, level: i64) -> bool {
        if self.group_of[root as usize] != NO_GROUP {
            return false;
        }
        self.forest.find_ancestor(root, false, |n| self.forest.root_level(n) == level).is_none()
    }
    /// Gives `root` (and `extra` members) the next group id and spreads it.
    fn process_root(&mut self, root: u32, extra: &[u32]) {
        // Fits: every group has a root event and a name (far fewer than 2^31).
        let group_id = self.names.len() as GroupId;
        self.propagate(root, group_id, extra);
        let name = self.forest.group_name(root, i64::from(group_id));
        if !self.forest.is_implicit_root(root) {
            self.step_name_nodes.push(root);
        }
        self.names.push(name);
    }

    /// Gives `group_id` to `root` and, breadth first, to every descendant reached
    /// through nodes without a group (XProf's walk, whose seen set and check at each
    /// visit come to this: a node takes the group when first reached, if it has none).
    fn propagate(&mut self, root: u32, group_id: GroupId, extra: &[u32]) {
        if self.group_of[root as usize] != NO_GROUP {
            return;
        }
        self.group_of[root as usize] = group_id;
        let mut queue = VecDeque::from([root]);
        while let Some(node) = queue.pop_front() {
            let extra_children: &[u32] = if node == root { extra } else { &[] };
            let forest = self.forest;
            for child in forest.children(node).chain(extra_children.iter().copied()) {
                if let Some(slot) = self.group_of.get_mut(child as usize)
                    && *slot == NO_GROUP
                {
                    *slot = group_id;
                    queue.push_back(child);
                }
            }
        }
    }
}

/// XProf's `ProcessTensorFlowLoop`: iterations of TF loops become roots; each returns
/// the first `ExecutorState::Process` of an iteration and the iteration's other ones.
fn tf_loop_roots(forest: &Forest<'_>) -> Vec<(u32, Vec<u32>)> {
    // The forest keeps the runs of looping step ids only: a step id whose runs go past
    // iteration 0 (a function's runs, hundreds of thousands in a TF profile, do not).
    let mut loops: FxMap<i64, FxMap<i64, Vec<u32>>> = FxMap::default();
    for run in &forest.executor_runs {
        let [step_id, iter_num] = run.values;
        loops.entry(step_id).or_default().entry(iter_num).or_default().push(run.node);
    }
    let mut iterations: Vec<(i64, u32, Vec<u32>)> = Vec::new();
    for iterations_of_loop in loops.into_values() {
        for members in iterations_of_loop.into_values() {
            let Some((start, first)) = members.iter().map(|&n| (forest.start_ps(n), n)).min() else { continue };
            let others = members.into_iter().filter(|&n| n != first).collect();
            iterations.push((start, first, others));
        }
    }
    iterations.sort_by_key(|&(start, first, _)| (start, first));
    iterations.into_iter().map(|(_, first, others)| (first, others)).collect()
}

/// XProf's explicit host step marker: a name starting with `train`, `test` or
/// `TraceContext` that contains no `/`.
pub fn is_explicit_step_marker(name: &str) -> bool {
    (name.starts_with("train") || name.starts_with("test") || name.starts_with("TraceContext")) && !name.contains('/')
}

/// mlprof's fallback roots: the most frequent event name among events that carry
/// `step_num` and are not nested in another such event of the same name.
fn step_num_roots(forest: &Forest<'_>) -> Option<(String, Vec<u32>)> {
    let mut by_name: HashMap<&str, Vec<u32>> = HashMap::new();
    for &node in &forest.step_num_nodes {
        by_name.entry(forest.name(node)).or_default().push(node);
    }
    let (name, mut nodes) = by_name.into_iter().max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))?;
    nodes.sort_by_cached_key(|&n| (forest.start_ps(n), n));
    Some((name.to_string(), nodes))
}

/// Whether grouping can mark any event of `host` eager ([`HostGroups::eager`]): only
/// where some `EagerKernelExecute` event has `is_func` 0 (see [`eager_events`]). It
/// reads the events of that name alone, so a result that reads no more of the groups
/// than the eager marks can go without grouping where this is false.
pub fn may_mark_eager(host: &Host) -> bool {
    host.planes.iter().any(|plane| {
        let executes: Vec<bool> = plane.event_metadata.iter().map(|m| m.name == EAGER_KERNEL_EXECUTE).collect();
        if !executes.contains(&true) {
            return false;
        }
        let slots = StatSlots::new(plane, ["is_func"]);
        plane.lines.iter().any(|line| {
            // The metadata column alone, read in order, until an execute turns up.
            let mut indices = line.events.metadata.iter().enumerate();
            indices.any(|(index, metadata)| {
                executes.get(metadata as usize).copied().unwrap_or(false)
                    && line.event(index).is_some_and(|event| slots.row(plane, &event).int(0) == Some(0))
            })
        })
    })
}

/// XProf's `MarkEagerlyExecuted{Gpu,Cpu}…`: kernels and TF ops under an
/// `EagerKernelExecute` whose `is_func` is 0. Where no such execute exists (a
/// `tf.function` job's executes all run functions) there is nothing to search for.
fn eager_events(forest: &Forest<'_>) -> Vec<(u32, u32, u32)> {
    let is_execute = |n: u32| forest.kinds[n as usize] == Kind::EagerKernelExecute;
    let is_eager = |execute: u32| forest.int_stat(execute, IS_FUNC) == Some(0);
    if !(0..forest.len()).any(|node| is_execute(node) && is_eager(node)) {
        return Vec::new();
    }
    let mut eager = Vec::new();
    let mut searched = mlprof_model::fxhash::FxMap::default();
    // The last execute met and whether it is eager: a run's ops come one after another.
    let mut last = (u32::MAX, false);
    for node in 0..forest.len() {
        if !matches!(forest.kinds[node as usize], Kind::KernelExecute | Kind::TfOpRun) {
            continue;
        }
        let Some(execute) = forest.find_ancestor_cached(node, true, is_execute, &mut searched) else {
            continue;
        };
        if last.0 != execute {
            last = (execute, is_eager(execute));
        }
        if last.1 {
            let at = forest.locate(node);
            eager.push((at.plane, at.line, at.event));
        }
    }
    eager.sort_unstable();
    eager
}

/// Answers whether grouping gave an event a `step_name`, for events asked in file order
/// (plane, then line, then event index, never decreasing): each answer walks on along
/// the sorted list instead of searching it, so a pass over millions of events costs one
/// comparison per event. Asked out of order, it answers `false`.
pub struct StepNames<'g> {
    rest: &'g [(u32, u32, u32)],
}

impl StepNames<'_> {
    /// Whether event `event` of line `line` of plane `plane` has a `step_name`.
    pub fn has(&mut self, plane: usize, line: usize, event: usize) -> bool {
        let key = (plane as u32, line as u32, event as u32);
        let passed = self.rest.iter().take_while(|&&named| named < key).count();
        self.rest = self.rest.get(passed..).unwrap_or(&[]);
        self.rest.first() == Some(&key)
    }
}

#[cfg(test)]
mod tests {
    use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue, names};

    use super::{Fallbacks, NO_GROUP, StepNames, StepSource, group_by_markers, may_mark_eager};

    /// A host plane with an `EagerKernelExecute` whose `is_func` is `first_is_func`
    /// and a function one (`is_func` 1), each around a TF op, an op on another thread
    /// that consumes a context the first execute produces, and an op under neither.
    fn eager_host(first_is_func: i64) -> Host {
        let mut cpu = PlaneBuilder::new(1, names::HOST_PLANE);
        let execute = cpu.event_metadata("EagerKernelExecute", 0, |_| Vec::new());
        let matmul = cpu.event_metadata("dense/MatMul:MatMul", 0, |_| Vec::new());
        let add = cpu.event_metadata("f/Add:AddV2", 0, |_| Vec::new());
        let [is_func, pt, p, ct, c] = ["is_func", "_pt", "_p", "_ct", "_c"].map(|n| cpu.stat_key(n));
        let event = |line: &mut Line, metadata, start, duration, stats: &[(u32, i64)]| {
            for &(key, value) in stats {
                line.stats.push(key, StatValue::Int(value));
            }
            line.push_event(metadata, start, duration);
        };
        let mut main = Line::new(1, "main");
        event(&mut main, execute, 0, 100, &[(is_func, first_is_func), (pt, 3), (p, 42)]);
        event(&mut main, matmul, 10, 20, &[]);
        event(&mut main, execute, 200, 100, &[(is_func, 1)]);
        event(&mut main, add, 210, 20, &[]);
        event(&mut main, add, 400, 20, &[]);
        cpu.push_line(main);
        let mut worker = Line::new(2, "worker");
        event(&mut worker, add, 50, 10, &[(ct, 3), (c, 42)]);
        cpu.push_line(worker);
        let mut host = Host::new("h", "h.xplane.pb", SourceFormat::Xspace);
        host.planes.push(cpu.finish());
        host
    }

    /// TF ops under an eager execute, nested in it or linked to it, are eager; ops
    /// under a function execute or under none are not.
    #[test]
    fn ops_under_an_eager_execute_are_eager() {
        let events = [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 0)];
        let eager_of = |host: &Host| -> Vec<(usize, usize)> {
            let groups = group_by_markers(host, Fallbacks::NONE);
            events.into_iter().filter(|&(line, event)| groups.is_eager(0, line, event)).collect()
        };
        assert_eq!(eager_of(&eager_host(0)), vec![(0, 1), (1, 0)]);
        assert_eq!(eager_of(&eager_host(1)), Vec::<(usize, usize)>::new());
    }

    /// The look for eager executes alone says whether grouping marks any event eager.
    #[test]
    fn may_mark_eager_only_with_an_eager_execute() {
        assert!(may_mark_eager(&eager_host(0)));
        assert!(!may_mark_eager(&eager_host(1)));
        let mut without_executes = eager_host(0);
        without_executes.planes[0].event_metadata.iter_mut().for_each(|m| m.name = m.name.replace("Eager", "Lazy"));
        assert!(!may_mark_eager(&without_executes));
    }

    /// XProf's TF loop rule: each iteration of a step id whose executor runs go past
    /// iteration 0 is a group, its runs on every thread members; a step id run only at
    /// iteration 0 (a function) and the step ids of tf.data functions are no loop.
    #[test]
    fn tf_loop_iterations_become_the_groups() {
        let mut cpu = PlaneBuilder::new(1, names::HOST_PLANE);
        let process = cpu.event_metadata("ExecutorState::Process", 0, |_| Vec::new());
        let captured = cpu.event_metadata("InstantiatedCapturedFunction::Run", 0, |_| Vec::new());
        let [id, iter_num] = ["id", "iter_num"].map(|n| cpu.stat_key(n));
        let run = |line: &mut Line, metadata, start: i64, step: i64, iteration: Option<i64>| {
            line.stats.push(id, StatValue::Int(step));
            if let Some(iteration) = iteration {
                line.stats.push(iter_num, StatValue::Int(iteration));
            }
            line.push_event(metadata, start, 10);
        };
        let mut main = Line::new(1, "main");
        run(&mut main, process, 0, 7, Some(0));
        run(&mut main, process, 20, 7, Some(1));
        run(&mut main, process, 40, 9, Some(0));
        run(&mut main, process, 60, 11, Some(2));
        cpu.push_line(main);
        let mut worker = Line::new(2, "worker");
        run(&mut worker, process, 25, 7, Some(1));
        run(&mut worker, captured, 50, 11, None);
        cpu.push_line(worker);
        let mut host = Host::new("h", "h.xplane.pb", SourceFormat::Xspace);
        host.planes.push(cpu.finish());
        let groups = group_by_markers(&host, Fallbacks::NONE);
        assert_eq!(groups.source, StepSource::TfLoop { groups: 2 });
        assert_eq!(groups.names, ["0", "1"]);
        assert_eq!(groups.line(0, 0), [0, 1, NO_GROUP, NO_GROUP]);
        assert_eq!(groups.line(0, 1), [1, NO_GROUP]);
    }

    /// Asked in file order, the walk answers as a search of the list would, for every
    /// event of a small plane, whatever events are skipped between two questions.
    #[test]
    fn step_names_in_file_order_are_those_of_the_list() {
        let named = [(0, 0, 2), (0, 0, 3), (0, 2, 0), (1, 0, 5)];
        let all: Vec<(usize, usize, usize)> =
            (0..2).flat_map(|p| (0..3).flat_map(move |l| (0..7).map(move |e| (p, l, e)))).collect();
        for stride in 1..5 {
            let mut names = StepNames { rest: &named };
            for &(p, l, e) in all.iter().step_by(stride) {
                let expected = named.contains(&(p as u32, l as u32, e as u32));
                assert_eq!(names.has(p, l, e), expected, "({p}, {l}, {e}) asked every {stride}");
            }
        }
    }
}
