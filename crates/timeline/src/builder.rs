//! Building an index from sections, tracks, events and flows, without the model.
//!
//! The builder only collects: events go to their track's list as they come, in any
//! order. [`TimelineBuilder::finish`] then lays the tracks out ([`crate::layout`], on
//! every thread) — sort by start, assign depths, order by (depth, start) so that each
//! depth of a track (a *run*) is one contiguous range of event ids, build the run's
//! levels — then records the runs in track order and builds the per-name postings in
//! time order ([`crate::postings`]) and the flows by both ends.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;

use crate::error::BuildError;
use crate::layout::{EventColumns, LaidTrack, RawEvent, lay_out};
use crate::levels::Level;
use crate::postings::build_postings;
use crate::progress::{BuildProgress, BuildStage, COLLECT_REPORT_EVERY};

/// The most events one index holds (event ids are `u32`).
pub const MAX_EVENTS: u64 = u32::MAX as u64 - 1;

/// What a section of the timeline shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SectionKind {
    /// A device (GPU, TPU, …): its streams and the lines derived for it.
    Device,
    /// Host threads.
    Host,
    /// Tracks derived by the caller that belong to no device (e.g. PyTorch steps).
    Derived,
}

impl SectionKind {
    pub(crate) fn code(self) -> u64 {
        match self {
            SectionKind::Device => 0,
            SectionKind::Host => 1,
            SectionKind::Derived => 2,
        }
    }

    pub(crate) fn from_code(code: u64) -> Option<SectionKind> {
        match code {
            0 => Some(SectionKind::Device),
            1 => Some(SectionKind::Host),
            2 => Some(SectionKind::Derived),
            _ => None,
        }
    }
}

/// An interned event name: an index into the index's name table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct NameId(pub u32);

/// A section being built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SectionHandle(u32);

/// A track being built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrackHandle(u32);

/// An event being built: its track and its position among that track's events in the
/// order they were added. Used to state flows before event ids exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventRef {
    track: u32,
    ordinal: u32,
}

#[derive(Debug)]
struct SectionDraft {
    name: String,
    kind: SectionKind,
    tracks: Vec<u32>,
}

#[derive(Debug)]
struct TrackDraft {
    name: String,
    events: Vec<RawEvent>,
}

/// Collects a timeline; [`TimelineBuilder::finish`] turns it into a [`BuiltIndex`].
#[derive(Debug, Default)]
pub struct TimelineBuilder {
    name_ids: HashMap<Box<str>, u32>,
    names: Vec<Box<str>>,
    sections: Vec<SectionDraft>,
    tracks: Vec<TrackDraft>,
    flows: Vec<(EventRef, EventRef)>,
    events: u64,
    progress: Option<Arc<BuildProgress>>,
    placement: Placement,
}

/// Where the next host's sections and events go when several hosts share one timeline
/// (see [`TimelineBuilder::place_host`]); the default places nothing differently.
#[derive(Clone, Debug, Default)]
struct Placement {
    /// Put before each section's name (`rank1 · `).
    section_prefix: String,
    /// Added to each event's start, ps.
    offset_ps: i64,
    /// Added to the plane of each event's [`crate::ModelRef`]: the host's planes come
    /// after those of the hosts placed before it.
    plane_base: u32,
}

impl TimelineBuilder {
    /// An empty builder.
    pub fn new() -> TimelineBuilder {
        TimelineBuilder::default()
    }

    /// From now on, sections are named `prefix` + their name, events start `offset_ps`
    /// later than they are added, and their model references count planes from
    /// `plane_base` (the planes of the hosts placed before): how several hosts (ranks)
    /// share one time axis, each under its own name and shifted to align with the
    /// others. A reader finds an event's host by its plane (see [`crate::ModelRef`]).
    pub fn place_host(&mut self, prefix: &str, offset_ps: i64, plane_base: u32) {
        self.placement = Placement { section_prefix: prefix.to_string(), offset_ps, plane_base };
    }

    /// The first plane of the host being added (see [`TimelineBuilder::place_host`]).
    pub(crate) fn plane_base(&self) -> u32 {
        self.placement.plane_base
    }

