//! Errors: building an index ([`BuildError`]) and reading or writing its file
//! ([`CacheError`]).

use std::path::PathBuf;

/// Why an index could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// More events than event ids (`u32`) can number.
    #[error("the timeline has more than {0} events, the most one index holds")]
    TooManyEvents(u64),
    /// More tracks than track ids (`u32`) can number.
    #[error("the timeline has more tracks than one index holds")]
    TooManyTracks,
    /// A section handle that this builder did not hand out.
    #[error("no section {0} in this builder")]
    UnknownSection(u32),
    /// A track handle that this builder did not hand out.
    #[error("no track {0} in this builder")]
    UnknownTrack(u32),
    /// A name id that this builder did not hand out.
    #[error("no name {0} in this builder")]
    UnknownName(u32),
    /// A model position too large for a [`crate::ModelRef`].
    #[error("plane {plane} / line {line} is beyond what an event reference can hold")]
    SourceOutOfRange {
        /// Plane index in the host.
        plane: usize,
        /// Line index in the plane.
        line: usize,
    },
}

/// Why an index file could not be used. Every variant but [`CacheError::Io`] on
/// writing means "rebuild it": the file is missing, from another version or another
/// source, truncated or damaged.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Reading or writing the file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The file does not start with the index magic.
    #[error("{}: not an mlprof timeline index", path.display())]
    NotAnIndex {
        /// The file.
        path: PathBuf,
    },
    /// Written by another version of the format.
    #[error("{}: timeline index format {found}, this mlprof reads {expected}", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// Its format version.
        found: u32,
        /// The version this build reads and writes.
        expected: u32,
    },
    /// Built from another source file, or from an older state of it.
    #[error("{}: built from {built} but wanted for {wanted}", path.display())]
    Stale {
        /// The file.
        path: PathBuf,
        /// What the index was built from.
        built: String,
        /// What the caller wants it for.
        wanted: String,
    },
    /// Shorter or longer than its header says.
    #[error("{}: {actual} bytes where the header says {expected} (truncated or partly written)", path.display())]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Length from the header.
        expected: u64,
        /// Length on disk.
        actual: u64,
    },
    /// The checksum does not match the content.
    #[error("{}: checksum mismatch (the file is damaged)", path.display())]
    Checksum {
        /// The file.
        path: PathBuf,
    },
    /// The content is inconsistent (a table of the wrong size, a reference out of range).
    #[error("{}: damaged index: {what}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}
