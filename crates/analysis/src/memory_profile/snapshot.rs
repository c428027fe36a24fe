//! What a PyTorch memory snapshot tells beyond the `[memory]` timeline: which stacks
//! hold the memory at the peak and at the end, how fragmented the segments are, what
//! was live at each out-of-memory error, the largest allocations and each stream's
//! peak. Read from the host's allocator trace ([`super::trace`]) and the segment and
//! block events the snapshot reader writes (`mlprof_formats::torch_memory`; names in
//! [`mlprof_model::names::memory_snapshot`]).
//!
//! The one design decision to know: the peak is the one the timeline reports (the last
//! event reaching the largest `Total Allocated`), and the blocks live at it are found
//! by replaying allocations and frees by address up to it, in the same order; blocks
//! the trace never allocated (from before it began) are not attributed to a stack.
//! A stack is named by its first frame in the user's own code (a Python file outside
//! PyTorch), else its first Python frame, else its first frame.

use std::collections::{BTreeMap, BinaryHeap, HashMap};

use mlprof_model::fxhash::FxMap;
use mlprof_model::names::memory_snapshot::{
    BLOCK_STATE_STAT, FRAMES_STAT, SEGMENT_EVENT, SNAPSHOT_CATEGORY, STREAM_STAT,
};
use mlprof_model::{AllocatorRecord, AllocatorTrace, Event, Host, Plane};
use serde::Serialize;

use super::trace::DeviceRecords;
use crate::xstats::{StatRow, StatSlots};

/// How a memory snapshot's profile is obtained, in one sentence.
pub(super) const METHOD: &str = "From a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot): allocated = \
     torch.cuda.memory_allocated() (up at alloc, down at free_requested), reserved = torch.cuda.memory_reserved() \
     (segments allocated or mapped), both rebuilt backwards from the snapshot's segments and blocks; each \
     allocation is named by its stack's first frame in the user's code.";

/// Rows kept in each table (largest first).
pub const TOP_ROWS: usize = 20;

/// What a memory snapshot adds, per device.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SnapshotMemory {
    /// One entry per device, by ordinal.
    pub devices: Vec<SnapshotDevice>,
}

/// One device's memory as its snapshot records it. Bytes are bytes; times are
/// picoseconds relative to the profile start.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SnapshotDevice {
    /// `cuda:N`.
    pub memory_id: String,
    /// Segments at the snapshot.
    pub segments: u64,
    /// Their bytes (`torch.cuda.memory_reserved()` at the snapshot).
    pub reserved_bytes: i64,
    /// Bytes of blocks handed out (`active_allocated`).
    pub allocated_bytes: i64,
    /// Bytes of freed blocks still waiting for their streams (`active_pending_free`).
    pub pending_free_bytes: i64,
    /// Bytes of free blocks inside the segments (`inactive`): reserved but unusable
    /// for a larger request when split into small pieces.
    pub free_bytes: i64,
    /// The largest free block of any segment: the largest request served without a
    /// new `cudaMalloc` (within the block's pool and stream).
    pub largest_free_block_bytes: i64,
    /// `free_bytes / reserved_bytes` (0 when nothing is reserved).
    pub fragmentation: f64,
    /// The segments with the most free bytes.
    pub fragmented_segments: Vec<SegmentRow>,
    /// Blocks live at the timeline's peak, grouped by the stack that allocated them.
    pub live_at_peak: Vec<StackRow>,
    /// When that peak was, picoseconds.
    pub peak_time_ps: i64,
    /// Blocks allocated at the snapshot, grouped by stack.
    pub live_at_snapshot: Vec<StackRow>,
    /// The largest allocations of the trace.
    pub largest_allocations: Vec<AllocationRow>,
    /// Each stream's allocations and peak.
    pub streams: Vec<StreamRow>,
    /// Every out-of-memory error of the trace.
    pub ooms: Vec<OomRow>,
}

