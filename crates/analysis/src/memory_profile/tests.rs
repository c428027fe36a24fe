//! Tests of the XSpace memory profile on hand-built planes: the peak, the timeline and
//! the allocations live at the peak, as XProf computes them.

use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue};

use super::compute::{data_type_name, sample_timeline};
use super::*;
use crate::grouping::HostGroups;

/// One memory event: (allocation?, time ns, address, allocation bytes, heap bytes
/// after, op name).
type Ev = (bool, i64, u64, i64, i64, &'static str);

/// A host whose `/host:CPU` plane has one line of allocator events (plus one other
/// event) on allocator `mklcpu`.
fn host_with(events: &[Ev]) -> Host {
    let mut b = PlaneBuilder::new(0, "/host:CPU");
    let alloc = b.event_metadata("MemoryAllocation", 0, |_| Vec::new());
    let dealloc = b.event_metadata("MemoryDeallocation", 0, |_| Vec::new());
    let other = b.event_metadata("SomethingElse", 0, |_| Vec::new());
    let keys: Vec<u32> = [
        "allocator_name",
        "bytes_reserved",
        "bytes_allocated",
        "bytes_available",
        "fragmentation",
        "peak_bytes_in_use",
        "requested_bytes",
        "allocation_bytes",
        "addr",
        "tf_op",
        "region_type",
        "data_type",
        "shape",
    ]
    .iter()
    .map(|name| b.stat_key(name))
    .collect();
    let mut line = Line::new(1, "tf_Compute");
    line.timestamp_ns = 1;
    line.push_event(other, 0, 5);
    let mut peak = 0;
    for &(is_alloc, ns, addr, bytes, heap, op) in events {
        peak = peak.max(heap);
        let s = &mut line.stats;
        s.push_str(keys[0], "mklcpu").unwrap();
        s.push(keys[1], StatValue::Int(0));
        s.push(keys[2], StatValue::Int(heap));
        s.push(keys[3], StatValue::Int(1000 - heap));
        s.push(keys[4], StatValue::Double(0.25));
        s.push(keys[5], StatValue::Int(peak));
        s.push(keys[6], StatValue::Int(bytes - 1));
        s.push(keys[7], StatValue::Int(bytes));
        s.push(keys[8], StatValue::Int(addr as i64));
        if is_alloc {
            s.push_str(keys[9], op).unwrap();
            s.push_str(keys[10], "output").unwrap();
            s.push(keys[11], StatValue::Int(1));
            s.push_str(keys[12], "[2,3]").unwrap();
        }
        line.push_event(if is_alloc { alloc } else { dealloc }, ns * 1000, 0);
    }
    b.push_line(line);
    let mut host = Host::new("vm", "vm.xplane.pb", SourceFormat::Xspace);
    host.planes.push(b.finish());
    host
}

fn run(host: &Host) -> MemoryProfile {
    let groups = HostGroups::none(host);
    analyze(host, &|| &groups)
}

#[test]
fn no_memory_events_gives_an_empty_profile() {
    let host = host_with(&[]);
    let profile = run(&host);
    assert!(profile.has_host_plane);
    assert!(profile.allocators.is_empty());
    let json = profile.to_xprof_json();
    assert_eq!(json["memoryProfilePerAllocator"], serde_json::json!({}));
    assert_eq!(json["memoryIds"], serde_json::json!([]));
    assert_eq!(json["version"], 1);
    profile.report();

    let bare = Host::new("vm", "x", SourceFormat::Kineto);
    let profile = run(&bare);
    assert!(!profile.has_host_plane);
    assert_eq!(profile.to_xprof_json(), serde_json::Value::Null);
    assert!(!profile.report().sections.is_empty());
}

#[test]
fn peak_is_the_last_time_the_maximum_is_reached_and_the_breakdown_shows_live_allocations() {
    let host = host_with(&[
        (true, 10, 0xa0, 100, 100, "a"),
        (true, 20, 0xb0, 300, 400, "b"),
        (false, 30, 0xa0, 100, 300, ""),
        (true, 40, 0xc0, 100, 400, "c"),
        (false, 50, 0xb0, 300, 100, ""),
    ]);
    let profile = run(&host);
    assert_eq!(profile.allocators.len(), 1);
    let a = &profile.allocators[0];
    assert_eq!(a.memory_id, "mklcpu");
    assert_eq!((a.total_allocations, a.total_deallocations), (3, 2));
    assert_eq!(a.summary.peak_stats.peak_bytes_in_use, 400);
    // Reached at 20 ns and again (>=) at 40 ns: the later one counts.
    assert_eq!(a.summary.peak_stats_offset_ps, 40_000);
    assert_eq!(a.summary.peak_stats_time_ps, 41_000);
    assert_eq!(a.summary.memory_capacity_bytes, 1000);
    assert_eq!(a.summary.peak_bytes_usage_lifetime, 400);
    assert_eq!(a.peak_step_id, 0);
    // Live at the peak: b (300) and c (100); a was freed.
    let rows: Vec<_> = a.breakdown().map(|(act, n)| (act.tf_op_name.as_str(), act.allocation_bytes, n)).collect();
    assert_eq!(rows, vec![("b", 300, 1), ("c", 100, 1)]);
    assert!(a.special_allocations.is_empty());
    assert_eq!(a.peak_snapshots.len(), 2);
    assert_eq!(a.active_allocations[1].snapshot_index, 1);
    assert_eq!(a.active_allocations[1].special_index, -1);
    let report = profile.report();
    let main = report.sections.iter().find(|s| s.main).and_then(|s| s.table.as_ref()).expect("main table");
    assert_eq!(main.rows.len(), 2);
}

#[test]
fn deallocations_take_the_details_of_the_allocation_at_their_address() {
    let host = host_with(&[
        (true, 10, 0xa0, 100, 100, "first"),
        (true, 12, 0xa0, 100, 200, "second at same address"),
        (false, 20, 0xa0, 100, 100, ""),
        (false, 30, 0xa0, 100, 0, ""),
        (false, 40, 0xdd, 50, 0, ""),
    ]);
    let a = &run(&host).allocators[0];
    let ops: Vec<&str> = a.timeline.iter().map(|s| s.activity.tf_op_name.as_str()).collect();
    // The first deallocation matches the first allocation; the address is then
    // forgotten, so the second deallocation (and the unknown address) stay bare.
    assert_eq!(ops, vec!["first", "second at same address", "first", "", ""]);
    assert_eq!(a.timeline[2].activity.data_type, "float");
    assert_eq!(a.timeline[2].activity.tensor_shape, "[2,3]");
    assert_eq!(a.timeline[4].activity.data_type, "");
}

#[test]
fn heap_not_explained_by_the_peak_step_becomes_a_special_row() {
    let host = host_with(&[(true, 10, 0xa0, 100, 600, "x"), (true, 11, 0xb0, 100, 700, "x")]);
    let a = &run(&host).allocators[0];
    let rows: Vec<_> = a.breakdown().map(|(act, n)| (act.tf_op_name.clone(), act.allocation_bytes, n)).collect();
    assert_eq!(rows, vec![("unused preallocated device memory".to_string(), 500, 1), ("x".to_string(), 100, 2)]);
    assert_eq!(a.active_allocations[0].snapshot_index, -1);
    assert_eq!(a.active_allocations[0].special_index, 0);
    assert_eq!(a.special_allocations[0].data_type, "INVALID");
    assert_eq!(a.special_allocations[0].region_type, "persist/dynamic");
    assert_eq!(a.peak_snapshots.len(), 1);
}

#[test]
fn long_timelines_are_sampled_to_at_most_1000_points_keeping_box_maxima() {
    let events: Vec<Ev> = (0..2500).map(|i| (true, i, 0x1000 + i as u64, 1, (i * 7919) % 1013, "op")).collect();
    let host = host_with(&events);
    let a = &run(&host).allocators[0];
    assert_eq!(a.timeline.len(), MAX_TIMELINE_SNAPSHOTS);
    assert_eq!(a.total_allocations, 2500);
    assert_eq!(a.timeline_allocations, 1000);
    // 2500 / 1000: 500 boxes of 2, then 500 boxes of 3.
    let heap = |i: i64| (i * 7919) % 1013;
    assert_eq!(a.timeline[0].stats.heap_allocated_bytes, heap(0).max(heap(1)));
    assert_eq!(a.timeline[500].stats.heap_allocated_bytes, heap(1000).max(heap(1001)).max(heap(1002)));
    assert!(a.timeline.windows(2).all(|w| w[0].offset_ps < w[1].offset_ps));
    let max = (0..2500).map(heap).max().unwrap();
    assert!(a.timeline.iter().any(|s| s.stats.heap_allocated_bytes == max));
}

#[test]
fn sampling_picks_the_first_largest_in_each_box() {
    let snapshot = |heap: i64, t: i64| MemorySnapshot {
        offset_ps: t,
        stats: AggregationStats { heap_allocated_bytes: heap, ..AggregationStats::default() },
        ..MemorySnapshot::default()
    };
    let all: Vec<_> = [5, 5, 1, 9, 2, 3, 3].iter().enumerate().map(|(t, &h)| snapshot(h, t as i64)).collect();
    let sampled = sample_timeline(&all, 3);
    // 7 / 3: two boxes of 2 ([5,5] -> the first 5, [1,9]), then one box of 3 ([2,3,3] -> the first 3).
    let picked: Vec<i64> = sampled.iter().map(|s| s.offset_ps).collect();
    assert_eq!(picked, vec![0, 3, 5]);
    assert_eq!(sample_timeline(&all, 10).len(), 7);
}

#[test]
fn data_types_print_as_xprof_does() {
    assert_eq!(data_type_name(1), "float");
    assert_eq!(data_type_name(0), "INVALID");
    assert_eq!(data_type_name(101), "float_ref");
    assert_eq!(data_type_name(31), "unknown dtype enum (31)");
}

#[test]
fn nan_fragmentation_prints_as_proto3_json_does() {
    let host = host_with(&[(true, 10, 0xa0, 100, 100, "a")]);
    let mut profile = run(&host);
    profile.allocators[0].timeline[0].stats.fragmentation = f64::NAN;
    let json = profile.to_xprof_json();
    let snap = &json["memoryProfilePerAllocator"]["mklcpu"]["sampledTimelineSnapshots"][0];
    assert_eq!(snap["aggregationStats"]["fragmentation"], "NaN");
    assert_eq!(snap["timeOffsetPs"], "10000");
    assert_eq!(snap["activityMetadata"]["address"], "160");
    assert_eq!(snap["activityMetadata"]["memoryActivity"], "ALLOCATION");
}

#[test]
fn steps_come_from_the_grouping_table_and_gaps_take_the_previous_step_plus_one() {
    let host = host_with(&[
        (true, 10, 0xa0, 100, 100, "before"),
        (true, 20, 0xb0, 100, 200, "in 4"),
        (false, 30, 0xb0, 100, 100, ""),
        (true, 40, 0xc0, 300, 400, "in 5"),
        (true, 50, 0xd0, 100, 500, "after"),
    ]);
    let mut groups = HostGroups::none(&host);
    // Event 0 of the line is the unrelated event; memory events are 1..=5.
    groups.line_mut(0, 0)[2..5].copy_from_slice(&[4, 4, 5]);
    let a = &analyze(&host, &|| &groups).allocators[0];
    let steps: Vec<i64> = a.timeline.iter().map(|s| s.activity.step_id).collect();
    assert_eq!(steps, vec![0, 4, 4, 5, 6]);
    // The peak (500 at 50 ns) is in step 6: only "after" is live in it, the rest of
    // the heap is unexplained.
    assert_eq!(a.peak_step_id, 6);
    let rows: Vec<_> =
        a.breakdown().map(|(act, _)| (act.tf_op_name.clone(), act.allocation_bytes, act.step_id)).collect();
    assert_eq!(rows, vec![("unused preallocated device memory".to_string(), 400, 6), ("after".to_string(), 100, 6)]);
}

#[test]
fn stack_reservation_is_a_special_row_and_odd_stat_kinds_read_as_xprof_reads_them() {
    let mut b = PlaneBuilder::new(0, "/host:CPU");
    let alloc = b.event_metadata("MemoryAllocation", 0, |_| Vec::new());
    let [index, reserved, allocated, bytes, addr, frag] =
        ["index_on_host", "bytes_reserved", "bytes_allocated", "allocation_bytes", "addr", "fragmentation"]
            .map(|name| b.stat_key(name));
    let mut line = Line::new(1, "t");
    line.stats.push(index, StatValue::Int(3));
    line.stats.push(reserved, StatValue::Int(64));
    line.stats.push(allocated, StatValue::Int(100));
    line.stats.push(bytes, StatValue::Int(100));
    // XProf reads these with IntValue/DoubleValue: an unsigned address and an integer
    // fragmentation read as 0.
    line.stats.push(addr, StatValue::Uint(0xfeed));
    line.stats.push(frag, StatValue::Int(1));
    line.push_event(alloc, 7, 0);
    b.push_line(line);
    let mut host = Host::new("vm", "x", SourceFormat::Xspace);
    host.planes.push(b.finish());
    let a = &run(&host).allocators[0];
    assert_eq!(a.memory_id, "3");
    assert_eq!(a.timeline[0].activity.address, 0);
    assert_eq!(a.timeline[0].stats.fragmentation, 0.0);
    assert_eq!(a.summary.peak_stats.peak_bytes_in_use, 164);
    let rows: Vec<_> = a.breakdown().map(|(act, _)| (act.tf_op_name.clone(), act.region_type.clone())).collect();
    assert_eq!(rows, vec![("".to_string(), "".to_string()), ("stack".to_string(), "stack".to_string())]);
    assert_eq!(a.active_allocations[1].snapshot_index, -1);
    assert_eq!(a.active_allocations[1].special_index, 0);
}

#[test]
fn xla_modules_of_tpu_planes_are_listed() {
    let mut host = host_with(&[]);
    let mut b = PlaneBuilder::new(1, "/device:TPU:0");
    let module = b.event_metadata("jit_step(1)", 0, |_| Vec::new());
    let mut line = Line::new(2, "XLA Modules");
    line.timestamp_ns = 2;
    line.push_event(module, 100, 50);
    line.push_event(module, 300, 50);
    b.push_line(line);
    host.planes.push(b.finish());
    let profile = run(&host);
    assert_eq!(profile.hlo_modules.len(), 2);
    assert_eq!(profile.hlo_modules[1].id, 1);
    assert_eq!(profile.hlo_modules[1].plane_name, "TPU:0");
    assert_eq!((profile.hlo_modules[1].start_ps, profile.hlo_modules[1].end_ps), (2300, 2350));
    let json = profile.to_xprof_json();
    assert_eq!(
        json["hloModules"][0],
        serde_json::json!({"name": "jit_step(1)", "startTimePs": "100", "endTimePs": "150", "id": "0", "planeName": "TPU:0"})
    );
}
