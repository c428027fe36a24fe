//! [`ToolOutput`], one tool's result as the server caches, answers and exports it.
//!
//! The one design decision to know: it holds the render-ready report and the result
//! as a JSON value — never references into the session — so a cached result outlives
//! its session being dropped from memory. It lives below the state, which caches it,
//! and below `tool_output`, which computes it.

use mlprof_analysis::report::Report;
use serde::Serialize;
use serde_json::Value;

/// One tool's result: what `/api/tool` answers and `/api/csv` exports.
#[derive(Clone, Debug, Serialize)]
pub struct ToolOutput {
    /// The hosts analysed, by rank then name.
    pub hosts: Vec<String>,
    /// The render-ready report (the CLI's tables).
    pub report: Report,
    /// The typed result as `mlprof analyze --format json` writes it.
    pub result: Value,
}
