//! Steps: the step database XProf's overview, input-pipeline and pod-viewer tools
//! share — per step its span and the time per [`EventType`] — built from grouped
//! events, and combined over hosts by aligning their step sequences.
//!
//! Pipeline (XProf's `ConvertXSpaceToOpStats` step part): step events per group from
//! GPU planes and/or host threads → non-overlapped spans → per step: the step span
//! from its markers, each type's overlap with it, the rest as "All others"; steps
//! with no marker or no compute are dropped.
//!
//! The one design decision to know: [`Breakdown::Classic`] (the default) merges host
//! events into GPU steps, as the TF guide's breakdown did, so Input, Kernel launch and
//! Host compute are filled on GPU profiles; [`Breakdown::Xprof`] is current XProf
//! (device events only when a GPU is present). CPU-only profiles are the same in both.

pub mod event_span;
mod kineto;
pub mod step_events;

use mlprof_model::{Host, names};
use serde::Serialize;

pub use event_span::{EVENT_TYPE_COUNT, EventType};
use event_span::{TypedSpan, overlap_ps, to_non_overlapped};
use step_events::{StepEvents, StepMarker, Transfers, device_step_events, gpu_planes, host_step_events, union_combine};

use crate::grouping::{HostGroups, StepSource};

/// Which step-time breakdown to compute on GPU profiles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Breakdown {
    /// Host events join device steps (Input, Kernel launch, Host compute filled).
    #[default]
    Classic,
    /// Current XProf: device events only when a device is present.
    Xprof,
}

/// Options for building a step database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepOptions {
    /// The breakdown.
    pub breakdown: Breakdown,
    /// Drop the first and last step when there are more than 5 (what XProf does for
    /// its overview and input-pipeline pages).
    pub drop_incomplete_steps: bool,
}

/// One step of one host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepInfo {
    /// The step number (the group id).
    pub step_num: i64,
    /// The step's name (`train 6`; the number when it has none).
    pub step_name: String,
    /// The step's number as the profile numbers it (`train 5` → 5, `ProfilerStep#551` →
    /// 551; [`HostGroups::profile_step`]): what mlprof's own outputs show.
    pub profile_step: i64,
    /// Start (ps, relative to profile start).
    pub begin_ps: i64,
    /// Duration (ps).
    pub duration_ps: i64,
    /// Time per [`EventType`] (ps), indexed by `EventType as usize`.
    pub type_ps: [i64; EVENT_TYPE_COUNT],
}

impl StepInfo {
    /// Time (ps) of one event type.
    pub fn ps(&self, kind: EventType) -> i64 {
        self.type_ps[kind as usize]
    }
}

/// The steps of one host.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HostSteps {
    /// Host name.
    pub host: String,
    /// Whether the host has GPU planes.
    pub has_device: bool,
    /// Steps in step-number order.
    pub steps: Vec<StepInfo>,
    /// Device compute in 16-bit precision over the whole profile (ps).
    pub compute_16bit_ps: i64,
    /// Device compute in 32-bit precision over the whole profile (ps).
    pub compute_32bit_ps: i64,
    /// Device memory copies over the kept steps: host→device, device→host, device→device.
    #[serde(skip)]
    pub transfers: [Transfers; 3],
    /// How the steps were found.
    pub source: StepSource,
}

