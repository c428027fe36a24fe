//! The socket to `mlprof run`: one sender thread writes frames ([`mlprof_cupti::wire`])
//! in order, one control thread reads the parent's start/stop/flush requests and
//! flushes CUPTI periodically while recording. The job's threads never write to the
//! socket: CUPTI's buffer callback only queues, and the queue is bounded by the buffers
//! that may exist. When the parent goes away, recording stops and buffers are freed
//! unsent.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use mlprof_cupti::records::{callback_key, kind_of, string_fields};
use mlprof_cupti::wire::{
    FromInjection, Hello, StringKey, ToInjection, decode_to_injection, encode_buffer, encode_from_injection, frame_len,
};

use crate::recorder::{self, Injection, MAX_BUFFERS, lock};

/// How often CUPTI is flushed while recording, so a killed process loses at most this
/// much.
pub const FLUSH_PERIOD: Duration = Duration::from_millis(250);
/// The longest string read from the job's memory, bytes (kernel names of deep templates
/// run to a few KiB).
const MAX_STRING: usize = 64 << 10;

/// What the sender thread is handed.
pub enum Outgoing {
    /// A CUPTI buffer, by address, with its valid bytes; freed once sent.
    Buffer {
        /// Address of the buffer.
        address: usize,
        /// Its valid bytes.
        valid: usize,
    },
    /// Any other message.
    Message(FromInjection),
}

/// The injection's side of the socket.
pub struct Link {
    queue: SyncSender<Outgoing>,
    receiver: Mutex<Option<Receiver<Outgoing>>>,
    stream: Mutex<Option<UnixStream>>,
    /// Items queued and not yet handled by the sender.
    pending: AtomicUsize,
    idle: (Mutex<()>, Condvar),
    /// The socket failed: the parent is gone.
    gone: AtomicBool,
}

impl Link {
    /// Sends `hello` and prepares the queue; `None` when the parent does not take it.
    pub fn open(mut stream: UnixStream, hello: Hello) -> Option<Link> {
        let mut frame = Vec::new();
        encode_from_injection(&FromInjection::Hello(hello), &mut frame);
        stream.write_all(&frame).ok()?;
        // Buffers plus the few messages that go with them.
        let (queue, receiver) = sync_channel(MAX_BUFFERS * 2 + 16);
        Some(Link {
            queue,
            receiver: Mutex::new(Some(receiver)),
            stream: Mutex::new(Some(stream)),
            pending: AtomicUsize::new(0),
            idle: (Mutex::new(()), Condvar::new()),
            gone: AtomicBool::new(false),
        })
    }

    /// Queues `item` without waiting; false when it was not taken (queue full, parent
    /// gone): the caller keeps ownership.
    pub fn queue(&self, item: Outgoing) -> bool {
        if self.gone.load(Ordering::SeqCst) {
            return false;
        }
        self.pending.fetch_add(1, Ordering::SeqCst);
        match self.queue.try_send(item) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.done_one();
                false
            }
        }
    }

    /// Queues a message; dropped if it cannot be.
    pub fn send(&self, message: FromInjection) {
        let _ = self.queue(Outgoing::Message(message));
    }

    /// Waits until everything queued has been handled, at most `timeout`.
    pub fn drain(&self, timeout: Duration) {
        let until = Instant::now() + timeout;
        let mut guard = lock(&self.idle.0);
        while self.pending.load(Ordering::SeqCst) > 0 {
            let Some(left) = until.checked_duration_since(Instant::now()) else { return };
            guard = match self.idle.1.wait_timeout(guard, left.min(Duration::from_millis(50))) {
                Ok((g, _)) => g,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    fn done_one(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
        let _guard = lock(&self.idle.0);
        self.idle.1.notify_all();
    }
}

/// Writes frames and then closes the stream: the passive path, before any thread exists.
pub fn say_and_close(mut stream: UnixStream, messages: &[FromInjection]) {
    let mut bytes = Vec::new();
    for message in messages {
        encode_from_injection(message, &mut bytes);
    }
    encode_from_injection(&FromInjection::Bye, &mut bytes);
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = stream.write_all(&bytes);
}

/// Starts the sender and control threads of the current injection.
pub fn start_threads() {
    let Some(injection) = recorder::current() else { return };
    let receiver = lock(&injection.link.receiver).take();
    let stream = lock(&injection.link.stream).take();
    let (Some(receiver), Some(stream)) = (receiver, stream) else { return };
    let Ok(control) = stream.try_clone() else { return };
    let _ =
        std::thread::Builder::new().name("mlprof-send".into()).spawn(move || send_loop(injection, receiver, stream));
    let _ = std::thread::Builder::new().name("mlprof-control".into()).spawn(move || control_loop(injection, control));
}

fn send_loop(injection: &'static Injection, receiver: Receiver<Outgoing>, mut stream: UnixStream) {
    let mut frame = Vec::with_capacity(recorder::BUFFER_BYTES + (1 << 20));
    let mut names: HashMap<StringKey, Vec<u8>> = HashMap::new();
    let mut offsets = Vec::new();
    while let Ok(item) = receiver.recv() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            frame.clear();
            match item {
                Outgoing::Buffer { address, valid } => {
                    if !injection.link.gone.load(Ordering::SeqCst) {
                        encode_cupti_buffer(injection, address, valid, &mut offsets, &mut names, &mut frame);
                    }
                    injection.release(address);
                }
                Outgoing::Message(message) => encode_from_injection(&message, &mut frame),
            }
            if !frame.is_empty() && !injection.link.gone.load(Ordering::SeqCst) && stream.write_all(&frame).is_err() {
                injection.link.gone.store(true, Ordering::SeqCst);
            }
        }));
        injection.link.done_one();
    }
}

