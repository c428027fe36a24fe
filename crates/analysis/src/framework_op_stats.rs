//! XProf's `framework_op_stats` tool (formerly "TensorFlow stats"): one row per
//! framework op on the devices and on the host, ranked by self time, with its share of
//! the device's or host's total self time.
//!
//! The one design decision to know: rows come from the op metrics databases of
//! [`crate::op_metrics`] exactly as XProf builds them — device ops rolled up to their
//! framework op, at most 500 device and 500 host rows, device rows first, ranks running
//! on from device to host rows — in two tables, with and without the `IDLE` rows.
//!
//! On Kineto (PyTorch) traces the same tables hold ATen ops: host rows are `cpu_op`s
//! (type = the op's library, `aten`, `c10d`, `fbgemm`) and CUDA runtime / driver calls (types `CUDA runtime`, `CUDA driver`),
//! device rows are the GPU time of the `cpu_op` that launched each kernel, copy and
//! memset (by `External id`, else by `correlation`), `Unknown` when none did.

use std::collections::HashMap;

use mlprof_model::Host;
use mlprof_model::human;
use mlprof_model::names::{GPU_PLANE_PREFIX, TPU_PLANE_PREFIX};
use serde::Serialize;
use serde_json::{Value, json};

use crate::datatable::DataTable;
use crate::facts;
use crate::gpu_caps::GpuPeaks;
use crate::grouping::HostGroups;
use crate::kernel_stats::{self, KernelStats, OpKernels};
use crate::op_metrics::{self, OpMetrics, OpMetricsDb};
use crate::report::{Cell, Report, Section, Table};
use crate::tf_op::{is_jax_op_name_and_type, is_tf_op_name, is_tf_op_type};

/// The most rows XProf shows per side (device, host).
pub const MAX_ROWS_PER_SIDE: usize = 500;

/// One row of the table (XProf `TfStatsRecord`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpStatsRow {
    /// 1-based rank; device rows first, host rows continue the count.
    pub rank: u32,
    /// `Device` or `Host`.
    pub host_or_device: String,
    /// The op type (XProf's category: `MatMul`, `Dataset`, `IDLE`, …).
    pub op_type: String,
    /// The op name.
    pub op_name: String,
    /// Number of occurrences.
    pub occurrences: u64,
    /// Total time, nested ops included, microseconds.
    pub total_time_us: f64,
    /// Average time per occurrence, microseconds (0 without occurrences).
    pub avg_time_us: f64,
    /// Total self time, microseconds.
    pub total_self_time_us: f64,
    /// Average self time per occurrence, microseconds.
    pub avg_self_time_us: f64,
    /// Share of the device's total self time (a fraction, 0 for host rows).
    pub device_self_time_fraction: f64,
    /// Running sum of `device_self_time_fraction` down the device rows.
    pub device_cumulative_self_time_fraction: f64,
    /// Share of the host's total self time (a fraction, 0 for device rows).
    pub host_self_time_fraction: f64,
    /// Running sum of `host_self_time_fraction` down the host rows.
    pub host_cumulative_self_time_fraction: f64,
    /// Measured FLOP rate, GFLOP/s (0 when the op's FLOPs are unknown).
    pub measured_flop_rate_gflops: f64,
    /// Model FLOP rate, GFLOP/s.
    pub model_flop_rate_gflops: f64,
    /// Measured memory bandwidth, GiB/s.
    pub measured_memory_bw_gibps: f64,
    /// FLOPs per byte accessed.
    pub operational_intensity_flops_per_byte: f64,
    /// Share of the op's kernel time in TensorCore kernels (device rows on GPUs).
    pub gpu_tensorcore_utilization: f64,
    /// The roofline resource bounding the op: `Compute`, `HBM` or `Shm/L1`, whichever
    /// it uses the largest share of at the device's peaks; `Unknown` without FLOP or byte
    /// counts or peaks.
    pub bound_by: String,
    /// Whether the op ran eagerly.
    pub is_eager: bool,
}

