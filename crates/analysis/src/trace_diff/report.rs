//! The trace diff laid out for people: what each side used, how many names were added,
//! removed, got slower or faster, the biggest time changes, and the table sorted by
//! absolute change in total duration; and as HTA's `compare_traces` CSV.

use crate::report::{Cell, Report, Section, Table, clip, write_csv_row};

use super::{DeviceType, OpDiff, SideSummary, TraceComparison};

/// How many of the biggest changes the summary names.
const TOP_CHANGES: usize = 5;

/// How many names an `ops_diff` list shows before "… and N more".
const LIST_LIMIT: usize = 10;

/// Longest name (characters) shown in the table; JSON and CSV keep full names.
const TABLE_NAME_CHARS: usize = 100;

/// Longest name (characters) shown in a sentence.
const NOTE_NAME_CHARS: usize = 60;

impl TraceComparison {
    /// The comparison as a [`Report`]: a summary section (sentences) and the main
    /// table, one row per name sorted by absolute duration change (µs), largest first.
    pub fn report(&self) -> Report {
        let mut summary = Section::new("Summary")
            .note(format!("Control: {}.", describe_side(&self.control)))
            .note(format!("Test: {}.", describe_side(&self.test)))
            .note(format!(
                "Compared: {}{}.",
                match self.device {
                    DeviceType::All => "CPU ops and GPU kernels",
                    DeviceType::Cpu => "CPU ops",
                    DeviceType::Gpu => "GPU kernels",
                },
                if self.use_short_name { ", grouped by short name" } else { "" }
            ));
        for note in self.change_notes() {
            summary = summary.note(note);
        }
        let mut table = Table::new([
            "Name",
            "Control count",
            "Control total (us)",
            "Test count",
            "Test total (us)",
            "Count diff",
            "Duration diff (us)",
            "Count change",
        ]);
        for op in self.by_duration_change() {
            table.push(vec![
                Cell::text(clip(&op.name, TABLE_NAME_CHARS)),
                Cell::Int(op.control_counts),
                micros_cell(op.control_total_duration_us),
                Cell::Int(op.test_counts),
                micros_cell(op.test_total_duration_us),
                Cell::Int(op.diff_counts),
                micros_cell(op.diff_duration_us),
                Cell::text(op.counts_change_category.symbol()),
            ]);
        }
        let ops = Section::new("Ops and kernels by duration change").with_table(table).main();
        let mut lists = Section::new("Ops diff");
        let diff = &self.ops_diff;
        for (label, names) in [
            ("Added", &diff.added),
            ("Deleted", &diff.deleted),
            ("Increased (more often in test)", &diff.increased),
            ("Decreased (less often in test)", &diff.decreased),
        ] {
            if !names.is_empty() {
                lists = lists.note(format!("{label} ({}): {}.", names.len(), name_list(names)));
            }
        }
        lists = lists.note(format!("Unchanged count: {}.", diff.unchanged.len()));
        Report { tool: "trace_diff".to_string(), sections: vec![summary, ops, lists] }
    }

    /// The ops sorted by absolute duration change, largest first (ties keep HTA's order).
    pub fn by_duration_change(&self) -> Vec<&OpDiff> {
        let mut ops: Vec<&OpDiff> = self.ops.iter().collect();
        ops.sort_by(|a, b| b.diff_duration_us.abs().total_cmp(&a.diff_duration_us.abs()));
        ops
    }

    /// Sentences on what changed: counts of added / removed / slower / faster names and
    /// the biggest duration changes.
    fn change_notes(&self) -> Vec<String> {
        let diff = &self.ops_diff;
        let in_both = |op: &&OpDiff| op.control_counts > 0 && op.test_counts > 0;
        let slower = self.ops.iter().filter(in_both).filter(|op| op.diff_duration_us > 0.0).count();
        let faster = self.ops.iter().filter(in_both).filter(|op| op.diff_duration_us < 0.0).count();
        let mut notes = vec![format!(
            "{} names: {} added, {} removed; of the {} in both, {} ran more often, {} less often, {} took more \
             time in total, {} less.",
            self.ops.len(),
            diff.added.len(),
            diff.deleted.len(),
            self.ops.iter().filter(in_both).count(),
            diff.increased.len(),
            diff.decreased.len(),
            slower,
            faster,
        )];
        let changed: Vec<&OpDiff> =
            self.by_duration_change().into_iter().filter(|op| op.diff_duration_us != 0.0).take(TOP_CHANGES).collect();
        if changed.is_empty() {
            notes.push("No name changed its total duration.".to_string());
        } else {
            let parts: Vec<String> = changed
                .iter()
                .map(|op| {
                    let what = if op.control_counts == 0 {
                        " (added)".to_string()
                    } else if op.test_counts == 0 {
                        " (removed)".to_string()
                    } else if op.diff_counts != 0 {
                        format!(" (count {:+})", op.diff_counts)
                    } else {
                        String::new()
                    };
                    format!("{} {}{what}", clip(&op.name, NOTE_NAME_CHARS), signed_duration(op.diff_duration_us))
                })
                .collect();
            notes.push(format!("Biggest time changes (test - control): {}.", parts.join("; ")));
        }
        notes
    }
}

