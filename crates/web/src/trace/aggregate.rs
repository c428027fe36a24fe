//! `GET /api/trace/aggregate?run&host&start_ps&end_ps[&tracks=1,2,3][&limit=N][&format=csv]`:
//! what a marked range of the trace viewer holds, by event name (count, time inside the
//! range, self time, average, longest), from
//! [`mlprof_timeline::TimelineIndex::aggregate`]; as JSON, or every row as CSV.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use mlprof_analysis::report::write_csv_row;
use mlprof_timeline::{RangeAggregate, TimelineIndex};
use serde::{Deserialize, Serialize};

use super::host_index::{host_index, still_intact};
use super::query::{number_or, run_and_host, time_range};
use super::view::parse_tracks;
use crate::blocking::on_blocking_thread;
use crate::error::ApiError;
use crate::params::ApiQuery;
use crate::state::AppState;

/// Rows of a JSON answer when `limit` is not given.
const DEFAULT_LIMIT: usize = 1_000;
/// Most rows a JSON answer may hold (CSV holds every row).
const MAX_LIMIT: usize = 100_000;

/// The query of `aggregate`.
#[derive(Debug, Deserialize)]
pub(crate) struct AggregateQuery {
    run: Option<String>,
    host: Option<String>,
    start_ps: Option<String>,
    end_ps: Option<String>,
    tracks: Option<String>,
    limit: Option<String>,
    format: Option<String>,
}

/// The answer of `aggregate`.
#[derive(Debug, Serialize)]
pub(crate) struct AggregateAnswer {
    start_ps: i64,
    end_ps: i64,
    /// Tracks aggregated.
    tracks: usize,
    /// Events in the range on those tracks.
    events: u64,
    /// Distinct names among them (`rows` may hold fewer: `limit`).
    names: usize,
    rows: Vec<Row>,
}

/// One name's totals; times in picoseconds.
#[derive(Debug, Serialize)]
struct Row {
    name: String,
    count: u64,
    total_ps: i64,
    self_ps: i64,
    average_ps: i64,
    max_ps: i64,
}

/// `GET /api/trace/aggregate`.
pub(crate) async fn aggregate(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<AggregateQuery>,
) -> Result<Response, ApiError> {
    let (run, host) = run_and_host(&state, &query.run, &query.host)?;
    let (start_ps, end_ps) = time_range(&query.start_ps, &query.end_ps)?;
    let limit: usize = number_or(&query.limit, "limit", DEFAULT_LIMIT)?;
    if limit > MAX_LIMIT {
        return Err(ApiError::bad_request(format!("limit must be at most {MAX_LIMIT}, not {limit}")));
    }
    let csv = match query.format.as_deref() {
        None | Some("" | "json") => false,
        Some("csv") => true,
        Some(other) => return Err(ApiError::bad_request(format!("format must be json or csv, not {other:?}"))),
    };
    let index = host_index(&state, &run, &host).await?;
    let tracks = parse_tracks(query.tracks.as_deref(), &index)?.unwrap_or_else(|| (0..index.track_count()).collect());
    let reader = Arc::clone(&index);
    let answer = on_blocking_thread("trace aggregate", move || {
        let aggregate = reader.aggregate(start_ps, end_ps, &tracks);
        let rows = rows(&reader, &aggregate, if csv { usize::MAX } else { limit });
        AggregateAnswer {
            start_ps,
            end_ps,
            tracks: tracks.len(),
            events: aggregate.events,
            names: aggregate.rows.len(),
            rows,
        }
    })
    .await?;
    still_intact(&state, &run, &host, &index).await?;
    if csv {
        return Ok(csv_response(&answer));
    }
    Ok(crate::streamed::json(answer))
}

/// The first `limit` rows of `aggregate`, with names and averages.
fn rows(index: &TimelineIndex, aggregate: &RangeAggregate, limit: usize) -> Vec<Row> {
    aggregate
        .rows
        .iter()
        .take(limit)
        .map(|r| Row {
            name: index.name(r.name).to_string(),
            count: r.count,
            total_ps: r.total_ps,
            self_ps: r.self_ps,
            average_ps: r.total_ps / r.count.max(1) as i64,
            max_ps: r.max_ps,
        })
        .collect()
}

/// Every row as a CSV download.
fn csv_response(answer: &AggregateAnswer) -> Response {
    let mut out = String::new();
    write_csv_row(&mut out, ["name", "count", "total_ps", "self_ps", "average_ps", "max_ps"]);
    for row in &answer.rows {
        let numbers = [row.count as i64, row.total_ps, row.self_ps, row.average_ps, row.max_ps].map(|n| n.to_string());
        write_csv_row(&mut out, std::iter::once(row.name.as_str()).chain(numbers.iter().map(String::as_str)));
    }
    (
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")),
            (header::CONTENT_DISPOSITION, HeaderValue::from_static("attachment; filename=\"trace_range.csv\"")),
        ],
        out,
    )
        .into_response()
}
