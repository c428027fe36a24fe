//! Trace diff: which operators and kernels a *test* trace runs more or less often, or
//! for more or less time, than a *control* trace — Holistic Trace Analysis (HTA) 0.5.0's
//! `TraceDiff.compare_traces` and `TraceDiff.ops_diff`, with the same rows and numbers.
//!
//! # Definitions (HTA's)
//!
//! - **Rows of a trace**: the events HTA's parser keeps (a `cat` other than `Trace`
//!   and a `dur`; `trace.rs` has `stream`, `correlation` and nanosecond rounding). A row
//!   is a *CPU op* when its `args.stream` is -1 (absent) and a *GPU kernel* otherwise.
//! - **Iteration** of a row: the number `N` of the `ProfilerStep#N` event whose span
//!   `[ts, ts + dur)` holds the row's start, for CPU ops; for GPU rows, the iteration of
//!   the CPU launch with the same correlation id. Rows in no step have none.
//! - **Selection** (each side separately): the chosen ranks (default: the first), the
//!   chosen iterations (default: the first `ProfilerStep#N` named in the traces;
//!   `All` = every one of them), and the device type (all rows, CPU ops, GPU kernels).
//! - **Per name** (or HTA's short name): `counts` = number of selected rows with that
//!   name, `total_duration` = sum of their `dur` in µs; names present on one side only
//!   count 0 on the other. `diff_counts` = test − control counts, `diff_duration` = test −
//!   control total duration, `counts_change_categories` = `+` (more in test), `-`
//!   (fewer), `=` (same count).
//! - **Row order** (HTA's `pd.concat` of two name-sorted summaries): control names in
//!   code-point order, then the names only the test has, in the same order.
//! - **ops_diff**: *added* = control count 0, test > 0; *deleted* = control > 0, test 0;
//!   *increased* = control > 0 and more in test; *decreased* = test > 0 and fewer in
//!   test; *unchanged* = test > 0 and the same count. Each list is in row order.
//!
//! Durations are summed exactly in picoseconds; every HTA-shaped trace gives whole
//! microseconds (HTA's integers). Where HTA raises, mlprof either reports an error
//! ([`TraceDiffError`]) or, for a side without any `ProfilerStep#N` and the default
//! iteration choice, compares the whole trace (HTA: `ValueError`) and says so.

mod names;
mod report;
mod trace;

use std::collections::HashMap;
use std::fmt;

use mlprof_model::Host;
use serde::Serialize;

pub use names::shorten_name;
pub use trace::OpsTrace;

use trace::PS_PER_US;

/// Which rows a comparison counts (HTA's `DeviceType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceType {
    /// CPU ops and GPU kernels.
    #[default]
    All,
    /// CPU ops only (`stream == -1`).
    Cpu,
    /// GPU kernels only (`stream != -1`).
    Gpu,
}

/// Which ranks of a side to use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum RankChoice {
    /// The smallest rank (HTA's default).
    #[default]
    First,
    /// These ranks (their rows are pooled).
    Ranks(Vec<i64>),
}

/// Which iterations (`ProfilerStep#N` numbers) of a side to use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum IterationChoice {
    /// The smallest `N` named in the traces (HTA's default); the whole trace when the
    /// traces name none (HTA raises there).
    #[default]
    First,
    /// Every `N` named in the traces (HTA: `iteration=trace.iterations()`); rows outside
    /// every step are left out.
    All,
    /// These iterations.
    Iterations(Vec<i64>),
    /// Every row, whatever its iteration (not in HTA).
    WholeTrace,
}

/// The selection of one side.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SideOptions {
    /// Ranks.
    pub ranks: RankChoice,
    /// Iterations.
    pub iterations: IterationChoice,
}

/// Options of [`compare_traces`] (HTA's arguments, with the same defaults).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceDiffOptions {
    /// The control side's ranks and iterations.
    pub control: SideOptions,
    /// The test side's ranks and iterations.
    pub test: SideOptions,
    /// CPU ops, GPU kernels or both.
    pub device: DeviceType,
    /// Group by HTA's short name ([`shorten_name`]) instead of the full name.
    pub use_short_name: bool,
}

