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

/// The real JAX GPU trace (H200, `jax.profiler` around 10 steps in
/// `StepTraceAnnotation("train")`, 2 `device_put` copies a step).
const REAL_GPU_CASE: &str = "jax_gpu_h200";

/// Microseconds of the `MemcpyH2D` copies per XProf step group of `case`.
fn modern_h2d_copies_us_per_group(case: &str) -> std::collections::BTreeMap<i64, f64> {
    let session = load(case);
    let host = &session.hosts[0];
    let groups = mlprof_analysis::facts::step_groups_as_xprof(host);
    let mut per_group = std::collections::BTreeMap::new();
    for (p, plane) in host.planes.iter().enumerate().filter(|(_, p)| p.name.starts_with("/device:GPU:")) {
        for (l, line) in plane.lines.iter().enumerate() {
            for (e, event) in line.iter().enumerate() {
                if plane.metadata_of(&event).is_some_and(|m| m.name == "MemcpyH2D")
                    && let Some(group) = groups.group_of(p, l, e)
                {
                    *per_group.entry(group).or_insert(0.0) += event.duration_ps() as f64 / 1e6;
                }
            }
        }
    }
    per_group
}

/// The same as [`xla_gpu_steps_match_xprof_but_for_modern_memcpy_names`] on a real
/// capture: CUPTI 13 names host-to-device copies `MemcpyH2D`, which XProf 2.24.2's
/// `ClassifyGpuEvent` does not recognise (it matches `MEMCPYHToD`), so XProf counts them
/// as device compute and mlprof as input. Every other number is XProf's.
#[test]
fn real_jax_gpu_steps_match_xprof_but_for_modern_memcpy_names() {
    let copies = modern_h2d_copies_us_per_group(REAL_GPU_CASE);
    assert_eq!(copies.len(), 9, "{copies:?}");

    // Pod viewer: each step's copies moved from device compute ("1") to input ("6").
    let ours = xprof_json(REAL_GPU_CASE, "pod_viewer");
    let mut want = reference(REAL_GPU_CASE, "pod_viewer");
    let mut shifts = std::collections::BTreeMap::new();
    for (i, step) in want["podStatsSequence"]["podStatsMap"].as_array_mut().expect("steps").iter_mut().enumerate() {
        let number = step["stepNum"].as_i64().expect("step number");
        let theirs = &mut step["podStatsPerCore"]["1"]["stepBreakdownUs"];
        let ours_step = &ours["podStatsSequence"]["podStatsMap"][i]["podStatsPerCore"]["1"]["stepBreakdownUs"];
        let input = |v: &Value| v.get("6").and_then(Value::as_f64).unwrap_or(0.0);
        let shift = input(ours_step) - input(theirs);
        let expected = copies.get(&number).copied().unwrap_or(0.0);
        assert!((shift - expected).abs() < 1e-6, "step {number}: moved {shift} µs, its copies took {expected} µs");
        if shift != 0.0 {
            theirs["6"] = Value::from(input(theirs) + shift);
            theirs["1"] = Value::from(theirs["1"].as_f64().expect("compute") - shift);
        }
        shifts.insert(number.to_string(), shift / 1e3);
    }
    assert_same(&ours, &want, "jax_gpu_h200 pod_viewer");

    // Overview and input pipeline: the step table's rows move the same time (ms) from
    // device compute to input, and the averages and tooltips follow; the rest is XProf's.
    for tool in ["overview_page", "input_pipeline_analyzer"] {
        let mut ours = xprof_json(REAL_GPU_CASE, tool);
        let want = reference(REAL_GPU_CASE, tool);
        let number = |v: &Value| v.as_f64().expect("number");
        let rows = want[1]["rows"].as_array().expect("rows");
        assert_eq!(rows.len(), 8, "{tool}: XProf drops the first and last of 10 steps");
        let without_input = |tip: &Value| -> String {
            let moved = |l: &&str| l.starts_with("-Input:") || l.starts_with("-Device compute:");
            tip.as_str().expect("tooltip").lines().filter(|l| !moved(l)).collect::<Vec<_>>().join("\n")
        };
        for (row, theirs) in ours[1]["rows"].as_array_mut().expect("rows").iter_mut().zip(rows) {
            let step = theirs["c"][0]["v"].as_str().expect("step number").to_string();
            let (c, t) = (&row["c"], &theirs["c"]);
            assert!((number(&c[6]["v"]) - number(&t[6]["v"]) - shifts[&step]).abs() < 1e-9, "{tool} step {step}");
            let (ours_sum, their_sum) =
                (number(&c[1]["v"]) + number(&c[6]["v"]), number(&t[1]["v"]) + number(&t[6]["v"]));
            assert!((ours_sum - their_sum).abs() < 1e-9, "{tool} step {step}");
            assert_eq!(without_input(&c[10]["v"]), without_input(&t[10]["v"]), "{tool} step {step}");
            for column in [1, 6, 10] {
                row["c"][column] = theirs["c"][column].clone();
            }
        }
        let average = |v: &Value, key: &str| v[1]["p"][key].as_str().expect(key).parse::<f64>().expect(key);
        let moved = |v: &Value| average(v, "device_compute_time_ms_avg") + average(v, "infeed_time_ms_avg");
        assert!((moved(&ours) - moved(&want)).abs() <= 0.1 + 1e-9, "{tool}: averages rounded to 0.1 ms");
        for key in ["device_compute_time_ms_avg", "infeed_time_ms_avg"] {
            ours[1]["p"][key] = want[1]["p"][key].clone();
        }
        assert_same(&ours, &want, &format!("jax_gpu_h200 {tool}"));
    }
}

