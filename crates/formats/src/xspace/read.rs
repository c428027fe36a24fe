//! Decodes an XSpace (`tensorflow.profiler.XSpace`, field numbers in
//! `shared/reference/xprof-notes.md` §2) into a [`Host`].
//!
//! Planes are decoded in parallel (rayon); within a plane the metadata tables are
//! decoded first, then every line, each into its own column vectors and stat arena.
//! Metadata ids are mapped to dense indices through a direct table when the ids are
//! compact (the usual case) and a hash map otherwise. An event or stat that refers to
//! an id with no metadata gets a placeholder metadata entry (empty name), as XProf's
//! C++ readers effectively do, so nothing is dropped.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use mlprof_model::{
    EventMetadata, Host, Line, MAX_STAT_KEYS, Plane, SourceFormat, StatMetadata, StatStore, StatValue, names,
};
use rayon::prelude::*;

use crate::error::{FormatError, Result};
use crate::input::{RELEASE_STEP_BYTES, Release};
use crate::limits::{MAX_LINES, MAX_PLANES, too_many};
use crate::wire::{Field, WireError, WireReader};

/// Decodes a whole XSpace file content into a host called `host_name`.
pub fn read_xspace(bytes: &[u8], path: &str, host_name: &str) -> Result<Host> {
    read_xspace_releasing(bytes, &|_| {}, path, host_name)
}

/// [`read_xspace`], calling `release` with each byte range of `bytes` whose events it
/// has decoded (every [`RELEASE_STEP_BYTES`] of a line, from the decoding threads),
/// e.g. [`crate::input::FileBytes::release`]: the host owns copies of everything it
/// keeps, so a memory-mapped file need not stay resident while the rest is decoded.
pub fn read_xspace_releasing(bytes: &[u8], release: Release<'_>, path: &str, host_name: &str) -> Result<Host> {
    let to_error =
        |e: WireError| FormatError::Protobuf { path: path.to_string(), offset: e.offset, message: e.message };
    let mut host = Host::new(host_name, path, SourceFormat::Xspace);
    let mut plane_slices = Vec::new();
    let mut reader = WireReader::new(bytes, 0, "XSpace");
    while let Some(field) = reader.next_field().map_err(to_error)? {
        match field.number {
            1 if plane_slices.len() == MAX_PLANES => {
                let message = too_many("planes", MAX_PLANES);
                return Err(FormatError::Protobuf { path: path.to_string(), offset: field.offset, message });
            }
            1 => plane_slices.push(field.as_bytes().map_err(to_error)?),
            2 => host.errors.push(field.as_string().map_err(to_error)?),
            3 => host.warnings.push(field.as_string().map_err(to_error)?),
            4 => host.hostnames.push(field.as_string().map_err(to_error)?),
            _ => {}
        }
    }
    if plane_slices.is_empty() && host.hostnames.is_empty() {
        return Err(FormatError::unrecognized(
            path,
            "not an XSpace profile: the protobuf data has no planes and no hostnames",
        ));
    }
    // All planes are decoded before the first error in file order is picked, so the
    // error reported does not depend on which thread finished first.
    let lines_left = AtomicUsize::new(MAX_LINES);
    let planes: Vec<std::result::Result<Plane, WireError>> =
        plane_slices.par_iter().map(|(data, offset)| decode_plane(data, *offset, &lines_left, release)).collect();
    host.planes = planes.into_iter().collect::<std::result::Result<_, _>>().map_err(to_error)?;
    if let Some(env) = host.plane(names::TASK_ENVIRONMENT_PLANE) {
        let (start, stop) = (int_stat(env, names::PROFILE_START_TIME), int_stat(env, names::PROFILE_STOP_TIME));
        host.profile_start_ns = start;
        host.profile_stop_ns = stop;
    }
    Ok(host)
}

fn int_stat(plane: &Plane, name: &str) -> Option<i64> {
    match plane.plane_stat(name)? {
        StatValue::Int(v) => Some(v),
        StatValue::Uint(v) => i64::try_from(v).ok(),
        _ => None,
    }
}

/// Maps arbitrary XSpace metadata ids to dense indices.
enum IdMap {
    /// `table[id - min]` is the index, or `u32::MAX` when absent.
    Dense {
        min: i64,
        table: Vec<u32>,
    },
    Sparse(HashMap<i64, u32>),
}

impl IdMap {
    fn build(ids: impl Iterator<Item = i64> + Clone) -> IdMap {
        let count = ids.clone().count();
        let (min, max) = ids.clone().fold((i64::MAX, i64::MIN), |(lo, hi), id| (lo.min(id), hi.max(id)));
        let span = (max as i128) - (min as i128);
        if count > 0 && span < (count as i128) * 4 + 64 {
            let mut table = vec![u32::MAX; span as usize + 1];
            for (index, id) in ids.enumerate() {
                table[(id - min) as usize] = index as u32;
            }
            IdMap::Dense { min, table }
        } else {
            IdMap::Sparse(ids.enumerate().map(|(i, id)| (id, i as u32)).collect())
        }
    }

