//! A decoded memory snapshot laid out as a PyTorch profiler trace with
//! `profile_memory=True` (a [`SourceFormat::Kineto`] host), plus what only a snapshot
//! knows (stacks, segments, blocks, OOMs) as stats and lines of the same plane.
//!
//! The one design decision to know: a snapshot records what happened, not the totals
//! after each entry, so the totals are rebuilt backwards from the state at the end —
//! the snapshot's segments and blocks, taken under the same lock as the trace — so they
//! stay exact when the trace is a ring buffer that lost its oldest entries.
//! Allocated bytes follow `torch.cuda.memory_allocated()` (up at `alloc`, down at
//! `free_requested`), reserved bytes `torch.cuda.memory_reserved()` (segments mapped
//! or allocated, less those unmapped or freed).
//!
//! # Mapping
//!
//! | Snapshot | Model (plane `/host:CPU`) |
//! |---|---|
//! | `alloc`, `free_requested` entries | `[memory]` instants (cat `cpu_instant_event`, as Kineto writes them) on a line per device and stream, `cuda:<d> stream <s>`; stats `Addr`, `Bytes` (negative for a free), `Total Allocated`, `Total Reserved`, [`FRAMES_STAT`]; metadata stats (one metadata per name and line) `Device Type` 1, `Device Id`, `Stream` |
//! | every other entry (`free_completed`, `segment_*`, `snapshot`, `oom`, newer actions) | an instant named by its action, cat [`SNAPSHOT_CATEGORY`], on the same line, with the same stats (`Bytes` positive; the totals only where they change and on `oom`), [`DEVICE_FREE_STAT`] on `oom`, `Compile Context` and `User Metadata` where set |
//! | `frames` | [`FRAMES_STAT`]: a `Ref` to the stack's text, one `filename:line:name` per frame, innermost first (as PyTorch's memory viewer writes them) |
//! | `time_us` | the event time; time 0 is the earliest entry or annotation. Snapshots without times (PyTorch < 2.2) place each device's entries 1 µs apart in trace order, and say so in [`Host::warnings`] |
//! | `external_annotations` | complete events (cat `user_annotation`) on `annotations cuda:<d>`, a `START` paired with the next `END` of its name; so `ProfilerStep#N` ranges are steps |
//! | `segments` | one event per segment (named [`SEGMENT_EVENT`]) on `segments cuda:<d>`, from its last `segment_alloc` in the trace (else time 0) to the snapshot; stats `Addr`, `Bytes` (total size), `Allocated Bytes`, `Active Bytes`, `Requested Bytes`, `Stream`, `Segment Type`, `Pool`, `Expandable`, [`FRAMES_STAT`]; metadata stat `Device Id` |
//! | blocks | an instant per block at the snapshot time on `blocks cuda:<d>`, named by its state; stats `Addr`, `Bytes`, `Requested Bytes`, `Segment Addr`, `Stream`, [`BLOCK_STATE_STAT`], [`FRAMES_STAT`]; metadata stat `Device Id` |
//! | `allocator_settings` | plane stats, one per setting |

use mlprof_model::fxhash::FxMap;

use mlprof_model::names::HOST_PLANE;
use mlprof_model::names::chrome::{CAT_STAT, PH_STAT};
use mlprof_model::{
    AllocatorAction, AllocatorRecord, AllocatorTrace, ByDevice, ChromeTraceInfo, Host, Line, PlaneBuilder,
    SourceFormat, StatValue, TrackId,
};

use mlprof_model::names::memory_snapshot::{
    ALLOCATED_STAT, ANNOTATIONS_LINE, BLOCK_STATE_STAT, DEVICE_FREE_STAT, FRAMES_STAT, RESERVED_STAT, SEGMENT_EVENT,
    SNAPSHOT_CATEGORY, STREAM_STAT,
};

use super::{Clock, EntryEvents, Snapshot};

const MEMORY_EVENT: &str = "[memory]";

/// A stat value before it is stored: text goes into its line's own store.
enum Val {
    Int(i64),
    Ref(u32),
    Text(String),
}

