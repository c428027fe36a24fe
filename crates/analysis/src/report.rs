//! The neutral, render-ready shape of a tool's result: titled sections, each with
//! sentences and at most one table of typed cells. Tools build a [`Report`]; the CLI
//! turns it into aligned text tables, the web UI into HTML; both export the main table
//! with [`Report::to_csv`] after an optional [`Report::sort_main_table`].
//!
//! The one design decision to know: cells keep their numeric value next to the text
//! a person reads, so any column sorts correctly (numbers as numbers) in every view.
//! In JSON a cell is a string or a number (a real rounded to the decimals it is shown
//! with).

use std::cmp::Ordering;

use serde::{Serialize, Serializer};

/// A tool's result laid out for people.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// The tool's name (`overview_page`, …).
    pub tool: String,
    /// Sections in reading order.
    pub sections: Vec<Section>,
}

impl Report {
    /// The main table (the one exported as CSV), if the report has one.
    pub fn main_table(&self) -> Option<&Table> {
        self.sections.iter().find(|s| s.main).and_then(|s| s.table.as_ref())
    }

    /// Sorts the main table by `spec`: `COLUMN`, `COLUMN:asc` or `COLUMN:desc`
    /// (default descending), the column named as [`Table::column_index`] accepts.
    /// The error is one line naming the known columns.
    pub fn sort_main_table(&mut self, spec: &str) -> Result<(), String> {
        let (column, descending) = match spec.rsplit_once(':') {
            Some((column, "asc")) => (column, false),
            Some((column, "desc")) => (column, true),
            _ => (spec, true),
        };
        let Some(table) = self.sections.iter_mut().find(|s| s.main).and_then(|s| s.table.as_mut()) else {
            return Err(format!("{} has no table to sort", self.tool));
        };
        let Some(index) = table.column_index(column) else {
            return Err(format!("no column {column:?}; columns: {}", table.columns.join(", ")));
        };
        table.sort_by_column(index, descending);
        Ok(())
    }

    /// The main table as CSV (RFC 4180 quoting, `\n` line ends, cells as shown), or
    /// `None` when the report has no main table: what `mlprof analyze --format csv`
    /// and the web UI's "Export CSV" write.
    pub fn to_csv(&self) -> Option<String> {
        let table = self.main_table()?;
        let mut out = String::new();
        write_csv_row(&mut out, table.columns.iter().map(String::as_str));
        for row in &table.rows {
            let values: Vec<String> = row.iter().map(Cell::csv_value).collect();
            write_csv_row(&mut out, values.iter().map(String::as_str));
        }
        Some(out)
    }
}

/// Appends one CSV record, quoting values that hold a comma, quote or line break.
pub fn write_csv_row<'a>(out: &mut String, values: impl IntoIterator<Item = &'a str>) {
    for (i, value) in values.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_csv_field(out, value);
    }
    out.push('\n');
}

/// Appends one CSV field (RFC 4180): quoted, with quotes doubled, when it holds a
/// comma, a quote or a line break; as it is otherwise. The one CSV escaper of mlprof.
pub fn push_csv_field(out: &mut String, value: &str) {
    if value.contains([',', '"', '\n', '\r']) {
        out.push('"');
        out.push_str(&value.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(value);
    }
}

/// One titled part of a report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Section {
    /// Heading.
    pub title: String,
    /// Sentences (conclusions, recommendations, how a result was obtained).
    pub notes: Vec<String>,
    /// The section's table, if any.
    pub table: Option<Table>,
    /// Whether this table is the tool's main table (the one `--format csv` writes).
    pub main: bool,
}

impl Section {
    /// A section with a title and nothing else yet.
    pub fn new(title: impl Into<String>) -> Section {
        Section { title: title.into(), ..Section::default() }
    }

    /// Adds a sentence.
    pub fn note(mut self, text: impl Into<String>) -> Section {
        self.notes.push(text.into());
        self
    }

    /// Sets the table.
    pub fn with_table(mut self, table: Table) -> Section {
        self.table = Some(table);
        self
    }

    /// Marks this section's table as the tool's main table.
    pub fn main(mut self) -> Section {
        self.main = true;
        self
    }
}

/// A table: column headers and rows of cells (each row as long as `columns`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Table {
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows.
    pub rows: Vec<Vec<Cell>>,
    /// The columns that answer the table's question, most important first: what a
    /// terminal too narrow for every column keeps, and what the UI shows first (not
    /// part of the data; left out of JSON when none are named).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub key_columns: Vec<String>,
}

