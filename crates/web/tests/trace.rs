//! The trace viewer's endpoints end to end on real fixtures, through a server on an
//! ephemeral port: meta against the model, views that lose no event, event details
//! with the model's args and flows, whole-trace search, the Kineto `Steps` section,
//! parameter errors, and the disk cache (one build shared by concurrent requests, reused
//! by a restarted server without reading the profile).

use std::path::{Path, PathBuf};

use mlprof_model::Host;
use mlprof_web::testing::{HttpResponse, TestServer};
use serde_json::Value;

fn data(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(relative)
}

const JAX_LOGDIR: &str = "xspace/jax_profile/logdir";
const KINETO_RANKS: &str = "kineto/hta/timeline_analysis";
const TORCH_LOGDIR: &str = "kineto/torch_profile/logdir";

struct Fixture {
    server: TestServer,
    run: String,
    host: String,
}

fn serve(path: &Path, cache: &Path) -> Fixture {
    let server = TestServer::start(path, cache).expect("server starts");
    let runs = get_json(&server, "/api/runs");
    let run = runs["runs"][0]["name"].as_str().expect("a run").to_string();
    let host = runs["runs"][0]["hosts"][0].as_str().expect("a host").to_string();
    Fixture { server, run, host }
}

fn get_json(server: &TestServer, target: &str) -> Value {
    let response = server.get(target, &[]).expect("answered");
    assert_eq!(response.status, 200, "{target}: {}", response.text());
    response.json().expect("JSON")
}

impl Fixture {
    fn target(&self, endpoint: &str, params: &str) -> String {
        format!("/api/trace/{endpoint}?run={}&host={}{params}", encode(&self.run), encode(&self.host))
    }

    fn json(&self, endpoint: &str, params: &str) -> Value {
        get_json(&self.server, &self.target(endpoint, params))
    }

    fn raw(&self, endpoint: &str, params: &str) -> HttpResponse {
        self.server.get(&self.target(endpoint, params), &[]).expect("answered")
    }

    fn error(&self, target: &str) -> (u16, String) {
        let response = self.server.get(target, &[]).expect("answered");
        let body = response.json().expect("JSON error");
        (response.status, body["error"].as_str().expect("message").to_string())
    }
}

fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") }
        })
        .collect()
}

fn model_host(path: &str) -> Host {
    let session = mlprof_formats::discover::load(&data(path)).expect("loads").pop().expect("a session");
    session.hosts.into_iter().next().expect("a host")
}

/// Timed events of the model (aggregated XSpace events and Chrome flow markers are
/// not timeline events).
fn timed_events(host: &Host) -> u64 {
    let mut count = 0;
    for plane in &host.planes {
        let ph = plane.find_stat_key("ph");
        for line in &plane.lines {
            for event in line.iter() {
                let marker = plane.metadata_of(&event).is_some_and(|m| {
                    plane.metadata_stats_of(m).iter().any(|s| {
                        Some(s.key()) == ph
                            && ["s", "t", "f"].contains(&plane.format_value(&plane.metadata_stats, s.value()).as_str())
                    })
                });
                if event.num_occurrences().is_none() && !marker {
                    count += 1;
                }
            }
        }
    }
    count
}

