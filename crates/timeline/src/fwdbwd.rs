//! PyTorch's forward → backward links in Chrome traces: Kineto writes them as flow
//! events of category `fwdbwd`, a start (`ph` `s`) on the forward op's thread and a
//! finish (`ph` `f`, `bp` `e`) on the backward op's, paired by `id`. Each end is bound
//! to a slice (a complete event) of its own thread, as in Chrome's trace format: a
//! start and a finish with `bp` `e` to the innermost slice enclosing its time, any
//! other finish to the first slice starting at or after it. Each finish is linked from
//! the latest start of its id at or before it; ends without a partner or without a
//! slice to bind to give no flow.

use mlprof_model::names::chrome::{
    BINDING_ENCLOSING, CAT_FWDBWD, CAT_STAT, PH_FLOW_END, PH_FLOW_START, PH_FLOW_STEP, PH_STAT,
};
use mlprof_model::{Event, Plane, StatValue};

use crate::builder::EventRef;

/// What an event metadata entry of a plane is to the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// A complete event (any event of a non-Chrome plane, `X` in a Chrome trace, which
    /// the reader stores without `ph`): shown, and flow ends bind to it.
    Slice,
    /// Any other shown event (instants, counters, `B`/`E`, …).
    Other,
    /// A forward → backward flow start: an end, not an event.
    FlowStart,
    /// A forward → backward flow finish: an end, not an event.
    FlowFinish,
    /// Any other Chrome flow marker (`ph` `s`/`t`/`f`): neither an event nor an end.
    Marker,
}

impl Role {
    /// Whether events of this role are index events.
    pub(crate) fn is_shown(self) -> bool {
        matches!(self, Role::Slice | Role::Other)
    }
}

/// The role of each event metadata entry of `plane`, by its `ph` and `cat` metadata
/// stats (the Kineto reader's).
pub(crate) fn metadata_roles(plane: &Plane) -> Vec<Role> {
    let Some(ph_key) = plane.find_stat_key(PH_STAT) else { return vec![Role::Slice; plane.event_metadata.len()] };
    let cat_key = plane.find_stat_key(CAT_STAT);
    let text_of = |metadata, key: Option<u32>| match plane.metadata_stat(metadata, key?)? {
        StatValue::Str(t) => Some(plane.metadata_stats.text(t)),
        _ => None,
    };
    plane
        .event_metadata
        .iter()
        .map(|m| {
            let fwdbwd = text_of(m, cat_key) == Some(CAT_FWDBWD);
            match text_of(m, Some(ph_key)) {
                None => Role::Slice,
                Some(PH_FLOW_START) if fwdbwd => Role::FlowStart,
                Some(PH_FLOW_END) if fwdbwd => Role::FlowFinish,
                Some(PH_FLOW_START | PH_FLOW_STEP | PH_FLOW_END) => Role::Marker,
                Some(_) => Role::Other,
            }
        })
        .collect()
}

/// The stat keys of one plane that flow ends carry (`@id`, `@bp`).
#[derive(Clone, Copy)]
pub(crate) struct EndKeys {
    id: Option<u32>,
    binding: Option<u32>,
}

impl EndKeys {
    /// The keys of `plane`.
    pub(crate) fn of(plane: &Plane) -> EndKeys {
        EndKeys { id: plane.find_stat_key("@id"), binding: plane.find_stat_key("@bp") }
    }
}

/// One flow end of a line, before binding.
struct End {
    /// The flow id as text (a numeric `id` in decimal, as Chrome compares them).
    id: String,
    at_ps: i64,
    start: bool,
    /// Binds to the enclosing slice (else to the next one).
    enclosing: bool,
}

/// The slices and flow ends of one line, bound when the line is done.
#[derive(Default)]
pub(crate) struct LineEnds {
    /// (start, end, event) of each slice.
    slices: Vec<(i64, i64, EventRef)>,
    ends: Vec<End>,
}

impl LineEnds {
    /// Notes a slice of the line: `start_ps`, `dur_ps` (negative counts as 0), `event`.
    pub(crate) fn slice(&mut self, start_ps: i64, dur_ps: i64, event: EventRef) {
        self.slices.push((start_ps, start_ps.saturating_add(dur_ps.max(0)), event));
    }