/// One of the tool's two tables.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OpStatsTable {
    /// Rows in rank order.
    pub rows: Vec<OpStatsRow>,
    /// `Training` when op names show gradients (`gradient_tape/`, `gradients/`, JAX
    /// `transpose(`), else `Inference` (XProf's model tracker).
    pub task_type: String,
    /// XProf's architecture guess (always `Unknown` from op names alone, as in XProf).
    pub architecture_type: String,
}

/// The framework op statistics of a set of hosts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FrameworkOpStats {
    /// `GPU`, `TPU` or `CPU`: the kind of device the profile ran on (the GPU
    /// TensorCore column exists only for `GPU`).
    pub device_type: String,
    /// Host total time (sum over threads of each thread's op span), picoseconds.
    pub host_total_time_ps: u64,
    /// Host self time of all ops, `IDLE` excluded, picoseconds.
    pub host_op_time_ps: u64,
    /// Device total time (sum over devices of each one's kernel span), picoseconds.
    pub device_total_time_ps: u64,
    /// Device self time of all kernels, picoseconds.
    pub device_op_time_ps: u64,
    /// The table with the `IDLE` rows.
    pub with_idle: OpStatsTable,
    /// The table without them.
    pub without_idle: OpStatsTable,
    /// Whether [`FrameworkOpStats::report`] shows the `IDLE` rows (default true).
    #[serde(skip)]
    pub include_idle: bool,
}

/// Framework op statistics over `hosts` (each with its grouping), combined as XProf's
/// op-stats combiner does: host databases and device databases each merged by op.
pub fn analyze(hosts: &[(&Host, &HostGroups)]) -> FrameworkOpStats {
    let host_dbs: Vec<OpMetricsDb> =
        hosts.iter().map(|(host, groups)| facts::host_op_metrics_db(host, groups)).collect();
    let device_dbs: Vec<OpMetricsDb> =
        hosts.iter().map(|(host, groups)| facts::device_op_metrics_db(host, groups)).collect();
    let hosts: Vec<&Host> = hosts.iter().map(|(host, _)| *host).collect();
    let kernels = kernel_stats::analyze(&hosts);
    from_dbs(&hosts, &op_metrics::combine_dbs(&host_dbs, false), &device_dbs, &kernels)
}

/// [`analyze`] from results computed already: the hosts' combined host database
/// (`combine_dbs(.., false)` of [`crate::facts::host_op_metrics_db`]), each host's
/// [`crate::facts::device_op_metrics_db`], in host order, and their
/// [`kernel_stats::analyze`] (for the TensorCore utilisation of GPU ops).
pub fn from_dbs(
    hosts: &[&Host],
    host_db: &OpMetricsDb,
    device_dbs: &[OpMetricsDb],
    kernels: &KernelStats,
) -> FrameworkOpStats {
    let device_db = op_metrics::combine_dbs(device_dbs, true);
    let device_tf_db = op_metrics::tf_metrics_db_from_device(&device_db, true);
    let device_type = device_type(hosts.iter().copied());
    let tensor_core = if device_type == "GPU" { kernels.by_op() } else { HashMap::new() };
    // XProf's roofline peaks come from the first GPU plane.
    let peaks = hosts
        .iter()
        .flat_map(|host| &host.planes)
        .find(|plane| plane.is_gpu())
        .map(GpuPeaks::of_plane)
        .unwrap_or_default();
    FrameworkOpStats {
        device_type,
        host_total_time_ps: host_db.total_time_ps,
        host_op_time_ps: host_db.total_op_time_ps,
        device_total_time_ps: device_db.total_time_ps,
        device_op_time_ps: device_db.total_op_time_ps,
        with_idle: table(host_db, &device_tf_db, &tensor_core, &peaks, false),
        without_idle: table(host_db, &device_tf_db, &tensor_core, &peaks, true),
        include_idle: true,
    }
}

