//! The memory profile against XProf 2.24.2's own output on the same real profiles
//! (`tests/data/xspace/<case>/xprof_out/memory_profile.json`).
//!
//! Everything that does not depend on step ids is compared in
//! `matches_xprof_except_step_ids`; the step-dependent parts (every `stepId`, and the
//! breakdown at the peak, which replays only the peak step) in
//! `matches_xprof_step_ids_and_breakdown`, which needs the grouping pass.

use std::path::{Path, PathBuf};

use mlprof_analysis::facts::step_groups_as_xprof;
use mlprof_analysis::memory_profile::{MemoryProfile, analyze, reads_groups};
use mlprof_formats::discover::load;
use mlprof_model::Host;
use serde_json::Value;

const CASES: &[&str] = &["tf_keras2_input_bound", "tf_keras_pipelined", "tf_custom_loop", "jax_profile", "jax_gpu_xla"];

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace").join(case)
}

fn host(case: &str) -> Host {
    let sessions = load(&case_dir(case).join("logdir")).expect("fixture loads");
    let session = sessions.into_iter().next().expect("one session");
    session.hosts.into_iter().next().expect("one host")
}

fn profile(case: &str) -> (MemoryProfile, Value, Value) {
    let host = host(case);
    let groups = step_groups_as_xprof(&host);
    let profile = analyze(&host, &|| &groups);
    let ours = profile.to_xprof_json();
    let path = case_dir(case).join("xprof_out/memory_profile.json");
    let text = std::fs::read_to_string(&path).expect("XProf output present");
    let theirs: Value = serde_json::from_str(&text).expect("XProf output is JSON");
    (profile, ours, theirs)
}

/// Removes the step-dependent parts of a memory profile JSON: every `stepId`, and
/// each allocator's breakdown (`memoryProfileSnapshots`, `activeAllocations`,
/// `specialAllocations`).
fn without_steps(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| {
                    !matches!(
                        key.as_str(),
                        "stepId" | "memoryProfileSnapshots" | "activeAllocations" | "specialAllocations"
                    )
                })
                .map(|(key, v)| (key.clone(), without_steps(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_steps).collect()),
        other => other.clone(),
    }
}

/// Semantic equality: exact for strings, integers and structure; floats within 1e-9
/// relative. Returns the path of the first difference.
fn diff(ours: &Value, theirs: &Value, path: &str) -> Option<String> {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|key| match (a.get(key), b.get(key)) {
                (Some(x), Some(y)) => diff(x, y, &format!("{path}.{key}")),
                (x, y) => Some(format!("{path}.{key}: ours {x:?}, XProf {y:?}")),
            })
        }
        (Value::Array(a), Value::Array(b)) => {
            if a.len() != b.len() {
                return Some(format!("{path}: ours {} items, XProf {}", a.len(), b.len()));
            }
            a.iter().zip(b).enumerate().find_map(|(i, (x, y))| diff(x, y, &format!("{path}[{i}]")))
        }
        (Value::Number(a), Value::Number(b)) if a.is_f64() || b.is_f64() => {
            let (x, y) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
            let close = x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs());
            (!close).then(|| format!("{path}: ours {x}, XProf {y}"))
        }
        (a, b) => (a != b).then(|| format!("{path}: ours {a}, XProf {b}")),
    }
}

/// The grouping (the costliest shared step) is asked for exactly when allocator events
/// need step ids; XProf parity with the groups is checked by the tests below.
#[test]
fn step_groups_are_read_only_for_allocator_events() {
    let mut without_allocator_events = 0;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace");
    for entry in std::fs::read_dir(&dir).expect("fixtures listed") {
        let case = entry.expect("fixture entry").file_name().to_string_lossy().into_owned();
        let host = host(&case);
        let groups = step_groups_as_xprof(&host);
        let asked = std::cell::Cell::new(false);
        let profile = analyze(&host, &|| {
            asked.set(true);
            &groups
        });
        assert_eq!(asked.get(), reads_groups(&host), "{case}");
        assert_eq!(asked.get(), !profile.allocators.is_empty(), "{case}");
        without_allocator_events += usize::from(!asked.get());
    }
    assert!(without_allocator_events > 0, "no fixture without allocator events");
}

