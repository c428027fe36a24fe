//! The host op metrics database (XProf's `ConvertHostThreadsXPlaneToOpMetricsDb`).
//!
//! Ops are found once per plane (by event-metadata id, or by input-pipeline stage id),
//! then every thread is replayed as a stream of begin/end activities sorted by time
//! through an op stack: an end pops the stack down to its own begin, so an op that
//! overlaps its parent without nesting in it is lost, as in XProf. A thread whose
//! events are in time order (as profilers write them) is replayed as it is read, its
//! ends merged in from a heap of the open ops, so nothing per event is kept; another
//! thread's occurrences ([`Occurrence`]) are gathered and their begins and ends sorted
//! as 16-byte keys pointing at them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use mlprof_model::fxhash::FxMap;
use mlprof_model::{Host, Line, Plane, names};

use super::{DbBuilder, HostOpRun, OpMetricsDb, is_derived_line_id, ps};
use crate::grouping::HostGroups;
use crate::tf_op::{OpCategory, parse_tf_op};
use crate::xstats::{StatRow, StatSlots};

const IS_EAGER: usize = 0;
const TF_OP: usize = 1;
const STAGE_ID: usize = 2;
const STAGE_ID_SHORT: usize = 3;
const STAGE_CATEGORY: usize = 4;
const STAGE_CATEGORY_SHORT: usize = 5;

/// Stat names read here. XProf's input-pipeline stage stats are looked up under both
/// spellings seen in the wild.
const STAT_NAMES: [&str; 6] = [
    "is_eager",
    "tf_op",
    "input_pipeline_stage_id",
    "_ipl_stage_id",
    "input_pipeline_stage_category",
    "_ipl_stage_cat",
];

/// XProf's `host_op_metrics_db` of an XSpace host: the framework ops of every thread of
/// the `/host:CPU` plane with their total and self times, plus one combined `IDLE` row.
/// Empty when the host has no such plane.
pub(crate) fn xspace_host_op_metrics_db(host: &Host, groups: &HostGroups) -> OpMetricsDb {
    let mut combined = DbBuilder::default();
    for_each_thread(host, groups, |thread| {
        let mut builder = DbBuilder::default();
        // Each op's position by where its name lies (names are the plane's ops' and the
        // model's stat strings, alive throughout): a thread's millions of runs name a
        // few hundred ops, and a known name is then found without hashing its text.
        let mut positions: FxMap<(u64, usize, usize), usize> = FxMap::default();
        let span = thread.replay(|activity, run| {
            let module = activity.id as u64;
            let key = (module, activity.name.as_ptr() as usize, activity.name.len());
            let position = *positions.entry(key).or_insert_with(|| builder.position(module, activity.name));
            let Some(op) = builder.add_occurrence_at(position, run.time_ps, run.self_ps) else { return };
            if op.category.is_empty() {
                op.category = activity.op_type.to_string();
            }
            op.is_eager |= activity.is_eager;
        });
        if let Some((first, last)) = span {
            builder.db.set_total_time(ps(last - first));
        }
        let mut db = builder.finish();
        db.add_idle_op();
        combined.combine(&db, false);
    });
    combined.finish()
}

