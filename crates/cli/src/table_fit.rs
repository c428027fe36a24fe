//! Fitting a table to a terminal's width: which columns to show, how wide each is and
//! whether headers take two lines, so that no line wraps.
//!
//! The rules, in the order they apply:
//! - a column that repeats another in every row is shown once (PyTorch's op type is its
//!   name);
//! - numeric headers wider than their numbers take two lines (`Total self-time` over `(us)`);
//! - text columns (op and kernel names) are shortened in the middle — both ends of a
//!   name carry meaning — down to [`MIN_TEXT_WIDTH`] characters, the most important
//!   keeping the most; numbers are never shortened, a cut number would lie;
//! - when even that does not fit, the least important columns are left out (the table's
//!   key columns first, then the rest in table order), the first key column never;
//! - the columns shown lead with the key columns, in their order, then the rest in table
//!   order, so a table starts with what answers its question (as the UI shows it).
//!
//! Full values are always in `--format csv` and `json`; the renderer says what it left out.

/// The narrowest a text column is shortened to, in characters.
pub const MIN_TEXT_WIDTH: usize = 16;

/// The width a key text column (the op or kernel name) keeps while columns that are not
/// key columns can be left out instead, in characters.
pub const KEY_TEXT_WIDTH: usize = 40;

/// Spaces between two columns.
pub const COLUMN_GAP: usize = 2;

/// The marker of shortened text.
const ELLIPSIS: char = '…';

/// The columns of a table the way they fit.
#[derive(Debug, PartialEq)]
pub struct Fit {
    /// The columns shown, by index in the table: the key columns first, then table order.
    pub shown: Vec<usize>,
    /// Each shown column's width in characters (parallel to `shown`).
    pub widths: Vec<usize>,
    /// Whether headers take two lines.
    pub two_line_headers: bool,
    /// Columns left out for the width, by index.
    pub dropped: Vec<usize>,
    /// Columns left out because they repeat another in every row: (left out, kept).
    pub repeated: Vec<(usize, usize)>,
}

/// A table's cells as text, what the fitter looks at.
pub struct Cells<'a> {
    /// Column headers.
    pub header: &'a [String],
    /// Rows of cell text, each as long as `header`: the rows shown.
    pub rows: &'a [Vec<String>],
    /// Every row of the table (the shown ones first): a column repeats another only if it
    /// does in all of them.
    pub all_rows: &'a [Vec<String>],
    /// Whether each column holds numbers (right-aligned, never shortened).
    pub numeric: &'a [bool],
    /// Column indices, most important first; columns not listed come after, in table order.
    pub key_columns: &'a [usize],
}

/// How `cells` fit in `width` characters (`None`: no limit, every column at its full width).
pub fn fit(cells: &Cells<'_>, width: Option<usize>) -> Fit {
    let count = cells.header.len();
    let importance = importance(cells.key_columns, count);
    let repeated = repeated_columns(cells, &importance);
    let visible: Vec<usize> = (0..count).filter(|c| !repeated.iter().any(|(left, _)| left == c)).collect();
    let value_width = |c: usize| cells.rows.iter().map(|r| r.get(c).map_or(0, |v| chars(v))).max().unwrap_or(0);
    let one_line: Vec<usize> = (0..count).map(|c| value_width(c).max(chars(&cells.header[c]))).collect();
    let whole = |widths: &[usize]| {
        Fit {
            widths: visible.iter().map(|&c| widths[c]).collect(),
            shown: visible.clone(),
            two_line_headers: false,
            dropped: Vec::new(),
            repeated: repeated.clone(),
        }
        .key_columns_first(&importance)
    };
    let Some(width) = width else {
        return whole(&one_line);
    };
    if total(&visible, &one_line) <= width {
        return whole(&one_line);
    }
    let two_lines: Vec<usize> =
        (0..count).map(|c| value_width(c).max(two_line_header_width(&cells.header[c]))).collect();
    let two_line_headers = total(&visible, &two_lines) < total(&visible, &one_line);
    let natural = if two_line_headers { two_lines } else { one_line };
    let numeric = |c: usize| cells.numeric.get(c).copied().unwrap_or(false);
    let least = |c: usize| if numeric(c) { natural[c] } else { natural[c].min(MIN_TEXT_WIDTH) };
    let minimal: Vec<usize> = (0..count).map(least).collect();
    let key = |c: usize| importance[c] < cells.key_columns.len();
    let comfortable: Vec<usize> =
        (0..count).map(|c| if key(c) && !numeric(c) { natural[c].min(KEY_TEXT_WIDTH) } else { minimal[c] }).collect();
    let mut shown = visible.clone();
    let mut dropped = Vec::new();
    // Other columns make way for readable key names first; then, if need be, key columns
    // too, names at their narrowest.
    for (widths, only_others) in [(&comfortable, true), (&minimal, false)] {
        while shown.len() > 1 && total(&shown, widths) > width {
            let candidates = (0..shown.len()).filter(|&p| !(only_others && key(shown[p])));
            let Some(position) = candidates.max_by_key(|&p| importance[shown[p]]) else { break };
            dropped.push(shown.remove(position));
        }
    }
    dropped.sort_unstable();
    let budget = width.saturating_sub(COLUMN_GAP * shown.len().saturating_sub(1));
    let widths = text_widths(&shown, &natural, &minimal, &importance, &numeric, budget);
    Fit { shown, widths, two_line_headers, dropped, repeated }.key_columns_first(&importance)
}

