//! Reader of PyTorch CUDA memory snapshots (`torch.cuda.memory._dump_snapshot`, a
//! pickle of `torch.cuda.memory._snapshot()`; also a pickled
//! `torch.cuda.memory_snapshot()`, the segments alone) into a [`Host`] whose
//! [`Host::allocator_trace`] holds the trace entries, and whose plane is shaped like a
//! PyTorch profiler trace with `profile_memory=True` (an `[memory]` event per entry,
//! unless the reader is asked for the columns alone), so the trace viewer's counter
//! tracks and the steps read it as they read Kineto's. [`host`] documents the mapping.
//!
//! The one design decision to know: the file is decoded by [`crate::pickle`] (never by
//! running pickle code), and each trace entry goes into the [`AllocatorTrace`]'s
//! columns as soon as the decoder completes it, so a multi-GB snapshot never holds its
//! millions of entry dicts at once. Stacks are kept once per distinct frame list (the
//! snapshot shares them through the pickle memo: a million frame references are a few
//! thousand lists).
//!
//! The layouts read, by PyTorch release (keys missing in a file are simply absent):
//! segments with `blocks` (2.1+; older blocks carry `history` instead of `address` and
//! `frames`), `device_traces` (2.0+), `time_us` on entries (2.2+), `allocator_settings`
//! (2.3+), `external_annotations` (2.5+), `compile_context` (2.8+), `user_metadata`
//! (2.10+); `segment_map`/`segment_unmap` with expandable segments; `oom` entries
//! carry `device_free` in place of `addr`.

mod host;

use mlprof_model::fxhash::FxMap;

use mlprof_model::allocator_trace::MAX_OTHER_ACTIONS;
use mlprof_model::{AllocatorAction, AllocatorRecord, AllocatorTrace, ByDevice, Host, RecordExtras};

use crate::error::{FormatError, Result};
use crate::pickle::{self, Absorb, Objects, Value};

pub use host::snapshot_host;

/// Whether `head` (a file's first bytes) starts like a pickle ([`crate::pickle::is_pickle`]).
pub fn is_memory_snapshot(head: &[u8]) -> bool {
    pickle::is_pickle(head)
}

/// Whether a file's first bytes (up to 64 KiB) look like a memory snapshot rather than
/// any other pickle: a pickle that names a snapshot's keys early (`segments`,
/// `device_traces`, or a segment's `segment_type` for a bare list of segments).
pub fn looks_like_memory_snapshot(head: &[u8]) -> bool {
    let names = |key: &[u8]| head.windows(key.len()).any(|w| w == key);
    pickle::is_pickle(head) && (names(b"segments") || names(b"device_traces") || names(b"segment_type"))
}

/// Reads the memory snapshot in `bytes` (the file `path`) into a host named
/// `host_name`, with an event per trace entry.
pub fn read_memory_snapshot(bytes: &[u8], path: &str, host_name: &str) -> Result<Host> {
    read_memory_snapshot_releasing(bytes, &|_| {}, path, host_name, EntryEvents::Made)
}

/// Whether a snapshot's trace entries also become events, or stay columns alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryEvents {
    /// An event per entry, as a PyTorch profiler trace has them: for the trace viewer,
    /// `convert` and every tool that reads events.
    Made,
    /// The entries only in [`Host::allocator_trace`] (a third of the memory): enough
    /// for the memory profile.
    Skipped,
}

/// [`read_memory_snapshot`], calling `release` with each range of `bytes` it is done
/// with (a mapped file then does not stay resident), making the entries' events or not.
pub fn read_memory_snapshot_releasing(
    bytes: &[u8],
    release: &dyn Fn(std::ops::Range<usize>),
    path: &str,
    host_name: &str,
    events: EntryEvents,
) -> Result<Host> {
    let snapshot = decode_snapshot_releasing(bytes, release, path)?;
    snapshot_host(snapshot, path, host_name, events).map_err(|message| FormatError::unrecognized(path, message))
}

