//! `mlprof analyze --tool tfprof`: tfprof's scope, op, code and graph views with its
//! options (`-` or `_` in their names), rendered as an indented table, CSV or JSON,
//! and `--output timeline:FILE` for the displayed ops as a Chrome trace.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use mlprof_analysis::grouping::{HostGroups, group_host};
use mlprof_analysis::tfprof::{self, Regexes, StepSelection, TfprofOptions, Timeline, View};
use mlprof_formats::chrome::json_text::{push_json_str, push_us};
use mlprof_formats::output::write_atomically;
use mlprof_model::Host;

use crate::{AnalyzeFormat, Failure, report_view};

/// tfprof's options (all for `--tool tfprof`).
#[derive(Args, Clone, Debug, Default)]
pub struct TfprofArgs {
    /// With `--tool tfprof`: the view (default scope).
    #[arg(long, value_enum)]
    pub view: Option<ViewArg>,
    /// With `--tool tfprof`: columns, comma-separated (default micros): micros, accelerator_micros,
    /// cpu_micros, occurrence, bytes, peak_bytes, residual_bytes, output_bytes, params, float_ops,
    /// device, op_types, input_shapes.
    #[arg(long)]
    pub select: Option<String>,
    /// With `--tool tfprof`: sibling order, `name` (default) or a column (larger first).
    #[arg(long = "order-by", alias = "order_by")]
    pub order_by: Option<String>,
    /// With `--tool tfprof`: show nodes at most this many levels below the start nodes (default 100).
    #[arg(long = "max-depth", alias = "max_depth")]
    pub max_depth: Option<usize>,
    /// With `--tool tfprof`: hide nodes whose total time is below this many microseconds.
    #[arg(long = "min-micros", alias = "min_micros", allow_negative_numbers = true)]
    pub min_micros: Option<f64>,
    /// With `--tool tfprof`: hide nodes whose total requested bytes are below this.
    #[arg(long = "min-bytes", alias = "min_bytes")]
    pub min_bytes: Option<i64>,
    /// With `--tool tfprof`: hide nodes that ran fewer times than this.
    #[arg(long = "min-occurrence", alias = "min_occurrence")]
    pub min_occurrence: Option<i64>,
    /// With `--tool tfprof`: hide nodes with fewer floating-point operations than this.
    #[arg(long = "min-float-ops", alias = "min_float_ops")]
    pub min_float_ops: Option<i64>,
    /// With `--tool tfprof`: hide nodes with fewer parameters than this.
    #[arg(long = "min-params", alias = "min_params")]
    pub min_params: Option<i64>,
    /// With `--tool tfprof`: show only nodes whose full name matches one of these regexes (comma-separated).
    #[arg(long = "show-name-regexes", alias = "show_name_regexes")]
    pub show_name_regexes: Option<String>,
    /// With `--tool tfprof`: hide nodes whose full name matches one of these regexes.
    #[arg(long = "hide-name-regexes", alias = "hide_name_regexes")]
    pub hide_name_regexes: Option<String>,
    /// With `--tool tfprof`: start the tree at the nodes that match one of these regexes.
    #[arg(long = "start-name-regexes", alias = "start_name_regexes")]
    pub start_name_regexes: Option<String>,
    /// With `--tool tfprof`: show nothing below the nodes that match one of these regexes.
    #[arg(long = "trim-name-regexes", alias = "trim_name_regexes")]
    pub trim_name_regexes: Option<String>,
    /// With `--tool tfprof`: account only ops whose type matches one of these regexes.
    #[arg(long = "account-type-regexes", alias = "account_type_regexes")]
    pub account_type_regexes: Option<String>,
    /// With `--tool tfprof`: totals add up only the displayed nodes (true or false; alone: true).
    #[arg(
        long = "account-displayed-op-only",
        alias = "account_displayed_op_only",
        num_args = 0..=1,
        default_missing_value = "true"
    )]
    pub account_displayed_op_only: Option<bool>,
    /// With `--tool tfprof`: only step N (the step numbers the overview shows), or -1 for the
    /// average over the steps (default: the whole profile).
    #[arg(long, allow_negative_numbers = true)]
    pub step: Option<i64>,
}

/// The views, as `--view` spells them.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ViewArg {
    /// The name-scope tree (`model/layer/op`; PyTorch: record_function, nn.Module and op nesting).
    Scope,
    /// One row per op type.
    Op,
    /// The Python call tree that created the ops.
    Code,
    /// Each op with its inputs (XLA programs).
    Graph,
}

