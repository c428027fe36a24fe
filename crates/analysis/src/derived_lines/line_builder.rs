//! One derived line being built: XProf's `DerivedXLineBuilder` rule of expanding the
//! last event of a nesting level or starting a new one.
//!
//! The one rule to know: each level keeps its *open* event; a source event with the
//! same name, the same step group and a compatible scope range extends the open event
//! of its level to cover it, anything else closes that level and every deeper one and
//! opens a new event. On closing, a stack of nested events with identical spans is
//! shortened by 1 ns per level (never below 1 ns for the innermost) so a viewer stacks
//! them in a fixed order — XProf's `AdjustDurationForTraceViewer`, kept so the derived
//! events are the ones XProf's trace viewer shows.

use std::collections::HashMap;

use super::{DerivedEvent, DerivedTrack, EventAt};

use mlprof_model::time::PS_PER_NS;

/// A source event's span, `[begin_ps, end_ps)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Span {
    /// Start, picoseconds from the profile start.
    pub begin_ps: i64,
    /// End, picoseconds from the profile start.
    pub end_ps: i64,
}

impl Span {
    /// The span of an event starting at `begin_ps` and lasting `duration_ps` (a
    /// negative duration counts as 0).
    pub(super) fn new(begin_ps: i64, duration_ps: i64) -> Span {
        Span { begin_ps, end_ps: begin_ps.saturating_add(duration_ps.max(0)) }
    }
}

/// What a source event contributes at one level: its name id (from
/// [`LineBuilder::name`]), step group and scope range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Mark {
    /// Name id in the line's name table.
    pub name: u32,
    /// The step group of the source event.
    pub group: Option<i64>,
    /// The source event's XLA scope range id at this level, if known.
    pub scope: Option<i64>,
}

/// The open event of one level.
#[derive(Clone, Copy, Debug)]
struct Open {
    /// Index in `LineBuilder::events`.
    event: usize,
    name: u32,
    group: Option<i64>,
    scope: Option<i64>,
}

impl Open {
    /// XProf's `ShouldExpand`: same name and group; scope ranges differ only when both
    /// are known.
    fn takes(&self, mark: &Mark) -> bool {
        self.name == mark.name
            && self.group == mark.group
            && (mark.scope.is_none() || self.scope.is_none() || self.scope == mark.scope)
    }
}

/// A derived line under construction.
#[derive(Debug, Default)]
pub(super) struct LineBuilder {
    /// Names shown, by name id.
    names: Vec<String>,
    /// Name id by merge key (XProf's event metadata name, e.g. `26/fusion.1` for an
    /// XLA op shown as `fusion.1`).
    ids: HashMap<String, u32>,
    events: Vec<DerivedEvent>,
    /// Per nesting level, its open event; the length is the deepest level used + 1.
    open: Vec<Option<Open>>,
}

impl LineBuilder {
    /// The name id of merge key `key`, shown as `shown()` (called on first use only).
    pub(super) fn name(&mut self, key: &str, shown: impl FnOnce() -> String) -> u32 {
        if let Some(&id) = self.ids.get(key) {
            return id;
        }
        let id = self.names.len() as u32;
        self.names.push(shown());
        self.ids.insert(key.to_string(), id);
        id
    }

    /// Extends the open level-0 event with `span` or starts a new one (XProf's
    /// `ExpandOrAddEvent`). Returns whether level 0 was closed, which closes the
    /// lines that depend on this one.
    pub(super) fn expand_or_add(&mut self, mark: Mark, span: Span, at: EventAt) -> bool {
        self.expand_or_add_level(0, mark, span, at)
    }

    /// One mark per level, outermost first (XProf's `ExpandOrAddEvents`): each level is
    /// extended or restarted, then the levels deeper than `marks` are closed. Does
    /// nothing without marks. Returns whether level 0 was closed.
    pub(super) fn expand_or_add_levels(&mut self, marks: &[Mark], span: Span, at: EventAt) -> bool {
        if marks.is_empty() {
            return false;
        }
        let mut closed_root = false;
        for (level, mark) in marks.iter().enumerate() {
            closed_root |= self.expand_or_add_level(level, *mark, span, at);
        }
        self.close_from(marks.len());
        closed_root
    }

