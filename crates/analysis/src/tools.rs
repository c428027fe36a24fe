//! Running the XProf tools on a set of hosts: one entry point per tool name, shared
//! grouping and step databases, and one result type the views render.
//!
//! The one design decision to know: grouping runs once per host and is shared by all
//! tools; `xprof_compatible` switches off everything mlprof does beyond XProf (the
//! `step_num` step fallback, the classic GPU breakdown) so results can be compared
//! with XProf's output.

use std::sync::OnceLock;

use rayon::prelude::*;

use mlprof_model::{Host, names};
use serde::Serialize;
use serde_json::Value;

use crate::grouping::{HostGroups, StepSource, group_host, group_host_as_xprof};
use crate::hlo::HloModules;
use crate::op_metrics::{self, OpMetricsDb};
use crate::report::Report;
use crate::steps::{Breakdown, CombinedSteps, HostSteps, StepOptions, combine_hosts, host_steps};
use crate::{framework_op_stats, input_pipeline, kernel_stats, memory_profile, overview, pod_viewer, tf_data, xstats};

/// The tools, by their XProf names.
pub const TOOL_NAMES: [&str; 7] = [
    "overview_page",
    "input_pipeline_analyzer",
    "framework_op_stats",
    "kernel_stats",
    "memory_profile",
    "pod_viewer",
    "tf_data_bottleneck_analysis",
];

/// Options shared by the tools.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ToolOptions {
    /// The GPU step-time breakdown.
    pub breakdown: Breakdown,
    /// Compute exactly what XProf computes (no `step_num` fallback; implies the
    /// `xprof` breakdown).
    pub xprof_compatible: bool,
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
}

/// The memory profile of one host.
#[derive(Clone, Debug, Serialize)]
pub struct HostMemoryProfile {
    /// Host name.
    pub host: String,
    /// The profile.
    pub profile: memory_profile::MemoryProfile,
}

impl ToolResult {
    /// The result laid out for people.
    pub fn report(&self) -> Report {
        match self {
            ToolResult::Overview(r) => r.report(),
            ToolResult::InputPipeline(r) => r.report(),
            ToolResult::FrameworkOpStats(r) => r.report(),
            ToolResult::KernelStats(r) => r.report(),
            ToolResult::MemoryProfile(hosts) => {
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
            ToolResult::PodViewer(r) => r.report(),
            ToolResult::TfData(r) => r.report(),
        }
    }

    /// The result as XProf's tool endpoint renders it (memory profile: first host).
    pub fn to_xprof_json(&self) -> Value {
        match self {
            ToolResult::Overview(r) => r.to_xprof_json(),
            ToolResult::InputPipeline(r) => r.to_xprof_json(),
            ToolResult::FrameworkOpStats(r) => r.to_xprof_json(),
            ToolResult::KernelStats(r) => r.to_xprof_json(),
            ToolResult::MemoryProfile(hosts) => hosts.first().map_or(Value::Null, |h| h.profile.to_xprof_json()),
            ToolResult::PodViewer(r) => r.to_xprof_json(),
            ToolResult::TfData(r) => r.to_xprof_json(),
        }
    }
}

/// The hosts of one analysis with their groups, computed once, and the step
/// databases, op metrics and kernel statistics the tools share, computed on first use.
pub struct Analysis<'h> {
    hosts: Vec<&'h Host>,
    groups: Vec<HostGroups>,
    options: ToolOptions,
    host_steps: OnceLock<Vec<HostSteps>>,
    host_ops: OnceLock<OpMetricsDb>,
    device_ops: OnceLock<Vec<OpMetricsDb>>,
    kernel_stats: OnceLock<kernel_stats::KernelStats>,
    programs: OnceLock<Vec<HloModules>>,
}

