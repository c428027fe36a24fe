//! `libmlprof_inject.so`: loaded by the CUDA driver into a process started by
//! `mlprof run` (`CUDA_INJECTION64_PATH`), it records the process's GPU activity with
//! CUPTI and hands CUPTI's buffers, undecoded, to the `mlprof run` that launched it.
//!
//! The rule above every other: the job comes first. Every entry point runs inside
//! `catch_unwind`; every failure (no parent socket, no libcupti, an unsupported CUPTI,
//! another CUPTI subscriber, a framework tracer in the process, the parent gone) turns
//! the injection passive, says why to the parent when it can, and leaves the job alone.
//! Memory is bounded ([`recorder::MAX_BUFFERS`] buffers of [`recorder::BUFFER_BYTES`]);
//! when they are all in use CUPTI drops records and the drop count is reported.
//!
//! - [`cupti`]: libcupti's entry points, loaded with `dlopen` at run time.
//! - [`frameworks`]: whether a framework that runs its own CUPTI tracer (PyTorch's
//!   Kineto, XLA's, TensorFlow's) is loaded: then this process is theirs.
//! - [`recorder`]: CUPTI's buffer callbacks and the activity kinds recorded.
//! - [`device`]: each GPU's properties, from the driver the process loaded.
//! - [`nvtx`]: NVTX ranges, handed on to libcupti (`NVTX_INJECTION64_PATH`).
//! - [`link`]: the socket to the parent: a sender thread and a control thread (start,
//!   stop, flush; periodic flushes while recording).
//!
//! Environment (set by `mlprof run`): `MLPROF_INJECT_SOCKET` (the parent's socket;
//! without it the injection does nothing), `MLPROF_CUPTI_PATH` (libcupti to load),
//! `MLPROF_INJECT_CHAIN` (an injection the user had set, initialised first),
//! `MLPROF_INJECT_FRAMEWORKS=1` (record even beside a framework tracer, which then loses
//! CUPTI), `MLPROF_INJECT_DRIVER_API=1` (record driver API calls too),
//! `MLPROF_INJECT_RECORD_AT_START=1` (the first window starts at `cuInit`),
//! `MLPROF_INJECT_LOG=FILE` (a line per step of the injection's life, for diagnosis).

pub mod cupti;
pub mod device;
pub mod frameworks;
pub mod link;
pub mod nvtx;
pub mod recorder;

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicBool, Ordering};

/// Appends `line` to `MLPROF_INJECT_LOG` when it is set (rare events only: start, stop,
/// exit, failures).
pub fn log(line: impl FnOnce() -> String) {
    use std::io::Write;
    let Some(Some(path)) = LOG_PATH.get() else { return };
    if let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(file, "{} pid {}: {}", mlprof_cupti::wire::realtime_ns(), std::process::id(), line());
    }
}

/// `MLPROF_INJECT_LOG`, read once at `InitializeInjection` (never from the injection's
/// own threads: reading the environment can race with the job changing it).
static LOG_PATH: std::sync::OnceLock<Option<OsString>> = std::sync::OnceLock::new();

/// Set by the first `InitializeInjection`: a second call (a driver that calls it again,
/// or this library reached twice through `MLPROF_INJECT_CHAIN`) does nothing.
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// Called by the CUDA driver when it initialises (`cuInit`) in a process whose
/// environment names this library in `CUDA_INJECTION64_PATH`. Always returns 1
/// (success): a failure here must never fail the job's `cuInit`.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> i32 {
    if INITIALIZED.swap(true, Ordering::SeqCst) {
        return 1;
    }
    let _ = std::panic::catch_unwind(|| {
        let _ = LOG_PATH.set(std::env::var_os("MLPROF_INJECT_LOG").filter(|p| !p.is_empty()));
        // Panics are caught at every entry point; their messages go to the log, never to
        // the job's stderr. (This hook is this library's own: it has its own std.)
        std::panic::set_hook(Box::new(|info| log(|| format!("panic (caught): {info}"))));
        chain_previous_injection();
        recorder::start();
    });
    1
}

/// Initialises the injection the user had set before `mlprof run` took
/// `CUDA_INJECTION64_PATH` (passed on in `MLPROF_INJECT_CHAIN`), first: a tool the user
/// chose (Nsight Systems, ...) gets CUPTI, and mlprof steps aside.
fn chain_previous_injection() {
    let Some(path) = std::env::var_os("MLPROF_INJECT_CHAIN").filter(|p| !p.is_empty()) else { return };
    let Ok(path) = CString::new(OsString::into_vec(path)) else { return };
    // SAFETY: dlopen/dlsym with a NUL-terminated path; the symbol, when present, has
    // the signature the CUDA driver calls every injection's `InitializeInjection` with.
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if handle.is_null() {
            return;
        }
        let symbol = libc::dlsym(handle, c"InitializeInjection".as_ptr());
        // The same library again (a nested `mlprof run`, a path through a symlink):
        // calling it would call this function.
        let own = InitializeInjection as extern "C" fn() -> i32 as *mut libc::c_void;
        if !symbol.is_null() && symbol != own {
            let init: extern "C" fn() -> i32 = std::mem::transmute(symbol);
            init();
        }
    }
}
