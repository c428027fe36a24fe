//! The rustc "Fx" hash for maps keyed by ids, small tuples and strings read from
//! profiles: much cheaper than the standard SipHash on such keys. It gives no
//! protection against crafted collisions, which does not matter for a local profile
//! reader. Strings are hashed whole, eight bytes a step, and the final value is rotated
//! so that its well-mixed high bits land in the low bits a hash table indexes by
//! (as rustc-hash 2 does): without that, keys that share their low bytes — names such as
//! `n0`…`n999999`, addresses aligned to 512 bytes — fall into a few buckets and
//! building a table of them turns quadratic.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The rustc "Fx" hash: fast on short keys; no protection against crafted collisions,
/// which does not matter for a local profile reader.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// How far [`FxHasher::finish`] rotates the state left (rustc-hash 2's choice for 64 bits).
const FINISH_ROTATION: u32 = 26;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

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
        self.add_bytes(bytes);
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
        // The multiply leaves the low bits depending on the low input bits only.
        self.hash.rotate_left(FINISH_ROTATION)
    }
}

/// A `HashMap` with [`FxHasher`].
pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A `HashSet` with [`FxHasher`].
pub type FxSet<T> = std::collections::HashSet<T, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// How many of `keys` fall into distinct buckets of a table with `2^bits` buckets
    /// indexed by the low bits of the hash, as hashbrown indexes.
    fn distinct_buckets<K: std::hash::Hash>(keys: impl Iterator<Item = K>, bits: u32) -> usize {
        let build = BuildHasherDefault::<FxHasher>::default();
        let mask = (1u64 << bits) - 1;
        keys.map(|k| build.hash_one(k) & mask).collect::<std::collections::HashSet<_>>().len()
    }

    #[test]
    fn short_names_that_share_their_first_bytes_spread_over_the_buckets() {
        // 65,536 names `n0`…: uniform hashing fills about 63 % of 65,536 buckets.
        let filled = distinct_buckets((0..65_536).map(|i| format!("n{i}")), 16);
        assert!(filled > 36_000, "{filled} of 65,536 buckets");
    }

    #[test]
    fn long_names_that_differ_only_in_the_middle_spread_over_the_buckets() {
        let name = |i: u32| format!("{}{i}{}", "void kernel<float, 128>(".repeat(4), ")".repeat(40));
        let filled = distinct_buckets((0..65_536).map(name), 16);
        assert!(filled > 36_000, "{filled} of 65,536 buckets");
    }

    #[test]
    fn aligned_addresses_spread_over_the_buckets() {
        let filled = distinct_buckets((0..65_536u64).map(|i| 0x7f00_0000_0000 + i * 512), 16);
        assert!(filled > 36_000, "{filled} of 65,536 buckets");
    }
}
