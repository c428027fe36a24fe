//! `GET /api/trace/meta?run&host`: the host's time range, event count, sections and
//! tracks (with their depth and event count).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use mlprof_timeline::SectionKind;
use serde::{Deserialize, Serialize};

use super::host_index::{host_index, still_intact};
use super::query::run_and_host;
use super::together;
use crate::error::ApiError;
use crate::params::ApiQuery;
use crate::state::AppState;

/// The query of `meta`.
#[derive(Debug, Deserialize)]
pub(crate) struct MetaQuery {
    run: Option<String>,
    host: Option<String>,
}

/// The answer of `meta`.
#[derive(Debug, Serialize)]
pub(crate) struct MetaAnswer {
    host: String,
    start_ps: i64,
    end_ps: i64,
    events: u64,
    sections: Vec<SectionAnswer>,
    /// For every host together (`host=all`, `all@steps`): how the hosts were aligned.
    #[serde(skip_serializing_if = "Option::is_none")]
    alignment: Option<String>,
}

#[derive(Debug, Serialize)]
struct SectionAnswer {
    name: String,
    kind: SectionKind,
    tracks: Vec<TrackAnswer>,
}

#[derive(Debug, Serialize)]
struct TrackAnswer {
    id: u32,
    name: String,
    depth: u32,
    events: u64,
}

/// `GET /api/trace/meta`.
pub(crate) async fn meta(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<MetaQuery>,
) -> Result<Json<MetaAnswer>, ApiError> {
    let (run, host) = run_and_host(&state, &query.run, &query.host)?;
    let index = host_index(&state, &run, &host).await?;
    let (start_ps, end_ps) = index.span_ps();
    let sections = index
        .sections()
        .map(|section| SectionAnswer {
            name: section.name.to_string(),
            kind: section.kind,
            tracks: section
                .tracks
                .filter_map(|id| index.track(id))
                .map(|t| TrackAnswer { id: t.id, name: t.name.to_string(), depth: t.depth, events: t.events })
                .collect(),
        })
        .collect();
    let alignment = if together::is_together(&host) {
        Some(together::placed(&state, &run, &host).await?.alignment.clone())
    } else {
        None
    };
    still_intact(&state, &run, &host, &index).await?;
    Ok(Json(MetaAnswer { host: host.to_string(), start_ps, end_ps, events: index.event_count(), sections, alignment }))
}
