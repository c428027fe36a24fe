//! The streaming pass over the JSON: serde visitors that read each event's fields from
//! the byte slice (strings borrowed, times and values as raw text) into [`Fields`],
//! which [`Reader::finish_event`] appends to per-track lines, with one name and
//! stat-key interner for the whole file. ([`super::fast`] fills the same [`Fields`]
//! without serde for the events it reads.)

use crate::limits::MAX_LINES;
use std::borrow::Cow;
use std::fmt;

use mlprof_model::names::chrome::{
    CAT_CUDA_SYNC, CAT_GPU_MEMCPY, CAT_GPU_MEMSET, CAT_GPU_USER_ANNOTATION, CAT_KERNEL, CAT_KERNEL_LEGACY,
    CAT_MTIA_CCP_EVENTS, PH_COMPLETE, PH_METADATA,
};
use mlprof_model::{ChromeMetadataEvent, Line, StatStore, StatValue, TrackId};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::number::{Micros, PS_PER_US, Scalar, classify, parse_micros, unescape_into};
use crate::intern::{FxMap, Interner};

/// What a Chrome trace must look like at the top.
pub(crate) const EXPECTED_TRACE: &str = "a Chrome trace: an object with \"traceEvents\" or an array of events";

/// Cat id of events without a `cat`.
pub(crate) const NO_CAT: u32 = u32::MAX;

/// Largest span of event timestamps (whole µs) whose picosecond offsets fit an `i64`.
const MAX_SPAN_US: i64 = (i64::MAX - (PS_PER_US - 1)) / PS_PER_US;

/// Which kind of device an event category marks its process as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CatClass {
    /// A host category.
    Host,
    /// A GPU activity (`kernel`, `gpu_memcpy`, …).
    Gpu,
    /// An MTIA activity (`mtia_ccp_events`).
    Mtia,
}

fn cat_class(cat: &str) -> CatClass {
    match cat {
        CAT_KERNEL | CAT_KERNEL_LEGACY | CAT_GPU_MEMCPY | CAT_GPU_MEMSET | CAT_GPU_USER_ANNOTATION | CAT_CUDA_SYNC => {
            CatClass::Gpu
        }
        CAT_MTIA_CCP_EVENTS => CatClass::Mtia,
        _ => CatClass::Host,
    }
}

/// One Chrome `pid` and what its events say about it.
#[derive(Debug)]
pub(crate) struct PidInfo {
    /// The pid.
    pub id: TrackId,
    /// Some event had a GPU device category.
    pub gpu_events: bool,
    /// Some event had an MTIA device category.
    pub mtia_events: bool,
}

/// One `(pid, tid)` with its events, metadata indices still file-global.
#[derive(Debug)]
pub(crate) struct Track {
    /// The events (`chrome_track` set; id and name are filled in at assembly).
    pub line: Line,
    /// Index of the pid in [`Reader::pids`].
    pub pid_index: u32,
}

/// A string thread id's key in the track map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum TidKey {
    Int(i64),
    Str(u32),
}

/// Everything the streaming pass collects.
#[derive(Default)]
pub(crate) struct Reader {
    /// Top-level keys other than `traceEvents`, with raw JSON values, in file order.
    pub top_level: Vec<(String, String)>,
    /// The input was a bare array of events.
    pub bare_array: bool,
    /// The model events, one track per `(pid, tid)` in first-seen order.
    pub tracks: Vec<Track>,
    int_tracks: FxMap<(i64, i64), u32>,
    other_tracks: FxMap<(u32, TidKey), u32>,
    last_track: Option<(i64, i64, u32)>,
    /// The pids, first-seen order.
    pub pids: Vec<PidInfo>,
    int_pids: FxMap<i64, u32>,
    str_pids: Interner,
    str_pid_index: Vec<u32>,
    str_tids: Interner,
    /// Event names.
    pub names: Interner,
    /// Event categories.
    pub cats: Interner,
    cat_classes: Vec<CatClass>,
    /// Event phases.
    pub phs: Interner,
    catph: FxMap<(u32, u32), u32>,
    /// `(cat id or NO_CAT, ph id)` per variant id.
    pub catph_list: Vec<(u32, u32)>,
    metas: FxMap<(u32, u32), u32>,
    /// `(name id, variant id)` per file-global metadata index.
    pub meta_list: Vec<(u32, u32)>,
    /// Stat keys.
    pub keys: Interner,
    /// Whole µs of the first model-event timestamp: offsets are relative to it until
    /// assembly moves them to the final origin.
    pub provisional_origin: Option<i64>,
    /// Smallest whole µs of a model-event timestamp.
    pub min_whole: i64,
    max_whole: i64,
    /// `(track, event index)` of model events without `ts` (placed at the origin).
    pub missing_ts: Vec<(u32, u32)>,
    /// The `"ph": "M"` records (`ts_ps` filled in at assembly).
    pub meta_events: Vec<ChromeMetadataEvent>,
    /// The `ts` of each metadata record.
    pub meta_ts: Vec<Option<Micros>>,
    text: String,
}

