//! `host_overhead`: host-bound between steps — time in the step that no recorded op
//! accounts for (XProf's "All others": Python, the framework's own work, waiting on
//! the host). Fires at ≥ 3 % of the step time (high at 15 %), XProf's all-others
//! thresholds, on any profile with steps. Time lost per step: the mean All-others time
//! per step. When more than 10 % of the host op time ran eagerly (XProf's eager
//! threshold), the evidence says so and the fixes start with `tf.function`. Steps
//! that are all "others" record no activity at all (a memory snapshot's annotated
//! steps): the rule does not apply.

use crate::advise::{Evidence, Finding, Framework, Outcome, Severity, ToolResults, ms_to_ps};
use crate::input_pipeline::StepBreakdown;

use super::ms;

/// The rule's name.
pub const NAME: &str = "host_overhead";

/// XProf's moderate threshold for All others (% of step time).
const MODERATE_PERCENT: f64 = 3.0;
/// XProf's high threshold for All others.
const HIGH_PERCENT: f64 = 15.0;
/// XProf's `kEagerReportThresholdInPercent`.
const EAGER_PERCENT: f64 = 10.0;

/// Whether `step` has no time in any category but All others: nothing was recorded in it.
fn records_nothing(step: &StepBreakdown) -> bool {
    [
        step.device_compute_ms,
        step.device_to_device_ms,
        step.device_collectives_ms,
        step.host_compute_ms,
        step.kernel_launch_ms,
        step.input_ms,
        step.output_ms,
        step.compile_ms,
    ]
    .iter()
    .all(|&ms| ms == 0.0)
}

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    let steps = results.steps();
    if steps.is_empty() {
        return Outcome::NotApplicable("no steps in the profile".into());
    }
    let other_ms = results.category_mean_ms("otherTimeMs");
    let share = results.step_share_percent(other_ms);
    let field = "category_ms[\"otherTimeMs\"].average";
    if steps.iter().all(records_nothing) {
        // Steps with no op, no device work, no input time at all: the profile records
        // no activity to compare with (a PyTorch memory snapshot's annotated steps).
        return Outcome::NotApplicable("no op or device activity recorded in the steps".into());
    }
    if share < MODERATE_PERCENT {
        return Outcome::Clear(
            Evidence::new(
                "input_pipeline_analyzer",
                format!(
                    "host time outside recorded ops is {} per step, {share:.1}% of the step (flagged from \
                     {MODERATE_PERCENT}%)",
                    ms(other_ms)
                ),
            )
            .cite(field, other_ms),
        );
    }
    let worst = steps.iter().max_by(|a, b| a.other_ms.total_cmp(&b.other_ms));
    let mut text = format!(
        "{share:.1}% of the step time ({} per step) is host time outside any recorded op, which is usually \
         Python between ops and steps",
        ms(other_ms)
    );
    if let Some(worst) = worst {
        text.push_str(&format!("; the most in {} ({})", worst.step_name, ms(worst.other_ms)));
    }
    let mut finding = Finding::new(
        NAME,
        Severity::by_share(share, MODERATE_PERCENT, HIGH_PERCENT),
        format!("Host-bound between steps: {} per step of Python and other unrecorded host time", ms(other_ms)),
    )
    .time_lost(Some(ms_to_ps(other_ms)), "mean All-others time per step (step-time breakdown)")
    .evidence(Evidence::new("input_pipeline_analyzer", format!("{text}.")).cite(field, other_ms));
    let eager = results.overview.host_op_time_eager_percent;
    if results.framework == Framework::Tensorflow && eager > EAGER_PERCENT {
        finding = finding
            .evidence(
                Evidence::new("overview_page", format!("{eager:.1}% of the host op time ran eagerly."))
                    .cite("host_op_time_eager_percent", eager),
            )
            .fixes([
                "Run the step as a graph: decorate it with `@tf.function` (Keras does this unless `run_eagerly=True`).",
            ]);
    }
    Outcome::Found(vec![finding.fixes(fixes(results.framework))])
}

fn fixes(framework: Framework) -> Vec<&'static str> {
    match framework {
        Framework::Tensorflow => vec![
            "Run several steps per Python call: `model.compile(..., steps_per_execution=N)` in Keras, or a loop \
             inside one `tf.function` in a custom training loop.",
            "Keep per-step Python light: no `.numpy()`, printing or metric conversion every step; log every N steps \
             and keep callbacks cheap.",
        ],
        Framework::Jax => vec![
            "Keep the whole step inside one `jax.jit` and run several steps per call (`jax.lax.scan`).",
            "Avoid per-step host work: no `device_get`, `block_until_ready` or printing every step; log every N \
             steps.",
        ],
        Framework::Pytorch => vec![
            "Avoid per-step host synchronisation and Python work: no `.item()`, `.cpu()` or printing every step; \
             accumulate metrics on the GPU and log every N steps.",
            "Cut Python dispatch overhead with `torch.compile` (and CUDA graphs with mode=\"reduce-overhead\").",
        ],
        Framework::Cuda | Framework::Python => vec![
            "Keep the host ahead of the GPU: no synchronising call (`cudaDeviceSynchronize`, `cudaMemcpy`, \
             `cudaStreamSynchronize`) in the loop; wait on CUDA events only where results are read.",
            "Replay repeated launch sequences as a CUDA graph (`cudaStreamBeginCapture` … `cudaGraphLaunch`).",
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input_pipeline::{StepBreakdown, Summary};

    fn results(other_ms: f64) -> ToolResults {
        let mut results = ToolResults::default();
        results.overview.steps.steps = vec![StepBreakdown {
            step_name: "train 1".into(),
            other_ms,
            host_compute_ms: 10.0 - other_ms,
            step_time_ms: 10.0,
            ..Default::default()
        }];
        results.overview.steps.step_time_ms = Summary { average: 10.0, ..Summary::default() };
        results.overview.steps.category_ms =
            vec![("otherTimeMs".into(), Summary { average: other_ms, ..Summary::default() })];
        results
    }

    #[test]
    fn python_time_fires_with_its_share_and_eager_advice() {
        let mut results = results(2.0);
        results.overview.host_op_time_eager_percent = 40.0;
        let Outcome::Found(findings) = check(&results) else { panic!("20% all-others must fire") };
        assert_eq!(findings[0].severity, Severity::High);
        assert_eq!(findings[0].time_lost_per_step_ps, Some(2_000_000_000));
        assert!(findings[0].fixes[0].contains("@tf.function"), "{:?}", findings[0].fixes);
        assert_eq!(findings[0].evidence[1].cited[0].value, 40.0);
    }

    #[test]
    fn steps_that_record_nothing_but_their_span_do_not_apply() {
        let mut results = results(10.0);
        results.overview.steps.steps[0].host_compute_ms = 0.0;
        assert!(matches!(check(&results), Outcome::NotApplicable(_)));
    }

    #[test]
    fn little_unrecorded_time_is_clear() {
        let Outcome::Clear(evidence) = check(&results(0.2)) else { panic!("2% is under the threshold") };
        assert_eq!(evidence.cited[0].value, 0.2);
    }
}
