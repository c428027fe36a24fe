//! The memory profile of a PyTorch (Kineto) trace, from the profiler's `[memory]`
//! instant events (`profile_memory=True`), in XProf's result type: one allocator per
//! (`Device Type`, `Device Id`), named as `torch.device` prints it (`cpu`, `cuda:0`).
//!
//! The one design decision to know: PyTorch records the allocator's totals on every
//! event, so the state after each event is read, not rebuilt — allocated =
//! `Total Allocated` (XProf's heap), reserved = `Total Reserved` (the caching
//! allocator's pool: heap + free, fragmentation = 1 − allocated / reserved). Only the
//! breakdown at the peak is rebuilt, by replaying allocations and frees by `Addr` over
//! the whole trace up to the peak event; whatever the live blocks do not explain was
//! allocated before the trace started and gets one special row. Events are taken in
//! time order (ties: `Ev Idx`, then storage order); the peak is the last event reaching
//! the largest allocated total (XProf's `>=`), the reserved peak the first.
//! [`allocator`] reads events through [`MemoryEvents`], so a memory snapshot's
//! allocator trace ([`super::trace`]) goes through the same computation without being
//! copied into [`MemoryEvent`]s.

pub(crate) mod events;
mod report;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use mlprof_model::Host;
use mlprof_model::fxhash::FxMap;
use mlprof_model::names::HOST_PLANE;
use serde::Serialize;

use super::compute::{keep_referenced, merge_rows, sample_indices};
use super::{
    ActivityKind, AggregationStats, AllocatorProfile, MAX_TIMELINE_SNAPSHOTS, MemoryActivity, MemoryProfile,
    MemorySnapshot, MemorySummary,
};
use events::{Details, MemoryEvent, OpInfo, memory_events};
pub(super) use report::report;

/// The one sentence saying how a PyTorch memory profile is obtained.
pub(super) const METHOD: &str = "From PyTorch's [memory] events (profile_memory=True): allocated = Total Allocated, \
     reserved = Total Reserved (free = reserved - allocated, fragmentation = 1 - allocated / reserved), the op = \
     the innermost cpu_op running on the event's thread; stack reservation and the allocator's lifetime peak are \
     not recorded (0).";

/// The op name of the breakdown row for memory allocated before the trace.
pub const BEFORE_TRACE_ROW: &str = "(allocated before the trace)";

/// What PyTorch's `[memory]` events record about one device's allocator beyond
/// XProf's fields. Bytes are bytes; times are picoseconds relative to the profile start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PytorchAllocator {
    /// PyTorch's `Device Type` (`c10::DeviceType`: 0 CPU, 1 CUDA, 6 HIP, 12 XPU, 13 MPS, …).
    pub device_type: i64,
    /// PyTorch's `Device Id` (-1 for CPU).
    pub device_id: i64,
    /// `Total Reserved` at the peak of allocated bytes.
    pub reserved_at_peak_bytes: i64,
    /// The largest `Total Reserved` in the trace.
    pub peak_reserved_bytes: i64,
    /// When `Total Reserved` first reached [`PytorchAllocator::peak_reserved_bytes`].
    pub peak_reserved_time_ps: i64,
    /// `Total Allocated` after the last event.
    pub allocated_at_end_bytes: i64,
    /// `Total Reserved` after the last event.
    pub reserved_at_end_bytes: i64,
    /// Blocks live at the peak that were allocated in the trace.
    pub live_at_peak_blocks: u64,
    /// Their bytes.
    pub live_at_peak_bytes: i64,
    /// Allocated bytes at the peak that no allocation in the trace explains: memory
    /// allocated before the trace started (the breakdown's [`BEFORE_TRACE_ROW`]).
    pub allocated_before_trace_at_peak_bytes: i64,
    /// Frees of blocks with no earlier allocation in the trace (allocated before it).
    pub frees_without_allocation: u64,
    /// Their bytes.
    pub frees_without_allocation_bytes: i64,
    /// Memory events with no `cpu_op` running on their thread (their op is empty).
    pub events_without_op: u64,
}

