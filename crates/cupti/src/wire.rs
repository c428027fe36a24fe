//! The stream protocol between `mlprof-inject` and its parent, over a unix stream socket
//! (`MLPROF_INJECT_SOCKET`). Every message is a frame: a little-endian `u32` length of
//! what follows, a one-byte type, then the type's fields, all little-endian.
//!
//! Injection → parent: [`Hello`] first, then any number of buffers, notes, drop counts
//! and flush acknowledgements, and `Bye` at exit. Parent → injection: start, stop and
//! flush requests. Pure functions over bytes; decoding trusts nothing and bounds every
//! length by the frame it is in.

use std::fmt;

/// Version of this protocol, sent in [`Hello`]; the parent refuses others.
pub const PROTOCOL_VERSION: u32 = 1;
/// The largest frame either side accepts, bytes (a 4 MiB CUPTI buffer with its record
/// offsets and strings fits many times over).
pub const MAX_FRAME: usize = 64 << 20;
/// Bytes of the frame header: the `u32` length.
pub const FRAME_HEADER: usize = 4;

const HELLO: u8 = 1;
const PASSIVE: u8 = 2;
const BUFFER: u8 = 3;
const DROPPED: u8 = 4;
const NOTE: u8 = 5;
const FLUSHED: u8 = 6;
const BYE: u8 = 7;
const DEVICE: u8 = 8;
const START: u8 = 16;
const STOP: u8 = 17;
const FLUSH: u8 = 18;

/// The first message of a process: who it is and how its clock relates to the host's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// [`PROTOCOL_VERSION`] of the injection.
    pub protocol: u32,
    /// The process id.
    pub pid: u32,
    /// `cuptiGetVersion()` (CUPTI 13.0: 130001); 0 when CUPTI was not loaded.
    pub cupti_api_version: u32,
    /// `cuptiGetTimestamp()` read right before `realtime_ns`, nanoseconds.
    pub cupti_timestamp_ns: u64,
    /// `CLOCK_REALTIME` at the same moment, Unix epoch nanoseconds.
    pub realtime_ns: i64,
    /// Activities were enabled before this message (`MLPROF_INJECT_RECORD_AT_START=1`):
    /// the process's first window began at `realtime_ns`.
    pub recording: bool,
}

/// A GPU as the CUDA driver describes it (`cuDeviceGetAttribute`), for the device plane's
/// stats and kernel occupancy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceInfo {
    /// CUDA device ordinal.
    pub ordinal: u32,
    /// `cuDeviceGetName`.
    pub name: String,
    /// Core clock, kHz.
    pub clock_khz: i64,
    /// Streaming multiprocessors.
    pub multiprocessors: i64,
    /// Compute capability, major.
    pub compute_capability_major: i64,
    /// Compute capability, minor.
    pub compute_capability_minor: i64,
    /// Resident threads per multiprocessor.
    pub max_threads_per_multiprocessor: i64,
    /// Threads per warp.
    pub warp_size: i64,
    /// Registers per multiprocessor.
    pub max_registers_per_multiprocessor: i64,
    /// Shared memory per multiprocessor, bytes.
    pub max_shared_memory_per_multiprocessor: i64,
    /// Resident blocks per multiprocessor.
    pub max_blocks_per_multiprocessor: i64,
    /// Peak memory bandwidth, bytes/s (2 × memory clock × bus width / 8, as XLA computes it).
    pub memory_bandwidth: u64,
    /// Global memory, bytes.
    pub memory_size: u64,
}

/// `CLOCK_REALTIME`, Unix epoch nanoseconds: the clock of [`Hello::realtime_ns`] and of
/// the windows the parent opens, so both sides read the same one.
pub fn realtime_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// What one string key in a [`Buffer`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StringKey {
    /// A `const char *` field of a record (kernel name, NVTX name, device name), by its
    /// address in the job.
    Pointer(u64),
    /// The name of a CUDA runtime API callback id.
    RuntimeCallback(u32),
    /// The name of a CUDA driver API callback id.
    DriverCallback(u32),
}

