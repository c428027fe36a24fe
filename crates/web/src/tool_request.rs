//! What `/api/tool` and `/api/csv` ask for, checked against the catalog before any
//! profile is read: the run, the host (or all), the tool and its options.

use mlprof_analysis::gpu::transfers::TransfersOptions;
use mlprof_analysis::steps::Breakdown;
use mlprof_analysis::tools::TOOL_NAMES;
use mlprof_model::duration::parse_duration_ps;
use serde::Deserialize;

use crate::catalog::RunLookup;
use crate::error::ApiError;
use crate::params::required;
use mlprof_analysis::tool_availability::all_tools;

/// The query string of `/api/tool` and `/api/csv`, as sent.
#[derive(Debug, Default, Deserialize)]
pub struct ToolQuery {
    /// Run name (required).
    pub run: Option<String>,
    /// Host name or `all` (default all).
    pub host: Option<String>,
    /// Tool name (required).
    pub tool: Option<String>,
    /// `classic` or `xprof` (XProf tools; default classic).
    pub breakdown: Option<String>,
    /// `transfers` only: GPU gaps longer than this duration (`50us`, `1ms`).
    pub gap_threshold: Option<String>,
    /// `/api/csv` only: `COLUMN[:asc|desc]`.
    pub sort: Option<String>,
}

/// A tool with its options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    /// One of the XProf tools ([`TOOL_NAMES`]).
    Xprof {
        /// Its name.
        name: &'static str,
        /// The GPU step-time breakdown.
        breakdown: Breakdown,
    },
    /// HTA's GPU analyses, all of them.
    Gpu,
    /// The transfer and synchronisation diagnosis.
    Transfers(TransfersOptions),
}

impl Tool {
    /// The tool's name as the API spells it.
    pub fn name(&self) -> &'static str {
        match self {
            Tool::Xprof { name, .. } => name,
            Tool::Gpu => "gpu",
            Tool::Transfers(_) => "transfers",
        }
    }
}

/// A checked request for one tool's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolRequest {
    /// The run (a name of the catalog).
    pub run: String,
    /// The host (a host of the run), or `None` for all hosts.
    pub host: Option<String>,
    /// The tool and its options.
    pub tool: Tool,
}

impl ToolRequest {
    /// Checks `query` against the catalog: 400 for a missing or malformed parameter,
    /// 404 for an unknown run, host or tool.
    pub fn parse(query: &ToolQuery, state: &impl RunLookup) -> Result<ToolRequest, ApiError> {
        let run = state.run(required(&query.run, "run")?)?;
        let host = match query.host.as_deref() {
            None | Some("all") | Some("") => None,
            Some(host) => Some(state.host_file(&run.name, host)?.host_name),
        };
        let tool = parse_tool(required(&query.tool, "tool")?, query)?;
        Ok(ToolRequest { run: run.name.clone(), host, tool })
    }
}

fn parse_tool(name: &str, query: &ToolQuery) -> Result<Tool, ApiError> {
    if name == "trace_viewer" {
        return Err(ApiError::bad_request(
            "trace_viewer has no report; the trace viewer reads /api/trace/meta, view, event and search",
        ));
    }
    if query.gap_threshold.is_some() && name != "transfers" {
        return Err(ApiError::bad_request("gap_threshold is for tool=transfers"));
    }
    if let Some(name) = TOOL_NAMES.iter().copied().find(|known| *known == name) {
        let breakdown = match query.breakdown.as_deref() {
            None | Some("classic") => Breakdown::Classic,
            Some("xprof") => Breakdown::Xprof,
            Some(other) => {
                return Err(ApiError::bad_request(format!("breakdown {other:?}: expected classic or xprof")));
            }
        };
        return Ok(Tool::Xprof { name, breakdown });
    }
    match name {
        "gpu" => Ok(Tool::Gpu),
        "transfers" => {
            let mut options = TransfersOptions::default();
            if let Some(text) = query.gap_threshold.as_deref() {
                options.gap_threshold_ps =
                    parse_duration_ps(text).map_err(|e| ApiError::bad_request(format!("gap_threshold: {e}")))?;
            }
            Ok(Tool::Transfers(options))
        }
        _ => {
            let known: Vec<&str> = all_tools().filter(|t| *t != "trace_viewer").collect();
            Err(ApiError::not_found(format!("no tool named {name:?}; tools: {}", known.join(", "))))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(tool: &str) -> ToolQuery {
        ToolQuery { tool: Some(tool.into()), ..ToolQuery::default() }
    }

    #[test]
    fn tools_and_their_options_are_checked() {
        assert_eq!(
            parse_tool("kernel_stats", &query("kernel_stats")),
            Ok(Tool::Xprof { name: "kernel_stats", breakdown: Breakdown::Classic })
        );
        let transfers = ToolQuery { gap_threshold: Some("1ms".into()), ..query("transfers") };
        assert_eq!(
            parse_tool("transfers", &transfers),
            Ok(Tool::Transfers(TransfersOptions { gap_threshold_ps: 1_000_000_000 }))
        );
        assert!(matches!(parse_tool("overview_page", &transfers), Err(ApiError::BadRequest(_))));
        let bad_breakdown = ToolQuery { breakdown: Some("fast".into()), ..query("overview_page") };
        assert!(matches!(parse_tool("overview_page", &bad_breakdown), Err(ApiError::BadRequest(_))));
        assert!(matches!(parse_tool("trace_viewer", &query("trace_viewer")), Err(ApiError::BadRequest(_))));
        assert!(matches!(parse_tool("nope", &query("nope")), Err(ApiError::NotFound(_))));
    }
}
