//! The XSpace adapter (TensorFlow, JAX, mlprof's own captures): facts read from
//! XProf's planes and stats.
//!
//! Kernel launches: every event of a `/device:GPU:*` plane (derived lines left out)
//! with a `kernel_details` stat, whose launch configuration that CUPTI string gives.
//! As XProf 2.24.2 reads them: only the event's own stats (not its metadata's, as
//! `GpuEventStats` does), the last value of a repeated stat winning. The op is the one
//! its `tf_op` stat names; a kernel XLA launched (an `hlo_op` and a `program_id` stat)
//! is named after the framework op of its HLO instruction (the `op_name` of the
//! instruction's metadata, from the compiled programs of `/host:metadata`) when the
//! instruction is known.
//!
//! The recorder: JAX when the `/host:metadata` plane names a `jax_version`, a CUDA
//! program when it says mlprof's CUPTI injection wrote it, else TensorFlow.

mod activity;
pub(crate) mod hta_view;

use mlprof_model::{Host, Plane, names};

pub(super) use activity::view as activity_view;

use super::kernels::{KernelLaunch, LaunchParams};
use super::recorder::Framework;
use crate::hlo::HloModules;
use crate::xstats::{self, StatKeys};

/// Calls `each` with every kernel launch of the GPU planes of `host`, naming XLA
/// kernels from `modules`; returns the number of GPU planes.
pub(super) fn kernel_launches<'h>(
    host: &'h Host,
    modules: &'h HloModules,
    each: &mut dyn FnMut(KernelLaunch<'h>),
) -> usize {
    let mut planes = 0;
    for plane in host.planes.iter().filter(|plane| plane.is_gpu()) {
        planes += 1;
        plane_kernel_launches(plane, modules, each);
    }
    planes
}

/// The framework that recorded `host`.
pub(super) fn framework(host: &Host) -> Framework {
    let metadata = host.plane(names::METADATA_PLANE);
    if metadata.is_some_and(|plane| plane.plane_stat("jax_version").is_some()) {
        Framework::Jax
    } else if metadata.is_some_and(recorded_by_cupti_tool) {
        Framework::Cuda
    } else if super::is_sampled_only(host) {
        Framework::Python
    } else {
        Framework::Tensorflow
    }
}

/// Whether a tool that records any CUDA program wrote the host of this `/host:metadata`
/// plane (`mlprof run`'s CUPTI injection, Nsight Systems), not a framework's profiler.
fn recorded_by_cupti_tool(plane: &Plane) -> bool {
    let Some(key) = plane.find_stat_key(names::PROFILER_STAT) else { return false };
    plane.plane_stats().iter().any(|stat| {
        let (k, value) = (stat.key(), stat.value());
        k == key && matches!(plane.str_value(&plane.metadata_stats, value), Some(names::MLPROF_INJECT | names::NSYS))
    })
}

/// Whether an HLO module recorded in the `/host:metadata` plane computes gradients:
/// XProf's `ModelTracker` looks for JAX `transpose(…)` (of a `jvp`) or TF
/// `gradient_tape` / `gradients` name scopes in the modules' op names. We look for
/// the same markers in the serialized module (`Hlo Proto` stat) without decoding it.
pub(super) fn has_gradient_program(host: &Host) -> bool {
    const MARKERS: [&[u8]; 3] = [b"transpose(jvp(", b"gradient_tape/", b"gradients/"];
    let Some(plane) = host.plane(names::METADATA_PLANE) else { return false };
    let Some(key) = plane.find_stat_key("Hlo Proto") else { return false };
    plane.event_metadata.iter().any(|metadata| {
        plane.metadata_stats_of(metadata).iter().filter(|stat| stat.key() == key).any(|stat| match stat.value() {
            mlprof_model::StatValue::Bytes(bytes) | mlprof_model::StatValue::Str(bytes) => {
                let data = plane.metadata_stats.bytes(bytes);
                MARKERS.iter().any(|marker| data.windows(marker.len()).any(|window| window == *marker))
            }
            _ => false,
        })
    })
}

/// Stat names read off kernel events, in [`StatKeys`] order.
const STAT_NAMES: [&str; 5] = ["kernel_details", "tf_op", "equation", "hlo_op", "program_id"];

/// Calls `each` with every kernel launch of one GPU plane that has launch details and a
/// positive duration, naming XLA kernels from `modules`.
fn plane_kernel_launches<'h>(plane: &'h Plane, modules: &'h HloModules, each: &mut dyn FnMut(KernelLaunch<'h>)) {
    let keys = StatKeys::new(plane, STAT_NAMES);
    let [details_key, tf_op_key, equation_key, hlo_op_key, program_key] = std::array::from_fn(|i| keys.key(i));
    if details_key.is_none() {
        return;
    }
    for line in plane.lines.iter().filter(|line| !names::is_derived_line_id(line.id)) {
        for event in line.iter() {
            let duration_ps = event.duration_ps();
            if duration_ps <= 0 {
                continue;
            }
            // The last value of each stat wins, as in XProf's `GpuEventStats`.
            let (mut details, mut tf_op, mut equation, mut hlo_op) = ("", "", "", None);
            let mut program_id = None;
            for stat in event.stats() {
                let slot = match Some(stat.key()) {
                    k if k == details_key => &mut details,
                    k if k == tf_op_key => &mut tf_op,
                    k if k == equation_key => &mut equation,
                    k if k == hlo_op_key => {
                        hlo_op = Some(xstats::as_str(plane, event.store(), stat.value()).unwrap_or(""));
                        continue;
                    }
                    k if k == program_key => {
                        program_id = xstats::as_int(stat.value());
                        continue;
                    }
                    _ => continue,
                };
                *slot = xstats::as_str(plane, event.store(), stat.value()).unwrap_or("");
            }
            if details.is_empty() {
                continue;
            }
            let name = xstats::event_name(plane, &event);
            let params = parse_kernel_details(details);
            let tf_op_name = tf_op_name(tf_op);
            let instruction = hlo_op
                .zip(program_id)
                .and_then(|(hlo_op, program)| modules.instruction(program, crate::hlo::innermost_hlo_op(hlo_op)))
                .map(|instruction| instruction.op_name.as_str());
            // XProf 2.24.2 shows the instruction's framework op name without its type.
            let op_name = instruction.unwrap_or(tf_op_name);
            each(KernelLaunch::new(name, params, duration_ps, op_name, |uses_tensor_core| {
                let by_tf_op = !tf_op.is_empty()
                    && (einsum_tensor_core_eligible(equation)
                        || op_tensor_core_eligible(tf_op_name)
                        || uses_tensor_core);
                by_tf_op || instruction.is_some_and(op_tensor_core_eligible)
            }));
        }
    }
}

