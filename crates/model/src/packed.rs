//! A column of `i64` values (event offsets and durations, in picoseconds) kept in
//! about four bytes each instead of eight.
//!
//! Values are stored in blocks of [`BLOCK`]. A *narrow* block keeps its smallest value
//! once and each value as a `u32` count of units above it: of nanoseconds when all its
//! values lie on the same nanosecond grid (XSpace and Kineto times are whole
//! nanoseconds, so a block may span 4.3 s), else of picoseconds (4.3 ms). Any other
//! block is *wide*: each value's low half sits in the same `u32` slot and its high
//! half in a side array. Reading a value, in any order, is two loads from small
//! arrays; a column never takes more than 8 bytes a value plus the blocks' 16 bytes.

/// Values per block.
pub const BLOCK: usize = 64;

/// `Block::wide` of a narrow block.
const NARROW: u32 = u32::MAX;

/// Picoseconds per nanosecond: the unit of a narrow block whose values differ from its
/// base by whole nanoseconds.
const NS: i64 = 1000;

/// How one block of [`BLOCK`] values is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    /// The smallest value of a narrow block; unused in a wide one.
    base: i64,
    /// [`NARROW`], or where the block's high halves start in `high`, in blocks.
    wide: u32,
    /// What a narrow block's `u32`s count: [`NS`] or 1 (picoseconds).
    unit: u32,
}

impl Block {
    fn narrow(base: i64) -> Block {
        Block { base, wide: NARROW, unit: NS as u32 }
    }

    /// The `u32` that keeps `value` in this narrow block, if it fits.
    #[inline(always)]
    fn step(&self, value: i64) -> Option<u32> {
        let above = value.checked_sub(self.base)?;
        if self.unit == 1 {
            u32::try_from(above).ok()
        } else if above % NS == 0 {
            u32::try_from(above / NS).ok()
        } else {
            None
        }
    }

    /// The value a `u32` of this narrow block keeps.
    #[inline(always)]
    fn value(&self, low: u32) -> i64 {
        // Narrow blocks only hold values that `base + low × unit` gives back exactly.
        self.base.wrapping_add(i64::from(low) * i64::from(self.unit))
    }
}

/// The three vectors of a list packed by blocks of [`BLOCK`]: a slot per value, a
/// header per block, and a side vector for what the slots cannot hold.
#[derive(Clone)]
pub(crate) struct Blocked<Slot, Header, Side> {
    pub slots: Vec<Slot>,
    pub blocks: Vec<Header>,
    pub side: Vec<Side>,
}

impl<Slot, Header, Side> Blocked<Slot, Header, Side> {
    /// Appends the slot `fit` gives for the last block's header, if the next value
    /// falls in that block and `fit` gives one; false otherwise.
    #[inline(always)]
    pub fn push_into_last(&mut self, fit: impl FnOnce(&Header) -> Option<Slot>) -> bool {
        if self.slots.len().is_multiple_of(BLOCK) {
            return false;
        }
        match self.blocks.last().and_then(fit) {
            Some(slot) => {
                self.slots.push(slot);
                true
            }
            None => false,
        }
    }

    /// Starts a block with `header` and `slot` if the next value starts one; false
    /// otherwise.
    pub fn push_starting_block(&mut self, header: Header, slot: Slot) -> bool {
        if !self.slots.len().is_multiple_of(BLOCK) {
            return false;
        }
        self.blocks.push(header);
        self.slots.push(slot);
        true
    }
}

impl<Slot, Header, Side> Default for Blocked<Slot, Header, Side> {
    fn default() -> Self {
        Blocked { slots: Vec::new(), blocks: Vec::new(), side: Vec::new() }
    }
}

/// A column of `i64` values in about 4 bytes each (see the module docs).
#[derive(Clone, Default)]
pub struct PackedI64 {
    /// Slots: per value, its units above its block's base (narrow blocks) or its low
    /// half. Side: the high halves of the values of wide blocks, [`BLOCK`] per block.
    store: Blocked<u32, Block, u32>,
}

impl PackedI64 {
    /// Value `index`, if there is one.
    #[inline(always)]
    pub fn get(&self, index: usize) -> Option<i64> {
        let low = *self.store.slots.get(index)?;
        let block = self.store.blocks.get(index / BLOCK)?;
        if block.wide == NARROW {
            Some(block.value(low))
        } else {
            let high = *self.store.side.get(block.wide as usize * BLOCK + index % BLOCK)?;
            Some((u64::from(high) << 32 | u64::from(low)) as i64)
        }
    }

