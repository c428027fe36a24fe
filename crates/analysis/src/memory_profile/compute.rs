//! Building the memory profile from the host plane's allocator events, in XProf's
//! order of passes: collect (and track the peak) → sort by time → fill in step ids →
//! copy allocation details onto deallocations → sample the timeline → find the peak
//! step → replay that step up to the peak → keep only the snapshots the table uses.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use mlprof_model::{Event, Host, Plane, StatValue, names};

use super::{
    ActiveAllocation, ActivityKind, AggregationStats, AllocatorProfile, HloModule, MAX_TIMELINE_SNAPSHOTS,
    MemoryActivity, MemoryProfile, MemorySnapshot, MemorySummary,
};
use crate::grouping::HostGroups;
use crate::xstats;

/// Step id of an event outside every step, before step ids are filled in.
const INVALID_STEP: i64 = -1;

/// Builds the memory profile of `host` from its TensorFlow allocator events, with step
/// ids from `groups` (called only when there are such events).
pub fn analyze<'g>(host: &Host, groups: &dyn Fn() -> &'g HostGroups) -> MemoryProfile {
    let Some((plane_index, plane)) = host_plane(host) else {
        return MemoryProfile::default();
    };
    let kinds = activity_kinds(plane);
    let mut profile = MemoryProfile {
        has_host_plane: true,
        allocators: Vec::new(),
        hlo_modules: hlo_modules(host),
        method: None,
        profile_steps: Default::default(),
        snapshot: None,
    };
    if kinds.iter().all(Option::is_none) {
        return profile;
    }
    let groups = groups();
    let mut allocators = collect(plane, plane_index, &kinds, groups);
    allocators.sort_by(|a, b| a.memory_id.cmp(&b.memory_id));
    profile.allocators = allocators.into_iter().map(finish).collect();
    let ids = profile.allocators.iter().flat_map(|a| {
        std::iter::once(a.peak_step_id).chain(a.timeline.iter().map(|snapshot| snapshot.activity.step_id))
    });
    profile.profile_steps =
        ids.filter(|&id| groups.name_of(id).is_some()).map(|id| (id, groups.profile_step(id))).collect();
    profile
}

/// Whether `host`'s host plane has any event metadata of an allocator event.
pub fn has_allocator_events(host: &Host) -> bool {
    host_plane(host).is_some_and(|(_, plane)| activity_kinds(plane).iter().any(Option::is_some))
}

/// The host plane (`/host:CPU`) with its index.
fn host_plane(host: &Host) -> Option<(usize, &Plane)> {
    host.planes.iter().enumerate().find(|(_, p)| p.name == names::HOST_PLANE)
}

/// Per event metadata of `plane`, the allocator activity its events record, if any.
fn activity_kinds(plane: &Plane) -> Vec<Option<ActivityKind>> {
    plane
        .event_metadata
        .iter()
        .map(|m| match m.name.as_str() {
            "MemoryAllocation" => Some(ActivityKind::Allocation),
            "MemoryDeallocation" => Some(ActivityKind::Deallocation),
            _ => None,
        })
        .collect()
}

/// The stats XProf reads off a memory event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    MemoryIdInt,
    MemoryIdName,
    StackReserved,
    HeapAllocated,
    FreeMemory,
    Fragmentation,
    PeakInUse,
    Requested,
    Allocation,
    Address,
    TfOp,
    GroupId,
    RegionType,
    DataType,
    Shape,
}

impl Field {
    fn of(stat_name: &str) -> Option<Field> {
        Some(match stat_name {
            "index_on_host" | "device_ordinal" => Field::MemoryIdInt,
            "allocator_name" => Field::MemoryIdName,
            "bytes_reserved" => Field::StackReserved,
            "bytes_allocated" => Field::HeapAllocated,
            "bytes_available" => Field::FreeMemory,
            "fragmentation" => Field::Fragmentation,
            "peak_bytes_in_use" => Field::PeakInUse,
            "requested_bytes" => Field::Requested,
            "allocation_bytes" => Field::Allocation,
            "addr" => Field::Address,
            "tf_op" => Field::TfOp,
            "group_id" => Field::GroupId,
            "region_type" => Field::RegionType,
            "data_type" => Field::DataType,
            "shape" => Field::Shape,
            _ => return None,
        })
    }
}