/// Builds the memory profile of a Kineto host from its `[memory]` events.
pub(super) fn analyze(host: &Host) -> MemoryProfile {
    // One vector sorted by device, then time: no copy per device (a snapshot has
    // millions of events). The key is unique (it ends with the event's position), so
    // an unstable sort gives the one order without a stable sort's buffer of half
    // the events.
    let mut events = memory_events(host);
    events.sort_unstable_by_key(|e| (e.device_type, e.device_id, e.time_ps, e.ev_idx, e.position));
    let mut details = Details::new(host);
    let allocators = events
        .chunk_by(|a, b| (a.device_type, a.device_id) == (b.device_type, b.device_id))
        .map(|events| {
            allocator(events[0].device_type, events[0].device_id, &mut Stored { events, details: &mut details })
        })
        .collect();
    profile(host, allocators)
}

/// The profile of `host` made of `allocators` (sorted here by memory id).
pub(super) fn profile(host: &Host, mut allocators: Vec<AllocatorProfile>) -> MemoryProfile {
    allocators.sort_by(|a, b| a.memory_id.cmp(&b.memory_id));
    MemoryProfile {
        has_host_plane: host.planes.iter().any(|p| p.name == HOST_PLANE),
        allocators,
        hlo_modules: Vec::new(),
        method: Some(METHOD.to_string()),
        profile_steps: Default::default(),
        snapshot: None,
    }
}

/// One device's memory events in time order (ties: `Ev Idx`, then storage order), as
/// the profile reads them: read one at a time, so a source of millions need not hold
/// them as [`MemoryEvent`]s.
pub(crate) trait MemoryEvents {
    /// How many.
    fn len(&self) -> usize;
    /// Event `index` (`index < len()`).
    fn event(&self, index: usize) -> MemoryEvent;
    /// What the passes over every event read of event `index` (`index < len()`):
    /// cheaper than the whole [`MemoryEvents::event`].
    fn brief(&self, index: usize) -> Brief;
    /// Its time from its line's start, picoseconds.
    fn offset_ps(&self, index: usize) -> i64;
    /// The op that was running when it happened.
    fn op(&self, index: usize) -> Option<OpInfo>;
    /// The name of its own stack where the source records stacks.
    fn stack_label(&mut self, index: usize) -> Option<Arc<str>>;
}

/// The fields of a [`MemoryEvent`] that every pass over all events reads.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Brief {
    /// [`MemoryEvent::bytes`].
    pub bytes: i64,
    /// [`MemoryEvent::address`].
    pub address: u64,
    /// [`MemoryEvent::allocated_bytes`].
    pub allocated_bytes: i64,
    /// [`MemoryEvent::reserved_bytes`].
    pub reserved_bytes: i64,
    /// Whether [`MemoryEvent::op_event`] is set.
    pub has_op: bool,
}

impl Brief {
    fn kind(&self) -> ActivityKind {
        if self.bytes < 0 { ActivityKind::Deallocation } else { ActivityKind::Allocation }
    }
}

/// Memory events read into [`MemoryEvent`]s, with their host for the details.
struct Stored<'a, 'h> {
    events: &'a [MemoryEvent],
    details: &'a mut Details<'h>,
}

impl MemoryEvents for Stored<'_, '_> {
    fn len(&self) -> usize {
        self.events.len()
    }

    fn event(&self, index: usize) -> MemoryEvent {
        self.events[index].clone()
    }

    fn brief(&self, index: usize) -> Brief {
        let e = &self.events[index];
        Brief {
            bytes: e.bytes,
            address: e.address,
            allocated_bytes: e.allocated_bytes,
            reserved_bytes: e.reserved_bytes,
            has_op: e.op_event.is_some(),
        }
    }

    fn offset_ps(&self, index: usize) -> i64 {
        self.details.offset_ps(&self.events[index])
    }

    fn op(&self, index: usize) -> Option<OpInfo> {
        self.details.op(&self.events[index])
    }

    fn stack_label(&mut self, index: usize) -> Option<Arc<str>> {
        self.details.stack_label(&self.events[index])
    }
}

/// The memory id of a device as `torch.device` prints it: `cpu`, `cuda:0`, `xpu:1`.
pub(super) fn memory_id(device_type: i64, device_id: i64) -> String {
    let name = match device_type {
        0 => "cpu",
        1 => "cuda",
        2 => "mkldnn",
        3 => "opengl",
        4 => "opencl",
        5 => "ideep",
        6 => "hip",
        7 => "fpga",
        8 => "maia",
        9 => "xla",
        10 => "vulkan",
        11 => "metal",
        12 => "xpu",
        13 => "mps",
        14 => "meta",
        15 => "hpu",
        16 => "ve",
        17 => "lazy",
        18 => "ipu",
        19 => "mtia",
        20 => "privateuseone",
        other => return with_index(&format!("device_type_{other}"), device_id),
    };
    if device_type == 0 { name.to_string() } else { with_index(name, device_id) }
}

