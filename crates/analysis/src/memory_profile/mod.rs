//! The memory profile (XProf's `memory_profile` tool): how each allocator's memory use
//! evolved over the profile, where it peaked, and which allocations were live at the
//! peak, from the TensorFlow allocator's `MemoryAllocation` / `MemoryDeallocation`
//! events on the host plane.
//!
//! The one design decision to know: the computation follows XProf 2.24.2 step by step,
//! including its quirks (snapshots are ordered by the event's offset from *its line's*
//! start, as XProf does; the summary's peak is taken in event-storage order before that
//! sort; only the event's own stats count, not its metadata's; integer stats stored as
//! unsigned read as 0), so that [`MemoryProfile::to_xprof_json`] reproduces XProf's
//! answer. Where XProf's own output is not deterministic (ties in its unstable sorts
//! and hash-map order), we break ties by original position.
//!
//! PyTorch (Kineto) traces have no such events; [`analyze`] reads their `[memory]`
//! instant events instead ([`kineto`](self::kineto)) into the same result type, with
//! what only PyTorch records in [`AllocatorProfile::pytorch`] and the method in
//! [`MemoryProfile::method`].

mod compute;
pub(crate) mod kineto;
mod output;
pub mod snapshot;
mod snapshot_report;
#[cfg(test)]
mod tests;
mod trace;

use std::collections::BTreeMap;

use mlprof_model::Host;
use serde::Serialize;

use crate::facts::{self, AllocationRecords};
use crate::grouping::HostGroups;

pub(crate) use kineto::events::memory_events as kineto_memory_events;
pub use kineto::{BEFORE_TRACE_ROW, PytorchAllocator};

/// Builds the memory profile of `host` from the allocation records its source has
/// ([`facts::allocation_records`]): PyTorch's `[memory]` events, or XProf's computation
/// over TensorFlow's allocator events with step ids from `groups`, which is called only
/// when [`reads_groups`] says so (grouping is the costliest shared step of the tools).
pub fn analyze<'g>(host: &Host, groups: &dyn Fn() -> &'g HostGroups) -> MemoryProfile {
    match facts::allocation_records(host) {
        AllocationRecords::PytorchMemoryEvents => match &host.allocator_trace {
            Some(trace) => snapshot_profile(host, trace),
            None => kineto::analyze(host),
        },
        AllocationRecords::TfAllocatorEvents => compute::analyze(host, groups),
    }
}

/// Whether [`analyze`] reads `host`'s step groups: only TensorFlow allocator events
/// carry step ids from them, so a host with none (and every PyTorch host) needs none.
pub fn reads_groups(host: &Host) -> bool {
    match facts::allocation_records(host) {
        AllocationRecords::PytorchMemoryEvents => false,
        AllocationRecords::TfAllocatorEvents => compute::has_allocator_events(host),
    }
}

/// The memory profile of a host read from a memory snapshot: its allocator trace
/// read as [`kineto`] reads `[memory]` events, and what only a snapshot tells.
fn snapshot_profile(host: &Host, allocator_trace: &mlprof_model::AllocatorTrace) -> MemoryProfile {
    let records = trace::per_device(allocator_trace);
    let steps = crate::grouping::profiler_steps::find(host);
    let allocators = || {
        let each = |device: &trace::DeviceRecords| {
            let records = device;
            let mut events =
                trace::TraceEvents { trace: allocator_trace, records, steps: &steps, labels: Default::default() };
            kineto::allocator(trace::CUDA, i64::from(device.device), &mut events)
        };
        records.iter().map(each).collect()
    };
    // Two passes over the same records, each on a core of its own.
    let (allocators, found) = rayon::join(allocators, || snapshot::analyze(host, allocator_trace, &records));
    let mut profile = kineto::profile(host, allocators);
    profile.method = Some(snapshot::METHOD.to_string());
    profile.snapshot = Some(found);
    profile
}

/// XProf's cap on the number of points in the memory timeline.
pub const MAX_TIMELINE_SNAPSHOTS: usize = 1000;

/// The memory profile of one host.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemoryProfile {
    /// Whether the host has a `/host:CPU` plane. Without one XProf answers with an
    /// empty body (and [`MemoryProfile::to_xprof_json`] gives `null`).
    pub has_host_plane: bool,
    /// One profile per memory id (allocator), sorted by memory id.
    pub allocators: Vec<AllocatorProfile>,
    /// The XLA modules run on TPU planes (empty elsewhere).
    pub hlo_modules: Vec<HloModule>,
    /// How the profile was obtained, in one sentence, where it is not XProf's
    /// computation (PyTorch traces); `None` (and absent from the JSON) for XSpace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The profile's own number of each step id (group) the memory events carry: what
    /// the report shows ([`MemoryProfile::shown_step`]); `xprof-json` keeps the ids.
    #[serde(skip)]
    pub profile_steps: BTreeMap<i64, i64>,
    /// PyTorch memory snapshots only: stacks, segments, OOMs and streams
    /// ([`snapshot::SnapshotMemory`]); `None` (and absent from the JSON) otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<snapshot::SnapshotMemory>,
}

