//! `tf_data_bottleneck_analysis` against the legacy converter (tensorboard-plugin-profile
//! 2.15.1, the last release that had the tool) run on the same XSpace files:
//! `tests/data/xspace/<case>/legacy_tbpp_2.15.1/tf_data_bottleneck_analysis.json`.
//!
//! The comparison is semantic: object key order is ignored, strings (HTML tooltips and
//! suggestions included) must be equal, numbers may differ by 0.1 %.
//!
//! All four cases match. Note what the reference itself gets wrong, reproduced on
//! purpose: TensorFlow writes iterator ids at or above 2^63 as `uint64`, XProf reads
//! them with `IntValue()` as 0, so about half the iterators of a pipeline merge into
//! "iterator 0" (named after whichever was seen first). That is why `tf_custom_loop`
//! reports a `Prefetch` with 63 calls and 551 us of self time inside a 61 us call.

use std::path::{Path, PathBuf};

use mlprof_analysis::tf_data::analyze;
use mlprof_model::Host;
use serde_json::Value;

const CASES: &[&str] = &["tf_keras2_input_bound", "tf_keras_pipelined", "tf_custom_loop", "jax_profile"];

fn case_dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/xspace").join(case)
}

fn load_hosts(case: &str) -> Vec<Host> {
    let sessions = mlprof_formats::discover::load(&case_dir(case).join("logdir")).expect("fixture loads");
    sessions.into_iter().flat_map(|s| s.hosts).collect()
}

fn expected(case: &str) -> Value {
    let path = case_dir(case).join("legacy_tbpp_2.15.1/tf_data_bottleneck_analysis.json");
    let text = std::fs::read_to_string(&path).expect("reference present");
    serde_json::from_str(&text).expect("reference is JSON")
}

/// Differences between `got` and `want`, each as `path: got vs want`.
fn diff(path: &str, got: &Value, want: &Value, out: &mut Vec<String>) {
    match (got, want) {
        (Value::Object(g), Value::Object(w)) => {
            for key in g.keys().chain(w.keys().filter(|k| !g.contains_key(*k))) {
                match (g.get(key), w.get(key)) {
                    (Some(a), Some(b)) => diff(&format!("{path}.{key}"), a, b, out),
                    (a, b) => out.push(format!("{path}.{key}: {a:?} vs {b:?}")),
                }
            }
        }
        (Value::Array(g), Value::Array(w)) => {
            if g.len() != w.len() {
                out.push(format!("{path}: {} items vs {}", g.len(), w.len()));
            }
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                diff(&format!("{path}[{i}]"), a, b, out);
            }
        }
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
            if (a - b).abs() > 1e-3 * a.abs().max(b.abs()) {
                out.push(format!("{path}: {a} vs {b}"));
            }
        }
        _ if got == want => {}
        _ => out.push(format!("{path}: {got} vs {want}")),
    }
}

#[test]
fn matches_the_legacy_converter() {
    for case in CASES {
        let hosts = load_hosts(case);
        assert!(!hosts.is_empty(), "{case}: no hosts");
        let refs: Vec<&Host> = hosts.iter().collect();
        let got = analyze(&refs).to_xprof_json();
        let mut out = Vec::new();
        diff("", &got, &expected(case), &mut out);
        assert!(out.is_empty(), "{case}: {} differences:\n{}", out.len(), out[..out.len().min(30)].join("\n"));
    }
}

#[test]
fn verdicts_and_reports_are_consistent() {
    for case in CASES {
        let hosts = load_hosts(case);
        let refs: Vec<&Host> = hosts.iter().collect();
        let analysis = analyze(&refs);
        let report = analysis.report();
        assert_eq!(report.sections.iter().filter(|s| s.main).count(), 1, "{case}");
        assert_eq!(analysis.is_input_bound, *case != "jax_profile", "{case}");
        let json = serde_json::to_value(&analysis).expect("serialises");
        assert!(json["hosts"].is_array(), "{case}");
    }
}
