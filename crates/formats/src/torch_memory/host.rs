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
//! | `alloc`, `free_requested` entries | `[memory]` instants (cat `cpu_instant_event`, as Kineto writes them) on a line per device and stream, `cuda:<d> stream <s>`; stats `Addr`, `Bytes` (negative for a free), `Total Allocated`, `Total Reserved`, `Device Type` 1, `Device Id`, `Ev Idx` (the entry's index on its device), `Stream`, [`FRAMES_STAT`] |
//! | every other entry (`free_completed`, `segment_*`, `snapshot`, `oom`, newer actions) | an instant named by its action, cat [`SNAPSHOT_CATEGORY`], on the same line, with the same stats (`Bytes` positive) and [`DEVICE_FREE_STAT`] on `oom` |
//! | `frames` | [`FRAMES_STAT`]: a `Ref` to the stack's text, one `filename:line:name` per frame, innermost first (as PyTorch's memory viewer writes them) |
//! | `time_us` | the event time; time 0 is the earliest entry or annotation. Snapshots without times (PyTorch < 2.2) place each device's entries 1 µs apart in trace order, and say so in [`Host::warnings`] |
//! | `external_annotations` | complete events (cat `user_annotation`) on `annotations cuda:<d>`, a `START` paired with the next `END` of its name; so `ProfilerStep#N` ranges are steps |
//! | `segments` | one event per segment (named [`SEGMENT_EVENT`]) on `segments cuda:<d>`, from its last `segment_alloc` in the trace (else time 0) to the snapshot; stats `Addr`, `Bytes` (total size), `Allocated Bytes`, `Active Bytes`, `Requested Bytes`, `Stream`, `Segment Type`, `Pool`, `Expandable`, [`FRAMES_STAT`] |
//! | blocks | an instant per block at the snapshot time on `blocks cuda:<d>`, named by its state; stats `Addr`, `Bytes`, `Requested Bytes`, `Segment Addr`, `Stream`, [`BLOCK_STATE_STAT`], [`FRAMES_STAT`] |
//! | `allocator_settings` | plane stats, one per setting |

use std::collections::{BTreeMap, HashMap};

use mlprof_model::names::HOST_PLANE;
use mlprof_model::names::chrome::{CAT_STAT, PH_STAT};
use mlprof_model::{ChromeTraceInfo, Host, Line, PlaneBuilder, SourceFormat, StatValue, TrackId};

use mlprof_model::names::memory_snapshot::{
    ACTION_STAT, ALLOCATED_STAT, ANNOTATIONS_LINE, BLOCK_STATE_STAT, DEVICE_FREE_STAT, FRAMES_STAT, RESERVED_STAT,
    SEGMENT_EVENT, SNAPSHOT_CATEGORY, STREAM_STAT,
};

use super::{Action, Snapshot, TraceEntry};

const MEMORY_EVENT: &str = "[memory]";

/// A stat value before it is stored: text goes into its line's own store.
enum Val {
    Int(i64),
    Ref(u32),
    Text(String),
}
const PS_PER_US: i64 = 1_000_000;

/// The host of `snapshot`, read from the file `path`, named `host_name`.
pub fn snapshot_host(snapshot: &Snapshot, path: &str, host_name: &str) -> Result<Host, String> {
    let mut host = Host::new(host_name, path, SourceFormat::Kineto);
    let clock = Clock::of(snapshot);
    if clock.synthetic && !snapshot.entries.is_empty() {
        host.warnings.push(
            "the snapshot records no event times (PyTorch before 2.2): each device's entries are placed 1 µs apart \
             in trace order"
                .to_string(),
        );
    }
    let totals = Totals::rebuild(snapshot, &mut host.warnings);
    let mut planes = Planes { builder: PlaneBuilder::new(0, HOST_PLANE), lines: BTreeMap::new() };
    for (index, entry) in snapshot.entries.iter().enumerate() {
        planes.entry(snapshot, entry, clock.time_ps(index, entry), totals.after.get(index).copied());
    }
    planes.annotations(snapshot, &clock);
    planes.segments(snapshot, &clock);
    let settings: Vec<(u32, StatValue)> = snapshot
        .allocator_settings
        .iter()
        .filter_map(|(key, value)| {
            let k = planes.builder.stat_key(key);
            planes.builder.metadata_str(value).ok().map(|v| (k, v))
        })
        .collect();
    planes.builder.set_plane_stats(settings);
    let Planes { mut builder, lines } = planes;
    for (_, line) in lines {
        builder.push_line(line);
    }
    host.planes.push(builder.finish());
    // Written back as a Chrome trace, the events keep Kineto's shape.
    host.chrome = Some(ChromeTraceInfo {
        origin_us: if clock.synthetic { 0 } else { clock.origin_us.unwrap_or(0) },
        ..ChromeTraceInfo::default()
    });
    if let Some(origin) = clock.origin_us.filter(|_| !clock.synthetic) {
        host.profile_start_ns = origin.checked_mul(1000);
        host.profile_stop_ns = host.profile_start_ns.map(|start| start.saturating_add(clock.end_ps / 1000));
    }
    Ok(host)
}