    #[inline]
    fn get(&self, id: i64) -> Option<u32> {
        match self {
            IdMap::Dense { min, table } => {
                let slot = id.checked_sub(*min).and_then(|d| usize::try_from(d).ok())?;
                table.get(slot).copied().filter(|&i| i != u32::MAX)
            }
            IdMap::Sparse(map) => map.get(&id).copied(),
        }
    }
}

/// Ids referenced by a line but absent from the plane's metadata tables.
#[derive(Default)]
struct Unresolved {
    /// `(event index, event metadata id)`.
    events: Vec<(u32, i64)>,
    /// `(stat index in the line store, stat metadata id, is the value a ref)`.
    stats: Vec<(u32, i64, bool)>,
}

impl Unresolved {
    fn is_empty(&self) -> bool {
        self.events.is_empty() && self.stats.is_empty()
    }
}

/// Marks a metadata column slot or stat key still to be resolved.
const PENDING: u32 = u32::MAX;

/// Decodes one plane; `lines_left` counts down the lines the whole file may still hold
/// ([`MAX_LINES`]), shared by the planes decoded in parallel.
fn decode_plane(
    data: &[u8],
    base: u64,
    lines_left: &AtomicUsize,
    release: Release<'_>,
) -> std::result::Result<Plane, WireError> {
    let mut plane = Plane::default();
    let fields = PlaneFields::read(data, base, lines_left, &mut plane)?;
    if fields.stat_metadata.len() > MAX_STAT_KEYS as usize {
        return Err(WireError { offset: base, message: too_many_stat_keys() });
    }
    for (entry, at) in &fields.stat_metadata {
        plane.stat_metadata.push(decode_stat_metadata(entry, *at)?);
    }
    let stat_ids = IdMap::build(plane.stat_metadata.iter().map(|m| m.id));

    let mut pending_meta = Unresolved::default();
    for (entry, at) in &fields.event_metadata {
        let meta = decode_event_metadata(entry, *at, &stat_ids, &mut plane.metadata_stats, &mut pending_meta)?;
        plane.event_metadata.push(meta);
    }
    let first = plane.metadata_stats.len() as u32;
    for (s, at) in &fields.stats {
        decode_stat(WireReader::new(s, *at, "XStat"), &stat_ids, &mut plane.metadata_stats, &mut pending_meta)?;
    }
    plane.stats = first..plane.metadata_stats.len() as u32;
    let event_ids = IdMap::build(plane.event_metadata.iter().map(|m| m.id));

    let parallel = fields.lines.len() > 1 && data.len() > 1 << 20;
    let (lines, pending) = decode_lines(fields.lines, parallel, &event_ids, &stat_ids, release)?;
    plane.lines = lines;
    resolve_pending(&mut plane, &pending_meta, &pending).map_err(|message| WireError { offset: base, message })?;
    Ok(plane)
}

