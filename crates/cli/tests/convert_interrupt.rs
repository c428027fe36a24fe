//! `mlprof convert` interrupted, killed or refused (issue 17, items 9 and 10): SIGINT,
//! SIGTERM and SIGHUP remove the partial file and exit 128 + signal; a partial left by
//! `kill -9` is swept by the next conversion into the same directory; outputs honour the
//! umask and keep the mode of a file they replace; a failed `--to xspace` removes the
//! directories it made; a directory that refuses files is named in one line.
#![cfg(unix)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
mod tree;

use common::{data, mlprof};
use tree::{entries_below, files_below};

/// How partial files are named (`mlprof_formats::output::PARTIAL_PREFIX`).
const PARTIAL_PREFIX: &str = ".mlprof-partial-";

/// Writes a Kineto trace of `events` CPU ops to `path`: at 100,000 events, converting it
/// to gzipped Chrome JSON takes seconds in a debug build.
fn write_trace(path: &Path, events: usize) {
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    write!(w, r#"{{"schemaVersion":1,"traceEvents":["#).unwrap();
    for i in 0..events {
        let sep = if i == 0 { "" } else { "," };
        write!(
            w,
            r#"{sep}{{"ph":"X","cat":"cpu_op","name":"aten::op{}","pid":1,"tid":{},"ts":{},"dur":3,"args":{{"External id":{i}}}}}"#,
            i % 50,
            i % 4,
            i * 5
        )
        .unwrap();
    }
    write!(w, "]}}").unwrap();
    w.flush().unwrap();
}

/// The partial files in `dir`.
fn partials(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(PARTIAL_PREFIX))
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}

/// Starts converting a big trace into `<dir>/out.json.gz` and returns once its partial
/// file exists (the conversion is then writing).
fn start_big_conversion(dir: &Path) -> Child {
    let input = dir.join("big.json");
    write_trace(&input, 100_000);
    let mut child = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["convert", "--to", "chrome-json"])
        .arg(&input)
        .arg(dir.join("out.json.gz"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mlprof runs");
    let started = Instant::now();
    while partials(dir).is_empty() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("mlprof ended ({status}) before its partial file was seen");
        }
        assert!(started.elapsed() < Duration::from_secs(180), "no partial file within 180 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    child
}

/// Sends `signal` to `child` and waits for it.
fn signal_and_wait(child: Child, signal: libc::c_int) -> Output {
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "signal sent");
    child.wait_with_output().expect("mlprof exits")
}

fn interrupted_conversion_removes_its_partial(signal: libc::c_int, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    let child = start_big_conversion(dir.path());
    let out = signal_and_wait(child, signal);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "exit 128 + {signal}: {stderr}");
    assert_eq!(partials(dir.path()), Vec::<PathBuf>::new(), "the partial file is removed");
    assert!(!dir.path().join("out.json.gz").exists(), "no output under the final name");
}

#[test]
fn sigint_removes_the_partial_and_exits_130() {
    interrupted_conversion_removes_its_partial(libc::SIGINT, 130);
}

#[test]
fn sigterm_removes_the_partial_and_exits_143() {
    interrupted_conversion_removes_its_partial(libc::SIGTERM, 143);
}

#[test]
fn sighup_removes_the_partial_and_exits_129() {
    interrupted_conversion_removes_its_partial(libc::SIGHUP, 129);
}

#[test]
fn a_partial_left_by_kill_9_is_swept_by_the_next_conversion() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = start_big_conversion(dir.path());
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let stale = partials(dir.path());
    assert_eq!(stale.len(), 1, "kill -9 leaves the partial: {stale:?}");
    let small = data("kineto/torch_profile/chrome_trace_summary.json");
    let next = Command::new(env!("CARGO_BIN_EXE_mlprof"))
        .args(["convert", "--to", "chrome-json"])
        .arg(&small)
        .arg(dir.path().join("small.json"))
        .output()
        .expect("mlprof runs");
    assert!(next.status.success(), "{}", String::from_utf8_lossy(&next.stderr));
    assert!(partials(dir.path()).is_empty(), "the dead process's partial is swept: {:?}", partials(dir.path()));
    assert!(dir.path().join("small.json").is_file());
}

