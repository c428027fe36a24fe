//! Well-known Chrome trace names: the `ph` (phase) values of the Trace Event Format,
//! the `cat` (category) names PyTorch's Kineto profiler writes, and the metadata stats
//! the Kineto reader keeps an event's `cat` and `ph` in.
//!
//! The one thing to know: these are spellings, not rules. Which categories are GPU
//! activity, which phases are events, is decided where it is used (the Kineto reader,
//! the timeline, the tools); this module only makes every crate spell the names alike.

/// Event-metadata stat holding a Chrome event's `cat`.
pub const CAT_STAT: &str = "cat";
/// Event-metadata stat holding a Chrome event's `ph` (absent for [`PH_COMPLETE`]).
pub const PH_STAT: &str = "ph";

/// `ph` of a complete event: a slice with a start (`ts`) and a duration (`dur`).
pub const PH_COMPLETE: &str = "X";
/// `ph` of a metadata record (`process_name`, `thread_name`, …), not an event.
pub const PH_METADATA: &str = "M";
/// `ph` of an instant event.
pub const PH_INSTANT: &str = "i";
/// `ph` of a counter event.
pub const PH_COUNTER: &str = "C";
/// `ph` of a flow's start (the arrow's tail).
pub const PH_FLOW_START: &str = "s";
/// `ph` of a flow's intermediate step.
pub const PH_FLOW_STEP: &str = "t";
/// `ph` of a flow's end (the arrow's head).
pub const PH_FLOW_END: &str = "f";
/// A flow end's `bp` (binding point) that binds it to the enclosing slice rather than
/// the next one.
pub const BINDING_ENCLOSING: &str = "e";

/// `cat` of an ATen operator on a host thread.
pub const CAT_CPU_OP: &str = "cpu_op";
/// `cat` of older traces' host operators ([`CAT_CPU_OP`]).
pub const CAT_OPERATOR: &str = "Operator";
/// `cat` of a `record_function` range on a host thread (`ProfilerStep#N`, DataLoader).
pub const CAT_USER_ANNOTATION: &str = "user_annotation";
/// `cat` of a Python function frame (with `with_stack`).
pub const CAT_PYTHON_FUNCTION: &str = "python_function";
/// `cat` of a CUDA runtime call (`cudaLaunchKernel`, `cudaMemcpyAsync`, …).
pub const CAT_CUDA_RUNTIME: &str = "cuda_runtime";
/// `cat` of older traces' runtime calls ([`CAT_CUDA_RUNTIME`]).
pub const CAT_RUNTIME: &str = "Runtime";
/// `cat` of a CUDA driver call (`cuLaunchKernel`, …).
pub const CAT_CUDA_DRIVER: &str = "cuda_driver";
/// `cat` of a GPU kernel.
pub const CAT_KERNEL: &str = "kernel";
/// `cat` of older traces' GPU kernels ([`CAT_KERNEL`]).
pub const CAT_KERNEL_LEGACY: &str = "Kernel";
/// `cat` of a GPU memory copy.
pub const CAT_GPU_MEMCPY: &str = "gpu_memcpy";
/// `cat` of older traces' GPU memory copies ([`CAT_GPU_MEMCPY`]).
pub const CAT_MEMCPY_LEGACY: &str = "Memcpy";
/// `cat` of a GPU memset.
pub const CAT_GPU_MEMSET: &str = "gpu_memset";
/// `cat` of older traces' GPU memsets ([`CAT_GPU_MEMSET`]).
pub const CAT_MEMSET_LEGACY: &str = "Memset";
/// `cat` of a `record_function` range projected on a GPU stream.
pub const CAT_GPU_USER_ANNOTATION: &str = "gpu_user_annotation";
/// `cat` of a CUDA synchronisation recorded on the device side.
pub const CAT_CUDA_SYNC: &str = "cuda_sync";
/// `cat` of an MTIA device activity.
pub const CAT_MTIA_CCP_EVENTS: &str = "mtia_ccp_events";
/// `cat` of host instants such as PyTorch's `[memory]` events.
pub const CAT_CPU_INSTANT_EVENT: &str = "cpu_instant_event";
/// `cat` of the profiler's own span over the whole trace.
pub const CAT_TRACE: &str = "Trace";
/// `cat` (and name) of PyTorch's forward → backward flow events.
pub const CAT_FWDBWD: &str = "fwdbwd";
/// `cat` (and name) of Kineto's launch → GPU activity flow events.
pub const CAT_AC2G: &str = "ac2g";
/// `cat` (and name) of the flow events mlprof writes between the host and device
/// events of one `correlation_id` when writing an XSpace as a Chrome trace.
pub const CAT_FLOW: &str = "flow";
