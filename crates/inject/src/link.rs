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
/// The most bytes of names in one frame (the parent takes frames of up to 64 MiB).
const MAX_FRAME_STRINGS: usize = 16 << 20;
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

    /// Stops using the socket: what is queued is freed unsent, and the control thread
    /// ends.
    pub fn close(&self) {
        self.gone.store(true, Ordering::SeqCst);
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

/// How long a window's stop waits for work launched before it to finish before the
/// forced flush (on the control thread, never the job's).
const STOP_SETTLE: Duration = Duration::from_millis(100);

/// How long a write to the parent may block before the parent counts as gone.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts the sender and control threads of the current injection; false when they
/// could not both start.
pub fn start_threads() -> bool {
    let Some(injection) = recorder::current() else { return false };
    let receiver = lock(&injection.link.receiver).take();
    let stream = lock(&injection.link.stream).take();
    let (Some(receiver), Some(stream)) = (receiver, stream) else { return false };
    let Ok(control) = stream.try_clone() else { return false };
    let _ = stream.set_write_timeout(Some(WRITE_TIMEOUT));
    let sender = std::thread::Builder::new().name("mlprof-send".into()).spawn(move || {
        block_signals();
        send_loop(injection, receiver, stream)
    });
    let controller = std::thread::Builder::new().name("mlprof-control".into()).spawn(move || {
        block_signals();
        control_loop(injection, control)
    });
    sender.is_ok() && controller.is_ok()
}

/// Blocks every signal on the calling (injection) thread: a job that blocks SIGTERM to
/// take it with `sigwait` must not have it delivered to mlprof's threads instead.
pub fn block_signals() {
    // SAFETY: a zeroed sigset filled by sigfillset, and this thread's own mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn send_loop(injection: &'static Injection, receiver: Receiver<Outgoing>, mut stream: UnixStream) {
    let mut frame = Vec::with_capacity(recorder::BUFFER_BYTES + (1 << 20));
    let mut names: HashMap<StringKey, Vec<u8>> = HashMap::new();
    let mut offsets = Vec::new();
    while let Ok(item) = receiver.recv() {
        // Once the parent is gone, or after the exit flush gave up waiting, buffers are
        // only freed: CUPTI may be tearing down.
        let sending = !injection.link.gone.load(Ordering::SeqCst);
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            frame.clear();
            match &item {
                Outgoing::Buffer { address, valid } if sending => {
                    encode_cupti_buffer(injection, *address, *valid, &mut offsets, &mut names, &mut frame);
                }
                Outgoing::Buffer { .. } => {}
                Outgoing::Message(message) => encode_from_injection(message, &mut frame),
            }
            if sending && !frame.is_empty() && stream.write_all(&frame).is_err() {
                // Closed, or stuck past the write timeout: a half-written frame leaves the
                // stream unusable either way.
                injection.link.gone.store(true, Ordering::SeqCst);
            }
        }));
        if let Outgoing::Buffer { address, .. } = item {
            injection.release(address);
        }
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
    let mut string_bytes = 0usize;
    for key in &keys {
        // A frame holds at most MAX_FRAME_STRINGS of names (far more than real buffers
        // need); past it names are left out and the parent shows them unnamed.
        if string_bytes >= MAX_FRAME_STRINGS {
            break;
        }
        let text = match *key {
            StringKey::Pointer(p) => read_c_string(p as usize),
            _ if names.contains_key(key) => continue,
            StringKey::RuntimeCallback(id) => {
                injection.cupti.callback_name(mlprof_cupti::layout::CB_DOMAIN_RUNTIME_API, id).unwrap_or_default()
            }
            StringKey::DriverCallback(id) => {
                injection.cupti.callback_name(mlprof_cupti::layout::CB_DOMAIN_DRIVER_API, id).unwrap_or_default()
            }
        };
        string_bytes += text.len();
        names.insert(*key, text);
    }
    let strings: Vec<(StringKey, &[u8])> =
        keys.iter().filter_map(|key| names.get(key).map(|text| (*key, text.as_slice()))).collect();
    encode_buffer(offsets, &strings, data, frame);
    names.retain(|key, _| !matches!(key, StringKey::Pointer(_)));
}

/// Reads a NUL-terminated string of at most [`MAX_STRING`] bytes from this process's
/// memory with `process_vm_readv`, which fails (EFAULT) rather than crashing the job on
/// an address that is not readable (a name whose module was unloaded since CUPTI wrote
/// the record). An unreadable string is empty.
fn read_c_string(address: usize) -> Vec<u8> {
    const CHUNK: usize = 256;
    let mut out = Vec::new();
    let mut chunk = [0u8; CHUNK];
    while out.len() < MAX_STRING {
        let at = address.wrapping_add(out.len());
        // Never read across a page boundary in one call: a readable string may end
        // just before an unmapped page.
        let to_page_end = 4096 - at % 4096;
        let want = CHUNK.min(to_page_end).min(MAX_STRING - out.len());
        let local = libc::iovec { iov_base: chunk.as_mut_ptr().cast(), iov_len: want };
        let remote = libc::iovec { iov_base: at as *mut libc::c_void, iov_len: want };
        // SAFETY: `local` is our own buffer of `want` bytes; the kernel checks `remote`.
        let read = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
        let Ok(read) = usize::try_from(read) else { break };
        if read == 0 {
            break;
        }
        match chunk[..read].iter().position(|&b| b == 0) {
            Some(end) => {
                out.extend_from_slice(&chunk[..end]);
                return out;
            }
            None => out.extend_from_slice(&chunk[..read]),
        }
    }
    out
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
        // At exit the exit thread does the last flush; this thread leaves CUPTI alone.
        if recorder::EXITING.load(Ordering::SeqCst) {
            return;
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
            if recorder::EXITING.load(Ordering::SeqCst) {
                return;
            }
            let _ = std::panic::catch_unwind(|| match decode_to_injection(&frame) {
                Ok(ToInjection::Start) => injection.start_recording(),
                Ok(ToInjection::Stop(token)) => {
                    injection.stop_recording_after(STOP_SETTLE);
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
        // A framework imported after CUDA started gets CUPTI before its tracer starts.
        let _ = std::panic::catch_unwind(|| injection.check_frameworks());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_read_without_trusting_the_address() {
        let name = std::ffi::CString::new("_Z6vecAddPfS_S_i").unwrap();
        assert_eq!(read_c_string(name.as_ptr() as usize), b"_Z6vecAddPfS_S_i");
        // Unmapped addresses (a name whose module was unloaded) give an empty name, not
        // a crash.
        assert_eq!(read_c_string(0x10), b"");
        assert_eq!(read_c_string(usize::MAX - 8), b"");
    }
}
