//! `mlprof analyze --tool tfprof` end to end on the real fixtures, checked against
//! references that do not go through tfprof: `framework_op_stats` (per-type self
//! times, accounted totals), the stdlib-Python op reference of each Kineto trace
//! (`tests/data/kineto/ops_ref`), JAX's own trace export, and the raw trace JSON (the
//! Python `<module>` span, `[memory]` events). Also every view in every format on every
//! fixture, the regex filters, steps, the timeline output, one-line errors, and a
//! snapshot of one table (`MLPROF_UPDATE_SNAPSHOTS=1` rewrites it).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

use common::{data, mlprof, ok_stdout};

/// `--tool tfprof --format json` on `path` with `args`.
fn tfprof(path: &Path, args: &[&str]) -> Value {
    let path = path.to_str().expect("UTF-8 path");
    let mut all = vec!["analyze", path, "--tool", "tfprof", "--format", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok_stdout(mlprof(&all))).expect("tfprof JSON")
}

/// `framework_op_stats` as JSON.
fn op_stats(path: &Path) -> Value {
    let path = path.to_str().expect("UTF-8 path");
    let out = ok_stdout(mlprof(&["analyze", path, "--tool", "framework_op_stats", "--format", "json"]));
    let json: Value = serde_json::from_str(&out).expect("JSON");
    json["tools"]["framework_op_stats"].clone()
}

const XSPACE: &[&str] = &["tf_keras2_input_bound", "tf_keras_pipelined", "tf_custom_loop", "jax_profile"];
const TORCH: &str = "kineto/torch_profile/logdir";
/// Kineto traces with an op reference in `tests/data/kineto/ops_ref`.
const KINETO_WITH_REFERENCE: &[(&str, &str)] = &[
    ("kineto/torch_profile/logdir", "torch_profile"),
    ("kineto/hta/timeline_analysis/sampled_rank-0.json.gz", "timeline_analysis"),
    ("kineto/hta/nccl_parser_config/nccl_data.json.gz", "nccl_parser_config"),
    ("kineto/hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz", "simple_add"),
    ("kineto/torch_gpu_h200/logdir", "torch_gpu_h200"),
];

fn all_fixtures() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = XSPACE.iter().map(|case| data(&format!("xspace/{case}/logdir"))).collect();
    paths.extend(KINETO_WITH_REFERENCE.iter().map(|(path, _)| data(path)));
    for extra in
        ["kineto/hta/amd_trace", "kineto/hta/cpu_only", "kineto/hta/ns_resolution_trace", "kineto/hta/call_stack"]
    {
        paths.push(data(extra));
    }
    paths
}

fn rows(result: &Value) -> &Vec<Value> {
    result["rows"].as_array().expect("rows")
}

fn row<'r>(result: &'r Value, name: &str) -> &'r Value {
    rows(result).iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no row {name}"))
}

fn int(value: &Value) -> i64 {
    value.as_i64().unwrap_or_else(|| panic!("not an integer: {value}"))
}

/// Picoseconds as microseconds.
fn us(ps: &Value) -> f64 {
    int(ps) as f64 / 1e6
}

fn close(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 1e-3 + 1e-9 * b.abs(), "{what}: {a} vs {b}");
}

#[test]
fn every_view_runs_in_every_format_on_every_fixture() {
    for path in all_fixtures() {
        let shown = path.to_str().expect("UTF-8");
        for view in ["scope", "op", "code", "graph"] {
            let select = "micros,occurrence,bytes,peak_bytes,residual_bytes,output_bytes,params,float_ops,device,op_types,input_shapes";
            let json = tfprof(&path, &["--view", view, "--select", select]);
            assert!(!rows(&json).is_empty(), "{shown} {view}");
            let table = ok_stdout(mlprof(&["analyze", shown, "--tool", "tfprof", "--view", view]));
            assert!(table.starts_with("== tfprof ==\n\n## tfprof ") && table.contains(view), "{shown} {view}");
            let csv = ok_stdout(mlprof(&["analyze", shown, "--tool", "tfprof", "--view", view, "--format", "csv"]));
            let header = if view == "op" { "Op type,micros," } else { "Node,micros," };
            assert!(csv.starts_with(header), "{shown} {view}: {}", csv.lines().next().unwrap_or(""));
        }
    }
}

