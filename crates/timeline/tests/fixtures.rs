//! The index of real profiles (tests/data) against what the model holds: every event
//! once, flows for every correlation / context link, views that lose nothing, search
//! totals, and args read back from the model.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mlprof_model::{Host, Plane, StatValue};
use mlprof_timeline::{CacheKey, ModelRef, TimelineBuilder, TimelineIndex, Viewport, event_args};

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(rel)
}

fn load(rel: &str) -> Host {
    let sessions = mlprof_formats::discover::load(&data(rel)).expect("fixture loads");
    sessions.into_iter().next().and_then(|s| s.hosts.into_iter().next()).expect("one host")
}

fn index_of(host: &Host) -> TimelineIndex {
    let mut b = TimelineBuilder::new();
    b.add_host(host).expect("add host");
    b.finish().expect("finish").into_index().expect("open")
}

const XSPACE: &str = "xspace/jax_profile/logdir/plugins/profile/2026_11_21_19_24_59/vm.xplane.pb";
const KINETO: &str = "kineto/hta/timeline_analysis/sampled_rank-0.json.gz";

fn int(value: StatValue) -> Option<i64> {
    match value {
        StatValue::Int(v) => Some(v),
        StatValue::Uint(v) => Some(v as i64),
        _ => None,
    }
}

/// Whether a metadata entry is a Chrome flow marker (`ph` s/t/f), read independently.
fn is_flow_marker(plane: &Plane, metadata: u32) -> bool {
    let Some(m) = plane.event_metadata.get(metadata as usize) else { return false };
    plane.metadata_stats_of(m).iter().any(|s| {
        plane.stat_name(s.key()) == "ph"
            && ["s", "t", "f"].contains(&plane.format_value(&plane.metadata_stats, s.value()).as_str())
    })
}

/// The model's timed events that the index must hold, as (start, dur, plane, line, event).
fn model_events(host: &Host) -> Vec<(i64, i64, ModelRef)> {
    let mut out = Vec::new();
    for (p, plane) in host.planes.iter().enumerate() {
        for (l, line) in plane.lines.iter().enumerate() {
            for event in line.iter() {
                if event.num_occurrences().is_some() || is_flow_marker(plane, event.metadata_index()) {
                    continue;
                }
                let at = ModelRef { plane: p as u32, line: l as u32, event: event.index() as u32 };
                out.push((event.start_ps(), event.duration_ps().max(0), at));
            }
        }
    }
    out
}

fn check_every_event_once(host: &Host, index: &TimelineIndex) {
    let mut expected = model_events(host);
    assert!(expected.len() > 1000, "fixture too small: {}", expected.len());
    assert_eq!(index.event_count(), expected.len() as u64);
    let mut got: Vec<(i64, i64, ModelRef)> = (0..index.event_count() as u32)
        .map(|id| {
            let e = index.event(id).expect("event");
            (e.start_ps, e.dur_ps, ModelRef::unpack(e.source))
        })
        .collect();
    let key = |e: &(i64, i64, ModelRef)| (e.2.plane, e.2.line, e.2.event);
    expected.sort_by_key(key);
    got.sort_by_key(key);
    assert_eq!(got, expected);
    let tracks: usize = host.planes.iter().map(|p| p.lines.iter().filter(|l| !l.is_empty()).count()).sum();
    assert_eq!(index.track_count() as usize, tracks);
}

fn check_views_lose_nothing(index: &TimelineIndex) {
    let (first, last) = index.span_ps();
    for width_px in [1, 100, 1500] {
        let view = index.view(&Viewport { start_ps: first, end_ps: last, width_px, tracks: None });
        let shown: u64 =
            view.tracks.iter().map(|t| t.events.len() as u64 + t.merged.iter().map(|m| m.count).sum::<u64>()).sum();
        assert_eq!(shown, index.event_count(), "at {width_px} px");
        for t in &view.tracks {
            let depth = index.track(t.track).expect("track").depth as usize;
            assert!(t.events.len() + t.merged.len() <= depth * (2 * width_px as usize + 4));
        }
    }
}

