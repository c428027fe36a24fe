//! Durations as users type them (`50us`, `1ms`, `1.5 ms`, `200000ns`, `2s`, `1m`) →
//! picoseconds. Shared by every command that takes a duration; each says what a bare
//! number means (`--gap-threshold`: microseconds, `mlprof capture`: milliseconds).

/// Parses `text` as a non-negative duration with a unit (`ps`, `ns`, `us`, `µs`, `ms`,
/// `s`, `m`; a bare number is microseconds) into picoseconds.
pub fn parse_duration_ps(text: &str) -> Result<i64, String> {
    parse_duration_ps_or(text, "us")
}

/// Like [`parse_duration_ps`], but a bare number is in `bare_unit` (one of the units).
pub fn parse_duration_ps_or(text: &str, bare_unit: &str) -> Result<i64, String> {
    let trimmed = text.trim();
    let split = trimmed.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(trimmed.len());
    let (number, unit) = trimmed.split_at(split);
    let value: f64 =
        number.parse().map_err(|_| format!("invalid duration: {text:?} is not a duration such as 50us, 1ms or 2s"))?;
    let unit = match unit.trim() {
        "" => bare_unit,
        unit => unit,
    };
    let ps_per_unit = match unit {
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
    use super::{parse_duration_ps, parse_duration_ps_or};

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

    #[test]
    fn bare_numbers_take_the_callers_unit() {
        assert_eq!(parse_duration_ps_or("1500", "ms"), Ok(1_500_000_000_000));
        assert_eq!(parse_duration_ps_or("1500ms", "ms"), Ok(1_500_000_000_000));
        assert_eq!(parse_duration_ps_or("2s", "ms"), Ok(2_000_000_000_000));
        assert_eq!(parse_duration_ps_or("1m", "ms"), Ok(60_000_000_000_000));
        assert_eq!(parse_duration_ps_or("0.5 min", "ms"), Ok(30_000_000_000_000));
        assert!(parse_duration_ps_or("", "ms").is_err());
        assert!(parse_duration_ps_or("2h", "ms").is_err());
    }
}