/// The op view's per-type own CPU and accelerator times, by type.
fn op_view_times(path: &Path) -> BTreeMap<String, (i64, i64)> {
    let json = tfprof(path, &["--view", "op", "--max-depth", "100000"]);
    assert_eq!(json["rows_cut"], 0);
    rows(&json)
        .iter()
        .map(|r| {
            (
                r["name"].as_str().expect("name").to_string(),
                (int(&r["own"]["cpu_ps"]), int(&r["own"]["accelerator_ps"])),
            )
        })
        .collect()
}

/// The op view's type of a `framework_op_stats` row: its type, except that a PyTorch op,
/// typed by its library there (`aten`), is its own type in the op view (`aten::mm`), as
/// in PyTorch's own op table.
fn op_view_type(row: &Value) -> &str {
    let (name, op_type) = (row["op_name"].as_str().expect("name"), row["op_type"].as_str().expect("type"));
    let library = name.split(['<', '(', ' ']).next().unwrap_or(name).rsplit_once("::").map_or("op", |(l, _)| l);
    if op_type == library { name } else { op_type }
}

#[test]
fn op_view_types_add_up_to_framework_op_stats_self_times() {
    let paths: Vec<PathBuf> = XSPACE
        .iter()
        .map(|case| data(&format!("xspace/{case}/logdir")))
        .chain(KINETO_WITH_REFERENCE.iter().map(|(path, _)| data(path)))
        .collect();
    for path in paths {
        let stats = op_stats(&path);
        let table = &stats["without_idle"]["rows"];
        let table = table.as_array().expect("rows");
        for side in ["Host", "Device"] {
            assert!(table.iter().filter(|r| r["host_or_device"] == side).count() < 500, "rows capped at 500");
        }
        let mut reference: BTreeMap<String, (f64, f64)> = BTreeMap::new();
        for r in table {
            let entry = reference.entry(op_view_type(r).to_string()).or_default();
            let self_us = r["total_self_time_us"].as_f64().expect("self time");
            if r["host_or_device"] == "Host" { entry.0 += self_us } else { entry.1 += self_us }
        }
        let ours = op_view_times(&path);
        for (op_type, (cpu, device)) in &reference {
            let (our_cpu, our_device) = ours.get(op_type).copied().unwrap_or_default();
            close(our_cpu as f64 / 1e6, *cpu, &format!("{} {op_type} host", path.display()));
            close(our_device as f64 / 1e6, *device, &format!("{} {op_type} device", path.display()));
        }
        // Every type with time is in the reference (XLA ops aside, which it cannot name).
        for (op_type, (cpu, device)) in &ours {
            if cpu + device > 0 && !path.to_string_lossy().contains("jax") {
                assert!(reference.contains_key(op_type), "{}: {op_type} not in framework_op_stats", path.display());
            }
        }
        // The scope tree's root is every accounted op once.
        let scope = tfprof(&path, &[]);
        let accounted = int(&stats["host_op_time_ps"]) + int(&stats["device_op_time_ps"]);
        if !path.to_string_lossy().contains("jax") {
            assert_eq!(int(&scope["total"]["micros_ps"]), accounted, "{}", path.display());
        }
        for view in ["op", "code", "graph"] {
            let other = tfprof(&path, &["--view", view]);
            assert_eq!(other["total"]["micros_ps"], scope["total"]["micros_ps"], "{} {view}", path.display());
        }
    }
}

