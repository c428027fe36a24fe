//! A read-only memory map of a file that survives the file shrinking under it.
//!
//! Reading a page of a mapped file past the file's current end raises `SIGBUS`, which
//! kills the process: a profile that training truncates or rewrites while mlprof reads
//! it, or a cache file cut by another process, would end `mlprof serve`. [`GuardedMap`]
//! registers each map in a process-wide table and installs (once) a `SIGBUS` handler
//! that, for a fault inside a registered map, replaces the rest of that map with
//! anonymous zero pages (`mmap(MAP_FIXED)`, async-signal-safe as a plain system call)
//! and marks the map as cut. The faulting read then returns zeros instead of killing
//! the process, and the owner asks [`GuardedMap::changed`] after reading, turning
//! whatever it decoded from those zeros into a clear "file changed while being read"
//! error. Faults elsewhere go to the handler that was installed before (Rust's own
//! stack-overflow handler, or the default action), so nothing else changes.
//!
//! The one design decision to know: the guard cannot stop a reader from seeing zeros or
//! other bytes than the file had when it was opened; it only keeps the process alive.
//! Every reader of a [`GuardedMap`] must call [`GuardedMap::changed`] after it has read
//! and before it trusts the result.

#[cfg(unix)]
mod guard;
#[cfg(unix)]
use guard::must_read_instead;
#[cfg(unix)]
pub use guard::{GuardedMap, MAX_GUARDED_MAPS};

#[cfg(not(unix))]
mod unguarded;
#[cfg(not(unix))]
pub use unguarded::GuardedMap;
#[cfg(not(unix))]
use unguarded::must_read_instead;

/// A file's bytes: guarded-mapped, or read into memory where no guard can be had.
pub enum Contents {
    /// Mapped; ask [`GuardedMap::changed`] after reading.
    Mapped(GuardedMap),
    /// Read whole (too many maps live, or no `SIGBUS` handler): cannot change.
    Read(Vec<u8>),
}

/// Maps `file` with a guard, or reads it whole when no guard can be had; an error only
/// when the file can be neither mapped nor read.
pub fn map_or_read(file: std::fs::File) -> std::io::Result<Contents> {
    match GuardedMap::map(file.try_clone()?) {
        Ok(map) => Ok(Contents::Mapped(map)),
        Err(error) if must_read_instead(&error) => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut &file, &mut bytes)?;
            Ok(Contents::Read(bytes))
        }
        Err(error) => Err(error),
    }
}

/// Why [`GuardedMap::changed`] says a file cannot be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// A read reached a page past the file's end: the file was truncated while mapped.
    Truncated,
    /// The file's size or modification time is not what it was when it was mapped.
    Modified,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Change::Truncated => "the file was truncated while being read",
            Change::Modified => "the file changed while being read",
        })
    }
}