/// A segment at the snapshot.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SegmentRow {
    /// Its address.
    pub address: u64,
    /// The stream whose pool holds it.
    pub stream: i64,
    /// `large` or `small`.
    pub segment_type: String,
    /// Its size.
    pub total_bytes: i64,
    /// Bytes handed out.
    pub allocated_bytes: i64,
    /// Bytes in free blocks.
    pub free_bytes: i64,
    /// Its largest free block.
    pub largest_free_block_bytes: i64,
    /// Its blocks.
    pub blocks: u64,
}

/// Blocks grouped by the name of the stack that allocated them ([`stack_label`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StackRow {
    /// The stack's name: its first frame in the user's code (`file:line:function`).
    pub label: String,
    /// Their bytes.
    pub bytes: i64,
    /// How many blocks.
    pub blocks: u64,
    /// How many distinct stacks share the name.
    pub stacks: u64,
    /// The stack holding most of the bytes, one `file:line:function` per line,
    /// innermost first ("" when none was recorded).
    pub frames: String,
}

/// One allocation of the trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AllocationRow {
    /// When, picoseconds.
    pub time_ps: i64,
    /// Its bytes.
    pub bytes: i64,
    /// Its stream.
    pub stream: i64,
    /// The stack's name ([`StackRow::label`]).
    pub label: String,
    /// When it was freed (`free_requested`), picoseconds; `None` when still live at
    /// the snapshot.
    pub freed_at_ps: Option<i64>,
}

/// One stream's allocations.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StreamRow {
    /// The stream (`cudaStream_t` as an integer; 0 is the default stream).
    pub stream: i64,
    /// Allocations on it.
    pub allocations: u64,
    /// The most bytes its allocations in the trace held at once.
    pub peak_bytes: i64,
    /// When, picoseconds.
    pub peak_time_ps: i64,
}

/// An out-of-memory error.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OomRow {
    /// When, picoseconds.
    pub time_ps: i64,
    /// The stream of the failed request.
    pub stream: i64,
    /// The bytes asked for.
    pub requested_bytes: i64,
    /// The device's free bytes the driver reported.
    pub device_free_bytes: i64,
    /// Allocated bytes then.
    pub allocated_bytes: i64,
    /// Reserved bytes then.
    pub reserved_bytes: i64,
    /// The largest holders then, by stack (at most 5).
    pub live: Vec<StackRow>,
}

/// The stat keys read, in this order.
const KEYS: [&str; 8] =
    ["Bytes", "Device Id", STREAM_STAT, FRAMES_STAT, BLOCK_STATE_STAT, "Addr", "Segment Type", "Segment Addr"];
const BYTES: usize = 0;
const DEVICE: usize = 1;
const STREAM: usize = 2;
const FRAMES: usize = 3;
const STATE: usize = 4;
const ADDR: usize = 5;
const SEGMENT_TYPE: usize = 6;
const SEGMENT_ADDR: usize = 7;

/// The snapshot part of the memory profile of `host`: its allocator trace `trace`,
/// read per device into `records` ([`super::trace::per_device`]), and its segment and
/// block events.
pub(super) fn analyze(host: &Host, trace: &AllocatorTrace, records: &[DeviceRecords]) -> SnapshotMemory {
    let mut devices: BTreeMap<i64, Device<'_>> = BTreeMap::new();
    for plane in &host.planes {
        let kinds = Kinds::of(plane);
        if !kinds.snapshot.contains(&true) {
            continue;
        }
        let slots = StatSlots::new(plane, KEYS);
        for line in &plane.lines {
            for event in line.iter() {
                let m = event.metadata_index() as usize;
                if !kinds.snapshot.get(m).copied().unwrap_or(false) {
                    continue;
                }
                let read = Read { plane, row: slots.row(plane, &event), event };
                let device = devices.entry(read.int(DEVICE).unwrap_or(0)).or_default();
                if kinds.segment.get(m).copied().unwrap_or(false) {
                    device.segments.push(read.segment());
                } else if read.str(STATE).is_some() {
                    device.blocks.push(read.block());
                }
            }
        }
    }
    for device in records {
        devices.entry(i64::from(device.device)).or_default().records = Some(device);
    }
    SnapshotMemory { devices: devices.into_iter().map(|(ordinal, device)| device.summarize(ordinal, trace)).collect() }
}