impl Table {
    /// An empty table with these headers.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = S>) -> Table {
        Table { columns: columns.into_iter().map(Into::into).collect(), ..Table::default() }
    }

    /// Names the columns that answer the table's question, most important first (each by
    /// its exact header); a narrow terminal shows these before the others.
    pub fn key_columns(mut self, columns: &[&str]) -> Table {
        self.key_columns = columns.iter().map(|c| c.to_string()).collect();
        self
    }

    /// Names `lead` as the key columns, followed by the other numeric columns by their
    /// total over the rows, largest first (the categories that take the most time), and
    /// then `after` (numeric columns that are not amounts, such as a start time).
    pub fn key_columns_by_total(mut self, lead: &[&str], after: &[&str]) -> Table {
        let mut others: Vec<(usize, f64)> = (0..self.columns.len())
            .filter(|&c| !lead.contains(&self.columns[c].as_str()) && !after.contains(&self.columns[c].as_str()))
            .filter(|&c| self.rows.iter().all(|row| row.get(c).is_some_and(Cell::is_numeric)))
            .map(|c| (c, self.rows.iter().filter_map(|row| row.get(c)?.as_f64()).filter(|v| v.is_finite()).sum()))
            .collect();
        others.sort_by(|a, b| b.1.total_cmp(&a.1));
        self.key_columns = lead
            .iter()
            .map(|c| c.to_string())
            .chain(others.iter().map(|(c, _)| self.columns[*c].clone()))
            .chain(after.iter().map(|c| c.to_string()))
            .collect();
        self
    }

    /// Appends a row.
    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    /// The index of the column whose header equals `name` ignoring ASCII case, or
    /// whose header with spaces and punctuation turned into `_` does, or the only
    /// column whose slug starts with `name`'s (`total_self_time` → `Total self-time (us)`).
    pub fn column_index(&self, name: &str) -> Option<usize> {
        let wanted = slug(name);
        let exact = self.columns.iter().position(|column| column.eq_ignore_ascii_case(name) || slug(column) == wanted);
        exact.or_else(|| {
            let mut prefixed = self.columns.iter().enumerate().filter(|(_, c)| slug(c).starts_with(&wanted));
            match (prefixed.next(), prefixed.next()) {
                (Some((index, _)), None) if !wanted.is_empty() => Some(index),
                _ => None,
            }
        })
    }

    /// Sorts rows by column `index` (numbers numerically, text lexically); stable.
    pub fn sort_by_column(&mut self, index: usize, descending: bool) {
        self.rows.sort_by(|a, b| {
            let ordering = match (a.get(index), b.get(index)) {
                (Some(x), Some(y)) => x.compare(y),
                _ => Ordering::Equal,
            };
            if descending { ordering.reverse() } else { ordering }
        });
    }
}

/// A column name as a lowercase identifier: `Total self-time (us)` → `total_self_time_us`.
pub fn slug(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_matches('_').to_string()
}

/// `text` cut to at most `max_chars` characters, the last one `…` when cut (for
/// C++ kernel names thousands of characters long; JSON and CSV keep them whole).
pub fn clip(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars.saturating_sub(1)) {
        Some((end, _)) if text.chars().count() > max_chars => format!("{}…", &text[..end]),
        _ => text.to_string(),
    }
}

/// One table cell. In JSON: a string, an integer, or a number rounded to the
/// decimals it is shown with (`null` for a value that is not finite).
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// Text.
    Text(String),
    /// An integer (counts, bytes).
    Int(i64),
    /// A real number shown with a fixed number of decimals.
    Num {
        /// The value.
        value: f64,
        /// Decimals to show.
        decimals: u8,
    },
}

impl Serialize for Cell {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Cell::Text(text) => serializer.serialize_str(text),
            Cell::Int(value) => serializer.serialize_i64(*value),
            Cell::Num { value, .. } if !value.is_finite() => serializer.serialize_none(),
            // The shown text parses back to the rounded value exactly as printed.
            Cell::Num { value, .. } => serializer.serialize_f64(self.display().parse().unwrap_or(*value)),
        }
    }
}

impl Cell {
    /// A text cell.
    pub fn text(text: impl Into<String>) -> Cell {
        Cell::Text(text.into())
    }

    /// A number shown with `decimals` decimals.
    pub fn num(value: f64, decimals: u8) -> Cell {
        Cell::Num { value, decimals }
    }

    /// A number the profile does not have (a FLOP rate without FLOP counts): `—` for
    /// people, empty in CSV, `null` in JSON.
    pub fn missing() -> Cell {
        Cell::Num { value: f64::NAN, decimals: 0 }
    }

