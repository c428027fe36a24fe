//! `GET /api/trace/view?run&host&start_ps&end_ps&width_px[&tracks=1,2,3]`: what to
//! draw of a window, from [`mlprof_timeline::TimelineIndex::view`], in API.md's
//! compact arrays with a per-answer name table.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;
use mlprof_timeline::{NameId, TimelineIndex, View, Viewport};
use serde::{Deserialize, Serialize};

use super::host_index::{host_index, still_intact};
use super::query::{run_and_host, window};
use crate::blocking::on_blocking_thread;
use crate::error::ApiError;
use crate::params::ApiQuery;
use crate::state::AppState;

/// The query of `view`.
#[derive(Debug, Deserialize)]
pub(crate) struct ViewQuery {
    run: Option<String>,
    host: Option<String>,
    start_ps: Option<String>,
    end_ps: Option<String>,
    width_px: Option<String>,
    tracks: Option<String>,
}

/// The answer of `view`.
#[derive(Debug, Serialize)]
pub(crate) struct ViewAnswer {
    start_ps: i64,
    end_ps: i64,
    resolution_ps: i64,
    names: Vec<String>,
    tracks: Vec<TrackItems>,
    /// `[from_event_id, from_track, from_ps, to_event_id, to_track, to_ps]`.
    flows: Vec<[i64; 6]>,
}

#[derive(Debug, Serialize)]
struct TrackItems {
    id: u32,
    /// `[start_ps, dur_ps, depth, name_index, event_id]`.
    events: Vec<[i64; 5]>,
    /// `[start_ps, end_ps, depth, count, name_index]`.
    merged: Vec<[i64; 5]>,
}

/// `GET /api/trace/view`.
pub(crate) async fn view(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<ViewQuery>,
) -> Result<Response, ApiError> {
    let (run, host) = run_and_host(&state, &query.run, &query.host)?;
    let (start_ps, end_ps, width_px) = window(&query.start_ps, &query.end_ps, &query.width_px)?;
    let index = host_index(&state, &run, &host).await?;
    let tracks = parse_tracks(query.tracks.as_deref(), &index)?;
    let reader = Arc::clone(&index);
    let view = on_blocking_thread("trace view", move || {
        let view = reader.view(&Viewport { start_ps, end_ps, width_px, tracks: tracks.as_deref() });
        answer(&reader, start_ps, end_ps, view)
    })
    .await?;
    still_intact(&state, &run, &host, &index).await?;
    Ok(crate::streamed::json(view))
}

/// The `tracks` parameter: comma-separated distinct track ids of this host (400
/// otherwise, a repeated id included: it would repeat the track's items); `None` (all
/// tracks) when absent.
pub(crate) fn parse_tracks(text: Option<&str>, index: &TimelineIndex) -> Result<Option<Vec<u32>>, ApiError> {
    let Some(text) = text else { return Ok(None) };
    let mut ids = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let id: u32 = part.parse().map_err(|_| ApiError::bad_request(format!("tracks: {part:?} is not a track id")))?;
        if id >= index.track_count() {
            return Err(ApiError::bad_request(format!(
                "tracks: no track {id} (this host has {})",
                index.track_count()
            )));
        }
        if ids.contains(&id) {
            return Err(ApiError::bad_request(format!("tracks: track {id} is named twice")));
        }
        ids.push(id);
    }
    Ok(Some(ids))
}

/// The JSON answer, with names numbered in the order this answer first uses them.
fn answer(index: &TimelineIndex, start_ps: i64, end_ps: i64, view: View) -> ViewAnswer {
    let mut names: Vec<String> = Vec::new();
    let mut local: HashMap<NameId, i64> = HashMap::new();
    let mut name_index = |id: NameId| {
        *local.entry(id).or_insert_with(|| {
            names.push(index.name(id).to_string());
            names.len() as i64 - 1
        })
    };
    let tracks = view
        .tracks
        .into_iter()
        .map(|t| TrackItems {
            id: t.track,
            events: t
                .events
                .iter()
                .map(|e| [e.start_ps, e.dur_ps, i64::from(e.depth), name_index(e.name), i64::from(e.id)])
                .collect(),
            merged: t
                .merged
                .iter()
                .map(|m| [m.start_ps, m.end_ps, i64::from(m.depth), m.count as i64, name_index(m.name)])
                .collect(),
        })
        .collect();
    let flows = view
        .flows
        .iter()
        .map(|f| {
            [i64::from(f.from), i64::from(f.from_track), f.from_ps, i64::from(f.to), i64::from(f.to_track), f.to_ps]
        })
        .collect();
    ViewAnswer { start_ps, end_ps, resolution_ps: view.resolution_ps, names, tracks, flows }
}
