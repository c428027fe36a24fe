//! XLA kernels in the GPU op metrics database (XProf's `HLOTracker` and
//! `AggregateHloFunc` in `ConvertDeviceTraceXPlaneToOpMetricsDb`).
//!
//! A kernel XLA launched carries `hlo_op` (its HLO instruction; nested annotations are
//! joined by `::` and the last one counts) and `program_id` (the compiled program).
//! The op is that instruction, keyed `(program id, instruction name)`, named and
//! categorised from the program's HLO proto: category as XLA's `ToCategory`
//! (`loop fusion`, `non-fusion elementwise`, `dot`, …), provenance the framework op of
//! the instruction's metadata (`jit(train)/dot_general:dot_general`), which is what
//! the roll-up to framework ops groups by. A kernel whose instruction is not found is
//! not an op (it still counts towards the device's busy span).
//!
//! The one rule to know: consecutive kernels of one stream with the same instruction and
//! step group are counted as one run (XProf merges them before adding the run, which
//! only matters for the per-run `flops` and `bytes_accessed` stats: a run counts the
//! last kernel's value once per kernel). FLOPs and bytes of a kernel are its
//! instruction's cost in XLA's GPU cost model as XProf computes it (`hlo::cost`), else
//! its own `flops` and `bytes_accessed` stats.

use std::collections::HashMap;

use super::{DbBuilder, ps};
use crate::hlo::{HloCost, HloInstruction, HloModules};

/// What an XLA kernel event says about its op.
#[derive(Clone, Copy, Debug)]
pub(super) struct XlaKernel<'a> {
    /// Index of the stream (line) in its plane.
    pub line: usize,
    /// The `program_id` stat, if any (without it no instruction is found).
    pub program_id: Option<i64>,
    /// The `hlo_op` stat, whole (`outer::inner` for nested annotations).
    pub hlo_op: &'a str,
    /// The step group of the kernel, if grouping gave it one.
    pub group: Option<i64>,
    /// Whether it ran eagerly.
    pub is_eager: bool,
    /// Duration, picoseconds.
    pub duration_ps: i64,
    /// The kernel's `flops` stat (0 when absent).
    pub flops: u64,
    /// The kernel's `bytes_accessed` stat (0 when absent).
    pub bytes_accessed: u64,
}

impl XlaKernel<'_> {
    /// The instruction name: the innermost of the `::`-joined annotations.
    fn instruction_name(&self) -> &str {
        crate::hlo::innermost_hlo_op(self.hlo_op)
    }
}

/// Consecutive kernels of one instruction, counted as one run.
struct Run<'m> {
    line: usize,
    program_id: i64,
    instruction: &'m HloInstruction,
    /// XProf keeps the group as an unsigned number that is 0 until a grouped kernel
    /// starts a run; later kernels join only when their group equals it.
    group: u64,
    is_eager: bool,
    occurrences: u64,
    duration_ps: u64,
    /// What one execution of the run's (first) instruction costs.
    cost: HloCost,
    /// The last kernel's `flops` and `bytes_accessed` stats.
    flops: u64,
    bytes_accessed: u64,
}

/// Adds XLA kernels to a device database, merging runs as XProf does.
pub(super) struct XlaRuns<'m> {
    modules: &'m HloModules,
    current: Option<Run<'m>>,
    /// Cost of each instruction met so far, by program id and instruction index.
    costs: HashMap<(i64, usize), HloCost>,
}

impl<'m> XlaRuns<'m> {
    /// A tracker that names instructions from `modules`.
    pub(super) fn new(modules: &'m HloModules) -> XlaRuns<'m> {
        XlaRuns { modules, current: None, costs: HashMap::new() }
    }

    /// Counts `kernel`: extends the current run or adds it and starts a new one. Kernels
    /// whose instruction is unknown are skipped without ending the run.
    pub(super) fn add(&mut self, kernel: &XlaKernel<'_>, db: &mut DbBuilder) {
        let name = kernel.instruction_name();
        let Some(program_id) = kernel.program_id else { return };
        let Some((module, index)) = self.modules.locate(program_id, name) else { return };
        let Some(instruction) = module.instructions.get(index) else { return };
        let joins = self.current.as_ref().is_some_and(|run| {
            run.line == kernel.line
                && run.instruction.name == name
                && kernel.group.is_some_and(|g| g as u64 == run.group)
        });
        if !joins {
            self.flush(db);
        }
        let costs = &mut self.costs;
        let run = self.current.get_or_insert_with(|| Run {
            line: kernel.line,
            program_id,
            instruction,
            group: kernel.group.map_or(0, |g| g as u64),
            is_eager: kernel.is_eager,
            occurrences: 0,
            duration_ps: 0,
            cost: *costs.entry((program_id, index)).or_insert_with(|| module.cost(index)),
            flops: 0,
            bytes_accessed: 0,
        });
        run.occurrences += 1;
        run.duration_ps = run.duration_ps.saturating_add(ps(kernel.duration_ps));
        run.flops = kernel.flops;
        run.bytes_accessed = kernel.bytes_accessed;
    }

    /// Adds the current run, if any, to `db` (XProf's `AggregateHloFunc` and
    /// `DeviceOpMetricsDbBuilder::EnterOp`).
    pub(super) fn flush(&mut self, db: &mut DbBuilder) {
        let Some(run) = self.current.take() else { return };
        let op =
            db.add_run(run.program_id as u64, &run.instruction.name, run.occurrences, run.duration_ps, run.duration_ps);
        if op.occurrences == run.occurrences && op.category.is_empty() && op.provenance.is_empty() {
            op.category = run.instruction.xprof_category().to_string();
            op.provenance = run.instruction.tf_op_fullname();
            op.is_eager |= run.is_eager;
        }
        // The run's instruction's cost in XLA's GPU model, else the last kernel's stats
        // (XProf prefers its cost model of the run's first instruction the same way).
        // Device FLOPs (halved for 8-bit inputs) and XLA's model FLOPs; an op without
        // model FLOPs shows its device FLOPs as model FLOPs (XProf's `EnterOp`).
        let flops = if run.cost.flops > 0 { run.cost.flops } else { run.flops };
        let model_flops = if run.cost.model_flops > 0 { run.cost.model_flops } else { run.flops };
        let bytes = if run.cost.bytes_accessed > 0 { run.cost.bytes_accessed } else { run.bytes_accessed };
        op.flops = op.flops.saturating_add(flops.saturating_mul(run.occurrences));
        op.model_flops = if model_flops > 0 {
            op.model_flops.saturating_add(model_flops.saturating_mul(run.occurrences))
        } else {
            op.flops
        };
        op.bytes_accessed = op.bytes_accessed.saturating_add(bytes.saturating_mul(run.occurrences));
    }
}

#[cfg(test)]
mod tests {
    use mlprof_model::{Host, SourceFormat};

