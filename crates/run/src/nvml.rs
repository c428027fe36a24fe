//! NVIDIA GPU counters read through NVML: per device its utilization, memory, SM clock,
//! power, temperature and the memory each compute process holds.
//!
//! The design decision: nothing links against `libnvidia-ml`. [`Nvml::open`] loads it with
//! `dlopen` at run time and looks each entry point up once; a machine without the driver
//! gets an [`NvmlUnavailable`] with one line saying why, and a missing optional entry point
//! turns off only its own counter. Everything the library hands back (strings, counts) is
//! bounded before it is read, so no answer of the library makes this module panic or read
//! past a buffer. The library is never `dlclose`d: the driver's threads may still run in it.
//!
//! Layouts and values are those of NVIDIA's public `nvml.h`; the module's tests and
//! `tests/nvml.rs` (a mock library) check what can be checked without a GPU.

use std::ffi::{CString, c_char, c_uint, c_void};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The library [`Nvml::open`] loads when `MLPROF_NVML_PATH` is unset.
const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";
/// The environment variable naming another library to load instead.
const PATH_VARIABLE: &str = "MLPROF_NVML_PATH";
/// At most this many devices are listed, whatever count the library reports.
const MAX_DEVICES: u32 = 256;
/// At most this many processes per device are read; a device with more reports none.
const MAX_PROCESSES: usize = 4096;
/// Room for this many processes before the first query (it grows as a device needs).
const INITIAL_PROCESSES: usize = 64;
/// Extra entries asked for when NVML says the buffer is too small: processes may start
/// between the two calls.
const PROCESS_SLACK: usize = 16;
/// Tries of the process query on one device in one reading.
const PROCESS_TRIES: usize = 3;
/// At most this many bytes of an error string are read.
const MAX_ERROR_STRING: usize = 256;

/// NVML's C types and values (`nvml.h`).
mod ffi {
    use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};

    /// `nvmlReturn_t`.
    pub type Return = c_int;
    /// `nvmlDevice_t`: an opaque handle.
    pub type Device = *mut c_void;

    pub const SUCCESS: Return = 0;
    pub const ERROR_UNINITIALIZED: Return = 1;
    pub const ERROR_INVALID_ARGUMENT: Return = 2;
    pub const ERROR_NOT_SUPPORTED: Return = 3;
    pub const ERROR_NO_PERMISSION: Return = 4;
    pub const ERROR_INSUFFICIENT_SIZE: Return = 7;
    pub const ERROR_DRIVER_NOT_LOADED: Return = 9;
    pub const ERROR_LIBRARY_NOT_FOUND: Return = 12;
    pub const ERROR_GPU_IS_LOST: Return = 15;

    /// `NVML_CLOCK_SM` of `nvmlClockType_t`.
    pub const CLOCK_SM: c_uint = 1;
    /// `NVML_TEMPERATURE_GPU` of `nvmlTemperatureSensors_t`.
    pub const TEMPERATURE_GPU: c_uint = 0;
    /// `NVML_VALUE_NOT_AVAILABLE` as an unsigned long long.
    pub const VALUE_NOT_AVAILABLE: c_ulonglong = c_ulonglong::MAX;
    /// `NVML_DEVICE_NAME_V2_BUFFER_SIZE`, bytes.
    pub const NAME_BUFFER: usize = 96;
    /// `NVML_DEVICE_UUID_BUFFER_SIZE`, bytes.
    pub const UUID_BUFFER: usize = 80;

    /// `nvmlUtilization_t`, percent.
    #[repr(C)]
    #[derive(Default)]
    pub struct Utilization {
        pub gpu: c_uint,
        pub memory: c_uint,
    }

    /// `nvmlMemory_t` (version 1), bytes.
    #[repr(C)]
    #[derive(Default)]
    pub struct Memory {
        pub total: c_ulonglong,
        pub free: c_ulonglong,
        pub used: c_ulonglong,
    }

    /// `nvmlProcessInfo_v2_t`, which is also `nvmlProcessInfo_t` (v3): 24 bytes, with 4
    /// bytes of padding after `pid`.
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    pub struct ProcessInfo {
        pub pid: c_uint,
        pub used_gpu_memory: c_ulonglong,
        pub gpu_instance_id: c_uint,
        pub compute_instance_id: c_uint,
    }

    const _: () = {
        assert!(size_of::<Utilization>() == 8);
        assert!(size_of::<Memory>() == 24);
        assert!(size_of::<ProcessInfo>() == 24);
        assert!(std::mem::offset_of!(ProcessInfo, used_gpu_memory) == 8);
        assert!(std::mem::offset_of!(ProcessInfo, gpu_instance_id) == 16);
        assert!(std::mem::offset_of!(ProcessInfo, compute_instance_id) == 20);
    };

    pub type InitFn = unsafe extern "C" fn() -> Return;
    pub type ShutdownFn = unsafe extern "C" fn() -> Return;
    pub type ErrorStringFn = unsafe extern "C" fn(Return) -> *const c_char;
    pub type CountFn = unsafe extern "C" fn(*mut c_uint) -> Return;
    pub type HandleByIndexFn = unsafe extern "C" fn(c_uint, *mut Device) -> Return;
    /// `nvmlDeviceGetName` and `nvmlDeviceGetUUID`: a buffer and its length.
    pub type StringFn = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> Return;
    pub type MemoryFn = unsafe extern "C" fn(Device, *mut Memory) -> Return;
    pub type UtilizationFn = unsafe extern "C" fn(Device, *mut Utilization) -> Return;
    /// `nvmlDeviceGetClockInfo` and `nvmlDeviceGetTemperature`: an enum and a value.
    pub type SelectFn = unsafe extern "C" fn(Device, c_uint, *mut c_uint) -> Return;
    pub type PowerFn = unsafe extern "C" fn(Device, *mut c_uint) -> Return;
    pub type ProcessesFn = unsafe extern "C" fn(Device, *mut c_uint, *mut ProcessInfo) -> Return;

    /// What a handle can look a symbol up with.
    pub type Handle = *mut c_void;
}

