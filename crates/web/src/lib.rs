//! mlprof's web UI server: `mlprof serve PATH` serves the pages embedded from
//! `crates/web/web/` and the JSON API described in `crates/web/API.md` over the
//! profiles found under PATH, on 127.0.0.1 by default, working fully offline.
//!
//! The one design decision to know: the runs are discovered once at start
//! ([`catalog`]), and requests can only name runs and hosts of that catalog — never a
//! path — while profiles are read lazily, a few runs at a time ([`state`]).

mod api;
mod assets;
pub mod blocking;
pub mod catalog;
pub mod connections;
pub mod error;
pub mod once_cache;
pub mod params;
pub mod placements;
mod prefetch;
pub mod rescan;
mod router;
pub mod run_work;
mod security;
pub mod select;
mod server;
pub mod state;
mod streamed;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod tool_output;
pub mod tool_request;
pub mod tool_result;
pub mod trace;

pub use assets::static_file;
pub use connections::{DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS, Limits};
pub use error::{ApiError, ServeError};
pub use router::router;
pub use security::{AllowedHosts, CONTENT_SECURITY_POLICY};
pub use server::{Config, RunningServer, Server, default_cache_dir, spawn_local, spawn_local_with};
pub use state::AppState;
