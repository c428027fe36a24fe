//! Which stretch of the samples each session gets. Round `r`'s window opens when the
//! round is due and is written at the first of:
//! - its traces are in: a framework or GPU trace of the round was filed, none is still
//!   coming, and a second has passed since the last one (other processes' traces of the
//!   round land within it); the window ends at the last one filed;
//! - round `r + 1` is due (`--every`): the window ends there;
//! - the job exits: the window ends then.
//!
//! A round asked for on demand ([`crate::schedule::is_asked`]) opens beside the
//! scheduled ones, ends no other, and is written when its traces are in, or at its
//! `until` where nothing of it was traced.
//!
//! So a framework's trace always lies inside its session's samples (PyTorch starts its
//! trace at a poll seconds after the round is due), and a job nothing else traces
//! (plain Python) is sampled from launch to exit, or round by round with `--every`. Pure
//! bookkeeping over Unix-epoch nanoseconds, unit-tested without a job.

/// One round's window of samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleWindow {
    /// The round (and so the session) it belongs to.
    pub round: u32,
    /// Its start, Unix epoch nanoseconds.
    pub begin_ns: i64,
    /// Its end, Unix epoch nanoseconds (until it is written: the last trace filed).
    pub end_ns: i64,
}

#[derive(Debug)]
struct Open {
    window: SampleWindow,
    /// A trace of the round was filed.
    traced: bool,
    /// An asked round's end where nothing of it is traced, Unix epoch nanoseconds.
    until_ns: Option<i64>,
}

/// The windows not yet written.
#[derive(Debug, Default)]
pub struct SampleWindows {
    open: Vec<Open>,
    /// The next round that may open (rounds open once, in order).
    next_round: u32,
}

/// How long after the last trace of a round its window waits for more.
const GRACE_NS: i64 = 1_000_000_000;

impl SampleWindows {
    /// Round `round` is due at `now_ns`: opens its window unless it has opened before, and
    /// returns the windows of earlier rounds, ended now.
    pub fn open(&mut self, round: u32, now_ns: i64) -> Vec<SampleWindow> {
        if round < self.next_round {
            return Vec::new();
        }
        self.next_round = round.saturating_add(1);
        let (earlier, asked): (Vec<Open>, Vec<Open>) =
            std::mem::take(&mut self.open).into_iter().partition(|o| o.until_ns.is_none());
        self.open = asked;
        let window = SampleWindow { round, begin_ns: now_ns, end_ns: now_ns };
        self.open.push(Open { window, traced: false, until_ns: None });
        earlier.into_iter().map(|o| SampleWindow { end_ns: o.window.end_ns.max(now_ns), ..o.window }).collect()
    }

    /// Asked round `round` opens at `now_ns`; with no trace of it, it ends at `until_ns`.
    pub fn open_asked(&mut self, round: u32, now_ns: i64, until_ns: i64) {
        let window = SampleWindow { round, begin_ns: now_ns, end_ns: now_ns };
        self.open.push(Open { window, traced: false, until_ns: Some(until_ns) });
    }

    /// Whether `round`'s window is open (not yet written).
    pub fn is_open(&self, round: u32) -> bool {
        self.open.iter().any(|o| o.window.round == round)
    }

    /// A trace of `round` was filed at `now_ns`.
    pub fn traced(&mut self, round: u32, now_ns: i64) {
        if let Some(open) = self.open.iter_mut().find(|o| o.window.round == round) {
            open.traced = true;
            open.window.end_ns = open.window.end_ns.max(now_ns);
        }
    }

    /// The windows whose traces are in by `now_ns` (`busy`: a trace of the round is still
    /// coming), removed.
    pub fn ended(&mut self, now_ns: i64, busy: impl Fn(u32) -> bool) -> Vec<SampleWindow> {
        let over = |o: &Open| match (o.traced, o.until_ns) {
            (true, _) => now_ns >= o.window.end_ns.saturating_add(GRACE_NS),
            (false, Some(until_ns)) => now_ns >= until_ns,
            (false, None) => false,
        };
        let (ended, open): (Vec<Open>, Vec<Open>) =
            std::mem::take(&mut self.open).into_iter().partition(|o| over(o) && !busy(o.window.round));
        self.open = open;
        ended
            .into_iter()
            .map(|o| match o.traced {
                true => o.window,
                false => SampleWindow { end_ns: now_ns, ..o.window },
            })
            .collect()
    }