#[test]
fn matches_xprof_except_step_ids() {
    for case in CASES {
        let (profile, ours, theirs) = profile(case);
        if let Some(difference) = diff(&without_steps(&ours), &without_steps(&theirs), case) {
            panic!("{difference}");
        }
        // The report renders and its main table has XProf's breakdown columns.
        let report = profile.report();
        let main = report.sections.iter().filter(|s| s.main).count();
        assert_eq!(main, 1, "{case}");
    }
}

#[test]
fn allocator_events_are_all_counted() {
    // The TF fixtures have 96 allocator events each side of the timeline (≤ 1000, so
    // the timeline is complete); JAX has none.
    for case in CASES {
        let (profile, _, theirs) = profile(case);
        for allocator in &profile.allocators {
            let sampled = &theirs["memoryProfilePerAllocator"][&allocator.memory_id]["sampledTimelineSnapshots"];
            let count = sampled.as_array().map_or(0, Vec::len) as u64;
            assert_eq!(allocator.total_allocations + allocator.total_deallocations, count, "{case}");
        }
        assert_eq!(profile.allocators.is_empty(), case.starts_with("jax_"), "{case}");
    }
}

/// Step ids come from the grouping pass (`step_groups`); until it assigns XProf's
/// groups, every event reads as step 0 and the breakdown replays the wrong events.
#[test]
fn matches_xprof_step_ids_and_breakdown() {
    for case in CASES {
        let (_, ours, theirs) = profile(case);
        if let Some(difference) = diff(&ours, &theirs, case) {
            panic!("{difference}");
        }
    }
}

/// Real JAX GPU profiles (H200): the allocators' `MemoryAllocation` /
/// `MemoryDeallocation` events, in the `jax.profiler` trace 600 of `GPU_0_bfc` and 40 of
/// `xla_gpu_host_bfc` (pinned host memory; JAX's step marks give the peak a step), in
/// the `mlprof capture` of an unmodified job 472 of `GPU_0_bfc` (no steps); and the H100
/// profile of many op kinds, both allocators.
const REAL_GPU_CASES: [&str; 4] = ["jax_gpu_h200", "jax_gpu_h200_capture", "jax_ops_h100", "jax_mixed_h100"];

#[test]
fn real_gpu_profiles_match_xprof_except_step_ids() {
    for case in REAL_GPU_CASES {
        let (profile, ours, theirs) = profile(case);
        if let Some(difference) = diff(&without_steps(&ours), &without_steps(&theirs), case) {
            panic!("{difference}");
        }
        let ids: Vec<&str> = profile.allocators.iter().map(|a| a.memory_id.as_str()).collect();
        let expected: &[&str] =
            if case == "jax_gpu_h200_capture" { &["GPU_0_bfc"] } else { &["GPU_0_bfc", "xla_gpu_host_bfc"] };
        assert_eq!(ids, expected, "{case}");
        for allocator in &profile.allocators {
            let sampled = &theirs["memoryProfilePerAllocator"][&allocator.memory_id]["sampledTimelineSnapshots"];
            let count = sampled.as_array().map_or(0, Vec::len) as u64;
            assert_eq!(allocator.total_allocations + allocator.total_deallocations, count, "{case}");
        }
    }
}