    /// Adds a section after the ones added so far (sections are shown in this order).
    pub fn section(&mut self, name: &str, kind: SectionKind) -> SectionHandle {
        let name = format!("{}{name}", self.placement.section_prefix);
        self.sections.push(SectionDraft { name, kind, tracks: Vec::new() });
        SectionHandle(self.sections.len() as u32 - 1)
    }

    /// Adds a track at the end of `section`.
    pub fn track(&mut self, section: SectionHandle, name: &str) -> Result<TrackHandle, BuildError> {
        let id = u32::try_from(self.tracks.len()).map_err(|_| BuildError::TooManyTracks)?;
        let draft = self.sections.get_mut(section.0 as usize).ok_or(BuildError::UnknownSection(section.0))?;
        draft.tracks.push(id);
        self.tracks.push(TrackDraft { name: name.to_string(), events: Vec::new() });
        Ok(TrackHandle(id))
    }

    /// The id of event name `name`, interning it on first use.
    pub fn name(&mut self, name: &str) -> NameId {
        if let Some(&id) = self.name_ids.get(name) {
            return NameId(id);
        }
        let id = self.names.len() as u32;
        self.names.push(name.into());
        self.name_ids.insert(name.into(), id);
        NameId(id)
    }

    /// Adds an event to `track`: start and duration in picoseconds relative to the
    /// profile start (a negative duration counts as 0), its name, and `source`, an
    /// opaque number the caller uses to find the event again (see
    /// [`crate::ModelRef`]). Events can come in any order.
    pub fn event(
        &mut self,
        track: TrackHandle,
        start_ps: i64,
        dur_ps: i64,
        name: NameId,
        source: u64,
    ) -> Result<EventRef, BuildError> {
        if self.events >= MAX_EVENTS {
            return Err(BuildError::TooManyEvents(MAX_EVENTS));
        }
        if name.0 as usize >= self.names.len() {
            return Err(BuildError::UnknownName(name.0));
        }
        let draft = self.tracks.get_mut(track.0 as usize).ok_or(BuildError::UnknownTrack(track.0))?;
        // Below MAX_EVENTS, so it fits.
        let ordinal = draft.events.len() as u32;
        let start_ps = start_ps.saturating_add(self.placement.offset_ps);
        draft.events.push(RawEvent { start_ps, dur_ps: dur_ps.max(0), source, name: name.0, ordinal });
        self.events += 1;
        if self.events.is_multiple_of(COLLECT_REPORT_EVERY)
            && let Some(progress) = &self.progress
        {
            progress.set_done(self.events);
        }
        Ok(EventRef { track: track.0, ordinal })
    }

    /// Reserves room for `additional` more events on `track` (an optimisation for
    /// callers that know their sizes; unknown tracks are ignored).
    pub fn reserve_events(&mut self, track: TrackHandle, additional: usize) {
        if let Some(draft) = self.tracks.get_mut(track.0 as usize) {
            draft.events.reserve(additional);
        }
    }

    /// Adds a flow (an arrow) from one event to another, e.g. a kernel launch to the
    /// kernel. Flows naming events that were never added are dropped by `finish`.
    pub fn flow(&mut self, from: EventRef, to: EventRef) {
        self.flows.push((from, to));
    }

    /// Number of events added so far.
    pub fn event_count(&self) -> u64 {
        self.events
    }

    /// Reports this build's progress to `progress` from now on, `expected_events` being
    /// about how many events will be added (the collecting stage's total).
    pub fn report_to(&mut self, progress: Arc<BuildProgress>, expected_events: u64) {
        progress.enter(BuildStage::Collecting, expected_events);
        progress.set_done(self.events);
        self.progress = Some(progress);
    }

