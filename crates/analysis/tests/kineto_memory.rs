//! The memory profile of a real PyTorch trace (`[memory]` events) against two
//! independent references on the same trace:
//! - `tests/data/kineto/memory_ref/torch_profile.json`, computed from the raw JSON by
//!   `scripts/memory_reference.py` (standard library only): counts, peak and its time,
//!   reserved, the blocks live at the peak with their ops, the sampled timeline;
//! - torch's own memory timeline (`export_memory_timeline`, by category, through HTA's
//!   `MemoryAnalysis`), `memory_timeline_by_category.csv` beside it: its total minus the
//!   tensors that existed before the first event is `Total Allocated`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mlprof_analysis::memory_profile::{ActivityKind, AllocatorProfile, MemoryProfile, analyze};
use mlprof_formats::discover::load;
use mlprof_model::Host;
use serde_json::Value;

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(path)
}

const TRACE: &str = "kineto/torch_profile/logdir/worker0.1795289102612280864.pt.trace.json";

fn host() -> Host {
    let sessions = load(&data(TRACE)).expect("fixture loads");
    let session = sessions.into_iter().next().expect("one session");
    session.hosts.into_iter().next().expect("one host")
}

fn reference() -> Value {
    let text = std::fs::read_to_string(data("kineto/memory_ref/torch_profile.json")).expect("reference present");
    serde_json::from_str(&text).expect("reference is JSON")
}

fn profile() -> (Host, MemoryProfile) {
    let host = host();
    let profile = analyze(&host, &|| panic!("a PyTorch trace's memory profile reads no step groups"));
    (host, profile)
}

/// Nanoseconds since the epoch of a time relative to the profile start.
fn epoch_ns(host: &Host, time_ps: i64) -> i64 {
    host.profile_start_ns.expect("trace has baseTimeNanoseconds") + time_ps / 1000
}

fn int(value: &Value, key: &str) -> i64 {
    value[key].as_i64().unwrap_or_else(|| panic!("reference has integer {key}"))
}

fn only_allocator(profile: &MemoryProfile) -> &AllocatorProfile {
    assert_eq!(profile.allocators.len(), 1, "one memory id (cpu)");
    &profile.allocators[0]
}

#[test]
fn summary_matches_the_reference() {
    let (host, profile) = profile();
    let reference = reference();
    let theirs = &reference["allocators"][0];
    let ours = only_allocator(&profile);
    let pytorch = ours.pytorch.as_ref().expect("PyTorch figures");
    assert_eq!(ours.memory_id, theirs["memory_id"].as_str().unwrap_or_default());
    assert_eq!(ours.total_allocations as i64, int(theirs, "allocations"));
    assert_eq!(ours.total_deallocations as i64, int(theirs, "deallocations"));
    let peak = &ours.summary.peak_stats;
    assert_eq!(peak.heap_allocated_bytes, int(theirs, "peak_allocated_bytes"));
    assert_eq!(peak.peak_bytes_in_use, int(theirs, "peak_allocated_bytes"));
    assert_eq!(epoch_ns(&host, ours.summary.peak_stats_time_ps), int(theirs, "peak_time_epoch_ns"));
    assert_eq!(ours.peak_step_id, int(theirs, "peak_step"));
    assert_eq!(pytorch.reserved_at_peak_bytes, int(theirs, "reserved_at_peak_bytes"));
    assert_eq!(pytorch.peak_reserved_bytes, int(theirs, "peak_reserved_bytes"));
    assert_eq!(epoch_ns(&host, pytorch.peak_reserved_time_ps), int(theirs, "peak_reserved_time_epoch_ns"));
    assert_eq!(pytorch.allocated_at_end_bytes, int(theirs, "allocated_at_end_bytes"));
    assert_eq!(pytorch.reserved_at_end_bytes, int(theirs, "reserved_at_end_bytes"));
    assert_eq!(pytorch.frees_without_allocation as i64, int(theirs, "frees_without_allocation"));
    assert_eq!(pytorch.frees_without_allocation_bytes, int(theirs, "frees_without_allocation_bytes"));
    assert_eq!(pytorch.events_without_op as i64, int(theirs, "events_without_op"));
    assert_eq!(pytorch.live_at_peak_blocks as i64, int(theirs, "live_at_peak_count"));
    assert_eq!(pytorch.live_at_peak_bytes, int(theirs, "live_at_peak_bytes"));
    assert_eq!(pytorch.allocated_before_trace_at_peak_bytes, int(theirs, "before_trace_bytes_at_peak"));
    // CPU: no caching allocator, so nothing reserved, capacity = allocated.
    assert_eq!(ours.summary.memory_capacity_bytes, peak.heap_allocated_bytes);
    assert_eq!((peak.stack_reserved_bytes, peak.free_memory_bytes), (0, 0));
    assert!(profile.method.as_deref().is_some_and(|m| m.contains("Total Allocated")));
}

/// A live block as both sides describe it: (bytes, op, input dims, input types).
type Block = (i64, String, String, String);

