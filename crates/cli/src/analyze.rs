//! `mlprof analyze`: turn the command line into tools and their options, run them
//! (one analysis shared by the tools of `--tool all`) and render their results in the
//! format asked for.

use mlprof_formats::torch_memory::EntryEvents;
use std::path::Path;

use mlprof_analysis::tool::spec::{Output, ToolSpec};
use mlprof_analysis::tool::{Analysis, Options, ToolError, ToolId, ToolResult};
use mlprof_formats::output::write_atomically;
use mlprof_model::{Host, Session, SourceFormat};
use serde_json::{Map, Value, json};

use crate::{AnalyzeFormat, Failure, report_view, select, tfprof};

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
    /// Sort spec for the main table.
    pub sort: Option<&'a str>,
    /// `--format hta-csv`: the output directory; `--tool tfprof`: `timeline:FILE`.
    pub output: Option<&'a Path>,
    /// The tool options given, by the tools' option names (`gap_threshold`), as typed.
    pub options: Vec<(&'static str, String)>,
    /// How text tables are laid out (width, rows).
    pub layout: report_view::TextLayout,
    /// `-v`: print the time of each shared result and tool to stderr.
    pub verbose: bool,
}

impl<'a> Request<'a> {
    /// A request for `tool` in `format` with defaults for everything else.
    pub fn new(tool: &'a str, format: AnalyzeFormat) -> Request<'a> {
        Request {
            tool,
            session: None,
            host: None,
            format,
            sort: None,
            output: None,
            options: Vec::new(),
            layout: report_view::TextLayout::WHOLE,
            verbose: false,
        }
    }
}

/// Runs the request and returns the text to print.
pub fn analyze(sessions: &[Session], request: &Request<'_>) -> Result<String, Failure> {
    let session = select::session(sessions, request.session)?;
    let host = request.host.filter(|h| *h != "all");
    let hosts = select::analysable_hosts(session, host)?;
    let tools = tools(request.tool)?;
    let options = options(&tools, request)?;
    check_format(&tools, request)?;
    check_sources(&tools, request, &hosts)?;
    let timeline = match (tools.as_slice(), request.output) {
        ([ToolId::Tfprof], Some(output)) => Some(tfprof::timeline_path(output)?),
        _ => None,
    };
    let analysis = Analysis::new(hosts, options);
    let results = analysis.run_all(&tools);
    if request.verbose {
        for (what, time) in analysis.times() {
            eprintln!("  {what}: {:.3} s", time.as_secs_f64());
        }
    }
    let mut rendered = Vec::new();
    for (tool, result) in tools.iter().zip(results) {
        let result = result.map_err(failure)?;
        if let (Some(path), ToolResult::Tfprof(result)) = (&timeline, &result) {
            tfprof::write_timeline(path, &result.timeline)?;
        }
        rendered.push((*tool, result));
    }
    if tools.iter().all(|tool| tool.spec().xprof) {
        return render_xprof_tools(session, &analysis, &rendered, request);
    }
    let [(tool, result)] = rendered.as_slice() else {
        return Err(Failure::input("one tool at a time beyond XProf's"));
    };
    let name = tool.name();
    match request.format {
        AnalyzeFormat::Table | AnalyzeFormat::Csv => report_view::render_sorted(
            result.report(),
            matches!(request.format, AnalyzeFormat::Csv),
            request.sort,
            name,
            &request.layout,
        ),
        AnalyzeFormat::Json => report_view::render_json(result),
        AnalyzeFormat::HtaCsv => write_hta_csv(result, request.output),
        AnalyzeFormat::XprofJson => Err(Failure::input(format!("XProf has no {name} tool"))),
    }
}

/// An option given that changes nothing on these hosts' format is an error that says so
/// (`--breakdown` on a PyTorch trace), not silently ignored.
fn check_sources(tools: &[ToolId], request: &Request<'_>, hosts: &[&Host]) -> Result<(), Failure> {
    for (key, _) in &request.options {
        let Some(spec) = tools.iter().find_map(|tool| tool.accepted_option(key)) else { continue };
        if spec.sources.is_empty() || hosts.iter().any(|host| spec.sources.contains(&host.format.name())) {
            continue;
        }
        let format = hosts.first().map_or("this", |host| host.format.label());
        let applies: Vec<&str> = spec
            .sources
            .iter()
            .filter_map(|name| [SourceFormat::Xspace, SourceFormat::Kineto].into_iter().find(|f| f.name() == *name))
            .map(SourceFormat::label)
            .collect();
        return Err(Failure::input(format!(
            "--{} changes only {} profiles, and this one is {format}",
            key.replace('_', "-"),
            applies.join(", ")
        )));
    }
    Ok(())
}

/// The tools `name` asks for: one tool, or XProf's for `all`.
fn tools(name: &str) -> Result<Vec<ToolId>, Failure> {
    if name == "all" {
        return Ok(ToolId::xprof_tools().collect());
    }
    match ToolId::from_name(name) {
        Some(tool) if tool.spec().has(Output::Report) => Ok(vec![tool]),
        Some(tool) => Err(Failure::input(format!(
            "{name} has no report: open it in `mlprof serve` ({})",
            tool.spec().summary.trim_end_matches('.').to_lowercase()
        ))),
        None => {
            let reported = |xprof: bool| {
                ToolId::ALL
                    .into_iter()
                    .filter(move |t| t.spec().xprof == xprof && t.spec().has(Output::Report))
                    .map(ToolId::name)
            };
            let names: Vec<&str> = std::iter::once("all").chain(reported(false)).chain(reported(true)).collect();
            Err(Failure::input(format!("unknown tool {name:?}; tools: {}", names.join(", "))))
        }
    }
}

/// The options given, read into typed options; an option none of `tools` takes is an
/// error that names the tools taking it.
fn options(tools: &[ToolId], request: &Request<'_>) -> Result<Options, Failure> {
    let mut options = if matches!(request.format, AnalyzeFormat::XprofJson) {
        Options::xprof_compatible()
    } else {
        Options::default()
    };
    for (key, text) in &request.options {
        let flag = format!("--{}", key.replace('_', "-"));
        let Some(spec) = tools.iter().find_map(|tool| tool.accepted_option(key)) else {
            return Err(Failure::input(misplaced_option(key, &flag)));
        };
        options.set(spec, text, &flag).map_err(Failure::input)?;
    }
    Ok(options)
}

/// Says which tools take option `key` (given as `flag`): a tool with many options is
/// named with a few of them (`--view, --select, --step and tfprof's other options are
/// for --tool tfprof`).
fn misplaced_option(key: &str, flag: &str) -> String {
    let takers: Vec<ToolSpec> = ToolId::ALL.into_iter().map(ToolId::spec).filter(|s| s.option(key).is_some()).collect();
    match takers.as_slice() {
        [spec] if spec.options.len() > 3 => {
            let flags: Vec<String> = [spec.options.first(), spec.options.get(1), spec.options.last()]
                .into_iter()
                .flatten()
                .map(|option| format!("--{}", option.key.replace('_', "-")))
                .collect();
            format!("{} and {}'s other options are for --tool {}", flags.join(", "), spec.name, spec.name)
        }
        _ => {
            let names: Vec<&str> = takers.iter().map(|spec| spec.name).collect();
            format!("{flag} is for --tool {}", names.join(", "))
        }
    }
}

/// Refuses a format, sort or output the tools do not have, before anything runs.
fn check_format(tools: &[ToolId], request: &Request<'_>) -> Result<(), Failure> {
    let format = request.format;
    if tools.len() > 1 && matches!(format, AnalyzeFormat::Csv) {
        return Err(Failure::input("--format csv writes one tool's main table; choose it with --tool"));
    }
    for tool in tools {
        let spec = tool.spec();
        if let (Some(_), Some(why)) = (request.sort, spec.unsortable) {
            return Err(Failure::input(format!("--sort does not apply to --tool {} {why}", spec.name)));
        }
        if !spec.has(needed_output(format)) {
            return Err(Failure::input(format_refusal(*tool, &spec, format)));
        }
    }
    let writes_files = matches!(format, AnalyzeFormat::HtaCsv) || tools == [ToolId::Tfprof];
    if request.output.is_some() && !writes_files {
        return Err(Failure::input("--output is for --format hta-csv and --tool tfprof"));
    }
    Ok(())
}

/// The output a format renders.
fn needed_output(format: AnalyzeFormat) -> Output {
    match format {
        AnalyzeFormat::Table | AnalyzeFormat::Csv => Output::Report,
        AnalyzeFormat::Json => Output::Json,
        AnalyzeFormat::XprofJson => Output::XprofJson,
        AnalyzeFormat::HtaCsv => Output::HtaCsv,
    }
}

/// Why `tool` cannot write `format`, with the formats it writes.
fn format_refusal(tool: ToolId, spec: &ToolSpec, format: AnalyzeFormat) -> String {
    let formats: Vec<&str> = [
        (Output::Report, "table"),
        (Output::Json, "json"),
        (Output::Report, "csv"),
        (Output::XprofJson, "xprof-json"),
        (Output::HtaCsv, "hta-csv"),
    ]
    .into_iter()
    .filter(|(output, _)| spec.has(*output))
    .map(|(_, name)| name)
    .collect();
    let list = match formats.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => formats.join(", "),
    };
    match format {
        AnalyzeFormat::HtaCsv if spec.xprof => {
            let writers: Vec<&str> =
                ToolId::ALL.into_iter().filter(|t| t.spec().has(Output::HtaCsv)).map(ToolId::name).collect();
            format!("--format hta-csv is for --tool {}", writers.join(", "))
        }
        // HTA users look for XProf's equivalent: say there is none.
        AnalyzeFormat::XprofJson if tool == ToolId::Gpu => format!("XProf has no gpu tool; use --format {list}"),
        _ => format!("--tool {} writes --format {list}", spec.name),
    }
}

