//! Nesting depth of the events of one track, computed from their times alone.
//!
//! Events are visited in start order (longer first on ties) with a stack of the
//! intervals still open. An event contained in the innermost open interval goes one
//! level below it. One that only partially overlaps it cannot nest, so it goes to the
//! next depth that is free at its start — never dropped, never drawn over another.
//! The invariant the rest of the crate relies on: **events at the same depth do not
//! overlap** (each starts at or after the previous one's end), so within a depth both
//! starts and ends are sorted and a time window is one contiguous range of events.

/// Depth of each event; `spans` are `(start_ps, end_ps)` sorted by start ascending,
/// then end descending. Zero-length events at the same instant share a depth.
pub(crate) fn assign_depths(spans: impl Iterator<Item = (i64, i64)>) -> Vec<u32> {
    let mut open: Vec<(i64, u32)> = Vec::new(); // (end, depth) of open intervals, depth increasing
    let mut depth_end: Vec<i64> = Vec::new(); // end of the last event placed at each depth
    let mut depths = Vec::with_capacity(spans.size_hint().0);
    for (start, end) in spans {
        while open.last().is_some_and(|&(open_end, _)| open_end <= start) {
            open.pop();
        }
        let mut depth = open.last().map_or(0, |&(_, d)| d + 1) as usize;
        while depth_end.get(depth).is_some_and(|&busy_until| busy_until > start) {
            depth += 1;
        }
        if depth == depth_end.len() {
            depth_end.push(end);
        } else {
            depth_end[depth] = end;
        }
        // Depths are bounded by the number of events, which the builder keeps under u32::MAX.
        let depth = depth as u32;
        open.push((end, depth));
        depths.push(depth);
    }
    depths
}

#[cfg(test)]
mod tests {
    use super::assign_depths;

    fn depths(spans: &[(i64, i64)]) -> Vec<u32> {
        assign_depths(spans.iter().copied())
    }

    #[test]
    fn nested_calls_stack_up_and_siblings_share_a_depth() {
        // a [0,100) contains b [10,40) and c [50,90); b contains d [20,30).
        assert_eq!(depths(&[(0, 100), (10, 40), (20, 30), (50, 90), (100, 120)]), vec![0, 1, 2, 1, 0]);
    }

    #[test]
    fn partial_overlaps_go_to_the_next_free_depth() {
        // b [50,150) overlaps a [0,100) without being inside it; c [120,130) starts
        // after a ended but inside b.
        assert_eq!(depths(&[(0, 100), (50, 150), (120, 130), (200, 210)]), vec![0, 1, 2, 0]);
        // Three mutually overlapping events, none inside another.
        assert_eq!(depths(&[(0, 10), (5, 15), (8, 20)]), vec![0, 1, 2]);
    }

    #[test]
    fn instants_share_a_depth_and_nest_in_spans() {
        assert_eq!(depths(&[(0, 10), (0, 0), (0, 0), (10, 10), (10, 10)]), vec![0, 1, 1, 0, 0]);
    }

    #[test]
    fn events_at_one_depth_never_overlap() {
        let mut spans = Vec::new();
        let mut seed = 7u64;
        for _ in 0..2000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let start = (seed >> 33) as i64 % 10_000;
            let dur = (seed >> 20) as i64 % 300;
            spans.push((start, start + dur));
        }
        spans.sort_by_key(|&(s, e)| (s, std::cmp::Reverse(e)));
        let d = depths(&spans);
        let mut last_end: Vec<i64> = Vec::new();
        for (&(start, end), &depth) in spans.iter().zip(&d) {
            let depth = depth as usize;
            if depth >= last_end.len() {
                last_end.resize(depth + 1, i64::MIN);
            }
            assert!(last_end[depth] <= start, "overlap at depth {depth}");
            last_end[depth] = end;
        }
    }
}
