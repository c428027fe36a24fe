//! The tool results the rules read, computed once per profile: the XProf tools through
//! [`crate::tool::Analysis`] (grouping shared, classic step-time breakdown), HTA's GPU
//! analyses on PyTorch GPU traces, the transfers diagnosis, and the two facts about
//! the profile that no tool reports (which framework wrote it, the device memory
//! sizes recorded with the devices).
//!
//! The one design decision to know: everything a rule may read is a public field, and
//! tools that do not apply leave their field empty (`None`, an empty list), so a rule
//! test builds [`ToolResults::default`] and fills in only what it needs.

use mlprof_model::{Host, names};
use serde::Serialize;

use crate::framework_op_stats::FrameworkOpStats;
use crate::gpu::GpuAnalysis;
use crate::gpu::transfers::{self, Transfers, TransfersOptions};
use crate::input_pipeline::StepBreakdown;
use crate::kernel_stats::KernelStats;
use crate::overview::Overview;
use crate::tf_data::TfDataAnalysis;
use crate::tool::{Analysis, HostMemoryProfile, Options, ToolId, ToolResult};
use crate::{facts, gpu, tool_availability, xstats};

pub use crate::facts::Framework;

/// The memory size of one device, as the profile records it with the device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceMemory {
    /// Host (trace file) name.
    pub host: String,
    /// Device ordinal (`N` of `/device:GPU:N`).
    pub device: i64,
    /// Memory size in bytes (the GPU plane's `memory_size` stat; Kineto's
    /// `deviceProperties[].totalGlobalMem`).
    pub bytes: i64,
}

/// Every tool result the rules read.
#[derive(Clone, Debug, Default)]
pub struct ToolResults {
    /// Which framework wrote the profile.
    pub framework: Framework,
    /// Number of hosts analysed together.
    pub host_count: usize,
    /// `overview_page` (its `steps` is the input-pipeline analysis, with the
    /// DataLoader analysis on PyTorch traces).
    pub overview: Overview,
    /// `framework_op_stats`.
    pub framework_op_stats: Option<FrameworkOpStats>,
    /// `kernel_stats`.
    pub kernel_stats: KernelStats,
    /// `memory_profile`, per host.
    pub memory: Vec<HostMemoryProfile>,
    /// `tf_data_bottleneck_analysis`.
    pub tf_data: TfDataAnalysis,
    /// `gpu` (HTA's analyses), on PyTorch traces with GPU activity only.
    pub gpu: Option<GpuAnalysis>,
    /// `transfers` (default gap threshold).
    pub transfers: Option<Transfers>,
    /// Device memory sizes recorded in the profile.
    pub device_memory: Vec<DeviceMemory>,
}

impl ToolResults {
    /// The steps of the step-time breakdown.
    pub fn steps(&self) -> &[StepBreakdown] {
        &self.overview.steps.steps
    }

    /// Mean step time, ps (`None` without steps).
    pub fn mean_step_ps(&self) -> Option<i64> {
        (!self.steps().is_empty()).then(|| super::ms_to_ps(self.overview.steps.step_time_ms.average))
    }

    /// Mean step time, ms (0 without steps).
    pub fn mean_step_ms(&self) -> f64 {
        self.overview.steps.step_time_ms.average
    }

    /// The mean per step of a step-time category, ms, by XProf's column id
    /// (`infeedTimeMs`, `kernelLaunchTimeMs`, …); 0 when absent.
    pub fn category_mean_ms(&self, id: &str) -> f64 {
        self.overview.steps.category_ms.iter().find(|(key, _)| key == id).map_or(0.0, |(_, s)| s.average)
    }

    /// The share of the mean step time that `ms` per step is, % (0 without steps).
    pub fn step_share_percent(&self, ms: f64) -> f64 {
        let step = self.mean_step_ms();
        if step > 0.0 { 100.0 * ms / step } else { 0.0 }
    }

    /// Whether the profile has a device (GPU) in its steps.
    pub fn has_device(&self) -> bool {
        self.overview.steps.hardware_type == "GPU"
    }
}

/// The XProf tools the rules read (the overview carries the input-pipeline analysis;
/// the pod viewer adds nothing for one job).
const XPROF_TOOLS: [ToolId; 5] = [
    ToolId::OverviewPage,
    ToolId::FrameworkOpStats,
    ToolId::KernelStats,
    ToolId::MemoryProfile,
    ToolId::TfDataBottleneckAnalysis,
];

/// Runs every tool the rules read on `hosts` (analysed together, as `mlprof analyze`).
/// Hosts that hold only mlprof's samples say nothing about the framework, the steps or
/// the device: they are left out as `Analysis` leaves them out of the step tools.
pub fn collect(hosts: &[&Host]) -> ToolResults {
    let traced: Vec<&Host> = hosts.iter().copied().filter(|h| !facts::is_sampled_only(h)).collect();
    let hosts: &[&Host] = if traced.is_empty() { hosts } else { &traced };
    let analysis = Analysis::new(hosts.to_vec(), Options::default());
    let steps: Vec<u64> = analysis.host_steps().iter().map(|h| h.steps.len() as u64).collect();
    let mut results = ToolResults {
        framework: Framework::of_profile(hosts.iter().map(|host| facts::framework(host))),
        host_count: hosts.len(),
        transfers: Some(transfers::analyze_with_steps(hosts, &steps, TransfersOptions::default())),
        device_memory: device_memory(hosts),
        ..ToolResults::default()
    };
    for result in analysis.run_all(&XPROF_TOOLS) {
        match result {
            Ok(ToolResult::Overview(overview)) => results.overview = *overview,
            Ok(ToolResult::FrameworkOpStats(stats)) => results.framework_op_stats = Some(*stats),
            Ok(ToolResult::KernelStats(stats)) => results.kernel_stats = *stats,
            Ok(ToolResult::MemoryProfile(memory)) => results.memory = memory,
            Ok(ToolResult::TfData(tf_data)) => results.tf_data = *tf_data,
            Ok(_) | Err(_) => {}
        }
    }
    let gpu_traces: Vec<&Host> =
        hosts.iter().copied().filter(|host| tool_availability::has_data_on(ToolId::Gpu, host)).collect();
    if !gpu_traces.is_empty() {
        results.gpu = Some(gpu::analyze(&gpu_traces, &[]));
    }
    results
}

/// The `memory_size` stat of every GPU plane that has one.
fn device_memory(hosts: &[&Host]) -> Vec<DeviceMemory> {
    let mut out = Vec::new();
    for host in hosts {
        for plane in &host.planes {
            let Some(ordinal) = plane.name.strip_prefix(names::GPU_PLANE_PREFIX) else { continue };
            let Ok(device) = ordinal.parse::<i64>() else { continue };
            let Some(bytes) = plane.plane_stat("memory_size").and_then(xstats::as_int) else { continue };
            if bytes > 0 {
                out.push(DeviceMemory { host: host.name.clone(), device, bytes });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlprof_model::{Plane, SourceFormat};

    #[test]
    fn a_host_of_samples_beside_a_pytorch_trace_leaves_it_a_pytorch_job() {
        let trace = Host::new("worker", "", SourceFormat::Kineto);
        let mut samples = Host::new("vm_python", "", SourceFormat::Xspace);
        samples.planes.push(Plane::new(1, names::sampled::PYTHON_PLANE));
        let results = collect(&[&trace, &samples]);
        assert_eq!(results.framework, Framework::Pytorch);
        assert_eq!(results.host_count, 1);
        // Samples alone are still looked at.
        assert_eq!(collect(&[&samples]).host_count, 1);
    }
}
