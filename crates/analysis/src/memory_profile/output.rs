//! The memory profile for people ([`Report`]) and in XProf's proto3 JSON.

use serde_json::{Map, Value, json};

use super::{
    ActiveAllocation, AggregationStats, AllocatorProfile, HloModule, MemoryActivity, MemoryProfile, MemorySnapshot,
    MemorySummary,
};
use crate::report::{Cell, Report, Section, Table};

pub(super) use mlprof_model::time::PS_PER_MS_F64;

impl MemoryProfile {
    /// The report: a summary per allocator, each allocator's memory timeline, and the
    /// breakdown of live allocations at the peak (the main table, all allocators).
    pub fn report(&self) -> Report {
        if self.method.is_some() {
            return super::kineto::report(self);
        }
        let mut sections = Vec::new();
        let mut summary = Section::new("Memory profile summary");
        if !self.has_host_plane {
            summary = summary.note("The profile has no /host:CPU plane, so no memory events.");
        } else if self.allocators.is_empty() {
            summary = summary.note(
                "No MemoryAllocation/MemoryDeallocation events: the memory profile needs TensorFlow's \
                 allocator events (JAX/XLA profiles have none).",
            );
        }
        for allocator in &self.allocators {
            summary = summary.note(summary_sentence(allocator, self.shown_step(allocator.peak_step_id)));
        }
        sections.push(summary.with_table(summary_table(self)));
        for allocator in &self.allocators {
            let title = format!("Memory timeline ({})", allocator.memory_id);
            let mut section = Section::new(title).with_table(timeline_table(self, allocator));
            if allocator.timeline.len() as u64 != allocator.total_allocations + allocator.total_deallocations {
                section = section.note(format!(
                    "{} of {} events, sampled with a max filter over stack + heap bytes.",
                    allocator.timeline.len(),
                    allocator.total_allocations + allocator.total_deallocations
                ));
            }
            sections.push(section);
        }
        let mut breakdown =
            Section::new("Memory breakdown at the peak").with_table(breakdown_table(&self.allocators)).main();
        for allocator in &self.allocators {
            breakdown = breakdown.note(format!(
                "{}: live allocations of step {} at the peak ({:.3} ms), largest first; identical allocations \
                 are merged into one row.",
                allocator.memory_id,
                self.shown_step(allocator.peak_step_id),
                allocator.summary.peak_stats_time_ps as f64 / PS_PER_MS_F64
            ));
        }
        sections.push(breakdown);
        Report { tool: "memory_profile".to_string(), sections }
    }

    /// XProf's answer for this host: the proto3 JSON of its `MemoryProfile` (every
    /// field printed, 64-bit integers as strings, non-finite doubles as `"NaN"`,
    /// `"Infinity"`, `"-Infinity"`), or `null` where XProf answers with an empty body
    /// (no `/host:CPU` plane).
    pub fn to_xprof_json(&self) -> Value {
        if !self.has_host_plane {
            return Value::Null;
        }
        let per_allocator: Map<String, Value> =
            self.allocators.iter().map(|a| (a.memory_id.clone(), allocator_json(a))).collect();
        let memory_ids: Vec<Value> = self
            .allocators
            .iter()
            .filter(|a| a.total_allocations + a.total_deallocations > 0)
            .map(|a| Value::String(a.memory_id.clone()))
            .collect();
        json!({
            "memoryProfilePerAllocator": per_allocator,
            "numHosts": 1,
            "memoryIds": memory_ids,
            "version": 1,
            "hloModules": self.hlo_modules.iter().map(hlo_module_json).collect::<Vec<_>>(),
        })
    }
}

/// One allocator's summary in a sentence; `peak_step` as the report numbers steps.
fn summary_sentence(a: &AllocatorProfile, peak_step: i64) -> String {
    let s = &a.summary;
    format!(
        "{}: peak memory use in the profile {} at {:.3} ms (step {}) of {} capacity; \
         lifetime peak {}; {} allocations, {} deallocations.",
        a.memory_id,
        mlprof_model::human::bytes(s.peak_stats.peak_bytes_in_use as f64),
        s.peak_stats_time_ps as f64 / PS_PER_MS_F64,
        peak_step,
        mlprof_model::human::bytes(s.memory_capacity_bytes as f64),
        mlprof_model::human::bytes(s.peak_bytes_usage_lifetime as f64),
        a.total_allocations,
        a.total_deallocations
    )
}

fn summary_table(profile: &MemoryProfile) -> Table {
    let mut table = Table::new([
        "Memory ID",
        "#Allocations",
        "#Deallocations",
        "Memory capacity (bytes)",
        "Peak heap usage lifetime (bytes)",
        "Peak memory usage in profile (bytes)",
        "Peak time (ms)",
        "Peak step",
        "Stack reservation (bytes)",
        "Heap allocation (bytes)",
        "Free memory (bytes)",
        "Fragmentation (%)",
    ]);
    for a in &profile.allocators {
        let s = &a.summary;
        table.push(vec![
            Cell::text(&a.memory_id),
            Cell::Int(a.total_allocations as i64),
            Cell::Int(a.total_deallocations as i64),
            Cell::Int(s.memory_capacity_bytes),
            Cell::Int(s.peak_bytes_usage_lifetime),
            Cell::Int(s.peak_stats.peak_bytes_in_use),
            Cell::num(s.peak_stats_time_ps as f64 / PS_PER_MS_F64, 3),
            Cell::Int(profile.shown_step(a.peak_step_id)),
            Cell::Int(s.peak_stats.stack_reserved_bytes),
            Cell::Int(s.peak_stats.heap_allocated_bytes),
            Cell::Int(s.peak_stats.free_memory_bytes),
            Cell::num(s.peak_stats.fragmentation * 100.0, 2),
        ]);
    }
    table.key_columns(&[
        "Memory ID",
        "Peak memory usage in profile (bytes)",
        "Memory capacity (bytes)",
        "Peak time (ms)",
        "Peak step",
        "Fragmentation (%)",
        "Heap allocation (bytes)",
        "Stack reservation (bytes)",
        "Free memory (bytes)",
    ])
}

