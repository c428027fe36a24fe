//! The tools, in one place: [`ToolId`] names every tool, [`ToolId::spec`] describes it
//! (options, outputs, when a profile has data for it), [`Analysis::run`] runs it on an
//! analysis's hosts with typed [`Options`], and [`ToolResult`] is what every tool
//! returns. The CLI and the web API only turn their inputs into `(ToolId, Options)`
//! and render a `ToolResult`.
//!
//! Adding a tool: write its module (a function from an [`Analysis`] or from hosts to a
//! result with a `report()`), then add it here — a `ToolId` variant, its spec, its
//! `ToolResult` variant and one arm in each `match` below. The CLI, the API, the page
//! selector and the generic report page pick it up from the spec.

mod options;
mod shared;
pub mod spec;

use serde::Serialize;
use serde_json::Value;

pub use options::{ANALYSES_OPTION, BREAKDOWN, GAP_THRESHOLD, Options, TFPROF_OPTIONS};
pub use shared::Analysis;
use spec::{Availability, Output, ToolSpec};

use crate::gpu::hta_csv::{self, CsvFile};
use crate::gpu::transfers::{self, Transfers};
use crate::gpu::{self, GpuAnalysis};
use crate::python_code::{self, PythonCode};
use crate::report::Report;
use crate::step_table::{self, StepTable};
use crate::tfprof::{self, TfprofResult};
use crate::{framework_op_stats, input_pipeline, kernel_stats, memory_profile, overview, pod_viewer, tf_data};

/// Every tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolId {
    /// XProf's overview page.
    OverviewPage,
    /// XProf's input-pipeline analyzer.
    InputPipelineAnalyzer,
    /// XProf's framework op stats.
    FrameworkOpStats,
    /// XProf's kernel stats.
    KernelStats,
    /// XProf's memory profile.
    MemoryProfile,
    /// XProf's pod viewer.
    PodViewer,
    /// XProf's tf.data bottleneck analysis.
    TfDataBottleneckAnalysis,
    /// HTA's GPU analyses.
    Gpu,
    /// The transfer and synchronisation diagnosis.
    Transfers,
    /// tfprof's scope, op, code and graph views.
    Tfprof,
    /// The trace viewer (a page of its own).
    TraceViewer,
    /// Every step with its time and breakdown.
    Steps,
    /// Where Python time goes, by line of code, from sampled stacks.
    Python,
}

/// The outputs of XProf's tools.
const XPROF_OUTPUTS: &[Output] = &[Output::Report, Output::Json, Output::XprofJson];
/// The outputs of a tool with a report and a typed result.
const REPORT_OUTPUTS: &[Output] = &[Output::Report, Output::Json];

/// An XProf tool's spec.
const fn xprof_tool(name: &'static str, label: &'static str, summary: &'static str) -> ToolSpec {
    ToolSpec {
        name,
        label,
        summary,
        xprof: true,
        options: &[],
        outputs: XPROF_OUTPUTS,
        unsortable: None,
        availability: Availability::Always,
        served: true,
    }
}

/// One of mlprof's own tools' spec: a report and JSON, every profile, served.
const fn mlprof_tool(name: &'static str, label: &'static str, summary: &'static str) -> ToolSpec {
    ToolSpec { xprof: false, outputs: REPORT_OUTPUTS, ..xprof_tool(name, label, summary) }
}

impl ToolId {
    /// Every tool, in the order pages list them: XProf's, then mlprof's.
    pub const ALL: [ToolId; 13] = [
        ToolId::OverviewPage,
        ToolId::InputPipelineAnalyzer,
        ToolId::FrameworkOpStats,
        ToolId::KernelStats,
        ToolId::MemoryProfile,
        ToolId::PodViewer,
        ToolId::TfDataBottleneckAnalysis,
        ToolId::Gpu,
        ToolId::Transfers,
        ToolId::Steps,
        ToolId::Python,
        ToolId::TraceViewer,
        ToolId::Tfprof,
    ];

