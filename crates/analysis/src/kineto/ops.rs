//! Which PyTorch op each Kineto host event belongs to and which op launched each GPU
//! activity: the nesting of host ops on a thread, and the join of kernels, copies and
//! memsets to their `cpu_op`.
//!
//! The one design decision to know: host ops nest by start time, not by XProf's
//! begin/end replay. Kineto writes `ts` and `dur` rounded separately to the
//! nanosecond, so a child can end a nanosecond after its parent; XProf's op stack would
//! drop such a child, here it stays nested in the op it starts in. A GPU activity goes
//! to the `cpu_op` with its `External id`, else (`External id` of an annotation, or a
//! sampled trace whose ids do not match) to the innermost `cpu_op` around the runtime
//! call with its `correlation`, else to no op.

use std::collections::HashMap;

use mlprof_model::{Event, Host, Line, Plane, names};

use super::{self as kineto, Category};
use crate::xstats::{self, StatKeys};

/// What a host op event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HostOpKind {
    /// A `cpu_op` (ATen op, autograd node): its type is its library ([`kineto::op_library`]).
    CpuOp,
    /// A `cuda_runtime` call (`cudaLaunchKernel`, `cudaMemcpyAsync`, …).
    Runtime,
    /// A `cuda_driver` call (`cuLaunchKernel`, …).
    Driver,
}

impl HostOpKind {
    /// The kind of an event of category `category`, `None` when it is no host op
    /// (annotations, Python frames, instants, flows).
    pub(crate) fn of(category: Category) -> Option<HostOpKind> {
        match category {
            Category::CpuOp => Some(HostOpKind::CpuOp),
            Category::CudaRuntime => Some(HostOpKind::Runtime),
            Category::CudaDriver => Some(HostOpKind::Driver),
            _ => None,
        }
    }

    /// The op type shown for an op of this kind named `name`.
    pub(crate) fn op_type(self, name: &str) -> &str {
        match self {
            HostOpKind::CpuOp => kineto::op_library(name),
            HostOpKind::Runtime => RUNTIME_TYPE,
            HostOpKind::Driver => DRIVER_TYPE,
        }
    }
}

/// The op type of CUDA (or HIP) runtime calls in the host op database.
pub const RUNTIME_TYPE: &str = "CUDA runtime";

/// The op type of CUDA driver calls in the host op database.
pub const DRIVER_TYPE: &str = "CUDA driver";

/// One host op occurrence of a thread, with its innermost enclosing op.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThreadOp {
    /// Index of the event in its line.
    pub event: usize,
    /// What the event is.
    pub kind: HostOpKind,
    /// Start, picoseconds.
    pub start_ps: i64,
    /// Duration, picoseconds (never negative).
    pub duration_ps: i64,
    /// Position in the thread's op list of the innermost op this one starts in.
    pub parent: Option<usize>,
}

impl ThreadOp {
    /// End, picoseconds.
    pub fn end_ps(&self) -> i64 {
        self.start_ps.saturating_add(self.duration_ps)
    }
}

/// The host ops of `line` (cpu ops, runtime and driver calls) sorted by start, longer
/// first at equal starts, each with the innermost op it starts in.
pub(crate) fn thread_ops(line: &Line, categories: &[Category]) -> Vec<ThreadOp> {
    let mut ops: Vec<ThreadOp> = line
        .iter()
        .filter_map(|event| {
            let kind = HostOpKind::of(kineto::category_of(categories, &event))?;
            Some(ThreadOp {
                event: event.index(),
                kind,
                start_ps: event.start_ps(),
                duration_ps: event.duration_ps().max(0),
                parent: None,
            })
        })
        .collect();
    ops.sort_by_key(|op| (op.start_ps, std::cmp::Reverse(op.duration_ps), op.event));
    let mut stack: Vec<usize> = Vec::new();
    for at in 0..ops.len() {
        let start_ps = ops[at].start_ps;
        while stack.last().is_some_and(|&open| ops[open].end_ps() <= start_ps) {
            stack.pop();
        }
        ops[at].parent = stack.last().copied();
        stack.push(at);
    }
    ops
}

/// The `cpu_op`s of a Kineto host by `External id`, and the innermost `cpu_op` around
/// each runtime / driver call by `correlation`: what a GPU activity is attributed to.
#[derive(Debug, Default)]
pub struct KinetoOpIndex<'h> {
    by_external_id: HashMap<i64, CpuOpRef<'h>>,
    by_correlation: HashMap<i64, CpuOpRef<'h>>,
}

