//! A plane (XSpace `XPlane`: one device or the host) with its interned metadata tables.
//!
//! Event names and stat keys are stored once per plane, in `event_metadata` and
//! `stat_metadata`; events and stats refer to them by dense `u32` index. The original
//! XSpace ids are kept beside each entry so a written XSpace keeps them.

use crate::fxhash::FxMap;
use std::ops::Range;

use crate::line::{Event, Line};
use crate::stats::{ArenaFull, MAX_STAT_KEYS, Stat, StatStore, StatValue};

/// Metadata shared by all events of one kind (XSpace `XEventMetadata`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct EventMetadata {
    /// The XSpace id (arbitrary; unique within the plane).
    pub id: i64,
    /// Full event name (a TF op `name:Type`, a kernel's mangled name, `ProfilerStep#3`).
    pub name: String,
    /// Short display name ("" when none).
    pub display_name: String,
    /// Opaque serialized payload (XSpace `metadata`, e.g. an HLO proto); usually empty.
    pub metadata: Vec<u8>,
    /// This metadata's stats, a range of [`Plane::metadata_stats`].
    pub stats: Range<u32>,
    /// Child metadata ids (XSpace `child_id`).
    pub child_ids: Vec<i64>,
}

/// A stat key (XSpace `XStatMetadata`).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct StatMetadata {
    /// The XSpace id (arbitrary; unique within the plane).
    pub id: i64,
    /// The stat name (`correlation_id`, `step_num`, …). Also the string of a `ref_value`.
    pub name: String,
    /// Free-text description.
    pub description: String,
}

/// One device or host timeline group.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Plane {
    /// XSpace plane id (the device ordinal for devices).
    pub id: i64,
    /// Plane name: `/host:CPU`, `/device:GPU:0`, `Task Environment`, …
    pub name: String,
    /// The lines, in stored order.
    pub lines: Vec<Line>,
    /// Interned event metadata; events refer to entries by index.
    pub event_metadata: Vec<EventMetadata>,
    /// Interned stat keys; stats refer to entries by index.
    pub stat_metadata: Vec<StatMetadata>,
    /// The plane's own stats (device capabilities, versions, profile start/stop).
    pub stats: Range<u32>,
    /// Store holding the plane stats and every event-metadata's stats.
    pub metadata_stats: StatStore,
}

impl Plane {
    /// Whether this is a GPU plane (`/device:GPU:N`, [`crate::names::GPU_PLANE_PREFIX`]).
    #[inline]
    pub fn is_gpu(&self) -> bool {
        self.name.starts_with(crate::names::GPU_PLANE_PREFIX)
    }

    /// Creates an empty plane.
    pub fn new(id: i64, name: impl Into<String>) -> Plane {
        Plane { id, name: name.into(), ..Plane::default() }
    }

    /// Total number of events over all lines.
    pub fn event_count(&self) -> usize {
        self.lines.iter().map(Line::len).sum()
    }

    /// Earliest event start and latest event end over all lines (picoseconds relative
    /// to the profile start); `None` when no line has timed events.
    pub fn span_ps(&self) -> Option<(i64, i64)> {
        self.lines.iter().filter_map(Line::span_ps).reduce(|(s1, e1), (s2, e2)| (s1.min(s2), e1.max(e2)))
    }

    /// The plane's own stats.
    pub fn plane_stats(&self) -> &[Stat] {
        slice(&self.metadata_stats, &self.stats)
    }

    /// The stats of an event-metadata entry.
    #[inline]
    pub fn metadata_stats_of(&self, metadata: &EventMetadata) -> &[Stat] {
        slice(&self.metadata_stats, &metadata.stats)
    }

    /// The metadata of an event of this plane.
    #[inline]
    pub fn metadata_of(&self, event: &Event<'_>) -> Option<&EventMetadata> {
        self.event_metadata.get(event.metadata_index() as usize)
    }

