//! Where each event's stats start in its line's stat store, in about two bytes an
//! event instead of four.
//!
//! The starts never decrease and events have a few stats each, so the starts of a
//! block of 64 events lie within 65,535 of the block's first: each is kept as a
//! `u16` above it. A start that is not (a block holding tens of thousands of stats, or
//! a start below the block's first) is spilled to a short sorted side list.

use crate::packed::{BLOCK, Blocked};

/// The `u16` of a spilled start.
const SPILLED: u16 = u16::MAX;

/// A list of `u32` stat positions, one per event plus the end of the last event's
/// stats, in about 2 bytes each (see the module docs).
#[derive(Clone, Default)]
pub struct StatStarts {
    /// Slots: per start, how far above its block's first it is, or [`SPILLED`].
    /// Headers: per block, its first start. Side: the spilled starts, `(index,
    /// start)` by index.
    store: Blocked<u16, u32, (u32, u32)>,
}

impl StatStarts {
    /// Start `index`, if there is one.
    #[inline(always)]
    pub fn get(&self, index: usize) -> Option<u32> {
        let above = *self.store.slots.get(index)?;
        if above != SPILLED {
            return Some(self.store.blocks.get(index / BLOCK)?.wrapping_add(u32::from(above)));
        }
        self.spilled_at(index)
    }

    #[cold]
    #[inline(never)]
    fn spilled_at(&self, index: usize) -> Option<u32> {
        let index = u32::try_from(index).ok()?;
        let at = self.store.side.binary_search_by_key(&index, |&(spilled, _)| spilled).ok()?;
        Some(self.store.side[at].1)
    }

    /// All starts in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        // Every index below `len` has a start.
        (0..self.len()).map(move |index| self.get(index).unwrap_or(0))
    }

    /// Appends `start`. A list never holds more than `u32::MAX` starts: a line's stats
    /// are counted in `u32`, and readers refuse lines with more.
    #[inline(always)]
    pub fn push(&mut self, start: u32) {
        let index = self.store.slots.len();
        if index.is_multiple_of(BLOCK) {
            self.store.blocks.push(start);
            self.store.slots.push(0);
            return;
        }
        let above = self
            .store
            .blocks
            .last()
            .and_then(|&base| start.checked_sub(base))
            .and_then(|above| u16::try_from(above).ok());
        match above {
            Some(above) if above != SPILLED => self.store.slots.push(above),
            _ => self.spill(index, start),
        }
    }

    #[cold]
    #[inline(never)]
    fn spill(&mut self, index: usize, start: u32) {
        self.store.slots.push(SPILLED);
        self.store.side.push((index as u32, start));
    }
}

impl_blocked_list!(StatStarts, u32);

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(starts: &[u32]) -> StatStarts {
        let list: StatStarts = starts.iter().copied().collect();
        assert_eq!(list.iter().collect::<Vec<_>>(), starts);
        assert_eq!(list.get(starts.len()), None);
        list
    }

    #[test]
    fn a_few_stats_an_event_take_two_bytes_a_start() {
        let starts: Vec<u32> = (0..10_000u32).map(|i| 4_000_000_000 + i * 3 + i / 5).collect();
        let mut list = round_trip(&starts);
        list.shrink_to_fit();
        assert!(list.store.side.is_empty());
        assert!(list.store.slots.capacity() * 2 + list.store.blocks.capacity() * 4 < starts.len() * 3);
    }

    #[test]
    fn far_or_falling_starts_are_spilled_and_kept() {
        let mut starts: Vec<u32> = (0..200).map(|i| i * 10).collect();
        starts[70] = 70_000 + 700;
        starts[71] = 710;
        starts[130] = u32::MAX;
        starts[131] = 0;
        starts[140] = 1_280 + u32::from(SPILLED);
        let list = round_trip(&starts);
        assert_eq!(list.store.side.len(), 4, "{:?}", list.store.side);
        assert_eq!(list, starts.iter().copied().collect::<StatStarts>());
        assert_ne!(list, starts[..199].iter().copied().collect::<StatStarts>());
    }
}