/// A `cpu_op` event of the host plane: its name and where it is.
#[derive(Clone, Copy, Debug)]
struct CpuOpRef<'h> {
    name: &'h str,
    /// Line index in the `/host:CPU` plane.
    line: usize,
    /// Event index in that line.
    event: usize,
}

/// Stat names read off device events, in [`StatKeys`] order.
const DEVICE_STATS: [&str; 2] = ["External id", "correlation_id"];

impl<'h> KinetoOpIndex<'h> {
    /// Indexes the `/host:CPU` plane of `host` (empty for hosts without one).
    pub fn new(host: &'h Host) -> KinetoOpIndex<'h> {
        let mut index = KinetoOpIndex::default();
        let Some(plane) = host.planes.iter().find(|plane| plane.name == names::HOST_PLANE) else {
            return index;
        };
        let categories = kineto::categories(plane);
        let keys = StatKeys::new(plane, DEVICE_STATS);
        for (line_index, line) in plane.lines.iter().enumerate() {
            let ops = thread_ops(line, &categories);
            for op in &ops {
                let Some(event) = line.event(op.event) else { continue };
                if op.kind == HostOpKind::CpuOp {
                    if let Some(id) = xstats::event_int(plane, &event, keys.key(0)) {
                        let name = xstats::event_name(plane, &event);
                        index.by_external_id.entry(id).or_insert(CpuOpRef { name, line: line_index, event: op.event });
                    }
                    continue;
                }
                let Some(correlation) = xstats::event_int(plane, &event, keys.key(1)) else { continue };
                if let Some(cpu_op) = enclosing_cpu_op(plane, line, line_index, &ops, op.parent) {
                    index.by_correlation.entry(correlation).or_insert(cpu_op);
                }
            }
        }
        index
    }

    /// The name of the `cpu_op` that launched `event`, a device event of `plane` whose
    /// stat keys are `keys` (from [`KinetoOpIndex::device_keys`]); `None` when neither
    /// its `External id` nor its `correlation` leads to one.
    pub fn op_of(&self, plane: &Plane, keys: &DeviceKeys, event: &Event<'_>) -> Option<&'h str> {
        self.op_ref(plane, keys, event).map(|op| op.name)
    }

    /// The `cpu_op` that launched `event` as `(name, line, event)`: its name and its
    /// line and event index in the host's `/host:CPU` plane (same rule as
    /// [`KinetoOpIndex::op_of`]).
    pub(crate) fn op_event_of(
        &self,
        plane: &Plane,
        keys: &DeviceKeys,
        event: &Event<'_>,
    ) -> Option<(&'h str, usize, usize)> {
        self.op_ref(plane, keys, event).map(|op| (op.name, op.line, op.event))
    }

    fn op_ref(&self, plane: &Plane, keys: &DeviceKeys, event: &Event<'_>) -> Option<CpuOpRef<'h>> {
        let by_external = xstats::event_int(plane, event, keys.0.key(0)).and_then(|id| self.by_external_id.get(&id));
        by_external
            .or_else(|| xstats::event_int(plane, event, keys.0.key(1)).and_then(|id| self.by_correlation.get(&id)))
            .copied()
    }

    /// The stat keys [`KinetoOpIndex::op_of`] reads on a device plane.
    pub fn device_keys(plane: &Plane) -> DeviceKeys {
        DeviceKeys(StatKeys::new(plane, DEVICE_STATS))
    }
}

/// The stat keys of a device plane that join its events to host ops.
#[derive(Clone, Debug)]
pub struct DeviceKeys(StatKeys<2>);

/// The innermost `cpu_op` among `parent` and its ancestors on line `line_index`.
fn enclosing_cpu_op<'p>(
    plane: &'p Plane,
    line: &Line,
    line_index: usize,
    ops: &[ThreadOp],
    parent: Option<usize>,
) -> Option<CpuOpRef<'p>> {
    let mut at = parent;
    while let Some(position) = at {
        let op = ops.get(position)?;
        if op.kind == HostOpKind::CpuOp {
            let name = line.event(op.event).map(|event| xstats::event_name(plane, &event))?;
            return Some(CpuOpRef { name, line: line_index, event: op.event });
        }
        at = op.parent;
    }
    None
}
