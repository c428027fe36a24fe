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
//! profiled batch so, without `_r`) become the roots, and [`StepSource`] says so.
//!
//! The one design decision to know: group ids are not written into the model; they
//! live in [`HostGroups`], a side table parallel to the host's planes and lines, so
//! the model stays immutable and shared across analyses.

use std::collections::{HashMap, HashSet, VecDeque};

use mlprof_model::fxhash::FxMap;
use mlprof_model::{Host, StatValue, names};
use serde::Serialize;

use crate::tf_op::{OpCategory, parse_tf_op};
use crate::xstats::{self, StatKeys};

/// "No group" in [`HostGroups`].
pub const NO_GROUP: i64 = -1;

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
    /// [`crate::profiler_steps`].
    ProfilerSteps {
        /// Number of steps.
        groups: usize,
    },
}

impl StepSource {
    /// One sentence saying how the steps were found.
    pub fn describe(&self) -> String {
        match self {
            StepSource::None => "No step markers found.".to_string(),
            StepSource::RootEvents { groups } => {
                format!("{groups} step groups from root events (stat `_r` or TraceContext), as XProf finds them.")
            }
            StepSource::TfLoop { groups } => format!("{groups} step groups from TensorFlow loop iterations."),
            StepSource::StepNumEvents { event_name, groups } => format!(
                "{groups} steps from events named \"{event_name}\" with step_num (no root flag `_r`; XProf finds no steps here)."
            ),
            StepSource::SkippedLoopOps => {
                "Step grouping skipped: the profile has TensorFlow loop ops (as XProf does).".to_string()
            }
            StepSource::ProfilerSteps { groups } => format!(
                "{groups} steps from PyTorch's ProfilerStep#N annotations (host events by time, GPU events by their launch)."
            ),
        }
    }
}

/// The group id of every event of one host: `planes[p][l][e]` for event `e` of line
/// `l` of plane `p` (indices as in `Host::planes`), [`NO_GROUP`] when ungrouped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostGroups {
    /// Per plane, per line, per event.
    pub planes: Vec<Vec<Vec<i64>>>,
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
}

impl HostGroups {
    /// A table with every event of `host` ungrouped.
    pub fn none(host: &Host) -> HostGroups {
        let planes = host
            .planes
            .iter()
            .map(|plane| plane.lines.iter().map(|line| vec![NO_GROUP; line.len()]).collect())
            .collect();
        HostGroups { planes, ..HostGroups::default() }
    }

    /// Whether event `event` of line `line` of plane `plane` ran eagerly (XProf's
    /// `is_eager` stat, set by grouping).
    pub fn is_eager(&self, plane: usize, line: usize, event: usize) -> bool {
        self.eager.binary_search(&(plane as u32, line as u32, event as u32)).is_ok()
    }

    /// Whether grouping gave this event a `step_name` (it is a grouped user root).
    pub fn has_step_name(&self, plane: usize, line: usize, event: usize) -> bool {
        self.step_name_events.binary_search(&(plane as u32, line as u32, event as u32)).is_ok()
    }

    /// The group of event `event` of line `line` of plane `plane`, if grouped.
    pub fn group_of(&self, plane: usize, line: usize, event: usize) -> Option<i64> {
        let group = *self.planes.get(plane)?.get(line)?.get(event)?;
        (group != NO_GROUP).then_some(group)
    }

    /// The name of group `group` (`train 6`), if known.
    pub fn name_of(&self, group: i64) -> Option<&str> {
        usize::try_from(group).ok().and_then(|index| self.names.get(index)).map(String::as_str)
    }
}

/// The event types grouping cares about (XProf's `HostEventType` subset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    Other,
    TraceContext,
    FunctionRun,
    SessionRun,
    RunGraph,
    ExecutorStateProcess,
    IteratorGetNext,
    IteratorGetNextAsOptional,
    EagerKernelExecute,
    TfDataCapturedFunction,
    TfOpRun,
    KernelLaunch,
    KernelExecute,
}

