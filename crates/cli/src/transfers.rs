//! `mlprof analyze --tool transfers`: copies and synchronisations ranked by time lost,
//! with GPU gaps explained by the launching thread (`--gap-threshold`, default 100us).

use mlprof_analysis::gpu::transfers::{self, TransfersOptions};
use mlprof_model::Host;
use mlprof_model::duration::parse_duration_ps;

use crate::{AnalyzeFormat, Failure, report_view};

/// Runs the diagnosis on `hosts` with the gap threshold `gap_threshold` (text such as
/// `50us` or `1ms`; the default when `None`) and renders it in `format`.
pub fn run(
    hosts: &[&Host],
    gap_threshold: Option<&str>,
    format: AnalyzeFormat,
    sort: Option<&str>,
) -> Result<String, Failure> {
    let mut options = TransfersOptions::default();
    if let Some(text) = gap_threshold {
        options.gap_threshold_ps =
            parse_duration_ps(text).map_err(|e| Failure::input(format!("--gap-threshold: {e}")))?;
    }
    let result = transfers::analyze(hosts, options);
    match format {
        AnalyzeFormat::Table | AnalyzeFormat::Csv => {
            report_view::render_sorted(result.report(), matches!(format, AnalyzeFormat::Csv), sort, "transfers")
        }
        AnalyzeFormat::Json => report_view::render_json(&result),
        AnalyzeFormat::HtaCsv | AnalyzeFormat::XprofJson => {
            Err(Failure::input("--tool transfers writes --format table, json or csv"))
        }
    }
}
