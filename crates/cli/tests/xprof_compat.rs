//! XSpace written by `mlprof convert --to xspace` opened by the real XProf (PyPI
//! `xprof`, the reference implementation). `.ci/run` installs it and points
//! `MLPROF_XPROF_PYTHON` at its interpreter; without that variable the test says so
//! and does nothing, unless `MLPROF_REQUIRE_PEERS` is set (as in CI), where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

mod peers;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

fn convert(input: &Path, out: &Path) {
    let status = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["convert", input.to_str().unwrap(), "--to", "xspace", out.to_str().unwrap()])
        .status()
        .expect("mlprof runs");
    assert!(status.success());
}

#[test]
fn xprof_opens_what_mlprof_writes() {
    let Some(python) = peers::python("MLPROF_XPROF_PYTHON", "xprof_opens_what_mlprof_writes") else { return };
    let dir = tempfile::tempdir().unwrap();
    let tf_case = repo("tests/data/xspace/tf_keras2_input_bound");
    convert(&tf_case.join("logdir"), &dir.path().join("tf"));
    let tf_xplane = dir.path().join("tf/plugins/profile/2026_11_21_19_24_08/vm.xplane.pb");
    convert(&repo("examples/pytorch/sampled_rank-0.json.gz"), &dir.path().join("torch"));
    let torch_xplane = dir.path().join("torch/plugins/profile/sampled_rank-0/sampled_rank-0.xplane.pb");
    let output = Command::new(python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/xprof_open.py"))
        .args([tf_xplane.as_os_str(), tf_case.join("xprof_out").as_os_str(), torch_xplane.as_os_str()])
        // Its 4811 events and a "Steps" event per step XProf found.
        .arg("4813")
        // Its two ProfilerStep#N, found by XProf from the `_r` / `step_num` mlprof writes.
        .arg("607.8")
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "XProf check failed:\n{stdout}\n{}", stderr.lines().last().unwrap_or(""));
    assert!(stdout.contains("overview_page: identical"), "{stdout}");
    assert!(stdout.contains("XProf finds its steps"), "{stdout}");
}
