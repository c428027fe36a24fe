//! Tests of the Kineto reader against small traces written inline: the model each JSON
//! shape maps to, and the errors for malformed input.

use mlprof_model::{Host, Plane, StatValue, TrackId};

use super::read_kineto;
use crate::error::FormatError;

fn read(json: &str) -> Host {
    match read_kineto(json.as_bytes(), "t.json", "t") {
        Ok(host) => host,
        Err(e) => panic!("read failed: {e}"),
    }
}

fn read_err(json: &str) -> (usize, usize, String) {
    match read_kineto(json.as_bytes(), "t.json", "t") {
        Err(FormatError::Json { position, message, .. }) => (position.line, position.column, message),
        Err(other) => panic!("unexpected error kind: {other}"),
        Ok(_) => panic!("expected an error"),
    }
}

/// The stats of event `i` of line `line` as (name, display text).
fn event_stats(plane: &Plane, line: usize, i: usize) -> Vec<(String, String)> {
    let line = &plane.lines[line];
    let event = line.event(i).unwrap();
    event
        .stats()
        .iter()
        .map(|s| (plane.stat_name(s.key()).to_string(), plane.format_value(line.stats_store(), s.value())))
        .collect()
}

trait StoreOf {
    fn stats_store(&self) -> &mlprof_model::StatStore;
}
impl StoreOf for mlprof_model::Line {
    fn stats_store(&self) -> &mlprof_model::StatStore {
        &self.stats
    }
}

fn meta_stats(plane: &Plane, line: usize, i: usize) -> Vec<(String, String)> {
    let event = plane.lines[line].event(i).unwrap();
    let meta = plane.metadata_of(&event).unwrap();
    plane
        .metadata_stats_of(meta)
        .iter()
        .map(|s| (plane.stat_name(s.key()).to_string(), plane.format_value(&plane.metadata_stats, s.value())))
        .collect()
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[test]
fn fractional_and_integer_times_are_exact() {
    let host = read(
        r#"{"traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1712195495519689, "dur": 63.813},
            {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1712195495519695.8, "dur": 1.5e1}
        ], "displayTimeUnit": "ms"}"#,
    );
    let chrome = host.chrome.as_ref().unwrap();
    assert_eq!(chrome.origin_us, 1712195495519689);
    let line = &host.planes[0].lines[0];
    assert_eq!(line.events.offset_ps.to_vec(), vec![0, 6_800_000]);
    assert_eq!(line.events.duration_ps.to_vec(), vec![63_813_000, 15_000_000]);
    assert_eq!(line.timestamp_ns, 0);
    // No baseTimeNanoseconds, epoch-like ts: start is the origin in ns.
    assert_eq!(host.profile_start_ns, Some(1712195495519689 * 1000));
    assert_eq!(host.profile_stop_ns, Some(1712195495519689 * 1000 + 63_813));
}

#[test]
fn earlier_later_events_move_the_origin_down() {
    let host = read(
        r#"{"traceEvents": [
            {"ph": "X", "name": "late", "pid": 1, "tid": 1, "ts": 100.25, "dur": 1},
            {"ph": "X", "name": "early", "pid": 1, "tid": 2, "ts": 90.5, "dur": 1},
            {"ph": "M", "name": "process_name", "pid": 1, "ts": 80, "args": {"name": "p"}}
        ], "baseTimeNanoseconds": 1000000000}"#,
    );
    let chrome = host.chrome.as_ref().unwrap();
    assert_eq!(chrome.origin_us, 90);
    let host_plane = &host.planes[0];
    assert_eq!(host_plane.lines[0].events.offset_ps.to_vec(), vec![10_250_000]);
    assert_eq!(host_plane.lines[1].events.offset_ps.to_vec(), vec![500_000]);
    assert_eq!(chrome.metadata_events[0].ts_ps, Some(-10_000_000));
    assert_eq!(host.profile_start_ns, Some(1_000_000_000 + 90_000));
    assert_eq!(host.profile_stop_ns, Some(1_000_000_000 + 90_000 + 11_250));
}

