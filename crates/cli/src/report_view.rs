//! Rendering an analysis [`Report`] for a terminal (aligned tables and wrapped
//! sentences); the CSV of its main table (like the TF Profiler's "Export as CSV") is
//! [`Report::to_csv`], shared with the web UI.

use std::fmt::Write;

use mlprof_analysis::report::{Report, Table};
use mlprof_analysis::tool::ToolId;
use mlprof_analysis::tool::spec::Output;

use crate::{Failure, table_fit};

/// How text for people is laid out: the terminal's width and how many rows of each table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TextLayout {
    /// The width to fit, in characters (`None`: no limit, for a pipe or a file).
    pub width: Option<usize>,
    /// The most rows shown of each table (`None`: every row).
    pub top: Option<usize>,
}

/// `--top N` / `--all`: how many rows of each table the table format shows.
#[derive(clap::Args, Clone, Copy, Debug, Default)]
pub struct RowArgs {
    /// Table format: show the first N rows of each table (default on a terminal: 25).
    #[arg(long, value_name = "N", conflicts_with = "all")]
    top: Option<usize>,
    /// Table format: show every row of each table (the default into a pipe or a file).
    #[arg(long)]
    all: bool,
}

impl RowArgs {
    /// The layout for stdout with these rows ([`TextLayout::for_stdout`]).
    pub fn layout(self) -> TextLayout {
        TextLayout::for_stdout(self.top, self.all)
    }
}

/// Rows of a table shown on a terminal unless `--top N` or `--all` says otherwise.
pub const DEFAULT_TOP_ROWS: usize = 25;

impl TextLayout {
    /// Everything, at full width: what a pipe or a file gets.
    pub const WHOLE: TextLayout = TextLayout { width: None, top: None };

    /// The layout for stdout: the width from `COLUMNS` when set (a number above 0), else
    /// the terminal's when stdout is one, else none; rows from `--top N` / `--all`, else
    /// [`DEFAULT_TOP_ROWS`] when there is a width to fit and every row when there is not.
    pub fn for_stdout(top: Option<usize>, all: bool) -> TextLayout {
        let width = columns_variable().or_else(terminal_width);
        let top = match (all, top) {
            (true, _) => None,
            (false, Some(rows)) => Some(rows),
            (false, None) => width.map(|_| DEFAULT_TOP_ROWS),
        };
        TextLayout { width, top }
    }
}

/// `COLUMNS`, when it holds a width.
fn columns_variable() -> Option<usize> {
    std::env::var("COLUMNS").ok()?.trim().parse().ok().filter(|&width: &usize| width > 0)
}

/// The width of the terminal on stdout, when stdout is one.
fn terminal_width() -> Option<usize> {
    let mut size = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes a `winsize` into the pointer, which lives for the call.
    let answered = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (answered && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// The report as text: each section's title, its sentences (wrapped to the width), and
/// its table fitted to the width ([`table_fit`]), numbers right-aligned, followed by a
/// line saying what was left out.
pub fn render_text(report: &Report, layout: &TextLayout) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "== {} ==", report.tool);
    for section in &report.sections {
        let _ = writeln!(out, "\n## {}", section.title);
        for note in &section.notes {
            write_wrapped(&mut out, note, layout.width);
        }
        if let Some(table) = &section.table {
            if !section.notes.is_empty() {
                out.push('\n');
            }
            render_table(table, section.main, layout, &mut out);
        }
    }
    out
}

/// `text` (lines of sentences) wrapped at spaces to `width`.
fn write_wrapped(out: &mut String, text: &str, width: Option<usize>) {
    for line in text.split('\n') {
        match width {
            Some(width) if table_fit::chars(line) > width => {
                // An indented line (a list item) keeps its indent on the lines it wraps to.
                let indent = line.len() - line.trim_start().len();
                for (i, part) in
                    table_fit::wrap_words(line.trim_start(), width.saturating_sub(indent).max(1)).iter().enumerate()
                {
                    let lead = if i == 0 { &line[..indent] } else { &"    "[..indent.min(4)] };
                    let _ = writeln!(out, "{lead}{part}");
                }
            }
            _ => {
                let _ = writeln!(out, "{line}");
            }
        }
    }
}

