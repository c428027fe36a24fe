//! How Holistic Trace Analysis would read an XSpace GPU profile had it been written as
//! a PyTorch trace: GPU stream lines are HTA's streams, their kernels, copies and sets
//! get Kineto's categories, CUDA runtime and driver calls on host threads get theirs
//! (they carry the same `correlation_id` as the work they launched), and every other
//! host event is a CPU op.
//!
//! The one design decision to know: only the stream lines CUPTI collectors write
//! (`Stream #N…`, the line id being the stream) are streams; XProf's derived lines
//! (steps, XLA ops and modules, launch statistics) restate them and are left out, as a
//! Kineto trace has no such rows.

use mlprof_model::names::chrome::{
    CAT_CPU_OP, CAT_CUDA_DRIVER, CAT_CUDA_RUNTIME, CAT_GPU_MEMCPY, CAT_GPU_MEMSET, CAT_KERNEL,
};
use mlprof_model::{Line, Plane};

/// The prefix of the stream lines CUPTI collectors write (`Stream #7(Kernel)`).
const STREAM_LINE_PREFIX: &str = "Stream #";

/// Per event metadata of `plane`, the category HTA would read (every event is a
/// complete one).
pub(crate) fn categories(plane: &Plane) -> Vec<Option<(&'static str, Option<&'static str>)>> {
    let gpu = plane.is_gpu();
    plane
        .event_metadata
        .iter()
        .map(|metadata| Some((if gpu { gpu_category(&metadata.name) } else { host_category(&metadata.name) }, None)))
        .collect()
}

/// The stream of `line`'s events: its id for a CUPTI stream line of a GPU plane; no
/// stream (CPU rows) on host lines; `None` for GPU lines HTA would not see.
pub(crate) fn line_stream(plane: &Plane, line: &Line) -> Option<Option<i64>> {
    if !plane.is_gpu() {
        return Some(None);
    }
    line.name.starts_with(STREAM_LINE_PREFIX).then_some(Some(line.id))
}

fn gpu_category(name: &str) -> &'static str {
    if name.starts_with("Memcpy") {
        CAT_GPU_MEMCPY
    } else if name.starts_with("Memset") {
        CAT_GPU_MEMSET
    } else {
        CAT_KERNEL
    }
}

fn host_category(name: &str) -> &'static str {
    if name.starts_with("cuda") {
        CAT_CUDA_RUNTIME
    } else if name.len() > 2 && name.starts_with("cu") && name.as_bytes()[2].is_ascii_uppercase() {
        CAT_CUDA_DRIVER
    } else {
        CAT_CPU_OP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_give_kinetos_categories() {
        assert_eq!(gpu_category("MemcpyH2D"), CAT_GPU_MEMCPY);
        assert_eq!(gpu_category("Memset"), CAT_GPU_MEMSET);
        assert_eq!(gpu_category("add_parallel(int, float*, float*)"), CAT_KERNEL);
        assert_eq!(host_category("cudaLaunchKernel"), CAT_CUDA_RUNTIME);
        assert_eq!(host_category("cuLaunchKernel"), CAT_CUDA_DRIVER);
        assert_eq!(host_category("custom_op"), CAT_CPU_OP);
        assert_eq!(host_category("NVTX:step_1"), CAT_CPU_OP);
    }
}
