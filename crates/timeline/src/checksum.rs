//! The index file's checksum: a fast 64-bit hash that catches truncation, bit rot and
//! partial writes (not tampering).
//!
//! Four independent multiply-rotate lanes over little-endian 8-byte words, so hashing
//! runs at memory speed; the lanes, the length and a final avalanche are mixed at the
//! end. Streaming ([`Checksum::update`] in any split) and one-shot hashing agree.

const PRIME_1: u64 = 0x9E37_79B1_85EB_CA87;
const PRIME_2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const BLOCK: usize = 32;

/// A running checksum.
#[derive(Clone, Debug)]
pub(crate) struct Checksum {
    lanes: [u64; 4],
    pending: [u8; BLOCK],
    pending_len: usize,
    total: u64,
}

impl Default for Checksum {
    fn default() -> Self {
        Checksum { lanes: [PRIME_1, PRIME_2, !PRIME_1, !PRIME_2], pending: [0; BLOCK], pending_len: 0, total: 0 }
    }
}

fn word(bytes: &[u8]) -> u64 {
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&bytes[..8]);
    u64::from_le_bytes(raw)
}

fn round(lane: u64, value: u64) -> u64 {
    (lane ^ value).wrapping_mul(PRIME_1).rotate_left(31).wrapping_add(PRIME_2)
}

impl Checksum {
    fn block(&mut self, block: &[u8]) {
        for (i, lane) in self.lanes.iter_mut().enumerate() {
            *lane = round(*lane, word(&block[i * 8..]));
        }
    }

    /// Feeds `bytes`.
    pub(crate) fn update(&mut self, mut bytes: &[u8]) {
        self.total = self.total.wrapping_add(bytes.len() as u64);
        if self.pending_len > 0 {
            let take = (BLOCK - self.pending_len).min(bytes.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&bytes[..take]);
            self.pending_len += take;
            bytes = &bytes[take..];
            if self.pending_len < BLOCK {
                return;
            }
            let block = self.pending;
            self.block(&block);
            self.pending_len = 0;
        }
        let mut blocks = bytes.chunks_exact(BLOCK);
        for block in &mut blocks {
            self.block(block);
        }
        let rest = blocks.remainder();
        self.pending[..rest.len()].copy_from_slice(rest);
        self.pending_len = rest.len();
    }

    /// The checksum of everything fed so far.
    pub(crate) fn finish(&self) -> u64 {
        let mut lanes = self.lanes;
        for (i, byte) in self.pending[..self.pending_len].iter().enumerate() {
            lanes[i % 4] = round(lanes[i % 4], u64::from(*byte) | ((i as u64) << 8));
        }
        let mut h = self.total.wrapping_mul(PRIME_2);
        for lane in lanes {
            h = round(h, lane);
        }
        // SplitMix64's finaliser, so every input bit affects every output bit.
        h ^= h >> 30;
        h = h.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94D0_49BB_1331_11EB);
        h ^ (h >> 31)
    }
}

/// The checksum of `bytes` in one call.
pub(crate) fn checksum(bytes: &[u8]) -> u64 {
    let mut sum = Checksum::default();
    sum.update(bytes);
    sum.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_in_any_split_matches_one_shot() {
        let data: Vec<u8> = (0..1000u32).map(|i| (i * 7 % 251) as u8).collect();
        let whole = checksum(&data);
        for split in [0, 1, 31, 32, 33, 500, 999, 1000] {
            let mut sum = Checksum::default();
            sum.update(&data[..split]);
            sum.update(&data[split..]);
            assert_eq!(sum.finish(), whole, "split at {split}");
        }
    }

    #[test]
    fn any_flipped_bit_or_dropped_byte_changes_the_sum() {
        let data: Vec<u8> = (0..97u32).map(|i| i as u8).collect();
        let whole = checksum(&data);
        for i in 0..data.len() {
            let mut flipped = data.clone();
            flipped[i] ^= 0x10;
            assert_ne!(checksum(&flipped), whole, "byte {i}");
        }
        assert_ne!(checksum(&data[..96]), whole);
        let mut zero_tail = data.clone();
        zero_tail.push(0);
        assert_ne!(checksum(&zero_tail), whole);
    }
}