impl Fit {
    /// The shown columns (with their widths) ordered by `importance`: key columns first.
    fn key_columns_first(mut self, importance: &[usize]) -> Fit {
        let mut pairs: Vec<(usize, usize)> = self.shown.iter().copied().zip(self.widths.iter().copied()).collect();
        pairs.sort_by_key(|&(column, _)| importance[column]);
        (self.shown, self.widths) = pairs.into_iter().unzip();
        self
    }
}

/// Each column's rank: its position among the key columns, then the rest in table order.
fn importance(key_columns: &[usize], count: usize) -> Vec<usize> {
    let mut rank: Vec<usize> = (0..count).map(|c| key_columns.len() + c).collect();
    for (position, &column) in key_columns.iter().enumerate() {
        if let Some(slot) = rank.get_mut(column) {
            *slot = position;
        }
    }
    rank
}

/// Text columns equal to a more important text column in every one of at least two
/// rows: (left out, kept). Numbers that happen to be equal (a kernel's time and self time)
/// are still two facts.
fn repeated_columns(cells: &Cells<'_>, importance: &[usize]) -> Vec<(usize, usize)> {
    let mut repeated: Vec<(usize, usize)> = Vec::new();
    if cells.all_rows.len() < 2 {
        return repeated;
    }
    let count = cells.header.len();
    let text = |c: usize| !cells.numeric.get(c).copied().unwrap_or(false);
    for column in (0..count).filter(|&c| text(c)) {
        let more_important =
            |other: &usize| *other != column && text(*other) && importance[*other] < importance[column];
        let kept = (0..count).filter(more_important).find(|&other| {
            !repeated.iter().any(|(left, _)| *left == other)
                && cells.all_rows.iter().all(|row| row.get(other) == row.get(column))
        });
        if let Some(kept) = kept {
            repeated.push((column, kept));
        }
    }
    repeated
}

/// The width of each shown column within `budget` (the line less the gaps): numbers at
/// their width, text columns from their narrowest up, the most important first — first
/// each up to [`KEY_TEXT_WIDTH`], then each up to its longest value.
fn text_widths(
    shown: &[usize],
    natural: &[usize],
    minimal: &[usize],
    importance: &[usize],
    numeric: &dyn Fn(usize) -> bool,
    budget: usize,
) -> Vec<usize> {
    let mut widths: Vec<usize> = shown.iter().map(|&c| if numeric(c) { natural[c] } else { minimal[c] }).collect();
    let mut left = budget.saturating_sub(widths.iter().sum());
    let mut by_importance: Vec<usize> = (0..shown.len()).filter(|&p| !numeric(shown[p])).collect();
    by_importance.sort_by_key(|&p| importance[shown[p]]);
    for cap in [KEY_TEXT_WIDTH, usize::MAX] {
        for &position in &by_importance {
            let wanted = natural[shown[position]].min(cap).saturating_sub(widths[position]);
            let granted = wanted.min(left);
            widths[position] += granted;
            left -= granted;
        }
    }
    widths
}

/// The width of the columns with the gaps between them.
fn total(columns: &[usize], widths: &[usize]) -> usize {
    columns.iter().map(|&c| widths[c]).sum::<usize>() + COLUMN_GAP * columns.len().saturating_sub(1)
}

/// A header split at one space into two lines as even as can be.
pub fn split_header(header: &str) -> (&str, &str) {
    header
        .match_indices(' ')
        .map(|(at, _)| (&header[..at], &header[at + 1..]))
        .min_by_key(|(first, second)| chars(first).max(chars(second)))
        .unwrap_or((header, ""))
}

/// The width of a header on two lines.
fn two_line_header_width(header: &str) -> usize {
    let (first, second) = split_header(header);
    chars(first).max(chars(second))
}

/// `text` in at most `width` characters, shortened in the middle with `…`.
pub fn shorten_middle(text: &str, width: usize) -> String {
    let length = chars(text);
    if length <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let kept = width - 1;
    let head = kept.div_ceil(2);
    let tail = kept - head;
    let mut out: String = text.chars().take(head).collect();
    out.push(ELLIPSIS);
    out.extend(text.chars().skip(length - tail));
    out
}

/// `text` in at most `width` characters, shortened at the end with `…` (headers).
pub fn shorten_end(text: &str, width: usize) -> String {
    if chars(text) <= width {
        return text.to_string();
    }
    let mut out: String = text.chars().take(width.saturating_sub(1)).collect();
    if width > 0 {
        out.push(ELLIPSIS);
    }
    out
}

