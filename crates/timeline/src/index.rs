//! An opened index: the file's bytes (mapped, or in memory), its validated layout, and
//! the small tables (sections, tracks, runs, levels) decoded once.
//!
//! Opening checks, before any query can run:
//! - the container ([`crate::format`]): magic, version, header and file length, the
//!   checksum over the whole file, the cache key, every part's size against the
//!   summary's counts;
//! - the tables: sections cover the tracks in order with known kinds and UTF-8 names
//!   inside the strings part; tracks belong to their section and cover their runs and
//!   events in order; each run is non-empty and starts where the previous one ended;
//!   levels of a run have strictly increasing widths and cover the groups in order;
//!   and everything adds up to the summary;
//! - the groups (O(groups)): every group has events, lies inside its run, starts
//!   after the previous group of its level ended (sorted, disjoint), and its longest
//!   event lies inside it;
//! - the name table: offsets start at 0, never decrease and end with the name bytes,
//!   and every name is UTF-8;
//! - the per-event references (O(events), integer compares only): every name id is
//!   below the name count; posting offsets start at 0, never decrease and end at the
//!   event count, and every posting is an event id; every flow end is an event id.
//!
//! Not checked (a file that passes the checksum was written by the builder, so these
//! only matter for a deliberately forged file, and cannot make a read go out of
//! bounds): that events of a run are sorted and do not overlap, that postings are in
//! time order and list each event under its own name, that flows are sorted, and the
//! time span in the summary. Queries then trust the tables; the big columns are still
//! read through bounds-checked accessors, so even a forged file gives wrong answers at
//! worst, never a panic or a read outside the file.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::builder::{BuiltIndex, NameId, SectionKind};
use crate::column::{Col, Le};
use crate::error::CacheError;
use crate::format::{LEVEL_FIELDS, Layout, Part, RUN_FIELDS, SECTION_FIELDS, Summary, TRACK_FIELDS, parse_layout};
use crate::key::CacheKey;

/// Where the index's bytes live.
enum Storage {
    Mapped(mlprof_mapped::GuardedMap),
    Owned(Vec<u8>),
}

/// A section as stored.
#[derive(Clone, Debug)]
struct Section {
    name: Range<usize>,
    kind: SectionKind,
    tracks: Range<u32>,
}

/// A track as stored.
#[derive(Clone, Debug)]
struct Track {
    name: Range<usize>,
    section: u32,
    runs: Range<usize>,
    events: Range<u64>,
}

/// A run (one track at one depth) as stored.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub(crate) track: u32,
    pub(crate) depth: u32,
    pub(crate) events: Range<usize>,
    pub(crate) levels: Range<usize>,
}

/// A level of a run as stored.
#[derive(Clone, Debug)]
pub(crate) struct Level {
    pub(crate) width_ps: i64,
    pub(crate) groups: Range<usize>,
}

/// A timeline index, opened and validated. Cheap to share between threads (`Sync`).
pub struct TimelineIndex {
    storage: Storage,
    layout: Layout,
    key: CacheKey,
    path: PathBuf,
    sections: Vec<Section>,
    tracks: Vec<Track>,
    pub(crate) runs: Vec<Run>,
    pub(crate) levels: Vec<Level>,
}

/// A section of the timeline, for the meta answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SectionInfo<'a> {
    /// Its name (`/device:GPU:0`, `/host:CPU`, `Steps`).
    pub name: &'a str,
    /// Device, host or derived.
    pub kind: SectionKind,
    /// Ids of its tracks, consecutive.
    pub tracks: Range<u32>,
}

/// A track of the timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrackInfo<'a> {
    /// Track id (its position over all sections).
    pub id: u32,
    /// Its name (thread, stream or derived line).
    pub name: &'a str,
    /// Index of its section.
    pub section: u32,
    /// Number of nesting levels.
    pub depth: u32,
    /// Number of events.
    pub events: u64,
}

