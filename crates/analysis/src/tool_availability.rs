//! Which tools have data for a session — the `tools` list of `mlprof serve`'s `/api/runs`
//! (the rule is written down in crates/web/API.md), from each tool's
//! [`Availability`].
//!
//! The one design decision to know: the rule only looks at plane names, event names
//! and whether events use them — one pass over the metadata and at most one over a
//! plane's events — never at an analysis, so listing a loaded run costs little.

use mlprof_model::names::HOST_PLANE;
use mlprof_model::{Host, Plane, Session, SourceFormat};

use crate::tool::ToolId;
use crate::tool::spec::Availability;

/// The tools `mlprof serve` offers, in the order pages list them.
pub fn served_tools() -> impl Iterator<Item = ToolId> {
    ToolId::ALL.into_iter().filter(|tool| tool.spec().served)
}

/// The names of the tools a run of `format` can have, before it is read.
pub fn candidate_tools(format: SourceFormat) -> Vec<&'static str> {
    served_tools()
        .filter(|tool| match tool.spec().availability {
            Availability::KinetoGpuEvents => format == SourceFormat::Kineto,
            // mlprof writes its samples as XSpace.
            Availability::Plane(_) => format == SourceFormat::Xspace,
            Availability::Never => false,
            _ => true,
        })
        .map(ToolId::name)
        .collect()
}

/// The names of the tools with data in `session` (see crates/web/API.md for the rule).
pub fn tools_with_data(session: &Session) -> Vec<&'static str> {
    served_tools()
        .filter(|tool| {
            matches!(tool.spec().availability, Availability::Always)
                || session.hosts.iter().any(|host| has_data_on(*tool, host))
        })
        .map(ToolId::name)
        .collect()
}

/// Whether `tool` has data on `host` (the per-host half of [`tools_with_data`]'s rule).
pub fn has_data_on(tool: ToolId, host: &Host) -> bool {
    match tool.spec().availability {
        Availability::Always => true,
        Availability::GpuEvents => host.has_gpu_events(),
        Availability::KinetoGpuEvents => host.format == SourceFormat::Kineto && host.has_gpu_events(),
        Availability::HostEvents(wanted) => host.plane(HOST_PLANE).is_some_and(|plane| plane_uses(plane, &wanted)),
        Availability::AllocatorRecords(wanted) => {
            host.allocator_trace.as_ref().is_some_and(|trace| !trace.is_empty())
                || host.plane(HOST_PLANE).is_some_and(|plane| plane_uses(plane, &wanted))
        }
        Availability::Plane(name) => host.plane(name).is_some(),
        Availability::Never => false,
    }
}

/// Whether some event of `plane` has a name `wanted` accepts.
fn plane_uses(plane: &Plane, wanted: &dyn Fn(&str) -> bool) -> bool {
    let matching: Vec<bool> = plane.event_metadata.iter().map(|m| wanted(&m.name)).collect();
    if !matching.contains(&true) {
        return false;
    }
    plane
        .lines
        .iter()
        .any(|line| line.iter().any(|event| matching.get(event.metadata_index() as usize).copied().unwrap_or(false)))
}
