//! The sections a memory snapshot adds to the memory profile's report: memory by
//! stack at the peak and at the snapshot, fragmentation, out-of-memory errors, the
//! largest allocations and the streams.

use mlprof_model::human;

use super::output::PS_PER_MS_F64;
use super::snapshot::{SnapshotDevice, SnapshotMemory, StackRow, shorten_path, shown_frames};
use crate::report::{Cell, Section, Table};

/// The snapshot's sections, after the timeline's.
pub(super) fn sections(snapshot: &SnapshotMemory) -> Vec<Section> {
    let devices = &snapshot.devices;
    let mut by_stack = Section::new("Memory by stack at the peak")
        .with_table(stack_table(devices.iter().map(|d| (d, d.live_at_peak.as_slice()))));
    for d in devices.iter().filter(|d| !d.live_at_peak.is_empty()) {
        by_stack = by_stack.note(format!(
            "{}: blocks live at the peak ({:.3} ms) that the trace allocated, grouped by where they were \
             allocated (the stack's first frame in the user's code), most bytes first (at most {} rows).",
            d.memory_id,
            d.peak_time_ps as f64 / PS_PER_MS_F64,
            super::snapshot::TOP_ROWS
        ));
    }
    let mut sections = vec![by_stack];
    sections.extend(fragmentation(devices));
    let ooms = oom_section(devices);
    if let Some(ooms) = ooms {
        sections.insert(0, ooms);
    }
    sections.push(
        Section::new("Largest allocations")
            .with_table(largest_table(devices))
            .note("Freed = when free was called (free_requested); empty when still allocated at the snapshot."),
    );
    sections.push(Section::new("Streams").with_table(stream_table(devices)));
    sections.push(
        Section::new("Memory by stack at the snapshot")
            .with_table(stack_table(devices.iter().map(|d| (d, d.live_at_snapshot.as_slice()))))
            .note("Blocks allocated when the snapshot was taken, from its segments, grouped by stack."),
    );
    sections
}

fn stack_table<'a>(rows: impl Iterator<Item = (&'a SnapshotDevice, &'a [StackRow])>) -> Table {
    let mut table = Table::new(["Memory ID", "Stack", "Size (bytes)", "Blocks", "Stacks", "Frames (largest stack)"]);
    for (device, stacks) in rows {
        for row in stacks {
            table.push(vec![
                Cell::text(&device.memory_id),
                Cell::text(&row.label),
                Cell::Int(row.bytes),
                Cell::Int(row.blocks as i64),
                Cell::Int(row.stacks as i64),
                Cell::text(shown_frames(row).into_iter().take(6).map(shorten_path).collect::<Vec<_>>().join(" ← ")),
            ]);
        }
    }
    table.key_columns(&["Memory ID", "Stack", "Size (bytes)", "Blocks"])
}

fn fragmentation(devices: &[SnapshotDevice]) -> [Section; 2] {
    let mut summary = Table::new([
        "Memory ID",
        "Segments",
        "Reserved (bytes)",
        "Allocated (bytes)",
        "Pending free (bytes)",
        "Free in segments (bytes)",
        "Fragmentation (%)",
        "Largest free block (bytes)",
    ]);
    let mut section = Section::new("Fragmentation at the snapshot");
    for d in devices {
        summary.push(vec![
            Cell::text(&d.memory_id),
            Cell::Int(d.segments as i64),
            Cell::Int(d.reserved_bytes),
            Cell::Int(d.allocated_bytes),
            Cell::Int(d.pending_free_bytes),
            Cell::Int(d.free_bytes),
            Cell::num(d.fragmentation * 100.0, 2),
            Cell::Int(d.largest_free_block_bytes),
        ]);
        if d.reserved_bytes > 0 {
            section = section.note(format!(
                "{}: {} reserved in {} segments, {} allocated, {} free inside segments ({}); the largest request \
                 served without a new cudaMalloc is {}.",
                d.memory_id,
                human::bytes(d.reserved_bytes as f64),
                d.segments,
                human::bytes(d.allocated_bytes as f64),
                human::bytes(d.free_bytes as f64),
                human::percent(d.fragmentation * 100.0),
                human::bytes(d.largest_free_block_bytes as f64)
            ));
        }
    }
    let mut segments = Table::new([
        "Memory ID",
        "Segment address",
        "Stream",
        "Type",
        "Size (bytes)",
        "Allocated (bytes)",
        "Free (bytes)",
        "Largest free block (bytes)",
        "Blocks",
    ]);
    for d in devices {
        for s in &d.fragmented_segments {
            segments.push(vec![
                Cell::text(&d.memory_id),
                Cell::text(format!("0x{:x}", s.address)),
                Cell::Int(s.stream),
                Cell::text(&s.segment_type),
                Cell::Int(s.total_bytes),
                Cell::Int(s.allocated_bytes),
                Cell::Int(s.free_bytes),
                Cell::Int(s.largest_free_block_bytes),
                Cell::Int(s.blocks as i64),
            ]);
        }
    }
    let segments = Section::new("Segments with the most free bytes")
        .with_table(segments)
        .note(format!("At most {} segments per device.", super::snapshot::TOP_ROWS));
    [section.with_table(summary), segments]
}

