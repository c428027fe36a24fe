//! Nsight Systems exports through the command line: the XSpace tools read an export's
//! kernels, copies and runtime calls as they read a CUDA profile of mlprof's own, and a
//! file that is not an export is one line and exit code 2.

mod common;

use common::{data_str, mlprof, ok_stdout};
use serde_json::Value;

const EXPORT: &str = "nsys/testcuda_2026_1/report1.sqlite";

fn analyze_json(tool: &str) -> Value {
    let out = ok_stdout(mlprof(&["analyze", &data_str(EXPORT), "--tool", tool, "--format", "json"]));
    let json: Value = serde_json::from_str(&out).expect("JSON");
    // XProf's tools are written under "tools"; mlprof's own at the top.
    if json["tools"].is_object() { json["tools"][tool].clone() } else { json }
}

#[test]
fn kernel_stats_and_transfers_read_an_export() {
    // One kernel, launched 4 times, 536.542 µs in all (its rows' end - start).
    let json = analyze_json("kernel_stats");
    let kernels = json["kernels"].as_array().expect("kernels");
    assert_eq!(kernels.len(), 1, "{json:#}");
    assert_eq!(kernels[0]["occurrences"], 4);
    assert_eq!(kernels[0]["total_duration_ns"].as_f64(), Some(536_542.0), "{:#}", kernels[0]);
    assert_eq!(kernels[0]["block_dim"], serde_json::json!([256, 1, 1]));
    // The device's limits come from TARGET_INFO_GPU: 6 blocks of 256 threads fill an SM.
    assert_eq!(kernels[0]["occupancy_pct"], 100.0);
    // The host waits on one event, and each stream's copies never overlap its other
    // copies: what a systems engineer looks for.
    let json = analyze_json("transfers");
    let kinds: Vec<&str> =
        json["findings"].as_array().expect("findings").iter().filter_map(|f| f["kind"].as_str()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "serialized_copy").count(), 4, "{json:#}");
    assert!(json.to_string().contains("cudaEventSynchronize") && json.to_string().contains("HtoD pinned"), "{json:#}");
}

#[test]
fn info_names_the_export_and_its_gpu_and_advice_a_cuda_program() {
    let out = ok_stdout(mlprof(&["info", &data_str(EXPORT)]));
    assert!(out.contains("NVIDIA GeForce RTX 4060 Ti") && out.contains("profiler=nsys"), "{out}");
    assert!(out.contains("Host Threads/17068"), "{out}");
    // A CUDA program's activity, worded as such, not as a TensorFlow job's.
    let advice = ok_stdout(mlprof(&["advise", &data_str(EXPORT)]));
    assert!(advice.contains("hosts report1 (cuda)"), "{advice}");
}

