//! The lines one GPU stream's kernels derive from their annotations (XProf's
//! `DeriveEventsFromAnnotationsForLines` and `ProcessTfOpEvent`): XLA modules, XLA ops,
//! framework name scopes, framework ops and source code.
//!
//! The one rule to know: the lines depend on each other — a new XLA module event
//! closes the open name scopes and XLA ops, and a new outermost name scope closes the
//! open framework op — so a derived event never outgrows the one it belongs to.

use std::collections::{HashMap, HashSet};

use mlprof_model::{Event, Plane};

use super::line_builder::{LineBuilder, Mark, Span};
use super::{DerivedTrack, EventAt};
use crate::grouping::HostGroups;
use crate::hlo::{HloInstruction, HloModules};
use crate::tf_op::{OpCategory, TfOp, parse_tf_op};
use crate::xstats::StatSlots;

/// The kernel stats the lines are made from.
const STATS: [&str; 7] =
    ["kernel_details", "cuda_graph_exec_id", "hlo_op", "hlo_module", "program_id", "tf_op", "scope_range_id"];
const KERNEL_DETAILS: usize = 0;
const CUDA_GRAPH_EXEC: usize = 1;
const HLO_OP: usize = 2;
const HLO_MODULE: usize = 3;
const PROGRAM_ID: usize = 4;
const TF_OP: usize = 5;
const SCOPE_RANGE: usize = 6;

/// Separator of nested XLA op annotations (`while.1::fusion.2`).
const ANNOTATION_SEPARATOR: &str = "::";

/// What the streams of one GPU plane share while their lines are derived.
pub(super) struct PlaneContext<'a> {
    plane: &'a Plane,
    plane_index: usize,
    groups: &'a HostGroups,
    modules: &'a HloModules,
    scope_parents: &'a HashMap<i64, i64>,
    stats: StatSlots<7>,
}

/// The stats of one kernel that matter here.
struct Kernel<'e> {
    /// `hlo_op` split at `::`, outermost first; empty when the kernel is not an XLA op.
    hlo_ops: Vec<&'e str>,
    hlo_module: &'e str,
    program_id: Option<i64>,
    tf_op: &'e str,
    scope_range_id: Option<i64>,
}

