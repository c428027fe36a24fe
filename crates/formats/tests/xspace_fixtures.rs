//! The XSpace reader and writer against real TensorFlow and JAX profiles, checked
//! against the structure summaries computed from the same files with TensorFlow's own
//! protobuf classes (`tests/data/xspace/<case>/xplane_summary.json`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mlprof_formats::FormatError;
use mlprof_formats::input::load_file;
use mlprof_formats::xspace::{encode_xspace, read_xspace, read_xspace_releasing};
use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue};
use serde_json::Value;

const CASES: &[&str] = &[
    "tf_keras2_input_bound",
    "tf_keras_pipelined",
    "tf_custom_loop",
    "jax_profile",
    // Written by `mlprof run`'s CUPTI injection (H200): a plain CUDA program and a JAX
    // loop. No `/host:__ScopeRangeCallStack__` plane, so every plane is checked in full.
    "cuda_app_h200_inject",
    "jax_h200_inject",
];

/// Real JAX 0.11.2 GPU profiles (H200): a `jax.profiler` trace and an `mlprof capture`
/// of an unmodified job. Not in [`CASES`] for one reason: their
/// `/host:__ScopeRangeCallStack__` plane stores each scope range's parent as a plane
/// stat keyed by the scope range id, an id with no `stat_metadata` entry. The reader
/// gives such an id a placeholder entry with an empty name (`xspace::read`), so that
/// plane has one more stat metadata per id than the proto's map (118 vs 2 in
/// `jax_gpu_h200`) and its stats are named "" where TensorFlow's summary writes
/// `#<id>`. [`real_gpu_profiles_decode_as_tensorflow_does_but_for_placeholder_stat_metadata`]
/// checks exactly that and everything else.
const REAL_GPU_CASES: &[&str] = &["jax_gpu_h200", "jax_gpu_h200_capture"];

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace").join(case)
}

fn summary(case: &str) -> Value {
    let text = std::fs::read_to_string(case_dir(case).join("xplane_summary.json")).expect("summary present");
    serde_json::from_str(&text).expect("summary is JSON")
}

fn read_case(case: &str) -> (Host, Value) {
    let s = summary(case);
    let xspace = &s["xspaces"][0];
    let file = case_dir(case).join(xspace["file"].as_str().expect("file"));
    let loaded = load_file(&file).expect("fixture loads");
    assert_eq!(loaded.stored_bytes, xspace["bytes"].as_u64().expect("bytes"));
    let host = read_xspace(&loaded.bytes, &file.display().to_string(), "vm").expect("fixture decodes");
    (host, xspace.clone())
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().expect("array").iter().map(|s| s.as_str().expect("string").to_string()).collect()
}

#[test]
fn structure_matches_tensorflows_own_decoding() {
    for case in CASES {
        let (host, expected) = read_case(case);
        assert_eq!(host.hostnames, strings(&expected["hostnames"]), "{case}");
        assert_eq!(host.errors, strings(&expected["errors"]), "{case}");
        assert_eq!(host.warnings, strings(&expected["warnings"]), "{case}");
        assert_eq!(host.planes.len() as u64, expected["num_planes"].as_u64().unwrap(), "{case}");
        assert_eq!(host.event_count() as u64, expected["total_events"].as_u64().unwrap(), "{case}");
        for (plane, want) in host.planes.iter().zip(expected["planes"].as_array().unwrap()) {
            let what = format!("{case} {}", plane.name);
            assert_eq!(plane.name, want["name"].as_str().unwrap(), "{what}");
            assert_eq!(plane.id, want["id"].as_i64().unwrap(), "{what}");
            assert_eq!(plane.lines.len() as u64, want["num_lines"].as_u64().unwrap(), "{what}");
            assert_eq!(plane.event_count() as u64, want["num_events"].as_u64().unwrap(), "{what}");
            assert_eq!(plane.event_metadata.len() as u64, want["num_event_metadata"].as_u64().unwrap(), "{what}");
            assert_eq!(plane.stat_metadata.len() as u64, want["num_stat_metadata"].as_u64().unwrap(), "{what}");
            for (line, want_line) in plane.lines.iter().zip(want["lines"].as_array().unwrap()) {
                assert_eq!(line.id, want_line["id"].as_i64().unwrap(), "{what}");
                assert_eq!(line.display_id, want_line["display_id"].as_i64().unwrap(), "{what}");
                assert_eq!(line.name, want_line["name"].as_str().unwrap(), "{what}");
                assert_eq!(line.display_name, want_line["display_name"].as_str().unwrap(), "{what}");
                assert_eq!(line.timestamp_ns, want_line["timestamp_ns"].as_i64().unwrap(), "{what}");
                assert_eq!(line.duration_ps, want_line["duration_ps"].as_i64().unwrap(), "{what}");
                assert_eq!(line.len() as u64, want_line["num_events"].as_u64().unwrap(), "{what} {}", line.name);
            }
            check_plane_stats(plane, &want["plane_stats"], &what);
            check_stat_usage(plane, &want["stat_names_used"], &what);
            check_event_names(plane, want, &what);
        }
    }
}

