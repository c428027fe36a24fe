//! NVTX ranges: `mlprof run` points `NVTX_INJECTION64_PATH` at this library, and the
//! NVTX library in the job calls [`InitializeInjectionNvtx2`] at the job's first NVTX
//! call. mlprof hands that call on to libcupti's own NVTX entry point (what NVIDIA's
//! documentation asks `NVTX_INJECTION64_PATH` to name), so CUPTI records the ranges as
//! MARKER activity. In a process a framework tracer owns (see [`crate::frameworks`]),
//! or without `mlprof run`, it declines (returns 0): NVTX then turns its calls into
//! no-ops, as it does with no injection at all.

use std::ffi::c_void;

/// NVTX's `NvtxGetExportTableFunc_t`.
type GetExportTable = unsafe extern "C" fn(u32) -> *const c_void;
/// `InitializeInjectionNvtx2`'s type.
type InitializeNvtx = unsafe extern "C" fn(GetExportTable) -> i32;

/// Called by the NVTX library at the job's first NVTX call. Returns libcupti's answer
/// (non-zero: NVTX calls go to CUPTI), or 0 when mlprof does not record this process.
///
/// # Safety
/// Called by NVTX with its export-table accessor, which is passed on unchanged.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn InitializeInjectionNvtx2(get_export_table: GetExportTable) -> i32 {
    std::panic::catch_unwind(|| forward(get_export_table)).unwrap_or(0)
}

fn forward(get_export_table: GetExportTable) -> i32 {
    if std::env::var_os("MLPROF_INJECT_SOCKET").is_none_or(|s| s.is_empty()) {
        return 0;
    }
    // After `cuInit`, NVTX goes to CUPTI only where the injection records.
    if crate::recorder::started() && crate::recorder::current().is_none() {
        crate::log(|| "NVTX: declined (the injection stayed out of CUPTI)".to_string());
        return 0;
    }
    let beside_frameworks = std::env::var_os("MLPROF_INJECT_FRAMEWORKS").is_some_and(|v| v == "1");
    if !beside_frameworks && crate::frameworks::framework_tracer().is_some() {
        crate::log(|| "NVTX: declined (a framework tracer owns CUPTI)".to_string());
        return 0;
    }
    let Some(entry) = crate::cupti::open_symbol(c"InitializeInjectionNvtx2") else {
        crate::log(|| "NVTX: no libcupti with InitializeInjectionNvtx2".to_string());
        return 0;
    };
    // SAFETY: libcupti's `InitializeInjectionNvtx2`, whose C signature is `InitializeNvtx`
    // (nvToolsExt's injection interface), called with NVTX's own accessor.
    let result = unsafe { std::mem::transmute::<*mut c_void, InitializeNvtx>(entry)(get_export_table) };
    crate::log(|| format!("NVTX: handed to libcupti ({result})"));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    unsafe extern "C" fn no_table(_: u32) -> *const c_void {
        std::ptr::null()
    }

    #[test]
    fn without_mlprof_run_nvtx_is_declined() {
        // The test process has no MLPROF_INJECT_SOCKET.
        // SAFETY: a valid (if empty) export-table accessor.
        assert_eq!(unsafe { InitializeInjectionNvtx2(no_table) }, 0);
    }
}
