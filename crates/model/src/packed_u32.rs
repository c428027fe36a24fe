//! A list of `u32` values (an event's metadata index, where its stats start) kept in
//! about two bytes each instead of four.
//!
//! The values of a block of 64 events are close: metadata indices of one thread's few
//! kinds of events, stat positions a few stats apart. So each block keeps its smallest
//! value once and each value as a `u16` above it. A value that does not fit (a block
//! spanning 65,535 or more) is spilled to a sorted side list.

use crate::packed::{BLOCK, Blocked};

/// The `u16` of a spilled value.
const SPILLED: u16 = u16::MAX;

/// The slot that keeps `value` in a block with base `base`, if it fits.
#[inline(always)]
fn above(base: u32, value: u32) -> Option<u16> {
    value.checked_sub(base).and_then(|above| u16::try_from(above).ok()).filter(|&above| above != SPILLED)
}

/// A list of `u32` values in about 2 bytes each (see the module docs).
#[derive(Clone, Default)]
pub struct PackedU32 {
    /// Slots: per value, how far above its block's base it is, or [`SPILLED`].
    /// Headers: per block, its base (no higher than any of its values that are not
    /// spilled). Side: the spilled values, `(index, value)` by index.
    store: Blocked<u16, u32, (u32, u32)>,
}

impl PackedU32 {
    /// Value `index`, if there is one.
    #[inline(always)]
    pub fn get(&self, index: usize) -> Option<u32> {
        let above = *self.store.slots.get(index)?;
        if above != SPILLED {
            return Some(self.store.blocks.get(index / BLOCK)?.wrapping_add(u32::from(above)));
        }
        self.spilled_at(index)
    }

    /// Value `index`.
    ///
    /// # Panics
    /// When `index` is out of bounds, as slice indexing does.
    #[inline(always)]
    pub fn at(&self, index: usize) -> u32 {
        match self.get(index) {
            Some(value) => value,
            None => crate::packed::out_of_bounds(index, self.len()),
        }
    }

    #[cold]
    #[inline(never)]
    fn spilled_at(&self, index: usize) -> Option<u32> {
        let at = self.side_position(index).ok()?;
        Some(self.store.side[at].1)
    }

    /// Where the side list holds (or would hold) value `index`.
    fn side_position(&self, index: usize) -> Result<usize, usize> {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        self.store.side.binary_search_by_key(&index, |&(spilled, _)| spilled)
    }

    /// All values in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        (0..self.len()).map(move |index| self.at(index))
    }

    /// Appends `value`. A list never holds more than `u32::MAX` values: readers refuse
    /// lines with more events or stats.
    #[inline(always)]
    pub fn push(&mut self, value: u32) {
        if !self.store.push_into_last(|&base| above(base, value)) {
            self.push_slow(value);
        }
    }

    /// [`PackedU32::push`] of a value that starts a block, is below its base or too far
    /// above it.
    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, value: u32) {
        if self.store.push_starting_block(value, 0) {
            return;
        }
        let index = self.store.slots.len();
        if self.rebase(index / BLOCK, value) {
            self.store.slots.push(0);
            return;
        }
        self.store.slots.push(SPILLED);
        self.store.side.push((index as u32, value));
    }

    /// Lowers block `at`'s base to `value` if its values still fit above it.
    fn rebase(&mut self, at: usize, value: u32) -> bool {
        let Some(base) = self.store.blocks.get_mut(at) else { return false };
        let Some(shift) = base.checked_sub(value) else { return false };
        let Some(slots) = self.store.slots.get_mut(at * BLOCK..) else { return false };
        let highest = slots.iter().filter(|&&slot| slot != SPILLED).max().copied().unwrap_or(0);
        // Counted in u64 for plain reading; the sum is the block's highest value minus
        // `value`, which u32 holds anyway.
        if u64::from(highest) + u64::from(shift) >= u64::from(SPILLED) {
            return false;
        }
        // Every new slot is at most `highest + shift`, below SPILLED.
        slots.iter_mut().filter(|slot| **slot != SPILLED).for_each(|slot| *slot += shift as u16);
        *base = value;
        true
    }

    /// Sets value `index` to `value`; does nothing when `index` is out of bounds.
    pub fn set(&mut self, index: usize, value: u32) {
        let Some(&base) = self.store.blocks.get(index / BLOCK) else { return };
        let Some(slot) = self.store.slots.get_mut(index) else { return };
        if let Some(above) = above(base, value) {
            // A side entry left behind is never read: only a spilled slot reads it.
            *slot = above;
            return;
        }
        *slot = SPILLED;
        match self.side_position(index) {
            Ok(at) => self.store.side[at].1 = value,
            Err(at) => self.store.side.insert(at, (index as u32, value)),
        }
    }

    /// Replaces every value `v` by `f(v)`; on the first error, returns it and leaves
    /// the list unchanged.
    pub fn try_map<E>(&mut self, f: impl FnMut(u32) -> Result<u32, E>) -> Result<(), E> {
        *self = self.iter().map(f).collect::<Result<PackedU32, E>>()?;
        Ok(())
    }
}

