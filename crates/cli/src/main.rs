//! The `mlprof` command: `info`, `analyze`, `convert`, `diff` and `advise` over any profile path mlprof
//! reads, `serve` (the web UI over them), `capture` from running jobs over
//! TensorFlow's profiler gRPC API, and `run` to launch a job and collect its traces.
//!
//! Exit codes: 0 ok, 1 the input was read but holds nothing usable, 2 bad input or
//! usage; `run` exits with its job's code. Every error is printed as one line on stderr.

mod advise;
mod agent;
mod allocator;
mod analyze;
mod attach;
mod capture;
mod convert;
mod diff;
mod info_view;
mod load_progress;
mod report_view;
mod run;
mod select;
mod serve;
mod serve_store;
mod table_fit;
mod tfprof;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use mlprof_formats::FormatError;
use mlprof_formats::input::LoadOptions;
use mlprof_formats::torch_memory::EntryEvents;
use mlprof_model::human;

/// mlprof: where did the time of your ML job go?
#[derive(Parser)]
#[command(name = "mlprof", version, about, long_about = None)]
struct Cli {
    /// Print timings and other details to stderr.
    #[arg(short, long, global = true)]
    verbose: bool,
    /// No progress bar while large profiles load (it shows only on a terminal anyway).
    #[arg(short, long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show what a profile holds: sessions, hosts, planes, lines, event counts, time spans,
    /// device properties and well-known stats.
    Info {
        /// An .xplane.pb[.gz] file, a session directory, a TensorBoard log directory,
        /// a Kineto trace (.json[.gz]) or a directory of per-rank traces.
        path: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = InfoFormat::Table)]
        format: InfoFormat,
    },
    /// Run a tool on a profile: the TF-Profiler tools, HTA's GPU analyses (gpu), the
    /// transfer and synchronisation diagnosis (transfers), tfprof's views (tfprof) and
    /// more; `--help` lists them all with what each answers.
    Analyze {
        /// The input (any path `info` accepts).
        path: PathBuf,
        /// Tool name, or `all` for the TF-Profiler tools (the list is in `--help`).
        #[arg(long, default_value = "overview_page")]
        tool: String,
        /// Host to analyse, or `all` (default: all hosts together, as XProf combines them).
        #[arg(long)]
        host: Option<String>,
        /// Session (default: the newest).
        #[arg(long)]
        session: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = AnalyzeFormat::Table)]
        format: AnalyzeFormat,
        /// Step-time breakdown on GPU profiles: `classic` (the default) includes host time
        /// (Input, Kernel launch, Host compute), `xprof` is current XProf's device-only view.
        #[arg(long, value_enum)]
        breakdown: Option<BreakdownArg>,
        /// Sort the main table (table and csv formats): COLUMN, COLUMN:asc or COLUMN:desc.
        #[arg(long)]
        sort: Option<String>,
        #[command(flatten)]
        rows: report_view::RowArgs,
        /// With `--tool gpu`: the analyses to run, comma-separated (default: all).
        #[arg(long)]
        analyses: Option<String>,
        /// Directory for `--format hta-csv` (one CSV per analysis); with `--tool tfprof`,
        /// `timeline:FILE` writes the displayed ops as a Chrome trace.
        #[arg(long)]
        output: Option<PathBuf>,
        /// With `--tool transfers`: GPU idle times longer than this are reported as gaps
        /// (a number with a unit: `50us`, `1ms`; default 100us).
        #[arg(long)]
        gap_threshold: Option<String>,
        #[command(flatten)]
        tfprof: Box<tfprof::TfprofArgs>,
    },
    /// Convert a profile to a Chrome trace or to an XSpace TensorBoard log directory.
    Convert {
        /// The input (any path `info` accepts).
        path: PathBuf,
        /// Output format.
        #[arg(long, value_enum)]
        to: ConvertTarget,
        /// Output: a .json or .json.gz file for chrome-json, a directory for xspace.
        out: PathBuf,
        /// Session to convert (default: the newest; xspace converts all).
        #[arg(long)]
        session: Option<String>,
        /// Host to convert (default: all hosts).
        #[arg(long)]
        host: Option<String>,
    },
    /// Compare two traces op by op (HTA's TraceDiff): counts and total durations per
    /// op and kernel name, what was added, removed, or ran more or less often.
    Diff(diff::DiffArgs),
    /// List the performance problems every tool's result shows, most time lost per step
    /// first, each with its evidence and the fix (input-bound, kernel launch, host
    /// overhead, op placement, precision, TensorCores, device idle, memory, transfers).
    Advise(advise::AdviseArgs),
    /// Capture a profile from running TensorFlow/JAX jobs serving the profiler
    /// (tf.profiler.experimental.server.start(port), jax.profiler.start_server(port)) into
    /// a TensorBoard log directory: LOGDIR/plugins/profile/<session>/<host_port>.xplane.pb.
    Capture(capture::CaptureArgs),
    /// Run a job with no change to its code and collect its framework's own traces:
    /// PyTorch through Kineto's on-demand mode, JAX and TensorFlow through their profiler
    /// servers (started by a Python start-up hook); the job's exit code is mlprof's.
    Run(run::RunArgs),
    /// Record a running process with no change to it: the Python stacks of every thread
    /// of it and its children (sampled from outside), its CPU, memory and I/O, the GPUs'
    /// counters, a JAX/TensorFlow profiler server it already serves, and a Kineto trace of
    /// a PyTorch process started with KINETO_USE_DAEMON=1 (mlprof answers its polls in
    /// dynolog's place; the trace starts at its next poll, within about 5 s).
    Attach(attach::AttachArgs),
    /// Watch every ML job on this node, live, with no change to them: Python and CUDA
    /// processes found in /proc (and jobs `mlprof run --agent` registers), their CPU,
    /// memory and most-run Python frames (sampled from outside), probed step times, kept
    /// on disk within --retain, served as JSON (/api/jobs, for `mlprof top`), a live page
    /// and Prometheus metrics (/metrics) until Ctrl-C or SIGTERM.
    Agent(agent::AgentArgs),
    /// The jobs an `mlprof agent` sees, refreshed every second: on a terminal, keys sort
    /// (s, r), follow a job (f), capture it (c) and open its last capture (o); `--once`
    /// prints one snapshot.
    Top(agent::TopArgs),
    /// Serve the web UI (the tools' pages and a trace viewer) for the profiles under a
    /// path, fully offline; prints `mlprof serve: http://HOST:PORT/` and serves until Ctrl-C.
    Serve(serve::ServeArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum InfoFormat {
    /// Human-readable tree.
    Table,
    /// The JSON document described in the README.
    Json,
}

/// How `analyze` prints.
#[derive(Clone, Copy, ValueEnum)]
pub enum AnalyzeFormat {
    /// Aligned tables and sentences for people.
    Table,
    /// mlprof's JSON schema (see the README).
    Json,
    /// The tool's main table as CSV.
    Csv,
    /// What XProf's tool endpoint answers (DataTable / proto JSON), computed exactly as
    /// XProf does (no mlprof extensions).
    XprofJson,
    /// `--tool gpu` only: one CSV per analysis with HTA's column names, into `--output DIR`.
    HtaCsv,
}

/// The GPU step-time breakdown.
#[derive(Clone, Copy, ValueEnum)]
enum BreakdownArg {
    /// Host time included (the TF guide's breakdown).
    Classic,
    /// Device events only on GPU profiles (current XProf).
    Xprof,
}

/// What `convert` writes.
#[derive(Clone, Copy, ValueEnum)]
pub enum ConvertTarget {
    /// Chrome trace JSON (Perfetto, chrome://tracing); gzipped when OUT ends in .gz.
    ChromeJson,
    /// A TensorBoard log directory: OUT/plugins/profile/<session>/<host>.xplane.pb.
    Xspace,
}

/// A failure with the exit code it maps to.
pub struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

impl Failure {
    /// The job `mlprof run` ran ended with exit code `code` (non-zero); nothing to print.
    pub fn quiet(code: u8) -> Failure {
        Failure { code, message: String::new() }
    }

    /// Bad input or usage (exit code 2).
    pub fn input(message: impl Into<String>) -> Failure {
        Failure { code: 2, message: message.into() }
    }

    /// Read fine, but nothing usable (exit code 1).
    pub fn nothing(message: impl Into<String>) -> Failure {
        Failure { code: 1, message: message.into() }
    }
}

impl From<FormatError> for Failure {
    fn from(e: FormatError) -> Failure {
        Failure::input(e.to_string())
    }
}

fn main() -> ExitCode {
    allocator::use_one_arena();
    let matches = with_tool_list(Cli::command()).try_get_matches().unwrap_or_else(|e| exit_usage(e));
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| exit_usage(e));
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            if !f.message.is_empty() {
                eprintln!("mlprof: error: {}", f.message);
            }
            ExitCode::from(f.code)
        }
    }
}

