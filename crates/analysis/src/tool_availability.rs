//! Which tools have data for a session — the `tools` list of `mlprof serve`'s `/api/runs`
//! (the rule is written down in crates/web/API.md).
//!
//! The one design decision to know: the rule only looks at plane names, event names
//! and whether events use them — one pass over the metadata and at most one over a
//! plane's events — never at an analysis, so listing a loaded run costs little.

use mlprof_model::names::HOST_PLANE;
use mlprof_model::{Host, Plane, Session, SourceFormat};

use crate::kineto::MEMORY_EVENT;
use crate::tools::TOOL_NAMES;

/// The tools beyond XProf's, in the order pages list them after XProf's.
pub const MLPROF_TOOLS: [&str; 3] = ["gpu", "transfers", "trace_viewer"];

/// The XProf tools ([`TOOL_NAMES`]), then `gpu`, `transfers` and `trace_viewer`: the
/// order pages list them in.
pub fn all_tools() -> impl Iterator<Item = &'static str> {
    TOOL_NAMES.into_iter().chain(MLPROF_TOOLS)
}

/// The tools a run of `format` can have, before it is read.
pub fn candidate_tools(format: SourceFormat) -> Vec<&'static str> {
    match format {
        SourceFormat::Xspace => all_tools().filter(|tool| *tool != "gpu").collect(),
        SourceFormat::Kineto => all_tools().collect(),
    }
}

/// The tools with data in `session` (see crates/web/API.md for the rule).
pub fn tools_with_data(session: &Session) -> Vec<&'static str> {
    let hosts = &session.hosts;
    let gpu_events = |host: &Host| host.planes.iter().any(|p| p.is_gpu() && p.event_count() > 0);
    let host_plane_uses = |host: &Host, wanted: &dyn Fn(&str) -> bool| {
        host.plane(HOST_PLANE).is_some_and(|plane| plane_uses(plane, wanted))
    };
    all_tools()
        .filter(|tool| match *tool {
            "kernel_stats" | "transfers" => hosts.iter().any(gpu_events),
            "gpu" => hosts.iter().any(|h| h.format == SourceFormat::Kineto && gpu_events(h)),
            "memory_profile" => hosts.iter().any(|h| {
                host_plane_uses(h, &|name| matches!(name, "MemoryAllocation" | "MemoryDeallocation" | MEMORY_EVENT))
            }),
            "tf_data_bottleneck_analysis" => {
                hosts.iter().any(|h| host_plane_uses(h, &|name| name.starts_with("Iterator::")))
            }
            _ => true,
        })
        .collect()
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
