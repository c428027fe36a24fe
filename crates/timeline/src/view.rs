//! Viewport queries: what to draw of a time window at a given pixel width.
//!
//! The resolution is `r = (end − start) / width` picoseconds per pixel. Per run (one
//! track at one depth; its events never overlap) the events overlapping the window
//! are one contiguous range, found by binary search. Every event longer than `r` is
//! returned individually; shorter neighbours are merged into runs that start less
//! than `r` apart ([`MergedRun`]: count and the longest one's name), so at most a
//! couple of items per pixel per depth come back. A lone short event comes back
//! individually (it is its own run), so it can still be clicked.
//!
//! When the range holds many more events than pixels, the run's level with buckets
//! just narrower than `r` ([`crate::levels`]) replaces whole buckets by their
//! precomputed group, so the work is proportional to the pixels, not to the events in
//! the window.

use serde::Serialize;

use crate::builder::NameId;
use crate::column::Col;
use crate::format::Part;
use crate::index::{Level, Run, TimelineIndex};
use crate::levels::level_for;

/// A window to draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Viewport<'a> {
    /// Window start, ps relative to the profile start.
    pub start_ps: i64,
    /// Window end, ps (inclusive; events touching it count as visible).
    pub end_ps: i64,
    /// Width of the window in pixels (0 counts as 1).
    pub width_px: u32,
    /// Only these tracks, in this order; `None` for all.
    pub tracks: Option<&'a [u32]>,
}

/// An event drawn on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct VisibleEvent {
    /// Event id.
    pub id: u32,
    /// Start, ps.
    pub start_ps: i64,
    /// Duration, ps.
    pub dur_ps: i64,
    /// Nesting depth.
    pub depth: u32,
    /// Name.
    pub name: NameId,
}

/// Short neighbouring events at one depth drawn as one box about a pixel wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MergedRun {
    /// Start of the first event, ps.
    pub start_ps: i64,
    /// End of the last event, ps.
    pub end_ps: i64,
    /// Nesting depth.
    pub depth: u32,
    /// Number of events merged.
    pub count: u64,
    /// Name of the longest of them.
    pub name: NameId,
}

/// What one track shows in the window.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TrackView {
    /// Track id.
    pub track: u32,
    /// Events drawn individually, by depth, then time.
    pub events: Vec<VisibleEvent>,
    /// Merged runs, by depth, then time.
    pub merged: Vec<MergedRun>,
}

/// A flow with its two ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct VisibleFlow {
    /// The event it starts from.
    pub from: u32,
    /// That event's track.
    pub from_track: u32,
    /// That event's start, ps.
    pub from_ps: i64,
    /// The event it goes to.
    pub to: u32,
    /// That event's track.
    pub to_track: u32,
    /// That event's start, ps.
    pub to_ps: i64,
}

/// The answer to a viewport query.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct View {
    /// Picoseconds per pixel.
    pub resolution_ps: i64,
    /// Tracks with something visible, in the order asked for.
    pub tracks: Vec<TrackView>,
    /// Flows with at least one end among the individually returned events.
    pub flows: Vec<VisibleFlow>,
}

/// Runs narrower than this many events per pixel are scanned event by event.
const EVENTS_PER_PIXEL_SCANNED: usize = 4;
/// A partial group at the edge of the window with at most this many events is scanned
/// event by event (exact name), larger ones merged whole.
const EDGE_SCAN: usize = 64;

/// Collects the items of one run, merging short events.
struct Collector<'a> {
    resolution_ps: i64,
    depth: u32,
    out: &'a mut TrackView,
    open: Option<Open>,
}

/// The merged run being collected.
struct Open {
    start_ps: i64,
    end_ps: i64,
    count: u64,
    longest_ps: i64,
    name: NameId,
    /// The event id while the run holds exactly one event.
    single: Option<u32>,
}

impl Collector<'_> {
    fn individual(&mut self, id: u32, start_ps: i64, dur_ps: i64, name: NameId) {
        self.flush();
        self.out.events.push(VisibleEvent { id, start_ps, dur_ps, depth: self.depth, name });
    }

    fn short(&mut self, start_ps: i64, end_ps: i64, count: u64, longest_ps: i64, name: NameId, single: Option<u32>) {
        if let Some(open) = self.open.as_mut().filter(|o| start_ps < o.start_ps.saturating_add(self.resolution_ps)) {
            open.end_ps = open.end_ps.max(end_ps);
            open.count += count;
            open.single = None;
            if longest_ps > open.longest_ps {
                open.longest_ps = longest_ps;
                open.name = name;
            }
            return;
        }
        self.flush();
        self.open = Some(Open { start_ps, end_ps, count, longest_ps, name, single });
    }

    fn flush(&mut self) {
        let Some(open) = self.open.take() else { return };
        match open.single {
            Some(id) if open.count == 1 => self.out.events.push(VisibleEvent {
                id,
                start_ps: open.start_ps,
                dur_ps: open.end_ps.saturating_sub(open.start_ps),
                depth: self.depth,
                name: open.name,
            }),
            _ => self.out.merged.push(MergedRun {
                start_ps: open.start_ps,
                end_ps: open.end_ps,
                depth: self.depth,
                count: open.count,
                name: open.name,
            }),
        }
    }
}

