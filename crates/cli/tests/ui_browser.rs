//! The web UI in a real browser: for each fixture, `mlprof serve FIXTURE --port 0`
//! and `node crates/web/tests/browser/run.mjs URL`, which drives Debian's Chromium
//! through every tool page with Playwright (console errors, numbers against the API,
//! sorting, filtering, CSV export, foreign requests; see run.mjs and specs/).
//!
//! Needs `/usr/bin/chromium`, `node` and `npm ci` in crates/web/tests/browser
//! (`.ci/run` does both). Where one is missing the tests say so and pass, unless
//! `MLPROF_REQUIRE_PEERS` is set: then they fail. Screenshots land in
//! `target/ui-screenshots/FIXTURE-PAGE.png`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use served::serve;

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

/// Serves `fixture` (under tests/data) and runs every browser spec against it.
fn run_specs(label: &str, fixture: &str) {
    if let Some(reason) = missing_peer() {
        assert!(
            std::env::var_os("MLPROF_REQUIRE_PEERS").is_none(),
            "ui_browser {label}: {reason}, but MLPROF_REQUIRE_PEERS is set"
        );
        eprintln!("ui_browser {label}: skipped: {reason}");
        return;
    }
    let _one_at_a_time = BROWSER.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let cache = tempfile::tempdir().expect("a cache directory");
    let served = serve(&repo_root().join("tests/data").join(fixture), cache.path());
    let out = Command::new("node")
        .arg(browser_tests().join("run.mjs"))
        .arg(&served.url)
        .args(["--label", label])
        .current_dir(repo_root())
        .output()
        .expect("node runs");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{report}");
    assert!(out.status.success(), "browser specs failed on {fixture}:\n{report}");
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