impl<'a> PlaneContext<'a> {
    /// The context of plane `plane_index` of a host.
    pub(super) fn new(
        plane: &'a Plane,
        plane_index: usize,
        groups: &'a HostGroups,
        modules: &'a HloModules,
        scope_parents: &'a HashMap<i64, i64>,
    ) -> PlaneContext<'a> {
        PlaneContext { plane, plane_index, groups, modules, scope_parents, stats: StatSlots::new(plane, STATS) }
    }

    /// The non-empty lines derived from stream `line_index`, in XProf's order.
    pub(super) fn derive_stream(&self, line_index: usize) -> Vec<DerivedTrack> {
        let Some(line) = self.plane.lines.get(line_index) else { return Vec::new() };
        let mut order: Vec<(i64, std::cmp::Reverse<i64>, usize)> = line
            .iter()
            .filter(|event| event.num_occurrences().is_none())
            .map(|event| (event.start_ps(), std::cmp::Reverse(event.duration_ps().max(0)), event.index()))
            .collect();
        order.sort_unstable();
        let mut lines = StreamLines::default();
        for (_, _, index) in order {
            let Some(event) = line.event(index) else { continue };
            let Some(kernel) = self.kernel(&event) else { continue };
            let at = (self.plane_index as u32, line_index as u32, index as u32);
            let group = self.groups.group_of(self.plane_index, line_index, index);
            let span = Span::new(event.start_ps(), event.duration_ps());
            self.add_kernel(&mut lines, &kernel, group, span, at);
        }
        lines.finish(line.id)
    }

    /// The kernel's stats, or `None` when the event is not a kernel or CUDA graph launch.
    fn kernel<'e>(&self, event: &Event<'e>) -> Option<Kernel<'e>>
    where
        'a: 'e,
    {
        let row = self.stats.row(self.plane, event);
        let text = |i: usize| row.str(i, self.plane, event).unwrap_or("");
        if text(KERNEL_DETAILS).is_empty() && row.get(CUDA_GRAPH_EXEC).is_none() {
            return None;
        }
        let hlo_op = text(HLO_OP);
        Some(Kernel {
            hlo_ops: if hlo_op.is_empty() { Vec::new() } else { hlo_op.split(ANNOTATION_SEPARATOR).collect() },
            hlo_module: text(HLO_MODULE),
            program_id: row.int(PROGRAM_ID),
            tf_op: text(TF_OP),
            scope_range_id: row.int(SCOPE_RANGE),
        })
    }

    fn add_kernel(&self, lines: &mut StreamLines, kernel: &Kernel<'_>, group: Option<i64>, span: Span, at: EventAt) {
        let is_xla = !kernel.hlo_ops.is_empty();
        let scopes = if is_xla || !kernel.hlo_module.is_empty() { self.scope_chain(kernel) } else { Vec::new() };
        if !kernel.hlo_module.is_empty() {
            let key = match kernel.program_id {
                Some(id) => format!("{}({})", kernel.hlo_module, id as u64),
                None => kernel.hlo_module.to_string(),
            };
            let name = lines.modules.name(&key, || key.clone());
            let mark = Mark { name, group, scope: scopes.last().copied() };
            if lines.modules.expand_or_add(mark, span, at) {
                lines.module_restarted();
            }
        }
        if is_xla {
            let prefix = match kernel.program_id {
                Some(id) => (id as u64).to_string(),
                None => kernel.hlo_module.to_string(),
            };
            // Scope ranges name the levels only when there is one per level, root first.
            let per_level = scopes.len() == kernel.hlo_ops.len();
            let marks: Vec<Mark> = kernel
                .hlo_ops
                .iter()
                .enumerate()
                .map(|(level, &op)| Mark {
                    name: lines.xla_ops.name(&format!("{prefix}/{op}"), || op.to_string()),
                    group,
                    scope: per_level.then(|| scopes[scopes.len() - 1 - level]),
                })
                .collect();
            lines.xla_ops.expand_or_add_levels(&marks, span, at);
            let instruction =
                kernel.program_id.zip(kernel.hlo_ops.last()).and_then(|(p, op)| self.modules.instruction(p, op));
            if let Some(instruction) = instruction {
                let framework_op = format!("{}:{}", instruction.op_name, instruction.op_type);
                lines.add_framework_op(&framework_op, group, span, at);
                if let Some(source) = source_info(instruction) {
                    let name = lines.source.name(&source, || source.clone());
                    lines.source.expand_or_add(Mark { name, group, scope: None }, span, at);
                }
            }
        } else if !kernel.tf_op.is_empty() {
            lines.add_framework_op(kernel.tf_op, group, span, at);
        }
    }

    /// The kernel's scope range and its ancestors', innermost first (empty without a
    /// scope range); stops before an ancestor seen already.
    fn scope_chain(&self, kernel: &Kernel<'_>) -> Vec<i64> {
        let Some(first) = kernel.scope_range_id else { return Vec::new() };
        let mut chain = vec![first];
        let mut seen = HashSet::new();
        let mut at = first;
        while let Some(&parent) = self.scope_parents.get(&at) {
            if !seen.insert(parent) {
                break;
            }
            chain.push(parent);
            at = parent;
        }
        chain
    }
}

/// An instruction's source line as XProf shows it: `file.py:12` (the file's base
/// name), when the metadata names a file.
fn source_info(instruction: &HloInstruction) -> Option<String> {
    let (file, line) = instruction.source.as_ref()?;
    let base = file.rsplit('/').next().unwrap_or(file);
    Some(format!("{base}:{line}"))
}

