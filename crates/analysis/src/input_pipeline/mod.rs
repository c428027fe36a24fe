//! The input-pipeline analyzer (XProf's `input_pipeline_analyzer`, generic GPU/CPU
//! path): per-step time by category, its statistics, whether the job is input-bound
//! and by how much, the host-side input ops (tf.data iterators, enqueue ops) with
//! their categories, and XProf's recommendations, with its exact texts.
//!
//! The one design decision to know: the step database comes in from [`crate::steps`]
//! (already combined over hosts), so the same numbers feed the overview page, the pod
//! viewer and this tool. On PyTorch traces the host side is the DataLoader
//! ([`dataloader`]) instead of tf.data, with PyTorch's advice instead of XProf's.

pub mod dataloader;

use mlprof_model::Host;
use serde::Serialize;
use serde_json::{Value, json};

use crate::datatable::DataTable;
use crate::op_metrics::{OpMetrics, OpMetricsDb};
use crate::report::{Cell, Report, Section, Table};
use crate::steps::{CombinedSteps, EventType, StepInfo};

use mlprof_model::human;
use mlprof_model::time::PS_PER_MS_F64;

/// Mean, standard deviation (sample), minimum and maximum of a series (ms or %).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Mean.
    pub average: f64,
    /// Sample standard deviation.
    pub standard_deviation: f64,
    /// Minimum.
    pub minimum: f64,
    /// Maximum.
    pub maximum: f64,
}

impl Summary {
    /// The summary of `values` (all zero when empty), as XProf's `tsl::Stat`.
    pub fn of(values: &[f64]) -> Summary {
        if values.is_empty() {
            return Summary::default();
        }
        let n = values.len() as f64;
        let average = values.iter().sum::<f64>() / n;
        let variance = if values.len() > 1 {
            let sum_sq: f64 = values.iter().map(|v| v * v).sum();
            ((sum_sq - n * average * average) / (n - 1.0)).max(0.0)
        } else {
            0.0
        };
        Summary {
            average,
            standard_deviation: variance.sqrt(),
            minimum: values.iter().copied().fold(f64::INFINITY, f64::min),
            maximum: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// One step's time by category (all in milliseconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StepBreakdown {
    /// Step number (group id).
    pub step_num: i64,
    /// Step name (`train 6`).
    pub step_name: String,
    /// The step's number as the profile numbers it (`train 6` → 6), what mlprof shows.
    pub profile_step: i64,
    /// Step time (ms).
    pub step_time_ms: f64,
    /// Device compute, 16- and 32-bit (ms).
    pub device_compute_ms: f64,
    /// Device to device, incl. waiting for another device (ms).
    pub device_to_device_ms: f64,
    /// Device collective communication (ms).
    pub device_collectives_ms: f64,
    /// Host compute (ms).
    pub host_compute_ms: f64,
    /// Kernel launch (ms).
    pub kernel_launch_ms: f64,
    /// Input: waiting for input plus host-to-device (ms).
    pub input_ms: f64,
    /// Of `input_ms`, the host waiting for input (`IteratorGetNext`) (ms).
    pub host_wait_input_ms: f64,
    /// Of `input_ms`, host-to-device copies and the device waiting for the host (ms).
    pub host_to_device_ms: f64,
    /// Output: device-to-host (ms).
    pub output_ms: f64,
    /// Compilation (ms).
    pub compile_ms: f64,
    /// All others (ms).
    pub other_ms: f64,
}

/// Which steps `steps` are, as the profile numbers them: `steps 6 to 9`, `steps 5, 7, 9`,
/// `step 551`; empty for none.
pub fn which_steps(steps: &[StepBreakdown]) -> String {
    let numbers: Vec<i64> = steps.iter().map(|s| s.profile_step).collect();
    match numbers.as_slice() {
        [] => String::new(),
        [one] => format!("step {one}"),
        [first, second] => format!("steps {first} and {second}"),
        [first, .., last] if numbers.windows(2).all(|w| w[1] == w[0] + 1) => format!("steps {first} to {last}"),
        _ if numbers.len() <= 8 => {
            let listed: Vec<String> = numbers.iter().map(i64::to_string).collect();
            format!("steps {}", listed.join(", "))
        }
        [first, .., last] => format!("{} steps from {first} to {last}", numbers.len()),
    }
}

/// [`which_steps`] as ` (steps 6 to 9)`, empty for none.
pub fn which_steps_in_brackets(steps: &[StepBreakdown]) -> String {
    let which = which_steps(steps);
    if which.is_empty() { which } else { format!(" ({which})") }
}

impl StepBreakdown {
    /// One step's time by XProf's categories.
    pub fn of(info: &StepInfo) -> StepBreakdown {
        let ms = |kind: EventType| info.ps(kind) as f64 / PS_PER_MS_F64;
        let host_wait_input_ms = ms(EventType::HostWaitInput);
        let host_to_device_ms = ms(EventType::HostToDevice) + ms(EventType::DeviceWaitHost);
        StepBreakdown {
            step_num: info.step_num,
            step_name: info.step_name.clone(),
            profile_step: info.profile_step,
            step_time_ms: info.duration_ps as f64 / PS_PER_MS_F64,
            device_compute_ms: ms(EventType::DeviceCompute16) + ms(EventType::DeviceCompute32),
            device_to_device_ms: ms(EventType::DeviceToDevice) + ms(EventType::DeviceWaitDevice),
            device_collectives_ms: ms(EventType::DeviceCollectives),
            host_compute_ms: ms(EventType::HostCompute),
            kernel_launch_ms: ms(EventType::HostPrepare),
            input_ms: host_wait_input_ms + host_to_device_ms,
            host_wait_input_ms,
            host_to_device_ms,
            output_ms: ms(EventType::DeviceToHost),
            compile_ms: ms(EventType::HostCompile),
            other_ms: ms(EventType::UnknownTime),
        }
    }
}

/// The bottleneck conclusion with XProf's classifications and statements.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Bottleneck {
    /// Input time as % of step time.
    pub input_percent: f64,
    /// Output time as % of step time.
    pub output_percent: f64,
    /// Device idle time as % of step time.
    pub idle_percent: f64,
    /// Device compute as % of step time.
    pub compute_percent: f64,
    /// `host`, `both`, `device` or `unknown`.
    pub input_classification: String,
    /// The input-bound sentence.
    pub input_statement: String,
    /// `high`, `moderate` or `no`.
    pub kernel_launch_classification: String,
    /// The kernel-launch sentence (empty when `no`).
    pub kernel_launch_statement: String,
    /// `high`, `moderate` or `no`.
    pub all_other_classification: String,
    /// The all-others sentence (empty when `no`).
    pub all_other_statement: String,
    /// `high`, `moderate` or `no`.
    pub device_collectives_classification: String,
    /// The collectives sentence (empty when `no`).
    pub device_collectives_statement: String,
}

/// One host input op.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InputOp {
    /// Op name (`Iterator::Root::MapAndBatch`).
    pub op_name: String,
    /// Occurrences.
    pub count: u64,
    /// Total time (ms).
    pub time_ms: f64,
    /// Total time as % of all input-op self time.
    pub time_percent: f64,
    /// Self time (ms).
    pub self_time_ms: f64,
    /// Self time as % of all input-op self time.
    pub self_time_percent: f64,
    /// `Enqueue`, `Demanded file read`, `Advanced file read`, `Preprocessing`, `Unknown`.
    pub category: String,
}

