//! Parity of the step-time tools (overview_page, input_pipeline_analyzer, pod_viewer)
//! with XProf 2.24.2's output on the real XSpace fixtures, in XProf-compatible mode,
//! plus mlprof's own step finding where XProf finds none.

use std::path::{Path, PathBuf};

use mlprof_analysis::tool::{Analysis, Options, ToolId};
use serde_json::Value;

mod json_same;

use json_same::assert_same;

/// The real fixtures, where mlprof's XProf-compatible mode gives XProf's output.
const CASES: [&str; 4] = ["tf_keras2_input_bound", "tf_keras_pipelined", "tf_custom_loop", "jax_profile"];

/// The XLA GPU fixture: its copies use CUPTI's current `MemcpyH2D` name, which XProf
/// 2.24.2 fails to recognise (it counts them as device compute); mlprof counts them as
/// input by design, so this case is compared with that one difference accounted for.
const GPU_CASE: &str = "jax_gpu_xla";

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
    let analysis = Analysis::new(hosts, Options::xprof_compatible());
    let tool = ToolId::from_name(tool).expect("known tool");
    analysis.run(tool).expect("the tool runs").to_xprof_json().expect("an XProf tool")
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
    let analysis = Analysis::new(session.hosts.iter().collect(), Options::default());
    let result = analysis.run(ToolId::InputPipelineAnalyzer).expect("the tool runs");
    let mlprof_analysis::tool::ToolResult::InputPipeline(analysis) = result else { panic!("wrong result kind") };
    // 8 profiled batches, first and last dropped as XProf drops incomplete steps.
    assert_eq!(analysis.steps.len(), 6);
    assert!(analysis.step_source.contains("8 steps from events named \"Profiled batch\" with step_num"));
    assert!(analysis.steps.iter().all(|s| s.step_name.starts_with("Profiled batch ")));
    assert!(analysis.steps.iter().all(|s| s.step_time_ms > 4.0 && s.step_time_ms < 6.0));
    assert_ne!(analysis.bottleneck.input_classification, "unknown");
    assert!(analysis.warnings.is_empty());
}

/// Durations (µs) of the copies named `MemcpyH2D` on the GPU plane of `case`.
fn modern_h2d_copies_us(case: &str) -> Vec<f64> {
    let session = load(case);
    let mut copies = Vec::new();
    for plane in session.hosts.iter().flat_map(|h| &h.planes).filter(|p| p.name.starts_with("/device:GPU:")) {
        for line in &plane.lines {
            for event in line.iter() {
                if plane.metadata_of(&event).is_some_and(|m| m.name == "MemcpyH2D") {
                    copies.push(event.duration_ps() as f64 / 1e6);
                }
            }
        }
    }
    copies
}

#[test]
fn xla_gpu_steps_match_xprof_but_for_modern_memcpy_names() {
    // Pod viewer: every step and category as XProf, except that each step's
    // `MemcpyH2D` moved from device compute ("1") to input ("6").
    let ours = xprof_json(GPU_CASE, "pod_viewer");
    let mut want = reference(GPU_CASE, "pod_viewer");
    let mut moved = Vec::new();
    let steps = want["podStatsSequence"]["podStatsMap"].as_array_mut().expect("steps");
    for (i, step) in steps.iter_mut().enumerate() {
        let theirs = &mut step["podStatsPerCore"]["1"]["stepBreakdownUs"];
        let ours_step = &ours["podStatsSequence"]["podStatsMap"][i]["podStatsPerCore"]["1"]["stepBreakdownUs"];
        let shift = ours_step["6"].as_f64().expect("input") - theirs["6"].as_f64().expect("input");
        moved.push(shift);
        theirs["6"] = Value::from(theirs["6"].as_f64().expect("input") + shift);
        theirs["1"] = Value::from(theirs["1"].as_f64().expect("compute") - shift);
    }
    assert_same(&ours, &want, "jax_gpu_xla pod_viewer");
    let mut copies = modern_h2d_copies_us(GPU_CASE);
    assert_eq!(copies.len(), moved.len(), "one MemcpyH2D per step");
    moved.sort_by(f64::total_cmp);
    copies.sort_by(f64::total_cmp);
    for (shift, copy) in moved.iter().zip(&copies) {
        assert!((shift - copy).abs() < 1e-6, "moved {shift} µs, the copy took {copy} µs");
    }

    // Overview: the GPU top-ops table (TensorCore columns; FLOP rates as XProf's for
    // dots, while XProf weighs elementwise ops by GPU cycle costs, so those are left out)
    // and the run environment.
    let ours = xprof_json(GPU_CASE, "overview_page");
    let want = reference(GPU_CASE, "overview_page");
    let mut ours_ops = ours[0].clone();
    let theirs_rows = want[0]["rows"].as_array().expect("rows");
    for (row, theirs) in ours_ops["rows"].as_array_mut().expect("rows").iter_mut().zip(theirs_rows) {
        if theirs["c"][2]["v"] != "dot_general" {
            row["c"][4] = theirs["c"][4].clone();
        }
    }
    assert_same(&ours_ops, &want[0], "jax_gpu_xla overview top ops");
    assert_same(&ours[2], &want[2], "jax_gpu_xla overview run environment");

    // Input pipeline: the same steps, named by number as XProf names GPU steps.
    let ours = xprof_json(GPU_CASE, "input_pipeline_analyzer");
    let want = reference(GPU_CASE, "input_pipeline_analyzer");
    let names = |v: &Value| -> Vec<Value> {
        v[1]["rows"].as_array().expect("rows").iter().map(|r| r["c"][0]["v"].clone()).collect()
    };
    assert_eq!(names(&ours), names(&want));
    assert_eq!(names(&want).len(), 8);
}

#[test]
fn xla_gpu_overview_report_shows_flop_rates_and_tensor_cores() {
    let session = load(GPU_CASE);
    let analysis = Analysis::new(session.hosts.iter().collect(), Options::default());
    let report = analysis.run(ToolId::OverviewPage).expect("the tool runs").report();
    let section = report.sections.iter().find(|s| s.title == "Top 10 device ops").expect("device ops");
    let table = section.table.as_ref().expect("table");
    assert_eq!(table.columns[4..], ["GFLOP/s", "TensorCore eligible", "Uses TensorCore"]);
    let first: Vec<String> = table.rows[0].iter().map(|cell| cell.display()).collect();
    // The forward matmul: 2·M·N·K FLOPs over its kernel time, as XProf computes it.
    assert_eq!(first[3..], ["jit(train_step)/jvp()/dot_general", "171.84", "yes", "yes"]);
}
