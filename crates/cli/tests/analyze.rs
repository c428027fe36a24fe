//! `mlprof analyze` end to end on real profiles: every tool in every format, the
//! table rendering against a snapshot, CSV sorting, and bad requests.
//! Set `MLPROF_UPDATE_SNAPSHOTS=1` to rewrite the snapshot after a deliberate change.

use serde_json::Value;

mod common;

use common::{data, mlprof, ok_stdout};

const CASES: &[&str] = &["tf_keras2_input_bound", "tf_keras_pipelined", "tf_custom_loop", "jax_profile"];

#[test]
fn every_tool_runs_in_every_format_on_every_xspace_fixture() {
    for case in CASES {
        let dir = data(&format!("xspace/{case}/logdir"));
        let dir = dir.to_str().expect("UTF-8 path");
        let json: Value =
            serde_json::from_str(&ok_stdout(mlprof(&["analyze", dir, "--tool", "all", "--format", "json"])))
                .expect("json output");
        let tools = json["tools"].as_object().expect("tools object");
        assert_eq!(tools.len(), 7, "{case}");
        let xprof: Value =
            serde_json::from_str(&ok_stdout(mlprof(&["analyze", dir, "--tool", "all", "--format", "xprof-json"])))
                .expect("xprof-json output");
        assert_eq!(xprof["overview_page"].as_array().map(Vec::len), Some(7), "{case}");
        let table = ok_stdout(mlprof(&["analyze", dir, "--tool", "all"]));
        // XProf's page sections are XProf's UI: mlprof's words name tools (issue 22).
        assert!(!table.contains("Section 3") && !table.contains("rest of this page"), "{case}");
        assert!(
            table.contains("## Recommendation for next step\n") && table.contains("tf_data_bottleneck_analysis")
                || !case.starts_with("tf_keras2"),
            "{case}"
        );
        for tool in tools.keys() {
            assert!(table.contains(&format!("== {tool} ==")), "{case}: {tool} missing from the table output");
        }
    }
}

/// `-v` says how long each shared result and each tool took, one line each, on
/// stderr: what a user reads to see where a slow analysis spends its time.
#[test]
fn verbose_analysis_times_each_shared_result_and_tool() {
    let dir = data("xspace/tf_keras2_input_bound/logdir");
    let out = mlprof(&["-v", "analyze", dir.to_str().expect("UTF-8"), "--tool", "all"]);
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let timed: Vec<&str> = stderr
        .lines()
        .filter_map(|line| line.strip_prefix("  ")?.strip_suffix(" s")?.split_once(": "))
        .filter(|(_, seconds)| seconds.parse::<f64>().is_ok())
        .map(|(what, _)| what)
        .collect();
    for what in ["grouping", "host steps", "host op metrics", "overview_page", "tf_data_bottleneck_analysis"] {
        assert_eq!(timed.iter().filter(|&&t| t == what).count(), 1, "{what} in:\n{stderr}");
    }
    assert!(stderr.contains("analysed in "), "{stderr}");
}

#[test]
fn the_table_rendering_matches_its_snapshot() {
    let dir = data("xspace/tf_keras2_input_bound/logdir");
    let text = ok_stdout(mlprof(&["analyze", dir.to_str().expect("UTF-8"), "--tool", "all"]));
    let snapshot = data("xspace/tf_keras2_input_bound/mlprof_analyze_all.txt");
    if std::env::var_os("MLPROF_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&snapshot, &text).expect("snapshot written");
    }
    let want = std::fs::read_to_string(&snapshot).expect("snapshot exists");
    assert!(
        text == want,
        "table output differs from {}; rerun with MLPROF_UPDATE_SNAPSHOTS=1 if intended",
        snapshot.display()
    );
}

#[test]
fn csv_is_the_main_table_sorted_on_request() {
    let dir = data("xspace/tf_keras2_input_bound/logdir");
    let csv = ok_stdout(mlprof(&[
        "analyze",
        dir.to_str().expect("UTF-8"),
        "--tool",
        "framework_op_stats",
        "--format",
        "csv",
        "--sort",
        "occurrences:desc",
    ]));
    let mut lines = csv.lines();
    assert!(lines.next().expect("header").starts_with("Rank,Host/device,Type,Operation,Occurrences"));
    let counts: Vec<i64> =
        lines.map(|l| l.split(',').nth(4).and_then(|v| v.parse().ok()).expect("occurrences")).collect();
    assert_eq!(counts.len(), 272);
    assert!(counts.windows(2).all(|w| w[0] >= w[1]), "sorted by occurrences, descending");
}

#[test]
fn keras3_steps_are_found_and_the_output_says_how() {
    let dir = data("xspace/tf_keras_pipelined/logdir");
    let text = ok_stdout(mlprof(&["analyze", dir.to_str().expect("UTF-8"), "--tool", "input_pipeline_analyzer"]));
    assert!(text.contains("8 steps from events named \"Profiled batch\" with step_num"), "{text}");
    let xprof = ok_stdout(mlprof(&[
        "analyze",
        dir.to_str().expect("UTF-8"),
        "--tool",
        "input_pipeline_analyzer",
        "--format",
        "xprof-json",
    ]));
    assert!(xprof.contains("No step marker observed"), "xprof-json stays what XProf computes");
}