/// Marks a record without `time_us` in the time column while decoding.
const NO_TIME: i64 = i64::MIN;

/// Marks a record not yet found in `device_traces` in the device column while decoding.
const NO_DEVICE: u16 = u16::MAX;

/// One block of a segment at the time of the snapshot. Bytes are bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Block {
    /// Its address.
    pub address: u64,
    /// Its size.
    pub size: i64,
    /// The bytes its caller asked for.
    pub requested_size: i64,
    /// `active_allocated`, `active_pending_free` or `inactive`: string id.
    pub state: u32,
    /// The stack that allocated it, when recorded.
    pub stack: Option<u32>,
}

/// One segment (one `cudaMalloc`, or an expandable segment) at the time of the
/// snapshot. Bytes are bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Segment {
    /// The device ordinal.
    pub device: i64,
    /// Its address.
    pub address: u64,
    /// Its size (`total_size`).
    pub total_size: i64,
    /// Bytes of blocks handed out (`allocated_size`).
    pub allocated_size: i64,
    /// Bytes of blocks allocated or waiting for their streams (`active_size`).
    pub active_size: i64,
    /// Bytes callers asked for (`requested_size`).
    pub requested_size: i64,
    /// The stream whose pool holds it.
    pub stream: i64,
    /// `large` or `small`: string id.
    pub segment_type: u32,
    /// The memory pool (`segment_pool_id`; `(0, 0)` is the default pool).
    pub pool: (i64, i64),
    /// Whether it is an expandable segment.
    pub is_expandable: bool,
    /// The stack that allocated it, when recorded.
    pub stack: Option<u32>,
    /// Its blocks, by address.
    pub blocks: Vec<Block>,
}

/// A `record_function` range start or end (`external_annotations`, PyTorch 2.5+).
#[derive(Clone, Debug, PartialEq)]
pub struct Annotation {
    /// The device ordinal.
    pub device: i64,
    /// Whether it starts (`START`) or ends (`END`) the range.
    pub starts: bool,
    /// The range's name (`ProfilerStep#3`, `Optimizer.step#AdamW.step`): string id.
    pub name: u32,
    /// When, Unix epoch microseconds.
    pub time_us: i64,
}

/// A decoded memory snapshot.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// The segments, in file order.
    pub segments: Vec<Segment>,
    /// Every device's trace entries, device by device, each device's in its order,
    /// with their times on [`Snapshot::clock`] and the stacks of the entries, segments
    /// and blocks ([`AllocatorTrace::stacks`]). Its start totals are not set yet.
    pub trace: AllocatorTrace,
    /// `external_annotations`, in file order.
    pub annotations: Vec<Annotation>,
    /// `allocator_settings` as `(key, value as Python prints it)`.
    pub allocator_settings: Vec<(String, String)>,
    /// Whether the file is a bare list of segments (`torch.cuda.memory_snapshot()`).
    pub segments_only: bool,
    /// Where time 0 is and when the snapshot was taken.
    pub clock: Clock,
    texts: Vec<String>,
}

impl Snapshot {
    /// String `id` of the snapshot's own table ("" when unknown).
    pub fn text(&self, id: u32) -> &str {
        self.texts.get(id as usize).map_or("", String::as_str)
    }
}

/// Entry and annotation times in the model's picoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock {
    /// The Unix-epoch µs of time 0: the earliest entry or annotation.
    pub origin_us: Option<i64>,
    /// Whether the snapshot has no times (PyTorch before 2.2): entries are placed by
    /// their index on their device, 1 µs apart.
    pub synthetic: bool,
    /// The snapshot's time: 1 µs after the last entry or annotation, picoseconds.
    pub end_ps: i64,
}

const PS_PER_US: i64 = 1_000_000;

impl Clock {
    /// Annotation (or entry) time `time_us`, Unix epoch µs, in picoseconds.
    pub fn at_us(&self, time_us: i64) -> i64 {
        time_us.saturating_sub(self.origin_us.unwrap_or(time_us)).saturating_mul(PS_PER_US)
    }

