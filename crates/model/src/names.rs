//! Well-known plane, line and stat names, spelled exactly as XProf spells them
//! (`xla/tsl/profiler/utils/xplane_schema.cc`), so profiles and tools agree; Chrome
//! trace phases and Kineto categories in [`chrome`], what mlprof samples in [`sampled`].

pub mod chrome;
pub mod memory_snapshot;
pub mod sampled;

/// Host threads (TraceMe, CUPTI API callbacks, Python tracer), one line per thread.
pub const HOST_PLANE: &str = "/host:CPU";
/// Prefix of GPU device planes (`/device:GPU:0`).
pub const GPU_PLANE_PREFIX: &str = "/device:GPU:";
/// Prefix of TPU device planes.
pub const TPU_PLANE_PREFIX: &str = "/device:TPU:";
/// Prefix of custom device planes.
pub const CUSTOM_PLANE_PREFIX: &str = "/device:CUSTOM:";
/// Prefix of planes for accelerators that are neither GPU nor TPU, as mlprof names them
/// (`/device:MTIA:0` for Meta's MTIA in Kineto traces).
pub const DEVICE_PLANE_PREFIX: &str = "/device:";
/// Plane with HLO protos and framework versions (JAX/XLA).
pub const METADATA_PLANE: &str = "/host:metadata";
/// Plane holding the profile's start/stop time and options.
pub const TASK_ENVIRONMENT_PLANE: &str = "Task Environment";

/// Line of derived steps.
pub const STEPS_LINE: &str = "Steps";

/// Whether XProf gives line `id` to the lines it derives (`0xdeadbeef` and the 389 ids
/// after it: steps, launch stats, name scopes, ops, modules, source, host offload,
/// host XLA regions and the per-stream device lines). Like XProf's `IsDerivedThreadId`,
/// it reads the id as a 32-bit `int`.
pub fn is_derived_line_id(id: i64) -> bool {
    const DERIVED_MIN: i32 = 0xdead_beef_u32 as i32;
    const DERIVED_MAX: i32 = DERIVED_MIN + 389;
    (DERIVED_MIN..=DERIVED_MAX).contains(&(id as i32))
}
/// Line of asynchronous XLA ops (skipped by XProf's trace viewer).
pub const ASYNC_XLA_OPS_LINE: &str = "Async XLA Ops";

/// `Task Environment` stat: profile start, Unix epoch nanoseconds.
pub const PROFILE_START_TIME: &str = "profile_start_time";
/// `Task Environment` stat: profile stop, Unix epoch nanoseconds.
pub const PROFILE_STOP_TIME: &str = "profile_stop_time";

/// Correlates a CUDA API call with the kernel or copy it launched.
pub const CORRELATION_ID: &str = "correlation_id";
/// A step's name, shown instead of the event name in the trace viewer.
pub const STEP_NAME: &str = "step_name";
/// Device ordinal of a device event.
pub const DEVICE_ID: &str = "device_id";
/// CUDA context of a device event.
pub const CONTEXT_ID: &str = "context_id";

/// `/host:metadata` stat naming the tool that recorded a profile, when mlprof wrote it.
pub const PROFILER_STAT: &str = "profiler";
/// [`PROFILER_STAT`] of a profile `mlprof run` recorded with its CUPTI injection: a CUDA
/// program's activity, with no framework's events.
pub const MLPROF_INJECT: &str = "mlprof-inject";
/// [`PROFILER_STAT`] of an Nsight Systems export read into the XSpace layout: CUDA
/// activity of any program, framework or not, as for [`MLPROF_INJECT`].
pub const NSYS: &str = "nsys";

/// Stat of an event that is the root of a step group (XProf's `_r`, `kIsRoot`), an integer
/// level.
pub const IS_ROOT: &str = "_r";

/// Stat of a step event holding its step number (XProf's `step_num`).
pub const STEP_NUM: &str = "step_num";

/// Stats XProf hides from trace-viewer args (`IsInternalStat`).
pub const INTERNAL_STATS: &[&str] = &["_pt", "_p", "_ct", "_c", "_r", "flops", "program_id", "symbol_id"];

/// Stat names users look for first; `mlprof info` reports which of them a plane has.
pub const WELL_KNOWN_STATS: &[&str] = &[
    "step_num",
    "iter_num",
    "step_id",
    "group_id",
    "_r",
    "_p",
    "_c",
    "correlation_id",
    "External id",
    "kernel_details",
    "memcpy_details",
    "grid",
    "block",
    "registers per thread",
    "shared memory",
    "bytes",
    "memory bandwidth (GB/s)",
    "stream",
    "device_id",
    "tf_op",
    "hlo_op",
    "hlo_module",
    "program_id",
    "long_name",
    "Input Dims",
    "Total Allocated",
    "Total Reserved",
    "bytes_allocated",
    "bytes_reserved",
    "peak_bytes_in_use",
    "allocator_name",
    "_src",
    "Python id",
];

/// Device-capability plane stats (XSpace) that `mlprof info` shows as device properties.
pub const DEVICE_CAPABILITY_STATS: &[&str] = &[
    "gpu_device_name",
    "device_vendor",
    "clock_rate",
    "core_count",
    "memory_bandwidth",
    "memory_size",
    "compute_cap_major",
    "compute_cap_minor",
    "peak_teraflops_per_second",
    "peak_hbm_bw_gigabytes_per_second",
    "cuda_version",
    "cuda_runtime_version",
    "cuda_driver_version",
];

/// The device ordinal of a device plane name (`/device:GPU:3` → 3).
pub fn device_ordinal(plane_name: &str) -> Option<i64> {
    let rest = plane_name.strip_prefix(DEVICE_PLANE_PREFIX)?;
    let (_, ordinal) = rest.rsplit_once(':')?;
    ordinal.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn device_ordinals_parse() {
        assert_eq!(super::device_ordinal("/device:GPU:3"), Some(3));
        assert_eq!(super::device_ordinal("/host:CPU"), None);
        assert_eq!(super::device_ordinal("/device:TPU:0 SparseCore 1"), None);
    }
}
