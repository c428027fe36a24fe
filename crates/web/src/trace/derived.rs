//! The lines XProf derives on GPU planes (`mlprof_analysis::derived_lines`): per GPU
//! plane of an XSpace host, a section `<plane> (derived)` of its `Steps` line and, per
//! stream `#N`, "Framework Name Scope - from #N", "Framework Ops - from #N", "XLA
//! Modules - from #N", "XLA Ops - from #N" and "Source code - from #N" — the XLA ops,
//! framework ops, modules and steps that JAX and TensorFlow GPU users look for.
//!
//! The one design decision to know: the tracks sit in a section of their own, added
//! before the host's planes, because `TimelineBuilder::add_host` owns the device
//! sections; XProf shows them inside the device, each stream's lines after it and
//! `Steps` last. Each derived event points at the first model event it covers (a
//! kernel, or a step's first event), so its details are that event's args, and it
//! starts where that event starts.

use mlprof_analysis::{derived_lines, facts};
use mlprof_model::Host;
use mlprof_timeline::{BuildError, ModelRef, SectionKind, TimelineBuilder};

/// The name of the section of plane `plane`'s derived lines.
fn section_name(plane: &str) -> String {
    format!("{plane} (derived)")
}

/// Adds a section of derived lines for each GPU plane of `host` that gets some; does
/// nothing for hosts without one (and only then skips grouping the host).
pub(crate) fn add_derived_lines(builder: &mut TimelineBuilder, host: &Host) -> Result<(), BuildError> {
    if derived_lines::planes_to_derive(host).is_empty() {
        return Ok(());
    }
    let groups = facts::step_groups(host);
    for derived in derived_lines::derive(host, &groups) {
        let Some(plane) = host.planes.get(derived.plane) else { continue };
        let section = builder.section(&section_name(&plane.name), SectionKind::Derived);
        for track in &derived.tracks {
            let handle = builder.track(section, &track.name)?;
            builder.reserve_events(handle, track.events.len());
            let names: Vec<_> = track.names.iter().map(|name| builder.name(name)).collect();
            for event in &track.events {
                let Some(&name) = names.get(event.name as usize) else { continue };
                let (plane, line, index) = event.at;
                let source = ModelRef { plane, line, event: index }
                    .pack()
                    .ok_or(BuildError::SourceOutOfRange { plane: plane as usize, line: line as usize })?;
                builder.event(handle, event.begin_ps, event.duration_ps, name, source)?;
            }
        }
    }
    Ok(())
}
