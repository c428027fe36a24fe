//! The step database of PyTorch (Kineto) traces: XProf's step-time categories over
//! the spans of the `ProfilerStep#N` annotations.
//!
//! How it differs from the XSpace path, and why:
//! - A step is the `ProfilerStep#N` span on the host (what PyTorch users call the step
//!   time: consecutive steps tile the timeline), not the device's first-to-last kernel.
//! - Typed spans are assigned to steps by time, not by group: a kernel launched in
//!   step N that runs during step N+1 is device compute of step N+1's time, so every
//!   step's categories add up to its duration and idle device time shows up where it
//!   happened.
//! - Host events always join (there is no "device events only" variant: PyTorch's host
//!   is what launches every kernel, and its DataLoader time is the input time).
//!
//! Which Kineto events feed which [`EventType`] is documented in [`crate::kineto`];
//! in short: DataLoader `__next__` → `HostWaitInput` (Input), launch calls →
//! `HostPrepare` (Kernel launch), `cpu_op` → `HostCompute`, NCCL kernels →
//! `DeviceCollectives`, other kernels and memsets → `DeviceCompute16/32`, copies by
//! direction → `HostToDevice` (Input) / `DeviceToHost` (Output) / `DeviceToDevice`.

use std::collections::HashSet;

use mlprof_model::{Event, Host, Plane, StatValue, names};

use super::event_span::{EVENT_TYPE_COUNT, EventType, TypedSpan, overlap_ps, to_non_overlapped};
use super::step_events::{Transfers, gpu_planes};
use super::{HostSteps, StepInfo};
use crate::grouping::StepSource;
use crate::grouping::profiler_steps::{self, ProfilerStep};
use crate::kineto::{self, Category, CopyDirection};
use crate::xstats;

/// The steps of a Kineto host with `ProfilerStep#N` annotations; `source` says how
/// they were found. Steps are numbered with PyTorch's N.
pub fn host_steps(host: &Host, source: StepSource) -> HostSteps {
    let steps = profiler_steps::find(host);
    let has_device = gpu_planes(host).next().is_some();
    let mut spans = Vec::new();
    let mut transfers = vec![[Transfers::default(); 3]; steps.len()];
    let half_ops = half_precision_ops(host);
    for plane in &host.planes {
        if plane.name == names::HOST_PLANE {
            host_spans(plane, has_device, &mut spans);
        } else if plane.is_gpu() {
            device_spans(plane, &half_ops, &steps, &mut spans, &mut transfers);
        }
    }
    let spans = to_non_overlapped(&spans);
    let mut result = HostSteps { host: host.name.clone(), has_device, source, ..HostSteps::default() };
    for (step, step_transfers) in steps.iter().zip(transfers) {
        let type_ps = type_times(&spans, step.begin_ps, step.end_ps);
        result.compute_16bit_ps += type_ps[EventType::DeviceCompute16 as usize];
        result.compute_32bit_ps += type_ps[EventType::DeviceCompute32 as usize];
        for (total, part) in result.transfers.iter_mut().zip(step_transfers) {
            total.occurrences += part.occurrences;
            total.time_us += part.time_us;
            total.bytes += part.bytes;
        }
        result.steps.push(StepInfo {
            step_num: step.number,
            step_name: step.name.clone(),
            profile_step: step.number,
            begin_ps: step.begin_ps,
            duration_ps: step.end_ps - step.begin_ps,
            type_ps,
        });
    }
    result
}

/// Time per type within `[begin_ps, end_ps)` of sorted, non-overlapping `spans`; the
/// time no span covers is `UnknownTime`.
fn type_times(spans: &[TypedSpan], begin_ps: i64, end_ps: i64) -> [i64; EVENT_TYPE_COUNT] {
    let mut type_ps = [0i64; EVENT_TYPE_COUNT];
    let first = spans.partition_point(|s| s.end_ps <= begin_ps);
    let mut covered = 0;
    for span in spans[first..].iter().take_while(|s| s.begin_ps < end_ps) {
        if span.kind == EventType::UnknownTime {
            continue;
        }
        let overlap = overlap_ps(begin_ps, end_ps, span.begin_ps, span.end_ps);
        type_ps[span.kind as usize] += overlap;
        covered += overlap;
    }
    type_ps[EventType::UnknownTime as usize] = (end_ps - begin_ps - covered).max(0);
    type_ps
}

/// The host event types of Kineto events (see [`crate::kineto`]); `None` for events
/// that only give context (step and user annotations, Python frames, sync calls).
fn host_event_type(category: Category, name: &str, has_device: bool) -> Option<EventType> {
    match category {
        Category::UserAnnotation if kineto::is_dataloader_next(name) => Some(EventType::HostWaitInput),
        Category::CpuOp => Some(EventType::HostCompute),
        Category::CudaRuntime | Category::CudaDriver if kineto::is_launch(name) => {
            Some(if has_device { EventType::HostPrepare } else { EventType::HostCompute })
        }
        _ => None,
    }
}

fn host_spans(plane: &Plane, has_device: bool, spans: &mut Vec<TypedSpan>) {
    let categories = kineto::categories(plane);
    let kinds: Vec<Option<EventType>> = plane
        .event_metadata
        .iter()
        .zip(&categories)
        .map(|(metadata, &category)| host_event_type(category, &metadata.name, has_device))
        .collect();
    for line in &plane.lines {
        for event in line.iter() {
            if let Some(&Some(kind)) = kinds.get(event.metadata_index() as usize)
                && event.duration_ps() > 0
            {
                spans.push(TypedSpan { kind, begin_ps: event.start_ps(), end_ps: event.end_ps() });
            }
        }
    }
}