/// `command` with `analyze --tool`'s long help listing every tool with what it answers,
/// from the tools' specs.
fn with_tool_list(command: clap::Command) -> clap::Command {
    use mlprof_analysis::tool::ToolId;
    use mlprof_analysis::tool::spec::Output;
    let tools: Vec<_> = ToolId::ALL.into_iter().map(ToolId::spec).filter(|spec| spec.has(Output::Report)).collect();
    let width = tools.iter().map(|spec| spec.name.len()).max().unwrap_or(0);
    let mut help = String::from("Tool name, or `all` for the TF-Profiler tools:\n");
    for spec in tools {
        help.push_str(&format!("\n  {:width$}  {}", spec.name, spec.summary));
    }
    command.mut_subcommand("analyze", |analyze| analyze.mut_arg("tool", |tool| tool.long_help(help)))
}

fn run(cli: Cli) -> Result<(), Failure> {
    let verbose = cli.verbose;
    load_progress::set_quiet(cli.quiet);
    match cli.command {
        Command::Info { path, format } => {
            let sessions = load(&path, verbose)?;
            let inventory = mlprof_analysis::inventory::inventory(&sessions);
            let text = match format {
                InfoFormat::Table => info_view::render_table(&inventory),
                InfoFormat::Json => info_view::render_json(&inventory),
            };
            write_stdout(&text)
        }
        Command::Analyze {
            path,
            tool,
            host,
            session,
            format,
            breakdown,
            sort,
            rows,
            analyses,
            output,
            gap_threshold,
            tfprof,
        } => {
            let sessions = load_with(&path, verbose, analyze::snapshot_entries(&tool))?;
            let started = Instant::now();
            let options = tool_options(breakdown, analyses, gap_threshold, &tfprof);
            let request = analyze::Request {
                session: session.as_deref(),
                host: host.as_deref(),
                sort: sort.as_deref(),
                output: output.as_deref(),
                options,
                layout: rows.layout(),
                verbose,
                ..analyze::Request::new(&tool, format)
            };
            let text = analyze::analyze(&sessions, &request)?;
            if verbose {
                eprintln!("analysed in {:.3} s", started.elapsed().as_secs_f64());
            }
            write_stdout(&text)
        }
        Command::Convert { path, to, out, session, host } => {
            let sessions = load(&path, verbose)?;
            let started = Instant::now();
            let written = load_progress::writing(|bytes| {
                convert::convert(&sessions, to, &out, session.as_deref(), host.as_deref(), bytes.map(|b| &**b))
            })?;
            if verbose {
                eprintln!("wrote {} in {:.3} s", written.join(", "), started.elapsed().as_secs_f64());
            } else if written != [out.display().to_string()] {
                // Names mlprof chose (inside a directory) are said, so they can be found.
                eprintln!("wrote {}", written.join(", "));
            }
            Ok(())
        }
        Command::Diff(args) => diff::run(args, verbose),
        Command::Advise(args) => advise::run(args, verbose),
        Command::Capture(args) => capture::run(args, verbose),
        Command::Run(args) => run::run(args, verbose),
        Command::Attach(args) => attach::run(args),
        Command::Agent(args) => agent::run_agent(args),
        Command::Top(args) => agent::run_top(args),
        Command::Serve(args) => serve::run(args, verbose),
    }
}

