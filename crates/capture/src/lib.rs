//! Capture over TensorFlow's profiler gRPC API (`tensorflow.ProfilerService`): the
//! client behind `mlprof capture`, and a profiler server plus annotations for Rust
//! programs. Only this crate knows gRPC. What a server sends is untrusted: it is escaped
//! before it is printed and sanitised before it names a file ([`untrusted`]), and an
//! XSpace is decoded before it is saved.

pub mod address;
pub mod client;
pub mod proto;
pub mod server;
pub mod session_id;
pub mod untrusted;

pub use server::{Profiler, XSpace, serve, step, trace, trace_scope};

/// The tonic client and server generated for `tensorflow.ProfilerService` (see `build.rs`).
#[allow(clippy::all, missing_docs)]
pub mod service {
    include!(concat!(env!("OUT_DIR"), "/tensorflow.ProfilerService.rs"));
}
