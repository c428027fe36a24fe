//! The derived `Steps` track of PyTorch (Kineto) traces: one event per
//! `ProfilerStep#N` annotation, in a section of its own shown first, so steps read
//! at a glance as XProf's device `Steps` lines do for XSpace (which the index keeps as
//! they are). Each step event points at its annotation in the model, so its details
//! are the annotation's args.

use mlprof_analysis::grouping::profiler_steps;
use mlprof_model::{Host, SourceFormat};
use mlprof_timeline::{BuildError, ModelRef, SectionKind, TimelineBuilder};

/// Name of the section and of its track.
pub(crate) const STEPS: &str = "Steps";

/// Adds the `Steps` section when `host` is a Kineto trace with `ProfilerStep#N`
/// annotations; does nothing otherwise.
pub(crate) fn add_profiler_steps(builder: &mut TimelineBuilder, host: &Host) -> Result<(), BuildError> {
    if host.format != SourceFormat::Kineto {
        return Ok(());
    }
    let steps = profiler_steps::find(host);
    if steps.is_empty() {
        return Ok(());
    }
    let section = builder.section(STEPS, SectionKind::Derived);
    let events = steps.into_iter().map(|step| {
        let (plane, line, event) = step.at;
        (step.begin_ps, step.end_ps.saturating_sub(step.begin_ps), step.name, ModelRef { plane, line, event })
    });
    builder.add_model_track(section, STEPS, events)?;
    Ok(())
}
