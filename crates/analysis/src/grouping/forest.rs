//! The event forest grouping walks: one node per event of a host, intra-thread
//! nesting, and the inter-thread and producer/consumer edges XProf's `EventForest`
//! adds.
//!
//! Nodes are numbered in host order (plane, line, event), so a node's event is found
//! from its number alone and the forest keeps no per-event location or time column:
//! per event it holds a kind byte, the nesting parent and the end of its nesting
//! subtree (9 bytes; a node's nested children are read off the subtree ends, as the
//! nodes a thread nests under one event follow it), and the links, by rank, of the few
//! nodes that have any. Everything grouping needs about a few events (roots, loop
//! iterations, `step_num` carriers, link keys) is collected during the one pass over
//! the stats. That pass runs line by line, lines on every thread ([`LineFacts`]), and
//! the lines' facts are joined in node order, so the forest is the same whatever the
//! threads.

use std::cell::RefCell;
use std::collections::VecDeque;

use mlprof_model::fxhash::{FxMap, FxSet};
use mlprof_model::{Event, Host, Line, Plane, StatValue, names};
use rayon::prelude::*;

use crate::adjacency::Lists;
use crate::tf_op::{OpCategory, parse_tf_op};
use crate::xstats::{self, StatSlots};

/// The event types grouping cares about (XProf's `HostEventType` subset).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Kind {
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

/// The name of TensorFlow's eager executes ([`Kind::EagerKernelExecute`]).
pub(super) const EAGER_KERNEL_EXECUTE: &str = "EagerKernelExecute";

fn kind_of_name(name: &str) -> Kind {
    match name {
        "TraceContext" => Kind::TraceContext,
        "FunctionRun" => Kind::FunctionRun,
        "SessionRun" => Kind::SessionRun,
        "RunGraph" => Kind::RunGraph,
        "ExecutorState::Process" => Kind::ExecutorStateProcess,
        "IteratorGetNextOp::DoCompute" => Kind::IteratorGetNext,
        "IteratorGetNextAsOptionalOp::DoCompute" => Kind::IteratorGetNextAsOptional,
        EAGER_KERNEL_EXECUTE => Kind::EagerKernelExecute,
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
/// Slot of the `id` stat (the step id of TF executor and tf.data events).
const STEP_ID: usize = 7;
const ITER_NUM: usize = 8;
const CORRELATION_ID: usize = 9;
const GRAPH_TYPE: usize = 10;
const STEP_NUM: usize = 11;
/// Slot of the `is_func` stat.
pub(super) const IS_FUNC: usize = 12;

/// The values of [`STATS`] on one event (event stats over metadata stats).
type StatRow = xstats::StatRow<13>;

/// No node (a top-level event has no nesting parent).
const NONE: u32 = u32::MAX;

/// What tells contexts with the same id apart: the context type and the pid, as XProf
/// reads them (`int32`), and whether `_pid` or the plane's `process_id` gave a pid (0
/// without one). Fields in sort order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ContextScope {
    kind: i32,
    has_pid: bool,
    pid: i32,
}

/// One end of a producer/consumer context (stats `_pt/_p`, `_ct/_c`), 16 bytes: a TF
/// profile has about one per event. Fields are in sort order: the context id first,
/// as it tells almost all contexts apart on its own, then the scope and the side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ContextEnd {
    id: i64,
    /// The rank of the context's [`ContextScope`] among the host's, times two, plus 1
    /// for a consumer. While a line is read: the scope's index in that line's table.
    scope_and_side: u32,
    node: u32,
}

impl ContextEnd {
    fn same_context(&self, other: &ContextEnd) -> bool {
        (self.id, self.scope_and_side >> 1) == (other.id, other.scope_and_side >> 1)
    }

    fn is_consumer(&self) -> bool {
        self.scope_and_side & 1 == 1
    }
}

/// The producer/consumer contexts of a host (or, while it is read, of one line) and
/// the nodes at their ends.
#[derive(Default)]
struct Contexts {
    /// All ends; one sort groups them (cheaper than a hash map of lists: most contexts
    /// have one producer and one consumer).
    ends: Vec<ContextEnd>,
    /// The scopes the ends' `scope_and_side` count in: a line's own few, in the order
    /// met; the host's, sorted, once the lines are joined.
    scopes: Vec<ContextScope>,
}

impl Contexts {
    /// Records `node` as producer and/or consumer of its contexts (pid from `_pid` or
    /// the plane's `process_id`).
    fn add(&mut self, node: u32, row: &StatRow, plane_pid: Option<i64>) {
        let producer = row.int(PRODUCER_TYPE).zip(row.int(PRODUCER_ID));
        let consumer = row.int(CONSUMER_TYPE).zip(row.int(CONSUMER_ID));
        if producer.is_none() && consumer.is_none() {
            return;
        }
        let pid = row.int(CONSUMER_PID).or(plane_pid).map(|pid| pid as i32);
        for (end, is_consumer) in [(producer, false), (consumer, true)] {
            if let Some((kind, id)) = end {
                let scope = ContextScope { kind: kind as i32, has_pid: pid.is_some(), pid: pid.unwrap_or(0) };
                self.push_end(id, scope, is_consumer, node);
            }
        }
    }

    /// Appends one end of context `id` in `scope`, the scope numbered by its place in
    /// this line's table (added there when new).
    fn push_end(&mut self, id: i64, scope: ContextScope, is_consumer: bool, node: u32) {
        let index = match self.scopes.iter().rposition(|known| *known == scope) {
            Some(index) => index,
            None => {
                self.scopes.push(scope);
                self.scopes.len() - 1
            }
        };
        // A line has a handful of scopes (types times pids), far below 2^31.
        let scope_and_side = (index as u32) << 1 | u32::from(is_consumer);
        self.ends.push(ContextEnd { id, scope_and_side, node });
    }

