//! `mlprof analyze TRACE --tool memory_profile` on a real PyTorch trace with `[memory]`
//! events: the JSON carries the figures `scripts/memory_reference.py` computed from the
//! raw trace (`tests/data/kineto/memory_ref/torch_profile.json`), the table names the
//! blocks live at the peak, and `xprof-json` is XProf's `MemoryProfile` shape.

use std::process::{Command, Output};

use serde_json::Value;

mod common;

use common::data;

const TRACE: &str = "kineto/torch_profile/logdir/worker0.1795289102612280864.pt.trace.json";

fn analyze(format: &str) -> String {
    let trace = data(TRACE);
    let args = ["analyze", trace.to_str().expect("UTF-8 path"), "--tool", "memory_profile", "--format", format];
    let out: Output = Command::new(env!("CARGO_BIN_EXE_mlprof")).args(args).output().expect("mlprof runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn reference() -> Value {
    let text = std::fs::read_to_string(data("kineto/memory_ref/torch_profile.json")).expect("reference present");
    let value: Value = serde_json::from_str(&text).expect("reference is JSON");
    value["allocators"][0].clone()
}

#[test]
fn json_has_the_reference_peak_counts_and_live_blocks() {
    let json: Value = serde_json::from_str(&analyze("json")).expect("json output");
    let hosts = json["tools"]["memory_profile"].as_array().expect("one entry per host");
    assert_eq!(hosts.len(), 1);
    let profile = &hosts[0]["profile"];
    assert!(profile["method"].as_str().is_some_and(|m| m.contains("[memory]")));
    let allocators = profile["allocators"].as_array().expect("allocators");
    assert_eq!(allocators.len(), 1);
    let cpu = &allocators[0];
    let theirs = reference();
    assert_eq!(cpu["memory_id"], theirs["memory_id"]);
    assert_eq!(cpu["total_allocations"], theirs["allocations"]);
    assert_eq!(cpu["total_deallocations"], theirs["deallocations"]);
    assert_eq!(cpu["summary"]["peak_stats"]["heap_allocated_bytes"], theirs["peak_allocated_bytes"]);
    assert_eq!(cpu["peak_step_id"], theirs["peak_step"]);
    assert_eq!(cpu["timeline"].as_array().map(Vec::len), Some(1000));
    let pytorch = &cpu["pytorch"];
    assert_eq!(pytorch["live_at_peak_blocks"], theirs["live_at_peak_count"]);
    assert_eq!(pytorch["live_at_peak_bytes"], theirs["live_at_peak_bytes"]);
    assert_eq!(pytorch["peak_reserved_bytes"], theirs["peak_reserved_bytes"]);
    // Times are relative to the profile start; their differences are the trace's.
    let ours_ns = |value: &Value| value.as_i64().expect("time in ps") / 1000;
    let theirs_ns = |key: &str| theirs[key].as_i64().expect("epoch ns");
    assert_eq!(
        ours_ns(&cpu["summary"]["peak_stats_time_ps"]) - ours_ns(&pytorch["peak_reserved_time_ps"]),
        theirs_ns("peak_time_epoch_ns") - theirs_ns("peak_reserved_time_epoch_ns")
    );
}

#[test]
fn table_names_the_largest_live_block_and_its_op() {
    let text = analyze("table");
    assert!(text.contains("cpu: peak allocated 4.27 MiB"), "{text}");
    let theirs = reference();
    let largest = &theirs["live_at_peak"][0];
    let breakdown = text.split("Memory breakdown at the peak").nth(1).expect("breakdown section");
    let line = breakdown
        .lines()
        .find(|line| line.contains(largest["op"].as_str().unwrap_or("?")) && line.contains("1384448"))
        .expect("a breakdown row for the largest live block");
    assert!(line.contains("cpu"), "{line}");
}

#[test]
fn xprof_json_is_xprofs_memory_profile_shape() {
    // One tool: the output is that tool's answer itself.
    let profile: Value = serde_json::from_str(&analyze("xprof-json")).expect("xprof-json output");
    assert_eq!(profile["memoryIds"], serde_json::json!(["cpu"]));
    let cpu = &profile["memoryProfilePerAllocator"]["cpu"];
    assert_eq!(cpu["profileSummary"]["peakStats"]["peakBytesInUse"], "4480176");
    assert!(cpu["activeAllocations"].as_array().is_some_and(|rows| !rows.is_empty()));
}