/// Why there are no GPU counters, in one line (e.g. "no NVIDIA driver: libnvidia-ml.so.1
/// not found").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvmlUnavailable {
    /// The line, without a newline.
    pub reason: String,
}

impl NvmlUnavailable {
    fn new(reason: String) -> NvmlUnavailable {
        NvmlUnavailable { reason: one_line(&reason) }
    }
}

impl std::fmt::Display for NvmlUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for NvmlUnavailable {}

/// One GPU as NVML lists it when opened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuDevice {
    /// NVML's index of the device (0-based; not necessarily CUDA's order).
    pub index: u32,
    /// The product name, e.g. "NVIDIA H100 80GB HBM3"; empty when NVML cannot tell.
    pub name: String,
    /// The device's UUID, e.g. "GPU-5a1c…"; empty when NVML cannot tell.
    pub uuid: String,
    /// The memory on the device, bytes.
    pub memory_total_bytes: Option<u64>,
}

/// One reading of one device's counters; a counter the device does not support (or that
/// failed this time) is `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuReading {
    /// NVML's index of the device, as in [`GpuDevice::index`].
    pub index: u32,
    /// Percent of the last sample period (1/6 s to 1 s, by product) in which a kernel ran.
    pub utilization_gpu_percent: Option<u32>,
    /// Percent of the last sample period in which device memory was read or written.
    pub utilization_memory_percent: Option<u32>,
    /// Device memory in use, bytes.
    pub memory_used_bytes: Option<u64>,
    /// The streaming multiprocessors' clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// The board's power draw, milliwatts.
    pub power_milliwatts: Option<u32>,
    /// The GPU die's temperature, degrees Celsius.
    pub temperature_celsius: Option<u32>,
    /// The compute processes on the device and their memory; empty when there are none,
    /// when the query is unsupported, or when there are more than 4096.
    pub processes: Vec<GpuProcessMemory>,
}

