//! Exact decimal microsecond times, JSON scalar classification and string unescaping.
//!
//! Chrome traces write times as decimal microseconds (`1712195495519695.8`), which an
//! `f64` cannot hold exactly; [`parse_micros`] reads the decimal text into whole
//! microseconds plus picoseconds without any floating point.

pub(crate) use mlprof_model::time::PS_PER_US;

/// A time in whole microseconds (rounded towards negative infinity) plus the remaining
/// picoseconds, `0 <= frac_ps < 1_000_000`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Micros {
    /// Whole microseconds (floor).
    pub whole: i64,
    /// Remaining picoseconds, in `0..1_000_000`.
    pub frac_ps: i64,
}

impl Micros {
    /// The value in picoseconds, `None` when it does not fit an `i64`.
    pub fn to_ps(self) -> Option<i64> {
        self.whole.checked_mul(PS_PER_US)?.checked_add(self.frac_ps)
    }
}

/// Why a time could not be read.
pub(crate) const NOT_A_NUMBER: &str = "expected a number of microseconds";
/// A time too large for `i64` microseconds.
pub(crate) const TOO_LARGE: &str = "number of microseconds too large for a 64-bit integer";

/// Parses the text of a JSON number of microseconds exactly: sign, integer digits,
/// fraction digits (digits beyond the sixth, i.e. below one picosecond, are
/// truncated) and an optional exponent (`1.5e3` is 1500 µs).
pub(crate) fn parse_micros(text: &str) -> Result<Micros, &'static str> {
    let b = text.as_bytes();
    let neg = b.first() == Some(&b'-');
    let mut i = usize::from(neg);
    let int_start = i;
    while b.get(i).is_some_and(u8::is_ascii_digit) {
        i += 1;
    }
    let int_digits = &b[int_start..i];
    if int_digits.is_empty() {
        return Err(NOT_A_NUMBER);
    }
    let mut frac_digits: &[u8] = &[];
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        frac_digits = &b[start..i];
        if frac_digits.is_empty() {
            return Err(NOT_A_NUMBER);
        }
    }
    let mut exp: i64 = 0;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        let exp_neg = match b.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let start = i;
        while let Some(d) = b.get(i).filter(|d| d.is_ascii_digit()) {
            exp = (exp * 10 + i64::from(d - b'0')).min(1_000_000);
            i += 1;
        }
        if start == i {
            return Err(NOT_A_NUMBER);
        }
        if exp_neg {
            exp = -exp;
        }
    }
    if i != b.len() {
        return Err(NOT_A_NUMBER);
    }
    let (whole_mag, frac_mag) = if exp == 0 {
        let mut whole: u64 = 0;
        for &d in int_digits {
            whole = whole.checked_mul(10).and_then(|w| w.checked_add(u64::from(d - b'0'))).ok_or(TOO_LARGE)?;
        }
        let mut frac: u64 = 0;
        for k in 0..6 {
            frac = frac * 10 + frac_digits.get(k).map_or(0, |d| u64::from(d - b'0'));
        }
        (whole, frac)
    } else {
        scaled(int_digits, frac_digits, exp)?
    };
    Micros::from_magnitude(neg, whole_mag, frac_mag)
}

impl Micros {
    /// The time `±(whole_mag + frac_mag / 10^6)` µs (`frac_mag < 10^6`).
    pub(crate) fn from_magnitude(neg: bool, whole_mag: u64, frac_mag: u64) -> Result<Micros, &'static str> {
        let whole_mag = i64::try_from(whole_mag).map_err(|_| TOO_LARGE)?;
        let frac_mag = frac_mag as i64;
        if neg && frac_mag != 0 {
            let whole = whole_mag.checked_neg().and_then(|w| w.checked_sub(1)).ok_or(TOO_LARGE)?;
            Ok(Micros { whole, frac_ps: PS_PER_US - frac_mag })
        } else if neg {
            Ok(Micros { whole: -whole_mag, frac_ps: 0 })
        } else {
            Ok(Micros { whole: whole_mag, frac_ps: frac_mag })
        }
    }
}

/// Magnitude (whole µs, fraction ps) of the digits `int ++ frac` with the decimal point
/// after `int.len() + exp` digits.
fn scaled(int: &[u8], frac: &[u8], exp: i64) -> Result<(u64, u64), &'static str> {
    let len = int.len() + frac.len();
    let digit = |k: usize| -> u64 {
        let d = if k < int.len() { int.get(k) } else { frac.get(k - int.len()) };
        d.map_or(0, |d| u64::from(d - b'0'))
    };
    // Skip leading zeros so that the point position bounds the magnitude.
    let Some(first) = (0..len).find(|&k| digit(k) != 0) else {
        return Ok((0, 0));
    };
    // Position of the decimal point relative to the first non-zero digit.
    let point = int.len() as i64 + exp - first as i64;
    if point > 20 {
        return Err(TOO_LARGE);
    }
    if point < -6 {
        return Ok((0, 0));
    }
    let at = |rel: i64| -> u64 {
        if rel < 0 {
            return 0;
        }
        let k = first as u64 + rel as u64;
        usize::try_from(k).ok().filter(|&k| k < len).map_or(0, digit)
    };
    let mut whole: u64 = 0;
    for rel in 0..point.max(0) {
        whole = whole.checked_mul(10).and_then(|w| w.checked_add(at(rel))).ok_or(TOO_LARGE)?;
    }
    let mut frac: u64 = 0;
    for j in 0..6 {
        frac = frac * 10 + at(point + j);
    }
    Ok((whole, frac))
}

