//! `GET /api/trace/event?run&host&id`: one event with every arg the model has for it
//! (stats as text, see [`mlprof_timeline::event_args`]) and its flows.
//!
//! The index event names its model event by position ([`ModelRef`]); if the model
//! event there does not start and last as the index event does, the index was built
//! from another state of the profile (one its cache key cannot tell apart): the answer
//! is 409 and the index is dropped, memory and disk, so the next request rebuilds it.
//! An event of a derived section (steps, XProf's derived GPU lines) covers several
//! model events and names the first, so only its start must agree.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use mlprof_timeline::{FlowDirection, ModelRef, SectionKind, TimelineIndex, event_args};
use serde::{Deserialize, Serialize};

use super::host_index::{discard_host_index, host_index, still_intact};
use super::query::{number, run_and_host};
use super::together;
use crate::error::ApiError;
use crate::params::ApiQuery;
use crate::state::AppState;

/// The query of `event`.
#[derive(Debug, Deserialize)]
pub(crate) struct EventQuery {
    run: Option<String>,
    host: Option<String>,
    id: Option<String>,
}

/// The answer of `event`.
#[derive(Debug, Serialize)]
pub(crate) struct EventAnswer {
    id: u32,
    name: String,
    track: u32,
    track_name: String,
    start_ps: i64,
    dur_ps: i64,
    depth: u32,
    args: BTreeMap<String, String>,
    flows: Vec<FlowAnswer>,
}

#[derive(Debug, Serialize)]
struct FlowAnswer {
    direction: FlowDirection,
    event: u32,
    track: u32,
    start_ps: i64,
    name: String,
}

/// `GET /api/trace/event`.
pub(crate) async fn event(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<EventQuery>,
) -> Result<Json<EventAnswer>, ApiError> {
    let (run, host) = run_and_host(&state, &query.run, &query.host)?;
    let id: u32 = number(&query.id, "id")?;
    let index = host_index(&state, &run, &host).await?;
    let event = index
        .event(id)
        .ok_or_else(|| ApiError::not_found(format!("no event {id} on host {host} (it has {})", index.event_count())))?;
    let session = state.session(&run).await?;
    let (model_host, offset_ps, at) = if together::is_together(&host) {
        let placed = together::placed(&state, &run, &host).await?;
        together::locate(&session, &placed.hosts, ModelRef::unpack(event.source))
            .ok_or_else(|| ApiError::internal(format!("run {run}: event {id} names no host")))?
    } else {
        let model_host = session
            .hosts
            .iter()
            .find(|h| h.name == host)
            .ok_or_else(|| ApiError::not_found(format!("no host named {host:?} in run {run}")))?;
        (model_host, 0, ModelRef::unpack(event.source))
    };
    let spans_several = in_derived_section(&index, event.track);
    let same_event = at.resolve(model_host).is_some_and(|(_, model)| {
        model.start_ps().saturating_add(offset_ps) == event.start_ps
            && (spans_several || model.duration_ps().max(0) == event.dur_ps)
    });
    if !same_event {
        discard_host_index(&state, &run, &host).await?;
        return Err(ApiError::conflict(format!(
            "{}: the trace index no longer matches the profile at event {id}; it will be rebuilt, ask again",
            model_host.source_path
        )));
    }
    let args = event_args(model_host, at)
        .ok_or_else(|| ApiError::internal(format!("{}: event {id} is not in the profile", model_host.source_path)))?;
    let flows = index
        .flows_of(id)
        .into_iter()
        .filter_map(|link| {
            let other = index.event(link.event)?;
            Some(FlowAnswer {
                direction: link.direction,
                event: other.id,
                track: other.track,
                start_ps: other.start_ps,
                name: index.name(other.name).to_string(),
            })
        })
        .collect();
    let answer = EventAnswer {
        id,
        name: index.name(event.name).to_string(),
        track: event.track,
        track_name: index.track(event.track).map(|t| t.name.to_string()).unwrap_or_default(),
        start_ps: event.start_ps,
        dur_ps: event.dur_ps,
        depth: event.depth,
        args: args.into_iter().collect(),
        flows,
    };
    still_intact(&state, &run, &host, &index).await?;
    Ok(Json(answer))
}

/// Whether `track` belongs to a derived section (its events may cover several model
/// events).
fn in_derived_section(index: &TimelineIndex, track: u32) -> bool {
    index
        .track(track)
        .and_then(|track| index.sections().nth(track.section as usize))
        .is_some_and(|section| section.kind == SectionKind::Derived)
}
