//! The precomputed levels of detail of one run (the events of one track at one depth).
//!
//! Level `k` cuts time into aligned buckets `[j·w, (j+1)·w)` of width
//! `w = BASE_WIDTH_PS · FACTOR^k` and keeps, for every bucket where at least
//! [`MIN_GROUP`] events start, one *group*: its first event, its event count and the
//! longest of its events but the last. Events of a run never overlap, so every event of
//! a bucket but the last ends inside the bucket and is shorter than `w`; only the last
//! can be long. A viewer at resolution `r` reads the coarsest level with `w ≤ r`: a
//! group is then one merged run plus possibly its last event, and the events outside
//! groups are few (fewer than `MIN_GROUP` per bucket), so the work is bounded by the
//! number of buckets in the window, about `FACTOR` per pixel, whatever the event count.
//!
//! Levels are built in one pass over the events: each level keeps its one open
//! bucket, and a bucket that closes is merged into the open bucket of the level above
//! (or closes that one in turn), so building costs O(events + buckets) and never
//! divides by a level's width: bucket `j` of level `k + 1` holds buckets `FACTOR·j`
//! to `FACTOR·j + FACTOR - 1` of level `k`, a shift. Runs too short to need levels
//! get none.

/// Width of level 0's buckets (100 ns).
pub(crate) const BASE_WIDTH_PS: i64 = 100_000;
/// How much wider each level's buckets are than the level below.
pub(crate) const FACTOR: i64 = 4;
/// Fewest events a bucket needs to be stored as a group.
pub(crate) const MIN_GROUP: u32 = 4;
/// Runs with at most this many events get no levels: scanning them is always cheap.
pub(crate) const MIN_EVENTS_FOR_LEVELS: usize = 64;

/// The groups of one level, relative to the run's first event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Level {
    /// Bucket width in picoseconds.
    pub(crate) width_ps: i64,
    /// The groups: (first event, event count, longest event but the last), as positions
    /// in the run, sorted by first event.
    pub(crate) groups: Vec<(u32, u32, u32)>,
}

/// `FACTOR` as a shift: a bucket's number at the next level is its number shifted
/// right by this much (an arithmetic shift rounds towards minus infinity, as the
/// buckets do).
const FACTOR_SHIFT: u32 = FACTOR.trailing_zeros();
const _: () = assert!(FACTOR == 1 << FACTOR_SHIFT, "FACTOR is a power of two");

/// A non-empty bucket while building (groups are the buckets with enough events).
#[derive(Clone, Copy, Debug)]
struct Bucket {
    first: u32,
    count: u32,
    /// Longest event of the bucket other than its last (`None` for one event).
    longest_short: Option<u32>,
    /// Its number at its level: it spans `[number·width, (number + 1)·width)`.
    number: i64,
}

/// Levels of a run whose events have these starts and durations (sorted, not
/// overlapping). Empty for short runs.
pub(crate) fn build_levels(starts: &[i64], durs: &[i64]) -> Vec<Level> {
    let n = starts.len().min(durs.len());
    if n <= MIN_EVENTS_FOR_LEVELS {
        return Vec::new();
    }
    let span_ps = starts[n - 1].saturating_add(durs[n - 1]).saturating_sub(starts[0]);
    // Coarser levels until one bucket is at least as wide as the run.
    let mut levels = vec![Level { width_ps: BASE_WIDTH_PS, groups: Vec::new() }];
    let mut width = BASE_WIDTH_PS;
    while width <= span_ps {
        let Some(next) = width.checked_mul(FACTOR) else { break };
        width = next;
        levels.push(Level { width_ps: width, groups: Vec::new() });
    }
    let mut builder = LevelBuilder { durs, levels, open: Vec::new() };
    builder.open.resize(builder.levels.len(), None);

    // Level 0 from the events.
    let bucket_end = |number: i64| (i128::from(number) + 1) * i128::from(BASE_WIDTH_PS);
    let mut current = Bucket { first: 0, count: 1, longest_short: None, number: starts[0].div_euclid(BASE_WIDTH_PS) };
    let mut current_end = bucket_end(current.number);
    // The longest event of the current bucket but its last, and its duration.
    let mut longest_dur = i64::MIN;
    for (i, (&start, &dur)) in starts[1..n].iter().zip(&durs[..n - 1]).enumerate() {
        // Event `i + 1` starts at `start`; `dur` is that of event `i`, the current
        // bucket's last.
        if i128::from(start) < current_end {
            // The earliest of equally long events.
            if current.longest_short.is_none() || dur > longest_dur {
                current.longest_short = Some(i as u32);
                longest_dur = dur;
            }
            current.count += 1;
        } else {
            builder.close(0, current);
            let number = start.div_euclid(BASE_WIDTH_PS);
            current = Bucket { first: i as u32 + 1, count: 1, longest_short: None, number };
            current_end = bucket_end(number);
        }
    }
    builder.close(0, current);
    for level in 1..builder.levels.len() {
        if let Some(bucket) = builder.open[level].take() {
            builder.close(level, bucket);
        }
    }
    builder.levels
}