/// The name a framework op shows (XProf's `TfOpEventName`): its type; a tf.data
/// iterator's last component; the whole name, trailing spaces removed, when it is no
/// op name; empty when none of these is known.
fn framework_op_shown(op: &TfOp<'_>) -> String {
    match op.category {
        OpCategory::Unknown => op.name.trim_end_matches(|c: char| c.is_ascii_whitespace()).to_string(),
        OpCategory::TfData => format!("Iterator::{}", op.name.rsplit("::").next().unwrap_or(op.name)),
        _ => op.op_type.to_string(),
    }
}

/// The five lines of one stream.
#[derive(Default)]
struct StreamLines {
    name_scopes: LineBuilder,
    framework_ops: LineBuilder,
    modules: LineBuilder,
    xla_ops: LineBuilder,
    source: LineBuilder,
    /// Reused for the name-scope marks of each kernel.
    scope_marks: Vec<Mark>,
}

impl StreamLines {
    /// A new module event closes what lies under it: name scopes (and so framework
    /// ops) and XLA ops.
    fn module_restarted(&mut self) {
        self.name_scopes.close_from(0);
        self.framework_ops.close_from(0);
        self.xla_ops.close_from(0);
    }

    /// A framework op `full_name` (`scope/op:Type`) on the name-scope and framework-op
    /// lines (XProf's `ProcessTfOpEvent`).
    fn add_framework_op(&mut self, full_name: &str, group: Option<i64>, span: Span, at: EventAt) {
        let op = parse_tf_op(full_name);
        if matches!(op.category, OpCategory::TensorFlow | OpCategory::Jax) {
            let mut marks = std::mem::take(&mut self.scope_marks);
            marks.clear();
            if let Some((scopes, _op)) = op.name.rsplit_once('/') {
                for scope in scopes.split('/') {
                    let name = self.name_scopes.name(scope, || scope.to_string());
                    marks.push(Mark { name, group, scope: None });
                }
            }
            if self.name_scopes.expand_or_add_levels(&marks, span, at) {
                self.framework_ops.close_from(0);
            }
            self.scope_marks = marks;
        }
        let name = self.framework_ops.name(full_name, || {
            let shown = framework_op_shown(&op);
            if shown.is_empty() { full_name.to_string() } else { shown }
        });
        self.framework_ops.expand_or_add(Mark { name, group, scope: None }, span, at);
    }

    /// The lines with events, named after stream `stream_id`, in XProf's order.
    fn finish(self, stream_id: i64) -> Vec<DerivedTrack> {
        [
            ("Framework Name Scope", self.name_scopes),
            ("Framework Ops", self.framework_ops),
            ("XLA Modules", self.modules),
            ("XLA Ops", self.xla_ops),
            ("Source code", self.source),
        ]
        .into_iter()
        .filter(|(_, line)| !line.is_empty())
        .map(|(name, line)| line.finish(format!("{name} - from #{stream_id}")))
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_lines_name_the_file_by_its_base_name() {
        let at = |file: &str| HloInstruction { source: Some((file.into(), 12)), ..HloInstruction::default() };
        assert_eq!(source_info(&at("/src/model/train.py")).as_deref(), Some("train.py:12"));
        assert_eq!(source_info(&at("train.py")).as_deref(), Some("train.py:12"));
        assert_eq!(source_info(&HloInstruction::default()), None);
    }

    #[test]
    fn framework_ops_show_their_type_or_their_trimmed_name() {
        let shown = |full: &str| framework_op_shown(&parse_tf_op(full));
        assert_eq!(shown("model/dense/MatMul:MatMul"), "MatMul");
        assert_eq!(shown("jit(f)/jvp()/dot_general:"), "dot_general");
        assert_eq!(shown("Iterator::Root::Prefetch::Map"), "Iterator::Map");
        assert_eq!(shown("my region  "), "my region");
        assert_eq!(shown(":"), "");
    }
}
