//! Kineto (PyTorch profiler) traces → [`ProfileView`]: each event's kind from its
//! `cat` (see [`crate::kineto`]), copies from their names (`Memcpy HtoD (Pageable ->
//! Device)`), steps from the distinct `ProfilerStep#N` annotations.

use mlprof_model::{Host, Plane, names};

use crate::facts::activity::{Call, Device, GpuKind, GpuOp, HostEvent, HostKind, ProfileView, Thread};
use crate::grouping::profiler_steps;
use crate::kineto::{self, Category};
use crate::xstats::{self, StatKeys};

/// The view of a Kineto host.
pub(in crate::facts) fn view(host: &Host) -> ProfileView<'_> {
    let mut threads = Vec::new();
    for plane in host.planes.iter().filter(|p| p.name == names::HOST_PLANE) {
        let categories = kineto::categories(plane);
        let keys = StatKeys::new(plane, [names::CORRELATION_ID]);
        for line in &plane.lines {
            let mut events = Vec::new();
            for event in line.iter() {
                let name = xstats::event_name(plane, &event);
                let kind = match kineto::category_of(&categories, &event) {
                    Category::CpuOp => HostKind::CpuOp,
                    Category::PythonFunction => HostKind::Python,
                    Category::UserAnnotation if name.starts_with(kineto::PROFILER_STEP_PREFIX) => HostKind::Step,
                    Category::UserAnnotation => HostKind::Annotation,
                    Category::CudaRuntime | Category::CudaDriver => HostKind::Runtime(Call::of(name)),
                    _ => continue,
                };
                events.push(HostEvent {
                    name,
                    start_ps: event.start_ps(),
                    end_ps: event.end_ps(),
                    kind,
                    correlation: xstats::event_int(plane, &event, keys.key(0)),
                    parent: None,
                });
            }
            if !events.is_empty() {
                threads.push(Thread::new(line.shown_name().to_string(), events));
            }
        }
    }
    let devices = host.planes.iter().filter(|p| p.is_gpu()).filter_map(device).collect();
    // Distinct step numbers (a step seen on two threads counts once).
    let steps = profiler_steps::find(host).len() as u64;
    ProfileView::new(threads, devices, steps, "ProfilerStep#N annotations")
}

/// The GPU ops of one device plane (`None` for a plane without ops).
fn device(plane: &Plane) -> Option<Device<'_>> {
    let categories = kineto::categories(plane);
    let keys = StatKeys::new(plane, [names::CORRELATION_ID, "bytes"]);
    let mut ops = Vec::new();
    for line in &plane.lines {
        for event in line.iter() {
            let name = xstats::event_name(plane, &event);
            let kind = match kineto::category_of(&categories, &event) {
                Category::Kernel => GpuKind::Kernel,
                Category::GpuMemcpy => match kineto::parse_copy(name) {
                    Some(copy) => GpuKind::Copy(copy),
                    None => continue,
                },
                Category::GpuMemset => GpuKind::Memset,
                Category::CudaSync => GpuKind::Sync,
                _ => continue,
            };
            ops.push(GpuOp {
                name,
                stream: line.id,
                start_ps: event.start_ps(),
                end_ps: event.end_ps(),
                kind,
                bytes: xstats::event_int(plane, &event, keys.key(1)),
                correlation: xstats::event_int(plane, &event, keys.key(0)),
                synchronous: false,
            });
        }
    }
    Device::from_plane(plane, ops, None)
}
