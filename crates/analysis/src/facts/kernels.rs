//! The kernel launches of a host's GPUs, as every source states them: one
//! [`KernelLaunch`] per kernel run, with its launch configuration and the framework op
//! that launched it. The kernel statistics read these and nothing of the format.

use serde::Serialize;

/// One kernel run on a GPU, with what launched it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct KernelLaunch<'h> {
    /// Kernel name (the device event's name, usually a mangled or library symbol).
    pub name: &'h str,
    /// Launch configuration.
    pub params: LaunchParams,
    /// Duration, picoseconds (always positive).
    pub duration_ps: i64,
    /// The framework op that launched it (TF / JAX op name, ATen op), "" when unknown.
    pub op_name: &'h str,
    /// Whether the kernel's name says it runs on TensorCores ([`kernel_uses_tensor_core`]).
    pub uses_tensor_core: bool,
    /// Whether the launching op could use TensorCores, by the framework's rule.
    pub op_tensor_core_eligible: bool,
}

impl<'h> KernelLaunch<'h> {
    /// A launch of kernel `name` for `op_name`, whose op is TensorCore eligible when
    /// `op_eligible`, given whether the kernel uses TensorCores, says so.
    pub fn new(
        name: &'h str,
        params: LaunchParams,
        duration_ps: i64,
        op_name: &'h str,
        op_eligible: impl FnOnce(bool) -> bool,
    ) -> KernelLaunch<'h> {
        let uses_tensor_core = kernel_uses_tensor_core(name);
        KernelLaunch {
            name,
            params,
            duration_ps,
            op_name,
            uses_tensor_core,
            op_tensor_core_eligible: op_eligible(uses_tensor_core),
        }
    }
}

/// A kernel's launch configuration (XSpace: its `kernel_details` stat; Kineto: its
/// launch args).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LaunchParams {
    /// Registers per thread (0 when not given).
    pub registers_per_thread: u32,
    /// Static shared memory per block in bytes (0 when not given).
    pub static_shmem_bytes: u32,
    /// Dynamic shared memory per block in bytes (0 when not given).
    pub dynamic_shmem_bytes: u32,
    /// Threads per block, x/y/z (1,1,1 when not given or malformed).
    pub block_dim: [u32; 3],
    /// Blocks per grid, x/y/z (1,1,1 when not given or malformed).
    pub grid_dim: [u32; 3],
    /// Theoretical occupancy in percent (0 when not given); single precision, as XProf
    /// stores it.
    pub occupancy_pct: f32,
}

impl Default for LaunchParams {
    fn default() -> Self {
        LaunchParams {
            registers_per_thread: 0,
            static_shmem_bytes: 0,
            dynamic_shmem_bytes: 0,
            block_dim: [1; 3],
            grid_dim: [1; 3],
            occupancy_pct: 0.0,
        }
    }
}

/// Substrings of kernel names that mark TensorCore kernels (`volta_h884gemm…`,
/// `turing_fp16_s1688cudnn…`, `sm80_xmma_gemm…`), as XProf lists them.
const TENSOR_CORE_KERNEL_PATTERNS: [&str; 19] = [
    "16816",
    "c1688",
    "conv1x1",
    "conv2d_c1_k1",
    "dgrad_1x1_stride_2x2",
    "direct_group",
    "first_layer_wgrad_kernel",
    "h1688",
    "h884",
    "hmma",
    "i16832",
    "i8816",
    "s884",
    "s1688",
    "xmma_gemm",
    "xmma_implicit_gemm",
    "xmma_sparse_conv",
    "xmma_sparse_gemm",
    "xmma_warp_specialized_implicit_gemm",
];

/// Whether a kernel's name says it runs on TensorCores.
pub fn kernel_uses_tensor_core(kernel_name: &str) -> bool {
    TENSOR_CORE_KERNEL_PATTERNS.iter().any(|pattern| kernel_name.contains(pattern))
}
