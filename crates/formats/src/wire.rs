//! A minimal, zero-copy protobuf wire-format decoder and encoder: mlprof's one
//! protobuf reader, for XSpace itself (`xspace::read`) and for the XLA programs an
//! XSpace carries (`HloProto`, decoded by `mlprof-analysis`).
//!
//! Decoding walks a byte slice field by field; length-delimited fields are returned as
//! sub-slices of the input (never copied) together with their absolute byte offset in
//! the file, so every error can say exactly where the data went wrong. Readers that
//! would rather lose the rest of a damaged message than fail ([`lenient_fields`], used
//! for HLO protos) stop at the first error instead.

/// A malformed-wire-data error at an absolute byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// Absolute byte offset in the decoded file.
    pub offset: u64,
    /// What was found and what was expected.
    pub message: String,
}

/// The payload of one field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WireValue<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1 (fixed64 / double).
    Fixed64(u64),
    /// Wire type 2: the bytes and the absolute offset where they start.
    Bytes(&'a [u8], u64),
    /// Wire type 5 (fixed32 / float).
    Fixed32(u32),
}

/// One decoded field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Field<'a> {
    /// The field number.
    pub number: u32,
    /// The payload.
    pub value: WireValue<'a>,
    /// Absolute offset of the field's tag.
    pub offset: u64,
}

/// Iterates over the fields of one message.
///
/// A reader may see more bytes than its message holds: a nested message read with
/// [`WireReader::message_field`] keeps its parent's buffer as `lookahead`, so that
/// varints near the end of a small message can still be decoded eight bytes at a time.
/// Every field, length and error stays bounded by the message, `data`.
pub struct WireReader<'a> {
    /// The buffer from its start to the end of this message.
    data: &'a [u8],
    /// The buffer from the same start to the end of the outermost message;
    /// `data` is a prefix of it.
    lookahead: &'a [u8],
    /// Read position, relative to the start of `data`.
    pos: usize,
    /// Absolute file offset of the start of `data`.
    base: u64,
    context: &'static str,
}

/// The high bit of every byte of a little-endian word: set while a varint continues.
const CONTINUATION_BITS: u64 = 0x8080_8080_8080_8080;

