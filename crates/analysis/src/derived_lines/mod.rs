//! The lines XProf derives on each GPU plane of an XSpace for its trace viewer: per
//! stream `#N`, "Framework Name Scope - from #N", "Framework Ops - from #N", "XLA
//! Modules - from #N", "XLA Ops - from #N" and "Source code - from #N", made from the
//! stream's kernels, plus one "Steps" line per plane made from the step groups of all
//! its events (XProf's `GenerateDerivedTimeLines`: `DeriveStepEventsFromGroups` and
//! `DeriveEventsFromAnnotations`).
//!
//! What each line holds, per kernel (an event with non-empty `kernel_details`, or a
//! CUDA graph launch, `cuda_graph_exec_id`), in time order on its stream:
//! - XLA Modules: the `hlo_module` stat, named `module(program_id)`.
//! - XLA Ops: the `hlo_op` stat; `outer::inner` annotations nest one level per part.
//!   The same instruction name in another program is another op.
//! - Framework Ops: for an XLA kernel, the framework op of its HLO instruction
//!   (`op_name:op_type` of the instruction's metadata in the program's HLO proto, found
//!   by `program_id`); otherwise the kernel's `tf_op` stat. Shown by its op type
//!   (`dot_general`), or the whole name when it has none.
//! - Framework Name Scope: the `/`-separated scopes of a TensorFlow or JAX framework
//!   op, one nesting level per scope.
//! - Source code: the instruction's `source_file` (base name) and `source_line`.
//! - Steps: every event of the plane that has a step group, named by the group.
//!
//! The one rule to know: consecutive source events with the same name and step group
//! are one derived event, extended over any gap between them (XProf's GPU rule; the
//! line builder is in `line_builder.rs`). A new XLA module closes the open name scopes
//! and XLA ops, and a new outermost name scope closes the open framework op, so no
//! derived event grows past the one it sits in. XLA scope range ids
//! (`scope_range_id`, with parents from the `/host:__ScopeRangeCallStack__` plane)
//! keep two runs of one module or op apart when both are known. As in XProf, a closed
//! stack of nested events with identical spans is shortened by 1 ns per level.
//!
//! Only XSpace hosts are derived (PyTorch steps come from [`crate::grouping::profiler_steps`]),
//! and a plane that already carries derived lines (a profile XProf wrote back) keeps
//! its own. Where mlprof differs from XProf: every stream gets its lines (XProf stops
//! after 16 streams, the room in its line-id range), and aggregated events
//! (`num_occurrences`) are not timed, so they derive nothing.

mod annotations;
mod line_builder;
mod steps;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use mlprof_model::{Host, Plane, names};

use crate::facts;
use crate::grouping::HostGroups;
use crate::hlo::HloModules;

/// A model event as `(plane, line, event)` indices into `Host::planes`.
pub type EventAt = (u32, u32, u32);

/// The derived lines of one GPU plane.
#[derive(Clone, Debug, PartialEq)]
pub struct DerivedPlane {
    /// Index of the plane in `Host::planes`.
    pub plane: usize,
    /// Its derived lines with events: `Steps` first, then per stream (compute streams
    /// first, then by number of events, as XProf orders them) its lines in XProf's
    /// order — Framework Name Scope, Framework Ops, XLA Modules, XLA Ops, Source code.
    pub tracks: Vec<DerivedTrack>,
}

/// One derived line.
#[derive(Clone, Debug, PartialEq)]
pub struct DerivedTrack {
    /// The line's name, as XProf names it (`XLA Ops - from #7`, `Steps`).
    pub name: String,
    /// The names its events show, indexed by [`DerivedEvent::name`].
    pub names: Vec<String>,
    /// Its events, in the order they were derived (each starts no earlier than the
    /// previous one of its level).
    pub events: Vec<DerivedEvent>,
}

impl DerivedTrack {
    /// The name `event` shows (`fusion.1`, `jit(train_step)`, `train 6`).
    pub fn name_of(&self, event: &DerivedEvent) -> &str {
        self.names.get(event.name as usize).map_or("", String::as_str)
    }
}

