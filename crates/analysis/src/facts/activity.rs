//! The source-neutral activity view the transfers findings read: host threads with
//! their events nested (each event knows its enclosing event), GPU devices with their
//! ops, the runtime call behind each correlation id, and the number of steps. Each
//! format's adapter fills it ([`super::activity_view`]); nothing after them looks at a
//! format.
//!
//! The design decision to know: names are borrowed from the model (`&'a str`), and
//! events are sorted by start (longest first on ties) once, so nesting is a stack walk
//! and "what covered time t" is a binary search plus a parent walk.

use std::collections::HashMap;

use mlprof_model::{Plane, names};

use crate::kineto::Copy;
use crate::xstats;

/// What a host event is, as far as this tool cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostKind {
    /// A framework op (`cpu_op` in Kineto; any other host event in XSpace).
    CpuOp,
    /// A Python frame (`python_function`).
    Python,
    /// A `record_function` range (DataLoader, optimizer, user ranges).
    Annotation,
    /// A step marker (`ProfilerStep#N`): context only, never "what the thread did".
    Step,
    /// A CUDA / HIP runtime or driver call.
    Runtime(Call),
}

/// The kind of a runtime or driver call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// Enqueues a kernel (or a graph, or a host function).
    Launch,
    /// `cudaMemcpyAsync` and friends.
    CopyAsync,
    /// `cudaMemcpy` and friends: returns when the copy is done.
    CopySync,
    /// `cudaMemsetAsync` and friends.
    MemsetAsync,
    /// `cudaMemset` and friends: returns when the memset is done.
    MemsetSync,
    /// Blocks until device work completes (`cudaStreamSynchronize`, …).
    Sync,
    /// Anything else (`cudaEventRecord`, `cudaStreamWaitEvent`, `cudaGetDevice`, …).
    Other,
}

impl Call {
    /// The kind of the runtime or driver call named `name`.
    pub fn of(name: &str) -> Call {
        use crate::kineto::{is_async_copy_call, is_blocking_sync_call, is_launch, is_memset_call, is_sync_copy_call};
        if is_blocking_sync_call(name) {
            Call::Sync
        } else if is_sync_copy_call(name) {
            if is_memset_call(name) { Call::MemsetSync } else { Call::CopySync }
        } else if is_async_copy_call(name) {
            if is_memset_call(name) { Call::MemsetAsync } else { Call::CopyAsync }
        } else if is_launch(name) {
            Call::Launch
        } else {
            Call::Other
        }
    }

    /// Whether the call blocks the host until device work is done.
    pub fn blocks_host(self) -> bool {
        matches!(self, Call::Sync | Call::CopySync | Call::MemsetSync)
    }
}

/// One host event.
#[derive(Clone, Copy, Debug)]
pub struct HostEvent<'a> {
    /// Name.
    pub name: &'a str,
    /// Start, ps from the profile start.
    pub start_ps: i64,
    /// End, ps.
    pub end_ps: i64,
    /// Kind.
    pub kind: HostKind,
    /// Correlation id linking a runtime call to the GPU op it enqueued.
    pub correlation: Option<i64>,
    /// Index of the innermost enclosing event on the same thread.
    pub parent: Option<u32>,
}

impl HostEvent<'_> {
    /// Duration in ps.
    pub fn duration_ps(&self) -> i64 {
        self.end_ps - self.start_ps
    }
}

/// One host thread: its events sorted by start (longest first on ties), nested.
#[derive(Clone, Debug, Default)]
pub struct Thread<'a> {
    /// The thread's name as the profile shows it.
    pub name: String,
    /// Events, sorted, with parents set.
    pub events: Vec<HostEvent<'a>>,
}

