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
    // (time, is_start, type): ends sort before starts at equal times; among starts
    // (or ends) at the same time, higher priority first.
    let mut boundaries: Vec<(i64, bool, EventType)> = Vec::with_capacity(spans.len() * 2);
    for span in spans {
        boundaries.push((span.begin_ps, true, span.kind));
        boundaries.push((span.end_ps, false, span.kind));
    }
    // The order compares every field, so equal boundaries are identical and an
    // unstable sort (no scratch buffer) gives the stable sort's result.
    boundaries.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)));
    let mut counts = [0i64; EVENT_TYPE_COUNT];
    let mut current = EventType::UnknownTime;
    let mut out = Vec::with_capacity(boundaries.len());
    for pair in boundaries.windows(2) {
        let (time, is_start, kind) = pair[0];
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
        out.push(TypedSpan { kind: current, begin_ps: time, end_ps: pair[1].0 });
    }
    out
}

/// Every [`EventType`] in priority order.
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
}
