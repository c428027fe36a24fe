//! The `transfers` tool: host↔device copies and synchronisation, ranked by the time
//! they cost — Nsight Systems' expert-system rules (pageable and synchronous copies,
//! synchronous memsets, synchronising APIs, GPU gaps) on PyTorch / Kineto traces and
//! XSpace GPU profiles, with the host context that explains each one.
//!
//! The one design decision to know: every finding reads the host's source-neutral
//! activity view ([`crate::facts::activity_view`]: host threads with nested events, GPU
//! ops, correlation ids, step count), which each format's adapter builds; the findings
//! never look at a format.
//!
//! # Time lost, per finding kind
//!
//! | kind | one occurrence | time lost |
//! |---|---|---|
//! | `implicit_sync` | a top-level framework op (`aten::item`, `aten::to`, `aten::is_nonzero`, …) whose subtree copies device→host and then blocks (`cudaStreamSynchronize`, a synchronous `cudaMemcpy`) | host time inside its copy and blocking calls |
//! | `pageable_copy` | a host↔device copy with pageable host memory | host time inside the copy call (the driver stages pageable memory, so the call returns only when the copy is done; a pinned `non_blocking` copy returns at once); the copy's device time when the call is not in the profile |
//! | `sync_copy` | a synchronous copy call (`cudaMemcpy`, XSpace `async:0`) | host time inside the call |
//! | `sync_memset` | a synchronous memset call (`cudaMemset`) | host time inside the call |
//! | `sync_call` | a blocking synchronisation call (`cudaDeviceSynchronize`, `cudaStreamSynchronize`, `cudaEventSynchronize`, driver and HIP forms), or a `cuda_sync` record (`Context Sync`, `Event Sync`, `Stream Sync`) without its host call | host time inside the call (the record's duration without one) |
//! | `gpu_gap` | a time longer than the gap threshold (default 100 µs) when no kernel, copy or memset runs on any stream of a device | the gap's length |
//! | `low_copy_bandwidth` | copies of one kind and device, each ≥ 1 MiB, achieving under half the device's peak (see [`peaks`]) | their device time minus the time at the peak |
//! | `serialized_copy` | a stream whose copies overlap compute kernels on other streams less than half the time | device time of its host↔device copies (not counted by another finding) during which no compute kernel ran |
//!
//! Each host call counts in one finding only: calls inside an implicit sync are not
//! counted again as copies or sync calls; a pageable copy's call is not counted as a
//! synchronous copy. Host-side kinds measure time the host thread was blocked; gaps,
//! bandwidth and overlap measure device time. The two can describe the same wall time
//! (a synchronisation also leaves the GPU idle until the next launch), so findings are
//! ranked side by side, not summed.
//!
//! Time lost per step = the total ÷ the number of steps (distinct `ProfilerStep#N`
//! annotations in Kineto traces; events of the device `Steps` line in XSpace). Without
//! step markers the totals cover the whole profile and per-step values are absent.
//!
//! "Where" is the innermost framework op (`cpu_op`) enclosing the host call and the
//! enclosing Python frames (`python_function`, innermost first) when the trace has
//! them; GPU-side events reach their host call through `correlation_id`.

pub mod copies;
pub mod findings;
pub mod gaps;
pub mod overlap;
pub mod peaks;
mod render;
pub mod syncs;

use mlprof_model::Host;
use serde::Serialize;

use crate::facts;
use findings::Finding;

/// The default gap threshold: 100 µs, in ps.
pub const DEFAULT_GAP_THRESHOLD_PS: i64 = 100_000_000;

/// Options of the tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransfersOptions {
    /// GPU idle times longer than this are gaps, ps.
    pub gap_threshold_ps: i64,
}

impl Default for TransfersOptions {
    fn default() -> TransfersOptions {
        TransfersOptions { gap_threshold_ps: DEFAULT_GAP_THRESHOLD_PS }
    }
}

/// One GPU device of a host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceInfo {
    /// Ordinal.
    pub device: i64,
    /// Name from the profile, when present.
    pub name: Option<String>,
    /// Table peaks for that name (`None`: unknown device).
    pub peaks: Option<peaks::DevicePeaks>,
}

