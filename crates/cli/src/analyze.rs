//! `mlprof analyze`: run the XProf tools on a profile and render their results.

use mlprof_analysis::steps::Breakdown;
use mlprof_analysis::tools::{Analysis, TOOL_NAMES, ToolOptions};
use mlprof_model::Session;
use serde_json::{Map, Value, json};

use crate::{AnalyzeFormat, Failure, gpu, report_view, select, tfprof, transfers};

/// What `analyze` was asked for.
pub struct Request<'a> {
    /// Tool name or `all`.
    pub tool: &'a str,
    /// Session name (default: newest).
    pub session: Option<&'a str>,
    /// Host name or `all` (default: all).
    pub host: Option<&'a str>,
    /// Output format.
    pub format: AnalyzeFormat,
    /// GPU breakdown.
    pub breakdown: Breakdown,
    /// Sort spec for the main table.
    pub sort: Option<&'a str>,
    /// `--tool gpu`: the analyses to run (comma-separated; all when `None`).
    pub analyses: Option<&'a str>,
    /// `--format hta-csv`: the output directory.
    pub output: Option<&'a std::path::Path>,
    /// `--tool transfers`: the GPU gap threshold as typed (`50us`, `1ms`).
    pub gap_threshold: Option<&'a str>,
    /// `--tool tfprof`: its options.
    pub tfprof: &'a tfprof::TfprofArgs,
}

/// Runs the request and returns the text to print.
pub fn analyze(sessions: &[Session], request: &Request<'_>) -> Result<String, Failure> {
    let session = select::session(sessions, request.session)?;
    let host = request.host.filter(|h| *h != "all");
    let hosts = select::hosts(session, host)?;
    if request.tool == "gpu" {
        return gpu::run(&hosts, request.analyses, request.format, request.output, request.sort);
    }
    if request.tool == "transfers" {
        return transfers::run(&hosts, request.gap_threshold, request.format, request.sort);
    }
    if request.tool == "tfprof" {
        return tfprof::run(&hosts, request.tfprof, request.format, request.output, request.sort);
    }
    if request.tfprof.any_given() {
        return Err(Failure::input("--view, --select, --step and tfprof's other options are for --tool tfprof"));
    }
    if request.gap_threshold.is_some() {
        return Err(Failure::input("--gap-threshold is for --tool transfers"));
    }
    if matches!(request.format, AnalyzeFormat::HtaCsv) {
        return Err(Failure::input("--format hta-csv is for --tool gpu"));
    }
    let tools: Vec<&str> = if request.tool == "all" {
        TOOL_NAMES.to_vec()
    } else if TOOL_NAMES.contains(&request.tool) {
        vec![request.tool]
    } else {
        return Err(Failure::input(format!(
            "unknown tool {:?}; tools: all, gpu, transfers, tfprof, {}",
            request.tool,
            TOOL_NAMES.join(", ")
        )));
    };
    let xprof_compatible = matches!(request.format, AnalyzeFormat::XprofJson);
    let options = ToolOptions { breakdown: request.breakdown, xprof_compatible };
    let analysis = Analysis::new(hosts.clone(), options);
    let host_names: Vec<&str> = hosts.iter().map(|h| h.name.as_str()).collect();
    let mut text = String::new();
    let mut json_out = Map::new();
    for (tool, result) in tools.iter().zip(analysis.run_all(&tools)) {
        let result = result.ok_or_else(|| Failure::input(format!("unknown tool {tool:?}")))?;
        match request.format {
            AnalyzeFormat::Table | AnalyzeFormat::Csv | AnalyzeFormat::HtaCsv => {
                let mut report = result.report();
                if let Some(spec) = request.sort {
                    report.sort_main_table(spec).map_err(Failure::input)?;
                }
                if matches!(request.format, AnalyzeFormat::Csv) {
                    if tools.len() > 1 {
                        return Err(Failure::input("--format csv writes one tool's main table; choose it with --tool"));
                    }
                    let csv = report
                        .to_csv()
                        .ok_or_else(|| Failure::nothing(format!("{tool} has no main table to export")))?;
                    text.push_str(&csv);
                } else {
                    if !text.is_empty() {
                        text.push('\n');
                    }
                    text.push_str(&report_view::render_text(&report));
                }
            }
            AnalyzeFormat::Json => {
                let value = serde_json::to_value(&result).map_err(|e| Failure::input(e.to_string()))?;
                json_out.insert((*tool).to_string(), value);
            }
            AnalyzeFormat::XprofJson => {
                json_out.insert((*tool).to_string(), result.to_xprof_json());
            }
        }
    }
    match request.format {
        AnalyzeFormat::Json => {
            let doc = json!({
                "session": session.name,
                "hosts": host_names,
                "breakdown": request.breakdown,
                "tools": Value::Object(json_out),
            });
            Ok(format!("{}\n", serde_json::to_string_pretty(&doc).map_err(|e| Failure::input(e.to_string()))?))
        }
        AnalyzeFormat::XprofJson => {
            let value = if tools.len() == 1 {
                json_out.into_iter().next().map(|(_, v)| v).unwrap_or(Value::Null)
            } else {
                Value::Object(json_out)
            };
            Ok(format!("{}\n", serde_json::to_string(&value).map_err(|e| Failure::input(e.to_string()))?))
        }
        AnalyzeFormat::Table | AnalyzeFormat::Csv | AnalyzeFormat::HtaCsv => Ok(text),
    }
}
