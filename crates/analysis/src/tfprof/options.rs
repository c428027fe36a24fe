//! tfprof's options (`tensorflow/python/profiler/option_builder.py`), with its names
//! and defaults: the view, the columns (`select`), the order, the depth and minimum
//! filters, the name and type regexes, and the step.
//!
//! The one design decision to know: regexes are full matches, comma-separated, as in
//! tfprof (RE2 `FullMatch`); the single regex `.*` means "everything" and skips
//! matching. Parsing fails with one sentence naming the bad value and what is allowed.

use std::fmt;

use regex_lite::Regex;
use serde::Serialize;

/// The four ways tfprof slices a profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum View {
    /// The name-scope tree of the ops.
    #[default]
    Scope,
    /// One row per op type.
    Op,
    /// The Python call tree that created the ops.
    Code,
    /// Each op node with its inputs.
    Graph,
}

impl View {
    /// The view's name (`scope`, `op`, `code`, `graph`).
    pub fn name(self) -> &'static str {
        match self {
            View::Scope => "scope",
            View::Op => "op",
            View::Code => "code",
            View::Graph => "graph",
        }
    }
}

/// A column tfprof can show (`-select`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Column {
    /// Number of parameters.
    Params,
    /// Floating-point operations.
    FloatOps,
    /// Requested bytes.
    Bytes,
    /// Peak bytes.
    PeakBytes,
    /// Residual bytes.
    ResidualBytes,
    /// Output bytes.
    OutputBytes,
    /// Execution time (CPU + accelerator); selecting it shows all three times.
    Micros,
    /// Accelerator time.
    AcceleratorMicros,
    /// CPU time.
    CpuMicros,
    /// Devices the ops ran on.
    Device,
    /// Op types.
    OpTypes,
    /// Number of runs.
    Occurrence,
    /// Input shapes.
    InputShapes,
}

impl Column {
    /// Every column, in the order tfprof prints them.
    pub const ALL: [Column; 13] = [
        Column::Params,
        Column::FloatOps,
        Column::Bytes,
        Column::PeakBytes,
        Column::ResidualBytes,
        Column::OutputBytes,
        Column::Micros,
        Column::AcceleratorMicros,
        Column::CpuMicros,
        Column::Device,
        Column::OpTypes,
        Column::Occurrence,
        Column::InputShapes,
    ];

    /// tfprof's name of the column (`peak_bytes`).
    pub fn name(self) -> &'static str {
        match self {
            Column::Params => "params",
            Column::FloatOps => "float_ops",
            Column::Bytes => "bytes",
            Column::PeakBytes => "peak_bytes",
            Column::ResidualBytes => "residual_bytes",
            Column::OutputBytes => "output_bytes",
            Column::Micros => "micros",
            Column::AcceleratorMicros => "accelerator_micros",
            Column::CpuMicros => "cpu_micros",
            Column::Device => "device",
            Column::OpTypes => "op_types",
            Column::Occurrence => "occurrence",
            Column::InputShapes => "input_shapes",
        }
    }

    /// The column called `name` (`-` and `_` alike, any case).
    pub fn parse(name: &str) -> Option<Column> {
        let wanted = name.trim().replace('-', "_").to_ascii_lowercase();
        Column::ALL.into_iter().find(|column| column.name() == wanted)
    }

    /// Whether the column holds a number (it then has a self and a total value).
    pub fn is_numeric(self) -> bool {
        !matches!(self, Column::Device | Column::OpTypes | Column::InputShapes)
    }
}

/// How siblings are ordered (`-order_by`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderBy {
    /// By name, ascending (tfprof's default).
    #[default]
    Name,
    /// By a column: numbers descending (totals in the tree views), text ascending.
    Column(Column),
}

/// Which steps the numbers cover (`-step`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepSelection {
    /// The whole profile (no `--step`).
    #[default]
    Whole,
    /// One step, by the step database's number.
    Step(i64),
    /// The average over the steps each node ran in (tfprof's `-step -1`).
    Average,
}

/// A comma-separated list of full-match regexes.
#[derive(Clone, Debug)]
pub struct Regexes {
    patterns: Vec<String>,
    compiled: Vec<Regex>,
}

impl Regexes {
    /// Parses `list` (comma-separated; empty entries are dropped).
    pub fn parse(option: &str, list: &str) -> Result<Regexes, TfprofError> {
        let patterns: Vec<String> = list.split(',').filter(|p| !p.is_empty()).map(str::to_string).collect();
        let compiled = patterns
            .iter()
            .map(|pattern| {
                Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
                    let reason = e.to_string().lines().last().unwrap_or("invalid").trim().to_string();
                    TfprofError::new(format!("--{option}: {pattern:?} is not a valid regex ({reason})"))
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Regexes { patterns, compiled })
    }

    /// tfprof's `.*` (matches everything).
    pub fn everything() -> Regexes {
        Regexes { patterns: vec![".*".to_string()], compiled: Vec::new() }
    }

    /// No regex at all (matches nothing).
    pub fn nothing() -> Regexes {
        Regexes { patterns: Vec::new(), compiled: Vec::new() }
    }

    /// Whether this is exactly tfprof's `.*`.
    pub fn is_everything(&self) -> bool {
        self.patterns.len() == 1 && self.patterns[0] == ".*"
    }

    /// Whether any regex matches all of `text`.
    pub fn is_match(&self, text: &str) -> bool {
        self.is_everything() || self.compiled.iter().any(|regex| regex.is_match(text))
    }

    /// The regexes as given.
    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }
}

impl Serialize for Regexes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.patterns.serialize(serializer)
    }
}

