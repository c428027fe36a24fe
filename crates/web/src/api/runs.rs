//! `GET /api/runs` (every run, cheap: from the catalog, rediscovered when due) and
//! `GET /api/run` (one run, read if needed so its tool list is exact).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use mlprof_model::SourceFormat;
use serde::{Deserialize, Serialize};

use crate::catalog::Run;
use crate::error::ApiError;
use crate::params::{ApiQuery, required};
use crate::state::AppState;
use mlprof_analysis::tool_availability::candidate_tools;

/// The answer of `/api/runs`.
#[derive(Serialize)]
pub struct Runs {
    /// The path the server was given, as given.
    root: String,
    /// The runs, newest first.
    runs: Vec<RunEntry>,
}

/// One run as the API lists it.
#[derive(Serialize)]
pub struct RunEntry {
    /// The run's name.
    name: String,
    /// The format of its files.
    format: SourceFormat,
    /// Its hosts, by file name.
    hosts: Vec<String>,
    /// The tools with data (exact) or that the format can have (not exact).
    tools: Vec<&'static str>,
    /// Whether `tools` was decided from the read profile.
    tools_exact: bool,
}

impl RunEntry {
    fn of(state: &AppState, run: &Run) -> RunEntry {
        let known = state.known_tools(&run.name);
        let tools_exact = known.is_some();
        RunEntry {
            name: run.name.clone(),
            format: run.format,
            hosts: run.host_names().map(str::to_string).collect(),
            tools: known.unwrap_or_else(|| candidate_tools(run.format)),
            tools_exact,
        }
    }
}

/// `GET /api/runs`: the runs, discovered again first when the last discovery is older
/// than the rescan interval (see [`crate::rescan`]).
pub async fn runs(State(state): State<Arc<AppState>>) -> Json<Runs> {
    state.rediscover_if_due().await;
    let catalog = state.catalog();
    Json(Runs { root: state.shown_root(), runs: catalog.runs().iter().map(|run| RunEntry::of(&state, run)).collect() })
}

/// The query of `/api/run` (and `/api/progress`): the run.
#[derive(Deserialize)]
pub struct RunQuery {
    /// The run's name.
    pub(crate) run: Option<String>,
}

/// `GET /api/run?run=RUN`: the run's entry, read first so `tools` is exact.
pub async fn run(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<RunQuery>,
) -> Result<Json<RunEntry>, ApiError> {
    let name = required(&query.run, "run")?;
    let run = state.run(name)?;
    state.session(name).await?;
    Ok(Json(RunEntry::of(&state, &run)))
}
