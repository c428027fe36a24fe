//! XProf's op metrics databases: per framework op, how often it ran and for how long,
//! with and without the time of the ops nested in it — on the host (TraceMe'd TF ops,
//! tf.data iterators, input-pipeline stages) and on GPUs (kernels tagged with a
//! `tf_op`). The `framework_op_stats` tool and the overview page read them.
//!
//! The one design decision to know: results follow XProf's `OpMetricsDb` arithmetic
//! exactly, quirks included — host ops are nested with a per-thread op stack whose
//! unmatched ends are dropped (overlapping TraceMes), every host thread adds an
//! `IDLE` row (span of its ops minus their self time), and the GPU total time is taken
//! from raw event offsets within their lines.
//!
//! Kineto (PyTorch) traces have no `tf_op` stats and no `name:Type` op names, so they
//! get their own readers with the same arithmetic: `kineto_host` (ATen `cpu_op`s and
//! CUDA runtime calls), `kineto_device` (kernels, copies and memsets attributed to
//! the ATen op that launched them by [`KinetoOpIndex`]). Which reader a host gets is
//! its source's choice: [`crate::facts::host_op_metrics_db`],
//! [`crate::facts::device_op_metrics_db`].

mod device;
mod host;
mod kineto_device;
mod kineto_host;
#[cfg(test)]
pub(crate) mod kineto_tests;
mod xla_device;

use serde::Serialize;

use mlprof_model::fxhash::FxMap;
use mlprof_model::names::is_derived_line_id;

pub use crate::kineto::KinetoOpIndex;
pub use device::tf_metrics_db_from_device;
pub(crate) use device::{xspace_device_op_metrics_db, xspace_device_op_runs};
pub(crate) use host::{xspace_host_op_metrics_db, xspace_host_op_runs};
pub(crate) use kineto_device::{kineto_device_op_metrics_db, kineto_device_op_runs};
pub(crate) use kineto_host::{kineto_host_op_metrics_db, kineto_host_op_runs};

/// Name and category of the row that stands for the time no op ran.
pub const IDLE: &str = "IDLE";

/// Statistics of one op (XProf `OpMetrics`), summed over its occurrences.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OpMetrics {
    /// Second half of the op's key: XProf's `hlo_module_id` (the program id for XLA
    /// ops, the stage id for input-pipeline stages, 0 otherwise).
    pub hlo_module_id: u64,
    /// Op name (the TF op name without type; `<tf op>/<kernel>` for GPU kernels; `IDLE`).
    pub name: String,
    /// XProf's category: the op type (`MatMul`), `Dataset` for tf.data iterators, the
    /// stage category for input-pipeline stages, `IDLE` for the idle row.
    pub category: String,
    /// The framework op this op came from (the `tf_op` stat of GPU kernels); "" on the host.
    pub provenance: String,
    /// The type of the `provenance` op when the source states it (Kineto: the `cpu_op`
    /// name, `aten::addmm`); empty when it is parsed from `provenance` (`name:Type`).
    pub provenance_type: String,
    /// Whether any occurrence ran eagerly (op by op rather than in a compiled function).
    pub is_eager: bool,
    /// Number of occurrences (0 for `IDLE`).
    pub occurrences: u64,
    /// Total time in picoseconds, nested ops included.
    pub time_ps: u64,
    /// Self time in picoseconds: total time minus the time of directly nested ops.
    pub self_time_ps: u64,
    /// Floating-point operations over all occurrences (0 when unknown).
    pub flops: u64,
    /// Model floating-point operations over all occurrences (0 when unknown).
    pub model_flops: u64,
    /// Bytes read and written over all occurrences (0 when unknown).
    pub bytes_accessed: u64,
    /// Number of cores (device planes) the op ran on; 1 on the host.
    pub num_cores: u32,
}

impl OpMetrics {
    /// Whether this is the idle row (XProf's `IsIdleOp`: category `IDLE`).
    pub fn is_idle(&self) -> bool {
        self.category == IDLE
    }
}

/// A set of op metrics (XProf `OpMetricsDb`), keyed by `(hlo_module_id, name)`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OpMetricsDb {
    /// The ops, in the order XProf inserts them (first seen first; `IDLE` rows last
    /// per thread or device before combining).
    pub metrics: Vec<OpMetrics>,
    /// Total time in picoseconds: for a host, the sum over threads of each thread's op
    /// span; for a device, the span of its kernels; never below `total_op_time_ps`.
    pub total_time_ps: u64,
    /// Sum of the self times of all ops except `IDLE`, picoseconds.
    pub total_op_time_ps: u64,
}

impl OpMetricsDb {
    /// Time in picoseconds when no op ran (`total_time_ps − total_op_time_ps`).
    pub fn idle_time_ps(&self) -> u64 {
        self.total_time_ps.saturating_sub(self.total_op_time_ps)
    }

