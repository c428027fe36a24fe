//! `mlprof serve` as a user runs it: errors for a bad path, the URL line with the
//! port actually bound, and answers equal to `mlprof analyze`'s for the same tool.

use std::path::Path;
use std::process::Command;

use mlprof_web::testing::get;
use served::serve;

mod served;
use serde_json::Value;

mod common;

use common::data;

fn analyze(path: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mlprof")).arg("analyze").arg(path).args(args).output().expect("runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8")
}

/// Runs `mlprof serve PATH --port 0`, expects it to fail with exit code 2, nothing on
/// stdout and one line on stderr, and returns that line.
fn one_line_failure(path: &Path) -> String {
    let out =
        Command::new(env!("CARGO_BIN_EXE_mlprof")).arg("serve").arg(path).args(["--port", "0"]).output().expect("runs");
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

#[test]
fn a_missing_or_unrecognised_path_is_one_line_and_exit_code_2() {
    let stderr = one_line_failure(Path::new("/nonexistent/logdir"));
    assert!(stderr.starts_with("mlprof: error: /nonexistent/logdir"), "{stderr}");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("notes.txt"), "not a profile").expect("written");
    let stderr = one_line_failure(dir.path());
    assert!(stderr.contains("no profile found"), "{stderr}");
}

#[test]
fn port_0_prints_the_url_and_answers_as_analyze_does() {
    let cache = tempfile::tempdir().expect("temp dir");
    let logdir = data("xspace/tf_keras2_input_bound/logdir");
    let served = serve(&logdir, cache.path());
    let runs = get(&served.url, "/api/runs", &[]).expect("answered");
    assert_eq!(runs.status, 200);
    let runs = runs.json().expect("JSON");
    assert_eq!(runs["runs"][0]["name"], "2026_11_21_19_24_08");

    let cli: Value =
        serde_json::from_str(&analyze(&logdir, &["--tool", "input_pipeline_analyzer", "--format", "json"]))
            .expect("JSON");
    let api =
        get(&served.url, "/api/tool?run=2026_11_21_19_24_08&tool=input_pipeline_analyzer", &[]).expect("answered");
    let api = api.json().expect("JSON");
    assert!(api["result"] == cli["tools"]["input_pipeline_analyzer"], "the API's result differs from analyze's");
    assert_eq!(api["hosts"], cli["hosts"]);

    let cli_csv = analyze(&logdir, &["--tool", "framework_op_stats", "--format", "csv", "--sort", "occurrences:asc"]);
    let target = "/api/csv?run=2026_11_21_19_24_08&tool=framework_op_stats&sort=occurrences:asc";
    let api_csv = get(&served.url, target, &[]).expect("answered");
    assert!(api_csv.text() == cli_csv, "the API's CSV differs from analyze's");
}

#[test]
fn gpu_and_transfers_answer_as_analyze_does_on_a_kineto_trace() {
    let cache = tempfile::tempdir().expect("temp dir");
    let ranks = data("kineto/hta/timeline_analysis");
    let served = serve(&ranks, cache.path());
    for (tool, extra) in [("gpu", ""), ("transfers", "&gap_threshold=50us")] {
        let mut args = vec!["--tool", tool, "--format", "json"];
        if !extra.is_empty() {
            args.extend(["--gap-threshold", "50us"]);
        }
        let cli: Value = serde_json::from_str(&analyze(&ranks, &args)).expect("JSON");
        let target = format!("/api/tool?run=timeline_analysis&tool={tool}{extra}");
        let api = get(&served.url, &target, &[]).expect("answered").json().expect("JSON");
        assert!(api["result"] == cli, "{tool}: the API's result differs from analyze's");
    }
}

/// Sends SIGINT (what Ctrl-C sends) to process `pid`.
#[cfg(unix)]
fn ctrl_c(pid: u32) {
    let sent = Command::new("kill").args(["-INT", &pid.to_string()]).status().expect("kill runs");
    assert!(sent.success());
}

/// Waits up to 20 s for `child` to exit and returns its exit code.
#[cfg(unix)]
fn exit_code(child: &mut std::process::Child) -> Option<i32> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("waits") {
            return status.code();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    panic!("mlprof serve did not exit");
}

#[cfg(unix)]
#[test]
fn ctrl_c_waits_for_open_requests_and_a_second_one_exits_at_once_with_code_130() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;

    let cache = tempfile::tempdir().expect("temp dir");
    let start = || {
        Command::new(env!("CARGO_BIN_EXE_mlprof"))
            .arg("serve")
            .arg(data("xspace/jax_profile/logdir"))
            .args(["--port", "0", "--cache-dir"])
            .arg(cache.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mlprof serve starts")
    };
    let url_of = |child: &mut std::process::Child| {
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("the URL line");
        line.trim_end().trim_start_matches("mlprof serve: http://").trim_end_matches('/').to_string()
    };

    // Idle: the first Ctrl-C stops it, cleanly.
    let mut idle = start();
    url_of(&mut idle);
    ctrl_c(idle.id());
    assert_eq!(exit_code(&mut idle), Some(0));

    // A request still being received keeps the first Ctrl-C waiting; the second ends it.
    let mut busy = start();
    let mut open = std::net::TcpStream::connect(url_of(&mut busy)).expect("connects");
    open.write_all(b"GET /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n").expect("half a request sent");
    std::thread::sleep(std::time::Duration::from_millis(200));
    ctrl_c(busy.id());
    let mut stderr = BufReader::new(busy.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("the stopping line");
    assert!(line.contains("Ctrl-C again to stop now"), "{line}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(busy.try_wait().expect("waits").is_none(), "still waiting for the open request");
    ctrl_c(busy.id());
    assert_eq!(exit_code(&mut busy), Some(130));
}
