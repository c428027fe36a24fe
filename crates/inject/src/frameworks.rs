//! Whether this process belongs to a framework that runs its own CUPTI tracer. On the
//! H200 check (scripts/gpu_checks/README.md), CUPTI 13.0 allowed one subscriber: an
//! injection that subscribed first left torch.profiler with 0 kernels and XLA's tracer
//! with no GPU plane, and one that only enabled activities made Kineto receive its
//! buffers and corrupt the heap at exit. So where such a framework is loaded when CUDA
//! starts, the injection stays out and `mlprof run` drives the framework's own tracer.

use std::ffi::{CStr, c_int, c_void};

/// Shared objects whose presence means a framework CUPTI tracer may start, with the
/// framework's name (the last entry: a tool that loaded CUPTI before the driver loaded
/// this injection, such as a user's own injection).
const FRAMEWORK_LIBRARIES: &[(&str, &str)] = &[
    ("libtorch_cuda", "PyTorch (Kineto)"),
    ("libkineto", "PyTorch (Kineto)"),
    ("xla_cuda_plugin", "JAX (XLA's CUPTI tracer)"),
    ("xla_extension", "JAX (XLA's CUPTI tracer)"),
    ("/jaxlib/", "JAX (XLA's CUPTI tracer)"),
    ("libtensorflow_framework", "TensorFlow (XLA's CUPTI tracer)"),
    ("_pywrap_tensorflow_internal", "TensorFlow (XLA's CUPTI tracer)"),
    ("libcupti", OTHER_TOOL),
];

/// The name [`framework_tracer`] gives a libcupti loaded by something else.
pub const OTHER_TOOL: &str = "another tool";

/// The framework whose tracer owns CUPTI in this process, with the library that shows
/// it; `None` when no such library is loaded. The list's order decides which is named
/// (a PyTorch process also holds libcupti: it is named for PyTorch).
pub fn framework_tracer() -> Option<(&'static str, String)> {
    let mut loaded = Vec::new();
    for_each_loaded(|path| loaded.push(path.to_string()));
    FRAMEWORK_LIBRARIES
        .iter()
        .find_map(|(needle, name)| loaded.iter().find(|path| path.contains(needle)).map(|path| (*name, path.clone())))
}

/// The directory of the first loaded library whose file name starts with `prefix`.
pub fn loaded_library_dir(prefix: &str) -> Option<String> {
    let mut found = None;
    for_each_loaded(|path| {
        if found.is_none() {
            let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
            if file.starts_with(prefix) && !dir.is_empty() {
                found = Some(dir.to_string());
            }
        }
    });
    found
}

/// Calls `visit` with the path of every shared object loaded in the process.
fn for_each_loaded(mut visit: impl FnMut(&str)) {
    extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the `&mut dyn FnMut` passed below, alive for the call;
        // `info` is valid for the callback's duration, its name NUL-terminated or null.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            let visit = &mut *(data as *mut &mut dyn FnMut(&str));
            let name = (*info).dlpi_name;
            if !name.is_null()
                && let Ok(path) = CStr::from_ptr(name).to_str()
            {
                visit(path);
            }
        }));
        0
    }
    let mut visit: &mut dyn FnMut(&str) = &mut visit;
    // SAFETY: the callback only reads what the loader passes and calls `visit`.
    unsafe {
        libc::dl_iterate_phdr(Some(each), &mut visit as *mut &mut dyn FnMut(&str) as *mut c_void);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loaded_c_library_is_seen_and_no_framework_is() {
        assert!(loaded_library_dir("libc.so").is_some(), "libc is loaded in every test process");
        assert_eq!(framework_tracer(), None);
    }
}
