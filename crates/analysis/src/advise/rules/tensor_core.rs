//! `tensor_core`: ops that could use TensorCores ran kernels that do not, or NCHW
//! layouts feed the convolutions. Reads `kernel_stats`: a kernel group whose op is
//! TensorCore-eligible but whose kernel does not use TensorCores (XProf's eligibility
//! and kernel-name rules), a layout conversion kernel (`nchwToNhwc`, `nhwcToNchw`, or
//! an op named `…NHWCToNCHW…` by TensorFlow's layout optimizer), or a kernel whose name
//! says it works on NCHW data. Fires when any ran.
//!
//! Time lost per step, an estimate over the profile's kernels ÷ steps: all of the
//! layout conversions' time (NHWC data needs none) plus half of the other kernels'
//! time (TensorCore math is at least twice as fast). Severity: high from 20 % of the
//! step, medium from 5 %.

use crate::advise::{Evidence, Finding, Framework, Outcome, Severity, ToolResults};
use crate::kernel_stats::KernelReport;
use mlprof_model::human;

/// The rule's name.
pub const NAME: &str = "tensor_core";

/// Kernels listed in the evidence.
const LISTED_KERNELS: usize = 3;

/// Why a kernel group is reported.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Problem {
    /// Converts between NCHW and NHWC.
    LayoutConversion,
    /// Works on NCHW data, or could use TensorCores and does not.
    SlowLayoutOrMath,
}

fn problem(kernel: &KernelReport) -> Option<Problem> {
    let name = kernel.name.to_ascii_lowercase();
    let op = kernel.op_name.to_ascii_lowercase();
    if ["nchwtonhwc", "nhwctonchw"].iter().any(|p| name.contains(p) || op.contains(p)) {
        Some(Problem::LayoutConversion)
    } else if name.contains("nchw") || (kernel.is_op_tensor_core_eligible && !kernel.is_kernel_using_tensor_core) {
        Some(Problem::SlowLayoutOrMath)
    } else {
        None
    }
}

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    let kernels = &results.kernel_stats.kernels;
    if kernels.is_empty() {
        return Outcome::NotApplicable("no GPU kernels in the profile".into());
    }
    let flagged: Vec<(usize, &KernelReport, Problem)> =
        kernels.iter().enumerate().filter_map(|(i, k)| problem(k).map(|p| (i, k, p))).collect();
    if flagged.is_empty() {
        return Outcome::Clear(clear_evidence(kernels));
    }
    let sum_ns = |kind: Problem| -> u64 {
        flagged.iter().filter(|(_, _, p)| *p == kind).map(|(_, k, _)| k.total_duration_ns).sum()
    };
    let (conversion_ns, other_ns) = (sum_ns(Problem::LayoutConversion), sum_ns(Problem::SlowLayoutOrMath));
    let lost_ps = conversion_ns as f64 * 1e3 + other_ns as f64 * 1e3 / 2.0;
    let steps = results.steps().len();
    let per_step_ps = (steps > 0).then(|| (lost_ps / steps as f64).round() as i64);
    let severity = match per_step_ps {
        Some(ps) => Severity::by_share(results.step_share_percent(ps as f64 / 1e9), 5.0, 20.0),
        None => Severity::Low,
    };
    let listed = flagged_evidence(&flagged, conversion_ns, other_ns);
    let (layout_groups, math_groups) = (
        flagged.iter().filter(|(_, k, _)| is_layout(k)).count(),
        flagged.iter().filter(|(_, k, _)| misses_tensor_cores(k)).count(),
    );
    let mut finding = Finding::new(NAME, severity, title(layout_groups, math_groups))
        .time_lost(
            per_step_ps,
            "per step: the layout conversions plus half of the non-TensorCore and NCHW kernel time (kernel_stats ÷ \
             steps)",
        )
        .total(lost_ps.round() as i64)
        .evidence(listed);
    if layout_groups > 0 {
        finding = finding.fixes([layout_fix(results.framework)]);
    }
    if math_groups > 0 {
        finding = finding.fixes([math_fix(results.framework), MULTIPLES_OF_8]);
    }
    Outcome::Found(vec![finding])
}

