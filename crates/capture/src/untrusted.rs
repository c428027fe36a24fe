//! Text and names that came from the network, made safe to print and to use in file
//! names. A profiler server is a peer, not a friend: its status messages, tool names and
//! error details may hold terminal escape sequences, carriage returns or bidirectional
//! overrides that would rewrite what the user sees, or path separators that would reach
//! outside the session directory.
//!
//! The one design decision to know: escaping happens where such text is shown (the
//! `Display` of [`crate::client::CaptureError`] and everything built on it) and the raw
//! text stays in the data, so a program using the library still sees what was sent.

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every character that could act on a terminal written as a visible escape:
/// C0 controls (incl. ESC, CR, LF, TAB) and DEL as `\x1b`-style escapes (`\r`, `\n`, `\t`
/// for the usual three), C1 controls, bidirectional overrides and isolates and the line
/// and paragraph separators as `\u{202e}`-style escapes. Borrowed when there is nothing to
/// escape.
pub fn display_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c if needs_escape(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`display_safe`] for text of several lines (a rendered report): line feeds stay line
/// feeds, everything else that [`display_safe`] escapes is escaped.
pub fn display_safe_lines(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && needs_escape(c)) {
        return Cow::Borrowed(text);
    }
    let lines: Vec<Cow<'_, str>> = text.split('\n').map(display_safe).collect();
    Cow::Owned(lines.join("\n"))
}

/// Whether `c` must not reach a terminal as it is.
fn needs_escape(c: char) -> bool {
    c.is_control() // C0, DEL and C1
        || matches!(c,
            '\u{061c}' // Arabic letter mark
            | '\u{200e}' | '\u{200f}' // left-to-right and right-to-left marks
            | '\u{202a}'..='\u{202e}' // embeddings and overrides
            | '\u{2066}'..='\u{2069}' // isolates
            | '\u{2028}' | '\u{2029}' // line and paragraph separators
        )
}

/// The longest name [`file_name_safe`] returns, in bytes (well below the 255 of most file
/// systems, leaving room for the `<host_port>.` before it).
pub const MAX_FILE_NAME_BYTES: usize = 128;

/// `name` made into a safe file name part: only ASCII letters, digits, `.`, `_`, `-` and
/// `+` are kept, anything else (path separators, controls, spaces, non-ASCII) becomes
/// `_`; a leading `.` and the second `.` of `..` become `_`, so no `..` remains; the result
/// is cut to [`MAX_FILE_NAME_BYTES`], and an empty name becomes `_`.
pub fn file_name_safe(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(MAX_FILE_NAME_BYTES));
    for c in name.chars() {
        if out.len() >= MAX_FILE_NAME_BYTES {
            break;
        }
        let keep = c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+');
        let dot_after_dot_or_first = c == '.' && (out.is_empty() || out.ends_with('.'));
        out.push(if keep && !dot_after_dot_or_first { c } else { '_' });
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{MAX_FILE_NAME_BYTES, display_safe, display_safe_lines, file_name_safe};
    use std::borrow::Cow;

    #[test]
    fn terminal_controls_become_visible_escapes() {
        assert!(matches!(display_safe("profiler busy: naïve ✓"), Cow::Borrowed(_)));
        assert_eq!(
            display_safe("\u{1b}[2J\u{1b}[31mFAKE: ok\r\nnext\tcol\u{7f}\0"),
            "\\x1b[2J\\x1b[31mFAKE: ok\\r\\nnext\\tcol\\x7f\\x00"
        );
        assert_eq!(display_safe("a\u{9b}31mb\u{85}"), "a\\u{9b}31mb\\u{85}", "C1 controls (CSI, NEL)");
        assert_eq!(display_safe("evil\u{202e}fdp.exe\u{2066}x\u{2069}"), "evil\\u{202e}fdp.exe\\u{2066}x\\u{2069}");
        assert_eq!(display_safe("a\u{2028}b\u{200f}"), "a\\u{2028}b\\u{200f}");
        for escaped in ["\u{1b}]0;title\u{7}", "\u{202d}", "\r"] {
            assert!(!display_safe(escaped).chars().any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)));
        }
    }

    #[test]
    fn reports_keep_their_lines() {
        assert!(matches!(display_safe_lines("a\nb\n"), Cow::Borrowed(_)));
        assert_eq!(display_safe_lines("op \u{1b}[2J\nnext\r\n"), "op \\x1b[2J\nnext\\r\n");
        assert_eq!(display_safe(&display_safe("\u{1b}\\x1b")), "\\x1b\\x1b", "escaping twice changes nothing");
    }

    #[test]
    fn file_names_keep_only_safe_characters() {
        assert_eq!(file_name_safe("trace.json.gz"), "trace.json.gz");
        assert_eq!(file_name_safe("overview_page.pb"), "overview_page.pb");
        assert_eq!(file_name_safe("../../etc/passwd"), "_._.__etc_passwd");
        assert_eq!(file_name_safe("a\u{1b}[2J\rb.pb"), "a__2J_b.pb");
        assert_eq!(file_name_safe("..."), "_._");
        assert_eq!(file_name_safe(".hidden"), "_hidden");
        assert_eq!(file_name_safe("a\\b/c\0d"), "a_b_c_d");
        assert_eq!(file_name_safe("naïve"), "na_ve");
        assert_eq!(file_name_safe(""), "_");
        assert_eq!(file_name_safe(&"x".repeat(1000)).len(), MAX_FILE_NAME_BYTES);
        for hostile in ["..", "../x", "a/../b", "\u{202e}gp.exe", "\n", "x..y", "/"] {
            let safe = file_name_safe(hostile);
            assert!(!safe.contains("..") && !safe.starts_with('.') && !safe.contains(['/', '\\']), "{hostile:?}");
            assert!(safe.chars().all(|c| c.is_ascii_graphic()), "{hostile:?}");
        }
    }
}