fn all_track_ids(meta: &Value) -> Vec<u64> {
    meta["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .flat_map(|s| s["tracks"].as_array().expect("tracks").iter().map(|t| t["id"].as_u64().expect("id")))
        .collect()
}

/// Events shown by a view answer: individual plus merged counts.
fn shown(view: &Value) -> u64 {
    view["tracks"]
        .as_array()
        .expect("tracks")
        .iter()
        .map(|t| {
            let events = t["events"].as_array().expect("events").len() as u64;
            let merged: u64 =
                t["merged"].as_array().expect("merged").iter().map(|m| m[3].as_u64().expect("count")).sum();
            events + merged
        })
        .sum()
}

#[test]
fn xspace_meta_view_event_and_search_agree_with_the_model() {
    let cache = tempfile::tempdir().expect("cache dir");
    let fixture = serve(&data(JAX_LOGDIR), cache.path());
    let host = model_host(JAX_LOGDIR);

    let meta = fixture.json("meta", "");
    assert_eq!(meta["host"], host.name.as_str());
    assert_eq!(meta["events"].as_u64(), Some(timed_events(&host)));
    let sections: Vec<(&str, &str)> = meta["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .map(|s| (s["name"].as_str().expect("name"), s["kind"].as_str().expect("kind")))
        .collect();
    assert_eq!(sections, [("/host:CPU", "host")]);
    let ids = all_track_ids(&meta);
    assert_eq!(ids, (0..ids.len() as u64).collect::<Vec<_>>());
    let lines: usize = host.planes.iter().map(|p| p.lines.iter().filter(|l| !l.is_empty()).count()).sum();
    assert_eq!(ids.len(), lines);
    let (start, end) = (meta["start_ps"].as_i64().expect("start"), meta["end_ps"].as_i64().expect("end"));
    assert_eq!(host.span_ps(), Some((start, end)));

    // Zoomed out: every event accounted for, few items, names resolved.
    let view = fixture.json("view", &format!("&start_ps={start}&end_ps={end}&width_px=800"));
    assert_eq!(shown(&view), timed_events(&host));
    assert_eq!(view["resolution_ps"].as_i64(), Some((end - start) / 800));
    let names = view["names"].as_array().expect("names");
    for track in view["tracks"].as_array().expect("tracks") {
        for e in track["events"].as_array().expect("events") {
            assert!(e[1].as_i64().expect("dur") > 0 || e[1] == 0);
            assert!((e[3].as_u64().expect("name") as usize) < names.len());
        }
        for m in track["merged"].as_array().expect("merged") {
            assert!((m[4].as_u64().expect("name") as usize) < names.len());
            assert!(m[1].as_i64() >= m[0].as_i64());
        }
    }
    // Chosen tracks only.
    let one = fixture.json("view", &format!("&start_ps={start}&end_ps={end}&width_px=800&tracks=1"));
    assert!(one["tracks"].as_array().expect("tracks").iter().all(|t| t["id"] == 1));

    // A flow (producer → consumer context) and its two ends' details.
    let flows = view["flows"].as_array().expect("flows");
    assert!(!flows.is_empty(), "JAX's dispatch → execution links");
    let flow = &flows[0];
    let from = fixture.json("event", &format!("&id={}", flow[0]));
    assert_eq!(from["track"], flow[1]);
    assert_eq!(from["start_ps"], flow[2]);
    assert!(from["flows"].as_array().expect("flows").iter().any(|f| f["direction"] == "out" && f["event"] == flow[3]));
    let to = fixture.json("event", &format!("&id={}", flow[3]));
    assert!(to["flows"].as_array().expect("flows").iter().any(|f| f["direction"] == "in" && f["event"] == flow[0]));
    assert!(to["args"].is_object());
    assert!(to["track_name"].as_str().is_some_and(|n| !n.is_empty()));

    // Search over the whole trace, in time order.
    let found = fixture.json("search", "&q=ISINSTANCE&limit=5");
    assert!(found["total"].as_u64().expect("total") > 100);
    let results = found["results"].as_array().expect("results");
    assert_eq!(results.len(), 5);
    assert!(results.windows(2).all(|w| w[0]["start_ps"].as_i64() <= w[1]["start_ps"].as_i64()));
    assert!(results.iter().all(|r| r["name"].as_str().expect("name").to_lowercase().contains("isinstance")));
    let default_limit = fixture.json("search", "&q=isinstance");
    assert_eq!(default_limit["results"].as_array().expect("results").len(), 100);
    assert_eq!(fixture.json("search", "&q=no%20such%20event")["total"], 0);
    search_pages_walk_every_match(&fixture, "isinstance");
}

/// Steps through every match of `query` a few at a time, forwards from the first page
/// and backwards from the last, and checks both walks against one big page.
fn search_pages_walk_every_match(fixture: &Fixture, query: &str) {
    let everything = fixture.json("search", &format!("&q={query}&limit=10000"));
    let total = everything["total"].as_u64().expect("total");
    let all = everything["results"].as_array().expect("results").clone();
    assert_eq!(all.len() as u64, total, "one page holds them all");
    assert_eq!(everything["offset"], 0);
    let cursor = |r: &Value| (r["start_ps"].as_i64().expect("start"), r["id"].as_u64().expect("id"));
    let mut forwards = Vec::new();
    let mut page = fixture.json("search", &format!("&q={query}&limit=7"));
    loop {
        assert_eq!(page["total"].as_u64(), Some(total));
        assert_eq!(page["offset"].as_u64(), Some(forwards.len() as u64));
        let results = page["results"].as_array().expect("results").clone();
        let Some(last) = results.last() else { break };
        let (ps, id) = cursor(last);
        forwards.extend(results.iter().cloned());
        page = fixture.json("search", &format!("&q={query}&limit=7&after_ps={ps}&after_id={id}"));
    }
    assert_eq!(forwards, all);
    let mut backwards = Vec::new();
    let mut page = fixture.json("search", &format!("&q={query}&limit=7&before_ps={}", i64::MAX));
    loop {
        let results = page["results"].as_array().expect("results").clone();
        let Some(first) = results.first() else { break };
        assert_eq!(page["offset"].as_u64(), Some(total - backwards.len() as u64 - results.len() as u64));
        let (ps, id) = cursor(first);
        backwards.splice(0..0, results.iter().cloned());
        page = fixture.json("search", &format!("&q={query}&limit=7&before_ps={ps}&before_id={id}"));
    }
    assert_eq!(backwards, all);
    // after_ps alone: the matches starting strictly after that time.
    let middle = cursor(&all[all.len() / 2]).0;
    let after = fixture.json("search", &format!("&q={query}&limit=3&after_ps={}", middle - 1));
    let first = all.iter().position(|r| cursor(r).0 >= middle).expect("a match");
    assert_eq!(after["offset"].as_u64(), Some(first as u64));
    assert_eq!(after["results"][0], all[first]);
}

#[test]
fn kineto_trace_has_a_steps_section_and_launch_to_kernel_flows() {
    let cache = tempfile::tempdir().expect("cache dir");
    let fixture = serve(&data(KINETO_RANKS), cache.path());
    let host = model_host(KINETO_RANKS);
    let meta = fixture.json("meta", "");
    let steps = mlprof_analysis::grouping::profiler_steps::find(&host);
    assert!(!steps.is_empty());
    // The Steps section adds one event per ProfilerStep#N on top of the model's events.
    assert_eq!(meta["events"].as_u64(), Some(timed_events(&host) + steps.len() as u64));
    let first = &meta["sections"][0];
    assert_eq!((first["name"].as_str(), first["kind"].as_str()), (Some("Steps"), Some("derived")));
    assert_eq!(first["tracks"][0]["events"].as_u64(), Some(steps.len() as u64));
    assert!(meta["sections"].as_array().expect("sections").iter().any(|s| s["kind"] == "device"));

    // The first step event: its name and the annotation's args.
    let step_track = first["tracks"][0]["id"].as_u64().expect("id");
    let (start, end) = (meta["start_ps"].as_i64().expect("start"), meta["end_ps"].as_i64().expect("end"));
    let view = fixture.json("view", &format!("&start_ps={start}&end_ps={end}&width_px=16384&tracks={step_track}"));
    let step = &view["tracks"][0]["events"][0];
    assert_eq!(view["names"][step[3].as_u64().expect("name") as usize], steps[0].name.as_str());
    let details = fixture.json("event", &format!("&id={}", step[4]));
    assert_eq!(details["name"], steps[0].name.as_str());
    assert_eq!(details["dur_ps"].as_i64(), Some(steps[0].end_ps - steps[0].begin_ps));
    assert!(details["args"].as_object().expect("args").contains_key("cat"), "{details}");

    // A kernel comes from its launch: same correlation id, host → device.
    let kernel = fixture.json("search", "&q=fbgemm_gpu%3A%3Apermute_2D_lengths_kernel&limit=1");
    let id = kernel["results"][0]["id"].as_u64().expect("a kernel");
    let kernel = fixture.json("event", &format!("&id={id}"));
    let correlation = kernel["args"]["correlation_id"].as_str().expect("correlation_id").to_string();
    let launch = kernel["flows"].as_array().expect("flows").iter().find(|f| f["direction"] == "in").expect("launch");
    assert!(launch["name"].as_str().expect("name").starts_with("cuda"), "{launch}");
    let launch = fixture.json("event", &format!("&id={}", launch["event"]));
    assert_eq!(launch["args"]["correlation_id"].as_str(), Some(correlation.as_str()));
    let all = fixture.json("view", &format!("&start_ps={start}&end_ps={end}&width_px=16384"));
    assert_eq!(shown(&all), meta["events"].as_u64().expect("events"));
    assert!(all["flows"].as_array().expect("flows").len() > 100);
}

#[test]
fn pytorch_backward_ops_come_from_their_forward_ops() {
    let cache = tempfile::tempdir().expect("cache dir");
    let fixture = serve(&data(TORCH_LOGDIR), cache.path());
    // The trace's 84 `Backward0` events: 42 backward ops, each the finish of one of the
    // 42 `fwdbwd` flows, inside as many `autograd::engine::evaluate_function` wrappers.
    let found = fixture.json("search", "&q=Backward0&limit=1000");
    assert_eq!(found["total"].as_u64(), Some(84));
    let mut linked = 0;
    for result in found["results"].as_array().expect("results") {
        let event = fixture.json("event", &format!("&id={}", result["id"]));
        let name = event["name"].as_str().expect("name");
        let flows = event["flows"].as_array().expect("flows");
        if name.starts_with("autograd::") {
            assert!(flows.is_empty(), "{event}");
            continue;
        }
        assert_eq!(flows.len(), 1, "{event}");
        let forward = &flows[0];
        assert_eq!(forward["direction"], "in");
        assert!(forward["name"].as_str().expect("name").starts_with("aten::"), "{event}");
        let forward = fixture.json("event", &format!("&id={}", forward["event"]));
        assert!(
            forward["flows"]
                .as_array()
                .expect("flows")
                .iter()
                .any(|f| f["direction"] == "out" && f["event"] == result["id"] && f["name"] == name)
        );
        assert!(forward["start_ps"].as_i64() < event["start_ps"].as_i64(), "forward before backward");
        if name == "ReluBackward0" {
            assert_eq!(forward["name"], "aten::relu");
        }
        linked += 1;
    }
    assert_eq!(linked, 42);
}

#[test]
fn a_range_aggregate_equals_the_events_the_view_returns_in_it() {
    let cache = tempfile::tempdir().expect("cache dir");
    let fixture = serve(&data(KINETO_RANKS), cache.path());
    let meta = fixture.json("meta", "");
    let (start, end) = (meta["start_ps"].as_i64().expect("start"), meta["end_ps"].as_i64().expect("end"));
    // A window narrow enough that the widest view returns every event on its own.
    let (from, to) = (start + (end - start) * 2 / 5, start + (end - start) * 2 / 5 + (end - start) / 400);
    let tracks: Vec<String> = all_track_ids(&meta).iter().map(u64::to_string).collect();
    let range = format!("&start_ps={from}&end_ps={to}&tracks={}", tracks.join(","));
    let view = fixture.json("view", &format!("{range}&width_px=16384"));
    let names = view["names"].as_array().expect("names");
    let mut expected: std::collections::BTreeMap<String, (u64, i64)> = std::collections::BTreeMap::new();
    for track in view["tracks"].as_array().expect("tracks") {
        assert!(track["merged"].as_array().expect("merged").is_empty(), "every event on its own");
        for e in track["events"].as_array().expect("events") {
            let (s, d) = (e[0].as_i64().expect("start"), e[1].as_i64().expect("dur"));
            let inside = (s + d).min(to) - s.max(from);
            if inside > 0 || (d == 0 && s >= from && s <= to) {
                let name = names[e[3].as_u64().expect("name") as usize].as_str().expect("text").to_string();
                let entry = expected.entry(name).or_default();
                entry.0 += 1;
                entry.1 += inside.max(0);
            }
        }
    }
    let aggregate = fixture.json("aggregate", &range);
    let rows = aggregate["rows"].as_array().expect("rows");
    assert!(rows.len() > 3, "{aggregate}");
    assert_eq!(aggregate["events"].as_u64(), Some(expected.values().map(|e| e.0).sum::<u64>()));
    let got: std::collections::BTreeMap<String, (u64, i64)> = rows
        .iter()
        .map(|r| {
            let (count, total) = (r["count"].as_u64().expect("count"), r["total_ps"].as_i64().expect("total"));
            assert!(r["self_ps"].as_i64().expect("self") <= total, "{r}");
            assert_eq!(r["average_ps"].as_i64(), Some(total / count as i64));
            (r["name"].as_str().expect("name").to_string(), (count, total))
        })
        .collect();
    assert_eq!(got, expected);
    assert!(rows.windows(2).all(|w| w[0]["total_ps"].as_i64() >= w[1]["total_ps"].as_i64()), "most time first");

    // The same rows as CSV, and a limit that keeps the first.
    let csv = fixture.raw("aggregate", &format!("{range}&format=csv"));
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    let text = csv.text();
    assert_eq!(text.lines().next(), Some("name,count,total_ps,self_ps,average_ps,max_ps"));
    assert_eq!(text.lines().count(), rows.len() + 1);
    let one = fixture.json("aggregate", &format!("{range}&limit=1"));
    assert_eq!(one["rows"].as_array().expect("rows").len(), 1);
    assert_eq!(one["names"].as_u64(), Some(rows.len() as u64));
    assert_eq!(one["rows"][0], rows[0]);
    assert_eq!(fixture.error(&fixture.target("aggregate", "&start_ps=5&end_ps=1")).0, 400);
    assert_eq!(fixture.error(&fixture.target("aggregate", "&start_ps=0&end_ps=1&format=xml")).0, 400);
}

#[test]
fn bad_parameters_are_400_and_unknown_names_404() {
    let cache = tempfile::tempdir().expect("cache dir");
    let fixture = serve(&data(JAX_LOGDIR), cache.path());
    let base = fixture.target("view", "");
    let cases: Vec<(String, u16, &str)> = vec![
        ("/api/trace/meta?host=vm".to_string(), 400, "missing parameter run"),
        (format!("/api/trace/meta?run={}&host=nope", encode(&fixture.run)), 404, "no host named"),
        ("/api/trace/meta?run=nope&host=vm".to_string(), 404, "no run named"),
        (format!("{base}&start_ps=10&end_ps=5&width_px=10"), 400, "before start_ps"),
        (format!("{base}&start_ps=0&end_ps=5&width_px=0"), 400, "width_px"),
        (format!("{base}&start_ps=x&end_ps=5&width_px=10"), 400, "start_ps"),
        (format!("{base}&start_ps=0&end_ps=5"), 400, "missing parameter width_px"),
        (format!("{base}&start_ps=0&end_ps=5&width_px=10&tracks=a"), 400, "not a track id"),
        (format!("{base}&start_ps=0&end_ps=5&width_px=10&tracks=99999"), 400, "no track 99999"),
        (format!("{base}&start_ps=0&end_ps=5&width_px=10&tracks=0,1,0"), 400, "track 0 is named twice"),
        (format!("{base}&start_ps=0&end_ps=5&width_px=16385"), 400, "width_px must be between 1 and 16384"),
        (fixture.target("event", "&id=4000000000"), 404, "no event"),
        (fixture.target("event", "&id=-1"), 400, "id"),
        (fixture.target("event", "&id=99999999999"), 400, "id=\"99999999999\" is out of range"),
        (fixture.target("search", ""), 400, "missing parameter q"),
        (fixture.target("search", "&q=a&limit=1000000"), 400, "limit"),
        (fixture.target("search", "&q=a&after_ps=1&before_ps=2"), 400, "not both"),
        (fixture.target("search", "&q=a&after_id=1"), 400, "after_id needs after_ps"),
        (fixture.target("search", "&q=a&before_ps=x"), 400, "before_ps"),
    ];
    for (target, status, message) in cases {
        let (got_status, got_message) = fixture.error(&target);
        assert_eq!(got_status, status, "{target}: {got_message}");
        assert!(got_message.contains(message), "{target}: {got_message}");
    }
    // host=all stands for the only host.
    assert_eq!(
        fixture.json("meta", "")["events"],
        get_json(&fixture.server, &format!("/api/trace/meta?run={}&host=all", encode(&fixture.run)))["events"]
    );
    assert_eq!(fixture.raw("meta", "").header("content-type"), Some("application/json"));
}

#[test]
fn the_index_is_built_once_and_a_restarted_server_reuses_it_without_the_profile() {
    let cache = tempfile::tempdir().expect("cache dir");
    let first = serve(&data(KINETO_RANKS), cache.path());
    // Concurrent first requests share one build.
    let answers: Vec<Value> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4).map(|_| scope.spawn(|| first.json("meta", ""))).collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    assert!(answers.windows(2).all(|w| w[0] == w[1]));
    let files: Vec<PathBuf> =
        std::fs::read_dir(cache.path()).expect("cache dir").map(|e| e.expect("entry").path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].extension().is_some_and(|e| e == "mltl"));
    let written = std::fs::metadata(&files[0]).expect("file").modified().expect("mtime");
    let (start, end) = (answers[0]["start_ps"].as_i64().expect("start"), answers[0]["end_ps"].as_i64().expect("end"));
    let view_params = format!("&start_ps={start}&end_ps={}&width_px=1200", start + (end - start) / 3);
    let view = first.json("view", &view_params);
    let found = first.json("search", "&q=cudaLaunchKernel");
    drop(first);

    let second = serve(&data(KINETO_RANKS), cache.path());
    assert_eq!(second.json("meta", ""), answers[0]);
    assert_eq!(second.json("view", &view_params), view);
    assert_eq!(second.json("search", "&q=cudaLaunchKernel"), found);
    assert!(second.server.state().loaded_runs().is_empty(), "meta, view and search never read the profile");
    assert_eq!(std::fs::metadata(&files[0]).expect("file").modified().expect("mtime"), written);
    // Event details read the profile for the args.
    second.json("event", "&id=0");
    assert_eq!(second.server.state().loaded_runs(), vec![second.run.clone()]);

    // A damaged cache file is rebuilt, not trusted.
    drop(second);
    let mut bytes = std::fs::read(&files[0]).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&files[0], &bytes).expect("damage");
    let third = serve(&data(KINETO_RANKS), cache.path());
    assert_eq!(third.json("meta", ""), answers[0]);
    assert_eq!(third.server.state().loaded_runs(), vec![third.run.clone()], "rebuilt from the profile");
}