/// The evidence that no kernel group is flagged: how many belong to eligible ops.
fn clear_evidence(kernels: &[KernelReport]) -> Evidence {
    let eligible = kernels.iter().filter(|k| k.is_op_tensor_core_eligible).count();
    let text = if eligible == 0 {
        "no kernel group belongs to a TensorCore-eligible op; no NCHW kernels".to_string()
    } else {
        format!("all {eligible} kernel groups of TensorCore-eligible ops use TensorCores; no NCHW kernels")
    };
    Evidence::new("kernel_stats", text).cite("count(kernels[].is_op_tensor_core_eligible)", eligible as f64)
}

/// The evidence of the flagged kernel groups (`(index, kernel, problem)`): their time
/// by problem (`conversion_ns`, `other_ns`) and the first [`LISTED_KERNELS`] of them.
fn flagged_evidence(flagged: &[(usize, &KernelReport, Problem)], conversion_ns: u64, other_ns: u64) -> Evidence {
    let mut listed = Evidence::new("kernel_stats", String::new());
    let mut lines = Vec::new();
    for (index, kernel, kind) in flagged.iter().take(LISTED_KERNELS) {
        let why = match kind {
            Problem::LayoutConversion => "layout conversion",
            Problem::SlowLayoutOrMath if kernel.is_op_tensor_core_eligible && !kernel.is_kernel_using_tensor_core => {
                "eligible op, no TensorCores"
            }
            Problem::SlowLayoutOrMath => "NCHW",
        };
        let op = if kernel.op_name.is_empty() { "unknown op" } else { kernel.op_name.as_str() };
        lines.push(format!(
            "{} ({op}; {why}; {} launches, {})",
            kernel.name,
            kernel.occurrences,
            human::duration_us(kernel.total_duration_ns as f64 / 1e3)
        ));
        listed = listed.cite(format!("kernels[{index}].total_duration_ns"), kernel.total_duration_ns as f64);
    }
    listed.text = format!(
        "{} kernel groups: {} in layout conversions, {} in NCHW or non-TensorCore kernels of eligible \
         ops; the longest: {}.",
        flagged.len(),
        human::duration_us(conversion_ns as f64 / 1e3),
        human::duration_us(other_ns as f64 / 1e3),
        lines.join("; ")
    );
    listed
}

/// The finding's title from the numbers of layout and non-TensorCore kernel groups.
fn title(layout_groups: usize, math_groups: usize) -> String {
    let mut title = Vec::new();
    if math_groups > 0 {
        title.push(format!("{math_groups} kernel groups of TensorCore-eligible ops ran without TensorCores"));
    }
    if layout_groups > 0 {
        title.push(format!("{layout_groups} kernel groups work on NCHW data or convert layouts"));
    }
    format!("TensorCores unused: {}", title.join("; "))
}

/// Whether a kernel converts layouts or works on NCHW data.
fn is_layout(kernel: &KernelReport) -> bool {
    problem(kernel) == Some(Problem::LayoutConversion) || kernel.name.to_ascii_lowercase().contains("nchw")
}

/// Whether a kernel of a TensorCore-eligible op does not use TensorCores.
fn misses_tensor_cores(kernel: &KernelReport) -> bool {
    kernel.is_op_tensor_core_eligible && !kernel.is_kernel_using_tensor_core
}

const MULTIPLES_OF_8: &str = "TensorCores need dimensions that are multiples of 8 (batch, channels, hidden and \
     vocabulary sizes): pad those sizes.";

