//! Numbers for people: the one set of rules by which every mlprof text output writes
//! durations, sizes, rates, counts and percentages in sentences and summaries. The UI
//! follows the same rules (`crates/web/web/lib/format.js`); both are checked against
//! the cases in `human_cases.json`, so the terminal and the page never disagree.
//!
//! The rules:
//! - **durations** take the largest of s, ms, µs, ns and ps that keeps the value at
//!   least 1, with three significant digits and no trailing zeros (`12.3 ms`,
//!   `615 ms`, `1.5 s`, `0` for none); a value that rounds up to 1000 moves to the next
//!   unit (`999.7 µs` reads `1 ms`);
//! - **sizes** are binary (B, KiB, MiB, GiB, TiB, PiB), with three significant digits
//!   as durations (`512 B`, `4.6 MiB`, `0.98 MiB` for 1000 KiB);
//! - **rates** take SI prefixes (k, M, G, T, P) on their unit (`33 GB/s`,
//!   `1.24 TFLOP/s`);
//! - **counts** are whole when they are (`8`, not `8.0`), else one decimal, with
//!   thousands separated by commas (`1,234,567`);
//! - **percentages** have one decimal (`27.4%`);
//! - nothing reads `-0`; a value that is not a number reads `—`.
//!
//! Table columns with a fixed unit (XProf's `(us)` columns, csv and json) are not
//! written through here: those keep full precision for machines.

/// What a value that is not a finite number reads as.
pub const MISSING: &str = "—";

/// Duration units, largest first, with their size in picoseconds.
const DURATION_UNITS: [(&str, f64); 5] = [("s", 1e12), ("ms", 1e9), ("µs", 1e6), ("ns", 1e3), ("ps", 1.0)];

/// A duration of `ps` picoseconds: `12.3 ms`, `789 ns`, `0`.
pub fn duration(ps: i64) -> String {
    duration_f64(ps as f64)
}

/// [`duration`] of a duration in microseconds.
pub fn duration_us(us: f64) -> String {
    duration_f64(us * 1e6)
}

/// [`duration`] of a duration in milliseconds.
pub fn duration_ms(ms: f64) -> String {
    duration_f64(ms * 1e9)
}

/// A duration in (fractional) picoseconds.
fn duration_f64(ps: f64) -> String {
    if !ps.is_finite() {
        return MISSING.into();
    }
    if ps.abs() < 0.5 {
        return "0".into();
    }
    let magnitude = ps.abs();
    let mut index = DURATION_UNITS.iter().position(|&(_, size)| magnitude >= size).unwrap_or(DURATION_UNITS.len() - 1);
    // A value that rounds to 1000 of its unit is 1 of the next larger one.
    if index > 0 && round_significant(magnitude / DURATION_UNITS[index].1) >= 1000.0 {
        index -= 1;
    }
    let (unit, size) = DURATION_UNITS[index];
    format!("{} {unit}", significant(ps / size))
}

/// Binary size units, smallest first.
const BYTE_UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];

/// A size of `bytes` bytes: `512 B`, `4.6 MiB`, `1.25 GiB`.
pub fn bytes(bytes: f64) -> String {
    scaled(bytes, 1024.0, &BYTE_UNITS, "")
}

/// SI prefixes, smallest first.
const SI_PREFIXES: [&str; 6] = ["", "k", "M", "G", "T", "P"];

/// A rate of `per_second` `unit`s per second, with an SI prefix: `rate(3.3e10, "B")` is
/// `33 GB/s`, `rate(1.24e12, "FLOP")` is `1.24 TFLOP/s`.
pub fn rate(per_second: f64, unit: &str) -> String {
    scaled(per_second, 1000.0, &SI_PREFIXES, unit) + "/s"
}

/// `value` in the largest of `prefixes` (each `step` times the one before) that keeps it
/// under 1000 when shown, followed by `unit`.
fn scaled(value: f64, step: f64, prefixes: &[&str], unit: &str) -> String {
    if !value.is_finite() {
        return MISSING.into();
    }
    let mut scaled = value;
    let mut index = 0;
    while index + 1 < prefixes.len() && round_significant(scaled.abs()) >= 1000.0 {
        scaled /= step;
        index += 1;
    }
    format!("{} {}{unit}", significant(scaled), prefixes[index])
}

/// A count or an average of counts: `8`, `7.5`, `0.3`, `1,234,567`.
pub fn count(value: f64) -> String {
    if !value.is_finite() {
        return MISSING.into();
    }
    let rounded = (value * 10.0).round() / 10.0;
    let text = if rounded.fract() == 0.0 { format!("{rounded:.0}") } else { format!("{rounded:.1}") };
    unsigned_zero(group_thousands(&text))
}