/// Builds the step database of one host.
pub fn host_steps(host: &Host, groups: &HostGroups, options: StepOptions) -> HostSteps {
    if matches!(groups.source, StepSource::ProfilerSteps { .. }) {
        let mut result = kineto::host_steps(host, groups.source.clone());
        if options.drop_incomplete_steps {
            result.drop_incomplete_steps();
        }
        return result;
    }
    let mut device_events = StepEvents::new();
    let mut has_device = false;
    for (plane_index, plane) in gpu_planes(host) {
        has_device = true;
        union_combine(device_step_events(plane, plane_index, groups), &mut device_events);
    }
    let host_plane = host.planes.iter().enumerate().find(|(_, plane)| plane.name == names::HOST_PLANE);
    let mut step_events = device_events;
    if let Some((plane_index, plane)) = host_plane {
        if !has_device {
            union_combine(host_step_events(plane, plane_index, groups, None), &mut step_events);
        } else if options.breakdown == Breakdown::Classic {
            let host_events = host_step_events(plane, plane_index, groups, Some(&step_events));
            union_combine(host_events, &mut step_events);
        }
    }
    add_inferred_markers(groups, &mut step_events);

    let mut result =
        HostSteps { host: host.name.clone(), has_device, source: groups.source.clone(), ..HostSteps::default() };
    for (group, details) in &step_events {
        let spans = to_non_overlapped(&details.events);
        for span in &spans {
            match span.kind {
                EventType::DeviceCompute16 => result.compute_16bit_ps += span.duration_ps(),
                EventType::DeviceCompute32 => result.compute_32bit_ps += span.duration_ps(),
                _ => {}
            }
        }
        let (begin_ps, end_ps) = details.step_span();
        if end_ps - begin_ps <= 0 {
            continue;
        }
        // XProf names GPU steps by number: its device steps carry no name.
        let name = if has_device && options.breakdown == Breakdown::Xprof { "" } else { details.step_name.as_str() };
        let step = (*group, groups.profile_step(*group));
        let Some(info) = step_info(step, name, begin_ps, end_ps, &spans, has_device) else { continue };
        result.steps.push(info);
        for (total, step) in result.transfers.iter_mut().zip(details.transfers) {
            total.occurrences += step.occurrences;
            total.time_us += step.time_us;
            total.bytes += step.bytes;
        }
    }
    if options.drop_incomplete_steps {
        result.drop_incomplete_steps();
    }
    result
}

/// Inferred steps have no marker events: each step that has events takes its span
/// ([`HostGroups::step_spans`]) as its host marker, and its group's name.
fn add_inferred_markers(groups: &HostGroups, step_events: &mut StepEvents) {
    for (group, &(begin_ps, end_ps)) in (0i64..).zip(&groups.step_spans) {
        if let Some(details) = step_events.get_mut(&group) {
            details.markers.push(StepMarker { on_device: false, begin_ps, end_ps });
            if let Some(name) = groups.name_of(group) {
                details.step_name = name.to_string();
            }
        }
    }
}

impl HostSteps {
    /// The indices of the steps XProf's overview and input-pipeline pages keep: all
    /// but the first and last when there are more than 5 (XProf's
    /// `maybe_drop_incomplete_steps`).
    pub fn complete_steps(&self) -> std::ops::Range<usize> {
        let count = self.steps.len();
        if count > 5 { 1..count - 1 } else { 0..count }
    }

    /// Keeps only [`HostSteps::complete_steps`].
    pub fn drop_incomplete_steps(&mut self) {
        let kept = self.complete_steps();
        self.steps.truncate(kept.end);
        self.steps.drain(..kept.start);
    }
}

/// One step's info; `(group, profile_step)` are its group id and its number in the
/// profile.
fn step_info(
    (group, profile_step): (i64, i64),
    name: &str,
    begin_ps: i64,
    end_ps: i64,
    spans: &[TypedSpan],
    has_device: bool,
) -> Option<StepInfo> {
    let mut type_ps = [0i64; EVENT_TYPE_COUNT];
    let mut seen = [false; EVENT_TYPE_COUNT];
    let mut covered = 0;
    for span in spans {
        let overlap = overlap_ps(begin_ps, end_ps, span.begin_ps, span.end_ps);
        type_ps[span.kind as usize] += overlap;
        seen[span.kind as usize] = true;
        covered += overlap;
    }
    let duration_ps = end_ps - begin_ps;
    if covered < duration_ps {
        type_ps[EventType::UnknownTime as usize] += duration_ps - covered;
    }
    let well_formed = if has_device {
        seen[EventType::DeviceCompute16 as usize] || seen[EventType::DeviceCompute32 as usize]
    } else {
        seen[EventType::HostCompute as usize]
    };
    well_formed.then(|| StepInfo {
        step_num: group,
        step_name: if name.is_empty() { group.to_string() } else { name.to_string() },
        profile_step,
        begin_ps,
        duration_ps,
        type_ps,
    })
}

