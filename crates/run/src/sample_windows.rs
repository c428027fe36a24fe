//! Which stretch of the samples each session gets. Round `r`'s window opens when the
//! round is due and lasts `--duration`; a framework trace of the round filed later
//! stretches it to then, so the samples cover the trace (PyTorch starts its trace at
//! its next poll, a few seconds after the round is due). A window is written once it
//! has ended and its round has no trace still coming, or when the job exits. Pure
//! bookkeeping over Unix-epoch nanoseconds, unit-tested without a job.

/// One round's window of samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleWindow {
    /// The round (and so the session) it belongs to.
    pub round: u32,
    /// Its start, Unix epoch nanoseconds.
    pub begin_ns: i64,
    /// Its end, Unix epoch nanoseconds.
    pub end_ns: i64,
}

/// The windows not yet written.
#[derive(Debug)]
pub struct SampleWindows {
    duration_ns: i64,
    open: Vec<SampleWindow>,
    /// The next round that may open (rounds open once, in order).
    next_round: u32,
}

/// How long past its end a window waits for a trace of its round to be filed (the
/// files land a tick or so after they are complete).
const GRACE_NS: i64 = 1_000_000_000;

impl SampleWindows {
    /// No window yet; each lasts `duration_ns` at least.
    pub fn new(duration_ns: i64) -> SampleWindows {
        SampleWindows { duration_ns: duration_ns.max(1), open: Vec::new(), next_round: 0 }
    }

    /// Round `round` is due at `now_ns`: opens its window unless it has opened before.
    pub fn open(&mut self, round: u32, now_ns: i64) {
        if round < self.next_round {
            return;
        }
        self.next_round = round.saturating_add(1);
        self.open.push(SampleWindow { round, begin_ns: now_ns, end_ns: now_ns.saturating_add(self.duration_ns) });
    }

    /// A trace of `round` was filed at `now_ns`: the round's window lasts at least until then.
    pub fn extend(&mut self, round: u32, now_ns: i64) {
        if let Some(window) = self.open.iter_mut().find(|w| w.round == round) {
            window.end_ns = window.end_ns.max(now_ns);
        }
    }

    /// The windows that ended (with their grace) by `now_ns` and whose round has no
    /// trace still coming (`busy`), removed.
    pub fn ended(&mut self, now_ns: i64, busy: impl Fn(u32) -> bool) -> Vec<SampleWindow> {
        let (ended, open) = std::mem::take(&mut self.open)
            .into_iter()
            .partition(|w| now_ns >= w.end_ns.saturating_add(GRACE_NS) && !busy(w.round));
        self.open = open;
        ended
    }

    /// Every window, ending at `now_ns` at the latest (the job exited), removed.
    pub fn close_all(&mut self, now_ns: i64) -> Vec<SampleWindow> {
        let mut windows = std::mem::take(&mut self.open);
        for window in &mut windows {
            window.end_ns = window.end_ns.min(now_ns).max(window.begin_ns);
        }
        windows
    }

    /// The earliest time a window still needs samples from (`now_ns` when none is open:
    /// nothing before now will be written).
    pub fn oldest_needed(&self, now_ns: i64) -> i64 {
        self.open.iter().map(|w| w.begin_ns).min().unwrap_or(now_ns).min(now_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn a_window_lasts_its_duration_and_waits_for_its_traces() {
        let mut windows = SampleWindows::new(2 * S);
        windows.open(0, 10 * S);
        windows.open(0, 11 * S);
        assert_eq!(windows.oldest_needed(20 * S), 10 * S);
        assert!(windows.ended(12 * S, |_| false).is_empty(), "not past its grace yet");
        assert!(windows.ended(13 * S, |_| true).is_empty(), "a trace of round 0 is still coming");
        windows.extend(0, 17 * S);
        assert!(windows.ended(17 * S, |_| false).is_empty());
        assert_eq!(windows.ended(18 * S, |_| false), [SampleWindow { round: 0, begin_ns: 10 * S, end_ns: 17 * S }]);
        assert_eq!(windows.oldest_needed(20 * S), 20 * S);
        windows.open(0, 30 * S);
        assert!(windows.close_all(40 * S).is_empty(), "a round opens once");
    }

    #[test]
    fn exiting_cuts_every_open_window() {
        let mut windows = SampleWindows::new(10 * S);
        windows.open(0, 0);
        windows.open(2, 5 * S);
        assert_eq!(
            windows.close_all(7 * S),
            [
                SampleWindow { round: 0, begin_ns: 0, end_ns: 7 * S },
                SampleWindow { round: 2, begin_ns: 5 * S, end_ns: 7 * S }
            ]
        );
        windows.open(1, 8 * S);
        assert!(windows.close_all(9 * S).is_empty(), "round 1 came after round 2");
    }
}
