//! The rustc "Fx" hash for maps keyed by ids, small tuples and strings read from
//! profiles: much cheaper than the standard SipHash on such keys. It gives no
//! protection against crafted collisions, which does not matter for a local profile
//! reader. Strings longer than 64 bytes (C++ kernel names run to hundreds) are hashed
//! on their length and both ends only; equality always compares keys whole.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The rustc "Fx" hash: fast on short keys; no protection against crafted collisions,
/// which does not matter for a local profile reader.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

/// Strings longer than this are hashed on their length and their first and last
/// [`HASHED_END_BYTES`] bytes.
const FULLY_HASHED_BYTES: usize = 64;
/// See [`FULLY_HASHED_BYTES`].
const HASHED_END_BYTES: usize = 24;

impl FxHasher {
    #[inline]
    fn add_bytes(&mut self, bytes: &[u8]) {
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
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        match (bytes.get(..HASHED_END_BYTES), bytes.len().checked_sub(HASHED_END_BYTES).and_then(|at| bytes.get(at..)))
        {
            (Some(head), Some(tail)) if bytes.len() > FULLY_HASHED_BYTES => {
                self.add(bytes.len() as u64);
                self.add_bytes(head);
                self.add_bytes(tail);
            }
            _ => self.add_bytes(bytes),
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
pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A `HashSet` with [`FxHasher`].
pub type FxSet<T> = std::collections::HashSet<T, BuildHasherDefault<FxHasher>>;
