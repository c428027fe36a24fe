//! libcupti's entry points, found with `dlopen`/`dlsym` at run time: nothing CUDA is
//! needed to build mlprof, and a process without CUPTI only loses its GPU activity.
//!
//! Which libcupti: `MLPROF_CUPTI_PATH` when set; else the one already loaded in the
//! process or on the loader's path (`libcupti.so.13`, `libcupti.so.12`, `libcupti.so`);
//! else the one beside the CUDA runtime the process loaded, where the PyPI wheels put it.

use std::ffi::{CStr, CString, c_char, c_void};

/// `CUptiResult`.
pub type CuptiResult = u32;
/// `CUpti_BuffersCallbackRequestFunc`.
pub type BufferRequested = extern "C" fn(buffer: *mut *mut u8, size: *mut usize, max_records: *mut usize);
/// `CUpti_BuffersCallbackCompleteFunc`.
pub type BufferCompleted =
    extern "C" fn(context: *mut c_void, stream_id: u32, buffer: *mut u8, size: usize, valid_size: usize);
/// `CUpti_CallbackFunc`.
pub type Callback = extern "C" fn(user_data: *mut c_void, domain: u32, cbid: u32, data: *const c_void);

type GetVersionFn = unsafe extern "C" fn(*mut u32) -> CuptiResult;
type GetTimestampFn = unsafe extern "C" fn(*mut u64) -> CuptiResult;
type SubscribeFn = unsafe extern "C" fn(*mut *mut c_void, Callback, *mut c_void) -> CuptiResult;
type UnsubscribeFn = unsafe extern "C" fn(*mut c_void) -> CuptiResult;
type SubscribeV2Fn =
    unsafe extern "C" fn(*mut *mut c_void, Callback, *mut c_void, *mut SubscriberParams) -> CuptiResult;
type RegisterCallbacksFn = unsafe extern "C" fn(BufferRequested, BufferCompleted) -> CuptiResult;
type KindFn = unsafe extern "C" fn(u32) -> CuptiResult;
type NextRecordFn = unsafe extern "C" fn(*mut u8, usize, *mut *mut u8) -> CuptiResult;
type DroppedFn = unsafe extern "C" fn(*mut c_void, u32, *mut usize) -> CuptiResult;
type CallbackNameFn = unsafe extern "C" fn(u32, u32, *mut *const c_char) -> CuptiResult;
type ResultStringFn = unsafe extern "C" fn(CuptiResult, *mut *const c_char) -> CuptiResult;

/// `CUpti_SubscriberParams` as CUPTI 13.0 defines it (the fields up to
/// `oldSubscriberSize`; later CUPTIs read only what `struct_size` covers).
#[repr(C)]
pub struct SubscriberParams {
    struct_size: usize,
    subscriber_name: *const c_char,
    old_subscriber_name: *mut c_char,
    old_subscriber_size: usize,
}

/// `CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN`.
const OLD_SUBSCRIBER_NAME_LEN: usize = 64;

/// The CUPTI functions the injection calls.
pub struct Cupti {
    /// Where it was loaded from (for messages).
    pub path: String,
    get_version: GetVersionFn,
    get_timestamp: GetTimestampFn,
    subscribe: SubscribeFn,
    /// `cuptiSubscribe_v2` (CUPTI 13): names mlprof as the subscriber, and names the
    /// subscriber already there when CUPTI refuses.
    subscribe_v2: Option<SubscribeV2Fn>,
    unsubscribe: UnsubscribeFn,
    /// The subscriber handle once subscribed (0 before).
    subscriber: std::sync::atomic::AtomicUsize,
    register_callbacks: RegisterCallbacksFn,
    enable: KindFn,
    disable: KindFn,
    flush_all: KindFn,
    next_record: NextRecordFn,
    dropped: DroppedFn,
    callback_name: CallbackNameFn,
    result_string: ResultStringFn,
    /// `cuptiSetThreadIdType`, when this CUPTI has it.
    set_thread_id_type: Option<KindFn>,
}