fn render_table(table: &Table, main: bool, layout: &TextLayout, out: &mut String) {
    if table.rows.is_empty() {
        let _ = writeln!(out, "(no rows)");
        return;
    }
    let shown_rows = layout.top.map_or(table.rows.len(), |top| top.min(table.rows.len()));
    let all_cells: Vec<Vec<String>> = table.rows.iter().map(|row| row.iter().map(|c| c.display()).collect()).collect();
    let cells = &all_cells[..shown_rows];
    let numeric: Vec<bool> = (0..table.columns.len())
        .map(|i| table.rows.iter().all(|row| row.get(i).is_some_and(|c| c.is_numeric())))
        .collect();
    let key_columns: Vec<usize> =
        table.key_columns.iter().filter_map(|k| table.columns.iter().position(|c| c == k)).collect();
    let headers: Vec<String> = table.columns.iter().map(|name| header_for_people(name)).collect();
    let fit = table_fit::fit(
        &table_fit::Cells {
            header: &headers,
            rows: cells,
            all_rows: &all_cells,
            numeric: &numeric,
            key_columns: &key_columns,
        },
        layout.width,
    );
    let line = |out: &mut String, values: &mut dyn Iterator<Item = String>| {
        let mut text = String::new();
        for (i, (value, &column)) in values.zip(&fit.shown).enumerate() {
            let width = fit.widths[i];
            if i > 0 {
                text.push_str(&" ".repeat(table_fit::COLUMN_GAP));
            }
            // Padded by hand: `format!`'s width is limited to 65,535, and a cell (a long
            // kernel or scope name) can be wider.
            let padding = " ".repeat(width.saturating_sub(table_fit::chars(&value)));
            if numeric[column] {
                text.push_str(&padding);
                text.push_str(&value);
            } else {
                text.push_str(&value);
                text.push_str(&padding);
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    };
    for header in header_lines(&headers, &fit) {
        line(out, &mut header.into_iter());
    }
    line(out, &mut fit.widths.iter().map(|w| "-".repeat(*w)));
    for row in cells {
        let mut values = fit.shown.iter().zip(&fit.widths).map(|(&c, &w)| {
            let value = row.get(c).map_or("", String::as_str);
            if numeric[c] { value.to_string() } else { table_fit::shorten_middle(value, w) }
        });
        line(out, &mut values);
    }
    for note in left_out(table.rows.len(), &headers, &fit, shown_rows, layout.width, main) {
        write_wrapped(out, &note, layout.width);
    }
}

/// A column header as the text table shows it: microseconds written `µs`, as every
/// other duration for people is (csv and json keep XProf's `(us)` names).
fn header_for_people(name: &str) -> String {
    name.replace("(us)", "(µs)").replace(" us)", " µs)")
}

/// The header lines of a fitted table: one, or two where headers are split at a space
/// (a header that fits its column stays on the second line, over its values).
fn header_lines(headers: &[String], fit: &table_fit::Fit) -> Vec<Vec<String>> {
    let columns = || fit.shown.iter().zip(&fit.widths).map(|(&c, &w)| (headers[c].as_str(), w));
    if !fit.two_line_headers {
        return vec![columns().map(|(name, w)| table_fit::shorten_end(name, w)).collect()];
    }
    let (first, second): (Vec<String>, Vec<String>) = columns()
        .map(|(name, w)| {
            let (top, bottom) = if table_fit::chars(name) > w { table_fit::split_header(name) } else { ("", name) };
            (table_fit::shorten_end(top, w), table_fit::shorten_end(bottom, w))
        })
        .unzip();
    vec![first, second]
}

/// The lines that say what a fitted table does not show: rows past the top, columns left
/// out for the width or because they repeat another. The whole of a tool's `main` table
/// is in `--format csv`; every table's data is in `--format json`.
fn left_out(
    rows: usize,
    headers: &[String],
    fit: &table_fit::Fit,
    shown_rows: usize,
    width: Option<usize>,
    main: bool,
) -> Vec<String> {
    let whole = if main { "--format csv" } else { "--format json" };
    let mut notes = Vec::new();
    let hidden_rows = rows - shown_rows;
    if hidden_rows > 0 {
        notes.push(format!(
            "… {hidden_rows} more row{} (--top N shows N rows, --all every row, {whole} the whole table)",
            if hidden_rows == 1 { "" } else { "s" }
        ));
    }
    if let (Some(width), false) = (width, fit.dropped.is_empty()) {
        let names: Vec<&str> = fit.dropped.iter().map(|&c| headers[c].as_str()).collect();
        notes.push(format!(
            "Columns left out to fit {width} characters: {} (a wider terminal or COLUMNS shows them, {whole} has every column)",
            names.join(", ")
        ));
    }
    for &(left, kept) in &fit.repeated {
        notes.push(format!("{} is not shown: it equals {} in every row.", headers[left], headers[kept]));
    }
    notes
}

/// A tool's report as text (`csv` false) or its main table as CSV, sorted by `sort`
/// first when given; `tool` names the tool in the error when it has no main table.
pub fn render_sorted(
    mut report: Report,
    csv: bool,
    sort: Option<&str>,
    tool: &str,
    layout: &TextLayout,
) -> Result<String, Failure> {
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
        Ok(render_text(&report, layout))
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
        let text = render_text(&report, &TextLayout::WHOLE);
        assert!(text.contains("Op   Time (µs)\n---  ---------\nc         20.0\na,b        1.5"), "{text}");
    }

    #[test]
    fn cells_wider_than_the_formatter_allows_are_rendered_whole() {
        let long = "k".repeat(70_000);
        let mut table = Table::new(["Kernel", "Time (us)"]);
        table.push(vec![Cell::text(&long), Cell::num(2.0, 1)]);
        table.push(vec![Cell::text("short"), Cell::num(123_456.0, 1)]);
        let report = Report { tool: "t".into(), sections: vec![Section::new("S").with_table(table).main()] };
        let text = render_text(&report, &TextLayout::WHOLE);
        assert!(text.contains(&format!("{long}        2.0\n")), "long row");
        assert!(text.contains(&format!("short{}   123456.0\n", " ".repeat(70_000 - 5))), "short row");
    }

    #[test]
    fn rows_past_the_top_are_in_csv_for_the_main_table_and_in_json_for_the_others() {
        let table = || {
            let mut table = Table::new(["Kernel", "Time (us)"]);
            for i in 0..3 {
                table.push(vec![Cell::text(format!("k{i}")), Cell::num(f64::from(i), 1)]);
            }
            table
        };
        let report = Report {
            tool: "t".into(),
            sections: vec![Section::new("Main").with_table(table()).main(), Section::new("Other").with_table(table())],
        };
        let text = render_text(&report, &TextLayout { width: None, top: Some(1) });
        let hints: Vec<&str> = text.lines().filter(|l| l.starts_with("… 2 more rows")).collect();
        assert_eq!(
            hints,
            [
                "… 2 more rows (--top N shows N rows, --all every row, --format csv the whole table)",
                "… 2 more rows (--top N shows N rows, --all every row, --format json the whole table)",
            ],
            "{text}"
        );
    }
}
