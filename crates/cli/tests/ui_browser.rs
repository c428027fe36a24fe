//! The web UI in a real browser: for each fixture, `mlprof serve FIXTURE --port 0`
//! and `node crates/web/tests/browser/run.mjs URL`, which drives Debian's Chromium
//! through every tool page with Playwright (console errors, numbers against the API,
//! sorting, filtering, CSV export, foreign requests; see run.mjs and specs/).
//!
//! Needs `/usr/bin/chromium`, `node` and `npm ci` in crates/web/tests/browser
//! (`.ci/run` does both). Where one is missing the tests say so and pass, unless
//! `MLPROF_REQUIRE_PEERS` is set: then they fail. Screenshots land in
//! `target/ui-screenshots/FIXTURE-PAGE.png`.
//!
//! `ui_agent_live` runs `mlprof agent` watching a plain Python job and the
//! `agent_live` spec against the agent's live page.
//!
//! `ui_live_runs` serves a log directory in a temporary folder and runs the
//! `live_runs` spec only, which adds a run to it and removes one while the page is
//! open (`MLPROF_UI_LOGDIR`, `MLPROF_UI_SPARE_RUN`; without them the spec skips).

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;

use common::copy_dir;
use served::serve;

mod common;
mod peers;
mod served;

/// One browser at a time: the specs time page loads, and CI machines are small.
static BROWSER: Mutex<()> = Mutex::new(());

const CHROMIUM: &str = "/usr/bin/chromium";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn browser_tests() -> PathBuf {
    repo_root().join("crates/web/tests/browser")
}

/// Why the browser tests cannot run here, if they cannot.
fn missing_peer() -> Option<String> {
    if !Path::new(CHROMIUM).exists() {
        return Some(format!("{CHROMIUM} is missing (apt-get install chromium)"));
    }
    let node = Command::new("node").arg("--version").output();
    if !node.is_ok_and(|out| out.status.success()) {
        return Some("node is not on PATH".to_string());
    }
    let playwright = browser_tests().join("node_modules/playwright-core/package.json");
    if !playwright.exists() {
        return Some(format!("{} is missing (npm ci in crates/web/tests/browser)", playwright.display()));
    }
    None
}

/// Whether the browser tests can run here; says why not (and fails under
/// `MLPROF_REQUIRE_PEERS`) when they cannot.
fn peers_present(label: &str) -> bool {
    let Some(reason) = missing_peer() else { return true };
    assert!(
        std::env::var_os("MLPROF_REQUIRE_PEERS").is_none(),
        "ui_browser {label}: {reason}, but MLPROF_REQUIRE_PEERS is set"
    );
    peers::skipped(&format!("ui_browser {label}"), &reason);
    false
}

/// Serves `profile` and runs the browser specs `specs` (all when empty) against it,
/// with `env` set for them.
fn run_node(label: &str, profile: &Path, specs: &[&str], env: &[(&str, &Path)]) {
    let _one_at_a_time = BROWSER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let cache = tempfile::tempdir().expect("a cache directory");
    let served = serve(profile, cache.path());
    let env: Vec<(&str, &OsStr)> = env.iter().map(|(name, value)| (*name, value.as_os_str())).collect();
    run_node_at(label, &served.url, specs, &env);
}

/// Runs the browser specs `specs` against the page at `url`, with `env` set for them.
fn run_node_at(label: &str, url: &str, specs: &[&str], env: &[(&str, &OsStr)]) {
    let mut node = Command::new("node");
    node.arg(browser_tests().join("run.mjs")).arg(url).args(["--label", label]).args(specs);
    node.envs(env.iter().copied());
    let out = node.current_dir(repo_root()).output().expect("node runs");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{report}");
    assert!(out.status.success(), "browser specs failed on {url}:\n{report}");
}

/// Serves `fixture` (under tests/data) and runs every browser spec against it.
fn run_specs(label: &str, fixture: &str) {
    if peers_present(label) {
        run_node(label, &repo_root().join("tests/data").join(fixture), &[], &[]);
    }
}

#[test]
fn ui_tf_keras_input_bound() {
    run_specs("tf_keras2_input_bound", "xspace/tf_keras2_input_bound");
}

#[test]
fn ui_jax_profile() {
    run_specs("jax_profile", "xspace/jax_profile");
}

#[test]
fn ui_pytorch_gpu_trace() {
    run_specs("hta_timeline_analysis", "kineto/hta/timeline_analysis");
}

#[test]
fn ui_pytorch_logdir() {
    run_specs("torch_profile", "kineto/torch_profile/logdir");
}

