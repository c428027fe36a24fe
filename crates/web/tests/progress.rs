//! `GET /api/progress` while a large run is read and its trace-viewer index built: the
//! page can show how far each has come, and the answer is `idle` once it is done.

use std::time::{Duration, Instant};

use mlprof_web::testing::TestServer;
use serde_json::Value;

/// A Kineto trace of `count` CPU ops, as one string.
fn big_trace(count: usize) -> String {
    let events: Vec<String> = (0..count)
        .map(|i| {
            format!(r#"{{"ph":"X","cat":"cpu_op","name":"aten::op{}","pid":1,"tid":1,"ts":{},"dur":1}}"#, i % 89, 2 * i)
        })
        .collect();
    format!(r#"{{"schemaVersion":1,"traceEvents":[{}]}}"#, events.join(",\n"))
}

/// A server over one Kineto trace of generated ops, its run and that run's host.
struct BigRun {
    server: TestServer,
    run: String,
    host: String,
    cache: tempfile::TempDir,
    _root: tempfile::TempDir,
}

/// Serves a Kineto trace of `ops` CPU ops, with an empty cache directory.
fn serve_big_run(ops: usize) -> BigRun {
    let root = tempfile::tempdir().expect("a directory");
    std::fs::write(root.path().join("big.pt.trace.json"), big_trace(ops)).expect("the trace");
    let cache = tempfile::tempdir().expect("a cache directory");
    let server = TestServer::start(root.path(), cache.path()).expect("the server starts");
    let runs = server.get("/api/runs", &[]).expect("runs").json().expect("JSON");
    let run = runs["runs"][0]["name"].as_str().expect("a run").to_string();
    let host = runs["runs"][0]["hosts"][0].as_str().expect("a host").to_string();
    BigRun { server, run, host, cache, _root: root }
}

#[test]
fn progress_says_how_far_reading_a_run_has_come() {
    let BigRun { _root, cache: _cache, run, host, server } = serve_big_run(600_000);
    let progress = |run: &str| -> Value {
        server.get(&format!("/api/progress?run={run}"), &[]).expect("progress").json().expect("JSON")
    };
    assert_eq!(progress(&run)["stage"], "idle", "nothing read yet");

    let url = server.url().to_string();
    let target = format!("/api/tool?run={run}&tool=overview_page");
    let reader = std::thread::spawn(move || mlprof_web::testing::get(&url, &target, &[]).expect("the tool answers"));
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = None;
    while !reader.is_finished() && Instant::now() < deadline {
        let now = progress(&run);
        if now["stage"] == "reading" {
            let (done, total) =
                (now["done_bytes"].as_u64().expect("done"), now["total_bytes"].as_u64().expect("total"));
            assert!(done <= total, "{now}");
            // The latest: the first answers can come before the file is opened (0 of 0).
            seen = Some(now);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let answer = reader.join().expect("the reader");
    assert_eq!(answer.status, 200, "{}", answer.text());
    let seen = seen.expect("the reading was seen while it ran");
    assert!(seen["total_bytes"].as_u64().is_some_and(|t| t > 10_000_000), "{seen}");
    assert_eq!(progress(&run)["stage"], "idle", "done");

    // The trace viewer's index of the run's host, built on first use.
    let url = server.url().to_string();
    let target = format!("/api/trace/meta?run={run}&host={host}");
    let builder = std::thread::spawn(move || mlprof_web::testing::get(&url, &target, &[]).expect("the index answers"));
    let mut stages = Vec::new();
    while !builder.is_finished() && Instant::now() < deadline {
        let now = progress(&run);
        if now["stage"] == "indexing" {
            assert_eq!(now["host"], host.as_str(), "{now}");
            let (done, total) =
                (now["done_events"].as_u64().expect("done"), now["total_events"].as_u64().expect("total"));
            assert!(done <= total, "{now}");
            let stage = now["index_stage"].as_str().expect("an index stage").to_string();
            if stage != "writing" {
                assert!(total >= 600_000, "the host's 600,000 ops: {now}");
            }
            if stages.last() != Some(&stage) {
                stages.push(stage);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let answer = builder.join().expect("the index request");
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert!(!stages.is_empty(), "the index build was seen while it ran");
    let order = ["collecting", "laying out", "writing"];
    let ranks: Vec<usize> = stages.iter().map(|s| order.iter().position(|o| o == s).expect("a known stage")).collect();
    assert!(ranks.windows(2).all(|w| w[0] < w[1]), "stages in order: {stages:?}");
    assert_eq!(progress(&run)["stage"], "idle", "built");
    assert_eq!(server.get("/api/progress?run=nope", &[]).expect("answered").status, 404);
}

/// Every file under `dir`, at any depth.
fn files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .flatten()
        .flat_map(|entry| {
            let path = entry.path();
            if path.is_dir() { files_under(&path) } else { vec![path] }
        })
        .collect()
}

/// The page's address names its run, host and tool, and its script asks for them only
/// once it has loaded: asking for the page begins reading the run and, for the trace
/// viewer, building the host's index, with no API request.
#[test]
fn asking_for_a_runs_page_begins_reading_it_and_the_trace_viewers_index() {
    let BigRun { _root, cache, run, host, server } = serve_big_run(100_000);
    let page = |target: &str| {
        let answer = server.get(target, &[]).expect("the page");
        assert_eq!(answer.status, 200, "{target}");
        assert!(answer.text().contains("<script"), "{target}: the page");
    };
    let read = || server.state().known_tools(&run).is_some();
    let wait_until = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !done() {
            assert!(Instant::now() < deadline, "{what}: not within 120 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    };

    // Pages that name no known run begin nothing.
    for target in ["/", "/?run=nope&host=x&tool=trace_viewer", "/?run=%ZZ&tool=trace_viewer", "/?tool=trace_viewer"] {
        page(target);
    }
    std::thread::sleep(Duration::from_millis(500));
    assert!(!read(), "no run read");

    // Another tool's page: the run is read, no index built.
    page(&format!("/?run={run}&tool=overview_page"));
    wait_until("the run read", &read);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(files_under(cache.path()), Vec::<std::path::PathBuf>::new(), "no index for another tool");

    // The trace viewer's page: its host's index is built and written to the cache.
    page(&format!("/?run={run}&host={host}&tool=trace_viewer"));
    wait_until("the index written", &|| !files_under(cache.path()).is_empty());
    let meta = server.get(&format!("/api/trace/meta?run={run}&host={host}"), &[]).expect("meta");
    assert_eq!(meta.status, 200, "{}", meta.text());
    assert_eq!(meta.json().expect("JSON")["events"], 100_000);
}
