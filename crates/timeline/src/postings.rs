//! The postings: for every name, its event ids in time order (start, then id), built
//! on every thread.
//!
//! Event ids are laid out in runs (a track's events at one depth), each in start order,
//! so the whole trace in time order is a merge of the runs, and handing the merged ids
//! out to their names' slots, one after another, leaves every name's ids in time order
//! with nothing left to sort. Two things make that fast:
//! - **Slices.** The time axis is cut into slices of about equal event counts
//!   (quantiles of a sample of the starts); each slice is merged on its own (a tree of
//!   losers over the runs' pieces in the slice) and writes to places of its own, sized
//!   by counting each slice's events first. Ties on start are broken by run order,
//!   which is id order, so the result is the same whatever the number of slices.
//! - **Two-step hand-out.** Handing ids straight to tens of thousands of names writes
//!   all over the postings, one cache miss per event. So names are cut into
//!   [`GROUPS`] groups of about equal event counts (each group's lists are one
//!   contiguous range of the postings): the merge hands each id, with its name, to its
//!   group's range — a few hundred places written in order — and then each group,
//!   on its own, hands its ids to its few names' lists.
//!
//! Besides the postings, the build holds each id's name while grouped (4 bytes per
//! event) and, per thread, a copy of the group it hands out.

use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

use rayon::prelude::*;

/// Slices per thread: more slices than threads, so that no thread waits long for the
/// last one.
const SLICES_PER_THREAD: usize = 4;
/// One start in this many is sampled to place the slice bounds.
const SAMPLE_EVERY: usize = 256;
/// Most groups names are cut into for the two-step hand-out (a group's number fits a
/// byte).
const GROUPS: usize = 256;

/// The postings of events whose names are `name` and starts `start_ps` (both by event
/// id), laid out in `runs` (ranges of ids in id order, covering every event, each in
/// start order): `(offsets, postings)`, name `n`'s ids being `postings[offsets[n]..
/// offsets[n + 1]]`. `names` is the number of names; every entry of `name` is below it.
pub(crate) fn build_postings(
    names: usize,
    name: &[u32],
    start_ps: &[i64],
    runs: &[Range<usize>],
) -> (Vec<u64>, Vec<u32>) {
    build_in_slices(names, name, start_ps, runs, rayon::current_num_threads() * SLICES_PER_THREAD, GROUPS)
}