    /// Puts the trace's times (Unix epoch µs or [`NO_TIME`]) on the clock of them and
    /// of `annotations`.
    fn settle(trace: &mut AllocatorTrace, annotations: &[Annotation]) -> Clock {
        let mut times_us: Option<(i64, i64)> = None;
        let mut per_device: ByDevice<i64> = ByDevice::default();
        for record in trace.iter() {
            if record.time_ps != NO_TIME {
                let t = record.time_ps;
                times_us = Some(times_us.map_or((t, t), |(a, b)| (a.min(t), b.max(t))));
            }
            *per_device.get_mut(record.device) += 1;
        }
        let annotation_times = annotations.iter().map(|a| a.time_us);
        let origin_us = times_us.map(|(first, _)| first).into_iter().chain(annotation_times.clone()).min();
        let last = times_us.map(|(_, last)| last).into_iter().chain(annotation_times).max();
        let synthetic = times_us.is_none();
        let last_ps = if synthetic {
            per_device.into_values().map(|(_, n)| n).max().unwrap_or(0).saturating_sub(1).saturating_mul(PS_PER_US)
        } else {
            last.zip(origin_us).map_or(0, |(max, min)| max.saturating_sub(min).saturating_mul(PS_PER_US))
        };
        let clock = Clock { origin_us, synthetic, end_ps: last_ps.saturating_add(PS_PER_US) };
        let mut index_on_device: ByDevice<i64> = ByDevice::default();
        trace.map_times(|device, time_us| {
            let index = index_on_device.get_mut(device);
            *index += 1;
            if synthetic {
                (*index - 1).saturating_mul(PS_PER_US)
            } else if time_us == NO_TIME {
                0
            } else {
                clock.at_us(time_us)
            }
        });
        clock
    }
}

/// A string table.
#[derive(Default)]
struct Texts {
    list: Vec<String>,
    index: FxMap<String, u32>,
}

impl Texts {
    fn id(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.index.get(text) {
            return id;
        }
        self.list.push(text.to_string());
        let id = (self.list.len() - 1) as u32;
        self.index.insert(text.to_string(), id);
        id
    }
}

/// A trace entry's key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Action,
    Addr,
    Size,
    Stream,
    TimeUs,
    Frames,
    DeviceFree,
    CompileContext,
    UserMetadata,
    Other,
}

impl Field {
    fn of(key: &str) -> Field {
        match key {
            "action" => Field::Action,
            "addr" => Field::Addr,
            "size" => Field::Size,
            "stream" => Field::Stream,
            "time_us" => Field::TimeUs,
            "frames" => Field::Frames,
            "device_free" => Field::DeviceFree,
            "compile_context" => Field::CompileContext,
            "user_metadata" => Field::UserMetadata,
            _ => Field::Other,
        }
    }
}

/// The state of one decoding: the entries taken so far and the tables they point into.
#[derive(Default)]
struct Reader {
    /// The entries so far; their stacks index [`Reader::stacks`].
    trace: AllocatorTrace,
    /// Pickle string id → the entry field it names (keys are memoized strings, so a
    /// handful of ids cover millions of entries).
    fields: ByString<Field>,
    /// Pickle string id → the action it names.
    actions: ByString<AllocatorAction>,
    texts: Texts,
    /// The distinct stacks' texts ([`AllocatorTrace::stacks`]).
    stacks: Texts,
    /// Pickle list id → stack index.
    stack_of_list: FxMap<u32, u32>,
    /// Stacks as the pickle spells them ([`FrameKey`]s) → stack index: every entry has
    /// a list of its own, but its strings are memoized, so this finds a known stack
    /// without building its text (at most [`MAX_SPELLINGS`] spellings).
    stack_of_spelling: FxMap<Vec<FrameKey>, u32>,
    /// The spelling of the stack being read (reused from entry to entry).
    spelling: Vec<FrameKey>,
    /// Frame lists of taken entries whose stack is known: [`stack_of_list`] answers for
    /// them from now on, so the decoder may free their items.
    ///
    /// [`stack_of_list`]: Reader::stack_of_list
    finished_lists: Vec<u32>,
    /// The entries appended to pickle lists: (list, consecutive tokens) in the order
    /// they were appended (`device_traces` lists hold millions of entries, in order,
    /// so a few runs).
    appended: Vec<(u32, std::ops::Range<u32>)>,
}

