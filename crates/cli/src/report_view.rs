//! Rendering an analysis [`Report`] for a terminal (aligned tables and wrapped
//! sentences); the CSV of its main table (like the TF Profiler's "Export as CSV") is
//! [`Report::to_csv`], shared with the web UI.

use std::fmt::Write;

use mlprof_analysis::report::{Report, Table};
use mlprof_analysis::tool::ToolId;
use mlprof_analysis::tool::spec::Output;

use crate::Failure;

/// The report as text: each section's title, its sentences, and its table aligned
/// (numbers right-aligned). Long tables are shown in full.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "== {} ==", report.tool);
    for section in &report.sections {
        let _ = writeln!(out, "\n## {}", section.title);
        for note in &section.notes {
            let _ = writeln!(out, "{note}");
        }
        if let Some(table) = &section.table {
            if !section.notes.is_empty() {
                out.push('\n');
            }
            render_table(table, &mut out);
        }
    }
    out
}

fn render_table(table: &Table, out: &mut String) {
    if table.rows.is_empty() {
        let _ = writeln!(out, "(no rows)");
        return;
    }
    let cells: Vec<Vec<String>> = table.rows.iter().map(|row| row.iter().map(|c| c.display()).collect()).collect();
    let mut widths: Vec<usize> = table.columns.iter().map(|c| c.chars().count()).collect();
    for row in &cells {
        for (i, cell) in row.iter().enumerate() {
            if let Some(width) = widths.get_mut(i) {
                *width = (*width).max(cell.chars().count());
            }
        }
    }
    let numeric: Vec<bool> = (0..table.columns.len())
        .map(|i| table.rows.iter().all(|row| row.get(i).is_some_and(|c| c.is_numeric())))
        .collect();
    let line = |out: &mut String, values: &[String]| {
        let mut text = String::new();
        for (i, value) in values.iter().enumerate() {
            let width = widths.get(i).copied().unwrap_or(0);
            if i > 0 {
                text.push_str("  ");
            }
            // Padded by hand: `format!`'s width is limited to 65,535, and a cell (a long
            // kernel or scope name) can be wider.
            let padding = " ".repeat(width.saturating_sub(value.chars().count()));
            if numeric.get(i).copied().unwrap_or(false) {
                text.push_str(&padding);
                text.push_str(value);
            } else {
                text.push_str(value);
                text.push_str(&padding);
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    line(out, &table.columns);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    line(out, &rule);
    for row in &cells {
        line(out, row);
    }
}

/// A tool's report as text (`csv` false) or its main table as CSV, sorted by `sort`
/// first when given; `tool` names the tool in the error when it has no main table.
pub fn render_sorted(mut report: Report, csv: bool, sort: Option<&str>, tool: &str) -> Result<String, Failure> {
    if let Some(spec) = sort {
        report.sort_main_table(spec).map_err(Failure::input)?;
    }
    if csv {
        let text = report.to_csv().ok_or_else(|| Failure::nothing(format!("{tool} has no main table to export")))?;
        if let Some(note) = csv_note(&report, tool) {
            eprintln!("mlprof: {note}");
        }
        Ok(text)
    } else {
        Ok(render_text(&report))
    }
}

/// What `--format csv` left out, when the report has tables besides its main one: one
/// line for stderr naming the table written and where the others are.
fn csv_note(report: &Report, tool: &str) -> Option<String> {
    let tables: Vec<&str> = report.sections.iter().filter(|s| s.table.is_some()).map(|s| s.title.as_str()).collect();
    let main = report.sections.iter().find(|s| s.main)?;
    if tables.len() < 2 {
        return None;
    }
    let each_as_a_file = ToolId::from_name(tool).is_some_and(|t| t.spec().has(Output::HtaCsv));
    let elsewhere = if each_as_a_file {
        "--format hta-csv --output DIR writes each as a CSV file, --format json has them all"
    } else {
        "--format json has them all"
    };
    Some(format!(
        "--format csv writes the main table of --tool {tool}, \"{}\"; its {} other tables are in the table \
         output ({elsewhere})",
        main.title,
        tables.len() - 1
    ))
}

/// `value` as pretty JSON with a final newline.
pub fn render_json(value: &impl serde::Serialize) -> Result<String, Failure> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| Failure::input(e.to_string()))?;
    text.push('\n');
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlprof_analysis::report::{Cell, Section};

    #[test]
    fn tables_align_numbers_right() {
        let mut table = Table::new(["Op", "Time (us)"]);
        table.push(vec![Cell::text("c"), Cell::num(20.0, 1)]);
        table.push(vec![Cell::text("a,b"), Cell::num(1.5, 1)]);
        let report = Report { tool: "t".into(), sections: vec![Section::new("S").note("n").with_table(table).main()] };
        let text = render_text(&report);
        assert!(text.contains("Op   Time (us)\n---  ---------\nc         20.0\na,b        1.5"), "{text}");
    }

    #[test]
    fn cells_wider_than_the_formatter_allows_are_rendered_whole() {
        let long = "k".repeat(70_000);
        let mut table = Table::new(["Kernel", "Time (us)"]);
        table.push(vec![Cell::text(&long), Cell::num(2.0, 1)]);
        table.push(vec![Cell::text("short"), Cell::num(123_456.0, 1)]);
        let report = Report { tool: "t".into(), sections: vec![Section::new("S").with_table(table).main()] };
        let text = render_text(&report);
        assert!(text.contains(&format!("{long}        2.0\n")), "long row");
        assert!(text.contains(&format!("short{}   123456.0\n", " ".repeat(70_000 - 5))), "short row");
    }
}
