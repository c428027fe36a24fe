//! The `transfers` tool on real Kineto traces (HTA's test data and a real H200 PyTorch
//! capture, `kineto/torch_gpu_h200`), against the numbers
//! an independent Python reading of the raw JSON computes
//! (`scripts/transfers_reference.py` → `tests/data/kineto/transfers_ref/*.json`), and on
//! hand-built XSpace hosts (no real XSpace GPU profile is available: no GPU here).

use std::path::{Path, PathBuf};

use mlprof_analysis::gpu::transfers::findings::{Finding, FindingKind};
use mlprof_analysis::gpu::transfers::gaps::GapCause;
use mlprof_analysis::gpu::transfers::{self, HostTransfers, Transfers, TransfersOptions};
use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue, names};
use serde_json::Value;

fn data(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(rel)
}

/// The cases: reference file stem → trace directory under `kineto/hta/` (or, for our
/// own captures, `kineto/<dir>/logdir`).
const CASES: [(&str, &str); 8] = [
    ("critical_path_simple_add", "critical_path/simple_add"),
    ("critical_path_cuda_event_sync", "critical_path/cuda_event_sync"),
    ("critical_path_cuda_event_sync_multi_stream", "critical_path/cuda_event_sync_multi_stream"),
    ("nccl_parser_config", "nccl_parser_config"),
    ("timeline_analysis", "timeline_analysis"),
    ("ns_resolution_trace", "ns_resolution_trace"),
    ("amd_trace", "amd_trace"),
    ("torch_gpu_h200", "torch_gpu_h200"),
];

fn analyze_case(dir: &str) -> Transfers {
    let hta = data(&format!("kineto/hta/{dir}"));
    let path = if hta.is_dir() { hta } else { data(&format!("kineto/{dir}/logdir")) };
    let sessions = mlprof_formats::discover::load(&path).expect("trace loads");
    let hosts: Vec<&Host> = sessions.iter().flat_map(|s| &s.hosts).collect();
    transfers::analyze(&hosts, TransfersOptions::default())
}

fn reference(stem: &str) -> Value {
    let text = std::fs::read_to_string(data(&format!("kineto/transfers_ref/{stem}.json"))).expect("reference exists");
    serde_json::from_str(&text).expect("reference is JSON")
}

fn int(value: &Value) -> i64 {
    value.as_i64().unwrap_or_else(|| panic!("not an integer: {value}"))
}

/// (count, time lost, bytes) summed over the findings of `kind` (host-side ones only
/// when `host_only`).
fn totals(findings: &[Finding], kind: FindingKind, host_only: bool) -> (i64, i64, i64) {
    findings
        .iter()
        .filter(|f| f.kind == kind && !(host_only && f.device.is_some()))
        .fold((0, 0, 0), |t, f| (t.0 + f.count as i64, t.1 + f.time_lost_ps, t.2 + f.bytes))
}

fn only_host(result: &Transfers) -> &HostTransfers {
    assert_eq!(result.hosts.len(), 1, "one trace per case");
    &result.hosts[0]
}

