//! How Holistic Trace Analysis reads a Kineto trace, shared by the analyses that
//! reproduce HTA (`gpu`, `trace_diff`): which events it keeps (by `cat` and `ph`),
//! which `cuda_sync` names count as GPU ops, how it reads stream numbers, and its
//! times — pandas keeps `ts` as `float64` when any timestamp has a fraction, and HTA
//! then rounds each event's start up and end down to whole microseconds, in floating
//! point.

use mlprof_model::names::chrome;
use mlprof_model::{Host, Plane, StatStore, StatValue};

use crate::xstats::{as_int, as_str};

/// `cuda_sync` names HTA's GPU-kernel filter accepts whatever their stream and
/// correlation.
pub(crate) const SYNC_OPS_ON_GPU: [&str; 2] = ["Event Sync", "Context Sync"];

/// Per event metadata of a Chrome-trace `plane`: `(cat, ph)` for events with a
/// category other than `Trace` (`ph` is `None` for complete `X` events, whose `ph`
/// the model does not store), `None` for events HTA drops.
pub(crate) fn kept_categories(plane: &Plane) -> Vec<Option<(&str, Option<&str>)>> {
    let cat_key = plane.find_stat_key(chrome::CAT_STAT);
    let ph_key = plane.find_stat_key(chrome::PH_STAT);
    plane
        .event_metadata
        .iter()
        .map(|metadata| {
            let text_of = |key: Option<u32>| {
                let value = plane.metadata_stat(metadata, key?)?;
                as_str(plane, &plane.metadata_stats, value)
            };
            let cat = text_of(cat_key)?;
            (cat != chrome::CAT_TRACE).then(|| (cat, text_of(ph_key)))
        })
        .collect()
}

pub(crate) use mlprof_model::time::PS_PER_US;

/// Whether HTA's `ts` column is floating point: some event (or metadata record) starts
/// at a fraction of a microsecond, or a metadata record has no `ts` (a NaN).
pub(crate) fn needs_rounding(host: &Host) -> bool {
    let fractional = host.planes.iter().flat_map(|p| &p.lines).any(|line| {
        let base = line.start_ps();
        line.events.offset_ps.iter().any(|offset| base.saturating_add(offset).rem_euclid(PS_PER_US) != 0)
    });
    fractional
        || host
            .chrome
            .as_ref()
            .is_some_and(|c| c.metadata_events.iter().any(|m| m.ts_ps.is_none_or(|ts| ts.rem_euclid(PS_PER_US) != 0)))
}

/// HTA's `round_down_time_stamps` on one event, in HTA's floating point: `end = ts +
/// dur`, `ts = ceil(ts)`, `end = floor(end)`, `dur = end - ts`, with `ts` the absolute
/// microseconds as Python reads them from the JSON text. Returns `(ts_ps, dur_ps)`
/// relative to `origin_us`.
pub(crate) fn round_to_us(origin_us: i64, start_ps: i64, dur_ps: i64) -> (i64, i64) {
    let ts = absolute_micros(origin_us, start_ps);
    let dur = decimal_micros(dur_ps.div_euclid(PS_PER_US), dur_ps.rem_euclid(PS_PER_US));
    let start_us = ts.ceil() as i64;
    let end_us = (ts + dur).floor() as i64;
    let ts_ps = start_us.saturating_sub(origin_us).saturating_mul(PS_PER_US);
    (ts_ps, end_us.saturating_sub(start_us).saturating_mul(PS_PER_US))
}

/// The start that [`round_to_us`] gives (it does not depend on the duration). Never
/// decreases as `start_ps` grows.
pub(crate) fn round_start_to_us(origin_us: i64, start_ps: i64) -> i64 {
    let start_us = absolute_micros(origin_us, start_ps).ceil() as i64;
    start_us.saturating_sub(origin_us).saturating_mul(PS_PER_US)
}

/// Whether [`round_start_to_us`] of `start_ps` is before `limit_ps` (itself a rounded
/// start), deciding without rounding when `start_ps` is more than a microsecond or
/// two away from the limit: below 2^52 µs a `float()` is within a quarter of a
/// microsecond of the decimal value, so its ceiling is within 1.25 µs of it.
pub(crate) fn rounded_start_before(origin_us: i64, start_ps: i64, limit_ps: i64) -> bool {
    const EXACT_BELOW_US: i64 = 1 << 52;
    let absolute_us = origin_us.saturating_add(start_ps.div_euclid(PS_PER_US));
    if (0..EXACT_BELOW_US).contains(&absolute_us) {
        if start_ps <= limit_ps.saturating_sub(2 * PS_PER_US) {
            return true;
        }
        if start_ps >= limit_ps.saturating_add(2 * PS_PER_US) {
            return false;
        }
    }
    round_start_to_us(origin_us, start_ps) < limit_ps
}

/// `origin_us + start_ps` as Python's `float()` of the absolute `ts` text.
fn absolute_micros(origin_us: i64, start_ps: i64) -> f64 {
    decimal_micros(origin_us.saturating_add(start_ps.div_euclid(PS_PER_US)), start_ps.rem_euclid(PS_PER_US))
}