impl StringKey {
    fn tag_and_value(self) -> (u8, u64) {
        match self {
            StringKey::Pointer(p) => (0, p),
            StringKey::RuntimeCallback(id) => (1, u64::from(id)),
            StringKey::DriverCallback(id) => (2, u64::from(id)),
        }
    }

    fn from_tag(tag: u8, value: u64) -> Option<StringKey> {
        match tag {
            0 => Some(StringKey::Pointer(value)),
            1 => u32::try_from(value).ok().map(StringKey::RuntimeCallback),
            2 => u32::try_from(value).ok().map(StringKey::DriverCallback),
            _ => None,
        }
    }
}

/// One CUPTI activity buffer: its valid bytes, where each record starts, and the
/// strings its records refer to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Buffer {
    /// Byte offset of each record in `data`, ascending; a record ends where the next
    /// starts (the last at the end of `data`).
    pub record_offsets: Vec<u32>,
    /// The strings the records point to, resolved in the job.
    pub strings: Vec<(StringKey, Vec<u8>)>,
    /// The buffer's valid bytes, as CUPTI wrote them.
    pub data: Vec<u8>,
}

impl Buffer {
    /// Each record's bytes, in order; `None` when the offsets do not fit `data` (out of
    /// range or not ascending).
    pub fn records(&self) -> Option<Vec<&[u8]>> {
        let mut out = Vec::with_capacity(self.record_offsets.len());
        for (i, &start) in self.record_offsets.iter().enumerate() {
            let end = match self.record_offsets.get(i + 1) {
                Some(&next) => next as usize,
                None => self.data.len(),
            };
            out.push(self.data.get(start as usize..end)?);
        }
        Some(out)
    }
}

/// A message from the injection to its parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FromInjection {
    /// The first message.
    Hello(Hello),
    /// The injection stays out of CUPTI in this process, and why (another subscriber, a
    /// framework's own tracer, no libcupti, ...). Nothing else follows but `Bye`.
    Passive(String),
    /// A buffer of records.
    Buffer(Buffer),
    /// Records CUPTI dropped since the last count (no buffer was free).
    Dropped(u64),
    /// Something worth saying that does not stop recording (an activity kind this CUPTI
    /// refused, ...).
    Note(String),
    /// A GPU's properties (sent once per device, when CUDA is up).
    Device(DeviceInfo),
    /// Every record up to the flush request `token` has been sent.
    Flushed(u32),
    /// The process is exiting; nothing follows.
    Bye,
}

/// A message from the parent to the injection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToInjection {
    /// Start recording activities.
    Start,
    /// Stop recording, then flush everything recorded; answered by `Flushed(token)`.
    Stop(u32),
    /// Flush everything recorded so far; answered by `Flushed(token)`.
    Flush(u32),
}

/// Why bytes are not a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WireError {
    /// The frame is larger than [`MAX_FRAME`] or than the bytes given.
    BadLength(usize),
    /// An unknown message type.
    UnknownType(u8),
    /// A field runs past the end of its frame.
    Truncated(&'static str),
    /// Bytes left over after the last field.
    Trailing(usize),
    /// A string key of an unknown kind.
    BadStringKey,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::BadLength(n) => write!(f, "a frame of {n} bytes is not allowed (at most {MAX_FRAME})"),
            WireError::UnknownType(t) => write!(f, "unknown message type {t}"),
            WireError::Truncated(what) => write!(f, "the frame ends inside its {what}"),
            WireError::Trailing(n) => write!(f, "{n} bytes follow the last field"),
            WireError::BadStringKey => write!(f, "a string key of an unknown kind"),
        }
    }
}

impl std::error::Error for WireError {}