fn device_spans(
    plane: &Plane,
    half_ops: &HashSet<i64>,
    steps: &[ProfilerStep],
    spans: &mut Vec<TypedSpan>,
    transfers: &mut [[Transfers; 3]],
) {
    let categories = kineto::categories(plane);
    let external_id = plane.find_stat_key("External id");
    let bytes_key = plane.find_stat_key("bytes");
    for line in &plane.lines {
        for event in line.iter() {
            let category = kineto::category_of(&categories, &event);
            let name = xstats::event_name(plane, &event);
            let kind = match category {
                Category::Kernel => kernel_type(plane, &event, name, external_id, half_ops),
                Category::GpuMemset => EventType::DeviceCompute32,
                Category::GpuMemcpy => match kineto::parse_copy(name).map(|copy| copy.direction) {
                    Some(CopyDirection::HostToDevice) => EventType::HostToDevice,
                    Some(CopyDirection::DeviceToHost) => EventType::DeviceToHost,
                    Some(CopyDirection::HostToHost) => EventType::HostToHost,
                    Some(CopyDirection::DeviceToDevice | CopyDirection::PeerToPeer) | None => EventType::DeviceToDevice,
                },
                _ => continue,
            };
            if event.duration_ps() <= 0 {
                continue;
            }
            spans.push(TypedSpan { kind, begin_ps: event.start_ps(), end_ps: event.end_ps() });
            let direction = match kind {
                EventType::HostToDevice => 0,
                EventType::DeviceToHost => 1,
                EventType::DeviceToDevice => 2,
                _ => continue,
            };
            let Some(step) = profiler_steps::step_at(steps, event.start_ps()) else { continue };
            let transfer = &mut transfers[step][direction];
            transfer.occurrences += 1;
            transfer.time_us += event.duration_ps() as f64 / 1e6;
            transfer.bytes +=
                xstats::event_int(plane, &event, bytes_key).and_then(|b| u64::try_from(b).ok()).unwrap_or(0);
        }
    }
}

/// A kernel's type: collectives for NCCL, else compute in 16-bit when its op's input
/// types or its name say so.
fn kernel_type(
    plane: &Plane,
    event: &Event<'_>,
    name: &str,
    external_id: Option<u32>,
    half_ops: &HashSet<i64>,
) -> EventType {
    let lower = name.get(..4).map(str::to_ascii_lowercase);
    if lower.as_deref() == Some("nccl") {
        return EventType::DeviceCollectives;
    }
    let half_op = xstats::event_int(plane, event, external_id).is_some_and(|id| half_ops.contains(&id));
    if half_op || kineto::is_16bit_kernel_name(name) { EventType::DeviceCompute16 } else { EventType::DeviceCompute32 }
}

/// The `External id`s of host `cpu_op`s whose `Input type` names a 16-bit float.
fn half_precision_ops(host: &Host) -> HashSet<i64> {
    let mut ids = HashSet::new();
    let Some(plane) = host.plane(names::HOST_PLANE) else { return ids };
    let (Some(types_key), external_id) = (plane.find_stat_key("Input type"), plane.find_stat_key("External id")) else {
        return ids;
    };
    for line in &plane.lines {
        for event in line.iter() {
            let Some(stat) = event.stats().iter().find(|stat| stat.key() == types_key) else { continue };
            let text = match stat.value() {
                StatValue::Json(text) | StatValue::Str(text) => event.store().text(text),
                _ => continue,
            };
            if kineto::is_16bit_dtype_list(text)
                && let Some(id) = xstats::event_int(plane, &event, external_id)
            {
                ids.insert(id);
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_times_add_up_with_the_uncovered_rest_as_unknown() {
        let spans = [
            TypedSpan { kind: EventType::HostCompute, begin_ps: 0, end_ps: 50 },
            TypedSpan { kind: EventType::DeviceCompute32, begin_ps: 50, end_ps: 120 },
            TypedSpan { kind: EventType::UnknownTime, begin_ps: 120, end_ps: 130 },
            TypedSpan { kind: EventType::HostWaitInput, begin_ps: 130, end_ps: 200 },
        ];
        let times = type_times(&spans, 100, 180);
        assert_eq!(times[EventType::DeviceCompute32 as usize], 20);
        assert_eq!(times[EventType::HostWaitInput as usize], 50);
        assert_eq!(times[EventType::UnknownTime as usize], 10);
        assert_eq!(times.iter().sum::<i64>(), 80);
    }

    #[test]
    fn host_events_map_to_xprof_categories() {
        let dataloader = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__";
        assert_eq!(host_event_type(Category::UserAnnotation, dataloader, true), Some(EventType::HostWaitInput));
        assert_eq!(host_event_type(Category::UserAnnotation, "ProfilerStep#3", true), None);
        assert_eq!(host_event_type(Category::CpuOp, "aten::addmm", true), Some(EventType::HostCompute));
        assert_eq!(host_event_type(Category::CudaRuntime, "cudaLaunchKernel", true), Some(EventType::HostPrepare));
        assert_eq!(host_event_type(Category::CudaRuntime, "cudaStreamSynchronize", true), None);
        assert_eq!(host_event_type(Category::PythonFunction, "train.py(10): <module>", true), None);
    }
}