/// Host input time by kind (µs), scaled as XProf does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct InputTimeBreakdown {
    /// Enqueuing to the device (µs).
    pub enqueue_us: f64,
    /// Reading files on demand (µs).
    pub demanded_file_read_us: f64,
    /// Reading files in advance (µs).
    pub advanced_file_read_us: f64,
    /// Preprocessing (µs).
    pub preprocessing_us: f64,
    /// Input time not attributed to a kind (µs).
    pub unclassified_non_enqueue_us: f64,
}

/// The step-time categories as the overview lists them: XProf's column id, its label.
pub const CATEGORY_LABELS: [(&str, &str); 9] = [
    ("compileTimeMs", "Compilation"),
    ("infeedTimeMs", "Input"),
    ("outfeedTimeMs", "Output"),
    ("kernelLaunchTimeMs", "Kernel launch"),
    ("hostComputeTimeMs", "Host compute"),
    ("deviceToDeviceTimeMs", "Device to device"),
    ("deviceComputeTimeMs", "Device compute"),
    ("deviceCollectivesTimeMs", "Device collective communication"),
    ("otherTimeMs", "All others"),
];

/// The whole input-pipeline analysis.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InputPipelineAnalysis {
    /// `CPU_ONLY` or `GPU`.
    pub hardware_type: String,
    /// Per step.
    pub steps: Vec<StepBreakdown>,
    /// Step time statistics (ms).
    pub step_time_ms: Summary,
    /// Per-category statistics (ms), keyed like XProf's column ids.
    pub category_ms: Vec<(String, Summary)>,
    /// The conclusion.
    pub bottleneck: Bottleneck,
    /// What to look at next, in XProf's words (its page's sections; HTML kept): what
    /// `xprof-json` writes.
    pub summary_next_step: String,
    /// What to look at next, for people reading mlprof's outputs: names the tool (and
    /// its section) that answers, never XProf's page sections.
    pub next_step: String,
    /// Host input ops, by self time.
    pub input_ops: Vec<InputOp>,
    /// Host input time by kind.
    pub input_time_breakdown: InputTimeBreakdown,
    /// XProf's static recommendations (HTML links kept).
    pub recommendations: Vec<String>,
    /// Warnings (no step markers, empty intersection).
    pub warnings: Vec<String>,
    /// How the steps were found.
    pub step_source: String,
    /// The DataLoader analysis (PyTorch traces only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataloader: Option<dataloader::DataLoaderAnalysis>,
}

/// XProf's warning when no step is found.
pub const NO_STEP_MARKER: &str = "No step marker observed and hence the step time is unknown. This may happen if (1) training steps are not instrumented (e.g., if you are not using Keras) or (2) the profiling duration is shorter than the step time. For (1), you need to add step instrumentation; for (2), you may try to profile longer.";
const EMPTY_INTERSECTION: &str = "Although there are steps observed on some host(s), the intersection of the steps over all hosts is empty (because the differences among individual host's step sequences are too big). Consequently, the overall step time is unknown.";

