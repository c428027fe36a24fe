//! The trace viewer's endpoints, `/api/trace/*` (see API.md, "Trace viewer"):
//! `meta` (sections and tracks), `view` (what to draw of a window), `event` (one
//! event with its args and flows), `search` (names over the whole trace),
//! `aggregate` (a marked range's totals by name) and `counters` (counter tracks).
//!
//! The one design decision to know: every endpoint answers from the host's
//! level-of-detail index (`mlprof-timeline`), built once per (run, host) and cached on
//! disk (`host_index.rs`); only `event` reads the model, for the args, so a restarted
//! server answers `meta`, `view` and `search` from the cache file without reading the
//! profile again. `host=all` puts every host of a run on one time axis (`together.rs`).

mod aggregate;
mod counters;
mod derived;
mod event;
pub(crate) mod host_index;
mod meta;
pub(crate) mod query;
mod search;
mod steps;
mod together;
mod view;

use std::sync::Arc;

use axum::Router;
use axum::routing::get;

use crate::state::AppState;

/// The `/api/trace` routes (paths relative to that prefix, e.g. `/meta`).
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/meta", get(meta::meta))
        .route("/view", get(view::view))
        .route("/event", get(event::event))
        .route("/search", get(search::search))
        .route("/aggregate", get(aggregate::aggregate))
        .route("/counters", get(counters::counters))
}
