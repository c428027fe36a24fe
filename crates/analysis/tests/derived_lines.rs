//! The derived GPU lines of the XLA GPU fixture against XProf 2.24.2's trace viewer
//! output on it (`xprof_out/trace_viewer.json.gz`): the same tracks, and per track the
//! same events — name, start and duration — in the same order, to the picosecond. The
//! CPU-only fixtures have no GPU plane, so nothing is derived for them. Also the real JAX
//! GPU trace (`jax_gpu_h200`, H200) against XProf's trace viewer output on it, and the
//! two profiles `mlprof run`'s CUPTI injection wrote on an H200: their lines, and the
//! host-to-device flows XProf draws from `correlation_id`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mlprof_analysis::derived_lines::{self, DerivedPlane};
use mlprof_analysis::facts::{step_groups, step_groups_as_xprof};
use mlprof_formats::discover::load;
use mlprof_model::{Host, StatValue};
use serde_json::Value;

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace").join(case)
}

fn host_of(case: &str) -> Host {
    let mut sessions = load(&case_dir(case).join("logdir")).expect("fixture loads");
    sessions.pop().expect("a session").hosts.into_iter().next().expect("a host")
}

/// One trace event: name, start and duration in picoseconds.
type Shown = (String, i64, i64);

/// XProf's complete events of `pid`, per thread name, sorted by start, then longest
/// first, then name.
fn xprof_tracks(pid: u64) -> BTreeMap<String, Vec<Shown>> {
    xprof_tracks_of("jax_gpu_xla", pid)
}

/// [`xprof_tracks`] of `case`.
fn xprof_tracks_of(case: &str, pid: u64) -> BTreeMap<String, Vec<Shown>> {
    let path = case_dir(case).join("xprof_out/trace_viewer.json.gz");
    let bytes = std::fs::read(&path).expect("reference");
    let text = mlprof_formats::input::gunzip(&bytes, "trace_viewer.json.gz").expect("gzip");
    let trace: Value = serde_json::from_slice(&text).expect("JSON");
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let of_pid = |e: &&Value| e["pid"].as_u64() == Some(pid);
    let thread_names: BTreeMap<u64, String> = events
        .iter()
        .filter(of_pid)
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| (e["tid"].as_u64().expect("tid"), e["args"]["name"].as_str().expect("name").to_string()))
        .collect();
    let ps = |us: &Value| (us.as_f64().expect("µs") * 1e6).round() as i64;
    let mut tracks: BTreeMap<String, Vec<Shown>> = BTreeMap::new();
    for e in events.iter().filter(of_pid).filter(|e| e["ph"] == "X") {
        let thread = &thread_names[&e["tid"].as_u64().expect("tid")];
        let name = e["name"].as_str().expect("name").to_string();
        tracks.entry(thread.clone()).or_default().push((name, ps(&e["ts"]), ps(&e["dur"])));
    }
    for events in tracks.values_mut() {
        sort(events);
    }
    tracks
}

fn sort(events: &mut [Shown]) {
    events.sort_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2)).then(a.0.cmp(&b.0)));
}

/// mlprof's derived tracks, per name, in the order of [`xprof_tracks`], moved to
/// XProf's time origin by `offset_ps`.
fn mlprof_tracks(plane: &DerivedPlane, offset_ps: i64) -> BTreeMap<String, Vec<Shown>> {
    plane
        .tracks
        .iter()
        .map(|track| {
            let mut events: Vec<Shown> = track
                .events
                .iter()
                .map(|e| (track.name_of(e).to_string(), e.begin_ps + offset_ps, e.duration_ps))
                .collect();
            sort(&mut events);
            (track.name.clone(), events)
        })
        .collect()
}

/// XProf's time origin minus the model's: from the kernels of the stream, which both
/// show as they are.
fn time_offset(host: &Host, xprof: &BTreeMap<String, Vec<Shown>>) -> i64 {
    let plane = host.plane("/device:GPU:0").expect("GPU plane");
    let stream = plane.lines.iter().find(|l| l.name == "Stream #7(Kernel)").expect("stream");
    let mut starts: Vec<i64> = stream.iter().map(|e| e.start_ps()).collect();
    starts.sort_unstable();
    let theirs: Vec<i64> = xprof["Stream #7(Kernel)"].iter().map(|e| e.1).collect();
    assert_eq!(starts.len(), theirs.len());
    let offset = theirs[0] - starts[0];
    assert!(starts.iter().zip(&theirs).all(|(ours, theirs)| (ours + offset - theirs).abs() <= 1_000));
    offset
}

