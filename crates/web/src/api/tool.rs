//! `GET /api/tool` (one tool's report and typed result) and `GET /api/csv` (its main
//! table as `mlprof analyze --format csv` writes it).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use mlprof_analysis::report::Report;
use serde::Serialize;
use serde_json::Value;

use crate::error::ApiError;
use crate::params::ApiQuery;
use crate::state::AppState;
use crate::tool_output::tool_output;
use crate::tool_request::{ToolQuery, ToolRequest};

/// The answer of `/api/tool`.
#[derive(Serialize)]
struct ToolAnswer<'a> {
    run: &'a str,
    hosts: &'a [String],
    tool: &'a str,
    report: &'a Report,
    result: &'a Value,
}

/// `GET /api/tool?run&host&tool[&breakdown][&gap_threshold]`.
pub async fn tool(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<ToolQuery>,
) -> Result<Response, ApiError> {
    if query.sort.is_some() {
        return Err(ApiError::bad_request("sort is for /api/csv; pages sort the report's table themselves"));
    }
    let request = ToolRequest::parse(&query, &state)?;
    let output = tool_output(&state, &request).await?;
    let answer = ToolAnswer {
        run: &request.run,
        hosts: &output.hosts,
        tool: request.tool.name(),
        report: &output.report,
        result: &output.result,
    };
    Ok(Json(answer).into_response())
}

/// `GET /api/csv?run&host&tool[&sort=COLUMN[:asc|desc]]`.
pub async fn csv(
    State(state): State<Arc<AppState>>,
    ApiQuery(query): ApiQuery<ToolQuery>,
) -> Result<Response, ApiError> {
    let request = ToolRequest::parse(&query, &state)?;
    let output = tool_output(&state, &request).await?;
    let name = request.tool.name();
    let mut report = output.report.clone();
    if let Some(spec) = query.sort.as_deref() {
        report.sort_main_table(spec).map_err(ApiError::bad_request)?;
    }
    let csv = report.to_csv().ok_or_else(|| ApiError::not_found(format!("{name} has no main table to export")))?;
    // `name` is one of the known tool names, so it is safe in a header.
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}.csv\""))
        .map_err(|e| ApiError::internal(format!("Content-Disposition: {e}")))?;
    Ok((
        [
            (header::CONTENT_TYPE, HeaderValue::from_static("text/csv; charset=utf-8")),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        csv,
    )
        .into_response())
}