/// Which event metadata of a plane are what.
struct Kinds {
    segment: Vec<bool>,
    snapshot: Vec<bool>,
}

impl Kinds {
    fn of(plane: &Plane) -> Kinds {
        let snapshot: Vec<bool> = crate::hta_read::kept_categories(plane)
            .into_iter()
            .map(|kept| kept.is_some_and(|(cat, _)| cat == SNAPSHOT_CATEGORY))
            .collect();
        Kinds {
            segment: plane
                .event_metadata
                .iter()
                .zip(&snapshot)
                .map(|(meta, &snap)| snap && meta.name == SEGMENT_EVENT)
                .collect(),
            snapshot,
        }
    }
}

/// The stats of one event, read in one pass over them.
struct Read<'a> {
    plane: &'a Plane,
    row: StatRow<8>,
    event: Event<'a>,
}

impl<'a> Read<'a> {
    fn int(&self, i: usize) -> Option<i64> {
        self.row.int(i)
    }

    fn str(&self, i: usize) -> Option<&'a str> {
        self.row.str(i, self.plane, &self.event)
    }

    fn segment(&self) -> SegmentRow {
        SegmentRow {
            address: self.int(ADDR).unwrap_or(0) as u64,
            stream: self.int(STREAM).unwrap_or(0),
            segment_type: self.str(SEGMENT_TYPE).unwrap_or("").to_string(),
            total_bytes: self.int(BYTES).unwrap_or(0),
            ..SegmentRow::default()
        }
    }

    fn block(&self) -> BlockEntry<'a> {
        BlockEntry {
            segment: self.int(SEGMENT_ADDR).unwrap_or(0) as u64,
            bytes: self.int(BYTES).unwrap_or(0),
            state: self.str(STATE).unwrap_or(""),
            frames: self.str(FRAMES).unwrap_or(""),
        }
    }
}

/// An `alloc`, `free_requested` or `oom` record with the totals after it.
#[derive(Clone, Copy)]
struct MemoryEntry<'a> {
    time_ps: i64,
    address: u64,
    bytes: i64,
    stream: i64,
    frames: &'a str,
    allocated: i64,
    reserved: i64,
}

impl<'a> MemoryEntry<'a> {
    fn of(trace: &'a AllocatorTrace, record: &AllocatorRecord, (allocated, reserved): (i64, i64)) -> MemoryEntry<'a> {
        MemoryEntry {
            time_ps: record.time_ps,
            address: record.address,
            bytes: record.action.signed(record.size),
            stream: record.stream,
            frames: record.stack.map_or("", |id| trace.stack(id)),
            allocated,
            reserved,
        }
    }
}

struct BlockEntry<'a> {
    segment: u64,
    bytes: i64,
    state: &'a str,
    frames: &'a str,
}

#[derive(Default)]
struct Device<'a> {
    records: Option<&'a DeviceRecords>,
    segments: Vec<SegmentRow>,
    blocks: Vec<BlockEntry<'a>>,
}

/// A device's records read one at a time, in time order.
struct Entries<'a> {
    trace: &'a AllocatorTrace,
    records: &'a DeviceRecords,
}

impl<'a> Entries<'a> {
    fn len(&self) -> usize {
        self.records.order.len()
    }

    fn get(&self, position: usize) -> MemoryEntry<'a> {
        let totals = self.records.totals.get(position).copied().unwrap_or_default();
        MemoryEntry::of(self.trace, &self.records.record(self.trace, position), totals)
    }

    fn iter(&self) -> impl Iterator<Item = MemoryEntry<'a>> + '_ {
        (0..self.len()).map(|position| self.get(position))
    }

    fn ooms(&self) -> impl Iterator<Item = (MemoryEntry<'a>, i64)> + '_ {
        self.records.ooms.iter().filter_map(|&(index, totals)| {
            let record = self.trace.get(index as usize)?;
            let free = self.trace.extras(index as usize).and_then(|e| e.device_free).unwrap_or(0);
            Some((MemoryEntry::of(self.trace, &record, totals), free))
        })
    }
}