const LOOP_OPS: [&str; 5] = ["WhileOp-EvalCond", "WhileOp-StartBody", "ForOp", "ParallelForOp", "ForeverOp"];

fn kind_of_name(name: &str) -> Kind {
    match name {
        "TraceContext" => Kind::TraceContext,
        "FunctionRun" => Kind::FunctionRun,
        "SessionRun" => Kind::SessionRun,
        "RunGraph" => Kind::RunGraph,
        "ExecutorState::Process" => Kind::ExecutorStateProcess,
        "IteratorGetNextOp::DoCompute" => Kind::IteratorGetNext,
        "IteratorGetNextAsOptionalOp::DoCompute" => Kind::IteratorGetNextAsOptional,
        "EagerKernelExecute" => Kind::EagerKernelExecute,
        "InstantiatedCapturedFunction::Run"
        | "InstantiatedCapturedFunction::RunWithBorrowedArgs"
        | "InstantiatedCapturedFunction::RunInstantiated"
        | "InstantiatedCapturedFunction::RunAsync" => Kind::TfDataCapturedFunction,
        _ if parse_tf_op(name).category == OpCategory::TensorFlow => Kind::TfOpRun,
        _ => Kind::Other,
    }
}

/// Stats grouping reads, resolved once per plane.
const STATS: [&str; 13] = [
    "_pt",
    "_p",
    "_ct",
    "_c",
    "_pid",
    "_r",
    "_a",
    "id",
    "iter_num",
    "correlation_id",
    "graph_type",
    "step_num",
    "is_func",
];
const PRODUCER_TYPE: usize = 0;
const PRODUCER_ID: usize = 1;
const CONSUMER_TYPE: usize = 2;
const CONSUMER_ID: usize = 3;
const CONSUMER_PID: usize = 4;
const IS_ROOT: usize = 5;
const IS_ASYNC: usize = 6;
const STEP_ID: usize = 7;
const ITER_NUM: usize = 8;
const CORRELATION_ID: usize = 9;
const GRAPH_TYPE: usize = 10;
const STEP_NUM: usize = 11;
const IS_FUNC: usize = 12;

/// Producer/consumer context groups: (context type, context id, pid) → (producer
/// nodes, consumer nodes).
type ContextGroups = HashMap<(i64, i64, Option<i64>), (Vec<u32>, Vec<u32>)>;

/// Files `node` under its producer and consumer context groups (stats `_pt/_p`,
/// `_ct/_c`; pid from `_pid` or the plane's `process_id`).
fn add_context(node: u32, row: &[Option<StatValue>; 13], plane_pid: Option<i64>, groups: &mut ContextGroups) {
    let int = |slot: usize| row[slot].and_then(xstats::as_int);
    let producer = int(PRODUCER_TYPE).zip(int(PRODUCER_ID));
    let consumer = int(CONSUMER_TYPE).zip(int(CONSUMER_ID));
    if producer.is_none() && consumer.is_none() {
        return;
    }
    let pid = int(CONSUMER_PID).or(plane_pid).map(|pid| pid as i32 as i64);
    if let Some((kind, id)) = producer {
        groups.entry((kind as i32 as i64, id, pid)).or_default().0.push(node);
    }
    if let Some((kind, id)) = consumer {
        groups.entry((kind as i32 as i64, id, pid)).or_default().1.push(node);
    }
}

/// Where a node's event lives.
#[derive(Clone, Copy, Debug)]
struct NodeRef {
    plane: u32,
    line: u32,
    event: u32,
}

/// The event forest of one host.
struct Forest<'h> {
    host: &'h Host,
    keys: Vec<StatKeys<13>>,
    /// Per plane, per stat key: 1 + the index in [`STATS`] (0 when not one of them),
    /// so one pass over an event's stats reads all of them.
    slots: Vec<Vec<u8>>,
    nodes: Vec<NodeRef>,
    kinds: Vec<Kind>,
    start_ps: Vec<i64>,
    root_level: Vec<i64>,
    /// `line_offsets[k]` = first node of the k-th (plane, line) pair.
    line_offsets: Vec<Vec<u32>>,
    edges: Vec<(u32, u32)>,
    children: Csr,
    parents: Csr,
}