/// The tool options given on `mlprof analyze`'s command line, as `(option, text)` for
/// the tool's option spec to check.
fn tool_options(
    breakdown: Option<BreakdownArg>,
    analyses: Option<String>,
    gap_threshold: Option<String>,
    tfprof: &tfprof::TfprofArgs,
) -> Vec<(&'static str, String)> {
    let breakdown = breakdown.map(|breakdown| match breakdown {
        BreakdownArg::Classic => "classic",
        BreakdownArg::Xprof => "xprof",
    });
    let mut options: Vec<(&'static str, String)> =
        [("breakdown", breakdown.map(str::to_string)), ("analyses", analyses), ("gap_threshold", gap_threshold)]
            .into_iter()
            .filter_map(|(key, text)| text.map(|text| (key, text)))
            .collect();
    options.extend(tfprof.given());
    options
}

/// Prints `text`; a closed pipe (`mlprof … | head`) is not an error.
fn write_stdout(text: &str) -> Result<(), Failure> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::input(format!("writing the output: {e}"))),
        _ => Ok(()),
    }
}

/// Exits on a command-line error with one line, as every other bad input is (`mlprof:
/// error: invalid value '1500' for '--duration <DURATION>': …`, `mlprof: error: the
/// argument '--top <N>' cannot be used with '--all'`), exit code 2; `--help` and
/// `--version` print whole, as clap does.
fn exit_usage(error: clap::Error) -> ! {
    use clap::error::ErrorKind;
    let shown_whole = matches!(
        error.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    );
    if !shown_whole {
        // The first paragraph, on one line: "error: the following required arguments were
        // not provided: --watch"; the usage and tips after it are left out.
        let rendered = error.render().to_string();
        let paragraph: Vec<&str> = rendered
            .lines()
            .map(str::trim)
            .take_while(|line| !line.is_empty() && !line.starts_with("Usage:"))
            .collect();
        eprintln!("mlprof: {}", paragraph.join(" "));
        std::process::exit(2);
    }
    error.exit()
}