/// XProf's `IntValue`: the `int64` value; any other kind (even `uint64`) reads as 0.
fn int_value(value: StatValue) -> i64 {
    match value {
        StatValue::Int(v) => v,
        _ => 0,
    }
}

/// XProf's `DoubleValue`: the `double` value; any other kind reads as 0.
fn double_value(value: StatValue) -> f64 {
    match value {
        StatValue::Double(v) => v,
        _ => 0.0,
    }
}

/// An allocator's snapshots in event-storage order and its running summary.
struct Collected {
    memory_id: String,
    snapshots: Vec<MemorySnapshot>,
    summary: MemorySummary,
}

fn collect(plane: &Plane, plane_index: usize, kinds: &[Option<ActivityKind>], groups: &HostGroups) -> Vec<Collected> {
    let fields: Vec<Option<Field>> = plane.stat_metadata.iter().map(|m| Field::of(&m.name)).collect();
    let mut allocators: Vec<Collected> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for (line_index, line) in plane.lines.iter().enumerate() {
        for event in line.iter() {
            let Some(Some(kind)) = kinds.get(event.metadata_index() as usize) else { continue };
            let group = groups.group_of(plane_index, line_index, event.index());
            let (memory_id, snapshot) = snapshot_of(plane, &fields, &event, *kind, group);
            let slot = match by_id.entry(memory_id) {
                Entry::Occupied(entry) => *entry.get(),
                Entry::Vacant(entry) => {
                    let memory_id = entry.key().clone();
                    allocators.push(Collected { memory_id, snapshots: Vec::new(), summary: MemorySummary::default() });
                    *entry.insert(allocators.len() - 1)
                }
            };
            let Some(allocator) = allocators.get_mut(slot) else { continue };
            track_peak(&mut allocator.summary, &snapshot);
            allocator.snapshots.push(snapshot);
        }
    }
    allocators
}

/// Reads one memory event: its memory id and snapshot. The step comes from the
/// grouping side table, else from a `group_id` stat already in the profile.
fn snapshot_of(
    plane: &Plane,
    fields: &[Option<Field>],
    event: &Event<'_>,
    kind: ActivityKind,
    group: Option<i64>,
) -> (String, MemorySnapshot) {
    let mut memory_id = String::new();
    let mut stats = AggregationStats::default();
    let mut activity = MemoryActivity { kind, step_id: INVALID_STEP, ..MemoryActivity::default() };
    let text = |value: StatValue| xstats::as_str(plane, event.store(), value).unwrap_or("").to_string();
    for stat in event.stats() {
        let Some(Some(field)) = fields.get(stat.key() as usize) else { continue };
        let value = stat.value();
        match field {
            Field::MemoryIdInt => memory_id = int_value(value).to_string(),
            Field::MemoryIdName => memory_id = text(value),
            Field::StackReserved => stats.stack_reserved_bytes = int_value(value),
            Field::HeapAllocated => stats.heap_allocated_bytes = int_value(value),
            Field::FreeMemory => stats.free_memory_bytes = int_value(value),
            Field::Fragmentation => stats.fragmentation = double_value(value),
            Field::PeakInUse => stats.peak_bytes_in_use = int_value(value),
            Field::Requested => activity.requested_bytes = int_value(value),
            Field::Allocation => activity.allocation_bytes = int_value(value),
            Field::Address => activity.address = int_value(value) as u64,
            Field::TfOp => activity.tf_op_name = text(value),
            Field::GroupId => activity.step_id = int_value(value),
            Field::RegionType => activity.region_type = text(value),
            Field::DataType => activity.data_type = data_type_name(int_value(value)),
            Field::Shape => activity.tensor_shape = text(value),
        }
    }
    if let Some(group) = group {
        activity.step_id = group;
    }
    let snapshot = MemorySnapshot { time_ps: event.start_ps(), offset_ps: event.offset_ps(), stats, activity };
    (memory_id, snapshot)
}

