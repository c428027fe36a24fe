//! `GET /api/tool` (one tool's report and typed result) and `GET /api/csv` (its main
//! table as `mlprof analyze --format csv` writes it).

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::error::ApiError;
use crate::params::ApiQuery;
use crate::state::AppState;
use crate::streamed;
use crate::tool_output::{ToolOutput, tool_output};
use crate::tool_request::{ToolQuery, ToolRequest};

/// The answer of `/api/tool`: `{run, hosts, tool, report, result}`, serialised from the
/// cached output without copying it.
struct ToolAnswer {
    run: String,
    tool: &'static str,
    output: Arc<ToolOutput>,
}

impl Serialize for ToolAnswer {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut answer = serializer.serialize_struct("ToolAnswer", 5)?;
        answer.serialize_field("run", &self.run)?;
        answer.serialize_field("hosts", &self.output.hosts)?;
        answer.serialize_field("tool", self.tool)?;
        answer.serialize_field("report", &self.output.report)?;
        answer.serialize_field("result", &self.output.result)?;
        answer.end()
    }
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
    Ok(streamed::json(ToolAnswer { run: request.run.clone(), tool: request.tool.name(), output }))
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
