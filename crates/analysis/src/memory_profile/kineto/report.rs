//! The memory profile of a PyTorch trace for people: allocated and reserved memory
//! (what PyTorch users watch with `torch.cuda.memory_allocated` / `memory_reserved`)
//! rather than XProf's stack / heap / free wording.

use super::super::output::PS_PER_MS_F64;
use super::super::{ActivityKind, AllocatorProfile, MemoryProfile};
use crate::report::{Cell, Report, Section, Table};
use mlprof_model::human;

/// The report of a memory profile built from `[memory]` events: a summary per memory
/// id, each one's timeline, and the blocks live at the peak (the main table).
pub(in crate::memory_profile) fn report(profile: &MemoryProfile) -> Report {
    let mut summary = Section::new("Memory profile summary");
    if let Some(method) = profile.method.as_ref().filter(|_| !profile.allocators.is_empty()) {
        summary = summary.note(method.clone());
    }
    if profile.allocators.is_empty() {
        summary = summary.note(if profile.snapshot.is_some() {
            "The snapshot has no allocator trace, only its state at the end: call \
             torch.cuda.memory._record_memory_history() before the code to trace (PyTorch 2.0+)."
        } else {
            "No [memory] events: profile with torch.profiler.profile(profile_memory=True) to record allocations."
        });
    }
    for allocator in &profile.allocators {
        summary = summary.note(summary_sentence(allocator));
    }
    let mut sections = vec![summary.with_table(summary_table(&profile.allocators))];
    for allocator in &profile.allocators {
        let title = format!("Memory timeline ({})", allocator.memory_id);
        let mut section = Section::new(title).with_table(timeline_table(allocator));
        let events = allocator.total_allocations + allocator.total_deallocations;
        if allocator.timeline.len() as u64 != events {
            section = section.note(format!(
                "{} of {} events, sampled with a max filter over allocated bytes.",
                allocator.timeline.len(),
                events
            ));
        }
        sections.push(section);
    }
    let mut breakdown =
        Section::new("Memory breakdown at the peak").with_table(breakdown_table(&profile.allocators)).main();
    for allocator in &profile.allocators {
        breakdown = breakdown.note(format!(
            "{}: blocks live at the peak ({:.3} ms), largest first, with {}; identical blocks are merged into one \
             row.",
            allocator.memory_id,
            allocator.summary.peak_stats_time_ps as f64 / PS_PER_MS_F64,
            if profile.snapshot.is_some() {
                "the stack that allocated each (its first frame in the user's code)"
            } else {
                "the op running when each was allocated and that op's input types and shapes"
            }
        ));
    }
    sections.push(breakdown);
    if let Some(snapshot) = &profile.snapshot {
        sections.extend(super::super::snapshot_report::sections(snapshot));
    }
    Report { tool: "memory_profile".to_string(), sections }
}

fn size(bytes: i64) -> String {
    human::bytes(bytes as f64)
}

fn summary_sentence(a: &AllocatorProfile) -> String {
    let s = &a.summary;
    let mut text = format!(
        "{}: peak allocated {} at {:.3} ms (step {}); {} allocations, {} frees.",
        a.memory_id,
        size(s.peak_stats.heap_allocated_bytes),
        s.peak_stats_time_ps as f64 / PS_PER_MS_F64,
        a.peak_step_id,
        a.total_allocations,
        a.total_deallocations
    );
    let Some(p) = &a.pytorch else { return text };
    if p.peak_reserved_bytes > 0 {
        text.push_str(&format!(
            " Reserved at the peak {} (fragmentation {}); peak reserved {} at {:.3} ms.",
            size(p.reserved_at_peak_bytes),
            human::percent(s.peak_stats.fragmentation * 100.0),
            size(p.peak_reserved_bytes),
            p.peak_reserved_time_ps as f64 / PS_PER_MS_F64
        ));
    } else {
        text.push_str(" Nothing reserved (no caching allocator).");
    }
    if p.allocated_before_trace_at_peak_bytes > 0 || p.frees_without_allocation > 0 {
        text.push_str(&format!(
            " {} live at the peak was allocated before the trace; {} frees ({}) were of blocks \
             allocated before it.",
            size(p.allocated_before_trace_at_peak_bytes),
            p.frees_without_allocation,
            size(p.frees_without_allocation_bytes)
        ));
    }
    text
}

fn summary_table(allocators: &[AllocatorProfile]) -> Table {
    let mut table = Table::new([
        "Memory ID",
        "#Allocations",
        "#Frees",
        "Peak allocated (bytes)",
        "Peak time (ms)",
        "Peak step",
        "Reserved at peak (bytes)",
        "Fragmentation at peak (%)",
        "Peak reserved (bytes)",
        "Allocated at end (bytes)",
        "Live at peak, from before the trace (bytes)",
    ]);
    for a in allocators {
        let s = &a.summary;
        let p = a.pytorch.clone().unwrap_or_default();
        table.push(vec![
            Cell::text(&a.memory_id),
            Cell::Int(a.total_allocations as i64),
            Cell::Int(a.total_deallocations as i64),
            Cell::Int(s.peak_stats.heap_allocated_bytes),
            Cell::num(s.peak_stats_time_ps as f64 / PS_PER_MS_F64, 3),
            Cell::Int(a.peak_step_id),
            Cell::Int(p.reserved_at_peak_bytes),
            Cell::num(s.peak_stats.fragmentation * 100.0, 2),
            Cell::Int(p.peak_reserved_bytes),
            Cell::Int(p.allocated_at_end_bytes),
            Cell::Int(p.allocated_before_trace_at_peak_bytes),
        ]);
    }
    table.key_columns(&[
        "Memory ID",
        "Peak allocated (bytes)",
        "Peak reserved (bytes)",
        "Peak time (ms)",
        "Peak step",
        "Reserved at peak (bytes)",
        "Fragmentation at peak (%)",
    ])
}

fn timeline_table(a: &AllocatorProfile) -> Table {
    // Without a caching allocator (CPU) nothing is reserved: no column of zeros.
    let has_reserved = a.pytorch.as_ref().is_some_and(|p| p.peak_reserved_bytes > 0);
    let mut columns = vec!["Time (ms)", "Activity", "Op name", "Step", "Size (bytes)", "Allocated (bytes)"];
    if has_reserved {
        columns.push("Reserved (bytes)");
    }
    let mut table = Table::new(columns);
    for s in &a.timeline {
        let activity = match s.activity.kind {
            ActivityKind::Allocation => "allocation",
            ActivityKind::Deallocation => "free",
        };
        let mut row = vec![
            Cell::num(s.time_ps as f64 / PS_PER_MS_F64, 6),
            Cell::text(activity),
            Cell::text(&s.activity.tf_op_name),
            Cell::Int(s.activity.step_id),
            Cell::Int(s.activity.allocation_bytes),
            Cell::Int(s.stats.heap_allocated_bytes),
        ];
        if has_reserved {
            row.push(Cell::Int(s.stats.reserved_bytes.unwrap_or_default()));
        }
        table.push(row);
    }
    table
}

fn breakdown_table(allocators: &[AllocatorProfile]) -> Table {
    let mut table = Table::new(["Memory ID", "Op name", "Size (bytes)", "Occurrences", "Input types", "Input dims"]);
    for a in allocators {
        for (activity, occurrences) in a.breakdown() {
            table.push(vec![
                Cell::text(&a.memory_id),
                Cell::text(&activity.tf_op_name),
                Cell::Int(activity.allocation_bytes),
                Cell::Int(occurrences),
                Cell::text(&activity.data_type),
                Cell::text(&activity.tensor_shape),
            ]);
        }
    }
    table
}
