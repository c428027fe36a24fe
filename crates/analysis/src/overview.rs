//! The overview page (XProf's `overview_page`): performance summary with the step-time
//! breakdown, device compute precision, the top 10 ops, the run environment, the
//! input-bound conclusion and the next steps, with XProf's exact texts.
//!
//! The one design decision to know: the step numbers come from
//! [`crate::input_pipeline`] (same step database); XProf lists only device ops as
//! top ops, so on CPU-only profiles our report lists the top host ops instead (the
//! `xprof-json` rendering keeps XProf's empty table).

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::datatable::DataTable;
use crate::input_pipeline::{InputPipelineAnalysis, one_digit, step_section};
use crate::kernel_stats::OpKernels;
use crate::op_metrics::{OpMetrics, OpMetricsDb};
use crate::report::{Cell, Report, Section, Table};

/// One of the top ops.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TopOp {
    /// Op name.
    pub name: String,
    /// Op type (XProf's category).
    pub category: String,
    /// Self time as a fraction of the total time (0–1).
    pub self_time_fraction: f64,
    /// Cumulative fraction up to this op (0–1).
    pub cumulative_time_fraction: f64,
    /// Self time (ps).
    pub self_time_ps: u64,
    /// GFLOP/s over the op's time (0 when its FLOPs are unknown).
    pub flop_rate: f64,
    /// Whether the op can use TensorCores (device ops on GPUs, from its kernels).
    pub is_op_tensorcore_eligible: bool,
    /// Whether any of its kernels used TensorCores.
    pub is_op_using_tensorcore: bool,
}

/// The run environment.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunEnvironment {
    /// Host names (one per profile file: XProf's tasks).
    pub hosts: Vec<String>,
    /// The distinct machines those hosts ran on (the XSpace `hostnames`; the host
    /// name where a profile has none). Several tasks can share one machine.
    pub machines: Vec<String>,
    /// `CPU`, or the GPU model: XProf's name from the compute capability (`Nvidia GPU
    /// (Hopper)`) on XSpace, the `gpu_device_name` plane stat on Kineto traces.
    pub device_type: String,
    /// Number of device cores (GPU planes); 0 on CPU-only profiles.
    pub device_core_count: usize,
    /// Whether a compiled program computes gradients (XProf's `is_training`), or a
    /// PyTorch trace records autograd's backward pass.
    pub is_training: bool,
}

/// The overview page.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Overview {
    /// The step-time analysis (shared with the input-pipeline analyzer).
    pub steps: InputPipelineAnalysis,
    /// Whether `top_ops` are device ops (else host ops, on CPU-only profiles).
    pub top_ops_on_device: bool,
    /// The 10 ops with the most self time.
    pub top_ops: Vec<TopOp>,
    /// Device compute in 16-bit precision (% of device compute).
    pub device_compute_16bit_percent: f64,
    /// Device compute in 32-bit precision (% of device compute).
    pub device_compute_32bit_percent: f64,
    /// Host TF op occurrences as % of all TF op occurrences.
    pub host_tf_op_percent: f64,
    /// Device TF op occurrences as % of all TF op occurrences.
    pub device_tf_op_percent: f64,
    /// Host op self time executed eagerly (%).
    pub host_op_time_eager_percent: f64,
    /// Device op self time executed eagerly (%).
    pub device_op_time_eager_percent: f64,
    /// The precision sentence (when less than 10 % of device compute is 16-bit).
    pub precision_statement: String,
    /// Where the program ran.
    pub run_environment: RunEnvironment,
}