    /// Notes a flow end of `role` ([`Role::FlowStart`] or [`Role::FlowFinish`]); one
    /// without an integer or text `@id` is dropped.
    pub(crate) fn end(&mut self, keys: EndKeys, role: Role, event: &Event<'_>) {
        let start = role == Role::FlowStart;
        let (mut id, mut binding_enclosing) = (None, false);
        for stat in event.stats() {
            if Some(stat.key()) == keys.id {
                id = match stat.value() {
                    StatValue::Int(v) => Some(v.to_string()),
                    StatValue::Uint(v) => Some(v.to_string()),
                    StatValue::Str(t) => Some(event.store().text(t).to_string()),
                    _ => None,
                };
            } else if Some(stat.key()) == keys.binding {
                binding_enclosing =
                    matches!(stat.value(), StatValue::Str(t) if event.store().text(t) == BINDING_ENCLOSING);
            }
        }
        if let Some(id) = id {
            self.ends.push(End { id, at_ps: event.start_ps(), start, enclosing: start || binding_enclosing });
        }
    }

    /// Binds the line's ends to its slices and adds them to `flows`.
    pub(crate) fn bind_into(mut self, flows: &mut BoundEnds) {
        if self.ends.is_empty() {
            return;
        }
        // By start, the longer first at one start: the last open slice is the innermost.
        // (A line's slices come nearly in this order, which the stable sort turns to
        // account: it merges the runs it finds.)
        self.slices.sort_by_key(|&(start, end, e)| (start, std::cmp::Reverse(end), e));
        self.ends.sort_by_key(|end| end.at_ps);
        let mut open: Vec<(i64, i64, EventRef)> = Vec::new();
        let mut next = 0;
        for end in self.ends {
            let bound = if end.enclosing {
                while let Some(&slice) = self.slices.get(next).filter(|s| s.0 <= end.at_ps) {
                    open.push(slice);
                    next += 1;
                }
                // A slice that ended before this end encloses no later one either.
                while open.last().is_some_and(|s| s.1 < end.at_ps) {
                    open.pop();
                }
                open.last().map(|s| s.2)
            } else {
                let first = self.slices.partition_point(|s| s.0 < end.at_ps);
                self.slices.get(first).map(|s| s.2)
            };
            if let Some(event) = bound {
                let side = if end.start { &mut flows.starts } else { &mut flows.finishes };
                side.push((end.id, end.at_ps, event));
            }
        }
    }
}

/// The bound ends of a host's forward → backward flows: (id, time, slice).
#[derive(Default)]
pub(crate) struct BoundEnds {
    starts: Vec<(String, i64, EventRef)>,
    finishes: Vec<(String, i64, EventRef)>,
}

impl BoundEnds {
    /// The flows: each finish from the latest start of its id at or before it.
    pub(crate) fn pairs(mut self) -> Vec<(EventRef, EventRef)> {
        self.starts.sort_unstable();
        let mut flows = Vec::new();
        for (id, at_ps, finish) in &self.finishes {
            let first = self.starts.partition_point(|s| s.0 < *id);
            let of_id = &self.starts[first..];
            let before = of_id.partition_point(|s| s.0 == *id && s.1 <= *at_ps);
            if let Some(start) = before.checked_sub(1).and_then(|i| of_id.get(i)).filter(|s| s.2 != *finish) {
                flows.push((start.2, *finish));
            }
        }
        flows
    }
}

#[cfg(test)]
mod tests {
    use crate::index::FlowDirection;
    use crate::{TimelineBuilder, TimelineIndex};

    fn index_of(json: &str) -> TimelineIndex {
        let host = mlprof_formats::kineto::read_kineto(json.as_bytes(), "t.json", "t").expect("trace reads");
        let mut b = TimelineBuilder::new();
        b.add_host(&host).expect("add");
        b.finish().expect("finish").into_index().expect("open")
    }

