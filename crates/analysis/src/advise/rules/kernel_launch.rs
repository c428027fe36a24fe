//! `kernel_launch`: the host spends a noticeable share of the step launching kernels.
//! Fires when XProf's classification of the Kernel launch category is `moderate` or
//! `high` (≥ 3 % / ≥ 15 % of the step time, its `kernel_launch` thresholds). Time lost
//! per step: the mean Kernel launch time per step. Evidence adds the kernels launched
//! per step and their mean duration (`kernel_stats`) and, on PyTorch GPU traces, HTA's
//! launch statistics (kernels shorter than their launch call).

use crate::advise::{Evidence, Finding, Framework, Outcome, Severity, ToolResults, ms_to_ps};
use mlprof_model::human;

use super::ms;

/// The rule's name.
pub const NAME: &str = "kernel_launch";

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    if results.steps().is_empty() {
        return Outcome::NotApplicable("no steps in the profile".into());
    }
    if !results.has_device() {
        return Outcome::NotApplicable("no device in the profile, so no kernels are launched".into());
    }
    let bottleneck = &results.overview.steps.bottleneck;
    let launch_ms = results.category_mean_ms("kernelLaunchTimeMs");
    let share = results.step_share_percent(launch_ms);
    let field = "category_ms[\"kernelLaunchTimeMs\"].average";
    if bottleneck.kernel_launch_classification == "no" || bottleneck.kernel_launch_classification.is_empty() {
        return Outcome::Clear(
            Evidence::new(
                "input_pipeline_analyzer",
                format!(
                    "kernel launch takes {} per step, {share:.1}% of the step (XProf flags it from 3%)",
                    ms(launch_ms)
                ),
            )
            .cite(field, launch_ms),
        );
    }
    let severity = if bottleneck.kernel_launch_classification == "high" { Severity::High } else { Severity::Medium };
    let mut finding = Finding::new(
        NAME,
        severity,
        format!("Kernel-launch-bound: launching kernels takes {} per step", ms(launch_ms)),
    )
    .time_lost(Some(ms_to_ps(launch_ms)), "mean Kernel launch time per step (step-time breakdown)")
    .evidence(
        Evidence::new("input_pipeline_analyzer", bottleneck.kernel_launch_statement.clone()).cite(field, launch_ms),
    );
    if let Some(evidence) = kernel_evidence(results) {
        finding = finding.evidence(evidence);
    }
    finding.evidence.extend(launch_stats_evidence(results));
    Outcome::Found(vec![finding.fixes(fixes(results.framework))])
}

/// Kernels per step and their mean duration, from `kernel_stats`.
pub(super) fn kernel_evidence(results: &ToolResults) -> Option<Evidence> {
    let kernels = &results.kernel_stats.kernels;
    let launches: u64 = kernels.iter().map(|k| k.occurrences).sum();
    let total_ns: u64 = kernels.iter().map(|k| k.total_duration_ns).sum();
    let steps = results.steps().len();
    if launches == 0 || steps == 0 {
        return None;
    }
    Some(
        Evidence::new(
            "kernel_stats",
            format!(
                "{launches} kernel launches in the profile ({:.0} per step), {} each on average.",
                launches as f64 / steps as f64,
                human::duration_us(total_ns as f64 / launches as f64 / 1e3)
            ),
        )
        .cite("sum(kernels[].occurrences)", launches as f64)
        .cite("sum(kernels[].total_duration_ns)", total_ns as f64),
    )
}

