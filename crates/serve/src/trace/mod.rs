//! The trace viewer's endpoints, `/api/trace/*` (see API.md): metadata, viewport,
//! event details and search over a per-host level-of-detail index.

use std::sync::Arc;

use axum::Router;

use crate::state::AppState;

/// The `/api/trace` routes (paths relative to that prefix, e.g. `/meta`).
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
}
