//! Fixed-width little-endian columns read straight out of the index file's bytes.
//!
//! Every access is bounds-checked and never panics: an index past the end reads as the
//! type's zero. The file is validated when opened (lengths, cross references,
//! checksum), so a zero only ever shows up for a bug, not for bad input; the point is
//! that even then nothing reads outside the mapping.

use std::marker::PhantomData;

/// A fixed-width value stored little-endian.
pub(crate) trait Le: Copy + Default {
    /// Width in bytes.
    const SIZE: usize;
    /// Decodes from exactly `SIZE` bytes.
    fn decode(bytes: &[u8]) -> Self;
    /// Appends the encoding to `out`.
    fn encode(self, out: &mut Vec<u8>);
}

macro_rules! le_int {
    ($t:ty) => {
        impl Le for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn decode(bytes: &[u8]) -> Self {
                let mut raw = [0u8; std::mem::size_of::<$t>()];
                raw.copy_from_slice(&bytes[..Self::SIZE]);
                <$t>::from_le_bytes(raw)
            }
            fn encode(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    };
}

le_int!(u32);
le_int!(u64);
le_int!(i64);

/// A read-only column of `T` over a byte slice whose length is a multiple of `T::SIZE`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Col<'a, T> {
    bytes: &'a [u8],
    marker: PhantomData<T>,
}

impl<'a, T: Le> Col<'a, T> {
    /// The column stored in `bytes` (a trailing partial value is ignored).
    pub(crate) fn new(bytes: &'a [u8]) -> Col<'a, T> {
        let whole = bytes.len() - bytes.len() % T::SIZE;
        Col { bytes: &bytes[..whole], marker: PhantomData }
    }

    /// Number of values.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len() / T::SIZE
    }

    /// Value `i`, or `None` past the end.
    pub(crate) fn get(&self, i: usize) -> Option<T> {
        let from = i.checked_mul(T::SIZE)?;
        self.bytes.get(from..from.checked_add(T::SIZE)?).map(T::decode)
    }

    /// Value `i`, or zero past the end.
    pub(crate) fn at(&self, i: usize) -> T {
        self.get(i).unwrap_or_default()
    }

    /// The first index in `range` for which `pred` is false, assuming `pred` is true for
    /// a prefix of the range and false after it (as `slice::partition_point`).
    pub(crate) fn partition_point(&self, range: std::ops::Range<usize>, pred: impl Fn(T) -> bool) -> usize {
        let (mut lo, mut hi) = (range.start, range.end.min(self.len()));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(self.at(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// Appends a column of values to `out` in the file's encoding.
pub(crate) fn encode_all<T: Le>(values: &[T], out: &mut Vec<u8>) {
    out.reserve(values.len() * T::SIZE);
    for v in values {
        v.encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_out_of_range_reads_are_zero() {
        let mut bytes = Vec::new();
        encode_all(&[-5i64, 7, i64::MAX], &mut bytes);
        bytes.push(0xff);
        let col = Col::<i64>::new(&bytes);
        assert_eq!(col.len(), 3);
        assert_eq!(col.get(0), Some(-5));
        assert_eq!(col.at(2), i64::MAX);
        assert_eq!(col.get(3), None);
        assert_eq!(col.at(usize::MAX), 0);
        assert_eq!(col.partition_point(0..3, |v| v < 7), 1);
        assert_eq!(col.partition_point(0..10, |v| v < i64::MAX), 2);
    }
}
