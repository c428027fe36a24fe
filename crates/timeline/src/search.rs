//! Search over the whole trace by event name, one page of results at a time.
//!
//! The query is matched against the table of distinct names (case-insensitive
//! substring), never against events; each matching name's postings — its event ids in
//! time order (start, then id) — give the total by their lengths, the position of a
//! cursor by a binary search, and the page by a k-way merge from that position. Names
//! are streamed: of the matching names' heads only the `limit` nearest the cursor are
//! kept (a name whose head is not among them cannot reach the page), so memory is
//! bounded by `limit`, not by the number of matching names. The cost is the name table
//! plus `log(postings)` per matching name plus `limit · log(limit)`, whatever the
//! number of events.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use serde::Serialize;

use crate::builder::NameId;
use crate::format::Part;
use crate::index::{EventInfo, TimelineIndex};

/// Where a page of search results lies, relative to a cursor: an event's position in
/// time order, `(start_ps, id)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SearchPage {
    /// The first matches.
    First,
    /// The first matches strictly after `(start_ps, id)`, in time order.
    After {
        /// Start of the cursor, ps relative to the profile start.
        start_ps: i64,
        /// Event id of the cursor (ties on start are ordered by id).
        id: u32,
    },
    /// The last matches strictly before `(start_ps, id)`, returned in time order.
    Before {
        /// Start of the cursor, ps relative to the profile start.
        start_ps: i64,
        /// Event id of the cursor (ties on start are ordered by id).
        id: u32,
    },
}

/// The answer to a search.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SearchResults {
    /// Number of events whose name matches.
    pub total: u64,
    /// Number of matches that come before `results[0]` in time order (its 0-based
    /// rank among all matches); with no results, the number before the cursor.
    pub offset: u64,
    /// The page: at most the limit asked for, in time order (start, then id).
    pub results: Vec<EventInfo>,
}

/// A matching name's next posting in the merge: its order key (time order, flipped
/// bit-wise when walking backwards so that the smallest key always comes next), the
/// posting's position and the position where the walk stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Head {
    key: (i64, u32),
    at: usize,
    stop: usize,
}

impl TimelineIndex {
    /// The names containing `query`, ignoring case.
    pub fn matching_names(&self, query: &str) -> Vec<NameId> {
        self.names_matching(query).collect()
    }

    fn names_matching(&self, query: &str) -> impl Iterator<Item = NameId> + '_ {
        let matcher = Matcher::new(query);
        (0..self.name_count()).map(NameId).filter(move |&id| matcher.matches(self.name_bytes(id)))
    }

    /// Events whose name contains `query` (ignoring case): how many, and the first
    /// `limit` in time order.
    pub fn search(&self, query: &str, limit: usize) -> SearchResults {
        self.search_page(query, SearchPage::First, limit)
    }

    /// Events whose name contains `query` (ignoring case): how many, and the page of at
    /// most `limit` of them that `page` asks for, in time order.
    pub fn search_page(&self, query: &str, page: SearchPage, limit: usize) -> SearchResults {
        let offsets = self.col::<u64>(Part::PostingOffsets);
        let postings = self.col::<u32>(Part::Postings);
        let starts = self.col::<i64>(Part::Start);
        let time_key = |at: usize| {
            let id = postings.at(at);
            (starts.at(id as usize), id)
        };
        let backwards = matches!(page, SearchPage::Before { .. });
        let order_key = |at: usize| {
            let (start, id) = time_key(at);
            if backwards { (!start, !id) } else { (start, id) }
        };
        let (mut total, mut before_cursor) = (0u64, 0u64);
        let mut heads: Vec<Head> = Vec::new();
        for name in self.names_matching(query) {
            let from = (offsets.at(name.0 as usize) as usize).min(postings.len());
            let to = (offsets.at(name.0 as usize + 1) as usize).clamp(from, postings.len());
            total += (to - from) as u64;
            let split = match page {
                SearchPage::First => from,
                SearchPage::After { start_ps, id } => first_position(from..to, |at| time_key(at) <= (start_ps, id)),
                SearchPage::Before { start_ps, id } => first_position(from..to, |at| time_key(at) < (start_ps, id)),
            };
            before_cursor += (split - from) as u64;
            if limit == 0 {
                continue;
            }
            let head = match backwards {
                false if split < to => Head { key: order_key(split), at: split, stop: to },
                true if split > from => Head { key: order_key(split - 1), at: split - 1, stop: from },
                _ => continue,
            };
            heads.push(head);
            if heads.len() >= 2 * limit {
                keep_smallest(&mut heads, limit);
            }
        }
        keep_smallest(&mut heads, limit);
        let mut queue: BinaryHeap<Reverse<Head>> = heads.into_iter().map(Reverse).collect();
        let mut results = Vec::with_capacity(queue.len().min(limit));
        while results.len() < limit {
            let Some(Reverse(head)) = queue.pop() else { break };
            if let Some(event) = self.event(postings.at(head.at)) {
                results.push(event);
            }
            let next = if backwards {
                head.at.checked_sub(1).filter(|&at| at >= head.stop)
            } else {
                Some(head.at + 1).filter(|&at| at < head.stop)
            };
            if let Some(at) = next {
                queue.push(Reverse(Head { key: order_key(at), at, stop: head.stop }));
            }
        }
        let offset = if backwards {
            results.reverse();
            before_cursor.saturating_sub(results.len() as u64)
        } else {
            before_cursor
        };
        SearchResults { total, offset, results }
    }
}