/// XProf's tools: tables one after the other, one JSON document, or XProf's JSON (one
/// tool's as is, several by tool name).
fn render_xprof_tools(
    session: &Session,
    analysis: &Analysis<'_>,
    results: &[(ToolId, ToolResult)],
    request: &Request<'_>,
) -> Result<String, Failure> {
    let mut text = String::new();
    let mut json_out = Map::new();
    for (tool, result) in results {
        let name = tool.name();
        match request.format {
            AnalyzeFormat::Table | AnalyzeFormat::Csv | AnalyzeFormat::HtaCsv => {
                let csv = matches!(request.format, AnalyzeFormat::Csv);
                if !csv && !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&report_view::render_sorted(result.report(), csv, request.sort, name, &request.layout)?);
            }
            AnalyzeFormat::Json => {
                let value = serde_json::to_value(result).map_err(|e| Failure::input(e.to_string()))?;
                json_out.insert(name.to_string(), value);
            }
            AnalyzeFormat::XprofJson => {
                json_out.insert(name.to_string(), result.to_xprof_json().unwrap_or(Value::Null));
            }
        }
    }
    let document = match request.format {
        AnalyzeFormat::Json => json!({
            "session": session.name,
            "hosts": analysis.hosts().iter().map(|h| h.name.as_str()).collect::<Vec<_>>(),
            "breakdown": analysis.options().breakdown,
            "tools": Value::Object(json_out),
        }),
        AnalyzeFormat::XprofJson if results.len() == 1 => json_out.into_iter().next().map_or(Value::Null, |(_, v)| v),
        AnalyzeFormat::XprofJson => Value::Object(json_out),
        AnalyzeFormat::Table | AnalyzeFormat::Csv | AnalyzeFormat::HtaCsv => return Ok(text),
    };
    let rendered = if matches!(request.format, AnalyzeFormat::Json) {
        serde_json::to_string_pretty(&document)
    } else {
        serde_json::to_string(&document)
    };
    Ok(format!("{}\n", rendered.map_err(|e| Failure::input(e.to_string()))?))
}