/// What the reader made of each pickle string it looked up, by string id: an entry's
/// handful of keys and actions are looked up millions of times, and string ids are
/// small and dense (one per string of the file, in order).
struct ByString<T> {
    slots: Vec<Option<T>>,
}

impl<T> Default for ByString<T> {
    fn default() -> Self {
        ByString { slots: Vec::new() }
    }
}

impl<T: Copy> ByString<T> {
    fn get(&self, id: u32) -> Option<T> {
        self.slots.get(id as usize).copied().flatten()
    }

    /// Keeps `value` for string `id` (at most one slot per string of the file).
    fn insert(&mut self, id: u32, value: T) {
        let at = id as usize;
        if at >= self.slots.len() {
            self.slots.resize(at + 1, None);
        }
        self.slots[at] = Some(value);
    }
}

/// A frame as the pickle spells it: its name's and its file's pickle string ids
/// (`u32::MAX` for a value that is not a string) and its line.
type FrameKey = (u32, u32, i64);

/// Stack spellings kept at most: a file whose strings are not memoized spells every
/// stack anew, and its spellings would only cost memory.
const MAX_SPELLINGS: usize = 1 << 20;

impl Reader {
    fn stack(&mut self, objects: &Objects, frames: Option<Value>) -> Option<u32> {
        let Some(Value::List(list)) = frames else { return None };
        if let Some(&id) = self.stack_of_list.get(&list) {
            return Some(id);
        }
        let string_id = |value: Option<Value>| match value {
            Some(Value::Str(id)) => id,
            _ => u32::MAX,
        };
        self.spelling.clear();
        self.spelling.extend(objects.list(list).iter().filter_map(|&frame| {
            let Value::Dict(frame) = frame else { return None };
            let line = int_of(objects.get(frame, "line")).unwrap_or(0);
            Some((string_id(objects.get(frame, "name")), string_id(objects.get(frame, "filename")), line))
        }));
        if let Some(&id) = self.stack_of_spelling.get(self.spelling.as_slice()) {
            // Known by its list from now on: the decoder may free the list's items.
            self.stack_of_list.insert(list, id);
            return Some(id);
        }
        // Two lists with the same frames are one stack.
        let frames: Vec<String> = objects
            .list(list)
            .iter()
            .filter_map(|&frame| {
                let Value::Dict(frame) = frame else { return None };
                let text = |key: &str| objects.get(frame, key).and_then(|v| objects.text(v)).unwrap_or("");
                let line = int_of(objects.get(frame, "line")).unwrap_or(0);
                Some(format!("{}:{line}:{}", text("filename"), text("name")))
            })
            .collect();
        let id = self.stacks.id(&frames.join("\n"));
        self.stack_of_list.insert(list, id);
        if self.stack_of_spelling.len() < MAX_SPELLINGS {
            self.stack_of_spelling.insert(self.spelling.clone(), id);
        }
        Some(id)
    }

    /// The action named by pickle string `id`.
    fn action(&mut self, objects: &Objects, id: u32) -> AllocatorAction {
        if let Some(action) = self.actions.get(id) {
            return action;
        }
        let text = objects.str(id);
        let action = AllocatorAction::known(text).unwrap_or_else(|| {
            let others = &mut self.trace.other_actions;
            let at = others.iter().position(|other| other == text).unwrap_or_else(|| {
                // Past the most the action column tells apart, one name stands for the rest.
                if others.len() < MAX_OTHER_ACTIONS {
                    others.push(text.to_string());
                }
                others.len() - 1
            });
            AllocatorAction::Other(u32::try_from(at).unwrap_or(u32::MAX))
        });
        self.actions.insert(id, action);

        action
    }
}