/// Compressed adjacency lists.
#[derive(Default)]
struct Csr {
    offsets: Vec<u32>,
    targets: Vec<u32>,
}

impl Csr {
    fn build(nodes: usize, edges: impl Iterator<Item = (u32, u32)> + Clone) -> Csr {
        let mut offsets = vec![0u32; nodes + 1];
        for (from, _) in edges.clone() {
            offsets[from as usize + 1] += 1;
        }
        for i in 0..nodes {
            offsets[i + 1] += offsets[i];
        }
        let mut fill = offsets.clone();
        let mut targets = vec![0u32; offsets[nodes] as usize];
        for (from, to) in edges {
            let slot = &mut fill[from as usize];
            targets[*slot as usize] = to;
            *slot += 1;
        }
        Csr { offsets, targets }
    }

    fn of(&self, node: u32) -> &[u32] {
        let node = node as usize;
        match (self.offsets.get(node), self.offsets.get(node + 1)) {
            (Some(&from), Some(&to)) => &self.targets[from as usize..to as usize],
            _ => &[],
        }
    }
}

impl<'h> Forest<'h> {
    fn stat(&self, node: u32, stat: usize) -> Option<mlprof_model::StatValue> {
        let at = self.nodes[node as usize];
        let plane = &self.host.planes[at.plane as usize];
        let event = plane.lines[at.line as usize].event(at.event as usize)?;
        xstats::event_stat(plane, &event, self.keys[at.plane as usize].key(stat))
    }

    fn int_stat(&self, node: u32, stat: usize) -> Option<i64> {
        self.stat(node, stat).and_then(xstats::as_int)
    }

