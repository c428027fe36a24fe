//! `mlprof diff` end to end on HTA's `trace_compare` traces: the CSV is HTA 0.5.0's
//! `compare_traces` output byte for byte (up to pandas' `1.0` for `1`), the table and
//! JSON carry the same numbers, and bad input fails with one line on stderr.

use std::process::Output;

use serde_json::Value;

mod common;

use common::{data, data_str as path, mlprof, ok_stdout};

fn diff(extra: &[&str]) -> Output {
    let (base, test) = (path("kineto/hta/trace_compare/base"), path("kineto/hta/trace_compare/test/test.json.gz"));
    let mut args = vec!["diff", base.as_str(), test.as_str()];
    args.extend_from_slice(extra);
    mlprof(&args)
}

/// HTA's CSV with pandas' float spelling of whole numbers (`122149.0`) made integral.
fn hta_csv(file: &str) -> String {
    let text = std::fs::read_to_string(data(&format!("kineto/hta_out/trace_compare/{file}"))).expect("reference");
    text.lines()
        .map(|line| {
            // The name may be quoted and hold commas: rewrite only the last 7 fields.
            let fields: Vec<&str> = line.rsplitn(8, ',').collect();
            let mut out: Vec<String> = fields.iter().map(|f| f.strip_suffix(".0").unwrap_or(f).to_string()).collect();
            out.reverse();
            out.join(",") + "\n"
        })
        .collect()
}

#[test]
fn csv_is_hta_compare_traces() {
    assert_eq!(ok_stdout(diff(&["--format", "csv"])), hta_csv("compare_traces.csv"));
    assert_eq!(
        ok_stdout(diff(&["--format", "csv", "--iteration", "all"])),
        hta_csv("compare_traces_all_iterations.csv")
    );
    assert_eq!(
        ok_stdout(diff(&["--format", "csv", "--rank", "1", "--iteration", "1010"])),
        hta_csv("compare_traces_last_iteration.csv")
    );
    assert_eq!(
        ok_stdout(diff(&["--format", "csv", "--iteration", "1010", "--device", "cpu", "--short-names"])),
        hta_csv("test_compare_traces_CPU.csv")
    );
    assert_eq!(ok_stdout(diff(&["--format", "csv", "--device", "gpu"])), hta_csv("compare_traces_GPU.csv"));
}

#[test]
fn table_leads_with_the_biggest_change() {
    let text = ok_stdout(diff(&["--iteration", "1010"]));
    assert!(text.starts_with("== trace_diff ==\n"), "{text}");
    assert!(text.contains("10 names: 3 added, 2 removed; of the 5 in both"), "{text}");
    assert!(
        text.contains("Biggest time changes (test - control): All2All_Pooled_Req +311 µs (added); AddmmBackward0 +207 µs (added); nccl:all_reduce -67 µs (removed)"),
        "{text}"
    );
    let rows: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("Name ")).skip(2).take(3).collect();
    assert!(
        rows[0].starts_with("All2All_Pooled_Req ") && rows[0].ends_with("311           1                 311  +"),
        "{rows:?}"
    );
    assert!(rows[2].starts_with("nccl:all_reduce ") && rows[2].ends_with("-67  -"), "{rows:?}");
    assert!(text.contains("Deleted (2): nccl:all_reduce, void at::native::vectorized_elementwise_kernel<4,"), "{text}");
}

#[test]
fn json_carries_ops_diff_and_units() {
    let json: Value =
        serde_json::from_str(&ok_stdout(diff(&["--format", "json", "--iteration", "1010"]))).expect("JSON");
    let want: Value = serde_json::from_str(
        &std::fs::read_to_string(data("kineto/hta_out/trace_compare/ops_diff_last_iteration.json")).expect("reference"),
    )
    .expect("JSON");
    assert_eq!(json["ops_diff"], want);
    assert_eq!(json["control"]["iterations"], serde_json::json!([1010]));
    let step = &json["ops"][0];
    assert_eq!(step["name"], "ProfilerStep#1010");
    assert_eq!(step["control_total_duration_us"], 122149.0);
    assert_eq!(step["counts_change_category"], "=");
}

/// Runs `diff` with these paths and checks it fails with exit code 2 and one line.
fn fails_with_one_line(control: &str, test: &str, extra: &[&str], wanted: &str) {
    let mut args = vec!["diff", control, test];
    args.extend_from_slice(extra);
    let out = mlprof(&args);
    assert_eq!(out.status.code(), Some(2), "{args:?}");
    assert!(out.stdout.is_empty(), "{args:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("mlprof: error: ") && stderr.contains(wanted), "{stderr}");
}

#[test]
fn bad_input_fails_with_one_line() {
    let base = path("kineto/hta/trace_compare/base/base.json.gz");
    let missing = path("kineto/hta/trace_compare/no_such_trace.json");
    fails_with_one_line(&base, &missing, &[], "no_such_trace.json");
    fails_with_one_line(&path("README.md"), &base, &[], "README.md");
    let dir = tempfile::tempdir().expect("temp dir");
    let not_json = dir.path().join("trace.json");
    std::fs::write(&not_json, "not a trace").expect("written");
    fails_with_one_line(not_json.to_str().expect("UTF-8"), &base, &[], "invalid JSON");
    fails_with_one_line(&base, &base, &["--rank", "3"], "the control profile has no rank 3; ranks: 1");
    fails_with_one_line(&base, &base, &["--iteration", "7"], "no iteration 7");
    fails_with_one_line(&base, &base, &["--iteration", "seven"], "--iteration");
}

#[test]
fn a_trace_without_events_is_nothing_to_compare() {
    let dir = tempfile::tempdir().expect("temp dir");
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, r#"{"traceEvents": []}"#).expect("written");
    let out = mlprof(&["diff", &path("kineto/hta/trace_compare/base"), empty.to_str().expect("UTF-8")]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end(),
        "mlprof: error: the test profile has no trace events to compare (events with a category and a duration)"
    );
}
