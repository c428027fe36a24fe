//! `framework_op_stats` against XProf 2.24.2's own output for the real fixtures: the
//! same rows in the same order, exact strings and counts, numbers within 0.1 %, the
//! FLOP rates, bandwidths and operational intensities of XLA's GPU cost model included.

use std::path::{Path, PathBuf};

use mlprof_analysis::facts::{op_metrics_read_groups, step_groups};
use mlprof_analysis::framework_op_stats;
use mlprof_analysis::grouping::HostGroups;
use mlprof_analysis::tool::{Analysis, Options, ToolId, ToolResult};
use mlprof_formats::discover::load;
use mlprof_model::Host;
use serde_json::Value;

const CASES: &[&str] = &[
    "tf_keras2_input_bound",
    "tf_keras_pipelined",
    "tf_custom_loop",
    "jax_profile",
    "jax_gpu_xla",
    // Real JAX GPU profiles (H200), command buffers on.
    "jax_gpu_h200",
    "jax_gpu_h200_capture",
    // Real JAX GPU profiles (H100) of many kinds of XLA op, one kernel per fusion: f32,
    // and bf16 with int8 and fp8 products.
    "jax_ops_h100",
    "jax_mixed_h100",
    // Written by `mlprof run`'s CUPTI injection (H200): no XLA op (no `hlo_op` stat) and
    // no host op, so both tables hold only XProf's IDLE rows (device and host).
    "cuda_app_h200_inject",
    "jax_h200_inject",
];

/// Index of the `eager` column ("Execution mode"): it depends on grouping's eager marks.
const EAGER_COLUMN: &str = "eager";

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace").join(case)
}

fn ours_and_xprof(case: &str) -> (Value, Value) {
    let sessions = load(&case_dir(case).join("logdir")).expect("fixture loads");
    assert_eq!(sessions.len(), 1, "{case}");
    let hosts = &sessions[0].hosts;
    let groups: Vec<HostGroups> = hosts.iter().map(step_groups).collect();
    let pairs: Vec<_> = hosts.iter().zip(&groups).collect();
    let stats = framework_op_stats::analyze(&pairs);
    let text = std::fs::read_to_string(case_dir(case).join("xprof_out/framework_op_stats.json")).expect("reference");
    (stats.to_xprof_json(), serde_json::from_str(&text).expect("reference is JSON"))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-3 * a.abs().max(b.abs()) + 1e-9
}

/// Compares one DataTable; `skip` names columns left out of the comparison.
fn compare_table(case: &str, which: usize, ours: &Value, want: &Value, skip: &[&str]) -> Vec<String> {
    let mut problems = Vec::new();
    assert_eq!(ours["cols"], want["cols"], "{case} table {which}: columns");
    assert_eq!(ours["p"], want["p"], "{case} table {which}: properties");
    let ids: Vec<&str> = want["cols"].as_array().into_iter().flatten().filter_map(|c| c["id"].as_str()).collect();
    let (ours_rows, want_rows) = (ours["rows"].as_array().expect("rows"), want["rows"].as_array().expect("rows"));
    if ours_rows.len() != want_rows.len() {
        problems.push(format!("{case} table {which}: {} rows, XProf has {}", ours_rows.len(), want_rows.len()));
    }
    for (i, (got, expected)) in ours_rows.iter().zip(want_rows).enumerate() {
        for (c, id) in ids.iter().enumerate() {
            if skip.contains(id) {
                continue;
            }
            let (g, e) = (&got["c"][c]["v"], &expected["c"][c]["v"]);
            let same = match (g.as_f64(), e.as_f64()) {
                (Some(g), Some(e)) => close(g, e),
                _ => g == e,
            };
            if !same {
                problems.push(format!(
                    "{case} table {which} row {i} ({}) column {id}: {g} vs XProf {e}",
                    expected["c"][3]["v"]
                ));
            }
        }
    }
    problems
}

#[test]
fn fixtures_match_xprof() {
    let mut problems = Vec::new();
    for case in CASES {
        let (ours, want) = ours_and_xprof(case);
        assert_eq!(ours.as_array().map(Vec::len), Some(2), "{case}");
        for which in 0..2 {
            problems.extend(compare_table(case, which, &ours[which], &want[which], &[EAGER_COLUMN]));
        }
    }
    assert!(problems.is_empty(), "{} differences:\n{}", problems.len(), problems.join("\n"));
}

/// The execution mode depends on grouping's eager marks (XProf's `is_eager` stat);
/// checked on its own so that a grouping change shows here and nowhere else.
#[test]
fn fixtures_match_xprof_execution_mode() {
    let mut problems = Vec::new();
    for case in CASES {
        let (ours, want) = ours_and_xprof(case);
        for which in 0..2 {
            let all: Vec<&str> =
                want[which]["cols"].as_array().into_iter().flatten().filter_map(|c| c["id"].as_str()).collect();
            let others: Vec<&str> = all.into_iter().filter(|id| *id != EAGER_COLUMN).collect();
            problems.extend(compare_table(case, which, &ours[which], &want[which], &others));
        }
    }
    assert!(problems.is_empty(), "{} differences:\n{}", problems.len(), problems.join("\n"));
}

/// Run as a tool, the framework op stats group only where the op metrics read the
/// groups (eager marks, GPU kernels' steps), and are the same as with grouping either way.
#[test]
fn the_tool_groups_only_where_the_op_metrics_read_the_groups() {
    let (mut grouped_without_need, mut without_groups) = (Vec::new(), 0);
    for case in CASES.iter().chain(&["tf_plain_loop"]) {
        let sessions = load(&case_dir(case).join("logdir")).expect("fixture loads");
        let hosts: Vec<&Host> = sessions[0].hosts.iter().collect();
        let analysis = Analysis::new(hosts.clone(), Options::default());
        let Ok(ToolResult::FrameworkOpStats(stats)) = analysis.run(ToolId::FrameworkOpStats) else {
            panic!("{case}: framework_op_stats runs");
        };
        let groups: Vec<HostGroups> = hosts.iter().map(|host| step_groups(host)).collect();
        let pairs: Vec<_> = hosts.iter().copied().zip(&groups).collect();
        assert_eq!(stats.to_xprof_json(), framework_op_stats::analyze(&pairs).to_xprof_json(), "{case}");
        let grouped = analysis.times().iter().any(|(what, _)| what == "grouping");
        let needed = hosts.iter().copied().any(op_metrics_read_groups);
        assert!(!needed || grouped, "{case}: the op metrics read the groups, which were not built");
        if grouped && !needed {
            grouped_without_need.push(*case);
        }
        without_groups += usize::from(!grouped);
    }
    assert!(grouped_without_need.is_empty(), "grouped for nothing: {grouped_without_need:?}");
    // The CPU-only TensorFlow and JAX profiles mark nothing eager.
    assert!(without_groups >= 4, "only {without_groups} cases went without grouping");
}