/// A compute process on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuProcessMemory {
    /// The process id, in the host's PID namespace.
    pub pid: u32,
    /// Device memory the process holds, bytes; `None` where NVML cannot tell (e.g. under
    /// Windows WDDM or without permission).
    pub used_bytes: Option<u64>,
}

/// NVML's per-device entry points that a reading uses; each is `None` when the library
/// lacks it, which turns off only that counter.
struct Counters {
    utilization: Option<ffi::UtilizationFn>,
    memory: Option<ffi::MemoryFn>,
    clock: Option<ffi::SelectFn>,
    power: Option<ffi::PowerFn>,
    temperature: Option<ffi::SelectFn>,
    processes: Option<ffi::ProcessesFn>,
}

/// NVML, opened: the library's entry points, `nvmlInit_v2` called, the devices listed.
/// Dropping it calls `nvmlShutdown` (NVML counts its initializations, so several may be
/// open at once). It is `Send`, for a sampling thread of its own.
pub struct Nvml {
    shutdown: ffi::ShutdownFn,
    error_string: Option<ffi::ErrorStringFn>,
    counters: Counters,
    /// NVML's handles, one per entry of `devices`, in the same order.
    handles: Vec<ffi::Device>,
    devices: Vec<GpuDevice>,
    /// The process query's buffer, kept between readings.
    process_buffer: Vec<ffi::ProcessInfo>,
}

// SAFETY: the device handles are opaque NVML tokens valid on every thread until
// `nvmlShutdown`, the function pointers are plain code addresses, and NVML is documented
// as thread-safe; `read` takes `&mut self`, so the process buffer has one user at a time.
unsafe impl Send for Nvml {}

impl Drop for Nvml {
    fn drop(&mut self) {
        // SAFETY: `nvmlShutdown` from the library this value initialized, called once for
        // its one successful `nvmlInit_v2`; its handles are not used afterwards.
        unsafe { (self.shutdown)() };
    }
}

/// A `dlopen`ed library.
struct Library {
    handle: ffi::Handle,
}

