//! `mlprof capture` against profiler servers that lie (issue 17, item 8): a status
//! message full of terminal escape sequences, garbage where the XSpace should be, tool
//! data named to escape the session directory. Through the binary, against scripted
//! servers on 127.0.0.1: nothing raw reaches stderr, garbage is an error with a non-zero
//! exit, and every file written is inside the log directory with a plain name.

#[path = "../../capture/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use support::{Reply, serve, tool_data, xspace};
use tonic::Code;

mod common;
mod tree;

use common::mlprof;
use tree::{entries_below, files_below};

/// A runtime for the fake servers, alive for the test.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime")
}

/// Captures `addr` once (no retries) into `<root>/logs`.
fn capture(addr: std::net::SocketAddr, root: &Path) -> Output {
    let logdir = root.join("logs");
    mlprof(&[
        "capture",
        &addr.to_string(),
        "--duration",
        "10ms",
        "--retries",
        "0",
        "--logdir",
        &logdir.to_string_lossy(),
    ])
}

/// Stderr, checked to hold no byte that acts on a terminal: C0 controls other than the
/// line feeds ending lines, DEL, C1 controls, bidirectional overrides and isolates.
fn clean_stderr(out: &Output) -> String {
    let stderr = String::from_utf8(out.stderr.clone()).expect("UTF-8 stderr");
    let bad: Vec<char> = stderr
        .chars()
        .filter(|&c| {
            (c.is_control() && c != '\n')
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
        })
        .collect();
    assert!(bad.is_empty(), "raw control characters {bad:?} in stderr: {stderr:?}");
    stderr
}

#[test]
fn a_status_message_with_escape_sequences_is_shown_escaped() {
    let rt = runtime();
    let message = "\u{1b}[2J\u{1b}[31mFAKE: credentials accepted\r\n\u{9b}0m\u{202e}gnp.exe\u{7}";
    let (addr, _) = rt.block_on(serve(vec![Reply::Fail(Code::PermissionDenied, message)]));
    let root = tempfile::tempdir().unwrap();
    let out = capture(addr, root.path());
    let stderr = clean_stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let line = stderr.lines().find(|l| l.starts_with(&format!("{addr}: "))).expect("the worker's line");
    assert_eq!(
        line,
        format!(
            "{addr}: the server answered PERMISSION_DENIED: \\x1b[2J\\x1b[31mFAKE: credentials accepted\\r\\n\
             \\u{{9b}}0m\\u{{202e}}gnp.exe\\x07"
        ),
        "one line, every control visible"
    );
    assert!(entries_below(root.path()).is_empty(), "nothing written");
}

#[test]
fn garbage_for_an_xspace_fails_and_leaves_nothing() {
    let rt = runtime();
    let root = tempfile::tempdir().unwrap();
    for (what, garbage) in
        [("noise", support::noise(64 << 10, 17)), ("nothing", Vec::new()), ("no planes", vec![0x28, 1])]
    {
        let (addr, _) = rt.block_on(serve(vec![xspace(garbage)]));
        let out = capture(addr, root.path());
        let stderr = clean_stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
        assert!(stderr.contains(&format!("{addr}: the server sent an invalid XSpace (")), "{what}: {stderr}");
        assert!(stderr.contains("; nothing was written"), "{what}: {stderr}");
        assert!(!stderr.contains("wrote "), "{what}: {stderr}");
        assert!(stderr.ends_with("mlprof: error: nothing was captured on this machine\n"), "{what}: {stderr}");
        let left = files_below(root.path());
        assert!(left.is_empty(), "{what}: {left:?}");
    }
}

#[test]
fn tool_data_names_cannot_escape_or_carry_controls() {
    let rt = runtime();
    let tiny = support::tiny_xspace();
    let hostile: &[(&str, &[u8])] = &[
        ("xplane.pb", &tiny),
        ("\u{1b}[31mevil\r.pb", b"esc"),
        ("../../../outside.pb", b"up"),
        ("/etc/cron.d/x", b"abs"),
        ("..", b"dots"),
        ("trace\n.json.gz", b"lf"),
    ];
    let (addr, _) = rt.block_on(serve(vec![tool_data(hostile)]));
    let root = tempfile::tempdir().unwrap();
    let out = capture(addr, root.path());
    let stderr = clean_stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let logdir = root.path().join("logs");
    let entries = entries_below(root.path());
    assert!(entries.iter().all(|p| p.starts_with(&logdir)), "everything inside the log directory: {entries:?}");
    let files: Vec<&PathBuf> = entries.iter().filter(|p| p.is_file()).collect();
    assert_eq!(files.len(), hostile.len(), "{files:?}");
    let session = files[0].parent().expect("session directory");
    assert_eq!(session.parent(), Some(logdir.join("plugins/profile").as_path()));
    let stem = format!("127.0.0.1_{}.", addr.port());
    for file in &files {
        assert_eq!(file.parent(), Some(session), "{file:?}");
        let name = file.file_name().and_then(|n| n.to_str()).expect("UTF-8 name");
        let tool = name.strip_prefix(&stem).expect("named after the worker");
        assert!(!tool.starts_with('.') && !tool.contains(".."), "{name:?}");
        assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c)), "{name:?}");
    }
    assert_eq!(std::fs::read(session.join(format!("{stem}xplane.pb"))).unwrap(), tiny);
    assert_eq!(std::fs::read(session.join(format!("{stem}__31mevil_.pb"))).unwrap(), b"esc");
    assert!(stderr.contains(&format!("{addr}: wrote ")), "{stderr}");
}