/// One event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EventInfo {
    /// Event id.
    pub id: u32,
    /// Its track.
    pub track: u32,
    /// Its nesting depth on the track (0 = outermost).
    pub depth: u32,
    /// Start, ps relative to the profile start.
    pub start_ps: i64,
    /// Duration, ps.
    pub dur_ps: i64,
    /// Its name.
    pub name: NameId,
    /// The source reference given when it was built (see [`crate::ModelRef`]).
    pub source: u64,
}

/// Which way a flow goes, seen from one of its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowDirection {
    /// The flow ends at this event (it comes from `event`).
    In,
    /// The flow starts at this event (it goes to `event`).
    Out,
}

/// A flow seen from one of its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FlowLink {
    /// In or out.
    pub direction: FlowDirection,
    /// The event at the other end.
    pub event: u32,
}

impl std::fmt::Debug for TimelineIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TimelineIndex")
            .field("path", &self.path)
            .field("events", &self.layout.summary.events)
            .field("tracks", &self.tracks.len())
            .finish()
    }
}

impl TimelineIndex {
    /// Opens the index file at `path` (memory-mapped) if it is complete, intact, of this
    /// format version and built for `expected`; otherwise the error says why, and the
    /// caller rebuilds it.
    pub fn open(path: &Path, expected: &CacheKey) -> Result<TimelineIndex, CacheError> {
        let io_error = |source| CacheError::Io { path: path.to_path_buf(), source };
        let file = std::fs::File::open(path).map_err(io_error)?;
        // Guarded: another process truncating the file while it is mapped makes reads
        // return zeros instead of raising SIGBUS; `changed` then says so.
        let storage = match mlprof_mapped::map_or_read(file).map_err(io_error)? {
            mlprof_mapped::Contents::Mapped(map) => Storage::Mapped(map),
            mlprof_mapped::Contents::Read(bytes) => Storage::Owned(bytes),
        };
        let index = TimelineIndex::new(storage, path)?;
        if let Some(change) = index.changed() {
            return Err(CacheError::Corrupt { path: path.to_path_buf(), what: change.to_string() });
        }
        if &index.key != expected {
            return Err(CacheError::Stale {
                path: path.to_path_buf(),
                built: index.key.describe(),
                wanted: expected.describe(),
            });
        }
        Ok(index)
    }

    /// Opens an index held in memory (the bytes of a file), whatever its key.
    pub fn from_bytes(bytes: Vec<u8>) -> Result<TimelineIndex, CacheError> {
        TimelineIndex::new(Storage::Owned(bytes), Path::new("<memory>"))
    }

    fn new(storage: Storage, path: &Path) -> Result<TimelineIndex, CacheError> {
        let bytes: &[u8] = match &storage {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        };
        let (layout, key) = parse_layout(bytes, path)?;
        let tables =
            Tables::decode(bytes, &layout).map_err(|what| CacheError::Corrupt { path: path.to_path_buf(), what })?;
        Ok(TimelineIndex {
            storage,
            layout,
            key,
            path: path.to_path_buf(),
            sections: tables.sections,
            tracks: tables.tracks,
            runs: tables.runs,
            levels: tables.levels,
        })
    }

    /// Whether the index file was truncated or rewritten since it was opened: answers
    /// read from it since then may hold zeros or other bytes and must not be used (an
    /// index in memory never changes). Ask after answering a query, before sending it.
    pub fn changed(&self) -> Option<mlprof_mapped::Change> {
        match &self.storage {
            Storage::Mapped(map) => map.changed(),
            Storage::Owned(_) => None,
        }
    }

    fn bytes(&self) -> &[u8] {
        match &self.storage {
            Storage::Mapped(m) => m,
            Storage::Owned(v) => v,
        }
    }