#[test]
fn an_index_that_no_longer_matches_the_profile_is_a_409_and_is_rebuilt() {
    // A trace rewritten in place with its size and modification time kept: its cache key
    // cannot tell, but the event's position in the model no longer holds what the index says.
    let mut text = String::new();
    let gz = std::fs::File::open(data(KINETO_RANKS).join("sampled_rank-0.json.gz")).expect("fixture");
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz), &mut text).expect("gunzipped");
    let mut trace: Value = serde_json::from_str(&text).expect("JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let first_ts = events.iter().filter_map(|e| e["ts"].as_i64()).min().expect("timed events");
    let name_count = |name: &Value| events.iter().filter(|e| e["name"] == *name).count();
    let moved = events
        .iter()
        .position(|e| {
            e["ph"] == "X"
                && e["ts"].as_i64().is_some_and(|ts| ts > first_ts)
                && e["name"].as_str().is_some_and(|n| !n.starts_with("ProfilerStep"))
                && name_count(&e["name"]) == 1
        })
        .expect("an event with a name of its own");
    let name = trace["traceEvents"][moved]["name"].as_str().expect("name").to_string();
    let mut before = serde_json::to_vec(&trace).expect("JSON");
    let ts = trace["traceEvents"][moved]["ts"].as_i64().expect("ts");
    trace["traceEvents"][moved]["ts"] = Value::from(ts + 1);
    let mut after = serde_json::to_vec(&trace).expect("JSON");
    let size = before.len().max(after.len());
    before.resize(size, b' ');
    after.resize(size, b' ');

    let dir = tempfile::tempdir().expect("profile dir");
    let cache = tempfile::tempdir().expect("cache dir");
    let profile = dir.path().join("trace.json");
    std::fs::write(&profile, &before).expect("written");
    let event_of = |fixture: &Fixture| {
        let found = fixture.json("search", &format!("&q={}&limit=1", encode(&name)));
        fixture.target("event", &format!("&id={}", found["results"][0]["id"]))
    };
    let first = serve(&profile, cache.path());
    let original = get_json(&first.server, &event_of(&first));
    drop(first);

    let modified = std::fs::metadata(&profile).expect("profile").modified().expect("mtime");
    std::fs::write(&profile, &after).expect("rewritten");
    let file = std::fs::File::options().write(true).open(&profile).expect("profile");
    file.set_modified(modified).expect("mtime kept");
    drop(file);

    let second = serve(&profile, cache.path());
    let (status, message) = second.error(&event_of(&second));
    assert_eq!(status, 409, "{message}");
    assert!(message.contains("no longer matches the profile"), "{message}");
    let rebuilt = get_json(&second.server, &event_of(&second));
    assert_eq!(rebuilt["name"], name.as_str());
    let shift_ps = rebuilt["start_ps"].as_i64().expect("start") - original["start_ps"].as_i64().expect("start");
    assert_eq!(shift_ps, 1_000_000, "one microsecond later, as the profile now says");
    let files = std::fs::read_dir(cache.path()).expect("cache dir").count();
    assert_eq!(files, 1, "the stale file replaced, not kept beside the new one");
}

