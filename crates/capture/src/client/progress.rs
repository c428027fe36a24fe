//! How a capture reports what each worker is doing while it runs.
//!
//! The library never prints: it calls a [`Progress`] implementation, which the CLI turns
//! into a live display (or nothing). Calls come from the workers' tasks concurrently, so
//! implementations must be `Send + Sync` and quick.

use crate::address::Target;

use super::WorkerOutcome;

/// Where one worker's capture stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkerState {
    /// Opening the connection (attempt `attempt` of `attempts`, both from 1).
    Connecting {
        /// This attempt, from 1.
        attempt: u32,
        /// Attempts allowed in all.
        attempts: u32,
    },
    /// The request is sent; the server is tracing and has sent nothing back yet.
    Tracing,
    /// The answer is arriving.
    Receiving {
        /// Bytes of response body received so far (HTTP/2 data frames).
        bytes: u64,
    },
    /// The answer is complete and being written to disk.
    Writing,
    /// The attempt failed in a way worth another try; the next attempt follows.
    Retrying {
        /// The attempt that failed, from 1.
        attempt: u32,
        /// Why, as one line.
        reason: String,
    },
}

/// Receives progress of a capture. Both methods have empty defaults.
pub trait Progress: Send + Sync {
    /// `target` moved to `state`.
    fn update(&self, target: &Target, state: WorkerState) {
        let _ = (target, state);
    }

    /// `outcome.target` is done, with this outcome (the same one [`super::capture`] returns).
    fn finished(&self, outcome: &WorkerOutcome) {
        let _ = outcome;
    }
}

/// A [`Progress`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}