/// How many skipped parts of a log directory are named one per line; the rest are counted.
const SKIPPED_SHOWN: usize = 10;

/// Warns on stderr about what discovery left out (unreadable directories, links out of
/// the directory), one line each up to [`SKIPPED_SHOWN`], then a count.
fn report_skipped(skipped: &[mlprof_formats::discover::Skipped]) {
    for part in skipped.iter().take(SKIPPED_SHOWN) {
        eprintln!("mlprof: skipped {}: {}", part.path.display(), part.reason);
    }
    if skipped.len() > SKIPPED_SHOWN {
        eprintln!("mlprof: skipped {} more part(s) of the directory", skipped.len() - SKIPPED_SHOWN);
    }
}

/// Loads everything behind `path`, reporting the ingest rate with `-v`.
fn load(path: &std::path::Path, verbose: bool) -> Result<Vec<mlprof_model::Session>, Failure> {
    load_with(path, verbose, EntryEvents::Made)
}

/// [`load`], making memory snapshots' entries events or not as `snapshot_entries` says.
fn load_with(
    path: &std::path::Path,
    verbose: bool,
    snapshot_entries: EntryEvents,
) -> Result<Vec<mlprof_model::Session>, Failure> {
    let started = Instant::now();
    let found = mlprof_formats::discover::discover_reporting(path)?;
    report_skipped(&found.skipped);
    let sessions = load_progress::loading(|progress| {
        let options = LoadOptions { progress: progress.cloned(), snapshot_entries, ..LoadOptions::default() };
        let load = |files| mlprof_formats::discover::load_session_with(files, &options);
        found.sessions.iter().map(load).collect::<Result<Vec<_>, _>>()
    })?;
    if verbose {
        let secs = started.elapsed().as_secs_f64();
        let bytes: u64 = sessions.iter().flat_map(|s| &s.hosts).map(|h| h.source_bytes).sum();
        let events: usize = sessions.iter().map(|s| s.event_count()).sum();
        eprintln!(
            "read {} session(s), {} events, {} in {} ({} stored, {} events/s)",
            sessions.len(),
            human::count(events as f64),
            human::bytes(bytes as f64),
            human::duration_ms(secs * 1e3),
            human::rate(bytes as f64 / secs.max(1e-9), "B"),
            human::count((events as f64 / secs.max(1e-9)).round()),
        );
    }
    Ok(sessions)
}
