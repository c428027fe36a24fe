//! The JSON comparison the XProf parity tests use (the analysis crate's fixture tests
//! and the CLI's live two-host capture test, which includes this file by path).

use serde_json::Value;

/// Compares JSON values: structure and strings exactly, numbers within 0.1 % (or
/// 1e-6 absolute), objects regardless of key order; `at` names the place in panics.
pub fn assert_same(ours: &Value, theirs: &Value, at: &str) {
    match (ours, theirs) {
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap_or(f64::NAN), b.as_f64().unwrap_or(f64::NAN));
            assert!((a - b).abs() <= 1e-6 || (a - b).abs() <= 1e-3 * b.abs(), "{at}: {a} != {b}");
        }
        (Value::Object(a), Value::Object(b)) => {
            let mut keys_a: Vec<_> = a.keys().collect();
            let mut keys_b: Vec<_> = b.keys().collect();
            keys_a.sort();
            keys_b.sort();
            assert_eq!(keys_a, keys_b, "{at}: keys differ");
            for (key, value) in a {
                assert_same(value, &b[key], &format!("{at}.{key}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}: lengths differ");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_same(x, y, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(ours, theirs, "{at}"),
    }
}
