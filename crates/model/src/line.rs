//! A line (XSpace `XLine`: a thread, a GPU stream, a derived timeline) and its events,
//! stored column-wise.
//!
//! Event `i` of a line is `(offset_ps[i], duration_ps[i], metadata[i])` plus the stats
//! `stats[stat_start[i]..stat_start[i + 1]]` of the line's own [`StatStore`]. Keeping
//! the stats per line (not per plane) lets readers decode lines independently, in
//! parallel, with no shared mutable state.

use crate::packed::PackedI64;
use crate::packed_u32::PackedU32;
use crate::stats::{Stat, StatStore, StatValue};

/// A Chrome-trace process or thread id: an integer, or a string (Kineto writes
/// `"pid": "Spans"` for its own pseudo-tracks).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrackId {
    /// An integer id.
    Int(i64),
    /// A string id.
    Str(String),
}

/// The event columns of one line. All vectors have one entry per event, except
/// `stat_start`, which has one more (the end of the last event's stats).
#[derive(Clone, Debug, PartialEq)]
pub struct EventColumns {
    /// Start of each event in picoseconds, relative to the line's `timestamp_ns`
    /// (packed: about 4 bytes an event).
    pub offset_ps: PackedI64,
    /// Duration of each event in picoseconds, 0 for instants (packed likewise).
    pub duration_ps: PackedI64,
    /// Dense index of each event's [`crate::EventMetadata`] in its plane (packed:
    /// about 2 bytes an event).
    pub metadata: PackedU32,
    /// Start of each event's stats in the line's stat store; `len() == events + 1`
    /// (packed: about 2 bytes an event).
    pub stat_start: PackedU32,
    /// Events that carry XSpace's `num_occurrences` instead of an offset (aggregated
    /// events): `(event index, occurrences)`, sorted by index. Their offset is 0.
    pub occurrences: Vec<(u32, i64)>,
}

impl Default for EventColumns {
    fn default() -> Self {
        EventColumns {
            offset_ps: PackedI64::new(),
            duration_ps: PackedI64::new(),
            metadata: PackedU32::new(),
            stat_start: PackedU32::from_iter([0]),
            occurrences: Vec::new(),
        }
    }
}

impl EventColumns {
    /// Reserves room for exactly `events` more events.
    pub fn reserve(&mut self, events: usize) {
        self.offset_ps.reserve(events);
        self.duration_ps.reserve(events);
        self.metadata.reserve(events);
        self.stat_start.reserve(events);
    }

    /// Gives back the room reserved beyond the events held.
    pub fn shrink_to_fit(&mut self) {
        self.offset_ps.shrink_to_fit();
        self.duration_ps.shrink_to_fit();
        self.metadata.shrink_to_fit();
        self.stat_start.shrink_to_fit();
    }
}

/// One timeline row of a plane.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Line {
    /// XSpace line id (the thread id for host threads, the stream id for GPU streams).
    pub id: i64,
    /// XSpace `display_id` (used as the trace-viewer thread id).
    pub display_id: i64,
    /// Line name (thread name, `Stream #7`, `Steps`, …).
    pub name: String,
    /// Display name ("" when the producer set none).
    pub display_name: String,
    /// Start of the line in nanoseconds relative to the profile start (XSpace
    /// `timestamp_ns` as saved by the TF/JAX profilers).
    pub timestamp_ns: i64,
    /// Duration of the line in picoseconds as recorded by the producer (often 0).
    pub duration_ps: i64,
    /// The events, column-wise.
    pub events: EventColumns,
    /// Stats of all events of this line.
    pub stats: StatStore,
    /// The Chrome-trace `(pid, tid)` this line was read from; `None` for XSpace input.
    pub chrome_track: Option<(TrackId, TrackId)>,
}

/// A borrowed view of one event of a line.
#[derive(Clone, Copy, Debug)]
pub struct Event<'a> {
    line: &'a Line,
    index: usize,
}

impl Line {
    /// Creates an empty line.
    pub fn new(id: i64, name: impl Into<String>) -> Line {
        Line { id, name: name.into(), ..Line::default() }
    }

    /// Number of events.
    #[inline]
    pub fn len(&self) -> usize {
        self.events.metadata.len()
    }

