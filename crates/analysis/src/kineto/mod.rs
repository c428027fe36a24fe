//! The PyTorch (Kineto) vocabulary the TF-Profiler tools use on Kineto traces: which
//! events are steps, framework ops, launches, synchronisations, copies and DataLoader
//! waits, decided from each event's `cat` (a metadata stat the Kineto reader keeps)
//! and name. The tools map them onto XProf's categories; the mapping is written down
//! here once:
//!
//! | Kineto event | XProf meaning |
//! |---|---|
//! | `user_annotation` `ProfilerStep#N` (host) | the step marker of step N (a root event) |
//! | `cpu_op` (`aten::addmm`, `autograd::engine::…`) | a framework op: host compute, a row of `framework_op_stats` |
//! | `user_annotation` `enumerate(DataLoader)#…__next__` | the host waits for input ("Input", XProf's `IteratorGetNext`) |
//! | `cuda_runtime` / `cuda_driver` launch (`cudaLaunchKernel`, `cuLaunchKernel`, `cudaMemcpyAsync`, …) | kernel launch (XProf's `HostPrepare`) |
//! | `cuda_runtime` synchronisation (`cudaDeviceSynchronize`, `cudaStreamSynchronize`, `cudaEventSynchronize`, `cudaStreamWaitEvent`) | host runtime ("All others" when the device is idle) |
//! | `kernel` named `nccl…` | device collective communication |
//! | other `kernel` | device compute: 16-bit when the launching op's `Input type` has `c10::Half` / `c10::BFloat16` (or the kernel name says `fp16`/`bf16`/`half`), else 32-bit |
//! | `gpu_memcpy` `Memcpy HtoD (Pageable -> Device)` | host-to-device copy (source memory kept: pageable or pinned) |
//! | `gpu_memcpy` `Memcpy DtoH …`, `Memcpy DtoD …`, `Memcpy PtoP …` | device-to-host, device-to-device copies |
//! | `gpu_memset` | device compute (XProf counts memsets as compute) |
//! | `python_function`, other `user_annotation`, `Trace` | context only: not typed (they enclose whole steps) |
//! | `cpu_instant_event` `[memory]` | one allocation (`Bytes` > 0) or deallocation of `Device Type` / `Device Id` memory |
//!
//! Kernels join their launch by `correlation` (the reader's `correlation_id` stat) and
//! their CPU op by `External id`.

mod ops;

pub(crate) use ops::thread_ops;
pub use ops::{DRIVER_TYPE, DeviceKeys, KinetoOpIndex, RUNTIME_TYPE};

use mlprof_model::names::chrome;
use mlprof_model::{Event, Host, Plane, SourceFormat};

use crate::xstats;

/// The name prefix of PyTorch's per-step annotation (`ProfilerStep#12`).
pub const PROFILER_STEP_PREFIX: &str = "ProfilerStep#";

/// The name of PyTorch's memory instant events.
pub const MEMORY_EVENT: &str = "[memory]";

/// Whether `host` was read from a Kineto / Chrome trace.
pub fn is_kineto(host: &Host) -> bool {
    host.format == SourceFormat::Kineto
}

/// The step number of a `ProfilerStep#N` name.
pub fn profiler_step_number(name: &str) -> Option<i64> {
    name.strip_prefix(PROFILER_STEP_PREFIX)?.parse().ok()
}

/// The op type of a PyTorch op that has no type of its own: the library its name says
/// it comes from, the namespace before the last `::` of the name proper (`aten::mm` →
/// `aten`, `torch::autograd::CppNode<fbgemm::…>` → `torch::autograd`,
/// `autograd::engine::evaluate_function: AddmmBackward0` → `autograd::engine`),
/// [`OP_WITHOUT_LIBRARY`] for a name without one (`record_param_comms`).
pub fn op_library(name: &str) -> &str {
    let proper = name.split(['<', '(', ' ']).next().unwrap_or(name);
    proper.rsplit_once("::").map_or(OP_WITHOUT_LIBRARY, |(library, _)| library)
}

/// The op type of a PyTorch op whose name has no namespace.
pub const OP_WITHOUT_LIBRARY: &str = "op";

/// Whether `name` is autograd's backward pass as PyTorch's profiler records it
/// (`autograd::engine::evaluate_function: AddmmBackward0`, `AddmmBackward0`): the mark
/// of a training step, as gradient scopes are in TensorFlow and JAX.
pub fn is_backward_op(name: &str) -> bool {
    name.starts_with("autograd::engine::evaluate_function:")
        || name.trim_end_matches(|c: char| c.is_ascii_digit()).ends_with("Backward")
}

/// Whether a host's trace records a backward pass ([`is_backward_op`]) on its
/// `/host:CPU` plane.
pub fn records_backward(host: &Host) -> bool {
    is_kineto(host)
        && host
            .plane(mlprof_model::names::HOST_PLANE)
            .is_some_and(|plane| plane.event_metadata.iter().any(|metadata| is_backward_op(&metadata.name)))
}

