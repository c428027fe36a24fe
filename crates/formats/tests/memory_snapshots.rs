//! The PyTorch memory-snapshot reader against real snapshots (PyTorch 2.3–2.9 and
//! 2.10+, `tests/data/torch_memory/`), the same data pickled with protocols 2, 3 and 5,
//! and generated snapshots of the shapes no licensed public file has (expandable
//! segments with an OOM on two devices, no times). Expected numbers were computed from
//! the files with Python's `pickle` (the README of `tests/data` gives the script).

use std::path::{Path, PathBuf};

use mlprof_formats::discover::{self, HostFile};
use mlprof_formats::torch_memory::decode_snapshot;
use mlprof_model::AllocatorAction as Action;
use mlprof_model::names::memory_snapshot::{ALLOCATED_STAT, RESERVED_STAT};
use mlprof_model::{Host, Plane, SourceFormat};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/torch_memory").join(path)
}

fn read(path: &str) -> Host {
    let file = HostFile { path: fixture(path), format: SourceFormat::Kineto, host_name: "snapshot".to_string() };
    discover::read_host_file(&file).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn int_stat(plane: &Plane, event: &mlprof_model::Event<'_>, name: &str) -> Option<i64> {
    let key = plane.find_stat_key(name)?;
    match event.own_stat(key)? {
        mlprof_model::StatValue::Int(v) => Some(v),
        _ => None,
    }
}

/// `(allocated, reserved)` after each `[memory]` event, in time order, per line.
fn totals(host: &Host) -> Vec<(i64, i64)> {
    let plane = &host.planes[0];
    let mut out: Vec<(i64, (i64, i64))> = Vec::new();
    for line in &plane.lines {
        for event in line.iter() {
            if plane.event_metadata[event.metadata_index() as usize].name == "[memory]" {
                let allocated = int_stat(plane, &event, ALLOCATED_STAT).expect("allocated");
                let reserved = int_stat(plane, &event, RESERVED_STAT).expect("reserved");
                out.push((event.start_ps(), (allocated, reserved)));
            }
        }
    }
    out.sort_by_key(|(t, _)| *t);
    out.into_iter().map(|(_, totals)| totals).collect()
}

#[test]
fn a_real_snapshot_rebuilds_pytorchs_allocated_and_reserved_totals() {
    // Python: 9 segments, 20 blocks, 97 entries (36 alloc, 26 free_requested, 26
    // free_completed, 9 segment_alloc); at the end 31,719,936 allocated of 3,781,165,056
    // reserved; 508 bytes allocated before the trace; peak 3,249,144,324 allocated.
    let bytes = std::fs::read(fixture("silmont_2_x/mem_snapshot.pickle")).expect("fixture");
    let snapshot = decode_snapshot(&bytes, "silmont").expect("decodes");
    assert_eq!(snapshot.segments.len(), 9);
    assert_eq!(snapshot.segments.iter().map(|s| s.blocks.len()).sum::<usize>(), 20);
    assert_eq!(snapshot.trace.len(), 97);
    let count = |action| snapshot.trace.iter().filter(|e| e.action == action).count();
    assert_eq!((count(Action::Alloc), count(Action::FreeRequested), count(Action::SegmentAlloc)), (36, 26, 9));
    assert!(!snapshot.clock.synthetic && snapshot.trace.iter().all(|e| e.device == 0));

    let host = read("silmont_2_x/mem_snapshot.pickle");
    assert_eq!(host.format, SourceFormat::Kineto);
    assert!(host.warnings.is_empty(), "{:?}", host.warnings);
    let totals = totals(&host);
    assert_eq!(totals.len(), 62);
    assert_eq!(totals.first(), Some(&(508 + 2_097_152, 20_971_520)));
    assert_eq!(totals.last(), Some(&(31_719_936, 3_781_165_056)));
    assert_eq!(totals.iter().map(|t| t.0).max(), Some(3_249_144_324));
    let plane = &host.planes[0];
    let names: Vec<&str> = plane.lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["cuda:0 stream 0", "segments cuda:0", "blocks cuda:0"]);
    assert_eq!(plane.lines[1].len(), 9);
    assert_eq!(plane.lines[2].len(), 20);
}