fn timeline_table(profile: &MemoryProfile, a: &AllocatorProfile) -> Table {
    let mut table = Table::new([
        "Time (ms)",
        "Activity",
        "Op name",
        "Step",
        "Allocation size (bytes)",
        "Requested size (bytes)",
        "Stack (bytes)",
        "Heap (bytes)",
        "Free (bytes)",
        "Fragmentation (%)",
    ]);
    for s in &a.timeline {
        table.push(vec![
            Cell::num(s.time_ps as f64 / PS_PER_MS_F64, 6),
            Cell::text(s.activity.kind.xprof_name().to_ascii_lowercase()),
            Cell::text(&s.activity.tf_op_name),
            Cell::Int(profile.shown_step(s.activity.step_id)),
            Cell::Int(s.activity.allocation_bytes),
            Cell::Int(s.activity.requested_bytes),
            Cell::Int(s.stats.stack_reserved_bytes),
            Cell::Int(s.stats.heap_allocated_bytes),
            Cell::Int(s.stats.free_memory_bytes),
            Cell::num(s.stats.fragmentation * 100.0, 2),
        ]);
    }
    table
}

fn breakdown_table(allocators: &[AllocatorProfile]) -> Table {
    let mut table = Table::new([
        "Memory ID",
        "Op name",
        "Allocation size (bytes)",
        "Requested size (bytes)",
        "Occurrences",
        "Region type",
        "Data type",
        "Shape",
    ]);
    for a in allocators {
        for (activity, occurrences) in a.breakdown() {
            table.push(vec![
                Cell::text(&a.memory_id),
                Cell::text(&activity.tf_op_name),
                Cell::Int(activity.allocation_bytes),
                Cell::Int(activity.requested_bytes),
                Cell::Int(occurrences),
                Cell::text(&activity.region_type),
                Cell::text(&activity.data_type),
                Cell::text(&activity.tensor_shape),
            ]);
        }
    }
    table
}

/// A proto3-JSON `int64`/`uint64`: a decimal string.
fn int64(value: impl ToString) -> Value {
    Value::String(value.to_string())
}

/// A proto3-JSON `double`: a number, or `"NaN"` / `"Infinity"` / `"-Infinity"`.
fn double(value: f64) -> Value {
    if value.is_nan() {
        Value::String("NaN".into())
    } else if value.is_infinite() {
        Value::String(if value > 0.0 { "Infinity" } else { "-Infinity" }.into())
    } else {
        json!(value)
    }
}

fn allocator_json(a: &AllocatorProfile) -> Value {
    json!({
        "memoryProfileSnapshots": a.peak_snapshots.iter().map(snapshot_json).collect::<Vec<_>>(),
        "profileSummary": summary_json(&a.summary),
        "activeAllocations": a.active_allocations.iter().map(active_json).collect::<Vec<_>>(),
        "specialAllocations": a.special_allocations.iter().map(activity_json).collect::<Vec<_>>(),
        "sampledTimelineSnapshots": a.timeline.iter().map(snapshot_json).collect::<Vec<_>>(),
    })
}

fn summary_json(s: &MemorySummary) -> Value {
    json!({
        "peakBytesUsageLifetime": int64(s.peak_bytes_usage_lifetime),
        "peakStats": stats_json(&s.peak_stats),
        "peakStatsTimePs": int64(s.peak_stats_offset_ps),
        "memoryCapacity": int64(s.memory_capacity_bytes),
    })
}

fn stats_json(s: &AggregationStats) -> Value {
    json!({
        "stackReservedBytes": int64(s.stack_reserved_bytes),
        "heapAllocatedBytes": int64(s.heap_allocated_bytes),
        "freeMemoryBytes": int64(s.free_memory_bytes),
        "fragmentation": double(s.fragmentation),
        "peakBytesInUse": int64(s.peak_bytes_in_use),
    })
}

fn activity_json(a: &MemoryActivity) -> Value {
    json!({
        "memoryActivity": a.kind.xprof_name(),
        "requestedBytes": int64(a.requested_bytes),
        "allocationBytes": int64(a.allocation_bytes),
        "address": int64(a.address),
        "tfOpName": a.tf_op_name,
        "stepId": int64(a.step_id),
        "regionType": a.region_type,
        "dataType": a.data_type,
        "tensorShape": a.tensor_shape,
    })
}

fn snapshot_json(s: &MemorySnapshot) -> Value {
    json!({
        "timeOffsetPs": int64(s.offset_ps),
        "aggregationStats": stats_json(&s.stats),
        "activityMetadata": activity_json(&s.activity),
    })
}

fn active_json(a: &ActiveAllocation) -> Value {
    json!({
        "snapshotIndex": int64(a.snapshot_index),
        "specialIndex": int64(a.special_index),
        "numOccurrences": int64(a.num_occurrences),
    })
}

fn hlo_module_json(m: &HloModule) -> Value {
    json!({
        "name": m.name,
        "startTimePs": int64(m.start_offset_ps),
        "endTimePs": int64(m.end_offset_ps),
        "id": int64(m.id),
        "planeName": m.plane_name,
    })
}