/// Builds the overview from the step analysis, the combined host op metrics, the
/// device op metrics rolled up to TF ops (without IDLE) and the GPU kernels per op
/// (empty without GPUs).
pub fn analyze(
    steps: InputPipelineAnalysis,
    host_ops: &OpMetricsDb,
    device_tf_ops: &OpMetricsDb,
    kernels_by_op: &HashMap<&str, OpKernels>,
    precision_ps: (i64, i64),
    run_environment: RunEnvironment,
) -> Overview {
    let top_ops_on_device = !device_tf_ops.metrics.is_empty();
    let mut top_ops = if top_ops_on_device {
        top_ops(device_tf_ops, device_tf_ops.total_time_ps)
    } else {
        top_ops(host_ops, host_ops.total_op_time_ps)
    };
    if top_ops_on_device {
        for op in &mut top_ops {
            if let Some(kernels) = kernels_by_op.get(op.name.as_str()) {
                op.is_op_tensorcore_eligible = kernels.is_op_tensor_core_eligible;
                op.is_op_using_tensorcore = kernels.tensor_core_ns != 0;
            }
        }
    }
    let count = |db: &OpMetricsDb| db.metrics.iter().map(|m| m.occurrences).sum::<u64>();
    let eager = |db: &OpMetricsDb| {
        let (mut eager, mut total) = (0u64, 0u64);
        for m in db.metrics.iter().filter(|m| !m.is_idle()) {
            total += m.self_time_ps;
            if m.is_eager {
                eager += m.self_time_ps;
            }
        }
        percent(eager as f64, total as f64)
    };
    let (host_count, device_count) = (count(host_ops) as f64, count(device_tf_ops) as f64);
    let (c16, c32) = (precision_ps.0 as f64, precision_ps.1 as f64);
    let device_compute_16bit_percent = percent(c16, c16 + c32);
    let precision_statement = if c16 + c32 > 0.0 && device_compute_16bit_percent < 10.0 {
        format!(
            "Only {}% of device computation is 16 bit. So you might want to replace more 32-bit Ops by 16-bit Ops to improve performance (if the reduced accuracy is acceptable).",
            one_digit(device_compute_16bit_percent)
        )
    } else {
        String::new()
    };
    Overview {
        top_ops_on_device,
        top_ops,
        device_compute_16bit_percent,
        device_compute_32bit_percent: percent(c32, c16 + c32),
        host_tf_op_percent: percent(host_count, host_count + device_count),
        device_tf_op_percent: percent(device_count, host_count + device_count),
        host_op_time_eager_percent: eager(host_ops),
        device_op_time_eager_percent: eager(device_tf_ops),
        precision_statement,
        run_environment,
        steps,
    }
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole == 0.0 { 0.0 } else { 100.0 * part / whole }
}

fn top_ops(db: &OpMetricsDb, total_ps: u64) -> Vec<TopOp> {
    let mut ops: Vec<&OpMetrics> = db.metrics.iter().filter(|m| !m.is_idle()).collect();
    ops.sort_by(|a, b| b.self_time_ps.cmp(&a.self_time_ps).then_with(|| a.name.cmp(&b.name)));
    let mut cumulative = 0.0;
    ops.into_iter()
        .take(10)
        .map(|m| {
            let fraction = if total_ps == 0 { 0.0 } else { m.self_time_ps as f64 / total_ps as f64 };
            cumulative += fraction;
            TopOp {
                name: m.name.clone(),
                category: m.category.clone(),
                self_time_fraction: fraction,
                cumulative_time_fraction: cumulative,
                self_time_ps: m.self_time_ps,
                // XProf: FLOPs per nanosecond of the op's time.
                flop_rate: if m.time_ps == 0 { 0.0 } else { m.flops as f64 / (m.time_ps as f64 / 1e3) },
                is_op_tensorcore_eligible: false,
                is_op_using_tensorcore: false,
            }
        })
        .collect()
}

fn format_percent(value: f64) -> String {
    if value >= 0.0 { format!("{value:.1}%") } else { "unknown".into() }
}

/// XProf's `inference_latency` table: its columns only (training profiles have no
/// latency percentiles).
fn inference_latency_table() -> DataTable {
    DataTable::with_columns(&[
        ("percentile", "percentile", "string"),
        ("hostTimeMs", "Host time (in ms)", "number"),
        ("deviceTimeMs", "Device time (in ms)", "number"),
        ("communicationTimeMs", "Host-device communication time (in ms)", "number"),
        ("totalTimeMs", "Total latency (in ms)", "number"),
    ])
}

