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

use super::number::Micros;
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
    ts: Option<Micros>,
    dur: Option<(Range<usize>, Micros)>,
    /// The raw `args` value, and whether it is an object split into `arg_entries`.
    args: Option<(Range<usize>, bool)>,
    /// Key (between the quotes), raw value, and the value when it is an integer.
    arg_entries: Vec<(Range<usize>, Range<usize>, Option<i64>)>,
    /// Other fields: key (between the quotes) and raw value.
    extras: Vec<(Range<usize>, Range<usize>)>,
}

/// A string (the text between its quotes) or a number (its value when it is an
/// integer that fits an `i64`).
#[derive(Clone)]
enum Scalar {
    Str(Range<usize>),
    Number(Option<i64>),
}

/// A scanned JSON number.
struct Number {
    range: Range<usize>,
    negative: bool,
    /// The integer part, `None` beyond `u64`.
    integer: Option<u64>,
    /// The fraction digits.
    fraction: Option<Range<usize>>,
    exponent: bool,
}

impl Number {
    /// The value of an integer (no fraction or exponent) that fits an `i64`.
    fn as_i64(&self) -> Option<i64> {
        if self.fraction.is_some() || self.exponent {
            return None;
        }
        let magnitude = self.integer?;
        if self.negative { 0i64.checked_sub_unsigned(magnitude) } else { i64::try_from(magnitude).ok() }
    }
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
                Scalar::Number(value) => value.map(Id::Int),
            }
        };
        if let Some(scalar) = &spans.pid {
            fields.pid = Some(id(scalar)?);
        }
        if let Some(scalar) = &spans.tid {
            fields.tid = Some(id(scalar)?);
        }
        fields.ts = spans.ts;
        if let Some((range, micros)) = &spans.dur {
            fields.dur = Some((*micros, at(range)?));
        }
        if let Some((range, split)) = &spans.args {
            let raw = at(range)?;
            fields.args = Some(if *split { Args::Entries(raw) } else { Args::Raw(raw) });
            for (key, value, integer) in &spans.arg_entries {
                fields.arg_entries.push((at(key)?, at(value)?, *integer));
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
            if !c.separator(b':') {
                return None;
            }
            // As serde's visitor: a repeated field replaces the earlier one.
            match bytes.get(key.clone())? {
                b"ph" => spans.ph = Some(c.string()?),
                b"name" => spans.name = Some(c.string()?),
                b"cat" => spans.cat = Some(c.string()?),
                b"pid" => spans.pid = Some(c.scalar()?),
                b"tid" => spans.tid = Some(c.scalar()?),
                b"ts" => spans.ts = Some(c.micros()?.1),
                b"dur" => spans.dur = Some(c.micros()?),
                b"args" => {
                    spans.arg_entries.clear();
                    spans.args = Some(if c.peek() == Some(b'{') {
                        (c.args(&mut spans.arg_entries)?, true)
                    } else {
                        (c.value(2)?, false)
                    });
                }
                _ => {
                    let value = c.value(2)?;
                    spans.extras.push((key, value));
                }
            }
            if c.separator(b',') {
                continue;
            }
            if c.eat(b'}') {
                return Some(c.at);
            }
            return None;
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
    u64::from_le_bytes([byte; 8])
}

/// The high bit of each byte of the little-endian `word` that ends or interrupts a
/// plain string (`"`, `\\` or a control character below 0x20), and possibly of
/// bytes after such a byte (borrows propagate upwards): the lowest bit set, if any,
/// marks the first such byte exactly.
fn string_specials(word: u64) -> u64 {
    let zero_byte = |x: u64| x.wrapping_sub(splat(0x01)) & !x & splat(0x80);
    let below_space = word.wrapping_sub(splat(0x20)) & !word & splat(0x80);
    zero_byte(word ^ splat(b'"')) | zero_byte(word ^ splat(b'\\')) | below_space
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

    /// Whitespace, then `separator` (`:` or `,`) and the whitespace after it when
    /// `separator` is next (else `false`, after the first whitespace only). The
    /// separator and one space, as Kineto writes `": "` and `", "`, are taken in one
    /// comparison.
    fn separator(&mut self, separator: u8) -> bool {
        if self.bytes.get(self.at..self.at + 2) == Some(&[separator, b' ']) {
            self.at += 2;
        } else {
            self.ws();
            if !self.eat(separator) {
                return false;
            }
        }
        self.ws();
        true
    }

    /// A string without escapes: the range between its quotes.
    fn string(&mut self) -> Option<Range<usize>> {
        if !self.eat(b'"') {
            return None;
        }
        let start = self.at;
        loop {
            // Eight bytes at a time up to the first special byte.
            while let Some(word) = self.bytes.get(self.at..self.at + 8) {
                let specials = string_specials(u64::from_le_bytes(word.try_into().ok()?));
                if specials != 0 {
                    self.at += (specials.trailing_zeros() / 8) as usize;
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

    /// A JSON number: its parts, read as it is scanned.
    fn number(&mut self) -> Option<Number> {
        let start = self.at;
        let negative = self.eat(b'-');
        let integer = match self.peek()? {
            b'0' => {
                self.at += 1;
                Some(0)
            }
            b'1'..=b'9' => self.digits(),
            _ => return None,
        };
        let mut fraction = None;
        if self.eat(b'.') {
            let digits = self.at;
            self.some_digits()?;
            fraction = Some(digits..self.at);
        }
        let mut exponent = false;
        if let Some(b'e' | b'E') = self.peek() {
            exponent = true;
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(Number { range: start..self.at, negative, integer, fraction, exponent })
    }

    /// Digits from a non-zero one on: their value, `None` beyond `u64`.
    fn digits(&mut self) -> Option<u64> {
        let rest = self.bytes.get(self.at..).unwrap_or(&[]);
        let mut count = 0;
        let mut value = 0u64;
        for &byte in rest {
            let digit = byte.wrapping_sub(b'0');
            if digit > 9 {
                break;
            }
            // Exact for the first 19 digits, which always fit; longer numbers are
            // read again below.
            value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
            count += 1;
        }
        let digits = rest.get(..count)?;
        self.at += count;
        if count <= 19 {
            Some(value)
        } else {
            digits.iter().try_fold(0u64, |value, d| value.checked_mul(10)?.checked_add(u64::from(d - b'0')))
        }
    }

    /// A number of microseconds in plain decimal notation (what [`super::number::parse_micros`]
    /// reads it as); `None` for an exponent (left to serde) or a number too large.
    fn micros(&mut self) -> Option<(Range<usize>, Micros)> {
        let number = self.number()?;
        if number.exponent {
            return None;
        }
        // The first six fraction digits, as picoseconds; the rest are truncated.
        let mut frac_ps = 0;
        let mut digits = number.fraction.as_ref().map_or(&[][..], |range| &self.bytes[range.clone()]).iter();
        for _ in 0..6 {
            frac_ps = frac_ps * 10 + digits.next().map_or(0, |d| u64::from(d - b'0'));
        }
        let micros = Micros::from_magnitude(number.negative, number.integer?, frac_ps).ok()?;
        Some((number.range, micros))
    }

    /// At least one digit.
    fn some_digits(&mut self) -> Option<()> {
        let rest = self.bytes.get(self.at..).unwrap_or(&[]);
        let count = rest.iter().position(|b| !b.is_ascii_digit()).unwrap_or(rest.len());
        self.at += count;
        (count > 0).then_some(())
    }

    /// A string or a number.
    fn scalar(&mut self) -> Option<Scalar> {
        if self.peek()? == b'"' {
            self.string().map(Scalar::Str)
        } else {
            self.number().map(|number| Scalar::Number(number.as_i64()))
        }
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
                self.object(depth, |cursor| cursor.value(depth + 1), |_, _| {})?;
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
            if !self.separator(b',') {
                return self.eat(b']').then_some(());
            }
        }
    }

    /// The `args` object (nesting level 2): its raw range; its entries go to
    /// `entries`.
    fn args(&mut self, entries: &mut Vec<(Range<usize>, Range<usize>, Option<i64>)>) -> Option<Range<usize>> {
        self.object(
            2,
            |cursor| {
                if let Some(b'-' | b'0'..=b'9') = cursor.peek() {
                    let number = cursor.number()?;
                    let integer = number.as_i64();
                    Some((number.range, integer))
                } else {
                    Some((cursor.value(3)?, None))
                }
            },
            |key, (value, integer)| entries.push((key, value, integer)),
        )
    }

    /// An object at nesting level `depth`, each value read by `value` and handed to
    /// `entry` with its key (between the quotes): the object's raw range.
    fn object<T>(
        &mut self,
        depth: usize,
        mut value: impl FnMut(&mut Self) -> Option<T>,
        mut entry: impl FnMut(Range<usize>, T),
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
            if !self.separator(b':') {
                return None;
            }
            let read = value(self)?;
            entry(key, read);
            if self.separator(b',') {
                continue;
            }
            if self.eat(b'}') {
                return Some(start..self.at);
            }
            return None;
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
        let keys: Vec<&str> = fields.arg_entries.iter().map(|(key, _, _)| *key).collect();
        assert_eq!(keys, ["grid", "x", "s"]);
        assert_eq!(fields.arg_entries[1].1, r#"{"a": [true, null, -1e-3]}"#);
        assert_eq!(fields.dur.map(|(micros, raw)| (micros.whole, raw)), Some((2, "2")));
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
    fn numbers_read_while_scanned_equal_their_text_parsed() {
        use super::super::number::{Scalar, classify, parse_micros};
        for text in [
            "0",
            "-0",
            "7",
            "-7",
            "0.5",
            "-0.5",
            "63.813",
            "1712195495519695.8",
            "0.0000001",
            "-0.0000001",
            "123.4567891",
            "9223372036854775807",
            "-9223372036854775808",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999.5",
            "1e3",
            "-2.5E-1",
        ] {
            let number = || Cursor { bytes: text.as_bytes(), at: 0 };
            let micros = number().micros().map(|(range, micros)| (range.end, micros));
            let expected = parse_micros(text).ok().filter(|_| !text.contains(['e', 'E'])).map(|m| (text.len(), m));
            assert_eq!(micros, expected, "{text}");
            let integer = number().number().and_then(|n| n.as_i64());
            let classified = match classify(text) {
                Scalar::Int(v) => Some(v),
                _ => None,
            };
            assert_eq!(integer, classified, "{text}");
        }
    }

    #[test]
    fn the_first_string_special_byte_is_found_exactly() {
        let first = |word: [u8; 8]| match string_specials(u64::from_le_bytes(word)) {
            0 => None,
            specials => Some(specials.trailing_zeros() / 8),
        };
        for special in [b'"', b'\\', 0x00, 0x1f] {
            for at in 0..8 {
                let mut word = [b'a'; 8];
                word[at] = special;
                assert_eq!(first(word), Some(at as u32), "{special} at {at}");
                // Later specials, and bytes that borrow, do not hide the first one.
                word[7] = 0x00;
                assert_eq!(first(word), Some(at as u32), "{special} at {at}, 0 at 7");
            }
        }
        assert_eq!(first(*b"\x00\x01\x21\x22\x5b\x5c\x5d\x1f"), Some(0));
        assert_eq!(first(*b"\x21\x23\x5b\x5d\x20\x22\x00\x00"), Some(5));
        assert_eq!(first(*b" ~\x7f\x80\xff/[]"), None);
        // Words of bytes next to the special ones, against a byte-by-byte search.
        let bytes = [0x00, 0x01, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x5b, 0x5c, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff, b'a'];
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..100_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let word: [u8; 8] = std::array::from_fn(|i| bytes[((state >> (4 * i)) & 15) as usize]);
            let expected = word.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).map(|at| at as u32);
            assert_eq!(first(word), expected, "{word:?}");
        }
    }
}
