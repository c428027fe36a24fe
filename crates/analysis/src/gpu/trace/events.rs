//! Reading one host's events the way HTA's parser sees them: which metadata it keeps
//! (as `(name, cat)` symbols), the args it reads, and its rounding of nanosecond
//! traces, straight off the model's columns.
//!
//! [`HostEvents::each`] hands out rows with their times as stored: rounding costs
//! more than the rest of reading a row, and most rows are only compared with a
//! limit or folded into a span, which [`HostEvents::starts_before`] and the
//! monotonicity of the rounding answer without it.

use mlprof_model::names::chrome;
use mlprof_model::{Host, Line, Plane, Stat, names};

use super::{Row, Symbols};
use crate::facts;
use crate::hta_read::{
    SYNC_OPS_ON_GPU, needs_rounding, round_start_to_us, round_to_us, rounded_start_before, stream_number,
};
use crate::steps::step_events::memcpy_bytes;
use crate::xstats::{StatKeys, as_f64, as_int, as_str};

/// Where an event is: its line (in [`HostEvents`]' order) and its index there.
#[derive(Clone, Copy, Debug)]
pub(super) struct EventAt {
    line: u32,
    index: u32,
}

/// One plane HTA reads: `(name, cat)` symbols of the metadata it keeps, and the keys
/// of the args it reads.
struct PlaneKinds<'h> {
    plane: &'h Plane,
    kinds: Vec<Option<(u32, u32)>>,
    keys: StatKeys<4>,
}

/// One host's events, ready to be read as rows.
pub(super) struct HostEvents<'h> {
    host: &'h Host,
    planes: Vec<PlaneKinds<'h>>,
    /// Every line HTA reads, with the index of its plane in `planes` and the stream
    /// of its events when the line is the stream (XSpace GPU profiles).
    lines: Vec<(usize, &'h Line, Option<i64>)>,
    sync_ids: Vec<u32>,
    /// `Some(origin_us)` when the trace needs HTA's rounding to whole µs.
    rounding: Option<i64>,
}

impl<'h> HostEvents<'h> {
    /// Interns the host's kept names and categories (in HTA's plane and metadata
    /// order) and resolves its stat keys.
    pub fn new(host: &'h Host, symbols: &mut Symbols) -> HostEvents<'h> {
        let sync_ids = SYNC_OPS_ON_GPU.iter().map(|name| symbols.intern(name)).collect();
        let planes: Vec<PlaneKinds<'h>> = host
            .planes
            .iter()
            .filter(|plane| plane.name == names::HOST_PLANE || plane.name.starts_with(names::DEVICE_PLANE_PREFIX))
            .map(|plane| PlaneKinds {
                plane,
                kinds: metadata_kinds(host, plane, symbols),
                keys: StatKeys::new(plane, ["stream", "correlation_id", "memory bandwidth (GB/s)", "memcpy_details"]),
            })
            .collect();
        let lines = planes
            .iter()
            .enumerate()
            .flat_map(|(index, kinds)| {
                kinds.plane.lines.iter().filter_map(move |line| {
                    facts::hta_line_stream(host, kinds.plane, line).map(|stream| (index, line, stream))
                })
            })
            .collect();
        let rounding = needs_rounding(host).then(|| host.chrome.as_ref().map_or(0, |chrome| chrome.origin_us));
        HostEvents { host, planes, lines, sync_ids, rounding }
    }

    /// The host.
    pub fn host(&self) -> &'h Host {
        self.host
    }

    /// Calls `visit` on every kept event whose name `wanted` accepts, plane by plane,
    /// line by line, in stored order, with its times **not yet rounded** (see
    /// [`HostEvents::rounded`]).
    pub fn each(&self, mut wanted: impl FnMut(u32) -> bool, mut visit: impl FnMut(EventAt, &Row)) {
        // Per plane, whether each metadata entry is kept and wanted.
        let selected: Vec<Vec<bool>> = self
            .planes
            .iter()
            .map(|kinds| kinds.kinds.iter().map(|kind| kind.is_some_and(|(name, _)| wanted(name))).collect())
            .collect();
        for (line_index, &(plane_index, line, line_stream)) in self.lines.iter().enumerate() {
            let (Some(kinds), Some(selected)) = (self.planes.get(plane_index), selected.get(plane_index)) else {
                continue;
            };
            for (index, metadata) in line.events.metadata.iter().enumerate() {
                if !selected.get(metadata as usize).copied().unwrap_or(false) {
                    continue;
                }
                let at = EventAt { line: line_index as u32, index: index as u32 };
                if let Some(row) = self.unrounded_row(kinds, line, line_stream, index) {
                    visit(at, &row);
                }
            }
        }
    }

