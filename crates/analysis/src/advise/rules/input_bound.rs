//! `input_bound`: the step waits for its input. Fires when the median step spends at
//! least 5 % of its time on input (XProf's moderately-input-bound threshold; high at
//! 20 % of the total step time, XProf's highly-input-bound one). The median, not
//! XProf's total, decides whether it fires, so one slow step (the first batch, an
//! epoch boundary) does not make a pipelined job input-bound.
//!
//! Time lost per step: the mean Input time per step (waiting for input plus
//! host-to-device copies), which a fully overlapped pipeline would hide. The fixes name
//! the tf.data bottleneck iterator of the slowest pipeline call, or the DataLoader
//! stage, with the tool's own advice.

use crate::advise::{Evidence, Finding, Framework, Outcome, Severity, ToolResults, ms_to_ps};
use crate::input_pipeline::StepBreakdown;
use mlprof_model::human;

use super::{ms, tf_data_fixes};

/// The rule's name.
pub const NAME: &str = "input_bound";

/// XProf's `kModeratelyInfeedBoundThresholdInPercent`.
const MODERATE_PERCENT: f64 = 5.0;
/// XProf's `kHighlyInfeedBoundThresholdInPercent`.
const HIGH_PERCENT: f64 = 20.0;

/// Op types of `tf.py_function` / `tf.numpy_function` ops.
const PY_FUNCTION_TYPES: [&str; 3] = ["EagerPyFunc", "PyFunc", "PyFuncStateless"];

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    let steps = results.steps();
    if steps.is_empty() {
        return Outcome::NotApplicable("no steps in the profile, so no step time to compare input time with".into());
    }
    let bottleneck = &results.overview.steps.bottleneck;
    let median = median_input_share(steps);
    if median < MODERATE_PERCENT {
        let mut text =
            format!("the median step waits {median:.1}% of its time for input (input-bound from {MODERATE_PERCENT}%)");
        if bottleneck.input_percent >= MODERATE_PERCENT
            && let Some(worst) = steps.iter().max_by(|a, b| share(a).total_cmp(&share(b)))
        {
            text.push_str(&format!(
                "; XProf's {:.1}% over all steps comes from the slowest ones ({} waits {:.1}%)",
                bottleneck.input_percent,
                worst.step_name,
                share(worst)
            ));
        }
        return Outcome::Clear(
            Evidence::new("input_pipeline_analyzer", text).cite("bottleneck.input_percent", bottleneck.input_percent),
        );
    }
    let input_ms = results.category_mean_ms("infeedTimeMs");
    let severity = Severity::by_share(bottleneck.input_percent.max(median), MODERATE_PERCENT, HIGH_PERCENT);
    let mean = |f: fn(&StepBreakdown) -> f64| steps.iter().map(f).sum::<f64>() / steps.len() as f64;
    let (wait_ms, copy_ms) = (mean(|s| s.host_wait_input_ms), mean(|s| s.host_to_device_ms));
    let mut finding = Finding::new(NAME, severity, format!("Input-bound: each step waits {} for input", ms(input_ms)))
        .time_lost(Some(ms_to_ps(input_ms)), "mean Input time per step (step-time breakdown)")
        .evidence(
            Evidence::new(
                "input_pipeline_analyzer",
                format!(
                    "{} The median step waits {median:.1}%; per step {} waiting for input, {} copying to the device.",
                    bottleneck.input_statement,
                    ms(wait_ms),
                    ms(copy_ms)
                ),
            )
            .cite("bottleneck.input_percent", bottleneck.input_percent)
            .cite("category_ms[\"infeedTimeMs\"].average", input_ms)
            .cite("mean(steps[].host_wait_input_ms)", wait_ms)
            .cite("mean(steps[].host_to_device_ms)", copy_ms),
        );
    if let Some(loader) = &results.overview.steps.dataloader {
        finding = finding.evidence(dataloader_evidence(loader)).fixes(results.overview.steps.recommendations.clone());
    } else if let Some(tf_data) = tf_data_advice(results) {
        finding.title.push_str(&format!("; tf.data bottleneck: {}", tf_data.iterator));
        finding = finding.fixes(tf_data.fixes);
        finding.evidence.extend(tf_data.evidence);
    } else {
        finding = finding.fixes(no_pipeline_fixes(results));
    }
    if copy_ms > wait_ms {
        finding = finding.fixes([copy_fix(results.framework)]);
    }
    Outcome::Found(vec![finding])
}

/// The share of a step's time spent on input, %.
fn share(step: &StepBreakdown) -> f64 {
    if step.step_time_ms > 0.0 { 100.0 * step.input_ms / step.step_time_ms } else { 0.0 }
}

