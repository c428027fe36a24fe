//! A minimal, zero-copy protobuf wire-format decoder and encoder.
//!
//! Decoding walks a byte slice field by field; length-delimited fields are returned as
//! sub-slices of the input (never copied) together with their absolute byte offset in
//! the file, so every error can say exactly where the data went wrong.

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
pub struct WireReader<'a> {
    data: &'a [u8],
    pos: usize,
    base: u64,
    context: &'static str,
}

impl<'a> WireReader<'a> {
    /// A reader over `data`, which starts at absolute offset `base` of the file;
    /// `context` names the message for errors (`"XPlane"`).
    pub fn new(data: &'a [u8], base: u64, context: &'static str) -> WireReader<'a> {
        WireReader { data, pos: 0, base, context }
    }

    #[cold]
    #[inline(never)]
    fn error(&self, at: usize, message: String) -> WireError {
        WireError { offset: self.base + at as u64, message: format!("in {}: {message}", self.context) }
    }

    /// A base-128 varint at the read position; one-byte values (most tags, ids and
    /// small lengths) take the first branch.
    #[inline(always)]
    fn varint(&mut self) -> Result<u64, WireError> {
        match self.data.get(self.pos) {
            Some(&byte) if byte < 0x80 => {
                self.pos += 1;
                Ok(u64::from(byte))
            }
            _ => self.long_varint(),
        }
    }

    /// A varint of two or more bytes, or the error for a truncated or overlong one.
    #[inline(never)]
    fn long_varint(&mut self) -> Result<u64, WireError> {
        let start = self.pos;
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.data.get(self.pos) else {
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
                let len_pos = self.pos;
                let len = self.varint()?;
                let available = (self.data.len() - self.pos) as u64;
                if len > available {
                    return Err(self.error(
                        len_pos,
                        format!(
                            "field {number} declares {len} bytes but only {available} remain (truncated or corrupt file)"
                        ),
                    ));
                }
                let start = self.pos;
                self.pos += len as usize;
                WireValue::Bytes(&self.data[start..self.pos], self.base + start as u64)
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
}
