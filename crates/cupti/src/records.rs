//! CUPTI activity records decoded from bytes: one [`Activity`] per record, read at the
//! offsets [`crate::layout`] gives, after checking the record is long enough. String
//! fields stay addresses in the job ([`crate::wire::StringKey::Pointer`]); the buffer's
//! string table names them.

use crate::layout;
use crate::wire::StringKey;

/// The CUPTI API versions whose records these layouts read: CUPTI 12.8 and 12.9 (API
/// versions 26 to 28) and every CUPTI 13 (130000 to 139999).
/// `scripts/cupti_layout/check_versions.sh` found every field read here at the same
/// offset in CUPTI 12.8.90, 12.9.79 and 13.0.85 to 13.5.25 (CUPTI 13 appends fields, so
/// its records are longer; a record needs only [`crate::layout`]'s `READ_END` bytes).
/// Older CUPTIs wrote other record versions. Checked on a GPU: 13.0.
pub fn is_supported(api_version: u32) -> bool {
    (26..=28).contains(&api_version) || (130_000..=139_999).contains(&api_version)
}

/// Whether records of CUPTI `api_version` can be read; the reason when not.
pub fn check_version(api_version: u32) -> Result<(), String> {
    if is_supported(api_version) {
        Ok(())
    } else {
        Err(format!(
            "CUPTI API version {api_version} is not supported (mlprof reads the records of CUPTI 12.8, 12.9 and 13.x: \
             API versions 26 to 28 and 130000 to 139999)"
        ))
    }
}

/// A kernel execution (`CONCURRENT_KERNEL` or `KERNEL` record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// Start and end on the GPU, CUPTI nanoseconds.
    pub start_ns: u64,
    /// End, CUPTI nanoseconds.
    pub end_ns: u64,
    /// CUDA device ordinal.
    pub device_id: u32,
    /// CUPTI context id.
    pub context_id: u32,
    /// CUPTI stream id.
    pub stream_id: u32,
    /// Grid size, blocks.
    pub grid: [i32; 3],
    /// Block size, threads.
    pub block: [i32; 3],
    /// Registers per thread.
    pub registers_per_thread: u16,
    /// Static shared memory per block, bytes.
    pub static_shared_memory: i32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared_memory: i32,
    /// Links the kernel to the API call that launched it.
    pub correlation_id: u32,
    /// Address of the (mangled) name in the job.
    pub name: u64,
}

/// A memory copy (`MEMCPY` or `MEMCPY2` record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memcpy {
    /// `CUpti_ActivityMemcpyKind` ([`layout::MEMCPY_HTOD`], ...).
    pub copy_kind: u8,
    /// `CUpti_ActivityMemoryKind` of the source ([`layout::MEMORY_KIND_PINNED`], ...).
    pub src_kind: u8,
    /// `CUpti_ActivityMemoryKind` of the destination.
    pub dst_kind: u8,
    /// `CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC` set.
    pub is_async: bool,
    /// Bytes copied.
    pub bytes: u64,
    /// Start on the GPU, CUPTI nanoseconds.
    pub start_ns: u64,
    /// End, CUPTI nanoseconds.
    pub end_ns: u64,
    /// CUDA device ordinal.
    pub device_id: u32,
    /// CUPTI context id.
    pub context_id: u32,
    /// CUPTI stream id.
    pub stream_id: u32,
    /// Peer copies: the source and destination devices.
    pub peer: Option<(u32, u32)>,
    /// Links the copy to its API call.
    pub correlation_id: u32,
}

/// A memset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memset {
    /// The value set.
    pub value: u32,
    /// Bytes set.
    pub bytes: u64,
    /// Start on the GPU, CUPTI nanoseconds.
    pub start_ns: u64,
    /// End, CUPTI nanoseconds.
    pub end_ns: u64,
    /// CUDA device ordinal.
    pub device_id: u32,
    /// CUPTI context id.
    pub context_id: u32,
    /// CUPTI stream id.
    pub stream_id: u32,
    /// Links the memset to its API call.
    pub correlation_id: u32,
    /// `CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC` set.
    pub is_async: bool,
    /// `CUpti_ActivityMemoryKind` of the memory set.
    pub memory_kind: u16,
}