/// tfprof's options, with its defaults (`ProfileOptionBuilder()`), except that no
/// `--step` means the whole profile.
#[derive(Clone, Debug, Serialize)]
pub struct TfprofOptions {
    /// The view.
    pub view: View,
    /// Columns to show, in tfprof's order.
    pub select: Vec<Column>,
    /// Sibling order.
    pub order_by: OrderBy,
    /// Show nodes at most this many levels below the start nodes (default 100).
    pub max_depth: usize,
    /// Hide nodes whose total execution time is below this, picoseconds.
    pub min_micros_ps: i64,
    /// Hide nodes whose total requested bytes are below this.
    pub min_bytes: i64,
    /// Hide nodes that ran fewer times than this.
    pub min_occurrence: i64,
    /// Hide nodes with fewer floating-point operations than this.
    pub min_float_ops: i64,
    /// Hide nodes with fewer parameters than this.
    pub min_params: i64,
    /// Show only nodes whose name matches one of these (their descendants stay).
    pub show_name_regexes: Regexes,
    /// Hide nodes whose name matches one of these (their descendants stay).
    pub hide_name_regexes: Regexes,
    /// Start the tree at the nodes that match.
    pub start_name_regexes: Regexes,
    /// Show nothing below the nodes that match.
    pub trim_name_regexes: Regexes,
    /// Account only ops whose type matches.
    pub account_type_regexes: Regexes,
    /// Totals add up only what is displayed.
    pub account_displayed_op_only: bool,
    /// The step(s) the numbers cover.
    pub step: StepSelection,
}

impl Default for TfprofOptions {
    fn default() -> TfprofOptions {
        TfprofOptions {
            view: View::Scope,
            select: vec![Column::Micros],
            order_by: OrderBy::Name,
            max_depth: 100,
            min_micros_ps: 0,
            min_bytes: 0,
            min_occurrence: 0,
            min_float_ops: 0,
            min_params: 0,
            show_name_regexes: Regexes::everything(),
            hide_name_regexes: Regexes::nothing(),
            start_name_regexes: Regexes::everything(),
            trim_name_regexes: Regexes::nothing(),
            account_type_regexes: Regexes::everything(),
            account_displayed_op_only: false,
            step: StepSelection::Whole,
        }
    }
}

/// Parses `--select`: column names, comma-separated; the result is in tfprof's order,
/// without repeats.
pub fn parse_select(list: &str) -> Result<Vec<Column>, TfprofError> {
    let mut columns = Vec::new();
    for name in list.split(',').filter(|n| !n.trim().is_empty()) {
        let column = Column::parse(name).ok_or_else(|| {
            TfprofError::new(format!("--select: unknown column {:?}; columns: {}", name.trim(), column_names()))
        })?;
        columns.push(column);
    }
    if columns.is_empty() {
        return Err(TfprofError::new(format!("--select: no column given; columns: {}", column_names())));
    }
    columns.sort();
    columns.dedup();
    Ok(columns)
}

/// Parses `--order-by`: `name` or a column name.
pub fn parse_order_by(name: &str) -> Result<OrderBy, TfprofError> {
    if name.trim().eq_ignore_ascii_case("name") {
        return Ok(OrderBy::Name);
    }
    Column::parse(name).map(OrderBy::Column).ok_or_else(|| {
        TfprofError::new(format!(
            "--order-by: unknown column {:?}; use name or one of: {}",
            name.trim(),
            column_names()
        ))
    })
}

fn column_names() -> String {
    Column::ALL.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
}

/// A bad option or a request the profile cannot answer, in one sentence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TfprofError {
    message: String,
    /// True when the profile (not the options) is the problem: it has no steps.
    pub nothing_usable: bool,
}

impl TfprofError {
    /// An error about the options.
    pub fn new(message: impl Into<String>) -> TfprofError {
        TfprofError { message: message.into(), nothing_usable: false }
    }

    /// An error about the profile.
    pub fn nothing(message: impl Into<String>) -> TfprofError {
        TfprofError { message: message.into(), nothing_usable: true }
    }
}

impl fmt::Display for TfprofError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for TfprofError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_and_order_parse_with_dashes_or_underscores() {
        assert_eq!(parse_select("peak-bytes,micros,peak_bytes").expect("valid"), [Column::PeakBytes, Column::Micros]);
        assert_eq!(parse_order_by("cpu-micros").expect("valid"), OrderBy::Column(Column::CpuMicros));
        assert_eq!(parse_order_by("Name").expect("valid"), OrderBy::Name);
        let error = parse_select("micros,flops").expect_err("unknown column");
        assert!(
            error.to_string().starts_with("--select: unknown column \"flops\"; columns: params, float_ops"),
            "{error}"
        );
        assert!(parse_select(",").is_err());
        assert!(parse_order_by("speed").is_err());
    }

    #[test]
    fn regexes_match_whole_names() {
        let regexes = Regexes::parse("show-name-regexes", "model/.*,.*Conv2D").expect("valid");
        assert!(regexes.is_match("model/dense"));
        assert!(regexes.is_match("a/Conv2D"));
        assert!(!regexes.is_match("xmodel/dense"));
        assert!(!regexes.is_match("a/Conv2D_1"));
        assert!(Regexes::everything().is_match("anything") && Regexes::everything().is_everything());
        assert!(!Regexes::nothing().is_match("anything"));
        let error = Regexes::parse("hide-name-regexes", "a(").expect_err("bad regex");
        assert!(error.to_string().starts_with("--hide-name-regexes: \"a(\" is not a valid regex"), "{error}");
        assert!(!error.to_string().contains('\n'));
    }
}
