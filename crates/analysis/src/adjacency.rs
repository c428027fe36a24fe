//! Lists of `u32` values by dense `u32` key in two arrays (compressed sparse rows):
//! the edges of the event forests, grouped by the node they start or end at.
//!
//! The one design decision to know: lists are built by counting, not sorting, so each
//! list keeps the order its pairs were given in, and building costs two passes over
//! the pairs and no allocation per key.

/// The lists of keys `0..keys`: key `k`'s list is `values[starts[k]..starts[k + 1]]`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Lists {
    /// One more than the keys: where each key's list starts in `values`.
    starts: Vec<u32>,
    values: Vec<u32>,
}

impl Lists {
    /// The lists of `keys` keys from `pairs()` (`(key, value)`), each list in the
    /// order `pairs` gives its values. Counted, the counts summed into each list's
    /// end, then filled backwards (`pairs` in reverse), which leaves each list in order
    /// and `starts` right: no sort, no copy of the offsets. Pairs whose key is `keys`
    /// or more are left out. `pairs` is called twice and must give the same pairs.
    pub(crate) fn by_key<I>(keys: usize, pairs: impl Fn() -> I) -> Lists
    where
        I: DoubleEndedIterator<Item = (usize, u32)>,
    {
        let mut starts = vec![0u32; keys + 1];
        for (key, _) in pairs().filter(|&(key, _)| key < keys) {
            starts[key] += 1;
        }
        let mut total = 0;
        for start in &mut starts {
            total += *start;
            *start = total;
        }
        let mut values = vec![0u32; total as usize];
        for (key, value) in pairs().rev().filter(|&(key, _)| key < keys) {
            starts[key] -= 1;
            values[starts[key] as usize] = value;
        }
        Lists { starts, values }
    }

    /// The list of `key` (empty for a key past the last).
    pub(crate) fn of(&self, key: usize) -> &[u32] {
        match (self.starts.get(key), self.starts.get(key + 1)) {
            (Some(&from), Some(&to)) => self.values.get(from as usize..to as usize).unwrap_or(&[]),
            _ => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each key's list holds its pairs' values in the order given, keys past the
    /// last are left out, and keys without pairs have empty lists.
    #[test]
    fn lists_keep_the_order_of_their_pairs() {
        let pairs = [(3, 30), (0, 1), (3, 31), (9, 90), (1, 10), (3, 32), (0, 2)];
        let lists = Lists::by_key(5, || pairs.iter().map(|&(key, value)| (key, value)));
        for key in 0..7 {
            let want: Vec<u32> = pairs.iter().filter(|&&(k, _)| k == key && k < 5).map(|&(_, v)| v).collect();
            assert_eq!(lists.of(key), want.as_slice(), "key {key}");
        }
        assert!(Lists::by_key(0, || pairs.iter().map(|&(key, value)| (key, value))).of(0).is_empty());
    }
}