#[test]
fn kineto_op_view_matches_the_independent_op_reference() {
    for (path, case) in KINETO_WITH_REFERENCE {
        let reference: Value = serde_json::from_str(
            &std::fs::read_to_string(data(&format!("kineto/ops_ref/{case}.json"))).expect("reference exists"),
        )
        .expect("reference JSON");
        let mut expected: BTreeMap<String, (f64, i64, f64)> = BTreeMap::new();
        let mut events = 0;
        for op in reference["host_ops"].as_array().expect("host ops") {
            let op_type = op["type"].as_str().expect("type");
            let op_view_type = if op_type.starts_with("CUDA ") { op_type } else { op["name"].as_str().expect("name") };
            let entry = expected.entry(op_view_type.to_string()).or_default();
            entry.0 += op["self_us"].as_f64().expect("self");
            entry.1 += int(&op["count"]);
            events += int(&op["count"]);
        }
        for op in reference["device_ops"].as_array().expect("device ops") {
            let launcher = op["op"].as_str().expect("op");
            let entry = expected.entry(if launcher.is_empty() { "Unknown" } else { launcher }.to_string()).or_default();
            entry.2 += op["total_us"].as_f64().expect("time");
            events += int(&op["count"]);
            if launcher.is_empty() {
                entry.1 += int(&op["count"]);
            }
        }
        let timeline = std::env::temp_dir().join(format!("mlprof-tfprof-{case}-{}.json", std::process::id()));
        let output = format!("timeline:{}", timeline.display());
        let json = tfprof(&data(path), &["--view", "op", "--max-depth", "100000", "--output", &output]);
        for (op_type, (cpu_us, runs, device_us)) in &expected {
            let node = row(&json, op_type);
            close(us(&node["own"]["cpu_ps"]), *cpu_us, &format!("{case} {op_type} cpu"));
            close(us(&node["own"]["accelerator_ps"]), *device_us, &format!("{case} {op_type} device"));
            assert_eq!(int(&node["own"]["occurrence"]), *runs, "{case} {op_type} runs");
        }
        close(us(&json["total"]["cpu_ps"]), reference["host"]["op_time_us"].as_f64().expect("op time"), case);
        // The timeline holds one event per op run and per GPU activity.
        let trace: Value = serde_json::from_str(&std::fs::read_to_string(&timeline).expect("timeline written"))
            .expect("timeline JSON");
        let written = trace["traceEvents"].as_array().expect("events").iter().filter(|e| e["ph"] == "X").count();
        assert_eq!(written as i64, events, "{case} timeline events");
        std::fs::remove_file(&timeline).ok();
    }
}

/// The events of a Chrome trace file (plain or gzipped).
fn trace_events(path: &Path) -> Vec<Value> {
    let bytes = std::fs::read(path).expect("trace exists");
    let mut text = String::new();
    if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut text).expect("gunzip");
    } else {
        text = String::from_utf8(bytes).expect("UTF-8");
    }
    let json: Value = serde_json::from_str(&text).expect("trace JSON");
    json["traceEvents"].as_array().expect("events").clone()
}

fn ts(event: &Value) -> f64 {
    event["ts"].as_f64().unwrap_or(0.0)
}

fn end(event: &Value) -> f64 {
    ts(event) + event["dur"].as_f64().unwrap_or(0.0)
}

