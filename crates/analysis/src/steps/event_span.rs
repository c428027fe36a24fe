//! XProf's step-time event types, their priorities, and the sweep that turns
//! overlapping typed spans into non-overlapping ones (`ToNonOverlappedEvents`).
//!
//! The one rule to know: where spans overlap, the type with the larger priority
//! wins; time covered by nothing is `UnknownTime` ("All others").

use serde::Serialize;

/// XProf's `EventType`, in priority order (later wins where spans overlap).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// Time covered by no classified event.
    UnknownTime = 0,
    /// Host computation.
    HostCompute = 1,
    /// Host preprocessing.
    HostPreprocess = 2,
    /// Host postprocessing.
    HostPostprocess = 3,
    /// Host batch formation.
    HostBatchFormation = 4,
    /// Host runtime.
    HostRuntime = 5,
    /// Host compilation.
    HostCompile = 6,
    /// Host-to-host copy.
    HostToHost = 7,
    /// Host-to-device copy (or infeed enqueue).
    HostToDevice = 8,
    /// Kernel launch on the host ("Kernel launch").
    HostPrepare = 9,
    /// Collective communication on the device.
    DeviceCollectives = 10,
    /// The host waits for input (`IteratorGetNext`).
    HostWaitInput = 11,
    /// Device-to-device copy.
    DeviceToDevice = 12,
    /// Device-to-host copy.
    DeviceToHost = 13,
    /// Device computation in 32-bit precision.
    DeviceCompute32 = 14,
    /// Device computation in 16-bit precision.
    DeviceCompute16 = 15,
    /// The device waits for another device.
    DeviceWaitDevice = 16,
    /// The device waits for the host.
    DeviceWaitHost = 17,
}

/// Number of [`EventType`]s.
pub const EVENT_TYPE_COUNT: usize = 18;

/// A typed time span (picoseconds, relative to profile start).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypedSpan {
    /// The type.
    pub kind: EventType,
    /// Start (ps).
    pub begin_ps: i64,
    /// End (ps), `>= begin_ps`.
    pub end_ps: i64,
}

impl TypedSpan {
    /// Duration (ps).
    pub fn duration_ps(&self) -> i64 {
        self.end_ps - self.begin_ps
    }
}

/// Overlap in picoseconds of `[a0, a1)` and `[b0, b1)`.
pub fn overlap_ps(a0: i64, a1: i64, b0: i64, b1: i64) -> i64 {
    (a1.min(b1) - a0.max(b0)).max(0)
}

/// Splits overlapping spans into consecutive non-overlapping ones, each with the
/// highest-priority type active over it (`UnknownTime` where none is).
pub fn to_non_overlapped(spans: &[TypedSpan]) -> Vec<TypedSpan> {
    // Each boundary is one integer, ordered as (time, is_start, type descending): ends
    // sort before starts at equal times; among starts (or ends) at the same time, higher
    // priority first. Sorting plain integers is much cheaper than comparing tuples
    // field by field, and equal keys are identical boundaries, so an unstable sort
    // gives the stable sort's result. Where the times span less than 2^57 ps (about 40
    // hours) the key is a u64 of the time from the earliest one, else an i128.
    let times = spans.iter().flat_map(|span| [span.begin_ps, span.end_ps]);
    let (Some(first), Some(last)) = (times.clone().min(), times.max()) else { return Vec::new() };
    if last.checked_sub(first).is_some_and(|range| range < 1 << 57) {
        let key = |time: i64, is_start, kind| ((time - first) as u64) << 6 | u64::from(low_bits(is_start, kind));
        let keys = sorted_keys(spans, key);
        let boundary = |key: &u64| ((key >> 6) as i64 + first, from_low_bits(*key as u8 & 63));
        sweep(keys.iter().map(boundary), keys.len())
    } else {
        let key = |time: i64, is_start, kind| (i128::from(time) << 6) | i128::from(low_bits(is_start, kind));
        let keys = sorted_keys(spans, key);
        let boundary = |key: &i128| ((key >> 6) as i64, from_low_bits((key & 63) as u8));
        sweep(keys.iter().map(boundary), keys.len())
    }
}

/// The low six bits of a boundary's key: whether it starts a span, then the type,
/// higher priorities lower.
fn low_bits(is_start: bool, kind: EventType) -> u8 {
    u8::from(is_start) << 5 | (31 - kind as u8)
}

fn from_low_bits(low: u8) -> (bool, EventType) {
    let kind = ALL_TYPES.get(usize::from(31 - (low & 31))).copied().unwrap_or(EventType::UnknownTime);
    (low & 32 != 0, kind)
}

/// The keys of every span's start and end, sorted.
fn sorted_keys<K: Ord>(spans: &[TypedSpan], key: impl Fn(i64, bool, EventType) -> K) -> Vec<K> {
    let mut keys: Vec<K> = Vec::with_capacity(spans.len() * 2);
    for span in spans {
        keys.push(key(span.begin_ps, true, span.kind));
        keys.push(key(span.end_ps, false, span.kind));
    }
    keys.sort_unstable();
    keys
}