/// The levels being built and the open bucket of each level above level 0.
struct LevelBuilder<'a> {
    durs: &'a [i64],
    levels: Vec<Level>,
    open: Vec<Option<Bucket>>,
}

impl LevelBuilder<'_> {
    /// Closes `bucket` of `level`: keeps it as a group if it has enough events and
    /// merges it into the level above, closing that level's open bucket when `bucket`
    /// lies in a later one (and so on upwards).
    fn close(&mut self, level: usize, bucket: Bucket) {
        let (mut level, mut bucket) = (level, bucket);
        loop {
            if bucket.count >= MIN_GROUP {
                let group = (bucket.first, bucket.count, bucket.longest_short.unwrap_or(bucket.first));
                self.levels[level].groups.push(group);
            }
            let Some(slot) = self.open.get_mut(level + 1) else { return };
            let number = bucket.number >> FACTOR_SHIFT;
            match slot {
                Some(open) if open.number == number => {
                    let durs = self.durs;
                    let longer = |a: u32, b: u32| if durs[a as usize] >= durs[b as usize] { a } else { b };
                    let last = open.first + open.count - 1;
                    let mut longest = open.longest_short.map_or(last, |inner| longer(inner, last));
                    if let Some(inner) = bucket.longest_short {
                        longest = longer(longest, inner);
                    }
                    open.longest_short = Some(longest);
                    open.count += bucket.count;
                    return;
                }
                _ => match slot.replace(Bucket { number, ..bucket }) {
                    Some(closed) => (level, bucket) = (level + 1, closed),
                    None => return,
                },
            }
        }
    }
}