/// The host of `snapshot`, read from the file `path`, named `host_name`, with an
/// event per trace entry or not (`events`); the entries themselves become
/// [`Host::allocator_trace`], with each device's totals before its first entry.
pub fn snapshot_host(mut snapshot: Snapshot, path: &str, host_name: &str, events: EntryEvents) -> Result<Host, String> {
    let mut host = Host::new(host_name, path, SourceFormat::Kineto);
    let mut trace = std::mem::take(&mut snapshot.trace);
    let clock = snapshot.clock;
    if clock.synthetic && !trace.is_empty() {
        host.warnings.push(
            "the snapshot records no event times (PyTorch before 2.2): each device's entries are placed 1 µs apart \
             in trace order"
                .to_string(),
        );
    }
    let mut survey = Survey::of(&trace, events);
    trace.start_totals = start_totals(&snapshot, std::mem::take(&mut survey.change), &mut host.warnings);
    let mut planes = Planes::new();
    if events == EntryEvents::Made {
        planes.reserve_entry_lines(&survey.lines);
        trace.totals(|index, record, totals| planes.entry(&trace, index, record, totals));
    }
    planes.annotations(&snapshot, &clock);
    planes.segments(&snapshot, &trace, &clock, &survey.segments_allocated_at);
    let settings: Vec<(u32, StatValue)> = snapshot
        .allocator_settings
        .iter()
        .filter_map(|(key, value)| {
            let k = planes.builder.stat_key(key);
            planes.builder.metadata_str(value).ok().map(|v| (k, v))
        })
        .collect();
    planes.builder.set_plane_stats(settings);
    host.planes.push(planes.finish());
    // Written back as a Chrome trace, the events keep Kineto's shape.
    host.chrome = Some(ChromeTraceInfo {
        origin_us: if clock.synthetic { 0 } else { clock.origin_us.unwrap_or(0) },
        ..ChromeTraceInfo::default()
    });
    if let Some(origin) = clock.origin_us.filter(|_| !clock.synthetic) {
        host.profile_start_ns = origin.checked_mul(1000);
        host.profile_stop_ns = host.profile_start_ns.map(|start| start.saturating_add(clock.end_ps / 1000));
    }
    host.allocator_trace = Some(trace);
    Ok(host)
}

/// What one pass over the entries finds before any event is made (millions of
/// entries: one pass over them, not one per question).
#[derive(Default)]
struct Survey {
    /// Per device, how its entries change (allocated, reserved) bytes in all.
    change: ByDevice<Option<(i64, i64)>>,
    /// Per entry line, its events and stats (when the entries are made events).
    lines: FxMap<LineKey, (usize, usize)>,
    /// When each segment (by device and address) was last allocated in the trace, ps.
    segments_allocated_at: FxMap<(i64, u64), i64>,
}

impl Survey {
    fn of(trace: &AllocatorTrace, events: EntryEvents) -> Survey {
        let mut survey = Survey::default();
        for (index, record) in trace.iter().enumerate() {
            let (allocated, reserved) = record.action.delta(record.size);
            let sum = survey.change.get_mut(record.device).get_or_insert_default();
            *sum = (sum.0.saturating_add(allocated), sum.1.saturating_add(reserved));
            if events == EntryEvents::Made {
                let line = survey.lines.entry((i64::from(record.device), ENTRIES, record.stream)).or_default();
                line.0 += 1;
                line.1 += entry_stats(trace, index, &record);
            }
            if record.action == AllocatorAction::SegmentAlloc {
                survey.segments_allocated_at.insert((i64::from(record.device), record.address), record.time_ps);
            }
        }
        survey
    }
}

/// Each device's (allocated, reserved) bytes before the first entry: the state at the
/// end (the snapshot's segments and blocks) less the device's `change` over the trace.
fn start_totals(
    snapshot: &Snapshot,
    change: ByDevice<Option<(i64, i64)>>,
    warnings: &mut Vec<String>,
) -> Vec<(u16, i64, i64)> {
    let mut end: FxMap<i64, (i64, i64)> = FxMap::default();
    for segment in &snapshot.segments {
        let at_end = end.entry(segment.device).or_default();
        at_end.1 = at_end.1.saturating_add(segment.total_size);
        for block in &segment.blocks {
            if snapshot.text(block.state) == "active_allocated" {
                at_end.0 = at_end.0.saturating_add(block.size);
            }
        }
    }
    change
        .into_values()
        .filter_map(|(device, delta)| Some((device, delta?)))
        .map(|(device, delta)| {
            let at_end = end.get(&i64::from(device)).copied().unwrap_or_default();
            let start = (at_end.0.saturating_sub(delta.0), at_end.1.saturating_sub(delta.1));
            if start.0 < 0 || start.1 < 0 {
                warnings.push(format!(
                    "cuda:{device}: the trace frees {} more than the snapshot's state accounts for (a snapshot of one \
                     memory pool?); totals are clamped at 0",
                    if start.0 < 0 { "allocated bytes" } else { "reserved bytes" }
                ));
            }
            (device, start.0.max(0), start.1.max(0))
        })
        .collect()
}