impl TimelineIndex {
    /// What to draw of `viewport` (see the module docs).
    pub fn view(&self, viewport: &Viewport<'_>) -> View {
        let width = viewport.width_px.max(1);
        let span = viewport.end_ps.saturating_sub(viewport.start_ps).max(0);
        let resolution_ps = (span / i64::from(width)).max(1);
        let mut view = View { resolution_ps, ..View::default() };
        let all: Vec<u32>;
        let tracks = match viewport.tracks {
            Some(t) => t,
            None => {
                all = (0..self.track_count()).collect();
                &all
            }
        };
        for &track in tracks {
            let Some(track_info) = self.track_runs(track) else { continue };
            let mut out = TrackView { track, ..TrackView::default() };
            for run in track_info {
                self.view_run(run, viewport.start_ps, viewport.end_ps, resolution_ps, width as usize, &mut out);
            }
            if !out.events.is_empty() || !out.merged.is_empty() {
                view.tracks.push(out);
            }
        }
        view.flows = self.flows_touching(view.tracks.iter().flat_map(|t| t.events.iter().map(|e| e.id)));
        view
    }

    /// The runs of `track`, outermost first.
    pub(crate) fn track_runs(&self, track: u32) -> Option<&[Run]> {
        let first = self.runs.partition_point(|r| r.track < track);
        let end = self.runs.partition_point(|r| r.track <= track);
        self.track(track).map(|_| &self.runs[first..end])
    }

    /// Collects what to draw of one run in `[start_ps, end_ps]` into `out`.
    fn view_run(&self, run: &Run, start_ps: i64, end_ps: i64, resolution_ps: i64, width: usize, out: &mut TrackView) {
        if end_ps < start_ps {
            return;
        }
        let events = EventCols::of(self);
        // Events of a run do not overlap: ends are sorted like starts.
        let lo = partition(run.events.clone(), &|i| events.end_of(i) < start_ps);
        let hi = partition(lo..run.events.end, &|i| events.starts.at(i) <= end_ps);
        if lo >= hi {
            return;
        }
        let mut collect = Collector { resolution_ps, depth: run.depth, out, open: None };
        let level = if hi - lo <= EVENTS_PER_PIXEL_SCANNED * width {
            None
        } else {
            let levels = self.levels.get(run.levels.clone()).unwrap_or(&[]);
            level_for(levels.iter().map(|l| l.width_ps), resolution_ps).and_then(|k| levels.get(k))
        };
        match level {
            None => events.collect_each(&mut collect, lo..hi),
            Some(level) => events.collect_grouped(&GroupCols::of(self), level, lo..hi, &mut collect),
        }
        collect.flush();
    }

    /// The flows with an end among `events`, each once, with both ends' track and
    /// start. The ids are sorted and walked along both flow tables with galloping
    /// searches, so few flows among many events cost little.
    fn flows_touching(&self, events: impl Iterator<Item = u32>) -> Vec<VisibleFlow> {
        if self.flow_count() == 0 {
            return Vec::new();
        }
        let mut ids: Vec<u32> = events.collect();
        ids.sort_unstable();
        ids.dedup();
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        for (key_part, other_part, outgoing) in
            [(Part::FlowFromSource, Part::FlowFromTarget, true), (Part::FlowToTarget, Part::FlowToSource, false)]
        {
            let keys = self.col::<u32>(key_part);
            let others = self.col::<u32>(other_part);
            let mut at = 0usize;
            for &id in &ids {
                at = gallop(at, keys.len(), |i| keys.at(i) < id);
                while at < keys.len() && keys.at(at) == id {
                    let other = others.at(at);
                    pairs.push(if outgoing { (id, other) } else { (other, id) });
                    at += 1;
                }
            }
        }
        pairs.sort_unstable();
        pairs.dedup();
        pairs
            .into_iter()
            .filter_map(|(from, to)| {
                let (a, b) = (self.event(from)?, self.event(to)?);
                Some(VisibleFlow {
                    from,
                    from_track: a.track,
                    from_ps: a.start_ps,
                    to,
                    to_track: b.track,
                    to_ps: b.start_ps,
                })
            })
            .collect()
    }
}