    /// The stats of an event's metadata (empty when the event has no metadata).
    #[inline]
    pub fn event_metadata_stats(&self, event: &Event<'_>) -> &[Stat] {
        self.metadata_of(event).map_or(&[], |metadata| self.metadata_stats_of(metadata))
    }

    /// The value of stat `key` among an event-metadata entry's stats (the first, should
    /// the key repeat); its text lives in [`Plane::metadata_stats`].
    #[inline]
    pub fn metadata_stat(&self, metadata: &EventMetadata, key: u32) -> Option<StatValue> {
        self.metadata_stats_of(metadata).iter().find(|stat| stat.key() == key).map(|stat| stat.value())
    }

    /// A stat value as text: a `Str` read from `store` (the store the stat came from),
    /// or a `Ref` naming one of this plane's stat-metadata entries (XProf's
    /// `StrOrRefValue`). Other kinds give `None`.
    #[inline]
    pub fn str_value<'p>(&'p self, store: &'p StatStore, value: StatValue) -> Option<&'p str> {
        match value {
            StatValue::Str(text) => Some(store.text(text)),
            StatValue::Ref(index) => self.stat_metadata.get(index as usize).map(|m| m.name.as_str()),
            _ => None,
        }
    }

    /// The name of a stat key ("" for an out-of-range key).
    pub fn stat_name(&self, key: u32) -> &str {
        self.stat_metadata.get(key as usize).map_or("", |m| m.name.as_str())
    }

    /// The dense index of the stat key called `name`, if the plane has one.
    /// A linear scan: look keys up once per plane, never per event.
    pub fn find_stat_key(&self, name: &str) -> Option<u32> {
        self.stat_metadata.iter().position(|m| m.name == name).and_then(|i| u32::try_from(i).ok())
    }

    /// A plane stat by name.
    pub fn plane_stat(&self, name: &str) -> Option<StatValue> {
        let key = self.find_stat_key(name)?;
        self.plane_stats().iter().find(|s| s.key() == key).map(|s| s.value())
    }

    /// Renders a stat value of this plane as display text (strings unquoted, refs
    /// resolved, bytes as `<N bytes>`). `store` is the store the stat came from.
    pub fn format_value(&self, store: &StatStore, value: StatValue) -> String {
        match value {
            StatValue::Int(v) => v.to_string(),
            StatValue::Uint(v) => v.to_string(),
            StatValue::Double(v) => v.to_string(),
            StatValue::Str(r) | StatValue::Json(r) => store.text(r).to_string(),
            StatValue::Bytes(r) => format!("<{} bytes>", store.bytes(r).len()),
            StatValue::Ref(k) => self.stat_name(k).to_string(),
        }
    }
}

#[inline]
fn slice<'a>(store: &'a StatStore, range: &Range<u32>) -> &'a [Stat] {
    store.stats().get(range.start as usize..range.end as usize).unwrap_or(&[])
}

/// Builds a plane from names rather than ids: interns event names (with an optional
/// distinguishing key such as a Chrome-trace category) and stat names, assigning
/// XSpace ids `1, 2, 3, …` in first-seen order.
#[derive(Debug, Default)]
pub struct PlaneBuilder {
    plane: Plane,
    /// Per event name, its `(variant, index)` pairs (a name has one or a few
    /// variants), so a lookup by `&str` allocates nothing.
    event_index: FxMap<Box<str>, Vec<(u32, u32)>>,
    stat_index: FxMap<Box<str>, u32>,
}

impl PlaneBuilder {
    /// Starts a plane.
    pub fn new(id: i64, name: impl Into<String>) -> PlaneBuilder {
        PlaneBuilder { plane: Plane::new(id, name), ..PlaneBuilder::default() }
    }