/// HTA's launch statistics per rank, where the `gpu` tool ran.
fn launch_stats_evidence(results: &ToolResults) -> Vec<Evidence> {
    let Some(stats) = results.gpu.as_ref().and_then(|g| g.cuda_kernel_launch_stats.as_ref()) else {
        return Vec::new();
    };
    stats
        .iter()
        .enumerate()
        .filter(|(_, rank)| !rank.launches.is_empty())
        .map(|(i, rank)| {
            Evidence::new(
                "gpu",
                format!(
                    "Rank {}: {} of {} GPU ops ran shorter than the call that launched them; {} launch calls took \
                     over 50 µs.",
                    rank.rank,
                    rank.short_gpu_kernels,
                    rank.launches.len(),
                    rank.runtime_outliers
                ),
            )
            .cite(format!("cuda_kernel_launch_stats[{i}].short_gpu_kernels"), rank.short_gpu_kernels as f64)
            .cite(format!("cuda_kernel_launch_stats[{i}].runtime_outliers"), rank.runtime_outliers as f64)
        })
        .collect()
}

fn fixes(framework: Framework) -> Vec<String> {
    match framework {
        Framework::Tensorflow => vec![
            "Set `TF_GPU_THREAD_MODE=gpu_private` (and `TF_GPU_THREAD_COUNT=2`) so each GPU gets its own launch \
             threads instead of competing with tf.data and other host work."
                .to_string(),
            "Compile the step with XLA (`tf.function(jit_compile=True)` or `model.compile(jit_compile=True)`): \
             fused ops launch far fewer kernels."
                .to_string(),
            "Do more work per launch: a larger batch launches the same kernels for more examples.".to_string(),
        ],
        Framework::Jax => vec![
            "Launch fewer, larger programs: jit the whole training step, and run several steps per call with \
             `jax.lax.scan` or `fori_loop`."
                .to_string(),
            "Do more work per launch: a larger batch launches the same kernels for more examples.".to_string(),
        ],
        Framework::Pytorch => vec![
            "Capture the step in a CUDA graph (`torch.compile(model, mode=\"reduce-overhead\")`, or \
             `torch.cuda.make_graphed_callables` / `torch.cuda.CUDAGraph`) so its kernels are replayed with one \
             launch."
                .to_string(),
            "Fuse small ops with `torch.compile`, so fewer kernels are launched.".to_string(),
            "Do more work per launch: a larger batch launches the same kernels for more examples.".to_string(),
        ],
        Framework::Cuda | Framework::Python => vec![
            "Replay repeated launch sequences as a CUDA graph (`cudaStreamBeginCapture` … `cudaGraphLaunch`): one \
             launch for the whole sequence."
                .to_string(),
            "Fuse small kernels, and give each launch more work (more elements per thread, larger grids).".to_string(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::rules::test_support::{gpu_steps, kernel};

    fn gpu_results(classification: &str, launch_ms: f64) -> ToolResults {
        let mut results = gpu_steps(2, 10.0, &[("kernelLaunchTimeMs", launch_ms)]);
        results.framework = Framework::Pytorch;
        results.overview.steps.bottleneck.kernel_launch_classification = classification.into();
        results.overview.steps.bottleneck.kernel_launch_statement = "statement".into();
        results
    }

    #[test]
    fn xprof_classification_fires_with_launch_time_and_kernel_counts() {
        let mut results = gpu_results("high", 2.0);
        results.kernel_stats.kernels = vec![kernel("k", "", false, false, 400, 1_000_000)];
        let Outcome::Found(findings) = check(&results) else { panic!("high launch share must fire") };
        assert_eq!(findings[0].severity, Severity::High);
        assert_eq!(findings[0].time_lost_per_step_ps, Some(2_000_000_000));
        assert!(
            findings[0].evidence[1].text.starts_with("400 kernel launches in the profile (200 per step), 2.5 µs each")
        );
        assert!(findings[0].fixes[0].contains("CUDA graph"));
    }

    #[test]
    fn no_classification_is_clear_and_cpu_profiles_do_not_apply() {
        assert!(matches!(check(&gpu_results("no", 0.1)), Outcome::Clear(_)));
        let mut cpu = gpu_results("high", 2.0);
        cpu.overview.steps.hardware_type = "CPU_ONLY".into();
        assert!(matches!(check(&cpu), Outcome::NotApplicable(_)));
    }
}
