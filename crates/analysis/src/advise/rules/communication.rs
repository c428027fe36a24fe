//! `communication`: collective communication (NCCL all-reduce, all-gather, all-to-all, …)
//! that no computation hides. The step-time breakdown's "Device collective communication"
//! is exactly that part: XProf's breakdown gives a span to device compute before
//! collectives, so what is left is exposed. Fires at ≥ 5 % of the step (high at 20 %),
//! mlprof's thresholds, XProf's input-bound pair (XProf has none for collectives).
//! Time lost per step: the mean exposed collective time.
//!
//! The evidence adds, where the `gpu` tool ran (PyTorch GPU traces), HTA's share of
//! communication overlapped by computation per rank and, with several ranks, the time
//! each rank spends in communication kernels: in a collective the ranks that arrive
//! first wait for the last, so the rank with the least communication time is the one the
//! others wait for (a straggler).

use crate::advise::{Evidence, Finding, Framework, Outcome, Severity, ToolResults, ms_to_ps};
use crate::gpu::kernel_breakdown::KernelStats;
use crate::gpu::kernel_type::KernelType;

use super::ms;

/// The rule's name.
pub const NAME: &str = "communication";

/// The step-time category of exposed collectives (XProf's column id).
const CATEGORY: &str = "deviceCollectivesTimeMs";
/// Exposed share that fires (% of step time).
const MODERATE_PERCENT: f64 = 5.0;
/// Exposed share that is high.
const HIGH_PERCENT: f64 = 20.0;
/// How the time lost is estimated.
const TIME_LOST_ESTIMATE: &str = "mean Device collective communication time per step (step-time breakdown)";
/// Spread of per-rank communication time (% of the largest) that names a straggler.
const STRAGGLER_SPREAD_PERCENT: f64 = 20.0;

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    if !results.has_device() || results.steps().is_empty() {
        return Outcome::NotApplicable("no device steps in the profile".into());
    }
    let exposed_ms = results.category_mean_ms(CATEGORY);
    let share = results.step_share_percent(exposed_ms);
    let field = format!("category_ms[\"{CATEGORY}\"].average");
    if share < MODERATE_PERCENT {
        return Outcome::Clear(
            Evidence::new(
                "input_pipeline_analyzer",
                format!(
                    "collective communication not hidden by computation takes {} per step, {share:.1}% of the \
                     step (this rule fires from {MODERATE_PERCENT:.0}%)",
                    ms(exposed_ms)
                ),
            )
            .cite(field, exposed_ms),
        );
    }
    let exposed = format!(
        "Device collective communication: {} per step, {share:.1}% of the {} step, time when a collective ran and \
         no compute kernel did.",
        ms(exposed_ms),
        ms(results.mean_step_ms())
    );
    let title = format!("Communication-bound: {} per step in collectives that no computation hides", ms(exposed_ms));
    let mut finding = Finding::new(NAME, Severity::by_share(share, MODERATE_PERCENT, HIGH_PERCENT), title)
        .time_lost(Some(ms_to_ps(exposed_ms)), TIME_LOST_ESTIMATE)
        .evidence(Evidence::new("input_pipeline_analyzer", exposed).cite(field, exposed_ms));
    finding.evidence.extend(overlap_evidence(results));
    let straggler = straggler_evidence(results);
    let has_straggler = straggler.is_some();
    finding.evidence.extend(straggler);
    Outcome::Found(vec![finding.fixes(fixes(results.framework, has_straggler))])
}

