//! The event forest of one host plane, reduced to what the tf.data analysis walks:
//! iterator events, their direct children, and the cross-thread edges from a consumer
//! iterator to the producer iterators that made the elements it consumed.
//!
//! The one design decision to know: edges follow XProf's `EventForest` exactly —
//! intra-thread nesting is a stack walk over each line sorted by (start, longer
//! first), skipping events marked `is_async`; a `*Consume` event's consumer iterator
//! is its enclosing event, and a `*Produce` event's producer iterator is its first
//! iterator child. Only the edges this analysis reads are stored. XProf's generic
//! producer/consumer context links (`_pt`/`_p`/`_ct`/`_c` stats) are not built: they
//! never join two iterator events, and a consumer's enclosing event is always its
//! first parent, so the tf.data walk does not see them.

use mlprof_model::fxhash::FxMap;
use mlprof_model::{Event, Line, Plane, StatValue};

use crate::adjacency::Lists;
use crate::xstats::{self, StatKeys};

/// Stat names read by this module, in [`StatKeys`] order.
const STAT_NAMES: [&str; 4] = ["id", "parent_id", "element_id", "is_async"];
const ID: usize = 0;
const PARENT_ID: usize = 1;
const ELEMENT_ID: usize = 2;
const IS_ASYNC: usize = 3;

/// The asynchronous tf.data kernels whose producer and consumer TraceMes XProf links,
/// in the order XProf processes them.
const PRODUCER_CONSUMER_KINDS: [&str; 6] =
    ["Prefetch", "ParallelInterleave", "ParallelMap", "MapAndBatch", "ParseExample", "ParallelBatch"];

/// What an event is, as far as this analysis cares (XProf's `HostEventType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Anything else.
    Other,
    /// An `Iterator::…` event (XProf `kIterator`).
    Iterator,
    /// `Iterator::Prefetch::Generator`, the second iterator of a device input pipeline.
    DeviceSecondIterator,
    /// `<Kernel>Produce` for kernel `PRODUCER_CONSUMER_KINDS[i]`.
    Produce(u8),
    /// `<Kernel>Consume` for kernel `PRODUCER_CONSUMER_KINDS[i]`.
    Consume(u8),
}

impl Kind {
    fn of(name: &str) -> Kind {
        if name == "Iterator::Prefetch::Generator" {
            return Kind::DeviceSecondIterator;
        }
        if name == "Iterator" || is_tf_data_name(name) {
            return Kind::Iterator;
        }
        for (i, kernel) in PRODUCER_CONSUMER_KINDS.iter().enumerate() {
            if let Some(rest) = name.strip_prefix(kernel) {
                if rest == "Produce" {
                    return Kind::Produce(i as u8);
                }
                if rest == "Consume" {
                    return Kind::Consume(i as u8);
                }
            }
        }
        Kind::Other
    }

    fn is_iterator(self) -> bool {
        matches!(self, Kind::Iterator | Kind::DeviceSecondIterator)
    }
}

/// Whether XProf's `ParseTfOpFullname` puts `name` in the tf.data category: the part
/// before the first `:` is `Iterator` and a `:` follows.
fn is_tf_data_name(name: &str) -> bool {
    name.split_once(':').is_some_and(|(head, _)| head == "Iterator")
}

/// XProf's `XStatVisitor::IntValue`: the `int64` payload, 0 for any other kind (an id
/// stored as `uint64` reads as 0, which XProf then reports as iterator id 0).
pub(super) fn int_value(value: StatValue) -> i64 {
    match value {
        StatValue::Int(v) => v,
        _ => 0,
    }
}

/// One event of the host plane.
#[derive(Clone, Debug)]
pub(super) struct Node {
    /// Start (ps, relative to the profile start).
    pub start_ps: i64,
    /// Duration (ps) as recorded.
    pub duration_ps: i64,
    /// Event-metadata index (for the name).
    pub metadata: u32,
    /// Index into [`Forest::ids`] of the event's id stats, or [`NO_IDS`] when it has
    /// none of them (most events: kept out of the node, which exists for every event).
    ids: u32,
}

/// [`Node::ids`] of an event without `id`, `parent_id` and `element_id` stats.
const NO_IDS: u32 = u32::MAX;