/// XProf's warning when no step is left: no marker, or hosts that do not overlap.
pub fn step_warning(empty_intersection: bool) -> &'static str {
    if empty_intersection { EMPTY_INTERSECTION } else { NO_STEP_MARKER }
}

/// Runs the analysis on combined steps and the (combined) host op metrics.
pub fn analyze(steps: &CombinedSteps, host_ops: &OpMetricsDb, step_source: String) -> InputPipelineAnalysis {
    let mut result = InputPipelineAnalysis {
        hardware_type: if steps.has_device { "GPU" } else { "CPU_ONLY" }.to_string(),
        step_source,
        ..InputPipelineAnalysis::default()
    };
    let step_times: Vec<f64> = steps
        .steps
        .iter()
        .map(|per_host| per_host.iter().map(|(_, s)| s.duration_ps as f64 / PS_PER_MS_F64).fold(0.0, f64::max))
        .collect();
    result.step_time_ms = Summary::of(&step_times);
    for per_host in &steps.steps {
        let Some((_, info)) = per_host.first() else { continue };
        result.steps.push(StepBreakdown::of(info));
    }
    let series = |f: fn(&StepBreakdown) -> f64| Summary::of(&result.steps.iter().map(f).collect::<Vec<_>>());
    result.category_ms = vec![
        ("deviceComputeTimeMs".into(), series(|s| s.device_compute_ms)),
        ("deviceToDeviceTimeMs".into(), series(|s| s.device_to_device_ms)),
        ("deviceCollectivesTimeMs".into(), series(|s| s.device_collectives_ms)),
        ("hostComputeTimeMs".into(), series(|s| s.host_compute_ms)),
        ("kernelLaunchTimeMs".into(), series(|s| s.kernel_launch_ms)),
        ("infeedTimeMs".into(), series(|s| s.input_ms)),
        ("outfeedTimeMs".into(), series(|s| s.output_ms)),
        ("compileTimeMs".into(), series(|s| s.compile_ms)),
        ("otherTimeMs".into(), series(|s| s.other_ms)),
        ("hostToDeviceTimeMs".into(), series(|s| s.host_to_device_ms)),
    ];
    if steps.steps.is_empty() {
        result.warnings.push(step_warning(steps.empty_intersection).to_string());
    }
    host_analysis(host_ops, &mut result);
    result.bottleneck = bottleneck(&result.steps, tf_data_in_use(&result.input_time_breakdown));
    result.summary_next_step = summary_next_step(&result.bottleneck.input_classification, &result.input_time_breakdown);
    result.next_step = next_step(&result);
    result.recommendations = RECOMMENDATIONS.iter().map(|s| s.to_string()).collect();
    result
}

/// Adds the DataLoader analysis of the PyTorch hosts among `hosts` (if any) to
/// `result`, with PyTorch's advice in place of XProf's tf.data recommendations, and
/// sentences in PyTorch's terms: where XProf would call the steps "POTENTIALLY
/// input-bound" for their 'All others' time while the DataLoader wait is small, the
/// statement says the DataLoader is not the cause and what 'All others' is.
pub fn add_dataloader_analysis(result: &mut InputPipelineAnalysis, hosts: &[&Host]) {
    let Some(analysis) = dataloader::analyze(hosts) else { return };
    result.recommendations = analysis.advice(result.bottleneck.input_percent);
    let waiting = result.bottleneck.input_percent >= MODERATELY_INPUT_BOUND_PERCENT;
    let others_only = result.bottleneck.input_classification == "both" && !waiting;
    if others_only {
        let input = if analysis.calls > 0 {
            format!("the DataLoader: {}% of the step time", one_digit(result.bottleneck.input_percent))
        } else {
            "no DataLoader wait was recorded".to_string()
        };
        result.bottleneck.input_statement = format!(
            "The steps are not waiting for input ({input}), but {}% of the step time is 'All others': host time \
             outside the recorded ops (Python between ops, synchronisation, I/O).",
            one_digit(share_of_step_time(&result.steps, |s| s.other_ms)),
        );
    }
    result.summary_next_step = if waiting && analysis.calls > 0 {
        "Look at the DataLoader section of the input pipeline analyzer for where the input time goes and what to change.".into()
    } else if waiting {
        "No DataLoader wait was recorded in these steps, so the input time is host time outside recorded ops (Python, synchronisation): `mlprof analyze --tool transfers` shows what the host was doing while the GPU waited.".into()
    } else if others_only {
        "'All others' is host time outside recorded ops (Python between ops, synchronisation): `mlprof analyze --tool transfers` shows what the host was doing while the GPU waited.".into()
    } else {
        "The DataLoader does not hold the steps back: the step-time categories show where the time goes.".into()
    };
    result.next_step = if waiting && analysis.calls > 0 {
        "input_pipeline_analyzer's DataLoader section shows where the input time goes and what to change.".into()
    } else if waiting || others_only {
        result.summary_next_step.clone()
    } else {
        next_step(result)
    };
    result.dataloader = Some(analysis);
}

/// XProf's threshold for "MODERATELY input-bound": the input share of the step time, %.
const MODERATELY_INPUT_BOUND_PERCENT: f64 = 5.0;

fn category_summary(result: &InputPipelineAnalysis, id: &str) -> Summary {
    result.category_ms.iter().find(|(key, _)| key == id).map(|(_, s)| *s).unwrap_or_default()
}