/// A CUDA runtime or driver API call on a host thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiCall {
    /// The callback id, with its domain: the key of its name in the string table.
    pub callback: StringKey,
    /// Start on the host, CUPTI nanoseconds.
    pub start_ns: u64,
    /// End, CUPTI nanoseconds.
    pub end_ns: u64,
    /// Process id.
    pub process_id: u32,
    /// Thread id (the kernel's tid).
    pub thread_id: u32,
    /// Links the call to the device activity it started.
    pub correlation_id: u32,
    /// The call's `cudaError_t` / `CUresult`.
    pub return_value: u32,
}

/// A host wait on the device (`cudaStreamSynchronize`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Synchronization {
    /// `CUpti_ActivitySynchronizationType` ([`layout::SYNC_STREAM_SYNCHRONIZE`], ...).
    pub kind: u32,
    /// Start, CUPTI nanoseconds.
    pub start_ns: u64,
    /// End, CUPTI nanoseconds.
    pub end_ns: u64,
    /// Links the wait to its API call.
    pub correlation_id: u32,
    /// CUPTI context id.
    pub context_id: u32,
    /// CUPTI stream id (`u32::MAX` for a context-wide wait).
    pub stream_id: u32,
}

/// A device memory allocation or release (`MEMORY2` record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryOperation {
    /// `CUpti_ActivityMemoryOperationType` ([`layout::MEMORY_OP_ALLOCATION`], ...).
    pub operation: u32,
    /// `CUpti_ActivityMemoryKind`.
    pub memory_kind: u32,
    /// Links the operation to its API call.
    pub correlation_id: u32,
    /// Device address.
    pub address: u64,
    /// Bytes.
    pub bytes: u64,
    /// When, CUPTI nanoseconds.
    pub timestamp_ns: u64,
    /// CUDA device ordinal.
    pub device_id: u32,
    /// CUPTI context id.
    pub context_id: u32,
    /// CUPTI stream id.
    pub stream_id: u32,
}

/// Time CUPTI itself spent (buffer flushes, instrumentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overhead {
    /// `CUpti_ActivityOverheadKind`.
    pub kind: u32,
    /// Start, CUPTI nanoseconds.
    pub start_ns: u64,
    /// End, CUPTI nanoseconds.
    pub end_ns: u64,
    /// What it happened on: `CUpti_ActivityObjectKind` ([`layout::OBJECT_THREAD`], ...).
    pub object_kind: u32,
    /// `objectId` as three `u32`: `{processId, threadId, -}` for a process or thread,
    /// `{deviceId, contextId, streamId}` for a device, context or stream.
    pub object_id: [u32; 3],
}

/// One NVTX mark, or one end of an NVTX range (`MARKER` record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Marker {
    /// `CUPTI_ACTIVITY_FLAG_MARKER_*` bits.
    pub flags: u32,
    /// When, CUPTI nanoseconds.
    pub timestamp_ns: u64,
    /// Pairs a range's start with its end.
    pub id: u32,
    /// The thread, when `objectKind` is a thread (else 0).
    pub thread_id: u32,
    /// Address of the name (0 on a range's end).
    pub name: u64,
    /// Address of the domain name (0: the default domain).
    pub domain: u64,
}

/// A decoded record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activity {
    /// A kernel.
    Kernel(Kernel),
    /// A copy.
    Memcpy(Memcpy),
    /// A memset.
    Memset(Memset),
    /// A runtime or driver API call.
    Api(ApiCall),
    /// A host wait on the device.
    Synchronization(Synchronization),
    /// Links a CUPTI correlation id to a framework's id (Kineto's, XLA's).
    ExternalCorrelation {
        /// `CUpti_ExternalCorrelationKind`.
        kind: u32,
        /// The framework's id.
        external_id: u64,
        /// CUPTI's correlation id.
        correlation_id: u32,
    },
    /// A device memory allocation or release.
    Memory(MemoryOperation),
    /// CUPTI's own overhead.
    Overhead(Overhead),
    /// An NVTX mark or range end.
    Marker(Marker),
    /// A context: which device it is on.
    Context {
        /// CUPTI context id.
        context_id: u32,
        /// CUDA device ordinal.
        device_id: u32,
        /// The context's default stream.
        null_stream_id: u32,
    },
}

/// Why one record could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordError {
    /// Shorter than its kind's layout.
    Short {
        /// The record's kind.
        kind: u32,
        /// Its bytes.
        len: usize,
        /// What the layout needs.
        needed: usize,
    },
    /// A kind mlprof does not read (it never enables it).
    UnknownKind(u32),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Short { kind, len, needed } => {
                write!(f, "a record of kind {kind} has {len} bytes where its layout needs {needed}")
            }
            RecordError::UnknownKind(kind) => write!(f, "records of kind {kind} are not read"),
        }
    }
}