/// Every op run the XSpace host database counts, in replay order per thread: what
/// [`xspace_host_op_metrics_db`] sums, one run at a time (`line` and `event` index the
/// `/host:CPU` plane).
pub(crate) fn xspace_host_op_runs(host: &Host, groups: &HostGroups, mut visit: impl FnMut(&HostOpRun<'_>)) {
    let mut line = 0;
    for_each_thread(host, groups, |thread| {
        thread.replay(|activity, run| {
            visit(&HostOpRun {
                line,
                event: activity.event as usize,
                name: activity.name,
                op_type: activity.op_type,
                module_id: activity.id as u64,
                start_ps: run.start_ps,
                time_ps: run.time_ps,
                self_ps: run.self_ps,
                from_stat: activity.from_stat,
            });
        });
        line += 1;
    });
}

/// Calls `per_thread` with every line of the host plane, in line order, as the ops of
/// one thread to replay (nothing when the host has no `/host:CPU` plane).
fn for_each_thread(host: &Host, groups: &HostGroups, mut per_thread: impl FnMut(ThreadOps<'_, '_>)) {
    let Some(plane_index) = host.planes.iter().position(|plane| plane.name == names::HOST_PLANE) else {
        return;
    };
    let plane = &host.planes[plane_index];
    let slots = StatSlots::new(plane, STAT_NAMES);
    let ops = collect_ops(plane, &slots);
    let ops = PlaneOps { by_metadata: plane.event_metadata.iter().map(|m| ops.get(&m.id)).collect(), by_id: &ops };
    let mut unordered = Unordered::default();
    for (line_index, line) in plane.lines.iter().enumerate() {
        let eager = EagerMarks { groups, plane: plane_index, line: line_index };
        per_thread(ThreadOps { plane, line, slots: &slots, ops: &ops, eager, unordered: &mut unordered });
    }
}

/// An op found on the plane, owned so lookups outlive the borrow of one event.
#[derive(Clone, Debug)]
struct HostOp {
    name: String,
    op_type: String,
    id: i64,
}

impl HostOp {
    fn new(name: &str, op_type: &str, id: i64) -> HostOp {
        HostOp { name: name.to_string(), op_type: op_type.to_string(), id }
    }
}

fn stage_id(row: &StatRow<6>) -> Option<i64> {
    row.int(STAGE_ID).or_else(|| row.int(STAGE_ID_SHORT))
}

/// The ops of the plane by XSpace metadata id or stage id, first definition winning
/// (XProf's `CollectTfOpsFromHostThreadsXPlane`).
fn collect_ops(plane: &Plane, slots: &StatSlots<6>) -> FxMap<i64, HostOp> {
    let mut ops: FxMap<i64, HostOp> = FxMap::default();
    let has_stages = slots.resolves(STAGE_ID) || slots.resolves(STAGE_ID_SHORT);
    // Without stage stats an op depends on its metadata only: parse each name once.
    let mut seen = vec![false; plane.event_metadata.len()];
    for line in &plane.lines {
        for event in line.iter() {
            let Some(metadata) = plane.metadata_of(&event) else { continue };
            if metadata.name.is_empty() {
                continue;
            }
            let row = if has_stages { Some(slots.row(plane, &event)) } else { None };
            if let Some(row) = row
                && let Some(stage) = stage_id(&row)
            {
                let category =
                    row.str(STAGE_CATEGORY, plane, &event).or_else(|| row.str(STAGE_CATEGORY_SHORT, plane, &event));
                if let Some(category) = category {
                    // A stage with a category is taken as is; without one its name is
                    // parsed, and it counts even when the name is no op name.
                    let op = if category.is_empty() {
                        let op = parse_tf_op(&metadata.name);
                        HostOp::new(
                            op.name,
                            op.op_type,
                            if matches!(
                                op.category,
                                OpCategory::MemcpyHToD
                                    | OpCategory::MemcpyDToH
                                    | OpCategory::MemcpyDToD
                                    | OpCategory::MemcpyHToH
                            ) {
                                0
                            } else {
                                stage
                            },
                        )
                    } else {
                        HostOp::new(&metadata.name, category, stage)
                    };
                    ops.entry(stage).or_insert(op);
                }
                continue;
            }
            let index = event.metadata_index() as usize;
            if seen.get(index).copied().unwrap_or(true) {
                continue;
            }
            seen[index] = true;
            let op = parse_tf_op(&metadata.name);
            if op.category != OpCategory::Unknown {
                ops.entry(metadata.id).or_insert_with(|| HostOp::new(op.name, op.op_type, 0));
            }
        }
    }
    ops
}

/// The ops of a plane ([`collect_ops`]), and the op of each event metadata's own id,
/// so that an event without a stage id finds its op without hashing.
struct PlaneOps<'a> {
    by_id: &'a FxMap<i64, HostOp>,
    /// Per event metadata: the op of its id, if any.
    by_metadata: Vec<Option<&'a HostOp>>,
}

/// One occurrence of an op on a thread: an event that is an op, or the op its `tf_op`
/// stat names (an event can be both, in that order).
#[derive(Clone, Copy)]
struct Occurrence<'a> {
    begin_ps: i64,
    end_ps: i64,
    name: &'a str,
    op_type: &'a str,
    id: i64,
    /// Index of the event in its line.
    event: u32,
    is_eager: bool,
    /// Whether the op is named by the event's `tf_op` stat rather than by the event.
    from_stat: bool,
}

