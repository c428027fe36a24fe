//! PyTorch memory snapshots through the command line: `--tool memory_profile` gives
//! allocated and reserved memory over time with the peak, the memory live at the peak
//! by allocating stack, fragmentation, OOMs, the largest allocations and the streams,
//! with the numbers Python's `pickle` computes from the same files (`tests/data`'s
//! README); a file cut or corrupted anywhere is one line and exit code 2, never a
//! signal.

mod common;

use common::{data_str, mlprof, ok_stdout};
use serde_json::Value;

const SILMONT: &str = "torch_memory/silmont_2_x/mem_snapshot.pickle";
const GENERATED_OOM: &str = "torch_memory/generated/expandable_oom_2_devices.pickle";

fn profile(path: &str) -> Value {
    let out = ok_stdout(mlprof(&["analyze", &data_str(path), "--tool", "memory_profile", "--format", "json"]));
    let json: Value = serde_json::from_str(&out).expect("JSON");
    json["tools"]["memory_profile"][0]["profile"].clone()
}

fn sum(rows: &Value, field: &str) -> i64 {
    rows.as_array().expect("rows").iter().map(|row| row[field].as_i64().expect("integer")).sum()
}

#[test]
fn the_peak_its_stacks_and_the_fragmentation_of_a_real_snapshot() {
    let json = profile(SILMONT);
    let allocator = &json["allocators"][0];
    assert_eq!(allocator["memory_id"], "cuda:0");
    assert_eq!(allocator["summary"]["peak_stats"]["heap_allocated_bytes"], 3_249_144_324_i64);
    assert_eq!(allocator["pytorch"]["peak_reserved_bytes"], 3_781_165_056_i64);
    assert_eq!(allocator["pytorch"]["allocated_before_trace_at_peak_bytes"], 508);
    assert_eq!(
        (allocator["total_allocations"].as_i64(), allocator["total_deallocations"].as_i64()),
        (Some(36), Some(26))
    );
    let device = &json["snapshot"]["devices"][0];
    // From the segments: Python's sums over blocks by state.
    assert_eq!(device["segments"], 9);
    assert_eq!(device["reserved_bytes"], 3_781_165_056_i64);
    assert_eq!(device["allocated_bytes"], 31_719_936);
    assert_eq!(device["free_bytes"], 3_749_445_120_i64);
    assert_eq!(device["largest_free_block_bytes"], 536_870_912);
    // What the trace allocated and is live at the peak: the peak less the 508 bytes
    // from before the trace, in rows named by the allocating code.
    assert_eq!(sum(&device["live_at_peak"], "bytes"), 3_249_144_324 - 508);
    let labels: Vec<&str> =
        device["live_at_peak"].as_array().expect("rows").iter().filter_map(|r| r["label"].as_str()).collect();
    assert_eq!(labels[0], "DivBackward0 (autograd)");
    assert!(labels.contains(&"cs336_systems/trace_peak_memory.py:7:custom_softmax"), "{labels:?}");
    // At the snapshot, every allocated block has a row.
    assert_eq!(sum(&device["live_at_snapshot"], "bytes"), 31_719_936);
    assert_eq!(device["largest_allocations"][0]["bytes"], 536_870_912);
    assert_eq!(device["streams"][0]["allocations"], 36);

    let table = ok_stdout(mlprof(&["analyze", &data_str(SILMONT), "--tool", "memory_profile"]));
    for section in [
        "## Memory timeline (cuda:0)",
        "## Memory by stack at the peak",
        "## Fragmentation at the snapshot",
        "## Largest allocations",
        "## Streams",
        "From a PyTorch memory snapshot",
    ] {
        assert!(table.contains(section), "{section} missing:\n{table}");
    }
}

#[test]
fn an_oom_shows_what_held_the_memory_on_each_device() {
    let json = profile(GENERATED_OOM);
    let devices = json["snapshot"]["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 2);
    for device in devices {
        let oom = &device["ooms"][0];
        assert_eq!(oom["requested_bytes"], 80_i64 << 30);
        assert_eq!(oom["device_free_bytes"], 95 << 20);
        // The four 1 MiB parameters from `forward` (train.py:41) are what is live.
        assert_eq!(oom["allocated_bytes"], 4 << 20);
        assert_eq!(oom["live"][0]["label"], "train.py:41:forward");
        assert_eq!(oom["live"][0]["bytes"], 4 << 20);
    }
    let table = ok_stdout(mlprof(&["analyze", &data_str(GENERATED_OOM), "--tool", "memory_profile"]));
    assert!(table.contains("## Out-of-memory errors") && table.contains("asked for 80 GiB"), "{table}");
    // ProfilerStep annotations are the steps the peak is attributed to.
    assert!(json["allocators"][0]["peak_step_id"].as_i64().is_some_and(|step| step >= 0), "{json:#}");
}

#[test]
fn a_snapshot_converts_to_a_chrome_trace_with_the_same_memory_profile() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("snapshot.json");
    ok_stdout(mlprof(&["convert", "--to", "chrome-json", &data_str(SILMONT), out.to_str().expect("UTF-8")]));
    let text = std::fs::read_to_string(&out).expect("written");
    assert!(text.contains("\"name\":\"[memory]\"") && text.contains("\"cat\":\"cpu_instant_event\""));
    let again =
        ok_stdout(mlprof(&["analyze", out.to_str().expect("UTF-8"), "--tool", "memory_profile", "--format", "json"]));
    let json: Value = serde_json::from_str(&again).expect("JSON");
    let allocator = &json["tools"]["memory_profile"][0]["profile"]["allocators"][0];
    assert_eq!(allocator["summary"]["peak_stats"]["heap_allocated_bytes"], 3_249_144_324_i64);
}