/// `whole + frac_ps / 10^6` as the `f64` nearest to that decimal number (what
/// Python's `float()` of the trace's text gives: round to nearest, ties to even).
/// Negative `whole`s, which Kineto never writes, are added in floating point.
fn decimal_micros(whole: i64, frac_ps: i64) -> f64 {
    const PS: u64 = PS_PER_US as u64;
    const EXACT: u64 = 1 << 53;
    if frac_ps == 0 {
        return whole as f64;
    }
    let (Ok(whole), Ok(frac)) = (u64::try_from(whole), u64::try_from(frac_ps)) else {
        return whole as f64 + frac_ps as f64 / PS_PER_US as f64;
    };
    if frac < PS && whole < EXACT {
        if let Some(picos) = whole.checked_mul(PS).and_then(|p| p.checked_add(frac)).filter(|&p| p < EXACT) {
            // Both operands exact: one correctly rounded division.
            return picos as f64 / PS_PER_US as f64;
        }
        // Epoch times: `whole` (at least 2^33 here) fixes the exponent, so the
        // fraction is rounded to the ulp `2^-shift` in integers.
        let shift = 52 - (63 - whole.leading_zeros());
        let scaled = frac << shift;
        let (mut mantissa, remainder) = ((whole << shift) + scaled / PS, scaled % PS);
        if 2 * remainder > PS || (2 * remainder == PS && mantissa % 2 == 1) {
            mantissa += 1;
        }
        return mantissa as f64 / (1u64 << shift) as f64;
    }
    nearest_f64_of_ratio(u128::from(whole) * u128::from(PS) + u128::from(frac), u128::from(PS))
}

/// The `f64` nearest to `numerator / denominator` (ties to even), computed exactly in
/// integers: the quotient is scaled by a power of two into `[2^52, 2^53)`, rounded on
/// its remainder, and scaled back (exact, as the result is a normal number). Both
/// arguments are positive and below 2^96.
fn nearest_f64_of_ratio(numerator: u128, denominator: u128) -> f64 {
    const LOW: u128 = 1 << 52;
    let bits = |x: u128| 128 - x.leading_zeros() as i32;
    // numerator / denominator lies in [2^(b - 1), 2^(b + 1)) for b = the bit-length
    // difference, so this first scale is off by at most one.
    let mut shift = 53 - (bits(numerator) - bits(denominator));
    let scaled = |shift: i32| {
        if shift >= 0 {
            let scaled_numerator = numerator << shift;
            (scaled_numerator / denominator, scaled_numerator % denominator, denominator)
        } else {
            let scaled_denominator = denominator << -shift;
            (numerator / scaled_denominator, numerator % scaled_denominator, scaled_denominator)
        }
    };
    let (mut mantissa, remainder, divisor) = loop {
        let (quotient, remainder, divisor) = scaled(shift);
        if quotient >= 2 * LOW {
            shift -= 1;
        } else if quotient < LOW {
            shift += 1;
        } else {
            break (quotient, remainder, divisor);
        }
    };
    if 2 * remainder > divisor || (2 * remainder == divisor && mantissa % 2 == 1) {
        mantissa += 1;
    }
    mantissa as f64 * 2f64.powi(-shift)
}

/// HTA's `normalize_gpu_stream_numbers`: Python's `int()` of the value, -1 when that
/// fails.
pub(crate) fn stream_number(plane: &Plane, store: &StatStore, value: StatValue) -> i64 {
    match value {
        StatValue::Int(_) | StatValue::Uint(_) => as_int(value).unwrap_or(-1),
        StatValue::Double(v) if v.is_finite() => v.trunc() as i64,
        _ => as_str(plane, store, value).and_then(|text| text.trim().parse().ok()).unwrap_or(-1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python's (and Rust's) correctly rounded parse of the decimal text.
    fn parsed(whole: i64, frac_ps: i64) -> f64 {
        format!("{whole}.{frac_ps:06}").parse().expect("a decimal")
    }

    #[test]
    fn rounded_starts_compare_like_rounding_them() {
        let origin = 1_712_195_495_406_752;
        let limit = round_start_to_us(origin, 7_000_400_000);
        let mut previous = i64::MIN;
        for start in (limit - 5 * PS_PER_US..limit + 5 * PS_PER_US).step_by(12_345) {
            let rounded = round_start_to_us(origin, start);
            assert!(rounded >= previous, "rounding decreased at {start}");
            previous = rounded;
            assert_eq!(rounded_start_before(origin, start, limit), rounded < limit, "{start}");
        }
        assert_eq!(round_to_us(origin, 7_000_400_000, 3_000_000).0, round_start_to_us(origin, 7_000_400_000));
    }

    #[test]
    fn decimal_micros_rounds_like_parsing_the_text() {
        // Epoch microseconds (ulp 0.25), small durations, and a pseudo-random sweep.
        let mut cases = vec![
            (1_712_195_495_519_695, 800_000),
            (1_712_195_495_519_695, 125_000),
            (1_712_195_495_519_695, 375_000),
            (1_712_195_495_519_695, 999_999),
            (1_712_195_495_519_695, 1),
            (0, 1),
            (0, 500_000),
            (63, 813_000),
            (9_007_199_254_740_991, 500_000),
            (9_007_199_254_740_993, 500_000),
            (i64::MAX, 999_999),
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let magnitude = (state >> 58) as u32; // 0..63
            let whole = ((state >> 8) as i64).rem_euclid(1i64 << magnitude.min(62));
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            cases.push((whole, ((state >> 20) % 1_000_000) as i64));
        }
        for (whole, frac) in cases {
            let expected = if frac == 0 { whole as f64 } else { parsed(whole, frac) };
            assert_eq!(decimal_micros(whole, frac).to_bits(), expected.to_bits(), "{whole}.{frac:06}");
        }
    }
}
