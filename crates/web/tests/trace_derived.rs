//! XProf's derived GPU lines in the trace viewer, end to end on the XLA GPU fixture:
//! `/api/trace/meta` lists a `/device:GPU:0 (derived)` section (Steps, then the
//! stream's Framework Name Scope, Framework Ops, XLA Modules and XLA Ops lines, with
//! XProf's event counts) before the device's own streams, and a derived event's
//! details are the args of the first kernel it covers.

use std::path::{Path, PathBuf};

use mlprof_web::testing::TestServer;
use serde_json::Value;

const XLA_GPU_LOGDIR: &str = "xspace/jax_gpu_xla/logdir";

fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(relative)
}

fn get_json(server: &TestServer, target: &str) -> Value {
    let response = server.get(target, &[]).expect("answered");
    assert_eq!(response.status, 200, "{target}: {}", response.text());
    response.json().expect("JSON")
}

/// (section name, kind, [(track name, events)]) of a meta answer.
type Sections = Vec<(String, String, Vec<(String, u64)>)>;

fn sections(meta: &Value) -> Sections {
    let text = |v: &Value| v.as_str().expect("text").to_string();
    meta["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .map(|s| {
            let tracks = s["tracks"].as_array().expect("tracks");
            let tracks = tracks.iter().map(|t| (text(&t["name"]), t["events"].as_u64().expect("events"))).collect();
            (text(&s["name"]), text(&s["kind"]), tracks)
        })
        .collect()
}

#[test]
fn gpu_planes_get_xprofs_derived_lines_with_the_kernels_args() {
    let cache = tempfile::tempdir().expect("cache dir");
    let server = TestServer::start(&data(XLA_GPU_LOGDIR), cache.path()).expect("server starts");
    let runs = get_json(&server, "/api/runs");
    let (run, host) =
        (runs["runs"][0]["name"].as_str().expect("run"), runs["runs"][0]["hosts"][0].as_str().expect("host"));
    let target = |endpoint: &str, params: &str| format!("/api/trace/{endpoint}?run={run}&host={host}{params}");

    let meta = get_json(&server, &target("meta", ""));
    let sections = sections(&meta);
    let owned = |tracks: &[(&str, u64)]| tracks.iter().map(|&(n, e)| (n.to_string(), e)).collect::<Vec<_>>();
    assert_eq!(
        sections[0],
        (
            "/device:GPU:0 (derived)".to_string(),
            "derived".to_string(),
            owned(&[
                ("Steps", 10),
                ("Framework Name Scope - from #7", 172),
                ("Framework Ops - from #7", 330),
                ("XLA Modules - from #7", 30),
                ("XLA Ops - from #7", 370),
            ])
        )
    );
    assert_eq!(
        sections[1],
        (
            "/device:GPU:0".to_string(),
            "device".to_string(),
            owned(&[("Stream #7(Kernel)", 370), ("Stream #13(MemcpyH2D)", 11)])
        )
    );
    assert_eq!(sections[2].0, "/host:CPU");
    let total: u64 = sections.iter().flat_map(|s| &s.2).map(|t| t.1).sum();
    assert_eq!(meta["events"].as_u64(), Some(total));

    // An XLA op event: its name, track and depth, and its first kernel's args.
    let xla_ops = meta["sections"][0]["tracks"][4]["id"].as_u64().expect("XLA Ops track");
    let found = get_json(&server, &target("search", "&q=ynn_fusion.6&limit=100"));
    let results = found["results"].as_array().expect("results");
    let op = results.iter().find(|r| r["track"].as_u64() == Some(xla_ops)).expect("an XLA op ynn_fusion.6");
    let details = get_json(&server, &target("event", &format!("&id={}", op["id"])));
    assert_eq!(details["name"], "ynn_fusion.6");
    assert_eq!(details["track_name"], "XLA Ops - from #7");
    assert_eq!(details["depth"], 0);
    assert_eq!(details["args"]["hlo_op"], "ynn_fusion.6", "{details}");
    assert_eq!(details["args"]["hlo_module"], "jit_train_step");
    // The kernel under it starts with it, on the stream.
    let stream = meta["sections"][1]["tracks"][0]["id"].as_u64().expect("stream track");
    let start = op["start_ps"].as_i64().expect("start");
    let view = get_json(
        &server,
        &target("view", &format!("&start_ps={start}&end_ps={}&width_px=100&tracks={stream}", start + 1)),
    );
    let kernel = view["tracks"][0]["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e[0].as_i64() == Some(start))
        .expect("the kernel");
    let kernel = get_json(&server, &target("event", &format!("&id={}", kernel[4])));
    assert_eq!(kernel["track_name"], "Stream #7(Kernel)");
    assert_eq!(kernel["args"], details["args"]);

    // A step: named by its group, with its first event's args.
    let steps = meta["sections"][0]["tracks"][0]["id"].as_u64().expect("Steps track");
    let found = get_json(&server, &target("search", "&q=train%204&limit=100"));
    let step = found["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| r["track"].as_u64() == Some(steps))
        .expect("step train 4");
    let details = get_json(&server, &target("event", &format!("&id={}", step["id"])));
    assert_eq!((details["name"].as_str(), details["track_name"].as_str()), (Some("train 4"), Some("Steps")));
    assert!(details["args"]["correlation_id"].is_string(), "{details}");
}
