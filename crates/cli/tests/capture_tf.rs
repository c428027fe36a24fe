//! Capture against real TensorFlow both ways: `mlprof capture` captures a TensorFlow job
//! serving the profiler (`tf.profiler.experimental.server.start`, from
//! `tests/peers/tf_worker.py`), and TensorFlow's own client
//! (`tf.profiler.experimental.client.trace`, `tests/peers/tf_client.py`) captures the
//! Rust `profiled_training` example. `mlprof analyze` then finds the steps of both.
//!
//! The interpreter comes from `MLPROF_TF_PYTHON` (`.ci/run` creates a `tensorflow-cpu`
//! venv and sets it); without it the tests say so and pass, unless
//! `MLPROF_REQUIRE_PEERS` is set.

use std::path::Path;
use std::process::Command;

mod peers;

use peers::Peer;

mod common;

use common::mlprof;

/// The `.xplane.pb` files below `dir`.
fn xplane_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.to_string_lossy().ends_with(".xplane.pb") {
                found.push(path);
            }
        }
    }
    found
}

#[test]
fn mlprof_capture_captures_a_training_tensorflow_job() {
    let Some(python) = peers::python("MLPROF_TF_PYTHON", "mlprof_capture_captures_a_training_tensorflow_job") else {
        return;
    };
    let worker = Peer::start(&python, &[&peers::script("tf_worker.py").display().to_string(), "0", "120"]);
    let logdir = tempfile::tempdir().expect("temp dir");
    let out = mlprof(&["capture", &worker.address, "--duration", "1s", "--logdir", logdir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let files = xplane_files(logdir.path());
    let expected = format!("{}.xplane.pb", worker.address.replace(':', "_"));
    assert!(files.len() == 1 && files[0].ends_with(&expected), "{files:?}");
    let (names, source) = peers::overview_steps(logdir.path());
    let steps = names.len();
    assert!(steps >= 10, "only {steps} steps in 1 s of training: {source}");
    assert!(source.contains("root events"), "steps come from Trace(..., _r=1): {source}");
}

#[test]
fn tensorflows_client_captures_the_rust_example() {
    let Some(python) = peers::python("MLPROF_TF_PYTHON", "tensorflows_client_captures_the_rust_example") else {
        return;
    };
    let example = peers::start_example();
    let logdir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(&python)
        .arg(peers::script("tf_client.py"))
        .args([&example.address, logdir.path().to_str().unwrap(), "1000"])
        .output()
        .expect("python runs");
    assert!(out.status.success(), "TensorFlow's client failed: {}", String::from_utf8_lossy(&out.stderr));
    // TensorFlow's client saves the `xplane.pb` tool data the server sent (it did not ask
    // for emit_xspace) as <logdir>/plugins/profile/<session>/<host_port>.xplane.pb.
    let files = xplane_files(logdir.path());
    let expected = format!("{}.xplane.pb", example.address.replace(':', "_"));
    assert!(files.len() == 1 && files[0].ends_with(&expected), "{files:?}");
    let (names, source) = peers::overview_steps(logdir.path());
    let steps = names.len();
    assert!(steps > 0, "the example's training steps are found: {source}");
    assert!(source.contains("root events"), "{source}");
}