/// Appends `message` as one frame to `out`.
pub fn encode_from_injection(message: &FromInjection, out: &mut Vec<u8>) {
    let at = begin(out);
    match message {
        FromInjection::Hello(h) => {
            out.push(HELLO);
            put_u32(out, h.protocol);
            put_u32(out, h.pid);
            put_u32(out, h.cupti_api_version);
            put_u64(out, h.cupti_timestamp_ns);
            put_u64(out, h.realtime_ns as u64);
            out.push(u8::from(h.recording));
        }
        FromInjection::Device(d) => {
            out.push(DEVICE);
            put_u32(out, d.ordinal);
            for v in [
                d.clock_khz,
                d.multiprocessors,
                d.compute_capability_major,
                d.compute_capability_minor,
                d.max_threads_per_multiprocessor,
                d.warp_size,
                d.max_registers_per_multiprocessor,
                d.max_shared_memory_per_multiprocessor,
                d.max_blocks_per_multiprocessor,
            ] {
                put_u64(out, v as u64);
            }
            put_u64(out, d.memory_bandwidth);
            put_u64(out, d.memory_size);
            out.extend_from_slice(d.name.as_bytes());
        }
        FromInjection::Passive(reason) => {
            out.push(PASSIVE);
            out.extend_from_slice(reason.as_bytes());
        }
        FromInjection::Buffer(buffer) => {
            let strings = buffer.strings.iter().map(|(key, text)| (*key, text.as_slice()));
            put_buffer_body(&buffer.record_offsets, strings, &buffer.data, out);
        }
        FromInjection::Dropped(n) => {
            out.push(DROPPED);
            put_u64(out, *n);
        }
        FromInjection::Note(text) => {
            out.push(NOTE);
            out.extend_from_slice(text.as_bytes());
        }
        FromInjection::Flushed(token) => {
            out.push(FLUSHED);
            put_u32(out, *token);
        }
        FromInjection::Bye => out.push(BYE),
    }
    end(out, at);
}

/// Appends a buffer frame to `out` from its parts, without building a [`Buffer`] (the
/// injection's path: the data is CUPTI's memory).
pub fn encode_buffer(record_offsets: &[u32], strings: &[(StringKey, &[u8])], data: &[u8], out: &mut Vec<u8>) {
    let at = begin(out);
    put_buffer_body(record_offsets, strings.iter().copied(), data, out);
    end(out, at);
}

fn put_buffer_body<'s>(
    record_offsets: &[u32],
    strings: impl ExactSizeIterator<Item = (StringKey, &'s [u8])>,
    data: &[u8],
    out: &mut Vec<u8>,
) {
    out.push(BUFFER);
    put_u32(out, record_offsets.len() as u32);
    for &offset in record_offsets {
        put_u32(out, offset);
    }
    put_u32(out, strings.len() as u32);
    for (key, text) in strings {
        let (tag, value) = key.tag_and_value();
        out.push(tag);
        put_u64(out, value);
        put_u32(out, text.len() as u32);
        out.extend_from_slice(text);
    }
    put_u32(out, data.len() as u32);
    out.extend_from_slice(data);
}

/// Appends `message` as one frame to `out`.
pub fn encode_to_injection(message: ToInjection, out: &mut Vec<u8>) {
    let at = begin(out);
    match message {
        ToInjection::Start => out.push(START),
        ToInjection::Stop(token) => {
            out.push(STOP);
            put_u32(out, token);
        }
        ToInjection::Flush(token) => {
            out.push(FLUSH);
            put_u32(out, token);
        }
    }
    end(out, at);
}

/// The length of the frame at the start of `bytes`, header included, once its header is
/// there: `Ok(None)` when fewer than [`FRAME_HEADER`] bytes are given.
pub fn frame_len(bytes: &[u8]) -> Result<Option<usize>, WireError> {
    let Some(header) = bytes.get(..FRAME_HEADER) else { return Ok(None) };
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(WireError::BadLength(len));
    }
    Ok(Some(FRAME_HEADER + len))
}

