//! Per-step events: the step markers and typed spans each group contributes, from
//! host threads (`ConvertHostThreadsXPlaneToStepEvents`) and GPU streams
//! (`ConvertDeviceTraceXPlaneToStepEvents`, with XProf's derived `Steps` line).
//!
//! The one design decision to know: whether host events join device steps is the
//! [`Breakdown`](super::Breakdown) choice — current XProf uses host events only on
//! CPU-only profiles; the classic TF-guide breakdown merges them on GPU too.

use std::collections::BTreeMap;

use mlprof_model::fxhash::FxSet;

use mlprof_model::{Host, Plane, names};

use super::event_span::{EventType, TypedSpan};
use crate::grouping::{HostGroups, NO_GROUP, is_explicit_step_marker};
use crate::tf_op::{OpCategory, is_infeed_enqueue, parse_tf_op, starts_with_ignore_case};
use crate::xstats::{self, StatSlots};

/// A step marker: the span a step event covers.
#[derive(Clone, Debug, PartialEq)]
pub struct StepMarker {
    /// Whether it comes from a device (derived `Steps` line) rather than the host.
    pub on_device: bool,
    /// Start (ps).
    pub begin_ps: i64,
    /// End (ps).
    pub end_ps: i64,
}

/// Bytes and time of one direction of device memory copies in a step.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Transfers {
    /// Number of copies.
    pub occurrences: u64,
    /// Total copy time (µs).
    pub time_us: f64,
    /// Total bytes copied.
    pub bytes: u64,
}

/// Everything one step (group) contributes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepDetails {
    /// Step markers.
    pub markers: Vec<StepMarker>,
    /// Typed spans (overlapping until made non-overlapping).
    pub events: Vec<TypedSpan>,
    /// The step's name (`train 6`), when grouping gave one.
    pub step_name: String,
    /// Host→device, device→host, device→device copies.
    pub transfers: [Transfers; 3],
}

impl StepDetails {
    /// Appends `other`'s markers, events and transfers (XProf's `Combine`).
    pub fn combine(&mut self, other: &StepDetails) {
        self.markers.extend_from_slice(&other.markers);
        self.events.extend_from_slice(&other.events);
        for (mine, theirs) in self.transfers.iter_mut().zip(other.transfers) {
            mine.occurrences += theirs.occurrences;
            mine.time_us += theirs.time_us;
            mine.bytes += theirs.bytes;
        }
        if self.step_name.is_empty() {
            self.step_name.clone_from(&other.step_name);
        }
    }

    /// The step's time span: the longest device marker, unless the longest host
    /// marker encloses it (or there is no device marker).
    pub fn step_span(&self) -> (i64, i64) {
        let longest = |device: bool| {
            self.markers.iter().filter(|m| m.on_device == device).fold((0i64, 0i64), |best, m| {
                if m.end_ps - m.begin_ps > best.1 - best.0 { (m.begin_ps, m.end_ps) } else { best }
            })
        };
        let host = longest(false);
        let device = longest(true);
        if device.1 - device.0 == 0 {
            return host;
        }
        if host.0 <= device.0 && device.1 <= host.1 { host } else { device }
    }
}

/// Step details by group id.
pub type StepEvents = BTreeMap<i64, StepDetails>;

/// Adds `src` into `dst` step by step (XProf's `UnionCombineStepEvents`).
pub fn union_combine(src: StepEvents, dst: &mut StepEvents) {
    // Into nothing, the union is `src` itself: moved, not copied (a CPU profile's host
    // steps hold millions of spans).
    if dst.is_empty() {
        *dst = src;
        return;
    }
    for (group, details) in src {
        dst.entry(group).or_default().combine(&details);
    }
}

const STATS: [&str; 9] =
    ["correlation_id", "step_name", "_ipl_stage_name", "_ct", "_c", "_pt", "_p", "tensor_shapes", "memcpy_details"];
const CORRELATION_ID: usize = 0;
const STEP_NAME: usize = 1;
const STAGE_NAME: usize = 2;
const CONSUMER_TYPE: usize = 3;
const CONSUMER_ID: usize = 4;
const PRODUCER_TYPE: usize = 5;
const PRODUCER_ID: usize = 6;
const TENSOR_SHAPES: usize = 7;
const MEMCPY_DETAILS: usize = 8;