    /// Value `index`.
    ///
    /// # Panics
    /// When `index` is out of bounds, as slice indexing does.
    #[inline(always)]
    pub fn at(&self, index: usize) -> i64 {
        match self.get(index) {
            Some(value) => value,
            None => out_of_bounds(index, self.len()),
        }
    }

    /// All values in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = i64> + Clone + '_ {
        (0..self.len()).map(move |index| self.at(index))
    }

    /// The values as a plain vector.
    pub fn to_vec(&self) -> Vec<i64> {
        self.iter().collect()
    }

    /// Whether no value is below the one before it (true for an empty list). Reads a
    /// narrow block's `u32`s as they are (one base and unit: they order as the values),
    /// so a column of millions is checked in a few milliseconds.
    pub fn is_sorted(&self) -> bool {
        let mut previous = i64::MIN;
        for (index, block) in self.store.blocks.iter().enumerate() {
            let lows = self.block_slots(index);
            if block.wide == NARROW {
                let (Some(&first), Some(&last)) = (lows.first(), lows.last()) else { continue };
                if block.value(first) < previous || !lows.is_sorted() {
                    return false;
                }
                previous = block.value(last);
            } else {
                for value in (index * BLOCK..index * BLOCK + lows.len()).map(|at| self.at(at)) {
                    if value < previous {
                        return false;
                    }
                    previous = value;
                }
            }
        }
        true
    }

    /// The smallest value, `None` for an empty list (a narrow block's is that of its
    /// smallest `u32`).
    pub fn min(&self) -> Option<i64> {
        let per_block = self.store.blocks.iter().enumerate().filter_map(|(index, block)| {
            let lows = self.block_slots(index);
            if block.wide == NARROW {
                lows.iter().copied().min().map(|low| block.value(low))
            } else {
                (index * BLOCK..index * BLOCK + lows.len()).map(|at| self.at(at)).min()
            }
        });
        per_block.min()
    }

    /// The `u32`s of block `index`.
    fn block_slots(&self, index: usize) -> &[u32] {
        let from = index * BLOCK;
        self.store.slots.get(from..self.store.slots.len().min(from + BLOCK)).unwrap_or(&[])
    }

    /// Appends `value`.
    #[inline(always)]
    pub fn push(&mut self, value: i64) {
        // The common case: a value that fits the last, narrow block.
        let fits = |block: &Block| if block.wide == NARROW { block.step(value) } else { None };
        if !self.store.push_into_last(fits) {
            self.push_slow(value);
        }
    }

    /// [`PackedI64::push`] of a value that starts a block, or that the last block
    /// must be refitted or widened for.
    #[cold]
    #[inline(never)]
    fn push_slow(&mut self, value: i64) {
        if self.store.push_starting_block(Block::narrow(value), 0) {
            return;
        }
        let index = self.store.slots.len();
        let at = index / BLOCK;
        let Some(&block) = self.store.blocks.get(at) else { return };
        if block.wide == NARROW {
            if let Some(low) = self.refit(at, value) {
                self.store.slots.push(low);
                return;
            }
            self.widen(at);
        }
        self.store.slots.push(value as u32);
        self.set_high(at, index, value);
    }

    /// Sets value `index` to `value`; does nothing when `index` is out of bounds.
    pub fn set(&mut self, index: usize, value: i64) {
        let at = index / BLOCK;
        let Some(&block) = self.store.blocks.get(at) else { return };
        if index >= self.len() {
            return;
        }
        if block.wide == NARROW {
            if let Some(low) = block.step(value) {
                self.store.slots[index] = low;
                return;
            }
            self.widen(at);
        }
        self.store.slots[index] = value as u32;
        self.set_high(at, index, value);
    }

    /// Adds `shift` to every value, saturating at the bounds of `i64`. A narrow block
    /// moves its base, so it stays as small as it was.
    pub fn saturating_add_all(&mut self, shift: i64) {
        for at in 0..self.store.blocks.len() {
            let values = at * BLOCK..self.len().min((at + 1) * BLOCK);
            let block = self.store.blocks[at];
            if block.wide == NARROW {
                let highest = self.store.slots[values.clone()].iter().copied().max().unwrap_or(0);
                if let (Some(base), Some(_)) = (block.base.checked_add(shift), block.value(highest).checked_add(shift))
                {
                    self.store.blocks[at].base = base;
                    continue;
                }
            }
            for index in values {
                self.set(index, self.at(index).saturating_add(shift));
            }
        }
    }

    /// Adds `shift` to every value; `None`, the column unchanged, if a sum overflows.
    pub fn checked_add_all(&mut self, shift: i64) -> Option<()> {
        if self.iter().any(|value| value.checked_add(shift).is_none()) {
            return None;
        }
        self.saturating_add_all(shift);
        Some(())
    }

    /// Makes narrow block `at` hold `value` too, if it can stay narrow: counting in
    /// picoseconds when `value` is off its nanosecond grid, and lowering its base when
    /// `value` is below it. Returns the `u32` that keeps `value`; the values already in
    /// the block are unchanged either way.
    fn refit(&mut self, at: usize, value: i64) -> Option<u32> {
        let block = self.store.blocks.get_mut(at)?;
        let lows = self.store.slots.get_mut(at * BLOCK..)?;
        let old_unit = i64::from(block.unit);
        let unit = if old_unit == NS && value.checked_sub(block.base)? % NS != 0 { 1 } else { old_unit };
        // On the block's grid (or counted in picoseconds), so the shift is exact.
        let shift = if value < block.base { block.base.checked_sub(value)? / unit } else { 0 };
        let scale = old_unit / unit;
        let highest = i64::from(lows.iter().copied().max().unwrap_or(0));
        if highest.checked_mul(scale)?.checked_add(shift)? > i64::from(u32::MAX) {
            return None;
        }
        // Every new u32 is at most `highest × scale + shift`, checked above.
        lows.iter_mut().for_each(|low| *low = *low * scale as u32 + shift as u32);
        block.base = block.base.min(value);
        block.unit = unit as u32;
        block.step(value)
    }

    /// Turns narrow block `at` into a wide one, its values unchanged.
    fn widen(&mut self, at: usize) {
        let Some(block) = self.store.blocks.get_mut(at) else { return };
        let start = self.store.side.len();
        self.store.side.resize(start + BLOCK, 0);
        for (low, high) in self.store.slots[at * BLOCK..].iter_mut().zip(&mut self.store.side[start..]) {
            let value = block.value(*low);
            *low = value as u32;
            *high = (value as u64 >> 32) as u32;
        }
        // The column never holds 2^32 × 64 wide values: its indices are u32-sized.
        block.wide = (start / BLOCK) as u32;
        block.base = 0;
    }

    /// Writes the high half of `value`, value `index` of wide block `at`.
    fn set_high(&mut self, at: usize, index: usize, value: i64) {
        let Some(block) = self.store.blocks.get(at) else { return };
        if let Some(high) = self.store.side.get_mut(block.wide as usize * BLOCK + index % BLOCK) {
            *high = (value as u64 >> 32) as u32;
        }
    }
}