/// XProf's run-environment device type, reduced to its kind: GPU planes (on a host
/// without TPU planes) make it `GPU`, TPU planes `TPU`, otherwise `CPU`.
fn device_type<'a>(hosts: impl Iterator<Item = &'a Host>) -> String {
    let mut kind = "CPU";
    for host in hosts {
        let has = |prefix: &str| host.planes.iter().any(|plane| plane.name.starts_with(prefix));
        if has(TPU_PLANE_PREFIX) {
            kind = "TPU";
        } else if has(GPU_PLANE_PREFIX) {
            kind = "GPU";
        }
    }
    kind.to_string()
}

/// `numerator / denominator`, or 0 when the denominator is (nearly) 0, as XProf's
/// `SafeDivide`.
fn safe_divide(numerator: f64, denominator: f64) -> f64 {
    if denominator.abs() < 1e-10 { 0.0 } else { numerator / denominator }
}

fn ps_to_us(ps: u64) -> f64 {
    ps as f64 / 1e6
}

/// The ops of `db` by self time, longest first, ties by name, at most `max`
/// (XProf's `SortedOpMetricsDb`).
fn sorted(db: &OpMetricsDb, max: usize) -> Vec<&OpMetrics> {
    let mut ops: Vec<&OpMetrics> = db.metrics.iter().collect();
    ops.sort_by(|a, b| b.self_time_ps.cmp(&a.self_time_ps).then_with(|| a.name.cmp(&b.name)));
    ops.truncate(max);
    ops
}

fn table(
    host_db: &OpMetricsDb,
    device_db: &OpMetricsDb,
    tensor_core: &HashMap<&str, OpKernels>,
    peaks: &GpuPeaks,
    exclude_idle: bool,
) -> OpStatsTable {
    let mut rows: Vec<OpStatsRow> = Vec::new();
    let mut rank = 0u32;
    for (on_device, db) in [(true, device_db), (false, host_db)] {
        let total_us = ps_to_us(db.total_time(exclude_idle));
        let mut cumulative = 0.0;
        for op in sorted(db, MAX_ROWS_PER_SIDE) {
            if exclude_idle && op.is_idle() {
                continue;
            }
            rank += 1;
            let mut row = row(rank, on_device, op);
            row.bound_by = peaks.bound_by(row.measured_flop_rate_gflops, row.measured_memory_bw_gibps).to_string();
            let fraction = safe_divide(row.total_self_time_us, total_us);
            cumulative += fraction;
            if on_device {
                (row.device_self_time_fraction, row.device_cumulative_self_time_fraction) = (fraction, cumulative);
                if let Some(kernels) = tensor_core.get(op.name.as_str()) {
                    row.gpu_tensorcore_utilization =
                        safe_divide(kernels.tensor_core_ns as f64, kernels.total_ns as f64);
                }
            } else {
                (row.host_self_time_fraction, row.host_cumulative_self_time_fraction) = (fraction, cumulative);
            }
            rows.push(row);
        }
    }
    let mut tracker = ModelTracker::default();
    for row in &rows {
        tracker.process_op(&row.op_name, &row.op_type);
    }
    OpStatsTable {
        rows,
        task_type: if tracker.is_training() { "Training" } else { "Inference" }.to_string(),
        architecture_type: "Unknown".to_string(),
    }
}

fn row(rank: u32, on_device: bool, op: &OpMetrics) -> OpStatsRow {
    let total_time_us = ps_to_us(op.time_ps);
    let total_self_time_us = ps_to_us(op.self_time_ps);
    let occurrences = op.occurrences as f64;
    let time_ns = op.time_ps as f64 / 1e3;
    OpStatsRow {
        rank,
        host_or_device: if on_device { "Device" } else { "Host" }.to_string(),
        op_type: op.category.clone(),
        op_name: op.name.clone(),
        occurrences: op.occurrences,
        total_time_us,
        avg_time_us: safe_divide(total_time_us, occurrences),
        total_self_time_us,
        avg_self_time_us: safe_divide(total_self_time_us, occurrences),
        device_self_time_fraction: 0.0,
        device_cumulative_self_time_fraction: 0.0,
        host_self_time_fraction: 0.0,
        host_cumulative_self_time_fraction: 0.0,
        measured_flop_rate_gflops: safe_divide(op.flops as f64, time_ns),
        model_flop_rate_gflops: safe_divide(op.model_flops as f64, time_ns),
        measured_memory_bw_gibps: safe_divide(op.bytes_accessed as f64, time_ns) * 1e9 / (1u64 << 30) as f64,
        operational_intensity_flops_per_byte: safe_divide(op.flops as f64, op.bytes_accessed as f64),
        gpu_tensorcore_utilization: 0.0,
        // Set by the table from the device's peaks.
        bound_by: "Unknown".to_string(),
        is_eager: op.is_eager,
    }
}

