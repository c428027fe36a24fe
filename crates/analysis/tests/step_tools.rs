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

/// The real JAX GPU traces (`jax.profiler` around steps in `StepTraceAnnotation("train")`,
/// `device_put` copies each step): H200 (an MLP, CUDA graphs), H100 (many XLA op kinds,
/// one kernel per fusion; f32, and bf16 with 8-bit products). With their step groups
/// and the step-table rows XProf shows (it drops the first and last step).
const REAL_GPU_CASES: [(&str, usize, usize); 3] =
    [("jax_gpu_h200", 9, 8), ("jax_ops_h100", 6, 4), ("jax_mixed_h100", 6, 4)];

/// The copies CUPTI 13 names `MemcpyH2D`, `MemcpyD2D` and `MemcpyD2H`, with the pod
/// viewer's key and the step table's column of the category mlprof puts them in (input,
/// device to device, output), the tooltip's line of it and the average's key.
const MODERN_COPIES: [(&str, &str, usize, &str, &str); 3] = [
    ("MemcpyH2D", "6", 6, "-Input:", "infeed_time_ms_avg"),
    ("MemcpyD2D", "2", 2, "-Device to device:", "device_to_device_time_ms_avg"),
    ("MemcpyD2H", "7", 7, "-Output:", "outfeed_time_ms_avg"),
];

/// Microseconds of each kind of [`MODERN_COPIES`] per XProf step group of `case`.
fn modern_copies_us_per_group(case: &str) -> std::collections::BTreeMap<i64, [f64; 3]> {
    let session = load(case);
    let host = &session.hosts[0];
    let groups = mlprof_analysis::facts::step_groups_as_xprof(host);
    let mut per_group = std::collections::BTreeMap::new();
    for (p, plane) in host.planes.iter().enumerate().filter(|(_, p)| p.name.starts_with("/device:GPU:")) {
        for (l, line) in plane.lines.iter().enumerate() {
            for (e, event) in line.iter().enumerate() {
                let Some(kind) =
                    plane.metadata_of(&event).and_then(|m| MODERN_COPIES.iter().position(|(name, ..)| *name == m.name))
                else {
                    continue;
                };
                if let Some(group) = groups.group_of(p, l, e) {
                    per_group.entry(group).or_insert([0.0; 3])[kind] += event.duration_ps() as f64 / 1e6;
                }
            }
        }
    }
    per_group
}

/// The same as [`xla_gpu_steps_match_xprof_but_for_modern_memcpy_names`] on real
/// captures: CUPTI 13 names copies `MemcpyH2D`, `MemcpyD2D` and `MemcpyD2H`, which XProf
/// 2.24.2's `ClassifyGpuEvent` does not recognise (it matches `MEMCPYHToD` and the like),
/// so XProf counts them as device compute and mlprof as input, device to device and
/// output. Every other number is XProf's.
#[test]
fn real_jax_gpu_steps_match_xprof_but_for_modern_memcpy_names() {
    for (case, groups, rows) in REAL_GPU_CASES {
        let copies = modern_copies_us_per_group(case);
        assert_eq!(copies.len(), groups, "{case}: {copies:?}");
        let shifts = pod_viewer_moves_the_copies(case, &copies);
        step_tables_move_the_copies(case, rows, &shifts);
    }
}

/// Pod viewer: each step's copies moved from device compute ("1") to their category.
/// Returns, per step number, the milliseconds moved to each category.
fn pod_viewer_moves_the_copies(
    case: &str,
    copies: &std::collections::BTreeMap<i64, [f64; 3]>,
) -> std::collections::BTreeMap<String, [f64; 3]> {
    let ours = xprof_json(case, "pod_viewer");
    let mut want = reference(case, "pod_viewer");
    let mut shifts = std::collections::BTreeMap::new();
    for (i, step) in want["podStatsSequence"]["podStatsMap"].as_array_mut().expect("steps").iter_mut().enumerate() {
        let number = step["stepNum"].as_i64().expect("step number");
        let theirs = &mut step["podStatsPerCore"]["1"]["stepBreakdownUs"];
        let ours_step = &ours["podStatsSequence"]["podStatsMap"][i]["podStatsPerCore"]["1"]["stepBreakdownUs"];
        let mut moved = [0.0; 3];
        for (kind, (name, key, ..)) in MODERN_COPIES.iter().enumerate() {
            let value = |v: &Value| v.get(*key).and_then(Value::as_f64).unwrap_or(0.0);
            let shift = value(ours_step) - value(theirs);
            let expected = copies.get(&number).map_or(0.0, |c| c[kind]);
            assert!(
                (shift - expected).abs() < 1e-6,
                "{case} step {number}: moved {shift} µs, its {name} took {expected}"
            );
            if shift != 0.0 {
                theirs[*key] = Value::from(value(theirs) + shift);
                theirs["1"] = Value::from(theirs["1"].as_f64().expect("compute") - shift);
            }
            moved[kind] = shift / 1e3;
        }
        shifts.insert(number.to_string(), moved);
    }
    assert_same(&ours, &want, &format!("{case} pod_viewer"));
    shifts
}

