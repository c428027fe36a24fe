//! One side of a trace diff as HTA 0.5.0's `LabeledTrace` sees it: per rank, the rows
//! its parser keeps, each with the `ProfilerStep` iteration it belongs to.
//!
//! The one decision to know: `LabeledTrace` only *parses* the traces
//! (`Trace.parse_traces`); it never aligns ranks nor runs the filter that drops the
//! last profiler step. So every kept row stays, the last step included, and
//! [`OpsTrace::iterations`] lists every `ProfilerStep#N` name of the traces.
//!
//! HTA works in file order ("the last match wins" in two places below); the model keeps
//! events per thread, so file order is approximated by plane order (host plane, then
//! device planes), then line order, then event order. Kineto writes CPU events before
//! GPU activities, which this order preserves.

use std::collections::HashMap;

use mlprof_model::names::{DEVICE_PLANE_PREFIX, HOST_PLANE, chrome};
use mlprof_model::{Host, Plane, StatStore, StatValue};

use crate::derived_lines::is_derived_line_id;
use crate::gpu::trace::Symbols;
use crate::hta_read::{SYNC_OPS_ON_GPU, kept_categories, needs_rounding, round_to_us, stream_number};
use crate::xstats::{StatKeys, as_int};

/// Picoseconds per microsecond.
pub(super) use crate::hta_read::PS_PER_US;

/// One kept event (HTA: one row of the rank's DataFrame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Row {
    /// Index into [`OpsTrace::names`].
    pub name: u32,
    /// Start in picoseconds from the host's time origin (whole µs after HTA's rounding
    /// of nanosecond traces).
    pub ts_ps: i64,
    /// Duration in picoseconds (whole µs after that rounding; may then be negative).
    pub dur_ps: i64,
    /// `args.stream` as an integer, -1 when absent or not a number.
    pub stream: i64,
    /// `args.correlation`, -1 when absent.
    pub correlation: i64,
    /// The `ProfilerStep#N` number of the row (HTA's `iteration`), `None` for HTA's -1
    /// (outside every step, or not linked to a launch) and NaN (stream 0).
    pub iteration: Option<i64>,
}

/// One rank: a host (file) and its rows.
#[derive(Clone, Debug)]
pub(super) struct RankRows {
    /// `distributedInfo.rank`, 0 when absent.
    pub rank: i64,
    /// The host's name.
    pub host: String,
    /// The host's source file.
    pub path: String,
    /// Rows in (approximated) file order.
    pub rows: Vec<Row>,
}

/// One side of a diff: its ranks and the names their rows use.
#[derive(Clone, Debug, Default)]
pub struct OpsTrace {
    pub(super) ranks: Vec<RankRows>,
    pub(super) names: Vec<String>,
    iterations: Vec<i64>,
}

impl OpsTrace {
    /// Reads `hosts` (one rank each) with HTA's parsing rules. When two hosts have the
    /// same rank, the later one wins (HTA keeps the later file of a directory listing).
    pub fn new(hosts: &[&Host]) -> OpsTrace {
        let mut names = Symbols::default();
        let mut ranks: Vec<RankRows> = Vec::new();
        for host in hosts {
            let rank = host.rank.unwrap_or(0);
            let rows = read_rows(host, &mut names);
            let entry = RankRows { rank, host: host.name.clone(), path: host.source_path.clone(), rows };
            match ranks.iter_mut().find(|r| r.rank == rank) {
                Some(slot) => *slot = entry,
                None => ranks.push(entry),
            }
        }
        ranks.sort_by_key(|r| r.rank);
        let mut iterations: Vec<i64> = names.iter().filter_map(|(_, name)| listed_iteration(name)).collect();
        iterations.sort_unstable();
        iterations.dedup();
        OpsTrace { ranks, names: names.into_texts(), iterations }
    }

    /// The ranks, ascending (HTA's `LabeledTrace.ranks()`).
    pub fn ranks(&self) -> Vec<i64> {
        self.ranks.iter().map(|r| r.rank).collect()
    }

    /// The `ProfilerStep#N` numbers named anywhere in the traces, ascending (HTA's
    /// `LabeledTrace.iterations()`, which reads them off the symbol table).
    pub fn iterations(&self) -> &[i64] {
        &self.iterations
    }

    /// The number of rows HTA keeps over all ranks.
    pub fn row_count(&self) -> usize {
        self.ranks.iter().map(|r| r.rows.len()).sum()
    }

    /// The name of row name id `id`.
    pub(super) fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", String::as_str)
    }
}

/// HTA's `LabeledTrace._extract_iterations`: a name starting with `ProfilerStep`,
/// minus `ProfilerStep#`, read as an integer (names that are not are skipped; HTA
/// raises on them).
fn listed_iteration(name: &str) -> Option<i64> {
    if !name.starts_with("ProfilerStep") {
        return None;
    }
    name.replacen("ProfilerStep#", "", 1).trim().parse().ok()
}

