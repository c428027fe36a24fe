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

#[test]
fn progress_says_how_far_reading_a_run_has_come() {
    let root = tempfile::tempdir().expect("a directory");
    std::fs::write(root.path().join("big.pt.trace.json"), big_trace(600_000)).expect("the trace");
    let cache = tempfile::tempdir().expect("a cache directory");
    let server = TestServer::start(root.path(), cache.path()).expect("the server starts");
    let runs = server.get("/api/runs", &[]).expect("runs").json().expect("JSON");
    let run = runs["runs"][0]["name"].as_str().expect("a run").to_string();
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
    let host = runs["runs"][0]["hosts"][0].as_str().expect("a host").to_string();
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