impl Overview {
    fn hardware_name(&self) -> &str {
        &self.steps.hardware_type
    }

    /// XProf's `overview_page` JSON: `[analysis, steptime, run_environment,
    /// recommendation, inference_latency, {}, diagnostics]`.
    pub fn to_xprof_json(&self) -> Value {
        json!([
            self.analysis_table().to_json(),
            self.steps.step_time_table(),
            self.run_environment_table().to_json(),
            self.recommendation_table().to_json(),
            inference_latency_table().to_json(),
            {},
            self.steps.diagnostics_table()
        ])
    }

    /// XProf's `analysis` table: the top ops and the summary percentages.
    fn analysis_table(&self) -> DataTable {
        // XProf renders GPU profiles with its generic table (TensorCore columns,
        // precision), everything else with the TPU-style table (duty cycle, roofline).
        let on_gpu = self.run_environment.device_type.contains("GPU");
        let mut analysis = DataTable::new();
        analysis.column("selfTimePercent", "Time (%)", "number");
        analysis.column("cumulativeTimePercent", "Cumulative time (%)", "number");
        analysis.column("category", "Category", "string");
        analysis.column("operation", "Operation", "string");
        if on_gpu {
            analysis.column("flopRate", "GFLOPs/Sec", "number");
            analysis.column("tcEligibility", "TensorCore eligibility", "boolean");
            analysis.column("tcUtilization", "Op is using TensorCore", "boolean");
        } else {
            analysis.column("flopRate", "Bf16 Normalized Flop Rate(GFLOPs/Sec)", "number");
        }
        if self.top_ops_on_device {
            for op in &self.top_ops {
                let mut row = vec![
                    json!(op.self_time_fraction),
                    json!(op.cumulative_time_fraction),
                    json!(op.category),
                    json!(op.name),
                    json!(op.flop_rate),
                ];
                if on_gpu {
                    row.extend([json!(op.is_op_tensorcore_eligible), json!(op.is_op_using_tensorcore)]);
                }
                analysis.row(row);
            }
        }
        if on_gpu {
            analysis.property("device_compute_16bit_percent", format_percent(self.device_compute_16bit_percent));
            analysis.property("device_compute_32bit_percent", format_percent(self.device_compute_32bit_percent));
        } else {
            for key in [
                "device_duty_cycle_high_confidence_percent",
                "device_duty_cycle_percent",
                "device_idle_time_percent",
                "flop_rate_utilization_relative_to_roofline",
                "memory_bw_utilization_relative_to_hw_limit",
                "host_idle_time_percent",
            ] {
                analysis.property(key, "0.0%");
            }
        }
        for key in ["mxu_utilization_percent", "hbm_utilization_percent"] {
            analysis.property(key, "0.0%");
        }
        analysis.property("host_trace_level", "0");
        analysis.property("host_tf_op_percent", format_percent(self.host_tf_op_percent));
        analysis.property("device_tf_op_percent", format_percent(self.device_tf_op_percent));
        analysis.property("host_op_time_eager_percent", format_percent(self.host_op_time_eager_percent));
        analysis.property("device_op_time_eager_percent", format_percent(self.device_op_time_eager_percent));
        analysis.property("remark_text", "");
        analysis.property("remark_color", "");
        analysis
    }

