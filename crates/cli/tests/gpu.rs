//! `mlprof analyze --tool gpu` end to end on a real two-rank GPU trace directory:
//! table, JSON, CSV, HTA-compatible CSV files, analysis selection, and bad requests.

use std::process::Output;

use serde_json::Value;

mod common;

use common::{data, mlprof, ok_stdout};

fn failure(out: Output) -> String {
    assert!(!out.status.success(), "expected a failure");
    assert!(out.stdout.is_empty(), "no partial output on stdout");
    let stderr = String::from_utf8(out.stderr).expect("UTF-8 stderr");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    stderr
}

fn two_ranks() -> String {
    data("kineto/hta/trace_filter").to_str().expect("UTF-8 path").to_string()
}

#[test]
fn table_shows_hta_numbers_for_both_ranks() {
    let text = ok_stdout(mlprof(&["analyze", &two_ranks(), "--tool", "gpu"]));
    assert!(text.contains("## Temporal breakdown"), "{text}");
    // HTA 0.5.0: rank 0 idle 321378 us of 600058 us (53.56 %).
    let rank0 = text.lines().find(|l| l.trim_start().starts_with("0  ") && l.contains("321378")).unwrap_or("");
    assert!(rank0.contains("600058") && rank0.contains("53.56"), "{text}");
    assert!(text.contains("COMPUTATION overlapping COMMUNICATION"), "{text}");
    assert!(text.contains("11.81") && text.contains("20.05"), "overlap per rank: {text}");
}

#[test]
fn json_holds_the_selected_analyses_only() {
    let out = mlprof(&[
        "analyze",
        &two_ranks(),
        "--tool",
        "gpu",
        "--analyses",
        "comm_comp_overlap,idle_time_breakdown",
        "--format",
        "json",
    ]);
    let json: Value = serde_json::from_str(&ok_stdout(out)).expect("json");
    assert_eq!(json["ranks"], serde_json::json!([0, 1]));
    assert_eq!(json["comm_comp_overlap"][1]["comp_comm_overlap_pctg"], 20.05);
    assert!(json.get("temporal_breakdown").is_none());
    let idle = json["idle_time_breakdown"].as_array().expect("idle rows");
    let host_wait = idle
        .iter()
        .find(|r| r["rank"] == 0 && r["stream"] == 23 && r["idle_category"] == "host_wait")
        .expect("rank 0 stream 23 host_wait");
    assert_eq!(host_wait["idle_time_us"], 596037.0);
}

/// `--format csv` writes one table; stderr says which, and where the others are.
#[test]
fn csv_says_which_table_it_wrote_and_where_the_others_are() {
    let out = mlprof(&["analyze", &two_ranks(), "--tool", "gpu", "--format", "csv"]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let csv = ok_stdout(out);
    assert!(csv.starts_with("Rank,Idle (us),Compute (us)"), "{csv}");
    assert_eq!(
        stderr.trim_end(),
        "mlprof: --format csv writes the main table of --tool gpu, \"Temporal breakdown\"; its 7 other tables are in \
         the table output (--format hta-csv --output DIR writes each as a CSV file, --format json has them all)"
    );
    let one_table = mlprof(&["analyze", &two_ranks(), "--tool", "steps", "--format", "csv"]);
    assert!(one_table.stderr.is_empty(), "{}", String::from_utf8_lossy(&one_table.stderr));
}

#[test]
fn hta_csv_writes_one_file_per_analysis_with_hta_columns() {
    let dir = std::env::temp_dir().join(format!("mlprof-hta-csv-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let listing = ok_stdout(mlprof(&[
        "analyze",
        &two_ranks(),
        "--tool",
        "gpu",
        "--format",
        "hta-csv",
        "--output",
        dir.to_str().expect("UTF-8 path"),
    ]));
    for (file, header) in [
        (
            "temporal_breakdown.csv",
            "rank,idle_time(us),compute_time(us),non_compute_time(us),kernel_time(us),idle_time_pctg,compute_time_pctg,non_compute_time_pctg",
        ),
        ("idle_time_breakdown.csv", "rank,stream,idle_category,idle_time,idle_time_ratio"),
        ("kernel_breakdown.csv", "name,sum (us),max (us),min (us),stddev,mean (us),kernel_type,rank"),
        ("comm_comp_overlap.csv", "rank,comp_comm_overlap_pctg"),
        ("cuda_kernel_launch_stats.csv", "rank,correlation,cpu_duration,gpu_duration,launch_delay"),
        ("queue_length_summary.csv", "rank,stream,count,mean,std,min,25%,50%,75%,max"),
        ("memory_bw_summary.csv", "rank,name,count,mean,std,min,25%,50%,75%,max"),
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(text.lines().next(), Some(header), "{file}");
        assert!(text.lines().count() > 1, "{file} has rows");
        assert!(listing.contains(file), "{listing}");
    }
    let temporal = std::fs::read_to_string(dir.join("temporal_breakdown.csv")).expect("temporal");
    assert!(temporal.contains("\n0,321378.0,106252.0,172428.0,600058.0,53.56,17.71,28.74\n"), "{temporal}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_requests_fail_with_one_line() {
    let trace = two_ranks();
    let no_dir = failure(mlprof(&["analyze", &trace, "--tool", "gpu", "--format", "hta-csv"]));
    assert!(no_dir.contains("--output"), "{no_dir}");
    let unknown = failure(mlprof(&["analyze", &trace, "--tool", "gpu", "--analyses", "temporal,bogus"]));
    assert!(unknown.contains("unknown gpu analysis \"temporal\""), "{unknown}");
    let wrong_tool = failure(mlprof(&["analyze", &trace, "--format", "hta-csv"]));
    assert!(wrong_tool.contains("--tool gpu"), "{wrong_tool}");
    let xprof = failure(mlprof(&["analyze", &trace, "--tool", "gpu", "--format", "xprof-json"]));
    assert!(xprof.contains("XProf has no gpu tool"), "{xprof}");
}