/// The sweep over sorted boundaries `(time, (is_start, type))`: a span from each
/// boundary to the next, of the highest type open over it.
fn sweep(mut boundaries: impl Iterator<Item = (i64, (bool, EventType))>, count: usize) -> Vec<TypedSpan> {
    let mut counts = [0i64; EVENT_TYPE_COUNT];
    let mut current = EventType::UnknownTime;
    let mut out = Vec::with_capacity(count);
    let Some(mut at) = boundaries.next() else { return out };
    for next in boundaries {
        let (time, (is_start, kind)) = at;
        if is_start {
            counts[kind as usize] += 1;
            current = current.max(kind);
        } else {
            counts[kind as usize] -= 1;
            if kind == current && counts[kind as usize] == 0 {
                current = ALL_TYPES[..kind as usize]
                    .iter()
                    .rev()
                    .copied()
                    .find(|t| counts[*t as usize] > 0)
                    .unwrap_or(EventType::UnknownTime);
            }
        }
        out.push(TypedSpan { kind: current, begin_ps: time, end_ps: next.0 });
        at = next;
    }
    out
}

/// Every [`EventType`] in priority order (`ALL_TYPES[t as usize] == t`; fewer than 32,
/// which [`to_non_overlapped`]'s sort keys rely on).
pub const ALL_TYPES: [EventType; EVENT_TYPE_COUNT] = [
    EventType::UnknownTime,
    EventType::HostCompute,
    EventType::HostPreprocess,
    EventType::HostPostprocess,
    EventType::HostBatchFormation,
    EventType::HostRuntime,
    EventType::HostCompile,
    EventType::HostToHost,
    EventType::HostToDevice,
    EventType::HostPrepare,
    EventType::DeviceCollectives,
    EventType::HostWaitInput,
    EventType::DeviceToDevice,
    EventType::DeviceToHost,
    EventType::DeviceCompute32,
    EventType::DeviceCompute16,
    EventType::DeviceWaitDevice,
    EventType::DeviceWaitHost,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn span(kind: EventType, begin_ps: i64, end_ps: i64) -> TypedSpan {
        TypedSpan { kind, begin_ps, end_ps }
    }

    #[test]
    fn higher_priority_wins_and_gaps_are_unknown() {
        let spans = [
            span(EventType::HostCompute, 0, 100),
            span(EventType::HostWaitInput, 20, 50),
            span(EventType::HostCompute, 120, 130),
        ];
        let out = to_non_overlapped(&spans);
        let kinds: Vec<(EventType, i64)> = out.iter().map(|s| (s.kind, s.duration_ps())).collect();
        assert_eq!(
            kinds,
            vec![
                (EventType::HostCompute, 20),
                (EventType::HostWaitInput, 30),
                (EventType::HostCompute, 50),
                (EventType::UnknownTime, 20),
                (EventType::HostCompute, 10),
            ]
        );
        let total: i64 = out.iter().map(TypedSpan::duration_ps).sum();
        assert_eq!(total, 130);
    }

    /// The boundaries as XProf orders them, sorted as tuples: what the integer keys
    /// must reproduce.
    fn tuple_order(spans: &[TypedSpan]) -> Vec<(i64, bool, EventType)> {
        let mut boundaries: Vec<(i64, bool, EventType)> =
            spans.iter().flat_map(|s| [(s.begin_ps, true, s.kind), (s.end_ps, false, s.kind)]).collect();
        boundaries.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)));
        boundaries
    }

    #[test]
    fn integer_keys_order_boundaries_as_the_tuples_do() {
        assert!(ALL_TYPES.iter().enumerate().all(|(i, t)| *t as usize == i) && ALL_TYPES.len() < 32);
        // Every type, shared and negative times, times at the edges of i64.
        let mut spans = Vec::new();
        let mut seed = 7u64;
        for i in 0..400i64 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let kind = ALL_TYPES[(seed >> 33) as usize % ALL_TYPES.len()];
            let begin = ((seed >> 40) % 50) as i64 - 25 + i % 3;
            spans.push(span(kind, begin, begin + ((seed >> 20) % 9) as i64));
        }
        // Within 2^57 ps of each other (u64 keys), then across all of i64 (i128 keys).
        let mut at_the_edges = spans.clone();
        at_the_edges.push(span(EventType::HostCompute, i64::MIN, i64::MIN + 5));
        at_the_edges.push(span(EventType::DeviceWaitHost, i64::MAX - 3, i64::MAX));
        for spans in [spans, at_the_edges] {
            let want = tuple_order(&spans);
            let out = to_non_overlapped(&spans);
            assert_eq!(out.len(), want.len() - 1);
            for (got, pair) in out.iter().zip(want.windows(2)) {
                assert_eq!((got.begin_ps, got.end_ps), (pair[0].0, pair[1].0));
            }
            // Where every span has a length, the type over each piece is the highest open.
            let mut open = [0i64; EVENT_TYPE_COUNT];
            let spans: Vec<TypedSpan> = spans.into_iter().filter(|s| s.end_ps > s.begin_ps).collect();
            let out = to_non_overlapped(&spans);
            for (got, boundary) in out.iter().zip(&tuple_order(&spans)) {
                open[boundary.2 as usize] += if boundary.1 { 1 } else { -1 };
                let top =
                    ALL_TYPES.iter().rev().copied().find(|t| open[*t as usize] > 0).unwrap_or(EventType::UnknownTime);
                assert_eq!(got.kind, top, "at {}", got.begin_ps);
            }
        }
    }
}