    /// The row of the kept event at `at` (times rounded, no links yet).
    pub fn read(&self, at: EventAt) -> Option<Row> {
        let &(plane_index, line, line_stream) = self.lines.get(at.line as usize)?;
        self.unrounded_row(self.planes.get(plane_index)?, line, line_stream, at.index as usize)
            .map(|row| self.rounded(row))
    }

    /// `row` (from [`HostEvents::each`]) with HTA's times.
    pub fn rounded(&self, mut row: Row) -> Row {
        if let Some(origin_us) = self.rounding {
            (row.ts_ps, row.dur_ps) = round_to_us(origin_us, row.ts_ps, row.dur_ps);
        }
        row
    }

    /// HTA's start of a row that starts at `ts_ps` unrounded. Never decreases as
    /// `ts_ps` grows.
    pub fn rounded_start(&self, ts_ps: i64) -> i64 {
        self.rounding.map_or(ts_ps, |origin_us| round_start_to_us(origin_us, ts_ps))
    }

    /// Whether a row that starts at `ts_ps` unrounded starts before `limit_ps` (an
    /// HTA start) once rounded.
    pub fn starts_before(&self, ts_ps: i64, limit_ps: i64) -> bool {
        self.rounding.map_or(ts_ps < limit_ps, |origin_us| rounded_start_before(origin_us, ts_ps, limit_ps))
    }

    /// The row of event `index` of `line`, if HTA keeps it (times as stored, no
    /// links yet).
    fn unrounded_row(
        &self,
        kinds: &PlaneKinds<'_>,
        line: &Line,
        line_stream: Option<i64>,
        index: usize,
    ) -> Option<Row> {
        let events = &line.events;
        let (name, cat) = (*kinds.kinds.get(events.metadata.get(index)? as usize)?)?;
        let from = events.stat_start.get(index)? as usize;
        let to = events.stat_start.get(index + 1)? as usize;
        let stats = line.stats.stats().get(from..to).unwrap_or(&[]);
        let (ts_ps, dur_ps) =
            (line.start_ps().saturating_add(events.offset_ps.get(index)?), events.duration_ps.get(index)?);
        let (stream, correlation, memory_bw_gbps) = read_args(kinds, line, stats, events.duration_ps.get(index)?);
        let stream = line_stream.unwrap_or(stream);
        let on_gpu = (stream >= 0 && correlation >= 0) || self.sync_ids.contains(&name);
        Some(Row {
            name,
            cat,
            ts_ps,
            dur_ps,
            stream,
            correlation,
            memory_bw_gbps,
            on_gpu,
            linked_cpu_ts_ps: None,
            launches_gpu_op: false,
        })
    }
}

/// `(stream, correlation, memory bandwidth)` as HTA reads them off one event's
/// stats (-1, -1, 0 when absent). A copy of an XSpace profile has no bandwidth arg:
/// its bytes (`memcpy_details`) over its duration give it, as Kineto computes it.
fn read_args(kinds: &PlaneKinds<'_>, line: &Line, stats: &[Stat], duration_ps: i64) -> (i64, i64, f64) {
    let (mut stream, mut correlation, mut memory_bw_gbps, mut copied_bytes) = (-1, -1, None, 0);
    for stat in stats {
        let (key, value) = (Some(stat.key()), stat.value());
        if key == kinds.keys.key(0) {
            stream = stream_number(kinds.plane, &line.stats, value);
        } else if key == kinds.keys.key(1) {
            correlation = as_int(value).unwrap_or(-1);
        } else if key == kinds.keys.key(2) {
            memory_bw_gbps = Some(as_f64(value).unwrap_or(0.0));
        } else if key == kinds.keys.key(3) {
            copied_bytes = as_str(kinds.plane, &line.stats, value).map_or(0, memcpy_bytes);
        }
    }
    let from_bytes =
        || if copied_bytes > 0 && duration_ps > 0 { copied_bytes as f64 * 1000.0 / duration_ps as f64 } else { 0.0 };
    (stream, correlation, memory_bw_gbps.unwrap_or_else(from_bytes))
}

/// Per event metadata of `plane`: `(name, cat)` symbol ids for rows HTA keeps
/// (complete events with a category other than `Trace`), `None` for the others.
fn metadata_kinds(host: &Host, plane: &Plane, symbols: &mut Symbols) -> Vec<Option<(u32, u32)>> {
    facts::hta_categories(host, plane)
        .into_iter()
        .zip(&plane.event_metadata)
        .map(|(kept, metadata)| {
            let (cat, ph) = kept?;
            ph.is_none_or(|ph| ph == chrome::PH_COMPLETE).then(|| (symbols.intern(&metadata.name), symbols.intern(cat)))
        })
        .collect()
}
