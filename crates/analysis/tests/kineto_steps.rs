//! The step-time tools on real PyTorch (Kineto) traces, against an independent
//! reference: `scripts/kineto_steps_reference.py` computes each `ProfilerStep#N`'s
//! duration, its time per XProf category (with the Kineto mapping of
//! `mlprof_analysis::kineto` and XProf's priorities) and the DataLoader wait, from the
//! raw JSON with exact decimals; its output is `tests/data/kineto/steps_ref/steps.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mlprof_analysis::grouping::StepSource;
use mlprof_analysis::input_pipeline::InputPipelineAnalysis;
use mlprof_analysis::tool::{Analysis, Options, ToolId, ToolResult};
use mlprof_model::Session;
use serde::Deserialize;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[derive(Deserialize)]
struct ReferenceStep {
    step: i64,
    duration_us: f64,
    dataloader_wait_us: f64,
    categories_us: BTreeMap<String, f64>,
}

fn reference() -> BTreeMap<String, Vec<ReferenceStep>> {
    let path = repo_root().join("tests/data/kineto/steps_ref/steps.json");
    let text = std::fs::read_to_string(&path).expect("reference exists");
    serde_json::from_str(&text).expect("reference parses")
}

fn load(path: &str) -> Vec<Session> {
    mlprof_formats::discover::load(&repo_root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn input_pipeline(session: &Session) -> InputPipelineAnalysis {
    let hosts = session.hosts.iter().collect();
    match Analysis::new(hosts, Options::default()).run(ToolId::InputPipelineAnalyzer) {
        Ok(ToolResult::InputPipeline(result)) => *result,
        _ => panic!("input_pipeline_analyzer runs"),
    }
}

/// The reference's categories folded into the tools' columns (ms).
fn expected_columns(step: &ReferenceStep) -> [(&'static str, f64); 8] {
    let us = |names: &[&str]| names.iter().map(|n| step.categories_us.get(*n).copied().unwrap_or(0.0)).sum::<f64>();
    [
        ("device compute", us(&["device_compute_16", "device_compute_32"]) / 1e3),
        ("device to device", us(&["device_to_device", "device_wait_device"]) / 1e3),
        ("collectives", us(&["device_collectives"]) / 1e3),
        ("host compute", us(&["host_compute"]) / 1e3),
        ("kernel launch", us(&["host_prepare"]) / 1e3),
        ("input", us(&["host_wait_input", "host_to_device", "device_wait_host"]) / 1e3),
        ("output", us(&["device_to_host"]) / 1e3),
        ("other", us(&["unknown"]) / 1e3),
    ]
}

fn assert_close(what: &str, actual: f64, expected: f64) {
    let tolerance = (expected.abs() * 1e-3).max(1e-6);
    assert!((actual - expected).abs() <= tolerance, "{what}: {actual} vs reference {expected}");
}

#[test]
fn step_breakdown_matches_the_reference_on_every_single_rank_trace() {
    let reference = reference();
    let mut checked = 0;
    for (path, steps) in &reference {
        if path.contains("trace_filter") {
            continue; // two ranks: see the pod-viewer test.
        }
        let sessions = load(path);
        let analysis = input_pipeline(&sessions[0]);
        // XProf drops the first and last step when there are more than five.
        let expected: Vec<&ReferenceStep> =
            if steps.len() > 5 { steps[1..steps.len() - 1].iter().collect() } else { steps.iter().collect() };
        assert_eq!(analysis.steps.len(), expected.len(), "{path}: step count");
        for (actual, reference) in analysis.steps.iter().zip(expected) {
            let what = format!("{path} {}", actual.step_name);
            assert_eq!(actual.step_num, reference.step);
            assert_eq!(actual.step_name, format!("ProfilerStep#{}", reference.step));
            assert_close(&format!("{what} step time"), actual.step_time_ms, reference.duration_us / 1e3);
            let columns = [
                actual.device_compute_ms,
                actual.device_to_device_ms,
                actual.device_collectives_ms,
                actual.host_compute_ms,
                actual.kernel_launch_ms,
                actual.input_ms,
                actual.output_ms,
                actual.other_ms,
            ];
            for ((name, expected), actual) in expected_columns(reference).into_iter().zip(columns) {
                assert_close(&format!("{what} {name}"), actual, expected);
            }
            let total: f64 = columns.iter().sum();
            assert_close(&format!("{what} categories add up"), total, actual.step_time_ms);
            checked += 1;
        }
        assert!(analysis.step_source.contains("ProfilerStep#N"), "{path}: {}", analysis.step_source);
    }
    assert!(checked >= 15, "only {checked} steps checked");
}

#[test]
fn the_cpu_trace_is_input_bound_on_its_single_process_dataloader() {
    let path = "tests/data/kineto/torch_profile/logdir/worker0.1795289102612280864.pt.trace.json";
    let reference = reference();
    let analysis = input_pipeline(&load(path)[0]);
    assert_eq!(analysis.hardware_type, "CPU_ONLY");
    assert_eq!(analysis.bottleneck.input_classification, "host", "{:?}", analysis.bottleneck);
    let loader = analysis.dataloader.as_ref().expect("DataLoader analysis on a PyTorch trace");
    assert_eq!(loader.iterators, ["_SingleProcessDataLoaderIter"]);
    assert!(!loader.multiprocess);
    assert_eq!(loader.calls, 3);
    for (step, expected) in loader.steps.iter().zip(&reference[path]) {
        assert_eq!(step.step_name, format!("ProfilerStep#{}", expected.step));
        assert_close("dataloader wait", step.wait_ms, expected.dataloader_wait_us / 1e3);
    }
    let stages: f64 = loader.stages.iter().map(|s| s.time_ms).sum();
    assert_close("stages add up to the wait", stages, loader.steps.iter().map(|s| s.wait_ms).sum());
    let top = &loader.stages[0];
    assert_eq!(top.stage.label(), "Dataset __getitem__", "{:?}", loader.stages);
    assert!(analysis.recommendations.iter().any(|r| r.contains("num_workers > 0")), "{:?}", analysis.recommendations);
}

#[test]
fn gpu_traces_have_no_dataloader_section_advice_about_input_unless_input_bound() {
    let analysis = input_pipeline(&load("tests/data/kineto/hta/ns_resolution_trace")[0]);
    assert_eq!(analysis.hardware_type, "GPU");
    let loader = analysis.dataloader.as_ref().expect("PyTorch trace");
    assert_eq!(loader.calls, 0);
    assert_eq!(analysis.bottleneck.input_classification, "device");
    assert!(analysis.recommendations.is_empty(), "{:?}", analysis.recommendations);
}

#[test]
fn all_others_time_is_not_called_input_on_pytorch() {
    // XProf would say "POTENTIALLY input-bound" (15.2 % 'All others') beside a 0.3 % input.
    let analysis = input_pipeline(&load("tests/data/kineto/torch_gpu_h200/logdir")[0]);
    let b = &analysis.bottleneck;
    assert_eq!(b.input_classification, "both", "{b:?}");
    assert!(b.input_percent < 1.0, "{b:?}");
    assert!(
        b.input_statement.starts_with("The steps are not waiting for input (the DataLoader: 0.3% of the step time)")
            && b.input_statement.contains("15.2% of the step time is 'All others'"),
        "{}",
        b.input_statement
    );
    assert!(!b.input_statement.contains("input-bound"), "{}", b.input_statement);
    assert!(analysis.next_step.contains("--tool transfers"), "{}", analysis.next_step);
    assert!(!analysis.next_step.contains("DataLoader section"), "{}", analysis.next_step);
}

#[test]
fn ranks_are_aligned_by_step_number_and_the_straggler_is_named() {
    let reference = reference();
    let sessions = load("tests/data/kineto/hta/trace_filter");
    let hosts: Vec<_> = sessions[0].hosts.iter().collect();
    assert_eq!(hosts.len(), 2);
    let analysis = Analysis::new(hosts, Options::default());
    let Ok(ToolResult::PodViewer(viewer)) = analysis.run(ToolId::PodViewer) else { panic!("pod viewer runs") };
    assert_eq!(viewer.steps.len(), 2);
    let duration = |rank: usize, step: i64| {
        let key = format!("tests/data/kineto/hta/trace_filter/sampled_rank-{rank}.json.gz");
        reference[&key].iter().find(|s| s.step == step).map(|s| s.duration_us).expect("reference step")
    };
    for step in &viewer.steps {
        assert_eq!(step.hosts.len(), 2);
        let times: Vec<f64> = (0..2).map(|rank| duration(rank, step.step_num)).collect();
        for (record, expected) in step.hosts.iter().zip(&times) {
            assert_close("pod step time", record.total_duration_us, *expected);
        }
        let straggler = step.straggler.as_ref().expect("two hosts: a straggler");
        let slowest = if times[0] >= times[1] { 0 } else { 1 };
        assert_eq!(straggler.host, step.hosts[slowest].host);
        assert_close("behind fastest", straggler.behind_fastest_us, (times[0] - times[1]).abs());
    }
    assert_eq!(viewer.stragglers[0].steps, 2, "{:?}", viewer.stragglers);
}

#[test]
fn traces_without_profiler_steps_say_how_to_get_them() {
    let sessions = load("tests/data/kineto/hta/critical_path/simple_add");
    let analysis = input_pipeline(&sessions[0]);
    assert!(analysis.steps.is_empty());
    assert!(!analysis.warnings.is_empty());
    let groups = mlprof_analysis::facts::step_groups(&sessions[0].hosts[0]);
    assert_eq!(groups.source, StepSource::None);
}

#[test]
fn the_overview_names_the_gpu_the_job_used_and_points_to_the_transfers_tool() {
    let sessions = load("tests/data/kineto/hta/nccl_parser_config");
    let hosts = sessions[0].hosts.iter().collect();
    let Ok(ToolResult::Overview(overview)) = Analysis::new(hosts, Options::default()).run(ToolId::OverviewPage) else {
        panic!("overview runs")
    };
    // deviceProperties lists the machine's 8 GPUs; the rank ran on one.
    assert_eq!(overview.run_environment.device_type, "NVIDIA A100-PG509-200");
    assert_eq!(overview.run_environment.device_core_count, 1);
    assert_eq!(overview.steps.steps.len(), 3);
    assert!(overview.top_ops_on_device);
    assert!(overview.steps.summary_next_step.contains("--tool transfers"), "{}", overview.steps.summary_next_step);
}
