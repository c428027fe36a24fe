//! `mlprof analyze --tool gpu`: HTA's GPU analyses, rendered as tables, JSON, or one
//! HTA-compatible CSV per analysis (`--format hta-csv --output DIR`).

use std::path::Path;

use mlprof_analysis::gpu::{self, ANALYSES, GpuAnalysis};
use mlprof_formats::output::write_atomically;
use mlprof_model::Host;

use crate::{AnalyzeFormat, Failure, report_view};

/// Runs the analyses named in `analyses` (comma-separated; all when `None`) on
/// `hosts` and renders them in `format`; `hta-csv` writes into `output` and returns
/// the list of files written.
pub fn run(
    hosts: &[&Host],
    analyses: Option<&str>,
    format: AnalyzeFormat,
    output: Option<&Path>,
    sort: Option<&str>,
) -> Result<String, Failure> {
    let selected = selection(analyses)?;
    let result = gpu::analyze(hosts, &selected);
    match format {
        AnalyzeFormat::Table | AnalyzeFormat::Csv => {
            report_view::render_sorted(result.report(), matches!(format, AnalyzeFormat::Csv), sort, "gpu")
        }
        AnalyzeFormat::Json => report_view::render_json(&result),
        AnalyzeFormat::HtaCsv => write_hta_csv(&result, output),
        AnalyzeFormat::XprofJson => {
            Err(Failure::input("XProf has no gpu tool; use --format table, json, csv or hta-csv"))
        }
    }
}

/// The analyses to run: the names in `list`, checked against [`ANALYSES`].
fn selection(list: Option<&str>) -> Result<Vec<&str>, Failure> {
    let Some(list) = list else { return Ok(Vec::new()) };
    list.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(|name| {
            ANALYSES.iter().copied().find(|known| *known == name).ok_or_else(|| {
                Failure::input(format!("unknown gpu analysis {name:?}; analyses: {}", ANALYSES.join(", ")))
            })
        })
        .collect()
}

/// Writes one CSV per analysis into `output` (created if missing).
fn write_hta_csv(result: &GpuAnalysis, output: Option<&Path>) -> Result<String, Failure> {
    let dir =
        output.ok_or_else(|| Failure::input("--format hta-csv writes files: give the directory with --output DIR"))?;
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::input(format!("cannot create output directory {}: {e}", dir.display())))?;
    let mut written = String::new();
    crate::convert::remove_partials_on_signal();
    for file in gpu::hta_csv::files(result) {
        let path = dir.join(&file.name);
        write_atomically(&path, |out| out.write_all(file.content.as_bytes()))?;
        written.push_str(&format!("wrote {}\n", path.display()));
    }
    Ok(written)
}