impl Device<'_> {
    fn summarize(mut self, ordinal: i64, trace: &AllocatorTrace) -> SnapshotDevice {
        let empty = DeviceRecords::default();
        let records = self.records.unwrap_or(&empty);
        let entries = Entries { trace, records };
        let mut out = SnapshotDevice { memory_id: format!("cuda:{ordinal}"), ..SnapshotDevice::default() };
        replay(&entries, records.peak(), &mut out);
        self.fragmentation(&mut out);
        let live: Vec<(&str, i64)> =
            self.blocks.iter().filter(|b| b.state == "active_allocated").map(|b| (b.frames, b.bytes)).collect();
        out.live_at_snapshot = by_stack(live.into_iter(), TOP_ROWS);
        out
    }
    fn fragmentation(&mut self, out: &mut SnapshotDevice) {
        let mut by_segment: HashMap<u64, usize> = HashMap::new();
        for (i, segment) in self.segments.iter().enumerate() {
            by_segment.insert(segment.address, i);
            out.reserved_bytes = out.reserved_bytes.saturating_add(segment.total_bytes);
        }
        out.segments = self.segments.len() as u64;
        for block in &self.blocks {
            let segment = by_segment.get(&block.segment).and_then(|&i| self.segments.get_mut(i));
            match block.state {
                "active_allocated" => out.allocated_bytes = out.allocated_bytes.saturating_add(block.bytes),
                "active_pending_free" => out.pending_free_bytes = out.pending_free_bytes.saturating_add(block.bytes),
                _ => {
                    out.free_bytes = out.free_bytes.saturating_add(block.bytes);
                    out.largest_free_block_bytes = out.largest_free_block_bytes.max(block.bytes);
                }
            }
            if let Some(segment) = segment {
                segment.blocks += 1;
                if block.state == "inactive" {
                    segment.free_bytes = segment.free_bytes.saturating_add(block.bytes);
                    segment.largest_free_block_bytes = segment.largest_free_block_bytes.max(block.bytes);
                } else if block.state == "active_allocated" {
                    segment.allocated_bytes = segment.allocated_bytes.saturating_add(block.bytes);
                }
            }
        }
        out.fragmentation =
            if out.reserved_bytes > 0 { out.free_bytes as f64 / out.reserved_bytes as f64 } else { 0.0 };
        let mut segments: Vec<SegmentRow> = self.segments.iter().filter(|s| s.free_bytes > 0).cloned().collect();
        segments.sort_by_key(|s| (std::cmp::Reverse(s.free_bytes), s.address));
        segments.truncate(TOP_ROWS);
        out.fragmented_segments = segments;
    }
}