/// The node index of an event that is not a node (not a tf.data event).
const NO_NODE: u32 = u32::MAX;

/// An event still open in the nesting walk of one line.
struct Open {
    start_ps: i64,
    /// Start plus the duration (a negative duration counts as 0).
    end_ps: i64,
    kind: Kind,
    /// Its node, or [`NO_NODE`].
    node: u32,
}

/// The events of `line` in XProf's visiting order: by start, longer first on ties,
/// stored order last (a stable sort's order). Most lines are stored in it already.
fn visiting_order<'l>(line: &'l Line) -> impl Iterator<Item = Event<'l>> + 'l {
    let base_ps = line.start_ps();
    let columns = &line.events;
    let key =
        |i: usize| (base_ps.saturating_add(columns.offset_ps.at(i)), std::cmp::Reverse(columns.duration_ps.at(i)));
    let mut keys = (0..line.len()).map(key);
    let in_order = keys
        .next()
        .is_none_or(|first| keys.try_fold(first, |previous, next| (previous <= next).then_some(next)).is_some());
    // A stable sort of the indices keeps stored order on ties; it is close to linear
    // on the nearly sorted lines profilers write.
    let order: Vec<u32> = if in_order {
        Vec::new()
    } else {
        let mut order: Vec<u32> = (0..line.len() as u32).collect();
        order.sort_by_key(|&i| key(i as usize));
        order
    };
    (0..line.len()).filter_map(move |position| {
        let stored = if in_order { Some(position) } else { order.get(position).map(|&i| i as usize) };
        stored.and_then(|i| line.event(i))
    })
}

/// The id stats of one event.
#[derive(Clone, Copy, Debug)]
struct Ids {
    /// The `id` stat (XProf `kStepId`, the iterator id), if present.
    id: Option<i64>,
    /// The `parent_id` stat, if present.
    parent_id: Option<i64>,
    /// The `element_id` stat, if present.
    element_id: Option<i64>,
}

impl Node {
    /// End of the event's timespan (a negative duration counts as 0).
    pub fn end_ps(&self) -> i64 {
        self.start_ps.saturating_add(self.duration_ps.max(0))
    }

    /// How long this event and `other` overlap (ps, ≥ 0).
    pub fn overlap_ps(&self, other: &Node) -> i64 {
        let begin = self.start_ps.max(other.start_ps);
        let end = self.end_ps().min(other.end_ps());
        end.saturating_sub(begin).max(0)
    }
}

/// The forest: nodes in XProf's visiting order (lines in plane order, events by start
/// time), the node lists per kind, and the edges the analysis walks.
#[derive(Debug, Default)]
pub(super) struct Forest {
    /// The plane's iterator, produce and consume events, in visiting order.
    pub nodes: Vec<Node>,
    /// `Iterator::…` nodes, in visiting order.
    pub iterators: Vec<u32>,
    /// `Iterator::Prefetch::Generator` nodes, in visiting order.
    pub device_second_iterators: Vec<u32>,
    /// The id stats of the nodes that have any ([`Node::ids`]).
    ids: Vec<Ids>,
    /// Children of iterator and producer nodes on their thread, the tf.data events
    /// they enclose directly, in time order.
    nested: Lists,
    /// Producer iterators linked to each consumer iterator, in the order found.
    linked: Lists,
    /// Per event metadata of the plane, whether its name is in XProf's tf.data
    /// category ([`is_tf_data_name`]).
    tf_data_names: Vec<bool>,
}