/// [`build_postings`] with time cut into at most `slices` slices and names into at
/// most `groups` groups (at most [`GROUPS`]).
fn build_in_slices(
    names: usize,
    name: &[u32],
    start_ps: &[i64],
    runs: &[Range<usize>],
    slices: usize,
    groups: usize,
) -> (Vec<u64>, Vec<u32>) {
    debug_assert_eq!(runs.iter().map(ExactSizeIterator::len).sum::<usize>(), name.len(), "runs cover every event");
    // A slice holds a piece per run: no more slices than keeps that within the size
    // of the postings.
    let slices = slices.min(name.len() / runs.len().max(1)).max(1);
    let bounds = slice_bounds(start_ps, slices);
    let pieces: Vec<Vec<Range<usize>>> = (0..bounds.len() + 1)
        .map(|s| {
            let (from, to) = (s.checked_sub(1).map(|b| bounds[b]), bounds.get(s).copied());
            runs.iter().map(|run| piece_of(run, start_ps, from, to)).collect()
        })
        .collect();
    // Each slice's count of every name, counted on every thread, when these tables
    // take no more room than the postings; else the names are counted in one pass.
    let name_counts: Option<Vec<Vec<u32>>> = (pieces.len().saturating_mul(names) <= name.len()).then(|| {
        pieces.par_iter().with_max_len(1).map(|pieces| count_in(pieces, name, names, |n| n as usize)).collect()
    });
    let mut offsets = vec![0u64; names + 1];
    match &name_counts {
        Some(tables) => {
            for table in tables {
                for (total, &count) in offsets[1..].iter_mut().zip(table) {
                    *total += u64::from(count);
                }
            }
        }
        None => {
            for &n in name {
                offsets[n as usize + 1] += 1;
            }
        }
    }
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    let cuts = part_cuts(&offsets, groups.min(GROUPS));
    let mut group_of = vec![0u8; names];
    for (group, range) in cuts.windows(2).enumerate() {
        // At most GROUPS groups.
        group_of[range[0]..range[1]].fill(group as u8);
    }
    // Each slice's count of every group: from its names' counts, or counted.
    let groups = cuts.len() - 1;
    let mut next: Vec<Vec<u64>> = match name_counts {
        Some(tables) => tables
            .iter()
            .map(|table| {
                let mut count = vec![0u64; groups];
                for (&group, &n) in group_of.iter().zip(table) {
                    count[usize::from(group)] += u64::from(n);
                }
                count
            })
            .collect(),
        None => pieces
            .par_iter()
            .with_max_len(1)
            .map(|pieces| {
                let count = count_in(pieces, name, groups, |n| usize::from(group_of[n as usize]));
                count.into_iter().map(u64::from).collect()
            })
            .collect(),
    };
    // Where each slice's ids of each group go: the group's range, slice after slice.
    for (group, &first_name) in cuts[..groups].iter().enumerate() {
        let mut at = offsets[first_name];
        for slice in &mut next {
            let count = slice[group];
            slice[group] = at;
            at += count;
        }
    }
    let (grouped_ids, grouped_names) = (atomic_zeros(name.len()), atomic_zeros(name.len()));
    pieces.into_par_iter().zip(next).with_max_len(1).for_each(|(pieces, mut next)| {
        merge_in_time_order(&pieces, start_ps, |id| {
            let n = name[id];
            let slot = &mut next[usize::from(group_of[n as usize])];
            // Event ids fit u32: the builder keeps the count below MAX_EVENTS.
            grouped_ids[*slot as usize].store(id as u32, Ordering::Relaxed);
            grouped_names[*slot as usize].store(n, Ordering::Relaxed);
            *slot += 1;
        });
    });
    let mut postings: Vec<u32> = grouped_ids.into_iter().map(AtomicU32::into_inner).collect();
    let grouped_names: Vec<u32> = grouped_names.into_iter().map(AtomicU32::into_inner).collect();
    let mut jobs = Vec::with_capacity(cuts.len());
    let mut rest = postings.as_mut_slice();
    for range in cuts.windows(2) {
        let (from, to) = (offsets[range[0]] as usize, offsets[range[1]] as usize);
        let (own, after) = std::mem::take(&mut rest).split_at_mut(to - from);
        rest = after;
        // A group of one name is already in its list's order.
        if range[1] - range[0] > 1 {
            jobs.push((&offsets[range[0]..=range[1]], range[0], own, &grouped_names[from..to]));
        }
    }
    jobs.into_par_iter().with_max_len(1).for_each_init(Vec::new, |ids, (offsets, first_name, own, names)| {
        ids.clear();
        ids.extend_from_slice(own);
        let base = offsets[0];
        let mut next: Vec<u64> = offsets.iter().map(|&o| o - base).collect();
        for (&id, &n) in ids.iter().zip(names) {
            let slot = &mut next[n as usize - first_name];
            own[*slot as usize] = id;
            *slot += 1;
        }
    });
    (offsets, postings)
}

/// How many events of `pieces` (ranges of ids) fall in each of `bins` bins, an event
/// of name `n` falling in `bin_of(n)`.
fn count_in(pieces: &[Range<usize>], name: &[u32], bins: usize, bin_of: impl Fn(u32) -> usize) -> Vec<u32> {
    let mut count = vec![0u32; bins];
    for piece in pieces {
        for &n in &name[piece.clone()] {
            // Event counts fit u32: the builder keeps them below MAX_EVENTS.
            count[bin_of(n)] += 1;
        }
    }
    count
}

/// `len` atomic zeros, which threads fill at places of their own.
fn atomic_zeros(len: usize) -> Vec<AtomicU32> {
    (0..len).map(|_| AtomicU32::new(0)).collect()
}

/// Name boundaries cutting the names `0..names` into at most `parts` ranges of about
/// equal event counts (`offsets` as [`build_postings`] returns them): increasing, from
/// 0 to the name count.
fn part_cuts(offsets: &[u64], parts: usize) -> Vec<usize> {
    let names = offsets.len() - 1;
    let total = offsets[names];
    let parts = parts.max(1) as u64;
    let mut cuts = vec![0];
    for p in 1..parts {
        let target = total * p / parts;
        let cut = offsets.partition_point(|&o| o < target).min(names);
        if cut > *cuts.last().unwrap_or(&0) {
            cuts.push(cut);
        }
    }
    if *cuts.last().unwrap_or(&0) < names || cuts.len() == 1 {
        cuts.push(names);
    }
    cuts
}