fn check_plane_stats(plane: &mlprof_model::Plane, want: &Value, what: &str) {
    let want = want.as_object().unwrap();
    assert_eq!(plane.plane_stats().len(), want.len(), "{what}");
    for stat in plane.plane_stats() {
        let name = plane.stat_name(stat.key());
        let expected = &want[name];
        match stat.value() {
            StatValue::Int(v) => assert_eq!(Some(v), expected.as_i64(), "{what} {name}"),
            StatValue::Uint(v) => assert_eq!(Some(v), expected.as_u64(), "{what} {name}"),
            StatValue::Str(r) => assert_eq!(Some(plane.metadata_stats.text(r)), expected.as_str(), "{what} {name}"),
            StatValue::Bytes(r) => {
                let shown = format!("<{} bytes>", plane.metadata_stats.bytes(r).len());
                assert_eq!(Some(shown.as_str()), expected.as_str(), "{what} {name}")
            }
            other => panic!("{what} {name}: unexpected {other:?}"),
        }
    }
}

fn check_stat_usage(plane: &mlprof_model::Plane, want: &Value, what: &str) {
    let mut used: HashMap<String, u64> = HashMap::new();
    for stat in plane.plane_stats() {
        *used.entry(format!("plane:{}", plane.stat_name(stat.key()))).or_default() += 1;
    }
    for meta in &plane.event_metadata {
        for stat in plane.metadata_stats_of(meta) {
            *used.entry(format!("event_metadata:{}", plane.stat_name(stat.key()))).or_default() += 1;
        }
    }
    for line in &plane.lines {
        for stat in line.stats.stats() {
            *used.entry(format!("event:{}", plane.stat_name(stat.key()))).or_default() += 1;
        }
    }
    let want: HashMap<String, u64> =
        want.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
    assert_eq!(used, want, "{what}");
}

fn check_event_names(plane: &mlprof_model::Plane, want: &Value, what: &str) {
    let mut counts: HashMap<&str, u64> = HashMap::new();
    for line in &plane.lines {
        for event in line.iter() {
            let name = plane.metadata_of(&event).map_or("", |m| m.name.as_str());
            *counts.entry(name).or_default() += 1;
        }
    }
    assert_eq!(counts.len() as u64, want["num_distinct_event_names"].as_u64().unwrap(), "{what}");
    for pair in want["top_event_names"].as_array().unwrap() {
        let name = pair[0].as_str().unwrap();
        assert_eq!(counts.get(name).copied(), pair[1].as_u64(), "{what} {name}");
    }
}

