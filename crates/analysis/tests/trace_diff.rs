//! `trace_diff` against Holistic Trace Analysis 0.5.0's own `TraceDiff` output on the
//! real `trace_compare` traces (tests/data/kineto/hta_out/trace_compare, made as its
//! `_run.json` says): every row, count and duration must be equal.

use std::path::{Path, PathBuf};

use mlprof_analysis::trace_diff::{
    self, CountChange, DeviceType, IterationChoice, OpsTrace, RankChoice, SideOptions, TraceComparison, TraceDiffError,
    TraceDiffOptions,
};
use mlprof_formats::discover::load;
use mlprof_model::{Host, Session};
use serde_json::Value;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/kineto")
}

fn reference(file: &str) -> PathBuf {
    data().join("hta_out/trace_compare").join(file)
}

fn sessions(dir: &str) -> Vec<Session> {
    load(&data().join("hta/trace_compare").join(dir)).expect("trace loads")
}

fn hosts(sessions: &[Session]) -> Vec<&Host> {
    sessions.iter().flat_map(|s| &s.hosts).collect()
}

/// The records of a pandas `to_csv` file (RFC 4180 quoting).
fn read_csv(path: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).expect("reference CSV");
    let mut records = Vec::new();
    let (mut record, mut field, mut quoted, mut chars) = (Vec::new(), String::new(), false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => record.push(std::mem::take(&mut field)),
            ('\n', false) => {
                record.push(std::mem::take(&mut field));
                records.push(std::mem::take(&mut record));
            }
            _ => field.push(c),
        }
    }
    records
}

/// A CSV number that must be a whole number (`3`, `3.0`, `-67.0`).
fn whole(text: &str) -> i64 {
    let value: f64 = text.parse().unwrap_or_else(|_| panic!("not a number: {text:?}"));
    assert_eq!(value.fract(), 0.0, "{text}");
    value as i64
}

fn options(ranks: Option<i64>, iterations: IterationChoice, device: DeviceType, short: bool) -> TraceDiffOptions {
    let side = SideOptions { ranks: ranks.map_or(RankChoice::First, |r| RankChoice::Ranks(vec![r])), iterations };
    TraceDiffOptions { control: side.clone(), test: side, device, use_short_name: short }
}

fn compare(options: &TraceDiffOptions) -> TraceComparison {
    let (control, test) = (sessions("base"), sessions("test"));
    trace_diff::compare_traces(&hosts(&control), &hosts(&test), options).expect("comparison")
}

/// Every column of HTA's `compare_traces` CSV, row by row.
fn assert_matches_csv(got: &TraceComparison, file: &str) {
    let records = read_csv(&reference(file));
    let name_column = if got.use_short_name { "short_name" } else { "name" };
    let header = [
        name_column,
        "control_counts",
        "control_total_duration",
        "test_counts",
        "test_total_duration",
        "diff_counts",
        "diff_duration",
        "counts_change_categories",
    ];
    assert_eq!(records[0], header, "{file}");
    let want = &records[1..];
    assert_eq!(got.ops.len(), want.len(), "{file}: row count");
    for (op, row) in got.ops.iter().zip(want) {
        let actual = (
            op.name.as_str(),
            op.control_counts,
            op.control_total_duration_us,
            op.test_counts,
            op.test_total_duration_us,
            op.diff_counts,
            op.diff_duration_us,
            op.counts_change_category.symbol(),
        );
        let expected = (
            row[0].as_str(),
            whole(&row[1]),
            whole(&row[2]) as f64,
            whole(&row[3]),
            whole(&row[4]) as f64,
            whole(&row[5]),
            whole(&row[6]) as f64,
            row[7].as_str(),
        );
        assert_eq!(actual, expected, "{file}");
    }
}

fn assert_matches_ops_diff(got: &TraceComparison, file: &str) {
    let text = std::fs::read_to_string(reference(file)).expect("reference JSON");
    let want: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(serde_json::to_value(&got.ops_diff).expect("serialises"), want, "{file}");
}

#[test]
fn defaults_first_rank_first_iteration_all_devices() {
    let got = compare(&TraceDiffOptions::default());
    assert_matches_csv(&got, "compare_traces.csv");
    assert_matches_ops_diff(&got, "ops_diff.json");
    assert_eq!((got.control.ranks.as_slice(), got.control.iterations.as_deref()), (&[1][..], Some(&[1009][..])));
}

#[test]
fn device_types() {
    let cpu = compare(&options(None, IterationChoice::First, DeviceType::Cpu, false));
    assert_matches_csv(&cpu, "compare_traces_CPU.csv");
    assert_matches_ops_diff(&cpu, "ops_diff_CPU.json");
    let gpu = compare(&options(None, IterationChoice::First, DeviceType::Gpu, false));
    assert_matches_csv(&gpu, "compare_traces_GPU.csv");
    assert_matches_ops_diff(&gpu, "ops_diff_GPU.json");
}

#[test]
fn all_iterations() {
    let got = compare(&options(None, IterationChoice::All, DeviceType::All, false));
    assert_matches_csv(&got, "compare_traces_all_iterations.csv");
    assert_eq!(got.ops.iter().filter(|op| op.counts_change_category == CountChange::More).count(), 3);
}

#[test]
fn last_iteration_is_kept_as_hta_labeled_traces_keep_it() {
    let got = compare(&options(Some(1), IterationChoice::Iterations(vec![1010]), DeviceType::All, false));
    assert_matches_csv(&got, "compare_traces_last_iteration.csv");
    assert_matches_ops_diff(&got, "ops_diff_last_iteration.json");
}