/// What was found on one host (one trace file / rank).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostTransfers {
    /// Host name.
    pub host: String,
    /// Rank, when the trace names one.
    pub rank: Option<i64>,
    /// Source format (`kineto`, `xspace`).
    pub source: &'static str,
    /// Steps (0: no step markers; totals cover the profile).
    pub steps: u64,
    /// How steps were counted.
    pub step_source: &'static str,
    /// GPU devices with ops.
    pub devices: Vec<DeviceInfo>,
    /// Every blocking host call by API name (whichever finding counts it).
    pub blocking_calls: Vec<syncs::BlockingCalls>,
    /// Achieved copy bandwidth per device and copy kind.
    pub copy_bandwidth: Vec<copies::CopyBandwidth>,
    /// Copy/compute overlap per stream with copies.
    pub copy_compute_overlap: Vec<overlap::StreamOverlap>,
    /// GPU gaps per device.
    pub gaps: Vec<gaps::DeviceGaps>,
}

/// The tool's result.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Transfers {
    /// The gap threshold used, ps.
    pub gap_threshold_ps: i64,
    /// Per host.
    pub hosts: Vec<HostTransfers>,
    /// All findings of all hosts, most time lost first.
    pub findings: Vec<Finding>,
}

/// Runs the diagnosis on every host.
pub fn analyze(hosts: &[&Host], options: TransfersOptions) -> Transfers {
    analyze_with_steps(hosts, &[], options)
}

/// [`analyze`], with the number of steps each host's step database found (`steps[i]` for
/// `hosts[i]`; what the `steps` tool lists): an XSpace without a device Steps line is
/// then counted per step as every other tool counts it, not over the whole profile.
pub fn analyze_with_steps(hosts: &[&Host], steps: &[u64], options: TransfersOptions) -> Transfers {
    let mut results = Vec::new();
    let mut all_findings = Vec::new();
    for (index, host) in hosts.iter().enumerate() {
        let (result, host_findings) = analyze_host(host, steps.get(index).copied().unwrap_or(0), options);
        results.push(result);
        all_findings.extend(host_findings);
    }
    findings::rank(&mut all_findings);
    Transfers { gap_threshold_ps: options.gap_threshold_ps, hosts: results, findings: all_findings }
}

/// The diagnosis of one host and its findings; `known_steps` is the number of steps the
/// step database found (0: none), used when the profile's own step source has none.
pub fn analyze_host(host: &Host, known_steps: u64, options: TransfersOptions) -> (HostTransfers, Vec<Finding>) {
    let (mut view, source) = (facts::activity_view(host), host.format.name());
    if view.steps == 0 && known_steps > 0 {
        view.steps = known_steps;
        view.step_source = "the step groups every step tool uses";
    }
    let gpu_ops = view.gpu_ops_by_correlation();
    let (mut occurrences, mut consumed) = syncs::implicit_syncs(&view, &gpu_ops);
    occurrences.extend(copies::copy_findings(&view, &mut consumed));
    occurrences.extend(syncs::sync_calls(&view, &gpu_ops, &consumed));
    occurrences.extend(copies::low_bandwidth_findings(&view, &consumed));
    let (copy_compute_overlap, overlap_occurrences) = overlap::overlap(&view, &consumed);
    occurrences.extend(overlap_occurrences);
    let threshold = options.gap_threshold_ps.max(0);
    let (gaps, gap_occurrences) = gaps::gaps(&view, threshold);
    occurrences.extend(gap_occurrences);
    let host_findings = findings::aggregate(occurrences, &host.name, view.steps);
    let devices = view
        .devices
        .iter()
        .map(|d| DeviceInfo {
            device: d.ordinal,
            name: d.name.clone(),
            peaks: d.name.as_deref().and_then(peaks::device_peaks),
        })
        .collect();
    let result = HostTransfers {
        host: host.name.clone(),
        rank: host.rank,
        source,
        steps: view.steps,
        step_source: view.step_source,
        devices,
        blocking_calls: syncs::blocking_calls(&view),
        copy_bandwidth: copies::bandwidth(&view),
        copy_compute_overlap,
        gaps,
    };
    (result, host_findings)
}