/// The steps of several hosts aligned to one sequence (XProf's step intersection).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CombinedSteps {
    /// Host names, in input order.
    pub hosts: Vec<String>,
    /// Per combined step, per host (index into `hosts`), that host's step.
    pub steps: Vec<Vec<(usize, StepInfo)>>,
    /// Whether hosts had steps but their sequences did not overlap.
    pub empty_intersection: bool,
    /// Whether any host is a GPU host.
    pub has_device: bool,
}

/// Aligns the step sequences of `hosts`: the host with the shortest total step span
/// is the chief; each other host is shifted to the offset that overlaps the chief's
/// steps most; only steps present on every host are kept. CPU-only hosts are left
/// out when some host has a device (they are coordinators). With more than one host
/// the combined steps are numbered from 0, as XProf numbers them.
pub fn combine_hosts(hosts: &[HostSteps]) -> CombinedSteps {
    let any_device = hosts.iter().any(|h| h.has_device);
    let workers: Vec<usize> = (0..hosts.len()).filter(|&i| !any_device || hosts[i].has_device).collect();
    let mut combined = CombinedSteps {
        hosts: hosts.iter().map(|h| h.host.clone()).collect(),
        has_device: any_device,
        ..CombinedSteps::default()
    };
    let span_of = |h: &HostSteps| {
        let begin = h.steps.iter().filter(|s| s.duration_ps > 0).map(|s| s.begin_ps).min();
        let end = h.steps.iter().filter(|s| s.duration_ps > 0).map(|s| s.begin_ps + s.duration_ps).max();
        match (begin, end) {
            (Some(b), Some(e)) if b < e => e - b,
            _ => 0,
        }
    };
    if !workers.is_empty() && workers.iter().all(|&i| matches!(hosts[i].source, StepSource::ProfilerSteps { .. })) {
        combine_by_step_number(hosts, &workers, &mut combined);
        return combined;
    }
    let Some(&chief) = workers.iter().min_by_key(|&&i| span_of(&hosts[i])) else { return combined };
    let chief_steps = &hosts[chief].steps;
    if chief_steps.is_empty() {
        return combined;
    }
    // Per worker: (first own index, first chief index, count).
    let mut alignments = Vec::new();
    for &worker in &workers {
        let alignment = if worker == chief {
            (0usize, 0usize, chief_steps.len())
        } else {
            align(&hosts[worker].steps, chief_steps)
        };
        alignments.push((worker, alignment));
    }
    let begin = alignments.iter().map(|(_, (_, chief_begin, _))| *chief_begin).max().unwrap_or(0);
    let end = alignments.iter().map(|(_, (_, chief_begin, count))| chief_begin + count).min().unwrap_or(0);
    if begin > end {
        combined.empty_intersection = true;
        return combined;
    }
    // With several hosts, XProf numbers the combined steps 0, 1, … (its
    // `StepIntersection::DstStepNumbers`): the hosts' own numbers need not agree.
    let renumber = hosts.len() > 1;
    for step in begin..end {
        let mut per_host = Vec::new();
        for &(worker, (own_begin, chief_begin, _)) in &alignments {
            let index = own_begin + (step - chief_begin);
            if let Some(info) = hosts[worker].steps.get(index) {
                let mut info = info.clone();
                if renumber {
                    info.step_num = (step - begin) as i64;
                }
                per_host.push((worker, info));
            }
        }
        combined.steps.push(per_host);
    }
    combined
}

/// PyTorch ranks number their steps (`ProfilerStep#N`, counted by every rank alike):
/// the steps are those whose number every worker has, in number order.
fn combine_by_step_number(hosts: &[HostSteps], workers: &[usize], combined: &mut CombinedSteps) {
    let mut common: Option<std::collections::BTreeSet<i64>> = None;
    for &worker in workers {
        let numbers: std::collections::BTreeSet<i64> = hosts[worker].steps.iter().map(|s| s.step_num).collect();
        common = Some(match common {
            None => numbers,
            Some(previous) => previous.intersection(&numbers).copied().collect(),
        });
    }
    let common = common.unwrap_or_default();
    combined.empty_intersection = common.is_empty() && workers.iter().any(|&w| !hosts[w].steps.is_empty());
    for number in common {
        let per_host = workers
            .iter()
            .filter_map(|&w| hosts[w].steps.iter().find(|s| s.step_num == number).map(|s| (w, s.clone())))
            .collect();
        combined.steps.push(per_host);
    }
}

