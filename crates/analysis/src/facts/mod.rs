//! Format-neutral facts about a host, each built by exactly one adapter per source
//! format: [`from_xspace`] (XProf's planes: TensorFlow, JAX, mlprof's own captures)
//! and [`from_kineto`] (PyTorch's Chrome traces, read with [`crate::kineto`]'s
//! vocabulary). Tools read the facts and never the format; the functions here are the
//! one place that asks which format a host was read from.
//!
//! Facts so far: each event's step ([`step_groups`]), the kernel launches of a host's GPUs ([`KernelLaunch`]), who
//! recorded the host ([`framework`]), whether it trains ([`records_training`]) and how its source lists devices
//! ([`lists_unused_devices`], [`device_model_name`]). The other tools still read some
//! facts themselves (see `FORMAT_AWARE` in `tidy.rs`).
//!
//! Adding a source format: an adapter module here, and an arm in each function below
//! (the matches are exhaustive, so the compiler lists every fact the new source must
//! supply).

mod from_kineto;
mod from_xspace;
mod kernels;
mod recorder;

use mlprof_model::{Host, Plane, SourceFormat};

pub(crate) use from_kineto::thread_ops;
pub use from_kineto::{KinetoOpIndex, aten_op_tensor_core_eligible};
pub use from_xspace::{einsum_tensor_core_eligible, op_tensor_core_eligible, parse_kernel_details, tf_op_name};
pub(crate) use kernels::KernelLaunch;
pub use kernels::{LaunchParams, kernel_uses_tensor_core};
pub use recorder::Framework;

use crate::grouping::{Fallbacks, HostGroups, group_by_markers, profiler_steps};
use crate::hlo::HloModules;

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
