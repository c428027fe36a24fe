//! How far an index build has come, for a progress display: the stage, and events done
//! of events to do in it. The build runs on one thread and stores into atomics now and
//! then; a display polls [`BuildProgress::snapshot`]. Nothing here prints.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

/// The events added between two stores of the count while collecting.
pub(crate) const COLLECT_REPORT_EVERY: u64 = 1 << 16;

/// A stage of an index build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuildStage {
    /// Events are being taken from the profile (done of expected events).
    Collecting,
    /// Tracks are being ordered by depth and time, and levels built (done of all events).
    LayingOut,
    /// The index file is being written (no count).
    Writing,
}

impl BuildStage {
    /// The stage in words, as `/api/progress` names it (`collecting`, `laying out`,
    /// `writing`).
    pub fn name(self) -> &'static str {
        match self {
            BuildStage::Collecting => "collecting",
            BuildStage::LayingOut => "laying out",
            BuildStage::Writing => "writing",
        }
    }
}

/// The progress of one index build.
#[derive(Debug, Default)]
pub struct BuildProgress {
    stage: AtomicU8,
    done: AtomicU64,
    total: AtomicU64,
}

impl BuildProgress {
    /// Enters `stage` with `total` events to go through (0 where there is no count).
    pub fn enter(&self, stage: BuildStage, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        self.stage.store(stage as u8, Ordering::Relaxed);
    }

    /// `more` events of the stage are through, beside those counted so far (from any
    /// thread).
    pub(crate) fn add_done(&self, more: u64) {
        self.done.fetch_add(more, Ordering::Relaxed);
    }

    /// `done` events of the stage are through.
    pub(crate) fn set_done(&self, done: u64) {
        self.done.store(done, Ordering::Relaxed);
    }

    /// `(stage, events done, events to do)`; done never exceeds the total, and a total
    /// below what was done (more events than expected) is raised to it.
    pub fn snapshot(&self) -> (BuildStage, u64, u64) {
        let stage = match self.stage.load(Ordering::Relaxed) {
            0 => BuildStage::Collecting,
            1 => BuildStage::LayingOut,
            _ => BuildStage::Writing,
        };
        let done = self.done.load(Ordering::Relaxed);
        let total = self.total.load(Ordering::Relaxed);
        (stage, done, total.max(done))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{SectionKind, TimelineBuilder};

    #[test]
    fn a_build_reports_its_stages_and_counts() {
        let progress = Arc::new(BuildProgress::default());
        let mut builder = TimelineBuilder::new();
        builder.report_to(Arc::clone(&progress), 100_000);
        assert_eq!(progress.snapshot(), (BuildStage::Collecting, 0, 100_000));
        let section = builder.section("host", SectionKind::Host);
        let track = builder.track(section, "thread").expect("a track");
        let name = builder.name("op");
        let events = COLLECT_REPORT_EVERY + 10;
        for i in 0..events {
            builder.event(track, i as i64 * 10, 5, name, i).expect("an event");
        }
        assert_eq!(progress.snapshot(), (BuildStage::Collecting, COLLECT_REPORT_EVERY, 100_000));
        let built = builder.finish().expect("built");
        assert_eq!(built.event_count(), events);
        assert_eq!(progress.snapshot(), (BuildStage::LayingOut, events, events));
        progress.enter(BuildStage::Writing, 0);
        assert_eq!(progress.snapshot(), (BuildStage::Writing, 0, 0));
    }

    #[test]
    fn more_events_than_expected_never_read_as_over_100_percent() {
        let progress = BuildProgress::default();
        progress.enter(BuildStage::Collecting, 10);
        progress.set_done(25);
        assert_eq!(progress.snapshot(), (BuildStage::Collecting, 25, 25));
    }
}