    use super::*;
    use crate::hlo::tests::sample_metadata_plane;

    fn modules() -> HloModules {
        let mut host = Host::new("h", "h", SourceFormat::Xspace);
        host.planes.push(sample_metadata_plane(7));
        HloModules::of_host(&host)
    }

    fn kernel(line: usize, hlo_op: &str, group: Option<i64>, duration_ps: i64, flops: u64) -> XlaKernel<'_> {
        XlaKernel {
            line,
            program_id: Some(7),
            hlo_op,
            group,
            is_eager: false,
            duration_ps,
            flops,
            bytes_accessed: flops / 2,
        }
    }

    #[test]
    fn consecutive_kernels_of_one_instruction_and_group_are_one_run() {
        let modules = modules();
        let mut db = DbBuilder::default();
        let mut runs = XlaRuns::new(&modules);
        // One run of three (group 4), then dot.1 again after another op, then an
        // ungrouped kernel that starts its own run.
        for k in [
            kernel(0, "dot.1", Some(4), 10, 100),
            kernel(0, "outer::dot.1", Some(4), 10, 100),
            kernel(0, "dot.1", Some(4), 10, 300),
            kernel(0, "fusion.1", Some(4), 5, 0),
            kernel(0, "unknown.9", Some(4), 99, 0),
            kernel(0, "fusion.1", Some(4), 5, 0),
            kernel(0, "dot.1", None, 2, 10),
            kernel(0, "dot.1", None, 2, 10),
        ] {
            runs.add(&k, &mut db);
        }
        runs.flush(&mut db);
        let db = db.finish();
        let ops: Vec<_> =
            db.metrics.iter().map(|m| (m.hlo_module_id, m.name.as_str(), m.category.as_str(), m.occurrences)).collect();
        assert_eq!(ops, [(7, "dot.1", "dot", 5), (7, "fusion.1", "loop fusion", 2)]);
        let dot = &db.metrics[0];
        assert_eq!((dot.time_ps, dot.self_time_ps), (34, 34));
        assert_eq!(dot.provenance, "jit(f)/dot_general:");
        // dot.1's analytic cost (24 FLOPs, 64 bytes) wins over the kernels' stats.
        assert_eq!((dot.flops, dot.model_flops, dot.bytes_accessed), (5 * 24, 5 * 24, 5 * 64));
        assert_eq!(db.total_op_time_ps, 44);
        assert_eq!(db.metrics[1].provenance, "");
    }

    #[test]
    fn runs_end_with_their_stream_and_need_a_program() {
        let modules = modules();
        let mut db = DbBuilder::default();
        let mut runs = XlaRuns::new(&modules);
        // fusion.1 has no analytic FLOPs, so each run counts its last kernel's stat once
        // per kernel.
        runs.add(&kernel(0, "fusion.1", Some(1), 10, 100), &mut db);
        runs.add(&kernel(1, "fusion.1", Some(1), 10, 200), &mut db);
        runs.add(&kernel(1, "fusion.1", Some(1), 10, 300), &mut db);
        runs.add(&XlaKernel { program_id: None, ..kernel(1, "fusion.1", Some(1), 10, 0) }, &mut db);
        runs.add(&XlaKernel { program_id: Some(8), ..kernel(1, "fusion.1", Some(1), 10, 0) }, &mut db);
        runs.flush(&mut db);
        let db = db.finish();
        assert_eq!(db.metrics.len(), 1);
        // Two runs (one per stream): 100 + 2 × 300 flops, not 3 × 300.
        assert_eq!((db.metrics[0].occurrences, db.metrics[0].flops), (3, 700));
    }
}
