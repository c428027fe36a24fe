//! Copy findings (pageable host memory, synchronous copies and memsets, copies far
//! below the device's peak) and the achieved bandwidth per copy kind.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::findings::{FindingKind, Location, Occurrence};
use super::peaks::{DevicePeaks, device_peaks};
use crate::facts::activity::{Call, Device, GpuKind, GpuOp, HostKind, HostRef, ProfileView};
use crate::kineto::{Copy, CopyDirection, MemoryKind};

/// Copies smaller than this are latency-bound; bandwidth findings ignore them.
pub const LARGE_COPY_BYTES: i64 = 1 << 20;

/// Copies of one kind below this fraction of the peak make a finding.
pub const LOW_BANDWIDTH_FRACTION: f64 = 0.5;

/// The kind of a copy as the bandwidth table shows it: `HtoD pageable`,
/// `DtoH pinned`, `DtoD`, `PtoP`.
pub fn copy_kind(copy: &Copy) -> String {
    let host_side = match copy.direction {
        CopyDirection::HostToDevice => Some(copy.source),
        CopyDirection::DeviceToHost => Some(copy.destination),
        _ => None,
    };
    let code = match copy.direction {
        CopyDirection::HostToDevice => "HtoD",
        CopyDirection::DeviceToHost => "DtoH",
        CopyDirection::DeviceToDevice => "DtoD",
        CopyDirection::PeerToPeer => "PtoP",
        CopyDirection::HostToHost => "HtoH",
    };
    match host_side {
        Some(MemoryKind::Pageable) => format!("{code} pageable"),
        Some(MemoryKind::Pinned) => format!("{code} pinned"),
        Some(MemoryKind::Managed) => format!("{code} managed"),
        _ => code.to_string(),
    }
}

/// Whether a copy crosses the host link (PCIe).
fn crosses_host_link(copy: &Copy) -> bool {
    matches!(copy.direction, CopyDirection::HostToDevice | CopyDirection::DeviceToHost)
}

/// Achieved bandwidth of one copy kind on one device.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CopyBandwidth {
    /// GPU ordinal.
    pub device: i64,
    /// Copy kind ([`copy_kind`]).
    pub kind: String,
    /// Copies.
    pub count: u64,
    /// Bytes copied.
    pub bytes: i64,
    /// Device time of the copies, ps.
    pub duration_ps: i64,
    /// Bytes / device time, GB/s (`None` when no time was recorded).
    pub achieved_gbps: Option<f64>,
    /// The peak this kind is compared with, GB/s (`None`: peak unknown).
    pub peak_gbps: Option<f64>,
    /// What the peak is (`PCIe Gen4 x16`, `HBM / 2`), or `peak unknown`.
    pub peak_source: String,
    /// Achieved / peak, percent.
    pub percent_of_peak: Option<f64>,
}

/// The peak that copies of `copy`'s kind on `device` can reach, GB/s, and its source.
/// Device-to-device copies read and write every byte, so they reach at most half the
/// memory bandwidth.
pub fn peak_for(device: &Device<'_>, copy: &Copy) -> (Option<f64>, String) {
    let peaks: Option<DevicePeaks> = device.name.as_deref().and_then(device_peaks);
    match copy.direction {
        CopyDirection::HostToDevice | CopyDirection::DeviceToHost => match peaks {
            Some(p) => (Some(p.host_link_gbps), format!("PCIe Gen{} x16 ({})", p.pcie_generation, p.model)),
            None => (None, "peak unknown".into()),
        },
        CopyDirection::DeviceToDevice => {
            match device.stated_memory_gbps.map(|gbps| (gbps, "profile")).or(peaks.map(|p| (p.memory_gbps, p.model))) {
                Some((gbps, from)) => (Some(gbps / 2.0), format!("device memory / 2 ({from})")),
                None => (None, "peak unknown".into()),
            }
        }
        _ => (None, "peak unknown".into()),
    }
}

/// GB/s of `bytes` moved in `duration_ps`.
pub fn gbps(bytes: i64, duration_ps: i64) -> Option<f64> {
    (duration_ps > 0).then(|| bytes as f64 / duration_ps as f64 * 1e3)
}

/// Achieved bandwidth per device and copy kind.
pub fn bandwidth(view: &ProfileView<'_>) -> Vec<CopyBandwidth> {
    let mut rows = Vec::new();
    for device in &view.devices {
        let mut by_kind: BTreeMap<String, (Copy, u64, i64, i64)> = BTreeMap::new();
        for op in &device.ops {
            let GpuKind::Copy(copy) = op.kind else { continue };
            let entry = by_kind.entry(copy_kind(&copy)).or_insert((copy, 0, 0, 0));
            entry.1 += 1;
            entry.2 += op.bytes.unwrap_or(0);
            entry.3 += op.duration_ps();
        }
        for (kind, (copy, count, bytes, duration_ps)) in by_kind {
            let (peak_gbps, peak_source) = peak_for(device, &copy);
            let achieved_gbps = gbps(bytes, duration_ps);
            let percent_of_peak = achieved_gbps.zip(peak_gbps).map(|(a, p)| a / p * 100.0);
            rows.push(CopyBandwidth {
                device: device.ordinal,
                kind,
                count,
                bytes,
                duration_ps,
                achieved_gbps,
                peak_gbps,
                peak_source,
                percent_of_peak,
            });
        }
    }
    rows
}