impl<'a> WireReader<'a> {
    /// A reader over `data`, which starts at absolute offset `base` of the file;
    /// `context` names the message for errors (`"XPlane"`).
    pub fn new(data: &'a [u8], base: u64, context: &'static str) -> WireReader<'a> {
        WireReader { data, lookahead: data, pos: 0, base, context }
    }

    #[cold]
    #[inline(never)]
    fn error(&self, at: usize, message: String) -> WireError {
        WireError { offset: self.base + at as u64, message: format!("in {}: {message}", self.context) }
    }

    /// Absolute file offset of the read position.
    #[inline]
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The byte at the read position (the first byte of the next field's tag), or
    /// `None` at the end of the message.
    #[inline(always)]
    pub fn peek_byte(&self) -> Option<u8> {
        self.data.get(self.pos).copied()
    }

    /// A base-128 varint at the read position. One-byte values (most tags, ids and
    /// small lengths) take the first branch; longer ones of up to eight bytes are
    /// decoded from one 64-bit load when eight bytes of the buffer follow.
    #[inline(always)]
    fn varint(&mut self) -> Result<u64, WireError> {
        let pos = self.pos;
        if let Some(&byte) = self.data.get(pos)
            && byte < 0x80
        {
            self.pos = pos + 1;
            return Ok(u64::from(byte));
        }
        if let Some(chunk) = self.lookahead.get(pos..).and_then(|rest| rest.first_chunk::<8>()) {
            let word = u64::from_le_bytes(*chunk);
            let stops = !word & CONTINUATION_BITS;
            // The lowest clear high bit ends the varint: bit 8k+7 for a (k+1)-byte one.
            let last_bit = stops.trailing_zeros();
            let len = (last_bit as usize + 1) / 8;
            if stops != 0 && pos + len <= self.data.len() {
                self.pos = pos + len;
                return Ok(gather_varint_bits(word & (u64::MAX >> (63 - last_bit))));
            }
        }
        self.long_varint()
    }

    /// A varint decoded byte by byte (nine or ten bytes, or near the end of the
    /// buffer), or the error for a truncated or overlong one.
    #[inline(never)]
    fn long_varint(&mut self) -> Result<u64, WireError> {
        let start = self.pos;
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let Some(byte) = self.peek_byte() else {
                return Err(self.error(start, "data ends inside a varint (truncated file?)".into()));
            };
            self.pos += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(value);
            }
        }
        Err(self.error(start, "varint longer than 10 bytes (not protobuf data?)".into()))
    }

    /// The next field, or `None` at the end of the message.
    #[inline(always)]
    pub fn next_field(&mut self) -> Result<Option<Field<'a>>, WireError> {
        if self.pos >= self.data.len() {
            return Ok(None);
        }
        let tag_pos = self.pos;
        let tag = self.varint()?;
        let number = u32::try_from(tag >> 3).unwrap_or(0);
        if number == 0 {
            return Err(
                self.error(tag_pos, format!("invalid field number 0 (tag {tag:#x}); expected a protobuf field tag"))
            );
        }
        let offset = self.base + tag_pos as u64;
        let value = match tag & 7 {
            0 => WireValue::Varint(self.varint()?),
            1 => WireValue::Fixed64(u64::from_le_bytes(self.take::<8>(tag_pos)?)),
            2 => {
                let (start, end) = self.length_delimited(number)?;
                WireValue::Bytes(&self.data[start..end], self.base + start as u64)
            }
            5 => WireValue::Fixed32(u32::from_le_bytes(self.take::<4>(tag_pos)?)),
            wire_type => {
                return Err(self.error(
                    tag_pos,
                    format!("field {number} has wire type {wire_type}, which protobuf does not use here; expected 0, 1, 2 or 5"),
                ));
            }
        };
        Ok(Some(Field { number, value, offset }))
    }

    /// Field `number` with wire type 0, whose one-byte tag `(number << 3) | 0` the
    /// caller has seen with [`WireReader::peek_byte`]: the same field
    /// [`WireReader::next_field`] returns, without re-dispatching on the tag.
    #[inline(always)]
    pub fn varint_field(&mut self, number: u32) -> Result<Field<'a>, WireError> {
        let offset = self.skip_tag(number, 0);
        Ok(Field { number, value: WireValue::Varint(self.varint()?), offset })
    }

    /// Field `number` with wire type 1 (one-byte tag seen with
    /// [`WireReader::peek_byte`]), like [`WireReader::varint_field`].
    #[inline(always)]
    pub fn fixed64_field(&mut self, number: u32) -> Result<Field<'a>, WireError> {
        let tag_pos = self.pos;
        let offset = self.skip_tag(number, 1);
        Ok(Field { number, value: WireValue::Fixed64(u64::from_le_bytes(self.take::<8>(tag_pos)?)), offset })
    }

    /// Field `number` with wire type 2 (one-byte tag seen with
    /// [`WireReader::peek_byte`]), like [`WireReader::varint_field`].
    #[inline(always)]
    pub fn bytes_field(&mut self, number: u32) -> Result<Field<'a>, WireError> {
        let offset = self.skip_tag(number, 2);
        let (start, end) = self.length_delimited(number)?;
        Ok(Field { number, value: WireValue::Bytes(&self.data[start..end], self.base + start as u64), offset })
    }

    /// Field `number` with wire type 2 (one-byte tag seen with
    /// [`WireReader::peek_byte`]) as a reader over the embedded message, which
    /// `context` names for errors. The reader shares this one's buffer.
    #[inline(always)]
    pub fn message_field(&mut self, number: u32, context: &'static str) -> Result<WireReader<'a>, WireError> {
        self.skip_tag(number, 2);
        let (start, end) = self.length_delimited(number)?;
        Ok(WireReader { data: &self.data[..end], lookahead: self.lookahead, pos: start, base: self.base, context })
    }

    /// Steps over a one-byte tag and returns its absolute offset.
    #[inline(always)]
    fn skip_tag(&mut self, number: u32, wire_type: u32) -> u64 {
        debug_assert_eq!(self.peek_byte().map(u32::from), Some((number << 3) | wire_type));
        let offset = self.offset();
        self.pos += 1;
        offset
    }

    /// Reads the length of a length-delimited field `number` and steps over its
    /// payload, returning the payload's `(start, end)` positions in the buffer.
    #[inline(always)]
    fn length_delimited(&mut self, number: u32) -> Result<(usize, usize), WireError> {
        let len_pos = self.pos;
        let len = self.varint()?;
        let available = (self.data.len() - self.pos) as u64;
        if len > available {
            return Err(self.error(
                len_pos,
                format!("field {number} declares {len} bytes but only {available} remain (truncated or corrupt file)"),
            ));
        }
        let start = self.pos;
        self.pos += len as usize;
        Ok((start, self.pos))
    }

    fn take<const N: usize>(&mut self, tag_pos: usize) -> Result<[u8; N], WireError> {
        let end = self.pos + N;
        let Some(bytes) = self.data.get(self.pos..end) else {
            return Err(self.error(tag_pos, format!("data ends inside a {N}-byte fixed field (truncated file?)")));
        };
        self.pos = end;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }
}