    /// Lays the index out (see the module docs).
    pub fn finish(self) -> Result<BuiltIndex, BuildError> {
        let TimelineBuilder { names, sections, mut tracks, flows, events, progress, .. } = self;
        let total = usize::try_from(events).map_err(|_| BuildError::TooManyEvents(MAX_EVENTS))?;
        if let Some(progress) = &progress {
            progress.enter(BuildStage::LayingOut, events);
        }
        // Tracks in display order: sections in order, each section's tracks in order.
        let order: Vec<(u32, u64)> = sections
            .iter()
            .enumerate()
            .flat_map(|(s, section)| section.tracks.iter().map(move |&handle| (handle, s as u64)))
            .collect();
        let raw = order.iter().map(|&(handle, _)| std::mem::take(&mut tracks[handle as usize].events)).collect();
        let (columns, laid) = lay_out(raw, total, progress.as_deref());
        let mut out = BuiltIndex::new(names, columns);
        // Millions of groups on a large trace: their columns are sized once.
        let groups = laid.iter().flat_map(|track| &track.run_levels).flatten().map(|level| level.groups.len()).sum();
        out.reserve_groups(groups);
        let mut ordinal_to_id: Vec<Vec<u32>> = vec![Vec::new(); if flows.is_empty() { 0 } else { tracks.len() }];
        for (&(handle, section), laid) in order.iter().zip(laid) {
            let name = std::mem::take(&mut tracks[handle as usize].name);
            out.push_track(name, section, laid, ordinal_to_id.get_mut(handle as usize));
        }
        out.sections = sections
            .into_iter()
            .scan(0u64, |first_track, section| {
                let record = SectionRecord {
                    name: section.name,
                    kind: section.kind,
                    first_track: *first_track,
                    track_count: section.tracks.len() as u64,
                };
                *first_track += record.track_count;
                Some(record)
            })
            .collect();
        let runs: Vec<Range<usize>> =
            out.runs.iter().map(|run| run.first_event as usize..(run.first_event + run.event_count) as usize).collect();
        (out.posting_offsets, out.postings) = build_postings(out.names.len(), &out.name, &out.start_ps, &runs);
        out.set_flows(&flows, &ordinal_to_id);
        Ok(out)
    }
}

/// A section of a built index.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct SectionRecord {
    pub(crate) name: String,
    pub(crate) kind: SectionKind,
    pub(crate) first_track: u64,
    pub(crate) track_count: u64,
}

/// A track of a built index: its runs (one per depth) and its events.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TrackRecord {
    pub(crate) name: String,
    pub(crate) section: u64,
    pub(crate) first_run: u64,
    pub(crate) run_count: u64,
    pub(crate) first_event: u64,
    pub(crate) event_count: u64,
}

/// The events of one track at one depth, and its levels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RunRecord {
    pub(crate) first_event: u64,
    pub(crate) event_count: u64,
    pub(crate) first_level: u64,
    pub(crate) level_count: u64,
}

/// One level of one run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LevelRecord {
    pub(crate) width_ps: i64,
    pub(crate) first_group: u64,
    pub(crate) group_count: u64,
}

/// A finished index in memory, ready to be written ([`BuiltIndex::write`]) or opened
/// directly ([`BuiltIndex::into_index`]). Event ids are positions in the event
/// columns: tracks in order, then depths, then start times.
#[derive(Clone, Debug, PartialEq)]
pub struct BuiltIndex {
    pub(crate) names: Vec<Box<str>>,
    pub(crate) sections: Vec<SectionRecord>,
    pub(crate) tracks: Vec<TrackRecord>,
    pub(crate) runs: Vec<RunRecord>,
    pub(crate) levels: Vec<LevelRecord>,
    pub(crate) group_first: Vec<u32>,
    pub(crate) group_count: Vec<u32>,
    pub(crate) group_longest: Vec<u32>,
    pub(crate) start_ps: Vec<i64>,
    pub(crate) dur_ps: Vec<i64>,
    pub(crate) name: Vec<u32>,
    pub(crate) source: Vec<u64>,
    pub(crate) posting_offsets: Vec<u64>,
    pub(crate) postings: Vec<u32>,
    /// Flows as (from, to) event ids, sorted by from.
    pub(crate) flows_by_from: Vec<(u32, u32)>,
    /// The same flows as (to, from), sorted by to.
    pub(crate) flows_by_to: Vec<(u32, u32)>,
    /// Earliest start and latest end, `None` without events.
    pub(crate) span_ps: Option<(i64, i64)>,
}

