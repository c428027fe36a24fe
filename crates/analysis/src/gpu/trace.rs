//! One rank's events as Holistic Trace Analysis (HTA) 0.5.0 sees them after
//! `TraceAnalysis(trace_dir=…)`: the rows its parser keeps, the `stream` and
//! `correlation` columns, the launch ↔ GPU-op links, and the filter that drops the
//! last profiler step.
//!
//! # HTA's loading rules, as reproduced here
//!
//! - **Rows**: complete events (`ph: "X"`) with a `cat`; `cat == "Trace"` is dropped
//!   (instants, counters, flows and metadata have no `dur` and are dropped by HTA).
//! - **Columns**: `stream` = `args.stream` (an integer, else -1), `correlation` =
//!   `args.correlation` (else -1), `bytes` = `args.bytes`, `memory_bw_gbps` =
//!   `args["memory bandwidth (GB/s)"]` (else 0).
//! - **Nanosecond traces**: when any `ts` has a fraction of a microsecond, every start
//!   is rounded up and every end down to a whole microsecond (`dur = floor(ts + dur) -
//!   ceil(ts)`, which can be negative for sub-µs events, as in HTA).
//! - **GPU op** ("GPU kernel" in HTA's filters): `stream >= 0 && correlation >= 0`, or
//!   a `cuda_sync` event named `Event Sync` / `Context Sync`. Every other row is a CPU
//!   row.
//! - **Links**: a GPU op is linked to the CPU row with the same `correlation` (the
//!   runtime launch; with several, the latest); a CPU row is a *linked launch* when
//!   some GPU op shares its correlation.
//! - **Last-step filter**: when the profiles together name at least two distinct
//!   `ProfilerStep#N`, each rank keeps only CPU rows that start before its last
//!   `ProfilerStep` starts, and only GPU ops whose correlation matches a kept CPU row
//!   (once per matching row, as HTA's inner merge does). A rank without a
//!   `ProfilerStep` then keeps nothing.
//! - **Rank**: `distributedInfo.rank` (0 when absent, as HTA).
//!
//! Times stay in picoseconds; HTA's numbers are these divided by 10^6 (µs).

use std::collections::HashMap;

use mlprof_model::{Host, Plane, names};

use crate::hta_read::{SYNC_OPS_ON_GPU, kept_categories, needs_rounding, round_to_us, stream_number};
use crate::xstats::{StatKeys, as_f64, as_int};

/// One kept event of a rank (HTA: one row of the rank's DataFrame).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    /// Index into [`Symbols`] of the event name.
    pub name: u32,
    /// Index into [`Symbols`] of the event category (`cat`).
    pub cat: u32,
    /// Start in picoseconds (after HTA's rounding of nanosecond traces).
    pub ts_ps: i64,
    /// Duration in picoseconds (after the same rounding).
    pub dur_ps: i64,
    /// `args.stream`, -1 when absent.
    pub stream: i64,
    /// `args.correlation`, -1 when absent.
    pub correlation: i64,
    /// `args["memory bandwidth (GB/s)"]`, 0 when absent.
    pub memory_bw_gbps: f64,
    /// `args.bytes`, -1 when absent.
    pub bytes: i64,
    /// Whether HTA's GPU-op filter selects the row.
    pub on_gpu: bool,
    /// For a GPU op: the start in ps of the CPU row it is linked to, when that row
    /// was kept. For a CPU row: unused.
    pub linked_cpu_ts_ps: Option<i64>,
    /// For a CPU row: whether a GPU op shares its correlation (HTA's
    /// `index_correlation > 0`).
    pub launches_gpu_op: bool,
}

impl Row {
    /// End in picoseconds.
    pub fn end_ps(&self) -> i64 {
        self.ts_ps + self.dur_ps
    }
}

/// Event names and categories of all ranks, interned once.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    texts: Vec<String>,
    ids: HashMap<String, u32>,
}

impl Symbols {
    /// The id of `text`, adding it when new.
    pub fn intern(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.ids.get(text) {
            return id;
        }
        let id = self.texts.len() as u32;
        self.texts.push(text.to_string());
        self.ids.insert(text.to_string(), id);
        id
    }