    /// Total time, or only the op time when `exclude_idle` (XProf's `TotalTimePs`).
    pub fn total_time(&self, exclude_idle: bool) -> u64 {
        if exclude_idle { self.total_op_time_ps } else { self.total_time_ps }
    }

    /// Raises the total time to `span_ps`, never below the op time (`SetTotalTimePs`).
    fn set_total_time(&mut self, span_ps: u64) {
        self.total_time_ps = self.total_op_time_ps.max(span_ps);
    }

    /// Appends the `IDLE` row for the idle time (`AddIdleOp`).
    fn add_idle_op(&mut self) {
        let idle = self.idle_time_ps();
        self.metrics.push(OpMetrics {
            name: IDLE.to_string(),
            category: IDLE.to_string(),
            time_ps: idle,
            self_time_ps: idle,
            ..OpMetrics::default()
        });
    }
}

/// Builds an [`OpMetricsDb`], finding an op by `(hlo_module_id, name)` in O(1).
#[derive(Debug, Default)]
struct DbBuilder {
    db: OpMetricsDb,
    /// Per module, each op name's position in `db.metrics`. Keyed by module first so
    /// that a name is looked up as the borrowed `&str` it arrives as: an occurrence of
    /// a known op (millions of them) allocates nothing.
    index: FxMap<u64, FxMap<String, usize>>,
}

impl DbBuilder {
    /// The op keyed `(module, name)`, inserted empty on first use.
    fn entry(&mut self, module: u64, name: &str) -> &mut OpMetrics {
        let at = self.position(module, name);
        &mut self.db.metrics[at]
    }

    /// The position in the database of the op keyed `(module, name)`, inserted empty on
    /// first use.
    fn position(&mut self, module: u64, name: &str) -> usize {
        let names = self.index.entry(module).or_default();
        match names.get(name) {
            Some(&at) => at,
            None => {
                let metrics = &mut self.db.metrics;
                metrics.push(OpMetrics { hlo_module_id: module, name: name.to_string(), ..OpMetrics::default() });
                names.insert(name.to_string(), metrics.len() - 1);
                metrics.len() - 1
            }
        }
    }

    /// [`DbBuilder::add_occurrence`] of the op at `position` ([`DbBuilder::position`]).
    fn add_occurrence_at(&mut self, position: usize, time_ps: u64, self_ps: u64) -> Option<&mut OpMetrics> {
        self.db.total_op_time_ps += self_ps;
        let op = self.db.metrics.get_mut(position)?;
        count_run(op, 1, time_ps, self_ps);
        Some(op)
    }

    /// Counts one occurrence of the op keyed `(module, name)` on one core, `time_ps`
    /// long with `self_ps` of self time (also added to the op time), and returns the op
    /// (its `occurrences` is 1 on its first occurrence).
    fn add_occurrence(&mut self, module: u64, name: &str, time_ps: u64, self_ps: u64) -> &mut OpMetrics {
        self.add_run(module, name, 1, time_ps, self_ps)
    }

    /// Counts `occurrences` occurrences of the op keyed `(module, name)` on one core,
    /// `time_ps` long in all with `self_ps` of self time (also added to the op time),
    /// and returns the op.
    fn add_run(&mut self, module: u64, name: &str, occurrences: u64, time_ps: u64, self_ps: u64) -> &mut OpMetrics {
        self.db.total_op_time_ps += self_ps;
        let op = self.entry(module, name);
        count_run(op, occurrences, time_ps, self_ps);
        op
    }

    /// Adds every op of `src` (XProf's `OpMetricsDbCombiner::Combine`): totals add up,
    /// ops with the same key merge, the first non-empty category and provenance win.
    fn combine(&mut self, src: &OpMetricsDb, update_num_cores: bool) {
        self.db.total_time_ps += src.total_time_ps;
        self.db.total_op_time_ps += src.total_op_time_ps;
        for op in &src.metrics {
            let dst = self.entry(op.hlo_module_id, &op.name);
            if dst.category.is_empty() {
                dst.category.clone_from(&op.category);
            }
            if dst.provenance.is_empty() {
                dst.provenance.clone_from(&op.provenance);
            }
            if dst.provenance_type.is_empty() {
                dst.provenance_type.clone_from(&op.provenance_type);
            }
            dst.is_eager |= op.is_eager;
            dst.occurrences += op.occurrences;
            dst.time_ps += op.time_ps;
            dst.self_time_ps += op.self_time_ps;
            dst.flops = dst.flops.saturating_add(op.flops);
            dst.model_flops = dst.model_flops.saturating_add(op.model_flops);
            dst.bytes_accessed = dst.bytes_accessed.saturating_add(op.bytes_accessed);
            if update_num_cores {
                dst.num_cores += op.num_cores;
            }
        }
    }