impl TfprofArgs {
    /// Whether any tfprof option was given.
    pub fn any_given(&self) -> bool {
        let a = self;
        a.view.is_some()
            || a.select.is_some()
            || a.order_by.is_some()
            || a.max_depth.is_some()
            || a.min_micros.is_some()
            || a.min_bytes.is_some()
            || a.min_occurrence.is_some()
            || a.min_float_ops.is_some()
            || a.min_params.is_some()
            || a.show_name_regexes.is_some()
            || a.hide_name_regexes.is_some()
            || a.start_name_regexes.is_some()
            || a.trim_name_regexes.is_some()
            || a.account_type_regexes.is_some()
            || a.account_displayed_op_only.is_some()
            || a.step.is_some()
    }

    /// The analysis options (tfprof's defaults for what is not given).
    pub fn options(&self) -> Result<TfprofOptions, Failure> {
        let bad = |e: tfprof::TfprofError| Failure::input(e.to_string());
        let mut options = TfprofOptions::default();
        if let Some(view) = self.view {
            options.view = match view {
                ViewArg::Scope => View::Scope,
                ViewArg::Op => View::Op,
                ViewArg::Code => View::Code,
                ViewArg::Graph => View::Graph,
            };
        }
        if let Some(list) = &self.select {
            options.select = tfprof::parse_select(list).map_err(bad)?;
        }
        if let Some(order) = &self.order_by {
            options.order_by = tfprof::parse_order_by(order).map_err(bad)?;
        }
        if let Some(depth) = self.max_depth {
            options.max_depth = depth;
        }
        if let Some(micros) = self.min_micros {
            if !micros.is_finite() || micros < 0.0 {
                return Err(Failure::input(format!("--min-micros: {micros} is not a number of microseconds ≥ 0")));
            }
            options.min_micros_ps = (micros * 1e6).round().min(i64::MAX as f64) as i64;
        }
        options.min_bytes = self.min_bytes.unwrap_or(options.min_bytes);
        options.min_occurrence = self.min_occurrence.unwrap_or(options.min_occurrence);
        options.min_float_ops = self.min_float_ops.unwrap_or(options.min_float_ops);
        options.min_params = self.min_params.unwrap_or(options.min_params);
        let regexes = |name: &str, value: &Option<String>, default: Regexes| match value {
            Some(list) => Regexes::parse(name, list).map_err(bad),
            None => Ok(default),
        };
        options.show_name_regexes = regexes("show-name-regexes", &self.show_name_regexes, Regexes::everything())?;
        options.hide_name_regexes = regexes("hide-name-regexes", &self.hide_name_regexes, Regexes::nothing())?;
        options.start_name_regexes = regexes("start-name-regexes", &self.start_name_regexes, Regexes::everything())?;
        options.trim_name_regexes = regexes("trim-name-regexes", &self.trim_name_regexes, Regexes::nothing())?;
        options.account_type_regexes =
            regexes("account-type-regexes", &self.account_type_regexes, Regexes::everything())?;
        options.account_displayed_op_only = self.account_displayed_op_only.unwrap_or(false);
        options.step = match self.step {
            None => StepSelection::Whole,
            Some(-1) => StepSelection::Average,
            Some(step) if step < 0 => {
                return Err(Failure::input(format!("--step {step}: a step number, or -1 for the average over steps")));
            }
            Some(step) => StepSelection::Step(step),
        };
        Ok(options)
    }
}

/// Runs the view on `hosts` and renders it; `output` (`timeline:FILE`) also writes the
/// displayed ops as a Chrome trace.
pub fn run(
    hosts: &[&Host],
    args: &TfprofArgs,
    format: AnalyzeFormat,
    output: Option<&Path>,
    sort: Option<&str>,
) -> Result<String, Failure> {
    if sort.is_some() {
        return Err(Failure::input("--sort does not apply to --tool tfprof (its rows are a tree); use --order-by"));
    }
    if matches!(format, AnalyzeFormat::XprofJson | AnalyzeFormat::HtaCsv) {
        return Err(Failure::input("--tool tfprof writes --format table, json or csv"));
    }
    let timeline_path = output.map(timeline_path).transpose()?;
    let options = args.options()?;
    let groups: Vec<HostGroups> = hosts.iter().map(|host| group_host(host)).collect();
    let pairs: Vec<(&Host, &HostGroups)> = hosts.iter().copied().zip(&groups).collect();
    let result = tfprof::analyze(&pairs, &options)
        .map_err(|e| if e.nothing_usable { Failure::nothing(e.to_string()) } else { Failure::input(e.to_string()) })?;
    if let Some(path) = &timeline_path {
        crate::convert::remove_partials_on_signal();
        write_atomically(path, |out| out.write_all(chrome_trace(&result.timeline).as_bytes()))?;
        eprintln!("mlprof: wrote {} ops to {}", result.timeline.events.len(), path.display());
    }
    match format {
        AnalyzeFormat::Json => report_view::render_json(&result),
        _ => report_view::render_sorted(result.report(), matches!(format, AnalyzeFormat::Csv), None, "tfprof"),
    }
}