    fn expand_or_add_level(&mut self, level: usize, mark: Mark, span: Span, at: EventAt) -> bool {
        if self.open.len() <= level {
            self.open.resize(level + 1, None);
        }
        if let Some(open) = self.open[level].filter(|open| open.takes(&mark)) {
            if let Some(event) = self.events.get_mut(open.event) {
                let begin = event.begin_ps.min(span.begin_ps);
                let end = event.end_ps().max(span.end_ps);
                event.begin_ps = begin;
                event.duration_ps = end.saturating_sub(begin);
            }
            return false;
        }
        self.close_from(level);
        self.events.push(DerivedEvent {
            begin_ps: span.begin_ps,
            duration_ps: span.end_ps.saturating_sub(span.begin_ps),
            name: mark.name,
            level: level as u32,
            at,
        });
        self.open[level] =
            Some(Open { event: self.events.len() - 1, name: mark.name, group: mark.group, scope: mark.scope });
        level == 0
    }

    /// Closes the open events of `level` and deeper (XProf's `ResetLastEvents`, without
    /// the dependent lines, which the caller closes when `level` is 0).
    pub(super) fn close_from(&mut self, level: usize) {
        self.shorten_identical_stack(level);
        for open in self.open.iter_mut().skip(level) {
            *open = None;
        }
    }

    /// XProf's `AdjustDurationForTraceViewer`: over the open events from `level` to the
    /// deepest open one above it without a gap, each event whose span equals the one
    /// just above it adds 1 ns to a shortening that applies to it and to every deeper
    /// event, at most the innermost event's whole nanoseconds minus one.
    fn shorten_identical_stack(&mut self, level: usize) {
        if !matches!(self.open.get(level), Some(Some(_))) {
            return;
        }
        let top = level + self.open[level..].iter().take_while(|open| open.is_some()).count() - 1;
        if top <= level {
            return;
        }
        let Some(innermost) = self.open[top].and_then(|open| self.events.get(open.event)) else { return };
        let max_shrink_ns = innermost.duration_ps / PS_PER_NS - 1;
        let mut shrink_ns = 0;
        let mut above: Option<(i64, i64)> = None;
        for open in self.open[level..=top].iter().flatten() {
            let Some(event) = self.events.get_mut(open.event) else { continue };
            let span = (event.begin_ps, event.end_ps());
            if shrink_ns < max_shrink_ns && above == Some(span) {
                shrink_ns += 1;
            }
            above = Some(span);
            if shrink_ns > 0 {
                event.duration_ps = span.1.saturating_sub(shrink_ns * PS_PER_NS).saturating_sub(span.0).max(0);
            }
        }
    }