/// The ops of one thread (a line of the host plane), to replay.
struct ThreadOps<'a, 's> {
    plane: &'a Plane,
    line: &'a Line,
    slots: &'s StatSlots<6>,
    ops: &'s PlaneOps<'a>,
    eager: EagerMarks<'s>,
    /// Buffers for a line whose events are out of time order, kept across lines.
    unordered: &'s mut Unordered<'a>,
}

/// What replaying a line out of time order takes: its occurrences and their sorted
/// activities. One pair serves every such line in turn: a thread's can run to tens of
/// megabytes, and memory freed and allocated again per line is memory the system
/// zeroes and maps again.
#[derive(Default)]
struct Unordered<'a> {
    occurrences: Vec<Occurrence<'a>>,
    order: Vec<(i64, u32)>,
}

impl<'a> ThreadOps<'a, '_> {
    /// Replays the thread's op occurrences through the op stack (XProf's
    /// `ProcessTfActivities`), calling `on_run` with each completed run; returns the
    /// span of the activities (first and last time), `None` when there are none.
    /// Events in time order (as profilers write them, and never ending before they
    /// begin) are replayed as they are read, with nothing kept but the open ops;
    /// others are gathered and sorted first.
    fn replay(self, on_run: impl FnMut(&Occurrence<'a>, Run)) -> Option<(i64, i64)> {
        if is_derived_line_id(self.line.id) {
            return None;
        }
        let ThreadOps { plane, line, slots, ops, eager, unordered } = self;
        let events = &line.events;
        if events.offset_ps.is_sorted() && events.duration_ps.min().is_none_or(|shortest| shortest >= 0) {
            let mut replay = InBeginOrder::new(on_run);
            line_occurrences(plane, line, slots, ops, eager, |occurrence| replay.push(occurrence));
            return replay.finish();
        }
        let Unordered { occurrences, order } = unordered;
        occurrences.clear();
        line_occurrences(plane, line, slots, ops, eager, |occurrence| occurrences.push(occurrence));
        replay_sorted(occurrences, order, on_run)
    }
}

/// Which events of one line grouping marked eager.
#[derive(Clone, Copy)]
struct EagerMarks<'g> {
    groups: &'g HostGroups,
    plane: usize,
    line: usize,
}

impl EagerMarks<'_> {
    fn has(&self, event: usize) -> bool {
        !self.groups.eager.is_empty() && self.groups.is_eager(self.plane, self.line, event)
    }
}

/// The op occurrences of one thread, in event order, each given to `emit`: the op an
/// event is, then the op its `tf_op` stat names.
fn line_occurrences<'a>(
    plane: &'a Plane,
    line: &'a Line,
    slots: &StatSlots<6>,
    ops: &PlaneOps<'a>,
    eager: EagerMarks<'_>,
    mut emit: impl FnMut(Occurrence<'a>),
) {
    for event in line.iter() {
        let Some(&metadata_op) = ops.by_metadata.get(event.metadata_index() as usize) else { continue };
        let row = slots.row(plane, &event);
        let op = match stage_id(&row) {
            Some(stage) => ops.by_id.get(&stage),
            None => metadata_op,
        };
        let (begin_ps, end_ps) = (event.start_ps(), event.end_ps());
        // Event indices fit u32, as the model's stat offsets do.
        let index = event.index() as u32;
        if let Some(op) = op {
            emit(Occurrence {
                begin_ps,
                end_ps,
                name: op.name.as_str(),
                op_type: op.op_type.as_str(),
                id: op.id,
                event: index,
                is_eager: row.int(IS_EAGER).is_some_and(|v| v != 0) || eager.has(event.index()),
                from_stat: false,
            });
        }
        if let Some(full) = row.str(TF_OP, plane, &event)
            && !full.is_empty()
        {
            let op = parse_tf_op(full);
            emit(Occurrence {
                begin_ps,
                end_ps,
                name: op.name,
                op_type: op.op_type,
                id: 0,
                event: index,
                is_eager: false,
                from_stat: true,
            });
        }
    }
}

/// An op on the stack: its occurrence (by number and in full), start and the total
/// time of its direct children.
struct Open<'a> {
    number: u32,
    occurrence: Occurrence<'a>,
    start_ps: i64,
    children_ps: u64,
}

/// One completed op run found by replaying a thread.
struct Run {
    start_ps: i64,
    time_ps: u64,
    self_ps: u64,
}