#[test]
fn counter_tracks_hold_every_counter_at_most_a_point_per_pixel() {
    let cache = tempfile::tempdir().expect("cache dir");
    // PyTorch's memory totals, per device.
    let fixture = serve(&data(TORCH_LOGDIR), cache.path());
    let meta = fixture.json("meta", "");
    let (start, end) = (meta["start_ps"].as_i64().expect("start"), meta["end_ps"].as_i64().expect("end"));
    let whole = fixture.json("counters", &format!("&start_ps={start}&end_ps={end}&width_px=200"));
    let series = whole["series"].as_array().expect("series");
    let allocated = series.iter().find(|s| s["name"] == "Allocated (bytes)").expect("allocated memory");
    assert!(allocated["group"].as_str().expect("group").starts_with("PyTorch memory, "), "{allocated}");
    let points = allocated["points"].as_array().expect("points");
    assert!(!points.is_empty() && points.len() <= 201, "{} points", points.len());
    let greatest = points.iter().map(|p| p[2].as_f64().expect("max")).fold(0.0, f64::max);
    assert_eq!(Some(greatest), allocated["max"].as_f64(), "the window's peak is the profile's");
    assert!(points.iter().all(|p| p[1].as_f64() <= p[2].as_f64()), "least ≤ greatest");
    let times: Vec<f64> = points.iter().map(|p| p[0].as_f64().expect("time")).collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "in time order, one per pixel");
    // A window after the last reading still shows the value in force.
    let after = fixture.json("counters", &format!("&start_ps={end}&end_ps={}&width_px=10", end + 1000));
    let held = after["series"].as_array().expect("series").iter().find(|s| s["name"] == "Allocated (bytes)");
    assert_eq!(held.expect("allocated")["points"].as_array().expect("points").len(), 1);
    assert_eq!(fixture.error(&fixture.target("counters", "&start_ps=5&end_ps=1&width_px=10")).0, 400);
    assert_eq!(fixture.error(&fixture.target("counters", "&start_ps=0&end_ps=1&width_px=0")).0, 400);

    // What `mlprof run` sampled: CPU and memory per process.
    let sampled = serve(&data("sampled/python_hot_loop/logdir"), cache.path());
    let meta = sampled.json("meta", "");
    let (start, end) = (meta["start_ps"].as_i64().expect("start"), meta["end_ps"].as_i64().expect("end"));
    let counters = sampled.json("counters", &format!("&start_ps={start}&end_ps={end}&width_px=1000"));
    let names: Vec<&str> =
        counters["series"].as_array().expect("series").iter().filter_map(|s| s["name"].as_str()).collect();
    assert!(names.contains(&"CPU (%)") && names.iter().any(|n| n.starts_with("Resident memory")), "{names:?}");
}