/// Host step events of `plane` (the `/host:CPU` plane at index `plane_index`).
/// `device_steps` restricts to groups seen on a device and classifies launches as
/// "Kernel launch" (the classic GPU breakdown); `None` is XProf's CPU-only path.
pub fn host_step_events(
    plane: &Plane,
    plane_index: usize,
    groups: &HostGroups,
    device_steps: Option<&StepEvents>,
) -> StepEvents {
    let slots = StatSlots::new(plane, STATS);
    // Input-pipeline stages (`_ipl_stage_name`) are the only reason to know which
    // events descend from an async producer; a plane without them skips that work.
    let has_stages = slots.resolves(STAGE_NAME);
    let mut async_parents: FxSet<(i64, i64)> = FxSet::default();
    for line in plane.lines.iter().filter(|_| has_stages) {
        for event in line.iter() {
            let row = slots.row(plane, &event);
            if let Some(pair) = row.int(PRODUCER_TYPE).zip(row.int(PRODUCER_ID)) {
                async_parents.insert(pair);
            }
        }
    }
    // A grouped event's stats tell whether it names its step (`step_name`) and, on a
    // GPU host, whether it launches device work (`correlation_id`); without either,
    // its row is never built.
    let needs_row = slots.resolves(STEP_NAME) || (device_steps.is_some() && slots.resolves(CORRELATION_ID));
    let event_names: Vec<HostEventName> = plane.event_metadata.iter().map(|m| HostEventName::of(&m.name)).collect();
    let unknown_name = HostEventName::of("");
    // Per group id (ids are dense, below the number of names): its details, once an
    // event of it is met. A vector instead of the map spares a tree search per event.
    let mut by_group: Vec<Option<StepDetails>> = vec![None; groups.names.len()];
    let mut others = StepEvents::new();
    let mut step_names = groups.step_names();
    for (line_index, line) in plane.lines.iter().enumerate() {
        // Open input-pipeline-stage ancestors: (end_ps, is_stage, is_stage_descendant).
        let mut stack: Vec<(i64, bool, bool)> = Vec::new();
        let line_groups = groups.line(plane_index, line_index);
        for event in line.iter() {
            let name = event_names.get(event.metadata_index() as usize).copied().unwrap_or(unknown_name);
            let (begin, end) = (event.start_ps(), event.end_ps());
            let mut is_root_stage = false;
            if has_stages {
                let row = slots.row(plane, &event);
                let stage_name = row.str(STAGE_NAME, plane, &event).unwrap_or("");
                let consumer = row.int(CONSUMER_TYPE).zip(row.int(CONSUMER_ID));
                while stack.last().is_some_and(|&(open_end, _, _)| open_end < end) {
                    stack.pop();
                }
                let inherited = stack.last().is_some_and(|&(_, is_stage, descendant)| is_stage || descendant);
                let descendant = inherited || consumer.is_some_and(|pair| async_parents.contains(&pair));
                stack.push((end, !stage_name.is_empty(), descendant));
                is_root_stage = !stage_name.is_empty() && !descendant;
            }

            let group = line_groups.get(event.index()).copied().unwrap_or(NO_GROUP);
            if group == NO_GROUP {
                continue;
            }
            let group = i64::from(group);
            if let Some(device) = device_steps
                && !device.contains_key(&group)
            {
                continue;
            }
            // Read only for grouped events (the stage pass above reads its own), and
            // only where a stat it holds can matter.
            let row = needs_row.then(|| slots.row(plane, &event));
            let step_name = step_names.has(plane_index, line_index, event.index())
                || row.as_ref().and_then(|row| row.str(STEP_NAME, plane, &event)).is_some_and(|s| !s.is_empty());
            let slot = usize::try_from(group).ok().and_then(|index| by_group.get_mut(index));
            let details = match slot {
                Some(slot) => slot.get_or_insert_with(StepDetails::default),
                None => others.entry(group).or_default(),
            };
            if name.is_step_marker || step_name {
                details.markers.push(StepMarker { on_device: false, begin_ps: begin, end_ps: end });
            } else if name.is_real_cpu_compute {
                let has_correlation = row.as_ref().is_some_and(|row| row.int(CORRELATION_ID).is_some());
                let kind = name.classify(device_steps.is_some(), has_correlation, is_root_stage);
                details.events.push(TypedSpan { kind, begin_ps: begin, end_ps: end });
            }
            if step_name && let Some(group_name) = groups.name_of(group) {
                details.step_name = group_name.to_string();
            }
        }
    }
    let found = by_group.into_iter().enumerate().filter_map(|(group, details)| Some((group as i64, details?)));
    others.extend(found);
    others
}