/// The part of XProf's `ModelTracker` that op names feed: whether the model trains.
#[derive(Default)]
struct ModelTracker {
    tf_gradients: bool,
    tf_gradient_tape: bool,
    jax_transpose: bool,
    /// An autograd backward op (PyTorch; no XProf profile has one).
    pytorch_backward: bool,
}

impl ModelTracker {
    fn process_op(&mut self, name: &str, op_type: &str) {
        // A PyTorch op's type is its library (ATen ops have no instance names).
        if op_type == crate::kineto::op_library(name) && crate::kineto::is_backward_op(name) {
            self.pytorch_backward = true;
        } else if is_tf_op_type(op_type) && is_tf_op_name(name) {
            let scopes = name.rsplit_once('/').map_or("", |(scopes, _)| scopes);
            for scope in scopes.split('/').filter(|_| !scopes.is_empty()) {
                if let Some(rest) = scope.strip_prefix("gradient") {
                    if rest == "_tape" {
                        self.tf_gradient_tape = true;
                    } else if rest.starts_with('s') {
                        self.tf_gradients = true;
                    }
                }
            }
        } else if (is_jax_op_name_and_type(name, op_type) || op_type.is_empty())
            && name.split('/').any(|scope| scope.starts_with("transpose("))
        {
            self.jax_transpose = true;
        }
    }

    fn is_training(&self) -> bool {
        self.tf_gradients || self.tf_gradient_tape || self.jax_transpose || self.pytorch_backward
    }
}

impl FrameworkOpStats {
    /// The table [`FrameworkOpStats::report`] shows: with or without `IDLE` rows.
    pub fn shown(&self) -> &OpStatsTable {
        if self.include_idle { &self.with_idle } else { &self.without_idle }
    }

    /// The result laid out for people: the totals, then the main table (times in µs,
    /// self-time shares in percent of the device's or host's total).
    pub fn report(&self) -> Report {
        let mut table = Table::new([
            "Rank",
            "Host/device",
            "Type",
            "Operation",
            "Occurrences",
            "Total time (us)",
            "Avg time (us)",
            "Total self-time (us)",
            "Avg self-time (us)",
            "Self-time (%)",
            "Cumulative self-time (%)",
            "Eager",
        ])
        .key_columns(&[
            "Operation",
            "Total self-time (us)",
            "Self-time (%)",
            "Host/device",
            "Type",
            "Occurrences",
        ]);
        for row in &self.shown().rows {
            let device = row.host_or_device == "Device";
            let (share, cumulative) = if device {
                (row.device_self_time_fraction, row.device_cumulative_self_time_fraction)
            } else {
                (row.host_self_time_fraction, row.host_cumulative_self_time_fraction)
            };
            table.push(vec![
                Cell::Int(i64::from(row.rank)),
                Cell::text(&*row.host_or_device),
                Cell::text(&*row.op_type),
                Cell::text(&*row.op_name),
                Cell::Int(i64::try_from(row.occurrences).unwrap_or(i64::MAX)),
                Cell::num(row.total_time_us, 3),
                Cell::num(row.avg_time_us, 3),
                Cell::num(row.total_self_time_us, 3),
                Cell::num(row.avg_self_time_us, 3),
                Cell::num(share * 100.0, 2),
                Cell::num(cumulative * 100.0, 2),
                Cell::text(if row.is_eager { "yes" } else { "no" }),
            ]);
        }
        let time = |ps: u64| human::duration(i64::try_from(ps).unwrap_or(i64::MAX));
        let mut totals = format!(
            "Host: {} of op self time in {} of thread time ({} idle).",
            time(self.host_op_time_ps),
            time(self.host_total_time_ps),
            time(self.host_total_time_ps.saturating_sub(self.host_op_time_ps)),
        );
        if self.device_total_time_ps > 0 {
            totals.push_str(&format!(
                " Device: {} of kernel self time in {} of device time ({} idle).",
                time(self.device_op_time_ps),
                time(self.device_total_time_ps),
                time(self.device_total_time_ps.saturating_sub(self.device_op_time_ps)),
            ));
        }
        let shown = if self.include_idle { "with" } else { "without" };
        let section = Section::new("Framework op statistics")
            .note(totals)
            .note(format!(
                "Ops ranked by self time, device ops first, {shown} IDLE rows; task type: {}.",
                self.shown().task_type
            ))
            .with_table(table)
            .main();
        Report { tool: "framework_op_stats".to_string(), sections: vec![section] }
    }

