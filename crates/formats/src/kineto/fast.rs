//! The fast path of the Kineto reader: one hand-written scan of an event object, for
//! the events written the way Kineto writes them.
//!
//! The one design decision to know: **the scanner reads a strict subset of JSON and
//! gives up on everything else**. It accepts an event only when every string in it is
//! free of backslash escapes, `ph`/`name`/`cat` are strings, `pid`/`tid` are strings
//! or integers that fit an `i64`, `ts`/`dur` are numbers [`parse_micros`] reads, and
//! nothing nests deeper than [`MAX_DEPTH`]; it validates the whole object (grammar,
//! and UTF-8 once over the event's bytes). For such an event serde_json would produce
//! exactly the same [`Fields`], so the result cannot depend on which of the two read
//! it; for any other event, valid or not, the caller reads it with serde, which also
//! reports the errors. What the scanner saves is serde's generic machinery: each byte
//! is looked at once, `args` are split into entries as they are scanned (serde reads
//! them as a raw value, then again as an object), and nothing is moved around.

use std::borrow::Cow;
use std::ops::Range;

use super::number::parse_micros;
use super::parse::{Args, Fields, Id};

/// Deepest nesting of arrays and objects inside an event (the event object itself
/// is level 1) that the scanner reads itself.
const MAX_DEPTH: usize = 16;

/// Where each field of the scanned event lies in the input.
#[derive(Default)]
struct Spans {
    ph: Option<Range<usize>>,
    name: Option<Range<usize>>,
    cat: Option<Range<usize>>,
    pid: Option<Scalar>,
    tid: Option<Scalar>,
    ts: Option<Range<usize>>,
    dur: Option<Range<usize>>,
    /// The raw `args` value, and whether it is an object split into `arg_entries`.
    args: Option<(Range<usize>, bool)>,
    arg_entries: Vec<(Range<usize>, Range<usize>)>,
    /// Other fields: key (between the quotes) and raw value.
    extras: Vec<(Range<usize>, Range<usize>)>,
}

/// A string (the text between its quotes) or a number.
#[derive(Clone)]
enum Scalar {
    Str(Range<usize>),
    Number(Range<usize>),
}

/// The scanner, with buffers reused from one event to the next.
#[derive(Default)]
pub(crate) struct Scanner {
    spans: Spans,
}