impl<'a> Thread<'a> {
    /// A thread from unsorted events (parents are computed here).
    pub fn new(name: String, mut events: Vec<HostEvent<'a>>) -> Thread<'a> {
        events.sort_by(|a, b| a.start_ps.cmp(&b.start_ps).then(b.end_ps.cmp(&a.end_ps)));
        let mut stack: Vec<u32> = Vec::new();
        for index in 0..events.len() {
            let (start, end) = (events[index].start_ps, events[index].end_ps);
            while let Some(&top) = stack.last() {
                let outer = &events[top as usize];
                if outer.start_ps <= start && end <= outer.end_ps {
                    break;
                }
                stack.pop();
            }
            events[index].parent = stack.last().copied();
            stack.push(index as u32);
        }
        Thread { name, events }
    }

    /// The event at `index` and its enclosing events, innermost first.
    pub fn chain(&self, index: u32) -> impl Iterator<Item = (u32, &HostEvent<'a>)> + '_ {
        let mut next = Some(index);
        std::iter::from_fn(move || {
            let current = next?;
            let event = self.events.get(current as usize)?;
            next = event.parent;
            Some((current, event))
        })
    }

    /// The innermost event covering time `t_ps` (start ≤ t < end), if any.
    pub fn innermost_at(&self, t_ps: i64) -> Option<u32> {
        let last_started = self.events.partition_point(|e| e.start_ps <= t_ps).checked_sub(1)?;
        self.chain(last_started as u32).find(|(_, e)| e.end_ps > t_ps).map(|(i, _)| i)
    }

    /// Splits `[from_ps, to_ps)` into segments by the innermost event covering each
    /// instant: `(segment start, segment end, innermost event)`; `None` where no event
    /// covers the thread.
    pub fn innermost_segments(&self, from_ps: i64, to_ps: i64) -> Vec<(i64, i64, Option<u32>)> {
        let mut segments = Vec::new();
        let mut stack: Vec<u32> = match self.innermost_at(from_ps) {
            Some(index) => {
                let mut chain: Vec<u32> = self.chain(index).map(|(i, _)| i).collect();
                chain.reverse();
                chain
            }
            None => Vec::new(),
        };
        let mut next = self.events.partition_point(|e| e.start_ps <= from_ps);
        let mut t = from_ps;
        let emit = |segments: &mut Vec<(i64, i64, Option<u32>)>, a: i64, b: i64, event: Option<u32>| {
            if b > a {
                segments.push((a, b, event));
            }
        };
        loop {
            let boundary = match self.events.get(next) {
                Some(event) if event.start_ps < to_ps => event.start_ps,
                _ => to_ps,
            };
            while let Some(&top) = stack.last() {
                let end = self.events[top as usize].end_ps;
                if end > boundary {
                    break;
                }
                emit(&mut segments, t, end.max(t), Some(top));
                t = t.max(end);
                stack.pop();
            }
            emit(&mut segments, t, boundary, stack.last().copied());
            t = t.max(boundary);
            if boundary >= to_ps {
                break;
            }
            stack.push(next as u32);
            next += 1;
        }
        segments
    }

    /// The innermost framework op enclosing (or being) event `index`.
    pub fn enclosing_op(&self, index: u32) -> Option<&HostEvent<'a>> {
        self.chain(index).map(|(_, e)| e).find(|e| e.kind == HostKind::CpuOp)
    }

    /// The outermost framework op enclosing (or being) event `index`.
    pub fn outermost_op(&self, index: u32) -> Option<&HostEvent<'a>> {
        self.chain(index).map(|(_, e)| e).filter(|e| e.kind == HostKind::CpuOp).last()
    }

    /// The Python frames enclosing event `index`, innermost first, at most `max`.
    pub fn python_stack(&self, index: u32, max: usize) -> Vec<String> {
        self.chain(index)
            .filter(|(_, e)| e.kind == HostKind::Python)
            .take(max)
            .map(|(_, e)| e.name.to_string())
            .collect()
    }
}

/// What a GPU op is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GpuKind {
    /// A kernel (compute or communication).
    Kernel,
    /// A memory copy.
    Copy(Copy),
    /// A memset.
    Memset,
    /// A synchronisation the device records (Kineto `cuda_sync`: `Stream Sync`, …).
    Sync,
}

/// One GPU op.
#[derive(Clone, Copy, Debug)]
pub struct GpuOp<'a> {
    /// Name.
    pub name: &'a str,
    /// Stream (line id).
    pub stream: i64,
    /// Start, ps.
    pub start_ps: i64,
    /// End, ps.
    pub end_ps: i64,
    /// Kind.
    pub kind: GpuKind,
    /// Bytes copied or set.
    pub bytes: Option<i64>,
    /// Correlation id of the runtime call that enqueued it.
    pub correlation: Option<i64>,
    /// Whether the source says the copy was synchronous (XSpace `memcpy_details`
    /// `async:0`); `false` when unknown.
    pub synchronous: bool,
}

impl GpuOp<'_> {
    /// Duration in ps.
    pub fn duration_ps(&self) -> i64 {
        self.end_ps - self.start_ps
    }

    /// Whether the op is device work (kernel, copy, memset), not a recorded wait.
    pub fn is_work(&self) -> bool {
        !matches!(self.kind, GpuKind::Sync)
    }
}

/// One GPU device and its ops.
#[derive(Clone, Debug, Default)]
pub struct Device<'a> {
    /// Device ordinal (`/device:GPU:N`).
    pub ordinal: i64,
    /// Device name (`gpu_device_name` plane stat), when the profile has it.
    pub name: Option<String>,
    /// Memory bandwidth the profile states (XSpace `memory_bandwidth`), GB/s.
    pub stated_memory_gbps: Option<f64>,
    /// Ops sorted by start.
    pub ops: Vec<GpuOp<'a>>,
}

