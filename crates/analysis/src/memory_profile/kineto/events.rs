//! Reading PyTorch's `[memory]` instant events off a Kineto host: their args, the
//! innermost `cpu_op` enclosing each one on its thread (PyTorch puts no op name on the
//! memory event), and the `ProfilerStep#N` it falls in.
//!
//! The one design decision to know: the enclosing op is found with one sweep per line
//! over the ops sorted by (start, longest first) and the memory events sorted by time,
//! keeping a stack of the ops open at the current time, so the cost is
//! O((ops + events) log ops) rather than ops × events.

use std::collections::HashMap;
use std::sync::Arc;

use mlprof_model::{Event, Host, Plane, StatValue};
use serde_json::Value;

use crate::grouping::profiler_steps::{self, ProfilerStep};
use crate::kineto::{Category, MEMORY_EVENT, categories, category_of};
use crate::xstats::{self, StatKeys, StatSlots};

/// One `[memory]` event with what it says and where it happened: what every pass over
/// millions of events reads. What only the few events shown need (its offset on its
/// line, its op's name and inputs, its stack's name) stays in the host: [`Details`].
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct MemoryEvent {
    /// Event time, picoseconds relative to the profile start.
    pub time_ps: i64,
    /// Kineto's `Ev Idx` (0 when missing): orders events at the same time.
    pub ev_idx: i64,
    /// Plane, line and event index: the last tie-breaker (and unique).
    pub position: (u32, u32, u32),
    /// `Device Type` (c10::DeviceType: 0 CPU, 1 CUDA, …; 0 when missing).
    pub device_type: i64,
    /// `Device Id` (-1 for CPU and when missing).
    pub device_id: i64,
    /// `Bytes`: positive for an allocation, negative for a free.
    pub bytes: i64,
    /// `Addr`: the block's address.
    pub address: u64,
    /// `Total Allocated` after the event, bytes.
    pub allocated_bytes: i64,
    /// `Total Reserved` after the event, bytes.
    pub reserved_bytes: i64,
    /// The event index, in the memory event's line, of the innermost `cpu_op`
    /// enclosing it, when there is one.
    pub op_event: Option<u32>,
    /// N of the enclosing `ProfilerStep#N`; -1 outside every step.
    pub step: i64,
}

/// The op that was running when a memory event happened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct OpInfo {
    /// The op's name (`aten::empty`).
    pub name: String,
    /// Its `Input Dims` as compact JSON (empty when not recorded).
    pub input_dims: String,
    /// Its `Input type` as compact JSON (empty when not recorded).
    pub input_types: String,
}

/// Reads what a [`MemoryEvent`] leaves in its host, for the events a profile shows.
pub(crate) struct Details<'h> {
    host: &'h Host,
    /// Per plane, the stat keys of [`STAT_NAMES`].
    keys: Vec<StatKeys<10>>,
    /// Stack names by (plane, the stack's `Ref` key; `u32::MAX` for none), made once.
    labels: HashMap<(u32, u32), Arc<str>>,
}