/// What a host event's name says about it, worked out once per event metadata.
#[derive(Clone, Copy, Debug)]
struct HostEventName {
    /// XProf's explicit step marker (`train…`, `test…`, `TraceContext…`, no `/`).
    is_step_marker: bool,
    /// Not an eager/function wrapper or a step marker: its time counts.
    is_real_cpu_compute: bool,
    /// A copy or infeed op: its fixed type.
    copy: Option<EventType>,
    /// `ExecutorState::Process…` (any case).
    is_executor_process: bool,
    /// `IteratorGetNext…` (any case).
    is_get_next: bool,
}

impl HostEventName {
    fn of(name: &str) -> HostEventName {
        let is_step_marker = is_explicit_step_marker(name);
        let is_wrapper = ["EagerExecute", "EagerLocalExecute", "EagerKernelExecute", "FunctionRun"]
            .iter()
            .any(|prefix| name.starts_with(prefix));
        let op = parse_tf_op(name);
        let copy = if is_infeed_enqueue(op.op_type) || op.category == OpCategory::MemcpyHToD {
            Some(EventType::HostToDevice)
        } else if op.category == OpCategory::MemcpyHToH {
            Some(EventType::HostToHost)
        } else {
            None
        };
        HostEventName {
            is_step_marker,
            is_real_cpu_compute: !(is_wrapper || is_step_marker),
            copy,
            is_executor_process: starts_with_ignore_case(name, "ExecutorState::Process"),
            is_get_next: starts_with_ignore_case(name, "IteratorGetNext"),
        }
    }

    /// The event's type in a step (XProf's `ClassifyCpuEvent`).
    fn classify(&self, has_device: bool, has_correlation: bool, is_root_stage: bool) -> EventType {
        if let Some(copy) = self.copy {
            copy
        } else if has_device && (has_correlation || self.is_executor_process) {
            EventType::HostPrepare
        } else if self.is_get_next || is_root_stage {
            EventType::HostWaitInput
        } else {
            EventType::HostCompute
        }
    }
}

/// How a GPU event counts: copies by direction (both XProf's `MemcpyHToD` and
/// CUPTI's current `MemcpyH2D` spellings), NCCL as collectives, else compute
/// (16-bit when its shapes or name say half precision).
pub fn classify_gpu_event(name: &str, tensor_shapes: &str) -> EventType {
    const COPIES: [(&str, &str, EventType); 3] = [
        ("MemcpyHToD", "MemcpyH2D", EventType::HostToDevice),
        ("MemcpyDToH", "MemcpyD2H", EventType::DeviceToHost),
        ("MemcpyDToD", "MemcpyD2D", EventType::DeviceToDevice),
    ];
    for (xprof, cupti, kind) in COPIES {
        if starts_with_ignore_case(name, xprof) || starts_with_ignore_case(name, cupti) {
            return kind;
        }
    }
    if starts_with_ignore_case(name, "MemcpyP2P") {
        return EventType::DeviceToDevice;
    }
    if starts_with_ignore_case(name, "nccl") {
        return EventType::DeviceCollectives;
    }
    let half = if tensor_shapes.is_empty() {
        name.contains("half") || name.contains("fp16")
    } else {
        tensor_shapes.contains("half")
    };
    if half { EventType::DeviceCompute16 } else { EventType::DeviceCompute32 }
}

/// Bytes of a copy from its `memcpy_details` stat: XProf's `num_bytes:N` or
/// current CUPTI's `size:N`.
pub fn memcpy_bytes(details: &str) -> u64 {
    for field in details.split(|c: char| c == '\n' || c.is_whitespace()) {
        let mut parts = field.splitn(2, ':');
        if let (Some(key), Some(value)) = (parts.next(), parts.next())
            && (key == "num_bytes" || key == "size")
            && let Ok(bytes) = value.trim().parse::<u64>()
        {
            return bytes;
        }
    }
    0
}