/// The fields of one event, read without any state (so that any deserializer, the
/// sequential one or the per-event ones of [`super::walk`], or [`super::fast`]'s
/// scanner, can produce them). Raw values are the JSON text of the value.
#[derive(Default)]
pub(crate) struct Fields<'de> {
    pub ph: Option<Cow<'de, str>>,
    pub name: Option<Cow<'de, str>>,
    pub cat: Option<Cow<'de, str>>,
    pub pid: Option<Id<'de>>,
    pub tid: Option<Id<'de>>,
    pub ts: Option<Micros>,
    pub dur: Option<(Micros, &'de str)>,
    pub args: Option<Args<'de>>,
    /// The entries `(key, raw value, the value if it is an integer that fits an
    /// `i64`)` of an `args` object read as [`Args::Entries`].
    pub arg_entries: Vec<(&'de str, &'de str, Option<i64>)>,
    pub extras: Extras<'de>,
}

/// An event's `args` value, as its raw JSON text.
pub(crate) enum Args<'de> {
    /// Parsed when the event is added.
    Raw(&'de str),
    /// An object already split into [`Fields::arg_entries`].
    Entries(&'de str),
}

impl Fields<'_> {
    /// Empties the fields for the next event, keeping their buffers.
    pub fn clear(&mut self) {
        self.ph = None;
        self.name = None;
        self.cat = None;
        self.pid = None;
        self.tid = None;
        self.ts = None;
        self.dur = None;
        self.args = None;
        self.arg_entries.clear();
        self.extras.inline = [None; INLINE_EXTRAS];
        self.extras.spill.clear();
    }
}

/// How many unusual event fields (`id`, `bp`, `s`, …) are held without allocating.
const INLINE_EXTRAS: usize = 2;

/// An event's fields other than the known ones, in file order; the first
/// [`INLINE_EXTRAS`] with unescaped keys live inline, so flow and instant events
/// allocate nothing. Kept small: a [`Fields`] is moved a few times per event.
#[derive(Default)]
pub(crate) struct Extras<'de> {
    inline: [Option<(&'de str, &'de str)>; INLINE_EXTRAS],
    spill: Vec<(Cow<'de, str>, &'de str)>,
}

impl<'de> Extras<'de> {
    /// Adds a field with its raw value, after those already there.
    pub fn push(&mut self, key: Cow<'de, str>, raw: &'de str) {
        if let (Cow::Borrowed(key), true) = (&key, self.spill.is_empty())
            && let Some(slot) = self.inline.iter_mut().find(|slot| slot.is_none())
        {
            *slot = Some((key, raw));
            return;
        }
        self.spill.push((key, raw));
    }

    /// The fields in file order (inline ones first: once one spills, all later ones do).
    pub fn iter(&self) -> impl Iterator<Item = (&str, &'de str)> {
        self.inline.iter().map_while(|slot| *slot).chain(self.spill.iter().map(|(k, raw)| (k.as_ref(), *raw)))
    }
}

/// A pid or tid as written.
pub(crate) enum Id<'de> {
    Int(i64),
    Str(Cow<'de, str>),
}

impl Id<'_> {
    fn to_track_id(&self) -> TrackId {
        match self {
            Id::Int(v) => TrackId::Int(*v),
            Id::Str(s) => TrackId::Str(s.to_string()),
        }
    }
}

