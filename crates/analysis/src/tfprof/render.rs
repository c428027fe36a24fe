//! The result of a view laid out for people: the notes that say how the numbers were
//! obtained and which columns the profile cannot supply, and the indented tree table
//! (a [`Report`], so the CLI prints it as text or CSV like every tool).
//!
//! The one design decision to know: each numeric column appears twice, the node's own
//! value and its total (`micros`, `total_micros`; the op view's running sum is
//! `cum_micros`), as tfprof prints `own/total`; a node whose records are not
//! accounted shows `--` for its own values, and a column the profile cannot supply
//! shows "—" with one note saying why.

use mlprof_model::Host;

use super::forest::NO_FRAME;
use super::options::{Column, StepSelection, TfprofOptions, View};
use super::profile::{OpSource, Profile};
use super::show::Shown;
use super::stats::NodeStats;
use super::{TfprofResult, Unavailable};
use crate::grouping::HostGroups;
use crate::report::{Cell, Report, Section, Table, clip};

/// Longest node label the table shows (JSON keeps whole names).
const MAX_LABEL_CHARS: usize = 80;

/// What an unavailable column shows.
const MISSING: &str = "—";
/// What a node's own value shows when its records are not accounted (tfprof's `--`).
const NOT_ACCOUNTED: &str = "--";

/// The columns the table shows for `select`: selecting `micros` shows all three
/// times, as tfprof does, unless no op ran on an accelerator (then `micros` is the
/// CPU time and the other two add nothing).
fn shown_columns(select: &[Column], accelerator: bool) -> Vec<Column> {
    let mut columns: Vec<Column> = select.to_vec();
    if columns.contains(&Column::Micros) && accelerator {
        columns.extend([Column::AcceleratorMicros, Column::CpuMicros]);
    }
    columns.sort();
    columns.dedup();
    columns
}

/// The selected columns `profile` cannot supply, with why.
pub(super) fn unavailable(
    profile: &Profile,
    hosts: &[(&Host, &HostGroups)],
    options: &TfprofOptions,
) -> Vec<Unavailable> {
    let pytorch = hosts.iter().any(|(host, _)| crate::facts::framework(host) == crate::facts::Framework::Pytorch);
    let available = &profile.availability;
    let reason = |column: Column| -> Option<String> {
        Some(match column {
            Column::Bytes | Column::PeakBytes | Column::ResidualBytes if !available.memory => {
                "the profile has no allocation events (TensorFlow: the memory profiler's MemoryAllocation events; \
                 PyTorch: profile_memory=True)"
                    .into()
            }
            Column::OutputBytes if !available.output_bytes => {
                if pytorch && available.memory {
                    "PyTorch's memory events do not say which allocations are op outputs".into()
                } else {
                    "the profile records no output sizes (TensorFlow allocations with region_type=output, XLA \
                     instruction shapes)"
                        .into()
                }
            }
            Column::Params if !available.params => {
                "the profile records no variable shapes (only XLA programs' entry parameters have them)".into()
            }
            Column::FloatOps if !available.float_ops => {
                "the profile has no `flops` stats (PyTorch: with_flops=True; XLA: FLOP counts on device ops)".into()
            }
            Column::InputShapes if !available.input_shapes => {
                "the profile records no input shapes (PyTorch: record_shapes=True; XLA: operand shapes)".into()
            }
            _ => return None,
        })
    };
    shown_columns(&options.select, available.accelerator)
        .into_iter()
        .filter_map(|column| reason(column).map(|reason| Unavailable { column, reason }))
        .collect()
}