// SAFETY: a table of C function pointers into a library that stays loaded for the
// process's life; CUPTI's functions may be called from any thread.
unsafe impl Send for Cupti {}
unsafe impl Sync for Cupti {}

impl Cupti {
    /// Loads libcupti and resolves every entry point; the reason when it cannot.
    pub fn load() -> Result<Cupti, String> {
        let mut tried = Vec::new();
        for candidate in candidates() {
            match open(&candidate) {
                Some(handle) => return resolve(handle, candidate),
                None => tried.push(candidate),
            }
        }
        Err(format!("no libcupti could be loaded (tried {}); set MLPROF_CUPTI_PATH", tried.join(", ")))
    }

    /// `cuptiGetVersion`.
    pub fn version(&self) -> Result<u32, String> {
        let mut v = 0u32;
        // SAFETY: a valid out pointer.
        self.check(unsafe { (self.get_version)(&mut v) }, "cuptiGetVersion")?;
        Ok(v)
    }

    /// `cuptiGetTimestamp`, nanoseconds.
    pub fn timestamp(&self) -> u64 {
        let mut t = 0u64;
        // SAFETY: a valid out pointer.
        let _ = unsafe { (self.get_timestamp)(&mut t) };
        t
    }

    /// Subscribes as "mlprof" (`cuptiSubscribe_v2` where there is one): the raw result,
    /// so the caller can tell another subscriber
    /// (`CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`) from other failures, and the
    /// name CUPTI gives the subscriber already there, when it gives one.
    pub fn subscribe(&self, callback: Callback) -> (CuptiResult, Option<String>) {
        let mut handle: *mut c_void = std::ptr::null_mut();
        let Some(subscribe_v2) = self.subscribe_v2 else {
            // SAFETY: a valid out pointer and a callback that lives as long as the library.
            let result = unsafe { (self.subscribe)(&mut handle, callback, std::ptr::null_mut()) };
            self.keep_subscriber(result, handle);
            return (result, None);
        };
        let mut old_name = [0 as c_char; OLD_SUBSCRIBER_NAME_LEN];
        let mut params = SubscriberParams {
            struct_size: std::mem::size_of::<SubscriberParams>(),
            subscriber_name: c"mlprof".as_ptr(),
            old_subscriber_name: old_name.as_mut_ptr(),
            old_subscriber_size: OLD_SUBSCRIBER_NAME_LEN,
        };
        // SAFETY: valid out pointers, a params struct of the size it declares whose name
        // buffer outlives the call, and a callback that lives as long as the library.
        let result = unsafe { subscribe_v2(&mut handle, callback, std::ptr::null_mut(), &mut params) };
        self.keep_subscriber(result, handle);
        old_name[OLD_SUBSCRIBER_NAME_LEN - 1] = 0;
        // SAFETY: NUL-terminated (forced above).
        let old = unsafe { CStr::from_ptr(old_name.as_ptr()) }.to_string_lossy().into_owned();
        (result, (!old.is_empty()).then_some(old))
    }

