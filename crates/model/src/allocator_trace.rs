//! A caching allocator's trace (PyTorch's `device_traces` in a CUDA memory snapshot),
//! held as columns: the one part of a profile that can run to tens of millions of
//! records, each too small to be worth an event with stats.
//!
//! The one design decision to know: a record keeps only what the allocator wrote —
//! its action, address, size, stream, stack and time — in one column each (about 35
//! bytes a record). The running totals (allocated and reserved bytes after each
//! record) are not stored: [`AllocatorTrace::totals`] replays them from each device's
//! totals before the first record, in trace order, for whoever needs them.

use crate::fxhash::FxMap;

/// What an allocator trace record did, with PyTorch's names ([`AllocatorAction::name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AllocatorAction {
    /// A block handed out (`alloc`).
    Alloc,
    /// `free` called; the block waits for its streams (`free_requested`).
    FreeRequested,
    /// The block is reusable (`free_completed`).
    FreeCompleted,
    /// `cudaMalloc` of a segment (`segment_alloc`).
    SegmentAlloc,
    /// `cudaFree` of a segment (`segment_free`).
    SegmentFree,
    /// Pages mapped into an expandable segment (`segment_map`).
    SegmentMap,
    /// Pages unmapped from an expandable segment (`segment_unmap`).
    SegmentUnmap,
    /// The snapshot was taken (`snapshot`).
    Snapshot,
    /// An allocation failed for lack of memory (`oom`).
    Oom,
    /// Anything else (a newer release's action): index into
    /// [`AllocatorTrace::other_actions`].
    Other(u32),
}

impl AllocatorAction {
    /// The action PyTorch writes as `text`; `Other(other)` for one it did not write when
    /// this was written.
    pub fn known(text: &str) -> Option<AllocatorAction> {
        Some(match text {
            "alloc" => AllocatorAction::Alloc,
            "free_requested" => AllocatorAction::FreeRequested,
            "free_completed" => AllocatorAction::FreeCompleted,
            "segment_alloc" => AllocatorAction::SegmentAlloc,
            "segment_free" => AllocatorAction::SegmentFree,
            "segment_map" => AllocatorAction::SegmentMap,
            "segment_unmap" => AllocatorAction::SegmentUnmap,
            "snapshot" => AllocatorAction::Snapshot,
            "oom" => AllocatorAction::Oom,
            _ => return None,
        })
    }

    /// The name PyTorch writes for it.
    pub fn name(self, trace: &AllocatorTrace) -> &str {
        match self {
            AllocatorAction::Alloc => "alloc",
            AllocatorAction::FreeRequested => "free_requested",
            AllocatorAction::FreeCompleted => "free_completed",
            AllocatorAction::SegmentAlloc => "segment_alloc",
            AllocatorAction::SegmentFree => "segment_free",
            AllocatorAction::SegmentMap => "segment_map",
            AllocatorAction::SegmentUnmap => "segment_unmap",
            AllocatorAction::Snapshot => "snapshot",
            AllocatorAction::Oom => "oom",
            AllocatorAction::Other(id) => trace.other_actions.get(id as usize).map_or("", String::as_str),
        }
    }

    /// How a record of this action and `size` bytes changes (allocated, reserved)
    /// bytes: `torch.cuda.memory_allocated()` goes up at `alloc` and down at
    /// `free_requested`, `torch.cuda.memory_reserved()` follows the segments.
    pub fn delta(self, size: i64) -> (i64, i64) {
        match self {
            AllocatorAction::Alloc => (size, 0),
            AllocatorAction::FreeRequested => (size.saturating_neg(), 0),
            AllocatorAction::SegmentAlloc | AllocatorAction::SegmentMap => (0, size),
            AllocatorAction::SegmentFree | AllocatorAction::SegmentUnmap => (0, size.saturating_neg()),
            _ => (0, 0),
        }
    }