/// The median of the steps' input shares (the mean of the middle two for an even count).
fn median_input_share(steps: &[StepBreakdown]) -> f64 {
    let mut shares: Vec<f64> = steps.iter().map(share).collect();
    shares.sort_by(f64::total_cmp);
    let mid = shares.len() / 2;
    match shares.len() {
        0 => 0.0,
        n if n % 2 == 1 => shares[mid],
        _ => (shares[mid - 1] + shares[mid]) / 2.0,
    }
}

fn dataloader_evidence(loader: &crate::input_pipeline::dataloader::DataLoaderAnalysis) -> Evidence {
    let workers = if loader.multiprocess { "worker processes" } else { "the training process (num_workers=0)" };
    let mut text = format!(
        "DataLoader: {} __next__ calls, {} per step waiting, batches prepared in {workers}",
        loader.calls,
        ms(loader.wait_per_step_ms.average)
    );
    let mut evidence = Evidence::new("input_pipeline_analyzer", String::new())
        .cite("dataloader.calls", loader.calls as f64)
        .cite("dataloader.wait_per_step_ms.average", loader.wait_per_step_ms.average);
    if let Some(top) = loader.stages.first() {
        text.push_str(&format!("; {:.1}% of it in {}", top.percent, top.stage.label()));
        evidence = evidence.cite("dataloader.stages[0].percent", top.percent);
    }
    if loader.pageable_h2d_copies_per_step > 0.0 {
        let copies = human::count(loader.pageable_h2d_copies_per_step);
        text.push_str(&format!("; {copies} pageable host-to-device copies per step"));
        evidence = evidence.cite("dataloader.pageable_h2d_copies_per_step", loader.pageable_h2d_copies_per_step);
    }
    evidence.text = format!("{text}.");
    evidence
}

/// What the tf.data tools say about the slowest pipeline.
struct TfDataAdvice {
    iterator: String,
    evidence: Vec<Evidence>,
    fixes: Vec<String>,
}

fn tf_data_advice(results: &ToolResults) -> Option<TfDataAdvice> {
    let bottleneck = results.tf_data.bottlenecks.first()?;
    let (host_index, host) = results.tf_data.hosts.iter().enumerate().find(|(_, h)| h.host == bottleneck.host)?;
    let (pipeline_index, pipeline) =
        host.pipelines.iter().enumerate().find(|(_, p)| p.name == bottleneck.input_pipeline)?;
    let iterator = if bottleneck.iterator_name.is_empty() { "unknown" } else { bottleneck.iterator_name.as_str() };
    let pipeline_field = format!("hosts[{host_index}].pipelines[{pipeline_index}]");
    let mut evidence = vec![
        Evidence::new(
            "tf_data_bottleneck_analysis",
            format!(
                "Pipeline {} on {}: {} of {} calls slower than 50 µs, the slowest {}; its bottleneck is \
                 `{iterator}` ({}) with {} of self time in that call.",
                pipeline.name,
                host.host,
                pipeline.num_slow_calls,
                pipeline.num_calls,
                human::duration(bottleneck.max_latency_ps),
                bottleneck.iterator_long_name,
                human::duration(bottleneck.iterator_self_time_ps)
            ),
        )
        .cite("bottlenecks[0].max_latency_ps", bottleneck.max_latency_ps as f64)
        .cite("bottlenecks[0].iterator_self_time_ps", bottleneck.iterator_self_time_ps as f64)
        .cite(format!("{pipeline_field}.num_slow_calls"), pipeline.num_slow_calls as f64)
        .cite(format!("{pipeline_field}.num_calls"), pipeline.num_calls as f64),
    ];
    let mut fixes = tf_data_fixes::for_iterator(iterator);
    if let Some(py) = py_function_evidence(results) {
        evidence.push(py);
        fixes.insert(0, tf_data_fixes::AVOID_PY_FUNCTION.to_string());
    }
    if !host.iterators.iter().any(|i| i.name == "Prefetch") {
        fixes.push(tf_data_fixes::ADD_PREFETCH.to_string());
    }
    if results.host_count > 1 && !fixes.iter().any(|f| f == tf_data_fixes::SHARD_EARLY) {
        fixes.push(tf_data_fixes::SHARD_EARLY.to_string());
    }
    fixes.push(tf_data_fixes::OWN_THREADS.to_string());
    Some(TfDataAdvice { iterator: iterator.to_string(), evidence, fixes })
}

