//! Typed stats (XSpace's `XStat`) and the arena they live in.
//!
//! A [`StatStore`] owns a flat `Vec<Stat>` plus one byte arena for all string and byte
//! values, so a million events with stats cost two allocations, not millions. Stat keys
//! are dense indices into the owning plane's [`crate::StatMetadata`] table.

/// Where a string or byte value lives inside a [`StatStore`]'s byte arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TextRef {
    start: u32,
    len: u32,
}

/// A stat value, typed as in XSpace's `XStat.value` oneof, plus `Json` for Chrome-trace
/// args whose value is not a number or string (arrays, objects, booleans, null).
/// Equality is identity: doubles compare bit for bit (so a NaN equals itself).
#[derive(Clone, Copy, Debug)]
pub enum StatValue {
    /// `int64_value`.
    Int(i64),
    /// `uint64_value`.
    Uint(u64),
    /// `double_value`.
    Double(f64),
    /// `str_value` (valid UTF-8), stored in the arena.
    Str(TextRef),
    /// `bytes_value`, stored in the arena.
    Bytes(TextRef),
    /// `ref_value`: the string is the name of this stat-metadata entry (dense index).
    Ref(u32),
    /// Raw JSON text of a Chrome-trace arg that is not a number or string.
    Json(TextRef),
}

impl PartialEq for StatValue {
    fn eq(&self, other: &StatValue) -> bool {
        use StatValue::*;
        match (self, other) {
            (Double(a), Double(b)) => a.to_bits() == b.to_bits(),
            (Int(a), Int(b)) => a == b,
            (Uint(a), Uint(b)) => a == b,
            (Str(a), Str(b)) | (Bytes(a), Bytes(b)) | (Json(a), Json(b)) => a == b,
            (Ref(a), Ref(b)) => a == b,
            _ => false,
        }
    }
}

/// How many stat keys a plane can have: a [`Stat`] keeps its value's kind in the top
/// three bits of its key. Readers refuse planes with more stat metadata.
pub const MAX_STAT_KEYS: u32 = 1 << 29;

/// One stat: a key (dense index into the plane's stat metadata) and a value, in 12
/// bytes (a [`StatValue`] alone takes 16): a large profile holds millions of stats,
/// the largest part of the model's memory. The value's kind is kept in the top three
/// bits of the key, its eight bytes of payload beside them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The key (below [`MAX_STAT_KEYS`]) with the value's kind above it.
    tagged_key: u32,
    /// The value's payload, low half first (4-byte aligned, so a stat is 12 bytes).
    payload: [u32; 2],
}

const KIND_SHIFT: u32 = 29;
const KEY_MASK: u32 = MAX_STAT_KEYS - 1;

/// The kinds of [`StatValue`] as stored in a [`Stat`].
const INT: u32 = 0;
const UINT: u32 = 1;
const DOUBLE: u32 = 2;
const STR: u32 = 3;
const BYTES: u32 = 4;
const REF: u32 = 5;
const JSON: u32 = 6;

impl Stat {
    /// A stat of `key` (below [`MAX_STAT_KEYS`]; higher bits are dropped) and `value`.
    #[inline]
    pub fn new(key: u32, value: StatValue) -> Stat {
        let text = |r: TextRef| u64::from(r.start) | u64::from(r.len) << 32;
        let (kind, bits) = match value {
            StatValue::Int(v) => (INT, v as u64),
            StatValue::Uint(v) => (UINT, v),
            StatValue::Double(v) => (DOUBLE, v.to_bits()),
            StatValue::Str(r) => (STR, text(r)),
            StatValue::Bytes(r) => (BYTES, text(r)),
            StatValue::Ref(v) => (REF, u64::from(v)),
            StatValue::Json(r) => (JSON, text(r)),
        };
        Stat { tagged_key: kind << KIND_SHIFT | key & KEY_MASK, payload: [bits as u32, (bits >> 32) as u32] }
    }

    /// Dense index into [`crate::Plane::stat_metadata`].
    #[inline]
    pub fn key(&self) -> u32 {
        self.tagged_key & KEY_MASK
    }

    /// The value.
    #[inline]
    pub fn value(&self) -> StatValue {
        let bits = u64::from(self.payload[0]) | u64::from(self.payload[1]) << 32;
        let text = TextRef { start: self.payload[0], len: self.payload[1] };
        match self.tagged_key >> KIND_SHIFT {
            INT => StatValue::Int(bits as i64),
            UINT => StatValue::Uint(bits),
            DOUBLE => StatValue::Double(f64::from_bits(bits)),
            STR => StatValue::Str(text),
            BYTES => StatValue::Bytes(text),
            REF => StatValue::Ref(self.payload[0]),
            _ => StatValue::Json(text),
        }
    }

    /// Gives the stat another key (below [`MAX_STAT_KEYS`]), keeping its value.
    #[inline]
    pub fn set_key(&mut self, key: u32) {
        *self = Stat::new(key, self.value());
    }

