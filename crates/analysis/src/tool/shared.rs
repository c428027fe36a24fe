//! What several tools read, computed once per analysis and only when first asked
//! for: each host's groups, the step databases, the host and device op metrics, the
//! kernel statistics and the compiled XLA programs.
//!
//! The one design decision to know: `xprof_compatible` switches off everything mlprof
//! does beyond XProf (the `step_num` step fallback, the classic GPU breakdown) so
//! results can be compared with XProf's output.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rayon::prelude::*;

use mlprof_model::Host;

use super::{Options, ToolError, ToolId, ToolResult};
use crate::facts::{is_sampled_only, step_groups, step_groups_as_xprof};
use crate::grouping::{HostGroups, StepSource};
use crate::hlo::HloModules;
use crate::op_metrics::{self, OpMetricsDb};
use crate::steps::{Breakdown, CombinedSteps, HostSteps, StepOptions, combine_hosts, host_steps};
use crate::{facts, input_pipeline, kernel_stats, memory_profile, overview};

thread_local! {
    /// Wall time of the [`Analysis::timed`] calls finished on this thread, for
    /// subtracting nested results from their caller's time.
    static NESTED_TIME: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// The hosts of one analysis and the options its tools run with, with what several
/// tools read, computed on first use.
pub struct Analysis<'h> {
    hosts: Vec<&'h Host>,
    /// Every host given, the sampled-only ones included (see [`Analysis::new`]).
    all_hosts: Vec<&'h Host>,
    options: Options,
    groups: OnceLock<Vec<HostGroups>>,
    /// Whether the op metrics read the groups ([`Analysis::op_groups`]).
    ops_read_groups: OnceLock<bool>,
    /// No groups, one empty table per host, for the op metrics where they read none.
    no_groups: Vec<HostGroups>,
    host_steps: OnceLock<Vec<HostSteps>>,
    host_ops: OnceLock<OpMetricsDb>,
    device_ops: OnceLock<Vec<OpMetricsDb>>,
    kernel_stats: OnceLock<kernel_stats::KernelStats>,
    programs: OnceLock<Vec<HloModules>>,
    /// How long each shared result and each tool took (wall time), in the order they
    /// finished.
    times: Mutex<Vec<(String, Duration)>>,
}