/// `3 ranks [0, 1, 2] of a.json, …, iteration 5` for a side.
fn describe_side(side: &SideSummary) -> String {
    let ints = |values: &[i64]| values.iter().map(i64::to_string).collect::<Vec<_>>().join(", ");
    let iterations = match &side.iterations {
        None if side.available_iterations.is_empty() => "the whole trace (no ProfilerStep#N)".to_string(),
        None => "the whole trace".to_string(),
        Some(list) if list.len() == 1 => format!("iteration {}", ints(list)),
        Some(list) => format!("iterations {}", ints(list)),
    };
    let ranks = if side.ranks.len() == 1 { "rank" } else { "ranks" };
    format!(
        "{} {ranks} {} ({}), {iterations}, {} events selected",
        side.hosts.join(", "),
        ints(&side.ranks),
        if side.available_ranks.len() == 1 {
            "its only rank".to_string()
        } else {
            format!("of {}", ints(&side.available_ranks))
        },
        side.selected_rows
    )
}

/// The first [`LIST_LIMIT`] names, then how many more.
fn name_list(names: &[String]) -> String {
    let shown = names.iter().take(LIST_LIMIT).map(|n| clip(n, NOTE_NAME_CHARS)).collect::<Vec<_>>().join(", ");
    if names.len() > LIST_LIMIT { format!("{shown} … and {} more", names.len() - LIST_LIMIT) } else { shown }
}

/// A µs value: an integer cell when whole (HTA's durations are), else 3 decimals.
fn micros_cell(us: f64) -> Cell {
    if us.fract() == 0.0 && us.abs() < 9.0e15 { Cell::Int(us as i64) } else { Cell::num(us, 3) }
}

/// `+12` / `-3.5`: a signed µs amount as a person reads it.
/// A change of `us` microseconds with its sign: `+1.5 ms`, `-320 µs`, `0`.
fn signed_duration(us: f64) -> String {
    let text = mlprof_model::human::duration_us(us);
    if us > 0.0 && text != "0" { format!("+{text}") } else { text }
}

impl TraceComparison {
    /// HTA's `compare_traces` DataFrame as `to_csv` writes it: the same columns and
    /// row order; the first column is `name`, or `short_name` with short names.
    pub fn to_hta_csv(&self) -> String {
        let mut out = String::new();
        let first = if self.use_short_name { "short_name" } else { "name" };
        out.push_str(first);
        out.push_str(
            ",control_counts,control_total_duration,test_counts,test_total_duration,diff_counts,diff_duration,\
             counts_change_categories\n",
        );
        for op in &self.ops {
            let fields = [
                op.name.clone(),
                op.control_counts.to_string(),
                op.control_total_duration_us.to_string(),
                op.test_counts.to_string(),
                op.test_total_duration_us.to_string(),
                op.diff_counts.to_string(),
                op.diff_duration_us.to_string(),
                op.counts_change_category.symbol().to_string(),
            ];
            write_csv_row(&mut out, fields.iter().map(String::as_str));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::{CountChange, OpsDiff};
    use super::*;

    fn op(name: &str, control: (i64, f64), test: (i64, f64)) -> OpDiff {
        OpDiff {
            name: name.to_string(),
            control_counts: control.0,
            control_total_duration_us: control.1,
            test_counts: test.0,
            test_total_duration_us: test.1,
            diff_counts: test.0 - control.0,
            diff_duration_us: test.1 - control.1,
            counts_change_category: CountChange::of(test.0 - control.0),
        }
    }

    #[test]
    fn table_is_sorted_by_absolute_change_and_summary_names_the_biggest() {
        let side = SideSummary {
            hosts: vec!["a".into()],
            paths: vec!["a.json".into()],
            ranks: vec![0],
            available_ranks: vec![0],
            iterations: Some(vec![3]),
            available_iterations: vec![3, 4],
            selected_rows: 5,
        };
        let comparison = TraceComparison {
            control: side.clone(),
            test: side,
            device: DeviceType::All,
            use_short_name: false,
            ops: vec![
                op("small", (1, 10.0), (1, 12.0)),
                op("gone", (1, 50.0), (0, 0.0)),
                op("new", (0, 0.0), (2, 7.5)),
            ],
            ops_diff: OpsDiff {
                added: vec!["new".into()],
                deleted: vec!["gone".into()],
                unchanged: vec!["small".into()],
                ..OpsDiff::default()
            },
        };
        let report = comparison.report();
        let table = report.sections[1].table.as_ref().expect("main table");
        let order: Vec<String> = table.rows.iter().map(|r| r[0].display()).collect();
        assert_eq!(order, ["gone", "new", "small"]);
        assert_eq!(table.rows[1][6].display(), "7.500");
        let notes = report.sections[0].notes.join("\n");
        assert!(notes.contains("3 names: 1 added, 1 removed; of the 1 in both"), "{notes}");
        assert!(notes.contains("gone -50 µs (removed); new +7.5 µs (added); small +2 µs"), "{notes}");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abcd", 4), "abcd");
    }
}