/// Whether an entry's event carries the totals after it: those that change them,
/// and `oom` (what was allocated and reserved when it failed).
fn carries_totals(action: AllocatorAction) -> bool {
    !matches!(action, AllocatorAction::FreeCompleted | AllocatorAction::Snapshot | AllocatorAction::Other(_))
}

/// How many stats entry `index`'s event gets.
fn entry_stats(trace: &AllocatorTrace, index: usize, record: &AllocatorRecord) -> usize {
    let extras = trace.extras(index).map_or(0, |e| {
        usize::from(e.device_free.is_some())
            + usize::from(e.compile_context.is_some())
            + usize::from(e.user_metadata.is_some())
    });
    2 + 2 * usize::from(carries_totals(record.action)) + usize::from(record.stack.is_some()) + extras
}

/// A line: (device, kind, stream), ordered as lines are shown.
type LineKey = (i64, u8, i64);

/// Line kinds, in the order lines are shown.
const ENTRIES: u8 = 0;
const ANNOTATIONS: u8 = 1;
const SEGMENTS: u8 = 2;
const BLOCKS: u8 = 3;

/// The stat keys every entry uses, interned once.
struct Keys {
    addr: u32,
    bytes: u32,
    allocated: u32,
    reserved: u32,
    frames: u32,
}

/// The plane under construction and its lines.
struct Planes {
    builder: PlaneBuilder,
    lines: Vec<(LineKey, Line)>,
    line_index: FxMap<LineKey, usize>,
    /// Per (line, action), the event metadata of entries.
    entry_metadata: FxMap<(usize, AllocatorAction), u32>,
    /// Per stack, the `Ref` key of its text (`None` for an empty stack), once built.
    stack_keys: FxMap<u32, Option<u32>>,
    keys: Keys,
}

impl Planes {
    fn new() -> Planes {
        let mut builder = PlaneBuilder::new(0, HOST_PLANE);
        let keys = Keys {
            addr: builder.stat_key("Addr"),
            bytes: builder.stat_key("Bytes"),
            allocated: builder.stat_key(ALLOCATED_STAT),
            reserved: builder.stat_key(RESERVED_STAT),
            frames: builder.stat_key(FRAMES_STAT),
        };
        Planes {
            builder,
            lines: Vec::new(),
            line_index: FxMap::default(),
            entry_metadata: FxMap::default(),
            stack_keys: FxMap::default(),
            keys,
        }
    }

    /// The lines, in the order they are shown.
    fn finish(self) -> mlprof_model::Plane {
        let Planes { mut builder, mut lines, .. } = self;
        lines.sort_by_key(|(key, _)| *key);
        builder.reserve_lines(lines.len());
        for (_, line) in lines {
            builder.push_line(line);
        }
        builder.finish()
    }

    /// The index of line `key`, created on first use.
    fn line(&mut self, key: LineKey) -> usize {
        if let Some(&index) = self.line_index.get(&key) {
            return index;
        }
        let (device, kind, stream) = key;
        let name = match kind {
            ENTRIES => format!("cuda:{device} stream {stream}"),
            ANNOTATIONS => format!("{ANNOTATIONS_LINE} cuda:{device}"),
            SEGMENTS => format!("segments cuda:{device}"),
            _ => format!("blocks cuda:{device}"),
        };
        let index = self.lines.len();
        let id = index as i64 + 1;
        let mut line = Line::new(id, name);
        line.display_id = id;
        line.chrome_track = Some((TrackId::Int(device), TrackId::Int(id)));
        self.lines.push((key, line));
        self.line_index.insert(key, index);
        index
    }

