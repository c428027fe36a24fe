//! `mlprof capture` end to end through the binary: against scripted profiler servers on
//! loopback (the same fakes as `crates/capture/tests`), and against ports that refuse,
//! stay silent or answer garbage: one stderr line per worker, the exit code, no files left.

#[path = "../../capture/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{serve, xspace};

mod common;

use common::mlprof;

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

/// A real XSpace (TensorFlow custom training loop) for the fake servers to answer with.
fn real_xspace() -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/xspace/tf_custom_loop/logdir/plugins/profile/2026_11_21_19_24_15/vm.xplane.pb");
    std::fs::read(path).expect("test profile")
}

/// Every file below `dir`.
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() { stack.push(path) } else { out.push(path) }
        }
    }
    out.sort();
    out
}

/// The session directories below `logdir`.
fn sessions(logdir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(logdir.join("plugins/profile"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A runtime for the fake servers, alive for the test.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

#[test]
fn failing_workers_give_one_line_each_and_exit_non_zero() {
    let refused = format!("127.0.0.1:{}", support::refused_port());
    let silent = support::silent_listener().to_string();
    let garbage = support::garbage_listener().to_string();
    let logdir = tempfile::tempdir().unwrap();
    let list = format!("{refused},{silent},grpc://{garbage}");
    let out =
        mlprof(&["capture", &list, "--timeout", "1s", "--retries", "0", "--logdir", &logdir.path().to_string_lossy()]);
    assert_eq!(out.status.code(), Some(1), "nothing captured exits 1");
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    let line_of = |addr: &str| {
        let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with(&format!("{addr}: "))).collect();
        assert_eq!(lines.len(), 1, "one line for {addr}: {stderr}");
        lines[0].to_string()
    };
    assert!(line_of(&refused).contains("connection refused (is the job serving the profiler? "), "{stderr}");
    assert!(line_of(&silent).contains("no answer within 1.0 s"), "{stderr}");
    assert!(line_of(&garbage).contains("protocol error: the port did not answer as an HTTP/2 gRPC server"), "{stderr}");
    assert_eq!(stderr.lines().count(), 4, "three workers and the summary: {stderr}");
    assert!(stderr.lines().last().is_some_and(|l| l == "mlprof: error: nothing was captured on this machine"));
    assert!(files_below(logdir.path()).is_empty(), "no files left");
}

#[test]
fn one_good_worker_is_enough_and_is_written_where_tensorboard_looks() {
    let rt = runtime();
    let bytes = real_xspace();
    let (good, fake) = rt.block_on(serve(vec![xspace(bytes.clone())]));
    let refused = format!("localhost:{}", support::refused_port());
    let logdir = tempfile::tempdir().unwrap();
    let out = mlprof(&[
        "capture",
        &good.to_string(),
        &refused,
        "--duration",
        "50ms",
        "--host-tracer-level",
        "3",
        "--python-tracer-level",
        "1",
        "--retries",
        "0",
        "--logdir",
        &logdir.path().to_string_lossy(),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let written = files_below(logdir.path());
    assert_eq!(written.len(), 1, "{written:?}");
    assert_eq!(written[0].file_name().unwrap().to_string_lossy(), format!("127.0.0.1_{}.xplane.pb", good.port()));
    assert_eq!(std::fs::read(&written[0]).unwrap(), bytes);
    assert_eq!(written[0].parent().and_then(Path::parent), Some(logdir.path().join("plugins/profile").as_path()));
    assert!(stderr.contains(&format!("{good}: wrote {}", written[0].display())), "{stderr}");
    assert!(stderr.contains(&format!("{refused}: connection refused")), "{stderr}");
    let request = &fake.requests()[0];
    assert_eq!(request.duration_ms, 50, "plain numbers are milliseconds");
    let opts = request.opts.as_ref().unwrap();
    assert_eq!((opts.host_tracer_level, opts.device_tracer_level, opts.python_tracer_level), (3, 1, 1));
}

#[test]
fn analyze_shows_the_overview_and_for_several_workers_the_pod_viewer() {
    let rt = runtime();
    let (a, _) = rt.block_on(serve(vec![xspace(real_xspace())]));
    let logdir = tempfile::tempdir().unwrap();
    let dir = logdir.path().to_string_lossy().into_owned();
    let one = mlprof(&["capture", &a.to_string(), "--duration", "20ms", "--analyze", "--logdir", &dir]);
    let stdout = text(&one.stdout);
    assert!(one.status.success(), "{}", text(&one.stderr));
    assert!(stdout.starts_with("== overview_page =="), "{stdout}");
    assert!(stdout.contains("over 8 steps"), "the captured profile is analysed: {stdout}");
    assert!(!stdout.contains("== pod_viewer =="));
    let (b, _) = rt.block_on(serve(vec![xspace(real_xspace())]));
    let two = mlprof(&["capture", &format!("{a},{b}"), "--duration", "20ms", "--analyze", "--logdir", &dir]);
    let stdout = text(&two.stdout);
    assert!(two.status.success(), "{}", text(&two.stderr));
    assert!(stdout.contains("== overview_page ==") && stdout.contains("== pod_viewer =="), "{stdout}");
    assert_eq!(sessions(logdir.path()).len(), 2, "each capture is its own session");
}

#[test]
fn watch_captures_into_new_sessions_until_ctrl_c() {
    let rt = runtime();
    let (addr, fake) = rt.block_on(serve(vec![xspace(support::tiny_xspace())]));
    let logdir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["capture", "--watch", &addr.to_string(), "--every", "200ms", "--duration", "10ms", "--logdir"])
        .arg(logdir.path())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mlprof runs");
    let started = Instant::now();
    while sessions(logdir.path()).len() < 3 && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let interrupted = Command::new("kill").args(["-INT", &child.id().to_string()]).status().is_ok_and(|s| s.success());
    if !interrupted {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("mlprof exits");
    assert!(interrupted, "SIGINT sent");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let names = sessions(logdir.path());
    assert!(names.len() >= 3, "{names:?}");
    // Several captures fall in the same second: the later ones get a suffix.
    let unique: std::collections::HashSet<_> = fake.requests().into_iter().map(|r| r.session_id).collect();
    assert!(unique.len() >= names.len(), "a new session id each time");
    for name in &names {
        let dir = logdir.path().join("plugins/profile").join(name);
        assert_eq!(files_below(&dir).len(), 1, "{name}");
    }
}

#[test]
fn bad_addresses_and_options_are_usage_errors() {
    for (args, expected) in [
        (vec!["capture", "localhost"], "no port"),
        (vec!["capture", "localhost:http"], "is not a number"),
        (vec!["capture", "a:1,,b:2"], "empty address"),
        (vec!["capture", "localhost:6009", "--duration", "soon"], "invalid duration"),
        (vec!["capture", "localhost:6009", "--every", "1s"], "--watch"),
        (vec!["capture", "localhost:6009", "--host-tracer-level", "4"], "4"),
    ] {
        let out = mlprof(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