#[test]
fn real_gpu_profiles_decode_as_tensorflow_does_but_for_placeholder_stat_metadata() {
    for case in REAL_GPU_CASES {
        let (host, expected) = read_case(case);
        assert_eq!(host.hostnames, strings(&expected["hostnames"]), "{case}");
        assert_eq!(host.planes.len() as u64, expected["num_planes"].as_u64().unwrap(), "{case}");
        assert_eq!(host.event_count() as u64, expected["total_events"].as_u64().unwrap(), "{case}");
        for (plane, want) in host.planes.iter().zip(expected["planes"].as_array().unwrap()) {
            let what = format!("{case} {}", plane.name);
            assert_eq!(plane.name, want["name"].as_str().unwrap(), "{what}");
            assert_eq!(plane.lines.len() as u64, want["num_lines"].as_u64().unwrap(), "{what}");
            assert_eq!(plane.event_count() as u64, want["num_events"].as_u64().unwrap(), "{what}");
            assert_eq!(plane.event_metadata.len() as u64, want["num_event_metadata"].as_u64().unwrap(), "{what}");
            // Stat ids without metadata: `#<id>` in TensorFlow's summary.
            let missing: std::collections::BTreeSet<i64> = want["stat_names_used"]
                .as_object()
                .unwrap()
                .keys()
                .filter_map(|k| k.split_once(":#").and_then(|(_, id)| id.parse().ok()))
                .collect();
            let placeholders: std::collections::BTreeSet<i64> = plane
                .stat_metadata
                .iter()
                .filter(|m| m.name.is_empty() && missing.contains(&m.id))
                .map(|m| m.id)
                .collect();
            assert_eq!(placeholders, missing, "{what}");
            let stored = want["num_stat_metadata"].as_u64().unwrap() as usize;
            assert_eq!(plane.stat_metadata.len(), stored + missing.len(), "{what}");
            assert_eq!(missing.is_empty(), plane.name != "/host:__ScopeRangeCallStack__", "{what}");
            if missing.is_empty() {
                check_plane_stats(plane, &want["plane_stats"], &what);
                check_stat_usage(plane, &want["stat_names_used"], &what);
            }
            check_event_names(plane, want, &what);
        }
    }
}

#[test]
fn task_environment_gives_the_profile_start_and_stop() {
    let (host, expected) = read_case("tf_custom_loop");
    let env = expected["planes"].as_array().unwrap().iter().find(|p| p["name"] == "Task Environment").unwrap();
    assert_eq!(host.profile_start_ns, env["plane_stats"]["profile_start_time"].as_i64());
    assert_eq!(host.profile_stop_ns, env["plane_stats"]["profile_stop_time"].as_i64());
}

#[test]
fn encode_then_decode_gives_back_the_same_model() {
    for case in CASES.iter().chain(REAL_GPU_CASES) {
        let (host, _) = read_case(case);
        let bytes = encode_xspace(&host);
        let again = read_xspace(&bytes, &host.source_path, &host.name).expect("re-decodes");
        assert_same_host(&again, &host, case);
    }
}

/// Decodes `bytes` with [`read_xspace_releasing`], recording what it releases, and
/// checks the ranges: inside the file, in order within each line, never overlapping.
fn read_recording_releases(bytes: &[u8], path: &str) -> (Host, Vec<std::ops::Range<usize>>) {
    let what = path;
    let released = std::sync::Mutex::new(Vec::new());
    let record = |range: std::ops::Range<usize>| released.lock().unwrap().push(range);
    let host = read_xspace_releasing(bytes, &record, path, "vm").expect("decodes");
    let mut ranges = released.into_inner().unwrap();
    ranges.sort_by_key(|range| range.start);
    for pair in ranges.windows(2) {
        assert!(pair[0].end <= pair[1].start, "{what}: {:?} and {:?} overlap", pair[0], pair[1]);
    }
    assert!(ranges.iter().all(|range| range.start < range.end && range.end <= bytes.len()), "{what}: {ranges:?}");
    (host, ranges)
}

#[test]
fn a_released_read_gives_the_same_host_and_releases_each_line_once() {
    for case in CASES.iter().chain(REAL_GPU_CASES) {
        let (host, _) = read_case(case);
        let bytes = encode_xspace(&host);
        let (released_read, ranges) = read_recording_releases(&bytes, &host.source_path);
        assert_same_host(&released_read, &host, case);
        // Small lines are released whole, once each, when decoded.
        let lines = host.planes.iter().flat_map(|p| &p.lines).filter(|l| !l.is_empty()).count();
        assert!(ranges.len() >= lines, "{case}: {} ranges for {lines} lines", ranges.len());
        // A mapped file's pages really given back read the same afterwards.
        let file = case_dir(case).join(summary(case)["xspaces"][0]["file"].as_str().expect("file"));
        let loaded = load_file(&file).expect("fixture loads");
        let release = |range| loaded.bytes.release(range);
        let again = read_xspace_releasing(&loaded.bytes, &release, &host.source_path, "vm").expect("decodes");
        assert_same_host(&again, &host, case);
        loaded.unchanged().expect("the file did not change");
    }
}

