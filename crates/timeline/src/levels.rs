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
//! Levels are built bottom-up: level 0 from the events, every next level by merging
//! the `FACTOR` buckets below each of its buckets, so building costs O(events +
//! buckets). Runs too short to need them get no levels.

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

/// A non-empty bucket while building (groups are the buckets with enough events).
#[derive(Clone, Copy, Debug)]
struct Bucket {
    first: u32,
    count: u32,
    /// Longest event of the bucket other than its last (`None` for one event).
    longest_short: Option<u32>,
    /// Start of the first event: all events of the bucket start in the same aligned
    /// bucket, so this decides the bucket at the next level too.
    start_ps: i64,
}

/// Levels of a run whose events have these starts and durations (sorted, not
/// overlapping). Empty for short runs.
pub(crate) fn build_levels(starts: &[i64], durs: &[i64]) -> Vec<Level> {
    let n = starts.len().min(durs.len());
    if n <= MIN_EVENTS_FOR_LEVELS {
        return Vec::new();
    }
    let span_ps = starts[n - 1].saturating_add(durs[n - 1]).saturating_sub(starts[0]);
    let longer = |a: Option<u32>, b: u32| match a {
        Some(a) if durs[a as usize] >= durs[b as usize] => a,
        _ => b,
    };
    // Level 0 from the events.
    let mut width = BASE_WIDTH_PS;
    let mut buckets: Vec<Bucket> = Vec::with_capacity(n / 2 + 1);
    let mut current = Bucket { first: 0, count: 1, longest_short: None, start_ps: starts[0] };
    let mut current_start = aligned_start(starts[0], width);
    // The longest event of the current bucket but its last, and its duration.
    let mut longest_dur = i64::MIN;
    for (i, (&start, &dur)) in starts[1..n].iter().zip(&durs[..n - 1]).enumerate() {
        // Event `i + 1` starts at `start`; `dur` is that of event `i`, the current
        // bucket's last.
        if in_bucket(start, current_start, width) {
            // The earliest of equally long events.
            if current.longest_short.is_none() || dur > longest_dur {
                current.longest_short = Some(i as u32);
                longest_dur = dur;
            }
            current.count += 1;
        } else {
            buckets.push(current);
            current = Bucket { first: i as u32 + 1, count: 1, longest_short: None, start_ps: start };
            current_start = aligned_start(start, width);
        }
    }
    buckets.push(current);
    let mut levels = vec![level_of(width, &buckets)];
    // Coarser levels until one bucket is at least as wide as the run.
    while width <= span_ps {
        let Some(next) = width.checked_mul(FACTOR) else { break };
        width = next;
        // Merged in place: the merged buckets are never more than those read.
        let mut kept = 0usize;
        let mut bucket_start = 0i128;
        for read in 0..buckets.len() {
            let b = buckets[read];
            match kept.checked_sub(1).map(|last| &mut buckets[last]) {
                Some(m) if in_bucket(b.start_ps, bucket_start, width) => {
                    let mut longest = longer(m.longest_short, m.first + m.count - 1);
                    if let Some(inner) = b.longest_short {
                        longest = longer(Some(longest), inner);
                    }
                    m.longest_short = Some(longest);
                    m.count += b.count;
                }
                _ => {
                    bucket_start = aligned_start(b.start_ps, width);
                    buckets[kept] = b;
                    kept += 1;
                }
            }
        }
        buckets.truncate(kept);
        levels.push(level_of(width, &buckets));
    }
    levels
}

/// Start of the aligned bucket of width `width_ps` that holds `start_ps`, exact (it
/// may lie below `i64::MIN`).
fn aligned_start(start_ps: i64, width_ps: i64) -> i128 {
    i128::from(start_ps.div_euclid(width_ps)) * i128::from(width_ps)
}

/// Whether `start_ps`, not before the bucket starting at `bucket_start_ps` (as
/// [`aligned_start`] gives it), lies in that bucket of width `width_ps`: a subtraction
/// instead of a division per event.
fn in_bucket(start_ps: i64, bucket_start_ps: i128, width_ps: i64) -> bool {
    i128::from(start_ps) - bucket_start_ps < i128::from(width_ps)
}

fn level_of(width_ps: i64, buckets: &[Bucket]) -> Level {
    let groups = buckets
        .iter()
        .filter(|b| b.count >= MIN_GROUP)
        .map(|b| (b.first, b.count, b.longest_short.unwrap_or(b.first)))
        .collect();
    Level { width_ps, groups }
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

    #[test]
    fn bucket_membership_agrees_with_division_to_the_ends_of_the_range() {
        let widths = [1, 3, 7, BASE_WIDTH_PS, BASE_WIDTH_PS * FACTOR.pow(20), i64::MAX / 3, i64::MAX];
        let mut starts =
            vec![i64::MIN, i64::MIN + 1, -BASE_WIDTH_PS - 1, -1, 0, 1, BASE_WIDTH_PS, i64::MAX - 1, i64::MAX];
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for _ in 0..200 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            starts.push(seed as i64);
            starts.push((seed % 1_000_000) as i64 - 500_000);
        }
        for &width in &widths {
            for &first in &starts {
                let bucket_start = aligned_start(first, width);
                for &later in starts.iter().filter(|&&s| s >= first) {
                    let same = first.div_euclid(width) == later.div_euclid(width);
                    assert_eq!(in_bucket(later, bucket_start, width), same, "{first} {later} width {width}");
                }
            }
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