/// A whole number of things with its noun: `1 step`, `0 steps`, `1,234 steps`.
pub fn counted(n: usize, singular: &str, plural: &str) -> String {
    format!("{} {}", group_thousands(&n.to_string()), if n == 1 { singular } else { plural })
}

/// A percentage with one decimal: `27.4%`.
pub fn percent(percent: f64) -> String {
    if !percent.is_finite() {
        return MISSING.into();
    }
    format!("{}%", unsigned_zero(group_thousands(&format!("{percent:.1}"))))
}

/// `value` rounded to three significant digits (two decimals below 10, one below 100,
/// none from 100 on), as a number.
fn round_significant(value: f64) -> f64 {
    let decimals = decimals_for(value);
    let factor = 10f64.powi(decimals as i32);
    (value * factor).round() / factor
}

/// The decimals [`significant`] shows for `value`.
fn decimals_for(value: f64) -> usize {
    let magnitude = value.abs();
    if magnitude >= 100.0 {
        0
    } else if magnitude >= 10.0 {
        1
    } else {
        2
    }
}

/// `value` with three significant digits (more left of the point when it is ≥ 1000),
/// trailing zeros removed, thousands grouped: `12.3`, `1.5`, `615`, `1,234`.
fn significant(value: f64) -> String {
    let mut text = format!("{value:.*}", decimals_for(value));
    if text.contains('.') {
        while text.ends_with('0') {
            text.pop();
        }
        if text.ends_with('.') {
            text.pop();
        }
    }
    unsigned_zero(group_thousands(&text))
}

/// `text` (a decimal number) with commas between groups of three integer digits.
fn group_thousands(text: &str) -> String {
    let (sign, unsigned) = text.strip_prefix('-').map_or(("", text), |rest| ("-", rest));
    let (integer, fraction) = unsigned.split_once('.').map_or((unsigned, None), |(i, f)| (i, Some(f)));
    let mut grouped = String::with_capacity(text.len() + integer.len() / 3);
    grouped.push_str(sign);
    for (i, digit) in integer.chars().enumerate() {
        if i > 0 && (integer.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if let Some(fraction) = fraction {
        grouped.push('.');
        grouped.push_str(fraction);
    }
    grouped
}

/// `text` without the sign of a value that rounded to zero (`-0` → `0`, `-0.0` → `0.0`).
fn unsigned_zero(text: String) -> String {
    match text.strip_prefix('-') {
        Some(rest) if rest.chars().all(|c| c == '0' || c == '.') => rest.to_string(),
        _ => text,
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn counted_things_take_their_noun_in_the_singular_for_one() {
        assert_eq!(counted(1, "step", "steps"), "1 step");
        assert_eq!(counted(0, "step", "steps"), "0 steps");
        assert_eq!(counted(1234, "step group", "step groups"), "1,234 step groups");
    }

    use super::*;

    /// The cases the UI's `lib/format.js` is checked against too.
    const CASES: &str = include_str!("human_cases.json");

    #[test]
    fn every_shared_case_reads_as_written() {
        let cases: serde_json::Value = serde_json::from_str(CASES).expect("human_cases.json is JSON");
        let mut checked = 0;
        for (function, rows) in cases.as_object().expect("an object of functions") {
            if function.starts_with("//") {
                continue;
            }
            for row in rows.as_array().expect("rows") {
                let row = row.as_array().expect("a row");
                let value = row[0].as_f64().expect("a number");
                let expected = row[row.len() - 1].as_str().expect("the text");
                let actual = match function.as_str() {
                    "duration_ps" => duration_f64(value),
                    "bytes" => bytes(value),
                    "rate" => rate(value, row[1].as_str().expect("a unit")),
                    "count" => count(value),
                    "percent" => percent(value),
                    other => panic!("human_cases.json names {other}, which mlprof does not have"),
                };
                assert_eq!(actual, expected, "{function}({row:?})");
                checked += 1;
            }
        }
        assert!(checked > 40, "only {checked} cases");
    }

    #[test]
    fn integer_durations_match_fractional_ones() {
        assert_eq!(duration(12_345_678), "12.3 µs");
        assert_eq!(duration_us(12.345678), "12.3 µs");
        assert_eq!(duration_ms(615.2), "615 ms");
        assert_eq!(duration(i64::MIN), "-9,223,372 s");
    }

    #[test]
    fn values_that_are_not_numbers_read_as_missing() {
        assert_eq!(duration_us(f64::NAN), MISSING);
        assert_eq!(bytes(f64::INFINITY), MISSING);
        assert_eq!(count(f64::NAN), MISSING);
        assert_eq!(percent(f64::NAN), MISSING);
    }
}