    /// The cell in a CSV file: what a person reads, a missing number empty.
    pub fn csv_value(&self) -> String {
        match self {
            Cell::Num { value, .. } if !value.is_finite() => String::new(),
            _ => self.display(),
        }
    }

    /// What a person reads.
    pub fn display(&self) -> String {
        match self {
            Cell::Text(text) => text.clone(),
            Cell::Int(value) => value.to_string(),
            Cell::Num { value, .. } if !value.is_finite() => "—".to_string(),
            Cell::Num { value, decimals } => {
                let text = format!("{value:.*}", *decimals as usize);
                // A value that rounds to zero reads 0, not -0 or -0.000.
                match text.strip_prefix('-') {
                    Some(digits) if digits.bytes().all(|b| b == b'0' || b == b'.') => digits.to_string(),
                    _ => text,
                }
            }
        }
    }

    /// Whether the cell is a number (right-aligned in text tables).
    pub fn is_numeric(&self) -> bool {
        !matches!(self, Cell::Text(_))
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Text(_) => None,
            Cell::Int(value) => Some(*value as f64),
            Cell::Num { value, .. } => Some(*value),
        }
    }

    /// Orders numbers numerically (before text), text lexically.
    pub fn compare(&self, other: &Cell) -> Ordering {
        match (self.as_f64(), other.as_f64()) {
            (Some(a), Some(b)) => a.total_cmp(&b),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => self.display().cmp(&other.display()),
        }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::Text(text.to_string())
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell::Text(text)
    }
}

impl From<i64> for Cell {
    fn from(value: i64) -> Cell {
        Cell::Int(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let mut table = Table::new(["Op", "Time (us)"]);
        table.push(vec![Cell::text("a,b"), Cell::num(1.5, 1)]);
        table.push(vec![Cell::text("c\"d"), Cell::num(20.04, 1)]);
        Report { tool: "t".into(), sections: vec![Section::new("S").note("n").with_table(table).main()] }
    }

    #[test]
    fn values_that_round_to_zero_read_zero_without_a_sign() {
        assert_eq!(Cell::num(-0.0, 0).display(), "0");
        assert_eq!(Cell::num(-0.0004, 3).display(), "0.000");
        assert_eq!(Cell::num(-0.0006, 3).display(), "-0.001");
        assert_eq!(Cell::num(-12.5, 1).display(), "-12.5");
    }

    #[test]
    fn csv_fields_are_quoted_only_when_they_must_be() {
        let field = |value: &str| {
            let mut out = String::new();
            push_csv_field(&mut out, value);
            out
        };
        assert_eq!(field("plain text"), "plain text");
        assert_eq!(field("a,\"b\""), "\"a,\"\"b\"\"\"");
        assert_eq!(field("line\nbreak"), "\"line\nbreak\"");
        assert_eq!(field("carriage\rreturn"), "\"carriage\rreturn\"");
    }

    #[test]
    fn csv_quotes_and_sorting_by_slug() {
        let mut report = sample();
        report.sort_main_table("time_us").expect("column exists");
        assert_eq!(report.to_csv().expect("main table"), "Op,Time (us)\n\"c\"\"d\",20.0\n\"a,b\",1.5\n");
        report.sort_main_table("Time (us):asc").expect("column exists");
        assert_eq!(report.main_table().expect("main table").rows[0][0], Cell::text("a,b"));
        let error = report.sort_main_table("nope").expect_err("no such column");
        assert_eq!(error, "no column \"nope\"; columns: Op, Time (us)");
        let without_main = Report { tool: "x".into(), sections: vec![Section::new("S")] };
        assert_eq!(without_main.to_csv(), None);
    }

    #[test]
    fn cells_are_strings_or_numbers_as_shown_in_json() {
        let cells = [Cell::text("a"), Cell::Int(7), Cell::num(20.04, 1), Cell::num(f64::NAN, 2)];
        let json = serde_json::to_string(&cells).expect("serializes");
        assert_eq!(json, r#"["a",7,20.0,null]"#);
    }

    #[test]
    fn sorts_numbers_numerically_and_finds_columns_by_slug() {
        let mut table = Table::new(["Op name", "Self time (us)"]);
        table.push(vec![Cell::text("a"), Cell::num(9.5, 1)]);
        table.push(vec![Cell::text("b"), Cell::num(10.25, 2)]);
        let index = table.column_index("self_time_us").expect("column by slug");
        table.sort_by_column(index, true);
        assert_eq!(table.rows[0][0], Cell::text("b"));
        assert_eq!(table.rows[0][1].display(), "10.25");
    }
}
