//! `mlprof analyze --tool transfers` end to end on real Kineto traces: the table, JSON
//! and CSV forms, `--gap-threshold` with units, and bad requests (one line, exit 2).

use std::process::Output;

use serde_json::Value;

mod common;

use common::{data_str as data, mlprof, ok_stdout};

fn failure(out: Output) -> String {
    assert_eq!(out.status.code(), Some(2), "bad input exits with 2");
    assert!(out.stdout.is_empty(), "no partial output on stdout");
    let stderr = String::from_utf8(out.stderr).expect("UTF-8 stderr");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    stderr
}

fn simple_add() -> String {
    data("kineto/hta/critical_path/simple_add")
}

#[test]
fn table_ranks_findings_and_says_how_steps_were_counted() {
    let text = ok_stdout(mlprof(&["analyze", &simple_add(), "--tool", "transfers"]));
    assert!(text.starts_with("== transfers =="), "{text}");
    assert!(text.contains("no step markers; totals over the profile"), "{text}");
    let pageable = text.lines().find(|l| l.contains("pageable_copy")).expect("pageable row");
    // 16 copies, 40.085 ms blocked in cudaMemcpyAsync, 244.403 MB.
    assert!(
        pageable.contains("aten::copy_") && pageable.contains("40.085") && pageable.contains("244.403"),
        "{pageable}"
    );
    assert!(text.contains("PCIe Gen4 x16 (A100 40GB)"), "{text}");
    assert!(text.contains("## What to change"), "{text}");
}

/// On the bundled PyTorch trace (a Shampoo optimizer, many gaps of one cause): each
/// piece of advice is written once for the findings it serves, a gap with nothing
/// recorded is not "nothing recorded: —", and the optimizer in use is the one advised.
#[test]
fn an_xspace_without_a_steps_line_counts_the_steps_every_tool_finds() {
    // A JAX GPU profile whose device planes have no derived Steps line.
    let path = data("xspace/jax_gpu_h200/logdir");
    let json: Value =
        serde_json::from_str(&ok_stdout(mlprof(&["analyze", &path, "--tool", "transfers", "--format", "json"])))
            .expect("JSON");
    let steps: Value =
        serde_json::from_str(&ok_stdout(mlprof(&["analyze", &path, "--tool", "steps", "--format", "json"])))
            .expect("JSON");
    let listed = steps["hosts"][0]["steps"].as_array().expect("steps").len() as u64;
    assert_eq!(listed, 10);
    assert_eq!(json["hosts"][0]["steps"].as_u64(), Some(listed), "{}", json["hosts"][0]);
    assert_eq!(json["hosts"][0]["step_source"], "the step groups every step tool uses");
}

#[test]
fn advice_is_said_once_and_fits_the_optimizer_in_use() {
    let trace = common::data("../../examples/pytorch");
    let text = ok_stdout(mlprof(&["analyze", trace.to_str().expect("UTF-8"), "--tool", "transfers"]));
    let fixes: Vec<&str> =
        text.split("## What to change\n").nth(1).expect("fixes").split("\n\n").next().expect("").lines().collect();
    let advice: Vec<&str> = fixes.iter().filter_map(|l| l.split_once(" — ").map(|(_, fix)| fix)).collect();
    let mut distinct = advice.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), advice.len(), "{fixes:#?}");
    assert!(fixes.iter().any(|l| l.starts_with("#2, #3, #5")), "{fixes:#?}");
    assert!(fixes.iter().any(|l| l.contains("(`Shampoo`)")) && !text.contains("AdamW"), "{fixes:#?}");
    assert!(!text.contains("nothing recorded: —"), "{text}");
}

#[test]
fn json_has_findings_with_units_and_per_step_values() {
    let out = mlprof(&["analyze", &data("kineto/hta/nccl_parser_config"), "--tool", "transfers", "--format", "json"]);
    let json: Value = serde_json::from_str(&ok_stdout(out)).expect("json");
    assert_eq!(json["gap_threshold_ps"], 100_000_000);
    assert_eq!(json["hosts"][0]["steps"], 3);
    let findings = json["findings"].as_array().expect("findings");
    let event_sync = findings.iter().find(|f| f["what"] == "cudaEventSynchronize").expect("event sync finding");
    assert_eq!(event_sync["kind"], "sync_call");
    assert_eq!(event_sync["count"], 24);
    let total = event_sync["time_lost_ps"].as_i64().expect("ps");
    assert_eq!(event_sync["time_lost_per_step_ps"].as_i64(), Some(total / 3));
}

#[test]
fn gap_threshold_accepts_units() {
    let count = |threshold: &str| {
        let out = mlprof(&[
            "analyze",
            &data("kineto/hta/nccl_parser_config"),
            "--tool",
            "transfers",
            "--format",
            "json",
            "--gap-threshold",
            threshold,
        ]);
        let json: Value = serde_json::from_str(&ok_stdout(out)).expect("json");
        json["hosts"][0]["gaps"][0]["count"].as_i64().expect("gap count")
    };
    // The Python reference counts 1281 gaps over 100 us.
    assert_eq!(count("100us"), 1281);
    assert_eq!(count("0.1ms"), 1281);
    assert!(count("1ms") < count("50us"));
}

#[test]
fn csv_is_the_findings_table() {
    let out = mlprof(&["analyze", &simple_add(), "--tool", "transfers", "--format", "csv"]);
    let csv = ok_stdout(out);
    let header = csv.lines().next().expect("header");
    assert_eq!(header, "#,Kind,What,Where,GPU,Count,Time lost (ms),Per step (ms),MB");
    assert!(csv.lines().any(|l| l.contains("pageable_copy")), "{csv}");
}

#[test]
fn bad_requests_fail_with_one_line() {
    let stderr = failure(mlprof(&["analyze", &simple_add(), "--tool", "transfers", "--gap-threshold", "fast"]));
    assert!(stderr.contains("--gap-threshold"), "{stderr}");
    let stderr = failure(mlprof(&["analyze", &simple_add(), "--tool", "transfers", "--gap-threshold", "5 parsecs"]));
    assert!(stderr.contains("unknown unit"), "{stderr}");
    // One rule for every duration: a unit, or 0 (a bare 50 was µs here, ms for --duration).
    let stderr = failure(mlprof(&["analyze", &simple_add(), "--tool", "transfers", "--gap-threshold", "50"]));
    assert!(stderr.contains("\"50\" has no unit: write 50us, 50ms or 50s"), "{stderr}");
    let stderr = failure(mlprof(&["capture", "127.0.0.1:1", "--duration", "1500"]));
    assert!(stderr.contains("\"1500\" has no unit"), "{stderr}");
    let stderr = failure(mlprof(&["analyze", "/no/such/trace.json", "--tool", "transfers"]));
    assert!(stderr.contains("/no/such/trace.json"), "{stderr}");
    let stderr = failure(mlprof(&["analyze", &simple_add(), "--tool", "transfers", "--format", "xprof-json"]));
    assert!(stderr.contains("transfers"), "{stderr}");
    let stderr = failure(mlprof(&["analyze", &simple_add(), "--tool", "overview_page", "--gap-threshold", "1ms"]));
    assert!(stderr.contains("--gap-threshold is for --tool transfers"), "{stderr}");
}
