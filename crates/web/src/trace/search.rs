//! `GET /api/trace/search?run&host&q[&limit=100][&after_ps[&after_id]|&before_ps[&before_id]]`:
//! events of the whole trace whose name contains `q` (ignoring case): the total, and a
//! page of at most `limit` in time order — the first, the first after a cursor or the
//! last before it — with its rank among all matches.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use mlprof_timeline::SearchPage;

use super::host_index::{host_index, still_intact};
use super::query::{number, number_or, run_and_host};
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
    after_ps: Option<String>,
    after_id: Option<String>,
    before_ps: Option<String>,
    before_id: Option<String>,
}

impl SearchQuery {
    /// The page asked for: after `(after_ps, after_id)` (the id defaults to the largest,
    /// so that the page starts after every event starting at `after_ps`), before
    /// `(before_ps, before_id)` (the id defaults to 0: before every event starting at
    /// `before_ps`), or the first; both cursors at once are a 400, as is an id without
    /// its time.
    fn page(&self) -> Result<SearchPage, ApiError> {
        let given = |v: &Option<String>| v.as_deref().is_some_and(|v| !v.is_empty());
        for (id, id_name, time, time_name) in [
            (&self.after_id, "after_id", &self.after_ps, "after_ps"),
            (&self.before_id, "before_id", &self.before_ps, "before_ps"),
        ] {
            if given(id) && !given(time) {
                return Err(ApiError::bad_request(format!("{id_name} needs {time_name}")));
            }
        }
        match (given(&self.after_ps), given(&self.before_ps)) {
            (true, true) => Err(ApiError::bad_request("give after_ps or before_ps, not both")),
            (true, false) => Ok(SearchPage::After {
                start_ps: number(&self.after_ps, "after_ps")?,
                id: number_or(&self.after_id, "after_id", u32::MAX)?,
            }),
            (false, true) => Ok(SearchPage::Before {
                start_ps: number(&self.before_ps, "before_ps")?,
                id: number_or(&self.before_id, "before_id", 0)?,
            }),
            (false, false) => Ok(SearchPage::First),
        }
    }
}

/// The answer of `search`.
#[derive(Debug, Serialize)]
pub(crate) struct SearchAnswer {
    total: u64,
    offset: u64,
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
    let page = query.page()?;
    let index = host_index(&state, &run, &host).await?;
    let reader = Arc::clone(&index);
    let answer = on_blocking_thread("trace search", move || {
        let index = reader;
        let found = index.search_page(&text, page, limit);
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
        SearchAnswer { total: found.total, offset: found.offset, results }
    })
    .await?;
    still_intact(&state, &run, &host, &index).await?;
    Ok(Json(answer))
}