impl Scanner {
    /// Reads the event object that starts at `pos` into `fields` and returns the
    /// position just after it, or `None` when the event is not one the scanner reads
    /// (then `fields` holds no meaning and serde must read the event).
    pub fn event<'de>(&mut self, bytes: &'de [u8], pos: usize, fields: &mut Fields<'de>) -> Option<usize> {
        let end = self.scan(bytes, pos)?;
        // The scan checked the structure; this checks the bytes inside the strings.
        let text = std::str::from_utf8(bytes.get(pos..end)?).ok()?;
        let at = |range: &Range<usize>| text.get(range.start.checked_sub(pos)?..range.end.checked_sub(pos)?);
        let spans = &self.spans;
        fields.clear();
        if let Some(range) = &spans.ph {
            fields.ph = Some(Cow::Borrowed(at(range)?));
        }
        if let Some(range) = &spans.name {
            fields.name = Some(Cow::Borrowed(at(range)?));
        }
        if let Some(range) = &spans.cat {
            fields.cat = Some(Cow::Borrowed(at(range)?));
        }
        let id = |scalar: &Scalar| -> Option<Id<'de>> {
            match scalar {
                Scalar::Str(range) => Some(Id::Str(Cow::Borrowed(at(range)?))),
                // Only integers: serde reads other numbers through `f64`.
                Scalar::Number(range) => at(range)?.parse().ok().map(Id::Int),
            }
        };
        if let Some(scalar) = &spans.pid {
            fields.pid = Some(id(scalar)?);
        }
        if let Some(scalar) = &spans.tid {
            fields.tid = Some(id(scalar)?);
        }
        if let Some(range) = &spans.ts {
            fields.ts = Some(parse_micros(at(range)?).ok()?);
        }
        if let Some(range) = &spans.dur {
            let raw = at(range)?;
            fields.dur = Some((parse_micros(raw).ok()?, raw));
        }
        if let Some((range, split)) = &spans.args {
            let raw = at(range)?;
            fields.args = Some(if *split { Args::Entries(raw) } else { Args::Raw(raw) });
            for (key, value) in &spans.arg_entries {
                fields.arg_entries.push((at(key)?, at(value)?));
            }
        }
        for (key, value) in &spans.extras {
            fields.extras.push(Cow::Borrowed(at(key)?), at(value)?);
        }
        Some(end)
    }

    /// Scans the event object at `pos` into `self.spans`; the position after it.
    fn scan(&mut self, bytes: &[u8], pos: usize) -> Option<usize> {
        let spans = &mut self.spans;
        spans.ph = None;
        spans.name = None;
        spans.cat = None;
        spans.pid = None;
        spans.tid = None;
        spans.ts = None;
        spans.dur = None;
        spans.args = None;
        spans.arg_entries.clear();
        spans.extras.clear();
        let mut c = Cursor { bytes, at: pos };
        if !c.eat(b'{') {
            return None;
        }
        c.ws();
        if c.eat(b'}') {
            return Some(c.at);
        }
        loop {
            let key = c.string()?;
            c.ws();
            if !c.eat(b':') {
                return None;
            }
            c.ws();
            // As serde's visitor: a repeated field replaces the earlier one.
            match bytes.get(key.clone())? {
                b"ph" => spans.ph = Some(c.string()?),
                b"name" => spans.name = Some(c.string()?),
                b"cat" => spans.cat = Some(c.string()?),
                b"pid" => spans.pid = Some(c.scalar()?),
                b"tid" => spans.tid = Some(c.scalar()?),
                b"ts" => spans.ts = Some(c.number()?),
                b"dur" => spans.dur = Some(c.number()?),
                b"args" => {
                    spans.arg_entries.clear();
                    spans.args = Some(if c.peek() == Some(b'{') {
                        (c.object(2, Some(&mut spans.arg_entries))?, true)
                    } else {
                        (c.value(2)?, false)
                    });
                }
                _ => {
                    let value = c.value(2)?;
                    spans.extras.push((key, value));
                }
            }
            c.ws();
            if c.eat(b',') {
                c.ws();
            } else if c.eat(b'}') {
                return Some(c.at);
            } else {
                return None;
            }
        }
    }
}

/// A position in the input and the JSON grammar the scanner reads.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// Eight copies of `byte`.
const fn splat(byte: u8) -> u64 {
    u64::from_ne_bytes([byte; 8])
}