#[test]
fn gpu_and_host_events_map_to_planes_and_lines() {
    let host = read(
        r#"{"schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100", "totalGlobalMem": 42297524224, "computeMajor": 8,
                              "computeMinor": 0, "numSms": 108, "warpSize": 32},
                             {"id": 1, "name": "NVIDIA A100"}],
        "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 8},
        "traceEvents": [
          {"ph": "M", "name": "thread_name", "pid": 10, "tid": 11, "args": {"name": "main thread"}},
          {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 10, "tid": 11, "ts": 5, "dur": 2,
           "args": {"correlation": 7, "External id": 3}},
          {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 8, "dur": 4,
           "args": {"device": 0, "context": 1, "stream": 7, "correlation": 7, "grid": [1, 2, 1]}},
          {"ph": "f", "id": 7, "pid": 0, "tid": 7, "ts": 8, "cat": "ac2g", "name": "ac2g", "bp": "e"},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 10, "tid": 12, "ts": 6, "dur": 1}
        ]}"#,
    );
    assert_eq!(host.rank, Some(3));
    let names: Vec<&str> = host.planes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["/host:CPU", "/device:GPU:0", "/device:GPU:1"]);
    let cpu = &host.planes[0];
    assert_eq!(cpu.id, 0);
    let line_names: Vec<&str> = cpu.lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(line_names, ["main thread", "thread 12"]);
    assert_eq!(cpu.lines[0].id, 11);
    assert_eq!(cpu.lines[0].chrome_track, Some((TrackId::Int(10), TrackId::Int(11))));
    assert_eq!(event_stats(cpu, 0, 0), pairs(&[("correlation_id", "7"), ("External id", "3")]));
    assert_eq!(meta_stats(cpu, 0, 0), pairs(&[("cat", "cuda_runtime")]));

    let gpu = &host.planes[1];
    assert_eq!(gpu.id, 0);
    assert_eq!(gpu.lines.len(), 1);
    assert_eq!(gpu.lines[0].name, "Stream #7");
    assert_eq!((gpu.lines[0].id, gpu.lines[0].display_id), (7, 7));
    assert_eq!(gpu.lines[0].len(), 2, "the flow on the GPU pid goes to the GPU plane");
    assert_eq!(
        event_stats(gpu, 0, 0),
        pairs(&[
            ("device_id", "0"),
            ("context_id", "1"),
            ("stream", "7"),
            ("correlation_id", "7"),
            ("grid", "[1, 2, 1]")
        ])
    );
    assert_eq!(gpu.event_metadata.len(), 2, "plane metadata holds only what its lines use");
    assert_eq!(
        gpu.plane_stat("gpu_device_name").map(|v| gpu.format_value(&gpu.metadata_stats, v)).as_deref(),
        Some("NVIDIA A100")
    );
    assert_eq!(gpu.plane_stat("memory_size"), Some(StatValue::Int(42297524224)));
    assert_eq!(gpu.plane_stat("core_count"), Some(StatValue::Int(108)));
    assert_eq!(gpu.plane_stat("compute_cap_major"), Some(StatValue::Int(8)));
    assert_eq!(gpu.plane_stat("warpSize"), Some(StatValue::Int(32)));
    assert!(host.planes[2].lines.is_empty());
    let keys: Vec<&str> = host.chrome.as_ref().unwrap().top_level.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["schemaVersion", "deviceProperties", "distributedInfo"]);
}

#[test]
fn labels_and_mtia_categories_make_device_planes() {
    let host = read(
        r#"{"traceEvents": [
          {"ph": "M", "name": "process_labels", "pid": 3, "tid": 0, "args": {"labels": "GPU 3"}},
          {"ph": "X", "cat": "mtia_ccp_events", "name": "k", "pid": 17, "tid": 5, "ts": 1, "dur": 1},
          {"ph": "X", "cat": "mtia_runtime", "name": "launch", "pid": 865, "tid": 5, "ts": 1, "dur": 1},
          {"ph": "i", "name": "marker", "pid": 3, "tid": 2, "ts": 2, "s": "t"}
        ]}"#,
    );
    let names: Vec<&str> = host.planes.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["/host:CPU", "/device:GPU:3", "/device:MTIA:17"]);
    assert_eq!(host.planes[0].lines.len(), 1);
}