/// Index of the level to read at `resolution_ps`: the coarsest whose buckets are no
/// wider than the resolution, or `None` when even level 0's are wider.
pub(crate) fn level_for(widths: impl Iterator<Item = i64>, resolution_ps: i64) -> Option<usize> {
    widths.take_while(|&w| w <= resolution_ps).count().checked_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of `n` back-to-back events of `dur` ps starting at 0, with every 10th ten
    /// times longer.
    fn run(n: usize, dur: i64) -> (Vec<i64>, Vec<i64>) {
        let (mut starts, mut durs) = (Vec::new(), Vec::new());
        let mut t = 0;
        for i in 0..n {
            let d = if i % 10 == 9 { dur * 10 } else { dur };
            starts.push(t);
            durs.push(d);
            t += d;
        }
        (starts, durs)
    }

    #[test]
    fn groups_cover_whole_buckets_and_name_the_longest_inner_event() {
        let (starts, durs) = run(1000, 10_000); // 10 ns events, 100 ns buckets at level 0
        let levels = build_levels(&starts, &durs);
        assert!(levels.len() > 3);
        for (k, level) in levels.iter().enumerate() {
            assert_eq!(level.width_ps, BASE_WIDTH_PS * FACTOR.pow(k as u32));
            for &(first, count, longest) in &level.groups {
                assert!(count >= MIN_GROUP);
                let (first, end) = (first as usize, (first + count) as usize);
                let bucket = starts[first].div_euclid(level.width_ps);
                assert!(starts[first..end].iter().all(|s| s.div_euclid(level.width_ps) == bucket));
                if first > 0 {
                    assert_ne!(starts[first - 1].div_euclid(level.width_ps), bucket);
                }
                if end < starts.len() {
                    assert_ne!(starts[end].div_euclid(level.width_ps), bucket);
                }
                let max_inner = durs[first..end - 1].iter().max().copied();
                assert_eq!(Some(durs[longest as usize]), max_inner);
                assert!((first..end - 1).contains(&(longest as usize)));
                assert!(durs[first..longest as usize].iter().all(|&d| d < durs[longest as usize]), "the earliest");
                assert!(durs[first..end - 1].iter().all(|&d| d < level.width_ps));
            }
        }
        let last = levels.last().expect("levels");
        assert!(last.width_ps > starts[999] + durs[999]);
    }

    /// The levels by their definition: every level's events cut by division into
    /// buckets, each bucket of at least `MIN_GROUP` events a group.
    fn levels_by_definition(starts: &[i64], durs: &[i64]) -> Vec<Level> {
        let span = starts[starts.len() - 1].saturating_add(durs[durs.len() - 1]).saturating_sub(starts[0]);
        let mut widths = vec![BASE_WIDTH_PS];
        while let Some(next) = widths.last().filter(|&&w| w <= span).and_then(|w| w.checked_mul(FACTOR)) {
            widths.push(next);
        }
        let levels = widths.into_iter().map(|width_ps| {
            let mut groups = Vec::new();
            let mut first = 0;
            while first < starts.len() {
                let bucket = starts[first].div_euclid(width_ps);
                let end = first + starts[first..].iter().take_while(|s| s.div_euclid(width_ps) == bucket).count();
                if end - first >= MIN_GROUP as usize {
                    // The earliest of the longest events but the last.
                    let longest = (first..end - 1).rev().max_by_key(|&i| durs[i]).unwrap_or(first);
                    groups.push((first as u32, (end - first) as u32, longest as u32));
                }
                first = end;
            }
            Level { width_ps, groups }
        });
        levels.collect()
    }

    #[test]
    fn levels_built_in_one_pass_are_those_of_the_definition() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        // Dense and sparse runs, with gaps, at negative times and at both ends of
        // the range of starts.
        let origins = [0, -7_000_000_123, i64::MIN, i64::MAX - 20_000_000_000, 123_456_789_012_345];
        for (case, &origin) in origins.iter().cycle().take(40).enumerate() {
            let (mut starts, mut durs) = (Vec::new(), Vec::new());
            let mut t = origin;
            let spread = [3_000, 40_000, 400_000, 30_000_000][case % 4];
            for _ in 0..(65 + next(3000)) {
                let dur = next(spread) as i64;
                let Some(end) = t.checked_add(dur) else { break };
                starts.push(t);
                durs.push(dur);
                let gap = if next(50) == 0 { next(5_000_000_000) } else { next(spread / 2 + 1) };
                match end.checked_add(gap as i64) {
                    Some(later) => t = later,
                    None => break,
                }
            }
            if starts.len() <= MIN_EVENTS_FOR_LEVELS {
                continue;
            }
            assert_eq!(build_levels(&starts, &durs), levels_by_definition(&starts, &durs), "case {case}");
        }
    }

    #[test]
    fn short_runs_have_no_levels() {
        let (starts, durs) = run(MIN_EVENTS_FOR_LEVELS, 1000);
        assert!(build_levels(&starts, &durs).is_empty());
    }

    #[test]
    fn the_level_read_is_the_coarsest_not_wider_than_the_resolution() {
        let widths = [100, 400, 1600];
        assert_eq!(level_for(widths.into_iter(), 99), None);
        assert_eq!(level_for(widths.into_iter(), 100), Some(0));
        assert_eq!(level_for(widths.into_iter(), 1599), Some(1));
        assert_eq!(level_for(widths.into_iter(), 1_000_000), Some(2));
    }
}
