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
//!
//! # What is kept
//!
//! The one design decision to know: HTA keeps a row for every event, but its analyses
//! only read GPU-side rows (GPU ops and any row with a `stream`) and the CPU rows
//! joined to them by `correlation`. [`load`] keeps exactly those rows, in the order
//! HTA's DataFrame has them, and folds every other row into the few facts the rules
//! above take from it (the trace duration, whether an uncorrelated CPU row survives
//! the last-step filter). On a PyTorch trace that is about one row in four, read in
//! one pass over the model's columns.

use std::collections::HashMap;

use mlprof_model::{Host, Line, Plane, Stat, names};

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
    /// The rows the analyses read (see the module docs): GPU ops, then CPU rows that
    /// have a stream or share a correlation with a GPU-side row, each group line by
    /// line in start order.
    pub rows: Vec<Row>,
    /// Latest row start minus earliest row start, in ps (HTA's trace duration, over
    /// every row HTA keeps, including those not in `rows`).
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
    let readers: Vec<HostReader<'_>> = hosts.iter().map(|host| HostReader::new(host, &mut symbols)).collect();
    let step_names: Vec<u32> =
        symbols.iter().filter(|(_, text)| text.contains("ProfilerStep")).map(|(id, _)| id).collect();
    let last_step_dropped = step_names.len() >= 2;
    let launch_names: Vec<u32> = super::launch::LAUNCH_NAMES.iter().filter_map(|name| symbols.id(name)).collect();
    let mut ranks: Vec<RankTrace> = readers
        .iter()
        .map(|reader| {
            let last_step_start = if last_step_dropped { Some(reader.last_step_start(&step_names)) } else { None };
            let (rows, duration_ps) = match last_step_start {
                // A rank without a `ProfilerStep` keeps nothing.
                Some(None) => (Vec::new(), 0),
                Some(Some(start)) => reader.rows(Some(start), &launch_names),
                None => reader.rows(None, &launch_names),
            };
            RankTrace { rank: reader.host.rank.unwrap_or(0), host: reader.host.name.clone(), rows, duration_ps }
        })
        .collect();
    ranks.sort_by_key(|rank| rank.rank);
    GpuTraces { ranks, symbols, last_step_dropped }
}

/// One plane HTA reads: `(name, cat)` symbols of the metadata it keeps, and the keys
/// of the args it reads.
struct PlaneKinds<'h> {
    plane: &'h Plane,
    kinds: Vec<Option<(u32, u32)>>,
    keys: StatKeys<3>,
}

/// What HTA reads of one event's args.
#[derive(Clone, Copy)]
struct Args {
    stream: i64,
    correlation: i64,
    memory_bw_gbps: f64,
}

/// One host, ready to be read row by row.
struct HostReader<'h> {
    host: &'h Host,
    planes: Vec<PlaneKinds<'h>>,
    sync_ids: Vec<u32>,
    /// `Some(origin_us)` when the trace needs HTA's rounding to whole µs.
    rounding: Option<i64>,
}

/// One kept event as a pass sees it.
struct Visit {
    name: u32,
    cat: u32,
    args: Args,
    ts_ps: i64,
    dur_ps: i64,
}

