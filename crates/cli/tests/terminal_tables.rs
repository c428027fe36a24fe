//! What `mlprof analyze` prints for people on a terminal: every tool on the bundled
//! examples fits 100 columns (`COLUMNS=100`) and matches its `insta` snapshot
//! (`tests/snapshots/terminal_tables__*.snap`; review changes with `cargo insta review`,
//! or set `INSTA_UPDATE=always` and read the diff); `--top N` / `--all` choose the rows;
//! every tool numbers steps as the profile does.

mod common;

use common::{data, mlprof, mlprof_at_width, ok_stdout};

/// The examples of the README's quick start.
const EXAMPLES: [&str; 2] = ["pytorch", "tensorflow"];

/// Every tool with a text report.
const TOOLS: [&str; 12] = [
    "overview_page",
    "input_pipeline_analyzer",
    "framework_op_stats",
    "kernel_stats",
    "memory_profile",
    "pod_viewer",
    "tf_data_bottleneck_analysis",
    "gpu",
    "transfers",
    "steps",
    "python",
    "tfprof",
];

fn example(name: &str) -> String {
    data(&format!("../../examples/{name}")).to_str().expect("UTF-8 path").to_string()
}

fn widest_line(text: &str) -> usize {
    text.lines().map(|line| line.chars().count()).max().unwrap_or(0)
}

#[test]
fn every_tool_fits_100_columns_and_matches_its_snapshot() {
    let mut rendered = 0;
    for name in EXAMPLES {
        let path = example(name);
        for tool in TOOLS {
            let out = mlprof_at_width(&["analyze", &path, "--tool", tool], 100);
            let stderr = String::from_utf8_lossy(&out.stderr);
            if out.status.code() == Some(1) {
                // Nothing of this kind in this profile (no GPU in the TF example): one line.
                assert_eq!(stderr.lines().count(), 1, "{name} {tool}: {stderr}");
                continue;
            }
            let text = ok_stdout(out);
            assert!(widest_line(&text) <= 100, "{name} {tool}: a line of {} characters:\n{text}", widest_line(&text));
            insta::assert_snapshot!(format!("{name}__{tool}"), text);
            rendered += 1;
        }
    }
    assert!(rendered >= 18, "most tools have something to show on the examples ({rendered})");
}

#[test]
fn a_narrow_terminal_keeps_the_key_columns_and_says_what_it_left_out() {
    let out = ok_stdout(mlprof_at_width(&["analyze", &example("pytorch"), "--tool", "kernel_stats"], 60));
    assert!(widest_line(&out) <= 60, "{out}");
    let header: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("Kernel name")).take(1).collect();
    assert_eq!(header.len(), 1, "the kernel name leads: {out}");
    assert!(out.contains("Columns left out to fit 60 characters: Registers per thread,"), "{out}");
    assert!(out.contains('…'), "long kernel names are shortened in the middle: {out}");
}

#[test]
fn top_and_all_choose_the_rows() {
    let path = example("pytorch");
    // The rows between the rule under the header and the end of the table.
    let rows = |text: &str| {
        let body = text.lines().skip_while(|l| !l.starts_with("----"));
        body.skip(1).take_while(|l| !l.is_empty() && !l.starts_with('…')).count()
    };
    let csv = ok_stdout(mlprof(&["analyze", &path, "--tool", "framework_op_stats", "--format", "csv"]));
    let every = csv.lines().count() - 1;
    assert!(every > 100, "{every}");

    let terminal = ok_stdout(mlprof_at_width(&["analyze", &path, "--tool", "framework_op_stats"], 200));
    assert_eq!(rows(&terminal), 25, "a terminal gets the top 25 rows:\n{terminal}");
    assert!(terminal.contains(&format!("… {} more rows (--top N shows N rows", every - 25)), "{terminal}");

    let three = ok_stdout(mlprof_at_width(&["analyze", &path, "--tool", "framework_op_stats", "--top", "3"], 200));
    assert_eq!(rows(&three), 3);
    let all = ok_stdout(mlprof_at_width(&["analyze", &path, "--tool", "framework_op_stats", "--all"], 200));
    assert_eq!(rows(&all), every);
    assert!(!all.contains("more rows"));
    let piped = ok_stdout(mlprof(&["analyze", &path, "--tool", "framework_op_stats"]));
    assert_eq!(rows(&piped), every, "a pipe gets every row at full width");

    let both = mlprof(&["analyze", &path, "--tool", "framework_op_stats", "--top", "3", "--all"]);
    assert_eq!(both.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&both.stderr).lines().count(), 1, "one line");
}