/// The first index in `from..len` where `pred` turns false, searching forward from
/// `from` in doubling steps (cheap when the answer is near).
fn gallop(from: usize, len: usize, pred: impl Fn(usize) -> bool) -> usize {
    let mut step = 1usize;
    let mut lo = from;
    while lo < len && pred(lo) {
        let probe = lo.saturating_add(step);
        if probe >= len || !pred(probe) {
            return partition(lo + 1..probe.min(len), &pred);
        }
        lo = probe;
        step *= 2;
    }
    lo
}

/// The event columns a viewport query reads.
struct EventCols<'a> {
    starts: Col<'a, i64>,
    durs: Col<'a, i64>,
    names: Col<'a, u32>,
}

impl<'a> EventCols<'a> {
    fn of(index: &'a TimelineIndex) -> EventCols<'a> {
        EventCols { starts: index.col(Part::Start), durs: index.col(Part::Duration), names: index.col(Part::Name) }
    }

    /// The end of event `i`, ps.
    #[inline(always)]
    fn end_of(&self, i: usize) -> i64 {
        self.starts.at(i).saturating_add(self.durs.at(i))
    }

    /// Event `i` as it is: on its own when longer than a pixel, else merged with the
    /// short events around it.
    #[inline(always)]
    fn collect_one(&self, collect: &mut Collector<'_>, i: usize) {
        let (start, dur, name) = (self.starts.at(i), self.durs.at(i), NameId(self.names.at(i)));
        if dur > collect.resolution_ps {
            collect.individual(i as u32, start, dur, name);
        } else {
            collect.short(start, start.saturating_add(dur), 1, dur, name, Some(i as u32));
        }
    }

    /// Events `range`, each as it is ([`EventCols::collect_one`]).
    #[inline(always)]
    fn collect_each(&self, collect: &mut Collector<'_>, range: std::ops::Range<usize>) {
        for i in range {
            self.collect_one(collect, i);
        }
    }

    /// Events `range` with `level`'s groups standing in for the events they hold:
    /// events outside groups are taken as they are, whole groups as one merged item.
    fn collect_grouped(
        &self,
        groups: &GroupCols<'_>,
        level: &Level,
        range: std::ops::Range<usize>,
        collect: &mut Collector<'_>,
    ) {
        let (lo, hi) = (range.start, range.end);
        let mut g = partition(level.groups.clone(), &|g| groups.end(g) <= lo);
        let mut i = lo;
        while i < hi {
            let next_group = if g < level.groups.end { (groups.first.at(g) as usize).max(lo) } else { hi };
            if next_group > i {
                let stop = next_group.min(hi);
                self.collect_each(collect, i..stop);
                i = stop;
                continue;
            }
            i = self.collect_group(groups, g, i, hi, collect);
            g += 1;
        }
    }

    /// The events of group `g` from `i` (inside it) to the group's end or `hi`, and
    /// returns where they stop. All of a group's events but the last are shorter than
    /// the level's buckets, hence than a pixel: a whole group is one merged item plus its
    /// last event; a group cut by the window's edge is scanned event by event when small
    /// ([`EDGE_SCAN`]), else merged.
    #[inline]
    fn collect_group(
        &self,
        groups: &GroupCols<'_>,
        g: usize,
        i: usize,
        hi: usize,
        collect: &mut Collector<'_>,
    ) -> usize {
        let last = groups.end(g).saturating_sub(1);
        let stop = (last + 1).min(hi);
        let inner_end = if stop > last { last } else { stop };
        if groups.first.at(g) as usize == i && stop > last {
            let l = groups.longest.at(g) as usize;
            collect.short(
                self.starts.at(i),
                self.end_of(last.saturating_sub(1)),
                last.saturating_sub(i) as u64,
                self.durs.at(l),
                NameId(self.names.at(l)),
                None,
            );
        } else if inner_end.saturating_sub(i) <= EDGE_SCAN {
            self.collect_each(collect, i..inner_end);
        } else {
            let l = groups.longest.at(g) as usize;
            let l = if (i..inner_end).contains(&l) { l } else { i };
            let (n, longest_ps) = (inner_end.saturating_sub(i) as u64, self.durs.at(l));
            collect.short(
                self.starts.at(i),
                self.end_of(inner_end.saturating_sub(1)),
                n,
                longest_ps,
                NameId(self.names.at(l)),
                None,
            );
        }
        if stop > last {
            self.collect_one(collect, last);
        }
        stop
    }
}

/// The group columns of the level index: per group its first event, its event count
/// and its longest event.
struct GroupCols<'a> {
    first: Col<'a, u32>,
    count: Col<'a, u32>,
    longest: Col<'a, u32>,
}