#[test]
fn hta_unit_test_cases_with_short_names() {
    let last = IterationChoice::Iterations(vec![1010]);
    assert_matches_csv(&compare(&options(Some(1), last.clone(), DeviceType::Cpu, true)), "test_compare_traces_CPU.csv");
    assert_matches_csv(&compare(&options(Some(1), last.clone(), DeviceType::Gpu, true)), "test_compare_traces_GPU.csv");
    assert_matches_ops_diff(&compare(&options(Some(1), last, DeviceType::Cpu, false)), "test_ops_diff_CPU.json");
}

#[test]
fn ranks_and_iterations_as_labeled_trace_lists_them() {
    let text = std::fs::read_to_string(reference("labeled_traces.json")).expect("reference JSON");
    let want: Value = serde_json::from_str(&text).expect("JSON");
    for side in ["control", "test"] {
        let dir = if side == "control" { "base" } else { "test" };
        let sessions = sessions(dir);
        let trace = OpsTrace::new(&hosts(&sessions));
        assert_eq!(serde_json::to_value(trace.ranks()).expect("ranks"), want[side]["ranks"], "{side}");
        assert_eq!(serde_json::to_value(trace.iterations()).expect("iterations"), want[side]["iterations"], "{side}");
    }
}

#[test]
fn unknown_rank_and_iteration_are_errors() {
    let (control, test) = (sessions("base"), sessions("test"));
    let run = |options: &TraceDiffOptions| trace_diff::compare_traces(&hosts(&control), &hosts(&test), options);
    let err = run(&options(Some(0), IterationChoice::First, DeviceType::All, false)).expect_err("no rank 0");
    assert!(matches!(err, TraceDiffError::UnknownRank { rank: 0, .. }), "{err:?}");
    assert_eq!(err.to_string(), "the control profile has no rank 0; ranks: 1");
    let err = run(&options(None, IterationChoice::Iterations(vec![7]), DeviceType::All, false)).expect_err("no step 7");
    assert_eq!(err.to_string(), "the control profile has no iteration 7 (ProfilerStep#7); iterations: 1009, 1010");
}

#[test]
fn whole_trace_counts_rows_outside_every_step() {
    let got = compare(&options(None, IterationChoice::WholeTrace, DeviceType::Cpu, false));
    assert_eq!(got.control.iterations, None);
    // aten::zeros (before ProfilerStep#1009) and cudaDeviceSynchronize (after #1010)
    // are in no iteration: only the whole trace counts them.
    let zeros = got.ops.iter().find(|op| op.name == "aten::zeros").expect("aten::zeros");
    assert_eq!((zeros.control_counts, zeros.control_total_duration_us), (1, 25.0));
    let sync = got.ops.iter().find(|op| op.name == "cudaDeviceSynchronize").expect("sync");
    assert_eq!((sync.test_counts, sync.test_total_duration_us), (1, 582.0));
    assert_eq!(got.control.selected_rows, 15);
}

/// The options of one `extra/cases.json` entry (see `extra/make_reference.py`).
fn case_options(spec: &Value) -> TraceDiffOptions {
    let ranks = |side: &str| match spec.get(format!("{side}_rank")).or_else(|| spec.get("rank")) {
        None => RankChoice::First,
        Some(Value::Array(list)) => RankChoice::Ranks(list.iter().filter_map(Value::as_i64).collect()),
        Some(value) => RankChoice::Ranks(value.as_i64().into_iter().collect()),
    };
    let iterations = match spec.get("iteration") {
        None => IterationChoice::First,
        Some(Value::String(all)) if all == "all" => IterationChoice::All,
        Some(value) => IterationChoice::Iterations(value.as_i64().into_iter().collect()),
    };
    let device = match spec.get("device").and_then(Value::as_str) {
        Some("CPU") => DeviceType::Cpu,
        Some("GPU") => DeviceType::Gpu,
        _ => DeviceType::All,
    };
    TraceDiffOptions {
        control: SideOptions { ranks: ranks("control"), iterations: iterations.clone() },
        test: SideOptions { ranks: ranks("test"), iterations },
        device,
        use_short_name: spec.get("short").and_then(Value::as_bool).unwrap_or(false),
    }
}

/// More pairs of HTA's traces, through HTA 0.5.0 (`extra/`): nanosecond traces (HTA's
/// float rounding), AMD and Triton traces, GPU `ProfilerStep` annotations, two ranks
/// pooled, short names.
#[test]
fn more_trace_pairs_match_hta() {
    let text = std::fs::read_to_string(reference("extra/cases.json")).expect("cases");
    let cases: serde_json::Map<String, Value> = serde_json::from_str(&text).expect("JSON");
    assert_eq!(cases.len(), 9);
    for (case, spec) in &cases {
        let dir = |side: &str| spec[side].as_str().map(|d| data().join("hta").join(d)).expect("trace dir");
        let control = load(&dir("control")).expect("control loads");
        let test = load(&dir("test")).expect("test loads");
        let got = trace_diff::compare_traces(&hosts(&control), &hosts(&test), &case_options(spec)).expect(case);
        assert!(!got.ops.is_empty(), "{case}");
        assert_matches_csv(&got, &format!("extra/{case}.csv"));
        if reference(&format!("extra/{case}.ops_diff.json")).exists() {
            assert_matches_ops_diff(&got, &format!("extra/{case}.ops_diff.json"));
        }
    }
}
