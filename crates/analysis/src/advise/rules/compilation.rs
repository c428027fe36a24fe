//! `compilation`: the framework compiles inside the steps — XLA (re)compiling a jitted
//! function, TensorFlow retracing a `tf.function` — so steps pay for compilation again and
//! again instead of once. The step-time breakdown's Compilation category holds that time.
//! Fires at ≥ 3 % of the step time (high at 15 %), XProf's thresholds for host-side
//! categories. Time lost per step: the mean Compilation time.
//!
//! PyTorch traces do not mark `torch.compile`'s compilation (its compiled regions are
//! recorded as they run, not as they compile), so the rule does not apply to them and
//! says how to see recompiles instead.

use crate::advise::{Evidence, Finding, Framework, Outcome, Severity, ToolResults, ms_to_ps};

use super::ms;

/// The rule's name.
pub const NAME: &str = "compilation";

/// The step-time category of compilation (XProf's column id).
const CATEGORY: &str = "compileTimeMs";
/// Compilation share that fires (% of step time).
const MODERATE_PERCENT: f64 = 3.0;
/// Compilation share that is high.
const HIGH_PERCENT: f64 = 15.0;

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    match results.framework {
        Framework::Pytorch => {
            return Outcome::NotApplicable(
                "PyTorch traces do not mark torch.compile's compilation; `TORCH_LOGS=recompiles` prints each \
                 recompile and why"
                    .into(),
            );
        }
        Framework::Cuda => {
            return Outcome::NotApplicable("a CUDA program's activity has no framework compilation to see".into());
        }
        Framework::Jax | Framework::Tensorflow | Framework::Python => {}
    }
    if results.steps().is_empty() {
        return Outcome::NotApplicable("no steps in the profile".into());
    }
    let compile_ms = results.category_mean_ms(CATEGORY);
    let share = results.step_share_percent(compile_ms);
    let cited = |text: String| {
        Evidence::new("input_pipeline_analyzer", text).cite(format!("category_ms[\"{CATEGORY}\"].average"), compile_ms)
    };
    if share < MODERATE_PERCENT {
        return Outcome::Clear(cited(format!(
            "compilation takes {} per step, {share:.1}% of the step (this rule fires from {MODERATE_PERCENT:.0}%)",
            ms(compile_ms)
        )));
    }
    let compiling_steps = results.steps().iter().filter(|s| s.compile_ms > 0.0).count();
    let evidence = cited(format!(
        "Compilation: {} per step on average, {share:.1}% of the step time; {compiling_steps} of {} steps compiled.",
        ms(compile_ms),
        results.steps().len()
    ));
    let finding = Finding::new(
        NAME,
        Severity::by_share(share, MODERATE_PERCENT, HIGH_PERCENT),
        format!("Recompiling in the steps: {} per step spent compiling", ms(compile_ms)),
    );
    Outcome::Found(vec![
        finding
            .time_lost(Some(ms_to_ps(compile_ms)), "mean Compilation time per step (step-time breakdown)")
            .evidence(evidence)
            .fixes(fixes(results.framework)),
    ])
}

fn fixes(framework: Framework) -> Vec<&'static str> {
    match framework {
        Framework::Jax => vec![
            "Find what recompiles: `jax.config.update(\"jax_log_compiles\", True)` logs every compilation with \
             the function and the argument shapes that caused it.",
            "Keep shapes and static arguments fixed from step to step: pad or bucket variable-length batches \
             (drop the last partial batch), and pass configuration as `static_argnums` values that do not change \
             or close over it, not as Python scalars that change every step.",
            "Keep compiled programs across runs with the persistent cache \
             (`jax.config.update(\"jax_compilation_cache_dir\", DIR)`).",
        ],
        Framework::Tensorflow => vec![
            "Stop retracing: give the `tf.function` an `input_signature` (with `None` for the dimensions that \
             vary) or `reduce_retracing=True`; TensorFlow warns about functions it retraces often.",
            "Keep batch shapes fixed (`dataset.batch(n, drop_remainder=True)`, padded batches) and pass tensors, \
             not Python values that change every step, into the function.",
        ],
        Framework::Pytorch | Framework::Cuda | Framework::Python => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::rules::test_support::gpu_steps;

    #[test]
    fn compilation_inside_the_steps_fires_outside_pytorch() {
        let mut results = gpu_steps(4, 100.0, &[(CATEGORY, 20.0)]);
        results.framework = Framework::Jax;
        results.overview.steps.steps[0].compile_ms = 80.0;
        let Outcome::Found(findings) = check(&results) else { panic!("20% compiling must fire") };
        assert_eq!(findings[0].severity, Severity::High);
        assert_eq!(findings[0].time_lost_per_step_ps, Some(20_000_000_000));
        assert!(findings[0].evidence[0].text.ends_with("1 of 4 steps compiled."), "{:?}", findings[0].evidence);
        assert!(findings[0].fixes.iter().any(|f| f.contains("jax_log_compiles")));
        results.framework = Framework::Tensorflow;
        let Outcome::Found(findings) = check(&results) else { panic!("fires on TensorFlow") };
        assert!(findings[0].fixes.iter().any(|f| f.contains("input_signature")));
        assert!(matches!(check(&gpu_steps(4, 100.0, &[(CATEGORY, 1.0)])), Outcome::Clear(_)));
        results.framework = Framework::Pytorch;
        assert!(matches!(check(&results), Outcome::NotApplicable(reason) if reason.contains("TORCH_LOGS=recompiles")));
    }
}
