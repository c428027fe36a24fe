//! `mlprof serve` against exposure and exhaustion, as a user runs it: an address other
//! machines can reach needs `--allow-remote` (exit 2 and one line without it, a warning
//! with it); the soft open-file limit is raised at start; and with few file descriptors,
//! many idle connections do not keep a normal request from being answered. Only
//! 127.0.0.1 is ever connected to.

use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};

use mlprof_web::testing::get;

mod common;

use common::data;

/// The fixture every test serves.
fn logdir() -> PathBuf {
    data("xspace/tf_keras2_input_bound/logdir")
}

/// A running `mlprof serve`, killed when dropped.
struct Served {
    child: Child,
    /// Its standard error, from the line after the URL line was printed on.
    stderr: BufReader<ChildStderr>,
    /// The port it printed.
    port: u16,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// Starts `mlprof [global] serve LOGDIR --port 0 --cache-dir CACHE [args]`, with the
    /// soft and hard open-file limits set to `open_files` (soft, hard) first when given,
    /// and waits for the URL line.
    fn start(
        global: &[&str],
        args: &[&str],
        cache: &std::path::Path,
        open_files: Option<(libc::rlim_t, libc::rlim_t)>,
    ) -> Served {
        let mut command = Command::new(env!("CARGO_BIN_EXE_mlprof"));
        command.args(global).arg("serve").arg(logdir()).args(["--port", "0", "--cache-dir"]).arg(cache).args(args);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        if let Some((soft, hard)) = open_files {
            let limit = libc::rlimit { rlim_cur: soft, rlim_max: hard };
            // SAFETY: setrlimit is async-signal-safe and only reads `limit`, which the
            // closure owns; nothing else runs in the child before exec.
            unsafe {
                command.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        let mut child = command.spawn().expect("mlprof serve starts");
        let stdout = child.stdout.take().expect("stdout piped");
        let stderr = BufReader::new(child.stderr.take().expect("stderr piped"));
        let mut first = String::new();
        let read = BufReader::new(stdout).read_line(&mut first);
        let mut served = Served { child, stderr, port: 0 };
        read.expect("mlprof serve prints its URL");
        let port = first.trim_end().rsplit_once(':').and_then(|(_, port)| port.strip_suffix('/'));
        served.port = port.and_then(|port| port.parse().ok()).unwrap_or_else(|| panic!("the URL line: {first:?}"));
        served
    }

    /// The first of the next `at_most` lines on stderr that contains `needle`.
    fn stderr_line(&mut self, needle: &str, at_most: usize) -> String {
        let mut seen = Vec::new();
        for _ in 0..at_most {
            let mut line = String::new();
            if self.stderr.read_line(&mut line).expect("stderr read") == 0 {
                break;
            }
            if line.contains(needle) {
                return line;
            }
            seen.push(line);
        }
        panic!("no line with {needle:?} on stderr: {seen:?}")
    }

    /// `GET /api/runs` through 127.0.0.1: it answers 200.
    fn assert_answers(&self) {
        let url = format!("http://127.0.0.1:{}/", self.port);
        let runs = get(&url, "/api/runs", &[]).expect("answered");
        assert_eq!(runs.status, 200, "{}", runs.text());
    }
}

#[test]
fn an_address_other_machines_can_reach_needs_allow_remote() {
    let cache = tempfile::tempdir().expect("temp dir");
    for host in ["0.0.0.0", "::"] {
        let out = Command::new(env!("CARGO_BIN_EXE_mlprof"))
            .arg("serve")
            .arg(logdir())
            .args(["--host", host, "--port", "0", "--cache-dir"])
            .arg(cache.path())
            .output()
            .expect("runs");
        assert_eq!(out.status.code(), Some(2), "{host}");
        assert!(out.stdout.is_empty(), "{host}: nothing is served");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("mlprof: error: not listening on "), "{stderr}");
        assert!(stderr.contains("no authentication") && stderr.contains("add --allow-remote"), "{stderr}");
    }
}

#[test]
fn with_allow_remote_it_serves_and_warns_that_anyone_who_can_reach_it_can_read_the_profiles() {
    let cache = tempfile::tempdir().expect("temp dir");
    let mut served = Served::start(&[], &["--host", "0.0.0.0", "--allow-remote"], cache.path(), None);
    let warning = served.stderr_line("warning", 1);
    assert!(warning.starts_with("mlprof serve: warning: listening on 0.0.0.0:"), "{warning}");
    assert!(warning.contains("anyone who can reach it can read the profiles"), "{warning}");
    assert!(warning.contains("no authentication"), "{warning}");
    served.assert_answers();
}

#[test]
fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
    let mut hard = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one `rlimit` into the valid pointer it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut hard) }, 0);
    let hard = hard.rlim_max.min(4096);
    assert!(hard > 256, "this test needs a hard open-file limit above 256");
    let cache = tempfile::tempdir().expect("temp dir");
    let mut served = Served::start(&["-v"], &[], cache.path(), Some((256, hard)));
    let line = served.stderr_line("open-file limit", 3);
    assert_eq!(line.trim_end(), format!("mlprof serve: open-file limit raised from 256 to {hard}"));
    served.assert_answers();
}

#[test]
fn with_few_file_descriptors_many_idle_connections_do_not_starve_a_request() {
    // 128 open files at most (soft = hard: nothing to raise), 300 idle connections: the
    // server keeps to half of its limit and closes the idle ones for new ones.
    let cache = tempfile::tempdir().expect("temp dir");
    let served = Served::start(&[], &[], cache.path(), Some((128, 128)));
    let idle: Vec<TcpStream> =
        (0..300).map(|_| TcpStream::connect(("127.0.0.1", served.port)).expect("connected")).collect();
    served.assert_answers();
    drop(idle);
    served.assert_answers();
}