impl<'a> GroupCols<'a> {
    fn of(index: &'a TimelineIndex) -> GroupCols<'a> {
        GroupCols {
            first: index.col(Part::GroupFirst),
            count: index.col(Part::GroupCount),
            longest: index.col(Part::GroupLongest),
        }
    }

    /// The event after group `g`'s last.
    #[inline]
    fn end(&self, g: usize) -> usize {
        self.first.at(g) as usize + self.count.at(g) as usize
    }
}

/// The first index in `range` where `pred` turns false (it must be true on a prefix).
pub(crate) fn partition(range: std::ops::Range<usize>, pred: &impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (range.start, range.end);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::builder::{SectionKind, TimelineBuilder};
    use crate::synthetic::Synthetic;

    fn index_of(spec: Synthetic) -> TimelineIndex {
        let mut b = TimelineBuilder::new();
        spec.add_to(&mut b).expect("generate");
        b.finish().expect("finish").into_index().expect("open")
    }

    /// Checks one viewport against a brute-force scan of every event of the index.
    fn check(index: &TimelineIndex, start_ps: i64, end_ps: i64, width_px: u32) {
        let view = index.view(&Viewport { start_ps, end_ps, width_px, tracks: None });
        let r = view.resolution_ps;
        assert_eq!(r, ((end_ps - start_ps) / i64::from(width_px)).max(1));
        for track in 0..index.track_count() {
            let expected: Vec<_> = (0..index.event_count() as u32)
                .filter_map(|id| index.event(id))
                .filter(|e| e.track == track && e.start_ps <= end_ps && e.start_ps + e.dur_ps >= start_ps)
                .collect();
            let got = view.tracks.iter().find(|t| t.track == track).cloned().unwrap_or_default();
            let individual: HashSet<u32> = got.events.iter().map(|e| e.id).collect();
            assert_eq!(individual.len(), got.events.len(), "an event twice");
            let merged: u64 = got.merged.iter().map(|m| m.count).sum();
            assert_eq!(merged + individual.len() as u64, expected.len() as u64, "events lost or doubled");
            for e in &expected {
                if e.dur_ps > r {
                    assert!(individual.contains(&e.id), "long event {} merged at r={r}", e.id);
                }
            }
            for v in &got.events {
                let e = index.event(v.id).expect("event");
                assert_eq!((v.start_ps, v.dur_ps, v.depth, v.name), (e.start_ps, e.dur_ps, e.depth, e.name));
                assert!(expected.iter().any(|x| x.id == v.id), "event {} not in the window", v.id);
            }
            let depth = index.track(track).expect("track").depth as usize;
            for m in &got.merged {
                assert!(m.count >= 1 && m.end_ps >= m.start_ps);
                assert!(m.end_ps - m.start_ps <= 2 * r, "merged run of {} ps at r={r}", m.end_ps - m.start_ps);
            }
            let items = got.events.len() + got.merged.len();
            assert!(items <= depth * (2 * width_px as usize + 4), "{items} items for {width_px} px");
        }
    }

    #[test]
    fn every_viewport_keeps_every_event_and_long_events_stay_individual() {
        let spec = Synthetic { streams: 2, threads: 2, names: 300, ..Synthetic::realistic(30_000, 11) };
        let index = index_of(spec);
        let (first, last) = index.span_ps();
        let mut seed = 99u64;
        let mut next = |n: i64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as i64) % n.max(1)
        };
        check(&index, first, last, 1);
        check(&index, first, last, 1000);
        check(&index, first - 10, first, 100);
        for _ in 0..60 {
            let zoom = 1i64 << next(40);
            let len = ((last - first) / zoom).max(1);
            let start = first + next(last - first);
            let width = [1, 7, 64, 300, 2000][next(5) as usize] as u32;
            check(&index, start, start + len, width);
        }
    }

    #[test]
    fn coarse_views_of_dense_tracks_return_about_a_pixel_per_item() {
        // One track, one depth: 100 000 back-to-back 1 µs events, a 1 ms event every 10 000.
        let mut b = TimelineBuilder::new();
        let s = b.section("/device:GPU:0", SectionKind::Device);
        let t = b.track(s, "Stream #1").expect("track");
        let short = b.name("short");
        let long = b.name("long");
        let mut at = 0i64;
        for i in 0..100_000u64 {
            let (dur, name) = if i % 10_000 == 5_000 { (1_000_000_000, long) } else { (1_000_000, short) };
            b.event(t, at, dur, name, i).expect("event");
            at += dur;
        }
        let index = b.finish().expect("finish").into_index().expect("open");
        let (first, last) = index.span_ps();
        let view = index.view(&Viewport { start_ps: first, end_ps: last, width_px: 500, tracks: None });
        let track = &view.tracks[0];
        assert_eq!(track.events.len(), 10, "the ten long events");
        assert!(track.events.iter().all(|e| e.name == long));
        assert!(track.merged.len() <= 520, "{} merged runs", track.merged.len());
        assert!(track.merged.iter().all(|m| m.name == short));
        let total: u64 = track.merged.iter().map(|m| m.count).sum();
        assert_eq!(total + 10, 100_000);
        // Zoomed in on 5 µs: every event individually, including the two that only
        // touch the window's ends ([1, 2) µs and [7, 8) µs).
        let view = index.view(&Viewport { start_ps: 2_000_000, end_ps: 7_000_000, width_px: 1000, tracks: None });
        assert_eq!(view.tracks[0].events.len(), 7);
        assert!(view.tracks[0].merged.is_empty());
    }

    #[test]
    fn lone_short_events_come_back_individually_and_tracks_can_be_chosen() {
        let mut b = TimelineBuilder::new();
        let s = b.section("/host:CPU", SectionKind::Host);
        let t0 = b.track(s, "a").expect("track");
        let t1 = b.track(s, "b").expect("track");
        let n = b.name("tick");
        b.event(t0, 0, 10, n, 0).expect("event");
        b.event(t0, 1_000_000, 10, n, 1).expect("event");
        b.event(t1, 500, 5, n, 2).expect("event");
        let index = b.finish().expect("finish").into_index().expect("open");
        let view = index.view(&Viewport { start_ps: 0, end_ps: 1_000_000, width_px: 10, tracks: Some(&[0]) });
        assert_eq!(view.tracks.len(), 1);
        assert_eq!(view.tracks[0].events.len(), 2);
        assert!(view.tracks[0].merged.is_empty());
        let view = index.view(&Viewport { start_ps: 0, end_ps: 1_000_000, width_px: 10, tracks: Some(&[1, 7]) });
        assert_eq!(view.tracks.len(), 1);
        assert_eq!(view.tracks[0].track, 1);
    }

    #[test]
    fn flows_come_with_their_visible_ends() {
        let mut b = TimelineBuilder::new();
        let dev = b.section("/device:GPU:0", SectionKind::Device);
        let stream = b.track(dev, "Stream #7").expect("track");
        let host = b.section("/host:CPU", SectionKind::Host);
        let thread = b.track(host, "main").expect("track");
        let launch_name = b.name("cudaLaunchKernel");
        let kernel_name = b.name("gemm");
        let launch = b.event(thread, 100, 50, launch_name, 0).expect("event");
        let kernel = b.event(stream, 400, 1000, kernel_name, 1).expect("event");
        b.flow(launch, kernel);
        let index = b.finish().expect("finish").into_index().expect("open");
        let view = index.view(&Viewport { start_ps: 0, end_ps: 2000, width_px: 100, tracks: None });
        assert_eq!(view.flows.len(), 1);
        let f = view.flows[0];
        assert_eq!((f.from_track, f.from_ps, f.to_track, f.to_ps), (1, 100, 0, 400));
        // Only the kernel is in the window: the flow still comes back once.
        let view = index.view(&Viewport { start_ps: 300, end_ps: 2000, width_px: 100, tracks: None });
        assert_eq!(view.flows.len(), 1);
        assert!(index.view(&Viewport { start_ps: 5000, end_ps: 6000, width_px: 100, tracks: None }).flows.is_empty());
    }
}

#[cfg(test)]
mod gallop_tests {
    #[test]
    fn galloping_finds_the_same_boundary_as_a_scan() {
        let values: Vec<u32> = (0..200).map(|i| i / 3).collect();
        for from in [0, 1, 5, 100, 199, 200] {
            for target in [0, 1, 2, 30, 66, 67, 500] {
                let expected = (from..values.len()).find(|&i| values[i] >= target).unwrap_or(values.len());
                assert_eq!(super::gallop(from, values.len(), |i| values[i] < target), expected, "{from} {target}");
            }
        }
    }
}