/// Which side of the diff something is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The reference trace.
    Control,
    /// The trace compared with it.
    Test,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Control => "control",
            Side::Test => "test",
        })
    }
}

/// Why a comparison cannot be made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceDiffError {
    /// The side has no events HTA keeps (no Chrome-trace event with a `cat` and a
    /// `dur`, or no event at all).
    NoEvents {
        /// The side.
        side: Side,
    },
    /// A requested rank is not in the side's traces.
    UnknownRank {
        /// The side.
        side: Side,
        /// The rank asked for.
        rank: i64,
        /// The ranks the side has.
        available: Vec<i64>,
    },
    /// A requested iteration is not named by the side's traces.
    UnknownIteration {
        /// The side.
        side: Side,
        /// The iteration asked for.
        iteration: i64,
        /// The iterations the side has.
        available: Vec<i64>,
    },
}

impl fmt::Display for TraceDiffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |values: &[i64]| {
            if values.is_empty() {
                "none".to_string()
            } else {
                values.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            }
        };
        match self {
            TraceDiffError::NoEvents { side } => {
                write!(f, "the {side} profile has no trace events to compare (events with a category and a duration)")
            }
            TraceDiffError::UnknownRank { side, rank, available } => {
                write!(f, "the {side} profile has no rank {rank}; ranks: {}", list(available))
            }
            TraceDiffError::UnknownIteration { side, iteration, available } => write!(
                f,
                "the {side} profile has no iteration {iteration} (ProfilerStep#{iteration}); iterations: {}",
                list(available)
            ),
        }
    }
}

impl std::error::Error for TraceDiffError {}

/// How the count of a name changed (HTA's `counts_change_categories`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum CountChange {
    /// More occurrences in the test trace (`+`).
    #[serde(rename = "+")]
    More,
    /// Fewer occurrences in the test trace (`-`).
    #[serde(rename = "-")]
    Fewer,
    /// The same count (`=`).
    #[serde(rename = "=")]
    Same,
}

impl CountChange {
    /// HTA's symbol: `+`, `-` or `=`.
    pub fn symbol(self) -> &'static str {
        match self {
            CountChange::More => "+",
            CountChange::Fewer => "-",
            CountChange::Same => "=",
        }
    }

    fn of(diff: i64) -> CountChange {
        match diff.signum() {
            1 => CountChange::More,
            -1 => CountChange::Fewer,
            _ => CountChange::Same,
        }
    }
}

/// One name's counts and total durations on both sides (a row of HTA's
/// `compare_traces` table).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct OpDiff {
    /// The op or kernel name (HTA's short name with `use_short_name`).
    pub name: String,
    /// Occurrences in the control selection.
    pub control_counts: i64,
    /// Sum of their durations in the control selection, µs.
    pub control_total_duration_us: f64,
    /// Occurrences in the test selection.
    pub test_counts: i64,
    /// Sum of their durations in the test selection, µs.
    pub test_total_duration_us: f64,
    /// `test_counts - control_counts`.
    pub diff_counts: i64,
    /// `test_total_duration_us - control_total_duration_us`, µs.
    pub diff_duration_us: f64,
    /// `+`, `-` or `=` from `diff_counts`.
    pub counts_change_category: CountChange,
}

/// HTA's `ops_diff`: the names of [`TraceComparison::ops`] by kind of change, each list
/// in table order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OpsDiff {
    /// Only in the test selection.
    pub added: Vec<String>,
    /// Only in the control selection.
    pub deleted: Vec<String>,
    /// In both, more often in the test selection.
    pub increased: Vec<String>,
    /// In both, less often in the test selection.
    pub decreased: Vec<String>,
    /// In both, as often.
    pub unchanged: Vec<String>,
}