fn check_search(host: &Host, index: &TimelineIndex, query: &str) {
    let mut expected = 0u64;
    for (_, _, at) in model_events(host) {
        let (plane, event) = at.resolve(host).expect("model event");
        let m = plane.metadata_of(&event).expect("metadata");
        let name = if m.display_name.is_empty() { &m.name } else { &m.display_name };
        if name.to_lowercase().contains(&query.to_lowercase()) {
            expected += 1;
        }
    }
    let found = index.search(query, 20);
    assert!(expected > 0, "{query} matches nothing");
    assert_eq!(found.total, expected, "{query}");
    assert_eq!(found.results.len() as u64, expected.min(20));
    assert!(found.results.windows(2).all(|w| (w[0].start_ps, w[0].id) < (w[1].start_ps, w[1].id)));
}

#[test]
fn jax_xspace_every_event_once_with_context_flows() {
    let host = load(XSPACE);
    let index = index_of(&host);
    check_every_event_once(&host, &index);
    check_views_lose_nothing(&index);
    check_search(&host, &index, "isinstance");
    // Flows: every consumer (`_ct`, `_c`) whose context has a producer (`_pt`, `_p`).
    let mut producers: HashMap<(i64, i64), Vec<ModelRef>> = HashMap::new();
    let mut consumers: Vec<((i64, i64), ModelRef)> = Vec::new();
    for (p, plane) in host.planes.iter().enumerate() {
        for (l, line) in plane.lines.iter().enumerate() {
            for event in line.iter() {
                let stat = |name: &str| {
                    event.stats().iter().find(|s| plane.stat_name(s.key()) == name).and_then(|s| int(s.value()))
                };
                let at = ModelRef { plane: p as u32, line: l as u32, event: event.index() as u32 };
                if let (Some(t), Some(id)) = (stat("_pt"), stat("_p")) {
                    producers.entry((t, id)).or_default().push(at);
                }
                if let (Some(t), Some(id)) = (stat("_ct"), stat("_c")) {
                    consumers.push(((t, id), at));
                }
            }
        }
    }
    let linked = consumers
        .iter()
        .filter(|(context, at)| producers.get(context).is_some_and(|ps| ps.iter().any(|p| p != at)))
        .count();
    assert!(linked > 100, "{linked} context links");
    assert_eq!(index.flow_count(), linked as u64);
}

#[test]
fn kineto_gpu_trace_links_every_launch_to_its_kernel() {
    let host = load(KINETO);
    let index = index_of(&host);
    check_every_event_once(&host, &index);
    check_views_lose_nothing(&index);
    check_search(&host, &index, "cudaLaunchKernel");
    // Correlation ids read straight from the model: host side and device side.
    let mut sides: HashMap<i64, (u32, u32)> = HashMap::new();
    for plane in &host.planes {
        let on_device = plane.name.starts_with("/device:");
        for line in &plane.lines {
            for event in line.iter() {
                let corr = event
                    .stats()
                    .iter()
                    .find(|s| plane.stat_name(s.key()) == "correlation_id")
                    .and_then(|s| int(s.value()));
                if let Some(id) = corr {
                    let slot = sides.entry(id).or_default();
                    if on_device { slot.1 += 1 } else { slot.0 += 1 }
                }
            }
        }
    }
    let expected: u32 = sides.values().filter(|(h, _)| *h > 0).map(|(_, d)| d).sum();
    assert_eq!(expected, 1204, "the fixture's 1204 launch/GPU-op pairs");
    assert_eq!(index.flow_count(), u64::from(expected));
    // Each flow joins two events with the same correlation id, host to device.
    let correlation_of = |id: u32| {
        let source = index.event(id).expect("event").source;
        let args = event_args(&host, ModelRef::unpack(source)).expect("args");
        args.into_iter().find(|(k, _)| k == "correlation_id").map(|(_, v)| v)
    };
    for id in (0..index.event_count() as u32).step_by(7) {
        for link in index.flows_of(id) {
            assert_eq!(correlation_of(id), correlation_of(link.event));
            assert!(correlation_of(id).is_some());
        }
    }
    let section_of = |id: u32| index.track(index.event(id).expect("event").track).expect("track").section;
    let kinds: Vec<_> = index.sections().map(|s| s.kind).collect();
    let view = index.view(&Viewport {
        start_ps: index.span_ps().0,
        end_ps: index.span_ps().1,
        width_px: 100_000,
        tracks: None,
    });
    assert!(!view.flows.is_empty());
    for f in &view.flows {
        assert_eq!(kinds[section_of(f.from) as usize], mlprof_timeline::SectionKind::Host);
        assert_eq!(kinds[section_of(f.to) as usize], mlprof_timeline::SectionKind::Device);
    }
}

