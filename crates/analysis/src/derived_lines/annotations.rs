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

/// The stats of one kernel that matter here (strings borrowed from the plane).
struct Kernel<'e> {
    /// The whole `hlo_op` stat (`outer::inner`); empty when not an XLA op.
    hlo_op: &'e str,
    hlo_module: &'e str,
    program_id: Option<i64>,
    tf_op: &'e str,
    scope_range_id: Option<i64>,
}

/// An XLA kernel's module, program and op annotation: kernels that share it derive the
/// same names.
type XlaKey<'e> = (&'e str, Option<i64>, &'e str);

/// The name ids (in one stream's lines) an XLA kernel annotation stands for, resolved
/// once per distinct annotation.
#[derive(Debug, Default)]
struct XlaNames {
    /// On the module line: `module(program_id)`, when the kernel names a module.
    module: Option<u32>,
    /// On the XLA op line, one per `::` level, outermost first.
    ops: Vec<u32>,
    /// The instruction's framework op, when the program and instruction are known.
    framework: Option<FrameworkNames>,
    /// On the source line, when the instruction names a source file.
    source: Option<u32>,
}

/// The name ids a framework op stands for on one stream's lines.
#[derive(Clone, Debug, Default)]
struct FrameworkNames {
    /// On the name-scope line, outermost first (none unless a TensorFlow or JAX op).
    scopes: Vec<u32>,
    /// On the framework-op line.
    op: u32,
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
        let mut xla_names: HashMap<XlaKey<'a>, XlaNames> = HashMap::new();
        let mut framework_names: HashMap<&'a str, FrameworkNames> = HashMap::new();
        for (_, _, index) in order {
            let Some(event) = line.event(index) else { continue };
            let Some(kernel) = self.kernel(&event) else { continue };
            let at = (self.plane_index as u32, line_index as u32, index as u32);
            let group = self.groups.group_of(self.plane_index, line_index, index);
            let span = Span::new(event.start_ps(), event.duration_ps());
            let kernel_lines = KernelLines { group, span, at };
            if !kernel.hlo_op.is_empty() || !kernel.hlo_module.is_empty() {
                let key = (kernel.hlo_module, kernel.program_id, kernel.hlo_op);
                let names = xla_names.entry(key).or_insert_with(|| self.xla_names(&mut lines, &kernel));
                let scopes = self.scope_chain(kernel.scope_range_id);
                lines.add_xla_kernel(names, &scopes, kernel_lines);
            }
            if kernel.hlo_op.is_empty() && !kernel.tf_op.is_empty() {
                let names = framework_names.entry(kernel.tf_op).or_insert_with(|| lines.framework_names(kernel.tf_op));
                lines.add_framework_op(names, kernel_lines);
            }
        }
        lines.finish(line.id)
    }

    /// The kernel's stats, or `None` when the event is not a kernel or CUDA graph launch.
    fn kernel(&self, event: &Event<'a>) -> Option<Kernel<'a>> {
        let row = self.stats.row(self.plane, event);
        let text = |i: usize| row.str(i, self.plane, event).unwrap_or("");
        if text(KERNEL_DETAILS).is_empty() && row.get(CUDA_GRAPH_EXEC).is_none() {
            return None;
        }
        Some(Kernel {
            hlo_op: text(HLO_OP),
            hlo_module: text(HLO_MODULE),
            program_id: row.int(PROGRAM_ID),
            tf_op: text(TF_OP),
            scope_range_id: row.int(SCOPE_RANGE),
        })
    }

    /// The names `kernel`'s XLA annotation stands for, interned in `lines`: the module
    /// `module(program_id)`, the ops keyed by program (else module) as
    /// `program_id/op`, and the framework op and source line of the innermost op's
    /// instruction in the program's HLO.
    fn xla_names(&self, lines: &mut StreamLines, kernel: &Kernel<'_>) -> XlaNames {
        let mut names = XlaNames::default();
        if !kernel.hlo_module.is_empty() {
            let key = match kernel.program_id {
                Some(id) => format!("{}({})", kernel.hlo_module, id as u64),
                None => kernel.hlo_module.to_string(),
            };
            names.module = Some(lines.modules.name(&key, || key.clone()));
        }
        if kernel.hlo_op.is_empty() {
            return names;
        }
        let prefix = match kernel.program_id {
            Some(id) => (id as u64).to_string(),
            None => kernel.hlo_module.to_string(),
        };
        let ops: Vec<&str> = kernel.hlo_op.split(ANNOTATION_SEPARATOR).collect();
        names.ops = ops.iter().map(|&op| lines.xla_ops.name(&format!("{prefix}/{op}"), || op.to_string())).collect();
        let instruction =
            kernel.program_id.zip(ops.last()).and_then(|(program, op)| self.modules.instruction(program, op));
        if let Some(instruction) = instruction {
            // XProf's `TraceMeOp`: `op_name:op_type`, `:` when the metadata has neither.
            names.framework = Some(lines.framework_names(&format!("{}:{}", instruction.op_name, instruction.op_type)));
            names.source = source_info(instruction).map(|source| lines.source.name(&source, || source.clone()));
        }
        names
    }

    /// The kernel's scope range and its ancestors', innermost first (empty without a
    /// scope range); stops before an ancestor seen already.
    fn scope_chain(&self, scope_range_id: Option<i64>) -> Vec<i64> {
        let Some(first) = scope_range_id else { return Vec::new() };
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

/// Where one kernel goes on the derived lines: its step group, span and position.
#[derive(Clone, Copy)]
struct KernelLines {
    group: Option<i64>,
    span: Span,
    at: EventAt,
}

impl KernelLines {
    fn mark(&self, name: u32, scope: Option<i64>) -> Mark {
        Mark { name, group: self.group, scope }
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
    /// Reused for the marks of each kernel's levels.
    marks: Vec<Mark>,
}

impl StreamLines {
    /// The names framework op `full_name` (`scope/op:Type`) stands for, interned
    /// (XProf's `ProcessTfOpEvent` naming): scopes for TensorFlow and JAX ops, the op
    /// keyed by its full name and shown by [`framework_op_shown`], else by its full name.
    fn framework_names(&mut self, full_name: &str) -> FrameworkNames {
        let op = parse_tf_op(full_name);
        let mut scopes = Vec::new();
        if matches!(op.category, OpCategory::TensorFlow | OpCategory::Jax)
            && let Some((path, _op)) = op.name.rsplit_once('/')
        {
            scopes = path.split('/').map(|scope| self.name_scopes.name(scope, || scope.to_string())).collect();
        }
        let op = self.framework_ops.name(full_name, || {
            let shown = framework_op_shown(&op);
            if shown.is_empty() { full_name.to_string() } else { shown }
        });
        FrameworkNames { scopes, op }
    }

    /// An XLA kernel: its module (a new module event closes the name scopes, framework
    /// ops and XLA ops under the old one), its ops, and its instruction's framework op
    /// and source line. `scopes` is its scope range chain, innermost first; it names
    /// the module by its root and the op levels only when there is one per level.
    fn add_xla_kernel(&mut self, names: &XlaNames, scopes: &[i64], kernel: KernelLines) {
        if let Some(module) = names.module
            && self.modules.expand_or_add(kernel.mark(module, scopes.last().copied()), kernel.span, kernel.at)
        {
            self.name_scopes.close_from(0);
            self.framework_ops.close_from(0);
            self.xla_ops.close_from(0);
        }
        if names.ops.is_empty() {
            return;
        }
        let per_level = scopes.len() == names.ops.len();
        let mut marks = std::mem::take(&mut self.marks);
        marks.clear();
        marks.extend(
            names
                .ops
                .iter()
                .enumerate()
                .map(|(level, &op)| kernel.mark(op, per_level.then(|| scopes[scopes.len() - 1 - level]))),
        );
        self.xla_ops.expand_or_add_levels(&marks, kernel.span, kernel.at);
        self.marks = marks;
        if let Some(framework) = &names.framework {
            self.add_framework_op(framework, kernel);
        }
        if let Some(source) = names.source {
            self.source.expand_or_add(kernel.mark(source, None), kernel.span, kernel.at);
        }
    }

    /// A framework op on the name-scope and framework-op lines; a new outermost scope
    /// closes the open framework op.
    fn add_framework_op(&mut self, names: &FrameworkNames, kernel: KernelLines) {
        let mut marks = std::mem::take(&mut self.marks);
        marks.clear();
        marks.extend(names.scopes.iter().map(|&scope| kernel.mark(scope, None)));
        if self.name_scopes.expand_or_add_levels(&marks, kernel.span, kernel.at) {
            self.framework_ops.close_from(0);
        }
        self.marks = marks;
        self.framework_ops.expand_or_add(kernel.mark(names.op, None), kernel.span, kernel.at);
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
