//! Tests of the PyTorch memory profile against real and hand-written `[memory]` events.

use mlprof_formats::kineto::read_kineto;
use mlprof_model::Host;

use super::{BEFORE_TRACE_ROW, memory_id};
use crate::memory_profile::{ActivityKind, MemoryProfile, analyze};

fn host(events: &str) -> Host {
    let json = format!(r#"{{"baseTimeNanoseconds": 1000000000, "traceEvents": [{events}]}}"#);
    read_kineto(json.as_bytes(), "test.json", "test").expect("test trace parses")
}

fn profile(events: &str) -> MemoryProfile {
    let host = host(events);
    analyze(&host, &|| panic!("a PyTorch trace's memory profile reads no step groups"))
}

fn op(name: &str, ts: u32, dur: u32, dims: &str) -> String {
    format!(
        r#"{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": 1, "ts": {ts}, "dur": {dur},
            "args": {{"Input Dims": {dims}, "Input type": ["float", "Scalar"]}}}}"#
    )
}

fn memory(ts: u32, addr: u64, bytes: i64, allocated: i64, reserved: i64, device: (i64, i64)) -> String {
    format!(
        r#"{{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": {ts},
            "args": {{"Addr": {addr}, "Bytes": {bytes}, "Total Allocated": {allocated},
                     "Total Reserved": {reserved}, "Device Type": {}, "Device Id": {}}}}}"#,
        device.0, device.1
    )
}

const CUDA0: (i64, i64) = (1, 0);
const CPU: (i64, i64) = (0, -1);

/// A CUDA trace: 1 MiB allocated before the trace (freed at 60), two blocks allocated
/// inside nested ops of step 7, a CPU block outside every op (of its thread: the op on
/// thread 2 does not count).
fn cuda_trace() -> String {
    [
        r#"{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": 5, "dur": 100}"#
            .to_string(),
        r#"{"ph": "X", "cat": "cpu_op", "name": "other_thread", "pid": 1, "tid": 2, "ts": 5, "dur": 300}"#.to_string(),
        op("aten::linear", 10, 40, "[[8, 4], [4, 4]]"),
        op("aten::empty", 12, 2, "[[], []]"),
        memory(13, 0xa000, 4096, 1_052_672, 2_097_152, CUDA0),
        memory(30, 0xb000, 2048, 1_054_720, 2_097_152, CUDA0),
        memory(60, 0x1000, -1_048_576, 6144, 2_097_152, CUDA0),
        memory(70, 0xa000, -4096, 2048, 2_097_152, CUDA0),
        memory(200, 0xc000, 64, 64, 0, CPU),
    ]
    .join(",")
}

#[test]
fn devices_are_named_as_torch_does() {
    assert_eq!(memory_id(0, -1), "cpu");
    assert_eq!(memory_id(1, 0), "cuda:0");
    assert_eq!(memory_id(6, 1), "hip:1");
    assert_eq!(memory_id(99, 2), "device_type_99:2");
    assert_eq!(memory_id(1, -1), "cuda");
}

#[test]
fn peak_reserved_and_fragmentation_come_from_the_totals() {
    let profile = profile(&cuda_trace());
    let ids: Vec<&str> = profile.allocators.iter().map(|a| a.memory_id.as_str()).collect();
    assert_eq!(ids, ["cpu", "cuda:0"]);
    let cuda = &profile.allocators[1];
    let peak = &cuda.summary.peak_stats;
    assert_eq!(peak.heap_allocated_bytes, 1_054_720);
    assert_eq!(peak.free_memory_bytes, 2_097_152 - 1_054_720);
    assert!((peak.fragmentation - (1.0 - 1_054_720.0 / 2_097_152.0)).abs() < 1e-12);
    assert_eq!(peak.reserved_bytes, Some(2_097_152));
    assert_eq!(cuda.summary.memory_capacity_bytes, 2_097_152);
    assert_eq!(cuda.summary.peak_stats_time_ps, 25_000_000, "ts 30 µs, origin 5 µs");
    assert_eq!((cuda.total_allocations, cuda.total_deallocations), (2, 2));
    assert_eq!(cuda.peak_step_id, 7);
    let pytorch = cuda.pytorch.as_ref().expect("PyTorch figures");
    assert_eq!((pytorch.device_type, pytorch.device_id), CUDA0);
    assert_eq!(pytorch.peak_reserved_bytes, 2_097_152);
    assert_eq!(pytorch.peak_reserved_time_ps, 8_000_000, "first time reserved reaches its peak");
    assert_eq!(pytorch.allocated_at_end_bytes, 2048);
}