impl MemoryProfile {
    /// Step id `id` as the profile numbers its steps (`train 5` → 5): its group's number,
    /// or, for an id past a known group (XProf gives events after the last step the next
    /// id), that group's number plus the distance; the id itself when no group is known.
    pub fn shown_step(&self, id: i64) -> i64 {
        match self.profile_steps.range(..=id).next_back() {
            Some((&known, &number)) => number.saturating_add(id - known),
            None => id,
        }
    }
}

/// The memory profile of one allocator (XProf's `PerAllocatorMemoryProfile`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AllocatorProfile {
    /// The memory id: the `allocator_name` stat, or the `index_on_host` /
    /// `device_ordinal` stat printed as an integer (whichever the event lists last).
    pub memory_id: String,
    /// Peak and capacity figures.
    pub summary: MemorySummary,
    /// Allocation events of this allocator in the whole profile.
    pub total_allocations: u64,
    /// Deallocation events of this allocator in the whole profile.
    pub total_deallocations: u64,
    /// Allocations among the [`AllocatorProfile::timeline`] snapshots (what XProf's UI
    /// shows as "#Allocation"; equal to `total_allocations` up to 1000 events).
    pub timeline_allocations: u64,
    /// Deallocations among the [`AllocatorProfile::timeline`] snapshots (XProf's
    /// "#Deallocation").
    pub timeline_deallocations: u64,
    /// The step XProf attributes the peak to (the step of the last snapshot whose
    /// stack + heap bytes equal the peak; 0 when none does).
    pub peak_step_id: i64,
    /// The memory timeline: all snapshots in time order, or at most
    /// [`MAX_TIMELINE_SNAPSHOTS`] of them chosen by a max box filter over stack + heap
    /// bytes (XProf's `sampled_timeline_snapshots`).
    pub timeline: Vec<MemorySnapshot>,
    /// The breakdown table at the peak, one row per distinct allocation, largest first;
    /// rows point into [`AllocatorProfile::peak_snapshots`] or
    /// [`AllocatorProfile::special_allocations`].
    pub active_allocations: Vec<ActiveAllocation>,
    /// The snapshots that [`AllocatorProfile::active_allocations`] rows refer to
    /// (XProf's `memory_profile_snapshots`).
    pub peak_snapshots: Vec<MemorySnapshot>,
    /// Rows that no allocation event accounts for: heap memory allocated before the
    /// peak step ("unused preallocated device memory") and stack reservation ("stack");
    /// on PyTorch traces, memory allocated before the trace and still live at the peak.
    pub special_allocations: Vec<MemoryActivity>,
    /// PyTorch (Kineto) traces only: what the `[memory]` events record beyond XProf's
    /// fields (reserved memory, blocks allocated before the trace); `None` (and absent
    /// from the JSON) for XSpace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pytorch: Option<PytorchAllocator>,
}

impl AllocatorProfile {
    /// The breakdown rows at the peak with what each refers to resolved:
    /// `(activity, occurrences)`, largest allocation first.
    pub fn breakdown(&self) -> impl Iterator<Item = (&MemoryActivity, i64)> + '_ {
        self.active_allocations.iter().filter_map(|row| {
            let activity = if row.snapshot_index >= 0 {
                &self.peak_snapshots.get(usize::try_from(row.snapshot_index).ok()?)?.activity
            } else {
                self.special_allocations.get(usize::try_from(row.special_index).ok()?)?
            };
            Some((activity, row.num_occurrences))
        })
    }
}

/// Peak and capacity of one allocator (XProf's `MemoryProfileSummary`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemorySummary {
    /// The allocator's own peak over its lifetime, in bytes (`peak_bytes_in_use` of the
    /// last event in storage order; 0 on PyTorch traces, which do not record it).
    pub peak_bytes_usage_lifetime: i64,
    /// The allocator state at the profile's peak; its `peak_bytes_in_use` is the peak
    /// stack + heap bytes within the profile.
    pub peak_stats: AggregationStats,
    /// When the peak was reached, picoseconds relative to the profile start.
    pub peak_stats_time_ps: i64,
    /// When the peak was reached as XProf reports it: picoseconds from the start of the
    /// event's line (XProf's `peak_stats_time_ps`).
    pub peak_stats_offset_ps: i64,
    /// Stack + heap + free bytes at the peak (on PyTorch traces: reserved bytes at the
    /// peak, or allocated bytes where nothing is reserved, as on CPU).
    pub memory_capacity_bytes: i64,
}