impl BuiltIndex {
    fn new(names: Vec<Box<str>>, columns: EventColumns) -> BuiltIndex {
        let EventColumns { start_ps, dur_ps, name, source } = columns;
        BuiltIndex {
            names,
            sections: Vec::new(),
            tracks: Vec::new(),
            runs: Vec::new(),
            levels: Vec::new(),
            group_first: Vec::new(),
            group_count: Vec::new(),
            group_longest: Vec::new(),
            start_ps,
            dur_ps,
            name,
            source,
            posting_offsets: Vec::new(),
            postings: Vec::new(),
            flows_by_from: Vec::new(),
            flows_by_to: Vec::new(),
            span_ps: None,
        }
    }

    /// Number of events.
    pub fn event_count(&self) -> u64 {
        self.start_ps.len() as u64
    }

    /// Records one laid-out track: its runs, their levels and its span; stores its ids
    /// by ordinal in `ids` when flows need them.
    fn push_track(&mut self, name: String, section: u64, laid: LaidTrack, ids: Option<&mut Vec<u32>>) {
        let LaidTrack { first_event, run_bounds, run_levels, ids_by_ordinal, span_ps } = laid;
        let first_run = self.runs.len() as u64;
        for (bounds, levels) in run_bounds.windows(2).zip(&run_levels) {
            self.push_run(first_event + bounds[0], first_event + bounds[1], levels);
        }
        let events = ids_by_ordinal.len();
        if let Some(ids) = ids {
            *ids = ids_by_ordinal;
        }
        if let Some((start, end)) = span_ps {
            self.span_ps = Some(match self.span_ps {
                None => (start, end),
                Some((first, last)) => (first.min(start), last.max(end)),
            });
        }
        self.tracks.push(TrackRecord {
            name,
            section,
            first_run,
            run_count: run_levels.len() as u64,
            first_event: first_event as u64,
            event_count: events as u64,
        });
    }

    /// Makes room for `groups` more groups.
    fn reserve_groups(&mut self, groups: usize) {
        self.group_first.reserve_exact(groups);
        self.group_count.reserve_exact(groups);
        self.group_longest.reserve_exact(groups);
    }

    /// Records the run of events `from..to` and its levels.
    fn push_run(&mut self, from: usize, to: usize, levels: &[Level]) {
        let first_level = self.levels.len() as u64;
        for level in levels {
            self.levels.push(LevelRecord {
                width_ps: level.width_ps,
                first_group: self.group_first.len() as u64,
                group_count: level.groups.len() as u64,
            });
            let from = from as u32;
            self.group_first.extend(level.groups.iter().map(|&(first, _, _)| from + first));
            self.group_count.extend(level.groups.iter().map(|&(_, count, _)| count));
            self.group_longest.extend(level.groups.iter().map(|&(_, _, longest)| from + longest));
        }
        self.runs.push(RunRecord {
            first_event: from as u64,
            event_count: (to - from) as u64,
            first_level,
            level_count: levels.len() as u64,
        });
    }