/// The host ops of `tf.py_function` / `tf.numpy_function`, if any ran.
fn py_function_evidence(results: &ToolResults) -> Option<Evidence> {
    let stats = results.framework_op_stats.as_ref()?;
    let rows: Vec<(usize, &crate::framework_op_stats::OpStatsRow)> = stats
        .without_idle
        .rows
        .iter()
        .enumerate()
        .filter(|(_, row)| row.host_or_device == "Host" && PY_FUNCTION_TYPES.contains(&row.op_type.as_str()))
        .collect();
    let (first, row) = rows.first()?;
    let mut evidence = Evidence::new(
        "framework_op_stats",
        format!(
            "`{}` (a tf.py_function / tf.numpy_function) ran {} times for {} of self time{}.",
            row.op_name,
            row.occurrences,
            human::duration_us(row.total_self_time_us),
            if rows.len() > 1 { format!(", with {} more such ops", rows.len() - 1) } else { String::new() }
        ),
    );
    evidence = evidence
        .cite(format!("without_idle.rows[{first}].occurrences"), row.occurrences as f64)
        .cite(format!("without_idle.rows[{first}].total_self_time_us"), row.total_self_time_us);
    Some(evidence)
}

/// Fixes when neither tf.data nor a DataLoader shows where the input time goes.
fn no_pipeline_fixes(results: &ToolResults) -> Vec<String> {
    let mut fixes = Vec::new();
    match results.framework {
        Framework::Tensorflow => fixes.push(
            "Feed the model with tf.data ending in `.prefetch(tf.data.AUTOTUNE)`, with parallel map and \
             interleave (`num_parallel_calls=tf.data.AUTOTUNE`): the next batch is then prepared while the step \
             runs, and the profiler can show which stage is slow."
                .to_string(),
        ),
        Framework::Jax => fixes.push(
            "Prepare batches ahead of the step: a tf.data or Grain pipeline with prefetch, and the next batch put \
             on the device (`jax.device_put`) while the current step runs."
                .to_string(),
        ),
        Framework::Pytorch => fixes.push(
            "Load batches with a torch.utils.data.DataLoader with num_workers > 0, pin_memory=True and \
             persistent_workers=True, so they are prepared while the step runs."
                .to_string(),
        ),
        Framework::Cuda | Framework::Python => fixes.push(
            "Prepare the next input on the host while the GPU works on the current one (another thread), and copy \
             it with `cudaMemcpyAsync` from pinned memory on a stream of its own."
                .to_string(),
        ),
    }
    let next = &results.overview.steps.next_step;
    if !next.is_empty() && !next.starts_with("Input is not") && !next.contains("mlprof advise") {
        fixes.push(next.clone());
    }
    fixes
}

