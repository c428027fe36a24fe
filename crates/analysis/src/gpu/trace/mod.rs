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
//!   `args.correlation` (else -1), `memory_bw_gbps` = `args["memory bandwidth
//!   (GB/s)"]` (else 0).
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
//! joined to them by `correlation` (those only for launch statistics and queue
//! length, see [`CpuRows`]). [`load`] keeps exactly those rows, in the order HTA's
//! DataFrame has them, and folds every other row into the few facts the rules above
//! take from it (the trace duration, whether an uncorrelated CPU row survives the
//! last-step filter). One pass over the model's columns finds the rows by position;
//! the kept ones (on a PyTorch trace, one in six to one in ten) are then read and
//! rounded once, into a vector of their final size.

mod correlations;
mod events;

use std::collections::HashMap;

use mlprof_model::Host;

use correlations::Correlations;
use events::{EventAt, HostEvents};

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
    /// have a stream or (with [`CpuRows::Correlated`]) share a correlation with a
    /// GPU-side row, each group line by line in start order.
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

/// Which CPU rows (rows HTA's GPU-op filter does not select) [`load`] keeps in
/// [`RankTrace::rows`]. Either way the links, the last-step filter and the trace
/// duration take every row into account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuRows {
    /// Those with a stream, which every analysis reads as GPU-side rows: all that
    /// the analyses other than launch statistics and queue length need.
    WithStream,
    /// Also those that share a correlation with a GPU-side row (the launches).
    Correlated,
}

/// Builds HTA's view of `hosts` (Kineto traces; other hosts are read the same way
/// where they carry `stream` and `correlation` args), keeping `cpu_rows`.
pub fn load(hosts: &[&Host], cpu_rows: CpuRows) -> GpuTraces {
    let mut symbols = Symbols::default();
    let readers: Vec<HostEvents<'_>> = hosts.iter().map(|host| HostEvents::new(host, &mut symbols)).collect();
    let step_names: Vec<u32> =
        symbols.iter().filter(|(_, text)| text.contains("ProfilerStep")).map(|(id, _)| id).collect();
    let last_step_dropped = step_names.len() >= 2;
    let launch_names: Vec<u32> = super::launch::LAUNCH_NAMES.iter().filter_map(|name| symbols.id(name)).collect();
    let mut ranks: Vec<RankTrace> = readers
        .iter()
        .map(|reader| {
            let last_step_start = if last_step_dropped { Some(last_step_start(reader, &step_names)) } else { None };
            let (rows, duration_ps) = match last_step_start {
                // A rank without a `ProfilerStep` keeps nothing.
                Some(None) => (Vec::new(), 0),
                Some(Some(start)) => rows(reader, Some(start), &launch_names, cpu_rows),
                None => rows(reader, None, &launch_names, cpu_rows),
            };
            RankTrace { rank: reader.host().rank.unwrap_or(0), host: reader.host().name.clone(), rows, duration_ps }
        })
        .collect();
    ranks.sort_by_key(|rank| rank.rank);
    GpuTraces { ranks, symbols, last_step_dropped }
}

/// The start of the last `ProfilerStep` CPU row (`None`: the host has none).
fn last_step_start(events: &HostEvents<'_>, step_names: &[u32]) -> Option<i64> {
    let mut last = None;
    events.each(
        |name| step_names.contains(&name),
        |_, row| {
            if !row.on_gpu {
                last = last.max(Some(row.ts_ps));
            }
        },
    );
    // The rounding never decreases, so the last start stays the last.
    last.map(|start| events.rounded_start(start))
}