/// Whether `name` is the DataLoader's `__next__` as the profiler records it
/// (`enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`, the
/// multiprocessing iterator's, or a custom loader's `enumerate(...)#...__next__`).
pub fn is_dataloader_next(name: &str) -> bool {
    name.starts_with("enumerate(DataLoader)") || (name.starts_with("enumerate(") && name.ends_with(".__next__"))
}

/// Whether `name` is the multiprocessing DataLoader's `__next__` (workers produce
/// batches in other processes; the main process only waits).
pub fn is_multiprocess_dataloader(name: &str) -> bool {
    name.contains("MultiProcessingDataLoaderIter")
}

/// Whether `name` is a runtime or driver call that enqueues work on a GPU stream:
/// kernel launches (CUDA runtime and driver, HIP, graphs) and async copies / sets.
pub fn is_launch(name: &str) -> bool {
    const LAUNCHES: [&str; 14] = [
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cudaLaunchCooperativeKernelMultiDevice",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
        "cudaGraphLaunch",
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipGraphLaunch",
        "cudaLaunchHostFunc",
    ];
    LAUNCHES.contains(&name) || is_async_copy_call(name)
}

/// Whether `name` is an asynchronous copy or memset call (`cudaMemcpyAsync`,
/// `cudaMemsetAsync`, their `hip`/driver forms).
pub fn is_async_copy_call(name: &str) -> bool {
    let base = name.trim_end_matches("_v2").trim_end_matches("_ptds").trim_end_matches("_ptsz");
    base.ends_with("Async")
        && ["cudaMemcpy", "cudaMemset", "hipMemcpy", "hipMemset", "cuMemcpy", "cuMemset"]
            .iter()
            .any(|prefix| base.starts_with(prefix))
}

/// Whether `name` is a synchronous copy or memset call (`cudaMemcpy`, `cudaMemset`,
/// `cudaMemcpy2D`, …: they block the host thread until done).
pub fn is_sync_copy_call(name: &str) -> bool {
    ["cudaMemcpy", "cudaMemset", "hipMemcpy", "hipMemset", "cuMemcpy", "cuMemset"]
        .iter()
        .any(|prefix| name.starts_with(prefix))
        && !is_async_copy_call(name)
}

/// Whether `name` is a call that blocks the host until device work completes.
pub fn is_sync_call(name: &str) -> bool {
    const SYNCS: [&str; 8] = [
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaStreamWaitEvent",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "hipDeviceSynchronize",
    ];
    SYNCS.contains(&name) || name == "hipStreamSynchronize" || name == "hipEventSynchronize"
}

/// Whether `name` is a synchronisation call that blocks the calling host thread until
/// device work completes ([`is_sync_call`] without the stream-ordered waits
/// `cudaStreamWaitEvent` / `cuStreamWaitEvent` / `hipStreamWaitEvent`, which only make
/// a stream wait and return at once).
pub fn is_blocking_sync_call(name: &str) -> bool {
    is_sync_call(name) && !name.ends_with("StreamWaitEvent")
}

/// Whether a copy or memset call `name` sets memory (`cudaMemsetAsync`,
/// `cuMemsetD32_v2`, `hipMemset`) rather than copying it.
pub fn is_memset_call(name: &str) -> bool {
    ["cudaMemset", "hipMemset", "cuMemset"].iter().any(|prefix| name.starts_with(prefix))
}

/// Whether `name` is PyTorch's optimizer annotation (`Optimizer.step#SGD.step`,
/// `Optimizer.zero_grad#SGD.zero_grad`) or a Python frame in `torch/optim/`.
pub fn is_optimizer(name: &str) -> bool {
    name.starts_with("Optimizer.step#") || name.starts_with("Optimizer.zero_grad#") || name.contains("torch/optim/")
}

/// Whether `name` is a Python frame of the DataLoader's iterator
/// (`torch/utils/data/dataloader.py(631): __next__`), as `with_stack=True` records it.
pub fn is_dataloader_frame(name: &str) -> bool {
    name.contains("torch/utils/data/") && name.contains("__next__")
}