    /// XProf's `run_environment` table: hosts, tasks and devices.
    fn run_environment_table(&self) -> DataTable {
        let env = &self.run_environment;
        let mut run_env = DataTable::new();
        for id in ["host_id", "command_line", "start_time", "bns_address"] {
            run_env.column(id, id, "string");
        }
        // XProf: host_count counts machines, task_count profiles (integer ratio).
        let (machines, tasks) = (env.machines.len(), env.hosts.len());
        run_env.property("host_count", machines.to_string());
        let task_count = match tasks.checked_div(machines) {
            Some(per_machine) if tasks > 0 => format!("{tasks} (num tasks per host = {per_machine})"),
            _ => tasks.to_string(),
        };
        run_env.property("task_count", task_count);
        run_env.property("device_type", env.device_type.clone());
        run_env.property("device_core_count", env.device_core_count.to_string());
        run_env.property("is_training", env.is_training.to_string());
        run_env
    }

    /// XProf's `recommendation` table: the next-step tips and the bottleneck statements.
    fn recommendation_table(&self) -> DataTable {
        let b = &self.steps.bottleneck;
        let mut recommendation = DataTable::new();
        for id in ["tip_type", "link", "description"] {
            recommendation.column(id, id, "string");
        }
        let device = self.hardware_name();
        let tips = [
            ("faq", "Refer to the TF2 Profiler FAQ".to_string(), "Tool troubleshooting / FAQ"),
            ("host", "input_pipeline_analyzer (especially Section 3 for the breakdown of input operations on the Host)".to_string(), "Next steps for reducing the Host time"),
            ("host", "trace_viewer (look at the activities on the timeline of each Host Thread near the bottom of the trace view)".to_string(), "Next steps for reducing the Host time"),
            ("device", format!("framework_op_stats (identify the time-consuming operations executed on the {device})"), "Next steps for reducing the Device time"),
            ("device", format!("trace_viewer (look at the activities on the timeline of each {device} in the trace view)"), "Next steps for reducing the Device time"),
            ("doc", "<a href=\"https://www.tensorflow.org/guide/data_performance_analysis\" target=\"_blank\">Analyze tf.data performance with the TF Profiler</a>".to_string(), "Other useful resources"),
            ("doc", "<a href=\"https://www.tensorflow.org/guide/data_performance\" target=\"_blank\">Better performance with the tf.data API</a>".to_string(), "Other useful resources"),
        ];
        for (kind, link, description) in tips {
            recommendation.row(vec![json!(kind), json!(link), json!(description)]);
        }
        recommendation.property("bottleneck", b.input_classification.clone());
        recommendation.property("statement", b.input_statement.clone());
        recommendation.property("kernel_launch_bottleneck", b.kernel_launch_classification.clone());
        recommendation.property("kernel_launch_statement", b.kernel_launch_statement.clone());
        recommendation.property("all_other_bottleneck", b.all_other_classification.clone());
        recommendation.property("all_other_statement", b.all_other_statement.clone());
        recommendation.property("precision_statement", self.precision_statement.clone());
        recommendation.property("device_collectives_bottleneck", b.device_collectives_classification.clone());
        recommendation.property("device_collectives_statement", b.device_collectives_statement.clone());
        let non_bottleneck = match b.input_classification.as_str() {
            "host" => "device",
            "device" => "host",
            _ => "",
        };
        recommendation.property("non_bottleneck_tip_types", non_bottleneck);
        recommendation
    }

    /// The overview laid out for people.
    pub fn report(&self) -> Report {
        let s = &self.steps;
        let next = Section::new("Recommendation for next step").note(&s.next_step);
        Report {
            tool: "overview_page".into(),
            sections: vec![
                self.summary_section(),
                step_section(s),
                self.top_ops_section(),
                self.run_environment_section(),
                next,
            ],
        }
    }