/// A line of about 12 MB is released as it is decoded, in steps of a few MiB, not
/// only when it ends; together the steps cover the line's events.
#[test]
fn a_long_line_is_released_as_its_events_are_decoded() {
    let mut builder = PlaneBuilder::new(1, "/host:CPU");
    let [step, shape] = ["step_id", "shape"].map(|name| builder.stat_key(name));
    let op = builder.event_metadata("MatMul", 0, |_| Vec::new());
    let mut line = Line::new(1, "worker");
    for i in 0..400_000i64 {
        line.stats.push(step, StatValue::Int(i / 100));
        line.stats.push_str(shape, "[128,256]").unwrap();
        line.push_event(op, i * 1_000, 700);
    }
    builder.push_line(line);
    let mut host = Host::new("vm", "generated", SourceFormat::Xspace);
    host.planes.push(builder.finish());
    let bytes = encode_xspace(&host);
    assert!(bytes.len() > 10 << 20, "{} bytes", bytes.len());
    let (decoded, ranges) = read_recording_releases(&bytes, "generated.xplane.pb");
    assert_eq!(decoded.planes[0].lines[0].events, host.planes[0].lines[0].events);
    assert!(ranges.len() >= 3, "{ranges:?}");
    let covered: usize = ranges.iter().map(|range| range.len()).sum();
    assert!(covered * 100 >= bytes.len() * 99, "{covered} of {} bytes released", bytes.len());
}

/// Compares two hosts piece by piece so a difference is reported small.
fn assert_same_host(a: &Host, b: &Host, what: &str) {
    assert_eq!(a.planes.len(), b.planes.len(), "{what}");
    for (pa, pb) in a.planes.iter().zip(&b.planes) {
        let what = format!("{what} {}", pb.name);
        assert_eq!((pa.id, &pa.name), (pb.id, &pb.name), "{what}");
        assert_eq!(pa.stat_metadata, pb.stat_metadata, "{what}");
        assert_eq!(pa.event_metadata, pb.event_metadata, "{what}");
        assert_eq!(pa.stats, pb.stats, "{what}");
        assert_eq!(pa.metadata_stats, pb.metadata_stats, "{what}");
        assert_eq!(pa.lines.len(), pb.lines.len(), "{what}");
        for (la, lb) in pa.lines.iter().zip(&pb.lines) {
            let what = format!("{what} line {}", lb.name);
            assert_eq!(la.events, lb.events, "{what}");
            for (i, (sa, sb)) in la.stats.stats().iter().zip(lb.stats.stats()).enumerate() {
                assert_eq!(sa, sb, "{what} stat {i}");
            }
            assert_eq!(la.stats, lb.stats, "{what}");
            assert_eq!(la, lb, "{what}");
        }
    }
    assert_eq!(a, b, "{what}");
}

#[test]
fn every_truncation_is_an_error_with_an_offset_never_a_panic() {
    let (host, _) = read_case("jax_profile");
    let bytes = encode_xspace(&host);
    let mut located = 0;
    for cut in (1..bytes.len()).step_by(997) {
        match read_xspace(&bytes[..cut], "cut.xplane.pb", "vm") {
            Err(FormatError::Protobuf { offset, message, .. }) => {
                assert!(offset <= cut as u64, "offset {offset} beyond cut {cut}");
                assert!(!message.is_empty());
                located += 1;
            }
            Err(other) => panic!("cut at {cut}: unexpected error kind {other}"),
            // A cut that falls exactly between two top-level fields is a shorter, valid XSpace.
            Ok(partial) => assert!(partial.event_count() < host.event_count()),
        }
    }
    assert!(located > 10);
}

#[test]
fn wrong_format_input_is_rejected_with_a_clear_message() {
    let json = br#"{"traceEvents": []}"#;
    let err = read_xspace(json, "trace.xplane.pb", "h").unwrap_err().to_string();
    assert!(err.starts_with("trace.xplane.pb: byte offset "), "{err}");
    // Valid protobuf (field 5 = 1), but no XSpace field in it.
    let err = read_xspace(&[0x28, 0x01], "ints.xplane.pb", "h").unwrap_err().to_string();
    assert_eq!(err, "ints.xplane.pb: not an XSpace profile: the protobuf data has no planes and no hostnames");
}

#[test]
fn empty_files_are_refused_before_decoding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.xplane.pb");
    std::fs::write(&path, b"").unwrap();
    let err = load_file(&path).err().expect("empty file is an error").to_string();
    assert!(err.ends_with("empty.xplane.pb: file is empty (0 bytes)"), "{err}");
}
