//! GPU gaps: times when no kernel, copy or memset runs on any stream of a device for
//! longer than the threshold, each explained by what the host thread that launched the
//! next op was doing meanwhile.
//!
//! The thread is found through the next op's correlation id (its launch call). Each
//! instant of the gap is classified by the innermost event covering that thread,
//! walking outwards to the first that says more: a blocking call (synchronisation), a
//! launch call (kernel-launch overhead), the DataLoader, the optimizer; otherwise the
//! outermost framework op (the op Python called), else the innermost Python frame or
//! range (CPU op); nothing at all: nothing recorded. The gap takes the class (and name) covering most of it. A next op whose
//! launch call ended before the gap began was already queued: it waited on a
//! dependency (queued, waiting on a dependency).

use std::collections::BTreeMap;

use serde::Serialize;

use super::findings::{FindingKind, Location, Occurrence};
use crate::facts::activity::{Call, Device, HostKind, ProfileView, Thread};
use crate::gpu::intervals;
use crate::kineto;

/// Individual gaps kept per device (the longest).
pub const TOP_GAPS: usize = 10;

/// Why the GPU was idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GapCause {
    /// The thread waited for the DataLoader.
    Dataloader,
    /// The thread ran the optimizer step.
    Optimizer,
    /// The thread was blocked in a synchronising call.
    Synchronization,
    /// The thread ran a framework op or Python code.
    CpuOp,
    /// The thread was launching kernels.
    KernelLaunch,
    /// The next op was enqueued before the gap began and still did not run: it waited
    /// on a dependency (another stream's event, a collective, a host callback), or the
    /// trace lacks the ops that ran meanwhile.
    QueuedDependency,
    /// No profiled event covers the thread.
    NothingRecorded,
}

impl GapCause {
    /// Words for tables.
    pub fn describe(self) -> &'static str {
        match self {
            GapCause::Dataloader => "DataLoader wait",
            GapCause::Optimizer => "optimizer step",
            GapCause::Synchronization => "synchronisation",
            GapCause::CpuOp => "Python / framework CPU op",
            GapCause::KernelLaunch => "kernel-launch overhead",
            GapCause::QueuedDependency => "queued, waiting on a dependency",
            GapCause::NothingRecorded => "nothing recorded",
        }
    }

    fn fix(self, label: &str) -> String {
        match self {
            GapCause::Dataloader => {
                "The GPU waited for the next batch: raise `num_workers`, set `pin_memory=True` and \
                 `persistent_workers=True`, keep `prefetch_factor` ≥ 2, or move preprocessing to the GPU."
                    .into()
            }
            GapCause::Optimizer => optimizer_fix(label),
            GapCause::Synchronization => format!(
                "`{label}` emptied the GPU's queue: remove the synchronisation (see the sync_call and implicit_sync \
                 findings) so the host can run ahead of the GPU."
            ),
            GapCause::CpuOp => format!(
                "Host work (`{label}`) ran while nothing was queued on the GPU: launch GPU work before it, move it off \
                 the training thread or onto the GPU, or cut per-op overhead with `torch.compile` / CUDA graphs."
            ),
            GapCause::KernelLaunch => "The GPU waited on launches: many small kernels — fuse them (`torch.compile`), \
                 use CUDA graphs, or larger batches."
                .into(),
            GapCause::QueuedDependency => "The next op was already queued when the GPU went idle: look at what its \
                 stream waited on (`cudaStreamWaitEvent`, a collective on another stream, a host callback) and start \
                 that work earlier."
                .into(),
            GapCause::NothingRecorded => "No profiled event covers the launching thread during the gap (untraced \
                 Python, I/O, a lock): profile with `with_stack=True` or add `record_function` ranges to see it."
                .into(),
        }
    }
}

/// torch.optim's optimizers with a multi-tensor (`foreach`) implementation, and those of
/// them with a fused one too (PyTorch 2.4+).
const FOREACH_OPTIMIZERS: [&str; 11] =
    ["Adadelta", "Adagrad", "Adam", "Adamax", "AdamW", "ASGD", "NAdam", "RAdam", "RMSprop", "Rprop", "SGD"];
const FUSED_OPTIMIZERS: [&str; 4] = ["Adagrad", "Adam", "AdamW", "SGD"];

