//! Reader of PyTorch profiler / Kineto Chrome-trace JSON into a [`Host`].
//!
//! The document is parsed in one pass over the byte slice: event fields are read with
//! borrowed strings, times and values as raw JSON text, and each event is appended to
//! the columns of its `(pid, tid)` track. Names, categories and stat keys go through
//! one interner per reader; only a name seen for the first time allocates. Whether a
//! pid is a device is only known at the end, so the planes are assembled after the
//! pass, each plane's metadata tables compacted to what its lines use.
//!
//! The pass is normally [`walk`]'s: the `traceEvents` array is read event by event, so
//! that the reader can release the bytes it has read (a mapped file then does not stay
//! resident, see [`read_kineto_releasing`]) and can read a large array in chunks on
//! several threads, merged afterwards in file order. Each event is read by [`fast`]'s
//! scanner when it is written the plain way Kineto writes events, else by serde_json
//! (both give the same fields). Chunk boundaries are guessed and verified; whenever the
//! walk does not succeed, one sequential serde pass over the whole document decides
//! (and reports errors with their line and column), so the result never depends on the
//! way the file was read.
//!
//! Times are exact: `ts`/`dur` are decimal microseconds (`1712195495519695.8`), read
//! from their text into whole µs plus picoseconds (never through `f64`; digits below a
//! picosecond are truncated). `displayTimeUnit` only affects display and is ignored.
//!
//! # Mapping
//!
//! | Chrome trace | Model |
//! |---|---|
//! | pid with an event of cat `kernel`, `Kernel`, `gpu_memcpy`, `gpu_memset`, `gpu_user_annotation`, `cuda_sync`, or a `process_labels` record `GPU N` | plane `/device:GPU:<pid>`, id = pid; every event of the pid (any `ph`) goes there |
//! | pid whose device events are `mtia_ccp_events`, or labelled `MTIA N` | plane `/device:MTIA:<pid>` |
//! | `deviceProperties[i]` | a device plane with id = its `id` (created even without events), plane stats: `name` → `gpu_device_name`, `totalGlobalMem` → `memory_size`, `computeMajor` → `compute_cap_major`, `computeMinor` → `compute_cap_minor`, `numSms` → `core_count`, every other key verbatim |
//! | device `tid` (stream) | line id = display_id = tid, name `Stream #<tid>` |
//! | every other pid (host pids, string pids `"Spans"`, `"Traces"`, `""`) | plane `/host:CPU`, id 0 |
//! | host `(pid, tid)` | one line each, first-seen order; id = display_id = tid (a string tid: its 63-bit FNV-1a hash); name = the last `thread_name` record's name, else the string tid, else `thread <tid>` |
//! | `(pid, tid)` | [`Line::chrome_track`](mlprof_model::Line::chrome_track) on every line |
//! | `name`, `cat`, `ph` | event metadata interned per plane by (name, variant of (cat, ph)); metadata stats `cat` (when present) and `ph` (when not `X`) |
//! | `ts` | event offset in ps from [`ChromeTraceInfo::origin_us`] (the smallest whole µs of an event `ts`); lines have `timestamp_ns` 0; an event without `ts` sits at the origin |
//! | `dur` | duration of `X` events (0 when missing); other events have duration 0 and keep a `dur` field as a raw-JSON stat `@dur` |
//! | `args` | event stats in order, one per key; `correlation` → `correlation_id`, `device` → `device_id`, `context` → `context_id`; integers → Int (Uint above i64::MAX), other numbers → Double, strings → Str, anything else → Json (raw text); a non-object `args` → one Json stat `args` |
//! | `s`, `id`, `bp` (instants' scope, flow id and binding point) | stats `@s`, `@id`, `@bp` after the args, typed like args values (a flow `id` is an Int or a Str); the `@` prefix ([`crate::chrome::FIELD_PREFIX`]) tells the writer they are event fields, not args |
//! | any other event key (`id2`, …) | a Json stat (raw text) named `@` + the key, after the args, in file order |
//! | `"ph": "M"` records | not events: [`ChromeTraceInfo::metadata_events`] (name, pid, tid, ts relative to the origin, raw args); other fields of an `M` record are dropped |
//! | top-level keys other than `traceEvents` | [`ChromeTraceInfo::top_level`], raw JSON in file order |
//! | a bare top-level array | the events; [`ChromeTraceInfo::bare_array`] |
//! | `distributedInfo.rank` | [`Host::rank`] (when an integer) |
//! | `baseTimeNanoseconds` | [`Host::profile_start_ns`] = it + origin_us × 1000; without it, origin_us × 1000 when origin_us > 10^15 (epoch µs), else none; `profile_stop_ns` = start + the latest event end |
//!
//! Host plane first, then device planes by id.

