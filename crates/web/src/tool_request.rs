//! What `/api/tool` and `/api/csv` ask for, checked against the catalog before any
//! profile is read: the run, the host (or all), the tool and its options.

use std::collections::BTreeMap;

use mlprof_analysis::tool::{Options, ToolId};
use mlprof_analysis::tool_availability::served_tools;
use serde::Deserialize;

use crate::catalog::RunLookup;
use crate::error::ApiError;
use crate::params::required;

/// The query string of `/api/tool` and `/api/csv`, as sent.
#[derive(Debug, Default, Deserialize)]
pub struct ToolQuery {
    /// Run name (required).
    pub run: Option<String>,
    /// Host name or `all` (default all).
    pub host: Option<String>,
    /// Tool name (required).
    pub tool: Option<String>,
    /// `/api/csv` only: `COLUMN[:asc|desc]`.
    pub sort: Option<String>,
    /// Every other parameter: the tool's options (`breakdown=xprof`,
    /// `gap_threshold=1ms`) and anything else, which is ignored.
    #[serde(flatten)]
    pub options: BTreeMap<String, String>,
}

/// A checked request for one tool's result.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ToolRequest {
    /// The run (a name of the catalog).
    pub run: String,
    /// The host (a host of the run), or `None` for all hosts.
    pub host: Option<String>,
    /// The tool.
    pub tool: ToolId,
    /// Its options.
    pub options: Options,
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
        let tool = parse_tool(required(&query.tool, "tool")?)?;
        let options = parse_options(tool, &query.options)?;
        Ok(ToolRequest { run: run.name.clone(), host, tool, options })
    }
}

/// The served tool called `name`: 400 for the trace viewer (no report), 404 for a
/// name that is not a served tool.
pub fn parse_tool(name: &str) -> Result<ToolId, ApiError> {
    match ToolId::from_name(name).filter(|tool| tool.spec().served) {
        Some(ToolId::TraceViewer) => Err(ApiError::bad_request(
            "trace_viewer has no report; the trace viewer reads /api/trace/meta, view, event and search",
        )),
        Some(tool) => Ok(tool),
        None => {
            let known: Vec<&str> =
                served_tools().filter(|tool| *tool != ToolId::TraceViewer).map(ToolId::name).collect();
            Err(ApiError::not_found(format!("no tool named {name:?}; tools: {}", known.join(", "))))
        }
    }
}

/// The options of `tool` among `params`, read as the CLI reads them: 400 for a bad
/// value or for another tool's option; parameters that are no tool's option are left.
pub fn parse_options(tool: ToolId, params: &BTreeMap<String, String>) -> Result<Options, ApiError> {
    let mut options = Options::default();
    for (key, text) in params {
        match tool.accepted_option(key) {
            Some(option) => options.set(option, text, key).map_err(ApiError::bad_request)?,
            None => {
                let takers: Vec<&str> =
                    served_tools().filter(|t| t.spec().option(key).is_some()).map(ToolId::name).collect();
                if !takers.is_empty() {
                    return Err(ApiError::bad_request(format!("{key} is for tool={}", takers.join(","))));
                }
            }
        }
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn tools_and_their_options_are_checked() {
        assert_eq!(parse_tool("kernel_stats"), Ok(ToolId::KernelStats));
        assert!(matches!(parse_tool("trace_viewer"), Err(ApiError::BadRequest(_))));
        assert!(matches!(parse_tool("tfprof"), Err(ApiError::NotFound(_))), "not served");
        assert!(matches!(parse_tool("nope"), Err(ApiError::NotFound(_))));
        let one_ms = parse_options(ToolId::Transfers, &params(&[("gap_threshold", "1ms")])).expect("a duration");
        assert_eq!(one_ms.transfers.gap_threshold_ps, 1_000_000_000);
        let elsewhere = parse_options(ToolId::OverviewPage, &params(&[("gap_threshold", "1ms")]));
        assert_eq!(elsewhere, Err(ApiError::bad_request("gap_threshold is for tool=transfers")));
        let bad = parse_options(ToolId::OverviewPage, &params(&[("breakdown", "fast")]));
        assert!(matches!(bad, Err(ApiError::BadRequest(_))));
        assert!(parse_options(ToolId::OverviewPage, &params(&[("_", "1")])).is_ok(), "no tool's option: ignored");
        let xprof = params(&[("breakdown", "xprof")]);
        assert!(parse_options(ToolId::FrameworkOpStats, &xprof).is_ok(), "XProf's tools run as one analysis");
        assert!(matches!(parse_options(ToolId::Gpu, &xprof), Err(ApiError::BadRequest(_))), "not an XProf tool");
    }
}