/// XProf's running summary: the lifetime peak is the last event's; the profile peak
/// moves to every event whose stack + heap reaches (or equals) the peak so far.
fn track_peak(summary: &mut MemorySummary, snapshot: &MemorySnapshot) {
    summary.peak_bytes_usage_lifetime = snapshot.stats.peak_bytes_in_use;
    let used = snapshot.used_bytes();
    if used >= summary.peak_stats.peak_bytes_in_use {
        summary.peak_stats = AggregationStats { peak_bytes_in_use: used, ..snapshot.stats.clone() };
        summary.peak_stats_time_ps = snapshot.time_ps;
        summary.peak_stats_offset_ps = snapshot.offset_ps;
        summary.memory_capacity_bytes = used.wrapping_add(snapshot.stats.free_memory_bytes);
    }
}

/// TensorFlow's `DataType` enum value as XProf prints it; values above 100 are
/// reference types (`float_ref`). Like XProf, the value is taken as a 32-bit enum.
pub(super) fn data_type_name(value: i64) -> String {
    let code = value as i32;
    if code > 100 {
        return format!("{}_ref", base_data_type_name(code - 100));
    }
    base_data_type_name(code)
}

fn base_data_type_name(code: i32) -> String {
    let name = match code {
        0 => "INVALID",
        1 => "float",
        2 => "double",
        3 => "int32",
        4 => "uint8",
        5 => "int16",
        6 => "int8",
        7 => "string",
        8 => "complex64",
        9 => "int64",
        10 => "bool",
        11 => "qint8",
        12 => "quint8",
        13 => "qint32",
        14 => "bfloat16",
        15 => "qint16",
        16 => "quint16",
        17 => "uint16",
        18 => "complex128",
        19 => "half",
        20 => "resource",
        21 => "variant",
        22 => "uint32",
        23 => "uint64",
        24 => "float8_e5m2",
        25 => "float8_e4m3fn",
        26 => "float8_e4m3fnuz",
        27 => "float8_e4m3b11fnuz",
        28 => "float8_e5m2fnuz",
        29 => "int4",
        30 => "uint4",
        other => return format!("unknown dtype enum ({other})"),
    };
    name.to_string()
}

/// XProf's post-processing of one allocator.
fn finish(collected: Collected) -> AllocatorProfile {
    let Collected { memory_id, mut snapshots, summary } = collected;
    // XProf sorts with an unstable sort; a stable one keeps ties in storage order.
    snapshots.sort_by_key(|s| s.offset_ps);
    fill_step_ids(&mut snapshots);
    copy_allocation_details(&mut snapshots);
    let timeline = sample_timeline(&snapshots, MAX_TIMELINE_SNAPSHOTS);
    let peak_step_id = peak_step(summary.peak_stats.peak_bytes_in_use, &snapshots);
    let (rows, special_allocations) = active_at_peak(&snapshots, &summary, peak_step_id);
    let (active_allocations, peak_snapshots) = keep_referenced(rows, &snapshots);
    let count = |list: &[MemorySnapshot], kind| list.iter().filter(|s| s.activity.kind == kind).count() as u64;
    AllocatorProfile {
        total_allocations: count(&snapshots, ActivityKind::Allocation),
        total_deallocations: count(&snapshots, ActivityKind::Deallocation),
        timeline_allocations: count(&timeline, ActivityKind::Allocation),
        timeline_deallocations: count(&timeline, ActivityKind::Deallocation),
        memory_id,
        summary,
        peak_step_id,
        timeline,
        active_allocations,
        peak_snapshots,
        special_allocations,
        pytorch: None,
    }
}

/// Events outside every step get the last valid step + 1 (0 before the first).
fn fill_step_ids(snapshots: &mut [MemorySnapshot]) {
    let mut last_valid = INVALID_STEP;
    for snapshot in snapshots {
        if snapshot.activity.step_id == INVALID_STEP {
            snapshot.activity.step_id = last_valid.wrapping_add(1);
        } else {
            last_valid = snapshot.activity.step_id;
        }
    }
}

