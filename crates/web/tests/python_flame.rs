//! `/api/python/flame` end to end on a real sampled session (`mlprof run` on
//! `tests/peers/python_hot_loop.py`, tests/data/sampled): the tree against the same
//! index computed in-process and against the `python` tool's counts, the thread and
//! waiting-threads filters, and every bad parameter as a one-line JSON error.

use std::path::{Path, PathBuf};

use mlprof_analysis::python_flame::{FlameIndex, FlameOptions};
use mlprof_analysis::tool::{Analysis, Options};
use mlprof_model::Host;
use mlprof_web::testing::TestServer;
use serde_json::Value;

const SAMPLED: &str = "sampled/python_hot_loop/logdir";
const RUN: &str = "2026_11_26_07_35_30";

fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(relative)
}

/// A server of `path`, with the cache folder it uses (kept while it serves).
struct Served {
    server: TestServer,
    _cache: tempfile::TempDir,
}

fn serve(path: &Path) -> Served {
    let _cache = tempfile::tempdir().expect("temp dir");
    Served { server: TestServer::start(path, _cache.path()).expect("server starts"), _cache }
}

impl Served {
    /// The status and JSON body of `target`.
    fn get(&self, target: &str) -> (u16, Value) {
        let response = self.server.get(target, &[]).expect("request answered");
        assert_eq!(response.header("content-type"), Some("application/json"), "{target}");
        (response.status, response.json().expect("JSON body"))
    }

    fn ok(&self, target: &str) -> Value {
        let (status, body) = self.get(target);
        assert_eq!(status, 200, "{target}: {body}");
        body
    }

    /// The status and one-line message of a refused request.
    fn error(&self, target: &str) -> (u16, String) {
        let (status, body) = self.get(target);
        let message = body["error"].as_str().unwrap_or_else(|| panic!("{target}: an error, got {body}")).to_string();
        assert!(!message.contains('\n'), "{message}");
        (status, message)
    }
}

fn flame_url(params: &str) -> String {
    format!("/api/python/flame?run={RUN}{params}")
}

/// The nodes of `node`'s tree, depth first.
fn nodes(node: &Value) -> Vec<&Value> {
    let mut all = vec![node];
    for child in node["children"].as_array().into_iter().flatten() {
        all.extend(nodes(child));
    }
    all
}

#[test]
fn the_flame_graph_is_the_sessions_call_tree_and_counts_what_the_python_tool_counts() {
    let served = serve(&data(SAMPLED));
    let flame = served.ok(&flame_url(""));

    let session = mlprof_formats::discover::load(&data(SAMPLED)).expect("loads").pop().expect("a session");
    let hosts: Vec<&Host> = session.hosts.iter().collect();
    let index = FlameIndex::of(&Analysis::new(hosts, Options::default()));
    let expected = index.flame(&FlameOptions::default()).expect("samples");
    assert_eq!(flame, serde_json::to_value(&expected).expect("JSON"));

    let tool = served.ok(&format!("/api/tool?run={RUN}&tool=python"))["result"].clone();
    assert_eq!(flame["total"], tool["running_samples"]);
    assert_eq!(flame["root"]["total"], flame["total"]);
    assert_eq!(flame["root"]["name"], "all");
    assert_eq!(flame["steps"], serde_json::json!([]), "no framework trace beside the samples: no steps");
    let threads: Vec<&str> =
        flame["threads"].as_array().expect("threads").iter().filter_map(|t| t["name"].as_str()).collect();
    let tool_threads: Vec<&str> =
        tool["threads"].as_array().expect("threads").iter().filter_map(|t| t["thread"].as_str()).collect();
    assert_eq!(threads, tool_threads);

    // The hot function is where most samples are, at the lines the python tool names.
    let all = nodes(&flame["root"]);
    let hot: u64 = all.iter().filter(|n| n["name"] == "hot_spin").filter_map(|n| n["self"].as_u64()).sum();
    let lines = tool["lines"].as_array().expect("lines");
    let tool_hot: u64 = lines
        .iter()
        .filter(|l| l["function"] == "hot_spin")
        .map(|l| &l["self_samples"])
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(hot, tool_hot);
    assert!(hot * 2 > flame["total"].as_u64().expect("a total"), "hot_spin holds most samples");
    for node in all {
        let total = node["total"].as_u64().expect("total");
        let children: u64 =
            node["children"].as_array().expect("children").iter().filter_map(|c| c["total"].as_u64()).sum();
        assert_eq!(node["self"].as_u64().expect("self") + children, total, "{}", node["name"]);
    }
}

#[test]
fn one_thread_and_waiting_threads() {
    let served = serve(&data(SAMPLED));
    let flame = served.ok(&flame_url(""));
    let threads = flame["threads"].as_array().expect("threads");
    let waiter = threads.iter().find(|t| t["name"].as_str().is_some_and(|n| n.starts_with("waiter"))).expect("waiter");
    let name = waiter["name"].as_str().expect("a name");
    let encoded: String = name.replace(' ', "%20").replace('(', "%28").replace(')', "%29").replace(',', "%2C");
    for thread in [encoded, waiter["tid"].to_string()] {
        let one = served.ok(&flame_url(&format!("&thread={thread}")));
        assert_eq!(one["total"], waiter["running_samples"], "{thread}");
        assert_eq!(one["root"]["name"], name);
        let with_idle = served.ok(&flame_url(&format!("&thread={thread}&idle=1")));
        assert_eq!(with_idle["total"], waiter["samples"], "{thread}: waiting samples counted");
    }
    let everything = served.ok(&flame_url("&idle=1"));
    let samples: u64 = threads.iter().filter_map(|t| t["samples"].as_u64()).sum();
    assert_eq!(everything["total"].as_u64(), Some(samples));
}

#[test]
fn bad_parameters_are_one_line_errors() {
    let served = serve(&data(SAMPLED));
    let cases: [(&str, u16, &str); 10] = [
        ("/api/python/flame", 400, "missing parameter run"),
        ("/api/python/flame?run=nope", 404, "nope"),
        (&flame_url("&host=nope"), 404, "nope"),
        (&flame_url("&idle=2"), 400, "idle"),
        (&flame_url("&step=x"), 400, "step"),
        (&flame_url("&step=1"), 400, "no step 1"),
        (&flame_url("&thread=nope"), 400, "no sampled thread"),
        (&flame_url("&start_ps=5"), 400, "start_ps and end_ps"),
        (&flame_url("&start_ps=5&end_ps=5"), 400, "end after"),
        (&flame_url("&step=1&start_ps=0&end_ps=9"), 400, "not both"),
    ];
    for (target, status, says) in cases {
        let (got, message) = served.error(target);
        assert_eq!(got, status, "{target}: {message}");
        assert!(message.contains(says), "{target}: {message}");
    }
    let host = served.ok(&flame_url("&host=vm_python&start_ps=0&end_ps=9223372036854775807"));
    assert_eq!(host["total"], served.ok(&flame_url(""))["total"], "one host, all of its time");
}

#[test]
fn a_run_without_sampled_stacks_says_how_to_record_them() {
    let served = serve(&data("xspace/jax_profile/logdir"));
    let (status, message) = served.error("/api/python/flame?run=2026_11_21_19_24_59");
    assert_eq!(status, 400);
    assert!(message.contains("mlprof run"), "{message}");
}