/// With step ids and the breakdown at the peak. In the real JAX profiles JAX's
/// allocations carry no op, region, type or shape, so equal-sized live allocations merge
/// into one breakdown row, which shows one of them (`memoryProfileSnapshots[i]`). XProf
/// picks that one by its unstable sort over hash-map order (absl::flat_hash_map keyed by
/// address), mlprof the first by time: in `jax_gpu_h200` in 4 of the 11 rows (6 × 64
/// MiB, 9 × 16 KiB, 3 × 4000 B, 2 × 4 B), in `jax_ops_h100` in 3 of 13 of `GPU_0_bfc`
/// and 1 of `xla_gpu_host_bfc`, in `jax_mixed_h100` one of each,
/// the shown allocation is another one of the same row, at another address and time.
/// Those are checked to be the same row and XProf's pick to be one of the profile's
/// allocations; everything else must be equal.
#[test]
fn real_gpu_profiles_match_xprof_step_ids_and_breakdown_but_for_which_twin_is_shown() {
    let (_, ours, theirs) = profile("jax_gpu_h200_capture");
    if let Some(difference) = diff(&ours, &theirs, "jax_gpu_h200_capture") {
        panic!("{difference}");
    }
    let cases: [(&str, &[(&str, usize)]); 3] = [
        ("jax_gpu_h200", &[("GPU_0_bfc", 0), ("GPU_0_bfc", 6), ("GPU_0_bfc", 7), ("GPU_0_bfc", 10)]),
        ("jax_ops_h100", &[("GPU_0_bfc", 3), ("GPU_0_bfc", 7), ("GPU_0_bfc", 12), ("xla_gpu_host_bfc", 3)]),
        ("jax_mixed_h100", &[("GPU_0_bfc", 5), ("xla_gpu_host_bfc", 3)]),
    ];
    for (case, expected_twins) in cases {
        let (profile, mut ours, theirs) = profile(case);
        let mut twins = Vec::new();
        for allocator in &profile.allocators {
            let replaced = show_xprofs_twins(&mut ours, &theirs, &allocator.memory_id);
            twins.extend(replaced.into_iter().map(|i| (allocator.memory_id.as_str(), i)));
        }
        assert_eq!(twins, expected_twins, "{case}");
        if let Some(difference) = diff(&ours, &theirs, case) {
            panic!("{difference}");
        }
    }
}

/// Replaces each breakdown snapshot of `allocator` in `ours` that differs from XProf's
/// by XProf's, after checking that both show the same row and that XProf's is one of
/// the profile's allocations; returns the indices replaced.
fn show_xprofs_twins(ours: &mut Value, theirs: &Value, allocator: &str) -> Vec<usize> {
    let row = |m: &Value| -> Vec<Value> {
        ["allocationBytes", "requestedBytes", "tfOpName", "regionType", "dataType", "tensorShape", "stepId"]
            .iter()
            .map(|k| m[k].clone())
            .chain([m["memoryActivity"].clone()])
            .collect()
    };
    let timeline =
        theirs["memoryProfilePerAllocator"][allocator]["sampledTimelineSnapshots"].as_array().expect("timeline");
    let want = theirs["memoryProfilePerAllocator"][allocator]["memoryProfileSnapshots"].as_array().expect("snapshots");
    let shown =
        ours["memoryProfilePerAllocator"][allocator]["memoryProfileSnapshots"].as_array_mut().expect("snapshots");
    assert_eq!(shown.len(), want.len());
    let mut twins = Vec::new();
    for (i, (snapshot, theirs)) in shown.iter_mut().zip(want).enumerate() {
        if diff(snapshot, theirs, "snapshot").is_some() {
            assert_eq!(row(&snapshot["activityMetadata"]), row(&theirs["activityMetadata"]), "snapshot {i}");
            let at = |s: &Value| (s["timeOffsetPs"].clone(), s["activityMetadata"]["address"].clone());
            assert!(timeline.iter().any(|t| at(t) == at(theirs)), "snapshot {i}: XProf's pick is an allocation");
            twins.push(i);
            *snapshot = theirs.clone();
        }
    }
    twins
}

/// Profiles written by `mlprof run`'s CUPTI injection (H200). Their `/host:CPU` has
/// CUPTI's memory records (`MemoryAlloc` with `memalloc_details`, one per `cudaMalloc` /
/// `cudaMallocHost` / `cudaHostAlloc`), not an allocator's `MemoryAllocation` /
/// `MemoryDeallocation` events, so XProf and mlprof both show no allocator.
#[test]
fn cupti_injection_profiles_have_no_allocator_as_xprof() {
    for (case, allocs) in [("cuda_app_h200_inject", 4), ("jax_h200_inject", 9)] {
        let (profile, ours, theirs) = profile(case);
        if let Some(difference) = diff(&ours, &theirs, case) {
            panic!("{difference}");
        }
        assert!(profile.allocators.is_empty(), "{case}");
        let host = host(case);
        let cpu = host.plane("/host:CPU").expect("host plane");
        let count = cpu
            .lines
            .iter()
            .flat_map(|l| l.iter())
            .filter(|e| cpu.metadata_of(e).is_some_and(|m| m.name == "MemoryAlloc"))
            .count();
        assert_eq!(count, allocs, "{case}");
    }
}
