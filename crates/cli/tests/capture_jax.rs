//! `mlprof capture` against real JAX processes serving the profiler
//! (`jax.profiler.start_server`), started from `tests/peers/jax_worker.py` while they
//! train: one worker, then two at once, then `mlprof analyze` on what was captured —
//! for the two-worker session compared with XProf's own converters on both files
//! together (interpreter from `MLPROF_XPROF_PYTHON`).
//!
//! The JAX interpreter comes from `MLPROF_JAX_PYTHON` (`.ci/run` creates the venv and
//! sets it). Without it the tests say so and pass, unless `MLPROF_REQUIRE_PEERS` is set
//! (as `.ci/run` does), where a missing peer is a failure.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod peers;

use peers::Peer;

mod common;

#[path = "../../analysis/tests/json_same/mod.rs"]
mod json_same;

use json_same::assert_same;

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
    matches_xprof_on_both_hosts(&session, logdir_arg);
}

/// The session's two hosts analysed together by XProf's own converters
/// (`xprof_session_tools.py`, interpreter from `MLPROF_XPROF_PYTHON`) and by
/// `mlprof analyze --format xprof-json --breakdown xprof`: the same steps (count, time,
/// breakdown), the same pod-viewer hosts and step times, the same framework-op rows —
/// the whole outputs, compared as the fixture parity tests compare them.
fn matches_xprof_on_both_hosts(session: &Path, logdir: &str) {
    let Some(xprof) = peers::python("MLPROF_XPROF_PYTHON", "captures_two_jax_workers_at_once_into_one_session") else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/xprof_session_tools.py");
    let out = std::process::Command::new(xprof).arg(&script).arg(session).output().expect("XProf's Python runs");
    assert!(out.status.success(), "xprof_session_tools.py failed: {}", String::from_utf8_lossy(&out.stderr));
    let theirs: Value = serde_json::from_slice(&out.stdout).expect("xprof_session_tools.py prints JSON");
    for tool in ["overview_page", "input_pipeline_analyzer", "pod_viewer", "framework_op_stats"] {
        let args = ["analyze", logdir, "--tool", tool, "--format", "xprof-json", "--breakdown", "xprof"];
        let ours: Value = serde_json::from_str(&ok_stdout(mlprof(&args))).expect("xprof-json is JSON");
        assert_same(&ours, &theirs[tool], tool);
    }
    // The comparison above would pass on two empty outputs: make sure it compared steps
    // of both hosts and op rows.
    let pod_steps =
        theirs["pod_viewer"]["podStatsSequence"]["podStatsMap"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    assert!(pod_steps.len() >= 10, "XProf found only {} common steps", pod_steps.len());
    assert!(
        pod_steps.iter().all(|s| s["podStatsPerCore"].as_object().map(|m| m.len()) == Some(2)),
        "every pod-viewer step has both hosts"
    );
    let op_rows = theirs["framework_op_stats"][0]["rows"].as_array().map(Vec::len).unwrap_or(0);
    assert!(op_rows > 0, "XProf's framework op stats has rows");
}