    /// The dense index of stat key `name`, creating it on first use. A plane holds at
    /// most [`MAX_STAT_KEYS`] names: past that (hundreds of millions of distinct
    /// names, more than memory holds for them), every new name gets the last key.
    pub fn stat_key(&mut self, name: &str) -> u32 {
        if let Some(&k) = self.stat_index.get(name) {
            return k;
        }
        if self.plane.stat_metadata.len() >= MAX_STAT_KEYS as usize {
            return MAX_STAT_KEYS - 1;
        }
        let k = self.plane.stat_metadata.len() as u32;
        self.plane.stat_metadata.push(StatMetadata {
            id: i64::from(k) + 1,
            name: name.to_string(),
            description: String::new(),
        });
        self.stat_index.insert(name.into(), k);
        k
    }

    /// The dense index of the event metadata for `(name, variant)`, creating it on first
    /// use. `variant` separates same-named events that need different metadata stats;
    /// `init` fills the new entry's stats (it gets the builder to intern stat keys).
    pub fn event_metadata(
        &mut self,
        name: &str,
        variant: u32,
        init: impl FnOnce(&mut PlaneBuilder) -> Vec<(u32, StatValue)>,
    ) -> u32 {
        let known = self.event_index.get(name).and_then(|variants| variants.iter().find(|(v, _)| *v == variant));
        if let Some(&(_, idx)) = known {
            return idx;
        }
        let idx = self.plane.event_metadata.len() as u32;
        let stats = init(self);
        let start = self.plane.metadata_stats.len() as u32;
        for (key, value) in stats {
            self.plane.metadata_stats.push(key, value);
        }
        let end = self.plane.metadata_stats.len() as u32;
        self.plane.event_metadata.push(EventMetadata {
            id: i64::from(idx) + 1,
            name: name.to_string(),
            stats: start..end,
            ..EventMetadata::default()
        });
        self.event_index.entry(name.into()).or_default().push((variant, idx));
        idx
    }

    /// Stores a string in the metadata store (for `init` closures of string stats).
    pub fn metadata_str(&mut self, text: &str) -> Result<StatValue, ArenaFull> {
        self.plane.metadata_stats.store_bytes(text.as_bytes()).map(StatValue::Str)
    }

    /// Sets the plane's own stats (replacing earlier ones).
    pub fn set_plane_stats(&mut self, stats: Vec<(u32, StatValue)>) {
        let start = self.plane.metadata_stats.len() as u32;
        for (key, value) in stats {
            self.plane.metadata_stats.push(key, value);
        }
        self.plane.stats = start..self.plane.metadata_stats.len() as u32;
    }

    /// Makes room for exactly `lines` more lines (a reader that knows how many it will
    /// add spares the plane the unused half of a doubled vector).
    pub fn reserve_lines(&mut self, lines: usize) {
        self.plane.lines.reserve_exact(lines);
    }

    /// Adds a finished line.
    pub fn push_line(&mut self, line: Line) {
        self.plane.lines.push(line);
    }

    /// The plane under construction.
    pub fn plane(&self) -> &Plane {
        &self.plane
    }

    /// Finishes the plane.
    pub fn finish(mut self) -> Plane {
        self.plane.metadata_stats.shrink_to_fit();
        self.plane
    }
}

/// The stat rules that need the event's plane (its metadata and their stats).
impl<'a> Event<'a> {
    /// The value of stat `key` of this event of `plane`: its own, else its metadata's.
    /// This is XProf's `XEventVisitor::GetStat` rule, which every reader of one stat
    /// follows.
    #[inline]
    pub fn stat(&self, plane: &'a Plane, key: u32) -> Option<StatValue> {
        self.stat_and_store(plane, key).map(|(value, _)| value)
    }

    /// [`Event::stat`] with the store that holds the value's text: the line's for the
    /// event's own stats, the plane's metadata store for its metadata's.
    #[inline]
    pub fn stat_and_store(&self, plane: &'a Plane, key: u32) -> Option<(StatValue, &'a StatStore)> {
        if let Some(value) = self.own_stat(key) {
            return Some((value, self.store()));
        }
        let metadata = plane.metadata_of(self)?;
        plane.metadata_stat(metadata, key).map(|value| (value, &plane.metadata_stats))
    }

