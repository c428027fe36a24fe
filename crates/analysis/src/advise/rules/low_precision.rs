//! `low_precision`: the device computes almost everything in 32-bit. Fires when less
//! than 10 % of the device compute time is 16-bit (XProf's precision statement
//! threshold). Time lost per step, an estimate: half of the 32-bit device compute per
//! step, since 16-bit (fp16/bf16) TensorCore math runs at least twice as fast as 32-bit
//! on current GPUs and halves the memory traffic. Severity by that share of the step:
//! high from 20 %, medium from 5 %.

use crate::advise::{Evidence, Finding, Framework, Outcome, Severity, ToolResults, ms_to_ps};

use super::ms;

/// The rule's name.
pub const NAME: &str = "low_precision";

/// XProf's threshold: a precision statement below this 16-bit share (%).
const SIXTEEN_BIT_PERCENT: f64 = 10.0;

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    let compute_ms = results.category_mean_ms("deviceComputeTimeMs");
    if !results.has_device() || results.steps().is_empty() || compute_ms <= 0.0 {
        return Outcome::NotApplicable("no device compute in the steps".into());
    }
    let overview = &results.overview;
    let (half, single) = (overview.device_compute_16bit_percent, overview.device_compute_32bit_percent);
    if half >= SIXTEEN_BIT_PERCENT {
        return Outcome::Clear(
            Evidence::new(
                "overview_page",
                format!("{half:.1}% of the device compute is 16-bit (flagged under {SIXTEEN_BIT_PERCENT}%)"),
            )
            .cite("device_compute_16bit_percent", half),
        );
    }
    let lost_ms = 0.5 * compute_ms * single / 100.0;
    let finding = Finding::new(
        NAME,
        Severity::by_share(results.step_share_percent(lost_ms), 5.0, 20.0),
        format!("Low precision: {single:.1}% of the device compute is 32-bit"),
    )
    .time_lost(
        Some(ms_to_ps(lost_ms)),
        "half the 32-bit device compute per step (16-bit TensorCore math is at least twice as fast)",
    )
    .evidence(
        Evidence::new("overview_page", overview.precision_statement.clone())
            .cite("device_compute_16bit_percent", half)
            .cite("device_compute_32bit_percent", single),
    )
    .evidence(
        Evidence::new("input_pipeline_analyzer", format!("Device compute takes {} per step.", ms(compute_ms)))
            .cite("category_ms[\"deviceComputeTimeMs\"].average", compute_ms),
    )
    .fixes(fixes(results.framework));
    Outcome::Found(vec![finding])
}

fn fixes(framework: Framework) -> Vec<&'static str> {
    match framework {
        Framework::Tensorflow => vec![
            "Train in mixed precision: `tf.keras.mixed_precision.set_global_policy('mixed_bfloat16')` on Ampere or \
             newer GPUs, `'mixed_float16'` otherwise (Keras then scales the loss; in a custom loop wrap the \
             optimizer in `tf.keras.mixed_precision.LossScaleOptimizer`).",
            "Keep the output layer and softmax in float32 (`dtype='float32'`) for numerical stability.",
        ],
        Framework::Jax => vec![
            "Compute in bfloat16: cast parameters and activations to `jnp.bfloat16` for the forward and backward \
             pass (keep a float32 master copy of the weights), or set `jax.default_matmul_precision('bfloat16')`.",
        ],
        Framework::Pytorch => vec![
            "Run the forward pass and loss under `torch.autocast(device_type='cuda', dtype=torch.bfloat16)` (with \
             float16, also scale the loss with `torch.amp.GradScaler`).",
            "For the float32 that remains, allow TF32 TensorCore math: `torch.backends.cuda.matmul.allow_tf32 = \
             True` and `torch.backends.cudnn.allow_tf32 = True`.",
        ],
        Framework::Cuda | Framework::Python => vec![
            "Compute in 16 bits where precision allows: bf16/fp16 inputs to cuBLAS/cuDNN (`cublasGemmEx` with \
             `CUBLAS_COMPUTE_32F` accumulation), or TF32 math for float32 (`CUBLAS_TF32_TENSOR_OP_MATH`).",
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::rules::test_support::gpu_steps;

    fn results(half_percent: f64) -> ToolResults {
        let mut results = gpu_steps(1, 10.0, &[("deviceComputeTimeMs", 8.0)]);
        results.overview.device_compute_16bit_percent = half_percent;
        results.overview.device_compute_32bit_percent = 100.0 - half_percent;
        results
    }

    #[test]
    fn mostly_32_bit_compute_fires_with_half_of_it_as_the_estimate() {
        let Outcome::Found(findings) = check(&results(0.0)) else { panic!("0% 16-bit must fire") };
        assert_eq!(findings[0].time_lost_per_step_ps, Some(4_000_000_000));
        assert_eq!(findings[0].severity, Severity::High);
        assert_eq!(findings[0].evidence[0].cited[1].value, 100.0);
    }

    #[test]
    fn enough_16_bit_is_clear_and_cpu_profiles_do_not_apply() {
        assert!(matches!(check(&results(34.2)), Outcome::Clear(_)));
        assert!(matches!(check(&ToolResults::default()), Outcome::NotApplicable(_)));
    }
}