/// The op stack of one thread, fed its activities in time order, ties in activity
/// order: occurrence `k`'s begin is activity `2k`, its end `2k + 1`, so at equal times
/// ends come before the begins of later occurrences.
struct OpStack<'a, F> {
    open: Vec<Open<'a>>,
    on_run: F,
    /// The first and last activity times.
    span: Option<(i64, i64)>,
}

impl<'a, F: FnMut(&Occurrence<'a>, Run)> OpStack<'a, F> {
    fn new(on_run: F) -> Self {
        OpStack { open: Vec::new(), on_run, span: None }
    }

    fn begin(&mut self, number: u32, occurrence: Occurrence<'a>) {
        let (first, last) = self.span.unwrap_or((i64::MAX, i64::MIN));
        let (begin, end) = (occurrence.begin_ps, occurrence.end_ps);
        self.span = Some((first.min(begin).min(end), last.max(begin).max(end)));
        self.open.push(Open { number, occurrence, start_ps: begin, children_ps: 0 });
    }

    /// The end of occurrence `number` at `time_ps`: pops the stack down to its begin
    /// (ops above it overlapped it without nesting); nothing if an earlier end popped
    /// it already.
    fn end(&mut self, number: u32, time_ps: i64) {
        let mut found = None;
        while let Some(open) = self.open.pop() {
            if open.number == number {
                found = Some(open);
                break;
            }
        }
        let Some(open) = found else { return };
        let time_ps = ps(time_ps - open.start_ps);
        let self_ps = time_ps.saturating_sub(open.children_ps);
        (self.on_run)(&open.occurrence, Run { start_ps: open.start_ps, time_ps, self_ps });
        if let Some(parent) = self.open.last_mut() {
            parent.children_ps += time_ps;
        }
    }
}

/// [`ThreadOps::replay`] of occurrences given one by one in begin order, each ending
/// no earlier than it begins: the ends are merged in from a heap of the open ones (as
/// many as overlap), since no end of a later occurrence can precede an earlier begin.
struct InBeginOrder<'a, F> {
    stack: OpStack<'a, F>,
    open_ends: BinaryHeap<Reverse<(i64, u32)>>,
    /// The number of the next occurrence (a line's fit u32: two an event at most).
    next: u32,
}

impl<'a, F: FnMut(&Occurrence<'a>, Run)> InBeginOrder<'a, F> {
    fn new(on_run: F) -> Self {
        InBeginOrder { stack: OpStack::new(on_run), open_ends: BinaryHeap::new(), next: 0 }
    }

    fn push(&mut self, occurrence: Occurrence<'a>) {
        let number = self.next;
        self.next += 1;
        let begin = (occurrence.begin_ps, 2 * number);
        while let Some(&Reverse((time_ps, activity))) = self.open_ends.peek()
            && (time_ps, activity) < begin
        {
            self.open_ends.pop();
            self.stack.end(activity / 2, time_ps);
        }
        self.open_ends.push(Reverse((occurrence.end_ps, 2 * number + 1)));
        self.stack.begin(number, occurrence);
    }

    /// Ends what is still open; the span of the activities.
    fn finish(mut self) -> Option<(i64, i64)> {
        while let Some(Reverse((time_ps, activity))) = self.open_ends.pop() {
            self.stack.end(activity / 2, time_ps);
        }
        self.stack.span
    }
}