/// Op-name suffixes of ops that can run on TensorCores (fused variants end the same;
/// JAX's `dot_general` and `conv_general_dilated` as XProf 2.24.2 counts them).
const TENSOR_CORE_OP_SUFFIXES: [&str; 14] = [
    "Conv2D",
    "Conv2DBackpropFilter",
    "Conv2DBackpropInput",
    "Conv3D",
    "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropFilter",
    "DepthwiseConv2dNativeBackpropInput",
    "/MatMul",
    "FusedMatMul",
    "/CudnnRNN",
    "XlaDot",
    "XlaDotV2",
    "dot_general",
    "conv_general_dilated",
];

/// Op-name substrings of ops that can run on TensorCores (versioned variants included).
const TENSOR_CORE_OP_SUBSTRINGS: [&str; 4] = ["BatchMatMul", "CudnnRNNV", "CudnnRNNForward", "CudnnRNNBackprop"];

/// Parses a CUPTI `kernel_details` string: `key:value` tokens separated by spaces or
/// newlines (`regs:32 static_shared:0 dynamic_shared:16384 grid:2,1,1 block:32,1,1
/// occ_pct:50`; older profilers put one per line). Unknown or malformed tokens are
/// skipped; a field that is missing keeps its default. Never fails.
pub fn parse_kernel_details(text: &str) -> LaunchParams {
    let mut params = LaunchParams::default();
    for token in text.split([' ', '\n']) {
        let mut parts = token.split(':');
        let (Some(key), Some(value), None) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        match key {
            "regs" => set_if_some(&mut params.registers_per_thread, parse_u32(value)),
            "static_shared" => set_if_some(&mut params.static_shmem_bytes, parse_u32(value)),
            "dynamic_shared" => set_if_some(&mut params.dynamic_shmem_bytes, parse_u32(value)),
            "block" => set_if_some(&mut params.block_dim, parse_dim3(value)),
            "grid" => set_if_some(&mut params.grid_dim, parse_dim3(value)),
            "occ_pct" => set_if_some(&mut params.occupancy_pct, parse_f64(value).map(|pct| pct as f32)),
            _ => {}
        }
    }
    params
}

fn set_if_some<T>(slot: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *slot = value;
    }
}

/// Whitespace as C's `isspace` sees it (what absl trims before parsing numbers).
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\x0b' | '\x0c' | '\r')
}

/// A decimal `u32` with optional surrounding whitespace and `+` sign.
fn parse_u32(text: &str) -> Option<u32> {
    text.trim_matches(is_c_space).parse().ok()
}

/// A decimal real with optional surrounding whitespace.
fn parse_f64(text: &str) -> Option<f64> {
    text.trim_matches(is_c_space).parse().ok()
}

/// Exactly three comma-separated `u32`s.
fn parse_dim3(text: &str) -> Option<[u32; 3]> {
    let mut parts = text.split(',');
    let dims = [parse_u32(parts.next()?)?, parse_u32(parts.next()?)?, parse_u32(parts.next()?)?];
    parts.next().is_none().then_some(dims)
}

/// Whether an op (by TF op name) is of a kind that can use TensorCores (convolutions,
/// matrix multiplications, cuDNN RNNs, XLA dots). Not exhaustive, as in XProf.
pub fn op_tensor_core_eligible(op_name: &str) -> bool {
    TENSOR_CORE_OP_SUFFIXES.iter().any(|suffix| op_name.ends_with(suffix))
        || TENSOR_CORE_OP_SUBSTRINGS.iter().any(|part| op_name.contains(part))
}

/// Whether an einsum `equation` stat describes a two-operand contraction (`ab,bc->ac`),
/// which can use TensorCores.
pub fn einsum_tensor_core_eligible(equation: &str) -> bool {
    if equation.is_empty() {
        return false;
    }
    let mut sides = equation.split("->");
    match (sides.next(), sides.next(), sides.next()) {
        (Some(inputs), Some(_), None) => inputs.split(',').count() == 2,
        _ => false,
    }
}

/// The op name in a `tf_op` stat, as XProf's `ParseTfOpFullname` gives it
/// (`"model/dense/MatMul:MatMul"` → `"model/dense/MatMul"`; the whole string when it is
/// not a TensorFlow or JAX `name:type`, or is a tf.data iterator).
pub fn tf_op_name(tf_op_fullname: &str) -> &str {
    crate::tf_op::parse_tf_op(tf_op_fullname).name
}