/// Entry and annotation times in the model's picoseconds.
struct Clock {
    /// The Unix-epoch µs of time 0.
    origin_us: Option<i64>,
    /// Whether the snapshot has no times (entries are placed by index).
    synthetic: bool,
    /// Per entry, its index on its device (the synthetic time in µs).
    index_on_device: Vec<i64>,
    /// The snapshot's time: 1 µs after the last entry or annotation.
    end_ps: i64,
}

impl Clock {
    fn of(snapshot: &Snapshot) -> Clock {
        let times =
            snapshot.entries.iter().filter_map(|e| e.time_us).chain(snapshot.annotations.iter().map(|a| a.time_us));
        let origin_us = times.clone().min();
        let synthetic = snapshot.entries.iter().all(|e| e.time_us.is_none());
        let mut per_device: HashMap<i64, i64> = HashMap::new();
        let index_on_device: Vec<i64> = snapshot
            .entries
            .iter()
            .map(|e| {
                let n = per_device.entry(e.device).or_insert(0);
                *n += 1;
                *n - 1
            })
            .collect();
        let last_ps = if synthetic {
            per_device.values().copied().max().unwrap_or(0).saturating_sub(1).saturating_mul(PS_PER_US)
        } else {
            times.max().zip(origin_us).map_or(0, |(max, min)| max.saturating_sub(min).saturating_mul(PS_PER_US))
        };
        Clock { origin_us, synthetic, index_on_device, end_ps: last_ps.saturating_add(PS_PER_US) }
    }

    fn time_ps(&self, index: usize, entry: &TraceEntry) -> i64 {
        if self.synthetic {
            return self.index_on_device.get(index).copied().unwrap_or(0).saturating_mul(PS_PER_US);
        }
        self.at_us(entry.time_us.unwrap_or(self.origin_us.unwrap_or(0)))
    }

    fn at_us(&self, time_us: i64) -> i64 {
        time_us.saturating_sub(self.origin_us.unwrap_or(time_us)).saturating_mul(PS_PER_US)
    }
}

/// Allocated and reserved bytes of each entry's device after it.
struct Totals {
    after: Vec<(i64, i64)>,
}

impl Totals {
    fn rebuild(snapshot: &Snapshot, warnings: &mut Vec<String>) -> Totals {
        let mut end: HashMap<i64, (i64, i64)> = HashMap::new();
        for segment in &snapshot.segments {
            let at_end = end.entry(segment.device).or_default();
            at_end.1 = at_end.1.saturating_add(segment.total_size);
            for block in &segment.blocks {
                if snapshot.text(block.state) == "active_allocated" {
                    at_end.0 = at_end.0.saturating_add(block.size);
                }
            }
        }
        let mut change: HashMap<i64, (i64, i64)> = HashMap::new();
        for entry in &snapshot.entries {
            let (allocated, reserved) = delta(entry);
            let sum = change.entry(entry.device).or_default();
            *sum = (sum.0.saturating_add(allocated), sum.1.saturating_add(reserved));
        }
        let mut current: HashMap<i64, (i64, i64)> = HashMap::new();
        let mut devices: Vec<i64> = change.keys().copied().collect();
        devices.sort_unstable();
        for device in devices {
            let (at_end, delta) = (end.get(&device).copied().unwrap_or_default(), change[&device]);
            let start = (at_end.0.saturating_sub(delta.0), at_end.1.saturating_sub(delta.1));
            if start.0 < 0 || start.1 < 0 {
                warnings.push(format!(
                    "cuda:{device}: the trace frees {} more than the snapshot's state accounts for (a snapshot of one \
                     memory pool?); totals are clamped at 0",
                    if start.0 < 0 { "allocated bytes" } else { "reserved bytes" }
                ));
            }
            current.insert(device, (start.0.max(0), start.1.max(0)));
        }
        let after = snapshot
            .entries
            .iter()
            .map(|entry| {
                let (allocated, reserved) = delta(entry);
                let now = current.entry(entry.device).or_default();
                *now = (now.0.saturating_add(allocated).max(0), now.1.saturating_add(reserved).max(0));
                *now
            })
            .collect();
        Totals { after }
    }
}