/// The offsets of a record's `const char *` fields: what the injection resolves into
/// the buffer's string table.
pub fn string_fields(kind: u32) -> &'static [usize] {
    match kind {
        layout::KIND_KERNEL | layout::KIND_CONCURRENT_KERNEL => &[layout::kernel::NAME],
        layout::KIND_MARKER => &[layout::marker::NAME, layout::marker::DOMAIN],
        _ => &[],
    }
}

/// The name key of an API record's callback id: what the injection resolves with
/// `cuptiGetCallbackName`.
pub fn callback_key(record: &[u8]) -> Option<StringKey> {
    let kind = u32_at(record, 0)?;
    let cbid = u32_at(record, layout::api::CBID)?;
    match kind {
        layout::KIND_RUNTIME => Some(StringKey::RuntimeCallback(cbid)),
        layout::KIND_DRIVER => Some(StringKey::DriverCallback(cbid)),
        _ => None,
    }
}

/// The record's kind (its first `u32`).
pub fn kind_of(record: &[u8]) -> Option<u32> {
    u32_at(record, 0)
}

/// A [`Memcpy`] read at the offsets of layout module `$m` (`memcpy` or `memcpy_p2p`).
macro_rules! memcpy {
    ($r:expr, $m:path, $peer:expr) => {{
        use $m as m;
        Memcpy {
            copy_kind: $r.u8(m::COPY_KIND),
            src_kind: $r.u8(m::SRC_KIND),
            dst_kind: $r.u8(m::DST_KIND),
            is_async: u32::from($r.u8(m::FLAGS)) & layout::FLAG_MEMCPY_ASYNC != 0,
            bytes: $r.u64(m::BYTES),
            start_ns: $r.u64(m::START),
            end_ns: $r.u64(m::END),
            device_id: $r.u32(m::DEVICE_ID),
            context_id: $r.u32(m::CONTEXT_ID),
            stream_id: $r.u32(m::STREAM_ID),
            peer: $peer,
            correlation_id: $r.u32(m::CORRELATION_ID),
        }
    }};
}

/// Reads one record.
pub fn decode(record: &[u8]) -> Result<Activity, RecordError> {
    let kind = kind_of(record).ok_or(RecordError::Short { kind: 0, len: record.len(), needed: 4 })?;
    let needed = match kind {
        layout::KIND_KERNEL | layout::KIND_CONCURRENT_KERNEL => layout::kernel::READ_END,
        layout::KIND_MEMCPY => layout::memcpy::READ_END,
        layout::KIND_MEMCPY2 => layout::memcpy_p2p::READ_END,
        layout::KIND_MEMSET => layout::memset::READ_END,
        layout::KIND_RUNTIME | layout::KIND_DRIVER => layout::api::READ_END,
        layout::KIND_SYNCHRONIZATION => layout::synchronization::READ_END,
        layout::KIND_EXTERNAL_CORRELATION => layout::external_correlation::READ_END,
        layout::KIND_MEMORY2 => layout::memory::READ_END,
        layout::KIND_OVERHEAD => layout::overhead::READ_END,
        layout::KIND_MARKER => layout::marker::READ_END,
        layout::KIND_CONTEXT => layout::context::READ_END,
        other => return Err(RecordError::UnknownKind(other)),
    };
    if record.len() < needed {
        return Err(RecordError::Short { kind, len: record.len(), needed });
    }
    // Every field below ends within `needed` bytes (the generated layout), so the reads
    // cannot fail; `R` still checks rather than indexes.
    let r = R(record);
    Ok(match kind {
        layout::KIND_KERNEL | layout::KIND_CONCURRENT_KERNEL => Activity::Kernel(read_kernel(&r)),
        // The two copy records share their fields' names (at their own offsets).
        layout::KIND_MEMCPY => Activity::Memcpy(memcpy!(r, layout::memcpy, None)),
        layout::KIND_MEMCPY2 => {
            use layout::memcpy_p2p as p;
            Activity::Memcpy(memcpy!(r, p, Some((r.u32(p::SRC_DEVICE_ID), r.u32(p::DST_DEVICE_ID)))))
        }
        layout::KIND_MEMSET => Activity::Memset(read_memset(&r)),
        layout::KIND_RUNTIME | layout::KIND_DRIVER => Activity::Api(read_api(&r, kind)),
        layout::KIND_SYNCHRONIZATION => Activity::Synchronization(read_synchronization(&r)),
        layout::KIND_EXTERNAL_CORRELATION => {
            use layout::external_correlation as e;
            Activity::ExternalCorrelation {
                kind: r.u32(e::EXTERNAL_KIND),
                external_id: r.u64(e::EXTERNAL_ID),
                correlation_id: r.u32(e::CORRELATION_ID),
            }
        }
        layout::KIND_MEMORY2 => Activity::Memory(read_memory(&r)),
        layout::KIND_OVERHEAD => Activity::Overhead(read_overhead(&r)),
        layout::KIND_MARKER => Activity::Marker(read_marker(&r)),
        layout::KIND_CONTEXT => {
            use layout::context as c;
            Activity::Context {
                context_id: r.u32(c::CONTEXT_ID),
                device_id: r.u32(c::DEVICE_ID),
                null_stream_id: r.u32(c::NULL_STREAM_ID),
            }
        }
        other => return Err(RecordError::UnknownKind(other)),
    })
}