/// The notes of a view: what the records are, the step selection, view caveats and
/// the collectors' remarks.
pub(super) fn notes(profile: &Profile, options: &TfprofOptions, shown: &Shown) -> Vec<String> {
    let mut notes: Vec<String> = profile
        .kinds
        .iter()
        .map(|kind| {
            match kind {
                OpSource::TensorFlow => {
                    "TensorFlow ops: host runs with their self time, as XProf's op database counts them, and the GPU \
                     kernels of each op (`tf_op`)."
                }
                OpSource::PyTorch => {
                    "PyTorch ops: cpu_ops and CUDA runtime calls with their self time, and the GPU activities each \
                     cpu_op launched (External id, else correlation)."
                }
                OpSource::Xla => {
                    "XLA ops: `hlo_op` events named through their HLO programs (framework op name, category, \
                     operands, Python stack)."
                }
            }
            .to_string()
        })
        .collect();
    notes.push("micros = cpu_micros (host self time) + accelerator_micros (device time).".to_string());
    let steps = step_list(&profile.steps.iter().copied().collect::<Vec<_>>());
    let sources: Vec<&str> = profile.step_sources.iter().map(String::as_str).collect();
    notes.push(match options.step {
        StepSelection::Whole => format!(
            "Numbers cover the whole profile; --step N picks one step, --step -1 averages over steps ({} found: {}).",
            profile.steps.len(),
            if steps.is_empty() { "none".to_string() } else { steps.clone() }
        ),
        StepSelection::Step(step) => format!("Numbers cover step {step} only ({}).", sources.join(" ")),
        StepSelection::Average => format!(
            "Numbers are averages per step over the steps each node ran in (integer averages, as tfprof; steps {}; {}).",
            steps,
            sources.join(" ")
        ),
    });
    let implicit_times =
        !options.select.contains(&Column::AcceleratorMicros) || !options.select.contains(&Column::CpuMicros);
    if options.select.contains(&Column::Micros) && !profile.availability.accelerator && implicit_times {
        notes.push(
            "No op ran on an accelerator: micros is CPU time (select accelerator_micros, cpu_micros to show them)."
                .to_string(),
        );
    }
    match options.view {
        View::Op => {
            notes.push(
                "cum_* columns add up the rows from this one to the end of the list (tfprof's cumulative share)."
                    .to_string(),
            );
            if shown.cut_rows > 0 {
                notes.push(format!("{} more op types are below --max-depth {}.", shown.cut_rows, options.max_depth));
            }
        }
        View::Code if !profile.availability.python_stacks => notes.push(format!(
            "The profile records no Python stacks (PyTorch: with_stack=True; TensorFlow/JAX: the Python tracer or \
             XLA stack frames): every op is under {NO_FRAME}."
        )),
        View::Code => notes.push(format!(
            "Each line's time is that of the ops it created (ops in the frames it called count in their totals); \
             ops without a stack are under {NO_FRAME}."
        )),
        View::Graph if !profile.availability.graph_inputs => notes.push(
            "The profile records no op inputs (only XLA programs have them): each op is a node of its own, without \
             inputs."
                .to_string(),
        ),
        View::Graph => notes.push(
            "Each node's children are its inputs; a node read by several ops is shown once, under the first."
                .to_string(),
        ),
        View::Scope => {}
    }
    notes.extend(profile.notes.iter().cloned());
    notes
}

impl TfprofResult {
    /// The view as an indented table with its notes.
    pub fn report(&self) -> Report {
        let columns = shown_columns(&self.options.select, self.has_accelerator_time);
        let op_view = self.view == View::Op;
        let mut headers = vec![if op_view { "Op type".to_string() } else { "Node".to_string() }];
        for &column in &columns {
            headers.push(column.name().to_string());
            if column.is_numeric() {
                headers.push(format!("{}_{}", if op_view { "cum" } else { "total" }, column.name()));
            }
        }
        let mut table = Table::new(headers);
        for row in &self.rows {
            let indent = if op_view { String::new() } else { "  ".repeat(row.depth) };
            let mut cells = vec![Cell::text(format!("{indent}{}", clip(&row.label, MAX_LABEL_CHARS)))];
            for &column in &columns {
                let missing = self.unavailable.iter().any(|u| u.column == column);
                if !column.is_numeric() {
                    cells.push(if missing { Cell::text(MISSING) } else { text_cell(row, column) });
                    continue;
                }
                if missing {
                    cells.extend([Cell::text(MISSING), Cell::text(MISSING)]);
                    continue;
                }
                cells.push(if row.accounted { number(&row.own, column) } else { Cell::text(NOT_ACCOUNTED) });
                cells.push(number(&row.total, column));
            }
            table.push(cells);
        }
        let mut section = Section::new(format!("tfprof {} view", self.view.name())).with_table(table).main();
        section.notes = self.notes.clone();
        for missing in &self.unavailable {
            section.notes.push(format!("{}: \"{MISSING}\" because {}.", missing.column.name(), missing.reason));
        }
        Report { tool: "tfprof".to_string(), sections: vec![section] }
    }
}

/// A numeric cell: times in microseconds (3 decimals), the rest as integers.
fn number(stats: &NodeStats, column: Column) -> Cell {
    let value = super::show::value(stats, column);
    match column {
        Column::Micros | Column::AcceleratorMicros | Column::CpuMicros => Cell::num(value as f64 / 1e6, 3),
        _ => Cell::Int(value),
    }
}

/// Most input-shape signatures a cell lists before saying how many more there are.
const MAX_SHAPES_SHOWN: usize = 3;

fn text_cell(row: &super::TfprofRow, column: Column) -> Cell {
    match column {
        Column::Device => Cell::text(row.devices.join("|")),
        Column::OpTypes => Cell::text(row.op_types.join("|")),
        Column::InputShapes => {
            let mut parts: Vec<String> =
                row.input_shapes
                    .iter()
                    .take(MAX_SHAPES_SHOWN)
                    .map(|s| {
                        if row.input_shapes.len() > 1 {
                            format!("{} (×{})", s.shapes, s.runs)
                        } else {
                            s.shapes.clone()
                        }
                    })
                    .collect();
            if row.input_shapes.len() > MAX_SHAPES_SHOWN {
                parts.push(format!("+{} more", row.input_shapes.len() - MAX_SHAPES_SHOWN));
            }
            Cell::text(parts.join("; "))
        }
        _ => Cell::text(""),
    }
}

/// Step numbers for a note: all of them up to 20, else the first five, "…" and the last.
fn step_list(steps: &[i64]) -> String {
    const SHOWN: usize = 20;
    let text = |steps: &[i64]| steps.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
    match steps {
        [] => String::new(),
        _ if steps.len() <= SHOWN => text(steps),
        [.., last] => format!("{}, …, {last}", text(&steps[..5])),
    }
}