#[test]
fn a_truncated_export_is_one_line_and_exit_code_2() {
    let dir = tempfile::tempdir().expect("temp dir");
    let real = std::fs::read(common::data(EXPORT)).expect("fixture");
    let cut = dir.path().join("cut.sqlite");
    std::fs::write(&cut, &real[..real.len() / 3]).expect("write");
    let out = mlprof(&["analyze", cut.to_str().expect("UTF-8"), "--tool", "kernel_stats"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("cut.sqlite"), "{err}");
    assert!(out.stdout.is_empty(), "no partial output");
}

#[test]
fn numbered_nvtx_ranges_are_the_steps_of_an_export_without_other_markers() {
    // nvtx_workload.py wraps each of its 5 iterations in `step_0` … `step_4` (domain
    // mlprof_test): 4 steps, each from one range's start to the next one's (the rows'
    // starts: 36,283,319 ns, 51,525,275 ns, …, 97,137,179 ns).
    let out = ok_stdout(mlprof(&[
        "analyze",
        &data_str("nsys/nvtx_2022_4/nvtx_py.sqlite"),
        "--tool",
        "steps",
        "--format",
        "json",
    ]));
    let json: Value = serde_json::from_str(&out).expect("JSON");
    let steps = json["hosts"][0]["steps"].as_array().expect("steps");
    let names: Vec<&str> = steps.iter().filter_map(|s| s["step_name"].as_str()).collect();
    assert_eq!(names, ["mlprof_test:step 1", "mlprof_test:step 2", "mlprof_test:step 3", "mlprof_test:step 4"]);
    let starts_ns = [36_283_319.0, 51_525_275.0, 66_734_213.0, 81_966_429.0, 97_137_179.0];
    for (step, pair) in steps.iter().zip(starts_ns.windows(2)) {
        let ms = step["step_time_ms"].as_f64().expect("ms");
        assert!((ms - (pair[1] - pair[0]) / 1e6).abs() < 1e-3, "{step}");
    }
    assert!(json["step_source"].as_str().is_some_and(|s| s.contains("NVTX range mlprof_test:step")), "{json}");
}

#[test]
fn htas_gpu_analyses_read_an_export_as_a_pytorch_trace() {
    // Python's sqlite3 over CUPTI_ACTIVITY_KIND_KERNEL / _MEMCPY with HTA's rounding of
    // each op to whole µs (start up, end down): kernels 532 µs, copies 91,636 µs; the
    // fastest host-to-device copy, 100,000,000 bytes in 7,661,204 ns, is 13.053 GB/s.
    let out = ok_stdout(mlprof(&["analyze", &data_str(EXPORT), "--tool", "gpu", "--format", "json"]));
    let json: Value = serde_json::from_str(&out).expect("JSON");
    let temporal = &json["temporal_breakdown"][0];
    assert_eq!(temporal["compute_time_us"], 532.0, "{json:#}");
    assert_eq!(temporal["non_compute_time_us"], 91_636.0);
    let kernels = json["kernel_breakdown"]["kernels"].as_array().expect("kernels");
    let add = kernels.iter().find(|k| k["kernel_type"] == "COMPUTATION").expect("the kernel");
    assert_eq!((add["count"].as_i64(), add["sum_us"].as_f64()), (Some(4), Some(532.0)));
    // Each stream is a CUPTI stream line, each launch linked to its work.
    let streams: Vec<i64> =
        json["queue_length_summary"].as_array().expect("queues").iter().filter_map(|q| q["stream"].as_i64()).collect();
    assert!(streams.len() >= 4 && streams.iter().all(|&s| (13..=16).contains(&s)), "{streams:?}");
    let launches = json["cuda_kernel_launch_stats"][0]["launches"].as_array().expect("launches");
    assert_eq!(launches.len(), 16, "4 kernel launches and 12 cudaMemcpyAsync");
    let h2d = json["memory_bw_summary"].as_array().expect("bandwidth").iter().find(|m| m["name"] == "MemcpyH2D");
    let h2d = h2d.expect("host-to-device copies");
    assert_eq!(h2d["memory_bw_gbps"]["count"], 8);
    let max = h2d["memory_bw_gbps"]["max"].as_f64().expect("max");
    assert!((max - 100_000_000.0 / 7_661_204.0).abs() < 1e-6, "{max}");
}

#[test]
fn the_memory_profile_of_an_export_is_its_cuda_allocations() {
    // Python's sqlite3: per memory kind of device 0, 15 allocations and 15 frees of
    // 4,000,000 bytes, peaking at 20,000,000.
    let out = ok_stdout(mlprof(&[
        "analyze",
        &data_str("nsys/extrap_2022_1_win/profile1.sqlite"),
        "--tool",
        "memory_profile",
        "--format",
        "json",
    ]));
    let json: Value = serde_json::from_str(&out).expect("JSON");
    let allocators = json["tools"]["memory_profile"][0]["profile"]["allocators"].as_array().expect("allocators");
    let ids: Vec<&str> = allocators.iter().filter_map(|a| a["memory_id"].as_str()).collect();
    assert_eq!(ids, ["cuda:0 device", "cuda:0 pinned"]);
    for allocator in allocators {
        assert_eq!(allocator["summary"]["peak_stats"]["peak_bytes_in_use"], 20_000_000, "{allocator:#}");
        assert_eq!(
            (allocator["total_allocations"].as_i64(), allocator["total_deallocations"].as_i64()),
            (Some(15), Some(15))
        );
    }
}
