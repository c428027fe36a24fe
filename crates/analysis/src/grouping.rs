//! Event grouping: which step (XProf's `group_id`) each event belongs to.
//!
//! The one design decision to know: group ids are not written into the model; they
//! live in [`HostGroups`], a side table parallel to the host's planes and lines, so
//! the model stays immutable and shared across analyses.

use mlprof_model::Host;

/// "No group" in [`HostGroups`].
pub const NO_GROUP: i64 = -1;

/// The group id of every event of one host: `planes[p][l][e]` for event `e` of line
/// `l` of plane `p` (indices as in `Host::planes`), [`NO_GROUP`] when ungrouped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostGroups {
    /// Per plane, per line, per event.
    pub planes: Vec<Vec<Vec<i64>>>,
    /// Per group id (index), the group's name (e.g. `train 6`).
    pub names: Vec<String>,
    /// Events XProf marks `is_eager=1` (TF ops and GPU kernels executed op by op
    /// under an `EagerKernelExecute` that is not a compiled function), as
    /// `(plane, line, event)` indices, sorted.
    pub eager: Vec<(u32, u32, u32)>,
}

impl HostGroups {
    /// A table with every event of `host` ungrouped.
    pub fn none(host: &Host) -> HostGroups {
        let planes = host
            .planes
            .iter()
            .map(|plane| plane.lines.iter().map(|line| vec![NO_GROUP; line.len()]).collect())
            .collect();
        HostGroups { planes, names: Vec::new(), eager: Vec::new() }
    }

    /// Whether event `event` of line `line` of plane `plane` ran eagerly (XProf's
    /// `is_eager` stat, set by grouping).
    pub fn is_eager(&self, plane: usize, line: usize, event: usize) -> bool {
        let key = (plane as u32, line as u32, event as u32);
        self.eager.binary_search(&key).is_ok()
    }

    /// The group of event `event` of line `line` of plane `plane`, if grouped.
    pub fn group_of(&self, plane: usize, line: usize, event: usize) -> Option<i64> {
        let group = *self.planes.get(plane)?.get(line)?.get(event)?;
        (group != NO_GROUP).then_some(group)
    }
}

/// Groups the events of `host` into steps (XProf's `GroupTfEvents`).
pub fn group_host(host: &Host) -> HostGroups {
    HostGroups::none(host)
}