    /// XProf's JSON for this tool: the DataTable with `IDLE` rows, then the one without.
    pub fn to_xprof_json(&self) -> Value {
        let gpu = self.device_type.contains("GPU");
        json!([self.datatable(&self.with_idle, gpu), self.datatable(&self.without_idle, gpu)])
    }

    fn datatable(&self, table: &OpStatsTable, gpu: bool) -> Value {
        let mut out = DataTable::new();
        let columns = [
            ("rank", "number", "Rank"),
            ("host_or_device", "string", "Host/device"),
            ("type", "string", "Operation Type"),
            ("operation", "string", "Operation Name"),
            ("occurrences", "number", "#Occurrences"),
            ("total_time", "number", "Total time (us)"),
            ("avg_time", "number", "Avg. time (us)"),
            ("total_self_time", "number", "Total self-time (us)"),
            ("avg_self_time", "number", "Avg. self-time (us)"),
            ("device_total_self_time_percent", "number", "Total self-time on Device (%)"),
            ("device_cumulative_total_self_time_percent", "number", "Cumulative total-self time on Device (%)"),
            ("host_total_self_time_percent", "number", "Total self-time on Host (%)"),
            ("Host_cumulative_total_self_time_percent", "number", "Cumulative total-self time on Host (%)"),
            ("measured_flop_rate", "number", "Normalized FLOP Rate (FLOPs/s)"),
            ("model_flop_rate", "number", "Model FLOP Rate (GFLOP/s)"),
            ("measured_memory_bw", "number", "Measured Memory BW (GBytes/Sec)"),
            ("operational_intensity", "number", "Operational Intensity (FLOPs/Byte)"),
        ];
        for (id, kind, label) in columns {
            out.column(id, label, kind);
        }
        if gpu {
            out.column("gpu_tensorcore_utilization", "GPU TensorCore utilization", "number");
        }
        out.column("bound_by", "Bound by", "string");
        out.column("eager", "Execution mode", "string");
        for row in &table.rows {
            let mut cells = vec![
                json!(f64::from(row.rank)),
                json!(row.host_or_device),
                json!(row.op_type),
                json!(row.op_name),
                json!(row.occurrences as f64),
                json!(row.total_time_us),
                json!(row.avg_time_us),
                json!(row.total_self_time_us),
                json!(row.avg_self_time_us),
                json!(row.device_self_time_fraction),
                json!(row.device_cumulative_self_time_fraction),
                json!(row.host_self_time_fraction),
                json!(row.host_cumulative_self_time_fraction),
                json!(row.measured_flop_rate_gflops),
                json!(row.model_flop_rate_gflops),
                json!(row.measured_memory_bw_gibps),
                json!(row.operational_intensity_flops_per_byte),
            ];
            if gpu {
                cells.push(json!(row.gpu_tensorcore_utilization));
            }
            cells.push(json!(row.bound_by));
            cells.push(json!(if row.is_eager { "Eager" } else { "Function" }));
            out.row(cells);
        }
        out.property("task_type", table.task_type.clone());
        out.property("architecture_type", table.architecture_type.clone());
        out.to_json()
    }
}

