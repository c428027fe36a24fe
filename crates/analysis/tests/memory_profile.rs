//! The memory profile against XProf 2.24.2's own output on the same real profiles
//! (`tests/data/xspace/<case>/xprof_out/memory_profile.json`).
//!
//! Everything that does not depend on step ids is compared in
//! `matches_xprof_except_step_ids`; the step-dependent parts (every `stepId`, and the
//! breakdown at the peak, which replays only the peak step) in
//! `matches_xprof_step_ids_and_breakdown`, which needs the grouping pass.

use std::path::{Path, PathBuf};

use mlprof_analysis::grouping::group_host;
use mlprof_analysis::memory_profile::{MemoryProfile, analyze};
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
    let profile = analyze(&host, &group_host(&host));
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

/// Step ids come from the grouping pass (`group_host`); until it assigns XProf's
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