/// Replays a device's allocations and frees by address, in one pass: what was live
/// at the peak (entry `peak`) and at each OOM, each stream's peak, the largest
/// allocations and when they were freed.
fn replay(entries: &Entries<'_>, peak: Option<usize>, out: &mut SnapshotDevice) {
    // Address → (position of its allocation, its stream, its bytes).
    let mut live: FxMap<u64, (usize, i64, i64)> = FxMap::default();
    let mut largest = Largest::default();
    let mut streams: BTreeMap<i64, StreamRow> = BTreeMap::new();
    let mut held: FxMap<i64, i64> = FxMap::default();
    let ooms: Vec<(MemoryEntry<'_>, i64)> = entries.ooms().collect();
    let mut ooms = ooms.iter().peekable();
    let mut oom_rows = Vec::new();
    let live_rows = |live: &FxMap<u64, (usize, i64, i64)>, top: usize| {
        by_stack(live.values().map(|&(i, _, _)| entries.get(i)).map(|e| (e.frames, e.bytes)), top)
    };
    for (index, entry) in entries.iter().enumerate() {
        while let Some((oom, free)) = ooms.next_if(|(oom, _)| oom.time_ps < entry.time_ps) {
            oom_rows.push(oom_row(oom, *free, live_rows(&live, 5)));
        }
        let stream = streams.entry(entry.stream).or_insert(StreamRow { stream: entry.stream, ..StreamRow::default() });
        if entry.bytes >= 0 {
            live.insert(entry.address, (index, entry.stream, entry.bytes));
            stream.allocations += 1;
            let now = held.entry(entry.stream).or_default();
            *now = now.saturating_add(entry.bytes);
            if *now > stream.peak_bytes {
                stream.peak_bytes = *now;
                stream.peak_time_ps = entry.time_ps;
            }
            largest.offer(&entry, index);
        } else if let Some((alloc, stream, bytes)) = live.remove(&entry.address) {
            let now = held.entry(stream).or_default();
            *now = now.saturating_sub(bytes);
            largest.freed(alloc, entry.time_ps);
        }
        if Some(index) == peak {
            out.live_at_peak = live_rows(&live, TOP_ROWS);
            out.peak_time_ps = entry.time_ps;
        }
    }
    for (oom, free) in ooms {
        oom_rows.push(oom_row(oom, *free, live_rows(&live, 5)));
    }
    out.ooms = oom_rows;
    out.streams = streams.into_values().collect();
    out.largest_allocations = largest.rows(entries);
}

/// The [`TOP_ROWS`] largest allocations seen so far (most bytes first, then the
/// earliest, then the first stored), with when each was freed. An allocation leaves
/// them only for a larger one, and never comes back: so those kept at the end were
/// kept from their allocation on, and their frees were all seen.
#[derive(Default)]
struct Largest {
    /// (most bytes first, time, position), the worst kept on top.
    top: BinaryHeap<(std::cmp::Reverse<i64>, i64, usize)>,
    /// Position → when it was freed, for those in `top`.
    freed_at: FxMap<usize, Option<i64>>,
}

impl Largest {
    fn offer(&mut self, entry: &MemoryEntry<'_>, position: usize) {
        let key = (std::cmp::Reverse(entry.bytes), entry.time_ps, position);
        if entry.bytes <= 0 || (self.top.len() == TOP_ROWS && self.top.peek().is_some_and(|worst| key >= *worst)) {
            return;
        }
        if self.top.len() == TOP_ROWS
            && let Some((_, _, out)) = self.top.pop()
        {
            self.freed_at.remove(&out);
        }
        self.top.push(key);
        self.freed_at.insert(position, None);
    }

    fn freed(&mut self, position: usize, time_ps: i64) {
        if let Some(freed) = self.freed_at.get_mut(&position) {
            *freed = Some(time_ps);
        }
    }

    fn rows(self, entries: &Entries<'_>) -> Vec<AllocationRow> {
        let freed_at = self.freed_at;
        self.top
            .into_sorted_vec()
            .into_iter()
            .map(|(_, _, i)| {
                let e = entries.get(i);
                AllocationRow {
                    time_ps: e.time_ps,
                    bytes: e.bytes,
                    stream: e.stream,
                    label: stack_label(e.frames),
                    freed_at_ps: freed_at.get(&i).copied().flatten(),
                }
            })
            .collect()
    }
}

fn oom_row(oom: &MemoryEntry<'_>, device_free: i64, live: Vec<StackRow>) -> OomRow {
    OomRow {
        time_ps: oom.time_ps,
        stream: oom.stream,
        requested_bytes: oom.bytes,
        device_free_bytes: device_free,
        allocated_bytes: oom.allocated,
        reserved_bytes: oom.reserved,
        live,
    }
}

/// `(frames, bytes)` grouped by [`stack_label`], most bytes first, at most `top` rows;
/// each row shows the stack that holds most of its bytes.
fn by_stack<'a>(blocks: impl Iterator<Item = (&'a str, i64)>, top: usize) -> Vec<StackRow> {
    let mut by_frames: HashMap<&str, (i64, u64)> = HashMap::new();
    for (frames, bytes) in blocks {
        let group = by_frames.entry(frames).or_default();
        *group = (group.0.saturating_add(bytes), group.1 + 1);
    }
    let mut by_label: HashMap<String, StackRow> = HashMap::new();
    let mut largest: HashMap<String, i64> = HashMap::new();
    for (frames, (bytes, blocks)) in by_frames {
        let label = stack_label(frames);
        let most = largest.entry(label.clone()).or_insert(-1);
        let row = by_label.entry(label.clone()).or_insert_with(|| StackRow { label, ..StackRow::default() });
        row.bytes = row.bytes.saturating_add(bytes);
        row.blocks += blocks;
        row.stacks += 1;
        if bytes > *most || (bytes == *most && frames < row.frames.as_str()) {
            *most = bytes;
            row.frames = frames.to_string();
        }
    }
    let mut rows: Vec<StackRow> = by_label.into_values().collect();
    rows.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.label.cmp(&b.label)));
    rows.truncate(top);
    rows
}