/// Decodes one whole frame (header included) sent by the injection.
pub fn decode_from_injection(frame: &[u8]) -> Result<FromInjection, WireError> {
    let mut r = Reader::frame(frame)?;
    let message = match r.u8("type")? {
        HELLO => FromInjection::Hello(Hello {
            protocol: r.u32("protocol version")?,
            pid: r.u32("pid")?,
            cupti_api_version: r.u32("CUPTI version")?,
            cupti_timestamp_ns: r.u64("CUPTI timestamp")?,
            realtime_ns: r.u64("wall-clock time")? as i64,
            recording: r.u8("recording flag")? != 0,
        }),
        DEVICE => {
            let ordinal = r.u32("device ordinal")?;
            let mut v = [0i64; 9];
            for slot in &mut v {
                *slot = r.u64("device attribute")? as i64;
            }
            FromInjection::Device(DeviceInfo {
                ordinal,
                clock_khz: v[0],
                multiprocessors: v[1],
                compute_capability_major: v[2],
                compute_capability_minor: v[3],
                max_threads_per_multiprocessor: v[4],
                warp_size: v[5],
                max_registers_per_multiprocessor: v[6],
                max_shared_memory_per_multiprocessor: v[7],
                max_blocks_per_multiprocessor: v[8],
                memory_bandwidth: r.u64("memory bandwidth")?,
                memory_size: r.u64("memory size")?,
                name: r.rest_text(),
            })
        }
        PASSIVE => FromInjection::Passive(r.rest_text()),
        BUFFER => FromInjection::Buffer(decode_buffer(&mut r)?),
        DROPPED => FromInjection::Dropped(r.u64("drop count")?),
        NOTE => FromInjection::Note(r.rest_text()),
        FLUSHED => FromInjection::Flushed(r.u32("flush token")?),
        BYE => FromInjection::Bye,
        other => return Err(WireError::UnknownType(other)),
    };
    r.finish()?;
    Ok(message)
}

fn decode_buffer(r: &mut Reader<'_>) -> Result<Buffer, WireError> {
    let records = r.u32("record count")? as usize;
    // Each offset takes 4 bytes of the frame: a count beyond what it holds is refused
    // before anything is allocated for it.
    if records > r.remaining() / 4 {
        return Err(WireError::Truncated("record offsets"));
    }
    let mut record_offsets = Vec::with_capacity(records);
    for _ in 0..records {
        record_offsets.push(r.u32("record offsets")?);
    }
    let count = r.u32("string count")? as usize;
    if count > r.remaining() / 13 {
        return Err(WireError::Truncated("strings"));
    }
    let mut strings = Vec::with_capacity(count);
    for _ in 0..count {
        let tag = r.u8("string key")?;
        let value = r.u64("string key")?;
        let key = StringKey::from_tag(tag, value).ok_or(WireError::BadStringKey)?;
        let len = r.u32("string length")? as usize;
        strings.push((key, r.bytes(len, "string")?.to_vec()));
    }
    let len = r.u32("data length")? as usize;
    let data = r.bytes(len, "record data")?.to_vec();
    Ok(Buffer { record_offsets, strings, data })
}

/// Decodes one whole frame (header included) sent by the parent.
pub fn decode_to_injection(frame: &[u8]) -> Result<ToInjection, WireError> {
    let mut r = Reader::frame(frame)?;
    let message = match r.u8("type")? {
        START => ToInjection::Start,
        STOP => ToInjection::Stop(r.u32("flush token")?),
        FLUSH => ToInjection::Flush(r.u32("flush token")?),
        other => return Err(WireError::UnknownType(other)),
    };
    r.finish()?;
    Ok(message)
}

fn begin(out: &mut Vec<u8>) -> usize {
    let at = out.len();
    out.extend_from_slice(&[0; FRAME_HEADER]);
    at
}