impl Absorb for Reader {
    fn absorb(&mut self, objects: &Objects, pairs: &[(Value, Value)]) -> std::result::Result<Option<u32>, String> {
        let mut action = None;
        let mut entry = AllocatorRecord {
            action: AllocatorAction::Alloc,
            address: 0,
            size: 0,
            device: NO_DEVICE,
            stream: 0,
            stack: None,
            time_ps: NO_TIME,
        };
        let mut extras = RecordExtras::default();
        let mut frames_list = None;
        for &(key, value) in pairs {
            let Value::Str(key) = key else { continue };
            let field = match self.fields.get(key) {
                Some(field) => field,
                None => {
                    let field = Field::of(objects.str(key));
                    self.fields.insert(key, field);
                    field
                }
            };
            match field {
                Field::Action => {
                    let Value::Str(id) = value else { continue };
                    action = Some(self.action(objects, id));
                }
                Field::Addr => entry.address = int_of(Some(value)).unwrap_or(0) as u64,
                Field::Size => entry.size = int_of(Some(value)).unwrap_or(0),
                Field::Stream => entry.stream = int_of(Some(value)).unwrap_or(0),
                Field::TimeUs => entry.time_ps = int_of(Some(value)).unwrap_or(NO_TIME),
                Field::Frames => {
                    entry.stack = self.stack(objects, Some(value));
                    if let (Some(_), Value::List(list)) = (entry.stack, value) {
                        frames_list = Some(list);
                    }
                }
                Field::DeviceFree => extras.device_free = int_of(Some(value)),
                Field::CompileContext => extras.compile_context = optional_text(objects, value, "N/A"),
                Field::UserMetadata => extras.user_metadata = optional_text(objects, value, ""),
                Field::Other => {}
            }
        }
        let Some(action) = action else { return Ok(None) };
        entry.action = action;
        let token = u32::try_from(self.trace.len()).map_err(|_| "more than 4 billion trace entries".to_string())?;
        self.trace.push(entry);
        if extras != RecordExtras::default() {
            self.trace.set_last_extras(extras);
        }
        self.finished_lists.extend(frames_list);
        Ok(Some(token))
    }

    fn taken_appended(&mut self, list: u32, token: u32) -> bool {
        match self.appended.last_mut() {
            Some((to, run)) if *to == list && run.end == token => run.end += 1,
            _ => self.appended.push((list, token..token.saturating_add(1))),
        }
        true
    }

    fn finished_list(&mut self) -> Option<u32> {
        self.finished_lists.pop()
    }
}

fn int_of(value: Option<Value>) -> Option<i64> {
    match value? {
        Value::Int(v) => Some(v),
        // `uint64_t` fields: 2^64 - 1 stands for -1 ("unknown").
        Value::Uint(v) => Some(v as i64),
        Value::Bool(b) => Some(i64::from(b)),
        Value::Float(f) if f.is_finite() => Some(f as i64),
        _ => None,
    }
}

/// The text of `value` unless it is `absent` (or not a string).
fn optional_text(objects: &Objects, value: Value, absent: &str) -> Option<String> {
    objects.text(value).filter(|text| *text != absent).map(str::to_string)
}

/// Decodes the snapshot in `bytes` (the file `path`).
pub fn decode_snapshot(bytes: &[u8], path: &str) -> Result<Snapshot> {
    decode_snapshot_releasing(bytes, &|_| {}, path)
}