/// The rows HTA's analyses read, and the trace duration, with the last-step filter
/// at `last_step_start` when given.
fn rows(
    events: &HostEvents<'_>,
    last_step_start: Option<i64>,
    launch_names: &[u32],
    cpu_rows: CpuRows,
) -> (Vec<Row>, i64) {
    let mut pass = Pass::run(events, last_step_start, launch_names, false);
    if cpu_rows == CpuRows::Correlated
        && pass.uncorrelated_launch
        && pass.gpu.iter().chain(&pass.side).any(|found| found.stream && found.correlation == -1)
    {
        // HTA joins launches on `correlation`, -1 included: every kept CPU row
        // without one then pairs with the GPU-side rows without one.
        pass = Pass::run(events, last_step_start, launch_names, true);
    }
    pass.finish(events, last_step_start.is_some(), cpu_rows)
}

/// A row found by a [`Pass`], read again (and rounded) once it is known to be kept,
/// so that the rows are built once, in a vector of the right size.
#[derive(Clone, Copy)]
struct Found {
    at: EventAt,
    /// The row has a stream.
    stream: bool,
    correlation: i64,
}

/// What one pass over a host's events collects.
#[derive(Default)]
struct Pass {
    /// GPU ops (HTA's GPU-op filter), before the last-step filter.
    gpu: Vec<Found>,
    /// Kept CPU rows that may matter: those with a stream or a correlation (and, when
    /// asked, every kept CPU row), in order.
    side: Vec<Found>,
    /// First and last start of the kept CPU rows, all of them (unrounded).
    cpu_span: Option<(i64, i64)>,
    /// Some kept CPU row has no correlation.
    uncorrelated_cpu_kept: bool,
    /// Some kept CPU row without a correlation is a launch call.
    uncorrelated_launch: bool,
}

impl Pass {
    /// Reads every event once: GPU ops and CPU rows that may matter (those before
    /// `last_step_start`) are remembered, the other CPU rows summarised.
    fn run(
        events: &HostEvents<'_>,
        last_step_start: Option<i64>,
        launch_names: &[u32],
        keep_uncorrelated: bool,
    ) -> Pass {
        let mut pass = Pass::default();
        events.each(
            |_| true,
            |at, row| {
                let found = Found { at, stream: row.stream != -1, correlation: row.correlation };
                if row.on_gpu {
                    pass.gpu.push(found);
                    return;
                }
                if last_step_start.is_some_and(|start| !events.starts_before(row.ts_ps, start)) {
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
                    pass.side.push(found);
                }
            },
        );
        pass
    }

    /// HTA's rows (with `cpu_rows`): links, the last-step filter (`filtered`; `side`
    /// only holds kept CPU rows already), and the trace duration.
    fn finish(self, events: &HostEvents<'_>, filtered: bool, cpu_rows: CpuRows) -> (Vec<Row>, i64) {
        let Pass { gpu, mut side, cpu_span, uncorrelated_cpu_kept, .. } = self;
        let links = Links::new(events, &gpu, &mut side);
        // How often HTA's inner merge with the kept CPU rows keeps each GPU op.
        let in_rows = |found: &Found| found.stream || cpu_rows == CpuRows::Correlated;
        let mut total = side.iter().filter(|found| in_rows(found)).count();
        let copies = |correlation: i64, launches: usize| match (filtered, correlation) {
            (false, _) => 1,
            // A sync op without a correlation would pair with every CPU row; keep it once.
            (true, -1) => usize::from(uncorrelated_cpu_kept),
            (true, _) => launches,
        };
        let mut finger = 0;
        for found in &gpu {
            total += copies(found.correlation, links.launch_of(found.correlation, &mut finger).0);
        }

        let mut rows = Vec::with_capacity(total);
        for found in &gpu {
            let (count, start) = links.launch_of(found.correlation, &mut finger);
            let copies = copies(found.correlation, count);
            if copies == 0 {
                continue;
            }
            if let Some(mut row) = events.read(found.at) {
                row.linked_cpu_ts_ps = (count > 0).then_some(start);
                rows.extend(std::iter::repeat_n(row, copies));
            }
        }
        drop(gpu);
        let duration_ps = duration_ps(events, &rows, cpu_span);
        let mut finger = 0;
        for side in side.into_iter().filter(in_rows) {
            if let Some(mut row) = events.read(side.at) {
                row.launches_gpu_op = links.launches_gpu_op(row.correlation, &mut finger);
                rows.push(row);
            }
        }
        (rows, duration_ps)
    }
}