    /// True when the line has no events.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.events.metadata.is_empty()
    }

    /// The name to show: `display_name` if set, else `name`.
    pub fn shown_name(&self) -> &str {
        if self.display_name.is_empty() { &self.name } else { &self.display_name }
    }

    /// Appends an event whose stats were pushed to `self.stats` just before this call.
    #[inline(always)]
    pub fn push_event(&mut self, metadata: u32, offset_ps: i64, duration_ps: i64) {
        self.events.metadata.push(metadata);
        self.events.offset_ps.push(offset_ps);
        self.events.duration_ps.push(duration_ps);
        // Saturates at u32::MAX; readers refuse lines with more than u32::MAX stats.
        let end = u32::try_from(self.stats.len()).unwrap_or(u32::MAX);
        self.events.stat_start.push(end);
    }

    /// Event `index`, if it exists.
    #[inline]
    pub fn event(&self, index: usize) -> Option<Event<'_>> {
        (index < self.len()).then_some(Event { line: self, index })
    }

    /// All events in stored order.
    #[inline]
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Event<'_>> + '_ {
        (0..self.len()).map(move |index| Event { line: self, index })
    }

    /// Line start in picoseconds relative to the profile start.
    #[inline(always)]
    pub fn start_ps(&self) -> i64 {
        self.timestamp_ns.saturating_mul(crate::time::PS_PER_NS)
    }

    /// Earliest event start and latest event end (picoseconds, relative to the profile
    /// start), ignoring aggregated events; `None` for a line without timed events.
    pub fn span_ps(&self) -> Option<(i64, i64)> {
        let base = self.start_ps();
        let mut span: Option<(i64, i64)> = None;
        let mut aggregated = self.events.occurrences.iter().peekable();
        for i in 0..self.len() {
            if aggregated.peek().is_some_and(|(idx, _)| *idx as usize == i) {
                aggregated.next();
                continue;
            }
            let start = base.saturating_add(self.events.offset_ps.at(i));
            let end = start.saturating_add(self.events.duration_ps.at(i).max(0));
            span = Some(match span {
                None => (start, end),
                Some((s, e)) => (s.min(start), e.max(end)),
            });
        }
        span
    }
}

impl<'a> Event<'a> {
    /// Position of the event in its line.
    #[inline]
    pub fn index(&self) -> usize {
        self.index
    }

    /// Dense index of the event's metadata in its plane.
    #[inline]
    pub fn metadata_index(&self) -> u32 {
        self.line.events.metadata.at(self.index)
    }

    /// Offset from the line start in picoseconds.
    #[inline(always)]
    pub fn offset_ps(&self) -> i64 {
        self.line.events.offset_ps.at(self.index)
    }

    /// Start in picoseconds relative to the profile start.
    #[inline(always)]
    pub fn start_ps(&self) -> i64 {
        self.line.start_ps().saturating_add(self.offset_ps())
    }

    /// Duration in picoseconds.
    #[inline(always)]
    pub fn duration_ps(&self) -> i64 {
        self.line.events.duration_ps.at(self.index)
    }

    /// End in picoseconds relative to the profile start.
    #[inline(always)]
    pub fn end_ps(&self) -> i64 {
        self.start_ps().saturating_add(self.duration_ps())
    }

    /// XSpace `num_occurrences` for aggregated events, `None` for timed ones.
    pub fn num_occurrences(&self) -> Option<i64> {
        let idx = u32::try_from(self.index).ok()?;
        let occ = &self.line.events.occurrences;
        occ.binary_search_by_key(&idx, |(i, _)| *i).ok().map(|pos| occ[pos].1)
    }

    /// The event's own stats (metadata stats are on the plane's [`crate::EventMetadata`]).
    #[inline]
    pub fn stats(&self) -> &'a [Stat] {
        let starts = &self.line.events.stat_start;
        let (Some(from), Some(to)) = (starts.get(self.index), starts.get(self.index + 1)) else { return &[] };
        self.line.stats.stats().get(from as usize..to as usize).unwrap_or(&[])
    }

    /// The store that holds this event's string payloads.
    #[inline]
    pub fn store(&self) -> &'a StatStore {
        &self.line.stats
    }

    /// The event's own value of stat `key` (the first, should the key repeat), without
    /// looking at its metadata's stats.
    #[inline]
    pub fn own_stat(&self, key: u32) -> Option<StatValue> {
        self.stats().iter().find(|stat| stat.key() == key).map(|stat| stat.value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::StatValue;

    #[test]
    fn events_see_their_own_stats_and_times() {
        let mut line = Line::new(7, "Stream #7");
        line.timestamp_ns = 10;
        line.stats.push(0, StatValue::Int(1));
        line.push_event(0, 5, 20);
        line.push_event(1, 40, 0);
        line.stats.push(1, StatValue::Int(2));
        line.stats.push(1, StatValue::Int(3));
        line.push_event(0, 50, 10);
        let events: Vec<_> = line.iter().collect();
        assert_eq!(events[0].stats().len(), 1);
        assert_eq!(events[1].stats().len(), 0);
        assert_eq!(events[2].stats().len(), 2);
        assert_eq!(events[0].start_ps(), 10_005);
        assert_eq!(line.span_ps(), Some((10_005, 10_060)));
    }
}