fn layout_fix(framework: Framework) -> &'static str {
    match framework {
        Framework::Tensorflow => {
            "Keep images in NHWC (`data_format='channels_last'`, the Keras default): TensorCore convolutions run \
             in NHWC, so NCHW data is transposed before and after every convolution."
        }
        Framework::Pytorch => {
            "Use channels-last memory: `model = model.to(memory_format=torch.channels_last)` and the same for the \
             input batch, so cuDNN runs NHWC TensorCore convolutions without transposes."
        }
        Framework::Jax => {
            "Give convolutions NHWC inputs (`dimension_numbers=('NHWC', 'HWIO', 'NHWC')`), the layout TensorCore \
             convolutions use."
        }
        Framework::Cuda | Framework::Python => {
            "Describe tensors to cuDNN in NHWC (`CUDNN_TENSOR_NHWC`), the layout its TensorCore convolutions run \
             in without transposes."
        }
    }
}

fn math_fix(framework: Framework) -> &'static str {
    match framework {
        Framework::Tensorflow => {
            "Feed TensorCores 16-bit inputs with mixed precision \
             (`tf.keras.mixed_precision.set_global_policy('mixed_float16')`), and keep TF32 on for float32 \
             (`tf.config.experimental.enable_tensor_float_32_execution(True)`, the default on Ampere and newer)."
        }
        Framework::Pytorch => {
            "Let float32 matmuls and convolutions use TensorCores: `torch.backends.cuda.matmul.allow_tf32 = True` \
             and `torch.backends.cudnn.allow_tf32 = True` (or `torch.set_float32_matmul_precision('high')`), or \
             run them in 16-bit under `torch.autocast`."
        }
        Framework::Jax => {
            "Run matmuls and convolutions in bfloat16, or allow TF32 for float32 \
             (`jax.default_matmul_precision('tensorfloat32')`)."
        }
        Framework::Cuda | Framework::Python => {
            "Give cuBLAS and cuDNN 16-bit inputs, or allow TF32 for float32 (`cublasSetMathMode(handle, \
             CUBLAS_TF32_TENSOR_OP_MATH)`, `CUDNN_TENSOR_OP_MATH`)."
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::rules::test_support::{gpu_steps, kernel};

    fn results(kernels: Vec<KernelReport>) -> ToolResults {
        let mut results = gpu_steps(2, 1.0, &[]);
        results.framework = Framework::Pytorch;
        results.kernel_stats.kernels = kernels;
        results
    }

    #[test]
    fn transposes_and_non_tensor_core_kernels_fire() {
        let results = results(vec![
            kernel("volta_sgemm_128x64_nn", "model/dense/MatMul", true, false, 2, 400_000),
            kernel(
                "void tensorflow::functor::nchwToNhwcKernel",
                "conv/Conv2D-0-TransposeNHWCToNCHW",
                false,
                false,
                2,
                100_000,
            ),
            kernel("volta_h884gemm", "model/dense_1/MatMul", true, true, 2, 900_000),
        ]);
        let Outcome::Found(findings) = check(&results) else { panic!("must fire") };
        // (100 us + 400 us / 2) over 2 steps.
        assert_eq!(findings[0].time_lost_per_step_ps, Some(150_000_000));
        assert_eq!(findings[0].severity, Severity::Medium, "15% of a 1 ms step");
        let text = &findings[0].evidence[0].text;
        assert!(text.contains("2 kernel groups") && text.contains("layout conversion"), "{text}");
        assert!(!text.contains("h884"), "{text}");
        assert!(findings[0].fixes[0].contains("channels_last"), "{:?}", findings[0].fixes);
        assert!(findings[0].fixes[1].contains("allow_tf32"), "{:?}", findings[0].fixes);
    }

    #[test]
    fn tensor_core_kernels_are_clear_and_no_kernels_do_not_apply() {
        let clear = results(vec![kernel("volta_h884gemm", "MatMul", true, true, 2, 1)]);
        assert!(matches!(check(&clear), Outcome::Clear(_)));
        assert!(matches!(check(&ToolResults::default()), Outcome::NotApplicable(_)));
    }
}