/// Writes one CSV per analysis into `output` (created if missing); returns the list of
/// files written.
fn write_hta_csv(result: &ToolResult, output: Option<&Path>) -> Result<String, Failure> {
    let files = result.hta_csv_files().ok_or_else(|| Failure::input("--format hta-csv is for --tool gpu"))?;
    let dir =
        output.ok_or_else(|| Failure::input("--format hta-csv writes files: give the directory with --output DIR"))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::input(format!("cannot create output directory {}: {e}", dir.display())))?;
    let mut written = String::new();
    crate::convert::remove_partials_on_signal();
    for file in files {
        let path = dir.join(&file.name);
        write_atomically(&path, |out| out.write_all(file.content.as_bytes()))?;
        written.push_str(&format!("wrote {}\n", path.display()));
    }
    Ok(written)
}

/// A tool's error with the exit code it maps to.
fn failure(error: ToolError) -> Failure {
    if error.nothing_usable { Failure::nothing(error.message) } else { Failure::input(error.message) }
}

/// Whether tool `name` needs a memory snapshot's entries as events: only the memory
/// profile does not (it reads them as columns, in a third of the memory).
pub fn snapshot_entries(name: &str) -> EntryEvents {
    match ToolId::from_name(name) {
        Some(ToolId::MemoryProfile) => EntryEvents::Skipped,
        _ => EntryEvents::Made,
    }
}