    /// A column of the file.
    pub(crate) fn col<T: Le>(&self, part: Part) -> Col<'_, T> {
        Col::new(self.layout.part(self.bytes(), part))
    }

    /// What the index was built from.
    pub fn key(&self) -> &CacheKey {
        &self.key
    }

    /// Size of the index in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.bytes().len() as u64
    }

    /// Number of events.
    pub fn event_count(&self) -> u64 {
        self.layout.summary.events
    }

    /// Number of flows.
    pub fn flow_count(&self) -> u64 {
        self.layout.summary.flows
    }

    /// Earliest event start and latest event end (ps); (0, 0) without events.
    pub fn span_ps(&self) -> (i64, i64) {
        self.layout.summary.span_ps
    }

    /// The sections, in display order.
    pub fn sections(&self) -> impl ExactSizeIterator<Item = SectionInfo<'_>> + '_ {
        self.sections.iter().map(|s| SectionInfo {
            name: self.string(s.name.clone()),
            kind: s.kind,
            tracks: s.tracks.clone(),
        })
    }

    /// Number of tracks (track ids are `0..track_count()`).
    pub fn track_count(&self) -> u32 {
        self.tracks.len() as u32
    }

    /// Track `id`.
    pub fn track(&self, id: u32) -> Option<TrackInfo<'_>> {
        let t = self.tracks.get(id as usize)?;
        Some(TrackInfo {
            id,
            name: self.string(t.name.clone()),
            section: t.section,
            depth: t.runs.len() as u32,
            events: t.events.end - t.events.start,
        })
    }

    /// Number of distinct event names.
    pub fn name_count(&self) -> u32 {
        self.layout.summary.names as u32
    }

    /// The text of name `id` ("" for an unknown id).
    pub fn name(&self, id: NameId) -> &str {
        std::str::from_utf8(self.name_bytes(id)).unwrap_or("")
    }

    /// The UTF-8 bytes of name `id` (checked to be UTF-8 when the index was opened).
    pub(crate) fn name_bytes(&self, id: NameId) -> &[u8] {
        let offsets = self.col::<u64>(Part::NameOffsets);
        let range = offsets.at(id.0 as usize) as usize..offsets.at(id.0 as usize + 1) as usize;
        self.layout.part(self.bytes(), Part::NameBytes).get(range).unwrap_or(&[])
    }

    fn string(&self, range: Range<usize>) -> &str {
        let bytes = self.layout.part(self.bytes(), Part::Strings);
        bytes.get(range).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or("")
    }

    /// The run holding event `id`.
    pub(crate) fn run_of(&self, id: u32) -> Option<&Run> {
        let id = id as usize;
        let at = self.runs.partition_point(|r| r.events.end <= id);
        self.runs.get(at).filter(|r| r.events.contains(&id))
    }

    /// Event `id`, if it exists.
    pub fn event(&self, id: u32) -> Option<EventInfo> {
        let run = self.run_of(id)?;
        let i = id as usize;
        Some(EventInfo {
            id,
            track: run.track,
            depth: run.depth,
            start_ps: self.col::<i64>(Part::Start).at(i),
            dur_ps: self.col::<i64>(Part::Duration).at(i),
            name: NameId(self.col::<u32>(Part::Name).at(i)),
            source: self.col::<u64>(Part::Source).at(i),
        })
    }

    /// The flows that start or end at event `id`: outgoing first, each by the other
    /// event's id.
    pub fn flows_of(&self, id: u32) -> Vec<FlowLink> {
        let mut links = Vec::new();
        for (key_part, other_part, direction) in [
            (Part::FlowFromSource, Part::FlowFromTarget, FlowDirection::Out),
            (Part::FlowToTarget, Part::FlowToSource, FlowDirection::In),
        ] {
            let keys = self.col::<u32>(key_part);
            let others = self.col::<u32>(other_part);
            let from = keys.partition_point(0..keys.len(), |k| k < id);
            let to = keys.partition_point(from..keys.len(), |k| k <= id);
            links.extend((from..to).map(|i| FlowLink { direction, event: others.at(i) }));
        }
        links
    }
}