/// The fields of an `XPlane` that are read after its scalar ones: each entry's bytes
/// and absolute offset.
struct PlaneFields<'a> {
    /// `lines` (`XLine`s).
    lines: Vec<(&'a [u8], u64)>,
    /// `event_metadata` map entries.
    event_metadata: Vec<(&'a [u8], u64)>,
    /// `stat_metadata` map entries.
    stat_metadata: Vec<(&'a [u8], u64)>,
    /// The plane's own `stats` (`XStat`s).
    stats: Vec<(&'a [u8], u64)>,
}

impl<'a> PlaneFields<'a> {
    /// Reads the plane's id and name into `plane` and collects its other fields; each
    /// line takes one from the file's allowance `lines_left`.
    fn read(
        data: &'a [u8],
        base: u64,
        lines_left: &AtomicUsize,
        plane: &mut Plane,
    ) -> std::result::Result<PlaneFields<'a>, WireError> {
        let mut fields =
            PlaneFields { lines: Vec::new(), event_metadata: Vec::new(), stat_metadata: Vec::new(), stats: Vec::new() };
        let mut reader = WireReader::new(data, base, "XPlane");
        while let Some(f) = reader.next_field()? {
            match f.number {
                1 => plane.id = f.as_i64()?,
                2 => plane.name = f.as_string()?,
                3 => {
                    take_line(lines_left)
                        .ok_or_else(|| WireError { offset: f.offset, message: too_many("lines", MAX_LINES) })?;
                    fields.lines.push(f.as_bytes()?);
                }
                4 => fields.event_metadata.push(f.as_bytes()?),
                5 => fields.stat_metadata.push(f.as_bytes()?),
                6 => fields.stats.push(f.as_bytes()?),
                _ => {}
            }
        }
        Ok(fields)
    }
}

/// One `stat_metadata` map entry (at absolute offset `at`) as its [`StatMetadata`].
fn decode_stat_metadata(entry: &[u8], at: u64) -> std::result::Result<StatMetadata, WireError> {
    let (key, value) = map_entry(entry, at, "XPlane.stat_metadata entry")?;
    let mut meta = StatMetadata { id: key, ..StatMetadata::default() };
    if let Some((value, at)) = value {
        let mut r = WireReader::new(value, at, "XStatMetadata");
        while let Some(f) = r.next_field()? {
            match f.number {
                2 => meta.name = f.as_string()?,
                3 => meta.description = f.as_string()?,
                _ => {}
            }
        }
    }
    Ok(meta)
}

/// One `event_metadata` map entry (at absolute offset `at`) as its [`EventMetadata`],
/// its stats appended to `store` (stat ids not yet defined go to `pending`).
fn decode_event_metadata(
    entry: &[u8],
    at: u64,
    stat_ids: &IdMap,
    store: &mut StatStore,
    pending: &mut Unresolved,
) -> std::result::Result<EventMetadata, WireError> {
    let (key, value) = map_entry(entry, at, "XPlane.event_metadata entry")?;
    let mut meta = EventMetadata { id: key, ..EventMetadata::default() };
    let first = store.len() as u32;
    if let Some((value, at)) = value {
        let mut r = WireReader::new(value, at, "XEventMetadata");
        while let Some(f) = r.next_field()? {
            match f.number {
                2 => meta.name = f.as_string()?,
                3 => meta.metadata = f.as_bytes()?.0.to_vec(),
                4 => meta.display_name = f.as_string()?,
                5 => {
                    let (s, at) = f.as_bytes()?;
                    decode_stat(WireReader::new(s, at, "XStat"), stat_ids, store, pending)?;
                }
                6 => meta.child_ids.push(f.as_i64()?),
                _ => {}
            }
        }
    }
    meta.stats = first..store.len() as u32;
    Ok(meta)
}

/// The ids a decoded line refers to but its plane does not define (`None` for most).
type LinePending = Option<Box<Unresolved>>;

/// Decodes a plane's lines, on several threads when `parallel`, straight into one
/// vector (no second buffer of lines), with only the lines that refer to undefined ids
/// carrying their pending list. With errors in several lines, the first in file order
/// is reported, whichever thread found it first (as for planes).
fn decode_lines(
    lines: Vec<(&[u8], u64)>,
    parallel: bool,
    event_ids: &IdMap,
    stat_ids: &IdMap,
    release: Release<'_>,
) -> std::result::Result<(Vec<Line>, Vec<LinePending>), WireError> {
    let first_error: Mutex<Option<(usize, WireError)>> = Mutex::new(None);
    let decode = |(index, (d, at)): (usize, &(&[u8], u64))| match decode_line(d, *at, event_ids, stat_ids, release) {
        Ok((line, pending)) => (line, (!pending.is_empty()).then(|| Box::new(pending))),
        Err(error) => {
            let mut first = first_error.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if first.as_ref().is_none_or(|(earlier, _)| index < *earlier) {
                *first = Some((index, error));
            }
            (Line::default(), None)
        }
    };
    let (decoded, pending): (Vec<Line>, Vec<LinePending>) = if parallel {
        lines.par_iter().enumerate().map(decode).unzip()
    } else {
        lines.iter().enumerate().map(decode).unzip()
    };
    drop(lines);
    if let Some((_, error)) = first_error.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
        return Err(error);
    }
    Ok((decoded, pending))
}

/// Gives the ids that nothing defined placeholder metadata: those of the event
/// metadata's stats, then those of each line's events and stats. Fails when the
/// placeholders would take the plane past [`MAX_STAT_KEYS`] stat metadata.
fn resolve_pending(plane: &mut Plane, pending_meta: &Unresolved, pending: &[LinePending]) -> Result<(), String> {
    let mut resolver = Resolver::default();
    resolver.fix_stats(&mut plane.stat_metadata, &mut plane.metadata_stats, pending_meta)?;
    for (line, pending) in plane.lines.iter_mut().zip(pending) {
        let Some(pending) = pending else { continue };
        let stats_end = plane.metadata_stats.len() as u32;
        resolver.fix_events(&mut plane.event_metadata, stats_end, line, pending);
        resolver.fix_stats(&mut plane.stat_metadata, &mut line.stats, pending)?;
    }
    Ok(())
}

/// Why a plane with more stat metadata than a [`mlprof_model::Stat`] can key is refused.
fn too_many_stat_keys() -> String {
    format!(
        "in XPlane: more than {MAX_STAT_KEYS} stat metadata entries in one plane: no profiler writes that many, \
         so it is refused to keep memory bounded"
    )
}

/// Takes one line from the file's allowance; `None` when it is used up.
fn take_line(lines_left: &AtomicUsize) -> Option<usize> {
    lines_left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(1)).ok()
}

