//! What the server is doing for a run while a page waits on it: reading the run's profile
//! (bytes decoded of bytes to decode) or building a host's trace-viewer index (its stage,
//! and events done of events to do in it).
//! `GET /api/progress` answers it, so the page shows how far the work has come instead
//! of a blank view. Each piece of work is registered for as long as a [`Working`] guard
//! lives, so it disappears however the work ends.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use mlprof_formats::progress::LoadProgress;
use mlprof_timeline::BuildProgress;
use serde::Serialize;

/// One piece of work on a run.
#[derive(Clone, Debug)]
pub enum Work {
    /// Reading the run's profile files.
    Reading(Arc<LoadProgress>),
    /// Building the trace-viewer index of a host.
    Indexing {
        /// The host.
        host: String,
        /// How far the build has come.
        progress: Arc<BuildProgress>,
    },
}

/// The work under way, by run name: the latest piece begun on each run, with the number
/// that tells it from an earlier one.
#[derive(Debug, Default)]
pub struct RunWork {
    by_run: Mutex<HashMap<String, (u64, Work)>>,
    begun: AtomicU64,
}

/// Keeps a piece of work registered; dropping it removes it, unless a later piece on
/// the same run (another host's index) replaced it.
pub struct Working<'a> {
    work: &'a RunWork,
    run: String,
    id: u64,
}

impl RunWork {
    /// Registers `work` on `run` (replacing what was there) until the guard is dropped.
    pub fn begin(&self, run: &str, work: Work) -> Working<'_> {
        let id = self.begun.fetch_add(1, Ordering::Relaxed);
        self.by_run.lock().unwrap_or_else(PoisonError::into_inner).insert(run.to_string(), (id, work));
        Working { work: self, run: run.to_string(), id }
    }

    /// The work under way on `run`, as `/api/progress` answers it.
    pub fn of(&self, run: &str) -> Progress {
        match self.by_run.lock().unwrap_or_else(PoisonError::into_inner).get(run).map(|(_, work)| work) {
            Some(Work::Reading(progress)) => {
                let (done_bytes, total_bytes) = progress.snapshot();
                Progress { stage: "reading", done_bytes, total_bytes, ..Progress::IDLE }
            }
            Some(Work::Indexing { host, progress }) => {
                let (stage, done_events, total_events) = progress.snapshot();
                Progress {
                    stage: "indexing",
                    host: Some(host.clone()),
                    index_stage: Some(stage.name()),
                    done_events,
                    total_events,
                    ..Progress::IDLE
                }
            }
            None => Progress::IDLE,
        }
    }
}

impl Drop for Working<'_> {
    fn drop(&mut self) {
        let mut by_run = self.work.by_run.lock().unwrap_or_else(PoisonError::into_inner);
        if by_run.get(&self.run).is_some_and(|(id, _)| *id == self.id) {
            by_run.remove(&self.run);
        }
    }
}

/// The answer of `/api/progress`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Progress {
    /// `reading` (the profile), `indexing` (a host's trace-viewer index) or `idle`.
    pub stage: &'static str,
    /// While reading: bytes decoded so far.
    pub done_bytes: u64,
    /// While reading: bytes to decode in the files opened so far.
    pub total_bytes: u64,
    /// While indexing: the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// While indexing: `collecting` (events from the profile), `laying out` (ordering
    /// and levels) or `writing` (the cache file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_stage: Option<&'static str>,
    /// While indexing: events done in the index stage (0 while writing).
    pub done_events: u64,
    /// While indexing: events to do in the index stage (about, while collecting; 0 while
    /// writing).
    pub total_events: u64,
}

impl Progress {
    /// Nothing under way.
    pub const IDLE: Progress = Progress {
        stage: "idle",
        done_bytes: 0,
        total_bytes: 0,
        host: None,
        index_stage: None,
        done_events: 0,
        total_events: 0,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_is_answered_while_its_guard_lives() {
        let work = RunWork::default();
        assert_eq!(work.of("r").stage, "idle");
        let progress = Arc::new(LoadProgress::default());
        progress.add_input(100);
        progress.advance(40);
        {
            let _reading = work.begin("r", Work::Reading(Arc::clone(&progress)));
            let reading = Progress { stage: "reading", done_bytes: 40, total_bytes: 100, ..Progress::IDLE };
            assert_eq!(work.of("r"), reading);
            assert_eq!(work.of("other").stage, "idle");
        }
        assert_eq!(work.of("r").stage, "idle");
        let indexing = |host: &str| Work::Indexing { host: host.into(), progress: Arc::default() };
        let first = work.begin("r", indexing("h"));
        let building = Arc::new(BuildProgress::default());
        building.enter(mlprof_timeline::BuildStage::LayingOut, 80);
        let second = work.begin("r", Work::Indexing { host: "g".into(), progress: Arc::clone(&building) });
        drop(first);
        let now = work.of("r");
        assert_eq!(now.host.as_deref(), Some("g"), "the earlier piece ending leaves the later one");
        assert_eq!((now.index_stage, now.done_events, now.total_events), (Some("laying out"), 0, 80));
        drop(second);
        assert_eq!(work.of("r").stage, "idle");
    }
}