    fn keep_subscriber(&self, result: CuptiResult, handle: *mut c_void) {
        if result == mlprof_cupti::layout::SUCCESS {
            self.subscriber.store(handle as usize, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Gives CUPTI up (`cuptiUnsubscribe`): a framework that starts its tracer later
    /// finds it free. Does nothing when not subscribed.
    pub fn unsubscribe(&self) {
        let handle = self.subscriber.swap(0, std::sync::atomic::Ordering::SeqCst);
        if handle != 0 {
            // SAFETY: the handle CUPTI gave at subscription, given back once.
            let _ = unsafe { (self.unsubscribe)(handle as *mut c_void) };
        }
    }

    /// `cuptiActivityRegisterCallbacks`.
    pub fn register_callbacks(&self, requested: BufferRequested, completed: BufferCompleted) -> Result<(), String> {
        // SAFETY: two callbacks that live as long as the library.
        self.check(unsafe { (self.register_callbacks)(requested, completed) }, "cuptiActivityRegisterCallbacks")
    }

    /// Makes CUPTI report the kernel's thread ids (`gettid`), as XLA asks, rather than
    /// `pthread_self` values; false when this CUPTI cannot.
    pub fn use_system_thread_ids(&self) -> bool {
        // SAFETY: plain value argument.
        self.set_thread_id_type
            .is_some_and(|f| unsafe { f(mlprof_cupti::layout::THREAD_ID_TYPE_SYSTEM) } == mlprof_cupti::layout::SUCCESS)
    }

    /// `cuptiActivityEnable(kind)`.
    pub fn enable(&self, kind: u32) -> CuptiResult {
        // SAFETY: plain value argument.
        unsafe { (self.enable)(kind) }
    }

    /// `cuptiActivityDisable(kind)`.
    pub fn disable(&self, kind: u32) -> CuptiResult {
        // SAFETY: plain value argument.
        unsafe { (self.disable)(kind) }
    }

    /// `cuptiActivityFlushAll(flag)`: completed buffers come back through the callback,
    /// on this thread, before it returns.
    pub fn flush_all(&self, flag: u32) -> CuptiResult {
        // SAFETY: plain value argument.
        unsafe { (self.flush_all)(flag) }
    }

    /// The offset of each record in the first `valid` bytes of `buffer`, walked with
    /// `cuptiActivityGetNextRecord`.
    ///
    /// # Safety
    /// `buffer` must be a buffer CUPTI completed, with `valid` valid bytes.
    pub unsafe fn record_offsets(&self, buffer: *mut u8, valid: usize, out: &mut Vec<u32>) {
        let mut record: *mut u8 = std::ptr::null_mut();
        loop {
            // SAFETY: the caller's buffer; CUPTI writes the next record's address.
            let result = unsafe { (self.next_record)(buffer, valid, &mut record) };
            if result != mlprof_cupti::layout::SUCCESS || record.is_null() {
                break;
            }
            let offset = (record as usize).wrapping_sub(buffer as usize);
            if offset >= valid || u32::try_from(offset).is_err() {
                break;
            }
            out.push(offset as u32);
        }
    }

    /// Records CUPTI dropped for `context`/`stream_id` since the last call.
    ///
    /// # Safety
    /// `context` must be the context CUPTI passed to the buffer callback (or null).
    pub unsafe fn dropped(&self, context: *mut c_void, stream_id: u32) -> u64 {
        let mut n = 0usize;
        // SAFETY: values CUPTI passed to the buffer callback, and a valid out pointer.
        let result = unsafe { (self.dropped)(context, stream_id, &mut n) };
        if result == mlprof_cupti::layout::SUCCESS { n as u64 } else { 0 }
    }

    /// The name of callback `cbid` in `domain` (`cudaLaunchKernel`, ...).
    pub fn callback_name(&self, domain: u32, cbid: u32) -> Option<Vec<u8>> {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: a valid out pointer; CUPTI returns a static string.
        let result = unsafe { (self.callback_name)(domain, cbid, &mut name) };
        if result != mlprof_cupti::layout::SUCCESS || name.is_null() {
            return None;
        }
        // SAFETY: NUL-terminated, owned by CUPTI for the process's life.
        Some(unsafe { CStr::from_ptr(name) }.to_bytes().to_vec())
    }

    /// `Err` naming `what` and CUPTI's message unless `result` is success.
    pub fn check(&self, result: CuptiResult, what: &str) -> Result<(), String> {
        if result == mlprof_cupti::layout::SUCCESS {
            return Ok(());
        }
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: a valid out pointer; CUPTI returns a static string.
        let known = unsafe { (self.result_string)(result, &mut text) } == mlprof_cupti::layout::SUCCESS;
        let message = if known && !text.is_null() {
            // SAFETY: NUL-terminated static string.
            unsafe { CStr::from_ptr(text) }.to_string_lossy().into_owned()
        } else {
            String::from("unknown error")
        };
        Err(format!("{what} failed: {message} ({result})"))
    }
}

/// `name` in the first libcupti that loads (the same search as [`Cupti::load`]).
pub fn open_symbol(name: &CStr) -> Option<*mut c_void> {
    candidates().iter().find_map(|candidate| {
        let handle = open(candidate)?;
        // SAFETY: a live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        (!p.is_null()).then_some(p)
    })
}

fn candidates() -> Vec<String> {
    let mut out = Vec::new();
    if let Some(path) = std::env::var_os("MLPROF_CUPTI_PATH").filter(|p| !p.is_empty()) {
        out.push(path.to_string_lossy().into_owned());
    }
    out.extend(["libcupti.so.13".to_string(), "libcupti.so.12".to_string(), "libcupti.so".to_string()]);
    if let Some(dir) = crate::frameworks::loaded_library_dir("libcudart.so") {
        // CUDA 13's wheels hold both in nvidia/cu13/lib; CUDA 12's in
        // nvidia/cuda_runtime/lib and nvidia/cuda_cupti/lib.
        out.push(format!("{dir}/libcupti.so.13"));
        out.push(format!("{dir}/../../cuda_cupti/lib/libcupti.so.12"));
    }
    out
}

/// Set once this library has loaded a libcupti: the library list then holds our own
/// libcupti, which is no sign of another tool.
pub static LOADED_BY_MLPROF: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn open(path: &str) -> Option<*mut c_void> {
    let c = CString::new(path).ok()?;
    // SAFETY: a NUL-terminated path.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if !handle.is_null() {
        LOADED_BY_MLPROF.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    (!handle.is_null()).then_some(handle)
}

fn resolve(handle: *mut c_void, path: String) -> Result<Cupti, String> {
    let symbol = |name: &CStr| -> Result<*mut c_void, String> {
        // SAFETY: a live handle and a NUL-terminated name.
        let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
        if p.is_null() { Err(format!("{path} has no {}", name.to_string_lossy())) } else { Ok(p) }
    };
    // SAFETY: each symbol is the CUPTI function of that name, whose C signature is the
    // field's type (CUPTI's headers, cupti_activity.h and cupti_callbacks.h).
    unsafe {
        Ok(Cupti {
            get_version: std::mem::transmute::<*mut c_void, GetVersionFn>(symbol(c"cuptiGetVersion")?),
            get_timestamp: std::mem::transmute::<*mut c_void, GetTimestampFn>(symbol(c"cuptiGetTimestamp")?),
            subscribe: std::mem::transmute::<*mut c_void, SubscribeFn>(symbol(c"cuptiSubscribe")?),
            unsubscribe: std::mem::transmute::<*mut c_void, UnsubscribeFn>(symbol(c"cuptiUnsubscribe")?),
            subscriber: std::sync::atomic::AtomicUsize::new(0),
            subscribe_v2: symbol(c"cuptiSubscribe_v2")
                .ok()
                .map(|p| std::mem::transmute::<*mut c_void, SubscribeV2Fn>(p)),
            register_callbacks: std::mem::transmute::<*mut c_void, RegisterCallbacksFn>(symbol(
                c"cuptiActivityRegisterCallbacks",
            )?),
            enable: std::mem::transmute::<*mut c_void, KindFn>(symbol(c"cuptiActivityEnable")?),
            disable: std::mem::transmute::<*mut c_void, KindFn>(symbol(c"cuptiActivityDisable")?),
            flush_all: std::mem::transmute::<*mut c_void, KindFn>(symbol(c"cuptiActivityFlushAll")?),
            next_record: std::mem::transmute::<*mut c_void, NextRecordFn>(symbol(c"cuptiActivityGetNextRecord")?),
            dropped: std::mem::transmute::<*mut c_void, DroppedFn>(symbol(c"cuptiActivityGetNumDroppedRecords")?),
            callback_name: std::mem::transmute::<*mut c_void, CallbackNameFn>(symbol(c"cuptiGetCallbackName")?),
            result_string: std::mem::transmute::<*mut c_void, ResultStringFn>(symbol(c"cuptiGetResultString")?),
            set_thread_id_type: symbol(c"cuptiSetThreadIdType")
                .ok()
                .map(|p| std::mem::transmute::<*mut c_void, KindFn>(p)),
            path,
        })
    }
}