/// A run with two ranks (HTA's `trace_filter`: `sampled_rank-0` and `sampled_rank-1`).
const TWO_RANKS: &str = "kineto/hta/trace_filter";

#[test]
fn every_host_shares_one_time_axis_by_clock_or_by_step() {
    let cache = tempfile::tempdir().expect("cache dir");
    let fixture = serve(&data(TWO_RANKS), cache.path());
    let session = mlprof_formats::discover::load(&data(TWO_RANKS)).expect("loads").pop().expect("a session");
    assert_eq!(session.hosts.len(), 2);
    let one = |host: &str, endpoint: &str, params: &str| {
        get_json(
            &fixture.server,
            &format!("/api/trace/{endpoint}?run={}&host={}{params}", encode(&fixture.run), encode(host)),
        )
    };
    let metas: Vec<Value> = session.hosts.iter().map(|h| one(&h.name, "meta", "")).collect();
    for together in ["all", "all@steps"] {
        let meta = one(together, "meta", "");
        // Every host's sections, named after their host, and every event of both.
        let names: Vec<&str> =
            meta["sections"].as_array().expect("sections").iter().filter_map(|s| s["name"].as_str()).collect();
        let want: Vec<String> = session
            .hosts
            .iter()
            .zip(&metas)
            .flat_map(|(h, m)| {
                m["sections"]
                    .as_array()
                    .expect("sections")
                    .iter()
                    .map(move |s| format!("{} · {}", h.name, s["name"].as_str().unwrap_or("")))
            })
            .collect();
        assert_eq!(names, want, "{together}");
        let events: u64 = metas.iter().map(|m| m["events"].as_u64().expect("events")).sum();
        assert_eq!(meta["events"].as_u64(), Some(events), "{together}");
        let (start, end) = (meta["start_ps"].as_i64().expect("start"), meta["end_ps"].as_i64().expect("end"));
        let all = one(together, "view", &format!("&start_ps={start}&end_ps={end}&width_px=16384"));
        assert_eq!(shown(&all), events, "{together}: no event lost");

        // Each host's first step, found in its own Steps track of the shared index.
        let step_starts: Vec<(String, i64, Value)> = session
            .hosts
            .iter()
            .map(|h| {
                let section = meta["sections"]
                    .as_array()
                    .expect("sections")
                    .iter()
                    .find(|s| s["name"] == format!("{} · Steps", h.name))
                    .expect("a Steps section per host");
                let track = section["tracks"][0]["id"].as_u64().expect("track");
                let view =
                    one(together, "view", &format!("&start_ps={start}&end_ps={end}&width_px=16384&tracks={track}"));
                let first = view["tracks"][0]["events"][0].clone();
                let name = view["names"][first[3].as_u64().expect("name") as usize].as_str().expect("name").to_string();
                (name, first[0].as_i64().expect("start"), first)
            })
            .collect();
        let steps = |h: &Host| mlprof_analysis::grouping::profiler_steps::find(h);
        if together == "all@steps" {
            assert_eq!(meta["alignment"], "aligned on step 551, the first step every host recorded");
            assert_eq!(step_starts[0].0, step_starts[1].0, "the same step first on both");
            assert_eq!(step_starts[0].1, step_starts[1].1, "that step starts at one time on both ranks");
        } else {
            assert_eq!(meta["alignment"], "aligned by the hosts' clocks");
            // Each rank's step sits where its wall clock puts it.
            let (a, b) = (&session.hosts[0], &session.hosts[1]);
            let clocks_apart_ps = (a.profile_start_ns.expect("a start") - b.profile_start_ns.expect("a start")) * 1000;
            let steps_apart_ps = clocks_apart_ps + steps(a)[0].begin_ps - steps(b)[0].begin_ps;
            assert_eq!(step_starts[0].1 - step_starts[1].1, steps_apart_ps);
        }
        // An event's details come from its own host's model, as on that host alone.
        for (i, host) in session.hosts.iter().enumerate() {
            let alone =
                one(&host.name, "view", &format!("&start_ps=0&end_ps={}&width_px=16384&tracks=0", metas[i]["end_ps"]));
            let first_alone = &alone["tracks"][0]["events"][0];
            let details_alone = one(&host.name, "event", &format!("&id={}", first_alone[4]));
            let details = one(together, "event", &format!("&id={}", step_starts[i].2[4]));
            assert_eq!(details["args"], details_alone["args"], "{together} {}", host.name);
            assert_eq!(details["name"], details_alone["name"]);
            assert_eq!(details["start_ps"].as_i64(), Some(step_starts[i].1));
        }
        // Counters: each host's, named after it.
        let counters = one(together, "counters", &format!("&start_ps={start}&end_ps={end}&width_px=100"));
        for host in &session.hosts {
            let prefix = format!("{} · ", host.name);
            assert!(
                counters["series"]
                    .as_array()
                    .expect("series")
                    .iter()
                    .any(|s| s["group"].as_str().is_some_and(|g| g.starts_with(&prefix))),
                "{together}: {counters}"
            );
        }
    }
}