impl<'h> HostReader<'h> {
    /// Interns the host's kept names and categories (in HTA's plane and metadata
    /// order) and resolves its stat keys.
    fn new(host: &'h Host, symbols: &mut Symbols) -> HostReader<'h> {
        let sync_ids = SYNC_OPS_ON_GPU.iter().map(|name| symbols.intern(name)).collect();
        let planes = host
            .planes
            .iter()
            .filter(|plane| plane.name == names::HOST_PLANE || plane.name.starts_with(names::DEVICE_PLANE_PREFIX))
            .map(|plane| PlaneKinds {
                plane,
                kinds: metadata_kinds(plane, symbols),
                keys: StatKeys::new(plane, ["stream", "correlation_id", "memory bandwidth (GB/s)"]),
            })
            .collect();
        let rounding = needs_rounding(host).then(|| host.chrome.as_ref().map_or(0, |chrome| chrome.origin_us));
        HostReader { host, planes, sync_ids, rounding }
    }

    /// Calls `visit` on every kept event of the metadata `wanted` selects, plane by
    /// plane, line by line, in stored order.
    fn each(&self, mut wanted: impl FnMut(u32) -> bool, mut visit: impl FnMut(&Visit)) {
        for kinds in &self.planes {
            for line in &kinds.plane.lines {
                let base_ps = line.start_ps();
                let events = &line.events;
                let stats = line.stats.stats();
                for (index, &metadata) in events.metadata.iter().enumerate() {
                    let Some(&Some((name, cat))) = kinds.kinds.get(metadata as usize) else { continue };
                    if !wanted(name) {
                        continue;
                    }
                    let (Some(&offset), Some(&duration)) = (events.offset_ps.get(index), events.duration_ps.get(index))
                    else {
                        continue;
                    };
                    let event_stats = match (events.stat_start.get(index), events.stat_start.get(index + 1)) {
                        (Some(&from), Some(&to)) => stats.get(from as usize..to as usize).unwrap_or(&[]),
                        _ => &[],
                    };
                    let (mut ts_ps, mut dur_ps) = (base_ps.saturating_add(offset), duration);
                    if let Some(origin_us) = self.rounding {
                        (ts_ps, dur_ps) = round_to_us(origin_us, ts_ps, dur_ps);
                    }
                    let args = read_args(kinds, line, event_stats);
                    visit(&Visit { name, cat, args, ts_ps, dur_ps });
                }
            }
        }
    }

    /// Whether HTA's GPU-op filter selects an event.
    fn on_gpu(&self, name: u32, args: &Args) -> bool {
        (args.stream >= 0 && args.correlation >= 0) || self.sync_ids.contains(&name)
    }

    /// The start of the last `ProfilerStep` CPU row (`None`: the host has none).
    fn last_step_start(&self, step_names: &[u32]) -> Option<i64> {
        let mut last = None;
        self.each(
            |name| step_names.contains(&name),
            |visit| {
                if !self.on_gpu(visit.name, &visit.args) {
                    last = last.max(Some(visit.ts_ps));
                }
            },
        );
        last
    }

    /// The rows HTA's analyses read, and the trace duration, with the last-step filter
    /// at `last_step_start` when given.
    fn rows(&self, last_step_start: Option<i64>, launch_names: &[u32]) -> (Vec<Row>, i64) {
        let mut pass = self.pass(last_step_start, launch_names, false);
        if pass.uncorrelated_launch
            && pass.gpu.iter().chain(&pass.side).any(|row| row.stream != -1 && row.correlation == -1)
        {
            // HTA joins launches on `correlation`, -1 included: every kept CPU row
            // without one then pairs with the GPU-side rows without one.
            pass = self.pass(last_step_start, launch_names, true);
        }
        pass.finish(last_step_start.is_some())
    }

    /// One pass over the events (see [`Pass`]).
    fn pass(&self, last_step_start: Option<i64>, launch_names: &[u32], keep_uncorrelated: bool) -> Pass {
        let mut pass = Pass::default();
        self.each(
            |_| true,
            |visit| {
                let on_gpu = self.on_gpu(visit.name, &visit.args);
                let row = Row {
                    name: visit.name,
                    cat: visit.cat,
                    ts_ps: visit.ts_ps,
                    dur_ps: visit.dur_ps,
                    stream: visit.args.stream,
                    correlation: visit.args.correlation,
                    memory_bw_gbps: visit.args.memory_bw_gbps,
                    on_gpu,
                    linked_cpu_ts_ps: None,
                    launches_gpu_op: false,
                };
                if on_gpu {
                    pass.gpu.push(row);
                    return;
                }
                if last_step_start.is_some_and(|start| row.ts_ps >= start) {
                    return;
                }
                pass.cpu_span = Some(match pass.cpu_span {
                    Some((first, last)) => (first.min(row.ts_ps), last.max(row.ts_ps)),
                    None => (row.ts_ps, row.ts_ps),
                });
                if row.correlation == -1 {
                    pass.uncorrelated_cpu_kept = true;
                    pass.uncorrelated_launch |= launch_names.contains(&row.name);
                }
                if row.stream != -1 || row.correlation != -1 || keep_uncorrelated {
                    pass.side.push(row);
                }
            },
        );
        pass
    }
}

/// What one pass over a host's events collects.
#[derive(Default)]
struct Pass {
    /// GPU ops (HTA's GPU-op filter), before the last-step filter.
    gpu: Vec<Row>,
    /// Kept CPU rows that may matter: those with a stream or a correlation (and, when
    /// asked, every kept CPU row), in order.
    side: Vec<Row>,
    /// First and last start of the kept CPU rows, all of them.
    cpu_span: Option<(i64, i64)>,
    /// Some kept CPU row has no correlation.
    uncorrelated_cpu_kept: bool,
    /// Some kept CPU row without a correlation is a launch call.
    uncorrelated_launch: bool,
}

impl Pass {
    /// HTA's rows: links, the last-step filter (`filtered`; `side` only holds kept CPU
    /// rows already), and the trace duration.
    fn finish(self, filtered: bool) -> (Vec<Row>, i64) {
        let Pass { gpu, mut side, cpu_span, uncorrelated_cpu_kept, .. } = self;
        // Correlations of GPU-side rows: the only ones a CPU row is read for.
        let mut gpu_side: Vec<i64> =
            gpu.iter().chain(side.iter().filter(|row| row.stream != -1)).map(|row| row.correlation).collect();
        gpu_side.sort_unstable();
        gpu_side.dedup();
        side.retain(|row| {
            row.stream != -1 || row.correlation == -1 || gpu_side.binary_search(&row.correlation).is_ok()
        });

        // HTA's `index_correlation`, computed before any filtering.
        let mut gpu_correlations: Vec<i64> = gpu.iter().map(|row| row.correlation).filter(|&c| c != -1).collect();
        gpu_correlations.sort_unstable();
        gpu_correlations.dedup();
        // Per correlation: how many kept CPU rows have it, and the latest one's start.
        let mut launches: HashMap<i64, (usize, i64)> = HashMap::new();
        for row in &mut side {
            if row.correlation == -1 {
                continue;
            }
            row.launches_gpu_op = gpu_correlations.binary_search(&row.correlation).is_ok();
            let entry = launches.entry(row.correlation).or_insert((0, row.ts_ps));
            entry.0 += 1;
            entry.1 = entry.1.max(row.ts_ps);
        }

        let mut rows = Vec::with_capacity(gpu.len() + side.len());
        for mut row in gpu {
            let launch = if row.correlation == -1 { None } else { launches.get(&row.correlation).copied() };
            row.linked_cpu_ts_ps = launch.map(|(_, start)| start);
            let copies = match (filtered, row.correlation) {
                (false, _) => 1,
                // A sync op without a correlation would pair with every CPU row; keep it once.
                (true, -1) => usize::from(uncorrelated_cpu_kept),
                (true, _) => launch.map_or(0, |(count, _)| count),
            };
            rows.extend(std::iter::repeat_n(row, copies));
        }
        let gpu_span = rows.iter().map(|row| row.ts_ps);
        let first = gpu_span.clone().min().into_iter().chain(cpu_span.map(|(first, _)| first)).min();
        let last = gpu_span.max().into_iter().chain(cpu_span.map(|(_, last)| last)).max();
        let duration_ps = match (first, last) {
            (Some(first), Some(last)) => last - first,
            _ => 0,
        };
        rows.extend(side);
        (rows, duration_ps)
    }
}

/// The args HTA reads off one event's stats.
fn read_args(kinds: &PlaneKinds<'_>, line: &Line, stats: &[Stat]) -> Args {
    let mut args = Args { stream: -1, correlation: -1, memory_bw_gbps: 0.0 };
    for stat in stats {
        let key = Some(stat.key);
        if key == kinds.keys.key(0) {
            args.stream = stream_number(kinds.plane, &line.stats, stat.value);
        } else if key == kinds.keys.key(1) {
            args.correlation = as_int(stat.value).unwrap_or(-1);
        } else if key == kinds.keys.key(2) {
            args.memory_bw_gbps = as_f64(stat.value).unwrap_or(0.0);
        }
    }
    args
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