#[test]
fn every_case_matches_the_python_reference() {
    for (stem, dir) in CASES {
        let result = analyze_case(dir);
        let expected = reference(stem);
        let host = only_host(&result);
        assert_eq!(int(&expected["threshold_ps"]), result.gap_threshold_ps, "{stem}");
        assert_eq!(host.steps as i64, int(&expected["steps"]), "{stem}: steps");

        let copies: Vec<(i64, String, i64, i64, i64)> = host
            .copy_bandwidth
            .iter()
            .map(|c| (c.device, c.kind.clone(), c.count as i64, c.bytes, c.duration_ps))
            .collect();
        let mut expected_copies: Vec<(i64, String, i64, i64, i64)> = expected["copies"]
            .as_array()
            .expect("copies")
            .iter()
            .map(|c| {
                let kind = c["kind"].as_str().expect("kind").to_string();
                (int(&c["device"]), kind, int(&c["count"]), int(&c["bytes"]), int(&c["duration_ps"]))
            })
            .collect();
        expected_copies.sort();
        let mut sorted_copies = copies.clone();
        sorted_copies.sort();
        assert_eq!(sorted_copies, expected_copies, "{stem}: copies per kind");

        let mut calls: Vec<(String, i64, i64)> =
            host.blocking_calls.iter().map(|c| (c.name.clone(), c.count as i64, c.host_time_ps)).collect();
        calls.sort();
        let expected_calls: Vec<(String, i64, i64)> = expected["blocking_calls"]
            .as_array()
            .expect("blocking_calls")
            .iter()
            .map(|c| (c["name"].as_str().expect("name").to_string(), int(&c["count"]), int(&c["host_time_ps"])))
            .collect();
        assert_eq!(calls, expected_calls, "{stem}: blocking calls");

        let implicit = totals(&result.findings, FindingKind::ImplicitSync, false);
        let want = &expected["implicit_syncs"];
        assert_eq!((implicit.0, implicit.1), (int(&want["count"]), int(&want["host_time_ps"])), "{stem}: implicit");

        let pageable = totals(&result.findings, FindingKind::PageableCopy, false);
        let want = &expected["pageable_copies"];
        assert_eq!(
            pageable,
            (int(&want["count"]), int(&want["host_time_ps"]), int(&want["bytes"])),
            "{stem}: pageable copies"
        );

        let syncs = totals(&result.findings, FindingKind::SyncCall, true);
        let want = &expected["sync_calls"];
        assert_eq!((syncs.0, syncs.1), (int(&want["count"]), int(&want["host_time_ps"])), "{stem}: sync calls");

        let gaps: Vec<(i64, i64, i64)> = host.gaps.iter().map(|g| (g.device, g.count as i64, g.total_ps)).collect();
        let expected_gaps: Vec<(i64, i64, i64)> = expected["gaps"]
            .as_array()
            .expect("gaps")
            .iter()
            .map(|g| (int(&g["device"]), int(&g["count"]), int(&g["total_ps"])))
            .collect();
        assert_eq!(gaps, expected_gaps, "{stem}: gaps");
        let gap_findings = totals(&result.findings, FindingKind::GpuGap, false);
        let gap_total: i64 = expected_gaps.iter().map(|g| g.2).sum();
        assert_eq!(gap_findings.1, gap_total, "{stem}: every gap is in a finding");

        let overlap: Vec<(i64, i64, i64, i64, i64)> = host
            .copy_compute_overlap
            .iter()
            .map(|o| (o.device, o.stream, o.copies as i64, o.copy_time_ps, o.overlapped_ps))
            .collect();
        let expected_overlap: Vec<(i64, i64, i64, i64, i64)> = expected["overlap"]
            .as_array()
            .expect("overlap")
            .iter()
            .map(|o| {
                let field = |name: &str| int(&o[name]);
                (field("device"), field("stream"), field("copies"), field("copy_time_ps"), field("overlapped_ps"))
            })
            .collect();
        assert_eq!(overlap, expected_overlap, "{stem}: copy/compute overlap");

        for finding in &result.findings {
            assert!(finding.time_lost_ps >= 0 && !finding.fix.is_empty(), "{stem}: {finding:?}");
            assert_eq!(finding.time_lost_per_step_ps.is_some(), host.steps > 0, "{stem}: per step iff steps");
        }
        assert!(
            result.findings.windows(2).all(|w| w[0].time_lost_ps >= w[1].time_lost_ps),
            "{stem}: ranked by time lost"
        );
    }
}

#[test]
fn simple_add_pageable_uploads_are_located_and_priced_against_pcie() {
    let result = analyze_case("critical_path/simple_add");
    let host = only_host(&result);
    let pageable: Vec<&Finding> = result.findings.iter().filter(|f| f.kind == FindingKind::PageableCopy).collect();
    assert_eq!(pageable.len(), 1, "{pageable:?}");
    let upload = pageable[0];
    assert_eq!(upload.what, "Memcpy HtoD (Pageable -> Device) via cudaMemcpyAsync");
    assert_eq!(upload.location.op.as_deref(), Some("aten::copy_"));
    assert_eq!((upload.count, upload.bytes), (16, 244_403_360));
    assert!(upload.fix.contains("pin_memory") && upload.fix.contains("non_blocking=True"));
    assert_eq!(upload.time_lost_per_step_ps, None, "no ProfilerStep in this trace");

    let device_syncs: u64 =
        result.findings.iter().filter(|f| f.what == "cudaDeviceSynchronize (Context Sync)").map(|f| f.count).sum();
    assert_eq!(device_syncs, 5, "in two places");
    let stream_sync = result.findings.iter().find(|f| f.what.starts_with("cudaStreamSynchronize")).expect("stream");
    assert_eq!((stream_sync.count, stream_sync.location.op.as_deref()), (16, Some("aten::copy_")));
    assert!(stream_sync.fix.contains("non_blocking=True"), "{}", stream_sync.fix);

    let bandwidth = &host.copy_bandwidth[0];
    assert_eq!(bandwidth.kind, "HtoD pageable");
    assert_eq!(bandwidth.peak_gbps, Some(31.5), "A100 (PG509-200) on PCIe Gen4");
    let achieved = bandwidth.achieved_gbps.expect("achieved");
    assert!((achieved - 244_403_360.0 / 39_080.0 / 1e3).abs() < 1e-9, "{achieved}");
    assert_eq!(host.devices[0].peaks.map(|p| p.model), Some("A100 40GB"));
}