/// A PyTorch memory snapshot beside its run's trace: one run of two hosts, and on the
/// shared axis the snapshot's allocated and reserved memory sit under the trace's
/// steps and ops where the two clocks put them.
#[test]
fn a_memory_snapshot_beside_its_trace_is_drawn_on_the_traces_axis() {
    let dir = tempfile::tempdir().expect("run dir");
    let trace = "worker0.1795289102612280864.pt.trace.json";
    std::fs::copy(data(TORCH_LOGDIR).join(trace), dir.path().join(trace)).expect("copy trace");
    // Generated to start 1 ms after the trace (scripts/gen_memory_snapshot.py --start-us).
    std::fs::copy(
        data("torch_memory/generated/beside_torch_profile.pickle"),
        dir.path().join("memory_snapshot.pickle"),
    )
    .expect("copy snapshot");
    let cache = tempfile::tempdir().expect("cache dir");
    let fixture = serve(dir.path(), cache.path());
    let runs = get_json(&fixture.server, "/api/runs");
    assert_eq!(runs["runs"].as_array().expect("runs").len(), 1, "{runs}");
    let hosts: Vec<&str> =
        runs["runs"][0]["hosts"].as_array().expect("hosts").iter().filter_map(|h| h.as_str()).collect();
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    let target =
        |endpoint: &str, params: &str| format!("/api/trace/{endpoint}?run={}&host=all{params}", encode(&fixture.run));
    let meta = get_json(&fixture.server, &target("meta", ""));
    assert_eq!(meta["alignment"], "aligned by the hosts' clocks");
    let (start, end) = (meta["start_ps"].as_i64().expect("start"), meta["end_ps"].as_i64().expect("end"));
    let counters =
        get_json(&fixture.server, &target("counters", &format!("&start_ps={start}&end_ps={end}&width_px=4000")));
    let series = counters["series"].as_array().expect("series");
    let allocated: Vec<&Value> = series.iter().filter(|s| s["name"] == "Allocated (bytes)").collect();
    let of_snapshot = allocated
        .iter()
        .find(|s| s["group"].as_str().is_some_and(|g| g.starts_with("memory_snapshot · ")))
        .unwrap_or_else(|| panic!("the snapshot's allocated memory: {counters}"));
    // The snapshot's first entry (a segment_map, then the 1 MiB parameters) is 1 ms
    // after the trace's first event by the clocks, plus its own offset.
    let first = of_snapshot["points"][0][0].as_f64().expect("time") - start as f64;
    assert!((1.0e9..1.1e9).contains(&first), "first point {first} ps in: {of_snapshot}");
    // The same peak as the snapshot alone shows.
    let alone = format!("/api/trace/meta?run={}&host=memory_snapshot", encode(&fixture.run));
    let alone_meta = get_json(&fixture.server, &alone);
    let alone_counters = get_json(
        &fixture.server,
        &format!(
            "/api/trace/counters?run={}&host=memory_snapshot&start_ps=0&end_ps={}&width_px=100",
            encode(&fixture.run),
            alone_meta["end_ps"]
        ),
    );
    let alone_max = alone_counters["series"]
        .as_array()
        .expect("series")
        .iter()
        .find(|s| s["name"] == "Allocated (bytes)")
        .and_then(|s| s["max"].as_f64());
    assert_eq!(of_snapshot["max"].as_f64(), alone_max);
    assert!(alone_max.is_some_and(|max| max > f64::from(4 << 20)), "parameters and a step's activations");
}