impl Reader {
    /// Handles one complete event.
    pub(crate) fn finish_event(&mut self, f: &Fields<'_>) -> Result<(), String> {
        let ph = f.ph.as_deref().unwrap_or("");
        if ph == PH_METADATA {
            self.meta_events.push(ChromeMetadataEvent {
                name: f.name.as_deref().unwrap_or_default().to_string(),
                pid: f.pid.as_ref().map_or(TrackId::Int(0), Id::to_track_id),
                tid: f.tid.as_ref().map(Id::to_track_id),
                ts_ps: None,
                args_json: match f.args {
                    Some(Args::Raw(raw) | Args::Entries(raw)) => raw.to_string(),
                    None => String::new(),
                },
            });
            self.meta_ts.push(f.ts);
            return Ok(());
        }
        let pid = f.pid.as_ref().unwrap_or(&Id::Int(0));
        let tid = f.tid.as_ref().unwrap_or(&Id::Int(0));
        let track = self.track(pid, tid)?;
        let offset = match f.ts {
            Some(ts) => self.offset(ts)?,
            None => {
                let index = self.tracks.get(track as usize).map_or(0, |t| t.line.len());
                let index = u32::try_from(index).map_err(|_| too_many("events on one thread"))?;
                self.missing_ts.push((track, index));
                0
            }
        };
        let is_complete = ph == PH_COMPLETE;
        let duration = match (&f.dur, is_complete) {
            (Some((dur, _)), true) => dur.to_ps().ok_or("\"dur\": duration too large for 64-bit picoseconds")?,
            _ => 0,
        };
        let metadata = self.metadata(f.name.as_deref(), f.cat.as_deref(), ph, track)?;

        let Reader { tracks, keys, text, .. } = self;
        let Some(line) = tracks.get_mut(track as usize) else {
            return Err("internal error: unknown track".to_string());
        };
        let stats = &mut line.line.stats;
        match f.args {
            Some(Args::Raw(args)) => push_args(args, stats, keys, text)?,
            Some(Args::Entries(_)) => {
                for &(key, raw, integer) in &f.arg_entries {
                    let key = keys.intern(rename(key)).map_err(|_| too_many("stat keys"))?;
                    match integer {
                        // What `push_scalar` makes of the integer's text.
                        Some(value) => stats.push(key, StatValue::Int(value)),
                        None => push_scalar(stats, key, raw, text)?,
                    }
                }
            }
            None => {}
        }
        // Top-level fields other than the args are kept as `@`-prefixed stats (see
        // `crate::chrome`), typed for `s`/`id`/`bp`, raw JSON otherwise.
        for (key, raw) in f.extras.iter() {
            let stat = field_key(keys, key)?;
            if matches!(key, "s" | "id" | "bp") {
                push_scalar(stats, stat, raw, text)?;
            } else {
                stats.push_json(stat, raw).map_err(|_| arena_full())?;
            }
        }
        if let (Some((_, raw)), false) = (f.dur, is_complete) {
            let stat = field_key(keys, "dur")?;
            stats.push_json(stat, raw).map_err(|_| arena_full())?;
        }
        if stats.len() > u32::MAX as usize {
            return Err(too_many("stats on one thread"));
        }
        line.line.push_event(metadata, offset, duration);
        Ok(())
    }

    /// The track of `(pid, tid)`, created on first use.
    #[inline]
    fn track(&mut self, pid: &Id<'_>, tid: &Id<'_>) -> Result<u32, String> {
        if let (Id::Int(p), Id::Int(t)) = (pid, tid) {
            match self.last_track {
                Some((lp, lt, idx)) if lp == *p && lt == *t => return Ok(idx),
                _ => {}
            }
            let idx = match self.int_tracks.get(&(*p, *t)) {
                Some(&idx) => idx,
                None => {
                    let idx = self.new_track(pid, tid)?;
                    self.int_tracks.insert((*p, *t), idx);
                    idx
                }
            };
            self.last_track = Some((*p, *t, idx));
            return Ok(idx);
        }
        let pid_index = self.pid_index(pid)?;
        let tid_key = match tid {
            Id::Int(t) => TidKey::Int(*t),
            Id::Str(s) => TidKey::Str(self.str_tids.intern(s).map_err(|_| too_many("thread ids"))?),
        };
        if let Some(&idx) = self.other_tracks.get(&(pid_index, tid_key)) {
            return Ok(idx);
        }
        let idx = self.new_track(pid, tid)?;
        self.other_tracks.insert((pid_index, tid_key), idx);
        Ok(idx)
    }

    fn new_track(&mut self, pid: &Id<'_>, tid: &Id<'_>) -> Result<u32, String> {
        let pid_index = self.pid_index(pid)?;
        let idx = self.next_track_index()?;
        let line = Line { chrome_track: Some((pid.to_track_id(), tid.to_track_id())), ..Line::default() };
        self.tracks.push(Track { line, pid_index });
        Ok(idx)
    }

