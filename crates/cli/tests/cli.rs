//! The `mlprof` binary end to end: `info` on every kind of path, `convert` in both
//! directions, and bad input (exit code 2, one line on stderr, no partial output).

use std::path::Path;
use std::process::Output;

use serde_json::Value;

mod common;

use common::{data, mlprof, ok_stdout};

fn info_json(path: &Path) -> Value {
    let out = mlprof(&["info", path.to_str().unwrap(), "--format", "json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("info prints JSON")
}

fn stderr_line(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(text.lines().count(), 1, "one line on stderr: {text}");
    text
}

const XSPACE_CASES: &[&str] = &[
    "tf_keras2_input_bound",
    "tf_keras_pipelined",
    "tf_custom_loop",
    "jax_profile",
    // Written by `mlprof run`'s CUPTI injection on an H200.
    "cuda_app_h200_inject",
    "jax_h200_inject",
];

#[test]
fn info_json_lines_carry_name_and_events_as_in_the_xspace_summaries() {
    for case in XSPACE_CASES {
        let summary: Value = serde_json::from_str(
            &std::fs::read_to_string(data(&format!("xspace/{case}/xplane_summary.json"))).unwrap(),
        )
        .unwrap();
        let want = &summary["xspaces"][0];
        let file = data(&format!("xspace/{case}")).join(want["file"].as_str().unwrap());
        let info = info_json(&file);
        let host = &info["sessions"][0]["hosts"][0];
        assert_eq!(host["events"], want["total_events"], "{case}");
        assert_eq!(host["format"], "xspace");
        for (plane, want_plane) in host["planes"].as_array().unwrap().iter().zip(want["planes"].as_array().unwrap()) {
            assert_eq!(plane["name"], want_plane["name"], "{case}");
            assert_eq!(plane["events"], want_plane["num_events"], "{case}");
            assert_eq!(plane["stats_used"], want_plane["stat_names_used"], "{case}");
            let lines = plane["lines"].as_array().unwrap();
            let want_lines = want_plane["lines"].as_array().unwrap();
            assert_eq!(lines.len(), want_lines.len(), "{case}");
            for (line, want_line) in lines.iter().zip(want_lines) {
                assert_eq!(line["name"], want_line["name"], "{case}");
                assert_eq!(line["events"], want_line["num_events"], "{case}");
            }
        }
    }
}

#[test]
fn gzipped_xspace_files_are_read_like_plain_ones() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let plain = data("xspace/tf_custom_loop/logdir/plugins/profile/2026_11_21_19_24_15/vm.xplane.pb");
    let gz = dir.path().join("vm.xplane.pb.gz");
    let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::fast());
    enc.write_all(&std::fs::read(&plain).unwrap()).unwrap();
    enc.finish().unwrap();
    let a = info_json(&plain);
    let b = info_json(&gz);
    assert_eq!(b["sessions"][0]["hosts"][0]["name"], "vm");
    assert_eq!(a["sessions"][0]["hosts"][0]["planes"], b["sessions"][0]["hosts"][0]["planes"]);
}

#[test]
fn a_tensorboard_log_directory_yields_every_session_at_any_depth() {
    let info = info_json(&data("xspace"));
    let names: Vec<&str> = info["sessions"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        vec![
            "cuda_app_h200_inject/logdir/2026_11_26_04_52_27",
            "cuda_app_h200_inject/xprof_out",
            "jax_gpu_h200/logdir/2026_11_26_02_19_38",
            "jax_gpu_h200/xprof_out",
            "jax_gpu_h200_capture/logdir/2026_11_26_02_19_46",
            "jax_gpu_xla/logdir/2026_11_21_19_24_59",
            "jax_gpu_xla/xprof_out",
            "jax_h200_inject/logdir/2026_11_26_04_52_44",
            "jax_h200_inject/xprof_out",
            "jax_mixed_h100/logdir/2026_11_27_18_22_19",
            "jax_mixed_h100/xprof_out",
            "jax_ops_h100/logdir/2026_11_27_17_46_55",
            "jax_ops_h100/xprof_out",
            "jax_plain_loop/logdir/2026_11_26_07_43_20",
            "jax_plain_loop_busy/logdir/2026_11_27_12_07_41",
            "jax_profile/logdir/2026_11_21_19_24_59",
            "tf_custom_loop/logdir/2026_11_21_19_24_15",
            "tf_keras2_input_bound/logdir/2026_11_21_19_24_08",
            "tf_keras_pipelined/logdir/train/2026_11_21_19_24_04",
            "tf_plain_loop/logdir/2026_11_26_07_45_57",
        ]
    );
    // XProf's trace-viewer outputs beside the references are Chrome traces too: each
    // directory holding some is a session, as PyTorch's TensorBoard plugin lists runs.
    // A session directory itself, and a run's log directory.
    let session = info_json(&data("xspace/tf_keras_pipelined/logdir/train/plugins/profile/2026_11_21_19_24_04"));
    assert_eq!(session["sessions"][0]["name"], "2026_11_21_19_24_04");
    let run = info_json(&data("xspace/tf_keras_pipelined/logdir"));
    assert_eq!(run["sessions"][0]["name"], "train/2026_11_21_19_24_04");
    assert_eq!(run["sessions"][0]["events"], 6807);
}