/// Whether a copy is counted by another finding: pageable across the host link,
/// synchronous, or its call was counted (`consumed`, after [`copy_findings`] and the
/// implicit syncs ran).
pub fn is_flagged(view: &ProfileView<'_>, op: &GpuOp<'_>, consumed: &HashSet<HostRef>) -> bool {
    let GpuKind::Copy(copy) = op.kind else { return false };
    op.synchronous
        || (copy.is_pageable() && crosses_host_link(&copy))
        || view.runtime_call(op.correlation).is_some_and(|at| consumed.contains(&at))
}

/// Pageable copies and synchronous copies: one occurrence per copy not already
/// counted (`consumed`); time lost = host time in the copy call (the device time of
/// the copy when the call is not in the profile). Synchronous memset calls likewise.
/// Adds the calls it counts to `consumed`.
pub fn copy_findings(view: &ProfileView<'_>, consumed: &mut HashSet<HostRef>) -> Vec<Occurrence> {
    let mut occurrences = Vec::new();
    for device in &view.devices {
        for op in &device.ops {
            let call = view.runtime_call(op.correlation);
            if call.is_some_and(|at| consumed.contains(&at)) {
                continue;
            }
            let call_event = call.and_then(|at| view.event(at));
            let blocking_call = call_event.is_some_and(|e| e.kind == HostKind::Runtime(Call::CopySync));
            let blocking_memset = call_event.is_some_and(|e| e.kind == HostKind::Runtime(Call::MemsetSync));
            let (kind, fix) = match op.kind {
                GpuKind::Copy(_) if blocking_call || op.synchronous => (FindingKind::SyncCopy, sync_copy_fix()),
                GpuKind::Copy(copy) if copy.is_pageable() && crosses_host_link(&copy) => {
                    (FindingKind::PageableCopy, pageable_fix(copy.direction))
                }
                GpuKind::Memset if blocking_memset => (FindingKind::SyncMemset, sync_memset_fix()),
                _ => continue,
            };
            if let Some(at) = call {
                consumed.insert(at);
            }
            let what = match call_event {
                Some(event) => format!("{} via {}", op.name, event.name),
                None => op.name.to_string(),
            };
            occurrences.push(Occurrence {
                kind,
                what,
                device: Some(device.ordinal),
                location: call.map(|at| Location::of(view, at)).unwrap_or_default(),
                time_lost_ps: call_event.map_or(op.duration_ps(), |e| e.duration_ps()),
                bytes: op.bytes.unwrap_or(0),
                fix,
            });
        }
    }
    occurrences
}

/// Copies of a kind whose large copies reach less than half the peak: time lost =
/// their device time minus what they would take at the peak. Pageable copies are left
/// to their own finding.
pub fn low_bandwidth_findings(view: &ProfileView<'_>, consumed: &HashSet<HostRef>) -> Vec<Occurrence> {
    let mut occurrences = Vec::new();
    for device in &view.devices {
        let mut by_kind: HashMap<String, (Copy, i64, i64)> = HashMap::new();
        for op in &device.ops {
            let GpuKind::Copy(copy) = op.kind else { continue };
            if op.bytes.unwrap_or(0) < LARGE_COPY_BYTES || is_flagged(view, op, consumed) {
                continue;
            }
            let entry = by_kind.entry(copy_kind(&copy)).or_insert((copy, 0, 0));
            entry.1 += op.bytes.unwrap_or(0);
            entry.2 += op.duration_ps();
        }
        for (kind, (copy, bytes, duration_ps)) in by_kind {
            let (Some(peak), source) = peak_for(device, &copy) else { continue };
            let Some(achieved) = gbps(bytes, duration_ps) else { continue };
            if achieved >= peak * LOW_BANDWIDTH_FRACTION {
                continue;
            }
            let at_peak_ps = (bytes as f64 / peak * 1e-3) as i64;
            occurrences.push(Occurrence {
                kind: FindingKind::LowCopyBandwidth,
                what: format!(
                    "{kind} copies ≥ 1 MiB at {}, {:.0}% of {source}",
                    mlprof_model::human::rate(achieved * 1e9, "B"),
                    achieved / peak * 100.0
                ),
                device: Some(device.ordinal),
                location: Location::default(),
                time_lost_ps: (duration_ps - at_peak_ps).max(0),
                bytes,
                fix: if crosses_host_link(&copy) {
                    "Check the host link: `nvidia-smi -q` (PCIe Link Gen / Width) should show the GPU's full \
                     generation at x16; keep the process on the GPU's NUMA node and avoid concurrent copies in \
                     the same direction."
                        .into()
                } else {
                    "Device-to-device copies run far below memory bandwidth: avoid them (views, in-place ops, \
                     `.contiguous()` only where needed) or batch many small ones into one."
                        .into()
                },
            });
        }
    }
    occurrences
}

fn pageable_fix(direction: CopyDirection) -> String {
    if direction == CopyDirection::HostToDevice {
        "Copy from pinned memory: `DataLoader(pin_memory=True)` or `tensor.pin_memory()`, then \
         `.to(device, non_blocking=True)`; the copy then runs asynchronously at full link speed."
            .into()
    } else {
        "Copy into a pinned buffer (`torch.empty(..., pin_memory=True)`, `dst.copy_(src, non_blocking=True)`) and \
         wait once on a CUDA event when the values are needed, or keep them on the device."
            .into()
    }
}

fn sync_copy_fix() -> String {
    "Synchronous copy: use an asynchronous copy with pinned memory (`.to(device, non_blocking=True)`, \
     `cudaMemcpyAsync`) and synchronise once, later, on an event; avoid per-step device→host reads."
        .into()
}

fn sync_memset_fix() -> String {
    "Synchronous memset: use `cudaMemsetAsync` (PyTorch's `zero_()` / `torch.zeros(device=...)` are asynchronous)."
        .into()
}