    /// The index the next new track gets, or the error past [`MAX_LINES`] tracks.
    fn next_track_index(&self) -> Result<u32, String> {
        if self.tracks.len() >= MAX_LINES {
            return Err(crate::limits::too_many("(pid, tid) tracks", MAX_LINES));
        }
        u32::try_from(self.tracks.len()).map_err(|_| too_many("threads"))
    }

    fn pid_index(&mut self, pid: &Id<'_>) -> Result<u32, String> {
        let next = u32::try_from(self.pids.len()).map_err(|_| too_many("processes"))?;
        let idx = match pid {
            Id::Int(p) => *self.int_pids.entry(*p).or_insert(next),
            Id::Str(s) => {
                let sid = self.str_pids.intern(s).map_err(|_| too_many("processes"))? as usize;
                if sid == self.str_pid_index.len() {
                    self.str_pid_index.push(next);
                }
                self.str_pid_index.get(sid).copied().unwrap_or(next)
            }
        };
        if idx == next {
            self.pids.push(PidInfo { id: pid.to_track_id(), gpu_events: false, mtia_events: false });
        }
        Ok(idx)
    }

    /// Picoseconds from the provisional origin to `ts`.
    #[inline]
    fn offset(&mut self, ts: Micros) -> Result<i64, String> {
        let origin = match self.provisional_origin {
            Some(o) => o,
            None => {
                self.provisional_origin = Some(ts.whole);
                self.min_whole = ts.whole;
                self.max_whole = ts.whole;
                ts.whole
            }
        };
        self.min_whole = self.min_whole.min(ts.whole);
        self.max_whole = self.max_whole.max(ts.whole);
        let span = self.max_whole.checked_sub(self.min_whole);
        if span.is_none_or(|s| s > MAX_SPAN_US) {
            return Err(format!(
                "\"ts\": timestamps span more than {MAX_SPAN_US} µs (about 106 days), which 64-bit picoseconds cannot hold"
            ));
        }
        (ts.whole - origin)
            .checked_mul(PS_PER_US)
            .and_then(|v| v.checked_add(ts.frac_ps))
            .ok_or_else(|| "\"ts\": timestamp out of range".to_string())
    }

    /// The file-global metadata index of `(name, cat, ph)`; marks device pids.
    #[inline]
    fn metadata(&mut self, name: Option<&str>, cat: Option<&str>, ph: &str, track: u32) -> Result<u32, String> {
        let name_id = self.names.intern(name.unwrap_or("")).map_err(|_| too_many("event names"))?;
        let cat_id = match cat {
            Some(cat) => {
                let id = self.cats.intern(cat).map_err(|_| too_many("categories"))?;
                if id as usize == self.cat_classes.len() {
                    self.cat_classes.push(cat_class(self.cats.get(id)));
                }
                let class = self.cat_classes.get(id as usize).copied().unwrap_or(CatClass::Host);
                if class != CatClass::Host {
                    let pid_index = self.tracks.get(track as usize).map_or(0, |t| t.pid_index);
                    if let Some(info) = self.pids.get_mut(pid_index as usize) {
                        match class {
                            CatClass::Gpu => info.gpu_events = true,
                            CatClass::Mtia => info.mtia_events = true,
                            CatClass::Host => {}
                        }
                    }
                }
                id
            }
            None => NO_CAT,
        };
        let ph_id = self.phs.intern(ph).map_err(|_| too_many("phases"))?;
        let variant = self.variant(cat_id, ph_id)?;
        self.meta_index(name_id, variant)
    }

    /// The variant id of `(cat id, ph id)`, created on first use.
    #[inline]
    fn variant(&mut self, cat_id: u32, ph_id: u32) -> Result<u32, String> {
        let next = u32::try_from(self.catph_list.len()).map_err(|_| too_many("categories"))?;
        let variant = *self.catph.entry((cat_id, ph_id)).or_insert(next);
        if variant == next {
            self.catph_list.push((cat_id, ph_id));
        }
        Ok(variant)
    }

    /// The file-global metadata index of `(name id, variant id)`, created on first use.
    #[inline]
    fn meta_index(&mut self, name_id: u32, variant: u32) -> Result<u32, String> {
        let next = u32::try_from(self.meta_list.len()).map_err(|_| too_many("event names"))?;
        let meta = *self.metas.entry((name_id, variant)).or_insert(next);
        if meta == next {
            self.meta_list.push((name_id, variant));
        }
        Ok(meta)
    }
}

