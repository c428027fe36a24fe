//! `mlprof agent`: one per node, it sees every ML job running there without any job
//! registering — Python processes and CUDA processes, found in `/proc`
//! ([`discover`]); jobs started with `mlprof run --agent` also register, and are
//! captured through their run ([`registry`]) — and keeps each job's light signals current ([`jobs`]): CPU, memory,
//! threads, the Python frames it runs most (sampled from outside at a low rate), the
//! endpoints a full trace can be taken through — and captures any of them on demand as
//! `mlprof attach` would. It serves them as JSON for `mlprof top`
//! and as Prometheus metrics ([`metrics`]) over HTTP ([`server`]); [`client`] and
//! [`top`] are `mlprof top`'s side.
//!
//! The agent only reads: it never stops, signals or writes into a job, and a job does not
//! notice when the agent stops or dies.

pub mod client;
pub mod discover;
pub mod history;
pub mod jobs;
pub mod metrics;
pub mod probe;
pub mod registry;
pub mod server;
pub mod top;
pub mod top_screen;
pub mod top_state;
pub mod upload;

pub use jobs::{FrameShare, JobView, WatchOptions};
pub use server::{Agent, AgentConfig, AgentError, CaptureOutcome, DEFAULT_LISTEN, Snapshot};
