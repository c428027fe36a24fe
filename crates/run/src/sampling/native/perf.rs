//! One thread's `perf_event_open(2)` CPU-clock sampling event and its memory-mapped
//! ring buffer: the syscall, `struct perf_event_attr` as the kernel lays it out, and
//! the reader side of the ring (`data_head` read with acquire, `data_tail` written
//! with release, as `linux/perf_event.h` asks).
//!
//! One event per thread (`inherit = 0`, `cpu = -1`): the kernel refuses to map the ring
//! of an inherited per-task event (`perf_mmap`: EINVAL for `inherit` with `cpu == -1`,
//! checked on kernel 6.18), and per-CPU inherited events would cost one descriptor per
//! CPU per process and still miss the threads that existed before the event.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use super::records;

/// `PERF_TYPE_SOFTWARE`.
const TYPE_SOFTWARE: u32 = 1;
/// `PERF_COUNT_SW_CPU_CLOCK`: an hrtimer on the thread's CPU time.
const SW_CPU_CLOCK: u64 = 0;
/// `PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN`.
const SAMPLE_TYPE: u64 = (1 << 1) | (1 << 2) | (1 << 5);
/// `PERF_ATTR_SIZE_VER5`, bytes: everything up to `sample_max_stack`.
const ATTR_SIZE: u32 = 112;
/// `PERF_FLAG_FD_CLOEXEC`.
const FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
/// Where `data_head`, `data_tail`, `data_offset` and `data_size` lie in the first page
/// (`struct perf_event_mmap_page`, after its 1 KiB of fixed fields).
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;
const DATA_OFFSET: usize = 1040;
const DATA_SIZE: usize = 1048;

/// `struct perf_event_attr` up to [`ATTR_SIZE`] bytes; the bit fields are one `u64`.
#[repr(C)]
#[derive(Default)]
struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_freq: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
    sample_regs_intr: u64,
    aux_watermark: u32,
    sample_max_stack: u16,
    reserved_2: u16,
}

// Bits of `Attr::flags`.
const EXCLUDE_KERNEL: u64 = 1 << 5;
const EXCLUDE_HV: u64 = 1 << 6;
const FREQ: u64 = 1 << 10;
const EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
const USE_CLOCKID: u64 = 1 << 25;

/// Which clock the kernel stamps samples with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// `CLOCK_REALTIME`: Unix epoch ns, as mlprof's other samples.
    Realtime,
    /// `CLOCK_MONOTONIC`, moved onto the epoch with an offset measured at start.
    Monotonic,
    /// The kernel's own perf clock (no `use_clockid`): samples are stamped when read.
    Kernel,
}

impl Clock {
    /// The clocks to try, best first.
    pub const ALL: [Clock; 3] = [Clock::Realtime, Clock::Monotonic, Clock::Kernel];
}

