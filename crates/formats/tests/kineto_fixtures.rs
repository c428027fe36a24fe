//! The Kineto reader against real PyTorch traces (CPU and GPU, NVIDIA, AMD, MTIA),
//! checked against counts computed from the same files with Python's `json` module
//! (`MANIFEST.json`, `chrome_trace_summary.json`), and the Chrome writer's round trip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mlprof_formats::chrome::write_chrome_trace;
use mlprof_formats::input::load_file;
use mlprof_formats::kineto::read_kineto;
use mlprof_model::{Host, Plane, StatValue};
use serde_json::Value;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(rel)
}

fn read(path: &Path) -> Host {
    let loaded = load_file(path).expect("fixture loads");
    read_kineto(&loaded.bytes, &path.display().to_string(), "h").expect("fixture decodes")
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("present")).expect("JSON")
}

/// The `cat` metadata stat of an event's metadata, if any.
fn category(plane: &Plane, metadata: u32) -> Option<&str> {
    let key = plane.find_stat_key("cat")?;
    let meta = plane.event_metadata.get(metadata as usize)?;
    plane.metadata_stats_of(meta).iter().find(|s| s.key() == key).and_then(|s| match s.value() {
        StatValue::Str(r) => Some(plane.metadata_stats.text(r)),
        _ => None,
    })
}

fn categories(host: &Host) -> BTreeMap<String, u64> {
    let mut cats = BTreeMap::new();
    for plane in &host.planes {
        for line in &plane.lines {
            for event in line.iter() {
                let cat = category(plane, event.metadata_index()).unwrap_or("null").to_string();
                *cats.entry(cat).or_default() += 1;
            }
        }
    }
    let metadata_records = host.chrome.as_ref().map_or(0, |c| c.metadata_events.len() as u64);
    if metadata_records > 0 {
        *cats.entry("null".to_string()).or_default() += metadata_records;
    }
    cats
}

