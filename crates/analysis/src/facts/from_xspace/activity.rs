//! XSpace GPU profiles (TensorFlow / JAX with CUPTI) → [`ProfileView`].
//!
//! | XSpace | view |
//! |---|---|
//! | `/host:CPU` event with a `correlation_id` stat or a CUDA/HIP call name (`cuLaunchKernel`, `cuStreamSynchronize`, `cuMemcpyDtoHAsync_v2`) | runtime call, kind from its name |
//! | `/host:CPU` event named `$…` (XProf's Python tracer) | Python frame |
//! | any other `/host:CPU` event (TraceMe: framework ops, executor ranges) | framework op |
//! | `/device:GPU:N` line `Stream #S…`, event `MemcpyH2D`/`MemcpyD2H`/`MemcpyD2D`/`MemcpyP2P` | copy; `memcpy_details` `kind_src:`/`kind_dst:` give pageable / pinned, `size:` (or `num_bytes:`) the bytes, `async:0` a synchronous copy |
//! | `Memset…` on a stream line | memset |
//! | any other event on a stream line | kernel |
//! | events of the derived `Steps` line of the first GPU plane that has one | steps |
//!
//! Derived device lines (`XLA Ops`, `XLA Modules`, `Framework Ops`, …) are skipped:
//! they repeat the stream events.

use mlprof_model::{Host, Plane, names};

use crate::facts::activity::{Call, Device, GpuKind, GpuOp, HostEvent, HostKind, ProfileView, Thread};
use crate::kineto::{self, Copy, MemoryKind};
use crate::steps::step_events::memcpy_bytes;
use crate::xstats::{self, StatKeys};

/// The view of an XSpace host.
pub(in crate::facts) fn view(host: &Host) -> ProfileView<'_> {
    let mut threads = Vec::new();
    for plane in host.planes.iter().filter(|p| p.name == names::HOST_PLANE) {
        let keys = StatKeys::new(plane, [names::CORRELATION_ID]);
        for line in &plane.lines {
            let events: Vec<HostEvent<'_>> = line
                .iter()
                .map(|event| {
                    let name = xstats::event_name(plane, &event);
                    let correlation = xstats::event_int(plane, &event, keys.key(0));
                    let call = Call::of(name);
                    let kind = if correlation.is_some() || call != Call::Other {
                        HostKind::Runtime(call)
                    } else if name.starts_with('$') {
                        HostKind::Python
                    } else {
                        HostKind::CpuOp
                    };
                    HostEvent {
                        name,
                        start_ps: event.start_ps(),
                        end_ps: event.end_ps(),
                        kind,
                        correlation,
                        parent: None,
                    }
                })
                .collect();
            if !events.is_empty() {
                threads.push(Thread::new(line.shown_name().to_string(), events));
            }
        }
    }
    let gpu_planes: Vec<&Plane> = host.planes.iter().filter(|p| p.is_gpu()).collect();
    let steps = gpu_planes
        .iter()
        .find_map(|plane| plane.lines.iter().find(|line| line.name == names::STEPS_LINE))
        .map_or(0, |line| line.len() as u64);
    let devices = gpu_planes.into_iter().filter_map(device).collect();
    ProfileView::new(threads, devices, steps, "the device Steps line")
}

/// The ops on the stream lines of one GPU plane (`None` when it has none).
fn device(plane: &Plane) -> Option<Device<'_>> {
    let keys = StatKeys::new(plane, [names::CORRELATION_ID, "memcpy_details"]);
    let mut ops = Vec::new();
    for line in plane.lines.iter().filter(|line| line.name.starts_with("Stream #")) {
        for event in line.iter() {
            let name = xstats::event_name(plane, &event);
            let details = xstats::event_str(plane, &event, keys.key(1)).unwrap_or("");
            let (kind, bytes, synchronous) = if let Some(copy) = kineto::parse_copy(name) {
                let bytes = memcpy_bytes(details);
                (GpuKind::Copy(with_memory_kinds(copy, details)), (bytes > 0).then_some(bytes as i64), is_sync(details))
            } else if name.starts_with("Memset") {
                (GpuKind::Memset, None, false)
            } else {
                (GpuKind::Kernel, None, false)
            };
            ops.push(GpuOp {
                name,
                stream: line.id,
                start_ps: event.start_ps(),
                end_ps: event.end_ps(),
                kind,
                bytes,
                correlation: xstats::event_int(plane, &event, keys.key(0)),
                synchronous,
            });
        }
    }
    Device::from_plane(plane, ops, stated_memory_gbps(plane))
}

/// The value of `key:` in a `memcpy_details` string.
fn detail<'a>(details: &'a str, key: &str) -> Option<&'a str> {
    details.split_whitespace().find_map(|field| field.strip_prefix(key)?.strip_prefix(':'))
}

/// Whether `memcpy_details` says `async:0`.
fn is_sync(details: &str) -> bool {
    detail(details, "async") == Some("0")
}

/// `copy` with the memory kinds `memcpy_details` names (`kind_src:pageable`).
fn with_memory_kinds(mut copy: Copy, details: &str) -> Copy {
    let kind = |text: &str| match text.to_ascii_lowercase().as_str() {
        "pageable" => MemoryKind::Pageable,
        "pinned" => MemoryKind::Pinned,
        "device" => MemoryKind::Device,
        "managed" => MemoryKind::Managed,
        _ => MemoryKind::Other,
    };
    if let Some(source) = detail(details, "kind_src") {
        copy.source = kind(source);
    }
    if let Some(destination) = detail(details, "kind_dst") {
        copy.destination = kind(destination);
    }
    copy
}

/// XProf's `memory_bandwidth` device-capability stat (bytes/s) in GB/s.
fn stated_memory_gbps(plane: &Plane) -> Option<f64> {
    let bytes_per_second = xstats::as_f64(plane.plane_stat("memory_bandwidth")?)?;
    (bytes_per_second > 0.0).then_some(bytes_per_second / 1e9)
}
