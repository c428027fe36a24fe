//! `framework_op_stats`, `kernel_stats` and the overview's device op database on real
//! PyTorch (Kineto) traces, against the independent reference of
//! `scripts/kineto_ops_reference.py` (`tests/data/kineto/ops_ref/<case>.json`), which
//! itself reproduces HTA 0.5.0's kernel breakdown and CPU event totals exactly on the
//! rows HTA reports (its `hta_check`).
//!
//! Times within 0.1 % (or 1 ns), counts exactly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mlprof_analysis::framework_op_stats::{self, OpStatsRow};
use mlprof_analysis::grouping::HostGroups;
use mlprof_analysis::{kernel_stats, op_metrics};
use mlprof_model::Host;
use serde_json::Value;

/// `(reference name, trace path under tests/data/kineto)`.
const CASES: [(&str, &str); 5] = [
    ("nccl_parser_config", "hta/nccl_parser_config/nccl_data.json.gz"),
    ("timeline_analysis", "hta/timeline_analysis/sampled_rank-0.json.gz"),
    ("simple_add", "hta/critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"),
    ("torch_profile", "torch_profile/logdir/worker0.1795289102612280864.pt.trace.json"),
    // A real H200 capture (PyTorch 2.11, CUDA 13): cpu_op / cuda_runtime / cuda_driver,
    // kernels, memcpy and memset on one stream, nanosecond timestamps.
    ("torch_gpu_h200", "torch_gpu_h200/logdir/worker0.1795659490496341430.pt.trace.json.gz"),
];

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/kineto")
}