#[test]
fn a_cut_or_corrupted_snapshot_is_one_line_and_exit_code_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let real = std::fs::read(common::data(SILMONT)).expect("fixture");
    let cut = dir.path().join("cut.pickle");
    std::fs::write(&cut, &real[..real.len() / 2]).expect("write");
    let out = mlprof(&["analyze", cut.to_str().expect("UTF-8"), "--tool", "memory_profile"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("cut.pickle") && err.contains("pickle byte offset"), "{err}");
    assert!(out.stdout.is_empty(), "no partial output");
    // Bytes flipped anywhere: an answer or a one-line error, never a signal or a panic.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let bad = dir.path().join("bad.pickle");
    for _ in 0..60 {
        let mut bytes = real.clone();
        for _ in 0..8 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let at = (state % bytes.len() as u64) as usize;
            bytes[at] = (state >> 32) as u8;
        }
        std::fs::write(&bad, &bytes).expect("write");
        let out = mlprof(&["analyze", bad.to_str().expect("UTF-8"), "--tool", "memory_profile"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(matches!(out.status.code(), Some(0..=2)), "{:?} {err}", out.status);
        assert!(!err.contains("panicked"), "{err}");
        if out.status.code() == Some(2) {
            assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        }
    }
}

#[test]
fn advise_reports_each_out_of_memory_error_with_its_holders() {
    let out = ok_stdout(mlprof(&["advise", &data_str(GENERATED_OOM)]));
    for device in ["cuda:0", "cuda:1"] {
        assert!(
            out.contains(&format!("[high] Out of memory on expandable_oom_2_devices {device}: asked for 80 GiB")),
            "{out}"
        );
    }
    assert!(out.contains("train.py:41:forward 4 MiB"), "{out}");
    // Annotated steps of a snapshot record no ops: no host-bound finding from them.
    assert!(out.contains("no op or device activity recorded in the steps"), "{out}");
}

/// A real out-of-memory error (H100, PyTorch 2.11, expandable segments): the finding
/// names the code that held the memory, and allocations made on autograd's backward
/// thread, which has no Python frames, are named as such everywhere.
#[test]
fn a_real_out_of_memory_error_names_what_held_the_memory() {
    let path = "torch_memory/h100_oom/oom_expandable.pickle";
    let out = ok_stdout(mlprof(&["advise", &data_str(path)]));
    assert!(out.contains("[high] Out of memory on oom_expandable cuda:0: asked for 1 GiB"), "{out}");
    assert!(out.contains("gpu_checks/torch_memory.py:83:train 2.03 GiB in 4 blocks"), "{out}");
    assert!(out.contains("host_overhead  n/a"), "{out}");
    let json = profile(path);
    let device = &json["snapshot"]["devices"][0];
    let oom = &device["ooms"][0];
    assert_eq!(oom["requested_bytes"], 1_i64 << 30);
    assert_eq!(oom["live"][0]["bytes"], 2_182_086_656_i64);
    // Python's replay (scripts/snapshot_reference.py): peak 3,056,643,128 allocated.
    let allocator = &json["allocators"][0];
    assert_eq!(allocator["summary"]["peak_stats"]["heap_allocated_bytes"], 3_056_643_128_i64);
    let names = |rows: &Value| -> Vec<String> {
        rows.as_array()
            .expect("rows")
            .iter()
            .map(|r| r["activity"]["tf_op_name"].as_str().expect("name").to_string())
            .collect()
    };
    for rows in ["timeline", "peak_snapshots"] {
        let names = names(&allocator[rows]);
        assert!(!names.iter().any(String::is_empty), "{rows}: every row is named");
        assert!(names.iter().any(|n| n == "(no stack recorded)"), "{rows}: {names:?}");
    }
    let table = ok_stdout(mlprof(&["analyze", &data_str(path), "--tool", "memory_profile"]));
    assert!(table.contains("(no stack recorded)"), "{table}");
}
