//! The unix guard: a fixed table of registered maps, the `SIGBUS` handler that reads it,
//! and [`GuardedMap`], which claims a slot of the table for as long as it is mapped.
//!
//! Each slot is written under a sequence counter (odd while its range changes), so the
//! handler, which may run on any thread while other threads map and unmap files, only
//! ever acts on a range that was whole when it read it.

use std::ffi::c_void;
use std::fs::File;
use std::io;
use std::ops::Deref;
use std::os::fd::AsRawFd;
use std::sync::Once;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use crate::Change;

/// How many maps can be guarded at once. [`GuardedMap::map`] fails with
/// [`io::ErrorKind::OutOfMemory`] beyond; callers then read the file instead.
pub const MAX_GUARDED_MAPS: usize = 4096;

/// One registered map: the address range `[start, end)` (whole pages) and whether a
/// fault inside it was answered with zero pages.
struct Slot {
    /// Claimed by a live [`GuardedMap`].
    taken: AtomicBool,
    /// Even while `start`/`end` are stable, odd while they change.
    sequence: AtomicUsize,
    start: AtomicUsize,
    end: AtomicUsize,
    cut: AtomicBool,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            taken: AtomicBool::new(false),
            sequence: AtomicUsize::new(0),
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            cut: AtomicBool::new(false),
        }
    }

    /// Sets the range (`0..0` frees it) under the sequence counter.
    fn set_range(&self, start: usize, end: usize) {
        self.sequence.fetch_add(1, Ordering::AcqRel);
        self.start.store(start, Ordering::Release);
        self.end.store(end, Ordering::Release);
        self.sequence.fetch_add(1, Ordering::AcqRel);
    }

    /// The range, when it was not changing while read.
    fn range(&self) -> Option<(usize, usize)> {
        let before = self.sequence.load(Ordering::Acquire);
        if !before.is_multiple_of(2) {
            return None;
        }
        let (start, end) = (self.start.load(Ordering::Acquire), self.end.load(Ordering::Acquire));
        (self.sequence.load(Ordering::Acquire) == before && start < end).then_some((start, end))
    }
}

static TABLE: [Slot; MAX_GUARDED_MAPS] = [const { Slot::new() }; MAX_GUARDED_MAPS];

/// The `SIGBUS` action that was in place before ours, called for faults not ours.
static PREVIOUS_ACTION: OnceLock<libc::sigaction> = OnceLock::new();

/// The system page size in bytes (set before the handler is installed).
static PAGE_BYTES: AtomicUsize = AtomicUsize::new(4096);

static INSTALL: Once = Once::new();
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Installs the handler once; false when that failed (maps then are not guarded).
fn install_handler() -> bool {
    INSTALL.call_once(|| {
        // SAFETY: sysconf and sigaction are called with valid arguments; the previous
        // action is stored before the new one can run.
        unsafe {
            let page = libc::sysconf(libc::_SC_PAGESIZE);
            if let Ok(page) = usize::try_from(page)
                && page.is_power_of_two()
            {
                PAGE_BYTES.store(page, Ordering::Release);
            }
            let mut previous: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) != 0 {
                return;
            }
            let _ = PREVIOUS_ACTION.set(previous);
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_sigbus as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            if libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()) == 0 {
                INSTALLED.store(true, Ordering::Release);
            }
        }
    });
    INSTALLED.load(Ordering::Acquire)
}

