//! tfprof's timeline output: the op runs of the displayed nodes (within the chosen
//! steps) as trace events on their own threads, for a Chrome trace writer.
//!
//! The one design decision to know: this module only selects and names events; it
//! writes nothing (the analysis crate does no I/O). Tracks keep the profile's
//! processes (planes, host-prefixed with several hosts) and threads (lines).

use std::collections::HashMap;

use super::forest::Forest;
use super::options::StepSelection;
use super::profile::Profile;
use super::show::Shown;
use super::stats::Selection;

/// The events to write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Timeline {
    /// Threads, each in a process.
    pub tracks: Vec<TimelineTrack>,
    /// Events sorted by track, then start.
    pub events: Vec<TimelineEvent>,
}

/// One thread of the timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineTrack {
    /// Process id (1-based, one per host and plane).
    pub pid: i64,
    /// Thread id (1-based within the timeline).
    pub tid: i64,
    /// Process name (`/host:CPU`, `/device:GPU:0`, `host:/device:GPU:0`).
    pub process: String,
    /// Thread name (the line's name).
    pub thread: String,
}

/// One op run or GPU activity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineEvent {
    /// Index into [`Timeline::tracks`].
    pub track: usize,
    /// The op (graph node) name.
    pub name: String,
    /// The op type.
    pub category: String,
    /// The view node it is displayed under.
    pub node: String,
    /// Start, picoseconds relative to the profile start.
    pub start_ps: i64,
    /// Duration, picoseconds.
    pub duration_ps: i64,
}

/// The events of the displayed nodes' own, accounted, selected records.
pub(super) fn build(profile: &Profile, forest: &Forest, shown: &Shown, selection: &Selection<'_>) -> Timeline {
    let mut timeline = Timeline::default();
    let mut track_of: HashMap<u32, usize> = HashMap::new();
    let mut pids: HashMap<(usize, String), i64> = HashMap::new();
    for row in &shown.rows {
        let Some(node) = row.node else { continue };
        for &index in &forest.nodes[node].records {
            let Some(record) = profile.records.get(index) else { continue };
            let in_steps = match selection.step {
                StepSelection::Whole => true,
                StepSelection::Step(step) => record.step == Some(step),
                StepSelection::Average => record.step.is_some(),
            };
            if record.is_static || !in_steps || !selection.accounts(profile, record) {
                continue;
            }
            let Some(track) = profile.tracks.get(record.track as usize) else { continue };
            let track = *track_of.entry(record.track).or_insert_with(|| {
                let next_pid = pids.len() as i64 + 1;
                let pid = *pids.entry((track.host, track.process.clone())).or_insert(next_pid);
                timeline.tracks.push(TimelineTrack {
                    pid,
                    tid: timeline.tracks.len() as i64 + 1,
                    process: track.process.clone(),
                    thread: track.thread.clone(),
                });
                timeline.tracks.len() - 1
            });
            timeline.events.push(TimelineEvent {
                track,
                name: profile.strings.get(record.node).to_string(),
                category: profile.strings.get(record.op_type).to_string(),
                node: forest.nodes[node].name.clone(),
                start_ps: record.start_ps,
                duration_ps: record.duration_ps.max(0),
            });
        }
    }
    timeline.events.sort_by(|a, b| (a.track, a.start_ps, &a.name).cmp(&(b.track, b.start_ps, &b.name)));
    timeline
}