mod fast;
mod number;
mod parse;
mod walk;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;

use mlprof_model::names::chrome::{CAT_STAT, PH_COMPLETE, PH_STAT};
use mlprof_model::names::{DEVICE_PLANE_PREFIX, GPU_PLANE_PREFIX, HOST_PLANE};
use mlprof_model::{
    ChromeMetadataEvent, ChromeTraceInfo, Host, Line, Plane, PlaneBuilder, SourceFormat, StatValue, TrackId,
};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::{FormatError, JsonPosition, Result};
use crate::input::Release;
use crate::intern::fnv63;
use number::{PS_PER_US, Scalar, classify};
use parse::{NO_CAT, Reader, TopSeed};
use walk::walk_chunked;

/// Most threads one trace is read on.
const MAX_THREADS: usize = 8;

/// Smallest part of a trace worth a thread of its own, in bytes.
const MIN_CHUNK_BYTES: usize = 16 << 20;

/// Decodes a Kineto / Chrome trace from the whole (already decompressed) file content.
///
/// `path` is used in errors and as [`Host::source_path`]; `host_name` becomes
/// [`Host::name`]. The caller sets [`Host::source_bytes`]. Errors are
/// [`FormatError::Json`] with the line and column of the problem.
///
/// Large traces are read on several threads (see [`walk`]); the result is the same.
pub fn read_kineto(bytes: &[u8], path: &str, host_name: &str) -> Result<Host> {
    read(bytes, None, Mode::Auto, path, host_name)
}

/// [`read_kineto`], calling `release` with each byte range of `bytes` it has finished
/// reading (possibly from several threads), e.g. [`crate::input::FileBytes::release`]
/// so that a memory-mapped file does not stay resident once parsed. The reader may
/// still touch released bytes (names it keeps borrowing), so `release` must only be a
/// hint that leaves the bytes readable.
pub fn read_kineto_releasing(
    bytes: &[u8],
    release: &(dyn Fn(Range<usize>) + Sync),
    path: &str,
    host_name: &str,
) -> Result<Host> {
    read(bytes, Some(release), Mode::Auto, path, host_name)
}

/// How the events are read (tests compare the modes; the reader itself uses `Auto`).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) enum Mode {
    /// In chunks on up to [`MAX_THREADS`] threads (as many as there are cores), each of
    /// at least [`MIN_CHUNK_BYTES`]; falling back to `Sequential` on failure.
    Auto,
    /// In up to `chunks` chunks of at least `min_bytes`, falling back like `Auto`.
    Chunked { chunks: usize, min_bytes: usize },
    /// One serde pass over the whole document: the reference, and the one that
    /// reports errors.
    Sequential,
}

pub(crate) fn read(
    bytes: &[u8],
    release: Option<Release<'_>>,
    mode: Mode,
    path: &str,
    host_name: &str,
) -> Result<Host> {
    let (chunks, min_bytes) = match mode {
        Mode::Auto => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            (cores.min(MAX_THREADS), MIN_CHUNK_BYTES)
        }
        Mode::Chunked { chunks, min_bytes } => (chunks, min_bytes),
        Mode::Sequential => (0, 0),
    };
    let walked = if chunks > 0 { walk_chunked(bytes, chunks, min_bytes, release).ok() } else { None };
    let reader = match walked {
        Some(reader) => reader,
        None => {
            let mut reader = Reader::default();
            let mut de = serde_json::Deserializer::from_slice(bytes);
            let parsed = TopSeed(&mut reader).deserialize(&mut de).and_then(|()| de.end());
            if let Err(e) = parsed {
                return Err(json_error(path, &e));
            }
            reader
        }
    };
    assemble(reader, path, host_name).map_err(|message| FormatError::Json {
        path: path.to_string(),
        position: end_position(bytes),
        message,
    })
}

/// A serde_json error as a [`FormatError::Json`].
fn json_error(path: &str, e: &serde_json::Error) -> FormatError {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full);
    let message = match e.classify() {
        serde_json::error::Category::Eof => format!("truncated JSON: {message}"),
        serde_json::error::Category::Syntax => format!("invalid JSON: {message}"),
        _ => message.to_string(),
    };
    FormatError::Json {
        path: path.to_string(),
        position: JsonPosition { line: e.line().max(1), column: e.column().max(1) },
        message,
    }
}

