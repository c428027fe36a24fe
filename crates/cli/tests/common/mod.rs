//! Helpers every CLI test file uses: the test data directory, running the `mlprof`
//! binary, and reading a successful run's output. (Each test file uses a subset.)
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `tests/data/REL` of the repository.
pub fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(rel)
}

/// [`data`] as a string, for argument lists.
pub fn data_str(rel: &str) -> String {
    data(rel).to_str().expect("UTF-8 path").to_string()
}

/// Runs the `mlprof` binary with `args`.
pub fn mlprof(args: &[&str]) -> Output {
    // No COLUMNS from the developer's shell: output into a pipe is laid out whole.
    Command::new(env!("CARGO_BIN_EXE_mlprof")).args(args).env_remove("COLUMNS").output().expect("mlprof runs")
}

/// Runs the mlprof binary as on a terminal `columns` characters wide (`COLUMNS`).
pub fn mlprof_at_width(args: &[&str], columns: usize) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(args)
        .env("COLUMNS", columns.to_string())
        .output()
        .expect("mlprof runs")
}

/// The stdout of a run that must have succeeded (its stderr in the panic otherwise).
pub fn ok_stdout(out: Output) -> String {
    assert!(out.status.success(), "mlprof failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// Copies the directory `from` into `to` (created), files and subdirectories.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's directory");
    for entry in std::fs::read_dir(from).expect("read the directory") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy a file");
        }
    }
}