/// The value of a varint of at most eight bytes held in the low bytes of `word`
/// (little-endian, every byte past the varint zeroed): drops each byte's continuation
/// bit and packs the 7-bit groups together, pairwise, in three steps.
#[inline(always)]
fn gather_varint_bits(word: u64) -> u64 {
    let groups = word & 0x7f7f_7f7f_7f7f_7f7f;
    let pairs = (groups & 0x007f_007f_007f_007f) | ((groups & 0x7f00_7f00_7f00_7f00) >> 1);
    let quads = (pairs & 0x0000_3fff_0000_3fff) | ((pairs & 0x3fff_0000_3fff_0000) >> 2);
    (quads & 0x0000_0000_0fff_ffff) | ((quads & 0x0fff_ffff_0000_0000) >> 4)
}

impl<'a> Field<'a> {
    /// The field as an `int64`/`uint64`/`int32` varint (two's complement).
    #[inline]
    pub fn as_i64(&self) -> Result<i64, WireError> {
        match self.value {
            WireValue::Varint(v) => Ok(v as i64),
            _ => Err(self.type_error("a varint")),
        }
    }

    /// The field as a `uint64` varint.
    #[inline]
    pub fn as_u64(&self) -> Result<u64, WireError> {
        match self.value {
            WireValue::Varint(v) => Ok(v),
            _ => Err(self.type_error("a varint")),
        }
    }

    /// The field as a `double`.
    #[inline]
    pub fn as_f64(&self) -> Result<f64, WireError> {
        match self.value {
            WireValue::Fixed64(v) => Ok(f64::from_bits(v)),
            _ => Err(self.type_error("a 64-bit double")),
        }
    }

    /// The field as length-delimited bytes and their absolute offset.
    #[inline]
    pub fn as_bytes(&self) -> Result<(&'a [u8], u64), WireError> {
        match self.value {
            WireValue::Bytes(b, at) => Ok((b, at)),
            _ => Err(self.type_error("length-delimited bytes")),
        }
    }

    /// The field as a string (invalid UTF-8 is replaced, as lenient protobuf readers do).
    pub fn as_string(&self) -> Result<String, WireError> {
        let (bytes, _) = self.as_bytes()?;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    #[cold]
    #[inline(never)]
    fn type_error(&self, expected: &str) -> WireError {
        let found = match self.value {
            WireValue::Varint(_) => "a varint",
            WireValue::Fixed64(_) => "a 64-bit fixed value",
            WireValue::Bytes(..) => "length-delimited bytes",
            WireValue::Fixed32(_) => "a 32-bit fixed value",
        };
        WireError { offset: self.offset, message: format!("field {} is {found}; expected {expected}", self.number) }
    }
}

impl<'a> WireValue<'a> {
    /// The payload of a length-delimited field.
    #[inline]
    pub fn bytes(self) -> Option<&'a [u8]> {
        match self {
            WireValue::Bytes(bytes, _) => Some(bytes),
            _ => None,
        }
    }