    /// The text of `id` (empty for an unknown id).
    pub fn text(&self, id: u32) -> &str {
        self.texts.get(id as usize).map_or("", String::as_str)
    }

    /// The id of `text`, if interned.
    pub fn id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    /// The interned texts, indexed by id.
    pub fn into_texts(self) -> Vec<String> {
        self.texts
    }

    /// Every interned text with its id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &str)> {
        self.texts.iter().enumerate().map(|(id, text)| (id as u32, text.as_str()))
    }
}

/// One rank's kept rows.
#[derive(Clone, Debug)]
pub struct RankTrace {
    /// The rank (`distributedInfo.rank`, else 0).
    pub rank: i64,
    /// The host (file) name the rank came from.
    pub host: String,
    /// The kept rows: GPU ops, then CPU rows, each group line by line in start order.
    pub rows: Vec<Row>,
    /// Latest row start minus earliest row start, in ps (HTA's trace duration).
    pub duration_ps: i64,
}

/// All ranks of one analysis and the symbols their rows use.
#[derive(Clone, Debug)]
pub struct GpuTraces {
    /// Ranks in ascending rank order.
    pub ranks: Vec<RankTrace>,
    /// Names and categories.
    pub symbols: Symbols,
    /// Whether the last-step filter ran (at least two distinct `ProfilerStep#N`).
    pub last_step_dropped: bool,
}

/// Builds HTA's view of `hosts` (Kineto traces; other hosts are read the same way
/// where they carry `stream` and `correlation` args).
pub fn load(hosts: &[&Host]) -> GpuTraces {
    let mut symbols = Symbols::default();
    let mut ranks: Vec<RankTrace> = hosts
        .iter()
        .map(|host| RankTrace {
            rank: host.rank.unwrap_or(0),
            host: host.name.clone(),
            rows: read_rows(host, &mut symbols),
            duration_ps: 0,
        })
        .collect();
    let step_names: Vec<u32> =
        symbols.iter().filter(|(_, text)| text.contains("ProfilerStep")).map(|(id, _)| id).collect();
    let last_step_dropped = step_names.len() >= 2;
    for rank in &mut ranks {
        link_launches(&mut rank.rows);
        if last_step_dropped {
            drop_last_step(&mut rank.rows, &step_names);
        }
        link_kept_launch_starts(&mut rank.rows);
        let starts = rank.rows.iter().map(|row| row.ts_ps);
        rank.duration_ps = match (starts.clone().min(), starts.max()) {
            (Some(first), Some(last)) => last - first,
            _ => 0,
        };
    }
    ranks.sort_by_key(|rank| rank.rank);
    GpuTraces { ranks, symbols, last_step_dropped }
}

/// The rows of one host: GPU ops first, then CPU rows, each in line order (every
/// line in start order).
fn read_rows(host: &Host, symbols: &mut Symbols) -> Vec<Row> {
    let rounding = needs_rounding(host);
    let origin_us = host.chrome.as_ref().map_or(0, |chrome| chrome.origin_us);
    let sync_ids: Vec<u32> = SYNC_OPS_ON_GPU.iter().map(|name| symbols.intern(name)).collect();
    let mut rows = Vec::new();
    for plane in &host.planes {
        if !(plane.name == names::HOST_PLANE || plane.name.starts_with(names::DEVICE_PLANE_PREFIX)) {
            continue;
        }
        let kinds = metadata_kinds(plane, symbols);
        let keys = StatKeys::new(plane, ["stream", "correlation_id", "bytes", "memory bandwidth (GB/s)"]);
        for line in &plane.lines {
            for event in line.iter() {
                let Some(&Some((name, cat))) = kinds.get(event.metadata_index() as usize) else { continue };
                let mut stream = -1;
                let mut correlation = -1;
                let mut bytes = -1;
                let mut memory_bw_gbps = 0.0;
                for stat in event.stats() {
                    let key = Some(stat.key);
                    if key == keys.key(0) {
                        stream = stream_number(plane, event.store(), stat.value);
                    } else if key == keys.key(1) {
                        correlation = as_int(stat.value).unwrap_or(-1);
                    } else if key == keys.key(2) {
                        bytes = as_int(stat.value).unwrap_or(-1);
                    } else if key == keys.key(3) {
                        memory_bw_gbps = as_f64(stat.value).unwrap_or(0.0);
                    }
                }
                let (mut ts_ps, mut dur_ps) = (event.start_ps(), event.duration_ps());
                if rounding {
                    (ts_ps, dur_ps) = round_to_us(origin_us, ts_ps, dur_ps);
                }
                let on_gpu = (stream >= 0 && correlation >= 0) || sync_ids.contains(&name);
                rows.push(Row {
                    name,
                    cat,
                    ts_ps,
                    dur_ps,
                    stream,
                    correlation,
                    memory_bw_gbps,
                    bytes,
                    on_gpu,
                    linked_cpu_ts_ps: None,
                    launches_gpu_op: false,
                });
            }
        }
    }
    let (mut gpu, cpu): (Vec<Row>, Vec<Row>) = rows.into_iter().partition(|row| row.on_gpu);
    gpu.extend(cpu);
    gpu
}