impl Reader {
    /// Appends what `later` read from the part of the events array right after the part
    /// `self` read (and the top-level keys after the array), leaving `self` exactly as
    /// one pass over both parts would have: pids, tracks and interned strings keep their
    /// first-seen order, `later`'s ids are mapped to `self`'s, its offsets are moved to
    /// `self`'s provisional origin and its stats are copied after `self`'s.
    ///
    /// `Err` when the two parts together break a limit that one pass checks event by
    /// event (time span, counts); the caller then reads sequentially, which reports the
    /// problem at its position.
    pub(crate) fn append(&mut self, later: Reader) -> Result<(), String> {
        let Reader {
            top_level,
            bare_array: _,
            tracks,
            pids,
            str_tids: _,
            names,
            cats,
            phs,
            catph_list,
            meta_list,
            keys,
            provisional_origin,
            min_whole,
            max_whole,
            missing_ts,
            meta_events,
            meta_ts,
            ..
        } = later;
        let shift_ps = self.merge_time(provisional_origin, min_whole, max_whole)?;
        let meta_map = self.merge_event_metadata(names, cats, phs, catph_list, meta_list)?;
        let key_map = remap(&mut self.keys, keys, "stat keys")?;
        let pid_map = self.merge_pids(pids)?;
        let maps = IdMaps { meta: meta_map, key: key_map, pid: pid_map, shift_ps };
        let (track_map, base_len) = self.merge_tracks(tracks, &maps)?;
        self.last_track = None;
        for (track, index) in missing_ts {
            let (Some(&own), Some(&base)) = (track_map.get(track as usize), base_len.get(track as usize)) else {
                continue;
            };
            let index = u32::try_from(base + index as usize).map_err(|_| too_many("events on one thread"))?;
            self.missing_ts.push((own, index));
        }
        self.meta_events.extend(meta_events);
        self.meta_ts.extend(meta_ts);
        self.top_level.extend(top_level);
        Ok(())
    }

    /// Time for [`Reader::append`]: one origin for both parts, checked like the
    /// per-event span check. Returns what to add to the later part's offsets.
    fn merge_time(&mut self, later_origin: Option<i64>, min_whole: i64, max_whole: i64) -> Result<i64, String> {
        Ok(match (self.provisional_origin, later_origin) {
            (Some(origin), Some(later_origin)) => {
                let (min, max) = (self.min_whole.min(min_whole), self.max_whole.max(max_whole));
                if max.checked_sub(min).is_none_or(|span| span > MAX_SPAN_US) {
                    return Err("timestamps span too long".to_string());
                }
                self.min_whole = min;
                self.max_whole = max;
                (later_origin - origin).checked_mul(PS_PER_US).ok_or("timestamp out of range")?
            }
            (None, Some(later_origin)) => {
                self.provisional_origin = Some(later_origin);
                self.min_whole = min_whole;
                self.max_whole = max_whole;
                0
            }
            (_, None) => 0,
        })
    }

    /// Interns the later part's names, categories and phases and the metadata built on
    /// them, in its first-seen order; returns its metadata indices mapped to `self`'s.
    fn merge_event_metadata(
        &mut self,
        names: Interner,
        cats: Interner,
        phs: Interner,
        catph_list: Vec<(u32, u32)>,
        meta_list: Vec<(u32, u32)>,
    ) -> Result<Vec<u32>, String> {
        let name_map = remap(&mut self.names, names, "event names")?;
        let cat_map = remap(&mut self.cats, cats, "categories")?;
        while self.cat_classes.len() < self.cats.len() {
            let id = u32::try_from(self.cat_classes.len()).map_err(|_| too_many("categories"))?;
            self.cat_classes.push(cat_class(self.cats.get(id)));
        }
        let ph_map = remap(&mut self.phs, phs, "phases")?;
        let mut variant_map = Vec::with_capacity(catph_list.len());
        for (cat, ph) in catph_list {
            let cat = if cat == NO_CAT { NO_CAT } else { mapped(&cat_map, cat)? };
            variant_map.push(self.variant(cat, mapped(&ph_map, ph)?)?);
        }
        let mut meta_map = Vec::with_capacity(meta_list.len());
        for (name, variant) in meta_list {
            meta_map.push(self.meta_index(mapped(&name_map, name)?, mapped(&variant_map, variant)?)?);
        }
        Ok(meta_map)
    }