#[test]
fn a_column_that_repeats_another_is_shown_once_and_said_so() {
    // PyTorch's kernels report TensorCore use exactly when their op is eligible.
    let out = ok_stdout(mlprof(&["analyze", &example("pytorch"), "--tool", "overview_page"]));
    assert!(out.contains("Uses TensorCore is not shown: it equals TensorCore eligible in every row."), "{out}");
    let csv = ok_stdout(mlprof(&["analyze", &example("pytorch"), "--tool", "framework_op_stats", "--format", "csv"]));
    assert!(csv.lines().nth(1).is_some_and(|l| l.starts_with("1,Device,IDLE,IDLE,")), "{csv}");
}

#[test]
fn a_narrow_step_table_keeps_the_categories_that_take_the_most() {
    let out = ok_stdout(mlprof_at_width(&["analyze", &example("pytorch"), "--tool", "overview_page"], 80));
    let header: String =
        out.lines().skip_while(|l| !l.starts_with("## Step time by category")).skip(1).take(2).collect();
    assert!(header.contains("others"), "All others, the largest category, stays: {out}");
    assert!(out.contains("Columns left out to fit 80 characters: Device to device, Input, Output,"), "{out}");
}

#[test]
fn every_per_step_table_keeps_the_category_an_input_bound_job_waits_on() {
    // The TF example waits for input in 91 % of each step; Input comes late in table order.
    for (tool, header) in [("pod_viewer", "Step  Host"), ("steps", "Host  Step"), ("overview_page", "Step")] {
        let out = ok_stdout(mlprof_at_width(&["analyze", &example("tensorflow"), "--tool", tool], 80));
        let lines: Vec<&str> = out.lines().collect();
        let at = lines.iter().position(|l| l.starts_with(header) && l.contains("time")).unwrap_or(0);
        let headers = format!("{} {}", lines[at.saturating_sub(1)], lines[at]);
        assert!(headers.contains("Input"), "{tool} at 80 columns must keep Input: {out}");
        assert!(out.contains("Columns left out to fit 80 characters:"), "{tool} is narrowed: {out}");
    }
    let memory = ok_stdout(mlprof_at_width(&["analyze", &example("tensorflow"), "--tool", "memory_profile"], 80));
    assert!(memory.contains("in profile (bytes)"), "the peak stays: {memory}");
    assert!(memory.contains("Columns left out to fit 80 characters: #Allocations"), "counts go first: {memory}");
}

#[test]
fn every_tool_numbers_steps_as_the_profile_does() {
    // The TF example's steps are `train 5` … `train 10`; PyTorch's `ProfilerStep#551`, 552.
    for (name, numbers) in [("tensorflow", vec![5, 6, 7, 8, 9, 10]), ("pytorch", vec![551, 552])] {
        let path = example(name);
        let json = |tool: &str| -> serde_json::Value {
            serde_json::from_str(&ok_stdout(mlprof(&["analyze", &path, "--tool", tool, "--format", "json"])))
                .expect("JSON")
        };
        let steps = json("steps");
        let listed: Vec<i64> = steps["hosts"][0]["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .map(|s| s["profile_step"].as_i64().expect("profile_step"))
            .collect();
        assert_eq!(listed, numbers, "{name}: the steps tool");
        let pod = json("pod_viewer");
        let pod = &pod["tools"]["pod_viewer"];
        let pod_steps: Vec<i64> =
            pod["steps"].as_array().expect("steps").iter().map(|s| s["profile_step"].as_i64().expect("n")).collect();
        assert_eq!(pod_steps, numbers, "{name}: pod_viewer");
        let tfprof = ok_stdout(mlprof(&["analyze", &path, "--tool", "tfprof"]));
        let list: Vec<String> = numbers.iter().map(i64::to_string).collect();
        assert!(tfprof.contains(&format!("({} found: {})", numbers.len(), list.join(", "))), "{name}: {tfprof}");
    }
    // The memory profile's peak is in train 10.
    let memory = ok_stdout(mlprof(&["analyze", &example("tensorflow"), "--tool", "memory_profile"]));
    assert!(memory.contains("at 451.090 ms (step 10)"), "{memory}");
}