/// HTA's `add_iteration` step number: `ProfilerStep\s*#\s*(\d+)` at the start of the
/// name.
fn step_number(name: &str) -> Option<i64> {
    let rest = name.strip_prefix("ProfilerStep")?.trim_start();
    let rest = rest.strip_prefix('#')?.trim_start();
    let digits = rest.find(|c: char| !c.is_ascii_digit()).map_or(rest, |end| &rest[..end]);
    digits.parse().ok()
}

/// How an event's metadata decides whether HTA keeps the event.
#[derive(Clone, Copy)]
enum Kept {
    /// A complete (`X`) event with a category other than `Trace`.
    Complete(u32),
    /// Another phase with a category: kept when the event has a `dur` field.
    IfDur(u32),
}

/// The rows of one host, with iterations.
fn read_rows(host: &Host, names: &mut Symbols) -> Vec<Row> {
    // Chrome-trace rules for hosts read from a Chrome trace (the reader keeps its extras).
    let chrome = host.chrome.is_some();
    let origin_us = host.chrome.as_ref().map_or(0, |c| c.origin_us);
    let rounding = chrome && needs_rounding(host);
    let sync_ids: Vec<u32> = SYNC_OPS_ON_GPU.iter().map(|name| names.intern(name)).collect();
    let mut rows = Vec::new();
    let mut planes: Vec<&Plane> =
        host.planes.iter().filter(|p| p.name == HOST_PLANE || p.name.starts_with(DEVICE_PLANE_PREFIX)).collect();
    planes.sort_by_key(|p| p.name != HOST_PLANE);
    for plane in planes {
        let on_device = plane.name != HOST_PLANE;
        let kept = if chrome { chrome_kept(plane, names) } else { xspace_kept(plane, names) };
        let keys = StatKeys::new(plane, ["stream", "correlation_id", "@dur"]);
        for line in &plane.lines {
            if !chrome && on_device && is_derived_line_id(line.id) {
                continue;
            }
            for event in line.iter() {
                let Some(&Some(kind)) = kept.get(event.metadata_index() as usize) else { continue };
                let mut stream = if !chrome && on_device { line.id } else { -1 };
                let mut correlation = -1;
                let mut dur_field = None;
                for stat in event.stats() {
                    let key = Some(stat.key());
                    if key == keys.key(0) && chrome {
                        stream = stream_number(plane, event.store(), stat.value());
                    } else if key == keys.key(1) {
                        correlation = correlation_number(stat.value());
                    } else if key == keys.key(2) {
                        dur_field = json_micros(event.store(), stat.value());
                    }
                }
                let (name, dur_ps) = match kind {
                    Kept::Complete(name) => (name, event.duration_ps()),
                    Kept::IfDur(name) => match dur_field {
                        Some(dur_ps) => (name, dur_ps),
                        None => continue,
                    },
                };
                let (ts_ps, dur_ps) = if rounding {
                    round_to_us(origin_us, event.start_ps(), dur_ps)
                } else {
                    (event.start_ps(), dur_ps)
                };
                rows.push(Row { name, ts_ps, dur_ps, stream, correlation, iteration: None });
            }
        }
    }
    add_iterations(&mut rows, names, &sync_ids);
    rows
}

/// Per event metadata of a Chrome-trace plane: which events HTA keeps (a `cat` other
/// than `Trace`; a `dur`), with the interned name.
fn chrome_kept(plane: &Plane, names: &mut Symbols) -> Vec<Option<Kept>> {
    kept_categories(plane)
        .into_iter()
        .zip(&plane.event_metadata)
        .map(|(kept, metadata)| {
            let (_, ph) = kept?;
            let name = names.intern(&metadata.name);
            Some(match ph {
                None | Some(chrome::PH_COMPLETE) => Kept::Complete(name),
                Some(_) => Kept::IfDur(name),
            })
        })
        .collect()
}

/// Per event metadata of an XSpace plane: every event is kept (XSpace has no `cat`).
fn xspace_kept(plane: &Plane, names: &mut Symbols) -> Vec<Option<Kept>> {
    plane.event_metadata.iter().map(|metadata| Some(Kept::Complete(names.intern(&metadata.name)))).collect()
}

/// A correlation id: an integer (a whole double counts), else -1.
fn correlation_number(value: StatValue) -> i64 {
    match value {
        StatValue::Double(v) if v.fract() == 0.0 && v.is_finite() => v as i64,
        _ => as_int(value).unwrap_or(-1),
    }
}

/// The `dur` field of a non-complete event (raw JSON text) in picoseconds, when it is
/// a number.
fn json_micros(store: &StatStore, value: StatValue) -> Option<i64> {
    let StatValue::Json(text) = value else { return None };
    let micros: f64 = store.text(text).trim().parse().ok()?;
    micros.is_finite().then(|| (micros * PS_PER_US as f64).round() as i64)
}