/// The file of `--output timeline:FILE` (or tfprof's `timeline:outfile=FILE`).
fn timeline_path(output: &Path) -> Result<PathBuf, Failure> {
    let text = output.to_string_lossy();
    let file = text.strip_prefix("timeline:").map(|rest| rest.strip_prefix("outfile=").unwrap_or(rest));
    match file {
        Some(file) if !file.is_empty() => Ok(PathBuf::from(file)),
        _ => Err(Failure::input(format!("--output {text}: --tool tfprof writes timeline:FILE (a Chrome trace)"))),
    }
}

/// The timeline as a Chrome trace: one process per plane, one thread per line, an
/// `X` event per op run with its op type as category and its view node in `args`.
fn chrome_trace(timeline: &Timeline) -> String {
    let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
    let mut first = true;
    let mut begin = |out: &mut String| {
        out.push_str(if first { "\n{" } else { ",\n{" });
        first = false;
    };
    let mut named_pids = std::collections::HashSet::new();
    for track in &timeline.tracks {
        if named_pids.insert(track.pid) {
            begin(&mut out);
            out.push_str(&format!("\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{},\"args\":{{\"name\":", track.pid));
            push_json_str(&mut out, &track.process);
            out.push_str("}}");
        }
        begin(&mut out);
        out.push_str(&format!(
            "\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":",
            track.pid, track.tid
        ));
        push_json_str(&mut out, &track.thread);
        out.push_str("}}");
    }
    for event in &timeline.events {
        let Some(track) = timeline.tracks.get(event.track) else { continue };
        begin(&mut out);
        out.push_str("\"ph\":\"X\",\"name\":");
        push_json_str(&mut out, &event.name);
        out.push_str(",\"cat\":");
        push_json_str(&mut out, &event.category);
        out.push_str(&format!(",\"pid\":{},\"tid\":{},\"ts\":", track.pid, track.tid));
        push_us(&mut out, 0, event.start_ps);
        out.push_str(",\"dur\":");
        push_us(&mut out, 0, event.duration_ps);
        out.push_str(",\"args\":{\"node\":");
        push_json_str(&mut out, &event.node);
        out.push_str("}}");
    }
    out.push_str("\n]}\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlprof_analysis::tfprof::{TimelineEvent, TimelineTrack};

    #[test]
    fn timeline_paths_and_chrome_events() {
        assert_eq!(timeline_path(Path::new("timeline:t.json")).ok(), Some(PathBuf::from("t.json")));
        assert_eq!(timeline_path(Path::new("timeline:outfile=t.json")).ok(), Some(PathBuf::from("t.json")));
        assert!(timeline_path(Path::new("t.json")).is_err() && timeline_path(Path::new("timeline:")).is_err());
        let timeline = Timeline {
            tracks: vec![TimelineTrack { pid: 1, tid: 1, process: "/host:CPU".into(), thread: "python".into() }],
            events: vec![TimelineEvent {
                track: 0,
                name: "a\"b".into(),
                category: "MatMul".into(),
                node: "m/a".into(),
                start_ps: 1_500_000,
                duration_ps: 2_000_000,
            }],
        };
        let trace: serde_json::Value = serde_json::from_str(&chrome_trace(&timeline)).expect("valid JSON");
        let events = trace["traceEvents"].as_array().expect("events");
        assert_eq!(events.len(), 3);
        assert_eq!(events[2]["name"], "a\"b");
        assert_eq!((events[2]["ts"].as_f64(), events[2]["dur"].as_f64()), (Some(1.5), Some(2.0)));
        assert_eq!(events[2]["args"]["node"], "m/a");
    }
}