    /// Adds the later part's pids after `self`'s (known ones keep their index and
    /// learn its device categories); returns its pid indices mapped to `self`'s.
    fn merge_pids(&mut self, pids: Vec<PidInfo>) -> Result<Vec<u32>, String> {
        let mut pid_map = Vec::with_capacity(pids.len());
        for info in pids {
            let id = match &info.id {
                TrackId::Int(p) => Id::Int(*p),
                TrackId::Str(s) => Id::Str(Cow::Owned(s.clone())),
            };
            let index = self.pid_index(&id)?;
            if let Some(own) = self.pids.get_mut(index as usize) {
                own.gpu_events |= info.gpu_events;
                own.mtia_events |= info.mtia_events;
            }
            pid_map.push(index);
        }
        Ok(pid_map)
    }

    /// Adds the later part's tracks: new ones after `self`'s, known ones get the events
    /// appended. Returns, per later track, its index in `self` and how many events that
    /// track had before.
    fn merge_tracks(&mut self, tracks: Vec<Track>, maps: &IdMaps) -> Result<(Vec<u32>, Vec<usize>), String> {
        let mut track_map = Vec::with_capacity(tracks.len());
        let mut base_len = Vec::with_capacity(tracks.len());
        for Track { mut line, pid_index } in tracks {
            let pid_index = mapped(&maps.pid, pid_index)?;
            let Some((pid, tid)) = line.chrome_track.clone() else {
                return Err("internal error: a track without its (pid, tid)".to_string());
            };
            let existing = match (&pid, &tid) {
                (TrackId::Int(p), TrackId::Int(t)) => self.int_tracks.get(&(*p, *t)).copied(),
                _ => {
                    let key = self.tid_key(&tid)?;
                    self.other_tracks.get(&(pid_index, key)).copied()
                }
            };
            match existing.and_then(|index| Some((index, self.tracks.get_mut(index as usize)?))) {
                Some((index, own)) => {
                    base_len.push(own.line.len());
                    track_map.push(index);
                    append_line(&mut own.line, &line, &maps.meta, &maps.key, maps.shift_ps)?;
                }
                None => {
                    let index = self.next_track_index()?;
                    line.events.metadata.try_map(|m| mapped(&maps.meta, m))?;
                    line.events.offset_ps.checked_add_all(maps.shift_ps).ok_or("timestamp out of range")?;
                    line.stats.remap_keys(&maps.key);
                    match (&pid, &tid) {
                        (TrackId::Int(p), TrackId::Int(t)) => self.int_tracks.insert((*p, *t), index),
                        _ => {
                            let key = self.tid_key(&tid)?;
                            self.other_tracks.insert((pid_index, key), index)
                        }
                    };
                    base_len.push(0);
                    track_map.push(index);
                    self.tracks.push(Track { line, pid_index });
                }
            }
        }
        Ok((track_map, base_len))
    }

    /// The track-map key of a thread id that is not paired with an integer pid.
    fn tid_key(&mut self, tid: &TrackId) -> Result<TidKey, String> {
        Ok(match tid {
            TrackId::Int(t) => TidKey::Int(*t),
            TrackId::Str(s) => TidKey::Str(self.str_tids.intern(s).map_err(|_| too_many("thread ids"))?),
        })
    }
}

/// `map[id]`, an error for an id outside the map (which a consistent reader never has).
/// How the ids and times of a later part of the events map onto the earlier part's
/// ([`Reader::append`]).
struct IdMaps {
    /// Later file-global metadata index → earlier.
    meta: Vec<u32>,
    /// Later stat key → earlier.
    key: Vec<u32>,
    /// Later pid index → earlier.
    pid: Vec<u32>,
    /// Picoseconds to add to the later part's offsets.
    shift_ps: i64,
}

/// Interns `from`'s strings into `into`, in `from`'s order; returns `from`'s ids
/// mapped to `into`'s. `what` names the strings for the too-many error.
fn remap(into: &mut Interner, from: Interner, what: &str) -> Result<Vec<u32>, String> {
    from.into_strings().into_iter().map(|s| into.intern(&s).map_err(|_| too_many(what))).collect()
}

fn mapped(map: &[u32], id: u32) -> Result<u32, String> {
    map.get(id as usize).copied().ok_or_else(|| "internal error: unmapped id".to_string())
}