#[test]
fn the_xla_gpu_fixture_derives_the_tracks_xprof_shows() {
    let host = host_of("jax_gpu_xla");
    let xprof = xprof_tracks(1);
    let offset = time_offset(&host, &xprof);
    let derived = derived_lines::derive(&host, &step_groups_as_xprof(&host));
    assert_eq!(derived.len(), 1);
    assert_eq!(host.planes[derived[0].plane].name, "/device:GPU:0");
    let order: Vec<&str> = derived[0].tracks.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        order,
        [
            "Steps",
            "Framework Name Scope - from #7",
            "Framework Ops - from #7",
            "XLA Modules - from #7",
            "XLA Ops - from #7"
        ]
    );
    let ours = mlprof_tracks(&derived[0], offset);
    let counts: Vec<(&str, usize)> = ours.iter().map(|(name, events)| (name.as_str(), events.len())).collect();
    assert_eq!(
        counts,
        [
            ("Framework Name Scope - from #7", 172),
            ("Framework Ops - from #7", 330),
            ("Steps", 10),
            ("XLA Modules - from #7", 30),
            ("XLA Ops - from #7", 370)
        ]
    );
    // Equal to the picosecond (XProf writes times to 0.1 ns, the kernels' are whole ns).
    for (name, events) in &ours {
        assert_eq!(events, &xprof[name], "{name}");
    }
    // mlprof's own grouping (with its step_num fallback) finds the same steps here.
    assert_eq!(derived_lines::derive(&host, &step_groups(&host)), derived);
}

/// The real JAX GPU trace (H200): XLA runs each `train_step` as one CUDA graph
/// (command buffer), so each step derives one XLA module and one XLA op
/// (`command_buffer_1`) and no framework op. mlprof's tracks equal XProf's to the
/// picosecond; XProf shows two more that mlprof does not derive: "Command Buffers - from
/// #14" (one `Command Buffer 24` per step, from the `cuda_graph_id` stat) and "Launch
/// Stats" (per step, the host's kernel launches: count, mean and max launch time).
#[test]
fn the_real_jax_gpu_trace_derives_the_tracks_xprof_shows() {
    let host = host_of("jax_gpu_h200");
    let xprof = xprof_tracks_of("jax_gpu_h200", 1);
    let derived = derived_lines::derive(&host, &step_groups_as_xprof(&host));
    assert_eq!(derived.len(), 1);
    assert_eq!(host.planes[derived[0].plane].name, "/device:GPU:0");
    // The time origins agree here: both start at the profile start.
    let ours = mlprof_tracks(&derived[0], 0);
    let counts: Vec<(&str, usize)> = ours.iter().map(|(name, events)| (name.as_str(), events.len())).collect();
    assert_eq!(counts, [("Steps", 10), ("XLA Modules - from #14", 10), ("XLA Ops - from #14", 10)]);
    for (name, events) in &ours {
        assert_eq!(events, &xprof[name], "{name}");
    }
    let derived_by_xprof = |name: &&String| !name.starts_with("Stream #") && !ours.contains_key(*name);
    let only_xprof: Vec<&str> = xprof.keys().filter(derived_by_xprof).map(String::as_str).collect();
    assert_eq!(only_xprof, ["Command Buffers - from #14", "Launch Stats"]);
    assert_eq!(derived_lines::derive(&host, &step_groups(&host)), derived);
}

#[test]
fn cpu_only_fixtures_derive_nothing() {
    for case in ["tf_keras2_input_bound", "tf_keras_pipelined", "tf_custom_loop", "jax_profile"] {
        let host = host_of(case);
        assert!(derived_lines::planes_to_derive(&host).is_empty(), "{case}");
        assert!(derived_lines::derive(&host, &step_groups(&host)).is_empty(), "{case}");
    }
}

/// Profiles written by `mlprof run`'s CUPTI injection (H200): a plain CUDA program and
/// a JAX loop recorded with `--device-tracer cupti`. Without step markers or `hlo_op`
/// stats there is nothing to derive, and XProf's trace viewer draws no derived track
/// either: only the streams, each event as the model reads it (name, start, duration, to
/// the picosecond, the same time origin); the host threads likewise.
#[test]
fn cupti_injection_profiles_derive_nothing_and_xprof_draws_their_lines_as_read() {
    for (case, device_lines, host_lines) in [("cuda_app_h200_inject", 3, 1), ("jax_h200_inject", 4, 16)] {
        let host = host_of(case);
        assert!(derived_lines::derive(&host, &step_groups_as_xprof(&host)).is_empty(), "{case}");
        assert!(derived_lines::derive(&host, &step_groups(&host)).is_empty(), "{case}");
        for (pid, plane_name, lines) in [(1, "/device:GPU:0", device_lines), (701, "/host:CPU", host_lines)] {
            let plane = host.plane(plane_name).expect("plane");
            let mut xprof = xprof_tracks_of(case, pid);
            assert_eq!(plane.lines.len(), lines, "{case} {plane_name}");
            for line in &plane.lines {
                // XProf draws events without duration as instants, which `xprof_tracks_of` leaves out.
                let mut ours: Vec<Shown> = line
                    .iter()
                    .filter(|e| e.duration_ps() > 0)
                    .map(|e| (plane.metadata_of(&e).expect("metadata").name.clone(), e.start_ps(), e.duration_ps()))
                    .collect();
                sort(&mut ours);
                assert_eq!(xprof.remove(&line.name), Some(ours), "{case} {}", line.name);
            }
            assert!(xprof.is_empty(), "{case}: XProf also draws {:?}", xprof.keys().collect::<Vec<_>>());
        }
    }
}