    /// Every flow of `index` as (from name, to name), sorted.
    fn flows(index: &TimelineIndex) -> Vec<(String, String)> {
        let name = |id: u32| index.name(index.event(id).expect("event").name).to_string();
        let mut out: Vec<_> = (0..index.event_count() as u32)
            .flat_map(|id| index.flows_of(id).into_iter().map(move |link| (id, link)))
            .filter(|(_, link)| link.direction == FlowDirection::Out)
            .map(|(id, link)| (name(id), name(link.event)))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn ends_bind_to_the_innermost_enclosing_or_the_next_slice_and_unpaired_ends_are_skipped() {
        let index = index_of(
            r#"[
              {"ph": "X", "name": "outer", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              {"ph": "X", "name": "inner", "pid": 1, "tid": 1, "ts": 10, "dur": 20},
              {"ph": "X", "name": "wrapper", "pid": 1, "tid": 1, "ts": 10, "dur": 22},
              {"ph": "i", "name": "mark", "pid": 1, "tid": 1, "ts": 15, "s": "t"},
              {"ph": "X", "name": "sibling", "pid": 1, "tid": 1, "ts": 40, "dur": 10},
              {"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": 15, "cat": "fwdbwd", "name": "fwdbwd"},
              {"ph": "s", "id": "a", "pid": 1, "tid": 1, "ts": 35, "cat": "fwdbwd", "name": "fwdbwd"},
              {"ph": "s", "id": 3, "pid": 1, "tid": 1, "ts": 200, "cat": "fwdbwd", "name": "fwdbwd"},
              {"ph": "s", "id": 4, "pid": 1, "tid": 1, "ts": 45, "cat": "fwdbwd", "name": "fwdbwd"},
              {"ph": "s", "id": 1, "pid": 1, "tid": 1, "ts": 15, "cat": "ac2g", "name": "ac2g"},
              {"ph": "X", "name": "back1", "pid": 1, "tid": 2, "ts": 300, "dur": 50},
              {"ph": "X", "name": "back2", "pid": 1, "tid": 2, "ts": 400, "dur": 50},
              {"ph": "X", "name": "back3", "pid": 1, "tid": 2, "ts": 500, "dur": 10},
              {"ph": "f", "id": 1, "pid": 1, "tid": 2, "ts": 320, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
              {"ph": "f", "id": "a", "pid": 1, "tid": 2, "ts": 360, "cat": "fwdbwd", "name": "fwdbwd"},
              {"ph": "f", "id": 1, "pid": 1, "tid": 2, "ts": 505, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
              {"ph": "f", "id": 3, "pid": 1, "tid": 2, "ts": 310, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
              {"ph": "f", "id": 9, "pid": 1, "tid": 2, "ts": 420, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
              {"ph": "f", "id": "a", "pid": 1, "tid": 2, "ts": 600, "cat": "fwdbwd", "name": "fwdbwd"},
              {"ph": "f", "id": 1, "pid": 1, "tid": 2, "ts": 330, "cat": "ac2g", "name": "ac2g", "bp": "e"}
            ]"#,
        );
        // Seven slices and the instant; no flow event is an index event.
        assert_eq!(index.event_count(), 8);
        let pairs = |list: &[(&str, &str)]| list.iter().map(|&(a, b)| (a.into(), b.into())).collect::<Vec<_>>();
        // `s` 1 in `inner` (not `wrapper`, which starts with it and ends later, nor the
        // instant at the same time) to both its `f`s; `s` "a"
        // between slices binds to `outer`, its first `f` (no `bp`) to the next slice
        // `back2`, the second to none. `s` 3 has no slice, `s` 4 and `f` 9 no partner,
        // and the `ac2g` flow is not a forward → backward one.
        assert_eq!(flows(&index), pairs(&[("inner", "back1"), ("inner", "back3"), ("outer", "back2")]));
        assert_eq!(index.flow_count(), 3);
    }

    #[test]
    fn a_finish_links_from_the_latest_start_of_its_id_before_it() {
        let index = index_of(
            r#"[
              {"ph": "X", "name": "first", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
              {"ph": "X", "name": "second", "pid": 1, "tid": 1, "ts": 20, "dur": 10},
              {"ph": "X", "name": "early", "pid": 1, "tid": 2, "ts": 12, "dur": 5},
              {"ph": "X", "name": "late", "pid": 1, "tid": 2, "ts": 40, "dur": 5},
              {"ph": "X", "name": "before", "pid": 1, "tid": 2, "ts": 0, "dur": 1},
              {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 25, "cat": "fwdbwd", "name": "fwdbwd"},
              {"ph": "s", "id": 5, "pid": 1, "tid": 1, "ts": 5, "cat": "fwdbwd", "name": "fwdbwd"},
              {"ph": "f", "id": 5, "pid": 1, "tid": 2, "ts": 42, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
              {"ph": "f", "id": 5, "pid": 1, "tid": 2, "ts": 13, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"},
              {"ph": "f", "id": 5, "pid": 1, "tid": 2, "ts": 0, "cat": "fwdbwd", "name": "fwdbwd", "bp": "e"}
            ]"#,
        );
        let pairs = |list: &[(&str, &str)]| list.iter().map(|&(a, b)| (a.into(), b.into())).collect::<Vec<_>>();
        // The finish at 0 precedes every start of its id.
        assert_eq!(flows(&index), pairs(&[("first", "early"), ("second", "late")]));
    }
}
