//! Format-neutral facts about a host, the layer between the model and the tools: the
//! functions here are the one place that asks which format a host was read from, and
//! each picks its source's adapter — [`from_xspace`] (XProf's planes: TensorFlow,
//! JAX, mlprof's own captures) or [`from_kineto`] (PyTorch's Chrome traces, read with
//! [`crate::kineto`]'s vocabulary), or for XProf's op databases and step grouping the
//! per-format readers of [`crate::op_metrics`] and [`crate::grouping`]. Tools read the
//! facts and never the format (`tidy.rs` fails if one does).
//!
//! The facts:
//! - steps: each event's step group ([`step_groups`], [`step_groups_as_xprof`]);
//! - ops: XProf's host and device op databases ([`host_op_metrics_db`],
//!   [`device_op_metrics_db`], and whether they read the groups,
//!   [`op_metrics_read_groups`]), the GPU kernel launches with their op
//!   ([`KernelLaunch`]), and the activity view of host threads, GPU ops, copies and
//!   synchronisations ([`activity_view`]);
//! - the recorder: who wrote the host ([`framework`]), whether it trains
//!   ([`records_training`]), how its source lists devices ([`lists_unused_devices`],
//!   [`device_model_name`]), the kind of allocation records
//!   ([`allocation_records`]), whether XProf's derived lines apply
//!   ([`derives_device_lines`]);
//! - HTA's view of the events: their categories and streams ([`hta_categories`],
//!   [`hta_line_stream`]).
//!
//! Adding a source format: an adapter module here and an arm in each function below;
//! the matches are exhaustive, so the compiler lists every fact the new source must
//! supply.

pub mod activity;
mod from_kineto;
mod from_xspace;
mod kernels;
mod recorder;

use mlprof_model::{Host, Plane, SourceFormat};

pub use from_kineto::aten_op_tensor_core_eligible;
pub use from_xspace::{einsum_tensor_core_eligible, op_tensor_core_eligible, parse_kernel_details, tf_op_name};
pub(crate) use kernels::KernelLaunch;
pub use kernels::{LaunchParams, kernel_uses_tensor_core};
pub use recorder::{Framework, is_sampled_only};

use crate::grouping::{Fallbacks, HostGroups, group_by_markers, profiler_steps};
use crate::hlo::HloModules;
use crate::op_metrics::{self, OpMetricsDb};
use activity::ProfileView;

/// Each event's step on `host`: PyTorch's `ProfilerStep#N` annotations on Kineto
/// traces, else the step markers by XProf's rules with mlprof's fallbacks (`step_num`
/// events; on XSpace, repeated executions of one compiled program).
pub fn step_groups(host: &Host) -> HostGroups {
    match host.format {
        SourceFormat::Xspace => group_by_markers(host, Fallbacks { step_num_events: true, repeated_executions: true }),
        SourceFormat::Kineto => profiler_steps::group(host)
            .unwrap_or_else(|| group_by_markers(host, Fallbacks { step_num_events: true, repeated_executions: false })),
    }
}

/// [`step_groups`] with no fallback beyond XProf's rules, for comparisons with XProf.
pub fn step_groups_as_xprof(host: &Host) -> HostGroups {
    match host.format {
        SourceFormat::Xspace => group_by_markers(host, Fallbacks::NONE),
        SourceFormat::Kineto => profiler_steps::group(host).unwrap_or_else(|| group_by_markers(host, Fallbacks::NONE)),
    }
}

/// Calls `each` with every kernel launch of the GPU planes of `host` (XLA kernels
/// named from its compiled programs `modules`, [`HloModules::for_gpu_kernels`]);
/// returns the number of GPU planes.
pub(crate) fn kernel_launches<'h>(
    host: &'h Host,
    modules: &'h HloModules,
    each: &mut dyn FnMut(KernelLaunch<'h>),
) -> usize {
    match host.format {
        SourceFormat::Xspace => from_xspace::kernel_launches(host, modules, each),
        SourceFormat::Kineto => from_kineto::kernel_launches(host, each),
    }
}

/// The framework (or program) that recorded `host`.
pub fn framework(host: &Host) -> Framework {
    match host.format {
        SourceFormat::Xspace => from_xspace::framework(host),
        SourceFormat::Kineto => Framework::Pytorch,
    }
}

/// Whether the source lists devices the job did not use (Kineto's `deviceProperties`
/// names every GPU of the machine): only device planes with events are the job's.
pub fn lists_unused_devices(host: &Host) -> bool {
    match host.format {
        SourceFormat::Xspace => false,
        SourceFormat::Kineto => true,
    }
}

/// The model name of device plane `plane` of `host`: as the trace names the GPU where
/// it does (Kineto's `name` of the device), else XProf's name for it
/// ([`crate::gpu_caps::gpu_model_name`]).
pub fn device_model_name(host: &Host, plane: &Plane) -> String {
    let named = match host.format {
        SourceFormat::Xspace => None,
        SourceFormat::Kineto => from_kineto::device_name(plane),
    };
    named.map_or_else(|| crate::gpu_caps::gpu_model_name(plane), str::to_string)
}

/// Whether `host` records training: XLA programs that compute gradients (XSpace), a
/// backward pass (Kineto).
pub fn records_training(host: &Host) -> bool {
    match host.format {
        SourceFormat::Xspace => from_xspace::has_gradient_program(host),
        SourceFormat::Kineto => crate::kineto::records_backward(host),
    }
}