    /// A record's `size` as the `[memory]` event's `Bytes`: less it for
    /// `free_requested`, as it is for every other action.
    pub fn signed(self, size: i64) -> i64 {
        match self {
            AllocatorAction::FreeRequested => size.saturating_neg(),
            _ => size,
        }
    }

    /// One byte for the action column: the known actions by position, others after.
    fn code(self) -> u8 {
        match self {
            AllocatorAction::Alloc => 0,
            AllocatorAction::FreeRequested => 1,
            AllocatorAction::FreeCompleted => 2,
            AllocatorAction::SegmentAlloc => 3,
            AllocatorAction::SegmentFree => 4,
            AllocatorAction::SegmentMap => 5,
            AllocatorAction::SegmentUnmap => 6,
            AllocatorAction::Snapshot => 7,
            AllocatorAction::Oom => 8,
            AllocatorAction::Other(id) => FIRST_OTHER.saturating_add(u8::try_from(id).unwrap_or(u8::MAX)),
        }
    }

    fn of_code(code: u8) -> AllocatorAction {
        match code {
            0 => AllocatorAction::Alloc,
            1 => AllocatorAction::FreeRequested,
            2 => AllocatorAction::FreeCompleted,
            3 => AllocatorAction::SegmentAlloc,
            4 => AllocatorAction::SegmentFree,
            5 => AllocatorAction::SegmentMap,
            6 => AllocatorAction::SegmentUnmap,
            7 => AllocatorAction::Snapshot,
            8 => AllocatorAction::Oom,
            other => AllocatorAction::Other(u32::from(other - FIRST_OTHER)),
        }
    }
}

/// The action code of the first action this reader does not know.
const FIRST_OTHER: u8 = 9;

/// The most distinct unknown actions a trace keeps apart; the rest read as the last.
pub const MAX_OTHER_ACTIONS: usize = (u8::MAX - FIRST_OTHER) as usize + 1;

/// What only a few records carry, kept aside so every record stays small.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordExtras {
    /// `oom` only: the device's free bytes the driver reported (`device_free`).
    pub device_free: Option<i64>,
    /// `compile_context` (PyTorch 2.8+) when set.
    pub compile_context: Option<String>,
    /// `user_metadata` (PyTorch 2.10+) when set.
    pub user_metadata: Option<String>,
}

/// One record, read out of the columns. Bytes are bytes; the time is picoseconds
/// relative to the profile start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocatorRecord {
    /// What happened.
    pub action: AllocatorAction,
    /// The block's or segment's address (0 for `oom`).
    pub address: u64,
    /// Bytes (for `oom`, the bytes asked for).
    pub size: i64,
    /// The device ordinal.
    pub device: u16,
    /// The stream (`cudaStream_t` as an integer; 0 is the default stream).
    pub stream: i64,
    /// The stack recorded with it: index into [`AllocatorTrace::stacks`].
    pub stack: Option<u32>,
    /// When, picoseconds.
    pub time_ps: i64,
}

/// Marks a record without a stack in the stack column.
const NO_STACK: u32 = u32::MAX;

/// The allocator's records in trace order (each device's records in its order),
/// column by column.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AllocatorTrace {
    actions: Vec<u8>,
    addresses: Vec<u64>,
    sizes: Vec<i64>,
    devices: Vec<u16>,
    /// Index into `streams`.
    stream_ids: Vec<u32>,
    stack_ids: Vec<u32>,
    times_ps: Vec<i64>,
    streams: Vec<i64>,
    stream_index: FxMap<i64, u32>,
    /// Records with [`RecordExtras`], by record index (ascending).
    extras: Vec<(u32, RecordExtras)>,
    /// The names of the actions this reader does not know, by [`AllocatorAction::Other`].
    pub other_actions: Vec<String>,
    /// The distinct stacks, one `file:line:function` per line, innermost first (as
    /// PyTorch's memory viewer writes them); "" for an empty one.
    pub stacks: Vec<String>,
    /// Each device's (allocated, reserved) bytes before its first record, by device.
    pub start_totals: Vec<(u16, i64, i64)>,
}

