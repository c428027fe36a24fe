//! `GET /api/progress?run=RUN`: what the server is reading or building for the run now
//! ([`crate::run_work`]), for the page to show while it waits.

use std::sync::Arc;

use super::runs::RunQuery;
use crate::error::ApiError;
use crate::params::{ApiQuery, required};
use crate::run_work::Progress;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;

/// `GET /api/progress?run=RUN`: `{"stage": "reading", "done_bytes", "total_bytes"}`,
/// `{"stage": "indexing", "host"}` or `{"stage": "idle"}`; 404 for an unknown run.
pub async fn progress(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<RunQuery>,
) -> Result<Json<Progress>, ApiError> {
    let name = required(&query.run, "run")?;
    state.run(name)?;
    Ok(Json(state.work().of(name)))
}