    /// A length-delimited field as UTF-8 text ("" when it is not length-delimited or
    /// not valid UTF-8).
    #[inline]
    pub fn text(self) -> &'a str {
        self.bytes().and_then(|b| std::str::from_utf8(b).ok()).unwrap_or("")
    }

    /// A varint field as a signed integer (protobuf `int64`/`int32` two's complement).
    #[inline]
    pub fn int(self) -> Option<i64> {
        match self {
            WireValue::Varint(v) => Some(v as i64),
            _ => None,
        }
    }
}

/// Iterates over the `(field number, value)` pairs of one message and ends, without an
/// error, at the first malformed field ([`lenient_fields`]).
pub struct LenientFields<'a> {
    reader: WireReader<'a>,
}

/// The fields of `message`, read leniently: a truncated or malformed field ends the
/// iteration, so a damaged message costs what follows the damage, never the reader's
/// caller. Field offsets count from the start of `message`.
pub fn lenient_fields(message: &[u8]) -> LenientFields<'_> {
    LenientFields { reader: WireReader::new(message, 0, "message") }
}

impl<'a> Iterator for LenientFields<'a> {
    type Item = (u32, WireValue<'a>);

    fn next(&mut self) -> Option<(u32, WireValue<'a>)> {
        match self.reader.next_field() {
            Ok(Some(field)) => Some((field.number, field.value)),
            Ok(None) => None,
            Err(_) => {
                self.reader.pos = self.reader.data.len();
                None
            }
        }
    }
}

/// Appends the integers of a repeated `int64` field, whether packed (one
/// length-delimited value) or not (one varint per element): call it on each
/// occurrence of the field. A malformed packed payload ends at its last whole varint.
pub fn push_ints(value: WireValue<'_>, out: &mut Vec<i64>) {
    match value {
        WireValue::Varint(v) => out.push(v as i64),
        WireValue::Bytes(packed, at) => {
            let mut reader = WireReader::new(packed, at, "packed field");
            while reader.peek_byte().is_some() {
                match reader.varint() {
                    Ok(v) => out.push(v as i64),
                    Err(_) => break,
                }
            }
        }
        WireValue::Fixed64(_) | WireValue::Fixed32(_) => {}
    }
}

/// Appends protobuf wire data to a byte vector.
#[derive(Default)]
pub struct WireWriter {
    /// The encoded bytes so far.
    pub buf: Vec<u8>,
}

impl WireWriter {
    /// Appends a base-128 varint.
    #[inline]
    pub fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    /// Appends a field tag.
    #[inline]
    pub fn tag(&mut self, number: u32, wire_type: u8) {
        self.varint((u64::from(number) << 3) | u64::from(wire_type));
    }

    /// Appends an `int64` field, omitted when 0 (proto3 default).
    pub fn int64(&mut self, number: u32, v: i64) {
        if v != 0 {
            self.int64_always(number, v);
        }
    }

    /// Appends an `int64` field even when 0 (a oneof member, a map key).
    pub fn int64_always(&mut self, number: u32, v: i64) {
        self.tag(number, 0);
        self.varint(v as u64);
    }

    /// Appends a `uint64` field even when 0.
    pub fn uint64_always(&mut self, number: u32, v: u64) {
        self.tag(number, 0);
        self.varint(v);
    }

    /// Appends a `double` field even when 0.
    pub fn double_always(&mut self, number: u32, v: f64) {
        self.tag(number, 1);
        self.buf.extend_from_slice(&v.to_bits().to_le_bytes());
    }

    /// Appends a bytes/string field even when empty.
    pub fn bytes_always(&mut self, number: u32, v: &[u8]) {
        self.tag(number, 2);
        self.varint(v.len() as u64);
        self.buf.extend_from_slice(v);
    }

    /// Appends a bytes/string field, omitted when empty (proto3 default).
    pub fn bytes(&mut self, number: u32, v: &[u8]) {
        if !v.is_empty() {
            self.bytes_always(number, v);
        }
    }