/// Whether one of the eight bytes of `word` ends or interrupts a plain string: `"`,
/// `\` or a control character (below 0x20). Exact for the question "any?".
fn has_string_special(word: u64) -> bool {
    let zero_byte = |x: u64| x.wrapping_sub(splat(0x01)) & !x & splat(0x80);
    let below_space = word.wrapping_sub(splat(0x20)) & !word & splat(0x80);
    (zero_byte(word ^ splat(b'"')) | zero_byte(word ^ splat(b'\\')) | below_space) != 0
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    /// Consumes `byte` if it is next.
    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        self.at += usize::from(found);
        found
    }

    /// Skips JSON whitespace.
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// A string without escapes: the range between its quotes.
    fn string(&mut self) -> Option<Range<usize>> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.at;
        loop {
            while let Some(word) = self.bytes.get(self.at..self.at + 8) {
                let word = u64::from_ne_bytes(word.try_into().ok()?);
                if has_string_special(word) {
                    break;
                }
                self.at += 8;
            }
            match self.peek()? {
                b'"' => {
                    let range = start..self.at;
                    self.at += 1;
                    return Some(range);
                }
                // An escape (left to serde) or a control character (invalid).
                b'\\' | 0..=0x1f => return None,
                _ => self.at += 1,
            }
        }
    }

    /// A JSON number.
    fn number(&mut self) -> Option<Range<usize>> {
        let start = self.at;
        self.eat(b'-');
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.') {
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(start..self.at)
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }

    /// At least one digit.
    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }

    /// A string or a number.
    fn scalar(&mut self) -> Option<Scalar> {
        if self.peek()? == b'"' { self.string().map(Scalar::Str) } else { self.number().map(Scalar::Number) }
    }

    /// `word` (`true`, `false`, `null`).
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.bytes.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// Any JSON value at nesting level `depth`: its raw range.
    fn value(&mut self, depth: usize) -> Option<Range<usize>> {
        let start = self.at;
        match self.peek()? {
            b'"' => {
                self.string()?;
            }
            b'-' | b'0'..=b'9' => {
                self.number()?;
            }
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            b'[' => {
                self.array(depth)?;
            }
            b'{' => {
                self.object(depth, None)?;
            }
            _ => return None,
        }
        Some(start..self.at)
    }

    /// An array at nesting level `depth`.
    fn array(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH || !self.eat(b'[') {
            return None;
        }
        self.ws();
        if self.eat(b']') {
            return Some(());
        }
        loop {
            self.value(depth + 1)?;
            self.ws();
            if self.eat(b',') {
                self.ws();
            } else {
                return self.eat(b']').then_some(());
            }
        }
    }

    /// An object at nesting level `depth`: its raw range; its entries (key between
    /// the quotes, raw value) go to `entries` when given.
    fn object(
        &mut self,
        depth: usize,
        mut entries: Option<&mut Vec<(Range<usize>, Range<usize>)>>,
    ) -> Option<Range<usize>> {
        let start = self.at;
        if depth > MAX_DEPTH || !self.eat(b'{') {
            return None;
        }
        self.ws();
        if self.eat(b'}') {
            return Some(start..self.at);
        }
        loop {
            let key = self.string()?;
            self.ws();
            if !self.eat(b':') {
                return None;
            }
            self.ws();
            let value = self.value(depth + 1)?;
            if let Some(entries) = entries.as_deref_mut() {
                entries.push((key, value));
            }
            self.ws();
            if self.eat(b',') {
                self.ws();
            } else if self.eat(b'}') {
                return Some(start..self.at);
            } else {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast read of `json` (one event), with what it consumed.
    fn fast(json: &str) -> Option<(usize, Fields<'_>)> {
        let mut fields = Fields::default();
        let end = Scanner::default().event(json.as_bytes(), 0, &mut fields)?;
        Some((end, fields))
    }

    #[test]
    fn kineto_events_are_read_and_everything_else_is_left_to_serde() {
        let event = r#"{"ph": "X", "cat": "kernel", "name": "k<1>", "pid": 0, "tid": "7", "ts": 1.5, "dur": 2,
            "args": {"grid": [4, 1, 1], "x": {"a": [true, null, -1e-3]}, "s": "v"}, "id": 3}, "#;
        let (end, fields) = fast(event).expect("a Kineto event");
        assert_eq!(&event[end..], ", ");
        assert_eq!(fields.name.as_deref(), Some("k<1>"));
        assert!(matches!(fields.tid, Some(Id::Str(Cow::Borrowed("7")))));
        assert!(
            matches!(fields.args, Some(Args::Entries(raw)) if raw.starts_with("{\"grid\"") && raw.ends_with("\"v\"}"))
        );
        let keys: Vec<&str> = fields.arg_entries.iter().map(|(key, _)| *key).collect();
        assert_eq!(keys, ["grid", "x", "s"]);
        assert_eq!(fields.arg_entries[1].1, r#"{"a": [true, null, -1e-3]}"#);
        assert_eq!(fields.extras.iter().collect::<Vec<_>>(), [("id", "3")]);
        for other in [
            r#"{"name": "a\"b"}"#,
            r#"{"name": 1}"#,
            r#"{"pid": 1.0}"#,
            r#"{"pid": 9223372036854775808}"#,
            r#"{"ts": "1"}"#,
            r#"{"ts": 1e30}"#,
            r#"{"args": {"a": 01}}"#,
            r#"{"args": {"a": [1,]}}"#,
            r#"{"args": {"a": tru}}"#,
            "{\"name\": \"a\u{1}\"}",
            r#"{"a": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]}"#,
            r#"{"ph": "X" "name": "a"}"#,
            r#"{"ph": "X",}"#,
        ] {
            assert!(fast(other).is_none(), "{other}");
        }
        let bad_utf8 = b"{\"name\": \"\xff\"}";
        assert!(Scanner::default().event(bad_utf8, 0, &mut Fields::default()).is_none());
    }

    #[test]
    fn string_specials_are_found_in_every_byte() {
        for special in [b'"', b'\\', 0x00, 0x1f] {
            for at in 0..8 {
                let mut word = [b'a'; 8];
                word[at] = special;
                assert!(has_string_special(u64::from_ne_bytes(word)), "{special} at {at}");
            }
        }
        assert!(!has_string_special(u64::from_ne_bytes(*b" ~\x7f\x80\xff/[]")));
    }
}