#[test]
fn item_call_is_one_implicit_sync_not_a_copy_and_a_sync() {
    let result = analyze_case("critical_path/cuda_event_sync");
    let implicit: Vec<&Finding> = result.findings.iter().filter(|f| f.kind == FindingKind::ImplicitSync).collect();
    assert_eq!(implicit.len(), 1);
    let item = implicit[0];
    assert_eq!(item.location.op.as_deref(), Some("aten::is_nonzero"));
    assert_eq!(
        item.what,
        "aten::is_nonzero > aten::item > aten::_local_scalar_dense: device→host copy, then cudaStreamSynchronize"
    );
    // cudaMemcpyAsync 29 us + cudaStreamSynchronize 6 us.
    assert_eq!(item.time_lost_ps, 35_000_000);
    assert!(item.fix.contains(".item()"), "{}", item.fix);
    assert!(result.findings.iter().all(|f| f.kind != FindingKind::PageableCopy), "the DtoH copy counts once");
    let event_sync = result.findings.iter().find(|f| f.what == "cudaEventSynchronize (Event Sync)").expect("event");
    assert_eq!((event_sync.time_lost_ps, event_sync.time_lost_per_step_ps), (34_000_000, Some(34_000_000)));
}

#[test]
fn nccl_trace_event_syncs_per_step_and_optimizer_gaps() {
    let result = analyze_case("nccl_parser_config");
    let host = only_host(&result);
    assert_eq!(host.steps, 3);
    let event_sync = result.findings.iter().find(|f| f.what == "cudaEventSynchronize").expect("event syncs");
    assert_eq!(event_sync.count, 24);
    assert_eq!(event_sync.location.op.as_deref(), Some("DistributedDataParallel.forward"));
    assert_eq!(event_sync.time_lost_per_step_ps, Some(event_sync.time_lost_ps / 3));
    let optimizer = host.gaps[0].by_cause.iter().find(|(cause, ..)| *cause == GapCause::Optimizer).expect("optimizer");
    assert_eq!(optimizer.1, 9, "gaps during Optimizer.step#SGD.step");
    let dtod = host.copy_bandwidth.iter().find(|c| c.kind == "DtoD").expect("DtoD copies");
    assert_eq!((dtod.count, dtod.peak_gbps), (960, Some(1555.0 / 2.0)));
}

#[test]
fn a_lower_gap_threshold_finds_more_gaps() {
    let sessions = mlprof_formats::discover::load(&data("kineto/hta/nccl_parser_config")).expect("trace loads");
    let hosts: Vec<&Host> = sessions.iter().flat_map(|s| &s.hosts).collect();
    let strict = transfers::analyze(&hosts, TransfersOptions { gap_threshold_ps: 1_000_000_000 });
    let loose = transfers::analyze(&hosts, TransfersOptions { gap_threshold_ps: 10_000_000 });
    assert!(strict.hosts[0].gaps[0].count < loose.hosts[0].gaps[0].count);
    assert!(strict.hosts[0].gaps[0].top.iter().all(|g| g.duration_ps > 1_000_000_000));
}

/// Picoseconds of `ns` nanoseconds.
const fn ns(ns: i64) -> i64 {
    ns * 1000
}

/// A host thread `(name, start ns, duration ns, correlation)`.
type HostSpec<'a> = (&'a str, i64, i64, Option<i64>);
/// A GPU op `(name, start ns, duration ns, correlation, memcpy_details)`.
type GpuSpec<'a> = (&'a str, i64, i64, i64, Option<&'a str>);