/// Appends the events of `from` (file-global ids of another reader) to `to`.
fn append_line(to: &mut Line, from: &Line, meta_map: &[u32], key_map: &[u32], shift_ps: i64) -> Result<(), String> {
    let ev = &from.events;
    let base = u32::try_from(to.stats.len()).map_err(|_| too_many("stats on one thread"))?;
    let added = u32::try_from(from.stats.len()).map_err(|_| too_many("stats on one thread"))?;
    base.checked_add(added).ok_or_else(|| too_many("stats on one thread"))?;
    if let Some(&unmapped) = from.stats.stats().iter().find(|stat| key_map.get(stat.key() as usize).is_none()) {
        let key = unmapped.key();
        return Err(format!("internal error: unmapped stat key {key}"));
    }
    let metadata = ev.metadata.iter().map(|m| mapped(meta_map, m)).collect::<Result<Vec<u32>, String>>()?;
    to.stats.append_remapped(&from.stats, key_map).map_err(|_| arena_full())?;
    to.events.metadata.extend(metadata);
    for offset in ev.offset_ps.iter() {
        to.events.offset_ps.push(offset.checked_add(shift_ps).ok_or("timestamp out of range")?);
    }
    to.events.duration_ps.extend(ev.duration_ps.iter());
    // `stat_start` has one entry more than there are events: `to`'s last entry is
    // where `from`'s stats now start.
    to.events.stat_start.extend(ev.stat_start.iter().skip(1).map(|start| base + start));
    Ok(())
}

fn too_many(what: &str) -> String {
    format!("too many {what} (more than 2^32)")
}

fn arena_full() -> String {
    "the string values of one thread exceed 4 GiB".to_string()
}

/// The renamed stat key of an `args` key.
fn rename(key: &str) -> &str {
    match key {
        "correlation" => mlprof_model::names::CORRELATION_ID,
        "device" => mlprof_model::names::DEVICE_ID,
        "context" => mlprof_model::names::CONTEXT_ID,
        _ => key,
    }
}

/// Pushes one JSON value as a typed stat.
pub(crate) fn push_scalar(stats: &mut StatStore, key: u32, raw: &str, buf: &mut String) -> Result<(), String> {
    let value = match classify(raw) {
        Scalar::Int(v) => StatValue::Int(v),
        Scalar::Uint(v) => StatValue::Uint(v),
        Scalar::Double(v) => StatValue::Double(v),
        Scalar::Str { inner, escaped: false } => return stats.push_str(key, inner).map_err(|_| arena_full()),
        Scalar::Str { inner, escaped: true } => {
            buf.clear();
            unescape_into(inner, buf);
            return stats.push_str(key, buf).map_err(|_| arena_full());
        }
        Scalar::Json => return stats.push_json(key, raw).map_err(|_| arena_full()),
    };
    stats.push(key, value);
    Ok(())
}

/// Pushes each entry of an `args` object as a stat (a non-object `args` becomes one
/// raw-JSON stat named `args`).
fn push_args(args: &str, stats: &mut StatStore, keys: &mut Interner, buf: &mut String) -> Result<(), String> {
    let text = args;
    if !text.starts_with('{') {
        let key = keys.intern("args").map_err(|_| too_many("stat keys"))?;
        return stats.push_json(key, text).map_err(|_| arena_full());
    }
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_map(ArgsVisitor { stats, keys, buf }).map_err(|e| format!("\"args\": {e}"))
}

struct ArgsVisitor<'a> {
    stats: &'a mut StatStore,
    keys: &'a mut Interner,
    buf: &'a mut String,
}

impl<'de> Visitor<'de> for ArgsVisitor<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of event args")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            let key = self.keys.intern(rename(&key)).map_err(|_| de::Error::custom(too_many("stat keys")))?;
            let raw: &'de RawValue = map.next_value()?;
            push_scalar(self.stats, key, raw.get(), self.buf).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

/// A JSON string, borrowed when it has no escapes.
pub(crate) struct Text<'de>(pub Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

