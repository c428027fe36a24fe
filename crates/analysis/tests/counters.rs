//! Counter series for the trace viewer's counter tracks, on real profiles: the readings
//! `mlprof run` recorded on `/host:counters` (checked against the events themselves,
//! read independently off the XSpace), and PyTorch's allocated and reserved memory
//! after each `[memory]` event of a real trace (checked against its raw JSON).

use std::path::{Path, PathBuf};

use mlprof_analysis::counters::counter_series;
use mlprof_formats::discover::load;
use mlprof_model::Host;
use serde_json::Value;

fn data(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(path)
}

fn host(path: &str) -> Host {
    let sessions = load(&data(path)).expect("fixture loads");
    sessions.into_iter().next().expect("a session").hosts.into_iter().next().expect("a host")
}

#[test]
fn sampled_counters_are_one_series_per_process_and_counter() {
    let host = host("sampled/python_hot_loop");
    let series = counter_series(&host);
    let plane = host.planes.iter().find(|p| p.name == "/host:counters").expect("a counters plane");
    let readings: usize = plane.lines.iter().map(|line| line.len()).sum();
    assert_eq!(series.iter().map(|s| s.points.len()).sum::<usize>(), readings, "every reading, once");
    let cpu = series.iter().find(|s| s.name == "CPU (%)").expect("a CPU series");
    assert!(cpu.group.contains("pid"), "{}", cpu.group);
    assert!(cpu.points.windows(2).all(|w| w[0].0 <= w[1].0), "in time order");
    assert!(cpu.points.iter().all(|&(_, v)| (0.0..=800.0).contains(&v)), "{:?}", cpu.points);
    assert!(series.iter().any(|s| s.name.starts_with("Resident memory")), "{series:?}");
}

#[test]
fn pytorch_memory_follows_the_totals_of_each_memory_event() {
    let host = host("kineto/torch_profile/logdir");
    let series = counter_series(&host);
    let text = std::fs::read_to_string(data("kineto/torch_profile/logdir/worker0.1795289102612280864.pt.trace.json"))
        .expect("the raw trace");
    let trace: Value = serde_json::from_str(&text).expect("JSON");
    let memory: Vec<&Value> =
        trace["traceEvents"].as_array().expect("events").iter().filter(|e| e["name"] == "[memory]").collect();
    assert!(!memory.is_empty());
    let allocated: Vec<&_> = series.iter().filter(|s| s.name == "Allocated (bytes)").collect();
    assert_eq!(allocated.iter().map(|s| s.points.len()).sum::<usize>(), memory.len(), "a point per [memory] event");
    // The largest total the trace reports is the series' largest value.
    let most = memory.iter().filter_map(|e| e["args"]["Total Allocated"].as_f64()).fold(0.0, f64::max);
    let shown = allocated.iter().flat_map(|s| s.points.iter().map(|&(_, v)| v)).fold(0.0, f64::max);
    assert_eq!(shown, most);
    assert!(series.iter().any(|s| s.name == "Reserved (bytes)"));
    assert!(allocated.iter().all(|s| s.group.starts_with("PyTorch memory, ")), "{allocated:?}");
}

#[test]
fn chrome_counter_events_are_a_series_per_numeric_arg() {
    let trace = br#"{"traceEvents": [
      {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "worker"}},
      {"ph": "X", "name": "op", "pid": 1, "tid": 7, "ts": 1, "dur": 10},
      {"ph": "C", "name": "queue", "pid": 1, "tid": 7, "ts": 2, "args": {"length": 3, "label": "a"}},
      {"ph": "C", "name": "queue", "pid": 1, "tid": 7, "ts": 5, "args": {"length": 7.5}}
    ]}"#;
    let host = mlprof_formats::kineto::read_kineto(trace, "trace.json", "host").expect("the trace parses");
    let series = counter_series(&host);
    assert_eq!(series.len(), 1, "{series:?}");
    assert_eq!(series[0].name, "queue length");
    assert_eq!(series[0].group, "worker");
    let values: Vec<f64> = series[0].points.iter().map(|&(_, v)| v).collect();
    assert_eq!(values, [3.0, 7.5]);
    assert!(series[0].points[0].0 < series[0].points[1].0);
}

#[test]
fn gpu_queue_lengths_are_htas_series_per_stream() {
    // HTA 0.5.0's get_queue_length_summary on this trace: rank 0, stream 7, count 9752,
    // mean 812.4134536505333, max 1022 (tests/data/kineto/hta_out/ns_resolution_trace).
    let host = host("kineto/hta/ns_resolution_trace");
    let series = counter_series(&host);
    let queues: Vec<_> = series.iter().filter(|s| s.name == mlprof_analysis::counters::QUEUE_LENGTH).collect();
    assert_eq!(queues.len(), 1, "{:?}", queues.iter().map(|s| &s.group).collect::<Vec<_>>());
    let queue = queues[0];
    assert_eq!(queue.group, "GPU stream 7");
    assert_eq!(queue.points.len(), 9752);
    let values: Vec<f64> = queue.points.iter().map(|&(_, v)| v).collect();
    assert_eq!(values.iter().copied().fold(f64::MIN, f64::max), 1022.0);
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    // Within the parity test's 0.1 %: ties between a launch and a GPU op start in the same
    // µs are ordered by HTA's unstable sort (see gpu_hta.rs).
    assert!((mean - 812.4134536505333).abs() < 1e-3 * 812.4, "{mean}");
    assert!(queue.points.windows(2).all(|w| w[0].0 <= w[1].0), "in time order");
    // Inside the trace's time: the first event starts at or after the profile's start.
    assert!(queue.points[0].0 >= 0, "{:?}", queue.points[0]);
}