/// The starts that cut the events into `slices` slices of about equal counts
/// (`slices - 1` of them, not decreasing): slice `s` holds the events starting in
/// `[bounds[s - 1], bounds[s])`, the first and last slices being open-ended.
fn slice_bounds(start_ps: &[i64], slices: usize) -> Vec<i64> {
    let mut sample: Vec<i64> = start_ps.iter().step_by(SAMPLE_EVERY).copied().collect();
    sample.sort_unstable();
    (1..slices).filter_map(|s| sample.get(sample.len() * s / slices).copied()).collect()
}

/// The ids of `run` (in start order) that start in `[from, to)` (`None`: unbounded).
fn piece_of(run: &Range<usize>, start_ps: &[i64], from: Option<i64>, to: Option<i64>) -> Range<usize> {
    let starts = &start_ps[run.clone()];
    let first = from.map_or(0, |from| starts.partition_point(|&t| t < from));
    let end = to.map_or(starts.len(), |to| starts.partition_point(|&t| t < to));
    run.start + first..run.start + end.max(first)
}

/// Hands the ids of `pieces` (ranges of ids in id order, each in start order) to
/// `emit` in time order (start, then id), merging them with a tree of losers.
///
/// A key orders a leaf's next event by start, then by leaf (pieces are in id order),
/// and names its leaf in its low 32 bits; an exhausted leaf's key is above every
/// other. Each node keeps the larger key of the match played there, so replaying a
/// leaf's path is a `min` and a `max` per node, with no branch on the keys.
fn merge_in_time_order(pieces: &[Range<usize>], start_ps: &[i64], mut emit: impl FnMut(usize)) {
    let mut heads: Vec<Range<usize>> = pieces.iter().filter(|p| !p.is_empty()).cloned().collect();
    let leaves = heads.len().next_power_of_two();
    let key_of = |leaf: usize, head: &Range<usize>| match start_ps.get(head.start) {
        Some(&start) if !head.is_empty() => (u128::from(signed_key(start)) << 32) | leaf as u128,
        _ => u128::MAX,
    };
    // Node `i` (1 ≤ i < leaves) holds the loser of the match between its children;
    // leaf `l` sits below node `(leaves + l) / 2`.
    let mut winners = vec![u128::MAX; 2 * leaves];
    for (leaf, head) in heads.iter().enumerate() {
        winners[leaves + leaf] = key_of(leaf, head);
    }
    let mut losers = vec![u128::MAX; leaves];
    for node in (1..leaves).rev() {
        let (a, b) = (winners[2 * node], winners[2 * node + 1]);
        (winners[node], losers[node]) = (a.min(b), a.max(b));
    }
    // The root's winner (with one leaf, the leaf itself).
    let mut winner = winners[1];
    drop(winners);
    while winner != u128::MAX {
        let leaf = (winner as u32) as usize;
        let Some(head) = heads.get_mut(leaf) else { break };
        emit(head.start);
        head.start += 1;
        winner = key_of(leaf, head);
        let mut node = (leaves + leaf) / 2;
        while node > 0 {
            let loser = losers[node];
            losers[node] = loser.max(winner);
            winner = loser.min(winner);
            node /= 2;
        }
    }
}

