//! Steps of PyTorch (Kineto) traces: the `ProfilerStep#N` annotations that
//! `torch.profiler.profile.step()` records on the training thread, and the group
//! (step) of every event derived from them.
//!
//! A job traced without its own profiler code (`mlprof run`, Kineto on demand, dynolog)
//! has no `ProfilerStep#N`. Its steps are then inferred from the annotation every
//! `torch.optim` optimizer records around `step()` (`Optimizer.step#SGD.step`): step `k`
//! runs from the end of optimizer step `k - 1` to the end of optimizer step `k`, which is
//! where `ProfilerStep#N` boundaries fall in a loop that calls `prof.step()` after
//! `optimizer.step()`. With several optimizers the most frequent annotation is used.
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

use super::{GroupId, HostGroups, StepSource};
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

/// The name prefix of the annotation `torch.optim` records around an optimizer's
/// `step()` (`Optimizer.step#SGD.step`).
pub const OPTIMIZER_STEP_PREFIX: &str = "Optimizer.step#";
/// The name of steps inferred from optimizer steps (`OptimizerStep#3`).
pub const INFERRED_STEP_PREFIX: &str = "OptimizerStep#";

/// The steps of the host: its `ProfilerStep#N` annotations, or when it has none, the steps
/// [`infer`]red from optimizer-step annotations; in time order.
pub fn find(host: &Host) -> Vec<ProfilerStep> {
    find_with_source(host).0
}

/// [`find`]'s steps and, when they were inferred, the optimizer-step annotation they
/// were inferred from.
fn find_with_source(host: &Host) -> (Vec<ProfilerStep>, Option<String>) {
    let marked = find_marked(host);
    if !marked.is_empty() {
        return (marked, None);
    }
    infer(host).map_or((Vec::new(), None), |(steps, annotation)| (steps, Some(annotation)))
}

/// Steps between consecutive ends of the host's most frequent optimizer-step annotation
/// on `/host:CPU`, numbered from 1, and that annotation's name; `None` with fewer than two.
/// Inferred steps point at no annotation of their own (`at` is the optimizer step that
/// ends them).
pub fn infer(host: &Host) -> Option<(Vec<ProfilerStep>, String)> {
    /// An optimizer step's end (ps) and where its event is.
    type End = (i64, (u32, u32, u32));
    let mut ends: HashMap<&str, Vec<End>> = HashMap::new();
    for (plane_index, plane) in host.planes.iter().enumerate() {
        if plane.name != names::HOST_PLANE {
            continue;
        }
        for (line_index, line) in plane.lines.iter().enumerate() {
            for event in line.iter() {
                let Some(meta) = plane.event_metadata.get(event.metadata_index() as usize) else { continue };
                if meta.name.starts_with(OPTIMIZER_STEP_PREFIX) {
                    let at = (plane_index as u32, line_index as u32, event.index() as u32);
                    ends.entry(meta.name.as_str()).or_default().push((event.end_ps(), at));
                }
            }
        }
    }
    let (annotation, mut ends) = ends.into_iter().max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))?;
    ends.sort_unstable();
    ends.dedup_by_key(|(end, _)| *end);
    let steps: Vec<ProfilerStep> = ends
        .windows(2)
        .zip(1..)
        .map(|(pair, number)| ProfilerStep {
            number,
            name: format!("{INFERRED_STEP_PREFIX}{number}"),
            begin_ps: pair[0].0,
            end_ps: pair[1].0,
            at: pair[1].1,
        })
        .collect();
    (!steps.is_empty()).then(|| (steps, annotation.to_string()))
}

/// The `ProfilerStep#N` annotations of the host's `/host:CPU` plane, in time order; a
/// step number seen twice (two processes in one file) keeps its first annotation.
fn find_marked(host: &Host) -> Vec<ProfilerStep> {
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

/// The groups of a Kineto host with `ProfilerStep#N` annotations, or steps [`infer`]red
/// from its optimizer steps; `None` when it has neither.
pub fn group(host: &Host) -> Option<HostGroups> {
    let (steps, inferred_from) = find_with_source(host);
    if steps.is_empty() {
        return None;
    }
    let mut groups = HostGroups::none(host);
    let mut launch_groups: HashMap<i64, GroupId> = HashMap::new();
    for (plane_index, plane) in host.planes.iter().enumerate() {
        if plane.name != names::HOST_PLANE {
            continue;
        }
        let correlation = plane.find_stat_key("correlation_id");
        for (line_index, line) in plane.lines.iter().enumerate() {
            for event in line.iter() {
                let Some(step) = step_at(&steps, event.start_ps()) else { continue };
                let group = step as GroupId;
                if let Some(slot) = groups.line_mut(plane_index, line_index).get_mut(event.index()) {
                    *slot = group;
                }
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
                if let (Some(&group), Some(slot)) =
                    (launched, groups.line_mut(plane_index, line_index).get_mut(event.index()))
                {
                    *slot = group;
                }
            }
        }
    }
    groups.names = steps.iter().map(|s| s.name.clone()).collect();
    if inferred_from.is_none() {
        groups.step_name_events = steps.iter().map(|s| s.at).collect();
        groups.step_name_events.sort_unstable();
    }
    groups.source = StepSource::ProfilerSteps { groups: steps.len(), inferred_from };
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