/// HTA's communication/computation overlap per rank.
fn overlap_evidence(results: &ToolResults) -> Vec<Evidence> {
    let Some(overlaps) = results.gpu.as_ref().and_then(|g| g.comm_comp_overlap.as_ref()) else {
        return Vec::new();
    };
    overlaps
        .iter()
        .enumerate()
        .filter_map(|(i, rank)| {
            let percent = rank.comp_comm_overlap_pctg?;
            Some(
                Evidence::new(
                    "gpu",
                    format!(
                        "Rank {}: {percent:.1}% of communication time overlaps computation (HTA's \
                         comm_comp_overlap); the rest is exposed unless another stream's work hides it.",
                        rank.rank
                    ),
                )
                .cite(format!("comm_comp_overlap[{i}].comp_comm_overlap_pctg"), percent),
            )
        })
        .collect()
}

/// Per-rank communication kernel time, when several ranks differ by more than
/// [`STRAGGLER_SPREAD_PERCENT`]: the rank with the least is the one the others wait for.
fn straggler_evidence(results: &ToolResults) -> Option<Evidence> {
    let breakdown = results.gpu.as_ref()?.kernel_breakdown.as_ref()?;
    let mut per_rank: Vec<(i64, f64)> = Vec::new();
    let communication: Vec<(usize, &KernelStats)> =
        breakdown.kernels.iter().enumerate().filter(|(_, k)| k.kernel_type == KernelType::Communication).collect();
    for (_, kernel) in &communication {
        match per_rank.iter_mut().find(|(rank, _)| *rank == kernel.rank) {
            Some((_, total)) => *total += kernel.sum_us,
            None => per_rank.push((kernel.rank, kernel.sum_us)),
        }
    }
    if per_rank.len() < 2 {
        return None;
    }
    let (least_rank, least) = per_rank.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1))?;
    let (_, most) = per_rank.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let spread = if most > 0.0 { 100.0 * (most - least) / most } else { 0.0 };
    if spread < STRAGGLER_SPREAD_PERCENT {
        return None;
    }
    let listed: Vec<String> =
        per_rank.iter().map(|(rank, us)| format!("rank {rank} {}", mlprof_model::human::duration_us(*us))).collect();
    let mut evidence = Evidence::new(
        "gpu",
        format!(
            "Time in communication kernels differs by {spread:.0}% between ranks ({}): rank {least_rank} spends the \
             least, so the other ranks wait in their collectives for it.",
            listed.join(", ")
        ),
    );
    for (index, kernel) in communication {
        evidence = evidence.cite(format!("kernel_breakdown.kernels[{index}].sum_us"), kernel.sum_us);
    }
    Some(evidence)
}