#[test]
fn every_hta_trace_matches_its_manifest() {
    let manifest = json(&data("kineto/hta/MANIFEST.json"));
    let files = manifest["files"].as_array().expect("files");
    assert!(files.len() >= 20);
    for entry in files {
        let rel = entry["path"].as_str().unwrap();
        let host = read(&data("kineto/hta").join(rel));
        let chrome = host.chrome.as_ref().expect("chrome info");
        let total = host.event_count() + chrome.metadata_events.len();
        assert_eq!(total as u64, entry["num_trace_events"].as_u64().unwrap(), "{rel}");
        let cats = categories(&host);
        let want: BTreeMap<String, u64> =
            entry["cats"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
        assert_eq!(cats, want, "{rel}");
        assert_eq!(cats.get("kernel").copied().unwrap_or(0), entry["num_kernels"].as_u64().unwrap(), "{rel}");
        let keys: Vec<&str> = chrome.top_level.iter().map(|(k, _)| k.as_str()).collect();
        let want_keys: Vec<&str> =
            entry["top_level_keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
        assert_eq!(keys, want_keys, "{rel}");
        assert_eq!(host.rank, entry["rank"].as_i64(), "{rel}");
        let gpu_kernels = host
            .planes
            .iter()
            .filter(|p| p.name.starts_with("/device:"))
            .flat_map(|p| p.lines.iter().flat_map(move |l| l.iter().map(move |e| (p, e))))
            .filter(|(p, e)| category(p, e.metadata_index()) == Some("kernel"))
            .count();
        assert_eq!(gpu_kernels as u64, entry["num_kernels"].as_u64().unwrap(), "{rel}: kernels on device planes");
    }
}

/// Reads the trace a `chrome_trace_summary.json` describes and checks its event total
/// (model events + `M` records = `num_traceEvents`).
fn read_summarised(dir: &Path) -> (Value, Host) {
    let summary = json(&dir.join("chrome_trace_summary.json"));
    let host = read(&dir.join(summary[0]["file"].as_str().unwrap()));
    let records = host.chrome.as_ref().map_or(0, |c| c.metadata_events.len());
    assert_eq!((host.event_count() + records) as u64, summary[0]["num_traceEvents"].as_u64().unwrap());
    (summary, host)
}

#[test]
fn torch_cpu_trace_matches_its_summary() {
    let dir = data("kineto/torch_profile");
    let (summary, host) = read_summarised(&dir);
    let summary = &summary[0];
    let chrome = host.chrome.as_ref().unwrap();
    let want: BTreeMap<String, u64> =
        summary["by_category"].as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
    assert_eq!(categories(&host), want);
    let keys: Vec<&str> = chrome.top_level.iter().map(|(k, _)| k.as_str()).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    let want_keys: Vec<&str> = summary["top_level_keys"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k.as_str())
        .filter(|k| *k != "traceEvents")
        .collect();
    assert_eq!(sorted, want_keys);

    let cpu = host.plane("/host:CPU").expect("host plane");
    let thread = cpu.lines.iter().find(|l| l.name == "thread 2677 (python)").expect("named thread");
    assert!(thread.len() > 9000);
    // ProfilerStep durations are exact picoseconds of the decimal microseconds written.
    for (step, dur_us) in summary["profiler_step_dur_us"].as_object().unwrap() {
        let text = dur_us.to_string();
        let (whole, frac) = text.split_once('.').unwrap_or((&text, ""));
        let want_ps: i64 = whole.parse::<i64>().unwrap() * 1_000_000 + format!("{frac:0<6}").parse::<i64>().unwrap();
        let found: Vec<i64> = cpu
            .lines
            .iter()
            .flat_map(|l| l.iter())
            .filter(|e| cpu.metadata_of(e).is_some_and(|m| &m.name == step))
            .map(|e| e.duration_ps())
            .collect();
        assert_eq!(found, vec![want_ps], "{step}");
    }
    let memory =
        cpu.lines.iter().flat_map(|l| l.iter()).filter(|e| cpu.metadata_of(e).is_some_and(|m| m.name == "[memory]"));
    assert_eq!(memory.count() as u64, summary["num_memory_instant_events"].as_u64().unwrap());
    // Arg keys: every arg of the summary is a stat (under XProf's name where renamed).
    for (arg, count) in summary["arg_keys"].as_object().unwrap() {
        let stat = mlprof_formats::chrome::stat_name_for_arg(arg);
        let used = cpu
            .find_stat_key(stat)
            .map_or(0, |key| cpu.lines.iter().flat_map(|l| l.stats.stats()).filter(|s| s.key() == key).count());
        let in_metadata_records =
            chrome.metadata_events.iter().filter(|m| m.args_json.contains(&format!("\"{arg}\""))).count();
        assert_eq!((used + in_metadata_records) as u64, count.as_u64().unwrap(), "arg {arg}");
    }
}

#[test]
fn jax_chrome_export_reads_as_a_chrome_trace() {
    let dir = data("xspace/jax_profile");
    let (summary, host) = read_summarised(&dir);
    let summary = &summary[0];
    let names: Vec<&str> = host.planes[0].lines.iter().map(|l| l.name.as_str()).collect();
    for thread in summary["threads"].as_object().unwrap().values() {
        assert!(names.contains(&thread.as_str().unwrap()), "thread {thread}");
    }
}

/// Every Kineto fixture written back as a Chrome trace reads as the same model.
#[test]
fn chrome_round_trip_keeps_every_event_name_time_and_stat() {
    let manifest = json(&data("kineto/hta/MANIFEST.json"));
    let mut paths: Vec<PathBuf> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| data("kineto/hta").join(e["path"].as_str().unwrap()))
        .collect();
    paths.push(data("kineto/torch_profile/logdir/worker0.1795289102612280864.pt.trace.json"));
    paths.push(data("xspace/jax_profile/logdir/plugins/profile/2026_11_21_19_24_59/vm.trace.json.gz"));
    for path in paths {
        let host = read(&path);
        let mut out = Vec::new();
        write_chrome_trace(&[&host], &mut out).expect("writes");
        let again = read_kineto(&out, &host.source_path, "h").expect("reads back");
        assert_same(&again, &host, &path.display().to_string());
    }
}

fn assert_same(a: &Host, b: &Host, what: &str) {
    assert_eq!(a.planes.len(), b.planes.len(), "{what}");
    for (pa, pb) in a.planes.iter().zip(&b.planes) {
        let what = format!("{what} {}", pb.name);
        assert_eq!(pa.event_metadata, pb.event_metadata, "{what}");
        assert_eq!(pa.stat_metadata, pb.stat_metadata, "{what}");
        for (la, lb) in pa.lines.iter().zip(&pb.lines) {
            let what = format!("{what} line {}", lb.name);
            assert_eq!(la.events, lb.events, "{what}");
            assert_eq!(la.stats.stats(), lb.stats.stats(), "{what}");
        }
        assert_eq!(pa, pb, "{what}");
    }
    assert_eq!(a.chrome, b.chrome, "{what}");
    assert_eq!(a, b, "{what}");
}
