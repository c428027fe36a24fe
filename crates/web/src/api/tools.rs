//! `GET /api/tools` (every tool the server offers, with its options, defaults and help,
//! so the page names no tool and no default itself) and `GET /api/options` (a tool's
//! options checked exactly as `/api/tool` checks them, without computing anything:
//! what is wrong is part of a 200 answer, so a page checking what a user typed logs
//! no failed request).

use std::collections::BTreeMap;

use axum::Json;
use mlprof_analysis::tool::spec::ToolSpec;
use mlprof_analysis::tool_availability::served_tools;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::params::{ApiQuery, required};
use crate::tool_request::{parse_options, parse_tool};

/// The answer of `/api/tools`.
#[derive(Serialize)]
pub struct Tools {
    /// The served tools, in the order the tool selector lists them.
    tools: Vec<ToolSpec>,
}

/// `GET /api/tools`.
pub async fn tools() -> Json<Tools> {
    Json(Tools { tools: served_tools().map(|tool| tool.spec()).collect() })
}

/// The query string of `/api/options`: the tool and the options to check.
#[derive(Debug, Default, Deserialize)]
pub struct OptionsQuery {
    /// Tool name (required).
    tool: Option<String>,
    /// The options, by name.
    #[serde(flatten)]
    options: BTreeMap<String, String>,
}

/// The answer of `/api/options`.
#[derive(Serialize)]
pub struct CheckedOptions {
    /// The tool.
    tool: &'static str,
    /// The sentence `/api/tool` would answer with 400 for these options, or `null`
    /// when they are good.
    problem: Option<String>,
    /// The options given that the tool takes, as given (empty with a problem).
    options: BTreeMap<&'static str, String>,
}

/// `GET /api/options?tool=TOOL[&OPTION=VALUE…]` (4xx only for a missing or unknown tool).
pub async fn options(ApiQuery(query): ApiQuery<OptionsQuery>) -> Result<Json<CheckedOptions>, ApiError> {
    let tool = parse_tool(required(&query.tool, "tool")?)?;
    let (problem, options) = match parse_options(tool, &query.options) {
        Ok(options) => (None, options.given().map(|(key, text)| (key, text.to_string())).collect()),
        Err(error) => (Some(error.to_string()), BTreeMap::new()),
    };
    Ok(Json(CheckedOptions { tool: tool.name(), problem, options }))
}