/// What to change for a gap during the optimizer step `label` (`Optimizer.step#Shampoo.step`,
/// a `torch/optim/…` frame): advice for the optimizer in use, not another one.
fn optimizer_fix(label: &str) -> String {
    let name = label
        .strip_prefix("Optimizer.step#")
        .or_else(|| label.strip_prefix("Optimizer.zero_grad#"))
        .and_then(|rest| rest.split('.').next())
        .filter(|name| !name.is_empty());
    match name {
        Some(name) if FUSED_OPTIMIZERS.contains(&name) => format!(
            "The optimizer step runs op by op on the host: construct it with `torch.optim.{name}(..., fused=True)` \
             (or `foreach=True`), or capture the step in a CUDA graph."
        ),
        Some(name) if FOREACH_OPTIMIZERS.contains(&name) => format!(
            "The optimizer step runs op by op on the host: construct it with `torch.optim.{name}(..., foreach=True)`, \
             or capture the step in a CUDA graph."
        ),
        Some(name) => format!(
            "The optimizer step (`{name}`) runs op by op on the host: use a multi-tensor (foreach) or fused \
             implementation of it if it has one, or compile the step (`torch.compile`) or capture it in a CUDA graph."
        ),
        None => "The optimizer step runs op by op on the host: use its multi-tensor (`foreach=True`) or fused \
                 (`fused=True`) implementation where torch.optim has one, or capture the step in a CUDA graph."
            .into(),
    }
}

/// One gap.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gap {
    /// GPU ordinal.
    pub device: i64,
    /// Start (end of the previous op), ps from the profile start.
    pub start_ps: i64,
    /// Length, ps.
    pub duration_ps: i64,
    /// Why.
    pub cause: GapCause,
    /// The event that gives the cause (call, range, op or frame name; `—` for none).
    pub activity: String,
    /// The op that ended the gap.
    pub next_op: String,
    /// Whether the next op's launch call was found (otherwise the busiest launching
    /// thread is examined).
    pub launch_found: bool,
    /// Where the thread was.
    pub location: Location,
}

/// Gaps of one device.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DeviceGaps {
    /// GPU ordinal.
    pub device: i64,
    /// Gaps above the threshold.
    pub count: u64,
    /// Their total length, ps.
    pub total_ps: i64,
    /// Count and total per cause.
    pub by_cause: Vec<(GapCause, u64, i64)>,
    /// The longest gaps.
    pub top: Vec<Gap>,
}

/// All gaps longer than `threshold_ps` per device, and one occurrence per gap (time
/// lost = its length).
pub fn gaps(view: &ProfileView<'_>, threshold_ps: i64) -> (Vec<DeviceGaps>, Vec<Occurrence>) {
    let fallback = busiest_launcher(view);
    let mut summaries = Vec::new();
    let mut occurrences = Vec::new();
    for device in &view.devices {
        let mut all: Vec<Gap> = device_gaps(device, threshold_ps)
            .map(|(start, end, next)| explain(view, device, start, end, next, fallback))
            .collect();
        let mut by_cause: BTreeMap<GapCause, (u64, i64)> = BTreeMap::new();
        for gap in &all {
            let entry = by_cause.entry(gap.cause).or_default();
            entry.0 += 1;
            entry.1 += gap.duration_ps;
            occurrences.push(Occurrence {
                kind: FindingKind::GpuGap,
                what: if gap.activity == "—" {
                    gap.cause.describe().to_string()
                } else {
                    format!("{}: {}", gap.cause.describe(), gap.activity)
                },
                device: Some(device.ordinal),
                location: gap.location.clone(),
                time_lost_ps: gap.duration_ps,
                bytes: 0,
                fix: gap.cause.fix(&gap.activity),
            });
        }
        let mut by_cause: Vec<(GapCause, u64, i64)> = by_cause.into_iter().map(|(c, (n, t))| (c, n, t)).collect();
        by_cause.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        let count = all.len() as u64;
        let total_ps = all.iter().map(|g| g.duration_ps).sum();
        all.sort_by(|a, b| b.duration_ps.cmp(&a.duration_ps).then(a.start_ps.cmp(&b.start_ps)));
        all.truncate(TOP_GAPS);
        summaries.push(DeviceGaps { device: device.ordinal, count, total_ps, by_cause, top: all });
    }
    (summaries, occurrences)
}

/// `(gap start, gap end, index of the op that ends it)` for every gap in the union of
/// the device's work longer than `threshold_ps`.
fn device_gaps<'d>(device: &'d Device<'_>, threshold_ps: i64) -> impl Iterator<Item = (i64, i64, usize)> + 'd {
    let busy =
        intervals::merge(device.ops.iter().filter(|op| op.is_work()).map(|op| (op.start_ps, op.end_ps)).collect());
    let pairs: Vec<(i64, i64)> =
        busy.windows(2).map(|w| (w[0].1, w[1].0)).filter(|(a, b)| b - a > threshold_ps).collect();
    pairs.into_iter().filter_map(move |(start, end)| {
        // The ops are sorted by start: the first work op starting at `end` ends the gap.
        let first = device.ops.partition_point(|op| op.start_ps < end);
        let next = (first..device.ops.len())
            .take_while(|&i| device.ops[i].start_ps == end)
            .find(|&i| device.ops[i].is_work())?;
        Some((start, end, next))
    })
}

