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

/// The value of stat `key` among `stats`, if present.
pub fn find(stats: &[Stat], key: Option<u32>) -> Option<StatValue> {
    let key = key?;
    stats.iter().find(|stat| stat.key == key).map(|stat| stat.value)
}

/// The value of stat `key` on `event`, falling back to its metadata's stats.
pub fn event_stat(plane: &Plane, event: &Event<'_>, key: Option<u32>) -> Option<StatValue> {
    let key = key?;
    if let Some(value) = find(event.stats(), Some(key)) {
        return Some(value);
    }
    let metadata = plane.metadata_of(event)?;
    find(plane.metadata_stats_of(metadata), Some(key))
}

/// The stats of `event`'s metadata (empty when it has none).
pub fn metadata_stats<'p>(plane: &'p Plane, event: &Event<'_>) -> &'p [Stat] {
    plane.metadata_of(event).map(|metadata| plane.metadata_stats_of(metadata)).unwrap_or(&[])
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
/// entry of `plane`). Other kinds give `None`.
pub fn as_str<'a>(plane: &'a Plane, store: &'a StatStore, value: StatValue) -> Option<&'a str> {
    match value {
        StatValue::Str(text) => Some(store.text(text)),
        StatValue::Ref(index) => plane.stat_metadata.get(index as usize).map(|m| m.name.as_str()),
        _ => None,
    }
}

/// The string value of stat `key` on `event` (event stats first, then metadata stats).
pub fn event_str<'a>(plane: &'a Plane, event: &Event<'a>, key: Option<u32>) -> Option<&'a str> {
    let key = key?;
    if let Some(stat) = event.stats().iter().find(|stat| stat.key == key) {
        return as_str(plane, event.store(), stat.value);
    }
    let metadata = plane.metadata_of(event)?;
    let stat = plane.metadata_stats_of(metadata).iter().find(|stat| stat.key == key)?;
    as_str(plane, &plane.metadata_stats, stat.value)
}

/// The integer value of stat `key` on `event` (event stats first, then metadata stats).
pub fn event_int(plane: &Plane, event: &Event<'_>, key: Option<u32>) -> Option<i64> {
    event_stat(plane, event, key).and_then(as_int)
}

/// The name of `event` (its metadata's name; empty when the metadata is missing).
pub fn event_name<'p>(plane: &'p Plane, event: &Event<'_>) -> &'p str {
    plane.metadata_of(event).map(|metadata| metadata.name.as_str()).unwrap_or("")
}
