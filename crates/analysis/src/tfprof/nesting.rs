//! Nesting of the spans of one thread by start time, the rule mlprof's Kineto op
//! database uses (`op_metrics::KinetoOpIndex`): spans sorted by start, longer first at
//! equal starts; a span is the child of the innermost span still open where it starts
//! (so a child that ends a nanosecond after its parent stays its child).
//!
//! The one design decision to know: the forest is computed once per thread and then
//! answers "which span encloses time t" by binary search plus a walk up the parents,
//! so attributing N points to M spans costs O(N log M + N × depth), not N × M.

/// The nesting forest of a set of spans.
#[derive(Clone, Debug, Default)]
pub(super) struct Nesting {
    /// Span indices in nesting order (start, then longer first, then index).
    pub order: Vec<usize>,
    /// Per span (input index), its parent span.
    pub parent: Vec<Option<usize>>,
    starts: Vec<i64>,
    ends: Vec<i64>,
}

/// Nests `spans`, given as `(start_ps, duration_ps)` (negative durations count as 0):
/// a span's parent is the innermost span open where it starts.
pub(super) fn nest(spans: &[(i64, i64)]) -> Nesting {
    nest_with(spans, None)
}

/// Nests `spans` like [`nest`], except that a parent must also contain the child's end
/// (up to `tolerance_ps` later): a span that starts inside a short one and outlasts it
/// (a `record_function` range opened inside the Python call that opens it) goes to
/// the innermost open span that contains it.
pub(super) fn nest_contained(spans: &[(i64, i64)], tolerance_ps: i64) -> Nesting {
    nest_with(spans, Some(tolerance_ps))
}

fn nest_with(spans: &[(i64, i64)], containment: Option<i64>) -> Nesting {
    let ends: Vec<i64> = spans.iter().map(|&(start, duration)| start.saturating_add(duration.max(0))).collect();
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| (spans[i].0, std::cmp::Reverse(ends[i]), i));
    let mut parent = vec![None; spans.len()];
    let mut stack: Vec<usize> = Vec::new();
    for &at in &order {
        let start = spans[at].0;
        while stack.last().is_some_and(|&open| ends[open] <= start) {
            stack.pop();
        }
        parent[at] = match containment {
            None => stack.last().copied(),
            Some(tolerance) => stack
                .iter()
                .rev()
                .find(|&&open| ends[open] > start && ends[open].saturating_add(tolerance) >= ends[at])
                .copied(),
        };
        stack.push(at);
    }
    let starts = spans.iter().map(|&(start, _)| start).collect();
    Nesting { order, parent, starts, ends }
}

impl Nesting {
    /// The innermost span that contains `time_ps` (start ≤ t < end, or t = start for
    /// an empty span), if any.
    pub(super) fn innermost(&self, time_ps: i64) -> Option<usize> {
        let after = self.order.partition_point(|&i| self.starts[i] <= time_ps);
        let mut at = self.order.get(after.checked_sub(1)?).copied();
        while let Some(span) = at {
            if self.contains(span, time_ps) {
                return Some(span);
            }
            at = self.parent[span];
        }
        None
    }

    fn contains(&self, span: usize, time_ps: i64) -> bool {
        let (start, end) = (self.starts[span], self.ends[span]);
        start <= time_ps && (time_ps < end || time_ps == start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_nest_by_start_and_points_find_the_innermost_span() {
        // 0: [0,100) contains 1: [10,50) (which contains 2: [20,30)) and 3: [45,60),
        // which starts inside 1 and ends after it; 4: [200,200) is empty.
        let spans = [(0, 100), (10, 40), (20, 10), (45, 15), (200, 0)];
        let nesting = nest(&spans);
        assert_eq!(nesting.parent, [None, Some(0), Some(1), Some(1), None]);
        assert_eq!(nesting.order, [0, 1, 2, 3, 4]);
        assert_eq!(nesting.innermost(25), Some(2));
        assert_eq!(nesting.innermost(35), Some(1));
        assert_eq!(nesting.innermost(55), Some(3));
        assert_eq!(nesting.innermost(70), Some(0));
        assert_eq!(nesting.innermost(100), None);
        assert_eq!(nesting.innermost(-1), None);
        assert_eq!(nesting.innermost(200), Some(4));
        // Contained: 3 ends 10 after 1 does, so it belongs to 0; within 10 ps, to 1.
        assert_eq!(nest_contained(&spans, 0).parent, [None, Some(0), Some(1), Some(0), None]);
        assert_eq!(nest_contained(&spans, 10).parent, [None, Some(0), Some(1), Some(1), None]);
    }
}