/// Creates placeholder metadata for ids that nothing defined, once per id.
#[derive(Default)]
struct Resolver {
    events: HashMap<i64, u32>,
    stats: HashMap<i64, u32>,
}

impl Resolver {
    /// `stats_end` is the end of the plane's metadata stat store: a placeholder's
    /// (empty) stat range sits there, as it would for an entry decoded from the file.
    fn fix_events(&mut self, table: &mut Vec<EventMetadata>, stats_end: u32, line: &mut Line, pending: &Unresolved) {
        for &(event, id) in &pending.events {
            let index = *self.events.entry(id).or_insert_with(|| {
                table.push(EventMetadata { id, stats: stats_end..stats_end, ..EventMetadata::default() });
                (table.len() - 1) as u32
            });
            line.events.metadata.set(event as usize, index);
        }
    }

    fn fix_stats(
        &mut self,
        table: &mut Vec<StatMetadata>,
        store: &mut StatStore,
        pending: &Unresolved,
    ) -> Result<(), String> {
        let stats = store.stats_mut();
        for &(index, id, is_ref) in &pending.stats {
            let resolved = match self.stats.entry(id) {
                Entry::Occupied(known) => *known.get(),
                Entry::Vacant(_) if table.len() >= MAX_STAT_KEYS as usize => return Err(too_many_stat_keys()),
                Entry::Vacant(slot) => {
                    table.push(StatMetadata { id, ..StatMetadata::default() });
                    *slot.insert((table.len() - 1) as u32)
                }
            };
            if let Some(stat) = stats.get_mut(index as usize) {
                if is_ref {
                    stat.set_value(StatValue::Ref(resolved));
                } else {
                    stat.set_key(resolved);
                }
            }
        }
        Ok(())
    }
}