#[test]
fn a_real_pytorch_2_10_snapshot_with_annotations_and_a_ring_buffered_trace() {
    // Python: 96 segments, 550 blocks, 6,486 entries; the trace starts with 3,072,871,424
    // bytes already allocated and ends where it started; peak 3,857,685,760.
    let host = read("bcrafton_2_10/memory_snapshot.pickle");
    let totals = totals(&host);
    assert_eq!(totals.len(), 4324);
    assert_eq!(totals.iter().map(|t| t.0).max(), Some(3_857_685_760));
    assert_eq!(totals.last(), Some(&(3_072_871_424, 4_238_344_192)));
    let plane = &host.planes[0];
    let annotations = plane.lines.iter().find(|l| l.name == "annotations cuda:0").expect("annotation line");
    assert_eq!(annotations.len(), 1);
    let event = annotations.event(0).expect("one range");
    assert_eq!(plane.event_metadata[event.metadata_index() as usize].name, "Optimizer.step#AdamW.step");
    assert!(event.duration_ps() > 0);
    // Stacks are shared: far fewer distinct stack texts than entries.
    let stacks = plane.stat_metadata.iter().filter(|m| m.name.contains('\n')).count();
    assert!((10..2000).contains(&stacks), "{stacks} distinct stacks");
    assert!(host.profile_start_ns.is_some_and(|ns| ns > 1_700_000_000_000_000_000));
}

#[test]
fn every_pickle_protocol_gives_the_same_host() {
    let original = read("silmont_2_x/mem_snapshot.pickle");
    for protocol in [2, 3, 5] {
        let other = read(&format!("silmont_2_x/mem_snapshot.protocol{protocol}.pickle"));
        assert_eq!(other.planes, original.planes, "protocol {protocol}");
    }
}

#[test]
fn expandable_segments_an_oom_and_two_devices() {
    let bytes = std::fs::read(fixture("generated/expandable_oom_2_devices.pickle")).expect("fixture");
    let snapshot = decode_snapshot(&bytes, "generated").expect("decodes");
    assert!(snapshot.segments.iter().all(|s| s.is_expandable));
    let oom: Vec<_> = snapshot.trace.iter().enumerate().filter(|(_, e)| e.action == Action::Oom).collect();
    assert_eq!(oom.len(), 2);
    assert_eq!(snapshot.trace.extras(oom[0].0).and_then(|e| e.device_free), Some(95 << 20));
    assert_eq!(oom[0].1.size, 80 << 30);
    assert_eq!((oom[0].1.device, oom[1].1.device), (0, 1));
    let host = read("generated/expandable_oom_2_devices.pickle");
    let plane = &host.planes[0];
    let names: Vec<&str> = plane.lines.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cuda:0 stream 0",
            "annotations cuda:0",
            "segments cuda:0",
            "blocks cuda:0",
            "cuda:1 stream 0",
            "segments cuda:1",
            "blocks cuda:1"
        ]
    );
    // segment_map makes reserved memory: both 20 MiB segments are mapped in the trace.
    let totals = totals(&host);
    assert_eq!(totals.last(), Some(&(4 << 20, 40 << 20)));
    assert_eq!(totals.first(), Some(&(1 << 20, 20 << 20)));
    // Six ProfilerStep ranges.
    let annotations = &plane.lines[1];
    assert_eq!(annotations.len(), 6);
}

#[test]
fn a_snapshot_without_times_places_entries_in_order_and_says_so() {
    let host = read("generated/no_times.pickle");
    assert_eq!(host.warnings.len(), 1);
    assert!(host.warnings[0].contains("no event times"), "{:?}", host.warnings);
    assert_eq!(host.profile_start_ns, None);
    let line = &host.planes[0].lines[0];
    let starts: Vec<i64> = line.iter().map(|e| e.start_ps()).collect();
    assert!(starts.windows(2).all(|w| w[1] - w[0] == 1_000_000), "1 µs apart");
}

#[test]
fn files_that_are_not_snapshots_get_one_line_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cases: [(&str, &[u8], &str); 4] = [
        ("set.pickle", b"\x80\x02c__builtin__\nset\nq\x00]q\x01K\x01a\x85q\x02Rq\x03.", "never runs pickle code"),
        ("dict.pickle", b"\x80\x04}\x94.", "neither `segments` nor `device_traces`"),
        ("int.pickle", b"\x80\x04K\x05.", "neither a dict nor a list"),
        ("text.pickle", b"hello", "does not start like one"),
    ];
    for (name, bytes, expected) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        let file = HostFile { path: path.clone(), format: SourceFormat::Kineto, host_name: name.to_string() };
        let message = discover::read_host_file(&file).expect_err(name).to_string();
        assert!(message.contains(expected), "{name}: {message}");
        assert!(message.contains(name) && !message.contains('\n'), "{name}: {message}");
    }
    // A real snapshot cut anywhere is an error naming the offset, never a panic.
    let bytes = std::fs::read(fixture("silmont_2_x/mem_snapshot.pickle")).expect("fixture");
    for end in (0..bytes.len()).step_by(997) {
        let error = decode_snapshot(&bytes[..end], "cut").expect_err("truncated").to_string();
        assert!(error.starts_with("cut: "), "{error}");
    }
}

