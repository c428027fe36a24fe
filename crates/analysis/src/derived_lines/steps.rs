//! The `Steps` line of a GPU plane (XProf's `DeriveStepEventsFromGroups`): the events
//! of all its streams in time order, consecutive events of one step group made one
//! step event, named by the group (`train 6`).
//!
//! The one rule to know: groups come from [`HostGroups`], where an ungrouped GPU event
//! already took the group of the latest grouped event before it (XProf's
//! `ProcessUngroupedEvents`), so every event after the first grouped one counts.

use mlprof_model::{Plane, names};

use super::DerivedTrack;
use super::line_builder::{LineBuilder, Mark, Span};
use crate::grouping::HostGroups;

/// The `Steps` line of plane `plane_index`, or `None` when none of its events has a
/// step group.
pub(super) fn derive(plane: &Plane, plane_index: usize, groups: &HostGroups) -> Option<DerivedTrack> {
    let mut order: Vec<(i64, std::cmp::Reverse<i64>, usize, usize, i64)> = Vec::new();
    for (line_index, line) in plane.lines.iter().enumerate() {
        for event in line.iter().filter(|event| event.num_occurrences().is_none()) {
            if let Some(group) = groups.group_of(plane_index, line_index, event.index()) {
                let duration = std::cmp::Reverse(event.duration_ps().max(0));
                order.push((event.start_ps(), duration, line_index, event.index(), group));
            }
        }
    }
    order.sort_unstable();
    let mut steps = LineBuilder::default();
    for (begin_ps, std::cmp::Reverse(duration_ps), line, event, group) in order {
        let name =
            steps.name(&group.to_string(), || groups.name_of(group).map_or_else(|| group.to_string(), str::to_string));
        let span = Span::new(begin_ps, duration_ps);
        steps.expand_or_add(
            Mark { name, group: Some(group), scope: None },
            span,
            (plane_index as u32, line as u32, event as u32),
        );
    }
    (!steps.is_empty()).then(|| steps.finish(names::STEPS_LINE.to_string()))
}