/// An XSpace host: one host thread and one GPU stream, as TensorFlow's CUPTI tracer
/// writes them (driver calls with `correlation_id`, `MemcpyH2D` with `memcpy_details`).
fn xspace_host(thread: &[HostSpec<'_>], stream: &[GpuSpec<'_>], device_name: &str) -> Host {
    let mut host_plane = PlaneBuilder::new(0, names::HOST_PLANE);
    let correlation = host_plane.stat_key(names::CORRELATION_ID);
    let mut line = Line::new(1, "tf_Compute/1");
    for &(name, start, duration, id) in thread {
        let metadata = host_plane.event_metadata(name, 0, |_| Vec::new());
        if let Some(id) = id {
            line.stats.push(correlation, StatValue::Int(id));
        }
        line.push_event(metadata, ns(start), ns(duration));
    }
    host_plane.push_line(line);

    let mut gpu = PlaneBuilder::new(1, "/device:GPU:0");
    let name_key = gpu.stat_key("gpu_device_name");
    let name_value = gpu.metadata_str(device_name).expect("arena");
    gpu.set_plane_stats(vec![(name_key, name_value)]);
    let correlation = gpu.stat_key(names::CORRELATION_ID);
    let details_key = gpu.stat_key("memcpy_details");
    let mut line = Line::new(7, "Stream #7(Kernel,MemcpyH2D,MemcpyD2H)");
    for &(name, start, duration, id, details) in stream {
        let metadata = gpu.event_metadata(name, 0, |_| Vec::new());
        line.stats.push(correlation, StatValue::Int(id));
        if let Some(details) = details {
            line.stats.push_str(details_key, details).expect("arena");
        }
        line.push_event(metadata, ns(start), ns(duration));
    }
    gpu.push_line(line);
    let mut host = Host::new("tf_host", "tf_host.xplane.pb", SourceFormat::Xspace);
    host.planes.push(host_plane.finish());
    host.planes.push(gpu.finish());
    host
}

#[test]
fn xspace_hand_built_profile_gives_the_same_diagnosis() {
    let host = xspace_host(
        &[
            ("$train.py:10 train_step", 0, 9000, None),
            ("Upload", 0, 1000, None),
            ("cuMemcpyHtoDAsync_v2", 100, 200, Some(1)),
            ("cuStreamSynchronize", 300, 500, Some(2)),
            ("Preprocess", 1500, 3600, None),
            ("cuLaunchKernel", 5000, 10, Some(3)),
            ("ReadLoss", 6900, 800, None),
            ("cuMemcpyDtoH_v2", 7000, 600, Some(4)),
        ],
        &[
            ("MemcpyH2D", 150, 550, 1, Some("kind_src:pageable kind_dst:device size:4096 dest:0 async:1")),
            ("gemm", 5020, 980, 3, None),
            ("MemcpyD2H", 7010, 580, 4, Some("kind_src:device kind_dst:pinned size:1048576 dest:0 async:0")),
        ],
        "NVIDIA H100 80GB HBM3",
    );
    let result = transfers::analyze(&[&host], TransfersOptions { gap_threshold_ps: ns(1000) });
    let summary = only_host(&result);
    assert_eq!((summary.source, summary.steps), ("xspace", 0));

    let find = |kind: FindingKind| result.findings.iter().find(|f| f.kind == kind).expect("finding");
    let pageable = find(FindingKind::PageableCopy);
    assert_eq!((pageable.time_lost_ps, pageable.bytes), (ns(200), 4096));
    assert_eq!(pageable.location.op.as_deref(), Some("Upload"));
    assert_eq!(pageable.location.stack, vec!["$train.py:10 train_step".to_string()]);
    let sync = find(FindingKind::SyncCall);
    assert_eq!((sync.what.as_str(), sync.time_lost_ps), ("cuStreamSynchronize", ns(500)));
    let implicit = find(FindingKind::ImplicitSync);
    assert_eq!((implicit.location.op.as_deref(), implicit.time_lost_ps), (Some("ReadLoss"), ns(600)));
    assert!(result.findings.iter().all(|f| f.kind != FindingKind::SyncCopy), "the D2H copy counts once");

    // Idle from 700 ns to 5020 ns; the launching thread spent most of it in Preprocess.
    let gaps = &summary.gaps[0];
    assert_eq!((gaps.count, gaps.total_ps), (2, ns(4320) + ns(1010)));
    let longest = &gaps.top[0];
    assert_eq!((longest.cause, longest.activity.as_str()), (GapCause::CpuOp, "Preprocess"));
    assert_eq!(longest.next_op, "gemm");
    let pinned = summary.copy_bandwidth.iter().find(|c| c.kind == "DtoH pinned").expect("DtoH pinned");
    assert_eq!(pinned.peak_gbps, Some(63.0), "H100 SXM on PCIe Gen5");
}