#[test]
fn flows_instants_counters_and_extra_keys_are_kept() {
    let host = read(
        r#"[
          {"ph": "s", "id": 181, "pid": 1, "tid": 1, "ts": 1, "cat": "fwdbwd", "name": "fwdbwd"},
          {"ph": "f", "id": "x1", "pid": 1, "tid": 1, "ts": 2, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
          {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 3, "s": "g", "args": {"a": 1}},
          {"ph": "C", "name": "mem", "pid": 1, "tid": 1, "ts": 4, "args": {"bytes": 12.5, "big": 18446744073709551615}},
          {"ph": "B", "name": "begin", "pid": 1, "tid": 1, "ts": 5, "id2": {"local": "0x1"}, "dur": 3},
          {"ph": "E", "pid": 1, "tid": 1, "ts": 6}
        ]"#,
    );
    let chrome = host.chrome.as_ref().unwrap();
    assert!(chrome.bare_array);
    assert!(chrome.top_level.is_empty());
    let plane = &host.planes[0];
    assert_eq!(plane.lines[0].len(), 6);
    assert_eq!(event_stats(plane, 0, 0), pairs(&[("@id", "181")]));
    assert_eq!(event_stats(plane, 0, 1), pairs(&[("@id", "x1"), ("@bp", "e")]));
    assert_eq!(event_stats(plane, 0, 2), pairs(&[("a", "1"), ("@s", "g")]));
    assert_eq!(event_stats(plane, 0, 3), pairs(&[("bytes", "12.5"), ("big", "18446744073709551615")]));
    assert_eq!(event_stats(plane, 0, 4), pairs(&[("@id2", r#"{"local": "0x1"}"#), ("@dur", "3")]));
    assert_eq!(plane.lines[0].events.duration_ps.to_vec(), vec![0; 6]);
    assert_eq!(meta_stats(plane, 0, 0), pairs(&[("cat", "fwdbwd"), ("ph", "s")]));
    assert_eq!(meta_stats(plane, 0, 3), pairs(&[("ph", "C")]));
    assert_eq!(plane.event_metadata[plane.lines[0].events.metadata.at(5) as usize].name, "");
    // Typed values.
    let stats = plane.lines[0].event(1).unwrap().stats();
    assert!(matches!(stats[0].value(), StatValue::Str(_)));
    let stats = plane.lines[0].event(3).unwrap().stats();
    let (first, second) = (stats[0].value(), stats[1].value());
    assert_eq!(first, StatValue::Double(12.5));
    assert_eq!(second, StatValue::Uint(u64::MAX));
}

#[test]
fn metadata_records_are_kept_not_events() {
    let host = read(
        r#"{"traceEvents": [
          {"name": "process_name", "ph": "M", "ts": 10.5, "pid": 2677, "tid": 0, "args": {"name": "python"}},
          {"name": "process_sort_index", "ph": "M", "pid": "Spans", "args": {"sort_index": 536870912}},
          {"ph": "X", "cat": "Trace", "ts": 11, "dur": 5, "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)"},
          {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 20}
        ]}"#,
    );
    assert_eq!(host.event_count(), 2);
    let chrome = host.chrome.as_ref().unwrap();
    assert_eq!(chrome.metadata_events.len(), 2);
    let m0 = &chrome.metadata_events[0];
    assert_eq!((m0.name.as_str(), &m0.pid, &m0.tid), ("process_name", &TrackId::Int(2677), &Some(TrackId::Int(0))));
    assert_eq!(m0.ts_ps, Some(-500_000));
    assert_eq!(m0.args_json, r#"{"name": "python"}"#);
    let m1 = &chrome.metadata_events[1];
    assert_eq!((&m1.pid, &m1.tid, m1.ts_ps), (&TrackId::Str("Spans".into()), &None, None));
    let plane = &host.planes[0];
    assert_eq!(plane.lines[0].name, "PyTorch Profiler");
    assert_eq!(
        plane.lines[0].chrome_track,
        Some((TrackId::Str("Spans".into()), TrackId::Str("PyTorch Profiler".into())))
    );
    assert_eq!(plane.lines[0].id, crate::intern::fnv63("PyTorch Profiler"));
    assert_eq!(plane.lines[1].name, "");
    assert_eq!(event_stats(plane, 1, 0), pairs(&[("@s", "g")]));
}

#[test]
fn escaped_strings_are_unescaped() {
    let host = read(
        r#"{"traceEvents": [{"ph": "X", "name": "a\"b", "pid": 1, "tid": 1, "ts": 0, "args": {"k\u0041": "x\ny"}}]}"#,
    );
    let plane = &host.planes[0];
    assert_eq!(plane.event_metadata[0].name, "a\"b");
    assert_eq!(event_stats(plane, 0, 0), pairs(&[("kA", "x\ny")]));
}

#[test]
fn empty_event_list_is_a_host_without_events() {
    let host = read(r#"{"traceEvents": [], "traceName": "x"}"#);
    assert!(host.planes.is_empty());
    assert_eq!(host.profile_start_ns, None);
    assert_eq!(host.chrome.as_ref().unwrap().top_level, vec![("traceName".to_string(), "\"x\"".to_string())]);
}

#[test]
fn errors_carry_line_and_column() {
    let (line, column, message) = read_err("{\"traceEvents\": [\n  {\"ph\": \"X\", \"ts\": \"soon\"}\n]}");
    assert_eq!(line, 2);
    assert!(column > 10, "{column}");
    assert!(message.contains("\"ts\": expected a number of microseconds"), "{message}");

    let (line, _, message) = read_err("{\"traceEvents\": [\n {\"ph\": \"X\",, }]}");
    assert_eq!(line, 2);
    assert!(message.starts_with("invalid JSON:"), "{message}");

    let (_, _, message) = read_err(r#"{"traceEvents": {"ph": "X"}}"#);
    assert!(message.contains("expected \"traceEvents\" to be an array of events"), "{message}");

    let (_, _, message) = read_err(r#"{"traceEvents": [1]}"#);
    assert!(message.contains("expected a trace event object"), "{message}");

    let (_, _, message) = read_err(r#"{"schemaVersion": 1}"#);
    assert!(message.contains("no \"traceEvents\" array"), "{message}");

    let (line, column, message) = read_err("42");
    assert_eq!((line, column), (1, 2));
    assert!(
        message.contains("expected a Chrome trace: an object with \"traceEvents\" or an array of events"),
        "{message}"
    );

    let (_, _, message) = read_err(r#"{"traceEvents": [{"ph": "X", "pid": 1.5}]}"#);
    assert!(message.contains("integer or string"), "{message}");

    let (_, _, message) = read_err(r#"{"traceEvents": [{"ph": "X", "ts": 1e300}]}"#);
    assert!(message.contains("too large"), "{message}");

    let (_, _, message) = read_err(r#"{"traceEvents": [{"ts": 0}, {"ts": 1e13}]}"#);
    assert!(message.contains("span"), "{message}");

    let (_, _, message) = read_err(r#"{"traceEvents": []} x"#);
    assert!(message.contains("trailing"), "{message}");

    let (_, _, message) = read_err("");
    assert!(message.starts_with("truncated JSON"), "{message}");
}

#[test]
fn truncated_input_is_an_error_at_the_end() {
    let json = "{\"traceEvents\": [\n{\"ph\": \"X\", \"name\": \"a\", \"pid\": 1, \"tid\": 1, \"ts\": 1, \"dur\": 2},\n{\"ph\": \"X\", \"na";
    let (line, _, message) = read_err(json);
    assert_eq!(line, 3);
    assert!(message.starts_with("truncated JSON: EOF while parsing"), "{message}");
    for cut in 1..json.len() {
        assert!(read_kineto(&json.as_bytes()[..cut], "t", "t").is_err(), "cut at {cut}");
    }
}

#[test]
fn real_torch_profiler_trace() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/kineto/torch_profile/logdir/worker0.1795289102612280864.pt.trace.json"
    );
    let Ok(bytes) = std::fs::read(path) else {
        eprintln!("skipping: {path} is missing");
        return;
    };
    let host = read_kineto(&bytes, path, "worker0").unwrap();
    let chrome = host.chrome.as_ref().unwrap();
    assert_eq!(chrome.metadata_events.len(), 8);
    assert_eq!(host.event_count(), 9447);
    assert_eq!(host.planes.len(), 1);
    assert_eq!(host.planes[0].name, "/host:CPU");
    assert_eq!(host.rank, None);
    assert_eq!(chrome.top_level.len(), 10);
    assert!(host.profile_start_ns.is_some_and(|s| s > 1_790_857_026_000_000_000));
    let python = host.planes[0].lines.iter().find(|l| l.id == 2677).unwrap();
    assert_eq!(python.name, "thread 2677 (python)");
}

/// Every way of reading `bytes` (chunked on 2, 3 and 7 threads with tiny chunks, the
/// default, with and without a release callback) gives what the sequential parse gives:
/// the same host, or the same error. Returns the sequential result.
fn assert_modes_agree(bytes: &[u8], what: &str) -> std::result::Result<Host, String> {
    use super::{Mode, read};
    use std::sync::Mutex;
    let show = |r: crate::error::Result<Host>| r.map_err(|e| e.to_string());
    let sequential = show(read(bytes, None, Mode::Sequential, "t.json", "t"));
    let released = Mutex::new(Vec::new());
    let release = |range: std::ops::Range<usize>| released.lock().unwrap().push(range);
    for chunks in [1, 2, 3, 7] {
        for min_bytes in [1, 200] {
            let mode = Mode::Chunked { chunks, min_bytes };
            let got = show(read(bytes, Some(&release), mode, "t.json", "t"));
            assert!(got == sequential, "{what}: {mode:?} differs from the sequential parse");
        }
    }
    assert!(show(read(bytes, None, Mode::Auto, "t.json", "t")) == sequential, "{what}: default mode differs");
    for range in released.lock().unwrap().iter() {
        assert!(range.start < range.end && range.end <= bytes.len(), "{what}: released {range:?}");
    }
    sequential
}

/// Kineto fixtures under tests/data/kineto (plain and gzipped JSON; files that are not
/// traces must fail the same way in every mode).
#[test]
fn chunked_and_released_reads_equal_the_sequential_one_on_every_fixture() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/kineto");
    let mut stack = vec![root];
    let mut traces = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = path.to_string_lossy().to_string();
            if path.is_dir() {
                stack.push(path);
            } else if name.ends_with(".json") || name.ends_with(".json.gz") {
                let loaded = crate::input::load_file(&path).unwrap();
                if assert_modes_agree(&loaded.bytes, &name).is_ok() {
                    traces += 1;
                }
                // The real release of a mapped file changes nothing either.
                let release = |range| loaded.bytes.release(range);
                let mode = super::Mode::Chunked { chunks: 2, min_bytes: 1 };
                let again = super::read(&loaded.bytes, Some(&release), mode, "t.json", "t").map_err(|e| e.to_string());
                let sequential = super::read(&loaded.bytes, None, super::Mode::Sequential, "t.json", "t");
                assert!(again == sequential.map_err(|e| e.to_string()), "{name}: released read differs");
            }
        }
    }
    assert!(traces >= 20, "only {traces} Kineto fixtures found");
}

/// A trace on one line whose split candidates (`}, {`) lie inside a string and inside
/// a nested args value: the chunked read must notice and still give the same host.
#[test]
fn misplaced_split_boundaries_fall_back() {
    let event = |i: usize| {
        format!(
            r#"{{"ph": "X", "cat": "cpu_op", "name": "op{}", "pid": 1, "tid": {}, "ts": {}, "dur": 1}}"#,
            i % 3,
            i % 2,
            100 + i
        )
    };
    let filler = "a".repeat(3000);
    let tricky = [
        format!(
            r#"{{"ph": "X", "name": "s", "pid": 1, "tid": 1, "ts": 5, "args": {{"text": "{filler}}}, {{{filler}"}}}}"#
        ),
        format!(
            r#"{{"ph": "X", "name": "n", "pid": 1, "tid": 1, "ts": 5, "args": {{"list": [{{"{filler}": 1}}, {{"b": [{{}}, {{}}]}}]}}}}"#
        ),
    ];
    for middle in tricky {
        let mut events: Vec<String> = (0..5).map(event).collect();
        events.push(middle.clone());
        events.extend((5..10).map(event));
        let json = format!(r#"{{"schemaVersion": 1, "traceEvents": [{}], "traceName": "x"}}"#, events.join(", "));
        let bytes = json.as_bytes();
        let starts = super::walk::boundaries(bytes, 2, 1);
        let inside = json.find(&middle).map(|at| at..at + middle.len()).unwrap();
        assert!(starts.len() == 1 && inside.contains(&starts[0]), "candidate {starts:?} not inside {inside:?}");
        assert!(super::walk::walk_at(bytes, &starts, None).is_err(), "a misplaced boundary was accepted");
        let host = assert_modes_agree(bytes, "tricky").unwrap();
        assert_eq!(host.event_count(), 11);
    }
}

/// Bad input anywhere (in either half, in the top level after the events) gives the
/// sequential parse's error, with its line and column, in every mode.
#[test]
fn chunked_reads_report_the_sequential_errors() {
    let events: Vec<String> = (0..40)
        .map(|i| format!("{{\"ph\": \"X\", \"name\": \"e{i}\", \"pid\": {}, \"tid\": \"t{}\", \"ts\": {}.5, \"dur\": 2, \"id\": {i}, \"bp\": \"e\"}}", i % 3, i % 4, 1000 - i))
        .collect();
    let good = format!("{{\"traceEvents\": [\n{}\n], \"baseTimeNanoseconds\": 7}}", events.join(",\n"));
    assert_modes_agree(good.as_bytes(), "good").unwrap();
    let bare = format!("[\n{}\n]", events.join(",\n"));
    assert_modes_agree(bare.as_bytes(), "bare").unwrap();
    for (from, to) in [
        ("\"e35\"", "e35"),
        ("\"e3\"", "3e"),
        ("\"dur\": 2, \"id\": 30", "\"dur\": x, \"id\": 30"),
        ("7}", "7,}"),
        ("7}", "7}]"),
    ] {
        let bad = good.replacen(from, to, 1);
        assert!(assert_modes_agree(bad.as_bytes(), &bad).is_err());
    }
    let dup = good.replacen("\"baseTimeNanoseconds\": 7", "\"traceEvents\": [{\"ph\": \"i\", \"ts\": 1}]", 1);
    assert_eq!(assert_modes_agree(dup.as_bytes(), "duplicate traceEvents").unwrap().event_count(), 41);
    // Time spans checked across chunks.
    let far = good.replacen("\"ts\": 961.5", "\"ts\": 9e18", 1);
    assert!(assert_modes_agree(far.as_bytes(), "far").is_err());
    // Deep nesting in args: the recursion limit applies the same way.
    for depth in [120, 125, 126, 127, 130] {
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let deep = good.replacen("\"bp\": \"e\"}", &format!("\"bp\": \"e\", \"args\": {{\"a\": {nested}}}}}"), 1);
        let _ = assert_modes_agree(deep.as_bytes(), &format!("depth {depth}"));
    }
}

/// Events in shapes the fast scanner reads itself (repeated fields, unusual spacing
/// and numbers, nested and non-object args, extra fields, metadata records) and in
/// shapes it leaves to serde (escapes, float ids, non-ASCII), mixed in one trace: the
/// walker must read them exactly as the sequential serde parse does.
#[test]
fn fast_and_serde_event_reads_agree() {
    let events = [
        r#"{"ph": "X", "ph": "i", "name": "a", "name": "b", "pid": 1, "tid": 2, "ts": 10, "s": "t"}"#,
        "{\n\t\"ph\":\"X\" ,\r\n \"cat\" : \"cpu_op\",\"name\":\"c\",\"pid\":-0,\"tid\":-3,\"ts\":1.5e1,\"dur\":0.0000001}",
        r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 12, "dur": 3, "args": {}}"#,
        r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 13, "dur": 3, "args": [1, {"a": null}]}"#,
        r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 14, "args": {"x": 1}, "args": {"grid": [1, 2, 3], "f": false, "s": "", "big": 18446744073709551615, "neg": -1e-2, "o": {"k": [[], {}]}, "correlation": 5, "x": 2, "x": 3}}"#,
        r#"{"ph": "s", "cat": "ac2g", "name": "ac2g", "pid": 0, "tid": 7, "ts": 15, "id": 5, "bp": "e", "id2": {"local": "0x1"}, "dur": 4, "z": [true]}"#,
        r#"{"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "ts": 1, "args": {"name": "worker"}, "cat": "__metadata"}"#,
        r#"{"ph": "M", "name": "process_labels", "pid": 0, "args": {"labels": "GPU 0"}}"#,
        r#"{"ph": "X", "name": "esc\"aped", "pid": "p\u0031", "tid": 1.0, "ts": 16, "dur": 1, "args": {"k\n": "v\/"}}"#,
        r#"{"ph": "X", "name": "naïve ✓", "pid": 1, "tid": 2, "ts": 17, "dur": 1, "args": {"ünïcode": "ç"}}"#,
        r#"{"ph": "X", "name": "late pid", "ts": 18, "dur": 1, "args": {"a": 1}, "tid": 9, "pid": 9223372036854775807}"#,
        r#"{}"#,
    ];
    let json = format!("{{\"traceEvents\": [\n{}\n]}}", events.join(",\n"));
    let host = assert_modes_agree(json.as_bytes(), "mixed shapes").unwrap();
    assert_eq!(host.event_count(), 10);
}

/// Kineto-spaced events (`": "`, `", "`) with a few random bytes inserted, replaced
/// or removed, most of them whitespace and separators: however the spacing or the
/// document breaks, every chunked read (the fast scanner) must equal the sequential
/// serde parse, result or error.
#[test]
fn randomly_edited_traces_read_as_serde_reads_them() {
    let events = [
        r#"{"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 11, "tid": 11, "ts": 1712195495644137.8, "dur": 6.871, "args": {"External id": 11651, "Ev Idx": 18530}}"#,
        r#"{"ph": "s", "id": 399, "pid": 11, "tid": 11, "ts": 1712195495644131.8, "cat": "fwdbwd", "name": "fwdbwd"}"#,
        r#"{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1712195495644140, "dur": 3, "args": {"grid": [4, 1, 1], "correlation": 5, "s": "v", "f": -1.5e-3, "n": null}}"#,
        r#"{"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}}"#,
    ];
    let template =
        format!("{{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n    {}\n  ]\n}}", events.join(",\n    "));
    let edits =
        [b' ', b' ', b'\n', b'\t', b',', b':', b'"', b'{', b'}', b'[', b']', b'1', b'.', b'e', b'-', b'\\', b'x', 0xc3];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as usize % bound
    };
    let (mut read, mut failed) = (0, 0);
    for _ in 0..1500 {
        let mut bytes = template.clone().into_bytes();
        for _ in 0..1 + next(3) {
            let at = next(bytes.len());
            match next(3) {
                0 => bytes.insert(at, edits[next(edits.len())]),
                1 => bytes[at] = edits[next(edits.len())],
                _ => {
                    bytes.remove(at);
                }
            }
        }
        match assert_modes_agree(&bytes, &String::from_utf8_lossy(&bytes)) {
            Ok(_) => read += 1,
            Err(_) => failed += 1,
        }
    }
    // Both outcomes occur, so both paths were compared.
    assert!(read > 100 && failed > 100, "{read} read, {failed} failed");
}