impl Library {
    /// Loads `path` (a file path, or a bare name the dynamic linker searches for).
    fn open(path: &Path) -> Result<Library, NvmlUnavailable> {
        let shown = path.display();
        let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else {
            return Err(NvmlUnavailable::new(format!("no NVIDIA driver: {shown} is not a valid path")));
        };
        // SAFETY: a NUL-terminated path; RTLD_LOCAL keeps its symbols out of the process's
        // global scope.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if !handle.is_null() {
            return Ok(Library { handle });
        }
        // SAFETY: dlerror returns null or a NUL-terminated message for this thread's last
        // dl* failure (the dlopen just above); it is read at once, bounded.
        let detail = unsafe { bounded_c_string(libc::dlerror(), 1024) };
        Err(NvmlUnavailable::new(load_failure(&shown.to_string(), &detail)))
    }

    /// The address of `name`, or `None` when the library has no such symbol.
    fn symbol(&self, name: &std::ffi::CStr) -> Option<*mut c_void> {
        // SAFETY: a live handle (never closed) and a NUL-terminated name.
        let p = unsafe { libc::dlsym(self.handle, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    }
}

/// `name` in `library` as a function pointer of type `ty`, or `None`.
macro_rules! symbol {
    ($library:expr, $name:literal, $ty:ty) => {
        $library.symbol($name).map(|p| {
            // SAFETY: the symbol of this name in NVML is a function with the C signature
            // of `$ty` (nvml.h); a function pointer and a data pointer have one size here.
            unsafe { std::mem::transmute::<*mut c_void, $ty>(p) }
        })
    };
}

/// `name` in `library`, or the one line saying the library lacks it.
fn required<T>(found: Option<T>, path: &Path, name: &str) -> Result<T, NvmlUnavailable> {
    found.ok_or_else(|| NvmlUnavailable::new(format!("NVML: {} has no {name}", path.display())))
}

impl Nvml {
    /// Opens `MLPROF_NVML_PATH` if set (and not empty), else `libnvidia-ml.so.1`, calls
    /// `nvmlInit_v2` and lists the devices. Err: one line saying why there are no GPU
    /// counters, e.g. "no NVIDIA driver: libnvidia-ml.so.1 not found" or "NVML:
    /// nvmlInit_v2 failed: Driver Not Loaded (9)"; a driver that lists no GPU this process
    /// may use is an Err too. `nvmlInit_v2` may take a second or more per GPU where
    /// persistence mode is off: call this off the job's critical path.
    pub fn open() -> Result<Nvml, NvmlUnavailable> {
        match std::env::var_os(PATH_VARIABLE).filter(|p| !p.is_empty()) {
            Some(path) => Nvml::open_at(Path::new(&path)),
            None => Nvml::open_at(Path::new(DEFAULT_LIBRARY)),
        }
    }

    /// Same as [`Nvml::open`], from the library at `path` (a bare file name is searched
    /// for as `dlopen` does).
    pub fn open_at(path: &Path) -> Result<Nvml, NvmlUnavailable> {
        let library = Library::open(path)?;
        let init = required(symbol!(library, c"nvmlInit_v2", ffi::InitFn), path, "nvmlInit_v2")?;
        let shutdown = required(symbol!(library, c"nvmlShutdown", ffi::ShutdownFn), path, "nvmlShutdown")?;
        let count = required(symbol!(library, c"nvmlDeviceGetCount_v2", ffi::CountFn), path, "nvmlDeviceGetCount_v2")?;
        let handle_by_index = required(
            symbol!(library, c"nvmlDeviceGetHandleByIndex_v2", ffi::HandleByIndexFn),
            path,
            "nvmlDeviceGetHandleByIndex_v2",
        )?;
        let error_string = symbol!(library, c"nvmlErrorString", ffi::ErrorStringFn);
        let counters = Counters {
            utilization: symbol!(library, c"nvmlDeviceGetUtilizationRates", ffi::UtilizationFn),
            memory: symbol!(library, c"nvmlDeviceGetMemoryInfo", ffi::MemoryFn),
            clock: symbol!(library, c"nvmlDeviceGetClockInfo", ffi::SelectFn),
            power: symbol!(library, c"nvmlDeviceGetPowerUsage", ffi::PowerFn),
            temperature: symbol!(library, c"nvmlDeviceGetTemperature", ffi::SelectFn),
            processes: symbol!(library, c"nvmlDeviceGetComputeRunningProcesses_v3", ffi::ProcessesFn)
                .or_else(|| symbol!(library, c"nvmlDeviceGetComputeRunningProcesses_v2", ffi::ProcessesFn)),
        };
        let name = symbol!(library, c"nvmlDeviceGetName", ffi::StringFn);
        let uuid = symbol!(library, c"nvmlDeviceGetUUID", ffi::StringFn);

        // SAFETY: NVML's entry point, no arguments.
        let code = unsafe { init() };
        if code != ffi::SUCCESS {
            let text = describe(code, error_string);
            return Err(NvmlUnavailable::new(format!("NVML: nvmlInit_v2 failed: {text}")));
        }
        // From here on, dropping `nvml` balances the initialization.
        let mut nvml = Nvml {
            shutdown,
            error_string,
            counters,
            handles: Vec::new(),
            devices: Vec::new(),
            process_buffer: Vec::new(),
        };
        let mut reported: c_uint = 0;
        // SAFETY: a valid out pointer.
        let code = unsafe { count(&mut reported) };
        if code != ffi::SUCCESS {
            let text = describe(code, nvml.error_string);
            return Err(NvmlUnavailable::new(format!("NVML: nvmlDeviceGetCount_v2 failed: {text}")));
        }
        let mut first_failure = None;
        for index in 0..reported.min(MAX_DEVICES) {
            let mut handle: ffi::Device = std::ptr::null_mut();
            // SAFETY: an index below the count NVML reported and a valid out pointer.
            let code = unsafe { handle_by_index(index, &mut handle) };
            if code != ffi::SUCCESS {
                // A GPU this process may not use, or one that is lost: the others still count.
                first_failure.get_or_insert(code);
                continue;
            }
            let memory = nvml.memory(handle);
            nvml.devices.push(GpuDevice {
                index,
                name: device_string::<{ ffi::NAME_BUFFER }>(name, handle),
                uuid: device_string::<{ ffi::UUID_BUFFER }>(uuid, handle),
                memory_total_bytes: memory.map(|m| m.total),
            });
            nvml.handles.push(handle);
        }
        if nvml.devices.is_empty() {
            let why = match first_failure {
                Some(code) => format!("nvmlDeviceGetHandleByIndex_v2 failed: {}", describe(code, nvml.error_string)),
                None => String::from("no NVIDIA GPU found"),
            };
            return Err(NvmlUnavailable::new(format!("NVML: {why}")));
        }
        Ok(nvml)
    }

    /// The devices, in NVML index order.
    pub fn devices(&self) -> &[GpuDevice] {
        &self.devices
    }

    /// One reading of every device, in the order of [`Nvml::devices`]; a counter the
    /// device does not support is `None`. Each call makes about eight NVML calls per device
    /// (each well under a millisecond on a healthy driver).
    pub fn read(&mut self) -> Vec<GpuReading> {
        let mut readings = Vec::with_capacity(self.devices.len());
        for at in 0..self.handles.len().min(self.devices.len()) {
            let handle = self.handles[at];
            let utilization = self.utilization(handle);
            readings.push(GpuReading {
                index: self.devices[at].index,
                utilization_gpu_percent: utilization.as_ref().map(|u| u.gpu),
                utilization_memory_percent: utilization.as_ref().map(|u| u.memory),
                memory_used_bytes: self.memory(handle).map(|m| m.used),
                sm_clock_mhz: select(self.counters.clock, handle, ffi::CLOCK_SM),
                power_milliwatts: self.power(handle),
                temperature_celsius: select(self.counters.temperature, handle, ffi::TEMPERATURE_GPU),
                processes: self.processes(handle),
            });
        }
        readings
    }

    fn utilization(&self, handle: ffi::Device) -> Option<ffi::Utilization> {
        let query = self.counters.utilization?;
        let mut out = ffi::Utilization::default();
        // SAFETY: a live device handle and a valid out pointer to an nvmlUtilization_t.
        let code = unsafe { query(handle, &mut out) };
        (code == ffi::SUCCESS).then_some(out)
    }

    fn memory(&self, handle: ffi::Device) -> Option<ffi::Memory> {
        let query = self.counters.memory?;
        let mut out = ffi::Memory::default();
        // SAFETY: a live device handle and a valid out pointer to an nvmlMemory_t.
        let code = unsafe { query(handle, &mut out) };
        (code == ffi::SUCCESS).then_some(out)
    }

    fn power(&self, handle: ffi::Device) -> Option<u32> {
        let query = self.counters.power?;
        let mut out: c_uint = 0;
        // SAFETY: a live device handle and a valid out pointer.
        let code = unsafe { query(handle, &mut out) };
        (code == ffi::SUCCESS).then_some(out)
    }

    /// The compute processes on `handle`: the query is retried with the count NVML asks
    /// for (plus some slack), at most [`MAX_PROCESSES`] entries.
    fn processes(&mut self, handle: ffi::Device) -> Vec<GpuProcessMemory> {
        let Some(query) = self.counters.processes else {
            return Vec::new();
        };
        let mut capacity = self.process_buffer.len().clamp(INITIAL_PROCESSES, MAX_PROCESSES);
        for _ in 0..PROCESS_TRIES {
            self.process_buffer.resize(capacity, ffi::ProcessInfo::default());
            // `capacity` is at most MAX_PROCESSES, so it fits.
            let mut count = c_uint::try_from(capacity).unwrap_or(0);
            // SAFETY: a live device handle; `count` says how many entries the buffer holds
            // and NVML writes at most that many.
            let code = unsafe { query(handle, &mut count, self.process_buffer.as_mut_ptr()) };
            match code {
                ffi::SUCCESS => {
                    let returned = usize::try_from(count).unwrap_or(usize::MAX).min(capacity);
                    return self.process_buffer[..returned].iter().map(process_memory).collect();
                }
                ffi::ERROR_INSUFFICIENT_SIZE if capacity < MAX_PROCESSES => {
                    let wanted = usize::try_from(count).unwrap_or(usize::MAX).saturating_add(PROCESS_SLACK);
                    capacity = wanted.clamp(capacity + 1, MAX_PROCESSES);
                }
                _ => return Vec::new(),
            }
        }
        Vec::new()
    }
}

/// `query(handle, which, &value)` when the entry point exists and succeeds.
fn select(query: Option<ffi::SelectFn>, handle: ffi::Device, which: c_uint) -> Option<u32> {
    let query = query?;
    let mut out: c_uint = 0;
    // SAFETY: a live device handle, an enum value nvml.h defines for this entry point and
    // a valid out pointer.
    let code = unsafe { query(handle, which, &mut out) };
    (code == ffi::SUCCESS).then_some(out)
}

/// A name or UUID that NVML writes into a buffer of `N` bytes; empty when it cannot.
fn device_string<const N: usize>(query: Option<ffi::StringFn>, handle: ffi::Device) -> String {
    let Some(query) = query else {
        return String::new();
    };
    let mut buffer = [0u8; N];
    // N is a small constant (96 or 80), so it fits.
    let length = c_uint::try_from(N).unwrap_or(0);
    // SAFETY: a live device handle and a buffer of `length` bytes, which NVML writes at
    // most.
    let code = unsafe { query(handle, buffer.as_mut_ptr().cast::<c_char>(), length) };
    if code == ffi::SUCCESS { string_from_buffer(&buffer) } else { String::new() }
}

fn process_memory(info: &ffi::ProcessInfo) -> GpuProcessMemory {
    GpuProcessMemory {
        pid: info.pid,
        used_bytes: (info.used_gpu_memory != ffi::VALUE_NOT_AVAILABLE).then_some(info.used_gpu_memory),
    }
}

/// The text before the first NUL of `buffer` (all of it when there is none), with
/// invalid UTF-8 replaced.
fn string_from_buffer(buffer: &[u8]) -> String {
    let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
    String::from_utf8_lossy(&buffer[..end]).trim().to_string()
}

/// At most `limit` bytes of the NUL-terminated string at `text`; empty for null.
///
/// # Safety
/// `text` is null or points at a NUL-terminated string, or at `limit` readable bytes.
unsafe fn bounded_c_string(text: *const c_char, limit: usize) -> String {
    if text.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise: readable up to a NUL or `limit` bytes, whichever
    // comes first, and strnlen reads no further.
    let length = unsafe { libc::strnlen(text, limit) };
    // SAFETY: `length` bytes from `text` were just read by strnlen.
    let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), length) };
    string_from_buffer(bytes)
}