fn with_index(name: &str, device_id: i64) -> String {
    if device_id < 0 { name.to_string() } else { format!("{name}:{device_id}") }
}

/// The allocator state after one event.
fn stats_of(event: &MemoryEvent) -> AggregationStats {
    let allocated = event.allocated_bytes;
    let reserved = event.reserved_bytes;
    let (free, fragmentation) = if reserved > 0 {
        let free = reserved.saturating_sub(allocated).max(0);
        (free, (1.0 - allocated as f64 / reserved as f64).clamp(0.0, 1.0))
    } else {
        (0, 0.0)
    };
    AggregationStats {
        stack_reserved_bytes: 0,
        heap_allocated_bytes: allocated,
        free_memory_bytes: free,
        fragmentation,
        peak_bytes_in_use: 0,
        reserved_bytes: Some(reserved),
    }
}

/// The snapshot of event `index`; the op, input types and dims are those of event
/// `source`'s op (the event itself, or for a free the allocation it frees): its name,
/// or else the name of its stack.
fn snapshot_of(events: &mut impl MemoryEvents, index: usize, source: usize) -> MemorySnapshot {
    let event = events.event(index);
    let size = event.bytes.saturating_abs();
    let op = events.op(source).unwrap_or_else(|| OpInfo {
        name: events.stack_label(source).as_deref().unwrap_or_default().to_string(),
        ..OpInfo::default()
    });
    MemorySnapshot {
        time_ps: event.time_ps,
        offset_ps: events.offset_ps(index),
        stats: stats_of(&event),
        activity: MemoryActivity {
            kind: kind_of(&event),
            requested_bytes: size,
            allocation_bytes: size,
            address: event.address,
            tf_op_name: op.name,
            step_id: event.step,
            region_type: String::new(),
            data_type: op.input_types,
            tensor_shape: op.input_dims,
        },
    }
}

fn kind_of(event: &MemoryEvent) -> ActivityKind {
    if event.bytes < 0 { ActivityKind::Deallocation } else { ActivityKind::Allocation }
}

/// What one pass over a device's events finds.
#[derive(Default)]
struct Scan {
    /// Index of the last event with the largest allocated total (XProf's `>=`).
    peak: usize,
    /// Index of the first event with the largest reserved total.
    reserved_peak: usize,
    allocations: u64,
    deallocations: u64,
    without_op: u64,
}

impl Scan {
    fn of(events: &impl MemoryEvents) -> Scan {
        let mut scan = Scan::default();
        let (mut most_allocated, mut most_reserved) = (i64::MIN, i64::MIN);
        for index in 0..events.len() {
            let event = events.brief(index);
            if event.allocated_bytes >= most_allocated {
                (scan.peak, most_allocated) = (index, event.allocated_bytes);
            }
            if event.reserved_bytes > most_reserved {
                (scan.reserved_peak, most_reserved) = (index, event.reserved_bytes);
            }
            match event.kind() {
                ActivityKind::Allocation => scan.allocations += 1,
                ActivityKind::Deallocation => scan.deallocations += 1,
            }
            scan.without_op += u64::from(!event.has_op);
        }
        scan
    }
}

/// The replay of allocations and frees by address.
struct Replay {
    /// Event indices of the blocks live right after the peak event.
    live_at_peak: Vec<usize>,
    /// Per event, the event whose op it shows: a free shows the allocation it frees
    /// (as XProf copies allocation details onto deallocations), any other event itself.
    source: Vec<u32>,
    /// Frees of addresses with no live allocation, over the whole trace.
    frees_without_allocation: u64,
    /// Their bytes.
    frees_without_allocation_bytes: i64,
}

/// Replays every event, in time order.
fn replay(events: &impl MemoryEvents, peak: usize) -> Replay {
    let mut live: FxMap<u64, usize> = FxMap::default();
    let mut result = Replay {
        live_at_peak: Vec::new(),
        source: (0..events.len()).map(|i| u32::try_from(i).unwrap_or(u32::MAX)).collect(),
        frees_without_allocation: 0,
        frees_without_allocation_bytes: 0,
    };
    for index in 0..events.len() {
        let event = events.brief(index);
        match event.kind() {
            ActivityKind::Allocation => {
                live.insert(event.address, index);
            }
            ActivityKind::Deallocation => match live.remove(&event.address) {
                Some(alloc) => result.source[index] = u32::try_from(alloc).unwrap_or(u32::MAX),
                None => {
                    result.frees_without_allocation += 1;
                    result.frees_without_allocation_bytes =
                        result.frees_without_allocation_bytes.saturating_add(event.bytes.saturating_abs());
                }
            },
        }
        if index == peak {
            result.live_at_peak = live.values().copied().collect();
            result.live_at_peak.sort_unstable();
        }
    }
    result
}

