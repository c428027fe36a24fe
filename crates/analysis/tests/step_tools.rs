//! Parity of the step-time tools (overview_page, input_pipeline_analyzer, pod_viewer)
//! with XProf 2.24.2's output on the real XSpace fixtures, in XProf-compatible mode,
//! plus mlprof's own step finding where XProf finds none.

use std::path::{Path, PathBuf};

use mlprof_analysis::tools::{Analysis, ToolOptions};
use serde_json::Value;

mod json_same;

use json_same::assert_same;

const CASES: [&str; 5] =
    ["tf_keras2_input_bound", "tf_keras_pipelined", "tf_custom_loop", "jax_profile", "jax_gpu_xla"];

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace").join(case)
}

fn load(case: &str) -> mlprof_model::Session {
    let mut sessions = mlprof_formats::discover::load(&case_dir(case).join("logdir")).expect("fixture loads");
    sessions.pop().expect("one session")
}

fn reference(case: &str, tool: &str) -> Value {
    let path = case_dir(case).join("xprof_out").join(format!("{tool}.json"));
    serde_json::from_slice(&std::fs::read(&path).expect("reference exists")).expect("reference is JSON")
}

fn xprof_json(case: &str, tool: &str) -> Value {
    let session = load(case);
    let hosts: Vec<_> = session.hosts.iter().collect();
    let analysis = Analysis::new(hosts, ToolOptions { xprof_compatible: true, ..ToolOptions::default() });
    analysis.run(tool).expect("known tool").to_xprof_json()
}

#[test]
fn input_pipeline_analyzer_matches_xprof() {
    for case in CASES {
        assert_same(&xprof_json(case, "input_pipeline_analyzer"), &reference(case, "input_pipeline_analyzer"), case);
    }
}

#[test]
fn overview_page_matches_xprof() {
    for case in CASES {
        assert_same(&xprof_json(case, "overview_page"), &reference(case, "overview_page"), case);
    }
}

#[test]
fn pod_viewer_matches_xprof() {
    for case in CASES {
        assert_same(&xprof_json(case, "pod_viewer"), &reference(case, "pod_viewer"), case);
    }
}

#[test]
fn finds_the_keras3_steps_xprof_misses_and_says_how() {
    let session = load("tf_keras_pipelined");
    let analysis = Analysis::new(session.hosts.iter().collect(), ToolOptions::default());
    let result = analysis.run("input_pipeline_analyzer").expect("known tool");
    let mlprof_analysis::tools::ToolResult::InputPipeline(analysis) = result else { panic!("wrong result kind") };
    // 8 profiled batches, first and last dropped as XProf drops incomplete steps.
    assert_eq!(analysis.steps.len(), 6);
    assert!(analysis.step_source.contains("8 steps from events named \"Profiled batch\" with step_num"));
    assert!(analysis.steps.iter().all(|s| s.step_name.starts_with("Profiled batch ")));
    assert!(analysis.steps.iter().all(|s| s.step_time_ms > 4.0 && s.step_time_ms < 6.0));
    assert_ne!(analysis.bottleneck.input_classification, "unknown");
    assert!(analysis.warnings.is_empty());
}