/// The `SIGBUS` handler: zero pages over the rest of the guarded map the fault is in,
/// else the previous action. Only atomics and system calls: async-signal-safe.
extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo for a SA_SIGINFO handler.
    let address = if info.is_null() { 0 } else { (unsafe { (*info).si_addr() }) as usize };
    let page = PAGE_BYTES.load(Ordering::Acquire);
    for slot in &TABLE {
        let Some((start, end)) = slot.range() else { continue };
        if address < start || address >= end {
            continue;
        }
        let from = address & !(page - 1);
        // SAFETY: `[from, end)` lies inside a map this process made and still owns (the
        // slot is set only while its GuardedMap lives); replacing it with private zero
        // pages keeps it readable and mapped until the GuardedMap unmaps it.
        let zeros = unsafe {
            libc::mmap(
                from as *mut c_void,
                end - from,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if zeros != libc::MAP_FAILED {
            slot.cut.store(true, Ordering::Release);
            return;
        }
    }
    forward(signal, info, context);
}

/// Hands a fault that is not ours to the action that was installed before.
fn forward(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    match PREVIOUS_ACTION.get() {
        Some(previous) if previous.sa_sigaction != libc::SIG_DFL && previous.sa_sigaction != libc::SIG_IGN => {
            // SAFETY: the previous action was installed as a handler of this shape
            // (SA_SIGINFO says which), and is called as the kernel would have.
            unsafe {
                if previous.sa_flags & libc::SA_SIGINFO != 0 {
                    let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
                        std::mem::transmute(previous.sa_sigaction);
                    handler(signal, info, context);
                } else {
                    let handler: extern "C" fn(libc::c_int) = std::mem::transmute(previous.sa_sigaction);
                    handler(signal);
                }
            }
        }
        _ => {
            // Back to the default action: returning re-runs the faulting access, which
            // then ends the process as it would have without us.
            // SAFETY: a zeroed sigaction with SIG_DFL is a valid action.
            unsafe {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigemptyset(&mut default.sa_mask);
                libc::sigaction(libc::SIGBUS, &default, std::ptr::null_mut());
            }
        }
    }
}

/// Whether a [`GuardedMap::map`] error means "no guard to be had, read the file into
/// memory instead" rather than a problem with the file.
pub(crate) fn must_read_instead(error: &io::Error) -> bool {
    matches!(error.kind(), io::ErrorKind::OutOfMemory | io::ErrorKind::Unsupported)
}

/// What identifies a file's content cheaply: size and modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    bytes: u64,
    modified_s: i64,
    modified_ns: i64,
}

fn stamp(file: &File) -> io::Result<Stamp> {
    // SAFETY: fstat on an open descriptor into a zeroed struct.
    let mut stat: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(file.as_raw_fd(), &mut stat) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Stamp {
        bytes: u64::try_from(stat.st_size).unwrap_or(0),
        modified_s: stat.st_mtime,
        modified_ns: stat.st_mtime_nsec,
    })
}

/// A read-only shared map of a whole file, guarded against the file shrinking.
pub struct GuardedMap {
    /// Start of the map (dangling and unused when `len` is 0).
    address: *const u8,
    /// Bytes of the file mapped.
    len: usize,
    /// The claimed slot of [`TABLE`] (none for an empty file).
    slot: Option<&'static Slot>,
    /// The file, kept open to compare its stamp.
    file: File,
    stamp: Stamp,
}

// SAFETY: the map is read-only and owned; the slot is only touched through atomics.
unsafe impl Send for GuardedMap {}
// SAFETY: as above; `&GuardedMap` only gives out `&[u8]` and atomic reads.
unsafe impl Sync for GuardedMap {}