/// HTA's `transform_correlation_to_index` + `add_iteration`: CPU rows (stream < 0)
/// take the last step (in file order) with `step.ts <= ts < step.ts + step.dur`; rows
/// with stream > 0 take the iteration of their launch (the last CPU row with the same
/// correlation); rows on stream 0 get none (HTA leaves NaN).
fn add_iterations(rows: &mut [Row], names: &Symbols, sync_ids: &[u32]) {
    let step_of_name: HashMap<u32, i64> =
        names.iter().filter_map(|(id, text)| Some((id, step_number(text)?))).collect();
    let steps =
        Steps::new(rows.iter().filter_map(|row| {
            step_of_name.get(&row.name).map(|&n| (row.ts_ps, row.ts_ps.saturating_add(row.dur_ps), n))
        }));
    let cpu_iteration = |ts: i64| steps.at(ts);
    let on_gpu = |row: &Row| (row.stream >= 0 && row.correlation >= 0) || sync_ids.contains(&row.name);
    // The launch of each correlation: the last CPU-side row with it.
    let mut launch: HashMap<i64, usize> = HashMap::new();
    for (index, row) in rows.iter().enumerate() {
        if row.correlation != -1 && !on_gpu(row) {
            launch.insert(row.correlation, index);
        }
    }
    let cpu: Vec<Option<i64>> =
        rows.iter().map(|row| if row.stream < 0 { cpu_iteration(row.ts_ps) } else { None }).collect();
    for (index, row) in rows.iter_mut().enumerate() {
        row.iteration = if row.stream < 0 {
            cpu.get(index).copied().flatten()
        } else if row.stream > 0 && row.correlation >= 0 {
            launch.get(&row.correlation).and_then(|&l| cpu.get(l).copied().flatten())
        } else {
            None
        };
    }
}

/// `ProfilerStep` spans, for "which step holds this time".
struct Steps {
    /// `(start, end, number, file position)` by start.
    spans: Vec<(i64, i64, i64, usize)>,
    /// `max_end[i]`: the latest end among `spans[..=i]`.
    max_end: Vec<i64>,
}

impl Steps {
    /// The spans `(start_ps, end_ps, number)` in file order.
    fn new(spans: impl Iterator<Item = (i64, i64, i64)>) -> Steps {
        let mut spans: Vec<(i64, i64, i64, usize)> =
            spans.enumerate().map(|(position, (start, end, n))| (start, end, n, position)).collect();
        spans.sort_by_key(|s| (s.0, s.3));
        let max_end = spans
            .iter()
            .scan(i64::MIN, |latest, s| {
                *latest = (*latest).max(s.1);
                Some(*latest)
            })
            .collect();
        Steps { spans, max_end }
    }

    /// The number of the step with `start <= ts < end` that comes last in file order
    /// (HTA loops over all steps and keeps the last match).
    fn at(&self, ts: i64) -> Option<i64> {
        let started = self.spans.partition_point(|s| s.0 <= ts);
        let mut best: Option<(usize, i64)> = None;
        for i in (0..started).rev() {
            if self.max_end.get(i).is_none_or(|&end| end <= ts) {
                break;
            }
            if let Some(&(_, end, n, position)) = self.spans.get(i)
                && ts < end
                && best.is_none_or(|(p, _)| position > p)
            {
                best = Some((position, n));
            }
        }
        best.map(|(_, n)| n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_names_read_as_hta_reads_them() {
        assert_eq!(step_number("ProfilerStep#1009"), Some(1009));
        assert_eq!(step_number("ProfilerStep # 7 extra"), Some(7));
        assert_eq!(step_number("ProfilerStep"), None);
        assert_eq!(listed_iteration("ProfilerStep#12"), Some(12));
        assert_eq!(listed_iteration("ProfilerStep#x"), None);
        assert_eq!(listed_iteration("aten::add"), None);
    }

    #[test]
    fn the_last_step_in_file_order_wins() {
        let steps = Steps::new([(0, 100, 1), (100, 200, 2), (50, 150, 7)].into_iter());
        assert_eq!(steps.at(-1), None);
        assert_eq!(steps.at(10), Some(1));
        assert_eq!(steps.at(60), Some(7));
        assert_eq!(steps.at(120), Some(7));
        assert_eq!(steps.at(160), Some(2));
        assert_eq!(steps.at(200), None);
    }

    #[test]
    fn rounding_follows_python_floats() {
        // 1712195495519695.001 is 1712195495519695.0 as an f64 (ulp 0.25): ceil keeps it.
        let origin = 1_712_195_495_519_000;
        let (ts, dur) = round_to_us(origin, 695 * PS_PER_US + 1_000, 2_000_000);
        assert_eq!((ts, dur), (695 * PS_PER_US, 2 * PS_PER_US));
        // .8 rounds up; the end 697.8 floors to 697.
        let (ts, dur) = round_to_us(origin, 695 * PS_PER_US + 800_000, 2_000_000);
        assert_eq!((ts, dur), (696 * PS_PER_US, PS_PER_US));
        // Sub-µs events can end before they start.
        let (ts, dur) = round_to_us(0, 5_300_000, 400_000);
        assert_eq!((ts, dur), (6 * PS_PER_US, -PS_PER_US));
    }
}