#[test]
fn a_real_index_survives_the_cache_file() {
    let host = load(KINETO);
    let mut b = TimelineBuilder::new();
    b.add_host(&host).expect("add");
    let built = b.finish().expect("finish");
    let dir = tempfile::tempdir().expect("tempdir");
    let key = CacheKey::for_file(&data(KINETO), "test").expect("key");
    assert_eq!(key.source_bytes, host.source_bytes);
    let path = dir.path().join(key.file_name(&host.name));
    built.write(&path, &key).expect("write");
    let opened = TimelineIndex::open(&path, &key).expect("open");
    let memory = built.into_index().expect("memory");
    assert_eq!(opened.event_count(), memory.event_count());
    assert_eq!(opened.search("gemm", 5), memory.search("gemm", 5));
    let v = Viewport { start_ps: 0, end_ps: opened.span_ps().1 / 3, width_px: 800, tracks: None };
    assert_eq!(opened.view(&v), memory.view(&v));
}

/// One event of a Chrome trace as the fwdbwd check reads it: times as their decimal
/// text, so that they compare exactly.
#[derive(serde::Deserialize)]
struct ChromeEvent<'a> {
    #[serde(default)]
    ph: String,
    #[serde(default)]
    cat: String,
    #[serde(default)]
    pid: serde_json::Value,
    #[serde(default)]
    tid: serde_json::Value,
    #[serde(borrow)]
    ts: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow)]
    dur: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    id: serde_json::Value,
    #[serde(default)]
    bp: String,
}

#[derive(serde::Deserialize)]
struct ChromeTrace<'a> {
    #[serde(rename = "traceEvents", borrow)]
    trace_events: Vec<ChromeEvent<'a>>,
}

/// Decimal microseconds (`4432076555843.818`) as whole picoseconds.
fn exact_ps(raw: Option<&serde_json::value::RawValue>) -> i128 {
    let Some(raw) = raw else { return 0 };
    let (whole, fraction) = raw.get().split_once('.').unwrap_or((raw.get(), ""));
    let fraction = format!("{:0<6}", &fraction[..fraction.len().min(6)]);
    whole.parse::<i128>().expect("whole µs") * 1_000_000 + fraction.parse::<i128>().expect("fraction")
}

/// A thread's id as text: `2677` or `Spans`.
fn thread_text(value: &serde_json::Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_string)
}

/// A model track id as [`thread_text`] writes it.
fn track_text(id: mlprof_model::TrackId) -> String {
    match id {
        mlprof_model::TrackId::Int(v) => v.to_string(),
        mlprof_model::TrackId::Str(s) => s,
    }
}

/// An event of a trace by its thread and its position among that thread's events in
/// file order (how the Kineto reader fills a line).
type ThreadEvent = (String, String, usize);

/// A thread of a trace: (pid, tid) as text.
type Thread = (String, String);

/// A flow as its two ends.
type ThreadFlow = (ThreadEvent, ThreadEvent);

