//! mlprof patch: whether each Python thread of a process is running, read from its
//! `/proc/PID/task/TID/stat` for every sample, through a file kept open from one sample
//! to the next (opening it walks four levels of `/proc` and cost more than reading it).
//!
//! The open files are bounded across every process sampled ([`MOST_OPEN`]), so sampling
//! many processes with many threads never runs mlprof out of file descriptors; past the
//! bound a thread's file is opened for each read, as before.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};

use remoteprocess::{Pid, Tid};

/// The most `stat` files kept open at once, over every process sampled.
const MOST_OPEN: usize = 256;
/// How many are open now.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// One process's threads' `stat` files.
pub struct ThreadStates {
    pid: Pid,
    /// Each thread's file, and the sample it was last read in.
    files: HashMap<Tid, (File, u64)>,
    sample: u64,
}

impl ThreadStates {
    /// Nothing open yet, for process `pid`.
    pub fn new(pid: Pid) -> ThreadStates {
        ThreadStates { pid, files: HashMap::new(), sample: 0 }
    }

    /// Whether thread `tid` is running (`R`), or `None` when it is not a thread of the
    /// process (gone, or an id from another process) or its state cannot be read.
    pub fn activity(&mut self, tid: Tid) -> Option<bool> {
        if let Some((file, used)) = self.files.get_mut(&tid) {
            if let Some(running) = running(file) {
                *used = self.sample;
                return Some(running);
            }
            // The thread ended (its id may be another thread's now): open it afresh.
            self.close(tid);
        }
        let file = File::open(format!("/proc/{}/task/{tid}/stat", self.pid)).ok()?;
        let state = running(&file);
        if state.is_some() && take_a_slot() {
            self.files.insert(tid, (file, self.sample));
        }
        state
    }

    /// Ends a sample: the files of threads it did not read (ended, or no longer running
    /// Python) are closed.
    pub fn end_sample(&mut self) {
        let sample = self.sample;
        let stale: Vec<Tid> = self.files.iter().filter(|(_, (_, used))| *used != sample).map(|(tid, _)| *tid).collect();
        for tid in stale {
            self.close(tid);
        }
        self.sample += 1;
    }

    /// How many of this process's `stat` files are held open.
    pub fn open_files(&self) -> usize {
        self.files.len()
    }

    fn close(&mut self, tid: Tid) {
        if self.files.remove(&tid).is_some() {
            OPEN.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for ThreadStates {
    fn drop(&mut self) {
        OPEN.fetch_sub(self.files.len(), Ordering::Relaxed);
    }
}

/// Claims one of the [`MOST_OPEN`] slots; false when all are taken.
fn take_a_slot() -> bool {
    OPEN.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |open| (open < MOST_OPEN).then_some(open + 1)).is_ok()
}

/// Whether the `stat` in `file` says running; one read from its start, no regular
/// expression (this runs for every Python thread of every sample).
fn running(file: &File) -> Option<bool> {
    let mut buf = [0u8; 512];
    let read = file.read_at(&mut buf, 0).ok()?;
    let stat = buf.get(..read)?;
    // The name, in parentheses, may itself hold ')': the state follows the last one.
    let close = stat.iter().rposition(|&b| b == b')')?;
    let state = stat.get(close + 1..)?.iter().find(|b| !b.is_ascii_whitespace())?;
    Some(*state == b'R')
}
