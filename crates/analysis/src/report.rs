//! The neutral, render-ready shape of a tool's result: titled sections, each with
//! sentences and at most one table of typed cells. Tools build a [`Report`]; the CLI
//! turns it into aligned text tables or CSV, the web UI into HTML.
//!
//! The one design decision to know: cells keep their numeric value next to the text
//! a person reads, so any column sorts correctly (numbers as numbers) in every view.

use std::cmp::Ordering;

use serde::Serialize;

/// A tool's result laid out for people.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// The tool's name (`overview_page`, …).
    pub tool: String,
    /// Sections in reading order.
    pub sections: Vec<Section>,
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
}

impl Table {
    /// An empty table with these headers.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = S>) -> Table {
        Table { columns: columns.into_iter().map(Into::into).collect(), rows: Vec::new() }
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

/// One table cell.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
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
        #[serde(skip)]
        decimals: u8,
    },
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

    /// What a person reads.
    pub fn display(&self) -> String {
        match self {
            Cell::Text(text) => text.clone(),
            Cell::Int(value) => value.to_string(),
            Cell::Num { value, decimals } => format!("{value:.*}", *decimals as usize),
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