/// What one side of a comparison used.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SideSummary {
    /// Host (file) names of the ranks used.
    pub hosts: Vec<String>,
    /// Source paths of the ranks used.
    pub paths: Vec<String>,
    /// The ranks used.
    pub ranks: Vec<i64>,
    /// Every rank of the side.
    pub available_ranks: Vec<i64>,
    /// The iterations used; `None` for the whole trace.
    pub iterations: Option<Vec<i64>>,
    /// Every iteration the side names.
    pub available_iterations: Vec<i64>,
    /// Rows selected (ranks, iterations, device type).
    pub selected_rows: usize,
}

/// The result of [`compare_traces`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceComparison {
    /// What the control side used.
    pub control: SideSummary,
    /// What the test side used.
    pub test: SideSummary,
    /// The rows compared.
    pub device: DeviceType,
    /// Whether names are HTA's short names.
    pub use_short_name: bool,
    /// One entry per name, in HTA's row order.
    pub ops: Vec<OpDiff>,
    /// The names by kind of change (HTA's `ops_diff`, which always uses full names;
    /// with `use_short_name` these are short names).
    pub ops_diff: OpsDiff,
}

/// HTA's `TraceDiff.compare_traces` (and `ops_diff`) on two sides, each a set of hosts
/// (one per rank), read with [`OpsTrace::new`].
pub fn compare_traces(
    control: &[&Host],
    test: &[&Host],
    options: &TraceDiffOptions,
) -> Result<TraceComparison, TraceDiffError> {
    compare_ops_traces(&OpsTrace::new(control), &OpsTrace::new(test), options)
}

/// [`compare_traces`] on sides already read.
pub fn compare_ops_traces(
    control: &OpsTrace,
    test: &OpsTrace,
    options: &TraceDiffOptions,
) -> Result<TraceComparison, TraceDiffError> {
    let (control_summary, control_ops) = summarize(control, Side::Control, &options.control, options)?;
    let (test_summary, test_ops) = summarize(test, Side::Test, &options.test, options)?;
    let ops = combine(control_ops, test_ops);
    let ops_diff = classify(&ops);
    Ok(TraceComparison {
        control: control_summary,
        test: test_summary,
        device: options.device,
        use_short_name: options.use_short_name,
        ops,
        ops_diff,
    })
}

/// Per name: count and total duration (ps), in name order.
type Summary = Vec<(String, i64, i64)>;

/// HTA's `extract_ops` + `get_ops_summary` + the group-by of `compare_traces` for one
/// side.
fn summarize(
    trace: &OpsTrace,
    side: Side,
    choice: &SideOptions,
    options: &TraceDiffOptions,
) -> Result<(SideSummary, Summary), TraceDiffError> {
    if trace.row_count() == 0 {
        return Err(TraceDiffError::NoEvents { side });
    }
    let available_ranks = trace.ranks();
    let ranks = match &choice.ranks {
        RankChoice::First => available_ranks.iter().take(1).copied().collect(),
        RankChoice::Ranks(ranks) => ranks.clone(),
    };
    for &rank in &ranks {
        if !available_ranks.contains(&rank) {
            return Err(TraceDiffError::UnknownRank { side, rank, available: available_ranks });
        }
    }
    let available_iterations = trace.iterations().to_vec();
    let iterations: Option<Vec<i64>> = match &choice.iterations {
        IterationChoice::First if available_iterations.is_empty() => None,
        IterationChoice::First => Some(available_iterations.iter().take(1).copied().collect()),
        IterationChoice::All => Some(available_iterations.clone()),
        IterationChoice::Iterations(wanted) => Some(wanted.clone()),
        IterationChoice::WholeTrace => None,
    };
    for &iteration in iterations.iter().flatten() {
        if !available_iterations.contains(&iteration) {
            return Err(TraceDiffError::UnknownIteration { side, iteration, available: available_iterations });
        }
    }
    let mut by_name: HashMap<String, (i64, i64)> = HashMap::new();
    let mut short_names: HashMap<u32, String> = HashMap::new();
    let mut selected_rows = 0;
    let mut hosts = Vec::new();
    let mut paths = Vec::new();
    for rank in trace.ranks.iter().filter(|r| ranks.contains(&r.rank)) {
        hosts.push(rank.host.clone());
        paths.push(rank.path.clone());
        for row in &rank.rows {
            let in_iterations = match &iterations {
                None => true,
                Some(list) => row.iteration.is_some_and(|i| list.contains(&i)),
            };
            let on_device = match options.device {
                DeviceType::All => true,
                DeviceType::Cpu => row.stream == -1,
                DeviceType::Gpu => row.stream != -1,
            };
            if !(in_iterations && on_device) {
                continue;
            }
            selected_rows += 1;
            let name = if options.use_short_name {
                short_names.entry(row.name).or_insert_with(|| shorten_name(trace.name(row.name))).clone()
            } else {
                trace.name(row.name).to_string()
            };
            let entry = by_name.entry(name).or_default();
            entry.0 += 1;
            entry.1 = entry.1.saturating_add(row.dur_ps);
        }
    }
    let mut summary: Summary = by_name.into_iter().map(|(name, (count, dur))| (name, count, dur)).collect();
    summary.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    let side_summary =
        SideSummary { hosts, paths, ranks, available_ranks, iterations, available_iterations, selected_rows };
    Ok((side_summary, summary))
}

