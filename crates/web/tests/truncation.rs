//! Files cut under a running server (issue 17): a profile truncated before it is loaded
//! is a one-line 500 that the next request retries once the file is whole again, and a
//! trace index truncated in the cache is dropped and rebuilt — the server never dies of
//! `SIGBUS` (which would end this test process too).

use std::path::{Path, PathBuf};

use mlprof_web::testing::TestServer;
use serde_json::Value;

fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(relative)
}

/// A served copy of a real Kineto trace (plain JSON, so it is memory-mapped).
struct Served {
    _dir: tempfile::TempDir,
    trace: PathBuf,
    pristine: Vec<u8>,
    cache: PathBuf,
}

fn served_trace() -> Served {
    let dir = tempfile::tempdir().expect("temp dir");
    let compressed = std::fs::read(data("kineto/hta/timeline_analysis/sampled_rank-0.json.gz")).expect("fixture");
    let pristine = mlprof_formats::input::gunzip(&compressed, "fixture").expect("gzip");
    let root = dir.path().join("logs");
    std::fs::create_dir(&root).expect("dir");
    let trace = root.join("rank-0.pt.trace.json");
    std::fs::write(&trace, &pristine).expect("written");
    let cache = dir.path().join("cache");
    Served { _dir: dir, trace, pristine, cache }
}

fn truncate(path: &Path, len: u64) {
    std::fs::OpenOptions::new().write(true).open(path).and_then(|f| f.set_len(len)).expect("truncated");
}

/// A server on the served trace's directory, and the name of its one run.
fn start(served: &Served) -> (TestServer, String) {
    let root = served.trace.parent().expect("root");
    let server = TestServer::start(root, &served.cache).expect("server starts");
    let runs: Value = server.get("/api/runs", &[]).expect("answered").json().expect("JSON");
    let run = runs["runs"][0]["name"].as_str().expect("a run").to_string();
    (server, run)
}

#[test]
fn a_profile_truncated_before_it_is_loaded_fails_once_and_loads_when_whole_again() {
    let served = served_trace();
    let (server, run) = start(&served);
    truncate(&served.trace, served.pristine.len() as u64 / 2);
    let target = format!("/api/tool?run={run}&host=rank-0&tool=overview_page");
    let failed = server.get(&target, &[]).expect("answered");
    assert_eq!(failed.status, 500, "{}", failed.text());
    let message = failed.json().expect("JSON")["error"].as_str().expect("message").to_string();
    assert!(message.contains("rank-0.pt.trace.json") && !message.contains('\n'), "{message}");
    std::fs::write(&served.trace, &served.pristine).expect("restored");
    let loaded = server.get(&target, &[]).expect("answered");
    assert_eq!(loaded.status, 200, "{}", loaded.text());
}

#[test]
fn a_trace_index_truncated_in_the_cache_is_dropped_and_rebuilt() {
    let served = served_trace();
    let (server, run) = start(&served);
    let meta_target = format!("/api/trace/meta?run={run}&host=rank-0");
    let meta: Value = server.get(&meta_target, &[]).expect("answered").json().expect("JSON");
    let (start, end) = (meta["start_ps"].as_i64().expect("start"), meta["end_ps"].as_i64().expect("end"));
    let view_target = format!("/api/trace/view?run={run}&host=rank-0&start_ps={start}&end_ps={end}&width_px=1600");
    let before = server.get(&view_target, &[]).expect("answered");
    assert_eq!(before.status, 200, "{}", before.text());

    let index_files: Vec<PathBuf> =
        std::fs::read_dir(&served.cache).expect("cache dir").map(|e| e.expect("entry").path()).collect();
    assert_eq!(index_files.len(), 1, "{index_files:?}");
    truncate(&index_files[0], 4096);
    // Answered from the cut index (409: ask again) or from a rebuilt one, never a signal.
    let during = server.get(&view_target, &[]).expect("answered");
    assert!(during.status == 200 || during.status == 409, "{}: {}", during.status, during.text());
    let after = server.get(&view_target, &[]).expect("answered");
    assert_eq!(after.status, 200, "{}", after.text());
    assert_eq!(after.json().expect("JSON"), before.json().expect("JSON"), "the rebuilt index answers the same");
    assert!(std::fs::metadata(&index_files[0]).expect("rebuilt").len() > 4096);
}