fn copy_fix(framework: Framework) -> String {
    match framework {
        Framework::Tensorflow => "Most input time is copying to the device: prefetch onto the device \
             (`tf.data.experimental.prefetch_to_device('/gpu:0')` as the last transformation, or a distribution \
             strategy's `experimental_distribute_dataset`)."
            .to_string(),
        Framework::Jax => "Most input time is copying to the device: put the next batch on the device while the \
             current step runs (`jax.device_put` one batch ahead)."
            .to_string(),
        Framework::Pytorch => "Most input time is copying to the device: `pin_memory=True` in the DataLoader and \
             `.to(device, non_blocking=True)`, so copies overlap compute."
            .to_string(),
        Framework::Cuda | Framework::Python => {
            "Most input time is copying to the device: copy from pinned memory (`cudaMallocHost`, \
             `cudaHostRegister`) with `cudaMemcpyAsync` on a stream of its own, so copies overlap compute."
                .to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::Outcome;
    use crate::input_pipeline::Summary;
    use crate::tf_data::{
        BottleneckKind, HostTfData, InputPipeline, IteratorMetadata, PipelineBottleneck, PipelineKind,
    };

    fn step(name: &str, step_ms: f64, input_ms: f64) -> StepBreakdown {
        StepBreakdown {
            step_name: name.into(),
            step_time_ms: step_ms,
            input_ms,
            host_wait_input_ms: input_ms,
            ..StepBreakdown::default()
        }
    }

    fn results(steps: Vec<StepBreakdown>) -> ToolResults {
        let mut results = ToolResults::default();
        let n = steps.len() as f64;
        let input: f64 = steps.iter().map(|s| s.input_ms).sum();
        let total: f64 = steps.iter().map(|s| s.step_time_ms).sum();
        results.overview.steps.step_time_ms = Summary { average: total / n, ..Summary::default() };
        results.overview.steps.category_ms =
            vec![("infeedTimeMs".into(), Summary { average: input / n, ..Summary::default() })];
        results.overview.steps.bottleneck.input_percent = 100.0 * input / total;
        results.overview.steps.steps = steps;
        results
    }

    fn with_map_and_batch_pipeline(results: &mut ToolResults) {
        results.tf_data.bottlenecks = vec![PipelineBottleneck {
            host: "vm".into(),
            input_pipeline: "Host:0".into(),
            max_latency_ps: 60_000_000_000,
            iterator_id: 7,
            iterator_name: "MapAndBatch".into(),
            iterator_long_name: "Iterator::Root::MapAndBatch".into(),
            iterator_self_time_ps: 59_000_000_000,
            kind: BottleneckKind::Other,
            suggestion_html: String::new(),
        }];
        results.tf_data.hosts = vec![HostTfData {
            host: "vm".into(),
            iterators: vec![IteratorMetadata { id: 7, name: "MapAndBatch".into(), ..IteratorMetadata::default() }],
            pipelines: vec![InputPipeline {
                id: 1,
                name: "Host:0".into(),
                kind: PipelineKind::Host,
                min_latency_ps: 0,
                avg_latency_ps: 0,
                max_latency_ps: 60_000_000_000,
                num_calls: 4,
                num_slow_calls: 4,
                calls: Vec::new(),
            }],
        }];
    }

    #[test]
    fn a_waiting_step_fires_and_names_the_tf_data_bottleneck() {
        let mut results = results(vec![step("s1", 10.0, 6.0), step("s2", 10.0, 5.0), step("s3", 10.0, 7.0)]);
        with_map_and_batch_pipeline(&mut results);
        results.host_count = 2;
        let Outcome::Found(findings) = check(&results) else { panic!("input-bound steps must fire") };
        let finding = &findings[0];
        assert_eq!(finding.severity, Severity::High);
        assert_eq!(finding.time_lost_per_step_ps, Some(6_000_000_000));
        assert!(finding.title.contains("MapAndBatch"), "{}", finding.title);
        assert!(finding.fixes[0].contains("`MapAndBatch`"), "{:?}", finding.fixes);
        assert!(finding.fixes.iter().any(|f| f.contains(".prefetch(tf.data.AUTOTUNE)")), "no Prefetch stage");
        assert!(finding.fixes.iter().any(|f| f.contains("shard early")), "two workers read the data");
        let tf_data = finding.evidence.iter().find(|e| e.tool == "tf_data_bottleneck_analysis").expect("tf.data");
        assert_eq!(tf_data.cited[1].value, 59_000_000_000.0);
    }

    #[test]
    fn one_slow_step_does_not_make_a_job_input_bound() {
        let results =
            results(vec![step("s1", 5.0, 0.1), step("s2", 6.0, 1.2), step("s3", 5.0, 0.05), step("s4", 5.0, 0.1)]);
        assert!(results.overview.steps.bottleneck.input_percent >= MODERATE_PERCENT);
        let Outcome::Clear(evidence) = check(&results) else { panic!("median step is not input-bound") };
        assert!(evidence.text.contains("s2 waits 20.0%"), "{}", evidence.text);
    }

    #[test]
    fn pytorch_input_gets_the_dataloader_advice_and_the_copy_fix() {
        let copying = StepBreakdown { host_wait_input_ms: 1.0, host_to_device_ms: 2.0, ..step("s", 10.0, 3.0) };
        let mut results = results(vec![copying]);
        results.framework = Framework::Pytorch;
        results.overview.steps.dataloader = Some(crate::input_pipeline::dataloader::DataLoaderAnalysis {
            calls: 1,
            wait_per_step_ms: Summary { average: 1.0, ..Summary::default() },
            ..Default::default()
        });
        results.overview.steps.recommendations = vec!["Set num_workers > 0.".into()];
        let Outcome::Found(findings) = check(&results) else { panic!("30% input must fire") };
        assert_eq!(findings[0].fixes[0], "Set num_workers > 0.", "the DataLoader analysis' own advice");
        assert!(findings[0].fixes[1].contains("non_blocking=True"), "{:?}", findings[0].fixes);
        assert_eq!(findings[0].evidence[1].cited[1].value, 1.0, "DataLoader wait per step");
    }

    #[test]
    fn without_steps_it_does_not_apply() {
        assert!(matches!(check(&ToolResults::default()), Outcome::NotApplicable(_)));
    }

    #[test]
    fn median_of_an_even_count_is_the_mean_of_the_middle_two() {
        let steps = [step("a", 10.0, 1.0), step("b", 10.0, 3.0), step("c", 10.0, 5.0), step("d", 10.0, 9.0)];
        assert_eq!(median_input_share(&steps), 40.0);
    }
}
