//! Traces Kineto dropped, and asking for them again.
//!
//! Kineto starts an on-demand trace only if its profiler thread, which wakes once a
//! second, takes the request up within about two seconds of receiving it: without an
//! explicit start time the trace is due at receipt + warmup + 2 s, and one taken up
//! with less than the warmup left is dropped ("Not starting tracing - insufficient time
//! for warmup"). On a busy machine the thread oversleeps now and then, and the trace
//! never comes. A process whose profiler is busy does not poll for a config, so a poll
//! for one from a process handed a timed trace at least [`DROPPED_AFTER`] before, with
//! nothing written yet, means the trace was dropped: its round is offered again at once,
//! up to [`MAX_ATTEMPTS`] times in all.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::kineto_daemon::{TraceStarted, kineto_output_path};

/// How long after a config was sent a poll from the same process means Kineto dropped
/// it: longer than Kineto takes to start a trace it accepts (about 2 s), shorter than
/// its 5 s between polls.
pub const DROPPED_AFTER: Duration = Duration::from_secs(3);
/// Configs sent for one trace, at most.
pub const MAX_ATTEMPTS: u32 = 3;

/// What is said of `started`, a config sent again because Kineto dropped the one before.
pub fn asked_again(started: &TraceStarted) -> String {
    format!(
        "Kineto dropped the trace (its profiler thread took the request up too late, as on a busy machine): asked \
         again ({} of {MAX_ATTEMPTS})",
        started.attempt
    )
}

/// The timed traces handed out and not yet known to be written, by process.
#[derive(Debug, Default)]
pub struct HandedOut {
    by_pid: HashMap<i32, TraceStarted>,
}

impl HandedOut {
    /// `started` was sent for a trace with a duration (a trace of whole steps waits for
    /// the job's next step, and its process polls meanwhile: [`HandedOut::forget`] it).
    pub fn sent(&mut self, started: &TraceStarted) {
        self.by_pid.insert(started.pid, started.clone());
    }

    /// Forgets what `pid` was handed (a trace of steps, or a process gone).
    pub fn forget(&mut self, pid: i32) {
        self.by_pid.remove(&pid);
    }

    /// Process `pid` polls for a config at `now` while tracing round `tracing` (as the
    /// schedule has it): the trace it dropped, where it did and may be asked again.
    pub fn dropped(&mut self, pid: i32, tracing: Option<u32>, now: Instant) -> Option<TraceStarted> {
        let handed = self.by_pid.get(&pid)?;
        let dropped = tracing == Some(handed.round)
            && now >= handed.at + DROPPED_AFTER
            && handed.attempt < MAX_ATTEMPTS
            && !kineto_output_path(&handed.log_file, pid).exists();
        if !dropped {
            return None;
        }
        self.by_pid.remove(&pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(dir: &std::path::Path, at: Instant, attempt: u32) -> TraceStarted {
        TraceStarted { pid: 42, round: 3, log_file: dir.join("t.json"), at, attempt }
    }

    #[test]
    fn a_poll_soon_after_or_for_another_round_or_with_a_file_is_no_drop() {
        let dir = tempfile::tempdir().expect("temp dir");
        let t0 = Instant::now();
        let mut handed = HandedOut::default();
        handed.sent(&started(dir.path(), t0, 1));
        assert_eq!(handed.dropped(42, Some(3), t0 + Duration::from_secs(1)), None, "still starting");
        assert_eq!(handed.dropped(42, Some(4), t0 + DROPPED_AFTER), None, "another round");
        assert_eq!(handed.dropped(42, None, t0 + DROPPED_AFTER), None, "over");
        assert_eq!(handed.dropped(7, Some(3), t0 + DROPPED_AFTER), None, "another process");
        std::fs::write(dir.path().join("t_42.json"), b"{").expect("a trace being written");
        assert_eq!(handed.dropped(42, Some(3), t0 + DROPPED_AFTER), None, "being written");
    }

    #[test]
    fn a_poll_with_nothing_written_is_a_drop_until_the_last_attempt() {
        let dir = tempfile::tempdir().expect("temp dir");
        let t0 = Instant::now();
        let mut handed = HandedOut::default();
        handed.sent(&started(dir.path(), t0, 1));
        let again = handed.dropped(42, Some(3), t0 + DROPPED_AFTER).expect("dropped");
        assert_eq!((again.round, again.attempt), (3, 1));
        assert_eq!(handed.dropped(42, Some(3), t0 + DROPPED_AFTER), None, "told once");
        handed.sent(&started(dir.path(), t0, MAX_ATTEMPTS));
        assert_eq!(handed.dropped(42, Some(3), t0 + DROPPED_AFTER), None, "no attempt left");
        handed.sent(&started(dir.path(), t0, 1));
        handed.forget(42);
        assert_eq!(handed.dropped(42, Some(3), t0 + DROPPED_AFTER), None, "forgotten");
    }
}