/// A real snapshot and the `torch.profiler` trace of the same run (H100, PyTorch 2.11),
/// served from their one directory: on the hosts' shared axis each `ProfilerStep#N` the
/// trace recorded starts within a millisecond of the snapshot's annotation of it, and
/// the snapshot's allocated memory is a counter track of that axis.
#[test]
fn a_real_snapshot_and_its_runs_trace_share_one_axis() {
    let cache = tempfile::tempdir().expect("cache dir");
    let fixture = serve(&data("torch_memory/h100_pair"), cache.path());
    let target =
        |endpoint: &str, params: &str| format!("/api/trace/{endpoint}?run={}&host=all{params}", encode(&fixture.run));
    let meta = get_json(&fixture.server, &target("meta", ""));
    assert_eq!(meta["alignment"], "aligned by the hosts' clocks");
    // Each track's section name starts with its host's.
    let section_of: std::collections::HashMap<u64, String> = meta["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .flat_map(|s| {
            let name = s["name"].as_str().unwrap_or_default().to_string();
            s["tracks"].as_array().expect("tracks").iter().map(move |t| (t["id"].as_u64().expect("id"), name.clone()))
        })
        .collect();
    let found = get_json(&fixture.server, &target("search", "&q=ProfilerStep%233&limit=100"));
    let starts: Vec<(String, i64)> = found["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|r| r["name"] == "ProfilerStep#3")
        .map(|r| {
            let track = r["track"].as_u64().expect("track");
            (section_of.get(&track).cloned().unwrap_or_default(), r["start_ps"].as_i64().expect("start"))
        })
        .collect();
    let on = |host: &str| starts.iter().filter(|(section, _)| section.starts_with(host)).map(|s| s.1).min();
    let (annotated, traced) = (on("snapshot"), on("worker0"));
    let (Some(annotated), Some(traced)) = (annotated, traced) else { panic!("both hosts hold step 3: {found}") };
    assert!((0..1_000_000_000).contains(&(traced - annotated)), "trace {traced} ps, snapshot {annotated} ps");
    let (start, end) = (meta["start_ps"].as_i64().expect("start"), meta["end_ps"].as_i64().expect("end"));
    let counters =
        get_json(&fixture.server, &target("counters", &format!("&start_ps={start}&end_ps={end}&width_px=2000")));
    let allocated = counters["series"]
        .as_array()
        .expect("series")
        .iter()
        .find(|s| s["name"] == "Allocated (bytes)" && s["group"].as_str().is_some_and(|g| g.starts_with("snapshot · ")))
        .unwrap_or_else(|| panic!("the snapshot's allocated memory: {counters}"));
    // scripts/snapshot_reference.py: peak 419,001,892 bytes allocated.
    assert_eq!(allocated["max"].as_f64(), Some(419_001_892.0));
}

