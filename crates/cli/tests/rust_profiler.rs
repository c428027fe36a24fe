//! Profiles of Rust programs (`mlprof_capture::server`) read by `mlprof analyze`: the
//! `step("train", n)` annotations must come out as XProf-style step groups, both from
//! the programmatic `Profiler` and from a gRPC capture of the `profiled_training`
//! example.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use mlprof_capture::server::{Profiler, step, trace, trace_scope};

mod peers;

use peers::Peer;

#[test]
fn a_programmatic_profile_saved_to_a_logdir_has_xprof_steps() {
    let dir = tempfile::tempdir().unwrap();
    let profiler = Profiler::start().unwrap();
    for n in 0..6 {
        let _step = step("train", n);
        let _input = trace("input", &[("batch", 4)]);
        drop(_input);
        let _compute = trace_scope("compute");
        std::thread::sleep(Duration::from_millis(1));
    }
    let saved = profiler.stop().save(dir.path()).unwrap();
    assert!(saved.starts_with(dir.path().join("plugins/profile")));
    let (names, source) = peers::overview_steps(dir.path());
    // Six groups; the overview then leaves out the first and the last step, as XProf
    // does with more than five.
    assert!(source.starts_with("6 step groups from root events (stat `_r`"), "{source}");
    let expected: Vec<String> = (1..5).map(|n| format!("train {n}")).collect();
    assert_eq!(names, expected);
}

/// Starts the example; returns it (killed on drop) and its loopback address.
fn start_example() -> (Peer, SocketAddr) {
    let peer = peers::start_example();
    let addr: SocketAddr = peer.address.parse().expect("a socket address");
    assert!(addr.ip().is_loopback());
    (peer, addr)
}

#[test]
fn mlprof_capture_captures_the_examples_training_steps() {
    let (_running, addr) = start_example();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["capture", &addr.to_string(), "--duration", "500ms", "--logdir", &dir.path().display().to_string()])
        .output()
        .expect("mlprof runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stem = format!("127.0.0.1_{}.xplane.pb", addr.port());
    assert!(stderr.contains(&stem), "the worker's line names the file: {stderr}");

    let (names, source) = peers::overview_steps(dir.path());
    assert!(!names.is_empty(), "the captured training steps are found");
    assert!(names.iter().all(|n| n.starts_with("train ")), "{names:?}");
    assert!(source.contains("root events"), "{source}");
}

/// XProf's own capture client (what TensorBoard's Capture Profile and TF's
/// `client.trace` run) against the example, then XProf's and mlprof's overview pages on
/// the profile it saved. `.ci/run` points `MLPROF_XPROF_PYTHON` at an interpreter with
/// the PyPI `xprof`; without it the test says so and does nothing.
#[test]
fn xprofs_capture_client_captures_the_example_and_both_tools_find_the_same_steps() {
    let Some(python) = peers::python("MLPROF_XPROF_PYTHON", "xprofs_capture_client_captures_the_example") else {
        return;
    };
    let (_running, addr) = start_example();
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/xprof_capture.py"))
        .arg(addr.to_string())
        .arg(dir.path())
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "XProf capture failed:\n{stdout}\n{}", stderr.lines().last().unwrap_or(""));
    // The C++ client logs to stdout too; the script's answer is the last line.
    let xprof_steps: Vec<String> = serde_json::from_str(stdout.lines().last().unwrap_or("")).expect("step names");
    assert!(!xprof_steps.is_empty(), "XProf finds the training steps");
    assert!(xprof_steps.iter().all(|n| n.starts_with("train ")), "{xprof_steps:?}");
    let (mlprof_steps, _) = peers::overview_steps(dir.path());
    assert_eq!(mlprof_steps, xprof_steps);
}