impl<'de> Deserialize<'de> for Id<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Id<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or string process/thread id")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id<'de>, E> {
                Ok(Id::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id<'de>, E> {
                i64::try_from(v).map(Id::Int).map_err(|_| E::custom(format!("id {v} does not fit a 64-bit integer")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Id<'de>, E> {
                if v.fract() == 0.0 && v.abs() < 9.0e15 {
                    Ok(Id::Int(v as i64))
                } else {
                    Err(E::invalid_type(de::Unexpected::Float(v), &self))
                }
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Id<'de>, E> {
                Ok(Id::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id<'de>, E> {
                Ok(Id::Str(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_any(V)
    }
}

/// An event key.
enum Field<'de> {
    Ph,
    Name,
    Cat,
    Pid,
    Tid,
    Ts,
    Dur,
    Args,
    Other(Cow<'de, str>),
}

impl<'de> Field<'de> {
    fn known(s: &str) -> Option<Field<'de>> {
        Some(match s {
            "ph" => Field::Ph,
            "name" => Field::Name,
            "cat" => Field::Cat,
            "pid" => Field::Pid,
            "tid" => Field::Tid,
            "ts" => Field::Ts,
            "dur" => Field::Dur,
            "args" => Field::Args,
            _ => return None,
        })
    }
}

impl<'de> Deserialize<'de> for Field<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Field<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an event field name")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Field<'de>, E> {
                Ok(Field::known(v).unwrap_or(Field::Other(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Field<'de>, E> {
                Ok(Field::known(v).unwrap_or_else(|| Field::Other(Cow::Owned(v.to_string()))))
            }
        }
        d.deserialize_str(V)
    }
}

/// Reads a time field exactly, with an error naming the field and its text.
fn micros_of<E: de::Error>(field: &str, raw: &RawValue) -> Result<Micros, E> {
    parse_micros(raw.get()).map_err(|why| {
        let text = raw.get();
        let shown: String = text.chars().take(40).collect();
        let more = if shown.len() < text.len() { "…" } else { "" };
        E::custom(format!("\"{field}\": {why}, found {shown}{more}"))
    })
}

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FieldsVisitor)
    }
}

/// Reads one event object into [`Fields`].
struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a trace event object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
        let mut f = Fields::default();
        while let Some(field) = map.next_key::<Field<'de>>()? {
            match field {
                Field::Ph => f.ph = Some(map.next_value::<Text<'de>>()?.0),
                Field::Name => f.name = Some(map.next_value::<Text<'de>>()?.0),
                Field::Cat => f.cat = Some(map.next_value::<Text<'de>>()?.0),
                Field::Pid => f.pid = Some(map.next_value()?),
                Field::Tid => f.tid = Some(map.next_value()?),
                Field::Ts => {
                    let raw: &'de RawValue = map.next_value()?;
                    f.ts = Some(micros_of("ts", raw)?);
                }
                Field::Dur => {
                    let raw: &'de RawValue = map.next_value()?;
                    f.dur = Some((micros_of("dur", raw)?, raw.get()));
                }
                Field::Args => f.args = Some(Args::Raw(map.next_value::<&'de RawValue>()?.get())),
                Field::Other(key) => {
                    let raw: &'de RawValue = map.next_value()?;
                    f.extras.push(key, raw.get());
                }
            }
        }
        Ok(f)
    }
}

/// Reads the events array.
struct EventsSeed<'a>(&'a mut Reader);

impl<'de> DeserializeSeed<'de> for EventsSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"traceEvents\" to be an array of events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(fields) = seq.next_element::<Fields<'de>>()? {
            self.0.finish_event(&fields).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

/// Reads the whole document.
pub(crate) struct TopSeed<'a>(pub &'a mut Reader);

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(EXPECTED_TRACE)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut found = false;
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            if key == "traceEvents" {
                map.next_value_seed(EventsSeed(self.0))?;
                found = true;
            } else {
                let raw: &'de RawValue = map.next_value()?;
                self.0.top_level.push((key.into_owned(), raw.get().to_string()));
            }
        }
        if found {
            Ok(())
        } else {
            Err(de::Error::custom(format!(
                "no \"traceEvents\" array in the top-level object; expected {EXPECTED_TRACE}"
            )))
        }
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        self.0.bare_array = true;
        EventsSeed(self.0).visit_seq(seq)
    }
}

/// The stat key for the non-`args` event field `field` (`@s`, `@id`, …). The common
/// fields are static strings, so only unusual fields allocate, once per event.
fn field_key(keys: &mut Interner, field: &str) -> Result<u32, String> {
    let name: Cow<'_, str> = match field {
        "s" => Cow::Borrowed("@s"),
        "id" => Cow::Borrowed("@id"),
        "bp" => Cow::Borrowed("@bp"),
        "dur" => Cow::Borrowed("@dur"),
        other => Cow::Owned(format!("{}{other}", crate::chrome::FIELD_PREFIX)),
    };
    keys.intern(&name).map_err(|_| too_many("stat keys"))
}
