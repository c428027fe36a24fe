//! The `gpu` tool: Holistic Trace Analysis' GPU analyses on PyTorch / Kineto traces,
//! with HTA 0.5.0's definitions, so the numbers match what HTA users know.
//!
//! | analysis | HTA API | module |
//! |---|---|---|
//! | `temporal_breakdown` | `get_temporal_breakdown` | [`temporal`] |
//! | `idle_time_breakdown` | `get_idle_time_breakdown(show_idle_interval_stats=True)` | [`idle`] |
//! | `kernel_breakdown` | `get_gpu_kernel_breakdown` | [`kernel_breakdown`] |
//! | `comm_comp_overlap` | `get_comm_comp_overlap` | [`overlap`] |
//! | `cuda_kernel_launch_stats` | `get_cuda_kernel_launch_stats` | [`launch`] |
//! | `queue_length_summary` | `get_queue_length_summary`, `get_time_spent_blocked_on_full_queue` | [`queue`] |
//! | `memory_bw_summary` | `get_memory_bw_summary` | [`memory_bw`] |
//!
//! Every analysis reads the rows [`trace::load`] keeps, i.e. the events HTA keeps
//! after `TraceAnalysis(trace_dir=…)` (last profiler step dropped) that its analyses
//! read; only the CPU rows of the selected analyses are loaded. Unlike HTA,
//! every analysis covers all ranks (HTA's per-rank APIs default to rank 0).
//! Results are in microseconds (HTA's unit); [`hta_csv`] writes them with HTA's
//! column names.

pub mod by_correlation;
pub mod describe;
pub mod hta_csv;
pub mod idle;
pub mod intervals;
pub mod kernel_breakdown;
pub mod kernel_type;
pub mod launch;
pub mod memory_bw;
pub mod overlap;
pub mod queue;
mod render;
pub mod temporal;
pub mod trace;
pub mod transfers;

use std::sync::OnceLock;

use mlprof_model::Host;
use serde::Serialize;

use by_correlation::ByCorrelation;
use kernel_type::KernelType;
use trace::{CpuRows, GpuTraces};

/// The analyses, by name (the names `--tool gpu` selects from).
pub const ANALYSES: [&str; 7] = [
    "temporal_breakdown",
    "idle_time_breakdown",
    "kernel_breakdown",
    "comm_comp_overlap",
    "cuda_kernel_launch_stats",
    "queue_length_summary",
    "memory_bw_summary",
];

/// The loaded ranks and what every analysis needs about their names.
pub struct Context {
    /// HTA's view of the ranks.
    pub traces: GpuTraces,
    kernel_types: Vec<KernelType>,
    /// Per rank (in `traces.ranks` order), its GPU-side rows by correlation, made on
    /// first use.
    by_correlation: Vec<OnceLock<ByCorrelation>>,
}

impl Context {
    /// Loads `hosts` (one per rank), keeping `cpu_rows`.
    pub fn new(hosts: &[&Host], cpu_rows: CpuRows) -> Context {
        let traces = trace::load(hosts, cpu_rows);
        let kernel_types = traces.symbols.iter().map(|(_, text)| kernel_type::kernel_type(text)).collect();
        let by_correlation = traces.ranks.iter().map(|_| OnceLock::new()).collect();
        Context { traces, kernel_types, by_correlation }
    }

    /// The GPU-side rows of the rank at `index` of `traces.ranks`, by correlation.
    pub fn by_correlation(&self, index: usize) -> &ByCorrelation {
        static NONE: OnceLock<ByCorrelation> = OnceLock::new();
        let rows = self.traces.ranks.get(index).map_or(&[][..], |rank| &rank.rows);
        self.by_correlation.get(index).unwrap_or(&NONE).get_or_init(|| ByCorrelation::new(rows))
    }

    /// The HTA kernel type of the event named by symbol `name`.
    pub fn kernel_type(&self, name: u32) -> KernelType {
        self.kernel_types.get(name as usize).copied().unwrap_or(KernelType::Other)
    }
}

/// The results of the selected analyses (`None`: not selected).
#[derive(Clone, Debug, Default, Serialize)]
pub struct GpuAnalysis {
    /// Ranks analysed, ascending.
    pub ranks: Vec<i64>,
    /// Whether the last profiler step was dropped (HTA's default with ≥ 2 steps).
    pub last_step_dropped: bool,
    /// Per rank.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temporal_breakdown: Option<Vec<temporal::TemporalBreakdown>>,
    /// Per rank, stream and category.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_time_breakdown: Option<Vec<idle::IdleTime>>,
    /// By kernel type and per kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_breakdown: Option<kernel_breakdown::KernelBreakdown>,
    /// Per rank.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm_comp_overlap: Option<Vec<overlap::CommCompOverlap>>,
    /// Per rank.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cuda_kernel_launch_stats: Option<Vec<launch::RankLaunchStats>>,
    /// Per rank and stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_length_summary: Option<Vec<queue::StreamQueue>>,
    /// Per rank and memory-op kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bw_summary: Option<Vec<memory_bw::MemoryBandwidth>>,
}

/// Runs the analyses named in `selected` (all of [`ANALYSES`] when empty) on
/// `hosts`, one host per rank. Unknown names are ignored; check them against
/// [`ANALYSES`] first.
pub fn analyze(hosts: &[&Host], selected: &[&str]) -> GpuAnalysis {
    let wants = |name: &str| selected.is_empty() || selected.contains(&name);
    // Only these two read CPU rows without a stream.
    let cpu_rows = if wants("cuda_kernel_launch_stats") || wants("queue_length_summary") {
        CpuRows::Correlated
    } else {
        CpuRows::WithStream
    };
    let context = Context::new(hosts, cpu_rows);
    GpuAnalysis {
        ranks: context.traces.ranks.iter().map(|rank| rank.rank).collect(),
        last_step_dropped: context.traces.last_step_dropped,
        temporal_breakdown: wants("temporal_breakdown").then(|| temporal::temporal_breakdown(&context)),
        idle_time_breakdown: wants("idle_time_breakdown").then(|| idle::idle_time_breakdown(&context)),
        kernel_breakdown: wants("kernel_breakdown").then(|| kernel_breakdown::kernel_breakdown(&context)),
        comm_comp_overlap: wants("comm_comp_overlap").then(|| overlap::comm_comp_overlap(&context)),
        cuda_kernel_launch_stats: wants("cuda_kernel_launch_stats").then(|| launch::cuda_kernel_launch_stats(&context)),
        queue_length_summary: wants("queue_length_summary").then(|| queue::queue_length(&context)),
        memory_bw_summary: wants("memory_bw_summary").then(|| memory_bw::memory_bw_summary(&context)),
    }
}

/// Picoseconds as microseconds.
pub(crate) fn us(ps: i64) -> f64 {
    ps as f64 / 1e6
}

/// `value` rounded to `decimals` places (half away from zero).
pub(crate) fn round_to(value: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (value * scale).round() / scale
}
