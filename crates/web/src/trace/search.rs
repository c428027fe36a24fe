//! `GET /api/trace/search?run&host&q[&limit=100]`: events of the whole trace whose
//! name contains `q` (ignoring case): the total and the first `limit` in time order.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use super::host_index::host_index;
use super::query::{number_or, run_and_host};
use crate::blocking::on_blocking_thread;
use crate::error::ApiError;
use crate::params::{ApiQuery, required};
use crate::state::AppState;

/// Results per answer when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;
/// Most results one answer may hold.
const MAX_LIMIT: usize = 10_000;

/// The query of `search`.
#[derive(Debug, Deserialize)]
pub(crate) struct SearchQuery {
    run: Option<String>,
    host: Option<String>,
    q: Option<String>,
    limit: Option<String>,
}

/// The answer of `search`.
#[derive(Debug, Serialize)]
pub(crate) struct SearchAnswer {
    total: u64,
    results: Vec<Found>,
}

#[derive(Debug, Serialize)]
struct Found {
    id: u32,
    track: u32,
    start_ps: i64,
    dur_ps: i64,
    name: String,
}

/// `GET /api/trace/search`.
pub(crate) async fn search(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<SearchQuery>,
) -> Result<Json<SearchAnswer>, ApiError> {
    let (run, host) = run_and_host(&state, &query.run, &query.host)?;
    let text = required(&query.q, "q")?.to_string();
    let limit: usize = number_or(&query.limit, "limit", DEFAULT_LIMIT)?;
    if limit > MAX_LIMIT {
        return Err(ApiError::bad_request(format!("limit must be at most {MAX_LIMIT}, not {limit}")));
    }
    let index = host_index(&state, run, host).await?;
    let answer = on_blocking_thread("trace search", move || {
        let found = index.search(&text, limit);
        let results = found
            .results
            .iter()
            .map(|e| Found {
                id: e.id,
                track: e.track,
                start_ps: e.start_ps,
                dur_ps: e.dur_ps,
                name: index.name(e.name).to_string(),
            })
            .collect();
        SearchAnswer { total: found.total, results }
    })
    .await?;
    Ok(Json(answer))
}