/// The key of a start that sorts as the start does.
fn signed_key(start_ps: i64) -> u64 {
    (start_ps as u64) ^ (1 << 63)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events in runs of random lengths, each run in start order (with ties and
    /// negative starts), named at random from `names` (at least 5; name 3 never
    /// occurs, name 0 is the most frequent).
    fn runs_of(events: usize, names: usize, spread: u64, seed: u64) -> (Vec<u32>, Vec<i64>, Vec<Range<usize>>) {
        let mut state = seed;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut name, mut start_ps, mut runs) = (Vec::new(), Vec::new(), Vec::new());
        while start_ps.len() < events {
            let first = start_ps.len();
            let len = (1 + next() % 700) as usize;
            let mut t = (next() % 1000) as i64 - 500;
            for _ in 0..len.min(events - first) {
                t += (next() % spread) as i64;
                start_ps.push(t);
                let pick = match next() % 10 {
                    choice @ 0..=5 => [0, 0, 0, 1, 2, 4][choice as usize],
                    _ => next() % names as u64,
                };
                name.push(if pick == 3 { 4 } else { pick as u32 });
            }
            runs.push(first..start_ps.len());
        }
        (name, start_ps, runs)
    }

    #[test]
    fn each_names_ids_are_in_start_then_id_order_whatever_the_slices_and_groups() {
        let cases = [
            (9, 5000, 20, 0x9E37_79B9_7F4A_7C15u64),
            (9, 20_000, 1, 7),
            (40, 3000, 1000, 11),
            (7, 2000, 3, 5),
            (700, 30_000, 50, 3),
        ];
        for (names, events, spread, seed) in cases {
            let (name, start_ps, runs) = runs_of(events, names, spread, seed);
            let one = build_in_slices(names, &name, &start_ps, &runs, 1, 1);
            for n in 0..names {
                let mut expected: Vec<u32> = (0..events as u32).filter(|&id| name[id as usize] as usize == n).collect();
                expected.sort_by_key(|&id| (start_ps[id as usize], id));
                let (from, to) = (one.0[n] as usize, one.0[n + 1] as usize);
                assert_eq!(one.1[from..to], expected[..], "name {n}, spread {spread}");
            }
            for (slices, groups) in [(2, 1), (3, 2), (7, 3), (9, 256), (64, 5), (1, 256)] {
                let other = build_in_slices(names, &name, &start_ps, &runs, slices, groups);
                assert!(other == one, "{names} names, {slices} slices, {groups} groups");
            }
        }
    }

    #[test]
    fn events_all_at_one_instant_keep_their_id_order() {
        let start_ps = vec![5; 3000];
        let name: Vec<u32> = (0..3000).map(|id| id % 2).collect();
        let runs: Vec<Range<usize>> = (0..30).map(|r| r * 100..(r + 1) * 100).collect();
        for groups in [1, 2] {
            let (offsets, postings) = build_in_slices(2, &name, &start_ps, &runs, 8, groups);
            assert_eq!(offsets, vec![0, 1500, 3000]);
            assert!(postings[..1500].iter().all(|id| id % 2 == 0) && postings[..1500].is_sorted());
            assert!(postings[1500..].iter().all(|id| id % 2 == 1) && postings[1500..].is_sorted());
        }
    }

    #[test]
    fn no_events_or_no_names_give_empty_postings() {
        assert_eq!(build_in_slices(4, &[], &[], &[], 8, 2), (vec![0; 5], vec![]), "no events");
        assert_eq!(build_in_slices(0, &[], &[], &[], 8, 2), (vec![0], vec![]), "no names");
        assert_eq!(
            build_in_slices(1, &[0], &[-3], &[Range { start: 0, end: 1 }], 8, 2),
            (vec![0, 1], vec![0]),
            "one event"
        );
    }

    #[test]
    fn parts_cover_every_name_once_with_balanced_counts() {
        // Counts 10, 0, 30, 10, 50: cumulative 0 10 10 40 50 100.
        let offsets = [0, 10, 10, 40, 50, 100];
        assert_eq!(part_cuts(&offsets, 1), vec![0, 5]);
        assert_eq!(part_cuts(&offsets, 2), vec![0, 4, 5]);
        assert_eq!(part_cuts(&offsets, 100), vec![0, 1, 3, 4, 5]);
        assert_eq!(part_cuts(&[0], 4), vec![0, 0], "no names: one empty part");
    }

    #[test]
    fn slice_bounds_cut_the_starts_into_about_equal_counts() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let start_ps: Vec<i64> = (0..100_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 1_000_000) as i64
            })
            .collect();
        let bounds = slice_bounds(&start_ps, 4);
        assert_eq!(bounds.len(), 3);
        let mut edges = vec![i64::MIN];
        edges.extend(&bounds);
        edges.push(i64::MAX);
        for slice in edges.windows(2) {
            let count = start_ps.iter().filter(|&&t| slice[0] <= t && t < slice[1]).count();
            assert!((20_000..30_000).contains(&count), "{count} events in {slice:?}");
        }
        assert!(slice_bounds(&start_ps, 1).is_empty());
    }
}