/// The position just past the end of the document.
fn end_position(bytes: &[u8]) -> JsonPosition {
    let line = 1 + bytes.iter().filter(|&&b| b == b'\n').count();
    let column = 1 + bytes.iter().rev().take_while(|&&b| b != b'\n').count();
    JsonPosition { line, column }
}

/// The kind of device a pid is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DeviceKind {
    Gpu,
    Mtia,
}

/// Turns the collected tracks into planes and the host.
fn assemble(mut r: Reader, path: &str, host_name: &str) -> std::result::Result<Host, String> {
    let origin = settle_time_origin(&mut r);
    let top = TopLevelFacts::of(&r);
    let records = MetadataRecords::of(&r.meta_events);
    let (host_tracks, devices) = group_tracks(&r, &records.labels, &top.device_properties);

    // Lines are taken out of the tracks one by one (no second vector of lines), and
    // each plane's line vector is sized exactly: with a million threads, `Line`s are
    // most of the memory.
    let mut tracks = std::mem::take(&mut r.tracks);
    tracks.shrink_to_fit();
    let mut planes = Vec::new();
    let mut compactor = Compactor::new(&r);
    if !host_tracks.is_empty() {
        planes.push(host_plane(&mut tracks, host_tracks, &records.thread_names, &mut compactor)?);
    }
    for (pid, (kind, members)) in devices {
        let properties = top.device_properties.iter().find(|(id, _)| *id == pid).map(|(_, props)| props.as_slice());
        planes.push(device_plane(&mut tracks, pid, kind, members, properties, &mut compactor)?);
    }
    drop(records);
    let (start_ns, stop_ns) = profile_span_ns(&planes, origin, top.base_ns);

    let mut host = Host::new(host_name, path, SourceFormat::Kineto);
    host.rank = top.rank;
    host.planes = planes;
    host.profile_start_ns = start_ns;
    host.profile_stop_ns = stop_ns;
    host.chrome = Some(ChromeTraceInfo {
        top_level: std::mem::take(&mut r.top_level),
        metadata_events: std::mem::take(&mut r.meta_events),
        origin_us: origin,
        bare_array: r.bare_array,
    });
    Ok(host)
}

/// Sets the time origin, the smallest whole µs of a model event (else of a metadata
/// record), and returns it: offsets so far are relative to the first event seen, and
/// are shifted to it; events without `ts` get offset 0; metadata records get their
/// time. The span check of the pass guarantees no overflow here.
fn settle_time_origin(r: &mut Reader) -> i64 {
    let origin = match r.provisional_origin {
        Some(provisional) => {
            let origin = r.min_whole;
            let shift = (provisional - origin).saturating_mul(PS_PER_US);
            if shift != 0 {
                for track in &mut r.tracks {
                    track.line.events.offset_ps.saturating_add_all(shift);
                }
            }
            origin
        }
        None => r.meta_ts.iter().flatten().map(|m| m.whole).min().unwrap_or(0),
    };
    for &(track, index) in &r.missing_ts {
        if let Some(track) = r.tracks.get_mut(track as usize) {
            track.line.events.offset_ps.set(index as usize, 0);
        }
    }
    for (event, ts) in r.meta_events.iter_mut().zip(&r.meta_ts) {
        event.ts_ps = ts.and_then(|ts| ts.whole.checked_sub(origin)?.checked_mul(PS_PER_US)?.checked_add(ts.frac_ps));
    }
    origin
}

/// What the trace's top-level keys say about the host.
struct TopLevelFacts {
    /// `distributedInfo.rank`.
    rank: Option<i64>,
    /// `baseTimeNanoseconds`: the epoch time of `ts` 0, in nanoseconds.
    base_ns: Option<i64>,
    /// `deviceProperties`: per device id, its properties as `(name, value)`.
    device_properties: Vec<(i64, Vec<(String, String)>)>,
}

impl TopLevelFacts {
    fn of(r: &Reader) -> TopLevelFacts {
        let top = |key: &str| r.top_level.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        let rank = top("distributedInfo").and_then(|raw| {
            let info: DistributedInfo<'_> = serde_json::from_str(raw).ok()?;
            match classify(info.rank?.get()) {
                Scalar::Int(v) => Some(v),
                _ => None,
            }
        });
        let base_ns = top("baseTimeNanoseconds").and_then(|raw| match classify(raw) {
            Scalar::Int(v) => Some(v),
            _ => None,
        });
        let device_properties = top("deviceProperties").map(parse_device_properties).unwrap_or_default();
        TopLevelFacts { rank, base_ns, device_properties }
    }
}