/// [`decode_snapshot`], releasing the bytes it is done with ([`pickle::decode_releasing`]).
fn decode_snapshot_releasing(bytes: &[u8], release: &dyn Fn(std::ops::Range<usize>), path: &str) -> Result<Snapshot> {
    if !pickle::is_pickle(bytes) {
        return Err(FormatError::unrecognized(
            path,
            "not a PyTorch memory snapshot: a snapshot is a binary pickle (protocol 2 to 5), and this file does not \
             start like one",
        ));
    }
    let mut reader = Reader::default();
    let (objects, top) = pickle::decode_releasing(bytes, &mut reader, release).map_err(|e| FormatError::Pickle {
        path: path.to_string(),
        offset: e.offset,
        message: e.message,
    })?;
    let mut snapshot = Snapshot::default();
    let segments = match top {
        Value::Dict(top) => {
            let segments = objects.get(top, "segments");
            let traces = objects.get(top, "device_traces");
            if segments.is_none() && traces.is_none() {
                return Err(FormatError::unrecognized(
                    path,
                    "a pickle, but not a PyTorch memory snapshot: its dict has neither `segments` nor \
                     `device_traces`",
                ));
            }
            read_traces(&objects, traces, &mut reader).map_err(|m| FormatError::unrecognized(path, m))?;
            snapshot.annotations = read_annotations(&objects, objects.get(top, "external_annotations"), &mut reader);
            snapshot.allocator_settings = read_settings(&objects, objects.get(top, "allocator_settings"));
            segments
        }
        Value::List(_) => {
            snapshot.segments_only = true;
            Some(top)
        }
        _ => {
            return Err(FormatError::unrecognized(
                path,
                "a pickle, but not a PyTorch memory snapshot: it holds neither a dict nor a list of segments",
            ));
        }
    };
    snapshot.segments = read_segments(&objects, segments, &mut reader);
    if reader.trace.iter().any(|record| record.device == NO_DEVICE) {
        return Err(FormatError::unrecognized(
            path,
            "a trace entry of the memory snapshot lies outside `device_traces`: not a snapshot PyTorch wrote",
        ));
    }
    drop(objects);
    let mut trace = reader.trace;
    trace.shrink_to_fit();
    trace.stacks = reader.stacks.list;
    snapshot.clock = Clock::settle(&mut trace, &snapshot.annotations);
    snapshot.trace = trace;
    snapshot.texts = reader.texts.list;
    Ok(snapshot)
}

/// Gives each taken entry its device: its list's index in `device_traces`.
fn read_traces(objects: &Objects, traces: Option<Value>, reader: &mut Reader) -> Result<(), String> {
    let Some(traces) = traces else { return Ok(()) };
    // One pass over the runs, whatever the number of lists.
    let mut by_list: FxMap<u32, Vec<std::ops::Range<u32>>> = FxMap::default();
    for (list, run) in std::mem::take(&mut reader.appended) {
        by_list.entry(list).or_default().push(run);
    }
    for (device, list) in objects.items(traces).iter().enumerate() {
        let device = u16::try_from(device)
            .ok()
            .filter(|&d| d != NO_DEVICE)
            .ok_or_else(|| format!("`device_traces` lists more than {} devices", NO_DEVICE))?;
        let Value::List(list) = *list else { continue };
        for run in by_list.get(&list).into_iter().flatten() {
            for token in run.clone() {
                reader.trace.set_device(token as usize, device);
            }
        }
    }
    Ok(())
}

fn read_annotations(objects: &Objects, list: Option<Value>, reader: &mut Reader) -> Vec<Annotation> {
    let Some(list) = list else { return Vec::new() };
    objects
        .items(list)
        .iter()
        .filter_map(|&item| {
            let Value::Dict(dict) = item else { return None };
            let stage = objects.get(dict, "stage").and_then(|v| objects.text(v))?;
            let name = objects.get(dict, "name").and_then(|v| objects.text(v))?;
            Some(Annotation {
                device: int_of(objects.get(dict, "device")).unwrap_or(0),
                starts: stage == "START",
                name: reader.texts.id(name),
                time_us: int_of(objects.get(dict, "time_us"))?,
            })
        })
        .collect()
}

fn read_settings(objects: &Objects, settings: Option<Value>) -> Vec<(String, String)> {
    let Some(Value::Dict(dict)) = settings else { return Vec::new() };
    objects
        .dict(dict)
        .iter()
        .filter_map(|&(key, value)| Some((objects.text(key)?.to_string(), python_text(objects, value))))
        .collect()
}