#[test]
fn torch_code_view_top_frame_holds_every_op_and_memory_follows_the_allocating_op() {
    let path = data(TORCH);
    let trace_file = std::fs::read_dir(&path)
        .expect("logdir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.to_string_lossy().ends_with(".pt.trace.json"))
        .expect("trace file");
    let events = trace_events(&trace_file);
    let module = events
        .iter()
        .find(|e| e["cat"] == "python_function" && e["name"] == "torch_profile.py(67): <module>")
        .expect("<module> frame");
    let ops: Vec<&Value> = events.iter().filter(|e| e["cat"] == "cpu_op").collect();
    assert!(ops.iter().all(|op| ts(op) >= ts(module) && end(op) <= end(module)), "every op runs under <module>");
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(data("kineto/ops_ref/torch_profile.json")).expect("reference"))
            .expect("JSON");
    let code = tfprof(&path, &["--view", "code", "--max-depth", "1"]);
    let top = row(&code, "torch_profile.py:67:<module>");
    close(us(&top["total"]["micros_ps"]), reference["host"]["op_time_us"].as_f64().expect("op time"), "<module>");
    assert_eq!(top["total"], code["total"]);
    assert!(rows(&code).iter().all(|r| r["name"] != "(no Python frame)"));

    // Bytes: every allocation made while a cpu_op ran on its thread, counted once.
    let allocated: i64 = events
        .iter()
        .filter(|e| e["name"] == "[memory]" && e["args"]["Bytes"].as_i64().is_some_and(|b| b > 0))
        .filter(|m| ops.iter().any(|op| op["tid"] == m["tid"] && ts(op) <= ts(m) && ts(m) <= end(op)))
        .map(|m| int(&m["args"]["Bytes"]))
        .sum();
    let scope = tfprof(&path, &["--select", "bytes,peak_bytes,residual_bytes"]);
    assert_eq!(int(&scope["total"]["requested_bytes"]), allocated);
    assert!(int(&scope["total"]["residual_bytes"]) <= allocated);
    for r in rows(&scope).iter().skip(1) {
        let own = &r["own"];
        assert!(int(&own["residual_bytes"]) <= int(&own["requested_bytes"]), "{}", r["name"]);
        assert!(int(&own["peak_bytes"]) <= int(&own["requested_bytes"]), "{}", r["name"]);
    }
}

#[test]
fn jax_xla_ops_match_jax_own_trace_export() {
    let path = data("xspace/jax_profile/logdir");
    let export = std::fs::read_dir(data("xspace/jax_profile/logdir/plugins/profile"))
        .expect("profile dir")
        .filter_map(Result::ok)
        .map(|e| e.path().join("vm.trace.json.gz"))
        .find(|p| p.exists())
        .expect("JAX's trace export");
    // Self time of the `hlo_op` events JAX exported, nested by time per thread.
    let mut by_thread: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for event in trace_events(&export).iter().filter(|e| e["args"]["hlo_op"].is_string()) {
        by_thread.entry(format!("{}/{}", event["pid"], event["tid"])).or_default().push((ts(event), end(event)));
    }
    let (mut self_us, mut runs) = (0.0, 0);
    for spans in by_thread.values_mut() {
        // Nest by start, longer first; each span's self time is its duration minus its
        // direct children's.
        spans.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut children = vec![0.0; spans.len()];
        let mut open: Vec<usize> = Vec::new();
        for (i, &(start, stop)) in spans.iter().enumerate() {
            while open.last().is_some_and(|&o| spans[o].1 <= start) {
                open.pop();
            }
            if let Some(&parent) = open.last() {
                children[parent] += stop - start;
            }
            open.push(i);
        }
        for (&(start, stop), child) in spans.iter().zip(&children) {
            self_us += stop - start - child;
            runs += 1;
        }
    }
    let scope = tfprof(&path, &["--select", "micros,occurrence,params"]);
    close(us(&scope["total"]["micros_ps"]), self_us, "XLA self time");
    assert_eq!(int(&scope["total"]["occurrence"]), runs);
    assert!(row(&scope, "jit(train_step)")["total"]["micros_ps"].as_i64() > Some(0));
    assert!(int(&row(&scope, "p['w1']")["own"]["params"]) == 784 * 256);
    // Code view: the Python stacks of the HLO program; graph view: operands as inputs.
    let code = tfprof(&path, &["--view", "code"]);
    assert!(rows(&code).iter().any(|r| r["name"].as_str().is_some_and(|n| n.ends_with(":train_step"))));
    let graph = tfprof(&path, &["--view", "graph", "--max-depth", "3"]);
    assert!(rows(&graph).iter().any(|r| int(&r["depth"]) == 3));
    assert!(!graph["notes"].to_string().contains("records no op inputs"));
}