/// One derived event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DerivedEvent {
    /// Start, picoseconds from the profile start: the start of the first event it
    /// covers.
    pub begin_ps: i64,
    /// Duration in picoseconds: to the end of the last event it covers, less XProf's
    /// 1 ns per level for nested events with identical spans.
    pub duration_ps: i64,
    /// Index of its name in [`DerivedTrack::names`].
    pub name: u32,
    /// Nesting level: 0 for the outermost; the scope depth on name-scope lines, the
    /// annotation depth on XLA op lines.
    pub level: u32,
    /// The first model event it covers (a kernel, or for steps any grouped event), for
    /// its details.
    pub at: EventAt,
}

impl DerivedEvent {
    /// End, picoseconds from the profile start.
    pub fn end_ps(&self) -> i64 {
        self.begin_ps.saturating_add(self.duration_ps)
    }
}

pub use mlprof_model::names::is_derived_line_id;

/// Names of the lines XProf derives (a line called so, or so followed by ` - from #N`,
/// was derived already).
const DERIVED_LINE_NAMES: &[&str] = &[
    names::STEPS_LINE,
    "Framework Name Scope",
    "Framework Ops",
    "TensorFlow Name Scope",
    "TensorFlow Ops",
    "XLA Modules",
    "XLA Ops",
    "Source code",
    "Launch Stats",
];

/// Whether `plane` already carries lines XProf derived.
fn has_derived_lines(plane: &Plane) -> bool {
    plane.lines.iter().any(|line| {
        is_derived_line_id(line.id)
            || DERIVED_LINE_NAMES.iter().any(|&name| {
                line.name.strip_prefix(name).is_some_and(|rest| rest.is_empty() || rest.starts_with(" - from #"))
            })
    })
}

/// The planes of `host` that get derived lines: GPU planes with events and without
/// derived lines of their own, on hosts whose source gets them
/// ([`facts::derives_device_lines`]). Empty when there is nothing to derive, so callers
/// can skip grouping the host.
pub fn planes_to_derive(host: &Host) -> Vec<usize> {
    if !facts::derives_device_lines(host) {
        return Vec::new();
    }
    (0..host.planes.len())
        .filter(|&p| {
            let plane = &host.planes[p];
            plane.is_gpu() && plane.event_count() > 0 && !has_derived_lines(plane)
        })
        .collect()
}

/// The derived lines of every GPU plane of `host` ([`planes_to_derive`]), with the step
/// groups of `groups` (from [`crate::grouping::step_groups`] on the same host). Planes
/// where nothing could be derived are left out.
pub fn derive(host: &Host, groups: &HostGroups) -> Vec<DerivedPlane> {
    let planes = planes_to_derive(host);
    if planes.is_empty() {
        return Vec::new();
    }
    let modules = HloModules::of_host(host);
    let scopes = scope_range_parents(host);
    planes
        .into_iter()
        .filter_map(|plane_index| {
            let plane = &host.planes[plane_index];
            let mut tracks: Vec<DerivedTrack> = steps::derive(plane, plane_index, groups).into_iter().collect();
            let context = annotations::PlaneContext::new(plane, plane_index, groups, &modules, &scopes);
            for line_index in stream_order(plane) {
                tracks.extend(context.derive_stream(line_index));
            }
            (!tracks.is_empty()).then_some(DerivedPlane { plane: plane_index, tracks })
        })
        .collect()
}

/// The streams of a GPU plane in XProf's order: those named `…Compute…` first, then by
/// number of events, most first; ties in stored order.
fn stream_order(plane: &Plane) -> Vec<usize> {
    let mut order: Vec<usize> = (0..plane.lines.len()).collect();
    order.sort_by_key(|&l| {
        let line = &plane.lines[l];
        (!line.name.contains("Compute"), std::cmp::Reverse(line.len()))
    });
    order
}

/// The name of the plane holding XLA's scope range call stack.
const SCOPE_RANGE_PLANE: &str = "/host:__ScopeRangeCallStack__";

/// XLA's scope range tree: per scope range id, its parent's (the stats of the
/// `/host:__ScopeRangeCallStack__` plane: stat id → parent id).
fn scope_range_parents(host: &Host) -> HashMap<i64, i64> {
    let Some(plane) = host.plane(SCOPE_RANGE_PLANE) else { return HashMap::new() };
    plane
        .plane_stats()
        .iter()
        .filter_map(|stat| {
            let child = plane.stat_metadata.get(stat.key() as usize)?.id;
            Some((child, crate::xstats::as_int(stat.value())?))
        })
        .collect()
}