    /// Joins the lines' contexts, each end's scope renumbered by its rank among all the
    /// lines' scopes (so ends sort as by the scopes themselves). The ends are gathered
    /// into the largest line's list, each other line's freed once moved, so the join
    /// holds the ends about once (their order is left to [`Contexts::edges`]' sort).
    fn join(mut lines: Vec<Contexts>) -> Contexts {
        let mut scopes: Vec<ContextScope> = lines.iter().flat_map(|line| line.scopes.iter().copied()).collect();
        scopes.sort_unstable();
        scopes.dedup();
        let renumber = |line_scopes: &[ContextScope], ends: &mut [ContextEnd]| {
            let ranks: Vec<u32> =
                line_scopes.iter().map(|scope| scopes.binary_search(scope).map_or(0, |rank| rank as u32)).collect();
            for end in ends {
                let rank = ranks.get((end.scope_and_side >> 1) as usize).copied().unwrap_or(0);
                end.scope_and_side = rank << 1 | (end.scope_and_side & 1);
            }
        };
        let total: usize = lines.iter().map(|line| line.ends.len()).sum();
        let largest = (0..lines.len()).max_by_key(|&at| lines[at].ends.len());
        let mut ends = match largest {
            Some(at) => {
                let Contexts { mut ends, scopes: line_scopes } = lines.swap_remove(at);
                renumber(&line_scopes, &mut ends);
                ends
            }
            None => Vec::new(),
        };
        ends.reserve_exact(total - ends.len());
        for mut line in lines {
            renumber(&line.scopes, &mut line.ends);
            ends.append(&mut line.ends);
        }
        Contexts { ends, scopes }
    }

    /// XProf's context-group edges: every producer of a context is a parent of every
    /// consumer of it, unless both sides have 64 or more events. Edges come per context
    /// in context order (by id, type, pid), producers and consumers each in node order.
    fn edges(mut self, edges: &mut Vec<(u32, u32)>) {
        // Ends are all distinct (a node is at most a producer and a consumer of one
        // context), so the order is the same on any number of threads. Sorted by id
        // alone first (an 8-byte key, cheap to compare), then each run of equal ids
        // (almost always a producer and a consumer) by the whole end: the order of one
        // full sort.
        if rayon::current_num_threads() > 1 {
            self.ends.par_sort_unstable_by_key(|end| end.id);
        } else {
            // The standard library's sort is the quicker on one thread.
            self.ends.sort_unstable_by_key(|end| end.id);
        }
        for same_id in self.ends.chunk_by_mut(|a, b| a.id == b.id) {
            same_id.sort_unstable();
        }
        for group in self.ends.chunk_by(ContextEnd::same_context) {
            let (producers, consumers) = group.split_at(group.partition_point(|end| !end.is_consumer()));
            if producers.len() >= 64 && consumers.len() >= 64 {
                continue;
            }
            for parent in producers {
                edges.extend(consumers.iter().map(|child| (parent.node, child.node)));
            }
        }
    }
}

/// What grouping needs of one plane, shared by its lines' passes.
struct PlaneFacts<'h> {
    plane: &'h Plane,
    slots: &'h StatSlots<13>,
    /// Grouping's kind of each event metadata.
    metadata_kinds: Vec<Kind>,
    is_host_plane: bool,
    /// The plane's `process_id`, the pid of contexts without `_pid`.
    pid: Option<i64>,
}

/// What one line's events give the forest besides their kinds and nesting parents
/// (written straight into the forest's columns), its nodes numbered from the line's
/// first; every list in node order.
#[derive(Default)]
struct LineFacts {
    roots: Vec<Root>,
    executor_runs: Vec<LinkEnd>,
    tf_data_step_ids: Vec<i64>,
    step_num_nodes: Vec<u32>,
    contexts: Contexts,
    links: Links,
}

impl LineFacts {
    /// One pass over `line` of `plane`, whose first event is node `first_node`: each
    /// event's kind and nesting parent (the innermost enclosing synchronous event on
    /// the thread), into `kinds` and `nest_parent` (one slot per event of the line),
    /// and the stats later passes read.
    fn of(plane: &PlaneFacts<'_>, line: &Line, first_node: u32, columns: LineColumns<'_>) -> LineFacts {
        let mut facts = LineFacts::default();
        // Open events on this thread: (node, start, end), innermost last.
        let mut open: Vec<(u32, i64, i64)> = Vec::new();
        let slots = columns.kinds.iter_mut().zip(columns.nest_parent.iter_mut());
        let mut last_node = first_node;
        for ((node, event), (kind_slot, parent_slot)) in (first_node..).zip(line.iter()).zip(slots) {
            last_node = node;
            let mut kind = plane.metadata_kinds.get(event.metadata_index() as usize).copied().unwrap_or(Kind::Other);
            let mut is_async = false;
            // An event without any listed stat adds nothing but an unflagged root; its
            // row (most of it a copy of empty values) is built only where it may not
            // be empty.
            if plane.slots.may_list(&event) {
                let row = plane.slots.row(plane.plane, &event);
                if kind == Kind::Other && row.int(CORRELATION_ID).is_some() {
                    kind = if plane.is_host_plane { Kind::KernelLaunch } else { Kind::KernelExecute };
                }
                if !row.is_empty() || kind == Kind::TraceContext {
                    facts.note(node, kind, &row, event.start_ps());
                    facts.contexts.add(node, &row, plane.pid);
                }
                is_async = row.int(IS_ASYNC).is_some_and(|v| v != 0);
            } else if kind == Kind::TraceContext {
                facts.note(node, kind, &plane.slots.row(plane.plane, &event), event.start_ps());
            }
            *kind_slot = kind;
            let mut parent = NONE;
            let at = (node - first_node) as usize;
            if let Some(end_slot) = columns.subtree_end.get_mut(at) {
                *end_slot = node;
            }
            if !is_async {
                let (start, end) = (event.start_ps(), event.end_ps());
                while let Some(&(open_node, open_start, open_end)) = open.last() {
                    if open_start <= start && end <= open_end {
                        parent = open_node;
                        break;
                    }
                    // Its subtree ended with the node before this one.
                    close(columns.subtree_end, first_node, open_node, node - 1);
                    open.pop();
                }
                open.push((node, start, end));
            }
            *parent_slot = parent;
        }
        for (open_node, _, _) in open {
            close(columns.subtree_end, first_node, open_node, last_node);
        }
        facts
    }

