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

/// One stat: a key (dense index into the plane's stat metadata) and a value.
///
/// Packed to 4-byte alignment, 20 bytes instead of 24: a large profile holds millions
/// of stats, and this is a fifth of the model's memory. Read the fields by value
/// (`let value = stat.value;`); a reference to `value` is not allowed.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C, packed(4))]
pub struct Stat {
    /// Dense index into [`crate::Plane::stat_metadata`].
    pub key: u32,
    /// The value.
    pub value: StatValue,
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
        self.stats.push(Stat { key, value });
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
        let value = match stat.value {
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
            let value = match stat.value {
                StatValue::Str(r) => StatValue::Str(moved(r)),
                StatValue::Bytes(r) => StatValue::Bytes(moved(r)),
                StatValue::Json(r) => StatValue::Json(moved(r)),
                StatValue::Ref(r) => StatValue::Ref(remap(r)),
                other => other,
            };
            Stat { key: remap(stat.key), value }
        }));
        Ok(())
    }

    /// Rewrites every stat key through `map` (used when metadata tables are compacted).
    pub fn remap_keys(&mut self, map: &[u32]) {
        for stat in &mut self.stats {
            if let Some(&k) = map.get(stat.key as usize) {
                stat.key = k;
            }
            if let StatValue::Ref(r) = stat.value
                && let Some(&k) = map.get(r as usize)
            {
                stat.value = StatValue::Ref(k);
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
        match stats[0].value {
            StatValue::Str(r) => assert_eq!(store.text(r), "hello"),
            other => panic!("unexpected {other:?}"),
        }
        match stats[2].value {
            StatValue::Json(r) => assert_eq!(store.text(r), "[1,2]"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_stat_takes_twenty_bytes() {
        assert_eq!(std::mem::size_of::<Stat>(), 20);
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
        let values: Vec<(u32, StatValue)> = to.stats().iter().map(|s| (s.key, s.value)).collect();
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
        assert_eq!(store.stats()[0], Stat { key: 5, value: StatValue::Ref(6) });
    }
}
