//! Whose turn it is to record a job: one recording of a job at a time (a probe and a
//! capture of one job would compete for its tracer: a profiler server refuses a second
//! session), captures ahead of probes, and every wait for a turn bounded by the
//! recording's deadline.
//!
//! A capture someone asked for never waits for a probe to start: while a capture of a
//! job waits, no probe of it gets a turn, and a probe holding the turn can hear that a
//! capture asked ([`Turn::capture_asked`]) and give way where its recording has not
//! begun (its ask not yet handed to the job's run).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{Notify, OwnedMutexGuard};
use tokio::time::Instant;

/// What a recording is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    /// A capture someone asked for (`mlprof agent capture`, the profiler port, a
    /// slowdown): it goes first.
    Capture,
    /// One of the agent's own probes: it waits for captures and gives way to them.
    Probe,
}

/// Why a recording got no turn.
#[derive(Debug, PartialEq, Eq)]
pub enum NoTurn {
    /// Another recording of the job still held it at the deadline.
    Deadline,
    /// A probe: a capture of the job is waiting or recording.
    CaptureFirst,
}

/// One job's turn and who waits for it.
#[derive(Default)]
struct JobTurns {
    lock: Arc<tokio::sync::Mutex<()>>,
    /// Captures waiting for the turn or holding it.
    captures: AtomicUsize,
    /// Woken when a capture starts waiting.
    capture_came: Notify,
}

/// Every job's turn, by pid.
#[derive(Clone, Default)]
pub struct Turns {
    by_job: Arc<Mutex<HashMap<u32, Arc<JobTurns>>>>,
}

/// The turn to record one job: it is the holder's while this lives.
pub struct Turn {
    _held: OwnedMutexGuard<()>,
    job: Arc<JobTurns>,
    _capture: Option<CaptureCount>,
}

/// A capture counted in its job's [`JobTurns::captures`] while this lives (also when
/// the wait for the turn is dropped).
struct CaptureCount(Arc<JobTurns>);

impl Drop for CaptureCount {
    fn drop(&mut self) {
        self.0.captures.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Turns {
    /// Waits for the turn to record job `pid` until `deadline`. A capture is counted at
    /// once, so that no probe starts before it and a probe recording hears of it; a probe
    /// gets no turn while a capture of the job waits or records.
    pub async fn take(&self, pid: u32, purpose: Purpose, deadline: Instant) -> Result<Turn, NoTurn> {
        let job = {
            let mut by_job = self.by_job.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Turns nobody holds or waits for are dropped (their jobs may be long gone).
            by_job.retain(|_, job| Arc::strong_count(job) > 1);
            Arc::clone(by_job.entry(pid).or_default())
        };
        let capture = match purpose {
            Purpose::Capture => {
                job.captures.fetch_add(1, Ordering::SeqCst);
                job.capture_came.notify_waiters();
                Some(CaptureCount(Arc::clone(&job)))
            }
            Purpose::Probe if job.captures.load(Ordering::SeqCst) > 0 => return Err(NoTurn::CaptureFirst),
            Purpose::Probe => None,
        };
        let held = tokio::time::timeout_at(deadline, Arc::clone(&job.lock).lock_owned())
            .await
            .map_err(|_| NoTurn::Deadline)?;
        if purpose == Purpose::Probe && job.captures.load(Ordering::SeqCst) > 0 {
            return Err(NoTurn::CaptureFirst);
        }
        Ok(Turn { _held: held, job, _capture: capture })
    }
}

impl Turns {
    /// Whether a capture of job `pid` waits for its turn or records now.
    pub fn capture_pending(&self, pid: u32) -> bool {
        let by_job = self.by_job.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        by_job.get(&pid).is_some_and(|job| job.captures.load(Ordering::SeqCst) > 0)
    }
}

impl Turn {
    /// Completes once a capture of the job waits for this turn (at once if one already
    /// does); a capture's own turn counts itself, so only a probe's should wait on this.
    pub async fn capture_asked(&self) {
        loop {
            let came = self.job.capture_came.notified();
            tokio::pin!(came);
            came.as_mut().enable();
            if self.job.captures.load(Ordering::SeqCst) > 0 {
                return;
            }
            came.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn in_ms(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    #[tokio::test]
    async fn a_capture_waits_for_a_probe_and_the_probe_hears_of_it() {
        let turns = Turns::default();
        let probe = turns.take(7, Purpose::Probe, in_ms(1000)).await.expect("a free job");
        let waiting = {
            let turns = turns.clone();
            tokio::spawn(async move { turns.take(7, Purpose::Capture, in_ms(5000)).await.is_ok() })
        };
        tokio::time::timeout(Duration::from_secs(5), probe.capture_asked()).await.expect("the probe hears");
        assert!(!waiting.is_finished(), "the capture waits while the probe holds the turn");
        drop(probe);
        assert!(waiting.await.expect("the capture's task"), "the capture gets the turn");
    }

    #[tokio::test]
    async fn no_probe_starts_while_a_capture_waits_or_records() {
        let turns = Turns::default();
        let capture = turns.take(7, Purpose::Capture, in_ms(1000)).await.expect("a free job");
        assert_eq!(turns.take(7, Purpose::Probe, in_ms(1000)).await.err(), Some(NoTurn::CaptureFirst));
        assert!(turns.capture_pending(7) && !turns.capture_pending(8));
        assert!(turns.take(8, Purpose::Probe, in_ms(1000)).await.is_ok(), "another job is free");
        drop(capture);
        assert!(!turns.capture_pending(7));
        assert!(turns.take(7, Purpose::Probe, in_ms(1000)).await.is_ok(), "free again once the capture is done");
    }

    #[tokio::test]
    async fn a_probe_queued_before_a_capture_still_lets_it_go_first() {
        let turns = Turns::default();
        let first = turns.take(7, Purpose::Probe, in_ms(5000)).await.expect("a free job");
        let queued = {
            let turns = turns.clone();
            tokio::spawn(async move { turns.take(7, Purpose::Probe, in_ms(5000)).await.err() })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        let capture = {
            let turns = turns.clone();
            tokio::spawn(async move { turns.take(7, Purpose::Capture, in_ms(5000)).await.is_ok() })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(first);
        assert_eq!(queued.await.expect("the probe's task"), Some(NoTurn::CaptureFirst));
        assert!(capture.await.expect("the capture's task"));
    }

    #[tokio::test]
    async fn a_wait_ends_at_its_deadline_and_a_dropped_wait_is_forgotten() {
        let turns = Turns::default();
        let first = turns.take(7, Purpose::Capture, in_ms(1000)).await.expect("a free job");
        let started = std::time::Instant::now();
        assert_eq!(turns.take(7, Purpose::Capture, in_ms(200)).await.err(), Some(NoTurn::Deadline));
        assert!(started.elapsed() >= Duration::from_millis(150), "it waited for its deadline");
        drop(first);
        // The capture that gave up is no longer counted: a probe may go.
        assert!(turns.take(7, Purpose::Probe, in_ms(1000)).await.is_ok());
    }

    #[tokio::test]
    async fn a_probe_hears_nothing_while_no_capture_asks() {
        let turns = Turns::default();
        let probe = turns.take(7, Purpose::Probe, in_ms(1000)).await.expect("a free job");
        let quiet = tokio::time::timeout(Duration::from_millis(100), probe.capture_asked()).await;
        assert!(quiet.is_err(), "no capture asked yet");
    }
}