/// XProf's `OneDigit`: `%.1f`.
pub fn one_digit(value: f64) -> String {
    format!("{value:.1}")
}

/// The share of all steps' time spent in one category (`part` of each step), % (0
/// without step time).
fn share_of_step_time(steps: &[StepBreakdown], part: fn(&StepBreakdown) -> f64) -> f64 {
    let step: f64 = steps.iter().map(|s| s.step_time_ms).sum();
    if step == 0.0 { 0.0 } else { 100.0 * steps.iter().map(part).sum::<f64>() / step }
}

fn bottleneck(steps: &[StepBreakdown], tf_data_used: bool) -> Bottleneck {
    let total = |f: fn(&StepBreakdown) -> f64| steps.iter().map(f).sum::<f64>();
    let step = total(|s| s.step_time_ms);
    if step == 0.0 {
        return Bottleneck {
            input_classification: "unknown".into(),
            input_statement: "No step time measured. Therefore we cannot tell where the performance bottleneck is."
                .into(),
            kernel_launch_classification: "no".into(),
            all_other_classification: "no".into(),
            device_collectives_classification: "no".into(),
            ..Bottleneck::default()
        };
    }
    let percent = |f: fn(&StepBreakdown) -> f64| share_of_step_time(steps, f);
    let input = percent(|s| s.input_ms);
    let output = percent(|s| s.output_ms);
    let compute = percent(|s| s.device_compute_ms);
    let collectives = percent(|s| s.device_collectives_ms);
    let kernel_launch = percent(|s| s.kernel_launch_ms);
    let all_other = percent(|s| s.other_ms);
    let mut b = Bottleneck {
        input_percent: input,
        output_percent: output,
        idle_percent: (100.0 - input - output - compute - collectives).max(0.0),
        compute_percent: compute,
        ..Bottleneck::default()
    };
    let all_other_reported = classify_input(&mut b, input, all_other);
    classify_collectives(&mut b, collectives);
    classify_kernel_launch(&mut b, kernel_launch, tf_data_used);
    classify_all_other(&mut b, all_other, all_other_reported);
    b
}

/// Sets the input-bound classification and statement from the input and "all others"
/// percentages of the step time; returns whether the statement already reports the
/// "all others" time.
fn classify_input(b: &mut Bottleneck, input: f64, all_other: f64) -> bool {
    if input >= 20.0 {
        b.input_classification = "host".into();
        b.input_statement = format!(
            "Your program is HIGHLY input-bound because {}% of the total step time sampled is waiting for input. Therefore, you should first focus on reducing the input time.",
            one_digit(input)
        );
    } else if input >= MODERATELY_INPUT_BOUND_PERCENT {
        b.input_classification = "both".into();
        b.input_statement = format!(
            "Your program is MODERATELY input-bound because {}% of the total step time sampled is waiting for input. Therefore, you would need to reduce both the input time and other time.",
            one_digit(input)
        );
    } else if all_other >= 3.0 {
        b.input_classification = "both".into();
        b.input_statement = format!(
            "Your program is POTENTIALLY input-bound because {}% of the total step time sampled is spent on 'All Others' time (which could be due to I/O or Python execution or both).",
            one_digit(all_other)
        );
        return true;
    } else {
        b.input_classification = "device".into();
        b.input_statement = format!(
            "Your program is NOT input-bound because only {}% of the total step time sampled is waiting for input. Therefore, you should focus on reducing other time.",
            one_digit(input)
        );
    }
    false
}

/// `high`, `moderate` or `no`, as `value` reaches `high`, `moderate` or neither.
fn level(value: f64, moderate: f64, high: f64) -> &'static str {
    if value >= high {
        "high"
    } else if value >= moderate {
        "moderate"
    } else {
        "no"
    }
}

/// Sets the device-collectives classification and statement.
fn classify_collectives(b: &mut Bottleneck, collectives: f64) {
    b.device_collectives_classification = level(collectives, 3.0, 15.0).into();
    if b.device_collectives_classification != "no" {
        b.device_collectives_statement = format!(
            "{} % of the total step time sampled is spent on 'Device Collective Communication'.",
            one_digit(collectives)
        );
    }
}

/// Sets the kernel-launch classification and statement (with the tf.data hint when
/// tf.data is in use).
fn classify_kernel_launch(b: &mut Bottleneck, kernel_launch: f64, tf_data_used: bool) {
    b.kernel_launch_classification = level(kernel_launch, 3.0, 15.0).into();
    if b.kernel_launch_classification != "no" {
        b.kernel_launch_statement =
            format!("{} % of the total step time sampled is spent on 'Kernel Launch'.", one_digit(kernel_launch));
        if tf_data_used {
            b.kernel_launch_statement.push_str(" It could be due to CPU contention with tf.data. In this case, you may try to set the environment variable TF_GPU_THREAD_MODE=gpu_private.");
        }
    }
}

/// Sets the "all others" classification and statement, unless the input statement
/// already reported that time.
fn classify_all_other(b: &mut Bottleneck, all_other: f64, all_other_reported: bool) {
    b.all_other_classification = if all_other_reported { "no" } else { level(all_other, 3.0, 15.0) }.into();
    if b.all_other_classification != "no" {
        b.all_other_statement = format!(
            "{} % of the total step time sampled is spent on 'All Others' time. This could be due to Python execution overhead.",
            one_digit(all_other)
        );
    }
}