    /// Creates the entry lines with room for exactly their events and stats (a
    /// snapshot of millions of entries would otherwise leave up to half of each line's
    /// columns unused).
    fn reserve_entry_lines(&mut self, counts: &FxMap<LineKey, (usize, usize)>) {
        let mut keys: Vec<LineKey> = counts.keys().copied().collect();
        keys.sort_unstable();
        for key in keys {
            let (events, stats) = counts[&key];
            let line = self.line(key);
            let line = &mut self.lines[line].1;
            line.events.reserve(events);
            line.stats.reserve(stats, 0);
        }
    }

    /// Event metadata `name` of line `line` with cat `cat` and ph `ph` (`None` for
    /// complete events); its stats say the line's device (and stream, for entries).
    fn metadata(&mut self, line: usize, name: &str, cat: &str, ph: Option<&str>) -> u32 {
        let ((device, kind, stream), _) = self.lines[line];
        let variant = u32::try_from(line).unwrap_or(u32::MAX);
        self.builder.event_metadata(name, variant, |b| {
            let mut stats = Vec::new();
            for (key, text) in [(CAT_STAT, Some(cat)), (PH_STAT, ph)] {
                if let Some(text) = text {
                    let key = b.stat_key(key);
                    if let Ok(v) = b.metadata_str(text) {
                        stats.push((key, v));
                    }
                }
            }
            if kind == ENTRIES {
                stats.push((b.stat_key("Device Type"), StatValue::Int(1)));
            }
            stats.push((b.stat_key("Device Id"), StatValue::Int(device)));
            if kind == ENTRIES {
                stats.push((b.stat_key(STREAM_STAT), StatValue::Int(stream)));
            }
            stats
        })
    }

    fn stack_key(&mut self, trace: &AllocatorTrace, stack: Option<u32>) -> Option<u32> {
        let stack = stack?;
        if let Some(&key) = self.stack_keys.get(&stack) {
            return key;
        }
        let text = trace.stack(stack);
        let key = (!text.is_empty()).then(|| self.builder.stat_key(text));
        self.stack_keys.insert(stack, key);
        key
    }

    /// Adds an event to line `line` with `stats` (named; text goes into the line's store).
    fn push(&mut self, line: usize, metadata: u32, start_ps: i64, duration_ps: i64, stats: Vec<(&str, Val)>) {
        let keyed: Vec<(u32, Val)> = stats.into_iter().map(|(name, v)| (self.builder.stat_key(name), v)).collect();
        let line = &mut self.lines[line].1;
        for (key, value) in keyed {
            match value {
                Val::Int(v) => line.stats.push(key, StatValue::Int(v)),
                Val::Ref(v) => line.stats.push(key, StatValue::Ref(v)),
                // A line's texts past 4 GiB are dropped rather than failing the file.
                Val::Text(text) => {
                    let _ = line.stats.push_str(key, &text);
                }
            }
        }
        line.push_event(metadata, start_ps, duration_ps);
    }

    /// The event of entry `index` of `trace`, `record`, with the totals after it.
    fn entry(&mut self, trace: &AllocatorTrace, index: usize, record: &AllocatorRecord, totals: (i64, i64)) {
        let line = self.line((i64::from(record.device), ENTRIES, record.stream));
        let metadata = match self.entry_metadata.get(&(line, record.action)) {
            Some(&metadata) => metadata,
            None => {
                let (name, cat) = match record.action {
                    AllocatorAction::Alloc | AllocatorAction::FreeRequested => (MEMORY_EVENT, "cpu_instant_event"),
                    other => (other.name(trace), SNAPSHOT_CATEGORY),
                };
                let metadata = self.metadata(line, name, cat, Some("i"));
                self.entry_metadata.insert((line, record.action), metadata);
                metadata
            }
        };
        let bytes = record.action.signed(record.size);
        let (allocated, reserved) = totals;
        let frames = self.stack_key(trace, record.stack);
        let keys = &self.keys;
        let stats = &mut self.lines[line].1.stats;
        stats.push(keys.addr, StatValue::Int(record.address as i64));
        stats.push(keys.bytes, StatValue::Int(bytes));
        if carries_totals(record.action) {
            stats.push(keys.allocated, StatValue::Int(allocated));
            stats.push(keys.reserved, StatValue::Int(reserved));
        }
        if let Some(frames) = frames {
            stats.push(keys.frames, StatValue::Ref(frames));
        }
        let mut extra = Vec::new();
        if let Some(extras) = trace.extras(index) {
            if let Some(free) = extras.device_free {
                extra.push((DEVICE_FREE_STAT, Val::Int(free)));
            }
            if let Some(text) = &extras.compile_context {
                extra.push(("Compile Context", Val::Text(text.clone())));
            }
            if let Some(text) = &extras.user_metadata {
                extra.push(("User Metadata", Val::Text(text.clone())));
            }
        }
        self.push(line, metadata, record.time_ps, 0, extra);
    }