    /// The tool's description.
    pub fn spec(self) -> ToolSpec {
        const STEP_TOOL_OPTIONS: &[spec::OptionSpec] = &[BREAKDOWN];
        match self {
            ToolId::OverviewPage => ToolSpec {
                options: STEP_TOOL_OPTIONS,
                ..xprof_tool("overview_page", "Overview", "Step time, its breakdown, the top ops and what to do next.")
            },
            ToolId::InputPipelineAnalyzer => ToolSpec {
                options: STEP_TOOL_OPTIONS,
                ..xprof_tool(
                    "input_pipeline_analyzer",
                    "Input pipeline analyzer",
                    "Whether the job is input-bound, per step, and which input ops cost most.",
                )
            },
            ToolId::FrameworkOpStats => {
                xprof_tool("framework_op_stats", "Framework op stats", "Time per framework op, on host and device.")
            }
            ToolId::KernelStats => ToolSpec {
                availability: Availability::GpuEvents,
                ..xprof_tool("kernel_stats", "Kernel stats", "Time per GPU kernel, with occupancy and TensorCore use.")
            },
            ToolId::MemoryProfile => ToolSpec {
                availability: Availability::AllocatorRecords(|name| {
                    matches!(name, "MemoryAllocation" | "MemoryDeallocation" | crate::kineto::MEMORY_EVENT)
                }),
                ..xprof_tool(
                    "memory_profile",
                    "Memory profile",
                    "Memory use over time up to the peak, and what was live at it.",
                )
            },
            ToolId::PodViewer => ToolSpec {
                options: STEP_TOOL_OPTIONS,
                ..xprof_tool("pod_viewer", "Pod viewer", "Each host's step time and breakdown, side by side.")
            },
            ToolId::TfDataBottleneckAnalysis => ToolSpec {
                availability: Availability::HostEvents(|name| name.starts_with("Iterator::")),
                ..xprof_tool(
                    "tf_data_bottleneck_analysis",
                    "tf.data bottleneck analysis",
                    "The slowest tf.data pipeline and its bottleneck stage.",
                )
            },
            ToolId::Gpu => ToolSpec {
                options: &[options::ANALYSES_OPTION],
                outputs: &[Output::Report, Output::Json, Output::HtaCsv],
                availability: Availability::KinetoGpuEvents,
                ..mlprof_tool(
                    "gpu",
                    "GPU analyses (HTA)",
                    "HTA's GPU analyses: temporal and idle-time breakdowns, kernels, overlap, launches, queues, memory bandwidth.",
                )
            },
            ToolId::Transfers => ToolSpec {
                options: &[GAP_THRESHOLD],
                availability: Availability::GpuEvents,
                ..mlprof_tool(
                    "transfers",
                    "Transfers and synchronisation",
                    "Copies and synchronisations ranked by time lost, with GPU gaps explained by the launching thread.",
                )
            },
            ToolId::Tfprof => ToolSpec {
                options: &TFPROF_OPTIONS,
                unsortable: Some("(its rows are a tree); use --order-by"),
                availability: Availability::Never,
                served: false,
                ..mlprof_tool("tfprof", "tfprof views", "tfprof's scope, op, code and graph views.")
            },
            ToolId::Steps => ToolSpec {
                options: STEP_TOOL_OPTIONS,
                ..mlprof_tool(
                    "steps",
                    "Steps",
                    "Every step with its start, time and breakdown, and whether the overview counts it.",
                )
            },
            ToolId::Python => ToolSpec {
                availability: Availability::Plane(mlprof_model::names::sampled::PYTHON_PLANE),
                ..mlprof_tool(
                    "python",
                    "Python code",
                    "Where Python time goes by line of code (self and total samples, per thread and step), from stacks sampled with mlprof run or attach.",
                )
            },
            ToolId::TraceViewer => ToolSpec {
                outputs: &[Output::Page],
                ..mlprof_tool("trace_viewer", "Trace viewer", "Every event on a timeline.")
            },
        }
    }

    /// The tool's name (`overview_page`).
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The tool called `name`.
    pub fn from_name(name: &str) -> Option<ToolId> {
        ToolId::ALL.into_iter().find(|tool| tool.name() == name)
    }

