//! The rules, one module each: a function from the [`ToolResults`] to an [`Outcome`].
//! [`RULES`] lists them in the order their checks are reported.
//!
//! | rule | fires when | source of the threshold |
//! |---|---|---|
//! | `input_bound` | the median step waits ≥ 5 % of its time for input (high ≥ 20 % on average) | XProf's input-bound thresholds 5/20 %; the median so one slow warm-up step does not make a job input-bound |
//! | `kernel_launch` | XProf classifies kernel launch as moderate/high (≥ 3/15 % of step time) | XProf's kernel-launch thresholds |
//! | `host_overhead` | "All others" (host time outside every recorded op) ≥ 3 % of step time (high ≥ 15 %) | XProf's all-others thresholds |
//! | `op_placement` | on a TF/JAX device profile, host compute ≥ 3 % of step time and framework ops ran on the host | XProf's host-side 3/15 % thresholds |
//! | `low_precision` | device compute is less than 10 % 16-bit | XProf's precision statement (10 %) |
//! | `tensor_core` | TensorCore-eligible ops ran kernels without TensorCores, or NCHW↔NHWC transposes ran | XProf's kernel_stats eligibility |
//! | `compilation` | compilation inside the steps (XLA recompiles, `tf.function` retracing: the breakdown's Compilation) ≥ 3 % of step time (high ≥ 15 %); not on PyTorch, whose traces do not mark `torch.compile`'s compilation | XProf's host-side 3/15 % thresholds |
//! | `communication` | collectives no computation hides (the step-time breakdown's Device collective communication) ≥ 5 % of step time (high ≥ 20 %) | mlprof's choice at XProf's input-bound pair; the straggler is the rank with ≥ 20 % less communication time than the most |
//! | `device_idle` | the device is idle ≥ 20 % of the step (high ≥ 50 %) | mlprof's choice (XProf has no GPU idle threshold) |
//! | `memory` | peak use > 90 % of capacity, or ≥ 50 % fragmentation at the peak | mlprof's choice |
//! | `transfers` | any copy or synchronisation finding of the transfers tool (GPU gaps are evidence of `device_idle`) | Nsight Systems' expert-system rules, as the transfers tool implements them |

mod communication;
mod compilation;
mod device_idle;
mod host_overhead;
mod input_bound;
mod kernel_launch;
mod low_precision;
mod memory;
mod op_placement;
mod tensor_core;
#[cfg(test)]
mod test_support;
mod tf_data_fixes;
mod transfers;

use super::{Outcome, ToolResults};

/// One rule.
pub struct Rule {
    /// Its name (`input_bound`), as findings and checks report it.
    pub name: &'static str,
    /// The rule itself.
    pub run: fn(&ToolResults) -> Outcome,
}

/// Every rule, in report order.
pub const RULES: [Rule; 11] = [
    Rule { name: input_bound::NAME, run: input_bound::check },
    Rule { name: kernel_launch::NAME, run: kernel_launch::check },
    Rule { name: host_overhead::NAME, run: host_overhead::check },
    Rule { name: op_placement::NAME, run: op_placement::check },
    Rule { name: low_precision::NAME, run: low_precision::check },
    Rule { name: tensor_core::NAME, run: tensor_core::check },
    Rule { name: communication::NAME, run: communication::check },
    Rule { name: compilation::NAME, run: compilation::check },
    Rule { name: device_idle::NAME, run: device_idle::check },
    Rule { name: memory::NAME, run: memory::check },
    Rule { name: transfers::NAME, run: transfers::check },
];

/// Milliseconds as people read them (`168 ms`), by mlprof's one rule.
use mlprof_model::human::duration_ms as ms;

/// `n` and the singular or plural noun.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Bytes as people read them (`4.6 MiB`).
fn size(bytes: i64) -> String {
    mlprof_model::human::bytes(bytes as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rule_names_are_unique() {
        let mut names: Vec<&str> = RULES.iter().map(|r| r.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RULES.len());
    }
}