/// The step events of one GPU plane: markers from XProf's derived `Steps` line
/// (per group, first to last event in time order; grouping has already given
/// ungrouped GPU events the previous group) and typed kernel/copy spans from every
/// stream.
pub fn device_step_events(plane: &Plane, plane_index: usize, groups: &HostGroups) -> StepEvents {
    let slots = StatSlots::new(plane, STATS);
    // All events of the plane in time order, with their (inherited) group.
    let mut order: Vec<(i64, i64, usize, usize)> = Vec::new();
    for (line_index, line) in plane.lines.iter().enumerate() {
        if line.name == names::STEPS_LINE {
            continue;
        }
        for event in line.iter() {
            order.push((event.start_ps(), event.end_ps(), line_index, event.index()));
        }
    }
    order.sort_by_key(|&(start, _, line, index)| (start, line, index));
    let mut inherited: Vec<((usize, usize), i64)> = Vec::with_capacity(order.len());
    let mut result = StepEvents::new();
    let mut current: Option<(i64, i64, i64)> = None;
    for &(start, end, line, index) in &order {
        let Some(group) = groups.group_of(plane_index, line, index) else { continue };
        inherited.push(((line, index), group));
        match &mut current {
            Some((g, _, e)) if *g == group => *e = (*e).max(end),
            _ => {
                if let Some((g, b, e)) = current.take() {
                    push_marker(&mut result, g, b, e);
                }
                current = Some((group, start, end));
            }
        }
    }
    if let Some((g, b, e)) = current {
        push_marker(&mut result, g, b, e);
    }
    let mut events = StepEvents::new();
    for ((line_index, index), group) in inherited {
        let Some(event) = plane.lines[line_index].event(index) else { continue };
        let row = slots.row(plane, &event);
        if row.int(CORRELATION_ID).is_none() {
            continue;
        }
        let name = xstats::event_name(plane, &event);
        let shapes = row.str(TENSOR_SHAPES, plane, &event).unwrap_or("");
        let kind = classify_gpu_event(name, shapes);
        let details = events.entry(group).or_default();
        details.events.push(TypedSpan { kind, begin_ps: event.start_ps(), end_ps: event.end_ps() });
        let direction = match kind {
            EventType::HostToDevice => Some(0),
            EventType::DeviceToHost => Some(1),
            EventType::DeviceToDevice => Some(2),
            _ => None,
        };
        if let Some(direction) = direction {
            let bytes = row.str(MEMCPY_DETAILS, plane, &event).map_or(0, memcpy_bytes);
            let transfer = &mut details.transfers[direction];
            transfer.occurrences += 1;
            transfer.time_us += event.duration_ps() as f64 / 1e6;
            transfer.bytes += bytes;
        }
    }
    // Keep only groups that have both events and markers (IntersectCombine).
    if events.is_empty() {
        return events;
    }
    events.retain(|group, _| result.contains_key(group));
    for (group, details) in events.iter_mut() {
        if let Some(markers) = result.get(group) {
            details.combine(markers);
        }
    }
    for (group, details) in events.iter_mut() {
        if let Some(name) = groups.name_of(*group) {
            details.step_name = name.to_string();
        }
    }
    events
}

fn push_marker(result: &mut StepEvents, group: i64, begin_ps: i64, end_ps: i64) {
    result.entry(group).or_default().markers.push(StepMarker { on_device: true, begin_ps, end_ps });
}

