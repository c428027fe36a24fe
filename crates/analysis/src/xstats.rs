//! Reading typed stats off events: well-known stat keys resolved once per plane, and
//! the value conversions XProf applies (`IntOrUintValue`, `StrOrRefValue`).
//!
//! The one rule to know: a stat on the event overrides the same stat on the event's
//! metadata, as in XProf's `XEventVisitor::GetStat`.

use mlprof_model::{Event, Plane, Stat, StatStore, StatValue};

/// The stat keys of one plane for a fixed list of stat names (`None` where the plane
/// never uses that name), so hot loops compare `u32` keys instead of strings.
#[derive(Clone, Debug)]
pub struct StatKeys<const N: usize> {
    keys: [Option<u32>; N],
}

impl<const N: usize> StatKeys<N> {
    /// Resolves `names` on `plane`.
    pub fn new(plane: &Plane, names: [&str; N]) -> StatKeys<N> {
        StatKeys { keys: names.map(|name| plane.find_stat_key(name)) }
    }

    /// The key of the `i`-th name, if the plane has it.
    pub fn key(&self, i: usize) -> Option<u32> {
        self.keys.get(i).copied().flatten()
    }
}

/// Reads a fixed list of stats off events in one pass over each event's stats (and
/// its metadata's), instead of one search per stat: per stat key of one plane, the
/// position of that stat in the list.
#[derive(Clone, Debug)]
pub struct StatSlots<const N: usize> {
    /// Per stat key: 1 + the position in the list, 0 for stats not in it.
    slots: Vec<u8>,
    /// Per event metadata: whether its stats hold any listed stat (most hold none, and
    /// their stats are then never read).
    metadata_lists: Vec<bool>,
}

impl<const N: usize> StatSlots<N> {
    /// Resolves `names` on `plane` (only the first 128 names are read).
    pub fn new(plane: &Plane, names: [&str; N]) -> StatSlots<N> {
        let mut slots = vec![0u8; plane.stat_metadata.len()];
        for (position, name) in names.iter().enumerate().take(128) {
            if let Some(slot) = plane.find_stat_key(name).and_then(|key| slots.get_mut(key as usize)) {
                *slot = position as u8 + 1;
            }
        }
        let lists = |stats: &[Stat]| stats.iter().any(|stat| slots.get(stat.key() as usize).is_some_and(|&s| s > 0));
        let metadata_lists =
            plane.event_metadata.iter().map(|metadata| lists(plane.metadata_stats_of(metadata))).collect();
        StatSlots { slots, metadata_lists }
    }

    /// Whether the plane has stat number `i` of the list at all.
    pub fn resolves(&self, i: usize) -> bool {
        self.slots.iter().any(|&slot| usize::from(slot) == i + 1)
    }

    /// Whether `event` may have a listed stat: it has stats of its own, or its
    /// metadata lists one. Where not, its [`StatSlots::row`] is empty, and a pass over
    /// millions of events can skip building it.
    #[inline(always)]
    pub fn may_list(&self, event: &Event<'_>) -> bool {
        !event.stats().is_empty() || self.metadata_lists.get(event.metadata_index() as usize).copied().unwrap_or(false)
    }

    /// The listed stats of `event`: the event's own value of each, else its metadata's
    /// (XProf's `XEventVisitor::GetStat` rule). Inlined always: the row is then built
    /// in the caller's frame instead of being copied out (a row of 13 stats is 240
    /// bytes, built for each of millions of events).
    #[inline(always)]
    pub fn row(&self, plane: &Plane, event: &Event<'_>) -> StatRow<N> {
        let mut row = StatRow { values: [None; N], present: 0, from_metadata: 0 };
        self.fill(&mut row, event.stats(), false);
        if self.metadata_lists.get(event.metadata_index() as usize).copied().unwrap_or(false) {
            self.fill(&mut row, metadata_stats(plane, event), true);
        }
        row
    }

    /// Fills the row's empty values from `stats`. The masks are gathered in locals and
    /// stored once: a bit set in place makes the next read of the mask wait for the
    /// store (a partial write read back whole cannot be forwarded).
    #[inline(always)]
    fn fill(&self, row: &mut StatRow<N>, stats: &[Stat], from_metadata: bool) {
        let mut present = 0u128;
        for stat in stats {
            if let Some(&slot) = self.slots.get(stat.key() as usize)
                && slot > 0
                && let Some(value @ None) = row.values.get_mut(slot as usize - 1)
            {
                *value = Some(stat.value());
                present |= 1u128 << (slot - 1);
            }
        }
        row.present |= present;
        if from_metadata {
            row.from_metadata |= present;
        }
    }
}

/// The values of the stats a [`StatSlots`] lists, for one event.
#[derive(Clone, Copy, Debug)]
pub struct StatRow<const N: usize> {
    values: [Option<StatValue>; N],
    /// Bit `i` set: the event (or its metadata) has value `i`.
    present: u128,
    /// Bit `i` set: value `i` came from the event's metadata (its strings live in the
    /// plane's metadata store, not the line's).
    from_metadata: u128,
}

impl<const N: usize> StatRow<N> {
    /// Whether the event (and its metadata) has none of the listed stats.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    /// The value of stat `i` of the list, if the event (or its metadata) has it.
    #[inline]
    pub fn get(&self, i: usize) -> Option<StatValue> {
        self.values.get(i).copied().flatten()
    }

    /// Stat `i` as an integer ([`as_int`]).
    #[inline]
    pub fn int(&self, i: usize) -> Option<i64> {
        self.get(i).and_then(as_int)
    }