    /// Every window, ended at `now_ns` (or at its last trace, if that is later), removed.
    pub fn close_all(&mut self, now_ns: i64) -> Vec<SampleWindow> {
        std::mem::take(&mut self.open)
            .into_iter()
            .map(|o| SampleWindow { end_ns: o.window.end_ns.max(now_ns), ..o.window })
            .collect()
    }

    /// The earliest time a window still needs samples from (`now_ns` when none is open:
    /// nothing before now will be written).
    pub fn oldest_needed(&self, now_ns: i64) -> i64 {
        self.open.iter().map(|o| o.window.begin_ns).min().unwrap_or(now_ns).min(now_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn a_window_waits_for_its_traces() {
        let mut windows = SampleWindows::default();
        assert!(windows.open(0, 10 * S).is_empty());
        assert!(windows.open(0, 11 * S).is_empty(), "a round opens once");
        assert_eq!(windows.oldest_needed(20 * S), 10 * S);
        assert!(windows.ended(60 * S, |_| false).is_empty(), "no trace yet: the samples go on");
        windows.traced(0, 17 * S);
        assert!(windows.ended(17 * S, |_| false).is_empty(), "another process's trace may follow");
        assert!(windows.ended(19 * S, |_| true).is_empty(), "a trace of round 0 is still coming");
        assert_eq!(windows.ended(19 * S, |_| false), [SampleWindow { round: 0, begin_ns: 10 * S, end_ns: 17 * S }]);
        assert_eq!(windows.oldest_needed(20 * S), 20 * S);
    }

    #[test]
    fn an_asked_window_lives_beside_the_schedule_and_ends_by_itself() {
        const ASKED: u32 = crate::schedule::FIRST_ASKED_ROUND;
        let mut windows = SampleWindows::default();
        windows.open(0, 0);
        windows.open_asked(ASKED, 2 * S, 5 * S);
        assert!(windows.is_open(ASKED));
        assert_eq!(windows.open(1, 3 * S), [SampleWindow { round: 0, begin_ns: 0, end_ns: 3 * S }], "round 0 only");
        assert!(windows.is_open(ASKED));
        assert!(windows.ended(4 * S, |_| false).is_empty());
        assert!(windows.ended(6 * S, |r| r == ASKED).is_empty(), "its trace is coming");
        assert_eq!(
            windows.ended(7 * S, |_| false),
            [SampleWindow { round: ASKED, begin_ns: 2 * S, end_ns: 7 * S }],
            "untraced: ends at its time"
        );
        windows.open_asked(ASKED + 1, 8 * S, 9 * S);
        windows.traced(ASKED + 1, 12 * S);
        assert!(windows.ended(10 * S, |_| false).is_empty(), "traced: waits for the others' traces");
        assert_eq!(
            windows.ended(13 * S, |_| false),
            [SampleWindow { round: ASKED + 1, begin_ns: 8 * S, end_ns: 12 * S }]
        );
        assert_eq!(windows.close_all(14 * S), [SampleWindow { round: 1, begin_ns: 3 * S, end_ns: 14 * S }]);
    }

    #[test]
    fn the_next_round_or_the_exit_ends_a_window() {
        let mut windows = SampleWindows::default();
        windows.open(0, 0);
        assert_eq!(windows.open(2, 5 * S), [SampleWindow { round: 0, begin_ns: 0, end_ns: 5 * S }]);
        assert!(windows.open(1, 6 * S).is_empty(), "round 1 came after round 2");
        assert_eq!(windows.close_all(7 * S), [SampleWindow { round: 2, begin_ns: 5 * S, end_ns: 7 * S }]);
        assert!(windows.close_all(8 * S).is_empty());
    }
}