    fn annotations(&mut self, snapshot: &Snapshot, clock: &Clock) {
        let mut open: FxMap<(i64, u32), Vec<i64>> = FxMap::default();
        let mut ranges = Vec::new();
        for annotation in &snapshot.annotations {
            let at = clock.at_us(annotation.time_us);
            let key = (annotation.device, annotation.name);
            if annotation.starts {
                open.entry(key).or_default().push(at);
            } else {
                let start = open.get_mut(&key).and_then(Vec::pop).unwrap_or(0);
                ranges.push((key, start, at));
            }
        }
        for (key, starts) in open {
            ranges.extend(starts.into_iter().map(|start| (key, start, clock.end_ps)));
        }
        ranges.sort_by_key(|&((device, _), start, end)| (device, start, std::cmp::Reverse(end)));
        for ((device, name), start, end) in ranges {
            let line = self.line((device, ANNOTATIONS, 0));
            let metadata = self.metadata(line, snapshot.text(name), "user_annotation", None);
            self.push(line, metadata, start, end.saturating_sub(start).max(0), Vec::new());
        }
    }

    fn segments(
        &mut self,
        snapshot: &Snapshot,
        trace: &AllocatorTrace,
        clock: &Clock,
        allocated_at: &FxMap<(i64, u64), i64>,
    ) {
        let end = clock.end_ps;
        for segment in &snapshot.segments {
            let start = allocated_at.get(&(segment.device, segment.address)).copied().unwrap_or(0).min(end);
            let line = self.line((segment.device, SEGMENTS, 0));
            let metadata = self.metadata(line, SEGMENT_EVENT, SNAPSHOT_CATEGORY, None);
            let mut stats = vec![
                ("Addr", Val::Int(segment.address as i64)),
                ("Bytes", Val::Int(segment.total_size)),
                ("Allocated Bytes", Val::Int(segment.allocated_size)),
                ("Active Bytes", Val::Int(segment.active_size)),
                ("Requested Bytes", Val::Int(segment.requested_size)),
                (STREAM_STAT, Val::Int(segment.stream)),
                ("Expandable", Val::Int(i64::from(segment.is_expandable))),
                ("Segment Type", Val::Text(snapshot.text(segment.segment_type).to_string())),
                ("Pool", Val::Text(format!("({}, {})", segment.pool.0, segment.pool.1))),
            ];
            if let Some(frames) = self.stack_key(trace, segment.stack) {
                stats.push((FRAMES_STAT, Val::Ref(frames)));
            }
            self.push(line, metadata, start, end - start, stats);
            let line = self.line((segment.device, BLOCKS, 0));
            for block in &segment.blocks {
                let state = snapshot.text(block.state);
                let metadata = self.metadata(line, state, SNAPSHOT_CATEGORY, Some("i"));
                let mut stats = vec![
                    ("Addr", Val::Int(block.address as i64)),
                    ("Bytes", Val::Int(block.size)),
                    ("Requested Bytes", Val::Int(block.requested_size)),
                    ("Segment Addr", Val::Int(segment.address as i64)),
                    (STREAM_STAT, Val::Int(segment.stream)),
                    (BLOCK_STATE_STAT, Val::Ref(self.builder.stat_key(state))),
                ];
                if let Some(frames) = self.stack_key(trace, block.stack) {
                    stats.push((FRAMES_STAT, Val::Ref(frames)));
                }
                self.push(line, metadata, end, 0, stats);
            }
        }
    }
}