/// Latest row start minus earliest row start over the GPU ops' `rows` and the kept
/// CPU rows' `cpu_span` (first and last start, unrounded); 0 when there is no row.
fn duration_ps(events: &HostEvents<'_>, rows: &[Row], cpu_span: Option<(i64, i64)>) -> i64 {
    let gpu_span = rows.iter().map(|row| row.ts_ps);
    // The rounding never decreases: the first and last CPU starts stay first and last.
    let cpu_span = cpu_span.map(|(first, last)| (events.rounded_start(first), events.rounded_start(last)));
    let first = gpu_span.clone().min().into_iter().chain(cpu_span.map(|(first, _)| first)).min();
    let last = gpu_span.max().into_iter().chain(cpu_span.map(|(_, last)| last)).max();
    match (first, last) {
        (Some(first), Some(last)) => last - first,
        _ => 0,
    }
}

/// The links between one rank's CPU rows and GPU-side rows, by correlation.
struct Links {
    /// Correlations of GPU-side rows: the only ones a CPU row is read for.
    gpu_side: Correlations,
    /// Per GPU-side correlation: how many kept CPU rows have it, and the latest one's
    /// start.
    launches: Vec<(usize, i64)>,
    /// Per GPU-side correlation: whether a GPU op shares it (HTA's
    /// `index_correlation`, computed before any filtering).
    launched: Vec<bool>,
}

impl Links {
    /// The links of the GPU ops `gpu` and the CPU rows `side`, from which it drops the
    /// rows without a stream whose correlation no GPU-side row has.
    fn new(events: &HostEvents<'_>, gpu: &[Found], side: &mut Vec<Found>) -> Links {
        let gpu_side = Correlations::new(
            gpu.iter()
                .map(|found| found.correlation)
                .chain(side.iter().filter(|found| found.stream).map(|found| found.correlation)),
        );
        let mut finger = 0;
        side.retain(|found| {
            found.stream || found.correlation == -1 || gpu_side.slot(found.correlation, &mut finger).is_some()
        });
        side.shrink_to_fit();

        let mut launches: Vec<(usize, i64)> = vec![(0, i64::MIN); gpu_side.len()];
        let mut finger = 0;
        for found in side.iter().filter(|found| found.correlation != -1) {
            let (Some(slot), Some(row)) = (gpu_side.slot(found.correlation, &mut finger), events.read(found.at)) else {
                continue;
            };
            if let Some((count, start)) = launches.get_mut(slot) {
                *count += 1;
                *start = (*start).max(row.ts_ps);
            }
        }
        let mut launched = vec![false; gpu_side.len()];
        let mut finger = 0;
        for found in gpu {
            if found.correlation != -1
                && let Some(flag) =
                    gpu_side.slot(found.correlation, &mut finger).and_then(|slot| launched.get_mut(slot))
            {
                *flag = true;
            }
        }
        Links { gpu_side, launches, launched }
    }

    /// How many kept CPU rows have `correlation` and the latest one's start
    /// (`(0, i64::MIN)` for none), searching from `finger`.
    fn launch_of(&self, correlation: i64, finger: &mut usize) -> (usize, i64) {
        let slot = if correlation == -1 { None } else { self.gpu_side.slot(correlation, finger) };
        slot.and_then(|slot| self.launches.get(slot)).copied().unwrap_or((0, i64::MIN))
    }

    /// Whether a GPU op shares `correlation`, searching from `finger`.
    fn launches_gpu_op(&self, correlation: i64, finger: &mut usize) -> bool {
        let slot = if correlation == -1 { None } else { self.gpu_side.slot(correlation, finger) };
        slot.and_then(|slot| self.launched.get(slot)).copied().unwrap_or(false)
    }
}