    /// Resolves the flows to event ids, dropping those naming unknown events and
    /// duplicates.
    fn set_flows(&mut self, flows: &[(EventRef, EventRef)], ids: &[Vec<u32>]) {
        let id_of = |e: &EventRef| ids.get(e.track as usize)?.get(e.ordinal as usize).copied();
        let mut by_from: Vec<(u32, u32)> =
            flows.iter().filter_map(|(from, to)| Some((id_of(from)?, id_of(to)?))).filter(|(a, b)| a != b).collect();
        by_from.sort_unstable();
        by_from.dedup();
        let mut by_to: Vec<(u32, u32)> = by_from.iter().map(|&(from, to)| (to, from)).collect();
        by_to.sort_unstable();
        self.flows_by_from = by_from;
        self.flows_by_to = by_to;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::FlowDirection;

    #[test]
    fn tracks_are_laid_out_by_depth_then_time_with_nothing_lost() {
        let mut b = TimelineBuilder::new();
        let host = b.section("/host:CPU", SectionKind::Host);
        let dev = b.section("/device:GPU:0", SectionKind::Device);
        let thread = b.track(host, "main").expect("track");
        let stream = b.track(dev, "Stream #7").expect("track");
        let (outer, inner, partial) = (b.name("outer"), b.name("inner"), b.name("partial"));
        // Added out of order: inner [20,30) in outer [0,100); partial [90,150) overlaps outer.
        b.event(thread, 90, 60, partial, 3).expect("event");
        b.event(thread, 20, 10, inner, 2).expect("event");
        b.event(thread, 0, 100, outer, 1).expect("event");
        b.event(stream, 5, -3, inner, 4).expect("event");
        let index = b.finish().expect("finish").into_index().expect("open");

        assert_eq!(index.event_count(), 4);
        assert_eq!(index.span_ps(), (0, 150));
        let sections: Vec<_> = index.sections().map(|s| (s.name.to_string(), s.kind, s.tracks)).collect();
        assert_eq!(
            sections,
            vec![("/host:CPU".into(), SectionKind::Host, 0..1), ("/device:GPU:0".into(), SectionKind::Device, 1..2)]
        );
        let main = index.track(0).expect("track");
        assert_eq!((main.name, main.depth, main.events), ("main", 2, 3));
        let events: Vec<_> = (0..4).map(|id| index.event(id).expect("event")).collect();
        let shape: Vec<_> =
            events.iter().map(|e| (e.track, e.depth, e.start_ps, e.dur_ps, index.name(e.name), e.source)).collect();
        assert_eq!(
            shape,
            vec![
                (0, 0, 0, 100, "outer", 1),
                (0, 1, 20, 10, "inner", 2),
                (0, 1, 90, 60, "partial", 3),
                (1, 0, 5, 0, "inner", 4),
            ]
        );
        assert!(index.event(4).is_none());
    }

    #[test]
    fn the_index_is_the_same_on_one_thread_and_on_several() {
        let build = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
            pool.install(|| {
                let mut b = TimelineBuilder::new();
                crate::synthetic::Synthetic::realistic(300_000, 7).add_to(&mut b).expect("generate");
                b.finish().expect("finish")
            })
        };
        let one = build(1);
        assert!(one.flows_by_from.len() > 100 && one.runs.len() > 32, "tracks nest and link");
        assert!(one == build(3), "3 threads");
    }

    #[test]
    fn flows_resolve_to_event_ids_both_ways() {
        let mut b = TimelineBuilder::new();
        let s = b.section("/host:CPU", SectionKind::Host);
        let t = b.track(s, "t").expect("track");
        let n = b.name("e");
        let late = b.event(t, 500, 1, n, 0).expect("event");
        let early = b.event(t, 100, 1, n, 0).expect("event");
        b.flow(early, late);
        b.flow(early, late);
        b.flow(early, early);
        let index = b.finish().expect("finish").into_index().expect("open");
        assert_eq!(index.flow_count(), 1, "duplicates and self-loops dropped");
        assert_eq!(index.flows_of(0), vec![crate::FlowLink { direction: FlowDirection::Out, event: 1 }]);
        assert_eq!(index.flows_of(1), vec![crate::FlowLink { direction: FlowDirection::In, event: 0 }]);
    }

    #[test]
    fn handles_from_elsewhere_are_errors_not_panics() {
        let mut other = TimelineBuilder::new();
        let s = other.section("x", SectionKind::Derived);
        let t = other.track(s, "y").expect("track");
        let n = other.name("z");
        let mut b = TimelineBuilder::new();
        assert!(matches!(b.track(s, "y"), Err(BuildError::UnknownSection(0))));
        assert!(matches!(b.event(t, 0, 1, NameId(0), 0), Err(BuildError::UnknownName(0))));
        let _ = b.name("z");
        assert!(matches!(b.event(t, 0, 1, n, 0), Err(BuildError::UnknownTrack(0))));
        let empty = TimelineBuilder::new().finish().expect("finish").into_index().expect("open");
        assert_eq!((empty.event_count(), empty.track_count(), empty.span_ps()), (0, 0, (0, 0)));
    }
}