/// The real H100 snapshots (PyTorch 2.11): numbers from `scripts/snapshot_reference.py`.
#[test]
fn real_h100_snapshots_with_an_oom_under_both_segment_layouts() {
    // oom_default: 12 segments, 896 entries (35 segment_alloc, 23 segment_free, 1 oom),
    // 944 bytes before the trace, peak 3,056,643,128 allocated and 3,319,791,616 reserved.
    // oom_expandable: the same job with expandable segments: 3 segments, 26 segment_map
    // and 2 segment_unmap, the same allocated peak, 3,149,922,304 reserved at most.
    // Python's pickle: 400 and 372 of the entries have frames; entries of one block
    // share their frames list through the memo, which the decoder frees once read.
    let cases = [
        ("h100_oom/oom_default.pickle", 12, 896, 400, false, 3_319_791_616_i64, (236_323_840, 2_929_721_344_i64)),
        ("h100_oom/oom_expandable.pickle", 3, 866, 372, true, 3_149_922_304, (236_323_840, 2_688_548_864)),
    ];
    for (path, segments, entries, with_frames, expandable, peak_reserved, end) in cases {
        let bytes = std::fs::read(fixture(path)).expect("fixture");
        let snapshot = decode_snapshot(&bytes, path).expect("decodes");
        assert_eq!((snapshot.segments.len(), snapshot.trace.len()), (segments, entries), "{path}");
        let has_frames =
            |e: &mlprof_model::AllocatorRecord| e.stack.is_some_and(|s| !snapshot.trace.stack(s).is_empty());
        assert_eq!(snapshot.trace.iter().filter(has_frames).count(), with_frames, "{path}");
        assert!(snapshot.segments.iter().all(|s| s.is_expandable == expandable), "{path}");
        let oom: Vec<_> = snapshot.trace.iter().enumerate().filter(|(_, e)| e.action == Action::Oom).collect();
        assert_eq!(oom.len(), 1, "{path}");
        assert_eq!(oom[0].1.size, 1 << 30, "{path}");
        let device_free = snapshot.trace.extras(oom[0].0).and_then(|e| e.device_free);
        assert!(device_free.is_some_and(|free| free > 80_000_000_000));
        let host = read(path);
        assert!(host.warnings.is_empty(), "{path}: {:?}", host.warnings);
        let totals = totals(&host);
        assert_eq!(totals.len(), 563, "{path}: alloc and free_requested");
        assert_eq!(totals.iter().map(|t| t.0).max(), Some(3_056_643_128), "{path}");
        assert_eq!(totals.iter().map(|t| t.1).max(), Some(peak_reserved), "{path}");
        assert_eq!(totals.last(), Some(&end), "{path}");
        assert_eq!(totals.first().map(|t| t.0), Some(944 + 16_777_216), "{path}: 944 bytes before the trace");
    }
}

#[test]
fn a_real_h100_snapshot_taken_beside_a_torch_profiler_trace() {
    // 28 segments, 116 blocks, 5,554 entries (1,900 alloc, 1,813 free_requested); 788,092
    // bytes before the trace; peak 419,001,892 allocated, 652,214,272 reserved; nine
    // `ProfilerStep#N` ranges and eight of each optimizer annotation.
    let host = read("h100_pair/snapshot.pickle");
    let totals = totals(&host);
    assert_eq!(totals.len(), 3713);
    assert_eq!(totals.iter().map(|t| t.0).max(), Some(419_001_892));
    assert_eq!(totals.iter().map(|t| t.1).max(), Some(652_214_272));
    assert_eq!(totals.last(), Some(&(169_932_288, 652_214_272)));
    let plane = &host.planes[0];
    let annotations = plane.lines.iter().find(|l| l.name == "annotations cuda:0").expect("annotation line");
    let name = |e: &mlprof_model::Event<'_>| plane.event_metadata[e.metadata_index() as usize].name.clone();
    let steps: Vec<String> = annotations.iter().map(|e| name(&e)).filter(|n| n.starts_with("ProfilerStep#")).collect();
    assert_eq!(steps.len(), 9, "{steps:?}");
    assert_eq!(annotations.len(), 9 + 8 + 8);
}