/// How an entry changes (allocated, reserved) bytes.
fn delta(entry: &TraceEntry) -> (i64, i64) {
    match entry.action {
        Action::Alloc => (entry.size, 0),
        Action::FreeRequested => (entry.size.saturating_neg(), 0),
        Action::SegmentAlloc | Action::SegmentMap => (0, entry.size),
        Action::SegmentFree | Action::SegmentUnmap => (0, entry.size.saturating_neg()),
        _ => (0, 0),
    }
}

/// The plane under construction and its lines by (device, kind, stream).
struct Planes {
    builder: PlaneBuilder,
    lines: BTreeMap<(i64, u8, i64), Line>,
}

/// Line kinds, in the order lines are shown.
const ENTRIES: u8 = 0;
const ANNOTATIONS: u8 = 1;
const SEGMENTS: u8 = 2;
const BLOCKS: u8 = 3;

impl Planes {
    fn line(&mut self, device: i64, kind: u8, stream: i64) -> &mut Line {
        let count = self.lines.len() as i64;
        self.lines.entry((device, kind, stream)).or_insert_with(|| {
            let name = match kind {
                ENTRIES => format!("cuda:{device} stream {stream}"),
                ANNOTATIONS => format!("{ANNOTATIONS_LINE} cuda:{device}"),
                SEGMENTS => format!("segments cuda:{device}"),
                _ => format!("blocks cuda:{device}"),
            };
            let id = count + 1;
            let mut line = Line::new(id, name);
            line.display_id = id;
            line.chrome_track = Some((TrackId::Int(device), TrackId::Int(id)));
            line
        })
    }

    /// Event metadata `name` with cat `cat` and ph `ph` (`None` for complete events).
    fn metadata(&mut self, name: &str, cat: &str, ph: Option<&str>) -> u32 {
        let variant = u32::from(ph.is_some());
        self.builder.event_metadata(name, variant, |b| {
            let mut stats = Vec::new();
            let key = b.stat_key(CAT_STAT);
            if let Ok(v) = b.metadata_str(cat) {
                stats.push((key, v));
            }
            if let Some(ph) = ph {
                let key = b.stat_key(PH_STAT);
                if let Ok(v) = b.metadata_str(ph) {
                    stats.push((key, v));
                }
            }
            stats
        })
    }

    fn stack_ref(&mut self, snapshot: &Snapshot, stack: Option<u32>) -> Option<Val> {
        let frames = snapshot.stacks.get(stack? as usize)?;
        if frames.is_empty() {
            return None;
        }
        let text: Vec<String> = frames.iter().map(|f| format!("{}:{}:{}", f.filename, f.line, f.name)).collect();
        Some(Val::Ref(self.builder.stat_key(&text.join("\n"))))
    }

