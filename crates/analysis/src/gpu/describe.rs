//! pandas' `Series.describe()` for numbers: count, mean, sample standard deviation,
//! min, quartiles (linear interpolation) and max, the summary HTA prints.

use serde::Serialize;

/// Summary statistics of a sample, in the sample's unit. Empty samples have
/// `count == 0` and `None` elsewhere; `std` is `None` below two values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Describe {
    /// Number of values.
    pub count: usize,
    /// Arithmetic mean.
    pub mean: Option<f64>,
    /// Sample standard deviation (n − 1).
    pub std: Option<f64>,
    /// Smallest value.
    pub min: Option<f64>,
    /// 25th percentile.
    pub p25: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 75th percentile.
    pub p75: Option<f64>,
    /// Largest value.
    pub max: Option<f64>,
}

/// Describes `values` (any order).
pub fn describe(mut values: Vec<f64>) -> Describe {
    values.sort_by(f64::total_cmp);
    let count = values.len();
    if count == 0 {
        return Describe::default();
    }
    let mean = values.iter().sum::<f64>() / count as f64;
    let std =
        (count > 1).then(|| (values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (count - 1) as f64).sqrt());
    Describe {
        count,
        mean: Some(mean),
        std,
        min: values.first().copied(),
        p25: Some(quantile(&values, 0.25)),
        p50: Some(quantile(&values, 0.5)),
        p75: Some(quantile(&values, 0.75)),
        max: values.last().copied(),
    }
}

/// The `q`-quantile of sorted, non-empty `sorted` with linear interpolation
/// (pandas' default).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let position = q * (sorted.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    let fraction = position - below as f64;
    sorted[below] + (sorted[above] - sorted[below]) * fraction
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_pandas_describe() {
        let d = describe(vec![4.0, 1.0, 2.0, 3.0]);
        assert_eq!(d.count, 4);
        assert_eq!(d.mean, Some(2.5));
        assert_eq!(d.p25, Some(1.75));
        assert_eq!(d.p50, Some(2.5));
        assert_eq!(d.p75, Some(3.25));
        assert!((d.std.unwrap_or(0.0) - 1.2909944487358056).abs() < 1e-12);
        assert_eq!(describe(vec![7.0]).std, None);
        assert_eq!(describe(Vec::new()).count, 0);
    }
}