    /// Gives the stat another value, keeping its key.
    #[inline]
    pub fn set_value(&mut self, value: StatValue) {
        *self = Stat::new(self.key(), value);
    }
}

impl std::fmt::Debug for Stat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stat").field("key", &self.key()).field("value", &self.value()).finish()
    }
}

/// An append-only arena of stats and of the bytes their string values point at.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StatStore {
    stats: Vec<Stat>,
    bytes: Vec<u8>,
}

/// The arena of one line or plane outgrew the 4 GiB that `u32` offsets address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaFull;

impl StatStore {
    /// All stats in insertion order.
    #[inline]
    pub fn stats(&self) -> &[Stat] {
        &self.stats
    }

    /// All stats, mutable (readers patch keys they could only resolve late).
    pub fn stats_mut(&mut self) -> &mut [Stat] {
        &mut self.stats
    }

    /// Number of stats stored.
    #[inline]
    pub fn len(&self) -> usize {
        self.stats.len()
    }

    /// True when no stat is stored.
    pub fn is_empty(&self) -> bool {
        self.stats.is_empty()
    }

    /// Bytes of string/byte payload held by the arena.
    pub fn payload_bytes(&self) -> usize {
        self.bytes.len()
    }

    /// Reserves room for `stats` more stats and `bytes` more payload bytes (readers that
    /// can estimate a line's stats avoid regrowing the store while decoding it).
    pub fn reserve(&mut self, stats: usize, bytes: usize) {
        self.stats.reserve(stats);
        self.bytes.reserve(bytes);
    }

    /// Appends a stat whose value needs no arena space.
    #[inline]
    pub fn push(&mut self, key: u32, value: StatValue) {
        self.stats.push(Stat::new(key, value));
    }

    /// Copies `data` into the arena and returns where it lives.
    #[inline]
    pub fn store_bytes(&mut self, data: &[u8]) -> Result<TextRef, ArenaFull> {
        let start = u32::try_from(self.bytes.len()).map_err(|_| ArenaFull)?;
        let len = u32::try_from(data.len()).map_err(|_| ArenaFull)?;
        start.checked_add(len).ok_or(ArenaFull)?;
        self.bytes.extend_from_slice(data);
        Ok(TextRef { start, len })
    }

    /// Appends a string stat (`Str`).
    pub fn push_str(&mut self, key: u32, text: &str) -> Result<(), ArenaFull> {
        let r = self.store_bytes(text.as_bytes())?;
        self.push(key, StatValue::Str(r));
        Ok(())
    }

    /// Appends a bytes stat (`Bytes`).
    pub fn push_bytes(&mut self, key: u32, data: &[u8]) -> Result<(), ArenaFull> {
        let r = self.store_bytes(data)?;
        self.push(key, StatValue::Bytes(r));
        Ok(())
    }

    /// Appends a raw-JSON stat (`Json`).
    pub fn push_json(&mut self, key: u32, json: &str) -> Result<(), ArenaFull> {
        let r = self.store_bytes(json.as_bytes())?;
        self.push(key, StatValue::Json(r));
        Ok(())
    }

    /// The bytes behind a [`TextRef`] of this store.
    #[inline]
    pub fn bytes(&self, r: TextRef) -> &[u8] {
        let start = r.start as usize;
        self.bytes.get(start..start + r.len as usize).unwrap_or(&[])
    }

    /// The text behind a [`TextRef`] of a `Str` or `Json` value ("" if not UTF-8, which
    /// readers rule out when they store it).
    #[inline]
    pub fn text(&self, r: TextRef) -> &str {
        std::str::from_utf8(self.bytes(r)).unwrap_or("")
    }

    /// Copies a stat of another store (with its payload) into this one, re-keyed.
    pub fn push_copy(&mut self, from: &StatStore, stat: &Stat, key: u32) -> Result<(), ArenaFull> {
        let value = match stat.value() {
            StatValue::Str(r) => StatValue::Str(self.store_bytes(from.bytes(r))?),
            StatValue::Bytes(r) => StatValue::Bytes(self.store_bytes(from.bytes(r))?),
            StatValue::Json(r) => StatValue::Json(self.store_bytes(from.bytes(r))?),
            other => other,
        };
        self.push(key, value);
        Ok(())
    }