/// The snapshot and the `torch.profiler` trace of the same run, found in one directory,
/// are two hosts on one clock: each traced `ProfilerStep#N` starts within a millisecond
/// of the snapshot's annotation of it (both are Unix time; the annotation is recorded as
/// `record_function` enters, the trace's event a little later).
#[test]
fn a_real_snapshot_and_the_trace_of_the_same_run_share_one_clock() {
    let sessions = discover::load(&fixture("h100_pair")).expect("loads");
    assert_eq!(sessions.len(), 1);
    let hosts = &sessions[0].hosts;
    assert_eq!(hosts.len(), 2);
    let step_starts_ns = |host: &Host| -> Vec<(String, i64)> {
        let start = host.profile_start_ns.expect("absolute start");
        let plane = &host.planes[0];
        let mut found: Vec<(String, i64)> = plane
            .lines
            .iter()
            .flat_map(|line| line.iter())
            .filter_map(|e| {
                let name = &plane.event_metadata[e.metadata_index() as usize].name;
                name.starts_with("ProfilerStep#").then(|| (name.clone(), start + e.start_ps() / 1000))
            })
            .collect();
        found.sort();
        found.dedup_by(|a, b| a.0 == b.0);
        found
    };
    let (snapshot, trace) = if hosts[0].planes[0].lines.iter().any(|l| l.name == "annotations cuda:0") {
        (&hosts[0], &hosts[1])
    } else {
        (&hosts[1], &hosts[0])
    };
    let annotated = step_starts_ns(snapshot);
    let traced = step_starts_ns(trace);
    assert_eq!(
        traced.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(),
        ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    );
    for (name, at) in &traced {
        let (_, annotated_at) = annotated.iter().find(|(n, _)| n == name).expect("annotated too");
        assert!((0..1_000_000).contains(&(at - annotated_at)), "{name}: trace {at} ns, snapshot {annotated_at} ns");
    }
}

/// Every snapshot fixture, under `tests/data/torch_memory`.
fn every_fixture() -> Vec<String> {
    let root = fixture("");
    let mut found = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("fixture dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "pickle") {
                found.push(path.strip_prefix(&root).expect("under root").display().to_string());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn the_allocator_trace_alone_holds_every_entry_and_replays_the_events_totals() {
    use mlprof_formats::torch_memory::{EntryEvents, read_memory_snapshot_releasing};
    let fixtures = every_fixture();
    assert!(fixtures.len() >= 10, "{fixtures:?}");
    for path in fixtures {
        let bytes = std::fs::read(fixture(&path)).expect("fixture");
        let read = |events| read_memory_snapshot_releasing(&bytes, &|_| {}, &path, "snapshot", events).expect("reads");
        let (made, skipped) = (read(EntryEvents::Made), read(EntryEvents::Skipped));
        let trace = made.allocator_trace.as_ref().expect("a trace");
        assert_eq!(skipped.allocator_trace.as_ref(), Some(trace), "{path}");
        // Without the entries' events, the host keeps every other line as it was.
        let lines = |host: &Host| -> Vec<(String, usize)> {
            host.planes[0].lines.iter().map(|l| (l.name.clone(), l.len())).collect()
        };
        let entry_line = |(name, _): &(String, usize)| name.contains(" stream ");
        let other_lines: Vec<_> = lines(&made).into_iter().filter(|l| !entry_line(l)).collect();
        assert_eq!(lines(&skipped), other_lines, "{path}");
        assert_eq!(made.event_count() - skipped.event_count(), trace.len(), "{path}");
        // The totals the trace replays are those the `[memory]` events carry (checked
        // against Python above), entry for entry.
        let mut replayed: Vec<(i64, (i64, i64))> = Vec::new();
        trace.totals(|_, record, totals| {
            if matches!(record.action, Action::Alloc | Action::FreeRequested) {
                replayed.push((record.time_ps, totals));
            }
        });
        replayed.sort_by_key(|(t, _)| *t);
        let replayed: Vec<(i64, i64)> = replayed.into_iter().map(|(_, totals)| totals).collect();
        let from_events = totals(&made);
        // Equal times may sort differently across streams: compare as multisets per time.
        assert_eq!(replayed.len(), from_events.len(), "{path}");
        let sorted = |mut v: Vec<(i64, i64)>| {
            v.sort_unstable();
            v
        };
        assert_eq!(sorted(replayed), sorted(from_events), "{path}");
    }
}