impl<'h> Analysis<'h> {
    /// An analysis of `hosts` (together, as XProf combines hosts) with `options`.
    ///
    /// A host that holds nothing but what mlprof sampled (Python stacks and counters,
    /// `mlprof run`'s `<host>_python.xplane.pb`) is left out of every tool but the ones
    /// that read samples: it has no steps or ops, and a host without steps would empty
    /// the steps XProf's tools combine across hosts. Where every host is sampled-only,
    /// all are kept (the tools then say there is nothing for them).
    pub fn new(hosts: Vec<&'h Host>, options: Options) -> Analysis<'h> {
        let traced: Vec<&Host> = hosts.iter().copied().filter(|h| !is_sampled_only(h)).collect();
        let hosts_analysed = if traced.is_empty() { hosts.clone() } else { traced };
        Analysis {
            no_groups: vec![HostGroups::default(); hosts_analysed.len()],
            hosts: hosts_analysed,
            all_hosts: hosts,
            options,
            groups: OnceLock::new(),
            ops_read_groups: OnceLock::new(),
            host_steps: OnceLock::new(),
            host_ops: OnceLock::new(),
            device_ops: OnceLock::new(),
            kernel_stats: OnceLock::new(),
            programs: OnceLock::new(),
            times: Mutex::new(Vec::new()),
        }
    }

    /// The hosts analysed.
    pub fn hosts(&self) -> &[&'h Host] {
        &self.hosts
    }

    /// Every host given, the sampled-only ones included.
    pub fn all_hosts(&self) -> &[&'h Host] {
        &self.all_hosts
    }

    /// The options the tools run with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// Whether `tool` reads these hosts' step groups: [`ToolId::reads_steps`], except
    /// that the memory profile needs them only for TensorFlow allocator events
    /// ([`memory_profile::reads_groups`]), and the framework op stats only where the op
    /// metrics read them ([`facts::op_metrics_read_groups`]).
    pub fn reads_steps(&self, tool: ToolId) -> bool {
        match tool {
            ToolId::MemoryProfile => self.hosts.iter().copied().any(memory_profile::reads_groups),
            ToolId::FrameworkOpStats => self.ops_read_groups(),
            _ => tool.reads_steps(),
        }
    }

    /// Each host's groups, in host order (hosts in parallel: grouping is per host).
    pub fn groups(&self) -> &[HostGroups] {
        self.groups.get_or_init(|| {
            let xprof = self.options.xprof_compatible;
            let group = |host: &&Host| if xprof { step_groups_as_xprof(host) } else { step_groups(host) };
            self.timed("grouping", || {
                if self.hosts.len() > 1 {
                    self.hosts.par_iter().map(group).collect()
                } else {
                    self.hosts.iter().map(group).collect()
                }
            })
        })
    }

    /// Whether any host's op metrics read its groups ([`facts::op_metrics_read_groups`]).
    fn ops_read_groups(&self) -> bool {
        *self.ops_read_groups.get_or_init(|| self.hosts.iter().copied().any(facts::op_metrics_read_groups))
    }

    /// The groups the op metrics read: each host's where any host's op metrics read
    /// them, else empty tables, so that the op metrics alone go without grouping.
    fn op_groups(&self) -> &[HostGroups] {
        if self.ops_read_groups() { self.groups() } else { &self.no_groups }
    }

    /// `f` of every host with its table of `groups` (one per host), in host order.
    /// Sequential on purpose: it runs inside the `OnceLock` initialisers of the shared
    /// databases, and a rayon job there could let the initialising thread steal another
    /// tool that waits on the same lock, which would deadlock. The tools themselves run
    /// in parallel.
    fn per_host<T>(&self, groups: &[HostGroups], f: impl Fn(&Host, &HostGroups) -> T) -> Vec<T> {
        self.hosts.iter().zip(groups).map(|(host, groups)| f(host, groups)).collect()
    }

    /// `f()`, its wall time recorded under `what` (see [`Analysis::times`]), less the
    /// time of the results timed inside it on the same thread, so the times add up.
    pub(super) fn timed<T>(&self, what: impl Into<String>, f: impl FnOnce() -> T) -> T {
        let started = Instant::now();
        let nested_before = NESTED_TIME.get();
        let value = f();
        let elapsed = started.elapsed();
        let nested = NESTED_TIME.get().saturating_sub(nested_before);
        NESTED_TIME.set(nested_before + elapsed);
        if let Ok(mut times) = self.times.lock() {
            times.push((what.into(), elapsed.saturating_sub(nested)));
        }
        value
    }

    /// How long each shared result (grouping, the step and op databases, …) and each
    /// tool took, wall time in the order they finished. Each time leaves out the shared
    /// results computed inside it (a tool's, those it was first to ask for), but not
    /// the wait for one another thread computes. For `mlprof -v`.
    pub fn times(&self) -> Vec<(String, Duration)> {
        self.times.lock().map(|times| times.clone()).unwrap_or_default()
    }

    /// Runs `tools`, results in the order of `tools`. With more than one rayon thread
    /// the tools run in parallel: the ones that read events alone (no steps) beside
    /// the grouping, the others once it is done; tools that share the step databases
    /// or the host op metrics wait for the one that computes them. With one thread
    /// they run in order on the calling thread (no second allocator arena, so one core
    /// also means the least memory).
    ///
    /// No rayon work runs inside the shared results' initialisers but the grouping
    /// (hosts, and each host's lines, in parallel), and tools that read events alone
    /// never ask for the groups, so a thread waiting there can only steal work that
    /// never waits on it.
    pub fn run_all(&self, tools: &[ToolId]) -> Vec<Result<ToolResult, ToolError>> {
        if rayon::current_num_threads() <= 1 {
            return tools.iter().map(|tool| self.run(*tool)).collect();
        }
        // Each tool with its place in `tools`.
        let (apart, grouped): (Vec<_>, Vec<_>) =
            tools.iter().copied().enumerate().partition(|(_, tool)| !self.reads_steps(*tool));
        let run = |tools: &[(usize, ToolId)]| -> Vec<(usize, Result<ToolResult, ToolError>)> {
            tools.par_iter().map(|&(at, tool)| (at, self.run(tool))).collect()
        };
        let (mut results, after_grouping) = rayon::join(
            || run(&apart),
            || {
                if grouped.is_empty() {
                    return Vec::new();
                }
                self.groups();
                // The step databases and the host op metrics feed several tools: build
                // them side by side first rather than one after the other inside the
                // first tool.
                let needs = |wanted: &[ToolId]| grouped.iter().any(|(_, tool)| wanted.contains(tool));
                use ToolId::*;
                rayon::join(
                    || needs(&[OverviewPage, InputPipelineAnalyzer, PodViewer]).then(|| self.host_steps()),
                    || needs(&[OverviewPage, InputPipelineAnalyzer, FrameworkOpStats]).then(|| self.host_ops()),
                );
                run(&grouped)
            },
        );
        results.extend(after_grouping);
        results.sort_unstable_by_key(|(at, _)| *at);
        results.into_iter().map(|(_, result)| result).collect()
    }

    fn breakdown(&self) -> Breakdown {
        if self.options.xprof_compatible { Breakdown::Xprof } else { self.options.breakdown }
    }

    /// Every host's steps, with none dropped.
    pub fn host_steps(&self) -> &[HostSteps] {
        self.host_steps.get_or_init(|| {
            let options = StepOptions { breakdown: self.breakdown(), drop_incomplete_steps: false };
            let groups = self.groups();
            self.timed("host steps", || self.per_host(groups, |host, groups| host_steps(host, groups, options)))
        })
    }

    /// The hosts' steps aligned across hosts; `drop_incomplete_steps` as XProf's
    /// overview and input-pipeline pages do, not its pod viewer.
    pub fn combined_steps(&self, drop_incomplete_steps: bool) -> CombinedSteps {
        if !drop_incomplete_steps {
            return combine_hosts(self.host_steps());
        }
        let mut per_host = self.host_steps().to_vec();
        per_host.iter_mut().for_each(HostSteps::drop_incomplete_steps);
        combine_hosts(&per_host)
    }

    /// How the steps were found and which breakdown the step tools show, in words.
    pub fn step_source(&self) -> String {
        let sources: Vec<&StepSource> = self.groups().iter().map(|g| &g.source).collect();
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
    pub fn host_ops(&self) -> &OpMetricsDb {
        self.host_ops.get_or_init(|| {
            let groups = self.op_groups();
            self.timed("host op metrics", || {
                let dbs = self.per_host(groups, facts::host_op_metrics_db);
                op_metrics::combine_dbs(&dbs, false)
            })
        })
    }

    /// Each host's device op metrics, in host order.
    pub fn device_ops(&self) -> &[OpMetricsDb] {
        // Sequential, as `per_host`: this runs inside a `OnceLock` initialiser.
        self.device_ops.get_or_init(|| {
            let (groups, programs) = (self.op_groups(), self.programs());
            self.timed("device op metrics", || {
                let hosts = self.hosts.iter().zip(groups).zip(programs);
                hosts
                    .map(|((host, groups), programs)| facts::device_op_metrics_db_with(host, groups, programs))
                    .collect()
            })
        })
    }

    /// Each host's compiled XLA programs, decoded once for the device op metrics and
    /// the kernel statistics (none for hosts without XLA GPU kernels).
    fn programs(&self) -> &[HloModules] {
        self.programs.get_or_init(|| {
            self.timed("XLA programs", || self.hosts.iter().map(|host| HloModules::for_gpu_kernels(host)).collect())
        })
    }

    /// The kernel statistics of all hosts (the kernel_stats tool; the TensorCore columns
    /// of the overview and framework op stats).
    pub fn kernel_stats(&self) -> &kernel_stats::KernelStats {
        self.kernel_stats.get_or_init(|| {
            let programs = self.programs();
            self.timed("kernel statistics", || kernel_stats::analyze_with(&self.hosts, programs))
        })
    }

    pub(super) fn input_pipeline(&self) -> input_pipeline::InputPipelineAnalysis {
        let mut result = input_pipeline::analyze(&self.combined_steps(true), self.host_ops(), self.step_source());
        input_pipeline::add_dataloader_analysis(&mut result, &self.hosts);
        result
    }

    pub(super) fn overview(&self) -> overview::Overview {
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
    pub(super) fn machines(&self) -> Vec<String> {
        self.hosts.iter().map(|h| h.hostnames.first().unwrap_or(&h.name).clone()).collect()
    }

    pub(super) fn run_environment(&self) -> overview::RunEnvironment {
        // Where a source lists every GPU of the machine, count the ones the job used.
        let gpu_planes: Vec<(&Host, &mlprof_model::Plane)> = self
            .hosts
            .iter()
            .flat_map(|host| host.planes.iter().map(move |plane| (*host, plane)))
            .filter(|(_, plane)| plane.is_gpu())
            .filter(|(host, plane)| !facts::lists_unused_devices(host) || plane.lines.iter().any(|l| !l.is_empty()))
            .collect();
        let device_type = match gpu_planes.first() {
            None => "CPU".to_string(),
            Some((host, plane)) => facts::device_model_name(host, plane),
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
            is_training: self.hosts.iter().any(|host| facts::records_training(host)),
        }
    }
}