/// `text` wrapped at spaces into lines of at most `width` characters (a word longer than
/// the line stays whole on its own line).
pub fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        if !line.is_empty() && chars(&line) + 1 + chars(word) > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
}

/// The length of `text` in characters (what a terminal shows for the text mlprof prints).
pub fn chars(text: &str) -> usize {
    text.chars().count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| v.to_string()).collect()
    }

    fn table(header: &[&str], rows: &[&[&str]]) -> (Vec<String>, Vec<Vec<String>>) {
        (strings(header), rows.iter().map(|r| strings(r)).collect())
    }

    #[test]
    fn a_table_that_fits_is_left_whole() {
        let (header, rows) = table(&["Op", "Time (us)"], &[&["matmul", "20.0"], &["add", "1.5"]]);
        let cells = Cells { header: &header, rows: &rows, all_rows: &rows, numeric: &[false, true], key_columns: &[] };
        let fit = fit(&cells, Some(80));
        assert_eq!(fit.shown, vec![0, 1]);
        assert_eq!(fit.widths, vec![6, 9]);
        assert!(!fit.two_line_headers && fit.dropped.is_empty());
    }

    #[test]
    fn names_are_shortened_numbers_never_and_headers_take_two_lines() {
        let long = "x".repeat(200);
        let (header, rows) = table(&["Kernel name", "Total duration (us)"], &[&[&long, "123456.7"], &["short", "1.0"]]);
        let cells = Cells { header: &header, rows: &rows, all_rows: &rows, numeric: &[false, true], key_columns: &[] };
        let fit = fit(&cells, Some(40));
        assert!(fit.two_line_headers);
        assert_eq!(fit.widths[1], 13, "'Total' over 'duration (us)'");
        assert_eq!(fit.widths[0] + COLUMN_GAP + fit.widths[1], 40);
    }

    #[test]
    fn the_most_important_name_gets_the_room_first() {
        let (kernel, op) = ("k".repeat(80), "o".repeat(80));
        let (header, rows) =
            table(&["Op name", "Kernel name", "Time"], &[&[&op, &kernel, "1.0"], &[&op, &kernel, "2.0"]]);
        let cells = Cells {
            header: &header,
            rows: &rows,
            all_rows: &rows,
            numeric: &[false, false, true],
            key_columns: &[1, 2, 0],
        };
        let fit = fit(&cells, Some(70));
        assert_eq!(fit.shown, vec![1, 2, 0], "key columns lead, in their order");
        // The kernel name up to KEY_TEXT_WIDTH first, the op name gets what is left.
        assert_eq!(fit.widths, vec![KEY_TEXT_WIDTH, 4, 70 - 4 - 4 - KEY_TEXT_WIDTH]);
    }

    #[test]
    fn columns_are_dropped_least_important_first_and_never_the_first_key() {
        let (header, rows) = table(
            &["Rank", "Operation", "Occurrences", "Self-time (us)"],
            &[&["1", "aten::mm", "3", "10.0"], &["2", "aten::add", "7", "2.0"]],
        );
        let numeric = [true, false, true, true];
        let cells = Cells { header: &header, rows: &rows, all_rows: &rows, numeric: &numeric, key_columns: &[1, 3] };
        let narrow = fit(&cells, Some(24));
        assert_eq!(narrow.shown, vec![1, 3], "Rank and Occurrences go first");
        assert_eq!(narrow.dropped, vec![0, 2]);
        let tiny = fit(&cells, Some(3));
        assert_eq!(tiny.shown, vec![1], "the first key column stays");
    }

    #[test]
    fn a_column_repeating_another_is_shown_once() {
        let (header, rows) =
            table(&["Type", "Operation", "Time"], &[&["aten::mm", "aten::mm", "1"], &["aten::add", "aten::add", "2"]]);
        let cells =
            Cells { header: &header, rows: &rows, all_rows: &rows, numeric: &[false, false, true], key_columns: &[1] };
        let fit = fit(&cells, None);
        assert_eq!(fit.shown, vec![1, 2]);
        assert_eq!(fit.repeated, vec![(0, 1)]);
        let (header, one) = table(&["Type", "Operation"], &[&["a", "a"]]);
        let single = Cells { header: &header, rows: &one, all_rows: &one, numeric: &[false, false], key_columns: &[] };
        assert!(super::fit(&single, None).repeated.is_empty(), "one row proves nothing");
    }

    #[test]
    fn text_is_shortened_in_the_middle_and_wrapped_at_spaces() {
        assert_eq!(shorten_middle("void at::native::kernel<float>", 12), "void a…loat>");
        assert_eq!(chars(&shorten_middle("void at::native::kernel<float>", 12)), 12);
        assert_eq!(shorten_middle("short", 12), "short");
        assert_eq!(shorten_end("Occurrences", 6), "Occur…");
        assert_eq!(split_header("Total self-time (us)"), ("Total", "self-time (us)"));
        assert_eq!(split_header("Rank"), ("Rank", ""));
        assert_eq!(wrap_words("one two three four", 9), vec!["one two", "three", "four"]);
        assert_eq!(wrap_words("", 9), vec![""]);
    }
}
