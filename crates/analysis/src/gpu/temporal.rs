//! HTA's temporal breakdown (`get_temporal_breakdown`): how much of the span from the
//! first GPU op's start to the last one's end each rank's GPU was idle, computing, or
//! busy with non-compute work (communication, memory) not overlapped by compute.

use serde::Serialize;

use super::intervals::{merge, total};
use super::kernel_type::KernelType;
use super::{Context, round_to, us};

/// One rank's temporal breakdown. Times in microseconds, shares in percent (2
/// decimals, as HTA).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TemporalBreakdown {
    /// The rank.
    pub rank: i64,
    /// Time no GPU op ran, between the first start and the last end.
    pub idle_time_us: f64,
    /// Time at least one computation kernel ran.
    pub compute_time_us: f64,
    /// Time only communication / memory / other ops ran.
    pub non_compute_time_us: f64,
    /// From the first GPU op's start to the last one's end.
    pub kernel_time_us: f64,
    /// `idle_time_us / kernel_time_us`, in percent.
    pub idle_time_pctg: f64,
    /// `compute_time_us / kernel_time_us`, in percent.
    pub compute_time_pctg: f64,
    /// `non_compute_time_us / kernel_time_us`, in percent.
    pub non_compute_time_pctg: f64,
}

/// The breakdown of each rank that has GPU ops (HTA fails on ranks without).
pub fn temporal_breakdown(context: &Context) -> Vec<TemporalBreakdown> {
    context
        .traces
        .ranks
        .iter()
        .filter_map(|rank| {
            let gpu = rank.rows.iter().filter(|row| row.stream != -1);
            let all = merge(gpu.clone().map(|row| (row.ts_ps, row.end_ps())).collect());
            let (first, last) = (all.first()?.0, all.last()?.1);
            let kernel_time = last - first;
            let idle = kernel_time - total(&all);
            let compute = total(&merge(
                gpu.filter(|row| context.kernel_type(row.name) == KernelType::Computation)
                    .map(|row| (row.ts_ps, row.end_ps()))
                    .collect(),
            ));
            let non_compute = kernel_time - compute - idle;
            let pct = |part: i64| {
                if kernel_time == 0 { f64::NAN } else { round_to(100.0 * part as f64 / kernel_time as f64, 2) }
            };
            Some(TemporalBreakdown {
                rank: rank.rank,
                idle_time_us: us(idle),
                compute_time_us: us(compute),
                non_compute_time_us: us(non_compute),
                kernel_time_us: us(kernel_time),
                idle_time_pctg: pct(idle),
                compute_time_pctg: pct(compute),
                non_compute_time_pctg: pct(non_compute),
            })
        })
        .collect()
}