/// The profile of one device's allocator from its events in time order.
pub(crate) fn allocator(device_type: i64, device_id: i64, events: &mut impl MemoryEvents) -> AllocatorProfile {
    let scan = Scan::of(events);
    let peak = scan.peak;
    let replayed = replay(events, peak);
    let sampled = sample_indices(events.len(), MAX_TIMELINE_SNAPSHOTS, |i| events.brief(i).allocated_bytes);
    // Snapshots are made only for the events shown (millions of events would
    // otherwise each hold a copy of their op's name).
    let mut snapshot_at = |i: usize| {
        let source = replayed.source.get(i).map_or(i, |&s| s as usize);
        snapshot_of(events, i, if source < events.len() { source } else { i })
    };
    let timeline: Vec<MemorySnapshot> = sampled.into_iter().map(&mut snapshot_at).collect();
    let live: Vec<MemorySnapshot> = replayed.live_at_peak.iter().map(|&i| snapshot_at(i)).collect();

    let event = |i: usize| if i < events.len() { events.event(i) } else { MemoryEvent::default() };
    let peak_event = event(peak);
    let peak_stats = AggregationStats { peak_bytes_in_use: peak_event.allocated_bytes, ..stats_of(&peak_event) };
    let summary = MemorySummary {
        peak_bytes_usage_lifetime: 0,
        memory_capacity_bytes: peak_stats.heap_allocated_bytes.saturating_add(peak_stats.free_memory_bytes),
        peak_stats,
        peak_stats_time_ps: peak_event.time_ps,
        peak_stats_offset_ps: if peak < events.len() { events.offset_ps(peak) } else { 0 },
    };

    let live_bytes = live.iter().fold(0i64, |sum, s| sum.saturating_add(s.activity.allocation_bytes));
    let before_trace = peak_event.allocated_bytes.saturating_sub(live_bytes);
    let mut special_allocations = Vec::new();
    if before_trace > 0 {
        special_allocations.push(MemoryActivity {
            kind: ActivityKind::Allocation,
            requested_bytes: before_trace,
            allocation_bytes: before_trace,
            tf_op_name: BEFORE_TRACE_ROW.to_string(),
            step_id: peak_event.step,
            ..MemoryActivity::default()
        });
    }
    // Rows point at positions in `live`, which keeps the events' order.
    let entries = live.iter().enumerate().map(|(k, s)| (k as i64, &s.activity)).collect();
    let rows = merge_rows(entries, &special_allocations);
    let (active_allocations, peak_snapshots) = keep_referenced(rows, &live);

    let count = |list: &[MemorySnapshot], kind| list.iter().filter(|s| s.activity.kind == kind).count() as u64;
    let last = events.len().checked_sub(1).map(event).unwrap_or_default();
    let reserved_peak = event(scan.reserved_peak);
    let pytorch = PytorchAllocator {
        device_type,
        device_id,
        reserved_at_peak_bytes: peak_event.reserved_bytes,
        peak_reserved_bytes: reserved_peak.reserved_bytes,
        peak_reserved_time_ps: reserved_peak.time_ps,
        allocated_at_end_bytes: last.allocated_bytes,
        reserved_at_end_bytes: last.reserved_bytes,
        live_at_peak_blocks: replayed.live_at_peak.len() as u64,
        live_at_peak_bytes: live_bytes,
        allocated_before_trace_at_peak_bytes: before_trace,
        frees_without_allocation: replayed.frees_without_allocation,
        frees_without_allocation_bytes: replayed.frees_without_allocation_bytes,
        events_without_op: scan.without_op,
    };
    AllocatorProfile {
        memory_id: memory_id(device_type, device_id),
        total_allocations: scan.allocations,
        total_deallocations: scan.deallocations,
        timeline_allocations: count(&timeline, ActivityKind::Allocation),
        timeline_deallocations: count(&timeline, ActivityKind::Deallocation),
        summary,
        peak_step_id: peak_event.step,
        timeline,
        active_allocations,
        peak_snapshots,
        special_allocations,
        pytorch: Some(pytorch),
    }
}