/// The forward → backward flows of a Chrome trace, read from the JSON alone: each `f`
/// of cat `fwdbwd` paired with the latest `s` of its id at or before it, each bound to
/// the shortest complete event of its thread containing its time (`f` without `bp`
/// `e`: the first one starting at or after it).
/// Also returns how many events each thread has.
fn fwdbwd_flows_in_json(path: &Path) -> (Vec<ThreadFlow>, HashMap<Thread, usize>) {
    let bytes = std::fs::read(path).expect("fixture");
    let text = if path.extension().is_some_and(|e| e == "gz") {
        let mut out = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut out).expect("gunzip");
        out
    } else {
        String::from_utf8(bytes).expect("utf-8")
    };
    let trace: ChromeTrace = serde_json::from_str(&text).expect("JSON");
    let mut ordinals: HashMap<Thread, usize> = HashMap::new();
    // Per thread: (start, end, event) of complete events; flow ends (is start, id, time, enclosing, thread).
    let mut slices: HashMap<Thread, Vec<(i128, i128, ThreadEvent)>> = HashMap::new();
    let mut ends = Vec::new();
    for e in trace.trace_events.iter().filter(|e| e.ph != "M") {
        let thread = (thread_text(&e.pid), thread_text(&e.tid));
        let ordinal = ordinals.entry(thread.clone()).or_default();
        let at = (thread.0.clone(), thread.1.clone(), *ordinal);
        *ordinal += 1;
        let ts = exact_ps(e.ts);
        match e.ph.as_str() {
            "X" => slices.entry(thread).or_default().push((ts, ts + exact_ps(e.dur), at)),
            "s" | "f" if e.cat == "fwdbwd" => {
                ends.push((e.ph == "s", e.id.to_string(), ts, e.ph == "s" || e.bp == "e", thread))
            }
            _ => {}
        }
    }
    let bind = |enclosing: bool, ts: i128, thread: &Thread| {
        let of_thread = slices.get(thread)?;
        if enclosing {
            of_thread.iter().filter(|s| s.0 <= ts && ts <= s.1).min_by_key(|s| s.1 - s.0).map(|s| s.2.clone())
        } else {
            of_thread.iter().filter(|s| s.0 >= ts).min_by_key(|s| (s.0, -(s.1 - s.0))).map(|s| s.2.clone())
        }
    };
    let mut flows = Vec::new();
    for (_, id, ts, enclosing, thread) in ends.iter().filter(|end| !end.0) {
        let start = ends.iter().filter(|s| s.0 && s.1 == *id && s.2 <= *ts).max_by_key(|s| s.2);
        let Some(start) = start else { continue };
        if let (Some(from), Some(to)) = (bind(true, start.2, &start.4), bind(*enclosing, *ts, thread)) {
            flows.push((from, to));
        }
    }
    flows.sort();
    (flows, ordinals)
}

/// The index's flows between two host events, as [`ThreadEvent`]s; checks that every
/// other flow ends on a device.
fn host_to_host_flows(host: &Host, index: &TimelineIndex) -> Vec<ThreadFlow> {
    let thread_event = |id: u32| {
        let at = ModelRef::unpack(index.event(id).expect("event").source);
        let plane = &host.planes[at.plane as usize];
        let (pid, tid) = plane.lines[at.line as usize].chrome_track.clone().expect("a Chrome track");
        (plane.name.starts_with("/device:"), (track_text(pid), track_text(tid), at.event as usize))
    };
    let mut flows = Vec::new();
    for id in 0..index.event_count() as u32 {
        for link in index.flows_of(id).into_iter().filter(|l| l.direction == mlprof_timeline::FlowDirection::Out) {
            let ((from_device, from), (to_device, to)) = (thread_event(id), thread_event(link.event));
            assert!(!from_device, "flows start on the host");
            if !to_device {
                flows.push((from, to));
            }
        }
    }
    flows.sort();
    flows
}

#[test]
fn kineto_forward_ops_link_to_their_backward_ops() {
    for (fixture, pairs) in [
        ("kineto/torch_profile/logdir", 42),
        ("kineto/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 905),
    ] {
        let host = load(fixture);
        let index = index_of(&host);
        let path = data(fixture);
        let file = if path.is_dir() {
            std::fs::read_dir(&path).expect("dir").map(|e| e.expect("entry").path()).next().expect("one trace")
        } else {
            path
        };
        let (expected, thread_lengths) = fwdbwd_flows_in_json(&file);
        assert_eq!(expected.len(), pairs, "{fixture}: fwdbwd pairs in the JSON");
        assert_eq!(host_to_host_flows(&host, &index), expected, "{fixture}");
        // File-order positions name the same events in the model: one line per thread,
        // holding all of its events.
        let lines: Vec<_> = host.planes.iter().flat_map(|p| &p.lines).collect();
        assert_eq!(lines.len(), thread_lengths.len(), "{fixture}");
        for line in lines {
            let (pid, tid) = line.chrome_track.clone().expect("a Chrome track");
            assert_eq!(
                Some(&line.len()),
                thread_lengths.get(&(track_text(pid), track_text(tid))),
                "{fixture}: {}",
                line.name
            );
        }
    }
}