    fn finish(self) -> OpMetricsDb {
        self.db
    }
}

/// Adds `occurrences` runs of `op` on one core, `time_ps` long in all with `self_ps`
/// of self time.
fn count_run(op: &mut OpMetrics, occurrences: u64, time_ps: u64, self_ps: u64) {
    op.num_cores = 1;
    op.occurrences += occurrences;
    op.time_ps += time_ps;
    op.self_time_ps += self_ps;
}

/// Combines databases as XProf's op-stats combiner does for several hosts
/// (`update_num_cores` is false for host databases, true for device ones).
pub fn combine_dbs<'a>(dbs: impl IntoIterator<Item = &'a OpMetricsDb>, update_num_cores: bool) -> OpMetricsDb {
    let mut builder = DbBuilder::default();
    for db in dbs {
        builder.combine(db, update_num_cores);
    }
    builder.finish()
}

/// One run of a host op as the host op metrics database counts it: the op's total and
/// self time of this run and the event it came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostOpRun<'p> {
    /// Index of the line (thread) in the host's `/host:CPU` plane.
    pub line: usize,
    /// Index of the event in that line.
    pub event: usize,
    /// The op name (TF op name without type; the ATen op or runtime call name).
    pub name: &'p str,
    /// The op type (the database's category).
    pub op_type: &'p str,
    /// XProf's `hlo_module_id` half of the op's key (input-pipeline stage id, else 0).
    pub module_id: u64,
    /// Start, picoseconds relative to the profile start.
    pub start_ps: i64,
    /// Duration of this run, picoseconds, nested ops included.
    pub time_ps: u64,
    /// Self time of this run, picoseconds.
    pub self_ps: u64,
    /// True when the op is named by a `tf_op` stat on another event (an allocation, a
    /// runtime call) rather than by the event itself: XProf counts it as an
    /// occurrence of that op although it is no run of it.
    pub from_stat: bool,
}

/// One GPU activity (kernel, copy, memset) that the device op metrics database counts
/// as a run of a framework op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DeviceOpRun<'p> {
    /// Index of the GPU plane in the host.
    pub plane: usize,
    /// Index of the line (stream) in that plane.
    pub line: usize,
    /// Index of the event in that line.
    pub event: usize,
    /// The framework op it ran for (the `tf_op` name; the launching `cpu_op`); empty
    /// when none launched it (Kineto).
    pub op_name: &'p str,
    /// That op's type (XProf's category; `Unknown` for activities no op launched).
    pub op_type: &'p str,
    /// The database's provenance: the full `tf_op` (`name:Type`) or the ATen op.
    pub provenance: &'p str,
    /// The activity's own name (the kernel).
    pub kernel: &'p str,
    /// Start, picoseconds relative to the profile start.
    pub start_ps: i64,
    /// Duration, picoseconds.
    pub duration_ps: i64,
    /// Whether it ran eagerly (TensorFlow).
    pub is_eager: bool,
    /// Kineto: the launching `cpu_op` as `(line, event)` in the host's `/host:CPU` plane.
    pub launched_by: Option<(usize, usize)>,
}

/// Non-negative picoseconds as `u64`.
fn ps(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combining_merges_same_keys_and_sums_totals() {
        let op = |name: &str, category: &str, self_ps| OpMetrics {
            name: name.into(),
            category: category.into(),
            occurrences: 1,
            time_ps: self_ps,
            self_time_ps: self_ps,
            num_cores: 1,
            ..OpMetrics::default()
        };
        let a = OpMetricsDb { metrics: vec![op("x", "T", 5)], total_time_ps: 10, total_op_time_ps: 5 };
        let b = OpMetricsDb { metrics: vec![op("x", "", 7), op("y", "U", 1)], total_time_ps: 8, total_op_time_ps: 8 };
        let db = combine_dbs([&a, &b], true);
        assert_eq!((db.total_time_ps, db.total_op_time_ps), (18, 13));
        assert_eq!(db.metrics.len(), 2);
        assert_eq!((db.metrics[0].category.as_str(), db.metrics[0].self_time_ps), ("T", 12));
        assert_eq!((db.metrics[0].occurrences, db.metrics[0].num_cores), (2, 2));
    }

    #[test]
    fn derived_line_ids_are_recognised_after_truncation() {
        assert!(is_derived_line_id(0xdead_beef));
        assert!(is_derived_line_id(i64::from(0xdead_beef_u32 as i32) + 5));
        assert!(!is_derived_line_id(7));
        assert!(!is_derived_line_id(-5170516254875777059));
    }
}