impl BuiltIndex {
    /// Opens this index in memory, through the file format (as if written and read back).
    pub fn into_index(self) -> Result<TimelineIndex, CacheError> {
        let bytes = self.to_bytes(&CacheKey::default());
        drop(self);
        TimelineIndex::from_bytes(bytes)
    }
}

/// The small tables, decoded and cross-checked.
struct Tables {
    sections: Vec<Section>,
    tracks: Vec<Track>,
    runs: Vec<Run>,
    levels: Vec<Level>,
}

fn records<const N: usize>(bytes: &[u8]) -> impl Iterator<Item = [u64; N]> + '_ {
    let col = Col::<u64>::new(bytes);
    (0..col.len() / N).map(move |r| std::array::from_fn(|f| col.at(r * N + f)))
}

fn to_usize(v: u64, what: &str) -> Result<usize, String> {
    usize::try_from(v).map_err(|_| format!("{what} out of range"))
}

impl Tables {
    /// Decodes the small tables and checks that they agree with each other, with the
    /// summary and with the columns they index.
    fn decode(bytes: &[u8], layout: &Layout) -> Result<Tables, String> {
        let s: &Summary = &layout.summary;
        to_usize(s.events, "event count")?;
        if s.events > crate::builder::MAX_EVENTS {
            return Err("too many events".into());
        }
        let strings = Strings(layout.part(bytes, Part::Strings));
        let sections = decode_sections(layout.part(bytes, Part::Sections), &strings, s.tracks)?;
        let level_records: Vec<[u64; LEVEL_FIELDS]> =
            records::<LEVEL_FIELDS>(layout.part(bytes, Part::Levels)).collect();
        let (tracks, runs, next) = decode_tracks(bytes, layout, &sections, &level_records, &strings)?;
        if next.run != s.runs || next.event != s.events || next.level != s.levels || next.group != s.groups {
            return Err("tables do not add up to the summary".into());
        }
        let levels = decode_levels(&level_records)?;
        check_names(bytes, layout)?;
        check_groups(bytes, layout, &runs, &levels)?;
        check_references(bytes, layout, s)?;
        Ok(Tables { sections, tracks, runs, levels })
    }
}

/// The strings part: section and track names.
struct Strings<'a>(&'a [u8]);

impl Strings<'_> {
    /// The range of the name at `at` of `len` bytes, checked to be inside the part and
    /// UTF-8; `what` names its owner for errors.
    fn range(&self, at: u64, len: u64, what: &str) -> Result<Range<usize>, String> {
        let at = to_usize(at, what)?;
        let end = at.checked_add(to_usize(len, what)?).filter(|&e| e <= self.0.len());
        let range = at..end.ok_or_else(|| format!("{what} name out of range"))?;
        let name = self.0.get(range.clone()).unwrap_or(&[]);
        std::str::from_utf8(name).map_err(|_| format!("{what} name is not UTF-8"))?;
        Ok(range)
    }
}

/// The sections, which must cover the `track_count` tracks in order.
fn decode_sections(part: &[u8], strings: &Strings<'_>, track_count: u64) -> Result<Vec<Section>, String> {
    let mut sections = Vec::new();
    let mut next_track = 0u64;
    for [name_at, name_len, kind, first_track, track_count] in records::<SECTION_FIELDS>(part) {
        let kind = SectionKind::from_code(kind).ok_or("section kind")?;
        if first_track != next_track {
            return Err("sections do not cover the tracks in order".into());
        }
        next_track = first_track.checked_add(track_count).ok_or("track count")?;
        let tracks =
            u32::try_from(first_track).map_err(|_| "track id")?..u32::try_from(next_track).map_err(|_| "track id")?;
        sections.push(Section { name: strings.range(name_at, name_len, "section")?, kind, tracks });
    }
    if next_track != track_count {
        return Err("sections do not cover every track".into());
    }
    Ok(sections)
}

/// The next run, event, level and group a table entry must start at: each table
/// covers the next one's entries in order, without gaps.
#[derive(Clone, Copy, Default)]
struct Next {
    run: u64,
    event: u64,
    level: u64,
    group: u64,
}