/// Runs `mlprof ARGS` under `umask`.
fn mlprof_with_umask(umask: &str, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_mlprof"))
        .args(args)
        .output()
        .expect("sh runs")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn outputs_honour_the_umask_and_keep_the_mode_they_replace() {
    let dir = tempfile::tempdir().unwrap();
    let input = data("kineto/torch_profile/chrome_trace_summary.json");
    let input = input.to_str().unwrap();
    for (umask, expected) in [("022", 0o644), ("077", 0o600), ("027", 0o640)] {
        let out = dir.path().join(format!("umask{umask}.json"));
        let run = mlprof_with_umask(umask, &["convert", "--to", "chrome-json", input, out.to_str().unwrap()]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(mode(&out), expected, "umask {umask}");
    }
    // Converting a file onto itself keeps its mode, whatever the umask.
    let itself = dir.path().join("itself.json");
    std::fs::copy(input, &itself).unwrap();
    std::fs::set_permissions(&itself, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = itself.to_str().unwrap();
    let run = mlprof_with_umask("077", &["convert", "--to", "chrome-json", path, path]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert_eq!(mode(&itself), 0o644);
    let xspace_dir = dir.path().join("tb");
    let run = mlprof_with_umask("022", &["convert", "--to", "xspace", input, xspace_dir.to_str().unwrap()]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let written = String::from_utf8_lossy(&run.stdout).into_owned();
    let pb = files_below(&xspace_dir);
    assert_eq!(pb.len(), 1, "{written} {pb:?}");
    assert_eq!(mode(&pb[0]), 0o644);
}

#[test]
fn a_failed_xspace_conversion_leaves_no_new_directories() {
    let dir = tempfile::tempdir().unwrap();
    // A log directory of two sessions, s1 and s2, each with host `vm`.
    let real = data("xspace/tf_custom_loop/logdir/plugins/profile/2026_11_21_19_24_15/vm.xplane.pb");
    let logdir = dir.path().join("in");
    for session in ["s1", "s2"] {
        let session_dir = logdir.join("plugins/profile").join(session);
        std::fs::create_dir_all(&session_dir).unwrap();
        std::fs::copy(&real, session_dir.join("vm.xplane.pb")).unwrap();
    }
    // s1 converts into new directories; s2's output is blocked by a directory of its name.
    let out = dir.path().join("out");
    let blocker = out.join("plugins/profile/s2/vm.xplane.pb");
    std::fs::create_dir_all(&blocker).unwrap();
    let before = entries_below(&out);
    let run = mlprof(&["convert", "--to", "xspace", logdir.to_str().unwrap(), out.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&blocker.display().to_string()), "{stderr}");
    assert_eq!(entries_below(&out), before, "s1's directory and file are removed again");
    let whole =
        mlprof(&["convert", "--to", "xspace", logdir.to_str().unwrap(), dir.path().join("ok").to_str().unwrap()]);
    assert!(whole.status.success(), "the same conversion elsewhere works");
    assert_eq!(files_below(&dir.path().join("ok")).len(), 2);
}

#[test]
fn a_directory_that_refuses_files_is_named() {
    let input = data("kineto/torch_profile/chrome_trace_summary.json");
    let input = input.to_str().unwrap();
    // /proc refuses new files even for root.
    if Path::new("/proc/self").exists() {
        let run = mlprof(&["convert", "--to", "chrome-json", input, "/proc/version"]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(stderr.starts_with("mlprof: error: cannot write into /proc: "), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(!stderr.contains(PARTIAL_PREFIX), "{stderr}");
    }
    // A read-only directory (which does not stop root).
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let dir = tempfile::tempdir().unwrap();
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        let target = locked.join("out.json");
        let run = mlprof(&["convert", "--to", "chrome-json", input, target.to_str().unwrap()]);
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(stderr.starts_with(&format!("mlprof: error: cannot write into {}: ", locked.display())), "{stderr}");
        assert!(stderr.contains("ermission denied"), "{stderr}");
    }
}