/// Encodes the buffer at `address` with its record offsets and the strings its records
/// point to.
fn encode_cupti_buffer(
    injection: &Injection,
    address: usize,
    valid: usize,
    offsets: &mut Vec<u32>,
    names: &mut HashMap<StringKey, Vec<u8>>,
    frame: &mut Vec<u8>,
) {
    offsets.clear();
    // SAFETY: a buffer CUPTI completed with `valid` valid bytes, owned by us until
    // `release`.
    unsafe { injection.cupti.record_offsets(address as *mut u8, valid, offsets) };
    // SAFETY: the same buffer, read-only, `valid` bytes.
    let data = unsafe { std::slice::from_raw_parts(address as *const u8, valid) };
    let mut keys: Vec<StringKey> = Vec::new();
    for (i, &start) in offsets.iter().enumerate() {
        let end = offsets.get(i + 1).map_or(valid, |&next| next as usize);
        let Some(record) = data.get(start as usize..end) else { continue };
        let Some(kind) = kind_of(record) else { continue };
        for &field in string_fields(kind) {
            if let Some(b) = record.get(field..field + 8) {
                let pointer = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                if pointer != 0 {
                    keys.push(StringKey::Pointer(pointer));
                }
            }
        }
        if let Some(key) = callback_key(record) {
            keys.push(key);
        }
    }
    keys.sort_unstable();
    keys.dedup();
    // Callback names are cached for the process; pointers are read again for every
    // buffer, as an address may name another string later (a module unloaded, another
    // loaded at the same place).
    for key in &keys {
        let text = match *key {
            // SAFETY: a `const char *` CUPTI wrote into one of its own records: a kernel,
            // NVTX or device name, alive while the record is.
            StringKey::Pointer(p) => unsafe { read_c_string(p as usize) },
            _ if names.contains_key(key) => continue,
            StringKey::RuntimeCallback(id) => {
                injection.cupti.callback_name(mlprof_cupti::layout::CB_DOMAIN_RUNTIME_API, id).unwrap_or_default()
            }
            StringKey::DriverCallback(id) => {
                injection.cupti.callback_name(mlprof_cupti::layout::CB_DOMAIN_DRIVER_API, id).unwrap_or_default()
            }
        };
        names.insert(*key, text);
    }
    let strings: Vec<(StringKey, &[u8])> =
        keys.iter().filter_map(|key| names.get(key).map(|text| (*key, text.as_slice()))).collect();
    encode_buffer(offsets, &strings, data, frame);
    names.retain(|key, _| !matches!(key, StringKey::Pointer(_)));
}

/// Reads a NUL-terminated string of at most [`MAX_STRING`] bytes.
///
/// # Safety
/// `address` must point to a readable NUL-terminated string.
unsafe fn read_c_string(address: usize) -> Vec<u8> {
    let p = address as *const libc::c_char;
    // SAFETY: the caller's readable string; strnlen stops at the cap.
    let len = unsafe { libc::strnlen(p, MAX_STRING) };
    // SAFETY: `len` bytes were just scanned as readable.
    unsafe { std::slice::from_raw_parts(p as *const u8, len) }.to_vec()
}

/// How many flush periods the control thread keeps asking the driver for the GPUs'
/// properties while CUDA is still initialising (10 s).
const DEVICE_QUERY_TRIES: u32 = 40;

fn control_loop(injection: &'static Injection, mut stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(FLUSH_PERIOD));
    let mut pending = Vec::new();
    let mut chunk = [0u8; 256];
    let mut device_tries = 0;
    loop {
        if injection.link.gone.load(Ordering::SeqCst) {
            break;
        }
        // The driver answers once `cuInit`, which loaded this library, has returned.
        if device_tries < DEVICE_QUERY_TRIES {
            device_tries += 1;
            if injection.send_devices() {
                device_tries = DEVICE_QUERY_TRIES;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        loop {
            let len = match frame_len(&pending) {
                Ok(Some(len)) if pending.len() >= len => len,
                Ok(_) => break,
                // A parent that sends garbage is treated as gone.
                Err(_) => return parent_gone(injection),
            };
            let frame: Vec<u8> = pending.drain(..len).collect();
            let _ = std::panic::catch_unwind(|| match decode_to_injection(&frame) {
                Ok(ToInjection::Start) => injection.start_recording(),
                Ok(ToInjection::Stop(token)) => {
                    injection.stop_recording();
                    injection.link.send(FromInjection::Flushed(token));
                }
                Ok(ToInjection::Flush(token)) => {
                    injection.flush(true);
                    injection.link.send(FromInjection::Flushed(token));
                }
                Err(_) => {}
            });
        }
        if injection.recording.load(Ordering::SeqCst) {
            let _ = std::panic::catch_unwind(|| injection.flush(false));
        }
    }
    parent_gone(injection);
}

/// The parent closed the socket or failed: record nothing more, free what is queued.
fn parent_gone(injection: &Injection) {
    crate::log(|| "the parent is gone".to_string());
    injection.link.gone.store(true, Ordering::SeqCst);
    if injection.recording.load(Ordering::SeqCst) {
        injection.stop_recording();
    }
}