    /// Appends a nested message produced by `fill` as a length-delimited field, using
    /// `scratch` (reused across calls) to encode it first.
    pub fn message(&mut self, number: u32, scratch: &mut WireWriter, fill: impl FnOnce(&mut WireWriter)) {
        scratch.buf.clear();
        fill(scratch);
        self.bytes_always(number, &scratch.buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let mut w = WireWriter::default();
        w.int64_always(1, -5);
        w.double_always(2, 1.5);
        w.bytes_always(3, b"abc");
        let mut r = WireReader::new(&w.buf, 100, "Test");
        let f = r.next_field().unwrap().unwrap();
        assert_eq!((f.number, f.as_i64().unwrap(), f.offset), (1, -5, 100));
        assert_eq!(r.next_field().unwrap().unwrap().as_f64().unwrap(), 1.5);
        let (b, at) = r.next_field().unwrap().unwrap().as_bytes().unwrap();
        assert_eq!((b, at), (&b"abc"[..], 100 + 11 + 9 + 2));
        assert!(r.next_field().unwrap().is_none());
    }

    #[test]
    fn truncation_and_bad_wire_types_are_located() {
        let mut w = WireWriter::default();
        w.bytes_always(3, b"abcdef");
        let cut = &w.buf[..5];
        let err = WireReader::new(cut, 10, "XPlane").next_field().unwrap_err();
        assert_eq!(err.offset, 11);
        assert!(err.message.contains("declares 6 bytes but only 3 remain"), "{}", err.message);
        let err = WireReader::new(&[0x0f], 0, "XSpace").next_field().unwrap_err();
        assert!(err.message.contains("wire type 7"), "{}", err.message);
        let err = WireReader::new(&[0x08, 0xff], 0, "XSpace").next_field().unwrap_err();
        assert!(err.message.contains("inside a varint"), "{}", err.message);
    }

    /// Every varint length from 1 to 10 bytes, decoded with and without eight bytes
    /// of buffer after it (the word-at-a-time and the byte-by-byte paths).
    #[test]
    fn varints_of_every_length_decode_on_both_paths() {
        let values = (0..64).map(|bit| 1u64 << bit).chain((0..64).map(|bit| (1u64 << bit) - 1)).chain([
            u64::MAX,
            0x0123_4567_89ab_cdef,
            (-1i64) as u64,
            (-2_000_000i64) as u64,
        ]);
        for value in values {
            let mut w = WireWriter::default();
            w.uint64_always(1, value);
            let exact = w.buf.clone();
            w.buf.extend_from_slice(&[0xff; 9]);
            for buf in [&exact[..], &w.buf[..]] {
                let mut r = WireReader::new(buf, 0, "Test");
                let end = exact.len();
                r.data = &buf[..end];
                let f = r.next_field().unwrap().unwrap();
                assert_eq!((f.number, f.as_u64().unwrap()), (1, value), "{buf:x?}");
                assert_eq!(r.pos, end);
                assert!(r.next_field().unwrap().is_none());
            }
        }
    }

    /// A nested reader sees its parent's buffer but stops at its own end: a varint
    /// running past it is truncated even though the buffer goes on.
    #[test]
    fn nested_messages_stop_at_their_end() {
        let mut inner = WireWriter::default();
        inner.int64(1, 300);
        inner.int64(2, -1);
        let mut outer = WireWriter::default();
        outer.bytes_always(4, &inner.buf);
        outer.int64(5, 1 << 40);
        let mut r = WireReader::new(&outer.buf, 50, "Outer");
        assert_eq!(r.peek_byte(), Some(0x22));
        let mut nested = r.message_field(4, "Inner").unwrap();
        assert_eq!(nested.offset(), 52);
        assert_eq!(nested.peek_byte(), Some(0x08));
        let f = nested.varint_field(1).unwrap();
        assert_eq!((f.number, f.as_i64().unwrap(), f.offset), (1, 300, 52));
        assert_eq!(nested.next_field().unwrap().unwrap().as_i64().unwrap(), -1);
        assert_eq!((nested.peek_byte(), nested.next_field().unwrap()), (None, None));
        assert_eq!(r.next_field().unwrap().unwrap().as_i64().unwrap(), 1 << 40);

        // Declare the inner message one byte short: its last varint is cut.
        let mut cut = outer.buf.clone();
        cut[1] -= 1;
        let mut r = WireReader::new(&cut, 50, "Outer");
        let mut nested = r.message_field(4, "Inner").unwrap();
        nested.next_field().unwrap();
        let err = nested.next_field().unwrap_err();
        assert_eq!(err.offset, 50 + 2 + 3 + 1);
        assert_eq!(err.message, "in Inner: data ends inside a varint (truncated file?)");

        // A length past the parent's end is reported by the parent, at the length.
        let mut r = WireReader::new(&outer.buf[..6], 50, "Outer");
        let err = r.message_field(4, "Inner").err().expect("the length runs past the end");
        assert_eq!(err.offset, 51);
        assert!(err.message.starts_with("in Outer: field 4 declares 14 bytes but only 4 remain"), "{}", err.message);
    }

    /// Test encoder: a varint.
    fn varint(out: &mut Vec<u8>, v: u64) {
        let mut w = WireWriter { buf: std::mem::take(out) };
        w.varint(v);
        *out = w.buf;
    }

    #[test]
    fn lenient_fields_read_each_wire_type_and_packed_ints() {
        let mut w = WireWriter::default();
        w.int64_always(1, -3);
        w.bytes_always(2, b"dot.1");
        let mut packed = Vec::new();
        varint(&mut packed, 300);
        varint(&mut packed, 7);
        w.bytes_always(36, &packed);
        let mut message = w.buf;
        message.extend_from_slice(&[(3 << 3) | 5, 1, 0, 0, 0]);
        message.extend_from_slice(&[(4 << 3) | 1, 2, 0, 0, 0, 0, 0, 0, 0]);
        let parsed: Vec<_> = lenient_fields(&message).collect();
        assert_eq!(parsed[0], (1, WireValue::Varint(-3i64 as u64)));
        assert_eq!(parsed[0].1.int(), Some(-3));
        assert_eq!(parsed[1].1.text(), "dot.1");
        let mut ints = Vec::new();
        push_ints(parsed[2].1, &mut ints);
        push_ints(WireValue::Varint(9), &mut ints);
        assert_eq!(ints, [300, 7, 9]);
        assert_eq!(parsed[3], (3, WireValue::Fixed32(1)));
        assert_eq!(parsed[4], (4, WireValue::Fixed64(2)));
    }

    #[test]
    fn malformed_messages_end_the_lenient_iteration() {
        // A length beyond the end, an unfinished varint, an unknown wire type.
        assert_eq!(lenient_fields(&[(1 << 3) | 2, 10, 1]).count(), 0);
        assert_eq!(lenient_fields(&[8, 0x80]).count(), 0);
        assert_eq!(lenient_fields(&[8, 1, (2 << 3) | 3]).count(), 1);
        let mut ints = Vec::new();
        push_ints(WireValue::Bytes(&[0x80], 0), &mut ints);
        assert!(ints.is_empty());
    }

    /// The one-byte-tag readers return exactly what `next_field` returns.
    #[test]
    fn known_tag_readers_match_next_field() {
        let mut w = WireWriter::default();
        w.int64_always(3, -7);
        w.double_always(2, 2.5);
        w.bytes_always(5, b"text");
        let mut generic = WireReader::new(&w.buf, 9, "Test");
        let mut known = WireReader::new(&w.buf, 9, "Test");
        assert_eq!(generic.next_field().unwrap(), Some(known.varint_field(3).unwrap()));
        assert_eq!(generic.next_field().unwrap(), Some(known.fixed64_field(2).unwrap()));
        assert_eq!(generic.next_field().unwrap(), Some(known.bytes_field(5).unwrap()));
        assert_eq!((generic.pos, known.pos), (w.buf.len(), w.buf.len()));
        let mut cut = WireReader::new(&w.buf[..14], 0, "Test");
        cut.varint_field(3).unwrap();
        let err = cut.fixed64_field(2).unwrap_err();
        assert_eq!(
            (err.offset, err.message.as_str()),
            (11, "in Test: data ends inside a 8-byte fixed field (truncated file?)")
        );
    }
}
