//! tfprof's views on any profile mlprof reads: the name-scope tree, the op types, the
//! Python code that created the ops, and the op graph, with tfprof's options
//! (`select`, `order_by`, `max_depth`, the minimums, the name and type regexes,
//! `account_displayed_op_only`, `step`) and its numbers: `micros` (CPU +
//! accelerator), `accelerator_micros`, `cpu_micros`, `occurrence`, `bytes`,
//! `peak_bytes`, `residual_bytes`, `output_bytes`, `params`, `float_ops`, `device`,
//! `op_types`, `input_shapes`, each node with its own value and its subtree's total.
//!
//! Pipeline: [`collect`] turns the hosts into op records (one per op run or GPU
//! activity, with paths, step and memory) → [`forest`] builds the view's nodes →
//! [`stats`] sums each node's own records under the accounting and step selection →
//! [`show`] runs tfprof's display algorithm → [`TfprofResult`] (rows, notes, timeline)
//! and its [`Report`](crate::report::Report).
//!
//! The one design decision to know: op times come from the op metrics databases
//! ([`crate::op_metrics`]), so the op view's per-type CPU and accelerator times are
//! `framework_op_stats`' per-type self times, and every view's root total is the sum of
//! the accounted records, counted once.

mod collect;
mod forest;
mod nesting;
mod options;
mod profile;
mod render;
mod show;
mod stats;
#[cfg(test)]
mod tests;
mod timeline;

use mlprof_model::Host;
use serde::Serialize;

pub use forest::NO_FRAME;
pub use options::{
    Column, OrderBy, Regexes, StepSelection, TfprofError, TfprofOptions, View, parse_order_by, parse_select,
};
pub use show::ROOT_NAME;
pub use stats::NodeStats;
pub use timeline::{Timeline, TimelineEvent, TimelineTrack};

use crate::grouping::HostGroups;
use stats::{Selection, own_facts};

/// What a tfprof view shows.
#[derive(Clone, Debug, Serialize)]
pub struct TfprofResult {
    /// The view.
    pub view: View,
    /// The options it was computed with.
    pub options: TfprofOptions,
    /// The steps of the profile (the step database's numbers).
    pub steps: Vec<i64>,
    /// How the steps were found.
    pub step_sources: Vec<String>,
    /// How the numbers were obtained and what was left out, one sentence each.
    pub notes: Vec<String>,
    /// Selected columns the profile cannot supply (shown as "—"), with why.
    pub unavailable: Vec<Unavailable>,
    /// Whether any op ran on an accelerator (without, `micros` is CPU time and the
    /// table leaves out the two time columns that add nothing).
    pub has_accelerator_time: bool,
    /// The root's totals (everything accounted, or everything displayed with
    /// `account_displayed_op_only`).
    pub total: NodeStats,
    /// The displayed rows in order (tree views start with the root row).
    pub rows: Vec<TfprofRow>,
    /// Op-view rows left out by `max_depth`.
    pub rows_cut: usize,
    /// The displayed nodes' op runs, for `--output timeline:FILE`.
    #[serde(skip)]
    pub timeline: Timeline,
}

/// A column shown as "—", and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unavailable {
    /// The column.
    pub column: Column,
    /// Why the profile cannot supply it, in one sentence.
    pub reason: String,
}

/// One displayed node.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TfprofRow {
    /// Indentation level (the root row is 0).
    pub depth: usize,
    /// The node's full name (what the name regexes match).
    pub name: String,
    /// Its short name (the last scope component).
    pub label: String,
    /// Whether its own records are accounted (tfprof prints `--` for its own values
    /// otherwise).
    pub accounted: bool,
    /// Its own numbers.
    pub own: NodeStats,
    /// Its totals as displayed (op view: from this row to the end of the list).
    pub total: NodeStats,
    /// Op types of its accounted records.
    pub op_types: Vec<String>,
    /// Devices they ran on.
    pub devices: Vec<String>,
    /// Input shapes with their run counts, most runs first.
    pub input_shapes: Vec<ShapeCount>,
}

/// One input-shape signature of a node and how many runs had it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ShapeCount {
    /// The shapes (`0:32x784|1:784x256`).
    pub shapes: String,
    /// Runs with these shapes.
    pub runs: i64,
}

/// Runs tfprof's `options.view` on `hosts` (each with its grouping). Fails when the
/// step asked for does not exist, or when the hosts hold no op at all.
pub fn analyze(hosts: &[(&Host, &HostGroups)], options: &TfprofOptions) -> Result<TfprofResult, TfprofError> {
    let profile = collect::collect(hosts);
    check_step(&profile, options.step)?;
    if profile.records.iter().all(|r| r.is_static) {
        return Err(TfprofError::nothing(
            "no ops found: the profile has no framework ops, XLA ops or PyTorch ops for tfprof's views",
        ));
    }
    let forest = forest::build(&profile, options.view);
    let selection = Selection { account_types: &options.account_type_regexes, step: options.step };
    let facts: Vec<_> = forest.nodes.iter().map(|node| own_facts(&profile, &node.records, &selection)).collect();
    let shown = show::show(&forest, &facts, options);
    let rows = shown
        .rows
        .iter()
        .map(|row| match row.node {
            None => TfprofRow {
                depth: 0,
                name: ROOT_NAME.to_string(),
                label: ROOT_NAME.to_string(),
                accounted: false,
                own: NodeStats::default(),
                total: row.total,
                op_types: Vec::new(),
                devices: Vec::new(),
                input_shapes: Vec::new(),
            },
            Some(node) => {
                let own = &facts[node];
                let mut input_shapes: Vec<ShapeCount> = own
                    .input_shapes
                    .iter()
                    .map(|(shapes, &runs)| ShapeCount { shapes: shapes.clone(), runs })
                    .collect();
                input_shapes.sort_by(|a, b| b.runs.cmp(&a.runs).then_with(|| a.shapes.cmp(&b.shapes)));
                TfprofRow {
                    depth: row.depth,
                    name: forest.nodes[node].name.clone(),
                    label: forest.nodes[node].label.clone(),
                    accounted: own.accounted,
                    own: if own.accounted { own.stats } else { NodeStats::default() },
                    total: row.total,
                    op_types: own.op_types.iter().cloned().collect(),
                    devices: own.devices.iter().cloned().collect(),
                    input_shapes,
                }
            }
        })
        .collect();
    let timeline = timeline::build(&profile, &forest, &shown, &selection);
    Ok(TfprofResult {
        view: options.view,
        options: options.clone(),
        steps: profile.steps.iter().copied().collect(),
        step_sources: profile.step_sources.iter().cloned().collect(),
        notes: render::notes(&profile, options, &shown),
        unavailable: render::unavailable(&profile, hosts, options),
        has_accelerator_time: profile.availability.accelerator,
        total: shown.root_total,
        rows,
        rows_cut: shown.cut_rows,
        timeline,
    })
}

/// Checks that the step asked for exists.
fn check_step(profile: &profile::Profile, step: StepSelection) -> Result<(), TfprofError> {
    if matches!(step, StepSelection::Whole) {
        return Ok(());
    }
    if profile.steps.is_empty() {
        return Err(TfprofError::nothing("--step: the profile has no steps (no step markers were found)"));
    }
    match step {
        StepSelection::Step(wanted) if !profile.steps.contains(&wanted) => {
            let known: Vec<String> = profile.steps.iter().map(i64::to_string).collect();
            Err(TfprofError::new(format!(
                "--step {wanted}: no such step; steps: {}, or -1 for their average",
                known.join(", ")
            )))
        }
        _ => Ok(()),
    }
}