    /// Appends all stats of `from` (with their payloads) after this store's, each key
    /// and `Ref` value rewritten through `map` like [`StatStore::remap_keys`] does.
    /// Leaves the store unchanged when the result would outgrow the arena.
    pub fn append_remapped(&mut self, from: &StatStore, map: &[u32]) -> Result<(), ArenaFull> {
        let shift = u32::try_from(self.bytes.len()).map_err(|_| ArenaFull)?;
        let added = u32::try_from(from.bytes.len()).map_err(|_| ArenaFull)?;
        shift.checked_add(added).ok_or(ArenaFull)?;
        self.bytes.extend_from_slice(&from.bytes);
        let remap = |id: u32| map.get(id as usize).copied().unwrap_or(id);
        let moved = |r: TextRef| TextRef { start: r.start + shift, len: r.len };
        self.stats.extend(from.stats.iter().map(|stat| {
            let value = match stat.value() {
                StatValue::Str(r) => StatValue::Str(moved(r)),
                StatValue::Bytes(r) => StatValue::Bytes(moved(r)),
                StatValue::Json(r) => StatValue::Json(moved(r)),
                StatValue::Ref(r) => StatValue::Ref(remap(r)),
                other => other,
            };
            Stat::new(remap(stat.key()), value)
        }));
        Ok(())
    }

    /// Rewrites every stat key through `map` (used when metadata tables are compacted).
    pub fn remap_keys(&mut self, map: &[u32]) {
        for stat in &mut self.stats {
            if let Some(&k) = map.get(stat.key() as usize) {
                stat.set_key(k);
            }
            if let StatValue::Ref(r) = stat.value()
                && let Some(&k) = map.get(r as usize)
            {
                stat.set_value(StatValue::Ref(k));
            }
        }
    }

    /// Frees unused capacity once the store is complete.
    pub fn shrink_to_fit(&mut self) {
        self.stats.shrink_to_fit();
        self.bytes.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip_through_the_arena() {
        let mut store = StatStore::default();
        store.push_str(3, "hello").unwrap();
        store.push(4, StatValue::Int(-7));
        store.push_json(5, "[1,2]").unwrap();
        let stats = store.stats();
        assert_eq!(stats.len(), 3);
        match stats[0].value() {
            StatValue::Str(r) => assert_eq!(store.text(r), "hello"),
            other => panic!("unexpected {other:?}"),
        }
        match stats[2].value() {
            StatValue::Json(r) => assert_eq!(store.text(r), "[1,2]"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_stat_takes_twelve_bytes() {
        assert_eq!(std::mem::size_of::<Stat>(), 12);
    }

    /// Every kind of value, at the edges of its range, with keys up to the largest.
    #[test]
    fn every_value_and_key_round_trips_through_a_stat() {
        let text = |start, len| TextRef { start, len };
        let values = [
            StatValue::Int(i64::MIN),
            StatValue::Int(-1),
            StatValue::Int(i64::MAX),
            StatValue::Uint(u64::MAX),
            StatValue::Uint(1 << 32),
            StatValue::Double(-0.0),
            StatValue::Double(f64::NAN),
            StatValue::Double(1.5e300),
            StatValue::Str(text(u32::MAX, u32::MAX)),
            StatValue::Bytes(text(7, 0)),
            StatValue::Ref(u32::MAX),
            StatValue::Json(text(0, 3)),
        ];
        for key in [0, 1, 12_345, MAX_STAT_KEYS - 1] {
            for value in values {
                let mut stat = Stat::new(key, value);
                assert_eq!((stat.key(), stat.value()), (key, value));
                stat.set_key(MAX_STAT_KEYS - 1 - key);
                assert_eq!((stat.key(), stat.value()), (MAX_STAT_KEYS - 1 - key, value));
                stat.set_value(StatValue::Ref(9));
                assert_eq!((stat.key(), stat.value()), (MAX_STAT_KEYS - 1 - key, StatValue::Ref(9)));
            }
        }
        // Equal stats are equal values under equal keys, and only those.
        for (i, a) in values.iter().enumerate() {
            for (j, b) in values.iter().enumerate() {
                assert_eq!(Stat::new(3, *a) == Stat::new(3, *b), i == j, "{a:?} {b:?}");
            }
        }
        assert_ne!(Stat::new(3, values[0]), Stat::new(4, values[0]));
    }

    #[test]
    fn appending_moves_payloads_and_remaps_keys() {
        let mut to = StatStore::default();
        to.push_str(0, "abc").unwrap();
        let mut from = StatStore::default();
        from.push(1, StatValue::Int(7));
        from.push_json(0, "[1]").unwrap();
        from.push(2, StatValue::Ref(1));
        to.append_remapped(&from, &[5, 6]).unwrap();
        assert_eq!(to.len(), 4);
        let values: Vec<(u32, StatValue)> = to.stats().iter().map(|s| (s.key(), s.value())).collect();
        assert_eq!(values[1], (6, StatValue::Int(7)));
        assert_eq!(values[3], (2, StatValue::Ref(6)));
        match values[2] {
            (5, StatValue::Json(r)) => assert_eq!(to.text(r), "[1]"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn remapping_rewrites_keys_and_refs() {
        let mut store = StatStore::default();
        store.push(0, StatValue::Ref(1));
        store.remap_keys(&[5, 6]);
        assert_eq!(store.stats()[0], Stat::new(5, StatValue::Ref(6)));
    }
}