    /// Stat `i` as a string ([`as_str`]), read from the store it came from.
    pub fn str<'a>(&self, i: usize, plane: &'a Plane, event: &Event<'a>) -> Option<&'a str> {
        let value = self.get(i)?;
        let store =
            if i < 128 && self.from_metadata & (1u128 << i) != 0 { &plane.metadata_stats } else { event.store() };
        as_str(plane, store, value)
    }
}

/// The value of stat `key` among `stats`, if present.
pub fn find(stats: &[Stat], key: Option<u32>) -> Option<StatValue> {
    let key = key?;
    stats.iter().find(|stat| stat.key() == key).map(|stat| stat.value())
}

/// The value of stat `key` on `event`, falling back to its metadata's stats
/// ([`Event::stat`]).
#[inline]
pub fn event_stat(plane: &Plane, event: &Event<'_>, key: Option<u32>) -> Option<StatValue> {
    event.stat(plane, key?)
}

/// The stats of `event`'s metadata (empty when it has none).
#[inline]
pub fn metadata_stats<'p>(plane: &'p Plane, event: &Event<'_>) -> &'p [Stat] {
    plane.event_metadata_stats(event)
}

/// An integer value (`int64` or `uint64`; a `uint64` above `i64::MAX` wraps, as
/// XProf's `IntOrUintValue` does). Doubles and strings give `None`.
pub fn as_int(value: StatValue) -> Option<i64> {
    match value {
        StatValue::Int(v) => Some(v),
        StatValue::Uint(v) => Some(v as i64),
        _ => None,
    }
}

/// A number as `f64` (int, uint or double).
pub fn as_f64(value: StatValue) -> Option<f64> {
    match value {
        StatValue::Int(v) => Some(v as f64),
        StatValue::Uint(v) => Some(v as f64),
        StatValue::Double(v) => Some(v),
        _ => None,
    }
}

/// A string value (`str_value` in `store`, or a `ref_value` naming a stat-metadata
/// entry of `plane`; [`Plane::str_value`]). Other kinds give `None`.
#[inline]
pub fn as_str<'a>(plane: &'a Plane, store: &'a StatStore, value: StatValue) -> Option<&'a str> {
    plane.str_value(store, value)
}

/// The string value of stat `key` on `event` (event stats first, then metadata stats;
/// [`Event::stat_str`]).
#[inline]
pub fn event_str<'a>(plane: &'a Plane, event: &Event<'a>, key: Option<u32>) -> Option<&'a str> {
    event.stat_str(plane, key?)
}

/// The integer value of stat `key` on `event` (event stats first, then metadata stats).
pub fn event_int(plane: &Plane, event: &Event<'_>, key: Option<u32>) -> Option<i64> {
    event_stat(plane, event, key).and_then(as_int)
}

/// The name of `event` (its metadata's name; empty when the metadata is missing).
pub fn event_name<'p>(plane: &'p Plane, event: &Event<'_>) -> &'p str {
    plane.metadata_of(event).map(|metadata| metadata.name.as_str()).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlprof_model::{Line, PlaneBuilder};

    /// Event 0 has its own `shape` string and `count` int; its metadata has a `shape`
    /// (overridden) and a `kind` string (inherited, stored in the metadata store).
    #[test]
    fn a_row_reads_event_stats_over_metadata_stats_from_the_right_store() {
        let mut builder = PlaneBuilder::new(1, "/host:CPU");
        let [shape, count, kind] = ["shape", "count", "kind"].map(|n| builder.stat_key(n));
        let metadata = builder.event_metadata("op", 0, |b| {
            let (meta_shape, meta_kind) = (b.metadata_str("[9]").unwrap(), b.metadata_str("conv").unwrap());
            vec![(shape, meta_shape), (kind, meta_kind)]
        });
        let mut line = Line::new(1, "t");
        line.stats.push_str(shape, "[1,2]").unwrap();
        line.stats.push(count, StatValue::Int(4));
        line.push_event(metadata, 0, 10);
        line.push_event(metadata, 20, 10);
        builder.push_line(line);
        let plane = builder.finish();
        let slots = StatSlots::new(&plane, ["kind", "missing", "shape", "count"]);
        assert!(slots.resolves(0) && !slots.resolves(1) && slots.resolves(3) && !slots.resolves(4));
        let events: Vec<_> = plane.lines[0].iter().collect();
        let row = slots.row(&plane, &events[0]);
        assert_eq!(row.str(0, &plane, &events[0]), Some("conv"));
        assert_eq!(row.get(1), None);
        assert_eq!(row.str(2, &plane, &events[0]), Some("[1,2]"));
        assert_eq!(row.int(3), Some(4));
        assert_eq!(row.str(3, &plane, &events[0]), None);
        let row = slots.row(&plane, &events[1]);
        assert_eq!(row.str(2, &plane, &events[1]), Some("[9]"));
        assert_eq!(row.int(3), None);
        assert!(!row.is_empty());
        let only_missing = StatSlots::new(&plane, ["missing", "count"]);
        assert!(!only_missing.row(&plane, &events[0]).is_empty(), "the event's own count");
        assert!(only_missing.row(&plane, &events[1]).is_empty(), "no count, and the metadata lists none");
        // The same answers as the one-stat readers.
        for event in &events {
            let row = slots.row(&plane, event);
            assert_eq!(row.str(2, &plane, event), event_str(&plane, event, plane.find_stat_key("shape")));
            assert_eq!(row.int(3), event_int(&plane, event, plane.find_stat_key("count")));
        }
    }
}