    fn push(&mut self, at: (i64, u8, i64), metadata: u32, start_ps: i64, duration_ps: i64, stats: Vec<(&str, Val)>) {
        let keyed: Vec<(u32, Val)> = stats.into_iter().map(|(name, v)| (self.builder.stat_key(name), v)).collect();
        let line = self.line(at.0, at.1, at.2);
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

    fn entry(&mut self, snapshot: &Snapshot, entry: &TraceEntry, time_ps: i64, totals: Option<(i64, i64)>) {
        let (name, cat, bytes) = match entry.action {
            Action::Alloc => (MEMORY_EVENT, "cpu_instant_event", entry.size),
            Action::FreeRequested => (MEMORY_EVENT, "cpu_instant_event", entry.size.saturating_neg()),
            other => (other.name(snapshot), SNAPSHOT_CATEGORY, entry.size),
        };
        let metadata = self.metadata(name, cat, Some("i"));
        let (allocated, reserved) = totals.unwrap_or_default();
        let mut stats = vec![
            ("Addr", Val::Int(entry.address as i64)),
            ("Bytes", Val::Int(bytes)),
            (ALLOCATED_STAT, Val::Int(allocated)),
            (RESERVED_STAT, Val::Int(reserved)),
            ("Device Type", Val::Int(1)),
            ("Device Id", Val::Int(entry.device)),
            (STREAM_STAT, Val::Int(entry.stream)),
            (ACTION_STAT, Val::Ref(self.builder.stat_key(entry.action.name(snapshot)))),
        ];
        if let Some(free) = entry.device_free {
            stats.push((DEVICE_FREE_STAT, Val::Int(free)));
        }
        if let Some(frames) = self.stack_ref(snapshot, entry.stack) {
            stats.push((FRAMES_STAT, frames));
        }
        if let Some(id) = entry.compile_context {
            stats.push(("Compile Context", Val::Text(snapshot.text(id).to_string())));
        }
        if let Some(id) = entry.user_metadata {
            stats.push(("User Metadata", Val::Text(snapshot.text(id).to_string())));
        }
        self.push((entry.device, ENTRIES, entry.stream), metadata, time_ps, 0, stats);
    }

    fn annotations(&mut self, snapshot: &Snapshot, clock: &Clock) {
        let mut open: HashMap<(i64, u32), Vec<i64>> = HashMap::new();
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
            let metadata = self.metadata(snapshot.text(name), "user_annotation", None);
            self.push((device, ANNOTATIONS, 0), metadata, start, end.saturating_sub(start).max(0), Vec::new());
        }
    }

    fn segments(&mut self, snapshot: &Snapshot, clock: &Clock) {
        let mut allocated_at: HashMap<(i64, u64), i64> = HashMap::new();
        for (index, entry) in snapshot.entries.iter().enumerate() {
            if entry.action == Action::SegmentAlloc {
                allocated_at.insert((entry.device, entry.address), clock.time_ps(index, entry));
            }
        }
        let end = clock.end_ps;
        for segment in &snapshot.segments {
            let start = allocated_at.get(&(segment.device, segment.address)).copied().unwrap_or(0).min(end);
            let metadata = self.metadata(SEGMENT_EVENT, SNAPSHOT_CATEGORY, None);
            let mut stats = vec![
                ("Addr", Val::Int(segment.address as i64)),
                ("Bytes", Val::Int(segment.total_size)),
                ("Allocated Bytes", Val::Int(segment.allocated_size)),
                ("Active Bytes", Val::Int(segment.active_size)),
                ("Requested Bytes", Val::Int(segment.requested_size)),
                ("Device Id", Val::Int(segment.device)),
                (STREAM_STAT, Val::Int(segment.stream)),
                ("Expandable", Val::Int(i64::from(segment.is_expandable))),
            ];
            stats.push(("Segment Type", Val::Text(snapshot.text(segment.segment_type).to_string())));
            stats.push(("Pool", Val::Text(format!("({}, {})", segment.pool.0, segment.pool.1))));
            if let Some(frames) = self.stack_ref(snapshot, segment.stack) {
                stats.push((FRAMES_STAT, frames));
            }
            self.push((segment.device, SEGMENTS, 0), metadata, start, end - start, stats);
            for block in &segment.blocks {
                let metadata = self.metadata(snapshot.text(block.state), SNAPSHOT_CATEGORY, Some("i"));
                let mut stats = vec![
                    ("Addr", Val::Int(block.address as i64)),
                    ("Bytes", Val::Int(block.size)),
                    ("Requested Bytes", Val::Int(block.requested_size)),
                    ("Segment Addr", Val::Int(segment.address as i64)),
                    ("Device Id", Val::Int(segment.device)),
                    (STREAM_STAT, Val::Int(segment.stream)),
                    (BLOCK_STATE_STAT, Val::Ref(self.builder.stat_key(snapshot.text(block.state)))),
                ];
                if let Some(frames) = self.stack_ref(snapshot, block.stack) {
                    stats.push((FRAMES_STAT, frames));
                }
                self.push((segment.device, BLOCKS, 0), metadata, end, 0, stats);
            }
        }
    }
}