/// The first position in `range` for which `before` is false, assuming it is true for a
/// prefix of the range and false after it.
fn first_position(range: std::ops::Range<usize>, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (range.start, range.end);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Keeps the `n` smallest heads (in no particular order).
fn keep_smallest(heads: &mut Vec<Head>, n: usize) {
    if heads.len() > n {
        if n > 0 {
            heads.select_nth_unstable(n - 1);
        }
        heads.truncate(n);
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
    use super::SearchPage;
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

    /// Every page the cursors can ask for, checked against the matches sorted by brute
    /// force: pages after and before every match (and between), of several sizes,
    /// including sizes smaller than the number of matching names.
    #[test]
    fn pages_after_and_before_a_cursor_step_through_every_match() {
        let mut b = TimelineBuilder::new();
        Synthetic { names: 120, ..Synthetic::realistic(6_000, 9) }.add_to(&mut b).expect("generate");
        let index = b.finish().expect("finish").into_index().expect("open");
        for query in ["relu", "aten::", ""] {
            let mut all: Vec<_> = (0..index.event_count() as u32)
                .filter_map(|id| index.event(id))
                .filter(|e| index.name(e.name).to_lowercase().contains(query))
                .collect();
            all.sort_by_key(|e| (e.start_ps, e.id));
            assert!(index.matching_names(query).len() > 3, "{query}: several names match");
            for limit in [1usize, 3, 17] {
                for rank in (0..all.len()).step_by(all.len() / 40 + 1).chain([all.len() - 1]) {
                    let (start_ps, id) = (all[rank].start_ps, all[rank].id);
                    let after = index.search_page(query, SearchPage::After { start_ps, id }, limit);
                    let expect_after: Vec<_> = all[rank + 1..].iter().take(limit).copied().collect();
                    assert_eq!(after.results, expect_after, "{query} after #{rank}, limit {limit}");
                    assert_eq!(after.offset, rank as u64 + 1);
                    assert_eq!(after.total, all.len() as u64);
                    let before = index.search_page(query, SearchPage::Before { start_ps, id }, limit);
                    let expect_before: Vec<_> = all[rank.saturating_sub(limit)..rank].to_vec();
                    assert_eq!(before.results, expect_before, "{query} before #{rank}, limit {limit}");
                    assert_eq!(before.offset, rank.saturating_sub(limit) as u64);
                }
            }
            // A cursor between events: `id` u32::MAX means "after every event starting
            // at start_ps", 0 "before every event starting at it".
            let middle = all[all.len() / 2].start_ps;
            let at_or_after = index.search_page(query, SearchPage::After { start_ps: middle - 1, id: u32::MAX }, 5);
            let first = all.iter().position(|e| e.start_ps >= middle).expect("a match");
            assert_eq!(at_or_after.results, all[first..].iter().take(5).copied().collect::<Vec<_>>());
            assert_eq!(at_or_after.offset, first as u64);
            let last_page = index.search_page(query, SearchPage::Before { start_ps: i64::MAX, id: 0 }, 4);
            assert_eq!(last_page.results, all[all.len() - 4..].to_vec());
            let past_end = index.search_page(query, SearchPage::After { start_ps: i64::MAX, id: 0 }, 4);
            assert!(past_end.results.is_empty());
            assert_eq!(past_end.offset, all.len() as u64);
        }
    }
}
