//! HTA's CUDA kernel launch statistics (`get_cuda_kernel_launch_stats`): each GPU op
//! joined to its runtime launch by `correlation`, with the launch's CPU duration, the
//! op's GPU duration, and the launch delay (`gpu start − launch end`, clipped at 0).
//!
//! Launches are `cudaLaunchKernel`, `cudaLaunchKernelExC`, MTIA's `runFunction -
//! job_prep_and_submit_for_execution`, `cudaMemcpyAsync` and `cudaMemsetAsync` (HTA
//! does not count `cuLaunchKernel` or the HIP names here, so ROCm traces get no rows).

use mlprof_model::fxhash::FxSet;
use serde::Serialize;

use super::{Context, us};

/// Runtime calls HTA joins (on `correlation`, so [`super::trace`] keeps the CPU rows
/// without one when one of these has none).
pub(crate) const LAUNCH_NAMES: [&str; 5] = [
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "runFunction - job_prep_and_submit_for_execution",
    "cudaMemsetAsync",
    "cudaMemcpyAsync",
];

/// HTA's default cutoff for runtime-duration outliers, in µs.
pub const RUNTIME_CUTOFF_US: f64 = 50.0;
/// HTA's default cutoff for launch-delay outliers, in µs.
pub const LAUNCH_DELAY_CUTOFF_US: f64 = 100.0;

/// One launch and the GPU op it started. Times in microseconds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Launch {
    /// The correlation id.
    pub correlation: i64,
    /// Duration of the runtime call on the CPU.
    pub cpu_duration_us: f64,
    /// Duration of the op on the GPU.
    pub gpu_duration_us: f64,
    /// GPU start minus the runtime call's end, clipped at 0.
    pub launch_delay_us: f64,
}

/// One rank's launches and HTA's three outlier counts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankLaunchStats {
    /// The rank.
    pub rank: i64,
    /// Every launch, in the order of the CPU calls.
    pub launches: Vec<Launch>,
    /// Launches whose GPU op ran shorter than the call that launched it, with the
    /// call at most [`RUNTIME_CUTOFF_US`] long.
    pub short_gpu_kernels: usize,
    /// Calls longer than [`RUNTIME_CUTOFF_US`].
    pub runtime_outliers: usize,
    /// Launch delays above [`LAUNCH_DELAY_CUTOFF_US`].
    pub launch_delay_outliers: usize,
    /// Sum of the launch delays, µs.
    pub launch_delay_sum_us: f64,
    /// Longest launch delay, µs.
    pub launch_delay_max_us: Option<f64>,
}

/// The launch statistics of every rank.
pub fn cuda_kernel_launch_stats(context: &Context) -> Vec<RankLaunchStats> {
    let launch_ids: Vec<u32> = LAUNCH_NAMES.iter().filter_map(|name| context.traces.symbols.id(name)).collect();
    context
        .traces
        .ranks
        .iter()
        .enumerate()
        .map(|(index, rank)| {
            let correlations: FxSet<i64> =
                rank.rows.iter().filter(|row| launch_ids.contains(&row.name)).map(|row| row.correlation).collect();
            // Each launch's GPU ops, in row order.
            let by_correlation = context.by_correlation(index);
            let mut launches = Vec::new();
            for cpu in rank.rows.iter().filter(|row| row.stream == -1 && correlations.contains(&row.correlation)) {
                for gpu in by_correlation.of(&rank.rows, cpu.correlation) {
                    launches.push(Launch {
                        correlation: cpu.correlation,
                        cpu_duration_us: us(cpu.dur_ps),
                        gpu_duration_us: us(gpu.dur_ps),
                        launch_delay_us: us((gpu.ts_ps - cpu.end_ps()).max(0)),
                    });
                }
            }
            summarize(rank.rank, launches)
        })
        .collect()
}

fn summarize(rank: i64, launches: Vec<Launch>) -> RankLaunchStats {
    let short_gpu_kernels = launches
        .iter()
        .filter(|l| l.cpu_duration_us <= RUNTIME_CUTOFF_US && l.gpu_duration_us < l.cpu_duration_us)
        .count();
    let runtime_outliers = launches.iter().filter(|l| l.cpu_duration_us > RUNTIME_CUTOFF_US).count();
    let launch_delay_outliers = launches.iter().filter(|l| l.launch_delay_us > LAUNCH_DELAY_CUTOFF_US).count();
    let launch_delay_sum_us = launches.iter().map(|l| l.launch_delay_us).sum();
    let launch_delay_max_us = launches.iter().map(|l| l.launch_delay_us).reduce(f64::max);
    RankLaunchStats {
        rank,
        launches,
        short_gpu_kernels,
        runtime_outliers,
        launch_delay_outliers,
        launch_delay_sum_us,
        launch_delay_max_us,
    }
}
