//! Profiling Rust programs the way TensorFlow and JAX programs are profiled: annotate
//! the code with [`trace`] / [`step`] scopes, then either record programmatically
//! ([`Profiler::start`] … [`Profiler::stop`] → [`XSpace`], saved into a TensorBoard log
//! directory) or [`serve`] `tensorflow.ProfilerService`, so TensorBoard's Capture
//! Profile, `tf.profiler.experimental.client.trace` and `mlprof capture` can capture the
//! running program.
//!
//! The design decision to know: one process-wide recorder (`recorder`) serves all of
//! them. Annotations cost one atomic load while nobody profiles; while a session is
//! active, events go to per-thread buffers, and each session — programmatic or remote,
//! several may overlap up to [`MAX_SESSIONS`] — takes the events of its own time window
//! when it stops. The server never writes to its own disk (see `service`).
//!
//! ```no_run
//! use mlprof_capture::server::{serve, step, trace};
//!
//! let server = serve(6009)?; // 127.0.0.1:6009
//! for n in 0.. {
//!     let _step = step("train", n);
//!     let _t = trace("forward", &[("batch", 32)]);
//!     // ...
//! #   if n == 1 { break; }
//! }
//! server.shutdown()?;
//! # Ok::<(), mlprof_capture::server::ServerError>(())
//! ```

mod annotation;
mod error;
mod platform;
mod profiler;
mod recorder;
mod serve;
mod service;
mod xspace;

pub use annotation::{ArgValue, ToArg, TraceGuard, step, trace, trace_scope};
pub use error::ServerError;
pub use platform::hostname;
pub use profiler::{Profiler, ProfilerOptions};
pub use recorder::{DEFAULT_MAX_EVENTS, MAX_EVENTS_LIMIT, MAX_SESSIONS, is_recording, now_ns};
pub use serve::{DEFAULT_MAX_SESSIONS, DEFAULT_PORT, ServerBuilder, ServerHandle, serve};
pub use service::{MAX_DURATION_MS, MAX_RESPONSE_BYTES, MAX_START_DELAY_MS};
pub use xspace::XSpace;
