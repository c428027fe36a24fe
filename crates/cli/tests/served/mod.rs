//! `mlprof serve PROFILE --port 0` as a child process for the tests that talk to it:
//! started, its URL read from the first stdout line, killed when dropped.
//! Each test file uses only some of these helpers.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A running `mlprof serve`, killed when dropped.
pub struct Served {
    child: Child,
    /// The base URL it printed (`http://127.0.0.1:PORT/`).
    pub url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `mlprof serve profile --port 0 --cache-dir cache` and waits for its URL line,
/// which must name 127.0.0.1 and the port actually bound. Its stderr goes to the test's.
pub fn serve(profile: &Path, cache: &Path) -> Served {
    serve_with_env(profile, cache, &[])
}

/// [`serve`] with variables `env` set (an object store's `AWS_*`).
pub fn serve_with_env(profile: &Path, cache: &Path, env: &[(String, String)]) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .arg("serve")
        .arg(profile)
        .args(["--port", "0", "--cache-dir"])
        .arg(cache)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("mlprof serve starts");
    let stdout = child.stdout.take().expect("stdout piped");
    let mut first = String::new();
    let read = BufReader::new(stdout).read_line(&mut first);
    // From here on the server is killed whatever the assertions say.
    let mut served = Served { child, url: String::new() };
    read.expect("mlprof serve prints its URL");
    let url = first.trim_end().strip_prefix("mlprof serve: ").unwrap_or_else(|| panic!("the URL line: {first:?}"));
    let port = url.strip_prefix("http://127.0.0.1:").and_then(|rest| rest.strip_suffix('/'));
    assert!(port.and_then(|p| p.parse::<u16>().ok()).is_some_and(|p| p != 0), "{first:?}");
    served.url = url.to_string();
    served
}