#[test]
fn an_nsight_systems_export_shows_its_streams_threads_and_launch_flows() {
    // 4 kernels and 12 copies on 4 streams, 44 runtime calls on one thread, and 906
    // OS runtime calls on 5 threads.
    let cache = tempfile::tempdir().expect("cache dir");
    let fixture = serve(&data("nsys/testcuda_2026_1/report1.sqlite"), cache.path());
    let meta = fixture.json("meta", "");
    assert_eq!(meta["events"].as_u64(), Some(60 + 906));
    let tracks: Vec<&str> = meta["sections"]
        .as_array()
        .expect("sections")
        .iter()
        .flat_map(|s| s["tracks"].as_array().expect("tracks"))
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tracks.iter().filter(|t| t.starts_with("Stream #")).count(), 4, "{tracks:?}");
    assert!(tracks.contains(&"Host Threads/17068"), "{tracks:?}");
    assert!(tracks.contains(&"OS runtime/17068"), "{tracks:?}");
    // A kernel comes from its cudaLaunchKernel: the same correlation id.
    let kernel = fixture.json("search", "&q=add_parallel&limit=1");
    let id = kernel["results"][0]["id"].as_u64().expect("a kernel");
    let kernel = fixture.json("event", &format!("&id={id}"));
    let launch = kernel["flows"].as_array().expect("flows").iter().find(|f| f["direction"] == "in").expect("launch");
    assert_eq!(launch["name"], "cudaLaunchKernel", "{launch}");
}

#[test]
fn an_nsight_systems_exports_gpu_metrics_are_counter_tracks_of_their_gpu() {
    // scripts/gen_nsys_gpu_metrics.py: 8 metrics; by SQL, SMs Active peaks at 13 % and
    // PCIe RX at 88 % (the 100 MB host-to-device copies).
    let cache = tempfile::tempdir().expect("cache dir");
    let fixture = serve(&data("nsys/gpu_metrics_2026_1/report1_gpu_metrics.sqlite"), cache.path());
    let meta = fixture.json("meta", "");
    let (start, end) = (meta["start_ps"].as_i64().expect("start"), meta["end_ps"].as_i64().expect("end"));
    let counters = fixture.json("counters", &format!("&start_ps={start}&end_ps={end}&width_px=2000"));
    let series = counters["series"].as_array().expect("series");
    let of_gpu: Vec<&Value> = series.iter().filter(|s| s["group"] == "GPU 0").collect();
    assert_eq!(of_gpu.len(), 8, "{counters}");
    let max = |name: &str| {
        of_gpu.iter().find(|s| s["name"] == name).and_then(|s| s["max"].as_f64()).unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(max("SMs Active [Throughput %]"), 13.0);
    assert_eq!(max("PCIe RX Throughput [Throughput %]"), 88.0);
}
