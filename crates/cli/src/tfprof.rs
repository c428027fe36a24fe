//! `mlprof analyze --tool tfprof`'s command line: tfprof's options as flags (`-` or `_`
//! in their names), and `--output timeline:FILE` for the displayed ops as a Chrome
//! trace.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use std::io::{self, Write};

use mlprof_analysis::tfprof::Timeline;
use mlprof_formats::chrome::TraceWriter;
use mlprof_formats::output::write_atomically;
use mlprof_model::names::chrome::{PH_COMPLETE, PH_METADATA};

use crate::Failure;

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
    /// With `--tool tfprof`: only step N (the profile's own step number: `train 5` is 5,
    /// `ProfilerStep#551` is 551, as every tool numbers steps), or -1 for the average over
    /// the steps (default: the whole profile).
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
    /// The options given, by tfprof's option names, as typed (the tool reads them).
    pub fn given(&self) -> Vec<(&'static str, String)> {
        let a = self;
        let texts: [(&'static str, Option<String>); 16] = [
            ("view", a.view.map(|view| view.name().to_string())),
            ("select", a.select.clone()),
            ("order_by", a.order_by.clone()),
            ("max_depth", a.max_depth.map(|v| v.to_string())),
            ("min_micros", a.min_micros.map(|v| v.to_string())),
            ("min_bytes", a.min_bytes.map(|v| v.to_string())),
            ("min_occurrence", a.min_occurrence.map(|v| v.to_string())),
            ("min_float_ops", a.min_float_ops.map(|v| v.to_string())),
            ("min_params", a.min_params.map(|v| v.to_string())),
            ("show_name_regexes", a.show_name_regexes.clone()),
            ("hide_name_regexes", a.hide_name_regexes.clone()),
            ("start_name_regexes", a.start_name_regexes.clone()),
            ("trim_name_regexes", a.trim_name_regexes.clone()),
            ("account_type_regexes", a.account_type_regexes.clone()),
            ("account_displayed_op_only", a.account_displayed_op_only.map(|v| v.to_string())),
            ("step", a.step.map(|v| v.to_string())),
        ];
        texts.into_iter().filter_map(|(key, text)| text.map(|text| (key, text))).collect()
    }
}

impl ViewArg {
    /// The view's name as tfprof spells it.
    fn name(self) -> &'static str {
        match self {
            ViewArg::Scope => "scope",
            ViewArg::Op => "op",
            ViewArg::Code => "code",
            ViewArg::Graph => "graph",
        }
    }
}

/// Writes the displayed ops of a tfprof result to `path` as a Chrome trace and says so
/// on stderr.
pub fn write_timeline(path: &Path, timeline: &Timeline) -> Result<(), Failure> {
    crate::convert::remove_partials_on_signal();
    write_atomically(path, |out| chrome_trace(timeline, out))?;
    eprintln!("mlprof: wrote {} ops to {}", timeline.events.len(), path.display());
    Ok(())
}

/// The file of `--output timeline:FILE` (or tfprof's `timeline:outfile=FILE`).
pub fn timeline_path(output: &Path) -> Result<PathBuf, Failure> {
    let text = output.to_string_lossy();
    let file = text.strip_prefix("timeline:").map(|rest| rest.strip_prefix("outfile=").unwrap_or(rest));
    match file {
        Some(file) if !file.is_empty() => Ok(PathBuf::from(file)),
        _ => Err(Failure::input(format!("--output {text}: --tool tfprof writes timeline:FILE (a Chrome trace)"))),
    }
}

/// Writes the timeline as a Chrome trace: one process per plane, one thread per line,
/// an `X` event per op run with its op type as category and its view node in `args`.
fn chrome_trace(timeline: &Timeline, out: &mut dyn Write) -> io::Result<()> {
    let mut trace = TraceWriter::start(out, "\"displayTimeUnit\":\"ns\",");
    let mut named_pids = std::collections::HashSet::new();
    for track in &timeline.tracks {
        if named_pids.insert(track.pid) {
            trace.begin_event(PH_METADATA)?;
            trace.str_field("name", "process_name");
            trace.int_field("pid", track.pid);
            trace.str_object_field("args", &[("name", &track.process)]);
            trace.end_event();
        }
        trace.begin_event(PH_METADATA)?;
        trace.str_field("name", "thread_name");
        trace.int_field("pid", track.pid);
        trace.int_field("tid", track.tid);
        trace.str_object_field("args", &[("name", &track.thread)]);
        trace.end_event();
    }
    for event in &timeline.events {
        let Some(track) = timeline.tracks.get(event.track) else { continue };
        trace.begin_event(PH_COMPLETE)?;
        trace.str_field("name", &event.name);
        trace.str_field("cat", &event.category);
        trace.int_field("pid", track.pid);
        trace.int_field("tid", track.tid);
        trace.us_field("ts", event.start_ps);
        trace.us_field("dur", event.duration_ps);
        trace.str_object_field("args", &[("node", &event.node)]);
        trace.end_event();
    }
    trace.finish()
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
        let mut written = Vec::new();
        chrome_trace(&timeline, &mut written).expect("written to memory");
        let trace: serde_json::Value = serde_json::from_slice(&written).expect("valid JSON");
        let events = trace["traceEvents"].as_array().expect("events");
        assert_eq!(events.len(), 3);
        assert_eq!(events[2]["name"], "a\"b");
        assert_eq!((events[2]["ts"].as_f64(), events[2]["dur"].as_f64()), (Some(1.5), Some(2.0)));
        assert_eq!(events[2]["args"]["node"], "m/a");
    }
}