fn tf_data_in_use(breakdown: &InputTimeBreakdown) -> bool {
    breakdown.demanded_file_read_us > 0.0 || breakdown.advanced_file_read_us > 0.0 || breakdown.preprocessing_us > 0.0
}

fn summary_next_step(classification: &str, breakdown: &InputTimeBreakdown) -> String {
    if classification == "host" || classification == "both" {
        if tf_data_in_use(breakdown) {
            "Look at Section 3 for the breakdown of input time on the host.".into()
        } else {
            "Consider using <a href=\"https://www.tensorflow.org/guide/data\" target=\"_blank\">the tf.data API</a> to enable profiler's host-side analysis for input pipeline. Profiler currently does not support custom input pipeline (please ignore Section 3 below).".into()
        }
    } else {
        "You may skip the rest of this page.".into()
    }
}

/// [`InputPipelineAnalysis::next_step`] from the steps' conclusion: the tool to look at
/// next, by name.
fn next_step(result: &InputPipelineAnalysis) -> String {
    if result.steps.is_empty() {
        return "No steps were found, so the input pipeline cannot be judged: the steps tool says how steps were \
                looked for."
            .into();
    }
    match result.bottleneck.input_classification.as_str() {
        "host" | "both" if tf_data_in_use(&result.input_time_breakdown) => {
            "The input time is spent on the host, in tf.data: input_pipeline_analyzer's host-side analysis lists \
             the input ops by time, and tf_data_bottleneck_analysis (or `mlprof advise`) names the slowest \
             iterator and what to change."
                .into()
        }
        "host" | "both" => "The input time is spent on the host, outside tf.data, so it cannot be broken down by \
                            stage: trace_viewer shows what the host threads did meanwhile; with the tf.data API \
                            (https://www.tensorflow.org/guide/data) the profiler breaks it down."
            .into(),
        _ => "Input is not what slows the steps: framework_op_stats shows which ops take the step time.".into(),
    }
}

/// XProf's generic recommendations that apply: each names an input category, and only
/// categories with time are kept (all of them when none has any, or when PyTorch's
/// advice replaced them).
fn applicable_recommendations(result: &InputPipelineAnalysis) -> Vec<&str> {
    let b = &result.input_time_breakdown;
    let times = [
        b.enqueue_us,
        b.preprocessing_us,
        b.advanced_file_read_us,
        b.demanded_file_read_us,
        b.unclassified_non_enqueue_us,
    ];
    let generic = result.recommendations.iter().map(String::as_str).eq(RECOMMENDATIONS);
    if !generic || times.iter().all(|t| *t <= 0.0) {
        return result.recommendations.iter().map(String::as_str).collect();
    }
    result.recommendations.iter().zip(times).filter(|(_, time)| *time > 0.0).map(|(text, _)| text.as_str()).collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum InputCategory {
    Enqueue,
    DemandedFileRead,
    AdvancedFileRead,
    Preprocessing,
    Unknown,
}

impl InputCategory {
    fn label(self) -> &'static str {
        match self {
            InputCategory::Enqueue => "Enqueue",
            InputCategory::DemandedFileRead => "Demanded file read",
            InputCategory::AdvancedFileRead => "Advanced file read",
            InputCategory::Preprocessing => "Preprocessing",
            InputCategory::Unknown => "Unknown",
        }
    }
}

fn new_style_category(category: &str) -> Option<InputCategory> {
    match category.to_ascii_lowercase().as_str() {
        "enqueue" => Some(InputCategory::Enqueue),
        "read" => Some(InputCategory::DemandedFileRead),
        "preprocessing" => Some(InputCategory::Preprocessing),
        "unknown" => Some(InputCategory::Unknown),
        _ => None,
    }
}

fn input_category(op: &OpMetrics) -> Option<InputCategory> {
    if let Some(category) = new_style_category(&op.category) {
        return Some(category);
    }
    let category = op.category.as_str();
    if category.starts_with("InfeedEnqueue") || category == "MemcpyHToD" {
        return Some(InputCategory::Enqueue);
    }
    if category != crate::tf_op::DATASET_OP {
        return None;
    }
    const READERS: [&str; 6] =
        ["::TFRecord", "::TextLine", "::FixedLengthRecord", "::SSTable", "::RecordIO", "::ArrayRecord"];
    const IN_ADVANCE: [&str; 5] = ["::MemoryReader", "::MemoryWriter", "::Interleave", "::Prefetch", "::ParallelMap"];
    let name = op.name.as_str();
    Some(if READERS.iter().any(|suffix| name.ends_with(suffix)) {
        if IN_ADVANCE.iter().any(|part| name.contains(part)) {
            InputCategory::AdvancedFileRead
        } else {
            InputCategory::DemandedFileRead
        }
    } else {
        InputCategory::Preprocessing
    })
}