/// A kernel record's fields.
fn read_kernel(r: &R<'_>) -> Kernel {
    use layout::kernel as k;
    Kernel {
        start_ns: r.u64(k::START),
        end_ns: r.u64(k::END),
        device_id: r.u32(k::DEVICE_ID),
        context_id: r.u32(k::CONTEXT_ID),
        stream_id: r.u32(k::STREAM_ID),
        grid: [r.i32(k::GRID_X), r.i32(k::GRID_Y), r.i32(k::GRID_Z)],
        block: [r.i32(k::BLOCK_X), r.i32(k::BLOCK_Y), r.i32(k::BLOCK_Z)],
        registers_per_thread: r.u16(k::REGISTERS_PER_THREAD),
        static_shared_memory: r.i32(k::STATIC_SHARED_MEMORY),
        dynamic_shared_memory: r.i32(k::DYNAMIC_SHARED_MEMORY),
        correlation_id: r.u32(k::CORRELATION_ID),
        name: r.u64(k::NAME),
    }
}

/// A memset record's fields.
fn read_memset(r: &R<'_>) -> Memset {
    use layout::memset as m;
    Memset {
        value: r.u32(m::VALUE),
        bytes: r.u64(m::BYTES),
        start_ns: r.u64(m::START),
        end_ns: r.u64(m::END),
        device_id: r.u32(m::DEVICE_ID),
        context_id: r.u32(m::CONTEXT_ID),
        stream_id: r.u32(m::STREAM_ID),
        correlation_id: r.u32(m::CORRELATION_ID),
        is_async: u32::from(r.u16(m::FLAGS)) & layout::FLAG_MEMSET_ASYNC != 0,
        memory_kind: r.u16(m::MEMORY_KIND),
    }
}

/// A runtime (`kind` `KIND_RUNTIME`) or driver API record's fields.
fn read_api(r: &R<'_>, kind: u32) -> ApiCall {
    use layout::api as a;
    let cbid = r.u32(a::CBID);
    ApiCall {
        callback: if kind == layout::KIND_RUNTIME {
            StringKey::RuntimeCallback(cbid)
        } else {
            StringKey::DriverCallback(cbid)
        },
        start_ns: r.u64(a::START),
        end_ns: r.u64(a::END),
        process_id: r.u32(a::PROCESS_ID),
        thread_id: r.u32(a::THREAD_ID),
        correlation_id: r.u32(a::CORRELATION_ID),
        return_value: r.u32(a::RETURN_VALUE),
    }
}

/// A synchronization record's fields.
fn read_synchronization(r: &R<'_>) -> Synchronization {
    use layout::synchronization as s;
    Synchronization {
        kind: r.u32(s::TYPE),
        start_ns: r.u64(s::START),
        end_ns: r.u64(s::END),
        correlation_id: r.u32(s::CORRELATION_ID),
        context_id: r.u32(s::CONTEXT_ID),
        stream_id: r.u32(s::STREAM_ID),
    }
}

/// A memory (alloc/free) record's fields.
fn read_memory(r: &R<'_>) -> MemoryOperation {
    use layout::memory as m;
    MemoryOperation {
        operation: r.u32(m::OPERATION_TYPE),
        memory_kind: r.u32(m::MEMORY_KIND),
        correlation_id: r.u32(m::CORRELATION_ID),
        address: r.u64(m::ADDRESS),
        bytes: r.u64(m::BYTES),
        timestamp_ns: r.u64(m::TIMESTAMP),
        device_id: r.u32(m::DEVICE_ID),
        context_id: r.u32(m::CONTEXT_ID),
        stream_id: r.u32(m::STREAM_ID),
    }
}