    /// The text of stat `key` ([`Event::stat`]'s rule, read as [`Plane::str_value`]);
    /// `None` when the value found is not text.
    #[inline]
    pub fn stat_str(&self, plane: &'a Plane, key: u32) -> Option<&'a str> {
        let (value, store) = self.stat_and_store(plane, key)?;
        plane.str_value(store, value)
    }

    /// Every stat of this event of `plane` with the store of its text: its metadata's
    /// stats, then its own. Where a key occurs in both, the later (the event's own)
    /// is the one [`Event::stat`] reads; the order is the one trace viewers list args in.
    pub fn stats_with_metadata(&self, plane: &'a Plane) -> impl Iterator<Item = (Stat, &'a StatStore)> + 'a {
        let store = self.store();
        let metadata = plane.event_metadata_stats(self).iter().map(move |&stat| (stat, &plane.metadata_stats));
        metadata.chain(self.stats().iter().map(move |&stat| (stat, store)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Event 0 has its own `shape`; its metadata has a `shape` (overridden) and a
    /// `kind` (inherited, whose text lives in the metadata store).
    #[test]
    fn an_event_stat_overrides_its_metadata_stat_and_reads_from_its_store() {
        let mut b = PlaneBuilder::new(1, "/host:CPU");
        let [shape, kind, count] = ["shape", "kind", "count"].map(|n| b.stat_key(n));
        let op = b.event_metadata("op", 0, |b| {
            vec![(shape, b.metadata_str("[9]").unwrap()), (kind, b.metadata_str("conv").unwrap())]
        });
        let mut line = Line::new(1, "t");
        line.stats.push_str(shape, "[1,2]").unwrap();
        line.stats.push(count, StatValue::Int(4));
        line.push_event(op, 0, 10);
        line.stats.push(kind, StatValue::Ref(count));
        line.push_event(op, 20, 10);
        b.push_line(line);
        let plane = b.finish();
        let events: Vec<_> = plane.lines[0].iter().collect();
        assert_eq!(events[0].stat_str(&plane, shape), Some("[1,2]"));
        assert_eq!(events[0].stat_str(&plane, kind), Some("conv"));
        assert_eq!(events[0].stat(&plane, count), Some(StatValue::Int(4)));
        assert_eq!(events[0].stat_str(&plane, count), None);
        assert_eq!(events[0].own_stat(kind), None);
        assert_eq!(events[1].stat_str(&plane, shape), Some("[9]"));
        assert_eq!(events[1].stat_str(&plane, kind), Some("count"));
        assert_eq!(events[1].stat(&plane, count), None);
        let listed: Vec<_> = events[0]
            .stats_with_metadata(&plane)
            .map(|(stat, store)| plane.format_value(store, stat.value()))
            .collect();
        assert_eq!(listed, ["[9]", "conv", "[1,2]", "4"]);
    }

    #[test]
    fn builder_interns_names_and_keys_once() {
        let mut b = PlaneBuilder::new(0, "/host:CPU");
        let k1 = b.stat_key("step_num");
        let k2 = b.stat_key("step_num");
        assert_eq!(k1, k2);
        let cat = b.stat_key("cat");
        let m1 = b.event_metadata("matmul", 0, |b| vec![(cat, b.metadata_str("cpu_op").unwrap())]);
        let m2 = b.event_metadata("matmul", 0, |_| unreachable!());
        let m3 = b.event_metadata("matmul", 1, |_| Vec::new());
        assert_eq!(m1, m2);
        assert_ne!(m1, m3);
        let plane = b.finish();
        assert_eq!(plane.event_metadata.len(), 2);
        assert_eq!(plane.metadata_stats_of(&plane.event_metadata[0]).len(), 1);
        assert_eq!(plane.find_stat_key("cat"), Some(cat));
    }
}