    /// Records what later passes need about one event, starting at `start_ps`, so they
    /// never rescan stats.
    fn note(&mut self, node: u32, kind: Kind, row: &StatRow, start_ps: i64) {
        let int = |slot: usize| row.int(slot);
        let mut level = int(IS_ROOT).unwrap_or(0);
        if level == 0 && kind == Kind::TraceContext && row.get(IS_ROOT).is_none() {
            level = 1;
        }
        if level > 0 {
            self.roots.push(Root { node, level, start_ps, step_id: int(STEP_ID) });
        }
        if int(STEP_NUM).is_some() {
            self.step_num_nodes.push(node);
        }
        let step = int(STEP_ID).zip(int(ITER_NUM)).map(|(id, iter)| LinkEnd { node, values: [id, iter] });
        let correlation = int(CORRELATION_ID).map(|id| LinkEnd { node, values: [id, 0] });
        match kind {
            Kind::ExecutorStateProcess => {
                self.executor_runs.extend(step);
            }
            Kind::IteratorGetNext => self.links.get_next.extend(step),
            Kind::IteratorGetNextAsOptional => self.links.get_next_as_optional.extend(step),
            Kind::KernelLaunch => self.links.launches.extend(correlation),
            Kind::KernelExecute => self.links.kernels.extend(correlation),
            Kind::TfDataCapturedFunction => {
                if let Some(id) = int(STEP_ID) {
                    self.tf_data_step_ids.push(id);
                }
            }
            _ => {}
        }
    }
}

/// Records `last` as the last node of `node`'s nesting subtree, in the subtree ends of
/// the line whose first node is `first_node`.
fn close(subtree_end: &mut [u32], first_node: u32, node: u32, last: u32) {
    if let Some(slot) = subtree_end.get_mut((node - first_node) as usize) {
        *slot = last;
    }
}

/// One line's slots in the forest's per-node columns.
struct LineColumns<'f> {
    kinds: &'f mut [Kind],
    nest_parent: &'f mut [u32],
    subtree_end: &'f mut [u32],
}

/// The first node of one line with events.
#[derive(Clone, Copy, Debug)]
struct LineStart {
    first_node: u32,
    plane: u32,
    line: u32,
}

/// Where a node's event lives: plane, line and event indices in the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct NodeRef {
    pub plane: u32,
    pub line: u32,
    pub event: u32,
}

/// A root event (stat `_r` > 0, or an unflagged `TraceContext`), with what ordering
/// and filtering the roots read of it, kept from the stats pass so that neither looks
/// the event up again (a 190 MB TF profile has 133,000 roots).
#[derive(Clone, Copy, Debug)]
pub(super) struct Root {
    pub node: u32,
    pub level: i64,
    /// The event's start in picoseconds.
    pub start_ps: i64,
    /// Its `id` stat (the step id), if an integer.
    pub step_id: Option<i64>,
}

/// An event that an inter-thread link can connect, with the values it is matched on
/// (`id`, `iter_num` for executor and iterator events; `correlation_id`, 0 for
/// kernel launches and kernels).
#[derive(Clone, Copy, Debug)]
pub(super) struct LinkEnd {
    pub node: u32,
    pub values: [i64; 2],
}

/// The queue and seen set of a breadth-first search over parents, kept between
/// searches so the many searches of one grouping allocate once.
#[derive(Default)]
struct AncestorSearch {
    queue: VecDeque<u32>,
    seen: FxSet<u32>,
}

impl AncestorSearch {
    fn run(
        &mut self,
        forest: &Forest<'_>,
        node: u32,
        include_self: bool,
        mut found: impl FnMut(u32) -> bool,
    ) -> Option<u32> {
        self.queue.clear();
        self.seen.clear();
        self.seen.insert(node);
        if include_self {
            self.queue.push_back(node);
        } else {
            for parent in forest.parents(node) {
                if self.seen.insert(parent) {
                    self.queue.push_back(parent);
                }
            }
        }
        while let Some(current) = self.queue.pop_front() {
            if found(current) {
                return Some(current);
            }
            for parent in forest.parents(current) {
                if self.seen.insert(parent) {
                    self.queue.push_back(parent);
                }
            }
        }
        None
    }
}

/// Where a walk up the nesting parents ended: with its answer, or at a node with link
/// parents, from which a breadth-first search goes on.
enum Chain {
    Ends(Option<u32>),
    Linked { node: u32, include_self: bool },
}

/// Lists of linked nodes (edges that are not nesting) of the nodes that have any, by
/// rank: the `r`-th such node in node order has the `r`-th list, in the order the
/// edges were given. A bit per node says which nodes have one, and a count per 64
/// nodes turns a node into its rank, so the lists take no sort to build, no search to
/// read, and memory per link rather than per node. The forest keeps two: each node's
/// link parents and each node's link children.
#[derive(Default)]
struct LinkLists {
    /// Bit `n` set: node `n` has a list.
    bits: Vec<u64>,
    /// Per word of `bits`, how many nodes before it have a list.
    ranks_before: Vec<u32>,
    /// By rank, the linked nodes.
    lists: Lists,
}

impl LinkLists {
    /// The lists of `node_count` nodes from `pairs` (`(node, linked node)`).
    fn new(node_count: usize, pairs: impl DoubleEndedIterator<Item = (u32, u32)> + Clone) -> LinkLists {
        let mut bits = vec![0u64; node_count.div_ceil(64)];
        for (node, _) in pairs.clone() {
            if let Some(word) = bits.get_mut(node as usize / 64) {
                *word |= 1 << (node % 64);
            }
        }
        let mut ranks_before = Vec::with_capacity(bits.len());
        let mut ranked = 0u32;
        for word in &bits {
            ranks_before.push(ranked);
            ranked += word.count_ones();
        }
        let mut links = LinkLists { bits, ranks_before, lists: Lists::default() };
        let by_rank = || pairs.clone().filter_map(|(node, linked)| Some((links.rank(node)?, linked)));
        links.lists = Lists::by_key(ranked as usize, by_rank);
        links
    }