    fn str_stat(&self, node: u32, stat: usize) -> Option<&'h str> {
        let at = self.nodes[node as usize];
        let plane = &self.host.planes[at.plane as usize];
        let event = plane.lines[at.line as usize].event(at.event as usize)?;
        xstats::event_str(plane, &event, self.keys[at.plane as usize].key(stat))
    }

    fn name(&self, node: u32) -> &'h str {
        let at = self.nodes[node as usize];
        let plane = &self.host.planes[at.plane as usize];
        plane.lines[at.line as usize]
            .event(at.event as usize)
            .map(|event| xstats::event_name(plane, &event))
            .unwrap_or("")
    }

    fn end_ps(&self, node: u32) -> i64 {
        let at = self.nodes[node as usize];
        let line = &self.host.planes[at.plane as usize].lines[at.line as usize];
        line.event(at.event as usize).map_or(0, |event| event.end_ps())
    }

    fn line_name(&self, node: u32) -> &'h str {
        let at = self.nodes[node as usize];
        &self.host.planes[at.plane as usize].lines[at.line as usize].name
    }

    /// Builds nodes, intra-thread nesting, inter-thread and context-group edges.
    fn build(host: &'h Host) -> Forest<'h> {
        let keys: Vec<StatKeys<13>> = host.planes.iter().map(|plane| StatKeys::new(plane, STATS)).collect();
        let slots = host
            .planes
            .iter()
            .zip(&keys)
            .map(|(plane, keys)| {
                let mut slots = vec![0u8; plane.stat_metadata.len()];
                for i in 0..STATS.len() {
                    if let Some(slot) = keys.key(i).and_then(|key| slots.get_mut(key as usize)) {
                        *slot = i as u8 + 1;
                    }
                }
                slots
            })
            .collect();
        let mut forest = Forest {
            host,
            keys,
            slots,
            nodes: Vec::new(),
            kinds: Vec::new(),
            start_ps: Vec::new(),
            root_level: Vec::new(),
            line_offsets: Vec::new(),
            edges: Vec::new(),
            children: Csr::default(),
            parents: Csr::default(),
        };
        let mut context_groups: ContextGroups = HashMap::new();
        for (plane_index, plane) in host.planes.iter().enumerate() {
            let is_host_plane = plane.name == names::HOST_PLANE;
            let metadata_kinds: Vec<Kind> = plane.event_metadata.iter().map(|m| kind_of_name(&m.name)).collect();
            let plane_pid = plane.plane_stat("process_id").and_then(xstats::as_int);
            let mut offsets = Vec::with_capacity(plane.lines.len());
            for (line_index, line) in plane.lines.iter().enumerate() {
                offsets.push(forest.nodes.len() as u32);
                let mut open: Vec<u32> = Vec::new();
                for event in line.iter() {
                    let node = forest.nodes.len() as u32;
                    forest.nodes.push(NodeRef {
                        plane: plane_index as u32,
                        line: line_index as u32,
                        event: event.index() as u32,
                    });
                    forest.start_ps.push(event.start_ps());
                    let row = forest.stat_row(plane_index, &event);
                    let int = |slot: usize| row[slot].and_then(xstats::as_int);
                    let mut kind = metadata_kinds.get(event.metadata_index() as usize).copied().unwrap_or(Kind::Other);
                    if kind == Kind::Other && int(CORRELATION_ID).is_some() {
                        kind = if is_host_plane { Kind::KernelLaunch } else { Kind::KernelExecute };
                    }
                    forest.kinds.push(kind);
                    let mut level = int(IS_ROOT).unwrap_or(0);
                    if level == 0 && kind == Kind::TraceContext && row[IS_ROOT].is_none() {
                        level = 1;
                    }
                    forest.root_level.push(level);
                    add_context(node, &row, plane_pid, &mut context_groups);
                    let is_async = int(IS_ASYNC).is_some_and(|v| v != 0);
                    if !is_async {
                        let (start, end) = (event.start_ps(), event.end_ps());
                        while let Some(&parent) = open.last() {
                            if forest.start_ps[parent as usize] <= start && end <= forest.end_ps(parent) {
                                forest.edges.push((parent, node));
                                break;
                            }
                            open.pop();
                        }
                        open.push(node);
                    }
                }
            }
            forest.line_offsets.push(offsets);
        }
        forest.connect_inter_thread();
        for (producers, consumers) in context_groups.values() {
            if producers.len() >= 64 && consumers.len() >= 64 {
                continue;
            }
            for &parent in producers {
                for &child in consumers {
                    forest.edges.push((parent, child));
                }
            }
        }
        let count = forest.nodes.len();
        forest.children = Csr::build(count, forest.edges.iter().copied());
        forest.parents = Csr::build(count, forest.edges.iter().map(|&(p, c)| (c, p)));
        forest
    }

    /// All of [`STATS`] for one event in one pass: event stats first, then its
    /// metadata's stats for those still missing.
    fn stat_row(&self, plane_index: usize, event: &mlprof_model::Event<'_>) -> [Option<StatValue>; 13] {
        let mut row = [None; 13];
        let slots = &self.slots[plane_index];
        let plane = &self.host.planes[plane_index];
        let mut fill = |stats: &[mlprof_model::Stat]| {
            for stat in stats {
                if let Some(&slot) = slots.get(stat.key as usize)
                    && slot > 0
                    && row[slot as usize - 1].is_none()
                {
                    row[slot as usize - 1] = Some(stat.value);
                }
            }
        };
        fill(event.stats());
        fill(xstats::metadata_stats(plane, event));
        row
    }

    fn connect_inter_thread(&mut self) {
        let links: [(Kind, Kind, &[usize]); 3] = [
            (Kind::ExecutorStateProcess, Kind::IteratorGetNext, &[STEP_ID, ITER_NUM]),
            (Kind::ExecutorStateProcess, Kind::IteratorGetNextAsOptional, &[STEP_ID, ITER_NUM]),
            (Kind::KernelLaunch, Kind::KernelExecute, &[CORRELATION_ID]),
        ];
        for (parent_kind, child_kind, stats) in links {
            let candidates = self.kinds.iter().filter(|&&kind| kind == parent_kind).count();
            let mut parents: FxMap<[i64; 2], u32> = FxMap::default();
            parents.reserve(candidates);
            for node in 0..self.nodes.len() as u32 {
                if self.kinds[node as usize] == parent_kind
                    && let Some(values) = self.stat_values(node, stats)
                {
                    parents.insert(values, node);
                }
            }
            if parents.is_empty() {
                continue;
            }
            for node in 0..self.nodes.len() as u32 {
                if self.kinds[node as usize] == child_kind
                    && let Some(values) = self.stat_values(node, stats)
                    && let Some(&parent) = parents.get(&values)
                {
                    self.edges.push((parent, node));
                }
            }
        }
    }

    /// The int values of `stats` (at most two) of `node`, unused slots 0; `None` when
    /// one is missing.
    fn stat_values(&self, node: u32, stats: &[usize]) -> Option<[i64; 2]> {
        debug_assert!(stats.len() <= 2, "inter-thread links match on at most two stats");
        let mut values = [0; 2];
        for (value, &stat) in values.iter_mut().zip(stats) {
            *value = self.int_stat(node, stat)?;
        }
        Some(values)
    }

    /// Breadth-first search over parents (optionally from `node` itself) for the first
    /// node satisfying `found`.
    fn find_ancestor(&self, node: u32, include_self: bool, mut found: impl FnMut(u32) -> bool) -> Option<u32> {
        let mut queue = VecDeque::new();
        let mut seen = HashSet::from([node]);
        if include_self {
            queue.push_back(node);
        } else {
            for &parent in self.parents.of(node) {
                if seen.insert(parent) {
                    queue.push_back(parent);
                }
            }
        }
        while let Some(current) = queue.pop_front() {
            if found(current) {
                return Some(current);
            }
            for &parent in self.parents.of(current) {
                if seen.insert(parent) {
                    queue.push_back(parent);
                }
            }
        }
        None
    }

    fn context_int(&self, node: u32, stat: usize) -> Option<i64> {
        let holder = self.find_ancestor(node, true, |n| self.stat(n, stat).is_some())?;
        self.int_stat(holder, stat)
    }

    fn is_implicit_root(&self, node: u32) -> bool {
        matches!(
            self.kinds[node as usize],
            Kind::FunctionRun | Kind::SessionRun | Kind::RunGraph | Kind::ExecutorStateProcess
        ) || matches!(self.line_name(node), "Steps" | "Sparse Core Steps" | "XLA Modules" | "Sparse Core Modules")
    }

    fn group_name(&self, node: u32, group_id: i64) -> String {
        let mut name = String::new();
        if let Some(holder) = self.find_ancestor(node, true, |n| self.stat(n, GRAPH_TYPE).is_some()) {
            name.push_str(self.str_stat(holder, GRAPH_TYPE).unwrap_or(""));
            name.push(' ');
        } else if !self.is_implicit_root(node) {
            name.push_str(self.name(node));
            name.push(' ');
        }
        let step = self.context_int(node, ITER_NUM).or_else(|| self.context_int(node, STEP_NUM)).unwrap_or(group_id);
        name.push_str(&step.to_string());
        name
    }
}

