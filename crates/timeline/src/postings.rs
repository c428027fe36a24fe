//! The postings: for every name, its event ids in time order (start, then id), built
//! on every thread.
//!
//! Names are cut into parts of about equal event counts. Each part owns one contiguous
//! range of the postings (its names' lists, one after another), so the parts are built
//! independently: a pass over the name column gathers the part's events as (start, id)
//! pairs into its names' slots (in id order), each name's slots are sorted, and the
//! ids are written out. Only the parts being built hold pairs (16 bytes for each of
//! their events); a sort over a name's pairs touches only them, never the start column.

use rayon::prelude::*;

/// Parts per thread: more parts than threads, so that no thread waits long for the
/// last one.
const PARTS_PER_THREAD: usize = 4;

/// The postings of events whose names are `name` and starts `start_ps` (both by event
/// id): `(offsets, postings)`, name `n`'s ids being `postings[offsets[n]..offsets[n +
/// 1]]`. `names` is the number of names; every entry of `name` is below it.
pub(crate) fn build_postings(names: usize, name: &[u32], start_ps: &[i64]) -> (Vec<u64>, Vec<u32>) {
    build_in_parts(names, name, start_ps, rayon::current_num_threads() * PARTS_PER_THREAD)
}

/// [`build_postings`] with the names cut into at most `parts` parts.
fn build_in_parts(names: usize, name: &[u32], start_ps: &[i64], parts: usize) -> (Vec<u64>, Vec<u32>) {
    let mut offsets = vec![0u64; names + 1];
    for &n in name {
        offsets[n as usize + 1] += 1;
    }
    for i in 1..offsets.len() {
        offsets[i] += offsets[i - 1];
    }
    let mut postings = vec![0u32; name.len()];
    let cuts = part_cuts(&offsets, parts);
    let mut jobs = Vec::with_capacity(cuts.len());
    let mut rest = postings.as_mut_slice();
    for names_range in cuts.windows(2) {
        let (from, to) = (names_range[0], names_range[1]);
        let len = (offsets[to] - offsets[from]) as usize;
        let (own, after) = std::mem::take(&mut rest).split_at_mut(len);
        rest = after;
        jobs.push((from, to, own));
    }
    jobs.into_par_iter().with_max_len(1).for_each(|(from, to, out)| {
        fill_part(from as u32..to as u32, &offsets[from..=to], name, start_ps, out);
    });
    (offsets, postings)
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

/// Writes the postings of the names `names` (whose offsets are `offsets`, one more
/// than names, the first at `out`'s start) into `out`.
fn fill_part(names: std::ops::Range<u32>, offsets: &[u64], name: &[u32], start_ps: &[i64], out: &mut [u32]) {
    let base = offsets[0];
    let mut cursor: Vec<usize> = offsets[..offsets.len() - 1].iter().map(|&o| (o - base) as usize).collect();
    let mut pairs = vec![(0i64, 0u32); out.len()];
    for (id, &n) in name.iter().enumerate() {
        if names.contains(&n) {
            let slot = &mut cursor[(n - names.start) as usize];
            // Event ids fit u32: the builder keeps the count below MAX_EVENTS.
            pairs[*slot] = (start_ps[id], id as u32);
            *slot += 1;
        }
    }
    for list in offsets.windows(2) {
        let (from, to) = ((list[0] - base) as usize, (list[1] - base) as usize);
        let own = &mut pairs[from..to];
        // Gathered in id order: a list is already sorted unless starts go back.
        if !own.is_sorted() {
            own.sort_unstable();
        }
    }
    for (slot, &(_, id)) in out.iter_mut().zip(&pairs) {
        *slot = id;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_names_ids_are_in_start_then_id_order_whatever_the_parts() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (names, events) = (9usize, 5000usize);
        let start_ps: Vec<i64> = (0..events).map(|_| (next() % 300) as i64 - 50).collect();
        // Name 3 never occurs; name 0 is most of the events.
        let name: Vec<u32> = (0..events).map(|_| [0, 0, 0, 1, 2, 4, 5, 6, 7, 8][(next() % 10) as usize]).collect();
        let one = build_in_parts(names, &name, &start_ps, 1);
        for n in 0..names {
            let mut expected: Vec<u32> = (0..events as u32).filter(|&id| name[id as usize] as usize == n).collect();
            expected.sort_by_key(|&id| (start_ps[id as usize], id));
            let (from, to) = (one.0[n] as usize, one.0[n + 1] as usize);
            assert_eq!(one.1[from..to], expected[..], "name {n}");
        }
        for parts in [2, 3, 7, 9, 64] {
            assert_eq!(build_in_parts(names, &name, &start_ps, parts), one, "{parts} parts");
        }
        assert_eq!(build_in_parts(4, &[], &[], 8), (vec![0; 5], vec![]), "no events");
        assert_eq!(build_in_parts(0, &[], &[], 8), (vec![0], vec![]), "no names");
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
}