/// A deallocation takes the op, region, data type and shape of the earlier allocation
/// at the same address (the first one not yet matched); unmatched ones stay as read.
fn copy_allocation_details(snapshots: &mut [MemorySnapshot]) {
    let mut open: HashMap<u64, usize> = HashMap::new();
    for index in 0..snapshots.len() {
        let address = snapshots[index].activity.address;
        match snapshots[index].activity.kind {
            ActivityKind::Deallocation => {
                let Some(alloc) = open.remove(&address) else { continue };
                let from = snapshots[alloc].activity.clone();
                let to = &mut snapshots[index].activity;
                to.tf_op_name = from.tf_op_name;
                to.region_type = from.region_type;
                to.data_type = from.data_type;
                to.tensor_shape = from.tensor_shape;
            }
            ActivityKind::Allocation => {
                open.entry(address).or_insert(index);
            }
        }
    }
}

/// At most `max` snapshots: all of them when they fit, else a max box filter over
/// stack + heap bytes — `count1` boxes of `width` snapshots, then boxes of
/// `width + 1`, exactly `max` boxes in all; in each box the first largest wins.
pub(super) fn sample_timeline(snapshots: &[MemorySnapshot], max: usize) -> Vec<MemorySnapshot> {
    sample_indices(snapshots.len(), max, |i| snapshots[i].used_bytes())
        .into_iter()
        .map(|i| snapshots[i].clone())
        .collect()
}

/// [`sample_timeline`]'s choice among `total` snapshots whose stack + heap bytes
/// `used` gives: every index up to `max`, else the first largest of each box.
pub(super) fn sample_indices(total: usize, max: usize, used: impl Fn(usize) -> i64) -> Vec<usize> {
    if total <= max || max == 0 {
        return (0..total).collect();
    }
    let width = total / max;
    let count1 = max * (width + 1) - total;
    let count2 = max - count1;
    let mut sampled = Vec::with_capacity(max);
    let mut boxes = |width: usize, count: usize, start: usize| {
        for i in 0..count {
            let from = start + width * i;
            let chosen =
                (from..(from + width).min(total)).reduce(|best, j| if used(j) > used(best) { j } else { best });
            if let Some(chosen) = chosen {
                sampled.push(chosen);
            }
        }
    };
    boxes(width, count1, 0);
    boxes(width + 1, count2, width * count1);
    sampled
}

/// The step of the last snapshot whose stack + heap bytes equal `peak`; 0 if none.
fn peak_step(peak: i64, snapshots: &[MemorySnapshot]) -> i64 {
    snapshots.iter().rev().find(|s| s.used_bytes() == peak).map_or(0, |s| s.activity.step_id)
}

/// A breakdown-table entry before merging: the snapshot index (negative for special
/// rows: -1 is special row 0, -2 special row 1) and the activity it shows.
pub(super) type Row<'a> = (i64, &'a MemoryActivity);

/// Replays the peak step up to the peak time: live allocations by address, plus the
/// special rows for heap bytes no live allocation explains and for stack. Returns the
/// merged, sorted rows (snapshot indices into `snapshots`) and the special rows.
fn active_at_peak(
    snapshots: &[MemorySnapshot],
    summary: &MemorySummary,
    peak_step: i64,
) -> (Vec<ActiveAllocation>, Vec<MemoryActivity>) {
    let mut unmapped_allocation = summary.peak_stats.heap_allocated_bytes;
    let mut unmapped_deallocation: i64 = 0;
    let mut live: HashMap<u64, usize> = HashMap::new();
    for (index, snapshot) in snapshots.iter().enumerate() {
        if snapshot.offset_ps > summary.peak_stats_offset_ps {
            break;
        }
        let activity = &snapshot.activity;
        if activity.step_id != peak_step {
            continue;
        }
        match activity.kind {
            ActivityKind::Allocation => {
                live.insert(activity.address, index);
                unmapped_allocation = unmapped_allocation.wrapping_sub(activity.allocation_bytes);
            }
            ActivityKind::Deallocation => {
                if live.remove(&activity.address).is_none() {
                    unmapped_deallocation = unmapped_deallocation.wrapping_add(activity.allocation_bytes);
                }
                unmapped_allocation = unmapped_allocation.wrapping_add(activity.allocation_bytes);
            }
        }
    }
    unmapped_allocation = unmapped_allocation.wrapping_sub(unmapped_deallocation);

    let special_row = |bytes: i64, op: &str, region: &str| MemoryActivity {
        kind: ActivityKind::Allocation,
        requested_bytes: bytes,
        allocation_bytes: bytes,
        address: 0,
        tf_op_name: op.to_string(),
        step_id: peak_step,
        region_type: region.to_string(),
        data_type: data_type_name(0),
        tensor_shape: "unknown".to_string(),
    };
    let mut specials = Vec::new();
    if unmapped_allocation > 0 {
        specials.push(special_row(unmapped_allocation, "unused preallocated device memory", "persist/dynamic"));
    }
    let stack = summary.peak_stats.stack_reserved_bytes;
    if stack > 0 {
        specials.push(special_row(stack, "stack", "stack"));
    }

    let entries: Vec<Row<'_>> = live
        .values()
        .filter_map(|&index| Some((i64::try_from(index).ok()?, &snapshots.get(index)?.activity)))
        .collect();
    (merge_rows(entries, &specials), specials)
}