    /// The option called `key` if this tool takes it: one of its own, or, for one of
    /// XProf's tools, an option of any of them (they run as one analysis, as `--tool
    /// all` does, so `--breakdown` is accepted by `framework_op_stats` and changes
    /// nothing there).
    pub fn accepted_option(self, key: &str) -> Option<&'static spec::OptionSpec> {
        let spec = self.spec();
        spec.option(key).or_else(|| {
            if !spec.xprof {
                return None;
            }
            ToolId::xprof_tools().find_map(|tool| tool.spec().option(key))
        })
    }

    /// Whether the tool may read the hosts' step groups (the steps, or ops by step): all
    /// but the kernel statistics, the tf.data analysis, HTA's GPU analyses and the trace
    /// viewer, which read events alone, so they skip grouping (most of the work after
    /// decoding on a TensorFlow profile). Whether it does on given hosts:
    /// [`Analysis::reads_steps`].
    pub fn reads_steps(self) -> bool {
        !matches!(self, ToolId::KernelStats | ToolId::TfDataBottleneckAnalysis | ToolId::Gpu | ToolId::TraceViewer)
    }

    /// XProf's tools (what `--tool all` runs), in order.
    pub fn xprof_tools() -> impl Iterator<Item = ToolId> {
        ToolId::ALL.into_iter().filter(|tool| tool.spec().xprof)
    }
}

/// One tool's result.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum ToolResult {
    /// `overview_page`.
    Overview(Box<overview::Overview>),
    /// `input_pipeline_analyzer`.
    InputPipeline(Box<input_pipeline::InputPipelineAnalysis>),
    /// `framework_op_stats`.
    FrameworkOpStats(Box<framework_op_stats::FrameworkOpStats>),
    /// `kernel_stats`.
    KernelStats(Box<kernel_stats::KernelStats>),
    /// `memory_profile`, per host.
    MemoryProfile(Vec<HostMemoryProfile>),
    /// `pod_viewer`.
    PodViewer(Box<pod_viewer::PodViewer>),
    /// `tf_data_bottleneck_analysis`.
    TfData(Box<tf_data::TfDataAnalysis>),
    /// `gpu`.
    Gpu(Box<GpuAnalysis>),
    /// `transfers`.
    Transfers(Box<Transfers>),
    /// `tfprof`.
    Tfprof(Box<TfprofResult>),
    /// `steps`.
    Steps(Box<StepTable>),
    /// `python`.
    Python(Box<PythonCode>),
}

/// The memory profile of one host.
#[derive(Clone, Debug, Serialize)]
pub struct HostMemoryProfile {
    /// Host name.
    pub host: String,
    /// The profile.
    pub profile: memory_profile::MemoryProfile,
}

/// Why a tool gave no result, in one sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError {
    /// What went wrong.
    pub message: String,
    /// The profile was read but holds nothing the tool can use (rather than a request
    /// it cannot answer).
    pub nothing_usable: bool,
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl Analysis<'_> {
    /// Runs `tool` on this analysis's hosts with its options.
    pub fn run(&self, tool: ToolId) -> Result<ToolResult, ToolError> {
        self.timed(tool.name(), || self.run_untimed(tool))
    }

    fn run_untimed(&self, tool: ToolId) -> Result<ToolResult, ToolError> {
        let hosts = self.hosts();
        let options = self.options();
        if matches!(tool, ToolId::Gpu | ToolId::Transfers) && !hosts.iter().any(|host| host.has_gpu_events()) {
            return Err(ToolError { message: no_gpu_activity(tool), nothing_usable: true });
        }
        if self.reads_steps(tool) {
            // Grouped here, not first inside another shared result's initialiser,
            // where grouping hosts in parallel could deadlock (see `Analysis::per_host`).
            self.groups();
        }
        Ok(match tool {
            ToolId::OverviewPage => ToolResult::Overview(Box::new(self.overview())),
            ToolId::InputPipelineAnalyzer => ToolResult::InputPipeline(Box::new(self.input_pipeline())),
            ToolId::FrameworkOpStats => ToolResult::FrameworkOpStats(Box::new(framework_op_stats::from_dbs(
                hosts,
                self.host_ops(),
                self.device_ops(),
                self.kernel_stats(),
            ))),
            ToolId::KernelStats => ToolResult::KernelStats(Box::new(self.kernel_stats().clone())),
            ToolId::MemoryProfile => ToolResult::MemoryProfile(
                hosts
                    .iter()
                    .enumerate()
                    .map(|(at, host)| HostMemoryProfile {
                        host: host.name.clone(),
                        profile: memory_profile::analyze(host, &|| &self.groups()[at]),
                    })
                    .collect(),
            ),
            ToolId::PodViewer => ToolResult::PodViewer(Box::new(pod_viewer::analyze(
                &self.combined_steps(false),
                &self.machines(),
                &self.run_environment().device_type,
            ))),
            ToolId::TfDataBottleneckAnalysis => ToolResult::TfData(Box::new(tf_data::analyze(hosts))),
            ToolId::Gpu => ToolResult::Gpu(Box::new(gpu::analyze(hosts, &options.gpu_analyses))),
            ToolId::Transfers => {
                let steps: Vec<u64> = self.host_steps().iter().map(|h| h.steps.len() as u64).collect();
                ToolResult::Transfers(Box::new(transfers::analyze_with_steps(hosts, &steps, options.transfers)))
            }
            ToolId::Tfprof => {
                let pairs: Vec<_> = hosts.iter().copied().zip(self.groups()).collect();
                let result = tfprof::analyze(&pairs, &options.tfprof)
                    .map_err(|e| ToolError { nothing_usable: e.nothing_usable, message: e.to_string() })?;
                ToolResult::Tfprof(Box::new(result))
            }
            ToolId::Steps => ToolResult::Steps(Box::new(step_table::analyze(self.host_steps(), self.step_source()))),
            ToolId::Python => ToolResult::Python(Box::new(
                python_code::analyze(self.all_hosts(), hosts, self.host_steps())
                    .ok_or_else(|| ToolError { message: python_code::NO_SAMPLES.into(), nothing_usable: true })?,
            )),
            ToolId::TraceViewer => {
                return Err(ToolError {
                    message:
                        "trace_viewer has no report; the trace viewer reads /api/trace/meta, view, event and search"
                            .into(),
                    nothing_usable: false,
                });
            }
        })
    }
}