#[test]
fn blocks_live_at_the_peak_match_the_reference() {
    let (_, profile) = profile();
    let reference = reference();
    let ours_profile = only_allocator(&profile);
    let mut ours: BTreeMap<Block, i64> = BTreeMap::new();
    for (activity, occurrences) in ours_profile.breakdown() {
        let block = (
            activity.allocation_bytes,
            activity.tf_op_name.clone(),
            activity.tensor_shape.clone(),
            activity.data_type.clone(),
        );
        *ours.entry(block).or_default() += occurrences;
    }
    let mut theirs: BTreeMap<Block, i64> = BTreeMap::new();
    let live = reference["allocators"][0]["live_at_peak"].as_array().expect("live blocks");
    for block in live {
        let text = |key: &str| block[key].as_str().unwrap_or_default().to_string();
        *theirs.entry((int(block, "bytes"), text("op"), text("input_dims"), text("input_types"))).or_default() += 1;
    }
    assert!(!theirs.is_empty());
    assert_eq!(ours, theirs);
    // Rows are largest first.
    let sizes: Vec<i64> = ours_profile.breakdown().map(|(a, _)| a.allocation_bytes).collect();
    assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{sizes:?}");
}

#[test]
fn sampled_timeline_matches_the_reference() {
    let (host, profile) = profile();
    let reference = reference();
    let ours = only_allocator(&profile);
    let theirs = reference["allocators"][0]["timeline"].as_array().expect("timeline");
    assert_eq!(ours.timeline.len(), theirs.len());
    assert_eq!(ours.timeline.len(), 1000, "2701 events sampled to XProf's 1000 points");
    for (i, (s, t)) in ours.timeline.iter().zip(theirs).enumerate() {
        let kind = match s.activity.kind {
            ActivityKind::Allocation => "allocation",
            ActivityKind::Deallocation => "deallocation",
        };
        let ours_point = (
            epoch_ns(&host, s.time_ps),
            kind,
            s.activity.allocation_bytes,
            s.stats.heap_allocated_bytes,
            s.stats.reserved_bytes.unwrap_or(-1),
            s.activity.tf_op_name.as_str(),
        );
        let theirs_point = (
            t[0].as_i64().unwrap_or_default(),
            t[1].as_str().unwrap_or_default(),
            t[2].as_i64().unwrap_or_default(),
            t[3].as_i64().unwrap_or_default(),
            t[4].as_i64().unwrap_or_default(),
            t[5].as_str().unwrap_or_default(),
        );
        assert_eq!(ours_point, theirs_point, "timeline point {i}");
    }
    let allocations = ours.timeline.iter().filter(|s| s.activity.kind == ActivityKind::Allocation).count();
    assert_eq!(ours.timeline_allocations as usize, allocations);
}

/// torch's memory timeline rows: (epoch ns, total bytes over all categories).
fn torch_timeline() -> Vec<(i64, i64)> {
    let text = std::fs::read_to_string(data("kineto/memory_ref/memory_timeline_by_category.csv")).expect("csv");
    text.lines()
        .skip(1)
        .map(|line| {
            let mut cells = line.split(',').map(|cell| cell.parse::<i64>().expect("integer cell"));
            let ts = cells.next().expect("ts");
            (ts, cells.sum())
        })
        .collect()
}

#[test]
fn allocated_bytes_match_torchs_memory_timeline() {
    let (host, profile) = profile();
    let ours = only_allocator(&profile);
    let rows = torch_timeline();
    // Row 0: the tensors torch knew of before the first event (parameters, optimizer
    // state, the dataset), at the first event's time; the trace does not count them.
    let baseline = rows[0].1;
    let total_at = |ns: i64| rows.iter().rev().find(|(ts, _)| *ts <= ns).map(|(_, total)| *total);
    for s in &ours.timeline {
        let ns = epoch_ns(&host, s.time_ps);
        assert_eq!(total_at(ns).map(|t| t - baseline), Some(s.stats.heap_allocated_bytes), "at {ns} ns");
    }
    let peak_total = rows.iter().map(|(_, total)| *total).max().expect("rows");
    assert_eq!(peak_total - baseline, ours.summary.peak_stats.heap_allocated_bytes);
    let peak_ns = epoch_ns(&host, ours.summary.peak_stats_time_ps);
    assert!(rows.iter().any(|&(ts, total)| ts == peak_ns && total == peak_total));
}

#[test]
fn report_and_xprof_json_are_filled() {
    let (_, profile) = profile();
    let report = profile.report();
    let main = report.sections.iter().find(|s| s.main).expect("main section");
    let table = main.table.as_ref().expect("breakdown table");
    assert!(!table.rows.is_empty());
    assert!(report.sections[0].notes.iter().any(|n| n.starts_with("cpu: peak allocated 4.27 MiB")));
    let json = profile.to_xprof_json();
    assert_eq!(json["memoryIds"], serde_json::json!(["cpu"]));
    let cpu = &json["memoryProfilePerAllocator"]["cpu"];
    assert_eq!(cpu["profileSummary"]["peakStats"]["peakBytesInUse"], "4480176");
    assert_eq!(cpu["sampledTimelineSnapshots"].as_array().map(Vec::len), Some(1000));
}