fn load_host(path: &str) -> Host {
    let sessions = mlprof_formats::discover::load(&data_dir().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut hosts: Vec<Host> = sessions.into_iter().flat_map(|s| s.hosts).collect();
    assert_eq!(hosts.len(), 1, "{path}");
    hosts.remove(0)
}

fn reference(case: &str) -> Value {
    let path = data_dir().join("ops_ref").join(format!("{case}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn close(ours_us: f64, reference_us: f64) -> bool {
    (ours_us - reference_us).abs() <= (reference_us.abs() * 1e-3).max(1e-3)
}

fn num(value: &Value, key: &str) -> f64 {
    value[key].as_f64().unwrap_or_else(|| panic!("no number {key} in {value}"))
}

fn count(value: &Value) -> u64 {
    value["count"].as_u64().unwrap_or_else(|| panic!("no count in {value}"))
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or_else(|| panic!("no string {key} in {value}"))
}

fn items<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value[key].as_array().map(Vec::as_slice).unwrap_or_else(|| panic!("no array {key}"))
}

/// Expected device rows per op: `(type, occurrences = most launches of one activity,
/// total µs)`; an op's type is the one of its host row, activities without an op are
/// rows of their own name, type `Unknown`.
fn expected_device_rows(reference: &Value) -> BTreeMap<String, (String, u64, f64)> {
    let host_types: BTreeMap<&str, &str> =
        items(reference, "host_ops").iter().map(|op| (text(op, "name"), text(op, "type"))).collect();
    let mut rows: BTreeMap<String, (String, u64, f64)> = BTreeMap::new();
    for pair in items(reference, "device_ops") {
        let (op, kernel) = (text(pair, "op"), text(pair, "kernel"));
        let (name, op_type) = if op.is_empty() {
            (kernel, "Unknown")
        } else {
            (op, host_types.get(op).copied().unwrap_or_else(|| panic!("launching op {op} is no host op")))
        };
        let row = rows.entry(name.to_string()).or_insert_with(|| (op_type.to_string(), 0, 0.0));
        row.1 = row.1.max(count(pair));
        row.2 += num(pair, "total_us");
    }
    rows
}

fn check_framework_op_stats(case: &str, host: &Host, reference: &Value) {
    let groups = HostGroups::none(host);
    let stats = framework_op_stats::analyze(&[(host, &groups)]);
    let rows = &stats.with_idle.rows;
    let find = |side: &str, name: &str| -> &OpStatsRow {
        rows.iter()
            .find(|r| r.host_or_device == side && r.op_name == name)
            .unwrap_or_else(|| panic!("{case}: no {side} row {name}"))
    };

    let host_ops = items(reference, "host_ops");
    assert_eq!(rows.iter().filter(|r| r.host_or_device == "Host").count(), host_ops.len() + 1, "{case}: host rows");
    for op in host_ops {
        let row = find("Host", text(op, "name"));
        assert_eq!(row.op_type, text(op, "type"), "{case}: {}", row.op_name);
        assert_eq!(row.occurrences, count(op), "{case}: {}", row.op_name);
        assert!(close(row.total_time_us, num(op, "total_us")), "{case}: {row:?} vs {op}");
        assert!(close(row.total_self_time_us, num(op, "self_us")), "{case}: {row:?} vs {op}");
    }
    let idle = find("Host", "IDLE");
    assert!(close(idle.total_self_time_us, num(&reference["host"], "idle_us")), "{case}: host IDLE {idle:?}");
    assert!(close(stats.host_total_time_ps as f64 / 1e6, num(&reference["host"], "total_time_us")), "{case}");

    let expected = expected_device_rows(reference);
    let device_rows = rows.iter().filter(|r| r.host_or_device == "Device" && r.op_type != "IDLE").count();
    assert_eq!(device_rows, expected.len(), "{case}: device rows");
    for (name, (op_type, occurrences, total_us)) in &expected {
        let row = find("Device", name);
        assert_eq!((&row.op_type, row.occurrences), (op_type, *occurrences), "{case}: {name}");
        assert!(close(row.total_time_us, *total_us) && close(row.total_self_time_us, *total_us), "{case}: {row:?}");
    }
    let devices = items(reference, "devices");
    let span_us: f64 = devices.iter().map(|d| num(d, "span_us")).sum();
    let busy_us: f64 = devices.iter().map(|d| num(d, "busy_us")).sum();
    assert!(close(stats.device_total_time_ps as f64 / 1e6, span_us), "{case}: device span");
    if !devices.is_empty() {
        let idle = find("Device", "IDLE");
        assert!(close(idle.total_self_time_us, span_us - busy_us), "{case}: device IDLE {idle:?}");
        let last = rows.iter().rfind(|r| r.host_or_device == "Device").map(|r| r.device_cumulative_self_time_fraction);
        assert!(last.is_some_and(|f| (f - 1.0).abs() < 1e-9), "{case}: device cumulative {last:?}");
    }
}

fn check_kernel_stats(case: &str, host: &Host, reference: &Value) {
    let stats = kernel_stats::analyze(&[host]);
    // Launch configurations split a (kernel, op) pair into several groups: add them up.
    let mut ours: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
    for kernel in &stats.kernels {
        let entry = ours.entry((kernel.name.clone(), kernel.op_name.clone())).or_default();
        entry.0 += kernel.occurrences;
        entry.1 += kernel.total_duration_ns;
    }
    let expected: Vec<&Value> = items(reference, "device_ops").iter().filter(|p| p["is_kernel"] == true).collect();
    assert_eq!(ours.len(), expected.len(), "{case}: (kernel, op) pairs");
    for pair in expected {
        let key = (text(pair, "kernel").to_string(), text(pair, "op").to_string());
        let (occurrences, total_ns) = ours.get(&key).copied().unwrap_or_else(|| panic!("{case}: no kernel {key:?}"));
        assert_eq!(occurrences, count(pair), "{case}: {key:?}");
        assert!(close(total_ns as f64 / 1e3, num(pair, "total_us")), "{case}: {key:?} {total_ns} ns vs {pair}");
    }
    let kernels: u64 = items(reference, "kernels").iter().map(count).sum();
    assert_eq!(stats.kernels.iter().map(|k| k.occurrences).sum::<u64>(), kernels, "{case}: launches");
    // Occupancy is Kineto's `est. achieved occupancy %` of a launch of the group.
    let occupancies: BTreeMap<&str, Vec<f64>> = items(reference, "kernels")
        .iter()
        .map(|k| {
            let values = k["occupancy_pct_values"].as_array().map(|v| v.iter().filter_map(Value::as_f64).collect());
            (text(k, "name"), values.unwrap_or_default())
        })
        .collect();
    for kernel in &stats.kernels {
        let seen = occupancies.get(kernel.name.as_str()).cloned().unwrap_or_default();
        let ours = f64::from(kernel.occupancy_pct);
        let matches = if seen.is_empty() { ours == 0.0 } else { seen.iter().any(|v| (v - ours).abs() < 1e-3) };
        assert!(matches, "{case}: {} occupancy {ours} not among {seen:?}", kernel.name);
    }
    let any_reference = occupancies.values().flatten().any(|&v| v > 0.0);
    assert_eq!(stats.kernels.iter().any(|k| k.occupancy_pct > 0.0), any_reference, "{case}: nonzero occupancy");
}

#[test]
fn the_reference_reproduces_hta() {
    for (case, _) in CASES {
        let check = &reference(case)["hta_check"];
        assert!(check["compared"].as_u64().is_some_and(|n| n > 0), "{case}: {check}");
        assert_eq!(check["mismatches"], serde_json::json!([]), "{case}");
    }
}

#[test]
fn framework_op_stats_matches_the_reference() {
    for (case, path) in CASES {
        check_framework_op_stats(case, &load_host(path), &reference(case));
    }
}

#[test]
fn kernel_stats_matches_the_reference() {
    for (case, path) in CASES {
        check_kernel_stats(case, &load_host(path), &reference(case));
    }
}

#[test]
fn the_overview_reads_aten_ops_on_the_device() {
    let host = load_host(CASES[0].1);
    let groups = HostGroups::none(&host);
    let device =
        op_metrics::tf_metrics_db_from_device(&mlprof_analysis::facts::device_op_metrics_db(&host, &groups), false);
    let mut ops: Vec<_> = device.metrics.iter().collect();
    ops.sort_by_key(|op| std::cmp::Reverse(op.self_time_ps));
    let expected = expected_device_rows(&reference(CASES[0].0));
    let top = expected.iter().max_by(|a, b| a.1.2.total_cmp(&b.1.2)).map(|(name, _)| name.as_str());
    assert_eq!(ops.first().map(|op| op.name.as_str()), top);
    assert!(ops.iter().all(|op| !op.is_idle()));
    assert_eq!(device.total_time_ps, device.total_op_time_ps);
}

#[test]
fn kernels_of_tensor_core_ops_are_marked() {
    let host = load_host(CASES[0].1);
    let stats = kernel_stats::analyze(&[&host]);
    for kernel in &stats.kernels {
        let expected = !kernel.op_name.is_empty()
            && (kernel_stats::aten_op_tensor_core_eligible(&kernel.op_name) || kernel.is_kernel_using_tensor_core);
        assert_eq!(kernel.is_op_tensor_core_eligible, expected, "{kernel:?}");
        assert!(kernel.registers_per_thread > 0 && kernel.block_dim[0] > 0, "{kernel:?}");
    }
    assert!(stats.kernels.iter().any(|k| k.is_op_tensor_core_eligible), "some conv / matmul kernel");
}