#[cfg(test)]
mod tests {
    use mlprof_model::{Line, PlaneBuilder, SourceFormat, names};

    use super::*;
    use crate::facts::step_groups;

    fn host_with(events: &[(&str, i64, i64)]) -> Host {
        let mut builder = PlaneBuilder::new(0, names::HOST_PLANE);
        let mut line = Line::new(1, "t");
        for &(name, start, duration) in events {
            let metadata = builder.event_metadata(name, 0, |_| Vec::new());
            line.push_event(metadata, start, duration);
        }
        builder.push_line(line);
        let mut host = Host::new("h", "h", SourceFormat::Xspace);
        host.planes.push(builder.finish());
        host
    }

    #[test]
    fn ranks_fractions_and_idle() {
        let host = host_with(&[
            ("gradient_tape/dense/MatMul:MatMul", 0, 3_000_000),
            ("dense/Relu:Relu", 5_000_000, 1_000_000),
        ]);
        let groups = step_groups(&host);
        let stats = analyze(&[(&host, &groups)]);
        let rows = &stats.with_idle.rows;
        let names: Vec<_> = rows.iter().map(|r| r.op_name.as_str()).collect();
        assert_eq!(names, ["gradient_tape/dense/MatMul", "IDLE", "dense/Relu"]);
        assert_eq!(rows[0].host_self_time_fraction, 0.5);
        assert!((rows[2].host_cumulative_self_time_fraction - 1.0).abs() < 1e-12);
        assert_eq!(stats.with_idle.task_type, "Training");
        let without = &stats.without_idle.rows;
        assert_eq!(without.len(), 2);
        assert_eq!(without[1].rank, 2);
        assert_eq!(without[0].host_self_time_fraction, 0.75);

        let json = stats.to_xprof_json();
        assert_eq!(json[0]["rows"].as_array().map(Vec::len), Some(3));
        assert_eq!(json[0]["cols"].as_array().map(Vec::len), Some(19));
        assert_eq!(json[1]["p"]["task_type"], "Training");
        let report = stats.report();
        assert_eq!(report.sections[0].table.as_ref().map(|t| t.rows.len()), Some(3));
    }

    #[test]
    fn no_hosts_and_no_ops() {
        let stats = analyze(&[]);
        assert!(stats.with_idle.rows.is_empty());
        assert_eq!(stats.with_idle.task_type, "Inference");
        let host = host_with(&[]);
        let groups = step_groups(&host);
        let stats = analyze(&[(&host, &groups)]);
        assert_eq!(stats.with_idle.rows.len(), 1);
        assert!(stats.without_idle.rows.is_empty());
        let _ = stats.report();
    }

    #[test]
    fn jax_transpose_tf_gradients_and_pytorch_backward_ops_mean_training() {
        let mut tracker = ModelTracker::default();
        tracker.process_op("jit(f)/transpose(jvp(g))/dot_general", "dot_general");
        assert!(tracker.is_training());
        let mut tracker = ModelTracker::default();
        tracker.process_op("model/gradients_2/MatMul", "MatMul");
        assert!(tracker.is_training());
        let mut tracker = ModelTracker::default();
        tracker.process_op("aten::addmm", "aten");
        assert!(!tracker.is_training());
        tracker.process_op("AddmmBackward0", "op");
        assert!(tracker.is_training());
        let mut tracker = ModelTracker::default();
        tracker.process_op(
            "autograd::engine::evaluate_function: torch::jit::(anonymous namespace)::DifferentiableGraphBackward",
            "autograd::engine",
        );
        assert!(tracker.is_training());
        assert!(crate::tf_op::is_jax_op_type("transpose[permutation=(0, 1)]"));
        assert!(!crate::tf_op::is_jax_op_type("Transpose"));
    }
}