/// A JSON value as a stat: numbers and strings typed, anything else raw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Scalar<'a> {
    /// An integer that fits `i64`.
    Int(i64),
    /// An integer above `i64::MAX` that fits `u64`.
    Uint(u64),
    /// Any other number.
    Double(f64),
    /// A string: the text between the quotes, still escaped when `escaped`.
    Str {
        /// The raw text between the quotes.
        inner: &'a str,
        /// True when `inner` contains a backslash escape.
        escaped: bool,
    },
    /// Anything else (object, array, `true`, `false`, `null`): keep the raw JSON text.
    Json,
}

/// Classifies the raw text of one (valid) JSON value.
pub(crate) fn classify(raw: &str) -> Scalar<'_> {
    match raw.as_bytes().first() {
        Some(b'"') => {
            let inner = raw.get(1..raw.len().saturating_sub(1).max(1)).unwrap_or("");
            Scalar::Str { inner, escaped: inner.as_bytes().contains(&b'\\') }
        }
        Some(b'-' | b'0'..=b'9') => {
            if raw.bytes().any(|c| matches!(c, b'.' | b'e' | b'E')) {
                raw.parse::<f64>().map_or(Scalar::Json, Scalar::Double)
            } else if let Ok(v) = raw.parse::<i64>() {
                Scalar::Int(v)
            } else if let Ok(v) = raw.parse::<u64>() {
                Scalar::Uint(v)
            } else {
                raw.parse::<f64>().map_or(Scalar::Json, Scalar::Double)
            }
        }
        _ => Scalar::Json,
    }
}

/// Appends the unescaped form of the JSON string body `inner` to `out`. Lone
/// surrogates (which JSON allows) become U+FFFD; malformed escapes are copied as is.
pub(crate) fn unescape_into(inner: &str, out: &mut String) {
    let b = inner.as_bytes();
    let mut run_start = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        out.push_str(inner.get(run_start..i).unwrap_or(""));
        let Some(&esc) = b.get(i + 1) else {
            run_start = i;
            break;
        };
        i += 2;
        match esc {
            b'"' => out.push('"'),
            b'\\' => out.push('\\'),
            b'/' => out.push('/'),
            b'b' => out.push('\u{8}'),
            b'f' => out.push('\u{c}'),
            b'n' => out.push('\n'),
            b'r' => out.push('\r'),
            b't' => out.push('\t'),
            b'u' => match hex4(b, i) {
                Some(hi) => {
                    i += 4;
                    if (0xD800..0xDC00).contains(&hi) && b.get(i) == Some(&b'\\') && b.get(i + 1) == Some(&b'u') {
                        match hex4(b, i + 2) {
                            Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                i += 6;
                                let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                out.push(char::from_u32(c).unwrap_or('\u{fffd}'));
                            }
                            _ => out.push('\u{fffd}'),
                        }
                    } else {
                        out.push(char::from_u32(hi).unwrap_or('\u{fffd}'));
                    }
                }
                None => out.push_str("\\u"),
            },
            other => {
                out.push('\\');
                out.push(char::from(other));
            }
        }
        run_start = i;
    }
    out.push_str(inner.get(run_start..).unwrap_or(""));
}

fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = b.get(at..at + 4)?;
    let mut v = 0u32;
    for &d in digits {
        v = v * 16 + char::from(d).to_digit(16)?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(text: &str) -> (i64, i64) {
        let v = parse_micros(text).unwrap();
        (v.whole, v.frac_ps)
    }

    #[test]
    fn decimal_times_are_exact() {
        assert_eq!(m("1712195495519695.8"), (1712195495519695, 800_000));
        assert_eq!(m("63.813"), (63, 813_000));
        assert_eq!(m("0"), (0, 0));
        assert_eq!(m("1.1234567"), (1, 123_456));
        assert_eq!(m("-1.5"), (-2, 500_000));
        assert_eq!(m("-3"), (-3, 0));
        assert_eq!(m("-0.000001"), (-1, 999_999));
        assert_eq!(m("1.5e3"), (1500, 0));
        assert_eq!(m("15E-1"), (1, 500_000));
        assert_eq!(m("1e-7"), (0, 0));
        assert_eq!(m("0.00e400"), (0, 0));
        assert_eq!(m("17121954955196958e-1"), (1712195495519695, 800_000));
        assert_eq!(parse_micros("1e30"), Err(TOO_LARGE));
        assert_eq!(parse_micros("99999999999999999999"), Err(TOO_LARGE));
        assert_eq!(parse_micros("\"12\""), Err(NOT_A_NUMBER));
        assert_eq!(parse_micros("null"), Err(NOT_A_NUMBER));
        assert_eq!(parse_micros("1."), Err(NOT_A_NUMBER));
    }

    #[test]
    fn scalars_are_typed() {
        assert_eq!(classify("42"), Scalar::Int(42));
        assert_eq!(classify("-42"), Scalar::Int(-42));
        assert_eq!(classify("18446744073709551615"), Scalar::Uint(u64::MAX));
        assert_eq!(classify("1.5"), Scalar::Double(1.5));
        assert_eq!(classify("1e2"), Scalar::Double(100.0));
        assert_eq!(classify("\"a\\nb\""), Scalar::Str { inner: "a\\nb", escaped: true });
        assert_eq!(classify("\"\""), Scalar::Str { inner: "", escaped: false });
        assert_eq!(classify("[1,2]"), Scalar::Json);
        assert_eq!(classify("true"), Scalar::Json);
    }

    #[test]
    fn strings_unescape() {
        let mut s = String::new();
        unescape_into(r#"a\"b\\c\/\n\u00e9\ud83d\ude00\ud800x"#, &mut s);
        assert_eq!(s, "a\"b\\c/\né😀\u{fffd}x");
    }
}
