//! Interval arithmetic on GPU ops: merging (HTA's `merge_kernel_intervals`, where
//! touching intervals merge) and the sweep that splits time by which kinds of op run.
//! All times in picoseconds.

/// The union of `intervals` (`(start, end)` pairs) as disjoint, sorted intervals;
/// intervals that touch are merged.
pub fn merge(mut intervals: Vec<(i64, i64)>) -> Vec<(i64, i64)> {
    intervals.sort_unstable();
    let mut merged: Vec<(i64, i64)> = Vec::with_capacity(intervals.len());
    for (start, end) in intervals {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

/// The total length of disjoint `intervals`.
pub fn total(intervals: &[(i64, i64)]) -> i64 {
    intervals.iter().map(|(start, end)| end - start).sum()
}

/// Time during which each combination of sets runs: `sets[i]` are disjoint sorted
/// intervals (from [`merge`]); the result maps each non-empty bitmask (bit `i` set
/// when set `i` runs) to its total time.
pub fn time_by_combination(sets: &[Vec<(i64, i64)>]) -> Vec<(u32, i64)> {
    let mut edges: Vec<(i64, i32)> = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        let bit = 1i32 << i;
        for &(start, end) in set {
            edges.push((start, bit));
            edges.push((end, -bit));
        }
    }
    edges.sort_unstable_by_key(|&(time, delta)| (time, delta));
    let mut totals: Vec<(u32, i64)> = Vec::new();
    let mut running = 0i32;
    for pair in edges.windows(2) {
        running += pair[0].1;
        let length = pair[1].0 - pair[0].0;
        if running > 0 && length > 0 {
            let mask = running as u32;
            match totals.iter_mut().find(|(m, _)| *m == mask) {
                Some((_, sum)) => *sum += length,
                None => totals.push((mask, length)),
            }
        }
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touching_intervals_merge_and_combinations_split_time() {
        assert_eq!(merge(vec![(5, 7), (0, 2), (2, 3), (6, 9)]), vec![(0, 3), (5, 9)]);
        let a = merge(vec![(0, 10)]);
        let b = merge(vec![(5, 15), (20, 30)]);
        let mut combos = time_by_combination(&[a, b]);
        combos.sort();
        assert_eq!(combos, vec![(1, 5), (2, 15), (3, 5)]);
    }
}
