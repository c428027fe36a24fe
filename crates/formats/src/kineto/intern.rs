//! Fast hashing and string interning for the Kineto reader.
//!
//! Interning a string that was seen before allocates nothing; a new one is copied, so
//! that the interner never reads the input again where it first saw a string (the
//! reader releases the input's pages as it goes, and comparing with a borrowed key
//! would fault them back in).

use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The rustc "Fx" hash: fast on short keys; no protection against crafted collisions,
/// which does not matter for a local profile reader.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word) ^ ((rest.len() as u64) << 59));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A `HashMap` with [`FxHasher`].
pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// Dense ids for strings, in first-seen order.
#[derive(Debug, Default)]
pub(crate) struct Interner<'de> {
    map: FxMap<Cow<'de, str>, u32>,
    list: Vec<Cow<'de, str>>,
}

impl<'de> Interner<'de> {
    /// The id of `s`, creating it on first use (only then is anything allocated).
    #[inline]
    pub fn intern(&mut self, s: Cow<'de, str>) -> Result<u32, TooMany> {
        if let Some(&id) = self.map.get(s.as_ref()) {
            return Ok(id);
        }
        let id = u32::try_from(self.list.len()).map_err(|_| TooMany)?;
        let owned: Cow<'de, str> = Cow::Owned(s.into_owned());
        self.list.push(owned.clone());
        self.map.insert(owned, id);
        Ok(id)
    }

    /// The string of an id ("" for an unknown id).
    pub fn get(&self, id: u32) -> &str {
        self.list.get(id as usize).map_or("", |s| s.as_ref())
    }

    /// Number of interned strings.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// The strings in id order.
    pub fn into_strings(self) -> Vec<Cow<'de, str>> {
        self.list
    }
}

/// More than `u32::MAX` distinct entries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TooMany;

/// A stable 63-bit FNV-1a hash (the line id of a string thread id).
pub(crate) fn fnv63(s: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h & (i64::MAX as u64)) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interner_reuses_ids() {
        let mut i = Interner::default();
        let a = i.intern(Cow::Borrowed("a")).unwrap();
        let b = i.intern(Cow::Owned("b".to_string())).unwrap();
        assert_eq!(i.intern(Cow::Borrowed("a")).unwrap(), a);
        assert_eq!(i.intern(Cow::Borrowed("b")).unwrap(), b);
        assert_eq!(i.get(b), "b");
        assert_eq!(i.len(), 2);
        assert_eq!(fnv63(""), (0xcbf2_9ce4_8422_2325_u64 & (i64::MAX as u64)) as i64);
    }
}