#[test]
fn bad_requests_exit_2_with_one_line() {
    let dir = data("xspace/jax_profile/logdir");
    let dir = dir.to_str().expect("UTF-8");
    for args in [
        vec!["analyze", dir, "--tool", "nope"],
        vec!["analyze", dir, "--host", "nohost"],
        vec!["analyze", dir, "--tool", "all", "--format", "csv"],
        vec!["analyze", dir, "--tool", "framework_op_stats", "--sort", "no_such_column"],
        vec!["analyze", "/no/such/path"],
    ] {
        let out = mlprof(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

/// A trace that holds no event is read fine but is nothing usable: exit 1 and one line
/// from `analyze` and `advise`, not an overview of zeros or "Nothing to advise".
#[test]
fn a_profile_without_events_is_nothing_usable() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("empty.json");
    std::fs::write(&trace, r#"{"traceEvents": []}"#).unwrap();
    let trace = trace.to_str().expect("UTF-8");
    for args in [vec!["analyze", trace], vec!["analyze", trace, "--tool", "gpu"], vec!["advise", trace]] {
        let out = mlprof(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("no events in its host: nothing was recorded"), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: no partial output");
    }
}

/// A PyTorch training step (autograd's backward ops in the trace) is called training,
/// not XProf's default "Inference".
#[test]
fn a_pytorch_trace_with_a_backward_pass_is_training() {
    let trace = data("../../examples/pytorch");
    let trace = trace.to_str().expect("UTF-8");
    let json: Value =
        serde_json::from_str(&ok_stdout(mlprof(&["analyze", trace, "--tool", "all", "--format", "json"])))
            .expect("json");
    assert_eq!(json["tools"]["overview_page"]["run_environment"]["is_training"], true);
    assert_eq!(json["tools"]["framework_op_stats"]["with_idle"]["task_type"], "Training");
}

/// The GPU tools on a CPU-only profile say there is no GPU activity (exit 1, one line)
/// rather than printing HTA's tables empty.
#[test]
fn gpu_tools_on_a_profile_without_gpu_activity_say_so() {
    for path in [data("xspace/tf_keras2_input_bound/logdir"), data("kineto/hta/cpu_only")] {
        let path = path.to_str().expect("UTF-8");
        for tool in ["gpu", "transfers"] {
            let out = mlprof(&["analyze", path, "--tool", tool]);
            assert_eq!(out.status.code(), Some(1), "{path} {tool}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(stderr.lines().count(), 1, "{stderr}");
            assert!(stderr.contains(&format!("{tool}: no GPU activity in this profile")), "{stderr}");
            assert!(out.stdout.is_empty());
        }
    }
}

#[test]
fn the_steps_tool_lists_every_step_and_the_overview_counts_the_ones_it_marks() {
    for case in ["xspace/tf_keras2_input_bound/logdir", "kineto/hta/timeline_analysis"] {
        let dir = data(case);
        let dir = dir.to_str().expect("UTF-8 path");
        let steps: Value =
            serde_json::from_str(&ok_stdout(mlprof(&["analyze", dir, "--tool", "steps", "--format", "json"])))
                .expect("json output");
        let pipeline: Value = serde_json::from_str(&ok_stdout(mlprof(&[
            "analyze",
            dir,
            "--tool",
            "input_pipeline_analyzer",
            "--format",
            "json",
        ])))
        .expect("json output");
        let rows: Vec<&Value> = steps["hosts"]
            .as_array()
            .expect("hosts")
            .iter()
            .flat_map(|host| host["steps"].as_array().expect("steps"))
            .collect();
        assert!(!rows.is_empty(), "{case}: steps found");
        let counted: Vec<(&Value, &Value)> = rows
            .iter()
            .filter(|row| row["in_overview"] == true)
            .map(|row| (&row["step_num"], &row["step_time_ms"]))
            .collect();
        let overview = pipeline["tools"]["input_pipeline_analyzer"]["steps"].as_array().expect("the overview's steps");
        if steps["hosts"].as_array().map(Vec::len) == Some(1) {
            let shown: Vec<(&Value, &Value)> = overview.iter().map(|s| (&s["step_num"], &s["step_time_ms"])).collect();
            assert_eq!(counted, shown, "{case}: the steps marked in_overview are the overview's");
        }
        assert!(rows.len() >= overview.len(), "{case}: none left out");
        let csv = ok_stdout(mlprof(&["analyze", dir, "--tool", "steps", "--format", "csv"]));
        assert!(csv.starts_with("Host,Step,Name,Start (ms),Step time (ms),Device compute (ms)"), "{case}: {csv}");
        assert_eq!(csv.lines().count(), rows.len() + 1, "{case}: one CSV row per step");
        let table = ok_stdout(mlprof(&["analyze", dir, "--tool", "steps"]));
        assert!(table.contains("== steps ==") && table.contains("In overview"), "{case}: {table}");
    }
}