/// An `mlprof capture` of an unmodified JAX GPU job: no step markers, so XProf and
/// mlprof's XProf-compatible mode both report no steps ("No step marker observed"), and
/// the device top-ops table is one `XlaModule` row (the capture caught XLA compiling
/// and autotuning `train_step`, whose HLO the metadata plane lacks). One cell differs: that
/// row's "TensorCore eligibility". XProf 2.24.2's `GroupKernelReportsByOpName`
/// (xprof/utils/kernel_stats_utils.cc) ORs `is_op_tensor_core_eligible` over all the
/// op's kernel groups (26 of its 79 groups use TensorCores, so true); mlprof's
/// `KernelStats::by_op` takes the first, longest group's (`DelayKernel`, not
/// eligible, so false). Every other value is XProf's.
#[test]
fn real_gpu_capture_without_step_markers_matches_xprof_but_for_one_eligibility_cell() {
    let case = "jax_gpu_h200_capture";
    for tool in ["input_pipeline_analyzer", "pod_viewer"] {
        assert_same(&xprof_json(case, tool), &reference(case, tool), case);
    }
    let mut ours = xprof_json(case, "overview_page");
    let want = reference(case, "overview_page");
    let cell = |v: &Value| v[0]["rows"][0]["c"][5]["v"].clone();
    assert_eq!(want[0]["cols"][5]["id"], "tcEligibility");
    assert_eq!(want[0]["rows"][0]["c"][3]["v"], "XlaModule");
    assert_eq!((cell(&ours), cell(&want)), (Value::Bool(false), Value::Bool(true)));
    ours[0]["rows"][0]["c"][5]["v"] = Value::Bool(true);
    assert_same(&ours, &want, case);
    let diagnostics = want.as_array().and_then(|t| t.last()).expect("diagnostics").to_string();
    assert!(diagnostics.contains("No step marker observed"), "{diagnostics}");
}

/// Profiles written by `mlprof run`'s CUPTI injection (H200): a plain CUDA program
/// (`cuda_app`) and a JAX loop recorded with `--device-tracer cupti` instead of XLA's
/// tracer. The injection records CUDA activity only: no host step markers
/// (`StepTraceAnnotation`) and no `hlo_op` stats, so XProf and mlprof's XProf-compatible
/// mode both find no steps ("No step marker observed") and no device op for the top-ops
/// table; the run environment (an "Nvidia GPU (Hopper)", one core) comes from the
/// injection's device plane stats. All three tools equal XProf's.
const INJECTED_CASES: [&str; 2] = ["cuda_app_h200_inject", "jax_h200_inject"];

#[test]
fn cupti_injection_profiles_match_xprof() {
    for case in INJECTED_CASES {
        for tool in ["overview_page", "input_pipeline_analyzer", "pod_viewer"] {
            assert_same(&xprof_json(case, tool), &reference(case, tool), &format!("{case} {tool}"));
        }
        let want = reference(case, "overview_page");
        assert_eq!(want[0]["rows"], Value::Array(Vec::new()), "{case}: no device ops");
        assert_eq!(want[2]["p"]["device_type"], "Nvidia GPU (Hopper)", "{case}");
        let diagnostics = want.as_array().and_then(|t| t.last()).expect("diagnostics").to_string();
        assert!(diagnostics.contains("No step marker observed"), "{case}: {diagnostics}");
    }
}