#[test]
fn a_directory_of_rank_traces_is_one_session_with_hosts_by_rank() {
    let info = info_json(&data("kineto/hta/trace_filter"));
    let session = &info["sessions"][0];
    let hosts = session["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2);
    assert_eq!(hosts[0]["rank"], 0);
    assert_eq!(hosts[1]["rank"], 1);
    assert_eq!(hosts[0]["format"], "kineto");
    let gpu = hosts[0]["planes"].as_array().unwrap().iter().find(|p| p["name"] == "/device:GPU:0").expect("GPU plane");
    assert!(gpu["lines"].as_array().unwrap().iter().all(|l| l["name"].as_str().unwrap().starts_with("Stream #")));
    assert!(gpu["well_known_stats"].as_array().unwrap().contains(&Value::from("correlation_id")));
    // A PyTorch log directory with other JSON files beside the trace: only the trace is read.
    let torch = info_json(&data("kineto/torch_profile/logdir"));
    assert_eq!(torch["sessions"][0]["hosts"].as_array().unwrap().len(), 1);
}

#[test]
fn device_properties_are_reported() {
    let info = info_json(&data("kineto/hta/ns_resolution_trace"));
    let planes = info["sessions"][0]["hosts"][0]["planes"].as_array().unwrap();
    let gpu = planes.iter().find(|p| p["name"] == "/device:GPU:0").unwrap();
    assert_eq!(gpu["device_properties"]["gpu_device_name"], "Tesla V100-SXM2-32GB");
    assert_eq!(gpu["device_properties"]["compute_cap_major"], "7");
    let table = mlprof(&["info", data("kineto/hta/ns_resolution_trace").to_str().unwrap()]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("gpu_device_name=Tesla V100-SXM2-32GB"), "{text}");
}

#[test]
fn a_pytorch_trace_converted_to_xspace_keeps_its_steps() {
    let dir = tempfile::tempdir().unwrap();
    let logdir = dir.path().join("tb");
    let example = data("../../examples/pytorch");
    ok_stdout(mlprof(&["convert", example.to_str().unwrap(), "--to", "xspace", logdir.to_str().unwrap()]));
    let steps = |path: &Path| -> Vec<f64> {
        let json: Value = serde_json::from_str(&ok_stdout(mlprof(&[
            "analyze",
            path.to_str().unwrap(),
            "--tool",
            "steps",
            "--format",
            "json",
        ])))
        .expect("json");
        let rows = json["hosts"][0]["steps"].as_array().cloned().unwrap_or_else(|| panic!("{json}"));
        rows.iter().map(|s| s["step_time_ms"].as_f64().expect("step time")).collect()
    };
    // Both ProfilerStep#N, spanning the same time (what each step holds follows XProf's
    // grouping of an XSpace: events nested in the step annotation on its thread).
    assert_eq!(steps(&logdir), steps(&example));
}

#[test]
fn convert_round_trips_through_both_formats_keeping_every_event() {
    let dir = tempfile::tempdir().unwrap();
    let trace = data("kineto/hta/trace_filter/sampled_rank-0.json.gz");
    let before = info_json(&trace);
    let events = before["sessions"][0]["events"].clone();

    let chrome = dir.path().join("out.json.gz");
    let out = mlprof(&["convert", trace.to_str().unwrap(), "--to", "chrome-json", chrome.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(info_json(&chrome)["sessions"][0]["events"], events);

    let logdir = dir.path().join("tb");
    let out = mlprof(&["convert", trace.to_str().unwrap(), "--to", "xspace", logdir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let written = logdir.join("plugins/profile/sampled_rank-0/sampled_rank-0.xplane.pb");
    assert!(written.is_file());
    let after = info_json(&logdir);
    assert_eq!(after["sessions"][0]["events"], events);
    assert_eq!(after["sessions"][0]["hosts"][0]["format"], "xspace");
    let planes = |v: &Value| -> Vec<(Value, Value)> {
        v["sessions"][0]["hosts"][0]["planes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["name"] != "Task Environment")
            .map(|p| (p["name"].clone(), p["events"].clone()))
            .collect()
    };
    assert_eq!(planes(&after), planes(&before));

    // XSpace -> Chrome keeps every event of every line, XProf-style.
    let tf = data("xspace/tf_keras2_input_bound/logdir");
    let chrome_tf = dir.path().join("tf.json");
    let out = mlprof(&["convert", tf.to_str().unwrap(), "--to", "chrome-json", chrome_tf.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&std::fs::read(&chrome_tf).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    assert_eq!(events.iter().filter(|e| e["ph"] == "X").count(), 14992);
    assert!(events.iter().filter(|e| e["ph"] == "X").all(|e| e["pid"] == 701));
    let threads = events.iter().filter(|e| e["ph"] == "M" && e["name"] == "thread_name").count();
    assert_eq!(threads, 9);
    let back = info_json(&chrome_tf);
    let lines = back["sessions"][0]["hosts"][0]["planes"][0]["lines"].as_array().unwrap().clone();
    let mut counts: Vec<(String, u64)> =
        lines.iter().map(|l| (l["name"].as_str().unwrap().to_string(), l["events"].as_u64().unwrap())).collect();
    counts.sort();
    assert_eq!(counts[0], ("python".to_string(), 479));
}

#[test]
fn several_ranks_merge_into_one_chrome_trace_with_separate_processes() {
    let dir = tempfile::tempdir().unwrap();
    let ranks = data("kineto/hta/trace_filter");
    let before = info_json(&ranks);
    let out_path = dir.path().join("both.json");
    let out = mlprof(&["convert", ranks.to_str().unwrap(), "--to", "chrome-json", out_path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_slice(&std::fs::read(&out_path).unwrap()).unwrap();
    let events = doc["traceEvents"].as_array().unwrap();
    let process_names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .filter_map(|e| e["args"]["name"].as_str())
        .collect();
    assert!(process_names.iter().any(|n| n.starts_with("sampled_rank-0: ")), "{process_names:?}");
    assert!(process_names.iter().any(|n| n.starts_with("sampled_rank-1: ")), "{process_names:?}");
    let after = info_json(&out_path);
    assert_eq!(after["sessions"][0]["events"], before["sessions"][0]["events"]);
}

#[test]
fn bad_input_exits_2_with_one_line_naming_file_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    std::fs::write(p("empty.json"), b"").unwrap();
    std::fs::write(p("syntax.json"), b"{\"traceEvents\": [{\"ph\": \"X\",\n \"ts\": }]}").unwrap();
    let xspace =
        std::fs::read(data("xspace/jax_profile/logdir/plugins/profile/2026_11_21_19_24_59/vm.xplane.pb")).unwrap();
    std::fs::write(p("cut.xplane.pb"), &xspace[..xspace.len() / 2]).unwrap();
    let gz = std::fs::read(data("kineto/hta/trace_filter/sampled_rank-0.json.gz")).unwrap();
    std::fs::write(p("cut.json.gz"), &gz[..gz.len() / 2]).unwrap();
    std::fs::write(p("notes.txt"), b"hello, not a profile").unwrap();
    std::fs::create_dir(p("nothing")).unwrap();
    let cases: &[(&str, &str)] = &[
        ("missing.xplane.pb", "No such file or directory"),
        ("empty.json", "file is empty (0 bytes)"),
        ("syntax.json", "JSON line 2, column"),
        ("cut.xplane.pb", "byte offset"),
        ("cut.json.gz", "corrupt or truncated gzip data at compressed byte offset"),
        ("notes.txt", "unrecognized file"),
        ("nothing", "no profile found"),
    ];
    for (name, expected) in cases {
        let path = p(name);
        let out = mlprof(&["info", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        let line = stderr_line(&out);
        assert!(line.contains(path.to_str().unwrap()), "{name}: {line}");
        assert!(line.contains(expected), "{name}: {line}");

        let target = p(&format!("{name}.out.json"));
        let out = mlprof(&["convert", path.to_str().unwrap(), "--to", "chrome-json", target.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(!target.exists(), "{name}: no output file after a failure");
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(".mlprof-partial-"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left behind");
}

/// `--to chrome-json` into a directory (existing, or named with a final `/`) writes
/// `<host>.trace.json.gz` there rather than failing with "Not a directory".
#[test]
fn convert_to_chrome_json_into_a_directory_names_the_file_after_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let trace = data("kineto/torch_profile/logdir");
    let trace = trace.to_str().unwrap();
    let new_dir = format!("{}/traces/", dir.path().display());
    for out in [dir.path().to_str().unwrap(), new_dir.as_str()] {
        let run = mlprof(&["convert", trace, "--to", "chrome-json", out]);
        assert!(run.status.success(), "{out}: {}", String::from_utf8_lossy(&run.stderr));
        let written = Path::new(out).join("worker0.1795289102612280864.trace.json.gz");
        assert_eq!(stderr_line(&run), format!("wrote {}\n", written.display()), "{out}");
        let info = info_json(&written);
        assert!(info["sessions"][0]["events"].as_u64().unwrap() > 0, "{out}");
    }
}

#[test]
fn convert_refuses_unknown_hosts_and_sessions_clearly() {
    let trace = data("kineto/hta/trace_filter");
    let out =
        mlprof(&["convert", trace.to_str().unwrap(), "--to", "chrome-json", "/nonexistent/x.json", "--host", "nope"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr_line(&out).contains("no host named \"nope\""));
    let out = mlprof(&["info"]);
    assert_eq!(out.status.code(), Some(2), "usage errors exit 2");
}