/// Overview and input pipeline: the step table's rows move the same time (ms) from
/// device compute to each category, and the averages and tooltips follow; the rest is
/// XProf's.
fn step_tables_move_the_copies(case: &str, rows: usize, shifts: &std::collections::BTreeMap<String, [f64; 3]>) {
    for tool in ["overview_page", "input_pipeline_analyzer"] {
        let mut ours = xprof_json(case, tool);
        let want = reference(case, tool);
        let number = |v: &Value| v.as_f64().expect("number");
        let their_rows = want[1]["rows"].as_array().expect("rows");
        assert_eq!(their_rows.len(), rows, "{case} {tool}: XProf drops the first and last step");
        let without_copies = |tip: &Value| -> String {
            let moved = |l: &&str| {
                l.starts_with("-Device compute:") || MODERN_COPIES.iter().any(|(.., line, _)| l.starts_with(*line))
            };
            tip.as_str().expect("tooltip").lines().filter(|l| !moved(l)).collect::<Vec<_>>().join("\n")
        };
        let columns: Vec<usize> = MODERN_COPIES.iter().map(|(_, _, column, ..)| *column).collect();
        for (row, theirs) in ours[1]["rows"].as_array_mut().expect("rows").iter_mut().zip(their_rows) {
            let step = theirs["c"][0]["v"].as_str().expect("step number").to_string();
            let (c, t) = (&row["c"], &theirs["c"]);
            for (kind, &column) in columns.iter().enumerate() {
                let moved = number(&c[column]["v"]) - number(&t[column]["v"]);
                assert!((moved - shifts[&step][kind]).abs() < 1e-9, "{case} {tool} step {step} column {column}");
            }
            let sum = |cells: &Value| columns.iter().chain([&1]).map(|&i| number(&cells[i]["v"])).sum::<f64>();
            assert!((sum(c) - sum(t)).abs() < 1e-9, "{case} {tool} step {step}");
            assert_eq!(without_copies(&c[10]["v"]), without_copies(&t[10]["v"]), "{case} {tool} step {step}");
            for column in columns.iter().chain([&1, &10]) {
                row["c"][*column] = theirs["c"][*column].clone();
            }
        }
        let average = |v: &Value, key: &str| v[1]["p"][key].as_str().expect(key).parse::<f64>().expect(key);
        let keys: Vec<&str> =
            MODERN_COPIES.iter().map(|(.., key)| *key).chain(["device_compute_time_ms_avg"]).collect();
        let moved = |v: &Value| keys.iter().map(|key| average(v, key)).sum::<f64>();
        // Each average is rounded to 0.1 ms.
        assert!((moved(&ours) - moved(&want)).abs() <= 0.2 + 1e-9, "{case} {tool}: averages rounded to 0.1 ms");
        for key in keys {
            ours[1]["p"][key] = want[1]["p"][key].clone();
        }
        assert_same(&ours, &want, &format!("{case} {tool}"));
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

/// `run_all` on several threads (tools that read events alone beside the grouping, the
/// others after it) gives what it gives on one thread, tool for tool, on a TensorFlow
/// and a JAX fixture.
#[test]
fn every_tool_gives_the_same_on_one_thread_and_on_several() {
    for case in ["tf_keras2_input_bound", "jax_profile"] {
        let session = load(case);
        let outputs = |threads: usize| -> Vec<String> {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
            pool.install(|| {
                let analysis = Analysis::new(session.hosts.iter().collect(), Options::default());
                let tools: Vec<ToolId> = ToolId::xprof_tools().collect();
                let results = analysis.run_all(&tools);
                assert_eq!(results.len(), tools.len());
                tools
                    .iter()
                    .zip(results)
                    .map(|(tool, result)| match result {
                        Ok(result) => format!("{tool:?} {}", serde_json::to_string(&result).expect("serialises")),
                        Err(error) => format!("{tool:?} error {error}"),
                    })
                    .collect()
            })
        };
        assert_eq!(outputs(1), outputs(3), "{case}");
    }
}
