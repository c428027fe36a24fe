//! HTA's GPU kernel breakdown (`get_gpu_kernel_breakdown`): GPU time by kernel type
//! (computation, communication, memory, and each overlap of them) over all ranks, and
//! per-kernel statistics per rank.
//!
//! Two per-kernel tables are kept: [`KernelBreakdown::kernels`] has every kernel with
//! its true count/sum/min/max/mean/std; [`KernelBreakdown::hta_kernels`] is HTA's
//! table, which keeps at most 10 kernels per type and rank (and only those within
//! the 80th percentile of the cumulative time), folds the rest into `others`, and
//! then — as HTA does — reports each row's statistics over the per-kernel *sums*
//! (so a kept kernel shows `max = min = mean = sum`, `stddev = 0`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::describe::quantile;
use super::intervals::{merge, time_by_combination};
use super::kernel_type::KernelType;
use super::{Context, round_to, us};

/// The kernel types HTA's breakdown covers, in its bit order.
const TYPES: [KernelType; 3] = [KernelType::Computation, KernelType::Communication, KernelType::Memory];

/// HTA's defaults: keep at most this many kernels per type and rank …
pub const NUM_KERNELS: usize = 10;
/// … and only those within this quantile of the cumulative time.
pub const DURATION_RATIO: f64 = 0.8;

/// GPU time of one kernel type or overlap combination, all ranks together.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelTypeTime {
    /// `COMPUTATION`, `COMMUNICATION`, `MEMORY`, or overlaps such as
    /// `COMPUTATION overlapping COMMUNICATION`.
    pub kernel_type: String,
    /// Time in microseconds.
    pub sum_us: f64,
    /// Share of all kernel time, in percent (1 decimal, as HTA).
    pub percentage: f64,
}

/// Statistics of one kernel name on one rank. Times in microseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KernelStats {
    /// The rank.
    pub rank: i64,
    /// Kernel name (`others` for HTA's folded row).
    pub name: String,
    /// HTA kernel type.
    pub kernel_type: KernelType,
    /// Number of executions.
    pub count: usize,
    /// Total duration.
    pub sum_us: f64,
    /// Longest execution.
    pub max_us: f64,
    /// Shortest execution.
    pub min_us: f64,
    /// Mean duration.
    pub mean_us: f64,
    /// Sample standard deviation (0 for one execution).
    pub stddev_us: f64,
}

/// The kernel breakdown.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KernelBreakdown {
    /// Time per type and overlap combination, longest first.
    pub kernel_types: Vec<KernelTypeTime>,
    /// Every kernel per rank, longest total first.
    pub kernels: Vec<KernelStats>,
    /// HTA's per-kernel table (see the module docs), sorted by type, name, rank.
    pub hta_kernels: Vec<KernelStats>,
}

/// Computes the breakdown over all ranks.
pub fn kernel_breakdown(context: &Context) -> KernelBreakdown {
    let mut type_sums: BTreeMap<String, i64> = BTreeMap::new();
    let mut kernels = Vec::new();
    let mut hta_kernels = Vec::new();
    for rank in &context.traces.ranks {
        let gpu: Vec<_> = rank.rows.iter().filter(|row| row.stream != -1).collect();
        let sets: Vec<Vec<(i64, i64)>> = TYPES
            .iter()
            .map(|&wanted| {
                merge(
                    gpu.iter()
                        .filter(|row| context.kernel_type(row.name) == wanted)
                        .map(|row| (row.ts_ps, row.end_ps()))
                        .collect(),
                )
            })
            .collect();
        for (mask, time) in time_by_combination(&sets) {
            *type_sums.entry(combination_name(mask)).or_default() += time;
        }
        for kernel_type in TYPES {
            let mut by_name: BTreeMap<u32, Vec<i64>> = BTreeMap::new();
            for row in gpu.iter().filter(|row| context.kernel_type(row.name) == kernel_type) {
                by_name.entry(row.name).or_default().push(row.dur_ps);
            }
            let mut stats: Vec<KernelStats> = by_name
                .into_iter()
                .map(|(name, durations)| {
                    stats_of(rank.rank, context.traces.symbols.text(name), kernel_type, &durations_us(&durations))
                })
                .collect();
            stats.sort_by(|a, b| b.sum_us.total_cmp(&a.sum_us).then_with(|| a.name.cmp(&b.name)));
            hta_kernels.extend(fold_like_hta(&stats));
            kernels.extend(stats);
        }
    }
    let grand_total: i64 = type_sums.values().sum();
    let mut kernel_types: Vec<KernelTypeTime> = type_sums
        .into_iter()
        .map(|(kernel_type, sum)| KernelTypeTime {
            kernel_type,
            sum_us: us(sum),
            percentage: round_to(100.0 * sum as f64 / grand_total as f64, 1),
        })
        .collect();
    kernel_types.sort_by(|a, b| b.sum_us.total_cmp(&a.sum_us));
    kernels.sort_by(|a, b| b.sum_us.total_cmp(&a.sum_us).then_with(|| a.rank.cmp(&b.rank)));
    hta_kernels.sort_by(|a, b| {
        a.kernel_type.name().cmp(b.kernel_type.name()).then_with(|| a.name.cmp(&b.name)).then(a.rank.cmp(&b.rank))
    });
    KernelBreakdown { kernel_types, kernels, hta_kernels }
}

/// HTA's label of an overlap bitmask over [`TYPES`].
fn combination_name(mask: u32) -> String {
    TYPES
        .iter()
        .enumerate()
        .filter(|(bit, _)| mask & (1 << bit) != 0)
        .map(|(_, kernel_type)| kernel_type.name())
        .collect::<Vec<_>>()
        .join(" overlapping ")
}

fn durations_us(durations_ps: &[i64]) -> Vec<f64> {
    durations_ps.iter().map(|&d| us(d)).collect()
}

/// count/sum/min/max/mean/std of `values` (µs).
fn stats_of(rank: i64, name: &str, kernel_type: KernelType, values: &[f64]) -> KernelStats {
    let count = values.len();
    let sum: f64 = values.iter().sum();
    let mean = sum / count.max(1) as f64;
    let stddev = if count > 1 {
        (values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / (count - 1) as f64).sqrt()
    } else {
        0.0
    };
    KernelStats {
        rank,
        name: name.to_string(),
        kernel_type,
        count,
        sum_us: sum,
        max_us: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        min_us: values.iter().copied().fold(f64::INFINITY, f64::min),
        mean_us: mean,
        stddev_us: stddev,
    }
}

/// HTA's `_aggr_gpu_kernel_time` on one rank's kernels of one type, sorted by sum
/// descending.
fn fold_like_hta(sorted: &[KernelStats]) -> Vec<KernelStats> {
    if sorted.len() <= NUM_KERNELS {
        return sorted.to_vec();
    }
    let cumulative: Vec<f64> = sorted
        .iter()
        .scan(0.0, |running, kernel| {
            *running += kernel.sum_us;
            Some(*running)
        })
        .collect();
    let threshold = quantile(&cumulative, DURATION_RATIO);
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (index, kernel) in sorted.iter().enumerate() {
        let folded = cumulative[index] > threshold || index >= NUM_KERNELS;
        let name = if folded { "others".to_string() } else { kernel.name.clone() };
        groups.entry(name).or_default().push(kernel.sum_us);
    }
    let (rank, kernel_type) = (sorted[0].rank, sorted[0].kernel_type);
    groups.into_iter().map(|(name, sums)| stats_of(rank, &name, kernel_type, &sums)).collect()
}