impl GuardedMap {
    /// Maps the whole of `file` read-only. Fails when the file cannot be mapped, when
    /// the guard cannot be installed ([`io::ErrorKind::Unsupported`]), or when
    /// [`MAX_GUARDED_MAPS`] are already live ([`io::ErrorKind::OutOfMemory`]);
    /// [`crate::map_or_read`] reads the file instead in the last two cases.
    pub fn map(file: File) -> io::Result<GuardedMap> {
        let stamp = stamp(&file)?;
        let len = usize::try_from(stamp.bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "the file is larger than the address space"))?;
        if len == 0 {
            return Ok(GuardedMap { address: std::ptr::NonNull::dangling().as_ptr(), len, slot: None, file, stamp });
        }
        if !install_handler() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "cannot install the SIGBUS handler that guards mapped files",
            ));
        }
        let slot = TABLE
            .iter()
            .find(|slot| slot.taken.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "too many files mapped at once"))?;
        // SAFETY: a fresh read-only shared map of an open file; checked for failure.
        let address =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        if address == libc::MAP_FAILED {
            let error = io::Error::last_os_error();
            slot.taken.store(false, Ordering::Release);
            return Err(error);
        }
        let page = PAGE_BYTES.load(Ordering::Acquire);
        let start = address as usize;
        slot.cut.store(false, Ordering::Release);
        slot.set_range(start, start + len.div_ceil(page) * page);
        Ok(GuardedMap { address: address as *const u8, len, slot: Some(slot), file, stamp })
    }

    /// Whether the file can no longer be trusted to hold what was read from this map:
    /// a read hit a page past its end, or its size or modification time changed since
    /// it was mapped. Ask after reading, before using what was read.
    pub fn changed(&self) -> Option<Change> {
        if self.slot.is_some_and(|slot| slot.cut.load(Ordering::Acquire)) {
            return Some(Change::Truncated);
        }
        match stamp(&self.file) {
            Ok(now) if now == self.stamp => None,
            _ => Some(Change::Modified),
        }
    }

    /// Tells the system that `len` bytes from `offset` (a multiple of the page size)
    /// will not be read again soon, so their memory can be dropped (`MADV_DONTNEED`).
    /// Reading them again is still correct: they fault back in from the file. Ranges
    /// outside the map, or not page-aligned, are ignored.
    pub fn release(&self, offset: usize, len: usize) {
        let page = PAGE_BYTES.load(Ordering::Acquire);
        let Some(end) = offset.checked_add(len) else { return };
        if self.slot.is_none() || len == 0 || !offset.is_multiple_of(page) || end > self.len {
            return;
        }
        // SAFETY: the range lies inside this read-only map; MADV_DONTNEED on a shared
        // file map only drops page-table entries, so later reads see the same bytes.
        unsafe {
            libc::madvise(self.address.add(offset) as *mut c_void, len, libc::MADV_DONTNEED);
        }
    }
}

impl Deref for GuardedMap {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `address..address + len` is a live read-only map owned by self; after
        // a guarded fault its tail reads as zeros, still valid memory.
        unsafe { std::slice::from_raw_parts(self.address, self.len) }
    }
}

impl Drop for GuardedMap {
    fn drop(&mut self) {
        let Some(slot) = self.slot else { return };
        slot.set_range(0, 0);
        // SAFETY: unmapping the map this value made; nothing borrows it any more.
        unsafe {
            libc::munmap(self.address as *mut c_void, self.len);
        }
        slot.taken.store(false, Ordering::Release);
    }
}

impl std::fmt::Debug for GuardedMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedMap").field("len", &self.len).field("changed", &self.changed()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn file_of(bytes: usize) -> (tempfile::NamedTempFile, File) {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        file.write_all(&vec![7u8; bytes]).expect("written");
        file.flush().expect("flushed");
        let opened = File::open(file.path()).expect("opened");
        (file, opened)
    }

    #[test]
    fn reading_past_a_truncation_gives_zeros_and_says_so() {
        let (file, opened) = file_of(1 << 20);
        let map = GuardedMap::map(opened).expect("mapped");
        assert_eq!(map[1000], 7);
        assert_eq!(map.changed(), None);
        file.as_file().set_len(4096).expect("truncated");
        // Without the guard this read is a SIGBUS that ends the test process.
        let sum: u64 = map.iter().map(|&b| u64::from(b)).sum();
        assert_eq!(sum, 7 * 4096);
        assert_eq!(map.changed(), Some(Change::Truncated));
    }

    #[test]
    fn a_rewritten_file_is_reported_as_modified() {
        let (file, opened) = file_of(10_000);
        let map = GuardedMap::map(opened).expect("mapped");
        file.as_file().set_len(20_000).expect("grown");
        assert_eq!(map.changed(), Some(Change::Modified));
    }

    #[test]
    fn slots_are_given_back_when_maps_are_dropped() {
        for _ in 0..(MAX_GUARDED_MAPS + 10) {
            let (_file, opened) = file_of(100);
            let map = GuardedMap::map(opened).expect("mapped");
            assert_eq!(map.len(), 100);
        }
    }

    #[test]
    fn an_empty_file_maps_to_no_bytes() {
        let (_file, opened) = file_of(0);
        let map = GuardedMap::map(opened).expect("mapped");
        assert!(map.is_empty());
        map.release(0, 4096);
        assert_eq!(map.changed(), None);
    }
}