impl AllocatorTrace {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.actions.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// Appends a record; `stack` indexes [`AllocatorTrace::stacks`].
    pub fn push(&mut self, record: AllocatorRecord) {
        // Most records are on the stream of the one before.
        let last = self.stream_ids.last().copied().filter(|&id| self.streams.get(id as usize) == Some(&record.stream));
        let stream = match last.or_else(|| self.stream_index.get(&record.stream).copied()) {
            Some(id) => id,
            None => {
                let id = u32::try_from(self.streams.len()).unwrap_or(u32::MAX);
                self.streams.push(record.stream);
                self.stream_index.insert(record.stream, id);
                id
            }
        };
        self.actions.push(record.action.code());
        self.addresses.push(record.address);
        self.sizes.push(record.size);
        self.devices.push(record.device);
        self.stream_ids.push(stream);
        self.stack_ids.push(record.stack.unwrap_or(NO_STACK));
        self.times_ps.push(record.time_ps);
    }

    /// Attaches `extras` to the record last pushed.
    pub fn set_last_extras(&mut self, extras: RecordExtras) {
        if let Some(last) = self.len().checked_sub(1).and_then(|i| u32::try_from(i).ok()) {
            self.extras.push((last, extras));
        }
    }

    /// Record `index` (`None` past the end).
    pub fn get(&self, index: usize) -> Option<AllocatorRecord> {
        let stack = *self.stack_ids.get(index)?;
        Some(AllocatorRecord {
            action: AllocatorAction::of_code(self.actions[index]),
            address: self.addresses[index],
            size: self.sizes[index],
            device: self.devices[index],
            stream: self.streams.get(self.stream_ids[index] as usize).copied().unwrap_or(0),
            stack: (stack != NO_STACK).then_some(stack),
            time_ps: self.times_ps[index],
        })
    }

    /// Record `index`'s action (`None` past the end).
    pub fn action(&self, index: usize) -> Option<AllocatorAction> {
        self.actions.get(index).map(|&code| AllocatorAction::of_code(code))
    }

    /// Record `index`'s address (0 past the end).
    pub fn address(&self, index: usize) -> u64 {
        self.addresses.get(index).copied().unwrap_or(0)
    }

    /// Record `index`'s size, bytes (0 past the end).
    pub fn size(&self, index: usize) -> i64 {
        self.sizes.get(index).copied().unwrap_or(0)
    }

    /// The records in trace order.
    pub fn iter(&self) -> impl Iterator<Item = AllocatorRecord> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// The extras of record `index`, when it has any.
    pub fn extras(&self, index: usize) -> Option<&RecordExtras> {
        let index = u32::try_from(index).ok()?;
        self.extras.binary_search_by_key(&index, |(i, _)| *i).ok().map(|at| &self.extras[at].1)
    }

    /// The text of stack `id` ("" for an unknown one).
    pub fn stack(&self, id: u32) -> &str {
        self.stacks.get(id as usize).map_or("", String::as_str)
    }

    /// Sets record `index`'s device (a reader may learn it after the record); nothing
    /// past the end.
    pub fn set_device(&mut self, index: usize, device: u16) {
        if let Some(slot) = self.devices.get_mut(index) {
            *slot = device;
        }
    }

    /// Rewrites every record's time, in trace order, with `time_of(device, time)`.
    pub fn map_times(&mut self, mut time_of: impl FnMut(u16, i64) -> i64) {
        for (time, &device) in self.times_ps.iter_mut().zip(&self.devices) {
            *time = time_of(device, *time);
        }
    }

    /// Gives back the room the columns were given and did not use.
    pub fn shrink_to_fit(&mut self) {
        self.actions.shrink_to_fit();
        self.addresses.shrink_to_fit();
        self.sizes.shrink_to_fit();
        self.devices.shrink_to_fit();
        self.stream_ids.shrink_to_fit();
        self.stack_ids.shrink_to_fit();
        self.times_ps.shrink_to_fit();
        self.extras.shrink_to_fit();
    }