/// Groups the events of `host` into steps (XProf's `GroupTfEvents` for non-TPU
/// profiles, plus the `step_num` fallback described in the module docs).
pub fn group_host(host: &Host) -> HostGroups {
    group(host, true)
}

/// Groups exactly as XProf does (no `step_num` fallback), for comparisons with it.
pub fn group_host_as_xprof(host: &Host) -> HostGroups {
    group(host, false)
}

fn group(host: &Host, step_num_fallback: bool) -> HostGroups {
    if crate::kineto::is_kineto(host)
        && let Some(groups) = crate::profiler_steps::group(host)
    {
        return groups;
    }
    let mut groups = HostGroups::none(host);
    let has_loop_ops =
        host.planes.iter().any(|plane| plane.event_metadata.iter().any(|m| LOOP_OPS.contains(&m.name.as_str())));
    if has_loop_ops {
        groups.source = StepSource::SkippedLoopOps;
        return groups;
    }
    let forest = Forest::build(host);
    let tf_data_step_ids: HashSet<i64> = (0..forest.nodes.len() as u32)
        .filter(|&n| forest.kinds[n as usize] == Kind::TfDataCapturedFunction)
        .filter_map(|n| forest.int_stat(n, STEP_ID))
        .collect();
    let loop_roots = tf_loop_roots(&forest, &tf_data_step_ids);
    let mut roots: Vec<u32> = (0..forest.nodes.len() as u32)
        .filter(|&n| forest.root_level[n as usize] > 0)
        .filter(|&n| forest.int_stat(n, STEP_ID).is_none_or(|id| !tf_data_step_ids.contains(&id)))
        .collect();
    roots.sort_by_key(|&n| (-forest.root_level[n as usize], forest.start_ps[n as usize], n));

    let mut grouper = Grouper::new(&forest);
    if !loop_roots.is_empty() {
        for (root, members) in &loop_roots {
            grouper.process_root(*root, members);
        }
        groups.source = StepSource::TfLoop { groups: grouper.names.len() };
    } else {
        grouper.group_roots(&roots);
        groups.source = StepSource::RootEvents { groups: grouper.names.len() };
        if step_num_fallback
            && !grouper.found_step_markers()
            && let Some((event_name, fallback_roots)) = step_num_roots(&forest)
        {
            grouper = Grouper::new(&forest);
            for &root in &fallback_roots {
                if grouper.group_of[root as usize] == NO_GROUP {
                    grouper.process_root(root, &[]);
                }
            }
            let found = grouper.names.len();
            grouper.group_roots(&roots);
            groups.source = StepSource::StepNumEvents { event_name, groups: found };
        }
    }
    if grouper.names.is_empty() {
        groups.source = StepSource::None;
    }

    for (node, &group) in grouper.group_of.iter().enumerate() {
        if group != NO_GROUP {
            let at = forest.nodes[node];
            groups.planes[at.plane as usize][at.line as usize][at.event as usize] = group;
        }
    }
    groups.names = grouper.names;
    groups.eager = eager_events(&forest);
    groups.step_name_events = grouper
        .step_name_nodes
        .iter()
        .map(|&n| {
            let at = forest.nodes[n as usize];
            (at.plane, at.line, at.event)
        })
        .collect();
    groups.step_name_events.sort_unstable();
    groups
}