/// The allocator state after one memory event (XProf's `MemoryAggregationStats`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AggregationStats {
    /// Bytes reserved for stack (`bytes_reserved`; 0 on PyTorch traces).
    pub stack_reserved_bytes: i64,
    /// Bytes allocated on the heap (`bytes_allocated`; PyTorch: `Total Allocated`).
    pub heap_allocated_bytes: i64,
    /// Bytes still free (`bytes_available`; PyTorch: `Total Reserved` − `Total
    /// Allocated`, the caching allocator's cached but unused bytes, 0 when nothing is
    /// reserved).
    pub free_memory_bytes: i64,
    /// Fragmentation as a fraction in [0, 1] (`fragmentation`; may be NaN, which the
    /// JSON schema writes as `null`; PyTorch: 1 − allocated / reserved when reserved
    /// > 0, else 0).
    pub fragmentation: f64,
    /// Bytes in use at the allocator's lifetime peak (`peak_bytes_in_use`; 0 on PyTorch
    /// traces); in [`MemorySummary::peak_stats`], the profile's peak stack + heap bytes
    /// instead.
    pub peak_bytes_in_use: i64,
    /// PyTorch traces only: `Total Reserved`, the bytes the device's caching allocator
    /// holds (0 without one, as on CPU); `None` (and absent from the JSON) for XSpace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserved_bytes: Option<i64>,
}

/// Whether a memory event allocated or freed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityKind {
    /// A heap allocation.
    #[default]
    Allocation,
    /// A heap deallocation.
    Deallocation,
}

impl ActivityKind {
    /// XProf's enum name (`ALLOCATION`, `DEALLOCATION`).
    pub fn xprof_name(self) -> &'static str {
        match self {
            ActivityKind::Allocation => "ALLOCATION",
            ActivityKind::Deallocation => "DEALLOCATION",
        }
    }
}

/// What one memory event did (XProf's `MemoryActivityMetadata`). A deallocation
/// carries the op, region, data type and shape of the allocation it frees.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemoryActivity {
    /// Allocation or deallocation.
    pub kind: ActivityKind,
    /// Bytes the caller asked for (`requested_bytes`; PyTorch: |`Bytes`|).
    pub requested_bytes: i64,
    /// Bytes of the block actually allocated (`allocation_bytes`; PyTorch: |`Bytes`|).
    pub allocation_bytes: i64,
    /// Start address of the block (`addr`; PyTorch: `Addr`).
    pub address: u64,
    /// The TF op that allocated (`tf_op`; PyTorch: the innermost `cpu_op` enclosing
    /// the event on its thread, empty when none does).
    pub tf_op_name: String,
    /// The step (group id); events outside any step get the previous step + 1
    /// (PyTorch: N of the enclosing `ProfilerStep#N`, -1 outside every step).
    pub step_id: i64,
    /// `output`, `temp`, `persist`, `dynamic`, … (`region_type`; empty on PyTorch
    /// traces).
    pub region_type: String,
    /// Element type as XProf names it (`float`, `int32`, `INVALID`, …); PyTorch: the
    /// allocating op's `Input type` list as compact JSON (`["float","Scalar"]`).
    pub data_type: String,
    /// Tensor shape text (`shape`), e.g. `[32,26,26,16]`; PyTorch: the allocating op's
    /// `Input Dims` as compact JSON (`[[32,16,26,26],[]]`).
    pub tensor_shape: String,
}

/// The allocator state after one memory event and what the event did
/// (XProf's `MemoryProfileSnapshot`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct MemorySnapshot {
    /// Event start, picoseconds relative to the profile start.
    pub time_ps: i64,
    /// Event start as XProf reports it: picoseconds from the start of the event's line
    /// (XProf's `time_offset_ps`; snapshots are ordered by it).
    pub offset_ps: i64,
    /// Allocator state after the event.
    pub stats: AggregationStats,
    /// What the event did.
    pub activity: MemoryActivity,
}

impl MemorySnapshot {
    /// Stack + heap bytes in use after the event.
    pub fn used_bytes(&self) -> i64 {
        self.stats.stack_reserved_bytes.wrapping_add(self.stats.heap_allocated_bytes)
    }
}

/// One row of the breakdown table at the peak (XProf's `ActiveAllocation`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ActiveAllocation {
    /// Index into [`AllocatorProfile::peak_snapshots`]; negative for special rows.
    pub snapshot_index: i64,
    /// Index into [`AllocatorProfile::special_allocations`]; -1 for ordinary rows.
    pub special_index: i64,
    /// How many identical allocations this row stands for.
    pub num_occurrences: i64,
}

/// An XLA module execution on a TPU plane (XProf's `HloModule`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HloModule {
    /// Running number over all TPU planes.
    pub id: i64,
    /// Module name.
    pub name: String,
    /// Start, picoseconds relative to the profile start.
    pub start_ps: i64,
    /// End, picoseconds relative to the profile start.
    pub end_ps: i64,
    /// Start as XProf reports it: picoseconds from its line's start.
    pub start_offset_ps: i64,
    /// End as XProf reports it: picoseconds from its line's start.
    pub end_offset_ps: i64,
    /// The plane name without `/device:` (e.g. `TPU:0`).
    pub plane_name: String,
}