impl_blocked_list!(PackedU32, u32);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(values: &[u32]) -> PackedU32 {
        let list: PackedU32 = values.iter().copied().collect();
        assert_eq!(list.iter().collect::<Vec<_>>(), values);
        assert_eq!(list.get(values.len()), None);
        list
    }

    #[test]
    fn close_values_take_two_bytes_each() {
        let starts: Vec<u32> = (0..10_000u32).map(|i| 4_000_000_000 + i * 3 + i / 5).collect();
        let mut list = round_trip(&starts);
        list.shrink_to_fit();
        assert!(list.store.side.is_empty());
        assert!(list.store.slots.capacity() * 2 + list.store.blocks.capacity() * 4 < starts.len() * 3);
        let kinds: Vec<u32> = (0..10_000u32).map(|i| 90_000 - (i * 7_919) % 4_000).collect();
        assert!(round_trip(&kinds).store.side.is_empty(), "values below the base lower it");
    }

    #[test]
    fn far_values_are_spilled_and_kept() {
        let mut values: Vec<u32> = (0..200).map(|i| i * 10).collect();
        values[70] = 70_000 + 700;
        values[130] = u32::MAX;
        values[131] = 0;
        values[140] = u32::from(SPILLED);
        let list = round_trip(&values);
        assert_eq!(list.store.side, vec![(70, 70_700), (130, u32::MAX), (140, u32::from(SPILLED))]);
        assert_eq!(list, values.iter().copied().collect::<PackedU32>());
        assert_ne!(list, values[..199].iter().copied().collect::<PackedU32>());
    }

    #[test]
    fn set_and_map_keep_every_other_value() {
        let mut next = crate::packed::xorshift(0x2545_F491_4F6C_DD1D);
        for round in 0..100 {
            let len = (next() % 500) as usize;
            let spread = [10, 1_000, 70_000, u32::MAX][(next() % 4) as usize];
            let mut values: Vec<u32> = (0..len).map(|_| (next() % u64::from(spread)) as u32).collect();
            let mut list = round_trip(&values);
            for _ in 0..30 {
                if len == 0 {
                    break;
                }
                let at = (next() as usize) % len;
                values[at] = if next().is_multiple_of(2) { values[at].wrapping_add(1) } else { next() as u32 };
                list.set(at, values[at]);
            }
            assert_eq!(list.iter().collect::<Vec<_>>(), values, "round {round}");
            list.try_map(|v| Ok::<_, ()>(v / 3)).unwrap();
            values.iter_mut().for_each(|v| *v /= 3);
            assert_eq!(list.iter().collect::<Vec<_>>(), values, "round {round}");
            let mapped = list.try_map(|v| if v > 5 { Err(v) } else { Ok(v + 1) });
            assert_eq!(mapped.is_err(), values.iter().any(|&v| v > 5));
            if mapped.is_ok() {
                values.iter_mut().for_each(|v| *v += 1);
            }
            assert_eq!(list.iter().collect::<Vec<_>>(), values, "a failed map changes nothing");
        }
    }
}