fn micros(ps: i64) -> f64 {
    ps as f64 / PS_PER_US as f64
}

/// The outer join of two summaries in HTA's order: control names, then test-only names.
fn combine(control: Summary, test: Summary) -> Vec<OpDiff> {
    let mut test_by_name: HashMap<&str, (i64, i64)> =
        test.iter().map(|(name, count, dur)| (name.as_str(), (*count, *dur))).collect();
    let row = |name: &str, (cc, cd): (i64, i64), (tc, td): (i64, i64)| OpDiff {
        name: name.to_string(),
        control_counts: cc,
        control_total_duration_us: micros(cd),
        test_counts: tc,
        test_total_duration_us: micros(td),
        diff_counts: tc - cc,
        diff_duration_us: micros(td.saturating_sub(cd)),
        counts_change_category: CountChange::of(tc - cc),
    };
    let mut ops: Vec<OpDiff> = Vec::with_capacity(control.len() + test.len());
    for (name, count, dur) in &control {
        let other = test_by_name.remove(name.as_str()).unwrap_or((0, 0));
        ops.push(row(name, (*count, *dur), other));
    }
    for (name, count, dur) in &test {
        if test_by_name.contains_key(name.as_str()) {
            ops.push(row(name, (0, 0), (*count, *dur)));
        }
    }
    ops
}

/// HTA's `ops_diff` classification of the rows.
fn classify(ops: &[OpDiff]) -> OpsDiff {
    let mut diff = OpsDiff::default();
    for op in ops {
        let (control, test, change) = (op.control_counts, op.test_counts, op.diff_counts);
        let lists = [
            (control == 0 && test > 0, &mut diff.added),
            (control > 0 && test == 0, &mut diff.deleted),
            (control > 0 && change > 0, &mut diff.increased),
            (test > 0 && change < 0, &mut diff.decreased),
            (test > 0 && change == 0, &mut diff.unchanged),
        ];
        for (matches, list) in lists {
            if matches {
                list.push(op.name.clone());
            }
        }
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(rows: &[(&str, i64, i64)]) -> Summary {
        rows.iter().map(|(n, c, d)| (n.to_string(), *c, d * PS_PER_US)).collect()
    }

    #[test]
    fn outer_join_keeps_control_order_then_test_only_names() {
        let ops = combine(summary(&[("b", 2, 10), ("d", 1, 5)]), summary(&[("a", 1, 3), ("b", 1, 4), ("c", 2, 2)]));
        let names: Vec<&str> = ops.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["b", "d", "a", "c"]);
        assert_eq!((ops[0].diff_counts, ops[0].diff_duration_us), (-1, -6.0));
        assert_eq!(ops[1].counts_change_category, CountChange::Fewer);
        assert_eq!(ops[2].counts_change_category, CountChange::More);
        let diff = classify(&ops);
        assert_eq!(diff.added, ["a", "c"]);
        assert_eq!(diff.deleted, ["d"]);
        assert_eq!(diff.decreased, ["b"]);
        assert!(diff.increased.is_empty() && diff.unchanged.is_empty());
    }
}
