//! The few facts about the running process that the profile needs and `std` does not
//! give: the OS thread id (XProf names a host line by it) and the machine's host name.
//!
//! Both come from `libc` on Unix; elsewhere a per-process counter and `localhost` stand
//! in, so recording still works, only with less telling names.

/// The calling thread's OS thread id (Linux `gettid`), or a process-unique number where
/// the platform has no such id.
pub(crate) fn current_tid() -> i64 {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: gettid has no preconditions and cannot fail.
        i64::from(unsafe { libc::gettid() })
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::sync::atomic::{AtomicI64, Ordering};
        static NEXT: AtomicI64 = AtomicI64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    }
}

/// The machine's host name (`gethostname`), or `localhost` when it cannot be read.
pub fn hostname() -> String {
    #[cfg(unix)]
    {
        let mut buf = [0u8; 256];
        // SAFETY: the buffer is valid for `buf.len()` bytes; gethostname writes at most
        // that many and we look for the terminator ourselves.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        if rc == 0 {
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            if let Ok(name) = std::str::from_utf8(&buf[..end])
                && !name.is_empty()
            {
                return name.to_string();
            }
        }
    }
    "localhost".to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn threads_have_distinct_ids_and_the_host_a_name() {
        let here = super::current_tid();
        let there = std::thread::spawn(super::current_tid).join().unwrap();
        assert_ne!(here, there);
        assert_eq!(here, super::current_tid());
        assert!(!super::hostname().is_empty());
    }
}
