//! The TF-Profiler tools end to end on real PyTorch (Kineto) traces: the DataLoader
//! section and its advice, the pod viewer's stragglers across ranks, and output into a
//! closed pipe.

use std::io::Read;
use std::process::{Command, Stdio};

use serde_json::Value;

mod common;

use common::{data, mlprof, ok_stdout};

#[test]
fn the_input_pipeline_analyzer_explains_the_dataloader_of_a_cpu_trace() {
    let trace = data("kineto/torch_profile/logdir");
    let text = ok_stdout(mlprof(&["analyze", trace.to_str().unwrap(), "--tool", "input_pipeline_analyzer"]));
    assert!(text.contains("HIGHLY input-bound"), "{text}");
    assert!(text.contains("## DataLoader (host side)"), "{text}");
    assert!(text.contains("_SingleProcessDataLoaderIter"), "{text}");
    assert!(text.contains("Dataset __getitem__"), "{text}");
    assert!(text.contains("Set num_workers > 0"), "{text}");
    assert!(text.contains("ProfilerStep#2") && text.contains("ProfilerStep#4"), "{text}");
}

#[test]
fn the_pod_viewer_names_the_straggler_rank() {
    let trace = data("kineto/hta/trace_filter");
    let text = ok_stdout(mlprof(&["analyze", trace.to_str().unwrap(), "--tool", "pod_viewer", "--format", "json"]));
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    let viewer = &doc["tools"]["pod_viewer"];
    let steps = viewer["steps"].as_array().expect("steps");
    assert_eq!(steps.len(), 2);
    for step in steps {
        assert_eq!(step["hosts"].as_array().map(Vec::len), Some(2));
        assert_eq!(step["straggler"]["host"], "sampled_rank-1", "{step}");
    }
    assert_eq!(viewer["stragglers"][0]["steps"], 2);
    let table = ok_stdout(mlprof(&["analyze", trace.to_str().unwrap(), "--tool", "pod_viewer"]));
    assert!(table.contains("sampled_rank-1 was the slowest host in 2 of 2 steps"), "{table}");
}

#[test]
fn a_reader_that_stops_early_is_not_an_error() {
    let trace = data("kineto/hta/nccl_parser_config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["analyze", trace.to_str().unwrap(), "--tool", "all", "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mlprof starts");
    drop(child.stdout.take());
    let status = child.wait().expect("mlprof ends");
    let mut stderr = String::new();
    child.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("stderr reads");
    assert!(status.success(), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
