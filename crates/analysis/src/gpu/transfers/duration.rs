//! Durations as users type them (`50us`, `1ms`, `1.5 ms`, `200000ns`) → picoseconds.

/// Parses `text` as a non-negative duration with a unit (`ps`, `ns`, `us`, `µs`, `ms`,
/// `s`; a bare number is microseconds) into picoseconds.
pub fn parse_duration_ps(text: &str) -> Result<i64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let ps_per_unit = match unit.trim() {
        "ps" => 1.0,
        "ns" => 1e3,
        "" | "us" | "µs" => 1e6,
        "ms" => 1e9,
        "s" => 1e12,
        other => return Err(format!("unknown unit {other:?} in duration {text:?}; use ps, ns, us, ms or s")),
    };
    let value: f64 = number.parse().map_err(|_| format!("invalid duration {text:?}; expected e.g. 50us or 1ms"))?;
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
        assert_eq!(parse_duration_ps("1ms"), Ok(1_000_000_000));
        assert_eq!(parse_duration_ps("1.5 ms"), Ok(1_500_000_000));
        assert_eq!(parse_duration_ps("100"), Ok(100_000_000));
        assert_eq!(parse_duration_ps("250ns"), Ok(250_000));
        assert!(parse_duration_ps("-5us").is_err());
        assert!(parse_duration_ps("fast").is_err());
        assert!(parse_duration_ps("10 parsecs").is_err());
        assert!(parse_duration_ps("1e300s").is_err());
    }
}