    /// Each device's (allocated, reserved) bytes after each of its records, replayed
    /// in trace order from [`AllocatorTrace::start_totals`] and clamped at 0: calls
    /// `each(index, record, totals)` for every record.
    pub fn totals(&self, mut each: impl FnMut(usize, &AllocatorRecord, (i64, i64))) {
        let mut current: ByDevice<(i64, i64)> = ByDevice::default();
        for &(device, allocated, reserved) in &self.start_totals {
            *current.get_mut(device) = (allocated, reserved);
        }
        for (index, record) in self.iter().enumerate() {
            let (allocated, reserved) = record.action.delta(record.size);
            let now = current.get_mut(record.device);
            *now = (now.0.saturating_add(allocated).max(0), now.1.saturating_add(reserved).max(0));
            each(index, &record, *now);
        }
    }
}

/// A value per device ordinal, in a vector as long as the largest ordinal seen (a
/// trace has a few devices, and each of its millions of records asks for its own).
#[derive(Clone, Debug)]
pub struct ByDevice<T> {
    values: Vec<T>,
}

impl<T> Default for ByDevice<T> {
    fn default() -> Self {
        ByDevice { values: Vec::new() }
    }
}

impl<T: Default> ByDevice<T> {
    /// The value of `device`, made with `T::default()` on first use.
    pub fn get_mut(&mut self, device: u16) -> &mut T {
        let at = usize::from(device);
        if at >= self.values.len() {
            self.values.resize_with(at + 1, T::default);
        }
        &mut self.values[at]
    }

    /// The values by device, from ordinal 0 to the largest used (those never asked
    /// for hold `T::default()`).
    pub fn into_values(self) -> impl Iterator<Item = (u16, T)> {
        self.values.into_iter().enumerate().map(|(device, value)| (u16::try_from(device).unwrap_or(u16::MAX), value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(action: AllocatorAction, size: i64, device: u16, stream: i64) -> AllocatorRecord {
        AllocatorRecord { action, address: 0x1000, size, device, stream, stack: None, time_ps: 0 }
    }

    #[test]
    fn records_read_back_as_pushed_with_streams_and_unknown_actions() {
        let mut trace = AllocatorTrace { other_actions: vec!["defrag".to_string()], ..AllocatorTrace::default() };
        let first = AllocatorRecord { stack: Some(3), time_ps: 7, ..record(AllocatorAction::Alloc, 512, 1, -9) };
        trace.push(first);
        trace.push(record(AllocatorAction::Other(0), 0, 0, 5));
        trace.set_last_extras(RecordExtras { device_free: Some(4), ..RecordExtras::default() });
        assert_eq!(trace.get(0), Some(first));
        assert_eq!(trace.get(1).map(|r| (r.action.name(&trace).to_string(), r.stream)), Some(("defrag".into(), 5)));
        assert_eq!(trace.extras(1).and_then(|e| e.device_free), Some(4));
        assert_eq!(trace.extras(0), None);
        assert_eq!(trace.get(2), None);
    }

    #[test]
    fn totals_replay_each_device_from_its_start_and_clamp_at_zero() {
        let mut trace = AllocatorTrace { start_totals: vec![(0, 100, 1000)], ..AllocatorTrace::default() };
        trace.push(record(AllocatorAction::Alloc, 50, 0, 0));
        trace.push(record(AllocatorAction::SegmentAlloc, 2048, 1, 0));
        trace.push(record(AllocatorAction::FreeRequested, 500, 0, 0));
        trace.push(record(AllocatorAction::FreeCompleted, 500, 0, 0));
        let mut seen = Vec::new();
        trace.totals(|index, _, totals| seen.push((index, totals)));
        assert_eq!(seen, vec![(0, (150, 1000)), (1, (0, 2048)), (2, (0, 1000)), (3, (0, 1000))]);
    }
}