    fn has(&self, node: u32) -> bool {
        self.bits.get(node as usize / 64).is_some_and(|word| word & (1 << (node % 64)) != 0)
    }

    /// The place of `node` among the nodes with a list; `None` if it has none.
    fn rank(&self, node: u32) -> Option<usize> {
        let at = node as usize / 64;
        let word = *self.bits.get(at)?;
        let bit = 1u64 << (node % 64);
        if word & bit == 0 {
            return None;
        }
        Some(*self.ranks_before.get(at)? as usize + (word & (bit - 1)).count_ones() as usize)
    }

    fn of(&self, node: u32) -> &[u32] {
        self.rank(node).map_or(&[], |rank| self.lists.of(rank))
    }
}

/// The event forest of one host.
pub(super) struct Forest<'h> {
    pub host: &'h Host,
    /// Per plane, the slots of [`STATS`].
    slots: Vec<StatSlots<13>>,
    lines: Vec<LineStart>,
    /// Grouping's kind of each node.
    pub kinds: Vec<Kind>,
    /// The enclosing event on the same thread, or [`NONE`].
    nest_parent: Vec<u32>,
    /// The last node of each node's nesting subtree (the node itself for a leaf): the
    /// nodes it encloses on its thread follow it, up to this one, with the thread's
    /// asynchronous events among them.
    subtree_end: Vec<u32>,
    /// Edges that are not nesting (inter-thread links, context groups), by child.
    link_parents: LinkLists,
    /// Edges that are not nesting, by parent.
    link_children: LinkLists,
    search: RefCell<AncestorSearch>,
    /// Root events in node order.
    pub roots: Vec<Root>,
    /// `ExecutorState::Process` events with both `id` and `iter_num`, in node order;
    /// once built, only those of step ids that loop ([`Forest::keep_looping_runs`]).
    pub executor_runs: Vec<LinkEnd>,
    /// The `id` of each tf.data captured-function run that has one.
    pub tf_data_step_ids: FxSet<i64>,
    /// Events with an integer `step_num`, in node order.
    pub step_num_nodes: Vec<u32>,
}

impl<'h> Forest<'h> {
    /// Number of nodes (events of the host).
    pub fn len(&self) -> u32 {
        self.kinds.len() as u32
    }

    /// The plane, line and event of `node`.
    pub fn locate(&self, node: u32) -> NodeRef {
        let at = self.lines.partition_point(|l| l.first_node <= node).saturating_sub(1);
        match self.lines.get(at) {
            Some(l) => NodeRef { plane: l.plane, line: l.line, event: node - l.first_node },
            None => NodeRef { plane: 0, line: 0, event: node },
        }
    }

