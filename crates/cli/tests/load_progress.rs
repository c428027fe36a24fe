//! The progress bar while a large profile loads: drawn on a terminal (a pseudo-terminal
//! from util-linux's `script`), cleared when done, and never drawn with `--quiet` or when
//! stderr is not a terminal.

mod common;
mod peers;

use std::io::Write;
use std::path::Path;
use std::process::Command;

use common::mlprof;

/// Writes a Kineto trace of `events` CPU ops (about 120 bytes each).
fn write_trace(path: &Path, events: usize) {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).expect("create the trace"));
    write!(out, "{{\"schemaVersion\": 1, \"traceEvents\": [").expect("write");
    for i in 0..events {
        let sep = if i == 0 { "" } else { "," };
        write!(
            out,
            "{sep}\n{{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op{}\", \"pid\": 1, \"tid\": 1, \"ts\": {}, \"dur\": 1}}",
            i % 97,
            i * 2
        )
        .expect("write");
    }
    writeln!(out, "]}}").expect("write");
}

/// Runs `mlprof ARGS` with its stderr on a pseudo-terminal; returns what the terminal got.
fn on_a_terminal(args: &[&str]) -> Option<String> {
    let script = ["/usr/bin/script", "/bin/script"].into_iter().find(|p| Path::new(p).exists())?;
    let log = tempfile::NamedTempFile::new().expect("a log file");
    let command = std::iter::once(env!("CARGO_BIN_EXE_mlprof"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let status = Command::new(script)
        .args(["-qec", &format!("{command} > /dev/null"), log.path().to_str().expect("UTF-8")])
        .env("COLUMNS", "100")
        .status()
        .expect("script runs");
    assert!(status.success(), "mlprof under script failed");
    Some(String::from_utf8_lossy(&std::fs::read(log.path()).expect("the log")).into_owned())
}

/// [`on_a_terminal`], or `None` after saying that `test` skipped (no `script(1)`), which
/// fails where peers are required: util-linux is essential on Debian, so CI has it.
fn on_a_terminal_or_skip(test: &str, args: &[&str]) -> Option<String> {
    let shown = on_a_terminal(args);
    if shown.is_none() {
        assert!(std::env::var_os("MLPROF_REQUIRE_PEERS").is_none(), "script(1) is missing");
        peers::skipped(test, "no script(1) for a pseudo-terminal");
    }
    shown
}

#[test]
fn a_long_load_shows_a_bar_on_a_terminal_only() {
    let dir = tempfile::tempdir().expect("a directory");
    let trace = dir.path().join("big.pt.trace.json");
    write_trace(&trace, 600_000);
    let path = trace.to_str().expect("UTF-8");
    let test = "a_long_load_shows_a_bar_on_a_terminal_only";
    let Some(shown) = on_a_terminal_or_skip(test, &["info", path]) else { return };
    assert!(shown.contains("reading ") && shown.contains("MiB"), "the bar: {shown:?}");
    let (last_bar, last_clear) = (shown.rfind("reading "), shown.rfind("\u{1b}[2K"));
    assert!(last_clear > last_bar, "the bar is cleared at the end: {:?}", &shown[shown.len().saturating_sub(200)..]);
    let quiet = on_a_terminal(&["--quiet", "info", path]).expect("script");
    assert!(!quiet.contains("reading "), "--quiet: {quiet:?}");
    let piped = mlprof(&["info", path]);
    assert!(piped.status.success());
    assert!(piped.stderr.is_empty(), "no bar into a pipe: {}", String::from_utf8_lossy(&piped.stderr));
}

#[test]
fn a_long_conversion_shows_what_it_has_written_on_a_terminal_only() {
    let dir = tempfile::tempdir().expect("a directory");
    let trace = dir.path().join("big.pt.trace.json");
    write_trace(&trace, 600_000);
    // Gzipped, so that writing takes long enough to be shown.
    let (path, out) = (trace.to_str().expect("UTF-8"), dir.path().join("out.json.gz"));
    let out = out.to_str().expect("UTF-8");
    let test = "a_long_conversion_shows_what_it_has_written_on_a_terminal_only";
    let Some(shown) = on_a_terminal_or_skip(test, &["convert", path, out, "--to", "chrome-json"]) else { return };
    assert!(shown.contains("writing: ") && shown.contains("so far"), "the line: {shown:?}");
    let (last_line, last_clear) = (shown.rfind("writing: "), shown.rfind("\u{1b}[2K"));
    assert!(last_clear > last_line, "cleared at the end: {:?}", &shown[shown.len().saturating_sub(200)..]);
    let written = std::fs::metadata(out).expect("the output").len();
    assert!(written > 1_000_000, "{written} bytes");
    let quiet = on_a_terminal(&["--quiet", "convert", path, out, "--to", "chrome-json"]).expect("script");
    assert!(!quiet.contains("writing: "), "--quiet: {quiet:?}");
    let piped = mlprof(&["convert", path, out, "--to", "chrome-json"]);
    assert!(piped.status.success());
    assert!(!String::from_utf8_lossy(&piped.stderr).contains("writing: "), "no line into a pipe");
}