/// `code` as a person reads it, e.g. "Driver Not Loaded (9)": NVML's own words when it has
/// `nvmlErrorString`, else ours.
fn describe(code: ffi::Return, error_string: Option<ffi::ErrorStringFn>) -> String {
    let text = error_string.map(|f| {
        // SAFETY: nvmlErrorString takes any value and returns null or a static string;
        // at most MAX_ERROR_STRING bytes of it are read.
        unsafe { bounded_c_string(f(code), MAX_ERROR_STRING) }
    });
    error_text(code, text.as_deref())
}

/// `text` (NVML's description of `code`) with the code, or a description of our own when
/// NVML gave none.
fn error_text(code: ffi::Return, text: Option<&str>) -> String {
    let text = text.map(one_line).filter(|t| !t.is_empty());
    let known = match code {
        ffi::SUCCESS => "Success",
        ffi::ERROR_UNINITIALIZED => "Uninitialized",
        ffi::ERROR_INVALID_ARGUMENT => "Invalid Argument",
        ffi::ERROR_NOT_SUPPORTED => "Not Supported",
        ffi::ERROR_NO_PERMISSION => "Insufficient Permissions",
        ffi::ERROR_INSUFFICIENT_SIZE => "Insufficient Size",
        ffi::ERROR_DRIVER_NOT_LOADED => "Driver Not Loaded",
        ffi::ERROR_LIBRARY_NOT_FOUND => "NVML Shared Library Not Found",
        ffi::ERROR_GPU_IS_LOST => "GPU is lost",
        _ => "Unknown Error",
    };
    format!("{} ({code})", text.as_deref().unwrap_or(known))
}