/// Panics for an index out of the bounds of a packed list of `len` values.
#[cold]
#[inline(never)]
pub(crate) fn out_of_bounds(index: usize, len: usize) -> ! {
    panic!("index {index} out of bounds of a column of {len} values")
}

/// For a list of `$item`s kept in a [`Blocked`] `store`, with `iter` and `push`: `new`,
/// `len`, `is_empty`, `reserve` and `shrink_to_fit`, and equality, `Debug`,
/// `FromIterator` and `Extend` by its values (how they are packed does not matter).
macro_rules! impl_blocked_list {
    ($list:ty, $item:ty) => {
        impl $list {
            /// An empty list.
            pub fn new() -> $list {
                <$list>::default()
            }

            /// Number of values.
            #[inline]
            pub fn len(&self) -> usize {
                self.store.slots.len()
            }

            /// True when the list holds no value.
            #[inline]
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// Reserves room for exactly `additional` more values.
            pub fn reserve(&mut self, additional: usize) {
                self.store.slots.reserve_exact(additional);
                self.store.blocks.reserve_exact(additional.div_ceil($crate::packed::BLOCK));
            }

            /// Gives back the room reserved beyond the values held.
            pub fn shrink_to_fit(&mut self) {
                self.store.slots.shrink_to_fit();
                self.store.blocks.shrink_to_fit();
                self.store.side.shrink_to_fit();
            }
        }

        impl PartialEq for $list {
            fn eq(&self, other: &$list) -> bool {
                self.len() == other.len() && self.iter().eq(other.iter())
            }
        }

        impl std::fmt::Debug for $list {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_list().entries(self.iter()).finish()
            }
        }

        impl FromIterator<$item> for $list {
            fn from_iter<I: IntoIterator<Item = $item>>(items: I) -> $list {
                let mut list = <$list>::new();
                list.extend(items);
                list
            }
        }

        impl Extend<$item> for $list {
            fn extend<I: IntoIterator<Item = $item>>(&mut self, items: I) {
                for item in items {
                    self.push(item);
                }
            }
        }
    };
}