/// The full names of the non-root rows of a scope view with `args`.
fn names(path: &Path, args: &[&str]) -> Vec<String> {
    let json = tfprof(path, args);
    rows(&json).iter().skip(1).map(|r| r["name"].as_str().expect("name").to_string()).collect()
}

#[test]
fn regex_filters_change_exactly_what_they_should() {
    let path = data(TORCH);
    let everything = names(&path, &[]);
    let matches = |pattern: &str| {
        let regex = regex_full(pattern);
        everything.iter().filter(|n| regex(n)).cloned().collect::<Vec<_>>()
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    // show: exactly the nodes that match, hide: exactly the others.
    let pattern = "forward_backward/nn.Module: Sequential_0/.*";
    assert_eq!(sorted(names(&path, &["--show-name-regexes", pattern])), sorted(matches(pattern)));
    let kept: Vec<String> = everything.iter().filter(|n| !regex_full(pattern)(n)).cloned().collect();
    assert_eq!(sorted(names(&path, &["--hide_name_regexes", pattern])), sorted(kept));
    // start: the matching subtrees only.
    let start = names(&path, &["--start-name-regexes", "forward_backward/nn.Module: Sequential_0"]);
    assert!(start.iter().all(|n| n.starts_with("forward_backward/nn.Module: Sequential_0")) && start.len() > 1);
    // trim: the node stays, nothing below it.
    let trimmed = names(&path, &["--trim-name-regexes", "forward_backward"]);
    assert!(trimmed.contains(&"forward_backward".to_string()));
    assert!(!trimmed.iter().any(|n| n.starts_with("forward_backward/")));
    assert_eq!(trimmed.len(), everything.iter().filter(|n| !n.starts_with("forward_backward/")).count());
    // Displayed-only accounting: the root is what the shown nodes own.
    let shown = tfprof(&path, &["--show-name-regexes", "aten::.*|.*/aten::addmm", "--account-displayed-op-only"]);
    let owned: i64 = rows(&shown).iter().skip(1).map(|r| int(&r["own"]["micros_ps"])).sum();
    assert_eq!(int(&shown["total"]["micros_ps"]), owned);
    // Type accounting: the root is exactly the accounted types' time in the op view.
    let types = "aten::addmm|aten::mm";
    let accounted = tfprof(&path, &["--account-type-regexes", types]);
    let op_view = tfprof(&path, &["--view", "op", "--account-type-regexes", types]);
    let by_type: i64 = rows(&op_view).iter().map(|r| int(&r["own"]["micros_ps"])).sum();
    assert_eq!(accounted["total"]["micros_ps"], op_view["total"]["micros_ps"]);
    assert_eq!(int(&accounted["total"]["micros_ps"]), by_type);
    let listed: Vec<&str> = rows(&op_view).iter().map(|r| r["name"].as_str().expect("name")).collect();
    assert_eq!(listed, ["aten::addmm", "aten::mm"]);
}

/// A full-match test of `pattern` (a `|` of literal alternatives or a literal prefix
/// followed by `.*`, enough for the patterns above).
fn regex_full(pattern: &str) -> impl Fn(&str) -> bool + '_ {
    move |name: &str| {
        pattern.split('|').any(|alternative| match alternative.strip_suffix(".*") {
            Some(prefix) => name.starts_with(prefix),
            None => name == alternative,
        })
    }
}