/// The thread with the most launch calls (examined when a gap's launch is unknown).
fn busiest_launcher(view: &ProfileView<'_>) -> Option<u32> {
    let launches = |t: &Thread<'_>| t.events.iter().filter(|e| e.kind == HostKind::Runtime(Call::Launch)).count();
    view.threads
        .iter()
        .enumerate()
        .max_by_key(|(i, t)| (launches(t), std::cmp::Reverse(*i)))
        .filter(|(_, t)| launches(t) > 0)
        .map(|(i, _)| i as u32)
}

/// Explains one gap.
fn explain(
    view: &ProfileView<'_>,
    device: &Device<'_>,
    start: i64,
    end: i64,
    next: usize,
    fallback: Option<u32>,
) -> Gap {
    let next_op = &device.ops[next];
    let launch = view.runtime_call(next_op.correlation);
    let mut gap = Gap {
        device: device.ordinal,
        start_ps: start,
        duration_ps: end - start,
        cause: GapCause::NothingRecorded,
        activity: "—".into(),
        next_op: next_op.name.to_string(),
        launch_found: launch.is_some(),
        location: Location::default(),
    };
    let Some(t) = launch.map(|at| at.0).or(fallback) else { return gap };
    let Some(thread) = view.threads.get(t as usize) else { return gap };
    if let Some(at) = launch
        && let Some(call) = view.event(at)
        && call.end_ps <= start
    {
        gap.cause = GapCause::QueuedDependency;
        gap.activity = format!("{} before the gap", call.name);
        gap.location = Location::of(view, at);
        return gap;
    }
    // Time per (cause, naming event); the gap takes the one covering most of it.
    let mut by_class: BTreeMap<(GapCause, Option<u32>, &str), i64> = BTreeMap::new();
    for (a, b, innermost) in thread.innermost_segments(start, end) {
        let (cause, named_by, activity) = classify(thread, innermost);
        *by_class.entry((cause, named_by, activity)).or_default() += b - a;
    }
    // Same-named events (many short `aten::empty`) add up under their name.
    let mut by_name: BTreeMap<(GapCause, &str), (i64, Option<u32>)> = BTreeMap::new();
    for ((cause, named_by, activity), time) in by_class {
        let entry = by_name.entry((cause, activity)).or_insert((0, named_by));
        entry.0 += time;
    }
    if let Some(((cause, activity), (_, named_by))) =
        by_name.into_iter().max_by(|a, b| a.1.0.cmp(&b.1.0).then(b.0.cmp(&a.0)))
    {
        gap.cause = cause;
        gap.activity = activity.to_string();
        gap.location = match named_by {
            Some(index) => Location::of(view, (t, index)),
            None => Location { thread: Some(thread.name.clone()), ..Location::default() },
        };
    }
    gap
}

/// The cause of an instant whose innermost event on the thread is `innermost`, and
/// the event that names it: from the innermost outwards, a blocking call, a launch
/// call, the DataLoader or the optimizer; otherwise the outermost framework op (what
/// Python called), else the innermost Python frame or range.
fn classify<'a>(thread: &Thread<'a>, innermost: Option<u32>) -> (GapCause, Option<u32>, &'a str) {
    let Some(index) = innermost else { return (GapCause::NothingRecorded, None, "—") };
    let mut outermost_op: Option<(u32, &'a str)> = None;
    let mut innermost_other: Option<(u32, &'a str)> = None;
    for (i, event) in thread.chain(index) {
        match event.kind {
            HostKind::Runtime(call) if call.blocks_host() => return (GapCause::Synchronization, Some(i), event.name),
            HostKind::Runtime(Call::Launch | Call::CopyAsync | Call::MemsetAsync) => {
                return (GapCause::KernelLaunch, Some(i), event.name);
            }
            HostKind::Step | HostKind::Runtime(_) => {}
            _ if kineto::is_dataloader_next(event.name) || kineto::is_dataloader_frame(event.name) => {
                return (GapCause::Dataloader, Some(i), event.name);
            }
            _ if kineto::is_optimizer(event.name) => return (GapCause::Optimizer, Some(i), event.name),
            HostKind::CpuOp => outermost_op = Some((i, event.name)),
            HostKind::Python | HostKind::Annotation => {
                innermost_other.get_or_insert((i, event.name));
            }
        }
    }
    match outermost_op.or(innermost_other) {
        Some((i, name)) => (GapCause::CpuOp, Some(i), name),
        None => (GapCause::NothingRecorded, None, "—"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optimizer_advice_names_the_optimizer_in_use() {
        assert!(optimizer_fix("Optimizer.step#AdamW.step").contains("torch.optim.AdamW(..., fused=True)"));
        assert!(
            optimizer_fix("Optimizer.zero_grad#RMSprop.zero_grad").contains("torch.optim.RMSprop(..., foreach=True)")
        );
        let shampoo = optimizer_fix("Optimizer.step#Shampoo.step");
        assert!(shampoo.contains("(`Shampoo`)") && !shampoo.contains("torch.optim.Adam"), "{shampoo}");
        assert!(optimizer_fix("torch/optim/adam.py(213): step").contains("where torch.optim has one"));
    }
}