/// Device labels and thread names from the `M` (metadata) records.
struct MetadataRecords<'r> {
    /// Per integer pid, the device kind its `process_labels` record names.
    labels: HashMap<i64, DeviceKind>,
    /// Per `(pid, tid)`, the name its `thread_name` record gives.
    thread_names: HashMap<(&'r TrackId, &'r TrackId), String>,
}

impl<'r> MetadataRecords<'r> {
    fn of(meta_events: &'r [ChromeMetadataEvent]) -> MetadataRecords<'r> {
        let mut labels = HashMap::new();
        let mut thread_names = HashMap::new();
        for event in meta_events {
            match event.name.as_str() {
                "process_labels" => {
                    if let (TrackId::Int(pid), Some(kind)) = (&event.pid, label_kind(&event.args_json)) {
                        labels.insert(*pid, kind);
                    }
                }
                "thread_name" => {
                    let args = serde_json::from_str::<NameArgs<'_>>(&event.args_json);
                    if let (Some(tid), Ok(NameArgs { name: Some(name) })) = (&event.tid, args) {
                        thread_names.insert((&event.pid, tid), name.into_owned());
                    }
                }
                _ => {}
            }
        }
        MetadataRecords { labels, thread_names }
    }
}

/// Per device pid, its kind and the indices of its tracks.
type DeviceTracks = BTreeMap<i64, (DeviceKind, Vec<usize>)>;

/// Groups the tracks: host tracks in first-seen order, device tracks by pid. A pid is
/// a device when its events are GPU or MTIA activity, else when its `process_labels`
/// say so; every device with properties gets a plane, with tracks or not.
fn group_tracks(
    r: &Reader,
    labels: &HashMap<i64, DeviceKind>,
    device_properties: &[(i64, Vec<(String, String)>)],
) -> (Vec<usize>, DeviceTracks) {
    let pid_kind: Vec<Option<(i64, DeviceKind)>> = r
        .pids
        .iter()
        .map(|info| {
            let TrackId::Int(pid) = info.id else {
                return None;
            };
            let kind = if info.mtia_events && !info.gpu_events {
                DeviceKind::Mtia
            } else if info.gpu_events {
                DeviceKind::Gpu
            } else {
                *labels.get(&pid)?
            };
            Some((pid, kind))
        })
        .collect();
    let mut host_tracks = Vec::new();
    let mut devices = DeviceTracks::new();
    for (i, track) in r.tracks.iter().enumerate() {
        match pid_kind.get(track.pid_index as usize).copied().flatten() {
            Some((pid, kind)) => devices.entry(pid).or_insert((kind, Vec::new())).1.push(i),
            None => host_tracks.push(i),
        }
    }
    for (id, _) in device_properties {
        devices.entry(*id).or_insert_with(|| (labels.get(id).copied().unwrap_or(DeviceKind::Gpu), Vec::new()));
    }
    (host_tracks, devices)
}

/// Takes track `i`'s line out of `tracks`.
fn take_line(tracks: &mut [parse::Track], i: usize) -> Option<Line> {
    tracks.get_mut(i).map(|track| std::mem::take(&mut track.line))
}

/// The `/host:CPU` plane of the host tracks: a line per thread, named by its
/// `thread_name` record, else `thread N` (a string tid names itself).
fn host_plane(
    tracks: &mut [parse::Track],
    members: Vec<usize>,
    thread_names: &HashMap<(&TrackId, &TrackId), String>,
    compactor: &mut Compactor<'_>,
) -> std::result::Result<Plane, String> {
    let mut builder = PlaneBuilder::new(0, HOST_PLANE);
    builder.reserve_lines(members.len());
    for i in members {
        let Some(mut line) = take_line(tracks, i) else {
            continue;
        };
        let (id, name) = match &line.chrome_track {
            Some((pid, tid)) => match tid {
                TrackId::Int(t) => {
                    (*t, thread_names.get(&(pid, tid)).cloned().unwrap_or_else(|| format!("thread {t}")))
                }
                TrackId::Str(s) => (fnv63(s), thread_names.get(&(pid, tid)).cloned().unwrap_or_else(|| s.clone())),
            },
            None => (0, String::new()),
        };
        line.id = id;
        line.display_id = id;
        line.name = name;
        compactor.add_line(&mut builder, line)?;
    }
    Ok(builder.finish())
}

/// The plane of device `pid` (`/device:GPU:N`, `/device:MTIA:N`): its properties as
/// plane stats, and a `Stream #tid` line per track.
fn device_plane(
    tracks: &mut [parse::Track],
    pid: i64,
    kind: DeviceKind,
    members: Vec<usize>,
    properties: Option<&[(String, String)]>,
    compactor: &mut Compactor<'_>,
) -> std::result::Result<Plane, String> {
    let name = match kind {
        DeviceKind::Gpu => format!("{GPU_PLANE_PREFIX}{pid}"),
        DeviceKind::Mtia => format!("{DEVICE_PLANE_PREFIX}MTIA:{pid}"),
    };
    let mut builder = PlaneBuilder::new(pid, name);
    if let Some(props) = properties {
        set_device_stats(&mut builder, props)?;
    }
    compactor.reset();
    builder.reserve_lines(members.len());
    for i in members {
        let Some(mut line) = take_line(tracks, i) else {
            continue;
        };
        let id = match &line.chrome_track {
            Some((_, TrackId::Int(t))) => *t,
            Some((_, TrackId::Str(s))) => fnv63(s),
            None => 0,
        };
        line.id = id;
        line.display_id = id;
        line.name = match &line.chrome_track {
            Some((_, TrackId::Str(s))) => format!("Stream #{s}"),
            _ => format!("Stream #{id}"),
        };
        compactor.add_line(&mut builder, line)?;
    }
    Ok(builder.finish())
}

/// The profile's start and stop in epoch nanoseconds: the origin (whole µs) on
/// `baseTimeNanoseconds`, or taken as epoch time when it is plainly one (after 2001);
/// the stop is the start plus the latest event end.
fn profile_span_ns(planes: &[Plane], origin: i64, base_ns: Option<i64>) -> (Option<i64>, Option<i64>) {
    let max_end = planes
        .iter()
        .flat_map(|p| p.lines.iter())
        .flat_map(|l| l.events.offset_ps.iter().zip(l.events.duration_ps.iter()))
        .map(|(o, d)| o.saturating_add(d.max(0)))
        .max();
    let start_ns = match base_ns {
        Some(base) => origin.checked_mul(1000).and_then(|o| o.checked_add(base)),
        None if origin > 1_000_000_000_000_000 => origin.checked_mul(1000),
        None => None,
    };
    let stop_ns = match (start_ns, max_end) {
        (Some(start), Some(end)) => start.checked_add(end.div_euclid(1000)),
        _ => None,
    };
    (start_ns, stop_ns)
}

/// Moves lines into a plane, mapping file-global metadata indices and stat keys to the
/// plane's own dense tables (only entries the plane's lines use).
struct Compactor<'r> {
    r: &'r Reader,
    meta_map: Vec<u32>,
    key_map: Vec<u32>,
}