/// Whether `host` has device planes XProf analyses (GPU).
pub fn gpu_planes(host: &Host) -> impl Iterator<Item = (usize, &Plane)> {
    host.planes.iter().enumerate().filter(|(_, plane)| plane.is_gpu())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_both_memcpy_spellings_and_reads_both_byte_fields() {
        assert_eq!(classify_gpu_event("MemcpyHToD", ""), EventType::HostToDevice);
        assert_eq!(classify_gpu_event("MemcpyH2D", ""), EventType::HostToDevice);
        assert_eq!(classify_gpu_event("MemcpyD2H", ""), EventType::DeviceToHost);
        assert_eq!(classify_gpu_event("MemcpyD2D", ""), EventType::DeviceToDevice);
        assert_eq!(classify_gpu_event("ncclAllReduceKernel", ""), EventType::DeviceCollectives);
        assert_eq!(classify_gpu_event("volta_h884gemm_fp16", ""), EventType::DeviceCompute16);
        assert_eq!(classify_gpu_event("ampere_sgemm", "(float[2,3])"), EventType::DeviceCompute32);
        assert_eq!(memcpy_bytes("kind_src:pageable kind_dst:device size:4096 dest:0 async:0"), 4096);
        assert_eq!(memcpy_bytes("num_bytes:128\nkind:HtoD"), 128);
        assert_eq!(memcpy_bytes("garbage"), 0);
    }

    use mlprof_model::{Line, PlaneBuilder, SourceFormat, StatValue};

    /// A host whose `/host:CPU` plane (`builder`) has the one thread `line`, all its
    /// events in group 0, named `name`.
    fn one_step_host(mut builder: PlaneBuilder, line: Line, name: &str) -> (Host, HostGroups) {
        builder.push_line(line);
        let mut host = Host::new("h", "h.xplane.pb", SourceFormat::Xspace);
        host.planes.push(builder.finish());
        let mut groups = HostGroups::none(&host);
        groups.line_mut(0, 0).fill(0);
        groups.names = vec![name.to_string()];
        (host, groups)
    }

    /// One thread, all in group 0: `train` (0–100) encloses `stage_a` (10–40, a root
    /// input-pipeline stage) with `inner` (15–20, no stage name, under a stage) and
    /// `stage_b` (50–60, a stage consuming what `producer` (70–80) produces).
    #[test]
    fn only_input_pipeline_stages_not_under_a_stage_or_a_producer_wait_for_input() {
        let mut builder = PlaneBuilder::new(1, names::HOST_PLANE);
        let [stage, ct, c, pt, p] = ["_ipl_stage_name", "_ct", "_c", "_pt", "_p"].map(|n| builder.stat_key(n));
        let [train, stage_a, inner, stage_b, producer] =
            ["train", "stage_a", "inner", "stage_b", "producer"].map(|n| builder.event_metadata(n, 0, |_| Vec::new()));
        let mut line = Line::new(1, "thread");
        line.push_event(train, 0, 100);
        line.stats.push_str(stage, "map").unwrap();
        line.push_event(stage_a, 10, 30);
        line.push_event(inner, 15, 5);
        line.stats.push_str(stage, "batch").unwrap();
        line.stats.push(ct, StatValue::Int(3));
        line.stats.push(c, StatValue::Int(9));
        line.push_event(stage_b, 50, 10);
        line.stats.push(pt, StatValue::Int(3));
        line.stats.push(p, StatValue::Int(9));
        line.push_event(producer, 70, 10);
        let (host, groups) = one_step_host(builder, line, "train 1");

        let events = host_step_events(&host.planes[0], 0, &groups, None);
        let step = &events[&0];
        assert_eq!(step.markers, vec![StepMarker { on_device: false, begin_ps: 0, end_ps: 100 }]);
        let kinds: Vec<(i64, EventType)> = step.events.iter().map(|span| (span.begin_ps, span.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (10, EventType::HostWaitInput),
                (15, EventType::HostCompute),
                (50, EventType::HostCompute),
                (70, EventType::HostCompute)
            ]
        );
    }

    /// The stats a grouped event's row is read for: `step_name` makes the event a
    /// step marker, and on a GPU host `correlation_id` makes it a launch (prepare
    /// time), with or without a `step_name` stat on the plane; on a CPU-only host the
    /// launch is plain compute.
    #[test]
    fn step_name_and_correlation_stats_are_read_off_grouped_events() {
        let host_with = |named: bool| {
            let mut builder = PlaneBuilder::new(1, names::HOST_PLANE);
            let correlation = builder.stat_key("correlation_id");
            let [outer, launch, compute] =
                ["outer", "cudaLaunchKernel", "compute"].map(|n| builder.event_metadata(n, 0, |_| Vec::new()));
            let mut line = Line::new(1, "thread");
            if named {
                let step_name = builder.stat_key("step_name");
                line.stats.push_str(step_name, "step 7").unwrap();
            }
            line.push_event(outer, 0, 100);
            line.stats.push(correlation, StatValue::Int(5));
            line.push_event(launch, 10, 20);
            line.push_event(compute, 40, 20);
            one_step_host(builder, line, "step 7")
        };
        let kinds = |events: &StepEvents| -> Vec<(i64, EventType)> {
            events[&0].events.iter().map(|span| (span.begin_ps, span.kind)).collect()
        };
        let device_steps = StepEvents::from([(0, StepDetails::default())]);
        for named in [true, false] {
            let (host, groups) = host_with(named);
            let cpu_only = host_step_events(&host.planes[0], 0, &groups, None);
            let markers = if named { vec![StepMarker { on_device: false, begin_ps: 0, end_ps: 100 }] } else { vec![] };
            assert_eq!(cpu_only[&0].markers, markers);
            assert_eq!(cpu_only[&0].step_name, if named { "step 7" } else { "" });
            let outer = if named { vec![] } else { vec![(0, EventType::HostCompute)] };
            let expected = [outer.clone(), vec![(10, EventType::HostCompute), (40, EventType::HostCompute)]].concat();
            assert_eq!(kinds(&cpu_only), expected);

            let with_device = host_step_events(&host.planes[0], 0, &groups, Some(&device_steps));
            assert_eq!(with_device[&0].markers, markers);
            let expected = [outer, vec![(10, EventType::HostPrepare), (40, EventType::HostCompute)]].concat();
            assert_eq!(kinds(&with_device), expected, "step_name stat on the plane: {named}");
        }
    }
}