/// Per event metadata of `plane`: `(name, cat)` symbol ids for rows HTA keeps
/// (complete events with a category other than `Trace`), `None` for the others.
fn metadata_kinds(plane: &Plane, symbols: &mut Symbols) -> Vec<Option<(u32, u32)>> {
    kept_categories(plane)
        .into_iter()
        .zip(&plane.event_metadata)
        .map(|(kept, metadata)| {
            let (cat, ph) = kept?;
            ph.is_none_or(|ph| ph == "X").then(|| (symbols.intern(&metadata.name), symbols.intern(cat)))
        })
        .collect()
}

/// Marks CPU rows that launch a GPU op (before any filtering, as HTA computes
/// `index_correlation` at parse time).
fn link_launches(rows: &mut [Row]) {
    let gpu_correlations: std::collections::HashSet<i64> =
        rows.iter().filter(|row| row.on_gpu && row.correlation != -1).map(|row| row.correlation).collect();
    for row in rows.iter_mut().filter(|row| !row.on_gpu) {
        row.launches_gpu_op = row.correlation != -1 && gpu_correlations.contains(&row.correlation);
    }
}

/// Sets each GPU op's link to the start of its (kept) launching CPU row.
fn link_kept_launch_starts(rows: &mut [Row]) {
    let mut launch_start: HashMap<i64, i64> = HashMap::new();
    for row in rows.iter().filter(|row| !row.on_gpu && row.correlation != -1) {
        let start = launch_start.entry(row.correlation).or_insert(row.ts_ps);
        *start = (*start).max(row.ts_ps);
    }
    for row in rows.iter_mut().filter(|row| row.on_gpu) {
        row.linked_cpu_ts_ps = if row.correlation == -1 { None } else { launch_start.get(&row.correlation).copied() };
    }
}

/// HTA's `_filter_irrelevant_gpu_kernels` without the last step.
fn drop_last_step(rows: &mut Vec<Row>, step_names: &[u32]) {
    let last_step_start =
        rows.iter().filter(|row| !row.on_gpu && step_names.contains(&row.name)).map(|row| row.ts_ps).max();
    let Some(last_step_start) = last_step_start else {
        rows.clear();
        return;
    };
    let mut kept_cpu: HashMap<i64, usize> = HashMap::new();
    for row in rows.iter().filter(|row| !row.on_gpu && row.ts_ps < last_step_start) {
        *kept_cpu.entry(row.correlation).or_default() += 1;
    }
    let mut kept = Vec::with_capacity(rows.len());
    for row in rows.iter() {
        if row.on_gpu {
            let copies = kept_cpu.get(&row.correlation).copied().unwrap_or(0);
            // A sync op without a correlation would pair with every CPU op; keep it once.
            let copies = if row.correlation == -1 { copies.min(1) } else { copies };
            kept.extend(std::iter::repeat_n(*row, copies));
        } else if row.ts_ps < last_step_start {
            kept.push(*row);
        }
    }
    *rows = kept;
}
