//! The Kineto adapter (PyTorch's Chrome traces): facts read with the PyTorch
//! vocabulary of [`crate::kineto`].
//!
//! Kernel launches: only `kernel` events of the GPU planes (copies and memsets are not
//! kernels). Kineto has no `kernel_details` string: registers come from `registers per
//! thread`, shared memory from `shared memory` (Kineto's sum of static and dynamic
//! shared memory, kept as static), grid and block from the `grid` / `block` arrays, and
//! the occupancy from Kineto's `est. achieved occupancy %` (Kineto computes it on the
//! host with CUDA's occupancy calculator from the launch's block size, registers and
//! shared memory, capped by the blocks the grid has: XProf's theoretical occupancy,
//! limited to what the grid can fill; 0 where Kineto left it out, as on AMD GPUs). The
//! op is the `cpu_op` that launched the kernel ([`KinetoOpIndex`]: `External id`, else
//! the `cpu_op` around the launch with the same `correlation`), "" when none did; the
//! op is TensorCore eligible by [`aten_op_tensor_core_eligible`] or when the kernel
//! uses TensorCores.
//!
//! Devices: `deviceProperties` lists every GPU of the machine, each with its `name`.

mod activity;

use mlprof_model::{Event, Host, Plane, StatValue};

pub(super) use activity::view as activity_view;

use super::kernels::{KernelLaunch, LaunchParams};
use crate::kineto::{self, Category, KinetoOpIndex};
use crate::xstats::{self, StatKeys};

/// Kineto arg names read off kernels, in [`StatKeys`] order.
const STAT_NAMES: [&str; 5] = ["registers per thread", "shared memory", "grid", "block", "est. achieved occupancy %"];

/// ATen / autograd op names (normalised: lower case, no `_`, no namespace, no
/// `backward`/`forward` suffix) of ops that can run on TensorCores: matrix
/// multiplications, convolutions, attention, cuDNN RNNs and scaled / integer matmuls.
const TENSOR_CORE_OPS: [&str; 33] = [
    "mm",
    "addmm",
    "addmmactivation",
    "bmm",
    "baddbmm",
    "addbmm",
    "matmul",
    "linear",
    "einsum",
    "tensordot",
    "convolution",
    "convolutionoverrideable",
    "conv1d",
    "conv2d",
    "conv3d",
    "convtranspose1d",
    "convtranspose2d",
    "convtranspose3d",
    "cudnnconvolution",
    "cudnnconvolutiontranspose",
    "scaleddotproductattention",
    "scaleddotproductflashattention",
    "scaleddotproductefficientattention",
    "scaleddotproductcudnnattention",
    "flashattention",
    "efficientattention",
    "scaledmm",
    "intmm",
    "cudnnrnn",
    "lstm",
    "gru",
    "rnntanh",
    "rnnrelu",
];

/// Whether a PyTorch op can run on TensorCores, XProf's eligibility rule with the ATen
/// counterparts of its TensorFlow ops: `aten::mm`, `aten::addmm`, `aten::bmm`,
/// `aten::baddbmm`, `aten::matmul`, `aten::linear`, `aten::convolution` and `conv*`,
/// `aten::einsum`, `aten::scaled_dot_product_attention` and its flash / efficient /
/// cuDNN kernels, `aten::_scaled_mm`, `aten::_cudnn_rnn`, their backward ops and
/// autograd nodes (`autograd::engine::evaluate_function: AddmmBackward0`,
/// `ConvolutionBackward0`).
pub fn aten_op_tensor_core_eligible(op_name: &str) -> bool {
    let name = op_name.strip_prefix("autograd::engine::evaluate_function:").unwrap_or(op_name).trim();
    let name = name.rsplit("::").next().unwrap_or(name);
    let mut normalised: String = name.chars().filter(|c| *c != '_').map(|c| c.to_ascii_lowercase()).collect();
    // Autograd nodes end in a version number (`AddmmBackward0`).
    while normalised.ends_with(|c: char| c.is_ascii_digit()) {
        normalised.pop();
    }
    for suffix in ["backward", "forward"] {
        if let Some(stripped) = normalised.strip_suffix(suffix) {
            normalised.truncate(stripped.len());
        }
    }
    TENSOR_CORE_OPS.contains(&normalised.as_str())
}

