//! Crafted tool results for the rules' unit tests.

use crate::advise::ToolResults;
use crate::input_pipeline::{StepBreakdown, Summary};
use crate::kernel_stats::KernelReport;

/// Results of a GPU profile with `steps` steps of `step_ms` on average and the given
/// mean per step of step-time categories (`("otherTimeMs", 2.0)`, ms).
pub fn gpu_steps(steps: usize, step_ms: f64, categories: &[(&str, f64)]) -> ToolResults {
    let mut results = ToolResults::default();
    results.overview.steps.hardware_type = "GPU".into();
    results.overview.steps.steps = vec![StepBreakdown::default(); steps];
    results.overview.steps.step_time_ms = Summary { average: step_ms, ..Summary::default() };
    results.overview.steps.category_ms =
        categories.iter().map(|(id, ms)| (id.to_string(), Summary { average: *ms, ..Summary::default() })).collect();
    results
}

/// A kernel group of `occurrences` launches taking `total_ns` in all.
pub fn kernel(name: &str, op: &str, eligible: bool, uses: bool, occurrences: u64, total_ns: u64) -> KernelReport {
    KernelReport {
        name: name.into(),
        registers_per_thread: 0,
        static_shmem_bytes: 0,
        dynamic_shmem_bytes: 0,
        block_dim: [1; 3],
        grid_dim: [1; 3],
        occupancy_pct: 0.0,
        is_kernel_using_tensor_core: uses,
        is_op_tensor_core_eligible: eligible,
        op_name: op.into(),
        occurrences,
        total_duration_ns: total_ns,
        min_duration_ns: 0,
        max_duration_ns: 0,
    }
}