fn end(out: &mut [u8], at: usize) {
    let len = (out.len() - at - FRAME_HEADER) as u32;
    out[at..at + FRAME_HEADER].copy_from_slice(&len.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Reads fields off one frame's body.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn frame(frame: &'a [u8]) -> Result<Reader<'a>, WireError> {
        match frame_len(frame)? {
            Some(len) if len == frame.len() => Ok(Reader { rest: &frame[FRAME_HEADER..] }),
            _ => Err(WireError::BadLength(frame.len())),
        }
    }

    fn remaining(&self) -> usize {
        self.rest.len()
    }

    fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if n > self.rest.len() {
            return Err(WireError::Truncated(what));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(self.bytes(1, what)?[0])
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        let b = self.bytes(8, what)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn rest_text(&mut self) -> String {
        let text = String::from_utf8_lossy(self.rest).into_owned();
        self.rest = &[];
        text
    }

    fn finish(self) -> Result<(), WireError> {
        if self.rest.is_empty() { Ok(()) } else { Err(WireError::Trailing(self.rest.len())) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(message: FromInjection) {
        let mut bytes = Vec::new();
        encode_from_injection(&message, &mut bytes);
        assert_eq!(frame_len(&bytes).unwrap(), Some(bytes.len()));
        assert_eq!(decode_from_injection(&bytes).unwrap(), message);
    }

    #[test]
    fn every_message_comes_back_as_it_was_sent() {
        round_trip(FromInjection::Hello(Hello {
            protocol: PROTOCOL_VERSION,
            pid: 4242,
            cupti_api_version: 130001,
            cupti_timestamp_ns: 1_764_000_000_000_000_123,
            realtime_ns: 1_764_000_000_000_000_100,
            recording: true,
        }));
        round_trip(FromInjection::Device(DeviceInfo {
            ordinal: 1,
            name: "NVIDIA H200".into(),
            memory_bandwidth: 4_800_000_000_000,
            memory_size: 150_754_820_096,
            ..crate::records::build::h100()
        }));
        round_trip(FromInjection::Passive("another CUPTI subscriber".into()));
        round_trip(FromInjection::Buffer(Buffer {
            record_offsets: vec![0, 216, 312],
            strings: vec![
                (StringKey::Pointer(0x7f00_dead_beef), b"_Z6kernelPf".to_vec()),
                (StringKey::RuntimeCallback(211), b"cudaLaunchKernel".to_vec()),
                (StringKey::DriverCallback(307), b"cuLaunchKernel".to_vec()),
            ],
            data: vec![7; 400],
        }));
        round_trip(FromInjection::Dropped(12));
        round_trip(FromInjection::Note("MEMORY2 refused".into()));
        round_trip(FromInjection::Flushed(3));
        round_trip(FromInjection::Bye);
        for message in [ToInjection::Start, ToInjection::Stop(1), ToInjection::Flush(u32::MAX)] {
            let mut bytes = Vec::new();
            encode_to_injection(message, &mut bytes);
            assert_eq!(decode_to_injection(&bytes).unwrap(), message);
        }
    }

    #[test]
    fn every_truncation_of_a_frame_is_an_error() {
        let mut bytes = Vec::new();
        encode_from_injection(
            &FromInjection::Buffer(Buffer {
                record_offsets: vec![0, 8],
                strings: vec![(StringKey::Pointer(1), b"k".to_vec())],
                data: vec![1; 16],
            }),
            &mut bytes,
        );
        for cut in 0..bytes.len() {
            let mut short = bytes[..cut].to_vec();
            if short.len() >= FRAME_HEADER {
                // Keep the header consistent with the shorter body so the body's own
                // fields are what runs out.
                let len = (short.len() - FRAME_HEADER) as u32;
                short[..4].copy_from_slice(&len.to_le_bytes());
            }
            assert!(decode_from_injection(&short).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn hostile_counts_and_lengths_are_refused_before_allocating() {
        let mut frame = vec![0; 4];
        frame.push(BUFFER);
        frame.extend_from_slice(&u32::MAX.to_le_bytes());
        let len = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&len.to_le_bytes());
        assert_eq!(decode_from_injection(&frame), Err(WireError::Truncated("record offsets")));
        assert_eq!(frame_len(&(MAX_FRAME as u32 + 1).to_le_bytes()), Err(WireError::BadLength(MAX_FRAME + 1)));
        assert_eq!(frame_len(&[0, 0, 0, 0]), Err(WireError::BadLength(0)));
        assert_eq!(frame_len(&[1, 0]), Ok(None));
    }

    #[test]
    fn records_are_cut_at_their_offsets_and_bad_offsets_refused() {
        let buffer = Buffer { record_offsets: vec![0, 4, 10], strings: Vec::new(), data: (0..12).collect() };
        let records = buffer.records().unwrap();
        assert_eq!(records, vec![&[0u8, 1, 2, 3][..], &[4, 5, 6, 7, 8, 9], &[10, 11]]);
        let backwards = Buffer { record_offsets: vec![8, 4], strings: Vec::new(), data: vec![0; 12] };
        assert_eq!(backwards.records(), None);
        let beyond = Buffer { record_offsets: vec![0, 20], strings: Vec::new(), data: vec![0; 12] };
        assert_eq!(beyond.records(), None);
    }
}