/// Calls `each` with every kernel launch of the GPU planes of a Kineto `host` that has
/// a positive duration; returns the number of GPU planes.
pub(super) fn kernel_launches<'h>(host: &'h Host, each: &mut dyn FnMut(KernelLaunch<'h>)) -> usize {
    let index = KinetoOpIndex::new(host);
    let mut planes = 0;
    for plane in host.planes.iter().filter(|plane| plane.is_gpu()) {
        planes += 1;
        let categories = kineto::categories(plane);
        let keys = StatKeys::new(plane, STAT_NAMES);
        let device_keys = KinetoOpIndex::device_keys(plane);
        for line in &plane.lines {
            for event in line.iter() {
                let duration_ps = event.duration_ps();
                if duration_ps <= 0 || kineto::category_of(&categories, &event) != Category::Kernel {
                    continue;
                }
                let name = xstats::event_name(plane, &event);
                let op_name = index.op_of(plane, &device_keys, &event).unwrap_or("");
                let count = |i: usize| {
                    xstats::event_int(plane, &event, keys.key(i)).and_then(|v| u32::try_from(v).ok()).unwrap_or(0)
                };
                let occupancy_pct = xstats::event_stat(plane, &event, keys.key(4))
                    .and_then(xstats::as_f64)
                    .filter(|pct| pct.is_finite() && (0.0..=100.0).contains(pct))
                    .unwrap_or(0.0);
                let params = LaunchParams {
                    registers_per_thread: count(0),
                    static_shmem_bytes: count(1),
                    dynamic_shmem_bytes: 0,
                    block_dim: dim3(&event, keys.key(3)).unwrap_or([1; 3]),
                    grid_dim: dim3(&event, keys.key(2)).unwrap_or([1; 3]),
                    occupancy_pct: occupancy_pct as f32,
                };
                each(KernelLaunch::new(name, params, duration_ps, op_name, |uses_tensor_core| {
                    !op_name.is_empty() && (aten_op_tensor_core_eligible(op_name) || uses_tensor_core)
                }));
            }
        }
    }
    planes
}

/// The name the trace gives the GPU of device plane `plane` (`deviceProperties`' `name`).
pub(super) fn device_name(plane: &Plane) -> Option<&str> {
    plane.plane_stat("gpu_device_name").and_then(|value| xstats::as_str(plane, &plane.metadata_stats, value))
}

/// A Kineto `[x, y, z]` arg of `event` (raw JSON text): exactly three integers that
/// fit in `u32`.
fn dim3(event: &Event<'_>, key: Option<u32>) -> Option<[u32; 3]> {
    let text = match xstats::find(event.stats(), key)? {
        StatValue::Json(text) | StatValue::Str(text) => event.store().text(text),
        _ => return None,
    };
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    let mut parts = inner.split(',').map(|part| part.trim().parse::<u32>().ok());
    let dims = [parts.next()??, parts.next()??, parts.next()??];
    parts.next().is_none().then_some(dims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aten_matmuls_convolutions_and_attention_are_eligible() {
        for name in [
            "aten::mm",
            "aten::addmm",
            "aten::bmm",
            "aten::baddbmm",
            "aten::matmul",
            "aten::linear",
            "aten::convolution",
            "aten::cudnn_convolution",
            "aten::conv2d",
            "aten::convolution_backward",
            "aten::einsum",
            "aten::_scaled_dot_product_flash_attention",
            "aten::_scaled_dot_product_efficient_attention_backward",
            "aten::_flash_attention_forward",
            "aten::_scaled_mm",
            "autograd::engine::evaluate_function: AddmmBackward0",
            "ConvolutionBackward0",
            "MmBackward0",
        ] {
            assert!(aten_op_tensor_core_eligible(name), "{name}");
        }
        for name in ["aten::add", "aten::relu", "aten::copy_", "aten::mean", "aten::addmv", "aten::mul", "", "::"] {
            assert!(!aten_op_tensor_core_eligible(name), "{name}");
        }
    }

    /// Name, op, op eligible, kernel uses TensorCores, registers, shared memory, grid,
    /// block, total ns.
    type KernelRow<'a> = (&'a str, &'a str, bool, bool, u32, u32, [u32; 3], [u32; 3], u64);

    #[test]
    fn kernels_get_their_launch_arguments_and_op() {
        let host = crate::op_metrics::kineto_tests::sample_host();
        let stats = crate::kernel_stats::analyze(&[&host]);
        let rows: Vec<KernelRow<'_>> = stats
            .kernels
            .iter()
            .map(|k| {
                (
                    k.name.as_str(),
                    k.op_name.as_str(),
                    k.is_op_tensor_core_eligible,
                    k.is_kernel_using_tensor_core,
                    k.registers_per_thread,
                    k.shmem_bytes(),
                    k.grid_dim,
                    k.block_dim,
                    k.total_duration_ns,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("sm80_xmma_gemm_f32", "aten::addmm", true, true, 128, 4096, [4, 2, 1], [256, 1, 1], 30_000),
                ("gemm2", "aten::linear", true, false, 64, 0, [1, 1, 1], [128, 1, 1], 10_000),
                // A malformed grid and a two-number block keep XProf's defaults.
                ("mul_kernel", "aten::mul", false, false, 16, 0, [1, 1, 1], [1, 1, 1], 5_000),
                ("orphan", "", false, false, 0, 0, [1, 1, 1], [1, 1, 1], 5_000),
            ]
        );
        assert_eq!(stats.gpu_planes, 1);
    }
}
