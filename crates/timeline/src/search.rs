//! Search over the whole trace by event name.
//!
//! The query is matched against the table of distinct names (case-insensitive
//! substring), never against events; each matching name's postings — its event ids in
//! time order — give the total by their lengths and the first results by a k-way merge
//! on start time. The cost is the name table plus `limit · log(matching names)`,
//! whatever the number of events.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;

use crate::builder::NameId;
use crate::format::Part;
use crate::index::{EventInfo, TimelineIndex};

/// The answer to a search.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SearchResults {
    /// Number of events whose name matches.
    pub total: u64,
    /// The first matches in time order (start, then id), at most the limit asked for.
    pub results: Vec<EventInfo>,
}

impl TimelineIndex {
    /// The names containing `query`, ignoring case.
    pub fn matching_names(&self, query: &str) -> Vec<NameId> {
        let matcher = Matcher::new(query);
        (0..self.name_count()).map(NameId).filter(|&id| matcher.matches(self.name_bytes(id))).collect()
    }

    /// Events whose name contains `query` (ignoring case): how many, and the first
    /// `limit` in time order.
    pub fn search(&self, query: &str, limit: usize) -> SearchResults {
        let offsets = self.col::<u64>(Part::PostingOffsets);
        let postings = self.col::<u32>(Part::Postings);
        let starts = self.col::<i64>(Part::Start);
        let mut total = 0u64;
        let mut heads: BinaryHeap<Reverse<(i64, u32, usize, usize)>> = BinaryHeap::new();
        for name in self.matching_names(query) {
            let (from, to) = (offsets.at(name.0 as usize) as usize, offsets.at(name.0 as usize + 1) as usize);
            total += to.saturating_sub(from) as u64;
            if from < to && limit > 0 {
                let id = postings.at(from);
                heads.push(Reverse((starts.at(id as usize), id, from, to)));
            }
        }
        let mut results = Vec::with_capacity(limit.min(total as usize));
        while results.len() < limit {
            let Some(Reverse((_, id, at, end))) = heads.pop() else { break };
            if let Some(event) = self.event(id) {
                results.push(event);
            }
            if at + 1 < end {
                let next = postings.at(at + 1);
                heads.push(Reverse((starts.at(next as usize), next, at + 1, end)));
            }
        }
        SearchResults { total, results }
    }
}

/// Case-insensitive substring test: byte-wise ASCII folding for ASCII queries (the
/// common case, no allocation), full Unicode lowercase otherwise.
enum Matcher {
    Ascii(Vec<u8>),
    Unicode(String),
}

impl Matcher {
    fn new(query: &str) -> Matcher {
        if query.is_ascii() {
            Matcher::Ascii(query.as_bytes().to_ascii_lowercase())
        } else {
            Matcher::Unicode(query.to_lowercase())
        }
    }

    /// Whether `name` (UTF-8 bytes) contains the query.
    fn matches(&self, name: &[u8]) -> bool {
        match self {
            Matcher::Ascii(needle) => {
                let Some(&first) = needle.first() else { return true };
                let hay = name;
                if hay.len() < needle.len() {
                    return false;
                }
                let upper = first.to_ascii_uppercase();
                (0..=hay.len() - needle.len()).any(|at| {
                    let b = hay[at];
                    (b == first || b == upper) && hay[at..at + needle.len()].eq_ignore_ascii_case(needle)
                })
            }
            Matcher::Unicode(needle) => {
                std::str::from_utf8(name).is_ok_and(|name| name.to_lowercase().contains(needle.as_str()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Matcher;

    #[test]
    fn matching_ignores_case_in_ascii_and_unicode() {
        let matches = |query: &str, name: &str| Matcher::new(query).matches(name.as_bytes());
        assert!(matches("conv", "aten::Conv2d"));
        assert!(matches("CONV2D", "aten::conv2d"));
        assert!(!matches("conv3d", "aten::conv2d"));
        assert!(matches("", "anything"));
        assert!(matches("Über", "das ÜBER-Ich"));
        assert!(matches("ber-i", "das ÜBER-Ich"));
        assert!(!matches("long needle", "short"));
    }
}

#[cfg(test)]
mod index_tests {
    use crate::builder::TimelineBuilder;
    use crate::synthetic::Synthetic;

    #[test]
    fn search_counts_every_match_and_returns_the_first_in_time_order() {
        let mut b = TimelineBuilder::new();
        Synthetic { names: 200, ..Synthetic::realistic(20_000, 5) }.add_to(&mut b).expect("generate");
        let index = b.finish().expect("finish").into_index().expect("open");
        for query in ["RELU", "aten::", "matmul_1", "", "no such name"] {
            let mut expected: Vec<_> = (0..index.event_count() as u32)
                .filter_map(|id| index.event(id))
                .filter(|e| index.name(e.name).to_lowercase().contains(&query.to_lowercase()))
                .collect();
            expected.sort_by_key(|e| (e.start_ps, e.id));
            let found = index.search(query, 50);
            assert_eq!(found.total, expected.len() as u64, "{query}");
            assert_eq!(found.results, expected.into_iter().take(50).collect::<Vec<_>>(), "{query}");
        }
        assert!(index.search("relu", 0).results.is_empty());
    }
}