/// The frames of `row`'s stack worth showing: from its label's frame outwards (only
/// Python frames when the label is one), else past the allocator's own frames.
pub fn shown_frames(row: &StackRow) -> Vec<&str> {
    let lines: Vec<&str> = row.frames.lines().filter(|line| !line.is_empty()).collect();
    let python = |line: &&str| line.split(':').next().is_some_and(|file| file.ends_with(".py"));
    match lines.iter().position(|line| shorten_path(line) == row.label) {
        Some(at) if python(&lines[at]) => lines[at..].iter().copied().filter(python).collect(),
        _ => user_frames(&row.frames).collect(),
    }
}

/// The name of a stack (`file:line:function` lines, innermost first): its first frame
/// in the user's code (a `.py` file outside PyTorch and outside installed packages),
/// else its first Python frame outside PyTorch, else its first Python frame; for a C++-only stack (autograd's backward threads), the autograd node
/// (`DivBackward0 (autograd)`) or else the ATen op (`aten::div_Tensor`) that
/// allocated; else its first frame past the allocator's own; `(no stack recorded)`
/// for none.
pub fn stack_label(frames: &str) -> String {
    let python = |line: &&str| line.split(':').next().is_some_and(|file| file.ends_with(".py"));
    let in_torch = |line: &&str| line.contains("/torch/") || line.starts_with("torch/");
    let lines = || frames.lines().filter(|line| !line.is_empty());
    let installed = |line: &&str| line.contains("-packages/");
    let python_site = lines()
        .find(|line| python(line) && !in_torch(line) && !installed(line))
        .or_else(|| lines().find(|line| python(line) && !in_torch(line)))
        .or_else(|| lines().find(python));
    if let Some(line) = python_site {
        return shorten_path(line);
    }
    let name = |line: &str| line.splitn(3, ':').nth(2).unwrap_or(line).to_string();
    let autograd_node = lines().find_map(|line| {
        let function = name(line);
        let (node, _) = function.split("torch::autograd::generated::").nth(1)?.split_once("::apply(")?;
        (!node.contains("::")).then(|| format!("{node} (autograd)"))
    });
    let aten_op = || {
        lines().find_map(|line| {
            let function = name(line);
            let op = function.split("at::_ops::").nth(1)?.split("::").next()?.to_string();
            Some(format!("aten::{op}"))
        })
    };
    autograd_node
        .or_else(aten_op)
        .or_else(|| user_frames(frames).next().map(shorten_path))
        .unwrap_or_else(|| "(no stack recorded)".to_string())
}

/// The frames of a stack from the first one past the caching allocator and the stack
/// recorder themselves (what the allocation's caller did).
pub fn user_frames(frames: &str) -> impl Iterator<Item = &str> {
    const INTERNAL: [&str; 6] = [
        "torch::unwind",
        "CapturedTraceback",
        "gather_with_cpp",
        "CUDACachingAllocator",
        "empty_generic",
        "empty_cuda",
    ];
    let all = frames.lines().filter(|line| !line.is_empty());
    let internal = |line: &&str| INTERNAL.iter().any(|pattern| line.contains(pattern));
    let skip = all.clone().take_while(internal).count();
    let skip = if skip == all.clone().count() { 0 } else { skip };
    all.skip(skip)
}

/// `…/a/b/c.py:12:f` → `b/c.py:12:f`.
pub fn shorten_path(line: &str) -> String {
    let (file, rest) = line.split_once(':').unwrap_or((line, ""));
    let parts: Vec<&str> = file.rsplitn(3, '/').collect();
    let short = if parts.len() == 3 { format!("{}/{}", parts[1], parts[0]) } else { file.to_string() };
    if rest.is_empty() { short } else { format!("{short}:{rest}") }
}
