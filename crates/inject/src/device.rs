//! What the CUDA driver says about each GPU (`cuDeviceGetAttribute`, the calls XLA's
//! collector makes), asked once CUDA is up and sent to the parent for the device planes'
//! stats and kernel occupancy. libcuda is the one the process already loaded
//! (`RTLD_NOLOAD`): the injection never loads a driver of its own.

use std::ffi::{CStr, c_char, c_int, c_void};

use mlprof_cupti::layout;
use mlprof_cupti::wire::DeviceInfo;

type GetCountFn = unsafe extern "C" fn(*mut c_int) -> c_int;
type GetFn = unsafe extern "C" fn(*mut c_int, c_int) -> c_int;
type GetAttributeFn = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;
type GetNameFn = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> c_int;
type TotalMemFn = unsafe extern "C" fn(*mut usize, c_int) -> c_int;

/// Every GPU the process's driver sees; `None` when the driver cannot answer yet (CUDA
/// still initialising) or is not loaded.
pub fn query() -> Option<Vec<DeviceInfo>> {
    // SAFETY: dlopen of an already-loaded library (RTLD_NOLOAD) and dlsym of driver
    // entry points whose C signatures are the types above (cuda.h).
    unsafe {
        let handle = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return None;
        }
        let symbol = |name: &CStr| {
            let p = libc::dlsym(handle, name.as_ptr());
            (!p.is_null()).then_some(p)
        };
        let count: GetCountFn = std::mem::transmute::<*mut c_void, GetCountFn>(symbol(c"cuDeviceGetCount")?);
        let get: GetFn = std::mem::transmute::<*mut c_void, GetFn>(symbol(c"cuDeviceGet")?);
        let attribute: GetAttributeFn =
            std::mem::transmute::<*mut c_void, GetAttributeFn>(symbol(c"cuDeviceGetAttribute")?);
        let get_name: GetNameFn = std::mem::transmute::<*mut c_void, GetNameFn>(symbol(c"cuDeviceGetName")?);
        let total_mem: TotalMemFn = std::mem::transmute::<*mut c_void, TotalMemFn>(symbol(c"cuDeviceTotalMem_v2")?);
        let mut n: c_int = 0;
        if count(&mut n) != 0 {
            return None;
        }
        let mut out = Vec::new();
        for ordinal in 0..n.clamp(0, 64) {
            let mut device: c_int = 0;
            if get(&mut device, ordinal) != 0 {
                continue;
            }
            let attr = |which: u32| {
                let mut v: c_int = 0;
                if attribute(&mut v, which as c_int, device) == 0 { i64::from(v) } else { 0 }
            };
            let mut name = [0 as c_char; 256];
            let name = if get_name(name.as_mut_ptr(), name.len() as c_int, device) == 0 {
                CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned()
            } else {
                String::new()
            };
            let mut memory: usize = 0;
            let memory = if total_mem(&mut memory, device) == 0 { memory as u64 } else { 0 };
            let memory_clock_khz = attr(layout::ATTR_MEMORY_CLOCK_RATE).max(0) as u64;
            let bus_bits = attr(layout::ATTR_GLOBAL_MEMORY_BUS_WIDTH).max(0) as u64;
            out.push(DeviceInfo {
                ordinal: ordinal as u32,
                name,
                clock_khz: attr(layout::ATTR_CLOCK_RATE),
                multiprocessors: attr(layout::ATTR_MULTIPROCESSOR_COUNT),
                compute_capability_major: attr(layout::ATTR_COMPUTE_CAPABILITY_MAJOR),
                compute_capability_minor: attr(layout::ATTR_COMPUTE_CAPABILITY_MINOR),
                max_threads_per_multiprocessor: attr(layout::ATTR_MAX_THREADS_PER_MULTIPROCESSOR),
                warp_size: attr(layout::ATTR_WARP_SIZE),
                max_registers_per_multiprocessor: attr(layout::ATTR_MAX_REGISTERS_PER_MULTIPROCESSOR),
                max_shared_memory_per_multiprocessor: attr(layout::ATTR_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
                max_blocks_per_multiprocessor: attr(layout::ATTR_MAX_BLOCKS_PER_MULTIPROCESSOR),
                memory_bandwidth: 2 * memory_clock_khz * 1000 * bus_bits / 8,
                memory_size: memory,
            });
        }
        Some(out)
    }
}