/// The best alignment of `steps` against `chief`: (first index in `steps`, first
/// index in `chief`, number of aligned steps).
fn align(steps: &[StepInfo], chief: &[StepInfo]) -> (usize, usize, usize) {
    if steps.is_empty() || chief.is_empty() {
        return (0, 0, 0);
    }
    let (n, m) = (steps.len() as i64, chief.len() as i64);
    let mut similarity = vec![0i64; (n + m - 1) as usize];
    let (mut i, mut j) = (0usize, 0usize);
    while i < steps.len() && j < chief.len() {
        let (a, b) = (&steps[i], &chief[j]);
        if a.duration_ps == 0 {
            i += 1;
            continue;
        }
        if b.duration_ps == 0 {
            j += 1;
            continue;
        }
        let (a_end, b_end) = (a.begin_ps + a.duration_ps, b.begin_ps + b.duration_ps);
        similarity[(j as i64 - i as i64 + n - 1) as usize] += overlap_ps(a.begin_ps, a_end, b.begin_ps, b_end);
        match a_end.cmp(&b_end) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                i += 1;
                j += 1;
            }
        }
    }
    let mut best: Option<(i64, i64)> = None;
    for k in (0..m).chain((1..n).map(|k| -k)) {
        let score = similarity[(k + n - 1) as usize];
        if best.is_none_or(|(_, s)| score > s) {
            best = Some((k, score));
        }
    }
    let k = best.map_or(0, |(k, _)| k);
    let (own, chief_begin) = if k >= 0 { (0, k as usize) } else { ((-k) as usize, 0) };
    let count = (steps.len() - own).min(chief.len() - chief_begin);
    (own, chief_begin, count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(host: &str, spans: &[(i64, i64)]) -> HostSteps {
        let steps = spans
            .iter()
            .enumerate()
            .map(|(i, &(begin_ps, duration_ps))| StepInfo {
                step_num: i as i64,
                step_name: format!("train {i}"),
                profile_step: i as i64,
                begin_ps,
                duration_ps,
                type_ps: [0; EVENT_TYPE_COUNT],
            })
            .collect();
        HostSteps { host: host.into(), steps, ..HostSteps::default() }
    }

    #[test]
    fn hosts_are_aligned_on_the_chief_and_only_common_steps_kept() {
        // Host b started one step earlier (its step 1 overlaps a's step 0) and a is
        // the chief (shorter total span).
        let a = steps("a", &[(100, 100), (200, 100), (300, 100)]);
        let b = steps("b", &[(0, 100), (105, 100), (205, 100), (305, 100)]);
        let combined = combine_hosts(&[a, b]);
        assert_eq!(combined.steps.len(), 3);
        for (i, per_host) in combined.steps.iter().enumerate() {
            let names: Vec<(usize, &str)> = per_host.iter().map(|(h, s)| (*h, s.step_name.as_str())).collect();
            assert_eq!(names, vec![(0, format!("train {i}").as_str()), (1, format!("train {}", i + 1).as_str())]);
            // Numbered from 0 on every host, as XProf numbers the intersection.
            assert!(per_host.iter().all(|(_, s)| s.step_num == i as i64), "{per_host:?}");
        }
        assert!(!combined.empty_intersection);
    }

    #[test]
    fn cpu_only_coordinators_are_left_out_when_a_host_has_a_device() {
        let mut gpu = steps("gpu", &[(0, 10), (10, 10)]);
        gpu.has_device = true;
        let coordinator = steps("coordinator", &[(500, 5)]);
        let combined = combine_hosts(&[coordinator, gpu]);
        assert_eq!(combined.steps.len(), 2);
        assert!(combined.steps.iter().all(|per_host| per_host.len() == 1 && per_host[0].0 == 1));
    }
}