#[test]
fn blocks_from_before_the_trace_get_their_own_row() {
    let profile = profile(&cuda_trace());
    let cuda = &profile.allocators[1];
    let pytorch = cuda.pytorch.as_ref().expect("PyTorch figures");
    assert_eq!(pytorch.allocated_before_trace_at_peak_bytes, 1_048_576);
    assert_eq!((pytorch.frees_without_allocation, pytorch.frees_without_allocation_bytes), (1, 1_048_576));
    assert_eq!((pytorch.live_at_peak_blocks, pytorch.live_at_peak_bytes), (2, 6144));
    let rows: Vec<(&str, i64, &str)> = cuda
        .breakdown()
        .map(|(a, n)| {
            assert_eq!(n, 1);
            (a.tf_op_name.as_str(), a.allocation_bytes, a.tensor_shape.as_str())
        })
        .collect();
    assert_eq!(
        rows,
        [(BEFORE_TRACE_ROW, 1_048_576, ""), ("aten::empty", 4096, "[[],[]]"), ("aten::linear", 2048, "[[8,4],[4,4]]")]
    );
}

#[test]
fn frees_show_the_op_that_allocated_the_block() {
    let profile = profile(&cuda_trace());
    let cuda = &profile.allocators[1];
    let frees: Vec<(&str, i64)> = cuda
        .timeline
        .iter()
        .filter(|s| s.activity.kind == ActivityKind::Deallocation)
        .map(|s| (s.activity.tf_op_name.as_str(), s.activity.step_id))
        .collect();
    // The pre-trace block's free runs outside every op; the other frees the
    // aten::empty block.
    assert_eq!(frees, [("", 7), ("aten::empty", 7)]);
    let cpu = &profile.allocators[0];
    assert_eq!(cpu.timeline[0].activity.step_id, -1, "outside every ProfilerStep");
    assert_eq!(cpu.pytorch.as_ref().map(|p| p.events_without_op), Some(1));
    assert_eq!(cpu.summary.peak_stats.fragmentation, 0.0, "nothing reserved on CPU");
}

#[test]
fn traces_without_memory_events_say_how_to_get_them() {
    let profile = profile(&op("aten::add", 1, 2, "[]"));
    assert!(profile.allocators.is_empty());
    assert!(profile.method.is_some());
    let report = profile.report();
    assert!(report.sections[0].notes.iter().any(|n| n.contains("profile_memory=True")));
    assert_eq!(profile.to_xprof_json()["memoryIds"], serde_json::json!([]));
}

#[test]
fn odd_memory_events_do_not_panic() {
    let events = [
        r#"{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 1}"#,
        r#"{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 2, "args": {"Bytes": "many", "Addr": -5}}"#,
        r#"{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 3, "args": {"Bytes": -9223372036854775808}}"#,
        r#"{"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 4, "args": {"Total Reserved": 5, "Total Allocated": 9}}"#,
        r#"{"ph": "X", "cat": "cpu_op", "name": "aten::x", "pid": 1, "tid": 1, "ts": 3, "dur": 0, "args": {"Input Dims": [[1}}"#,
    ];
    // The last event is not valid JSON: drop it, the rest must still analyse.
    let profile = profile(&events[..4].join(","));
    let cpu = &profile.allocators[0];
    assert_eq!(cpu.total_allocations + cpu.total_deallocations, 4);
    assert_eq!(cpu.summary.peak_stats.fragmentation, 0.0, "allocated above reserved clamps to 0");
    let _ = profile.report();
    let _ = profile.to_xprof_json();
}
