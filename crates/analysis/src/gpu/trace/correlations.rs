//! The distinct correlation ids of one rank's GPU side, sorted, with a search that
//! starts where the previous one ended.
//!
//! Rows are read in time order and CUPTI numbers correlations in time order, so
//! consecutive searches mostly move a few places: galloping from the last answer
//! (a "finger") costs a few comparisons on memory already in cache, where a search
//! from scratch would cost a cache miss per level of a multi-megabyte table.

/// Sorted distinct correlation ids; a position in it is a correlation's slot.
pub(super) struct Correlations {
    sorted: Vec<i64>,
}

impl Correlations {
    /// The distinct ids among `ids`.
    pub fn new(ids: impl Iterator<Item = i64>) -> Correlations {
        let mut sorted: Vec<i64> = ids.collect();
        sorted.sort_unstable();
        sorted.dedup();
        Correlations { sorted }
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    /// The slot of `id`, searching from `finger` (the previous answer of this
    /// sequence of searches, updated).
    pub fn slot(&self, id: i64, finger: &mut usize) -> Option<usize> {
        let sorted = &self.sorted;
        let at = (*finger).min(sorted.len().checked_sub(1)?);
        let (mut low, mut high);
        if sorted[at] <= id {
            // Gallop right: the answer lies in [low, high).
            let mut step = 1;
            low = at;
            high = at + 1;
            while high < sorted.len() && sorted[high] <= id {
                low = high;
                high = (high + step).min(sorted.len());
                step *= 2;
            }
        } else {
            // Gallop left.
            let mut step = 1;
            high = at;
            low = at.saturating_sub(1);
            while low > 0 && sorted[low] > id {
                high = low;
                low = low.saturating_sub(step);
                step *= 2;
            }
        }
        let found = low + sorted.get(low..high)?.partition_point(|&known| known < id);
        *finger = found.min(sorted.len() - 1);
        (sorted.get(found) == Some(&id)).then_some(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finger_searches_find_what_bisection_finds_in_any_order() {
        let ids = [40, 3, 17, 17, 8, 100, 5, 41, 99, -1, 0];
        let index = Correlations::new(ids.iter().copied());
        let sorted = [-1, 0, 3, 5, 8, 17, 40, 41, 99, 100];
        assert_eq!(index.len(), sorted.len());
        let queries = [-5, -1, 0, 1, 3, 4, 5, 8, 9, 17, 40, 41, 42, 99, 100, 101, 17, 3, -1, 200, -9, 41, 0, 100];
        for start in 0..sorted.len() + 2 {
            let mut finger = start;
            for &query in &queries {
                assert_eq!(index.slot(query, &mut finger), sorted.binary_search(&query).ok(), "{query} from {start}");
            }
        }
        let empty = Correlations::new(std::iter::empty());
        assert_eq!(empty.slot(3, &mut 0), None);
    }
}