/// A setting's value as Python prints it (one level of containers).
fn python_text(objects: &Objects, value: Value) -> String {
    match value {
        Value::None => "None".to_string(),
        Value::Bool(b) => if b { "True" } else { "False" }.to_string(),
        Value::Int(v) => v.to_string(),
        Value::Uint(v) => v.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::Str(id) => objects.str(id).to_string(),
        Value::Dict(id) => {
            let pairs: Vec<String> = objects
                .dict(id)
                .iter()
                .map(|&(k, v)| format!("{}: {}", scalar_text(objects, k), scalar_text(objects, v)))
                .collect();
            format!("{{{}}}", pairs.join(", "))
        }
        Value::List(_) | Value::Tuple(_) => {
            let items: Vec<String> = objects.items(value).iter().map(|&v| scalar_text(objects, v)).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Taken(_) => String::new(),
    }
}

fn scalar_text(objects: &Objects, value: Value) -> String {
    match value {
        Value::Str(id) => format!("{:?}", objects.str(id)),
        Value::Dict(_) | Value::List(_) | Value::Tuple(_) | Value::Taken(_) => "…".to_string(),
        other => python_text(objects, other),
    }
}

fn read_segments(objects: &Objects, segments: Option<Value>, reader: &mut Reader) -> Vec<Segment> {
    let Some(segments) = segments else { return Vec::new() };
    let mut out = Vec::new();
    for &item in objects.items(segments) {
        let Value::Dict(dict) = item else { continue };
        let int = |key: &str| int_of(objects.get(dict, key));
        let address = int("address").unwrap_or(0) as u64;
        let mut segment = Segment {
            device: int("device").unwrap_or(0),
            address,
            total_size: int("total_size").unwrap_or(0),
            allocated_size: int("allocated_size").unwrap_or(0),
            active_size: int("active_size").unwrap_or(0),
            requested_size: int("requested_size").unwrap_or(0),
            stream: int("stream").unwrap_or(0),
            segment_type: reader
                .texts
                .id(objects.get(dict, "segment_type").and_then(|v| objects.text(v)).unwrap_or("")),
            pool: pool_of(objects, objects.get(dict, "segment_pool_id")),
            is_expandable: matches!(objects.get(dict, "is_expandable"), Some(Value::Bool(true))),
            stack: None,
            blocks: Vec::new(),
        };
        segment.stack = reader.stack(objects, objects.get(dict, "frames"));
        let mut offset = address;
        for &block in objects.items(objects.get(dict, "blocks").unwrap_or(Value::None)) {
            let Value::Dict(block) = block else { continue };
            let size = int_of(objects.get(block, "size")).unwrap_or(0);
            // Blocks before PyTorch 2.1 have no address or frames, but a `history`
            // of allocations whose last entry is the live one.
            let last = objects.items(objects.get(block, "history").unwrap_or(Value::None)).last().copied();
            let history = |key: &str| match last {
                Some(Value::Dict(entry)) => objects.get(entry, key),
                _ => None,
            };
            let frames = objects.get(block, "frames").or_else(|| history("frames"));
            let state = objects.get(block, "state").and_then(|v| objects.text(v)).unwrap_or("");
            let stack = reader.stack(objects, frames);
            segment.blocks.push(Block {
                address: int_of(objects.get(block, "address")).map_or(offset, |a| a as u64),
                size,
                requested_size: int_of(objects.get(block, "requested_size"))
                    .or_else(|| int_of(history("real_size")))
                    .unwrap_or(size),
                state: reader.texts.id(state),
                stack,
            });
            offset = offset.wrapping_add(size.max(0) as u64);
        }
        out.push(segment);
    }
    out
}

fn pool_of(objects: &Objects, value: Option<Value>) -> (i64, i64) {
    let items = value.map_or(&[][..], |v| objects.items(v));
    match items {
        [a, b, ..] => (int_of(Some(*a)).unwrap_or(0), int_of(Some(*b)).unwrap_or(0)),
        _ => (0, 0),
    }
}