fn oom_section(devices: &[SnapshotDevice]) -> Option<Section> {
    let mut table = Table::new([
        "Memory ID",
        "Time (ms)",
        "Stream",
        "Requested (bytes)",
        "Device free (bytes)",
        "Allocated (bytes)",
        "Reserved (bytes)",
        "Largest holder",
        "Its bytes",
    ]);
    let mut section = Section::new("Out-of-memory errors");
    for d in devices {
        for oom in &d.ooms {
            let top = oom.live.first();
            table.push(vec![
                Cell::text(&d.memory_id),
                Cell::num(oom.time_ps as f64 / PS_PER_MS_F64, 3),
                Cell::Int(oom.stream),
                Cell::Int(oom.requested_bytes),
                Cell::Int(oom.device_free_bytes),
                Cell::Int(oom.allocated_bytes),
                Cell::Int(oom.reserved_bytes),
                Cell::text(top.map_or("", |t| t.label.as_str())),
                Cell::Int(top.map_or(0, |t| t.bytes)),
            ]);
            let holders: Vec<String> =
                oom.live.iter().map(|t| format!("{} ({})", t.label, human::bytes(t.bytes as f64))).collect();
            section = section.note(format!(
                "{} at {:.3} ms: asked for {} with {} free on the device, {} allocated and {} reserved; held by {}.",
                d.memory_id,
                oom.time_ps as f64 / PS_PER_MS_F64,
                human::bytes(oom.requested_bytes as f64),
                human::bytes(oom.device_free_bytes as f64),
                human::bytes(oom.allocated_bytes as f64),
                human::bytes(oom.reserved_bytes as f64),
                if holders.is_empty() { "blocks allocated before the trace".to_string() } else { holders.join(", ") }
            ));
        }
    }
    (!table.rows.is_empty()).then(|| section.with_table(table))
}

fn largest_table(devices: &[SnapshotDevice]) -> Table {
    let mut table = Table::new(["Memory ID", "Time (ms)", "Size (bytes)", "Stream", "Stack", "Freed (ms)"]);
    for d in devices {
        for a in &d.largest_allocations {
            table.push(vec![
                Cell::text(&d.memory_id),
                Cell::num(a.time_ps as f64 / PS_PER_MS_F64, 3),
                Cell::Int(a.bytes),
                Cell::Int(a.stream),
                Cell::text(&a.label),
                a.freed_at_ps.map_or_else(|| Cell::text(""), |t| Cell::num(t as f64 / PS_PER_MS_F64, 3)),
            ]);
        }
    }
    table
}

fn stream_table(devices: &[SnapshotDevice]) -> Table {
    let mut table = Table::new(["Memory ID", "Stream", "Allocations", "Peak (bytes)", "Peak time (ms)"]);
    for d in devices {
        for s in &d.streams {
            table.push(vec![
                Cell::text(&d.memory_id),
                Cell::Int(s.stream),
                Cell::Int(s.allocations as i64),
                Cell::Int(s.peak_bytes),
                Cell::num(s.peak_time_ps as f64 / PS_PER_MS_F64, 3),
            ]);
        }
    }
    table
}