impl<'h> Analysis<'h> {
    /// Groups every host (hosts in parallel: grouping is per host).
    pub fn new(hosts: Vec<&'h Host>, options: ToolOptions) -> Analysis<'h> {
        let group = |host: &&Host| if options.xprof_compatible { group_host_as_xprof(host) } else { group_host(host) };
        let groups =
            if hosts.len() > 1 { hosts.par_iter().map(group).collect() } else { hosts.iter().map(group).collect() };
        Analysis {
            hosts,
            groups,
            options,
            host_steps: OnceLock::new(),
            host_ops: OnceLock::new(),
            device_ops: OnceLock::new(),
            kernel_stats: OnceLock::new(),
            programs: OnceLock::new(),
        }
    }

    /// `f` of every host with its groups, in host order. Sequential on purpose: it runs
    /// inside the `OnceLock` initialisers of the shared databases, and a rayon job there
    /// could let the initialising thread steal another tool that waits on the same
    /// lock, which would deadlock. The tools themselves run in parallel.
    fn per_host<T>(&self, f: impl Fn(&Host, &HostGroups) -> T) -> Vec<T> {
        self.hosts.iter().zip(&self.groups).map(|(host, groups)| f(host, groups)).collect()
    }

    /// Runs the tools named `names`, results in the order of `names` (`None` for an
    /// unknown name). With more than one rayon thread the tools run in parallel: tools
    /// that share the step databases or the host op metrics wait for the one that
    /// computes them. With one thread they run in order on the calling thread (no
    /// second allocator arena, so one core also means the least memory).
    pub fn run_all(&self, names: &[&str]) -> Vec<Option<ToolResult>> {
        if rayon::current_num_threads() <= 1 {
            return names.iter().map(|name| self.run(name)).collect();
        }
        // The step databases and the host op metrics feed several tools: build them
        // side by side first rather than one after the other inside the first tool.
        let needs = |tools: &[&str]| names.iter().any(|name| tools.contains(name));
        rayon::join(
            || needs(&["overview_page", "input_pipeline_analyzer", "pod_viewer"]).then(|| self.host_steps()),
            || needs(&["overview_page", "input_pipeline_analyzer", "framework_op_stats"]).then(|| self.host_ops()),
        );
        names.par_iter().map(|name| self.run(name)).collect()
    }

    fn breakdown(&self) -> Breakdown {
        if self.options.xprof_compatible { Breakdown::Xprof } else { self.options.breakdown }
    }

    /// Every host's steps, with none dropped.
    fn host_steps(&self) -> &[HostSteps] {
        self.host_steps.get_or_init(|| {
            let options = StepOptions { breakdown: self.breakdown(), drop_incomplete_steps: false };
            self.per_host(|host, groups| host_steps(host, groups, options))
        })
    }

    /// The hosts' steps aligned across hosts; `drop_incomplete_steps` as XProf's
    /// overview and input-pipeline pages do, not its pod viewer.
    fn combined_steps(&self, drop_incomplete_steps: bool) -> CombinedSteps {
        if !drop_incomplete_steps {
            return combine_hosts(self.host_steps());
        }
        let mut per_host = self.host_steps().to_vec();
        per_host.iter_mut().for_each(HostSteps::drop_incomplete_steps);
        combine_hosts(&per_host)
    }

    fn step_source(&self) -> String {
        let sources: Vec<&StepSource> = self.groups.iter().map(|g| &g.source).collect();
        let breakdown = match self.breakdown() {
            Breakdown::Classic => "classic breakdown (host events included on GPU profiles)",
            Breakdown::Xprof => "XProf breakdown (device events only on GPU profiles)",
        };
        let first = sources.first().map(|s| s.describe()).unwrap_or_else(|| "No hosts.".into());
        if sources.iter().all(|s| matches!(s, StepSource::ProfilerSteps { .. })) {
            return format!("{first} Breakdown: each step's span, host and device events by time.");
        }
        format!("{first} Breakdown: {breakdown}.")
    }

    /// The host op metrics of all hosts, combined.
    fn host_ops(&self) -> &OpMetricsDb {
        self.host_ops.get_or_init(|| {
            let dbs = self.per_host(op_metrics::host_op_metrics_db);
            op_metrics::combine_dbs(&dbs, false)
        })
    }

    /// Each host's device op metrics, in host order.
    fn device_ops(&self) -> &[OpMetricsDb] {
        // Sequential, as `per_host`: this runs inside a `OnceLock` initialiser.
        self.device_ops.get_or_init(|| {
            let hosts = self.hosts.iter().zip(&self.groups).zip(self.programs());
            hosts
                .map(|((host, groups), programs)| op_metrics::device_op_metrics_db_with(host, groups, programs))
                .collect()
        })
    }

    /// Each host's compiled XLA programs, decoded once for the device op metrics and
    /// the kernel statistics (none for hosts without XLA GPU kernels).
    fn programs(&self) -> &[HloModules] {
        self.programs.get_or_init(|| self.hosts.iter().map(|host| HloModules::for_gpu_kernels(host)).collect())
    }

    /// The kernel statistics of all hosts (the kernel_stats tool; the TensorCore columns
    /// of the overview and framework op stats).
    fn kernel_stats(&self) -> &kernel_stats::KernelStats {
        self.kernel_stats.get_or_init(|| kernel_stats::analyze_with(&self.hosts, self.programs()))
    }

    fn input_pipeline(&self) -> input_pipeline::InputPipelineAnalysis {
        let mut result = input_pipeline::analyze(&self.combined_steps(true), self.host_ops(), self.step_source());
        input_pipeline::add_dataloader_analysis(&mut result, &self.hosts);
        result
    }

    /// Runs the tool named `name` (one of [`TOOL_NAMES`]); `None` for an unknown name.
    pub fn run(&self, name: &str) -> Option<ToolResult> {
        let pairs: Vec<(&Host, &HostGroups)> = self.hosts.iter().copied().zip(&self.groups).collect();
        Some(match name {
            "overview_page" => ToolResult::Overview(Box::new(self.overview())),
            "input_pipeline_analyzer" => ToolResult::InputPipeline(Box::new(self.input_pipeline())),
            "framework_op_stats" => ToolResult::FrameworkOpStats(Box::new(framework_op_stats::from_dbs(
                &self.hosts,
                self.host_ops(),
                self.device_ops(),
                self.kernel_stats(),
            ))),
            "kernel_stats" => ToolResult::KernelStats(Box::new(self.kernel_stats().clone())),
            "memory_profile" => ToolResult::MemoryProfile(
                pairs
                    .iter()
                    .map(|(host, groups)| HostMemoryProfile {
                        host: host.name.clone(),
                        profile: memory_profile::analyze(host, groups),
                    })
                    .collect(),
            ),
            "pod_viewer" => ToolResult::PodViewer(Box::new(pod_viewer::analyze(
                &self.combined_steps(false),
                &self.machines(),
                &self.run_environment().device_type,
            ))),
            "tf_data_bottleneck_analysis" => ToolResult::TfData(Box::new(tf_data::analyze(&self.hosts))),
            _ => return None,
        })
    }

    fn overview(&self) -> overview::Overview {
        let precision =
            self.host_steps().iter().fold((0, 0), |acc, h| (acc.0 + h.compute_16bit_ps, acc.1 + h.compute_32bit_ps));
        let host_ops = self.host_ops();
        let steps = self.input_pipeline();
        let device_dbs: Vec<OpMetricsDb> =
            self.device_ops().iter().map(|db| op_metrics::tf_metrics_db_from_device(db, false)).collect();
        let device_tf_ops = op_metrics::combine_dbs(&device_dbs, false);
        let kernels_by_op = self.kernel_stats().by_op();
        overview::analyze(steps, host_ops, &device_tf_ops, &kernels_by_op, precision, self.run_environment())
    }

    /// Per host, the machine it ran on: the XSpace's first hostname, as XProf takes
    /// it, or the host name where the profile names none.
    fn machines(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.hostnames.first().unwrap_or(&h.name).clone()).collect()
    }