    /// The performance summary: step time, bottleneck statements, warnings, device
    /// compute precision and the average time per step-time category.
    fn summary_section(&self) -> Section {
        let s = &self.steps;
        let mut summary = Section::new("Performance summary")
            .note(format!(
                "Average step time: {} (standard deviation {}) over {}{}{}. {}",
                mlprof_model::human::duration_ms(s.step_time_ms.average),
                mlprof_model::human::duration_ms(s.step_time_ms.standard_deviation),
                mlprof_model::human::counted(s.steps.len(), "step", "steps"),
                crate::input_pipeline::which_steps_in_brackets(&s.steps),
                if s.steps.is_empty() { "" } else { "; `--tool steps` lists every step and which ones are left out" },
                s.step_source
            ))
            .note(s.bottleneck.input_statement.clone());
        for text in
            [&s.bottleneck.kernel_launch_statement, &s.bottleneck.all_other_statement, &self.precision_statement]
        {
            if !text.is_empty() {
                summary = summary.note(text.clone());
            }
        }
        for warning in &s.warnings {
            summary = summary.note(warning.clone());
        }
        // Only where a device computed: on a CPU profile both shares are 0 and say nothing.
        if self.device_compute_16bit_percent + self.device_compute_32bit_percent > 0.0 {
            summary = summary.note(format!(
                "Device compute precision: {:.1}% 16-bit, {:.1}% 32-bit.",
                self.device_compute_16bit_percent, self.device_compute_32bit_percent
            ));
        }
        summary.with_table(self.category_averages_table())
    }

    /// Average and standard deviation of each step-time category (ms).
    fn category_averages_table(&self) -> Table {
        let s = &self.steps;
        let mut averages = Table::new(["Category", "Average (ms)", "Standard deviation (ms)"]);
        for (id, label) in crate::input_pipeline::CATEGORY_LABELS {
            let summary = s.category_ms.iter().find(|(k, _)| k == id).map(|(_, v)| *v).unwrap_or_default();
            averages.push(vec![
                Cell::text(label),
                Cell::num(summary.average, 3),
                Cell::num(summary.standard_deviation, 3),
            ]);
        }
        averages
    }

    /// The top 10 ops (device ops, or host ops on CPU-only profiles).
    fn top_ops_section(&self) -> Section {
        // GPU device ops also show their FLOP rate and TensorCore use, as XProf's table.
        let gpu_columns = self.top_ops_on_device && self.run_environment.device_type.contains("GPU");
        let mut columns = vec!["Self time (%)", "Cumulative (%)", "Type", "Operation"];
        if gpu_columns {
            columns.extend(["GFLOP/s", "TensorCore eligible", "Uses TensorCore"]);
        }
        let mut ops = Table::new(columns);
        let yes_no = |flag: bool| Cell::text(if flag { "yes" } else { "no" });
        for op in &self.top_ops {
            let mut row = vec![
                Cell::num(100.0 * op.self_time_fraction, 1),
                Cell::num(100.0 * op.cumulative_time_fraction, 1),
                Cell::text(&op.category),
                Cell::text(&op.name),
            ];
            if gpu_columns {
                row.extend([
                    // No FLOP count for the op (PyTorch records none unless asked) is no rate.
                    if op.flop_rate > 0.0 { Cell::num(op.flop_rate, 2) } else { Cell::missing() },
                    yes_no(op.is_op_tensorcore_eligible),
                    yes_no(op.is_op_using_tensorcore),
                ]);
            }
            ops.push(row);
        }
        let title = if self.top_ops_on_device {
            "Top 10 device ops"
        } else if self.run_environment.device_core_count > 0 {
            // A device recorded no op inside a step (no steps, or no device work in them).
            "Top 10 host ops (no device op in the steps)"
        } else {
            "Top 10 host ops (no device in this profile)"
        };
        Section::new(title).with_table(ops)
    }

    /// Hosts, device type and device cores.
    fn run_environment_section(&self) -> Section {
        let env = &self.run_environment;
        let hosts = match env.hosts.len() {
            1 => format!("1 host: {}", env.hosts.join(", ")),
            n => format!("{n} hosts: {}", env.hosts.join(", ")),
        };
        let devices = match env.device_core_count {
            0 => "CPU only (no accelerator in this profile)".to_string(),
            1 => format!("1 {} device", env.device_type),
            n => format!("{n} {} devices", env.device_type),
        };
        Section::new("Run environment").note(format!("{hosts}; {devices}."))
    }
}
