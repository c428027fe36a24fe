//! A rank's GPU-side rows (those with a stream) grouped by correlation id: how launch
//! statistics and queue length join a runtime launch to the GPU ops it started.
//!
//! The one design decision to know: the groups are one vector of row indices sorted
//! by correlation (stably, so each group keeps row order), looked up by binary
//! search. Rows come grouped by stream and in start order within a stream, where
//! correlation ids mostly rise, so the stable sort merges a few long runs; no
//! per-correlation vector is allocated and nothing is hashed.

use super::trace::Row;

/// The rows with a stream (`stream != -1`), grouped by correlation.
pub struct ByCorrelation {
    /// Correlation ids, ascending, one per entry of `rows`.
    correlations: Vec<i64>,
    /// Indices into the rank's rows, sorted by correlation, in row order within one.
    rows: Vec<u32>,
}

impl ByCorrelation {
    /// Groups the rows of `rows` that have a stream.
    pub fn new(rows: &[Row]) -> ByCorrelation {
        let mut pairs: Vec<(i64, u32)> = rows
            .iter()
            .enumerate()
            .filter(|(_, row)| row.stream != -1)
            .map(|(index, row)| (row.correlation, index as u32))
            .collect();
        pairs.sort_by_key(|&(correlation, _)| correlation);
        let (correlations, rows) = pairs.into_iter().unzip();
        ByCorrelation { correlations, rows }
    }

    /// The rows of `rows` (the rows this was built from) with a stream and
    /// correlation `correlation`, in row order.
    pub fn of<'r>(&self, rows: &'r [Row], correlation: i64) -> impl Iterator<Item = &'r Row> + use<'r, '_> {
        let start = self.correlations.partition_point(|&c| c < correlation);
        let end = self.correlations.partition_point(|&c| c <= correlation);
        self.rows.get(start..end).unwrap_or(&[]).iter().filter_map(|&index| rows.get(index as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(stream: i64, correlation: i64) -> Row {
        Row {
            name: 0,
            cat: 0,
            ts_ps: 0,
            dur_ps: 0,
            stream,
            correlation,
            memory_bw_gbps: 0.0,
            on_gpu: stream != -1,
            linked_cpu_ts_ps: None,
            launches_gpu_op: false,
        }
    }

    #[test]
    fn groups_hold_the_rows_with_a_stream_in_row_order() {
        // Two streams, correlations rising in each; CPU rows (stream -1) left out.
        let rows = [row(7, 5), row(7, 9), row(-1, 5), row(8, 5), row(8, 2), row(7, -1), row(8, 9), row(-1, 3)];
        let by = ByCorrelation::new(&rows);
        let of = |correlation| -> Vec<(i64, i64)> {
            by.of(&rows, correlation).map(|row| (row.stream, row.correlation)).collect()
        };
        assert_eq!(of(5), [(7, 5), (8, 5)]);
        assert_eq!(of(9), [(7, 9), (8, 9)]);
        assert_eq!(of(2), [(8, 2)]);
        assert_eq!(of(-1), [(7, -1)]);
        assert!(of(3).is_empty());
        assert!(of(100).is_empty());
        assert_eq!(ByCorrelation::new(&[]).of(&[], 5).count(), 0);
    }
}
