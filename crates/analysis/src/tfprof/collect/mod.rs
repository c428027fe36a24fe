//! Collecting the [`Profile`] of a set of hosts: op runs from the op metrics
//! databases (TF host ops, PyTorch `cpu_op`s and runtime calls, GPU activities of both),
//! XLA ops named through their HLO programs, allocation events, and the step of each.
//!
//! The one design decision to know: times and nesting come from
//! [`crate::op_metrics`] ([`crate::op_metrics::host_op_runs`],
//! [`crate::op_metrics::device_op_runs`]), so a type's time in the op view is exactly
//! its time in `framework_op_stats`; this module only adds what tfprof needs on top
//! (paths, steps, memory, shapes). XLA ops, which those databases leave unnamed, are
//! read here from their `hlo_op` stats.

mod kineto;
mod memory;
mod python;
mod xla;
mod xspace;

use std::collections::HashMap;

use mlprof_model::{Host, names};

use super::profile::{Profile, Track};
use crate::facts::{self, Framework};
use crate::grouping::{HostGroups, StepSource};
use crate::steps::{StepOptions, host_steps};

/// Collects the records of `hosts` (each with its grouping).
pub(super) fn collect(hosts: &[(&Host, &HostGroups)]) -> Profile {
    let mut profile = Profile::new(hosts.len());
    for (host_index, (host, groups)) in hosts.iter().enumerate() {
        let steps = StepLookup::new(host, groups, &mut profile);
        let context = HostContext { index: host_index, host, groups, steps };
        let first = profile.records.len();
        // PyTorch's ops (ATen ops, runtime calls, Python frames) or XProf's (TF ops,
        // tf.data iterators, GPU kernels by `tf_op`).
        let host_records = match facts::framework(host) {
            Framework::Pytorch => kineto::collect(&mut profile, &context),
            Framework::Tensorflow | Framework::Jax | Framework::Cuda | Framework::Python => {
                xspace::collect(&mut profile, &context)
            }
        };
        xla::collect(&mut profile, &context);
        memory::attribute(&mut profile, &context, &host_records, first);
    }
    profile.availability.accelerator = profile.records.iter().any(|r| r.accelerator_ps > 0);
    profile.availability.float_ops = profile.records.iter().any(|r| r.float_ops > 0);
    profile
}

/// One host being collected.
pub(super) struct HostContext<'h> {
    /// Its index in the analysis.
    pub index: usize,
    /// The host.
    pub host: &'h Host,
    /// Its grouping.
    pub groups: &'h HostGroups,
    /// Its steps.
    pub steps: StepLookup,
}

impl HostContext<'_> {
    /// The track of line `line` of plane `plane` (both indices), stored on first use.
    pub(super) fn track(&self, profile: &mut Profile, plane: usize, line: usize) -> u32 {
        let plane = &self.host.planes[plane];
        let thread = plane.lines.get(line).map_or_else(String::new, |l| l.shown_name().to_string());
        let process = profile.place(&self.host.name, &plane.name);
        profile.track(Track { host: self.index, process, thread })
    }

    /// The interned device name of plane `plane`.
    pub(super) fn device(&self, profile: &mut Profile, plane: usize) -> u32 {
        let name = profile.place(&self.host.name, &self.host.planes[plane].name);
        profile.strings.intern(&name)
    }

    /// The index of the host's `/host:CPU` plane.
    pub(super) fn host_plane(&self) -> Option<usize> {
        self.host.planes.iter().position(|plane| plane.name == names::HOST_PLANE)
    }
}

/// Which step each event of a host belongs to: its group, when that group is a step
/// of the step database, numbered as users see it: N of PyTorch's `ProfilerStep#N`
/// where the steps come from those annotations; otherwise the number the step's name
/// ends with (`train 6` → 6, the framework's step counter), or the group id when names
/// give no distinct numbers.
pub(super) struct StepLookup {
    numbers: HashMap<i64, i64>,
}

impl StepLookup {
    /// The steps of `host`, also recorded in `profile` (numbers and how found).
    fn new(host: &Host, groups: &HostGroups, profile: &mut Profile) -> StepLookup {
        let database = host_steps(host, groups, StepOptions::default());
        let numbers: HashMap<i64, i64> = if matches!(groups.source, StepSource::ProfilerSteps { .. }) {
            let known: std::collections::HashSet<i64> = database.steps.iter().map(|s| s.step_num).collect();
            groups
                .names
                .iter()
                .enumerate()
                .filter_map(|(group, name)| {
                    let number = crate::kineto::profiler_step_number(name)?;
                    known.contains(&number).then_some((group as i64, number))
                })
                .collect()
        } else {
            let by_name: HashMap<i64, i64> = database
                .steps
                .iter()
                .filter_map(|s| Some((s.step_num, s.step_name.rsplit(' ').next()?.parse::<i64>().ok()?)))
                .collect();
            let distinct: std::collections::HashSet<i64> = by_name.values().copied().collect();
            if by_name.len() == database.steps.len() && distinct.len() == by_name.len() {
                by_name
            } else {
                database.steps.iter().map(|s| (s.step_num, s.step_num)).collect()
            }
        };
        profile.steps.extend(numbers.values().copied());
        profile.step_sources.insert(groups.source.describe());
        StepLookup { numbers }
    }

    /// The step of event `event` of line `line` of plane `plane`.
    pub(super) fn step(&self, groups: &HostGroups, plane: usize, line: usize, event: usize) -> Option<i64> {
        groups.group_of(plane, line, event).and_then(|group| self.numbers.get(&group).copied())
    }
}

/// Reads the `flops` stat of an event (or its metadata), when positive.
pub(super) fn flops_of(plane: &mlprof_model::Plane, key: Option<u32>, event: &mlprof_model::Event<'_>) -> i64 {
    crate::xstats::event_stat(plane, event, key)
        .and_then(crate::xstats::as_f64)
        .filter(|v| v.is_finite() && *v > 0.0)
        .map_or(0, |v| v.round() as i64)
}
