//! Numbers as people read them in sentences, beside [`crate::time::human_duration`] for
//! durations: an average count is whole when it is (`8`, not `8.0`), else one decimal.

/// A count or an average of counts: `8`, `7.5`, `0.3`.
pub fn count(value: f64) -> String {
    let rounded = (value * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 { format!("{rounded:.0}") } else { format!("{rounded:.1}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_counts_have_no_decimals() {
        assert_eq!(count(8.0), "8");
        assert_eq!(count(7.5), "7.5");
        assert_eq!(count(0.26), "0.3");
        assert_eq!(count(2.96), "3");
        assert_eq!(count(0.0), "0");
    }
}
