//! Range aggregates: for a time range and a set of tracks, each event name's count,
//! total time, self time and longest event — Perfetto's area-selection table.
//!
//! Times are the parts of events inside the range (an event cut by the range's edge
//! counts only what lies inside), so the totals say where the range's time went. An
//! event is in the range when it overlaps it by more than nothing, or is an instant
//! (zero duration) inside it. Self time is an event's time in the range minus that of
//! its children: the events one depth deeper on its track that lie wholly inside it
//! (events at one depth never overlap, and one that only partly overlaps an event is
//! not its child). Every event in the range is read once — no levels, no merging — so
//! the cost is the number of events in the range.

use mlprof_model::fxhash::FxMap;
use serde::Serialize;

use crate::builder::NameId;
use crate::column::Col;
use crate::format::Part;
use crate::index::{Run, TimelineIndex};
use crate::view::partition;

/// One name's totals in a range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NameTotals {
    /// The events' name.
    pub name: NameId,
    /// Events of this name in the range.
    pub count: u64,
    /// Their time inside the range, ps.
    pub total_ps: i64,
    /// Their time inside the range less their children's, ps.
    pub self_ps: i64,
    /// The longest one's time inside the range, ps.
    pub max_ps: i64,
}

/// What a range holds, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RangeAggregate {
    /// Events in the range over all the tracks asked for.
    pub events: u64,
    /// One row per name, most total time first (then by name id).
    pub rows: Vec<NameTotals>,
}

/// An event of the depth above, waiting for its children to be subtracted.
#[derive(Clone, Copy)]
struct Parent {
    start_ps: i64,
    end_ps: i64,
    name: NameId,
    self_ps: i64,
}

impl TimelineIndex {
    /// Each name's count, total and self time inside `[start_ps, end_ps]` on `tracks`
    /// (unknown track ids are skipped; see the module docs).
    pub fn aggregate(&self, start_ps: i64, end_ps: i64, tracks: &[u32]) -> RangeAggregate {
        let mut totals: FxMap<NameId, NameTotals> = FxMap::default();
        let mut events = 0u64;
        if end_ps >= start_ps {
            for &track in tracks {
                let Some(runs) = self.track_runs(track) else { continue };
                events += self.aggregate_track(runs, start_ps, end_ps, &mut totals);
            }
        }
        let mut rows: Vec<NameTotals> = totals.into_values().collect();
        rows.sort_by(|a, b| b.total_ps.cmp(&a.total_ps).then(a.name.0.cmp(&b.name.0)));
        RangeAggregate { events, rows }
    }

    /// Adds one track's events in the range to `totals`; returns how many there were.
    fn aggregate_track(&self, runs: &[Run], start_ps: i64, end_ps: i64, totals: &mut FxMap<NameId, NameTotals>) -> u64 {
        let starts: Col<'_, i64> = self.col(Part::Start);
        let durs: Col<'_, i64> = self.col(Part::Duration);
        let names: Col<'_, u32> = self.col(Part::Name);
        let mut events = 0;
        let mut parents: Vec<Parent> = Vec::new();
        for run in runs {
            let end_of = |i: usize| starts.at(i).saturating_add(durs.at(i));
            // Events of a run do not overlap: ends are sorted like starts.
            let lo = partition(run.events.clone(), &|i| end_of(i) < start_ps);
            let hi = partition(lo..run.events.end, &|i| starts.at(i) <= end_ps);
            let mut level = Vec::with_capacity(hi.saturating_sub(lo));
            for i in lo..hi {
                let (start, end) = (starts.at(i), end_of(i));
                let inside = end.min(end_ps).saturating_sub(start.max(start_ps));
                let instant = start == end && start >= start_ps && start <= end_ps;
                if inside <= 0 && !instant {
                    continue;
                }
                let inside = inside.max(0);
                events += 1;
                let name = NameId(names.at(i));
                let row = totals.entry(name).or_insert(NameTotals { name, ..NameTotals::default() });
                row.count += 1;
                row.total_ps = row.total_ps.saturating_add(inside);
                row.max_ps = row.max_ps.max(inside);
                // The parent is the last event above starting at or before this one, if it holds it.
                let above = parents.partition_point(|p| p.start_ps <= start);
                if let Some(parent) = above.checked_sub(1).and_then(|p| parents.get_mut(p))
                    && parent.end_ps >= end
                {
                    parent.self_ps -= inside;
                }
                level.push(Parent { start_ps: start, end_ps: end, name, self_ps: inside });
            }
            settle(&parents, totals);
            parents = level;
        }
        settle(&parents, totals);
        events
    }
}