/// Splits a protobuf map entry into its `int64` key and its message value.
#[allow(clippy::type_complexity)]
fn map_entry<'a>(
    entry: &'a [u8],
    at: u64,
    context: &'static str,
) -> std::result::Result<(i64, Option<(&'a [u8], u64)>), WireError> {
    let mut key = 0;
    let mut value = None;
    let mut r = WireReader::new(entry, at, context);
    while let Some(f) = r.next_field()? {
        match f.number {
            1 => key = f.as_i64()?,
            2 => value = Some(f.as_bytes()?),
            _ => {}
        }
    }
    Ok((key, value))
}

/// Decodes one XLine (`data`, at absolute offset `base`), telling `release` about its
/// bytes as they are decoded.
fn decode_line(
    data: &[u8],
    base: u64,
    event_ids: &IdMap,
    stat_ids: &IdMap,
    release: Release<'_>,
) -> std::result::Result<(Line, Unresolved), WireError> {
    let mut line = Line::default();
    let mut pending = Unresolved::default();
    let estimate = data.len() / 24;
    line.events.reserve(estimate);
    // An encoded XStat takes at least 4 bytes; most take 8 or more. Room that is
    // reserved but never written costs address space, not memory, and is given back
    // by the shrink below.
    line.stats.reserve(data.len() / 8, 0);
    let mut reader = WireReader::new(data, base, "XLine");
    let mut released = base;
    while let Some(tag) = reader.peek_byte() {
        let f = match tag {
            // Field 4, length-delimited: an XEvent, decoded in place.
            0x22 => {
                let event = reader.message_field(4, "XEvent")?;
                decode_event(event, &mut line, event_ids, stat_ids, &mut pending)?;
                if reader.offset() - released >= RELEASE_STEP_BYTES as u64 {
                    release(released as usize..reader.offset() as usize);
                    released = reader.offset();
                }
                continue;
            }
            _ => match reader.next_field()? {
                Some(f) => f,
                None => break,
            },
        };
        match f.number {
            1 => line.id = f.as_i64()?,
            10 => line.display_id = f.as_i64()?,
            2 => line.name = f.as_string()?,
            11 => line.display_name = f.as_string()?,
            3 => line.timestamp_ns = f.as_i64()?,
            9 => line.duration_ps = f.as_i64()?,
            4 => {
                let (event, at) = f.as_bytes()?;
                decode_event(WireReader::new(event, at, "XEvent"), &mut line, event_ids, stat_ids, &mut pending)?;
            }
            _ => {}
        }
    }
    if reader.offset() > released {
        release(released as usize..reader.offset() as usize);
    }
    line.events.shrink_to_fit();
    line.stats.shrink_to_fit();
    Ok((line, pending))
}

/// The scalar fields of one XEvent, as the last occurrence of each sets them.
#[derive(Default)]
struct EventFields {
    metadata_id: i64,
    offset_ps: i64,
    occurrences: Option<i64>,
    duration_ps: i64,
}

impl EventFields {
    /// Applies one field other than the stats (field 4); unknown fields are ignored.
    #[inline(always)]
    fn apply(&mut self, f: Field<'_>) -> std::result::Result<(), WireError> {
        match f.number {
            1 => self.metadata_id = f.as_i64()?,
            2 => {
                self.offset_ps = f.as_i64()?;
                self.occurrences = None;
            }
            5 => {
                self.occurrences = Some(f.as_i64()?);
                self.offset_ps = 0;
            }
            3 => self.duration_ps = f.as_i64()?,
            _ => {}
        }
        Ok(())
    }
}

/// Decodes one XEvent from `reader` and appends it to `line`.
///
/// The fields XProf writes have one-byte tags and take a direct branch on that byte;
/// anything else (unknown fields, long tag encodings, wrong wire types) goes through
/// [`WireReader::next_field`] and the same [`EventFields::apply`], so results and
/// errors do not depend on the path. Writers emit fields in number order (1, 2, 3,
/// the stats, 5), so that order is tried first with one expected tag at a time: a
/// branch that is almost always taken costs far less than a jump on the tag through
/// a table, which the processor mispredicts. Whatever is left goes through the loop,
/// in order, so the last occurrence of a field still wins.
#[inline]
fn decode_event(
    mut reader: WireReader<'_>,
    line: &mut Line,
    event_ids: &IdMap,
    stat_ids: &IdMap,
    pending: &mut Unresolved,
) -> std::result::Result<(), WireError> {
    let base = reader.offset();
    let mut fields = EventFields::default();
    for (tag, number) in [(0x08, 1), (0x10, 2), (0x18, 3)] {
        if reader.peek_byte() == Some(tag) {
            fields.apply(reader.varint_field(number)?)?;
        }
    }
    while reader.peek_byte() == Some(0x22) {
        decode_stat_inline(reader.message_field(4, "XStat")?, stat_ids, &mut line.stats, pending)?;
    }
    while let Some(tag) = reader.peek_byte() {
        match tag {
            0x08 => fields.apply(reader.varint_field(1)?)?,
            0x10 => fields.apply(reader.varint_field(2)?)?,
            0x18 => fields.apply(reader.varint_field(3)?)?,
            0x28 => fields.apply(reader.varint_field(5)?)?,
            0x22 => decode_stat_inline(reader.message_field(4, "XStat")?, stat_ids, &mut line.stats, pending)?,
            _ => match reader.next_field()? {
                Some(f) if f.number == 4 => {
                    let (s, at) = f.as_bytes()?;
                    decode_stat(WireReader::new(s, at, "XStat"), stat_ids, &mut line.stats, pending)?;
                }
                Some(f) => fields.apply(f)?,
                None => break,
            },
        }
    }
    let EventFields { metadata_id, offset_ps, occurrences, duration_ps } = fields;
    let index = line.len() as u32;
    let metadata = match event_ids.get(metadata_id) {
        Some(m) => m,
        None => {
            pending.events.push((index, metadata_id));
            PENDING
        }
    };
    if let Some(n) = occurrences {
        line.events.occurrences.push((index, n));
    }
    if line.stats.len() > u32::MAX as usize - 1 {
        return Err(WireError { offset: base, message: "in XLine: more than 4 billion stats in one line".into() });
    }
    line.push_event(metadata, offset_ps, duration_ps);
    Ok(())
}

/// The fields of one XStat, as the last occurrence of each sets them.
struct StatFields {
    metadata_id: i64,
    value: StatValue,
    /// The stat-metadata id of a `ref_value`, while the value is one.
    ref_id: Option<i64>,
}

impl StatFields {
    /// Applies one field; string and byte values go into `store`'s arena, unknown
    /// fields are ignored.
    #[inline(always)]
    fn apply(&mut self, f: Field<'_>, stat_ids: &IdMap, store: &mut StatStore) -> std::result::Result<(), WireError> {
        self.value = match f.number {
            1 => {
                self.metadata_id = f.as_i64()?;
                return Ok(());
            }
            2 => StatValue::Double(f.as_f64()?),
            3 => StatValue::Uint(f.as_u64()?),
            4 => StatValue::Int(f.as_i64()?),
            5 => string_value(&f, store)?,
            6 => StatValue::Bytes(store.store_bytes(f.as_bytes()?.0).map_err(|_| arena_full(f.offset))?),
            7 => {
                let id = f.as_u64()? as i64;
                self.ref_id = Some(id);
                self.value = StatValue::Ref(stat_ids.get(id).unwrap_or(PENDING));
                return Ok(());
            }
            _ => return Ok(()),
        };
        self.ref_id = None;
        Ok(())
    }
}

/// Decodes one XStat from `reader` into `store`, noting ids without metadata in
/// `pending`: [`decode_stat_inline`], called.
fn decode_stat(
    reader: WireReader<'_>,
    stat_ids: &IdMap,
    store: &mut StatStore,
    pending: &mut Unresolved,
) -> std::result::Result<(), WireError> {
    decode_stat_inline(reader, stat_ids, store, pending)
}

/// Decodes one XStat from `reader` into `store`, noting ids without metadata in
/// `pending`. One-byte tags take a direct branch, as in [`decode_event`], and the
/// usual start (the metadata id, field 1, then an `int64_value`, field 4, the most
/// common value) is tried first; inlined into the event loop, where millions of stats
/// are decoded.
#[inline(always)]
fn decode_stat_inline(
    mut reader: WireReader<'_>,
    stat_ids: &IdMap,
    store: &mut StatStore,
    pending: &mut Unresolved,
) -> std::result::Result<(), WireError> {
    let mut fields = StatFields { metadata_id: 0, value: StatValue::Int(0), ref_id: None };
    if reader.peek_byte() == Some(0x08) {
        fields.apply(reader.varint_field(1)?, stat_ids, store)?;
    }
    if reader.peek_byte() == Some(0x20) {
        fields.apply(reader.varint_field(4)?, stat_ids, store)?;
    }
    while let Some(tag) = reader.peek_byte() {
        let f = match tag {
            0x08 => reader.varint_field(1)?,
            0x11 => reader.fixed64_field(2)?,
            0x18 => reader.varint_field(3)?,
            0x20 => reader.varint_field(4)?,
            0x2a => reader.bytes_field(5)?,
            0x32 => reader.bytes_field(6)?,
            0x38 => reader.varint_field(7)?,
            _ => match reader.next_field()? {
                Some(f) => f,
                None => break,
            },
        };
        fields.apply(f, stat_ids, store)?;
    }
    let StatFields { metadata_id, value, ref_id } = fields;
    let index = store.len() as u32;
    let key = match stat_ids.get(metadata_id) {
        Some(k) => k,
        None => {
            pending.stats.push((index, metadata_id, false));
            PENDING
        }
    };
    if let (Some(id), StatValue::Ref(PENDING)) = (ref_id, value) {
        pending.stats.push((index, id, true));
    }
    store.push(key, value);
    Ok(())
}

/// A `str_value` stored in the arena; invalid UTF-8 is replaced. Short ASCII names
/// (most of them) are accepted by an inlined check before the full UTF-8 validation.
#[inline(always)]
fn string_value(f: &Field<'_>, store: &mut StatStore) -> std::result::Result<StatValue, WireError> {
    let (bytes, _) = f.as_bytes()?;
    let stored = if bytes.is_ascii() || std::str::from_utf8(bytes).is_ok() {
        store.store_bytes(bytes)
    } else {
        store.store_bytes(String::from_utf8_lossy(bytes).as_bytes())
    };
    stored.map(StatValue::Str).map_err(|_| arena_full(f.offset))
}

fn arena_full(offset: u64) -> WireError {
    WireError { offset, message: "in XStat: the string arena of one line exceeds 4 GiB".into() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::WireWriter;

    /// An XSpace with a ref_value stat, an aggregated (num_occurrences) event, event
    /// metadata stats and references to ids nothing defines, written field by field.
    fn handmade() -> Vec<u8> {
        let (mut plane, mut tmp, mut inner) = (WireWriter::default(), WireWriter::default(), WireWriter::default());
        plane.bytes_always(2, b"/device:GPU:0");
        // stat metadata 10 = "kind", 11 = "MatMul" (the string of a ref_value).
        for (id, name) in [(10, "kind"), (11, "MatMul")] {
            inner.buf.clear();
            inner.int64(1, id);
            inner.bytes(2, name.as_bytes());
            tmp.buf.clear();
            tmp.int64_always(1, id);
            tmp.bytes_always(2, &inner.buf);
            plane.bytes_always(5, &tmp.buf);
        }
        // event metadata 5 = "gemm" with a metadata stat kind -> ref "MatMul".
        let mut stat = WireWriter::default();
        stat.int64(1, 10);
        stat.uint64_always(7, 11);
        inner.buf.clear();
        inner.int64(1, 5);
        inner.bytes(2, b"gemm");
        inner.bytes_always(5, &stat.buf);
        tmp.buf.clear();
        tmp.int64_always(1, 5);
        tmp.bytes_always(2, &inner.buf);
        plane.bytes_always(4, &tmp.buf);
        // One line: a timed event, an aggregated event, and an event with unknown ids.
        let mut line = WireWriter::default();
        line.int64(1, 7);
        line.bytes(2, b"Stream #7");
        line.int64(3, 100);
        for (metadata, occurrences, stat_id) in [(5, None, None), (5, Some(12), None), (99, None, Some(77))] {
            let mut event = WireWriter::default();
            event.int64(1, metadata);
            match occurrences {
                Some(n) => event.int64_always(5, n),
                None => event.int64(2, 2_000),
            }
            event.int64(3, 500);
            if let Some(id) = stat_id {
                stat.buf.clear();
                stat.int64(1, id);
                stat.int64_always(4, -3);
                event.bytes_always(4, &stat.buf);
            }
            line.bytes_always(4, &event.buf);
        }
        plane.bytes_always(3, &line.buf);
        let mut space = WireWriter::default();
        space.bytes_always(1, &plane.buf);
        space.bytes_always(4, b"gpu-host");
        space.buf
    }

    #[test]
    fn refs_aggregates_metadata_stats_and_undefined_ids_are_decoded() {
        let host = read_xspace(&handmade(), "h.xplane.pb", "h").unwrap();
        let plane = &host.planes[0];
        let line = &plane.lines[0];
        assert_eq!(line.len(), 3);
        let events: Vec<_> = line.iter().collect();
        assert_eq!((events[0].start_ps(), events[0].duration_ps(), events[0].num_occurrences()), (102_000, 500, None));
        assert_eq!(events[1].num_occurrences(), Some(12));
        let gemm = plane.metadata_of(&events[0]).unwrap();
        assert_eq!(gemm.name, "gemm");
        let kind = plane.metadata_stats_of(gemm)[0];
        assert_eq!(plane.stat_name(kind.key()), "kind");
        assert_eq!(plane.format_value(&plane.metadata_stats, kind.value()), "MatMul");
        // Undefined ids get placeholder entries that keep the original ids.
        let unknown = plane.metadata_of(&events[2]).unwrap();
        assert_eq!((unknown.id, unknown.name.as_str()), (99, ""));
        let stat = events[2].stats()[0];
        assert_eq!((plane.stat_metadata[stat.key() as usize].id, stat.value()), (77, StatValue::Int(-3)));
        // And all of it survives the encoder.
        let again = read_xspace(&crate::xspace::encode_xspace(&host), "h.xplane.pb", "h").unwrap();
        assert_eq!(again, host);
    }

    /// An XSpace of one plane with one line holding one event, its bytes given.
    fn one_event_space(event: &[u8]) -> Vec<u8> {
        let mut line = WireWriter::default();
        line.int64(1, 3);
        line.bytes_always(4, event);
        let mut plane = WireWriter::default();
        plane.bytes_always(3, &line.buf);
        let mut space = WireWriter::default();
        space.bytes_always(1, &plane.buf);
        space.buf
    }

    /// Two-byte encodings of one-byte tags and unknown fields take the generic path
    /// and decode to the same event as the usual encoding.
    #[test]
    fn long_tag_encodings_and_unknown_fields_decode_like_short_ones() {
        let mut stat = WireWriter::default();
        stat.int64(1, 10);
        stat.int64_always(4, -3);
        let mut event = WireWriter::default();
        event.int64(1, 5);
        event.int64(2, 2_000);
        event.int64(3, 500);
        event.bytes_always(4, &stat.buf);
        let short = read_xspace(&one_event_space(&event.buf), "s.xplane.pb", "s").unwrap();

        // Field 1 (varint) as [0x88, 0x00], field 4 of the stat as [0xa0, 0x00], the
        // stat itself as [0xa2, 0x00], and an unknown field 9 in both messages.
        let mut long_stat = vec![0x08, 10, 0xa0, 0x00];
        long_stat.extend_from_slice(&stat.buf[3..]);
        long_stat.extend_from_slice(&[0x48, 1]);
        let mut long_event = vec![0x88, 0x00, 5, 0x48, 7];
        long_event.extend_from_slice(&event.buf[2..event.buf.len() - stat.buf.len() - 2]);
        long_event.extend_from_slice(&[0xa2, 0x00, long_stat.len() as u8]);
        long_event.extend_from_slice(&long_stat);
        let long = read_xspace(&one_event_space(&long_event), "s.xplane.pb", "s").unwrap();
        assert_eq!(long, short);
        let line = &long.planes[0].lines[0];
        let event = line.iter().next().expect("one event");
        assert_eq!((event.start_ps(), event.duration_ps(), event.stats()[0].value()), (2_000, 500, StatValue::Int(-3)));
    }

    /// Fields out of number order, and fields given twice, decode as the last
    /// occurrence of each says, as on the in-order fast path.
    #[test]
    fn fields_in_any_order_or_repeated_decode_as_their_last_occurrence() {
        let stat = |fields: &[(u32, i64)]| {
            let mut w = WireWriter::default();
            for &(number, value) in fields {
                w.int64_always(number, value);
            }
            w.buf
        };
        let mut canonical = WireWriter::default();
        canonical.int64(1, 5);
        canonical.int64(2, 2_000);
        canonical.int64(3, 500);
        canonical.bytes_always(4, &stat(&[(1, 10), (4, -3)]));
        canonical.bytes_always(4, &stat(&[(1, 10), (4, 2)]));
        canonical.bytes_always(4, &stat(&[(1, 10), (3, 9)]));
        let expected = read_xspace(&one_event_space(&canonical.buf), "c.xplane.pb", "c").unwrap();

        let mut shuffled = WireWriter::default();
        shuffled.int64(3, 500);
        shuffled.int64(1, 9);
        shuffled.int64(2, 100);
        shuffled.bytes_always(4, &stat(&[(4, -3), (1, 10)]));
        shuffled.int64(2, 2_000);
        shuffled.bytes_always(4, &stat(&[(1, 11), (4, 1), (1, 10), (4, 2)]));
        shuffled.int64(1, 5);
        shuffled.bytes_always(4, &stat(&[(1, 10), (4, 7), (3, 9)]));
        let got = read_xspace(&one_event_space(&shuffled.buf), "c.xplane.pb", "c").unwrap();
        assert_eq!(got, expected);
        let event = got.planes[0].lines[0].iter().next().expect("one event");
        let values: Vec<StatValue> = event.stats().iter().map(|s| s.value()).collect();
        assert_eq!((event.start_ps(), event.duration_ps()), (2_000, 500));
        assert_eq!(values, [StatValue::Int(-3), StatValue::Int(2), StatValue::Uint(9)]);
    }

    /// A known field with the wrong wire type is an error at the field's tag, on the
    /// fast path's tag byte as well as on the generic path.
    #[test]
    fn known_fields_with_wrong_wire_types_are_located() {
        let mut event = WireWriter::default();
        event.int64(1, 5);
        event.bytes_always(3, b"no");
        let space = one_event_space(&event.buf);
        let Err(FormatError::Protobuf { offset, message, .. }) = read_xspace(&space, "w.xplane.pb", "w") else {
            panic!("a length-delimited duration must be refused");
        };
        // XSpace tag+len (2), XPlane tag+len (2), XLine id (2), XLine tag+len (2), field 1 (2).
        assert_eq!((offset, message.as_str()), (10, "field 3 is length-delimited bytes; expected a varint"));

        let mut stat = WireWriter::default();
        stat.int64(1, 10);
        stat.double_always(7, 1.0);
        let mut event = WireWriter::default();
        event.bytes_always(4, &stat.buf);
        let space = one_event_space(&event.buf);
        let Err(FormatError::Protobuf { offset, message, .. }) = read_xspace(&space, "w.xplane.pb", "w") else {
            panic!("a double ref_value must be refused");
        };
        assert_eq!((offset, message.as_str()), (12, "field 7 is a 64-bit fixed value; expected a varint"));
    }

    /// ASCII, other valid UTF-8 and invalid UTF-8 string values: the last is stored
    /// with replacement characters.
    #[test]
    fn string_values_are_stored_as_valid_utf8() {
        let mut event = WireWriter::default();
        for text in [&b"plain"[..], "na\u{ef}ve \u{2192}".as_bytes(), &[0xff, b'a', 0xc3][..]] {
            let mut stat = WireWriter::default();
            stat.int64(1, 10);
            stat.bytes_always(5, text);
            event.bytes_always(4, &stat.buf);
        }
        let host = read_xspace(&one_event_space(&event.buf), "u.xplane.pb", "u").unwrap();
        let line = &host.planes[0].lines[0];
        let texts: Vec<&str> = line
            .stats
            .stats()
            .iter()
            .map(|stat| match stat.value() {
                StatValue::Str(r) => line.stats.text(r),
                other => panic!("{other:?} is not a string"),
            })
            .collect();
        assert_eq!(texts, ["plain", "na\u{ef}ve \u{2192}", "\u{fffd}a\u{fffd}"]);
    }

    /// With errors in two planes, the first plane's is reported, however the planes
    /// are scheduled: the first plane is slow to reach its error (a long valid line
    /// first), the second fails at once.
    #[test]
    fn the_first_error_in_file_order_is_reported() {
        let mut event = WireWriter::default();
        event.int64(1, 5);
        event.int64(2, 1_000_000);
        let mut line = WireWriter::default();
        for _ in 0..100_000 {
            line.bytes_always(4, &event.buf);
        }
        line.buf.extend_from_slice(&[0x22, 0x03, 0x08]);
        let mut slow = WireWriter::default();
        slow.bytes_always(3, &line.buf);
        let mut space = WireWriter::default();
        space.bytes_always(1, &slow.buf);
        space.bytes_always(1, &[0x08]);
        for _ in 0..20 {
            let Err(FormatError::Protobuf { message, .. }) = read_xspace(&space.buf, "e.xplane.pb", "e") else {
                panic!("both planes are corrupt");
            };
            assert_eq!(message, "in XLine: field 4 declares 3 bytes but only 1 remain (truncated or corrupt file)");
        }
    }
}