fn host_analysis(host_ops: &OpMetricsDb, result: &mut InputPipelineAnalysis) {
    let mut ops: Vec<(&OpMetrics, InputCategory)> =
        host_ops.metrics.iter().filter_map(|op| input_category(op).map(|c| (op, c))).collect();
    if ops.is_empty() {
        return;
    }
    ops.sort_by(|a, b| b.0.self_time_ps.cmp(&a.0.self_time_ps).then_with(|| a.0.name.cmp(&b.0.name)));
    let total_ps: u64 = ops.iter().map(|(op, _)| op.self_time_ps).sum();
    let mut by_category = [0f64; 5];
    for &(op, category) in &ops {
        let share = |ps: u64| if total_ps == 0 { 0.0 } else { 100.0 * ps as f64 / total_ps as f64 };
        result.input_ops.push(InputOp {
            op_name: op.name.clone(),
            count: op.occurrences,
            time_ms: op.time_ps as f64 / PS_PER_MS_F64,
            time_percent: share(op.time_ps),
            self_time_ms: op.self_time_ps as f64 / PS_PER_MS_F64,
            self_time_percent: share(op.self_time_ps),
            category: category.label().to_string(),
        });
        by_category[category as usize] += op.self_time_ps as f64 / 1e6;
    }
    let enqueue = by_category[InputCategory::Enqueue as usize];
    let (demanded, advanced, preprocessing) = (
        by_category[InputCategory::DemandedFileRead as usize],
        by_category[InputCategory::AdvancedFileRead as usize],
        by_category[InputCategory::Preprocessing as usize],
    );
    let total_input = demanded + advanced + preprocessing;
    let step_avg = result.step_time_ms.average;
    let h2d_avg = category_summary(result, "hostToDeviceTimeMs").average;
    let ratio = if step_avg > 0.0 { (h2d_avg / step_avg).min(1.0) } else { 0.0 };
    let non_enqueue = if ratio != 0.0 { enqueue * (1.0 - ratio) / ratio } else { total_input };
    let scale = |part: f64| if total_input == 0.0 { 0.0 } else { non_enqueue * part / total_input };
    let breakdown = InputTimeBreakdown {
        enqueue_us: enqueue,
        demanded_file_read_us: scale(demanded),
        advanced_file_read_us: scale(advanced),
        preprocessing_us: scale(preprocessing),
        unclassified_non_enqueue_us: 0.0,
    };
    result.input_time_breakdown = InputTimeBreakdown {
        unclassified_non_enqueue_us: (non_enqueue
            - breakdown.demanded_file_read_us
            - breakdown.advanced_file_read_us
            - breakdown.preprocessing_us)
            .max(0.0),
        ..breakdown
    };
}

const RECOMMENDATIONS: [&str; 5] = [
    "Enqueuing data: you may want to combine small input data chunks into fewer but larger chunks.",
    "Data preprocessing: you may increase num_parallel_calls in <a href=\"https://www.tensorflow.org/api_docs/python/tf/data/Dataset#map\" target=\"_blank\">Dataset map()</a> or preprocess the data OFFLINE.",
    "Reading data from files in advance: you may tune parameters in the following tf.data API (<a href=\"https://www.tensorflow.org/api_docs/python/tf/data/Dataset#prefetch\" target=\"_blank\">prefetch size</a>, <a href=\"https://www.tensorflow.org/api_docs/python/tf/data/Dataset#interleave\" target=\"_blank\">interleave cycle_length</a>, <a href=\"https://www.tensorflow.org/api_docs/python/tf/data/TFRecordDataset#class_tfrecorddataset\" target=\"_blank\">reader buffer_size</a>)",
    "Reading data from files on demand: you should read data IN ADVANCE using the following tf.data API (<a href=\"https://www.tensorflow.org/api_docs/python/tf/data/Dataset#prefetch\" target=\"_blank\">prefetch</a>, <a href=\"https://www.tensorflow.org/api_docs/python/tf/data/Dataset#interleave\" target=\"_blank\">interleave</a>, <a href=\"https://www.tensorflow.org/api_docs/python/tf/data/TFRecordDataset#class_tfrecorddataset\" target=\"_blank\">reader buffer</a>)",
    "Other data reading or processing: you may consider using the <a href=\"https://www.tensorflow.org/programmers_guide/datasets\" target=\"_blank\">tf.data API</a> (if you are not using it now)",
];

fn two_digits(value: f64) -> String {
    format!("{value:.2}")
}