/// [`ThreadOps::replay`] of occurrences in any order: their activities sorted into
/// `order` (emptied first, a buffer the caller keeps across threads).
fn replay_sorted<'a>(
    occurrences: &[Occurrence<'a>],
    order: &mut Vec<(i64, u32)>,
    on_run: impl FnMut(&Occurrence<'a>, Run),
) -> Option<(i64, i64)> {
    order.clear();
    order.reserve(occurrences.len() * 2);
    for (number, o) in (0u32..).zip(occurrences) {
        order.push((o.begin_ps, 2 * number));
        order.push((o.end_ps, 2 * number + 1));
    }
    order.sort_unstable();
    let mut stack = OpStack::new(on_run);
    for &(time_ps, activity) in order.iter() {
        let number = activity / 2;
        if activity % 2 == 1 {
            stack.end(number, time_ps);
        } else if let Some(occurrence) = occurrences.get(number as usize) {
            stack.begin(number, *occurrence);
        }
    }
    stack.span
}

#[cfg(test)]
mod tests {
    use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue};

    use super::*;
    use crate::facts::{host_op_metrics_db, step_groups};

    /// `(name, start_ps, duration_ps, tf_op stat)`.
    type TestEvent<'a> = (&'a str, i64, i64, Option<&'a str>);
    use crate::op_metrics::{IDLE, OpMetrics};

    /// A host whose `/host:CPU` plane has one line per entry of `threads`, each event
    /// `(name, start_ps, duration_ps, tf_op stat)`.
    fn host(threads: &[&[TestEvent<'_>]]) -> Host {
        let mut builder = PlaneBuilder::new(0, names::HOST_PLANE);
        let tf_op = builder.stat_key("tf_op");
        for (i, events) in threads.iter().enumerate() {
            let mut line = Line::new(i as i64 + 1, format!("thread {i}"));
            for &(name, start, duration, stat) in *events {
                let metadata = builder.event_metadata(name, 0, |_| Vec::new());
                if let Some(text) = stat {
                    line.stats.push_str(tf_op, text).unwrap();
                }
                line.push_event(metadata, start, duration);
            }
            builder.push_line(line);
        }
        let mut host = Host::new("h", "h.xplane.pb", SourceFormat::Xspace);
        host.planes.push(builder.finish());
        host
    }

    fn db_of(host: &Host) -> OpMetricsDb {
        host_op_metrics_db(host, &step_groups(host))
    }

    fn op<'a>(db: &'a OpMetricsDb, name: &str) -> &'a OpMetrics {
        db.metrics.iter().find(|m| m.name == name).unwrap()
    }

    /// Occurrences replayed as they come in begin order give the runs (in order) and
    /// the span that sorting their activities gives, on nested, overlapping, touching
    /// and equal spans.
    #[test]
    fn replay_in_begin_order_is_the_sorted_replay() {
        let occurrence = |event: usize, (begin_ps, end_ps): (i64, i64)| Occurrence {
            begin_ps,
            end_ps,
            name: "op",
            op_type: "Op",
            id: 0,
            event: event as u32,
            is_eager: false,
            from_stat: false,
        };
        let mut cases: Vec<Vec<(i64, i64)>> = vec![
            vec![(0, 100), (0, 100), (10, 20), (20, 30), (20, 20), (30, 120), (100, 100), (100, 150), (150, 150)],
            vec![(0, 10), (5, 6)],
            vec![],
        ];
        // Pseudo-random spans in begin order: many ties and touching ends.
        let mut seed = 7u64;
        let mut next = |modulo: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) % modulo) as i64
        };
        for _ in 0..50 {
            let mut begin = 0;
            let spans = (0..40)
                .map(|_| {
                    begin += next(3);
                    (begin, begin + next(12))
                })
                .collect();
            cases.push(spans);
        }
        for spans in cases {
            let occurrences: Vec<Occurrence<'_>> = spans.iter().enumerate().map(|(k, &s)| occurrence(k, s)).collect();
            let mut sorted_runs = Vec::new();
            let mut order = vec![(1, 1)];
            let sorted_span = replay_sorted(&occurrences, &mut order, |o, run| {
                sorted_runs.push((o.event, run.start_ps, run.time_ps, run.self_ps));
            });
            let mut streamed_runs = Vec::new();
            let mut replay = InBeginOrder::new(|o: &Occurrence<'_>, run: Run| {
                streamed_runs.push((o.event, run.start_ps, run.time_ps, run.self_ps));
            });
            occurrences.iter().for_each(|o| replay.push(*o));
            let streamed_span = replay.finish();
            assert_eq!(streamed_runs, sorted_runs, "{spans:?}");
            assert_eq!(streamed_span, sorted_span, "{spans:?}");
            assert!(spans.is_empty() || !sorted_runs.is_empty());
        }
    }

    /// A thread whose events are out of time order is replayed as the same events in
    /// order are.
    #[test]
    fn threads_out_of_time_order_are_sorted() {
        let ordered: &[TestEvent<'_>] =
            &[("a:A", 0, 100, None), ("b:B", 50, 10, None), ("c:C", 70, 40, Some("x/y:Fill"))];
        let shuffled: &[TestEvent<'_>] = &[ordered[2], ordered[0], ordered[1]];
        let db = db_of(&host(&[ordered]));
        assert_eq!(db_of(&host(&[shuffled])), db);
        assert_eq!((op(&db, "a").self_time_ps, op(&db, "b").time_ps), (90, 10));
        assert!(db.metrics.iter().all(|m| m.name != "c"), "c overlaps a without nesting in it");
    }

    #[test]
    fn nested_ops_get_self_time() {
        let host = host(&[&[
            ("outer:Outer", 0, 100, None),
            ("outer/a:MatMul", 10, 30, None),
            ("outer/b:MatMul_1", 50, 20, None),
            ("EagerExecute", 60, 5, None),
            ("outer/a:MatMul", 200, 10, None),
        ]]);
        let db = db_of(&host);
        let outer = op(&db, "outer");
        assert_eq!((outer.time_ps, outer.self_time_ps, outer.category.as_str()), (100, 50, "Outer"));
        let a = op(&db, "outer/a");
        assert_eq!((a.occurrences, a.time_ps, a.self_time_ps), (2, 40, 40));
        assert_eq!(op(&db, "outer/b").category, "MatMul_1");
        assert_eq!(db.total_op_time_ps, 110);
        assert_eq!(db.total_time_ps, 210);
        let idle = op(&db, IDLE);
        assert_eq!((idle.self_time_ps, idle.occurrences, idle.is_idle()), (100, 0, true));
        assert!(db.metrics.iter().all(|m| m.name != "EagerExecute"));
    }

    #[test]
    fn overlapping_ops_are_dropped() {
        // b starts inside a but ends after it: a's end pops b, b's end finds nothing.
        let host = host(&[&[("a:A", 0, 10, None), ("b:B", 5, 10, None)]]);
        let db = db_of(&host);
        assert_eq!(op(&db, "a").self_time_ps, 10);
        assert!(db.metrics.iter().all(|m| m.name != "b"));
        assert_eq!(db.total_time_ps, 15);
        assert_eq!(op(&db, IDLE).time_ps, 5);
    }

    #[test]
    fn tf_op_stats_and_several_threads() {
        let host =
            host(&[&[("MemoryAllocation", 0, 4, Some("x/y:Fill"))], &[("Iterator::Root::Map", 10, 6, None)], &[]]);
        let db = db_of(&host);
        assert_eq!(op(&db, "x/y").category, "Fill");
        assert_eq!(op(&db, "Iterator::Root::Map").category, "Dataset");
        // Three threads, three IDLE rows merged into one (all zero here).
        assert_eq!(db.metrics.iter().filter(|m| m.is_idle()).count(), 1);
        assert_eq!(op(&db, IDLE).time_ps, 0);
        assert_eq!((db.total_time_ps, db.total_op_time_ps), (10, 10));
    }

    #[test]
    fn stage_ids_key_input_pipeline_ops() {
        let mut builder = PlaneBuilder::new(0, names::HOST_PLANE);
        let (id, cat) =
            (builder.stat_key("input_pipeline_stage_id"), builder.stat_key("input_pipeline_stage_category"));
        let mut line = Line::new(1, "t");
        for (stage, start) in [(1, 0), (2, 100), (1, 200)] {
            let metadata = builder.event_metadata("MapDataset", 0, |_| Vec::new());
            line.stats.push(id, StatValue::Int(stage));
            line.stats.push_str(cat, "preprocessing").unwrap();
            line.push_event(metadata, start, 10);
        }
        builder.push_line(line);
        let mut host = Host::new("h", "h", SourceFormat::Xspace);
        host.planes.push(builder.finish());
        let db = db_of(&host);
        let stages: Vec<_> = db
            .metrics
            .iter()
            .filter(|m| !m.is_idle())
            .map(|m| (m.hlo_module_id, m.occurrences, m.category.as_str()))
            .collect();
        assert_eq!(stages, vec![(1, 2, "preprocessing"), (2, 1, "preprocessing")]);
    }

    #[test]
    fn no_host_plane_or_no_ops() {
        let empty = Host::new("h", "h", SourceFormat::Xspace);
        assert_eq!(db_of(&empty), OpMetricsDb::default());
        let idle_only = host(&[&[("EagerExecute", 0, 10, None)]]);
        let db = db_of(&idle_only);
        assert_eq!(db.metrics.len(), 1);
        assert_eq!((db.total_time_ps, op(&db, IDLE).time_ps), (0, 0));
    }
}