/// Opens a CPU-clock sampling event on thread `tid`, `hz` samples per second of its CPU
/// time, user space only, with user call chains, stamped by `clock`.
pub fn open(tid: u32, hz: u32, clock: Clock) -> io::Result<OwnedFd> {
    let mut attr = Attr {
        kind: TYPE_SOFTWARE,
        size: ATTR_SIZE,
        config: SW_CPU_CLOCK,
        sample_freq: u64::from(hz.max(1)),
        sample_type: SAMPLE_TYPE,
        flags: EXCLUDE_KERNEL | EXCLUDE_HV | FREQ | EXCLUDE_CALLCHAIN_KERNEL,
        ..Attr::default()
    };
    match clock {
        Clock::Realtime => (attr.flags, attr.clockid) = (attr.flags | USE_CLOCKID, libc::CLOCK_REALTIME),
        Clock::Monotonic => (attr.flags, attr.clockid) = (attr.flags | USE_CLOCKID, libc::CLOCK_MONOTONIC),
        Clock::Kernel => {}
    }
    let tid = libc::pid_t::try_from(tid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
    // Every argument as a full register: `syscall` reads them as longs.
    let (tid, any_cpu, no_group): (libc::c_long, libc::c_long, libc::c_long) = (tid.into(), -1, -1);
    // SAFETY: `attr` is a valid `perf_event_attr` of `attr.size` bytes that outlives the
    // call; the other arguments are plain integers (no group, any CPU).
    let fd =
        unsafe { libc::syscall(libc::SYS_perf_event_open, &raw mut attr, tid, any_cpu, no_group, FLAG_FD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::other("perf_event_open returned a bad descriptor"))?;
    // SAFETY: the kernel just returned this descriptor, owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `PERF_EVENT_IOC_ENABLE` and `PERF_EVENT_IOC_DISABLE` (`_IO('$', 0)`, `_IO('$', 1)`).
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;

/// An event's ring buffer, mapped; unmapped (and the event closed) on drop.
pub struct Ring {
    /// The event: open as long as the ring is mapped.
    _fd: OwnedFd,
    base: *mut u8,
    mapped: usize,
    data_offset: usize,
    data_size: usize,
}

impl Ring {
    /// Turns the event's sampling on or off. Off, it costs its thread nothing when the
    /// thread is switched in or out (an active CPU-clock event rearms a timer each time).
    pub fn set_enabled(&self, on: bool) -> io::Result<()> {
        let request = if on { IOC_ENABLE } else { IOC_DISABLE };
        // SAFETY: an ioctl without argument on the perf event descriptor this ring owns.
        let done = unsafe { libc::ioctl(self._fd.as_raw_fd(), request, 0) };
        if done < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }
}

/// What one read of a ring found.
pub enum Read {
    /// The bytes were appended to the caller's buffer.
    Bytes,
    /// The ring's positions made no sense; everything in it was skipped.
    Corrupt,
}

impl Ring {
    /// Maps `fd`'s ring with the first of `data_pages` (powers of two) pages of data the
    /// kernel allows (an unprivileged user's locked memory for rings is limited).
    pub fn map(fd: OwnedFd, data_pages: &[usize]) -> io::Result<Ring> {
        let mut error = io::Error::from_raw_os_error(libc::EINVAL);
        for &pages in data_pages {
            match Ring::map_pages(&fd, pages) {
                Ok((base, mapped, page)) => {
                    let ring = Ring { _fd: fd, base, mapped, data_offset: page, data_size: mapped - page };
                    return Ok(ring.with_data_bounds());
                }
                Err(e) => error = e,
            }
        }
        Err(error)
    }

    /// Maps `fd`'s ring with `pages` pages of data: the base, the bytes mapped, the page
    /// size.
    fn map_pages(fd: &OwnedFd, pages: usize) -> io::Result<(*mut u8, usize, usize)> {
        let page = super::super::procfs::page_size() as usize;
        let mapped = page * (pages + 1);
        // SAFETY: a new shared mapping of the event's descriptor, which the kernel sizes
        // and checks; nothing else refers to that memory yet.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok((base.cast(), mapped, page))
    }

    /// Where the data lies: kernels since 4.1 say, older ones put it after the first page.
    fn with_data_bounds(mut self) -> Ring {
        let offset = self.header(DATA_OFFSET).load(Ordering::Relaxed);
        let size = self.header(DATA_SIZE).load(Ordering::Relaxed);
        if let (Ok(offset), Ok(size)) = (usize::try_from(offset), usize::try_from(size))
            && size > 0
            && offset.checked_add(size).is_some_and(|end| end <= self.mapped)
        {
            (self.data_offset, self.data_size) = (offset, size);
        }
        self
    }

    /// The `u64` of the first page at byte `at` (one of the `DATA_*` fields).
    fn header(&self, at: usize) -> &AtomicU64 {
        // SAFETY: `at` is one of the 8-byte aligned fields inside the first page of the
        // mapping, which lives as long as `self`; the kernel and this reader share them
        // as atomics, as the ring protocol requires.
        unsafe { AtomicU64::from_ptr(self.base.add(at).cast()) }
    }

    /// Appends every record the kernel has written since the last read to `out` and
    /// hands that space back to the kernel.
    pub fn read(&mut self, out: &mut Vec<u8>) -> Read {
        let head = self.header(DATA_HEAD).load(Ordering::Acquire);
        let tail = self.header(DATA_TAIL).load(Ordering::Relaxed);
        let spans = records::ring_spans(self.data_size as u64, tail, head);
        if let Some(spans) = spans {
            for (at, length) in spans {
                let from = self.data_offset + at;
                if length == 0 || from + length > self.mapped {
                    continue;
                }
                out.reserve(length);
                // SAFETY: `from..from + length` lies inside the mapping (checked above)
                // and between the tail and the head the kernel published with release
                // ordering, so it no longer writes there until the tail moves past it;
                // `out` has room for `length` more bytes, which become initialised.
                unsafe {
                    std::ptr::copy_nonoverlapping(self.base.add(from), out.as_mut_ptr().add(out.len()), length);
                    out.set_len(out.len() + length);
                }
            }
        }
        self.header(DATA_TAIL).store(head, Ordering::Release);
        if spans.is_some() { Read::Bytes } else { Read::Corrupt }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base` and `mapped` are the mapping `map` made, unmapped only here;
        // nothing borrowed from it outlives `self`.
        unsafe {
            libc::munmap(self.base.cast(), self.mapped);
        }
    }
}

/// `CLOCK_REALTIME` minus `CLOCK_MONOTONIC` now, ns: what moves a monotonic stamp onto
/// the Unix epoch.
pub fn monotonic_to_realtime_ns() -> i64 {
    let read = |clock| {
        let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `time` is a valid timespec to write into.
        let failed = unsafe { libc::clock_gettime(clock, &raw mut time) } != 0;
        if failed { 0 } else { time.tv_sec.saturating_mul(1_000_000_000).saturating_add(time.tv_nsec) }
    };
    let before = read(libc::CLOCK_MONOTONIC);
    let real = read(libc::CLOCK_REALTIME);
    let after = read(libc::CLOCK_MONOTONIC);
    real - before / 2 - after / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_is_laid_out_as_the_kernel_reads_it() {
        assert_eq!(std::mem::size_of::<Attr>(), ATTR_SIZE as usize);
        assert_eq!(std::mem::offset_of!(Attr, flags), 40);
        assert_eq!(std::mem::offset_of!(Attr, clockid), 92);
        assert_eq!(std::mem::offset_of!(Attr, sample_max_stack), 108);
    }

    #[test]
    fn monotonic_offset_is_the_epoch_at_boot() {
        let offset = monotonic_to_realtime_ns();
        // Booted after 2020 and before now.
        assert!(offset > 1_577_836_800_000_000_000, "{offset}");
        assert!(offset < mlprof_cupti::wire::realtime_ns());
    }
}