impl InputPipelineAnalysis {
    /// XProf's step-time DataTable (shared with the overview page).
    pub fn step_time_table(&self) -> Value {
        let mut table = DataTable::new();
        table.column("stepnum", "Step number", "string");
        for (id, label) in [
            ("deviceComputeTimeMs", "Device compute"),
            ("deviceToDeviceTimeMs", "Device to device"),
            ("deviceCollectivesTimeMs", "Device collective communication"),
            ("hostComputeTimeMs", "Host compute"),
            ("kernelLaunchTimeMs", "Kernel launch"),
            ("infeedTimeMs", "Input"),
            ("outfeedTimeMs", "Output"),
            ("compileTimeMs", "Compilation"),
            ("otherTimeMs", "All others"),
        ] {
            table.column(id, label, "number");
        }
        table.column_with("tooltip", "tooltip", "string", json!({"role": "tooltip"}));
        table.column("stepTimeMs", "Step time", "number");
        table.property("step_time_graph_column_ids", "stepnum,deviceComputeTimeMs,deviceToDeviceTimeMs,deviceCollectivesTimeMs,hostComputeTimeMs,kernelLaunchTimeMs,infeedTimeMs,outfeedTimeMs,compileTimeMs,otherTimeMs, tooltip");
        table.property("hardware_type", self.hardware_type.clone());
        table.property("steptime_ms_average", one_digit(self.step_time_ms.average));
        table.property("steptime_ms_standard_deviation", one_digit(self.step_time_ms.standard_deviation));
        table.property("steptime_ms_minimum", one_digit(self.step_time_ms.minimum));
        table.property("steptime_ms_maximum", one_digit(self.step_time_ms.maximum));
        for (id, prefix) in [
            ("deviceComputeTimeMs", "device_compute_time_ms"),
            ("deviceToDeviceTimeMs", "device_to_device_time_ms"),
            ("deviceCollectivesTimeMs", "device_collectives_time_ms"),
            ("infeedTimeMs", "infeed_time_ms"),
            ("outfeedTimeMs", "outfeed_time_ms"),
            ("hostComputeTimeMs", "host_compute_time_ms"),
            ("kernelLaunchTimeMs", "kernel_launch_time_ms"),
            ("compileTimeMs", "compile_time_ms"),
            ("otherTimeMs", "other_time_ms"),
        ] {
            let summary = category_summary(self, id);
            table.property(&format!("{prefix}_avg"), one_digit(summary.average));
            table.property(&format!("{prefix}_sdv"), one_digit(summary.standard_deviation));
        }
        let b = &self.bottleneck;
        table.property("input_conclusion", b.input_statement.clone());
        table.property("device_collectives_bottleneck", b.device_collectives_statement.clone());
        table.property("device_collectives_statement", b.device_collectives_statement.clone());
        table.property("kernel_launch_bottleneck", b.kernel_launch_statement.clone());
        table.property("kernel_launch_statement", b.kernel_launch_statement.clone());
        table.property("all_other_bottleneck", b.all_other_statement.clone());
        table.property("all_other_statement", b.all_other_statement.clone());
        table.property("summary_nextstep", self.summary_next_step.clone());
        for s in &self.steps {
            let tooltip = format!(
                "Step {}, duration: {} ms\n-All others: {} ms\n-Compilation: {} ms\n-Output: {} ms\n-Input: {} ms\n-Kernel launch: {} ms\n-Host compute: {} ms\n-Device collectives: {} ms\n-Device to device: {} ms\n-Device compute: {} ms",
                s.step_name,
                two_digits(s.step_time_ms),
                two_digits(s.other_ms),
                two_digits(s.compile_ms),
                two_digits(s.output_ms),
                two_digits(s.input_ms),
                two_digits(s.kernel_launch_ms),
                two_digits(s.host_compute_ms),
                two_digits(s.device_collectives_ms),
                two_digits(s.device_to_device_ms),
                two_digits(s.device_compute_ms),
            );
            table.row(vec![
                json!(s.step_name),
                json!(s.device_compute_ms),
                json!(s.device_to_device_ms),
                json!(s.device_collectives_ms),
                json!(s.host_compute_ms),
                json!(s.kernel_launch_ms),
                json!(s.input_ms),
                json!(s.output_ms),
                json!(s.compile_ms),
                json!(s.other_ms),
                json!(tooltip),
                json!(s.step_time_ms),
            ]);
        }
        table.to_json()
    }

    /// XProf's diagnostics DataTable.
    pub fn diagnostics_table(&self) -> Value {
        diagnostics_table(&self.warnings)
    }

    /// XProf's `input_pipeline_analyzer` JSON: `[max_infeed_core, input_pipeline,
    /// host, recommendation, diagnostics]`.
    pub fn to_xprof_json(&self) -> Value {
        let mut host = DataTable::new();
        for (id, label, kind) in [
            ("opName", "Input Op", "string"),
            ("count", "Count", "number"),
            ("timeInMs", "Total Time (in ms)", "number"),
            ("timeInPercent", "Total Time (as % of total input-processing time)", "number"),
            ("selfTimeInMs", "Total Self Time (in ms)", "number"),
            ("selfTimeInPercent", "Total Self Time (as % of total input-processing time)", "number"),
            ("category", "Category", "string"),
        ] {
            host.column(id, label, kind);
        }
        for op in &self.input_ops {
            host.row(vec![
                json!(op.op_name),
                json!(op.count as f64),
                json!(op.time_ms),
                json!(op.time_percent / 100.0),
                json!(op.self_time_ms),
                json!(op.self_time_percent / 100.0),
                json!(op.category),
            ]);
        }
        let b = &self.input_time_breakdown;
        host.property("enqueue_us", format!("{:.3}", b.enqueue_us));
        host.property("demanded_file_read_us", format!("{:.3}", b.demanded_file_read_us));
        host.property("advanced_file_read_us", format!("{:.3}", b.advanced_file_read_us));
        host.property("preprocessing_us", format!("{:.3}", b.preprocessing_us));
        host.property("unclassified_nonequeue_us", format!("{:.3}", b.unclassified_non_enqueue_us));
        let mut recommendation = DataTable::new();
        recommendation.column("link", "link", "string");
        for text in &self.recommendations {
            recommendation.row(vec![json!(text)]);
        }
        json!([
            {"cols": [], "rows": []},
            self.step_time_table(),
            host.to_json(),
            recommendation.to_json(),
            self.diagnostics_table()
        ])
    }

