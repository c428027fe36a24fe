//! Fast hashing and string interning for the readers (Kineto's names and args, the
//! names of CUDA activity and the texts of its stats).
//!
//! Interning a string that was seen before allocates nothing; a new one is copied, so
//! that the interner never reads the input again where it first saw a string (the
//! reader releases the input's pages as it goes, and comparing with a borrowed key
//! would fault them back in). A trace repeats the same few hundred strings millions of
//! times, so a small direct-mapped cache, indexed by the length and three bytes of a
//! string, answers most lookups with one comparison and no hashing; behind it, a hash
//! map keyed by the whole string (`FxMap`, which hashes every byte, so a million names
//! that differ only in a few bytes stay near-linear to intern).

pub(crate) use mlprof_model::fxhash::FxMap;

/// Slots of an [`Interner`]'s cache.
const CACHE_SLOTS: usize = 256;

/// An empty cache slot.
const NO_ID: u32 = u32::MAX;

/// Dense ids for strings, in first-seen order.
#[derive(Debug)]
pub struct Interner {
    map: FxMap<Box<str>, u32>,
    list: Vec<Box<str>>,
    /// The id last looked up through each slot (see [`cache_slot`]).
    cache: [u32; CACHE_SLOTS],
}

impl Default for Interner {
    fn default() -> Self {
        Interner { map: FxMap::default(), list: Vec::new(), cache: [NO_ID; CACHE_SLOTS] }
    }
}

/// The cache slot of `s`: a mix of its length and its first, middle and last bytes.
#[inline]
fn cache_slot(s: &[u8]) -> usize {
    let byte = |at: usize| s.get(at).map_or(0, |&b| usize::from(b));
    let len = s.len();
    (len.wrapping_mul(0x9e37) ^ byte(0) ^ (byte(len / 2) << 3) ^ (byte(len.wrapping_sub(1)) << 6)) % CACHE_SLOTS
}

/// `a == b`, without a call to the C library's `memcmp` for strings of up to 16
/// bytes (most names and keys of a trace): two overlapping words of each.
#[inline]
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let len = a.len();
    if len != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| s.get(at..at + 8).and_then(|w| w.try_into().ok()).map(u64::from_ne_bytes);
    let half = |s: &[u8], at: usize| s.get(at..at + 4).and_then(|w| w.try_into().ok()).map(u32::from_ne_bytes);
    match len {
        8..=16 => word(a, 0) == word(b, 0) && word(a, len - 8) == word(b, len - 8),
        4..=7 => half(a, 0) == half(b, 0) && half(a, len - 4) == half(b, len - 4),
        _ => a == b,
    }
}

impl Interner {
    /// The id of `s`, creating it on first use (only then is anything allocated).
    #[inline]
    pub fn intern(&mut self, s: &str) -> Result<u32, TooMany> {
        let slot = cache_slot(s.as_bytes());
        let cached = self.cache.get(slot).copied().unwrap_or(NO_ID);
        if self.list.get(cached as usize).is_some_and(|known| same_bytes(known.as_bytes(), s.as_bytes())) {
            return Ok(cached);
        }
        let id = match self.map.get(s) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.list.len()).map_err(|_| TooMany)?;
                self.list.push(s.into());
                self.map.insert(s.into(), id);
                id
            }
        };
        if let Some(entry) = self.cache.get_mut(slot) {
            *entry = id;
        }
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

    /// Whether nothing is interned yet.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The strings in id order.
    pub fn into_strings(self) -> Vec<Box<str>> {
        self.list
    }
}

/// More than `u32::MAX` distinct entries.
#[derive(Debug, Clone, Copy)]
pub struct TooMany;

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
    fn short_strings_compare_as_bytes_do() {
        let texts = ["", "a", "ab", "abc", "abcd", "abce", "bbcd", "abcde", "abcdefg", "abcdefgh", "abcdefgi"];
        let longer: Vec<String> = (8..=18).flat_map(|n| [("x".repeat(n)), format!("{}y", "x".repeat(n - 1))]).collect();
        let all: Vec<&str> = texts.iter().copied().chain(longer.iter().map(String::as_str)).collect();
        for a in &all {
            for b in &all {
                assert_eq!(same_bytes(a.as_bytes(), b.as_bytes()), a == b, "{a:?} {b:?}");
            }
        }
        // A difference at any position is in one of the words.
        for len in 1..=40 {
            let plain = "x".repeat(len);
            for at in 0..len {
                let mut other = plain.clone().into_bytes();
                other[at] = b'y';
                assert!(!same_bytes(plain.as_bytes(), &other), "{len} bytes, differing at {at}");
            }
        }
    }

    #[test]
    fn interner_reuses_ids() {
        let mut i = Interner::default();
        let a = i.intern("a").unwrap();
        let b = i.intern("b").unwrap();
        assert_eq!(i.intern("a").unwrap(), a);
        assert_eq!(i.intern("b").unwrap(), b);
        assert_eq!(i.get(b), "b");
        assert_eq!(i.len(), 2);
        // Long strings that differ only in the middle (hashed alike) stay distinct.
        let long = |middle: char| format!("{}{middle}{}", "x".repeat(40), "y".repeat(40));
        let (c, d) = (i.intern(&long('c')).unwrap(), i.intern(&long('d')).unwrap());
        assert_ne!(c, d);
        assert_eq!(i.intern(&long('d')).unwrap(), d);
        assert_eq!(i.get(c), long('c'));
        assert_eq!(fnv63(""), (0xcbf2_9ce4_8422_2325_u64 & (i64::MAX as u64)) as i64);
    }
}