/// The breakdown table from live allocations (`entries`) and special rows: sorted in
/// XProf's order (ties broken by snapshot index, where XProf leaves them to an unstable
/// sort over hash-map order), identical rows merged into one with occurrences.
pub(super) fn merge_rows<'a>(mut entries: Vec<Row<'a>>, specials: &'a [MemoryActivity]) -> Vec<ActiveAllocation> {
    for (i, special) in specials.iter().enumerate() {
        entries.push((-(i as i64) - 1, special));
    }
    entries.sort_by(|a, b| row_key(a.1).cmp(&row_key(b.1)).then(a.0.cmp(&b.0)));

    let mut rows: Vec<ActiveAllocation> = Vec::new();
    let mut previous: Option<&MemoryActivity> = None;
    for (index, activity) in entries {
        if let (Some(prev), Some(last)) = (previous, rows.last_mut())
            && row_key(prev) == row_key(activity)
        {
            last.num_occurrences += 1;
            continue;
        }
        let special_index = if index < 0 { -index - 1 } else { -1 };
        rows.push(ActiveAllocation { snapshot_index: index, special_index, num_occurrences: 1 });
        previous = Some(activity);
    }
    rows
}

/// The breakdown order: allocation bytes and requested bytes descending, then op,
/// region, data type and shape ascending. Rows with equal keys merge.
fn row_key(a: &MemoryActivity) -> (i64, i64, &str, &str, &str, &str) {
    (
        a.allocation_bytes.wrapping_neg(),
        a.requested_bytes.wrapping_neg(),
        &a.tf_op_name,
        &a.region_type,
        &a.data_type,
        &a.tensor_shape,
    )
}

/// Keeps the snapshots that ordinary rows refer to, in row order, and renumbers rows.
pub(super) fn keep_referenced(
    mut rows: Vec<ActiveAllocation>,
    snapshots: &[MemorySnapshot],
) -> (Vec<ActiveAllocation>, Vec<MemorySnapshot>) {
    let mut kept = Vec::new();
    for row in &mut rows {
        let Ok(index) = usize::try_from(row.snapshot_index) else { continue };
        let Some(snapshot) = snapshots.get(index) else { continue };
        row.snapshot_index = kept.len() as i64;
        kept.push(snapshot.clone());
    }
    (rows, kept)
}

/// The `XLA Modules` lines of TPU planes, numbered in plane and line order.
fn hlo_modules(host: &Host) -> Vec<HloModule> {
    let mut modules = Vec::new();
    for plane in host.planes.iter().filter(|p| p.name.starts_with(names::TPU_PLANE_PREFIX)) {
        let plane_name = plane.name.strip_prefix("/device:").unwrap_or(&plane.name);
        for line in plane.lines.iter().filter(|l| l.name == "XLA Modules") {
            for event in line.iter() {
                modules.push(HloModule {
                    id: modules.len() as i64,
                    name: xstats::event_name(plane, &event).to_string(),
                    start_ps: event.start_ps(),
                    end_ps: event.end_ps(),
                    start_offset_ps: event.offset_ps(),
                    end_offset_ps: event.offset_ps().wrapping_add(event.duration_ps()),
                    plane_name: plane_name.to_string(),
                });
            }
        }
    }
    modules
}
