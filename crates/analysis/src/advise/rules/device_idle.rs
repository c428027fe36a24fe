//! `device_idle`: low device utilisation — the device spends much of each step neither
//! computing nor moving input, output or collectives (XProf's idle share of the
//! step-time breakdown: 100 % − input − output − device compute − collectives). Fires
//! at ≥ 20 % of the step (high at 50 %); XProf has no GPU idle threshold, so these are
//! mlprof's. Time lost per step: that share of the mean step time.
//!
//! The evidence says where the idle time goes (the host categories per step), adds
//! HTA's temporal breakdown and the transfers tool's longest GPU gaps with their causes
//! on PyTorch GPU traces, the kernels per step, and the memory headroom that decides
//! whether a larger batch fits (the small-batch fix).

use crate::advise::{Evidence, Finding, Framework, Outcome, Severity, ToolResults, ms_to_ps};
use crate::gpu::transfers::findings::FindingKind;

use super::{kernel_launch, memory, ms};

/// The rule's name.
pub const NAME: &str = "device_idle";

/// Idle share that fires (% of step time).
const MODERATE_PERCENT: f64 = 20.0;
/// Idle share that is high.
const HIGH_PERCENT: f64 = 50.0;
/// GPU gaps listed in the evidence.
const LISTED_GAPS: usize = 3;

/// Step-time categories the idle share is made of, with their labels.
const IDLE_CATEGORIES: [(&str, &str); 5] = [
    ("hostComputeTimeMs", "host compute"),
    ("kernelLaunchTimeMs", "kernel launch"),
    ("otherTimeMs", "all others"),
    ("compileTimeMs", "compilation"),
    ("deviceToDeviceTimeMs", "device to device"),
];

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    if !results.has_device() || results.steps().is_empty() {
        return Outcome::NotApplicable("no device steps in the profile".into());
    }
    let idle = results.overview.steps.bottleneck.idle_percent;
    if idle < MODERATE_PERCENT {
        return Outcome::Clear(
            Evidence::new(
                "input_pipeline_analyzer",
                format!("the device is idle {idle:.1}% of the step (flagged from {MODERATE_PERCENT}%)"),
            )
            .cite("bottleneck.idle_percent", idle),
        );
    }
    let lost_ms = idle / 100.0 * results.mean_step_ms();
    let mut parts = Evidence::new("input_pipeline_analyzer", String::new()).cite("bottleneck.idle_percent", idle);
    let mut words = Vec::new();
    for (id, label) in IDLE_CATEGORIES {
        let value = results.category_mean_ms(id);
        if value > 0.0 {
            words.push(format!("{label} {}", ms(value)));
            parts = parts.cite(format!("category_ms[\"{id}\"].average"), value);
        }
    }
    parts.text = format!(
        "The device is idle {idle:.1}% of the step ({} of {}); per step the host spends {}.",
        ms(lost_ms),
        ms(results.mean_step_ms()),
        if words.is_empty() { "no recorded time".to_string() } else { words.join(", ") }
    );
    let mut finding = Finding::new(
        NAME,
        Severity::by_share(idle, MODERATE_PERCENT, HIGH_PERCENT),
        format!("Low device utilisation: the device is idle {idle:.1}% of each step"),
    )
    .time_lost(Some(ms_to_ps(lost_ms)), "XProf's idle share of the mean step time")
    .evidence(parts);
    finding.evidence.extend(temporal_evidence(results));
    finding.evidence.extend(gap_evidence(results));
    finding.evidence.extend(kernel_launch::kernel_evidence(results));
    let headroom = memory::highest_use(results);
    let batch_fix = match &headroom {
        Some(use_) if use_.percent > 90.0 => format!(
            "Give the device more work per step without more memory: peak memory is already {:.1}% of capacity, so \
             raise the effective batch with gradient accumulation, or free memory first (mixed precision, \
             activation checkpointing).",
            use_.percent
        ),
        Some(use_) => format!(
            "Give the device more work per step: raise the batch size (and scale the learning rate) — peak memory \
             is {:.1}% of capacity, so there is room.",
            use_.percent
        ),
        None => "Give the device more work per step: raise the batch size (and scale the learning rate) as far as \
             memory allows."
            .to_string(),
    };
    if let Some(use_) = headroom {
        finding = finding.evidence(use_.evidence);
    }
    finding = finding.fixes([batch_fix]).fixes([
        "Shrink the host time between device work: the input, kernel-launch, host-overhead, op-placement and \
         transfer findings say where it goes.",
    ]);
    finding = finding.fixes([match results.framework {
        Framework::Tensorflow => {
            "Fuse small ops with XLA (`jit_compile=True`) so the device runs fewer, longer kernels."
        }
        Framework::Jax => "Jit the whole step so XLA fuses it into fewer, longer kernels.",
        Framework::Pytorch => "Fuse small ops with `torch.compile`, and replay the step as a CUDA graph.",
        Framework::Cuda | Framework::Python => {
            "Launch the work back to back: fuse small kernels, capture repeated launches in a CUDA graph \
             (`cudaStreamBeginCapture` … `cudaGraphLaunch`), and overlap copies with compute on separate streams."
        }
    }]);
    Outcome::Found(vec![finding])
}