/// The tracks and their runs (one per depth), each in its section, covering the runs,
/// events, levels and groups in order; returns them with where the coverage ended.
fn decode_tracks(
    bytes: &[u8],
    layout: &Layout,
    sections: &[Section],
    level_records: &[[u64; LEVEL_FIELDS]],
    strings: &Strings<'_>,
) -> Result<(Vec<Track>, Vec<Run>, Next), String> {
    let run_records: Vec<[u64; RUN_FIELDS]> = records::<RUN_FIELDS>(layout.part(bytes, Part::Runs)).collect();
    let mut tracks = Vec::new();
    let mut runs = Vec::with_capacity(run_records.len());
    let mut next = Next::default();
    for (id, [name_at, name_len, section, first_run, run_count, first_event, event_count]) in
        records::<TRACK_FIELDS>(layout.part(bytes, Part::Tracks)).enumerate()
    {
        let in_section = sections.get(to_usize(section, "section")?).is_some_and(|s| s.tracks.contains(&(id as u32)));
        if !in_section || first_run != next.run || first_event != next.event {
            return Err(format!("track {id} is out of order"));
        }
        next.run = first_run.checked_add(run_count).ok_or("run count")?;
        next.event = first_event.checked_add(event_count).ok_or("event count")?;
        let run_range = to_usize(first_run, "run")?..to_usize(next.run, "run")?;
        let track_runs = run_records.get(run_range.clone()).ok_or("track runs out of range")?;
        let run_event = decode_runs(id, first_event, track_runs, level_records, &mut next, &mut runs)?;
        if run_event != next.event {
            return Err(format!("runs of track {id} do not cover its events"));
        }
        tracks.push(Track {
            name: strings.range(name_at, name_len, "track")?,
            section: section as u32,
            runs: run_range,
            events: first_event..next.event,
        });
    }
    Ok((tracks, runs, next))
}

/// The runs of track `id` (depth 0, 1, …), whose events start at `first_event`: each
/// non-empty, covering the track's events and the next levels in order, with levels
/// of growing width covering the next groups in order. Returns the event after the
/// last run.
fn decode_runs(
    id: usize,
    first_event: u64,
    track_runs: &[[u64; RUN_FIELDS]],
    level_records: &[[u64; LEVEL_FIELDS]],
    next: &mut Next,
    runs: &mut Vec<Run>,
) -> Result<u64, String> {
    let mut run_event = first_event;
    for (depth, &[run_first, run_count, first_level, level_count]) in track_runs.iter().enumerate() {
        if run_first != run_event || run_count == 0 || first_level != next.level {
            return Err(format!("run {depth} of track {id} is out of order"));
        }
        run_event = run_first.checked_add(run_count).ok_or("run size")?;
        next.level = first_level.checked_add(level_count).ok_or("level count")?;
        let level_range = to_usize(first_level, "level")?..to_usize(next.level, "level")?;
        let mut last_width = 0i64;
        for &[width, first_group, group_count] in
            level_records.get(level_range.clone()).ok_or("run levels out of range")?
        {
            let width = width as i64;
            if width <= last_width || first_group != next.group {
                return Err(format!("levels of track {id} are out of order"));
            }
            last_width = width;
            next.group = first_group.checked_add(group_count).ok_or("group count")?;
        }
        runs.push(Run {
            track: id as u32,
            depth: depth as u32,
            events: to_usize(run_first, "event")?..to_usize(run_event, "event")?,
            levels: level_range,
        });
    }
    Ok(run_event)
}

/// The levels, with their group ranges.
fn decode_levels(level_records: &[[u64; LEVEL_FIELDS]]) -> Result<Vec<Level>, String> {
    level_records
        .iter()
        .map(|&[width, first_group, group_count]| {
            Ok(Level {
                width_ps: width as i64,
                groups: to_usize(first_group, "group")?
                    ..to_usize(first_group.checked_add(group_count).ok_or("group count")?, "group")?,
            })
        })
        .collect()
}