    fn run_environment(&self) -> overview::RunEnvironment {
        // Kineto traces list every GPU of the machine in `deviceProperties`: count the
        // ones the job used, and name them as the trace does.
        let kineto_host = self.hosts.iter().all(|h| crate::kineto::is_kineto(h));
        let gpu_planes: Vec<_> = self
            .hosts
            .iter()
            .flat_map(|h| h.planes.iter())
            .filter(|p| p.is_gpu())
            .filter(|p| !kineto_host || p.lines.iter().any(|line| !line.is_empty()))
            .collect();
        fn device_name(plane: &mlprof_model::Plane) -> Option<&str> {
            plane.plane_stat("gpu_device_name").and_then(|value| xstats::as_str(plane, &plane.metadata_stats, value))
        }
        let device_type = match gpu_planes.first() {
            None => "CPU".to_string(),
            Some(plane) if kineto_host && let Some(name) = device_name(plane) => name.to_string(),
            Some(plane) => crate::gpu_caps::gpu_model_name(plane),
        };
        overview::RunEnvironment {
            hosts: self.hosts.iter().map(|h| h.name.clone()).collect(),
            machines: self.machines().into_iter().fold(Vec::new(), |mut distinct, machine| {
                if !distinct.contains(&machine) {
                    distinct.push(machine);
                }
                distinct
            }),
            device_type,
            device_core_count: gpu_planes.len(),
            is_training: self.hosts.iter().any(|h| has_gradient_program(h)),
        }
    }
}

/// Whether an HLO module recorded in the `/host:metadata` plane computes gradients:
/// XProf's `ModelTracker` looks for JAX `transpose(…)` (of a `jvp`) or TF
/// `gradient_tape` / `gradients` name scopes in the modules' op names. We look for
/// the same markers in the serialized module (`Hlo Proto` stat) without decoding it.
fn has_gradient_program(host: &Host) -> bool {
    const MARKERS: [&[u8]; 3] = [b"transpose(jvp(", b"gradient_tape/", b"gradients/"];
    let Some(plane) = host.plane(names::METADATA_PLANE) else { return false };
    let Some(key) = plane.find_stat_key("Hlo Proto") else { return false };
    plane.event_metadata.iter().any(|metadata| {
        plane.metadata_stats_of(metadata).iter().filter(|stat| stat.key == key).any(|stat| match stat.value {
            mlprof_model::StatValue::Bytes(bytes) | mlprof_model::StatValue::Str(bytes) => {
                let data = plane.metadata_stats.bytes(bytes);
                MARKERS.iter().any(|marker| data.windows(marker.len()).any(|window| window == *marker))
            }
            _ => false,
        })
    })
}