#[test]
fn steps_select_one_step_or_average_them() {
    let path = data(TORCH);
    let whole = tfprof(&path, &["--view", "op", "--max-depth", "1000"]);
    let steps: Vec<i64> = whole["steps"].as_array().expect("steps").iter().map(int).collect();
    assert_eq!(steps, [2, 3, 4]);
    let per_step: Vec<Value> = steps
        .iter()
        .map(|s| tfprof(&path, &["--view", "op", "--max-depth", "1000", "--step", &s.to_string()]))
        .collect();
    let sum: i64 = per_step.iter().map(|r| int(&r["total"]["micros_ps"])).sum();
    assert!(sum <= int(&whole["total"]["micros_ps"]) && sum > 0);
    let average = tfprof(&path, &["--view", "op", "--max-depth", "1000", "--step", "-1"]);
    // aten::addmm runs in every step: its average is the mean of the three.
    let addmm: Vec<i64> = per_step.iter().map(|r| int(&row(r, "aten::addmm")["own"]["cpu_ps"])).collect();
    assert_eq!(int(&row(&average, "aten::addmm")["own"]["cpu_ps"]), addmm.iter().sum::<i64>() / 3);
    // The Keras profile numbers its steps as its step names do (`train 6` is step 6).
    let keras = tfprof(&data("xspace/tf_keras2_input_bound/logdir"), &["--step", "6"]);
    assert!(int(&keras["total"]["micros_ps"]) > 0);
}

#[test]
fn bad_options_give_one_line_errors() {
    let torch = data(TORCH);
    let torch = torch.to_str().expect("UTF-8");
    let no_steps = data("kineto/hta/critical_path/alexnet");
    let no_steps = no_steps.to_str().expect("UTF-8");
    let cases: &[(&[&str], u8, &str)] = &[
        (&["--tool", "tfprof", "--select", "flops"], 2, "--select: unknown column \"flops\""),
        (&["--tool", "tfprof", "--order-by", "speed"], 2, "--order-by: unknown column \"speed\""),
        (&["--tool", "tfprof", "--hide-name-regexes", "a("], 2, "--hide-name-regexes: \"a(\" is not a valid regex"),
        (&["--tool", "tfprof", "--step", "9"], 2, "--step 9: no such step; steps: 2, 3, 4"),
        (&["--tool", "tfprof", "--step", "-5"], 2, "--step -5: a step number, or -1"),
        (&["--tool", "tfprof", "--min-micros", "-1"], 2, "--min-micros: -1 is not a number"),
        (&["--tool", "tfprof", "--sort", "micros"], 2, "--sort does not apply to --tool tfprof"),
        (&["--tool", "tfprof", "--output", "out.json"], 2, "--output out.json: --tool tfprof writes timeline:FILE"),
        (&["--tool", "tfprof", "--format", "xprof-json"], 2, "--tool tfprof writes --format table, json or csv"),
        (&["--tool", "overview_page", "--view", "op"], 2, "--view, --select, --step and tfprof's other options"),
        // PyTorch steps have one breakdown: the option is refused, not silently ignored.
        (
            &["--tool", "all", "--breakdown", "xprof"],
            2,
            "--breakdown changes only XSpace (TensorFlow, JAX) profiles, and this one is PyTorch (Kineto)",
        ),
    ];
    for (args, code, message) in cases {
        let mut all = vec!["analyze", torch];
        all.extend_from_slice(args);
        let out = mlprof(&all);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(i32::from(*code)), "{args:?}: {stderr}");
        assert!(stderr.starts_with(&format!("mlprof: error: {message}")), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
    let out = mlprof(&["analyze", no_steps, "--tool", "tfprof", "--step", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn the_torch_scope_table_matches_its_snapshot() {
    let path = data(TORCH);
    let args =
        ["--max-depth", "3", "--order-by", "micros", "--select", "micros,occurrence,bytes", "--min-micros", "50"];
    let mut all = vec!["analyze", path.to_str().expect("UTF-8"), "--tool", "tfprof"];
    all.extend_from_slice(&args);
    let text = ok_stdout(mlprof(&all));
    let snapshot = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/tfprof_torch_scope.txt");
    if std::env::var_os("MLPROF_UPDATE_SNAPSHOTS").is_some() {
        std::fs::create_dir_all(snapshot.parent().expect("folder")).expect("folder");
        std::fs::write(&snapshot, &text).expect("snapshot written");
    }
    let want = std::fs::read_to_string(&snapshot).expect("snapshot exists");
    assert!(
        text == want,
        "output differs from {}; rerun with MLPROF_UPDATE_SNAPSHOTS=1 if intended:\n{text}",
        snapshot.display()
    );
}
