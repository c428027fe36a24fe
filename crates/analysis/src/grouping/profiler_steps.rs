//! Steps of PyTorch (Kineto) traces: the `ProfilerStep#N` annotations that
//! `torch.profiler.profile.step()` records on the training thread, and the group
//! (step) of every event derived from them.
//!
//! Grouping rule (the one HTA uses for its iterations): a host event belongs to the
//! step whose `ProfilerStep#N` span contains its start, on any thread (the autograd
//! thread's backward ops are not nested in the training thread's annotation, only
//! concurrent with it); a GPU event belongs to the step of the runtime call that
//! launched it (same `correlation_id`), so a kernel launched in step N and run during
//! step N+1 still belongs to step N. Group ids are the step's index in time order;
//! group names are the annotation names.

use std::collections::HashMap;

use mlprof_model::{Host, names};

use super::{HostGroups, StepSource};
use crate::kineto::{self, PROFILER_STEP_PREFIX};
use crate::xstats;

/// One `ProfilerStep#N` annotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfilerStep {
    /// N, the step number PyTorch counted.
    pub number: i64,
    /// The annotation's name (`ProfilerStep#N`).
    pub name: String,
    /// Start (ps, relative to profile start).
    pub begin_ps: i64,
    /// End (ps, relative to profile start).
    pub end_ps: i64,
    /// Where the annotation is: `(plane, line, event)` indices into the host.
    pub at: (u32, u32, u32),
}

/// The `ProfilerStep#N` annotations of the host's `/host:CPU` plane, in time order; a
/// step number seen twice (two processes in one file) keeps its first annotation.
pub fn find(host: &Host) -> Vec<ProfilerStep> {
    let mut steps: Vec<ProfilerStep> = Vec::new();
    for (plane_index, plane) in host.planes.iter().enumerate() {
        if plane.name != names::HOST_PLANE {
            continue;
        }
        let numbers: Vec<Option<i64>> =
            plane.event_metadata.iter().map(|m| kineto::profiler_step_number(&m.name)).collect();
        if numbers.iter().all(Option::is_none) {
            continue;
        }
        for (line_index, line) in plane.lines.iter().enumerate() {
            for event in line.iter() {
                let Some(&Some(number)) = numbers.get(event.metadata_index() as usize) else { continue };
                steps.push(ProfilerStep {
                    number,
                    name: format!("{PROFILER_STEP_PREFIX}{number}"),
                    begin_ps: event.start_ps(),
                    end_ps: event.end_ps(),
                    at: (plane_index as u32, line_index as u32, event.index() as u32),
                });
            }
        }
    }
    steps.sort_by_key(|s| (s.begin_ps, s.number));
    let mut seen = std::collections::HashSet::new();
    steps.retain(|s| seen.insert(s.number));
    steps
}

/// The index of the step (in `steps`, sorted by start and not overlapping) whose
/// span contains `ts_ps`.
pub fn step_at(steps: &[ProfilerStep], ts_ps: i64) -> Option<usize> {
    let after = steps.partition_point(|s| s.begin_ps <= ts_ps);
    let index = after.checked_sub(1)?;
    (ts_ps < steps[index].end_ps).then_some(index)
}

/// The groups of a Kineto host with `ProfilerStep#N` annotations; `None` when it has
/// none.
pub fn group(host: &Host) -> Option<HostGroups> {
    let steps = find(host);
    if steps.is_empty() {
        return None;
    }
    let mut groups = HostGroups::none(host);
    let mut launch_groups: HashMap<i64, i64> = HashMap::new();
    for (plane_index, plane) in host.planes.iter().enumerate() {
        if plane.name != names::HOST_PLANE {
            continue;
        }
        let correlation = plane.find_stat_key("correlation_id");
        for (line_index, line) in plane.lines.iter().enumerate() {
            for event in line.iter() {
                let Some(step) = step_at(&steps, event.start_ps()) else { continue };
                let group = step as i64;
                groups.planes[plane_index][line_index][event.index()] = group;
                if let Some(id) = xstats::event_int(plane, &event, correlation) {
                    launch_groups.insert(id, group);
                }
            }
        }
    }
    for (plane_index, plane) in host.planes.iter().enumerate() {
        if plane.name == names::HOST_PLANE {
            continue;
        }
        let correlation = plane.find_stat_key("correlation_id");
        for (line_index, line) in plane.lines.iter().enumerate() {
            for event in line.iter() {
                let launched = xstats::event_int(plane, &event, correlation).and_then(|id| launch_groups.get(&id));
                if let Some(&group) = launched {
                    groups.planes[plane_index][line_index][event.index()] = group;
                }
            }
        }
    }
    groups.names = steps.iter().map(|s| s.name.clone()).collect();
    groups.step_name_events = steps.iter().map(|s| s.at).collect();
    groups.step_name_events.sort_unstable();
    groups.source = StepSource::ProfilerSteps { groups: steps.len() };
    Some(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(number: i64, begin_ps: i64, end_ps: i64) -> ProfilerStep {
        ProfilerStep { number, name: format!("ProfilerStep#{number}"), begin_ps, end_ps, at: (0, 0, 0) }
    }

    #[test]
    fn times_fall_in_the_step_whose_span_contains_them() {
        let steps = [step(3, 100, 200), step(4, 200, 300), step(5, 350, 400)];
        assert_eq!(step_at(&steps, 99), None);
        assert_eq!(step_at(&steps, 100), Some(0));
        assert_eq!(step_at(&steps, 200), Some(1));
        assert_eq!(step_at(&steps, 320), None);
        assert_eq!(step_at(&steps, 399), Some(2));
        assert_eq!(step_at(&steps, 400), None);
    }
}