/// A PyTorch memory snapshot (real, PyTorch 2.3–2.9): every spec, the memory page's
/// snapshot tables and the trace viewer's `[memory]` counter tracks among them.
#[test]
fn ui_memory_snapshot() {
    run_specs("memory_snapshot", "torch_memory/silmont_2_x/mem_snapshot.pickle");
}

/// Two ranks on one time axis (HTA's two-rank `trace_filter`): the `trace_ranks` spec
/// only (the other specs run on single-host fixtures above).
#[test]
fn ui_pytorch_two_ranks() {
    if peers_present("pytorch_two_ranks") {
        run_node("pytorch_two_ranks", &repo_root().join("tests/data/kineto/hta/trace_filter"), &["trace_ranks"], &[]);
    }
}

/// The python tool's page on a real sampled session (`mlprof run` on
/// `tests/peers/python_hot_loop.py`): its flame graph draws `hot_spin`, zooms, and
/// redraws for one thread (the `python` spec only; the other specs are about trace tools).
#[test]
fn ui_python_sampled() {
    if peers_present("python_sampled") {
        let session = repo_root().join("tests/data/sampled/python_hot_loop/logdir");
        run_node("python_sampled", &session, &["python"], &[]);
    }
}

/// New runs appear without a page reload, a removed one is reported: the served log
/// directory starts with the Keras run as `train/SESSION`; the `live_runs` spec copies
/// the JAX session in beside it and later removes the Keras run.
#[test]
fn ui_live_runs() {
    if !peers_present("live_runs") {
        return;
    }
    let data = repo_root().join("tests/data/xspace");
    let folder = tempfile::tempdir().expect("a temporary folder");
    let logdir = folder.path().join("logdir");
    copy_dir(
        &data.join("tf_keras2_input_bound/logdir/plugins/profile/2026_11_21_19_24_08"),
        &logdir.join("train/plugins/profile/2026_11_21_19_24_08"),
    );
    let spare = data.join("jax_profile/logdir/plugins/profile/2026_11_21_19_24_59");
    run_node("live_runs", &logdir, &["live_runs"], &[("MLPROF_UI_LOGDIR", &logdir), ("MLPROF_UI_SPARE_RUN", &spare)]);
}

/// `tests/peers/python_hot_loop.py` for up to 120 s, killed when dropped.
fn hot_loop_job() -> Killed {
    Killed(
        Command::new("python3")
            .arg(repo_root().join("tests/peers/python_hot_loop.py"))
            .arg("120")
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 starts"),
    )
}

/// Polls the agent at `url` until `target`'s answer contains `needle` (at most 90 s).
fn wait_for_agent(url: &str, target: &str, needle: &str, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let body = mlprof_web::testing::get(url, target, &[]).map(|r| r.text()).unwrap_or_default();
        if body.contains(needle) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "waited 90 s for {what}: {target} says {body}");
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// The agent's live page: a job it found appears with its top Python frame, updates
/// without a reload, and its capture button records it and says how to open it.
#[test]
fn ui_agent_live() {
    if !peers_present("agent_live") {
        return;
    }
    let _one_at_a_time = BROWSER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let data = tempfile::tempdir().expect("a data directory");
    let mut agent = Killed(
        Command::new(env!("CARGO_BIN_EXE_mlprof"))
            .args(["agent", "--listen", "127.0.0.1:0", "--data"])
            .arg(data.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the agent starts"),
    );
    let mut first = String::new();
    BufReader::new(agent.0.stdout.take().expect("piped")).read_line(&mut first).expect("its address");
    let url = first.strip_prefix("mlprof agent: ").and_then(|rest| rest.split(' ').next()).unwrap_or("").to_string();
    let job = hot_loop_job();
    // A job that ends before the page opens: the page lists it from the agent's history.
    // It runs until the agent has seen it (on a loaded machine a fixed few seconds may
    // pass before the agent's first look), and the page opens once the agent's history
    // holds it.
    let mut ended = hot_loop_job();
    let ended_pid = ended.0.id().to_string();
    let listed = format!("\"pid\":{ended_pid}");
    wait_for_agent(&url, "/api/jobs", &listed, "the agent to see the short job");
    let _ = ended.0.kill();
    let _ = ended.0.wait();
    wait_for_agent(&url, "/api/history", &listed, "the agent's history to hold the ended job");
    let pid = job.0.id().to_string();
    let env = [("MLPROF_UI_AGENT_PID", OsStr::new(&pid)), ("MLPROF_UI_AGENT_ENDED_PID", OsStr::new(&ended_pid))];
    // The job and the agent are killed when this ends, a failed spec's panic included.
    run_node_at("agent_live", &url, &["agent_live"], &env);
}

/// A process killed when dropped.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