/// Kineto's event categories (`cat`) the tools distinguish.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Category {
    /// `cpu_op`: an ATen / framework op.
    CpuOp,
    /// `user_annotation`: `record_function` ranges, `ProfilerStep#N`, DataLoader, optimizer.
    UserAnnotation,
    /// `python_function`: a Python stack frame (`with_stack=True`).
    PythonFunction,
    /// `cuda_runtime`: a CUDA runtime call.
    CudaRuntime,
    /// `cuda_driver`: a CUDA driver call.
    CudaDriver,
    /// `kernel` (or `Kernel`): a GPU kernel.
    Kernel,
    /// `gpu_memcpy`: a copy on a GPU stream.
    GpuMemcpy,
    /// `gpu_memset`: a memset on a GPU stream.
    GpuMemset,
    /// `cuda_sync`: a synchronisation the GPU records (`Event Sync`, `Context Sync`).
    CudaSync,
    /// `gpu_user_annotation`: a `record_function` range projected on a stream.
    GpuUserAnnotation,
    /// `cpu_instant_event`: instants such as `[memory]`.
    CpuInstant,
    /// Anything else (`Trace`, `ac2g`, flow events, unknown categories).
    Other,
}

impl Category {
    /// The category named `cat`.
    pub fn from_cat(cat: &str) -> Category {
        match cat {
            chrome::CAT_CPU_OP | chrome::CAT_OPERATOR => Category::CpuOp,
            chrome::CAT_USER_ANNOTATION => Category::UserAnnotation,
            chrome::CAT_PYTHON_FUNCTION => Category::PythonFunction,
            chrome::CAT_CUDA_RUNTIME | chrome::CAT_RUNTIME => Category::CudaRuntime,
            chrome::CAT_CUDA_DRIVER => Category::CudaDriver,
            chrome::CAT_KERNEL | chrome::CAT_KERNEL_LEGACY => Category::Kernel,
            chrome::CAT_GPU_MEMCPY | chrome::CAT_MEMCPY_LEGACY => Category::GpuMemcpy,
            chrome::CAT_GPU_MEMSET | chrome::CAT_MEMSET_LEGACY => Category::GpuMemset,
            chrome::CAT_CUDA_SYNC => Category::CudaSync,
            chrome::CAT_GPU_USER_ANNOTATION => Category::GpuUserAnnotation,
            chrome::CAT_CPU_INSTANT_EVENT => Category::CpuInstant,
            _ => Category::Other,
        }
    }
}

/// The [`Category`] of every event metadata of `plane` (indexed like
/// `plane.event_metadata`), from its `cat` metadata stat.
pub fn categories(plane: &Plane) -> Vec<Category> {
    let key = plane.find_stat_key(chrome::CAT_STAT);
    plane
        .event_metadata
        .iter()
        .map(|metadata| {
            let cat = key.and_then(|key| {
                let stat = plane.metadata_stats_of(metadata).iter().find(|stat| stat.key() == key)?;
                xstats::as_str(plane, &plane.metadata_stats, stat.value())
            });
            cat.map_or(Category::Other, Category::from_cat)
        })
        .collect()
}

/// The category of `event` in a table from [`categories`].
pub fn category_of(table: &[Category], event: &Event<'_>) -> Category {
    table.get(event.metadata_index() as usize).copied().unwrap_or(Category::Other)
}

/// Direction of a GPU memory copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum CopyDirection {
    /// Host to device (`HtoD`).
    HostToDevice,
    /// Device to host (`DtoH`).
    DeviceToHost,
    /// Device to device, same device (`DtoD`).
    DeviceToDevice,
    /// Peer to peer, between devices (`PtoP`).
    PeerToPeer,
    /// Host to host (`HtoH`).
    HostToHost,
}

/// The kind of memory on one side of a copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum MemoryKind {
    /// Pageable host memory: the driver stages it through a pinned buffer and the copy
    /// is synchronous with respect to the host.
    Pageable,
    /// Pinned (page-locked) host memory.
    Pinned,
    /// Device memory.
    Device,
    /// Managed (unified) memory.
    Managed,
    /// Anything else the name says (`Array`, unknown).
    Other,
}

/// A GPU copy as its Kineto name describes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Copy {
    /// Direction.
    pub direction: CopyDirection,
    /// Source memory.
    pub source: MemoryKind,
    /// Destination memory.
    pub destination: MemoryKind,
}

impl Copy {
    /// Whether host memory on either side is pageable (the copy should use pinned
    /// memory).
    pub fn is_pageable(&self) -> bool {
        self.source == MemoryKind::Pageable || self.destination == MemoryKind::Pageable
    }
}