/// The host op metrics database of `host` (XProf's `host_op_metrics_db`): TF ops and
/// tf.data iterators by XProf's rules (XSpace), ATen `cpu_op`s and CUDA runtime /
/// driver calls (Kineto), with each thread's `IDLE` time.
pub fn host_op_metrics_db(host: &Host, groups: &HostGroups) -> OpMetricsDb {
    match host.format {
        SourceFormat::Xspace => op_metrics::xspace_host_op_metrics_db(host, groups),
        SourceFormat::Kineto => op_metrics::kineto_host_op_metrics_db(host),
    }
}

/// Whether the op metrics databases of `host` ([`host_op_metrics_db`],
/// [`device_op_metrics_db`]) read its groups: XSpace hosts with GPU events (each XLA
/// kernel's step) or events grouping can mark eager ([`crate::grouping::may_mark_eager`]).
/// Where this is false, the databases are the same with no groups at all.
pub fn op_metrics_read_groups(host: &Host) -> bool {
    match host.format {
        SourceFormat::Xspace => host.has_gpu_events() || crate::grouping::may_mark_eager(host),
        SourceFormat::Kineto => false,
    }
}

/// The device op metrics database of `host` (XProf's `device_op_metrics_db`): GPU
/// kernels by their TF op or XLA instruction (XSpace), kernels, copies and memsets by
/// the ATen op that launched them (Kineto), with each device's `IDLE` time.
pub fn device_op_metrics_db(host: &Host, groups: &HostGroups) -> OpMetricsDb {
    device_op_metrics_db_with(host, groups, &HloModules::for_gpu_kernels(host))
}

/// [`device_op_metrics_db`] with the host's programs decoded already
/// ([`HloModules::for_gpu_kernels`]).
pub(crate) fn device_op_metrics_db_with(host: &Host, groups: &HostGroups, modules: &HloModules) -> OpMetricsDb {
    match host.format {
        SourceFormat::Xspace => op_metrics::xspace_device_op_metrics_db(host, groups, modules),
        SourceFormat::Kineto => op_metrics::kineto_device_op_metrics_db(host),
    }
}

/// What a host's source records of allocations, which decides how memory is profiled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocationRecords {
    /// TensorFlow's allocator events (`MemoryAllocation` / `MemoryDeallocation` with
    /// allocator stats), read by XProf's memory profile.
    TfAllocatorEvents,
    /// PyTorch's `[memory]` instants (`profile_memory=True`).
    PytorchMemoryEvents,
}

/// The kind of allocation records `host`'s source has (whether it holds any is the
/// memory tools' to find).
pub fn allocation_records(host: &Host) -> AllocationRecords {
    match host.format {
        SourceFormat::Xspace => AllocationRecords::TfAllocatorEvents,
        SourceFormat::Kineto => AllocationRecords::PytorchMemoryEvents,
    }
}

/// Whether XProf's derived lines (steps, XLA and framework ops and modules, launch
/// stats per GPU) belong on `host`'s GPU planes: on XSpace, as XProf's trace viewer
/// draws them; Kineto traces show their own streams, ops and flows instead.
pub fn derives_device_lines(host: &Host) -> bool {
    match host.format {
        SourceFormat::Xspace => true,
        SourceFormat::Kineto => false,
    }
}

/// How Holistic Trace Analysis reads `plane`'s events: per event metadata, the
/// Chrome `cat` and `ph` of the rows it keeps (`None` for the others) — Kineto's own
/// on PyTorch traces, the categories a PyTorch trace would give them on XSpace GPU
/// profiles.
pub(crate) fn hta_categories<'p>(host: &Host, plane: &'p Plane) -> Vec<Option<(&'p str, Option<&'p str>)>> {
    match host.format {
        SourceFormat::Xspace => from_xspace::hta_view::categories(plane),
        SourceFormat::Kineto => crate::hta_read::kept_categories(plane),
    }
}

/// Where HTA's `stream` column comes from for the events of `line`: each event's
/// `stream` arg (`Some(None)`, PyTorch traces and host lines), the line itself
/// (`Some(Some(stream))`, the stream lines of XSpace GPU planes), or nowhere because
/// HTA would not see the line (`None`, XProf's derived lines).
pub(crate) fn hta_line_stream(host: &Host, plane: &Plane, line: &mlprof_model::Line) -> Option<Option<i64>> {
    match host.format {
        SourceFormat::Xspace => from_xspace::hta_view::line_stream(plane, line),
        SourceFormat::Kineto => Some(None),
    }
}

/// The host threads with their events nested, the GPU devices with their ops, the
/// runtime call behind each correlation id and the steps of `host`
/// ([`activity::ProfileView`]): what the transfers tool reads.
pub fn activity_view(host: &Host) -> ProfileView<'_> {
    match host.format {
        SourceFormat::Xspace => from_xspace::activity_view(host),
        SourceFormat::Kineto => from_kineto::activity_view(host),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_without_planes_have_empty_databases() {
        let host = mlprof_formats::kineto::read_kineto(br#"{"traceEvents": []}"#, "empty.json", "empty")
            .expect("an empty trace parses");
        let groups = HostGroups::none(&host);
        assert_eq!(device_op_metrics_db(&host, &groups).total_time_ps, 0);
        assert_eq!(host_op_metrics_db(&host, &groups).total_op_time_ps, 0);
    }
}