    /// The analysis laid out for people.
    pub fn report(&self) -> Report {
        let mut sections = Vec::new();
        let summary = Section::new("Summary").note(self.bottleneck.input_statement.clone()).note(format!(
            "Average step time {} (standard deviation {}, min {}, max {}) over {}{}; {}",
            human::duration_ms(self.step_time_ms.average),
            human::duration_ms(self.step_time_ms.standard_deviation),
            human::duration_ms(self.step_time_ms.minimum),
            human::duration_ms(self.step_time_ms.maximum),
            human::counted(self.steps.len(), "step", "steps"),
            which_steps_in_brackets(&self.steps),
            self.step_source
        ));
        sections.push(self.warnings.iter().fold(summary, |s, w| s.note(w.clone())));
        sections.push(step_section(self));
        let mut ops = Table::new([
            "Input op",
            "Count",
            "Total time (ms)",
            "Total time (%)",
            "Self time (ms)",
            "Self time (%)",
            "Category",
        ]);
        for op in &self.input_ops {
            ops.push(vec![
                Cell::text(&op.op_name),
                Cell::Int(op.count as i64),
                Cell::num(op.time_ms, 3),
                Cell::num(op.time_percent, 1),
                Cell::num(op.self_time_ms, 3),
                Cell::num(op.self_time_percent, 1),
                Cell::text(&op.category),
            ]);
        }
        let b = &self.input_time_breakdown;
        if let Some(loader) = &self.dataloader {
            sections.push(dataloader_section(loader));
        } else {
            sections.push(
            Section::new("Host-side analysis")
                .note(format!(
                    "Input time on the host: enqueue {}, demanded file read {}, advanced file read {}, preprocessing {}, unclassified {}.",
                    human::duration_us(b.enqueue_us), human::duration_us(b.demanded_file_read_us), human::duration_us(b.advanced_file_read_us),
                    human::duration_us(b.preprocessing_us), human::duration_us(b.unclassified_non_enqueue_us)
                ))
                .with_table(ops),
        );
        }
        let mut next = Section::new("Recommendations").note(&self.next_step);
        for text in applicable_recommendations(self) {
            next = next.note(strip_html(text));
        }
        sections.push(next);
        Report { tool: "input_pipeline_analyzer".into(), sections }
    }
}

/// The DataLoader section of PyTorch traces: calls, wait per step, and where the time
/// went.
fn dataloader_section(loader: &dataloader::DataLoaderAnalysis) -> Section {
    let mut section = Section::new("DataLoader (host side)");
    if loader.calls == 0 {
        return section.note("No DataLoader __next__ was recorded in the profiled steps.");
    }
    let iterators = loader.iterators.join(", ");
    let w = &loader.wait_per_step_ms;
    section = section
        .note(format!(
            "{} __next__ calls ({iterators}); batches come from {}.",
            loader.calls,
            if loader.multiprocess { "worker processes" } else { "the training process itself (num_workers=0)" }
        ))
        .note(format!(
            "Wait per step: average {} (standard deviation {}, min {}, max {}); single calls: median {}, max {}.",
            human::duration_ms(w.average),
            human::duration_ms(w.standard_deviation),
            human::duration_ms(w.minimum),
            human::duration_ms(w.maximum),
            human::duration_ms(loader.median_call_ms),
            human::duration_ms(loader.call_ms.maximum)
        ));
    let mut table = Table::new(["Stage", "Time (ms)", "Share of DataLoader time (%)"]);
    for stage in &loader.stages {
        table.push(vec![Cell::text(stage.stage.label()), Cell::num(stage.time_ms, 3), Cell::num(stage.percent, 1)]);
    }
    section.with_table(table)
}

/// The per-step table section (the main table of the step-time tools).
pub fn step_section(analysis: &InputPipelineAnalysis) -> Section {
    let mut table = Table::new([
        "Step",
        "Step time (ms)",
        "Device compute",
        "Device to device",
        "Collectives",
        "Host compute",
        "Kernel launch",
        "Input",
        "Output",
        "Compilation",
        "All others",
    ]);
    for s in &analysis.steps {
        table.push(vec![
            Cell::text(&s.step_name),
            Cell::num(s.step_time_ms, 3),
            Cell::num(s.device_compute_ms, 3),
            Cell::num(s.device_to_device_ms, 3),
            Cell::num(s.device_collectives_ms, 3),
            Cell::num(s.host_compute_ms, 3),
            Cell::num(s.kernel_launch_ms, 3),
            Cell::num(s.input_ms, 3),
            Cell::num(s.output_ms, 3),
            Cell::num(s.compile_ms, 3),
            Cell::num(s.other_ms, 3),
        ]);
    }
    // A narrow terminal keeps the step, its time and the categories that take the most.
    let table = table.key_columns_by_total(&["Step", "Step time (ms)"], &[]);
    Section::new("Step time by category (ms)").with_table(table).main()
}

/// XProf's diagnostics DataTable for a list of warnings.
pub fn diagnostics_table(warnings: &[String]) -> Value {
    let mut table = DataTable::new();
    table.column("severity", "Severity", "string");
    table.column("message", "Message", "string");
    for warning in warnings {
        table.row(vec![json!("WARNING"), json!(warning)]);
    }
    table.to_json()
}

/// Text without HTML tags (`<a href=…>x</a>` → `x`).
pub fn strip_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}
