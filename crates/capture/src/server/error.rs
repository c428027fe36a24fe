//! The one error type of the profiler server and the in-process profiler.
//!
//! Network-facing failures (too many sessions) are also mapped to gRPC status codes in
//! `service`, so a remote client sees the same condition a local caller gets here.

use std::net::SocketAddr;

/// What can go wrong when profiling a Rust program or serving its profiles.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// `max` profiling sessions are already recording.
    #[error("too many profiling sessions: {max} are already active")]
    TooManySessions {
        /// The bound that was reached.
        max: usize,
    },
    /// The server could not listen on `addr`.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server's runtime thread could not be started.
    #[error("cannot start the profiler server's runtime: {0}")]
    Runtime(std::io::Error),
    /// The server failed while serving (its thread returned an error or panicked).
    #[error("the profiler server failed: {0}")]
    Serve(String),
    /// Saving a profile failed.
    #[error(transparent)]
    Write(#[from] mlprof_formats::FormatError),
}