/// HTA's temporal breakdown per rank.
fn temporal_evidence(results: &ToolResults) -> Vec<Evidence> {
    let Some(ranks) = results.gpu.as_ref().and_then(|g| g.temporal_breakdown.as_ref()) else { return Vec::new() };
    ranks
        .iter()
        .enumerate()
        .map(|(i, rank)| {
            Evidence::new(
                "gpu",
                format!(
                    "Rank {}: the GPU is idle {:.2}% of the time between its first and last op (HTA temporal \
                     breakdown), computing {:.2}%.",
                    rank.rank, rank.idle_time_pctg, rank.compute_time_pctg
                ),
            )
            .cite(format!("temporal_breakdown[{i}].idle_time_pctg"), rank.idle_time_pctg)
            .cite(format!("temporal_breakdown[{i}].compute_time_pctg"), rank.compute_time_pctg)
        })
        .collect()
}

/// The transfers tool's longest GPU gaps and what the host was doing.
fn gap_evidence(results: &ToolResults) -> Option<Evidence> {
    let transfers = results.transfers.as_ref()?;
    let gaps: Vec<(usize, &crate::gpu::transfers::findings::Finding)> =
        transfers.findings.iter().enumerate().filter(|(_, f)| f.kind == FindingKind::GpuGap).collect();
    if gaps.is_empty() {
        return None;
    }
    let mut evidence = Evidence::new("transfers", String::new());
    let mut lines = Vec::new();
    for (index, gap) in gaps.iter().take(LISTED_GAPS) {
        let (value, field, amount) = match gap.time_lost_per_step_ps {
            Some(ps) => (ps, "time_lost_per_step_ps", format!("{} per step", ms(ps as f64 / 1e9))),
            None => (gap.time_lost_ps, "time_lost_ps", format!("{} in all", ms(gap.time_lost_ps as f64 / 1e9))),
        };
        // Where it happened tells apart two gaps of one kind (each op waited on).
        let location = gap.location.describe();
        let place = if location.is_empty() || location == "—" { String::new() } else { format!("in {location}, ") };
        lines.push(format!("{} ({place}{}, {amount})", gap.what, super::count(gap.count as usize, "gap", "gaps")));
        evidence = evidence.cite(format!("findings[{index}].{field}"), value as f64);
    }
    evidence.text = format!(
        "{} of GPU gaps over {} (no kernel, copy or memset on any stream); the costliest: {}.",
        super::count(gaps.len(), "kind", "kinds"),
        mlprof_model::human::duration(transfers.gap_threshold_ps),
        lines.join("; ")
    );
    Some(evidence)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::rules::test_support::gpu_steps;

    fn results(idle_percent: f64) -> ToolResults {
        let mut results = gpu_steps(1, 10.0, &[("otherTimeMs", 4.0)]);
        results.framework = Framework::Pytorch;
        results.overview.steps.bottleneck.idle_percent = idle_percent;
        results
    }

    #[test]
    fn a_mostly_idle_device_fires_with_where_the_time_went() {
        let Outcome::Found(findings) = check(&results(60.0)) else { panic!("60% idle must fire") };
        assert_eq!(findings[0].severity, Severity::High);
        assert_eq!(findings[0].time_lost_per_step_ps, Some(6_000_000_000));
        assert!(findings[0].evidence[0].text.contains("all others 4 ms"), "{}", findings[0].evidence[0].text);
        assert!(findings[0].fixes[0].contains("as far as memory allows"));
    }

    #[test]
    fn a_busy_device_is_clear_and_cpu_profiles_do_not_apply() {
        assert!(matches!(check(&results(10.0)), Outcome::Clear(_)));
        assert!(matches!(check(&ToolResults::default()), Outcome::NotApplicable(_)));
    }
}
