//! Computing one tool's result for a checked request, as `mlprof analyze` does, on a
//! blocking thread, cached per request (run, host, tool, options).
//!
//! The one design decision to know: the cache is the state's, keyed by the checked
//! [`ToolRequest`] itself, and keeps a [`ToolOutput`] — the report and the result as a
//! JSON value, never references into the session — so a cached result outlives its
//! session being dropped from memory.

use std::sync::Arc;

use mlprof_analysis::gpu;
use mlprof_analysis::tools::{Analysis, ToolOptions};
use mlprof_model::Session;
use serde::Serialize;
use serde_json::Value;

use crate::blocking::on_blocking_thread;
use crate::error::ApiError;
use crate::select;
use crate::state::AppState;
use crate::tool_request::{Tool, ToolRequest};

pub use crate::tool_result::ToolOutput;

/// The result of `request`, from the cache or computed on a blocking thread (to its
/// end, even if every request waiting for it goes away).
pub async fn tool_output(state: &Arc<AppState>, request: &ToolRequest) -> Result<Arc<ToolOutput>, ApiError> {
    let owned = (Arc::clone(state), request.clone());
    state
        .results()
        .get_or_compute(request, move || async move {
            let (state, request) = owned;
            let session = state.session(&request.run).await?;
            let what = format!("{} failed", request.tool.name());
            on_blocking_thread(what, move || compute(&session, request.host.as_deref(), request.tool))
                .await?
                .map(Arc::new)
        })
        .await
}

/// Runs `tool` on the hosts `host` selects (all for `None`).
pub fn compute(session: &Session, host: Option<&str>, tool: Tool) -> Result<ToolOutput, ApiError> {
    let hosts = select::hosts(session, host)?;
    let names = hosts.iter().map(|h| h.name.clone()).collect();
    let (report, result) = match tool {
        Tool::Xprof { name, breakdown } => {
            let analysis = Analysis::new(hosts, ToolOptions { breakdown, xprof_compatible: false });
            let result = analysis.run(name).ok_or_else(|| ApiError::not_found(format!("no tool named {name:?}")))?;
            (result.report(), to_json(&result)?)
        }
        Tool::Gpu => {
            let result = gpu::analyze(&hosts, &[]);
            (result.report(), to_json(&result)?)
        }
        Tool::Transfers(options) => {
            let result = gpu::transfers::analyze(&hosts, options);
            (result.report(), to_json(&result)?)
        }
    };
    Ok(ToolOutput { hosts: names, report, result })
}

fn to_json(value: &impl Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(|e| ApiError::internal(format!("rendering the result as JSON: {e}")))
}