struct Grouper<'f, 'h> {
    forest: &'f Forest<'h>,
    group_of: Vec<i64>,
    names: Vec<String>,
    /// Grouped user-defined roots (they get a `step_name`).
    step_name_nodes: Vec<u32>,
}

impl<'f, 'h> Grouper<'f, 'h> {
    fn new(forest: &'f Forest<'h>) -> Grouper<'f, 'h> {
        Grouper { forest, group_of: vec![NO_GROUP; forest.nodes.len()], names: Vec::new(), step_name_nodes: Vec::new() }
    }

    /// Groups `roots` (already in XProf's order) that still need it.
    fn group_roots(&mut self, roots: &[u32]) {
        for &root in roots {
            if self.needs_grouping(root) {
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
        self.group_of.iter().enumerate().any(|(node, &group)| {
            if group == NO_GROUP {
                return false;
            }
            let node = node as u32;
            let at = self.forest.nodes[node as usize];
            let plane = &self.forest.host.planes[at.plane as usize];
            plane.name.starts_with(names::DEVICE_PLANE_PREFIX) || is_explicit_step_marker(self.forest.name(node))
        })
    }

    fn needs_grouping(&self, root: u32) -> bool {
        if self.group_of[root as usize] != NO_GROUP {
            return false;
        }
        let level = self.forest.root_level[root as usize];
        self.forest.find_ancestor(root, false, |n| self.forest.root_level[n as usize] == level).is_none()
    }

    /// Gives `root` (and `extra` members) the next group id and spreads it.
    fn process_root(&mut self, root: u32, extra: &[u32]) {
        let group_id = self.names.len() as i64;
        self.propagate(root, group_id, extra);
        let name = self.forest.group_name(root, group_id);
        if !self.forest.is_implicit_root(root) {
            self.step_name_nodes.push(root);
        }
        self.names.push(name);
    }

    fn propagate(&mut self, root: u32, group_id: i64, extra: &[u32]) {
        let mut queue = VecDeque::from([root]);
        let mut seen = HashSet::from([root]);
        while let Some(node) = queue.pop_front() {
            if self.group_of[node as usize] != NO_GROUP {
                continue;
            }
            self.group_of[node as usize] = group_id;
            let children = self.forest.children.of(node);
            let extra_children: &[u32] = if node == root { extra } else { &[] };
            for &child in children.iter().chain(extra_children) {
                if seen.insert(child) {
                    queue.push_back(child);
                }
            }
        }
    }
}

/// XProf's `ProcessTensorFlowLoop`: iterations of TF loops become roots; each returns
/// the first `ExecutorState::Process` of an iteration and the iteration's other ones.
fn tf_loop_roots(forest: &Forest<'_>, tf_data_step_ids: &HashSet<i64>) -> Vec<(u32, Vec<u32>)> {
    let mut loops: HashMap<i64, HashMap<i64, Vec<u32>>> = HashMap::new();
    for node in 0..forest.nodes.len() as u32 {
        if forest.kinds[node as usize] != Kind::ExecutorStateProcess {
            continue;
        }
        let (Some(step_id), Some(iter_num)) = (forest.int_stat(node, STEP_ID), forest.int_stat(node, ITER_NUM)) else {
            continue;
        };
        if tf_data_step_ids.contains(&step_id) {
            continue;
        }
        loops.entry(step_id).or_default().entry(iter_num).or_default().push(node);
    }
    let mut iterations: Vec<(u32, Vec<u32>)> = Vec::new();
    for iterations_of_loop in loops.into_values() {
        if iterations_of_loop.len() == 1 && iterations_of_loop.contains_key(&0) {
            continue;
        }
        for members in iterations_of_loop.into_values() {
            let Some(&first) = members.iter().min_by_key(|&&n| (forest.start_ps[n as usize], n)) else { continue };
            let others = members.into_iter().filter(|&n| n != first).collect();
            iterations.push((first, others));
        }
    }
    iterations.sort_by_key(|(first, _)| (forest.start_ps[*first as usize], *first));
    iterations
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
    for node in 0..forest.nodes.len() as u32 {
        if forest.stat(node, STEP_NUM).and_then(xstats::as_int).is_some() {
            by_name.entry(forest.name(node)).or_default().push(node);
        }
    }
    let (name, mut nodes) = by_name.into_iter().max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))?;
    nodes.sort_by_key(|&n| (forest.start_ps[n as usize], n));
    Some((name.to_string(), nodes))
}

/// XProf's `MarkEagerlyExecuted{Gpu,Cpu}…`: kernels and TF ops under an
/// `EagerKernelExecute` whose `is_func` is 0.
fn eager_events(forest: &Forest<'_>) -> Vec<(u32, u32, u32)> {
    if !forest.kinds.contains(&Kind::EagerKernelExecute) {
        return Vec::new();
    }
    let mut eager = Vec::new();
    for node in 0..forest.nodes.len() as u32 {
        if !matches!(forest.kinds[node as usize], Kind::KernelExecute | Kind::TfOpRun) {
            continue;
        }
        let Some(execute) = forest.find_ancestor(node, true, |n| forest.kinds[n as usize] == Kind::EagerKernelExecute)
        else {
            continue;
        };
        if forest.int_stat(execute, IS_FUNC) == Some(0) {
            let at = forest.nodes[node as usize];
            eager.push((at.plane, at.line, at.event));
        }
    }
    eager.sort_unstable();
    eager
}