/// An overhead record's fields.
fn read_overhead(r: &R<'_>) -> Overhead {
    use layout::overhead as o;
    Overhead {
        kind: r.u32(o::OVERHEAD_KIND),
        start_ns: r.u64(o::START),
        end_ns: r.u64(o::END),
        object_kind: r.u32(o::OBJECT_KIND),
        object_id: [r.u32(o::OBJECT_ID), r.u32(o::OBJECT_ID + 4), r.u32(o::OBJECT_ID + 8)],
    }
}

/// An NVTX marker record's fields.
fn read_marker(r: &R<'_>) -> Marker {
    use layout::marker as m;
    Marker {
        flags: r.u32(m::FLAGS),
        timestamp_ns: r.u64(m::TIMESTAMP),
        id: r.u32(m::ID),
        thread_id: r.u32(m::OBJECT_ID + 4),
        name: r.u64(m::NAME),
        domain: r.u64(m::DOMAIN),
    }
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let b = bytes.get(at..at + 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Little-endian reads from a record already checked to be long enough; a read past
/// its end (a layout error) gives 0 rather than a panic.
struct R<'a>(&'a [u8]);

impl R<'_> {
    fn array<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut a = [0u8; N];
        if let Some(b) = self.0.get(at..at + N) {
            a.copy_from_slice(b);
        }
        a
    }
    fn u8(&self, at: usize) -> u8 {
        self.0.get(at).copied().unwrap_or(0)
    }
    fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.array(at))
    }
    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.array(at))
    }
    fn i32(&self, at: usize) -> i32 {
        i32::from_le_bytes(self.array(at))
    }
    fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.array(at))
    }
}

/// Builds records the way CUPTI 13 lays them out: for tests here, in the injection's
/// mock-CUPTI tests and in `mlprof run`'s.
pub mod build {
    use crate::layout;
    use crate::wire::DeviceInfo;

    /// An H100 SXM as the driver describes it (132 SMs, 80 GiB, 3.35 TB/s), ordinal 0.
    pub fn h100() -> DeviceInfo {
        DeviceInfo {
            ordinal: 0,
            name: "NVIDIA H100".into(),
            clock_khz: 1_980_000,
            multiprocessors: 132,
            compute_capability_major: 9,
            compute_capability_minor: 0,
            max_threads_per_multiprocessor: 2048,
            warp_size: 32,
            max_registers_per_multiprocessor: 65536,
            max_shared_memory_per_multiprocessor: 233_472,
            max_blocks_per_multiprocessor: 32,
            memory_bandwidth: 3_352_320_000_000,
            memory_size: 80 << 30,
        }
    }

    /// A zeroed record of `kind` and `size` bytes.
    pub fn record(kind: u32, size: usize) -> Vec<u8> {
        let mut r = vec![0u8; size];
        put_u32(&mut r, 0, kind);
        r
    }

    /// Writes `v` at `at` (little-endian); does nothing past the end.
    pub fn put_u32(r: &mut [u8], at: usize, v: u32) {
        if let Some(b) = r.get_mut(at..at + 4) {
            b.copy_from_slice(&v.to_le_bytes());
        }
    }

    /// Writes `v` at `at` (little-endian); does nothing past the end.
    pub fn put_u64(r: &mut [u8], at: usize, v: u64) {
        if let Some(b) = r.get_mut(at..at + 8) {
            b.copy_from_slice(&v.to_le_bytes());
        }
    }

    /// A concurrent-kernel record.
    pub fn kernel(start_ns: u64, end_ns: u64, stream: u32, correlation: u32, name: u64) -> Vec<u8> {
        use layout::kernel as k;
        let mut r = record(layout::KIND_CONCURRENT_KERNEL, k::SIZE);
        put_u64(&mut r, k::START, start_ns);
        put_u64(&mut r, k::END, end_ns);
        put_u32(&mut r, k::CONTEXT_ID, 1);
        put_u32(&mut r, k::STREAM_ID, stream);
        for (at, v) in
            [(k::GRID_X, 80), (k::GRID_Y, 1), (k::GRID_Z, 1), (k::BLOCK_X, 256), (k::BLOCK_Y, 1), (k::BLOCK_Z, 1)]
        {
            put_u32(&mut r, at, v);
        }
        if let Some(b) = r.get_mut(k::REGISTERS_PER_THREAD..k::REGISTERS_PER_THREAD + 2) {
            b.copy_from_slice(&32u16.to_le_bytes());
        }
        put_u32(&mut r, k::STATIC_SHARED_MEMORY, 1024);
        put_u32(&mut r, k::CORRELATION_ID, correlation);
        put_u64(&mut r, k::NAME, name);
        r
    }