    /// The nodes of each line with events: `(plane, line, first node, event count)`.
    pub fn line_ranges(&self) -> impl Iterator<Item = (usize, usize, u32, usize)> + '_ {
        self.lines.iter().map(|l| {
            let count = self.host.planes[l.plane as usize].lines[l.line as usize].len();
            (l.plane as usize, l.line as usize, l.first_node, count)
        })
    }

    fn plane_and_event(&self, node: u32) -> Option<(&'h Plane, Event<'h>)> {
        let at = self.locate(node);
        let plane = self.host.planes.get(at.plane as usize)?;
        let event = plane.lines.get(at.line as usize)?.event(at.event as usize)?;
        Some((plane, event))
    }

    /// The root level of `node` (0 when it is not a root).
    pub fn root_level(&self, node: u32) -> i64 {
        self.roots.binary_search_by_key(&node, |root| root.node).map_or(0, |at| self.roots[at].level)
    }

    fn stat(&self, node: u32, stat: usize) -> Option<StatValue> {
        let (plane, event) = self.plane_and_event(node)?;
        self.slots[self.locate(node).plane as usize].row(plane, &event).get(stat)
    }

    /// Integer stat number `stat` (an index in [`STATS`]) of `node`.
    pub fn int_stat(&self, node: u32, stat: usize) -> Option<i64> {
        self.stat(node, stat).and_then(xstats::as_int)
    }

    fn str_stat(&self, node: u32, stat: usize) -> Option<&'h str> {
        let (plane, event) = self.plane_and_event(node)?;
        self.slots[self.locate(node).plane as usize].row(plane, &event).str(stat, plane, &event)
    }

    /// The event name of `node`.
    pub fn name(&self, node: u32) -> &'h str {
        self.plane_and_event(node).map(|(plane, event)| xstats::event_name(plane, &event)).unwrap_or("")
    }

    /// Start of `node`'s event in picoseconds (relative to the profile start).
    pub fn start_ps(&self, node: u32) -> i64 {
        self.plane_and_event(node).map_or(0, |(_, event)| event.start_ps())
    }

    fn line_name(&self, node: u32) -> &'h str {
        let at = self.locate(node);
        self.host.planes.get(at.plane as usize).and_then(|p| p.lines.get(at.line as usize)).map_or("", |l| &l.name)
    }

    /// The nodes `node` hangs under: its nesting parent first, then link parents.
    fn parents(&self, node: u32) -> impl Iterator<Item = u32> + '_ {
        let nest = self.nest_parent.get(node as usize).copied().filter(|&p| p != NONE);
        nest.into_iter().chain(self.link_parents.of(node).iter().copied())
    }

    /// The nodes under `node`: nested events in order, then linked ones.
    pub fn children(&self, node: u32) -> impl Iterator<Item = u32> + '_ {
        self.nested_children(node).chain(self.link_children.of(node).iter().copied())
    }

    /// The events `node` encloses directly on its thread, in order: from the node after
    /// it to the end of its subtree, each child's own subtree skipped (an asynchronous
    /// event in between is a leaf and no child).
    fn nested_children(&self, node: u32) -> impl Iterator<Item = u32> + '_ {
        // Counted in u64 so that each step moves strictly forward, whatever the ends hold.
        let end_of = |at: u64| self.subtree_end.get(at as usize).map_or(at, |&end| u64::from(end).max(at));
        let last = end_of(u64::from(node));
        let mut next = u64::from(node) + 1;
        std::iter::from_fn(move || {
            while next <= last {
                let current = next;
                next = end_of(current) + 1;
                if self.nest_parent.get(current as usize) == Some(&node) {
                    return u32::try_from(current).ok();
                }
            }
            None
        })
    }

    /// Builds nodes, intra-thread nesting, inter-thread and context-group edges.
    pub fn build(host: &'h Host) -> Forest<'h> {
        let slots: Vec<StatSlots<13>> = host.planes.iter().map(|plane| StatSlots::new(plane, STATS)).collect();
        let events: usize = host.planes.iter().flat_map(|p| &p.lines).map(|l| l.len()).sum();
        let mut forest = Forest {
            host,
            slots,
            lines: Vec::new(),
            kinds: vec![Kind::Other; events],
            // The line pass writes every node's slot of these two, so they start as
            // fresh zeroed memory instead of being filled first (50 MB in a TF profile).
            nest_parent: vec![0; events],
            subtree_end: vec![0; events],
            link_parents: LinkLists::default(),
            link_children: LinkLists::default(),
            search: RefCell::default(),
            roots: Vec::new(),
            executor_runs: Vec::new(),
            tf_data_step_ids: FxSet::default(),
            step_num_nodes: Vec::new(),
        };
        // Every line's nodes on their own (lines on every thread), joined in node order.
        let planes: Vec<PlaneFacts> = host
            .planes
            .iter()
            .zip(&forest.slots)
            .map(|(plane, slots)| PlaneFacts {
                plane,
                slots,
                metadata_kinds: plane.event_metadata.iter().map(|m| kind_of_name(&m.name)).collect(),
                is_host_plane: plane.name == names::HOST_PLANE,
                pid: plane.plane_stat("process_id").and_then(xstats::as_int),
            })
            .collect();
        let mut jobs: Vec<(&PlaneFacts, &Line, u32, LineColumns)> = Vec::new();
        let mut next_node = 0u32;
        let (mut kinds, mut nest_parent, mut subtree_end) =
            (forest.kinds.as_mut_slice(), forest.nest_parent.as_mut_slice(), forest.subtree_end.as_mut_slice());
        for (plane_index, plane) in planes.iter().enumerate() {
            for (line_index, line) in plane.plane.lines.iter().enumerate() {
                if line.is_empty() {
                    continue;
                }
                forest.lines.push(LineStart {
                    first_node: next_node,
                    plane: plane_index as u32,
                    line: line_index as u32,
                });
                let (line_kinds, rest_kinds) = std::mem::take(&mut kinds).split_at_mut(line.len());
                let (line_parents, rest_parents) = std::mem::take(&mut nest_parent).split_at_mut(line.len());
                let (line_ends, rest_ends) = std::mem::take(&mut subtree_end).split_at_mut(line.len());
                (kinds, nest_parent, subtree_end) = (rest_kinds, rest_parents, rest_ends);
                let columns = LineColumns { kinds: line_kinds, nest_parent: line_parents, subtree_end: line_ends };
                jobs.push((plane, line, next_node, columns));
                // Node numbers fit u32, as the rest of the forest assumes.
                next_node += line.len() as u32;
            }
        }
        let lines: Vec<LineFacts> = jobs
            .into_par_iter()
            .map(|(plane, line, first_node, columns)| LineFacts::of(plane, line, first_node, columns))
            .collect();
        drop(planes);
        let mut line_contexts = Vec::with_capacity(lines.len());
        let mut links = Links::default();
        // Each list is reserved whole: the executor runs alone are 15 MB in a TF profile.
        forest.roots.reserve_exact(lines.iter().map(|line| line.roots.len()).sum());
        forest.executor_runs.reserve_exact(lines.iter().map(|line| line.executor_runs.len()).sum());
        for line in lines {
            forest.roots.extend(line.roots);
            forest.executor_runs.extend(line.executor_runs);
            forest.tf_data_step_ids.extend(line.tf_data_step_ids);
            forest.step_num_nodes.extend(line.step_num_nodes);
            line_contexts.push(line.contexts);
            links.append(line.links);
        }
        let contexts = Contexts::join(line_contexts);
        let mut extra_edges = links.edges(&forest.executor_runs);
        forest.keep_looping_runs();
        contexts.edges(&mut extra_edges);
        forest.link_children = LinkLists::new(events, extra_edges.iter().copied());
        forest.link_parents = LinkLists::new(events, extra_edges.iter().map(|&(parent, child)| (child, parent)));
        forest
    }

    /// Keeps only the executor runs XProf's TF loop rule reads: those of step ids with a
    /// run past iteration 0 (tf.data functions' ids left out). The others, a function's
    /// runs (15 MB in a TF profile), are freed before the link lists are built, where
    /// grouping's memory peaks.
    fn keep_looping_runs(&mut self) {
        let looping: FxSet<i64> = self
            .executor_runs
            .iter()
            .filter(|run| run.values[1] != 0 && !self.tf_data_step_ids.contains(&run.values[0]))
            .map(|run| run.values[0])
            .collect();
        self.executor_runs.retain(|run| looping.contains(&run.values[0]));
        self.executor_runs.shrink_to_fit();
    }

    /// Breadth-first search over parents (optionally from `node` itself) for the first
    /// node satisfying `found`.
    pub fn find_ancestor(&self, node: u32, include_self: bool, mut found: impl FnMut(u32) -> bool) -> Option<u32> {
        match self.nesting_chain(node, include_self, &mut found) {
            Chain::Ends(result) => result,
            Chain::Linked { node, include_self } => self.search_ancestors(node, include_self, found),
        }
    }

    /// [`Forest::find_ancestor`] for many nodes with one `found`: the searches past the
    /// first linked node of each chain are kept in `cache`, since many events (every op
    /// of one executor run) reach the same one.
    pub fn find_ancestor_cached(
        &self,
        node: u32,
        include_self: bool,
        mut found: impl FnMut(u32) -> bool,
        cache: &mut FxMap<(u32, bool), Option<u32>>,
    ) -> Option<u32> {
        match self.nesting_chain(node, include_self, &mut found) {
            Chain::Ends(result) => result,
            Chain::Linked { node, include_self } => {
                *cache.entry((node, include_self)).or_insert_with(|| self.search_ancestors(node, include_self, found))
            }
        }
    }

    /// Walks the chain of nesting parents from `node` while it has no link parent.
    /// Most events hang under such a chain only, and a breadth-first search of a chain
    /// is the chain itself. Where a node with link parents is reached, the search from
    /// `node` goes on as a search from it: the nodes before it have one parent each and
    /// failed `found`, so they change neither the order nor the result.
    fn nesting_chain(&self, node: u32, include_self: bool, found: &mut impl FnMut(u32) -> bool) -> Chain {
        let mut current = node;
        let mut check = include_self;
        loop {
            if self.has_extra_parents(current) {
                return Chain::Linked { node: current, include_self: check };
            }
            if check && found(current) {
                return Chain::Ends(Some(current));
            }
            match self.nest_parent.get(current as usize) {
                Some(&parent) if parent != NONE => current = parent,
                _ => return Chain::Ends(None),
            }
            check = true;
        }
    }

    fn has_extra_parents(&self, node: u32) -> bool {
        self.link_parents.has(node)
    }

    /// The general case of [`Forest::find_ancestor`]: a breadth-first search, with the
    /// forest's reusable queue and seen set (a fresh pair if `found` itself searches).
    fn search_ancestors(&self, node: u32, include_self: bool, found: impl FnMut(u32) -> bool) -> Option<u32> {
        match self.search.try_borrow_mut() {
            Ok(mut search) => search.run(self, node, include_self, found),
            Err(_) => AncestorSearch::default().run(self, node, include_self, found),
        }
    }

    fn context_int(&self, node: u32, stat: usize) -> Option<i64> {
        let holder = self.find_ancestor(node, true, |n| self.stat(n, stat).is_some())?;
        self.int_stat(holder, stat)
    }

    /// Whether `node` is a root XProf names without the event name (session/function
    /// runs, executor runs, and the derived step lines).
    pub fn is_implicit_root(&self, node: u32) -> bool {
        matches!(
            self.kinds[node as usize],
            Kind::FunctionRun | Kind::SessionRun | Kind::RunGraph | Kind::ExecutorStateProcess
        ) || matches!(self.line_name(node), "Steps" | "Sparse Core Steps" | "XLA Modules" | "Sparse Core Modules")
    }

    /// The name XProf gives the group rooted at `node`: `<graph_type or event name>
    /// <iter_num | step_num | group id>`.
    pub fn group_name(&self, node: u32, group_id: i64) -> String {
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

/// The child ends of XProf's `ConnectInterThread` links and the kernel launches,
/// collected in node order (executor runs live in [`Forest::executor_runs`]).
#[derive(Default)]
struct Links {
    get_next: Vec<LinkEnd>,
    get_next_as_optional: Vec<LinkEnd>,
    launches: Vec<LinkEnd>,
    kernels: Vec<LinkEnd>,
}

impl Links {
    /// Appends `other`'s ends after these.
    fn append(&mut self, other: Links) {
        self.get_next.extend(other.get_next);
        self.get_next_as_optional.extend(other.get_next_as_optional);
        self.launches.extend(other.launches);
        self.kernels.extend(other.kernels);
    }

    /// `(parent, child)` edges: `ExecutorState::Process` → `IteratorGetNext…` on the
    /// same (`id`, `iter_num`), kernel launch → kernel on the same `correlation_id`.
    /// When several parents share values, the last one wins (as in XProf). Edges come
    /// in children order. `executors` are the `ExecutorState::Process` ends
    /// ([`Forest::executor_runs`]).
    fn edges(&self, executors: &[LinkEnd]) -> Vec<(u32, u32)> {
        let mut edges = Vec::new();
        let pairs: [(&[LinkEnd], &[LinkEnd]); 3] =
            [(executors, &self.get_next), (executors, &self.get_next_as_optional), (&self.launches, &self.kernels)];
        for (parents, children) in pairs {
            if parents.is_empty() || children.is_empty() {
                continue;
            }
            // The values of the smaller side are hashed: a TF profile has hundreds of
            // thousands of executor runs and a few thousand `GetNext` calls.
            let mut last_parent: FxMap<[i64; 2], u32> = FxMap::default();
            if children.len() < parents.len() {
                last_parent.reserve(children.len());
                last_parent.extend(children.iter().map(|end| (end.values, NONE)));
                for end in parents {
                    if let Some(parent) = last_parent.get_mut(&end.values) {
                        *parent = end.node;
                    }
                }
            } else {
                last_parent.reserve(parents.len());
                last_parent.extend(parents.iter().map(|end| (end.values, end.node)));
            }
            edges.extend(children.iter().filter_map(|end| {
                let parent = *last_parent.get(&end.values)?;
                (parent != NONE).then_some((parent, end.node))
            }));
        }
        edges
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlprof_model::{Line, PlaneBuilder, SourceFormat};

    /// Each node's link parents are its edges' parents in edge order, whatever the
    /// order of the children, for nodes on both sides of word boundaries.
    #[test]
    fn link_parents_are_the_edges_by_child_in_edge_order() {
        let edges: Vec<(u32, u32)> =
            vec![(5, 130), (1, 2), (7, 63), (3, 2), (9, 64), (4, 130), (0, 199), (8, 2), (6, 63), (2, 0)];
        let lists = LinkLists::new(200, edges.iter().map(|&(parent, child)| (child, parent)));
        for node in 0..200u32 {
            let want: Vec<u32> = edges.iter().filter(|&&(_, child)| child == node).map(|&(parent, _)| parent).collect();
            assert_eq!(lists.of(node), want.as_slice(), "node {node}");
            assert_eq!(lists.has(node), !want.is_empty(), "node {node}");
        }
        assert!(LinkLists::new(10, std::iter::empty()).of(3).is_empty());
    }

    /// A launch links to the kernels of its correlation id, the last launch of an id
    /// winning, whichever side is the smaller; edges come in kernel order.
    #[test]
    fn link_edges_join_on_values_and_the_last_parent_wins() {
        let end = |node: u32, id: i64| LinkEnd { node, values: [id, 0] };
        let mut links = Links { launches: vec![end(1, 5), end(2, 5), end(3, 6)], ..Links::default() };
        links.kernels = vec![end(10, 5), end(11, 7)];
        assert_eq!(links.edges(&[]), [(2, 10)], "fewer kernels than launches");
        links.launches = vec![end(1, 5)];
        links.kernels = vec![end(10, 5), end(11, 6), end(12, 5)];
        assert_eq!(links.edges(&[]), [(1, 10), (1, 12)], "more kernels than launches");
        let runs = [end(20, 8), end(21, 8)];
        links.get_next = vec![end(30, 8)];
        assert_eq!(links.edges(&runs), [(21, 30), (1, 10), (1, 12)], "executor runs first");
    }

    fn event(line: &mut Line, metadata: u32, start_ps: i64, duration_ps: i64, stats: &[(u32, StatValue)]) {
        for &(key, value) in stats {
            line.stats.push(key, value);
        }
        line.push_event(metadata, start_ps, duration_ps);
    }

    /// Host plane: an empty line, then `train` (root) enclosing two launches with
    /// correlation ids 1 and 1 (the later one wins the link), then an async event.
    /// GPU plane: an empty line, then one kernel with correlation id 1.
    fn host() -> Host {
        let mut cpu = PlaneBuilder::new(1, names::HOST_PLANE);
        let train = cpu.event_metadata("train", 0, |_| Vec::new());
        let launch = cpu.event_metadata("cudaLaunchKernel", 0, |_| Vec::new());
        let [root, correlation, is_async] = ["_r", "correlation_id", "_a"].map(|n| cpu.stat_key(n));
        cpu.push_line(Line::new(0, "empty"));
        let mut python = Line::new(1, "python");
        event(&mut python, train, 0, 100, &[(root, StatValue::Int(1))]);
        event(&mut python, launch, 10, 10, &[(correlation, StatValue::Int(1))]);
        event(&mut python, launch, 30, 10, &[(correlation, StatValue::Int(1))]);
        event(&mut python, launch, 50, 10, &[(is_async, StatValue::Int(1))]);
        cpu.push_line(python);
        let mut gpu = PlaneBuilder::new(2, "/device:GPU:0");
        let kernel = gpu.event_metadata("gemm", 0, |_| Vec::new());
        let correlation = gpu.stat_key("correlation_id");
        gpu.push_line(Line::new(0, "empty"));
        let mut stream = Line::new(7, "Stream #7");
        event(&mut stream, kernel, 40, 5, &[(correlation, StatValue::Int(1))]);
        gpu.push_line(stream);
        let mut host = Host::new("h", "h.xplane.pb", SourceFormat::Xspace);
        host.planes.push(cpu.finish());
        host.planes.push(gpu.finish());
        host
    }

    /// The nested children read off the subtree ends are, for every node, the nodes
    /// whose nesting parent it is, in order: on two lines of nested, overlapping, equal
    /// and asynchronous events, the async ones amid the subtrees they fall in.
    #[test]
    fn nested_children_are_the_nodes_nested_directly_under_each_node() {
        let mut cpu = PlaneBuilder::new(1, names::HOST_PLANE);
        let op = cpu.event_metadata("op", 0, |_| Vec::new());
        let is_async = cpu.stat_key("_a");
        // (start, duration, async): a root with a deep chain, siblings, an async event
        // inside a subtree, one that overlaps its predecessor without nesting, and
        // events equal in time (the later nests in the earlier).
        let spans: [&[(i64, i64, bool)]; 2] = [
            &[
                (0, 100, false),
                (5, 50, false),
                (6, 40, false),
                (7, 30, true),
                (8, 10, false),
                (20, 5, false),
                (60, 30, false),
                (61, 2, true),
                (95, 10, false),
                (120, 10, false),
                (120, 10, false),
            ],
            &[(0, 10, false), (2, 3, false), (3, 1, false), (4, 20, true), (5, 5, false), (50, 1, false)],
        ];
        for (n, line_spans) in spans.iter().enumerate() {
            let mut line = Line::new(n as i64 + 1, "thread");
            for &(start, duration, asynchronous) in line_spans.iter() {
                let stats: &[(u32, StatValue)] = if asynchronous { &[(is_async, StatValue::Int(1))] } else { &[] };
                event(&mut line, op, start, duration, stats);
            }
            cpu.push_line(line);
        }
        let mut host = Host::new("h", "h.xplane.pb", SourceFormat::Xspace);
        host.planes.push(cpu.finish());
        let forest = Forest::build(&host);
        let mut nested = 0;
        for node in 0..forest.len() {
            let want: Vec<u32> = (0..forest.len()).filter(|&c| forest.nest_parent[c as usize] == node).collect();
            assert_eq!(forest.nested_children(node).collect::<Vec<_>>(), want, "node {node}");
            nested += want.len();
        }
        assert_eq!(nested, 9, "the spans nest as drawn");
    }

    #[test]
    fn producers_become_parents_of_the_consumers_of_their_context() {
        let mut cpu = PlaneBuilder::new(1, names::HOST_PLANE);
        let op = cpu.event_metadata("op", 0, |_| Vec::new());
        let [pt, p, ct, c] = ["_pt", "_p", "_ct", "_c"].map(|n| cpu.stat_key(n));
        let mut producer_thread = Line::new(1, "producer");
        event(&mut producer_thread, op, 0, 10, &[(pt, StatValue::Int(1)), (p, StatValue::Int(5))]);
        event(&mut producer_thread, op, 20, 10, &[(pt, StatValue::Int(1)), (p, StatValue::Int(6))]);
        cpu.push_line(producer_thread);
        let mut consumer_thread = Line::new(2, "consumer");
        event(&mut consumer_thread, op, 40, 10, &[(ct, StatValue::Int(1)), (c, StatValue::Int(6))]);
        event(&mut consumer_thread, op, 60, 10, &[(ct, StatValue::Int(2)), (c, StatValue::Int(5))]);
        cpu.push_line(consumer_thread);
        let mut host = Host::new("h", "h.xplane.pb", SourceFormat::Xspace);
        host.planes.push(cpu.finish());
        let forest = Forest::build(&host);
        // Context (1, 6) joins node 1 to node 2; (1, 5) and (2, 5) have one end each.
        assert_eq!(forest.children(0).count(), 0);
        assert_eq!(forest.children(1).collect::<Vec<_>>(), [2]);
        assert_eq!(forest.parents(2).collect::<Vec<_>>(), vec![1]);
        assert_eq!(forest.parents(3).count(), 0);
    }

    #[test]
    fn searches_up_a_nesting_chain_find_what_a_full_search_finds() {
        // Kernel 4 hangs under launch 2 by a link; launch 2 under `train` 0 by nesting.
        let host = host();
        let forest = Forest::build(&host);
        let mut cache = FxMap::default();
        for target in 0..forest.len() {
            for node in 0..forest.len() {
                for include_self in [false, true] {
                    let full = AncestorSearch::default().run(&forest, node, include_self, |n| n == target);
                    assert_eq!(forest.find_ancestor(node, include_self, |n| n == target), full, "{node} -> {target}");
                    let cached = forest.find_ancestor_cached(node, include_self, |n| n == target, &mut cache);
                    assert_eq!(cached, full, "{node} -> {target}, cached");
                }
            }
            cache.clear();
        }
        assert_eq!(forest.find_ancestor(4, false, |n| n == 0), Some(0));
    }

    #[test]
    fn a_context_end_takes_16_bytes() {
        assert_eq!(std::mem::size_of::<ContextEnd>(), 16);
    }

    /// Lines number their scopes in the order met; joined, the ends sort exactly as by
    /// (id, type, has pid, pid, consumer side, node), and edges pair the same ends.
    #[test]
    fn joined_context_ends_sort_as_by_their_scopes() {
        let scope = |kind, pid: Option<i32>| ContextScope { kind, has_pid: pid.is_some(), pid: pid.unwrap_or(0) };
        let scopes = [scope(3, Some(9)), scope(-1, None), scope(3, None), scope(0, Some(-4)), scope(3, Some(2))];
        // (line, id, scope, consumer, node): each line lists its scopes in its own order.
        let mut all = Vec::new();
        let mut lines: Vec<Contexts> = Vec::new();
        for line in 0..3u32 {
            let mut contexts = Contexts::default();
            for k in 0..40u32 {
                let node = line * 100 + k;
                let id = i64::from((k * 7 + line) % 5) - 2;
                let scope = scopes[((k * 3 + line * 2) % 5) as usize];
                let is_consumer = (k + line) % 3 == 0;
                contexts.push_end(id, scope, is_consumer, node);
                all.push((id, scope, is_consumer, node));
            }
            lines.push(contexts);
        }
        let joined = Contexts::join(lines);
        assert!(joined.scopes.is_sorted());
        let mut got: Vec<_> = joined
            .ends
            .iter()
            .map(|end| (end.id, joined.scopes[(end.scope_and_side >> 1) as usize], end.is_consumer(), end.node))
            .collect();
        got.sort_unstable_by_key(|&(id, scope, side, node)| (id, scope, side, node));
        let mut sorted_ends = joined.ends.clone();
        sorted_ends.sort_unstable();
        let by_ends: Vec<_> = sorted_ends
            .iter()
            .map(|end| (end.id, joined.scopes[(end.scope_and_side >> 1) as usize], end.is_consumer(), end.node))
            .collect();
        all.sort_unstable_by_key(|&(id, scope, side, node)| (id, scope, side, node));
        assert_eq!(got, all);
        assert_eq!(by_ends, all);
        let mut edges = Vec::new();
        joined.edges(&mut edges);
        let mut expected = Vec::new();
        for group in all.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
            for producer in group.iter().filter(|end| !end.2) {
                expected.extend(group.iter().filter(|end| end.2).map(|consumer| (producer.3, consumer.3)));
            }
        }
        assert!(!expected.is_empty());
        assert_eq!(edges, expected);
    }

    #[test]
    fn nodes_are_numbered_in_host_order_and_located_across_empty_lines() {
        let host = host();
        let forest = Forest::build(&host);
        assert_eq!(forest.len(), 5);
        assert_eq!(forest.locate(0), NodeRef { plane: 0, line: 1, event: 0 });
        assert_eq!(forest.locate(3), NodeRef { plane: 0, line: 1, event: 3 });
        assert_eq!(forest.locate(4), NodeRef { plane: 1, line: 1, event: 0 });
        assert_eq!(forest.name(4), "gemm");
        assert_eq!(forest.start_ps(1), 10);
        let ranges: Vec<_> = forest.line_ranges().collect();
        assert_eq!(ranges, vec![(0, 1, 0, 4), (1, 1, 4, 1)]);
    }

    #[test]
    fn nesting_links_and_roots_are_collected_in_one_pass() {
        let host = host();
        let forest = Forest::build(&host);
        // The async event nests under nothing; the launches nest under `train`.
        assert_eq!(forest.children(0).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(forest.parents(3).count(), 0);
        // Both launches carry correlation id 1: the last one is the kernel's parent.
        assert_eq!(forest.children(2).collect::<Vec<_>>(), [4]);
        assert_eq!(forest.parents(4).collect::<Vec<_>>(), vec![2]);
        assert_eq!(forest.kinds[4], Kind::KernelExecute);
        assert_eq!(forest.roots.iter().map(|r| (r.node, r.level)).collect::<Vec<_>>(), vec![(0, 1)]);
        assert_eq!(forest.root_level(0), 1);
        assert_eq!(forest.root_level(1), 0);
        assert_eq!(forest.find_ancestor(4, false, |n| forest.root_level(n) > 0), Some(0));
    }
}
