//! A minimal protobuf wire-format reader for the few XLA messages mlprof reads out of
//! an XSpace (`HloProto` in the `/host:metadata` plane).
//!
//! The one design decision to know: the reader never fails loudly. A truncated or
//! malformed message simply ends the field iteration, so a damaged HLO proto costs the
//! names and stacks it would have given, never the analysis. (The analysis crate reads
//! no files and depends on no protobuf library; `mlprof-formats` has its own decoder for
//! XSpace itself.)

/// One field value as it appears on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1 (little-endian).
    Fixed64(u64),
    /// Wire type 2: a string, bytes, a sub-message or a packed repeated field.
    Bytes(&'a [u8]),
    /// Wire type 5 (little-endian).
    Fixed32(u32),
}

impl<'a> Value<'a> {
    /// The payload of a length-delimited field.
    pub(crate) fn bytes(self) -> Option<&'a [u8]> {
        match self {
            Value::Bytes(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// A length-delimited field as UTF-8 text ("" when it is not valid UTF-8).
    pub(crate) fn text(self) -> &'a str {
        self.bytes().and_then(|b| std::str::from_utf8(b).ok()).unwrap_or("")
    }

    /// A varint field as a signed integer (protobuf `int64`/`int32` two's complement).
    pub(crate) fn int(self) -> Option<i64> {
        match self {
            Value::Varint(v) => Some(v as i64),
            _ => None,
        }
    }
}

/// Iterates over the `(field number, value)` pairs of one message.
#[derive(Clone, Debug)]
pub(crate) struct Fields<'a> {
    data: &'a [u8],
}

/// The fields of `message`.
pub(crate) fn fields(message: &[u8]) -> Fields<'_> {
    Fields { data: message }
}

impl<'a> Iterator for Fields<'a> {
    type Item = (u32, Value<'a>);

    fn next(&mut self) -> Option<(u32, Value<'a>)> {
        if self.data.is_empty() {
            return None;
        }
        let parsed = self.parse_one();
        if parsed.is_none() {
            self.data = &[];
        }
        parsed
    }
}

impl<'a> Fields<'a> {
    fn parse_one(&mut self) -> Option<(u32, Value<'a>)> {
        let key = read_varint(&mut self.data)?;
        let field = u32::try_from(key >> 3).ok()?;
        let value = match key & 7 {
            0 => Value::Varint(read_varint(&mut self.data)?),
            1 => Value::Fixed64(u64::from_le_bytes(take(&mut self.data, 8)?.try_into().ok()?)),
            2 => {
                let len = usize::try_from(read_varint(&mut self.data)?).ok()?;
                Value::Bytes(take(&mut self.data, len)?)
            }
            5 => Value::Fixed32(u32::from_le_bytes(take(&mut self.data, 4)?.try_into().ok()?)),
            _ => return None,
        };
        Some((field, value))
    }
}

/// The integers of a repeated `int64` field, whether packed (one length-delimited
/// value) or not (one varint per element): call it on each occurrence of the field.
pub(crate) fn push_ints(value: Value<'_>, out: &mut Vec<i64>) {
    match value {
        Value::Varint(v) => out.push(v as i64),
        Value::Bytes(mut packed) => {
            while !packed.is_empty() {
                match read_varint(&mut packed) {
                    Some(v) => out.push(v as i64),
                    None => break,
                }
            }
        }
        Value::Fixed64(_) | Value::Fixed32(_) => {}
    }
}

fn take<'a>(data: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    if data.len() < len {
        return None;
    }
    let (head, tail) = data.split_at(len);
    *data = tail;
    Some(head)
}

fn read_varint(data: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, &byte) in data.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *data = &data[i + 1..];
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Test encoder: a varint.
    pub(crate) fn varint(out: &mut Vec<u8>, mut v: u64) {
        loop {
            let byte = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }

    /// Test encoder: a varint field.
    pub(crate) fn int_field(out: &mut Vec<u8>, field: u32, v: i64) {
        varint(out, u64::from(field) << 3);
        varint(out, v as u64);
    }

    /// Test encoder: a length-delimited field.
    pub(crate) fn bytes_field(out: &mut Vec<u8>, field: u32, data: &[u8]) {
        varint(out, (u64::from(field) << 3) | 2);
        varint(out, data.len() as u64);
        out.extend_from_slice(data);
    }

    #[test]
    fn reads_each_wire_type_and_packed_ints() {
        let mut message = Vec::new();
        int_field(&mut message, 1, -3);
        bytes_field(&mut message, 2, b"dot.1");
        let mut packed = Vec::new();
        varint(&mut packed, 300);
        varint(&mut packed, 7);
        bytes_field(&mut message, 36, &packed);
        message.extend_from_slice(&[(3 << 3) | 5, 1, 0, 0, 0]);
        message.extend_from_slice(&[(4 << 3) | 1, 2, 0, 0, 0, 0, 0, 0, 0]);
        let parsed: Vec<_> = fields(&message).collect();
        assert_eq!(parsed[0], (1, Value::Varint(-3i64 as u64)));
        assert_eq!(parsed[0].1.int(), Some(-3));
        assert_eq!(parsed[1].1.text(), "dot.1");
        let mut ints = Vec::new();
        push_ints(parsed[2].1, &mut ints);
        push_ints(Value::Varint(9), &mut ints);
        assert_eq!(ints, [300, 7, 9]);
        assert_eq!(parsed[3], (3, Value::Fixed32(1)));
        assert_eq!(parsed[4], (4, Value::Fixed64(2)));
    }

    #[test]
    fn malformed_messages_end_the_iteration() {
        // A length beyond the end, an unfinished varint, an unknown wire type.
        assert_eq!(fields(&[(1 << 3) | 2, 10, 1]).count(), 0);
        assert_eq!(fields(&[8, 0x80]).count(), 0);
        assert_eq!(fields(&[8, 1, (2 << 3) | 3]).count(), 1);
        let mut ints = Vec::new();
        push_ints(Value::Bytes(&[0x80]), &mut ints);
        assert!(ints.is_empty());
    }
}