    /// A host-to-device or device-to-host copy record.
    pub fn memcpy(copy_kind: u32, bytes: u64, start_ns: u64, end_ns: u64, stream: u32, correlation: u32) -> Vec<u8> {
        use layout::memcpy as m;
        let mut r = record(layout::KIND_MEMCPY, m::SIZE);
        r[m::COPY_KIND] = copy_kind as u8;
        r[m::SRC_KIND] = layout::MEMORY_KIND_PINNED as u8;
        r[m::DST_KIND] = layout::MEMORY_KIND_DEVICE as u8;
        put_u64(&mut r, m::BYTES, bytes);
        put_u64(&mut r, m::START, start_ns);
        put_u64(&mut r, m::END, end_ns);
        put_u32(&mut r, m::CONTEXT_ID, 1);
        put_u32(&mut r, m::STREAM_ID, stream);
        put_u32(&mut r, m::CORRELATION_ID, correlation);
        r
    }

    /// A runtime API record.
    pub fn runtime_api(cbid: u32, start_ns: u64, end_ns: u64, pid: u32, tid: u32, correlation: u32) -> Vec<u8> {
        use layout::api as a;
        let mut r = record(layout::KIND_RUNTIME, a::SIZE);
        put_u32(&mut r, a::CBID, cbid);
        put_u64(&mut r, a::START, start_ns);
        put_u64(&mut r, a::END, end_ns);
        put_u32(&mut r, a::PROCESS_ID, pid);
        put_u32(&mut r, a::THREAD_ID, tid);
        put_u32(&mut r, a::CORRELATION_ID, correlation);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_record_reads_back_every_field_it_was_built_with() {
        let record = build::kernel(1_000, 3_500, 7, 42, 0xdead_beef);
        let Ok(Activity::Kernel(k)) = decode(&record) else { panic!("{:?}", decode(&record)) };
        assert_eq!((k.start_ns, k.end_ns, k.stream_id, k.correlation_id, k.name), (1_000, 3_500, 7, 42, 0xdead_beef));
        assert_eq!(
            (k.grid, k.block, k.registers_per_thread, k.static_shared_memory),
            ([80, 1, 1], [256, 1, 1], 32, 1024)
        );
        assert_eq!(string_fields(layout::KIND_CONCURRENT_KERNEL), &[layout::kernel::NAME]);
    }

    #[test]
    fn copies_and_api_calls_read_back() {
        let copy = build::memcpy(layout::MEMCPY_HTOD, 4096, 10, 20, 3, 5);
        let Ok(Activity::Memcpy(m)) = decode(&copy) else { panic!() };
        assert_eq!((m.copy_kind, m.bytes, m.stream_id, m.correlation_id, m.peer), (1, 4096, 3, 5, None));
        let api = build::runtime_api(211, 5, 9, 100, 101, 5);
        assert_eq!(callback_key(&api), Some(StringKey::RuntimeCallback(211)));
        let Ok(Activity::Api(a)) = decode(&api) else { panic!() };
        assert_eq!((a.thread_id, a.correlation_id, a.start_ns, a.end_ns), (101, 5, 5, 9));
    }

    #[test]
    fn short_records_and_unknown_kinds_are_errors_not_panics() {
        let record = build::kernel(1, 2, 3, 4, 5);
        for cut in 0..layout::kernel::READ_END {
            assert!(decode(&record[..cut]).is_err(), "cut at {cut}");
        }
        // CUPTI 12.8 writes shorter kernel records (`CUpti_ActivityKernel9`, 208 bytes)
        // holding the same fields.
        assert!(matches!(decode(&record[..208]), Ok(Activity::Kernel(k)) if k.name == 5));
        assert_eq!(decode(&build::record(9999, 64)), Err(RecordError::UnknownKind(9999)));
    }

    #[test]
    fn cupti_12_8_to_13_is_read() {
        for supported in [26, 28, 130001, 130500] {
            assert!(check_version(supported).is_ok(), "{supported}");
        }
        for older_or_newer in [24, 18, 29, 140000] {
            assert!(check_version(older_or_newer).unwrap_err().contains("not supported"), "{older_or_newer}");
        }
    }
}