/// The events of `case` that XProf's trace viewer joins by a flow (its `flow` arg: the
/// flow id above two direction bits), each as (pid, name, start in ps), per flow.
fn xprof_flows(case: &str) -> Vec<Vec<(u64, String, i64)>> {
    let path = case_dir(case).join("xprof_out/trace_viewer.json.gz");
    let bytes = std::fs::read(&path).expect("reference");
    let text = mlprof_formats::input::gunzip(&bytes, "trace_viewer.json.gz").expect("gzip");
    let trace: Value = serde_json::from_slice(&text).expect("JSON");
    let mut flows: BTreeMap<u64, Vec<(u64, String, i64)>> = BTreeMap::new();
    for e in trace["traceEvents"].as_array().expect("traceEvents") {
        let Some(flow) = e["args"]["flow"].as_str() else { continue };
        let id = flow.parse::<u64>().expect("flow") >> 2;
        let at = (e["ts"].as_f64().expect("µs") * 1e6).round() as i64;
        let pid = e["pid"].as_u64().expect("pid");
        flows.entry(id).or_default().push((pid, e["name"].as_str().expect("name").to_string(), at));
    }
    let mut flows: Vec<_> = flows
        .into_values()
        .map(|mut f| {
            f.sort();
            f
        })
        .collect();
    flows.sort();
    flows
}

/// Does XProf's trace viewer link the injection's host API calls to the GPU work they
/// started? Yes, by `correlation_id`: XProf's flows are exactly the model's events
/// grouped by that stat, host and device together. But only calls the injection
/// recorded have a host end: by default it records the CUDA runtime API, not the driver
/// API (`MLPROF_INJECT_DRIVER_API=1`). `cuda_app` launches its 4000 kernels with the
/// driver's `cuLaunchKernel`, so no kernel has a host partner; its 40 `cudaMemcpyAsync`,
/// 40 `cudaMemsetAsync` and 1 `cudaMemcpy` are linked to their copy or memset. In the
/// JAX loop XLA launches its own kernels and its 63 CUDA graphs (37 device events each,
/// under one correlation id) through the driver API too; only 104 `cudaLaunchKernelExC`
/// (cuBLAS) and 62 `cudaMemsetAsync` reach a device event. 147 more
/// `cudaLaunchKernelExC` and 25 `cudaMemsetAsync`, issued while the first graphs run,
/// have none (most likely stream-captured into a graph, not run then).
#[test]
fn xprof_links_the_injections_api_calls_to_gpu_work_by_correlation_id() {
    for (case, linked) in [
        ("cuda_app_h200_inject", vec![("cudaMemcpy", 1), ("cudaMemcpyAsync", 40), ("cudaMemsetAsync", 40)]),
        ("jax_h200_inject", vec![("cudaLaunchKernelExC", 104), ("cudaMemsetAsync", 62)]),
    ] {
        let host = host_of(case);
        let mut ours: BTreeMap<u64, Vec<(u64, String, i64)>> = BTreeMap::new();
        for (pid, plane_name) in [(1, "/device:GPU:0"), (701, "/host:CPU")] {
            let plane = host.plane(plane_name).expect("plane");
            let key = plane.find_stat_key("correlation_id").expect("correlation_id");
            for line in &plane.lines {
                for e in line.iter() {
                    let id = match e.own_stat(key) {
                        Some(StatValue::Uint(id)) => id,
                        Some(StatValue::Int(id)) => id as u64,
                        _ => continue,
                    };
                    let name = plane.metadata_of(&e).expect("metadata").name.clone();
                    ours.entry(id).or_default().push((pid, name, e.start_ps()));
                }
            }
        }
        let mut ours: Vec<_> = ours
            .into_values()
            .map(|mut f| {
                f.sort();
                f
            })
            .collect();
        ours.sort();
        let theirs = xprof_flows(case);
        assert_eq!(ours.len(), theirs.len(), "{case}");
        assert!(ours == theirs, "{case}: XProf's flows are not the correlation ids");
        // Host calls joined to device work, by call name.
        let mut calls: BTreeMap<&str, usize> = BTreeMap::new();
        for flow in &theirs {
            if flow.iter().any(|e| e.0 == 1) {
                for e in flow.iter().filter(|e| e.0 == 701) {
                    *calls.entry(e.1.as_str()).or_default() += 1;
                }
            }
        }
        assert_eq!(calls.into_iter().collect::<Vec<_>>(), linked, "{case}");
    }
}
