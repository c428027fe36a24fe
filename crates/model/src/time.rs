//! Time units and conversions. Internally every time is an `i64` count of picoseconds.

/// Picoseconds in one nanosecond.
pub const PS_PER_NS: i64 = 1_000;
/// Picoseconds in one microsecond.
pub const PS_PER_US: i64 = 1_000_000;
/// Picoseconds in one millisecond.
pub const PS_PER_MS: i64 = 1_000_000_000;
/// [`PS_PER_MS`] as a float, to turn picoseconds into fractional milliseconds.
pub const PS_PER_MS_F64: f64 = PS_PER_MS as f64;

/// Writes `ps` picoseconds as a decimal number of microseconds with up to six fractional
/// digits and no trailing zeros (`1500000` → `1.5`, `-1` → `-0.000001`). Exact: no float
/// rounding is involved, so a reader that parses decimals exactly gets `ps` back.
pub fn write_ps_as_us(out: &mut String, ps: i64) {
    use std::fmt::Write;
    let negative = ps < 0;
    let magnitude = ps.unsigned_abs();
    let whole = magnitude / PS_PER_US as u64;
    let frac = magnitude % PS_PER_US as u64;
    if negative {
        out.push('-');
    }
    let _ = write!(out, "{whole}");
    if frac != 0 {
        let mut digits = format!("{frac:06}");
        while digits.ends_with('0') {
            digits.pop();
        }
        out.push('.');
        out.push_str(&digits);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(ps: i64) -> String {
        let mut s = String::new();
        write_ps_as_us(&mut s, ps);
        s
    }

    #[test]
    fn microsecond_text_is_exact() {
        assert_eq!(us(0), "0");
        assert_eq!(us(1_500_000), "1.5");
        assert_eq!(us(1), "0.000001");
        assert_eq!(us(-1), "-0.000001");
        assert_eq!(us(1_495_519_695_800_000), "1495519695.8");
        assert_eq!(us(i64::MIN), "-9223372036854.775808");
    }
}
