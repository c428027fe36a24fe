//! `mlprof diff CONTROL TEST`: HTA's trace diff (`TraceDiff.compare_traces` and
//! `ops_diff`) between two profiles, as a table for people, mlprof's JSON, or HTA's
//! `compare_traces` CSV (same columns and row order).

use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, ValueEnum};
use mlprof_analysis::trace_diff::{self, DeviceType, IterationChoice, RankChoice, SideOptions, TraceDiffOptions};
use mlprof_model::Host;

use crate::{Failure, report_view, select};

/// Arguments of `mlprof diff`.
#[derive(Args)]
pub struct DiffArgs {
    /// The control (baseline) profile: any path `info` accepts.
    control: PathBuf,
    /// The test profile compared with it.
    test: PathBuf,
    /// Rank to compare on both sides (default: each side's first rank, as HTA).
    #[arg(long)]
    rank: Option<i64>,
    /// Iteration (ProfilerStep#N) to compare: N, a comma-separated list, `all` (every
    /// ProfilerStep#N of each side) or `whole` (every event, in a step or not).
    /// Default: each side's first iteration, as HTA (the whole trace when it has none).
    #[arg(long)]
    iteration: Option<String>,
    /// Which events: CPU ops, GPU kernels or both.
    #[arg(long, value_enum, default_value_t = DiffDevice::All)]
    device: DiffDevice,
    /// Group by HTA's short names (no template or function arguments).
    #[arg(long)]
    short_names: bool,
    /// Output format.
    #[arg(long, value_enum, default_value_t = DiffFormat::Table)]
    format: DiffFormat,
    #[command(flatten)]
    rows: report_view::RowArgs,
}

/// HTA's `DeviceType`.
#[derive(Clone, Copy, ValueEnum)]
enum DiffDevice {
    /// CPU ops and GPU kernels.
    All,
    /// CPU ops only.
    Cpu,
    /// GPU kernels only.
    Gpu,
}

/// How `diff` prints.
#[derive(Clone, Copy, ValueEnum)]
enum DiffFormat {
    /// Sentences and a table sorted by duration change.
    Table,
    /// The comparison as JSON (durations in µs, field names say so).
    Json,
    /// HTA's `compare_traces` columns, in HTA's row order.
    Csv,
}

/// Runs `mlprof diff` and prints the result.
pub fn run(args: DiffArgs, verbose: bool) -> Result<(), Failure> {
    let iterations = parse_iterations(args.iteration.as_deref())?;
    let ranks = args.rank.map_or(RankChoice::First, |rank| RankChoice::Ranks(vec![rank]));
    let side = SideOptions { ranks, iterations };
    let options = TraceDiffOptions {
        control: side.clone(),
        test: side,
        device: match args.device {
            DiffDevice::All => DeviceType::All,
            DiffDevice::Cpu => DeviceType::Cpu,
            DiffDevice::Gpu => DeviceType::Gpu,
        },
        use_short_name: args.short_names,
    };
    let control_sessions = crate::load(&args.control, verbose)?;
    let test_sessions = crate::load(&args.test, verbose)?;
    let control = hosts(&control_sessions)?;
    let test = hosts(&test_sessions)?;
    let started = Instant::now();
    let comparison = trace_diff::compare_traces(&control, &test, &options).map_err(|e| match e {
        trace_diff::TraceDiffError::NoEvents { .. } => Failure::nothing(e.to_string()),
        _ => Failure::input(e.to_string()),
    })?;
    if verbose {
        eprintln!("compared in {:.3} s", started.elapsed().as_secs_f64());
    }
    let text = match args.format {
        DiffFormat::Table => report_view::render_text(&comparison.report(), &args.rows.layout()),
        DiffFormat::Json => {
            let json = serde_json::to_string_pretty(&comparison).map_err(|e| Failure::input(e.to_string()))?;
            format!("{json}\n")
        }
        DiffFormat::Csv => comparison.to_hta_csv(),
    };
    crate::write_stdout(&text)
}

/// The hosts of the newest session behind a path (one per rank).
fn hosts(sessions: &[mlprof_model::Session]) -> Result<Vec<&Host>, Failure> {
    let session = select::session(sessions, None)?;
    select::hosts(session, None)
}

/// `--iteration`: `N`, `N,M,…`, `all` or `whole`.
fn parse_iterations(text: Option<&str>) -> Result<IterationChoice, Failure> {
    let Some(text) = text else { return Ok(IterationChoice::First) };
    match text.trim() {
        "all" => Ok(IterationChoice::All),
        "whole" => Ok(IterationChoice::WholeTrace),
        list => list
            .split(',')
            .map(|n| n.trim().parse::<i64>())
            .collect::<Result<Vec<_>, _>>()
            .map(IterationChoice::Iterations)
            .map_err(|_| Failure::input(format!("--iteration {text:?}: expected N, N,M,…, all or whole"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iteration_argument() {
        assert!(matches!(parse_iterations(None), Ok(IterationChoice::First)));
        assert!(matches!(parse_iterations(Some("all")), Ok(IterationChoice::All)));
        assert!(matches!(parse_iterations(Some("whole")), Ok(IterationChoice::WholeTrace)));
        assert!(matches!(parse_iterations(Some("3, 4")), Ok(IterationChoice::Iterations(v)) if v == [3, 4]));
        assert!(parse_iterations(Some("x")).is_err());
    }
}