/// Adds the self time of `parents`, whose children have all been subtracted, to `totals`.
fn settle(parents: &[Parent], totals: &mut FxMap<NameId, NameTotals>) {
    for parent in parents {
        if let Some(row) = totals.get_mut(&parent.name) {
            row.self_ps = row.self_ps.saturating_add(parent.self_ps);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::builder::{SectionKind, TimelineBuilder};
    use crate::synthetic::Synthetic;

    /// One thread: a step [0, 100) holding a [10, 40) and b [50, 90), b holding c [60, 70);
    /// d [95, 120) only partly inside the step.
    fn nested() -> crate::TimelineIndex {
        let mut builder = TimelineBuilder::new();
        let section = builder.section("/host:CPU", SectionKind::Host);
        let track = builder.track(section, "thread 1").expect("a track");
        for (name, start, dur) in [("step", 0, 100), ("a", 10, 30), ("b", 50, 40), ("c", 60, 10), ("d", 95, 25)] {
            let name = builder.name(name);
            builder.event(track, start, dur, name, 0).expect("an event");
        }
        builder.finish().expect("built").into_index().expect("opened")
    }

    fn rows(index: &crate::TimelineIndex, start: i64, end: i64) -> Vec<(String, u64, i64, i64)> {
        let aggregate = index.aggregate(start, end, &[0]);
        aggregate.rows.iter().map(|r| (index.name(r.name).to_string(), r.count, r.total_ps, r.self_ps)).collect()
    }

    #[test]
    fn self_time_subtracts_the_children_inside_each_event() {
        let index = nested();
        assert_eq!(
            rows(&index, 0, 200),
            vec![
                ("step".to_string(), 1, 100, 30),
                ("b".to_string(), 1, 40, 30),
                ("a".to_string(), 1, 30, 30),
                ("d".to_string(), 1, 25, 25),
                ("c".to_string(), 1, 10, 10),
            ]
        );
    }

    #[test]
    fn events_cut_by_the_range_count_only_their_part_inside() {
        let index = nested();
        let cut = rows(&index, 20, 65);
        assert_eq!(
            cut,
            vec![
                ("step".to_string(), 1, 45, 45 - 20 - 15),
                ("a".to_string(), 1, 20, 20),
                ("b".to_string(), 1, 15, 10),
                ("c".to_string(), 1, 5, 5),
            ]
        );
        assert!(rows(&index, 200, 300).is_empty());
        assert_eq!(index.aggregate(0, 200, &[7]).events, 0, "an unknown track adds nothing");
    }

    #[test]
    fn totals_equal_a_scan_of_every_event() {
        let mut builder = TimelineBuilder::new();
        Synthetic::realistic(20_000, 7).add_to(&mut builder).expect("synthetic events");
        let index = builder.finish().expect("built").into_index().expect("opened");
        let (span_start, span_end) = index.span_ps();
        let (start, end) = (span_start + (span_end - span_start) / 3, span_start + (span_end - span_start) / 2);
        let tracks: Vec<u32> = (0..index.track_count()).collect();
        let aggregate = index.aggregate(start, end, &tracks);
        let mut expected: std::collections::HashMap<u32, (u64, i64)> = std::collections::HashMap::new();
        for id in 0..index.event_count() as u32 {
            let event = index.event(id).expect("an event");
            let inside = (event.start_ps + event.dur_ps).min(end) - event.start_ps.max(start);
            let instant = event.dur_ps == 0 && event.start_ps >= start && event.start_ps <= end;
            if inside > 0 || instant {
                let entry = expected.entry(event.name.0).or_default();
                entry.0 += 1;
                entry.1 += inside.max(0);
            }
        }
        assert!(aggregate.events > 1000, "{} events", aggregate.events);
        assert_eq!(aggregate.events, expected.values().map(|e| e.0).sum::<u64>());
        for row in &aggregate.rows {
            assert_eq!(expected.get(&row.name.0), Some(&(row.count, row.total_ps)), "{}", index.name(row.name));
            assert!(row.self_ps <= row.total_ps && row.self_ps >= 0, "{row:?}");
        }
        assert_eq!(aggregate.rows.len(), expected.len());
        assert!(aggregate.rows.windows(2).all(|w| w[0].total_ps >= w[1].total_ps), "most time first");
    }
}
