//! The one error type of the readers and writers. Every variant names the file and,
//! where it applies, the position (byte offset, or JSON line and column), so the CLI
//! can print it as a single line.

use std::fmt;

/// Where in a JSON document something went wrong (1-based line and column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonPosition {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

impl fmt::Display for JsonPosition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)
    }
}

/// An error reading, decoding, discovering or writing a profile.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// The operating system refused a read or write.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A gzip stream is corrupt or ends early.
    #[error("{path}: corrupt or truncated gzip data at compressed byte offset {offset}: {message}")]
    Gzip {
        /// The file.
        path: String,
        /// Bytes of compressed input consumed when the error was found.
        offset: u64,
        /// What went wrong.
        message: String,
    },
    /// The protobuf wire data of an XSpace is malformed.
    #[error("{path}: byte offset {offset}: {message}")]
    Protobuf {
        /// The file.
        path: String,
        /// Byte offset in the (decompressed) file.
        offset: u64,
        /// What was found and what was expected.
        message: String,
    },
    /// A pickle (a PyTorch memory snapshot) is malformed or holds more than data.
    #[error("{path}: pickle byte offset {offset}: {message}")]
    Pickle {
        /// The file.
        path: String,
        /// Byte offset of the opcode in the (decompressed) file.
        offset: u64,
        /// What was found and what was expected.
        message: String,
    },
    /// A JSON trace is malformed or not shaped like a Chrome trace.
    #[error("{path}: JSON {position}: {message}")]
    Json {
        /// The file.
        path: String,
        /// Where the problem is.
        position: JsonPosition,
        /// What was found and what was expected.
        message: String,
    },
    /// The file was truncated or rewritten while it was read: what was read cannot be
    /// trusted (reading it again once it is complete works).
    #[error("{path}: {change}; read it again once it is complete")]
    Changed {
        /// The file.
        path: String,
        /// What happened to it.
        change: mlprof_mapped::Change,
    },
    /// Inflating a gzip file would hold more bytes in memory than allowed.
    #[error("{path}: {message}")]
    TooLarge {
        /// The file.
        path: String,
        /// The limit and why it is there.
        message: String,
    },
    /// SQLite could not read a database (an Nsight Systems export): corrupt, truncated,
    /// encrypted, or not a database.
    #[error("{path}: SQLite: {message}")]
    Sqlite {
        /// The file.
        path: String,
        /// SQLite's message.
        message: String,
    },
    /// The file is not a profile mlprof reads (empty, wrong format, no events …).
    #[error("{path}: {message}")]
    Unrecognized {
        /// The file or directory.
        path: String,
        /// Why.
        message: String,
    },
}

impl FormatError {
    /// An [`FormatError::Unrecognized`] error.
    pub fn unrecognized(path: impl Into<String>, message: impl Into<String>) -> FormatError {
        FormatError::Unrecognized { path: path.into(), message: message.into() }
    }

    /// An [`FormatError::Io`] error.
    pub fn io(path: impl Into<String>, source: std::io::Error) -> FormatError {
        FormatError::Io { path: path.into(), source }
    }
}

/// Result alias of this crate.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;