impl Forest {
    /// Builds the forest of `plane`.
    ///
    /// Every event takes part in the nesting walk, but only iterator, produce and
    /// consume events become nodes: the analysis never reads any other event (an
    /// iterator's or producer's children that matter are iterators themselves), so the
    /// forest costs memory per tf.data event, not per event of the plane.
    pub fn build(plane: &Plane) -> Forest {
        let keys = StatKeys::new(plane, STAT_NAMES);
        let kinds: Vec<Kind> = plane.event_metadata.iter().map(|m| Kind::of(&m.name)).collect();
        let kind_of = |metadata: u32| kinds.get(metadata as usize).copied().unwrap_or(Kind::Other);
        let tf_data_names = plane.event_metadata.iter().map(|m| is_tf_data_name(&m.name)).collect();
        let mut forest = Forest { tf_data_names, ..Forest::default() };
        // The nodes of each line, counted first so that their column is allocated once.
        let is_node: Vec<bool> = kinds.iter().map(|&kind| kind != Kind::Other).collect();
        let line_nodes: Vec<usize> = plane
            .lines
            .iter()
            .map(|line| {
                let metadata = line.events.metadata.iter();
                metadata.filter(|&m| is_node.get(m as usize).copied().unwrap_or(false)).count()
            })
            .collect();
        forest.nodes.reserve_exact(line_nodes.iter().sum());
        let mut produce: [Vec<u32>; 6] = Default::default();
        // Each consumer event with its enclosing iterator (its first parent in XProf),
        // or `NO_NODE` where its enclosing event is not an iterator.
        let mut consume: [Vec<(u32, u32)>; 6] = Default::default();
        // (parent, child) of each nesting edge, in visiting order.
        let mut nested: Vec<(u32, u32)> = Vec::new();
        'lines: for (line, &nodes) in plane.lines.iter().zip(&line_nodes) {
            // Nesting never crosses lines, so a line without tf.data events adds nothing.
            if nodes == 0 {
                continue;
            }
            let mut stack: Vec<Open> = Vec::new();
            for event in visiting_order(line) {
                let event = &event;
                let stat = |k: usize| xstats::event_stat(plane, event, keys.key(k));
                let is_async = stat(IS_ASYNC).is_some_and(|v| int_value(v) != 0);
                let metadata = event.metadata_index();
                let kind = kind_of(metadata);
                let index = if kind == Kind::Other {
                    NO_NODE
                } else {
                    match forest.add_node(event, metadata, stat) {
                        Some(index) => index,
                        None => break 'lines,
                    }
                };
                match kind {
                    Kind::Iterator => forest.iterators.push(index),
                    Kind::DeviceSecondIterator => forest.device_second_iterators.push(index),
                    Kind::Produce(k) => produce[k as usize].push(index),
                    Kind::Consume(k) => consume[k as usize].push((index, NO_NODE)),
                    Kind::Other => {}
                }
                if is_async {
                    continue;
                }
                let (start_ps, end_ps) =
                    (event.start_ps(), event.start_ps().saturating_add(event.duration_ps().max(0)));
                while let Some(top) = stack.last() {
                    if top.start_ps <= start_ps && end_ps <= top.end_ps {
                        if index != NO_NODE && (top.kind.is_iterator() || matches!(top.kind, Kind::Produce(_))) {
                            nested.push((top.node, index));
                        }
                        if let Kind::Consume(k) = kind
                            && top.kind.is_iterator()
                            && let Some((_, parent)) = consume[k as usize].last_mut()
                        {
                            *parent = top.node;
                        }
                        break;
                    }
                    stack.pop();
                }
                stack.push(Open { start_ps, end_ps, kind, node: index });
            }
        }
        forest.nested = Lists::by_key(forest.nodes.len(), || nested.iter().map(|&(p, c)| (p as usize, c)));
        drop(nested);
        forest.connect_producers(&kind_of, &produce, &consume);
        forest
    }

    /// Adds the node of a tf.data event; `None` when the forest is full (`u32` ids).
    fn add_node(&mut self, event: &Event<'_>, metadata: u32, stat: impl Fn(usize) -> Option<StatValue>) -> Option<u32> {
        let index = u32::try_from(self.nodes.len()).ok().filter(|&i| i != NO_NODE)?;
        let ids = Ids {
            id: stat(ID).map(int_value),
            parent_id: stat(PARENT_ID).map(int_value),
            element_id: stat(ELEMENT_ID).map(int_value),
        };
        let ids = match ids {
            Ids { id: None, parent_id: None, element_id: None } => NO_IDS,
            _ => {
                let slot = u32::try_from(self.ids.len()).ok().filter(|&slot| slot != NO_IDS)?;
                self.ids.push(ids);
                slot
            }
        };
        self.nodes.push(Node { start_ps: event.start_ps(), duration_ps: event.duration_ps(), metadata, ids });
        Some(index)
    }

    /// XProf's `ConnectTfDataEvents`: each consumer iterator gets, as children, the
    /// producer iterators keyed by (its iterator id, the consumed element id), in the
    /// order the producers were met. `consume` holds each consumer event with its
    /// enclosing iterator.
    fn connect_producers(
        &mut self,
        kind_of: &impl Fn(u32) -> Kind,
        produce: &[Vec<u32>; 6],
        consume: &[Vec<(u32, u32)>; 6],
    ) {
        // The producer iterators of each key as a chain through `chain` (iterator, next
        // link), the key mapping to its chain's first and last link: one hash entry and
        // no allocation per key (most keys have one producer).
        let mut producers: FxMap<(i64, i64), (u32, u32)> = FxMap::default();
        producers.reserve(produce.iter().map(Vec::len).sum());
        let mut chain: Vec<(u32, u32)> = Vec::new();
        for &event in produce.iter().flatten() {
            let Some(element) = self.element_id(event) else { continue };
            let children = self.nested.of(event as usize);
            let first_iterator = children.iter().find(|&&c| kind_of(self.nodes[c as usize].metadata).is_iterator());
            if let Some(&iterator) = first_iterator
                && let Some(parent) = self.parent_id(iterator)
            {
                let link = chain.len() as u32;
                chain.push((iterator, NO_NODE));
                match producers.entry((parent, element)) {
                    std::collections::hash_map::Entry::Occupied(mut ends) => {
                        let (_, last) = ends.get_mut();
                        if let Some((_, next)) = chain.get_mut(*last as usize) {
                            *next = link;
                        }
                        *last = link;
                    }
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert((link, link));
                    }
                }
            }
        }
        // (consumer, producer) of each link, in the order found.
        let mut linked: Vec<(u32, u32)> = Vec::new();
        for &(event, consumer) in consume.iter().flatten() {
            let Some(element) = self.element_id(event) else { continue };
            if consumer == NO_NODE || !kind_of(self.nodes[consumer as usize].metadata).is_iterator() {
                continue;
            }
            let Some(id) = self.id(consumer) else { continue };
            let mut link = producers.get(&(id, element)).map_or(NO_NODE, |&(first, _)| first);
            while let Some(&(producer, next)) = chain.get(link as usize) {
                linked.push((consumer, producer));
                link = next;
            }
        }
        self.linked = Lists::by_key(self.nodes.len(), || linked.iter().map(|&(c, p)| (c as usize, p)));
    }

    fn ids(&self, node: u32) -> Option<&Ids> {
        let slot = self.nodes.get(node as usize)?.ids;
        self.ids.get(slot as usize)
    }

    /// The `id` stat of `node` (XProf `kStepId`, the iterator id), if present.
    pub fn id(&self, node: u32) -> Option<i64> {
        self.ids(node)?.id
    }

    /// The `parent_id` stat of `node`, if present.
    pub fn parent_id(&self, node: u32) -> Option<i64> {
        self.ids(node)?.parent_id
    }

    /// The `element_id` stat of `node`, if present.
    pub fn element_id(&self, node: u32) -> Option<i64> {
        self.ids(node)?.element_id
    }

    /// The children of `node`: the tf.data events it encloses on its thread, in time
    /// order, then (consumer iterators only) the producer iterators linked to it. Empty
    /// for nodes that are neither iterators nor producers.
    pub fn children(&self, node: u32) -> impl Iterator<Item = u32> + '_ {
        let node = node as usize;
        self.nested.of(node).iter().chain(self.linked.of(node)).copied()
    }

    /// Whether the name of `node`'s event is in XProf's tf.data category
    /// ([`is_tf_data_name`]).
    pub fn is_tf_data(&self, node: u32) -> bool {
        let metadata = self.nodes.get(node as usize).map(|n| n.metadata);
        metadata.and_then(|m| self.tf_data_names.get(m as usize)).copied().unwrap_or(false)
    }

    /// The event name of `node` on `plane`.
    pub fn name<'p>(&self, plane: &'p Plane, node: u32) -> &'p str {
        self.nodes
            .get(node as usize)
            .and_then(|n| plane.event_metadata.get(n.metadata as usize))
            .map_or("", |m| m.name.as_str())
    }
}