impl_blocked_list!(PackedI64, i64);

/// A pseudo-random `u64` generator from `seed` (non-zero), for tests.
#[cfg(test)]
pub(crate) fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl PackedI64 {
        /// Bytes of heap the column holds (its capacity, not only its values).
        fn heap_bytes(&self) -> usize {
            self.store.slots.capacity() * 4
                + self.store.blocks.capacity() * std::mem::size_of::<Block>()
                + self.store.side.capacity() * 4
        }
    }

    fn round_trip(values: &[i64]) -> PackedI64 {
        let column: PackedI64 = values.iter().copied().collect();
        assert_eq!(column.to_vec(), values);
        for (index, &value) in values.iter().enumerate() {
            assert_eq!(column.get(index), Some(value), "value {index}");
        }
        assert_eq!(column.get(values.len()), None);
        column
    }

    #[test]
    fn close_values_take_four_bytes_each() {
        let values: Vec<i64> = (0..10_000).map(|i| 5_000_000_000_000 + i * 1_000_007).collect();
        let mut column = round_trip(&values);
        column.shrink_to_fit();
        assert!(column.store.side.is_empty());
        assert!(column.heap_bytes() < values.len() * 5, "{} bytes", column.heap_bytes());
    }

    #[test]
    fn whole_nanoseconds_stay_narrow_over_seconds() {
        // 64 values 60 ms apart span almost 4 s: narrow in nanoseconds only.
        let values: Vec<i64> = (0..1_000).map(|i| 7_000_000_000_000 + i * 60_000_000_000).collect();
        assert!(round_trip(&values).store.side.is_empty());
        let mut off_grid = values.clone();
        off_grid[BLOCK + 5] += 1;
        let column = round_trip(&off_grid);
        assert_eq!(column.store.side.len(), BLOCK, "only the block with a value off the grid is wide");
        let close: Vec<i64> = (0..BLOCK as i64).map(|i| if i == 40 { i * 1_000 + 1 } else { i * 1_000 }).collect();
        assert!(round_trip(&close).store.side.is_empty(), "a close block goes on in picoseconds");
        let below: Vec<i64> = vec![5_000, 7_000, 2_001, 1_000, 9_000];
        assert!(round_trip(&below).store.side.is_empty());
    }

    #[test]
    fn far_apart_negative_and_extreme_values_are_kept_exactly() {
        let mut values = vec![i64::MIN, i64::MAX, -1, 0, 1, 1 << 40, -(1 << 40), u32::MAX as i64, -(u32::MAX as i64)];
        values.extend((0..300).map(|i| (i * 7_919) % 13 * (1i64 << 31) - (1 << 33)));
        values.extend((0..300).map(|i| if i % 2 == 0 { 0 } else { i64::MAX - i }));
        round_trip(&values);
    }

    #[test]
    fn a_value_below_the_base_lowers_it_when_the_block_still_fits() {
        let values: Vec<i64> = (0..BLOCK as i64).map(|i| 10_000 - i * 1_000).collect();
        let column = round_trip(&values);
        assert!(column.store.side.is_empty(), "descending close values stay narrow");
        let spread = [0, u32::MAX as i64 * 1_000, -1_000];
        let column = round_trip(&spread);
        assert_eq!(column.store.side.len(), BLOCK, "a spread over 2^32 makes the block wide");
    }

    #[test]
    fn set_and_shifts_keep_every_other_value() {
        let values: Vec<i64> = (0..200).map(|i| i * 1_000).collect();
        let mut column: PackedI64 = values.iter().copied().collect();
        column.set(70, -(1 << 45));
        column.set(3, 42);
        column.set(500, 1);
        let mut want = values.clone();
        want[70] = -(1 << 45);
        want[3] = 42;
        assert_eq!(column.to_vec(), want);
        let narrow = column.store.blocks.iter().filter(|block| block.wide == NARROW).count();
        assert_eq!(column.checked_add_all(1 << 44), Some(()));
        want.iter_mut().for_each(|v| *v += 1 << 44);
        assert_eq!(column.to_vec(), want);
        assert_eq!(
            column.store.blocks.iter().filter(|block| block.wide == NARROW).count(),
            narrow,
            "shifts keep blocks narrow"
        );
        assert_eq!(column.checked_add_all(i64::MAX), None);
        assert_eq!(column.to_vec(), want, "an overflowing shift changes nothing");
        column.set(150, i64::MAX - 5);
        column.saturating_add_all(10);
        want.iter_mut().for_each(|v| *v += 10);
        want[150] = i64::MAX;
        assert_eq!(column.to_vec(), want);
    }

    #[test]
    fn equality_ignores_the_packing() {
        let values: Vec<i64> = (0..130).collect();
        let mut widened: PackedI64 = values.iter().copied().collect();
        widened.set(5, 1 << 50);
        widened.set(5, 5);
        assert_eq!(widened, values.iter().copied().collect::<PackedI64>());
        assert_ne!(widened, (0..129).collect::<PackedI64>());
    }

    /// `len` values from a random start, each a random step from the one before:
    /// steps of every size, on and off the nanosecond grid, up and down.
    fn random_walk(next: &mut impl FnMut() -> u64, len: usize) -> Vec<i64> {
        let mut value = (next() as i64) >> (next() % 64);
        let mut values = Vec::with_capacity(len);
        for _ in 0..len {
            let step = match next() % 6 {
                0 => (next() % 5_000) as i64 * 1_000,
                1 => (next() % 5_000) as i64,
                2 => -((next() % 3_000) as i64) * 1_000,
                3 => (next() >> (next() % 64)) as i64,
                4 => 0,
                _ => (next() % (1 << 42)) as i64 * 1_000,
            };
            value = value.wrapping_add(step);
            values.push(value);
        }
        values
    }

    #[test]
    fn random_values_and_updates_round_trip() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for round in 0..200 {
            let len = (next() % 700) as usize;
            let mut values = random_walk(&mut next, len);
            let mut column = round_trip(&values);
            for _ in 0..20 {
                if len == 0 {
                    break;
                }
                let at = (next() as usize) % len;
                let new = if next().is_multiple_of(2) { values[at].wrapping_add(1) } else { next() as i64 };
                values[at] = new;
                column.set(at, new);
            }
            assert_eq!(column.to_vec(), values, "round {round}");
        }
    }

    /// `is_sorted` and `min` answer as the plain values do: sorted lists, lists with
    /// one pair out of order, and unsorted ones, in narrow and wide blocks.
    #[test]
    fn sortedness_and_minimum_are_those_of_the_values() {
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        // A third of the lists as drawn, a third sorted, a third sorted but for a swap.
        let lists = (0..400).map(|round| {
            let mut values = random_walk(&mut next, round % 300);
            if round % 3 != 0 {
                values.sort_unstable();
            }
            if round % 3 == 1 && values.len() > 1 {
                let at = next() as usize % (values.len() - 1);
                values.swap(at, at + 1);
            }
            values
        });
        for values in lists.collect::<Vec<_>>() {
            let column: PackedI64 = values.iter().copied().collect();
            assert_eq!(column.is_sorted(), values.is_sorted(), "{values:?}");
            assert_eq!(column.min(), values.iter().copied().min(), "{values:?}");
        }
        // Two narrow blocks, each in order, the second starting below the first's end.
        let mut across_blocks: Vec<i64> = (0..2 * BLOCK as i64).collect();
        across_blocks.swap(BLOCK - 1, BLOCK);
        assert!(!round_trip(&across_blocks).is_sorted());
        let wide = round_trip(&[0, 5, 1 << 40, (1 << 40) + 1]);
        assert!(!wide.store.side.is_empty());
        assert!(wide.is_sorted());
        assert!(PackedI64::new().is_sorted());
        assert_eq!(PackedI64::new().min(), None);
    }
}