/// Parses a Kineto copy name: `Memcpy HtoD (Pageable -> Device)`, `Memcpy DtoD
/// (Device -> Device)`, also CUPTI/XProf's `MemcpyH2D` spellings (memory kinds then
/// unknown: [`MemoryKind::Other`] on the host side).
pub fn parse_copy(name: &str) -> Option<Copy> {
    let rest = name.strip_prefix("Memcpy")?.trim_start();
    let (code, kinds) = match rest.find(' ') {
        Some(space) => (&rest[..space], rest[space..].trim()),
        None => (rest, ""),
    };
    let direction = match code {
        "HtoD" | "H2D" => CopyDirection::HostToDevice,
        "DtoH" | "D2H" => CopyDirection::DeviceToHost,
        "DtoD" | "D2D" => CopyDirection::DeviceToDevice,
        "PtoP" | "P2P" => CopyDirection::PeerToPeer,
        "HtoH" | "H2H" => CopyDirection::HostToHost,
        _ => return None,
    };
    let kind = |text: &str| match text.trim() {
        "Pageable" => MemoryKind::Pageable,
        "Pinned" => MemoryKind::Pinned,
        "Device" => MemoryKind::Device,
        "Managed" => MemoryKind::Managed,
        _ => MemoryKind::Other,
    };
    let inner = kinds.strip_prefix('(').and_then(|k| k.strip_suffix(')'));
    let (source, destination) = match inner.and_then(|k| k.split_once("->")) {
        Some((source, destination)) => (kind(source), kind(destination)),
        None => match direction {
            CopyDirection::HostToDevice => (MemoryKind::Other, MemoryKind::Device),
            CopyDirection::DeviceToHost => (MemoryKind::Device, MemoryKind::Other),
            CopyDirection::HostToHost => (MemoryKind::Other, MemoryKind::Other),
            _ => (MemoryKind::Device, MemoryKind::Device),
        },
    };
    Some(Copy { direction, source, destination })
}

/// Whether an ATen `Input type` list names a 16-bit floating-point dtype.
pub fn is_16bit_dtype_list(input_types: &str) -> bool {
    input_types.contains("c10::Half") || input_types.contains("c10::BFloat16")
}

/// Whether a kernel name says it computes in 16-bit floating point.
pub fn is_16bit_kernel_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    lower.contains("fp16") || lower.contains("bf16") || lower.contains("half") || lower.contains("bfloat16")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ops_library_is_its_namespace() {
        assert_eq!(op_library("aten::mm"), "aten");
        assert_eq!(
            op_library("torch::autograd::CppNode<fbgemm_gpu::Permute<&fbgemm_gpu::permute> >"),
            "torch::autograd"
        );
        assert_eq!(op_library("autograd::engine::evaluate_function: AddmmBackward0"), "autograd::engine");
        assert_eq!(op_library("record_param_comms"), OP_WITHOUT_LIBRARY);
        assert_eq!(op_library("AddmmBackward0"), OP_WITHOUT_LIBRARY);
    }

    #[test]
    fn copies_are_parsed_with_their_memory_kinds() {
        let copy = parse_copy("Memcpy HtoD (Pageable -> Device)").unwrap();
        assert_eq!(copy.direction, CopyDirection::HostToDevice);
        assert!(copy.is_pageable());
        let copy = parse_copy("Memcpy DtoH (Device -> Pinned)").unwrap();
        assert_eq!((copy.direction, copy.destination), (CopyDirection::DeviceToHost, MemoryKind::Pinned));
        assert!(!copy.is_pageable());
        assert_eq!(parse_copy("MemcpyD2D").unwrap().direction, CopyDirection::DeviceToDevice);
        assert_eq!(parse_copy("Memset (Device)"), None);
        assert_eq!(parse_copy("Memcpy sideways"), None);
    }

    #[test]
    fn runtime_calls_are_told_apart() {
        assert!(is_launch("cudaLaunchKernel") && is_launch("cudaMemcpyAsync") && is_launch("cuLaunchKernelEx"));
        assert!(!is_launch("cudaStreamSynchronize") && !is_launch("cudaMemcpy"));
        assert!(
            is_sync_copy_call("cudaMemcpy") && is_sync_copy_call("cudaMemset") && !is_sync_copy_call("cudaMemcpyAsync")
        );
        assert!(is_sync_call("cudaStreamSynchronize") && !is_sync_call("cudaLaunchKernel"));
        assert!(is_blocking_sync_call("cuStreamSynchronize") && !is_blocking_sync_call("cudaStreamWaitEvent"));
        assert!(is_memset_call("cudaMemsetAsync") && is_memset_call("cuMemsetD32_v2") && !is_memset_call("cudaMemcpy"));
        assert!(is_optimizer("Optimizer.step#SGD.step") && is_optimizer("torch/optim/adam.py(213): step"));
        assert!(!is_optimizer("aten::add_"));
        assert!(is_dataloader_frame("torch/utils/data/dataloader.py(631): __next__"));
    }

    #[test]
    fn steps_and_dataloader_names() {
        assert_eq!(profiler_step_number("ProfilerStep#1009"), Some(1009));
        assert_eq!(profiler_step_number("ProfilerStep#x"), None);
        assert!(is_dataloader_next("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"));
        assert!(is_multiprocess_dataloader("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"));
        assert!(!is_dataloader_next("torch/utils/data/dataloader.py(720): __next__"));
        assert!(is_16bit_dtype_list("[\"c10::Half\", \"float\"]") && !is_16bit_dtype_list("[\"float\"]"));
    }
}
