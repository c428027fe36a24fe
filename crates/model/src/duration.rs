//! Durations as users type them (`50us`, `1ms`, `1.5 ms`, `200000ns`, `2s`, `1m`) →
//! picoseconds. Shared by every command and option that takes a duration.
//!
//! The one rule to know: a duration carries its unit. A bare number other than 0 is
//! refused, since mlprof's options would otherwise read it differently (microseconds
//! for a gap threshold, milliseconds for a capture) and a slip of 1000× would pass
//! unseen.

/// Parses `text` as a non-negative duration with a unit (`ps`, `ns`, `us`, `µs`, `ms`,
/// `s`, `m`, `min`) into picoseconds; `0` needs none. The error is one sentence that
/// shows the accepted forms.
pub fn parse_duration_ps(text: &str) -> Result<i64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let value: f64 =
        number.parse().map_err(|_| format!("invalid duration: {text:?} is not a duration such as 50us, 1ms or 2s"))?;
    let ps_per_unit = match unit.trim() {
        "" if value == 0.0 => 0.0,
        "" => return Err(format!("{text:?} has no unit: write {number}us, {number}ms or {number}s")),
        "ps" => 1.0,
        "ns" => 1e3,
        "us" | "µs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        "m" | "min" => 60e12,
        other => return Err(format!("unknown unit {other:?} in duration {text:?}; use ps, ns, us, ms, s or m")),
    };
    let ps = value * ps_per_unit;
    if !ps.is_finite() || ps > i64::MAX as f64 / 2.0 {
        return Err(format!("duration {text:?} is too large"));
    }
    Ok(ps.round() as i64)
}

#[cfg(test)]
mod tests {
    use super::parse_duration_ps;

    #[test]
    fn units_and_errors() {
        assert_eq!(parse_duration_ps("50us"), Ok(50_000_000));
        assert_eq!(parse_duration_ps("50µs"), Ok(50_000_000));
        assert_eq!(parse_duration_ps("1ms"), Ok(1_000_000_000));
        assert_eq!(parse_duration_ps("1.5 ms"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ps("250ns"), Ok(250_000));
        assert_eq!(parse_duration_ps("2s"), Ok(2_000_000_000_000));
        assert_eq!(parse_duration_ps("1m"), Ok(60_000_000_000_000));
        assert_eq!(parse_duration_ps("0.5 min"), Ok(30_000_000_000_000));
        assert!(parse_duration_ps("-5us").is_err());
        assert!(parse_duration_ps("fast").is_err());
        assert!(parse_duration_ps("").is_err());
        assert!(parse_duration_ps("2h").is_err());
        assert!(parse_duration_ps("10 parsecs").is_err());
        assert!(parse_duration_ps("1e300s").is_err());
    }

    #[test]
    fn a_bare_number_needs_a_unit_except_zero() {
        assert_eq!(parse_duration_ps("0"), Ok(0));
        assert_eq!(parse_duration_ps("0.0"), Ok(0));
        assert_eq!(parse_duration_ps("100"), Err("\"100\" has no unit: write 100us, 100ms or 100s".to_string()));
        assert!(parse_duration_ps("1500").is_err());
    }
}