const UNMAPPED: u32 = u32::MAX;

impl<'r> Compactor<'r> {
    fn new(r: &'r Reader) -> Self {
        Compactor { r, meta_map: vec![UNMAPPED; r.meta_list.len()], key_map: vec![UNMAPPED; r.keys.len()] }
    }

    fn reset(&mut self) {
        self.meta_map.fill(UNMAPPED);
        self.key_map.fill(UNMAPPED);
    }

    fn add_line(&mut self, builder: &mut PlaneBuilder, mut line: Line) -> std::result::Result<(), String> {
        let r = self.r;
        let mut arena_full = false;
        let mapped = line.events.metadata.try_map(|m| {
            let Some(slot) = self.meta_map.get_mut(m as usize) else {
                return Ok::<u32, std::convert::Infallible>(m);
            };
            if *slot == UNMAPPED {
                let (name_id, variant) = r.meta_list.get(m as usize).copied().unwrap_or((0, 0));
                let (cat_id, ph_id) = r.catph_list.get(variant as usize).copied().unwrap_or((NO_CAT, 0));
                let ph = r.phs.get(ph_id);
                *slot = builder.event_metadata(r.names.get(name_id), variant, |b| {
                    let mut stats = Vec::new();
                    if cat_id != NO_CAT {
                        let key = b.stat_key(CAT_STAT);
                        match b.metadata_str(r.cats.get(cat_id)) {
                            Ok(v) => stats.push((key, v)),
                            Err(_) => arena_full = true,
                        }
                    }
                    if ph != PH_COMPLETE {
                        let key = b.stat_key(PH_STAT);
                        match b.metadata_str(ph) {
                            Ok(v) => stats.push((key, v)),
                            Err(_) => arena_full = true,
                        }
                    }
                    stats
                });
            }
            Ok(*slot)
        });
        let Ok(()) = mapped;
        if arena_full {
            return Err("the metadata strings of one plane exceed 4 GiB".to_string());
        }
        // One pass: map each key (the reader stores no `Ref` values to map).
        for stat in line.stats.stats_mut() {
            let key = stat.key();
            if let Some(slot) = self.key_map.get_mut(key as usize) {
                if *slot == UNMAPPED {
                    *slot = builder.stat_key(r.keys.get(key));
                }
                stat.set_key(*slot);
            }
        }
        builder.push_line(line);
        Ok(())
    }
}