impl<'a> Device<'a> {
    /// The device of GPU plane `plane` with `ops` (`None` when there are none); the
    /// ordinal comes from the plane name, the name from its `gpu_device_name` stat.
    pub fn from_plane(plane: &Plane, ops: Vec<GpuOp<'a>>, stated_memory_gbps: Option<f64>) -> Option<Device<'a>> {
        if ops.is_empty() {
            return None;
        }
        let name = plane
            .plane_stat("gpu_device_name")
            .and_then(|value| xstats::as_str(plane, &plane.metadata_stats, value))
            .map(str::to_string);
        Some(Device { ordinal: names::device_ordinal(&plane.name).unwrap_or(plane.id), name, stated_memory_gbps, ops })
    }
}

/// A host's events as the findings read them.
#[derive(Clone, Debug, Default)]
pub struct ProfileView<'a> {
    /// Host threads.
    pub threads: Vec<Thread<'a>>,
    /// GPU devices (ordinal order).
    pub devices: Vec<Device<'a>>,
    /// Number of steps (0: no step markers).
    pub steps: u64,
    /// How steps were counted (for the report).
    pub step_source: &'static str,
    runtime_by_correlation: HashMap<i64, (u32, u32)>,
}

/// Where a host event lives: thread index and event index.
pub type HostRef = (u32, u32);

impl<'a> ProfileView<'a> {
    /// Assembles the view and indexes runtime calls by correlation id.
    pub fn new(threads: Vec<Thread<'a>>, mut devices: Vec<Device<'a>>, steps: u64, step_source: &'static str) -> Self {
        let mut runtime_by_correlation = HashMap::new();
        for (t, thread) in threads.iter().enumerate() {
            for (e, event) in thread.events.iter().enumerate() {
                if let (HostKind::Runtime(_), Some(correlation)) = (event.kind, event.correlation) {
                    runtime_by_correlation.insert(correlation, (t as u32, e as u32));
                }
            }
        }
        for device in &mut devices {
            device.ops.sort_by_key(|op| (op.start_ps, op.end_ps));
        }
        devices.sort_by_key(|d| d.ordinal);
        ProfileView { threads, devices, steps, step_source, runtime_by_correlation }
    }

    /// The runtime call with correlation id `correlation`.
    pub fn runtime_call(&self, correlation: Option<i64>) -> Option<HostRef> {
        self.runtime_by_correlation.get(&correlation?).copied()
    }

    /// The host event at `at`.
    pub fn event(&self, at: HostRef) -> Option<&HostEvent<'a>> {
        self.threads.get(at.0 as usize)?.events.get(at.1 as usize)
    }

    /// The thread of `at`.
    pub fn thread(&self, at: HostRef) -> Option<&Thread<'a>> {
        self.threads.get(at.0 as usize)
    }

    /// The GPU ops enqueued by each runtime call, by correlation id.
    pub fn gpu_ops_by_correlation(&self) -> HashMap<i64, Vec<(usize, usize)>> {
        let mut map: HashMap<i64, Vec<(usize, usize)>> = HashMap::new();
        for (d, device) in self.devices.iter().enumerate() {
            for (o, op) in device.ops.iter().enumerate() {
                if let Some(correlation) = op.correlation {
                    map.entry(correlation).or_default().push((d, o));
                }
            }
        }
        map
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, start_ps: i64, end_ps: i64, kind: HostKind) -> HostEvent<'_> {
        HostEvent { name, start_ps, end_ps, kind, correlation: None, parent: None }
    }

    #[test]
    fn nesting_and_innermost_segments() {
        let thread = Thread::new(
            "main".into(),
            vec![
                event("launch", 30, 40, HostKind::Runtime(Call::Launch)),
                event("op", 20, 60, HostKind::CpuOp),
                event("frame", 0, 100, HostKind::Python),
            ],
        );
        assert_eq!(thread.events[2].parent, Some(1));
        assert_eq!(thread.innermost_at(35), Some(2));
        assert_eq!(thread.innermost_at(150), None);
        let segments = thread.innermost_segments(10, 120);
        assert_eq!(
            segments,
            vec![
                (10, 20, Some(0)),
                (20, 30, Some(1)),
                (30, 40, Some(2)),
                (40, 60, Some(1)),
                (60, 100, Some(0)),
                (100, 120, None)
            ]
        );
        assert_eq!(thread.enclosing_op(2).map(|e| e.name), Some("op"));
        assert_eq!(thread.python_stack(2, 3), vec!["frame".to_string()]);
    }
}
