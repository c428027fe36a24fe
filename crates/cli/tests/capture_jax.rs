//! `mlprof capture` against real JAX processes serving the profiler
//! (`jax.profiler.start_server`), started from `tests/peers/jax_worker.py` while they
//! train: one worker, then two at once, then `mlprof analyze` on what was captured.
//!
//! The JAX interpreter comes from `MLPROF_JAX_PYTHON` (`.ci/run` creates the venv and
//! sets it). Without it the tests say so and pass, unless `MLPROF_REQUIRE_PEERS` is set
//! (as `.ci/run` does), where a missing peer is a failure.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod peers;

use peers::Peer;

mod common;

use common::{mlprof, ok_stdout};

/// Starts a worker that trains for up to two minutes and waits for its `listening on` line.
fn start_worker(python: &str) -> Peer {
    Peer::start(python, &[&peers::script("jax_worker.py").display().to_string(), "0", "120"])
}

/// The one session directory `mlprof capture` made under `logdir`.
fn session_dir(logdir: &Path) -> PathBuf {
    let sessions: Vec<PathBuf> = std::fs::read_dir(logdir.join("plugins/profile"))
        .expect("the capture made plugins/profile")
        .map(|e| e.expect("dir entry").path())
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    sessions.into_iter().next().expect("one session")
}

fn xplane_file(session: &Path, address: &str) -> PathBuf {
    session.join(format!("{}.xplane.pb", address.replace(':', "_")))
}

#[test]
fn captures_a_training_jax_worker_and_finds_its_steps() {
    let Some(python) = peers::python("MLPROF_JAX_PYTHON", "captures_a_training_jax_worker_and_finds_its_steps") else {
        return;
    };
    let worker = start_worker(&python);
    let logdir = tempfile::tempdir().expect("temp dir");
    let logdir_arg = logdir.path().to_str().expect("UTF-8 path");
    let out = mlprof(&["capture", &format!("grpc://{}", worker.address), "--duration", "1s", "--logdir", logdir_arg]);
    ok_stdout(out);
    let session = session_dir(logdir.path());
    let file = xplane_file(&session, &worker.address);
    assert!(std::fs::metadata(&file).map(|m| m.len() > 0).unwrap_or(false), "{} missing or empty", file.display());

    let (names, source) = peers::overview_steps(logdir.path());
    let found = names.len();
    // One second of training at a few ms per step gives many steps; XProf's grouping drops
    // the partial first and last ones.
    assert!(found >= 10, "only {found} steps found in 1 s of training: {source}");
    assert!(source.contains("root events"), "steps should come from StepTraceAnnotation's `_r`: {source}");
}

#[test]
fn captures_two_jax_workers_at_once_into_one_session() {
    let Some(python) = peers::python("MLPROF_JAX_PYTHON", "captures_two_jax_workers_at_once_into_one_session") else {
        return;
    };
    let workers = [start_worker(&python), start_worker(&python)];
    let logdir = tempfile::tempdir().expect("temp dir");
    let logdir_arg = logdir.path().to_str().expect("UTF-8 path");
    let addresses = format!("{},{}", workers[0].address, workers[1].address);
    ok_stdout(mlprof(&["capture", &addresses, "--duration", "1500ms", "--logdir", logdir_arg]));
    let session = session_dir(logdir.path());
    for worker in &workers {
        let file = xplane_file(&session, &worker.address);
        assert!(file.is_file(), "{} missing", file.display());
    }
    let json: Value =
        serde_json::from_str(&ok_stdout(mlprof(&["analyze", logdir_arg, "--tool", "pod_viewer", "--format", "json"])))
            .expect("analyze prints JSON");
    let hosts = json["hosts"].as_array().map(Vec::len).unwrap_or(0);
    assert_eq!(hosts, 2, "both workers are hosts of the session: {}", json["hosts"]);
}