    /// Whether no event was derived.
    pub(super) fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The finished line, named `name`.
    pub(super) fn finish(self, name: String) -> DerivedTrack {
        DerivedTrack { name, names: self.names, events: self.events }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: EventAt = (0, 0, 0);

    fn span(begin_ps: i64, end_ps: i64) -> Span {
        Span { begin_ps, end_ps }
    }

    fn mark(name: u32) -> Mark {
        Mark { name, group: None, scope: None }
    }

    fn spans(line: &LineBuilder) -> Vec<(u32, u32, i64, i64)> {
        line.events.iter().map(|e| (e.level, e.name, e.begin_ps, e.end_ps())).collect()
    }

    #[test]
    fn the_same_name_group_and_scope_extend_the_open_event() {
        let mut line = LineBuilder::default();
        let a = line.name("k/a", || "a".into());
        let b = line.name("k/b", || "b".into());
        assert_eq!(line.name("k/a", || unreachable!("named once")), a);
        assert!(line.expand_or_add(mark(a), span(0, 10), AT), "a first event opens level 0");
        assert!(!line.expand_or_add(mark(a), span(20, 30), AT), "extended across the gap");
        assert!(line.expand_or_add(Mark { group: Some(1), ..mark(a) }, span(40, 50), AT), "another group");
        let scoped = |scope| Mark { group: Some(1), scope, ..mark(b) };
        assert!(line.expand_or_add(scoped(Some(5)), span(60, 70), AT));
        assert!(!line.expand_or_add(scoped(None), span(80, 90), AT), "an unknown scope joins");
        assert!(!line.expand_or_add(scoped(Some(5)), span(90, 95), AT), "the same scope joins");
        assert!(line.expand_or_add(scoped(Some(6)), span(100, 110), AT), "another scope does not");
        assert_eq!(spans(&line), [(0, a, 0, 30), (0, a, 40, 50), (0, b, 60, 95), (0, b, 100, 110)]);
        assert_eq!(line.finish("t".into()).names, ["a", "b"]);
    }

    #[test]
    fn a_new_outer_level_closes_the_deeper_ones() {
        let mut line = LineBuilder::default();
        let (a, b, c) = (line.name("a", || "a".into()), line.name("b", || "b".into()), line.name("c", || "c".into()));
        line.expand_or_add_levels(&[mark(a), mark(b)], span(0, 10_000), AT);
        line.expand_or_add_levels(&[mark(a)], span(10_000, 20_000), AT);
        // b was closed by the shorter stack: it does not grow over c's kernel.
        line.expand_or_add_levels(&[mark(a), mark(b)], span(20_000, 30_000), AT);
        assert!(line.expand_or_add_levels(&[mark(c), mark(b)], span(30_000, 40_000), AT));
        assert!(!line.expand_or_add_levels(&[], span(40_000, 50_000), AT), "no marks, nothing changes");
        assert_eq!(
            spans(&line),
            [
                (0, a, 0, 30_000),
                (1, b, 0, 10_000),
                (1, b, 20_000, 30_000),
                (0, c, 30_000, 40_000),
                (1, b, 30_000, 40_000)
            ]
        );
    }

    #[test]
    fn identical_nested_spans_are_shortened_by_a_nanosecond_per_level_when_closed() {
        // XProf's TfOpNameScopeShrinkTest, case 1: a/b/c then a/d.
        let mut line = LineBuilder::default();
        let [a, b, c, d] = ["a", "b", "c", "d"].map(|n| line.name(n, || n.into()));
        line.expand_or_add_levels(&[mark(a), mark(b), mark(c)], span(0, 10_000), AT);
        line.expand_or_add_levels(&[mark(a), mark(d)], span(20_000, 50_000), AT);
        assert_eq!(
            spans(&line),
            [(0, a, 0, 50_000), (1, b, 0, 10_000), (2, c, 0, 9_000), (1, d, 20_000, 50_000)],
            "a is still open, so not shortened"
        );

        // Case 2: the innermost event limits the shortening; it applies below a change.
        let mut line = LineBuilder::default();
        let [a, b, c, d, e, f, g] = ["a", "b", "c", "d", "e", "f", "g"].map(|n| line.name(n, || n.into()));
        line.expand_or_add_levels(&[mark(a), mark(b), mark(c), mark(d), mark(e)], span(0, 10_000), AT);
        line.expand_or_add_levels(&[mark(a), mark(b), mark(c), mark(d), mark(f)], span(10_000, 12_000), AT);
        line.expand_or_add_levels(&[mark(a), mark(g)], span(20_000, 50_000), AT);
        let durations: Vec<(u32, i64)> = line.events.iter().map(|e| (e.name, e.duration_ps)).collect();
        assert_eq!(
            durations,
            [(a, 50_000), (b, 12_000), (c, 11_000), (d, 11_000), (e, 10_000), (f, 1_000), (g, 30_000)]
        );
    }

    #[test]
    fn sub_nanosecond_stacks_are_not_shortened() {
        let mut line = LineBuilder::default();
        let [a, b] = ["a", "b"].map(|n| line.name(n, || n.into()));
        line.expand_or_add_levels(&[mark(a), mark(b)], span(0, 900), AT);
        line.close_from(0);
        assert_eq!(spans(&line), [(0, a, 0, 900), (1, b, 0, 900)]);
        assert!(!line.is_empty());
    }
}