impl<'h> Details<'h> {
    /// The reader of `host`'s memory events.
    pub fn new(host: &'h Host) -> Details<'h> {
        let keys = host.planes.iter().map(|plane| StatKeys::new(plane, STAT_NAMES)).collect();
        Details { host, keys, labels: HashMap::new() }
    }

    fn event(&self, event: &MemoryEvent) -> Option<(&'h Plane, &StatKeys<10>, Event<'h>)> {
        let (plane_index, line, index) = event.position;
        let plane = self.host.planes.get(plane_index as usize)?;
        let keys = self.keys.get(plane_index as usize)?;
        let line = plane.lines.get(line as usize)?;
        Some((plane, keys, line.event(index as usize)?))
    }

    /// Its time from its line's start, picoseconds.
    pub fn offset_ps(&self, event: &MemoryEvent) -> i64 {
        self.event(event).map_or(0, |(_, _, e)| e.offset_ps())
    }

    /// The op that was running (the innermost enclosing `cpu_op`).
    pub fn op(&self, event: &MemoryEvent) -> Option<OpInfo> {
        let (plane, keys, _) = self.event(event)?;
        let line = plane.lines.get(event.position.1 as usize)?;
        let op = line.event(event.op_event? as usize)?;
        Some(OpInfo {
            name: xstats::event_name(plane, &op).to_string(),
            input_dims: compact_json(plane, &op, keys.key(INPUT_DIMS)),
            input_types: compact_json(plane, &op, keys.key(INPUT_TYPE)),
        })
    }

    /// The name of its own stack where the source records one (memory snapshots),
    /// [`crate::memory_profile::snapshot::stack_label`]: none where the plane records
    /// no stacks (a Kineto trace), and `(no stack recorded)` for an event without one
    /// on a plane that records them (a snapshot's entry from a thread with no Python
    /// frames, such as autograd's backward thread).
    pub fn stack_label(&mut self, event: &MemoryEvent) -> Option<Arc<str>> {
        let (plane, keys, memory) = self.event(event)?;
        let key = keys.key(FRAMES)?;
        let label = |text: &str| Arc::from(crate::memory_profile::snapshot::stack_label(text));
        let plane_index = event.position.0;
        match xstats::event_stat(plane, &memory, Some(key)) {
            None => Some(self.labels.entry((plane_index, u32::MAX)).or_insert_with(|| label("")).clone()),
            Some(StatValue::Ref(id)) => {
                let text = plane.stat_metadata.get(id as usize)?.name.as_str();
                Some(self.labels.entry((plane_index, id)).or_insert_with(|| label(text)).clone())
            }
            Some(_) => xstats::event_str(plane, &memory, Some(key)).map(label),
        }
    }
}

/// Every `[memory]` event of every plane of the host, in storage order.
pub(crate) fn memory_events(host: &Host) -> Vec<MemoryEvent> {
    let steps = profiler_steps::find(host);
    let mut events = Vec::new();
    for (plane_index, plane) in host.planes.iter().enumerate() {
        read_plane(plane, plane_index, &steps, &mut events);
    }
    events
}

/// The stat keys a memory event and its op are read with, in this order.
const STAT_NAMES: [&str; 10] = [
    "Addr",
    "Bytes",
    "Total Allocated",
    "Total Reserved",
    "Device Type",
    "Device Id",
    "Ev Idx",
    "Input Dims",
    "Input type",
    mlprof_model::names::memory_snapshot::FRAMES_STAT,
];
const ADDR: usize = 0;
const BYTES: usize = 1;
const TOTAL_ALLOCATED: usize = 2;
const TOTAL_RESERVED: usize = 3;
const DEVICE_TYPE: usize = 4;
const DEVICE_ID: usize = 5;
const EV_IDX: usize = 6;
const INPUT_DIMS: usize = 7;
const INPUT_TYPE: usize = 8;
const FRAMES: usize = 9;

fn read_plane(plane: &Plane, plane_index: usize, steps: &[ProfilerStep], out: &mut Vec<MemoryEvent>) {
    let is_memory: Vec<bool> = plane.event_metadata.iter().map(|m| m.name == MEMORY_EVENT).collect();
    if !is_memory.contains(&true) {
        return;
    }
    let table = categories(plane);
    let slots = StatSlots::new(plane, STAT_NAMES);
    for (line_index, line) in plane.lines.iter().enumerate() {
        let mut ops: Vec<Event<'_>> = Vec::new();
        let mut memory: Vec<Event<'_>> = Vec::new();
        for event in line.iter() {
            if is_memory.get(event.metadata_index() as usize).copied().unwrap_or(false) {
                memory.push(event);
            } else if category_of(&table, &event) == Category::CpuOp {
                ops.push(event);
            }
        }
        if memory.is_empty() {
            continue;
        }
        memory.sort_by_key(|event| (event.start_ps(), event.index()));
        ops.sort_by_key(|op| (op.start_ps(), std::cmp::Reverse(op.duration_ps()), op.index()));
        let enclosing = innermost_enclosing(&ops, &memory);
        for (event, op) in memory.iter().zip(enclosing) {
            let row = slots.row(plane, event);
            let int = |i: usize| row.int(i);
            out.push(MemoryEvent {
                time_ps: event.start_ps(),
                ev_idx: int(EV_IDX).unwrap_or(0),
                position: (index_u32(plane_index), index_u32(line_index), index_u32(event.index())),
                device_type: int(DEVICE_TYPE).unwrap_or(0),
                device_id: int(DEVICE_ID).unwrap_or(-1),
                bytes: int(BYTES).unwrap_or(0),
                address: int(ADDR).unwrap_or(0) as u64,
                allocated_bytes: int(TOTAL_ALLOCATED).unwrap_or(0),
                reserved_bytes: int(TOTAL_RESERVED).unwrap_or(0),
                op_event: op.map(|op| index_u32(op.index())),
                step: profiler_steps::step_at(steps, event.start_ps()).map_or(-1, |i| steps[i].number),
            });
        }
    }
}

/// A plane's, line's or event's index as stored in a [`MemoryEvent`] (lines and their
/// events are numbered by `u32` in the model).
fn index_u32(index: usize) -> u32 {
    u32::try_from(index).unwrap_or(u32::MAX)
}

/// For each memory event (sorted by time), the innermost op whose span
/// `[start, end]` contains its time: the latest start, then the shortest, then the
/// later stored. `ops` must be sorted by (start, longest first, index).
fn innermost_enclosing<'a, 'e>(ops: &'a [Event<'e>], memory: &[Event<'_>]) -> Vec<Option<&'a Event<'e>>> {
    let mut open: Vec<&Event<'e>> = Vec::new();
    let mut next = 0;
    let mut result = Vec::with_capacity(memory.len());
    for event in memory {
        let time = event.start_ps();
        while let Some(op) = ops.get(next).filter(|op| op.start_ps() <= time) {
            open.push(op);
            next += 1;
        }
        while open.last().is_some_and(|op| op.end_ps() < time) {
            open.pop();
        }
        result.push(open.last().copied());
    }
    result
}

/// A stat holding a JSON value (Kineto's `Input Dims`, `Input type`) as compact JSON;
/// a string stat as its text; empty when absent.
fn compact_json(plane: &Plane, event: &Event<'_>, key: Option<u32>) -> String {
    let (value, store) = match xstats::find(event.stats(), key) {
        Some(value) => (value, event.store()),
        None => match xstats::find(xstats::metadata_stats(plane, event), key) {
            Some(value) => (value, &plane.metadata_stats),
            None => return String::new(),
        },
    };
    match value {
        StatValue::Json(text) => {
            let raw = store.text(text);
            serde_json::from_str::<Value>(raw).map_or_else(|_| raw.trim().to_string(), |value| value.to_string())
        }
        other => xstats::as_str(plane, store, other).unwrap_or("").to_string(),
    }
}