fn fixes(framework: Framework, straggler: bool) -> Vec<String> {
    let mut fixes: Vec<String> = match framework {
        Framework::Pytorch => vec![
            "Overlap gradient communication with the backward pass: DDP does it bucket by bucket, so make sure \
             nothing serialises it (`find_unused_parameters=True`, a `no_sync` context on every step) and try a \
             smaller `bucket_cap_mb` so the first all-reduce starts earlier; with FSDP set \
             `backward_prefetch=BackwardPrefetch.BACKWARD_PRE` and `forward_prefetch=True`."
                .to_string(),
            "Send less: communicate gradients in bf16 (DDP's `bf16_compress_hook` / FSDP's `MixedPrecision(\
             reduce_dtype=torch.bfloat16)`), or accumulate gradients over several micro-batches and synchronise \
             once (`no_sync` on all but the last)."
                .to_string(),
            "For embedding all-to-alls (TorchRec), pipeline the input distribution with the previous batch's \
             compute (`TrainPipelineSparseDist`)."
                .to_string(),
        ],
        Framework::Jax => vec![
            "Let XLA overlap collectives with compute: `XLA_FLAGS=--xla_gpu_enable_latency_hiding_scheduler=true` \
             (and asynchronous collectives, on by default in recent releases)."
                .to_string(),
            "Combine small collectives into fewer large ones (`--xla_gpu_all_reduce_combine_threshold_bytes`, \
             `--xla_gpu_all_gather_combine_threshold_bytes`), and reduce in bf16 where accuracy allows."
                .to_string(),
        ],
        Framework::Tensorflow => vec![
            "Pack gradients into fewer, larger all-reduces and overlap them with the backward pass: \
             `tf.distribute.experimental.CommunicationOptions(bytes_per_pack=…)` for \
             `MultiWorkerMirroredStrategy`, or compile the step with XLA (`jit_compile=True`)."
                .to_string(),
            "Reduce in 16-bit where accuracy allows (mixed precision), halving what is sent.".to_string(),
        ],
        Framework::Cuda | Framework::Python => vec![
            "Run collectives on their own stream and start them as soon as their inputs are ready, so compute \
             kernels on other streams hide them; group small collectives (`ncclGroupStart`/`ncclGroupEnd`)."
                .to_string(),
        ],
    };
    if straggler {
        fixes.push(
            "Find why the straggling rank is late (its input pipeline, a slower GPU, uneven data or work): \
             `mlprof analyze DIR --tool gpu` shows each rank's temporal and idle-time breakdown."
                .to_string(),
        );
    }
    fixes.push(
        "Check the interconnect NCCL uses (`NCCL_DEBUG=INFO` prints it): collectives over sockets or with \
         peer-to-peer disabled are many times slower than over NVLink or InfiniBand."
            .to_string(),
    );
    fixes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::rules::test_support::gpu_steps;
    use crate::gpu::GpuAnalysis;
    use crate::gpu::kernel_breakdown::KernelBreakdown;

    #[test]
    fn exposed_collectives_fire_with_their_share_of_the_step() {
        let results = gpu_steps(2, 100.0, &[(CATEGORY, 27.0)]);
        let Outcome::Found(findings) = check(&results) else { panic!("27% exposed must fire") };
        assert_eq!(findings[0].severity, Severity::High);
        assert_eq!(findings[0].time_lost_per_step_ps, Some(27_000_000_000));
        assert!(findings[0].evidence[0].text.contains("27.0% of the 100 ms step"), "{:?}", findings[0].evidence);
        assert!(findings[0].fixes.iter().any(|f| f.contains("NCCL_DEBUG=INFO")));
        assert!(!findings[0].fixes.iter().any(|f| f.contains("straggling")), "one rank, no straggler");
        let Outcome::Found(findings) = check(&gpu_steps(2, 100.0, &[(CATEGORY, 6.0)])) else { panic!("6% fires") };
        assert_eq!(findings[0].severity, Severity::Medium);
        assert!(matches!(check(&gpu_steps(2, 100.0, &[(CATEGORY, 4.0)])), Outcome::Clear(_)));
        assert!(matches!(check(&gpu_steps(0, 0.0, &[])), Outcome::NotApplicable(_)));
    }

    #[test]
    fn the_rank_with_the_least_communication_is_the_straggler() {
        let kernel = |rank: i64, sum_us: f64| KernelStats {
            rank,
            name: "ncclKernel_AllReduce".into(),
            kernel_type: KernelType::Communication,
            count: 1,
            sum_us,
            max_us: sum_us,
            min_us: sum_us,
            mean_us: sum_us,
            stddev_us: 0.0,
        };
        let mut results = gpu_steps(2, 100.0, &[(CATEGORY, 30.0)]);
        let kernels = vec![kernel(0, 60_000.0), kernel(1, 20_000.0), kernel(0, 5_000.0)];
        results.gpu = Some(GpuAnalysis {
            kernel_breakdown: Some(KernelBreakdown { kernels, ..KernelBreakdown::default() }),
            ..GpuAnalysis::default()
        });
        let Outcome::Found(findings) = check(&results) else { panic!("must fire") };
        let text: Vec<&str> = findings[0].evidence.iter().map(|e| e.text.as_str()).collect();
        assert!(text.iter().any(|t| t.contains("(rank 0 65 ms, rank 1 20 ms): rank 1 spends the least")), "{text:?}");
        assert!(findings[0].fixes.iter().any(|f| f.contains("straggling rank")));
    }
}