/// Sets a device plane's stats from its `deviceProperties` entry.
fn set_device_stats(builder: &mut PlaneBuilder, props: &[(String, String)]) -> std::result::Result<(), String> {
    let mut stats = Vec::with_capacity(props.len());
    for (key, raw) in props {
        let name = match key.as_str() {
            "name" => "gpu_device_name",
            "totalGlobalMem" => "memory_size",
            "computeMajor" => "compute_cap_major",
            "computeMinor" => "compute_cap_minor",
            "numSms" => "core_count",
            other => other,
        };
        let key = builder.stat_key(name);
        let full = |_| "the metadata strings of one plane exceed 4 GiB".to_string();
        let value = match classify(raw) {
            Scalar::Int(v) => StatValue::Int(v),
            Scalar::Uint(v) => StatValue::Uint(v),
            Scalar::Double(v) => StatValue::Double(v),
            Scalar::Str { inner, escaped } => {
                let text: Cow<'_, str> = if escaped {
                    let mut s = String::new();
                    number::unescape_into(inner, &mut s);
                    Cow::Owned(s)
                } else {
                    Cow::Borrowed(inner)
                };
                builder.metadata_str(&text).map_err(full)?
            }
            Scalar::Json => match builder.metadata_str(raw).map_err(full)? {
                StatValue::Str(r) => StatValue::Json(r),
                other => other,
            },
        };
        stats.push((key, value));
    }
    builder.set_plane_stats(stats);
    Ok(())
}

/// `deviceProperties` as `(id, [(key, raw value)])` per entry with an integer `id`.
fn parse_device_properties(raw: &str) -> Vec<(i64, Vec<(String, String)>)> {
    let Ok(entries) = serde_json::from_str::<Vec<&RawValue>>(raw) else {
        return Vec::new();
    };
    entries
        .into_iter()
        .filter_map(|entry| {
            let OrderedObject(fields) = serde_json::from_str(entry.get()).ok()?;
            let id = fields.iter().find(|(k, _)| k == "id").and_then(|(_, v)| match classify(v.get()) {
                Scalar::Int(v) => Some(v),
                _ => None,
            })?;
            Some((id, fields.into_iter().map(|(k, v)| (k.into_owned(), v.get().to_string())).collect()))
        })
        .collect()
}

/// The device kind a `process_labels` record's args name (`{"labels": "GPU 0"}`).
fn label_kind(args_json: &str) -> Option<DeviceKind> {
    let args: LabelArgs<'_> = serde_json::from_str(args_json).ok()?;
    let labels = args.labels?;
    labels.split(',').map(str::trim).find_map(|label| {
        let (kind, rest) = if let Some(rest) = label.strip_prefix("GPU ") {
            (DeviceKind::Gpu, rest)
        } else {
            (DeviceKind::Mtia, label.strip_prefix("MTIA ")?)
        };
        rest.trim().parse::<i64>().ok().map(|_| kind)
    })
}

#[derive(Deserialize)]
struct DistributedInfo<'a> {
    #[serde(borrow)]
    rank: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct LabelArgs<'a> {
    #[serde(borrow)]
    labels: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct NameArgs<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
}

/// A JSON object's entries in file order, values raw.
struct OrderedObject<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for OrderedObject<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OrderedObject<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
                let mut fields = Vec::new();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    fields.push((key, map.next_value::<&'de RawValue>()?));
                }
                Ok(OrderedObject(fields))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> std::result::Result<Self::Value, A::Error> {
                Err(de::Error::invalid_type(de::Unexpected::Seq, &self))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests;
