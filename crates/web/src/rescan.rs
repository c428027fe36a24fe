//! When to discover the runs again: at most once per interval, one scan at a time, and
//! never making a request wait long for it.
//!
//! A log directory grows while training runs (TensorBoard rescans its log directory
//! too), so `/api/runs` asks [`Rescan::begin`] whether a scan is due. The scan itself
//! runs on a blocking thread (a directory walk over a network file system can be slow);
//! a request waits for it at most [`Rescan::WAIT`] and otherwise answers with the runs
//! known so far — the scan goes on and the next request sees its result.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// How often the runs are discovered again by default.
pub const DEFAULT_RESCAN_INTERVAL: Duration = Duration::from_secs(5);

/// The rescan schedule of one server.
pub(crate) struct Rescan {
    interval: Duration,
    schedule: Mutex<Schedule>,
    /// Counts finished scans; waiters watch it change.
    finished: watch::Sender<u64>,
}

/// When the last scan started and whether one is running.
struct Schedule {
    last_start: Instant,
    running: bool,
}

/// What a request should do about a rescan.
pub(crate) enum Due {
    /// Nothing: the last scan is recent enough.
    No,
    /// Start the scan (this request was the first to find it due), then wait on `done`.
    Start(Finished),
    /// A scan is running: wait on `done`.
    Running(Finished),
}

/// Completes when the scan running (or about to start) has finished.
pub(crate) struct Finished(watch::Receiver<u64>);

impl Finished {
    /// Waits for the scan to finish, at most [`Rescan::WAIT`].
    pub(crate) async fn wait(mut self) {
        let _ = tokio::time::timeout(Rescan::WAIT, self.0.changed()).await;
    }
}

impl Rescan {
    /// The longest a request waits for a scan before answering with the runs it has.
    pub(crate) const WAIT: Duration = Duration::from_secs(1);

    /// A schedule with scans at most every `interval` (zero: on every request), the
    /// first one due an interval from now (the server has just discovered its runs).
    pub(crate) fn new(interval: Duration) -> Rescan {
        Rescan {
            interval,
            schedule: Mutex::new(Schedule { last_start: Instant::now(), running: false }),
            finished: watch::channel(0).0,
        }
    }

    /// Whether a scan is due, running, or neither; when due it counts as started now,
    /// and the caller must run it and then call [`Rescan::end`] (also when it fails).
    pub(crate) fn begin(&self) -> Due {
        let mut schedule = self.schedule.lock().unwrap_or_else(PoisonError::into_inner);
        let finished = Finished(self.finished.subscribe());
        if schedule.running {
            Due::Running(finished)
        } else if schedule.last_start.elapsed() >= self.interval {
            schedule.running = true;
            schedule.last_start = Instant::now();
            Due::Start(finished)
        } else {
            Due::No
        }
    }

    /// Marks the running scan finished and wakes its waiters.
    pub(crate) fn end(&self) {
        self.schedule.lock().unwrap_or_else(PoisonError::into_inner).running = false;
        self.finished.send_modify(|count| *count += 1);
    }
}

/// Calls [`Rescan::end`] when dropped: a scan task that panics or is cancelled with the
/// runtime still lets the next request start another.
pub(crate) struct EndOnDrop<'a>(pub(crate) &'a Rescan);

impl Drop for EndOnDrop<'_> {
    fn drop(&mut self) {
        self.0.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_scan_at_a_time_and_at_most_once_per_interval() {
        let rescan = Rescan::new(Duration::from_secs(3600));
        assert!(matches!(rescan.begin(), Due::No), "just discovered at start");
        let eager = Rescan::new(Duration::ZERO);
        assert!(matches!(eager.begin(), Due::Start(_)));
        assert!(matches!(eager.begin(), Due::Running(_)), "a second request waits for the first scan");
        {
            let _ending = EndOnDrop(&eager);
        }
        assert!(matches!(eager.begin(), Due::Start(_)), "after it ended, the next one may start");
    }

    #[test]
    fn waiters_wake_when_the_scan_ends() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let rescan = Rescan::new(Duration::ZERO);
        let Due::Start(finished) = rescan.begin() else { panic!("due") };
        rescan.end();
        let started = Instant::now();
        runtime.block_on(finished.wait());
        assert!(started.elapsed() < Rescan::WAIT, "woken by the end, not by the time limit");
    }
}