/// Why `dlopen` of `path` failed, from `dlerror`'s `detail`.
fn load_failure(path: &str, detail: &str) -> String {
    // A missing dependency of the library also says "No such file", under its own name.
    let about_path = detail.strip_prefix(path).is_some_and(|rest| rest.starts_with(':'));
    if detail.is_empty() || (about_path && detail.contains("No such file")) {
        format!("no NVIDIA driver: {path} not found")
    } else {
        format!("no NVIDIA driver: {path} could not be loaded: {detail}")
    }
}

/// `text` on one line: line breaks become spaces.
fn one_line(text: &str) -> String {
    text.split(['\n', '\r']).map(str::trim).filter(|part| !part.is_empty()).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_without_nul_is_read_to_its_end_and_one_with_nul_stops_there() {
        assert_eq!(string_from_buffer(b"NVIDIA H100"), "NVIDIA H100");
        assert_eq!(string_from_buffer(b"H100\0garbage"), "H100");
        assert_eq!(string_from_buffer(b"\0H100"), "");
        assert_eq!(string_from_buffer(b""), "");
        assert_eq!(string_from_buffer(b"GPU\xff-1\0"), "GPU\u{fffd}-1");
    }

    #[test]
    fn a_c_string_is_read_at_most_to_its_limit() {
        let text = c"Driver Not Loaded";
        // SAFETY: a NUL-terminated string.
        assert_eq!(unsafe { bounded_c_string(text.as_ptr(), 6) }, "Driver");
        // SAFETY: a NUL-terminated string.
        assert_eq!(unsafe { bounded_c_string(text.as_ptr(), 256) }, "Driver Not Loaded");
        // SAFETY: null is allowed.
        assert_eq!(unsafe { bounded_c_string(std::ptr::null(), 256) }, "");
    }

    #[test]
    fn an_error_reads_nvml_words_or_ours_with_its_code() {
        assert_eq!(error_text(9, Some("Driver Not Loaded")), "Driver Not Loaded (9)");
        assert_eq!(error_text(9, None), "Driver Not Loaded (9)");
        assert_eq!(error_text(3, Some("")), "Not Supported (3)");
        assert_eq!(error_text(999, None), "Unknown Error (999)");
        assert_eq!(error_text(-1, Some("two\nlines")), "two lines (-1)");
    }

    #[test]
    fn a_missing_library_is_not_found_and_a_broken_one_says_why() {
        let missing = "libnvidia-ml.so.1: cannot open shared object file: No such file or directory";
        assert_eq!(load_failure("libnvidia-ml.so.1", missing), "no NVIDIA driver: libnvidia-ml.so.1 not found");
        assert_eq!(
            load_failure("/x.so", "/x.so: invalid ELF header"),
            "no NVIDIA driver: /x.so could not be loaded: /x.so: invalid ELF header"
        );
        let dependency = "libfoo.so: cannot open shared object file: No such file or directory";
        assert_eq!(
            load_failure("/x.so", dependency),
            format!("no NVIDIA driver: /x.so could not be loaded: {dependency}")
        );
        let err = NvmlUnavailable::new(String::from("a\nb"));
        assert_eq!(err.to_string(), "a b");
    }

    #[test]
    fn unavailable_memory_is_none() {
        let info = ffi::ProcessInfo { pid: 7, used_gpu_memory: ffi::VALUE_NOT_AVAILABLE, ..Default::default() };
        assert_eq!(process_memory(&info), GpuProcessMemory { pid: 7, used_bytes: None });
        let info = ffi::ProcessInfo { pid: 8, used_gpu_memory: 1 << 30, ..Default::default() };
        assert_eq!(process_memory(&info), GpuProcessMemory { pid: 8, used_bytes: Some(1 << 30) });
    }
}