/// The event names: offsets in order within the name bytes, each name UTF-8.
fn check_names(bytes: &[u8], layout: &Layout) -> Result<(), String> {
    check_offsets(layout.part(bytes, Part::NameOffsets), layout.part(bytes, Part::NameBytes).len() as u64, "name")?;
    let name_offsets = Col::<u64>::new(layout.part(bytes, Part::NameOffsets));
    let name_bytes = layout.part(bytes, Part::NameBytes);
    for i in 0..name_offsets.len().saturating_sub(1) {
        let range = name_offsets.at(i) as usize..name_offsets.at(i + 1) as usize;
        let name = name_bytes.get(range).ok_or("name out of range")?;
        std::str::from_utf8(name).map_err(|_| format!("name {i} is not UTF-8"))?;
    }
    Ok(())
}

/// Every name, posting and flow end an event column refers to exists.
fn check_references(bytes: &[u8], layout: &Layout, s: &Summary) -> Result<(), String> {
    if !all_below(layout.part(bytes, Part::Name), s.names) {
        return Err("an event names a missing name".into());
    }
    check_offsets(layout.part(bytes, Part::PostingOffsets), s.events, "posting")?;
    if !all_below(layout.part(bytes, Part::Postings), s.events) {
        return Err("a posting names a missing event".into());
    }
    for part in [Part::FlowFromSource, Part::FlowFromTarget, Part::FlowToTarget, Part::FlowToSource] {
        if !all_below(layout.part(bytes, part), s.events) {
            return Err("a flow names a missing event".into());
        }
    }
    Ok(())
}

/// Every group of every level of every run has events, lies inside its run, starts
/// at or after the end of the previous group of its level, and has its longest event
/// inside it.
fn check_groups(bytes: &[u8], layout: &Layout, runs: &[Run], levels: &[Level]) -> Result<(), String> {
    let first = Col::<u32>::new(layout.part(bytes, Part::GroupFirst));
    let count = Col::<u32>::new(layout.part(bytes, Part::GroupCount));
    let longest = Col::<u32>::new(layout.part(bytes, Part::GroupLongest));
    for (r, run) in runs.iter().enumerate() {
        for level in levels.get(run.levels.clone()).unwrap_or(&[]) {
            let mut previous_end = run.events.start;
            for g in level.groups.clone() {
                let (Some(from), Some(n), Some(long)) = (first.get(g), count.get(g), longest.get(g)) else {
                    return Err(format!("group {g} is missing"));
                };
                let (from, long) = (from as usize, long as usize);
                let end = from.checked_add(n as usize).ok_or("group size")?;
                if n == 0 || from < previous_end || end > run.events.end || !(from..end).contains(&long) {
                    return Err(format!("group {g} of run {r} is out of place"));
                }
                previous_end = end;
            }
        }
    }
    Ok(())
}

/// Whether every u32 of the column stored in `bytes` is below `bound`.
fn all_below(bytes: &[u8], bound: u64) -> bool {
    if bytes.len() < 4 {
        return true;
    }
    // One pass keeping the maximum, no branch per value.
    let max = bytes.chunks_exact(4).map(|v| u32::from_le_bytes([v[0], v[1], v[2], v[3]])).fold(0, u32::max);
    u64::from(max) < bound
}

/// Offsets must start at 0, never decrease, and end at `end`.
fn check_offsets(bytes: &[u8], end: u64, what: &str) -> Result<(), String> {
    let col = Col::<u64>::new(bytes);
    let mut last = 0u64;
    for i in 0..col.len() {
        let v = col.at(i);
        if (i == 0 && v != 0) || v < last {
            return Err(format!("{what} offsets are not increasing"));
        }
        last = v;
    }
    if last != end {
        return Err(format!("{what} offsets do not end with their data"));
    }
    Ok(())
}