/// Why `tool`, a GPU tool, has nothing to analyse, and how to record what it reads.
fn no_gpu_activity(tool: ToolId) -> String {
    format!(
        "{}: no GPU activity in this profile (no kernel, copy or memset on a /device:GPU:N plane); record one \
         with the GPU traced (PyTorch: ProfilerActivity.CUDA; JAX and TensorFlow: a run on a GPU; \
         `mlprof run`: on a machine with an NVIDIA driver)",
        tool.name()
    )
}

impl ToolResult {
    /// The result laid out for people.
    pub fn report(&self) -> Report {
        match self {
            ToolResult::Overview(r) => r.report(),
            ToolResult::InputPipeline(r) => r.report(),
            ToolResult::FrameworkOpStats(r) => r.report(),
            ToolResult::KernelStats(r) => r.report(),
            ToolResult::MemoryProfile(hosts) => memory_report(hosts),
            ToolResult::PodViewer(r) => r.report(),
            ToolResult::TfData(r) => r.report(),
            ToolResult::Gpu(r) => r.report(),
            ToolResult::Transfers(r) => r.report(),
            ToolResult::Tfprof(r) => r.report(),
            ToolResult::Steps(r) => r.report(),
            ToolResult::Python(r) => r.report(),
        }
    }

    /// The result as XProf's tool endpoint renders it (memory profile: first host);
    /// `None` for a tool XProf does not have.
    pub fn to_xprof_json(&self) -> Option<Value> {
        Some(match self {
            ToolResult::Overview(r) => r.to_xprof_json(),
            ToolResult::InputPipeline(r) => r.to_xprof_json(),
            ToolResult::FrameworkOpStats(r) => r.to_xprof_json(),
            ToolResult::KernelStats(r) => r.to_xprof_json(),
            ToolResult::MemoryProfile(hosts) => hosts.first().map_or(Value::Null, |h| h.profile.to_xprof_json()),
            ToolResult::PodViewer(r) => r.to_xprof_json(),
            ToolResult::TfData(r) => r.to_xprof_json(),
            ToolResult::Gpu(_)
            | ToolResult::Transfers(_)
            | ToolResult::Tfprof(_)
            | ToolResult::Steps(_)
            | ToolResult::Python(_) => {
                return None;
            }
        })
    }

    /// The result as HTA writes it, one CSV per analysis; `None` for a tool HTA does
    /// not have.
    pub fn hta_csv_files(&self) -> Option<Vec<CsvFile>> {
        match self {
            ToolResult::Gpu(r) => Some(hta_csv::files(r)),
            _ => None,
        }
    }
}

/// The memory profiles of several hosts as one report, sections titled by host when
/// there is more than one.
fn memory_report(hosts: &[HostMemoryProfile]) -> Report {
    let mut report = Report { tool: "memory_profile".into(), sections: Vec::new() };
    for host in hosts {
        for mut section in host.profile.report().sections {
            if hosts.len() > 1 {
                section.title = format!("{} — {}", host.host, section.title);
            }
            report.sections.push(section);
        }
    }
    report
}
