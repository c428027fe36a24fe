//! `memory`: an out-of-memory error a PyTorch memory snapshot recorded (high, with
//! what held the memory then), or an allocator close to its capacity (an
//! out-of-memory risk) or heavily fragmented at its peak, from `memory_profile`. Per
//! allocator:
//! - **near capacity** when the peak use is more than 90 % of the capacity (high);
//! - **fragmented** when the fragmentation at the peak is at least 50 % (medium when
//!   the peak is also above 75 % of the capacity, else low).
//!
//! Both thresholds are mlprof's. The peak use is XProf's peak stack + heap bytes; on
//! PyTorch traces the larger of that and the caching allocator's peak reserved bytes
//! (what the device actually holds). The capacity is the allocator's (stack + heap +
//! free at the peak, TensorFlow's BFC limit) on XSpace, and the device's memory size
//! (`deviceProperties[].totalGlobalMem`) on PyTorch traces, where the allocator does
//! not know it; PyTorch's host (CPU) memory has no capacity in the profile. Memory
//! findings cost no step time, so they carry no time lost.

use crate::advise::{Evidence, Finding, Framework, Outcome, Severity, ToolResults};
use crate::memory_profile::AllocatorProfile;

use super::size;

/// The rule's name.
pub const NAME: &str = "memory";

/// Peak use above this share of capacity is an out-of-memory risk (%).
const NEAR_CAPACITY_PERCENT: f64 = 90.0;
/// Fragmentation at the peak from this fraction is heavy.
const HEAVY_FRAGMENTATION: f64 = 0.5;
/// Peak use from this share of capacity makes fragmentation matter more (%).
const TIGHT_PERCENT: f64 = 75.0;
/// Live allocations listed at the peak.
const LISTED_ALLOCATIONS: usize = 3;

/// One allocator's peak against its capacity.
pub(super) struct MemoryUse {
    /// Peak use as a share of capacity, %.
    pub percent: f64,
    /// The numbers, cited from `memory_profile`.
    pub evidence: Evidence,
}

/// The allocators with their JSON path, host and capacity (bytes, when known).
fn allocators(results: &ToolResults) -> Vec<(String, &str, &AllocatorProfile, Option<i64>)> {
    let mut out = Vec::new();
    for (h, host) in results.memory.iter().enumerate() {
        for (a, allocator) in host.profile.allocators.iter().enumerate() {
            let capacity = match &allocator.pytorch {
                Some(pytorch) if pytorch.device_type == 0 => None,
                Some(pytorch) => results
                    .device_memory
                    .iter()
                    .find(|d| d.host == host.host && d.device == pytorch.device_id)
                    .map(|d| d.bytes),
                None => Some(allocator.summary.memory_capacity_bytes).filter(|&bytes| bytes > 0),
            };
            out.push((format!("[{h}].profile.allocators[{a}]"), host.host.as_str(), allocator, capacity));
        }
    }
    out
}

/// Peak use in bytes and the field it comes from.
fn peak(allocator: &AllocatorProfile) -> (i64, &'static str) {
    let allocated = allocator.summary.peak_stats.peak_bytes_in_use;
    match &allocator.pytorch {
        Some(pytorch) if pytorch.peak_reserved_bytes > allocated => {
            (pytorch.peak_reserved_bytes, "pytorch.peak_reserved_bytes")
        }
        _ => (allocated, "summary.peak_stats.peak_bytes_in_use"),
    }
}

fn is_host_allocator(allocator: &AllocatorProfile) -> bool {
    allocator.pytorch.as_ref().map_or(allocator.memory_id.to_ascii_lowercase().contains("cpu"), |p| p.device_type == 0)
}

fn use_evidence(path: &str, host: &str, allocator: &AllocatorProfile, capacity: i64) -> MemoryUse {
    let (peak_bytes, peak_field) = peak(allocator);
    let percent = 100.0 * peak_bytes as f64 / capacity as f64;
    let capacity_field =
        if allocator.pytorch.is_some() { "device memory_size" } else { "summary.memory_capacity_bytes" };
    let evidence = Evidence::new(
        "memory_profile",
        format!(
            "{host} {}: peak {} of {} ({percent:.1}%) at {:.3} ms, step {}.",
            allocator.memory_id,
            size(peak_bytes),
            size(capacity),
            allocator.summary.peak_stats_time_ps as f64 / 1e9,
            allocator.peak_step_id
        ),
    )
    .cite(format!("{path}.{peak_field}"), peak_bytes as f64)
    .cite(
        if allocator.pytorch.is_some() { capacity_field.to_string() } else { format!("{path}.{capacity_field}") },
        capacity as f64,
    );
    MemoryUse { percent, evidence }
}

/// The device allocator whose peak is closest to its capacity, if any has one.
pub(super) fn highest_use(results: &ToolResults) -> Option<MemoryUse> {
    allocators(results)
        .into_iter()
        .filter(|(_, _, allocator, _)| !is_host_allocator(allocator))
        .filter_map(|(path, host, allocator, capacity)| Some(use_evidence(&path, host, allocator, capacity?)))
        .max_by(|a, b| a.percent.total_cmp(&b.percent))
}

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    let allocators = allocators(results);
    if allocators.is_empty() {
        return Outcome::NotApplicable(
            "no memory events in the profile (allocator events or profile_memory=True)".into(),
        );
    }
    let mut findings = out_of_memory(results);
    let mut clear = Evidence::new("memory_profile", String::new());
    let mut words = Vec::new();
    for (path, host, allocator, capacity) in &allocators {
        let (peak_bytes, peak_field) = peak(allocator);
        clear = clear.cite(format!("{path}.{peak_field}"), peak_bytes as f64);
        let Some(capacity) = *capacity else {
            words.push(format!("{} peak {}, no capacity recorded", allocator.memory_id, size(peak_bytes)));
            continue;
        };
        let use_ = use_evidence(path, host, allocator, capacity);
        words.push(format!("{} peak {} ({:.1}% of capacity)", allocator.memory_id, size(peak_bytes), use_.percent));
        if use_.percent > NEAR_CAPACITY_PERCENT {
            findings.push(near_capacity(results.framework, host, allocator, use_));
            continue;
        }
        let fragmentation = allocator.summary.peak_stats.fragmentation;
        if fragmentation >= HEAVY_FRAGMENTATION {
            findings.push(fragmented(results.framework, path, host, allocator, use_));
        }
    }
    if findings.is_empty() {
        clear.text = format!("{} (out-of-memory risk above {NEAR_CAPACITY_PERCENT}%)", words.join("; "));
        return Outcome::Clear(clear);
    }
    Outcome::Found(findings)
}

/// The ways to use less memory at the peak, for `framework`.
fn memory_fixes(framework: Framework) -> [String; 2] {
    let checkpoint = match framework {
        Framework::Tensorflow => "`tf.recompute_grad`",
        Framework::Jax => "`jax.checkpoint`",
        Framework::Pytorch => "`torch.utils.checkpoint`",
        Framework::Cuda | Framework::Python => "recomputing what is cheap to recompute",
    };
    [
        format!(
            "Cut activation memory: a smaller batch with gradient accumulation, activation checkpointing \
             ({checkpoint}), and mixed precision (16-bit activations take half the memory)."
        ),
        "Free what the peak does not need: drop references to tensors kept across steps (losses kept for logging \
         with their graph, cached outputs)."
            .to_string(),
    ]
}

/// Every out-of-memory error of the memory snapshots (`oom` trace entries).
fn out_of_memory(results: &ToolResults) -> Vec<Finding> {
    let mut findings = Vec::new();
    for (h, host) in results.memory.iter().enumerate() {
        let Some(snapshot) = &host.profile.snapshot else { continue };
        for (d, device) in snapshot.devices.iter().enumerate() {
            for (o, oom) in device.ooms.iter().enumerate() {
                let path = format!("[{h}].profile.snapshot.devices[{d}].ooms[{o}]");
                let holders: Vec<String> = oom
                    .live
                    .iter()
                    .map(|row| {
                        let blocks = if row.blocks == 1 { "block" } else { "blocks" };
                        format!("{} {} in {} {blocks}", row.label, size(row.bytes), row.blocks)
                    })
                    .collect();
                let mut finding = Finding::new(
                    NAME,
                    Severity::High,
                    format!(
                        "Out of memory on {} {}: asked for {} with {} free on the device",
                        host.host,
                        device.memory_id,
                        size(oom.requested_bytes),
                        size(oom.device_free_bytes)
                    ),
                )
                .time_lost(None, "no step time: the job failed to allocate")
                .evidence(
                    Evidence::new(
                        "memory_profile",
                        format!(
                            "At {:.3} ms: {} allocated, {} reserved by PyTorch's caching allocator.",
                            oom.time_ps as f64 / 1e9,
                            size(oom.allocated_bytes),
                            size(oom.reserved_bytes)
                        ),
                    )
                    .cite(format!("{path}.requested_bytes"), oom.requested_bytes as f64)
                    .cite(format!("{path}.device_free_bytes"), oom.device_free_bytes as f64)
                    .cite(format!("{path}.allocated_bytes"), oom.allocated_bytes as f64),
                );
                if !holders.is_empty() {
                    finding = finding.evidence(Evidence::new(
                        "memory_profile",
                        format!("What held the memory then, by allocating code: {}.", holders.join("; ")),
                    ));
                }
                findings.push(finding.fixes(memory_fixes(results.framework)));
            }
        }
    }
    findings
}

fn near_capacity(framework: Framework, host: &str, allocator: &AllocatorProfile, use_: MemoryUse) -> Finding {
    let mut largest = Vec::new();
    for (activity, occurrences) in allocator.breakdown().take(LISTED_ALLOCATIONS) {
        let op = if activity.tf_op_name.is_empty() { "unknown op" } else { activity.tf_op_name.as_str() };
        largest.push(format!("{op} {} ×{occurrences} {}", size(activity.allocation_bytes), activity.tensor_shape));
    }
    let mut finding = Finding::new(
        NAME,
        Severity::High,
        format!(
            "Memory near capacity on {host} {}: {:.1}% at the peak (out-of-memory risk)",
            allocator.memory_id, use_.percent
        ),
    )
    .time_lost(None, "no step time: a risk of running out of memory")
    .evidence(use_.evidence);
    if !largest.is_empty() {
        finding = finding.evidence(Evidence::new(
            "memory_profile",
            format!("Largest live allocations at the peak: {}.", largest.join("; ")),
        ));
    }
    finding.fixes(memory_fixes(framework))
}

fn fragmented(framework: Framework, path: &str, host: &str, allocator: &AllocatorProfile, use_: MemoryUse) -> Finding {
    let fragmentation = allocator.summary.peak_stats.fragmentation;
    let severity = if use_.percent > TIGHT_PERCENT { Severity::Medium } else { Severity::Low };
    let fix = match framework {
        Framework::Tensorflow => {
            "Use the CUDA async allocator (`TF_GPU_ALLOCATOR=cuda_malloc_async`), which fragments less than BFC."
        }
        Framework::Jax => {
            "Let XLA allocate on demand (`XLA_PYTHON_CLIENT_ALLOCATOR=platform`) to see whether the \
             fragmentation comes from its pool."
        }
        Framework::Pytorch => {
            "Let the caching allocator grow segments instead of splitting them: \
             `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`."
        }
        Framework::Cuda | Framework::Python => {
            "Allocate from a stream-ordered pool (`cudaMallocAsync` / `cudaFreeAsync`) or reuse buffers of one size, \
             instead of many `cudaMalloc` of varying sizes."
        }
    };
    Finding::new(
        NAME,
        severity,
        format!("Fragmented memory on {host} {}: {:.1}% at the peak", allocator.memory_id, 100.0 * fragmentation),
    )
    .time_lost(None, "no step time: fragmented memory makes an out-of-memory error come sooner")
    .evidence(
        Evidence::new(
            "memory_profile",
            format!("Fragmentation at the peak is {:.1}% of the free memory held.", 100.0 * fragmentation),
        )
        .cite(format!("{path}.summary.peak_stats.fragmentation"), fragmentation),
    )
    .evidence(use_.evidence)
    .fixes([
        fix,
        "Keep tensor shapes constant from step to step (pad variable lengths into a few buckets), so freed blocks \
         fit the next allocations.",
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::advise::DeviceMemory;
    use crate::memory_profile::{MemoryProfile, PytorchAllocator};
    use crate::tool::HostMemoryProfile;

    fn allocator(id: &str, peak: i64, capacity: i64, fragmentation: f64) -> AllocatorProfile {
        let mut allocator = AllocatorProfile { memory_id: id.into(), ..AllocatorProfile::default() };
        allocator.summary.peak_stats.peak_bytes_in_use = peak;
        allocator.summary.peak_stats.fragmentation = fragmentation;
        allocator.summary.memory_capacity_bytes = capacity;
        allocator
    }

    fn results(allocators: Vec<AllocatorProfile>) -> ToolResults {
        let profile = MemoryProfile { has_host_plane: true, allocators, ..MemoryProfile::default() };
        ToolResults { memory: vec![HostMemoryProfile { host: "vm".into(), profile }], ..ToolResults::default() }
    }

    #[test]
    fn a_peak_near_capacity_is_an_out_of_memory_risk() {
        let Outcome::Found(findings) = check(&results(vec![allocator("GPU_0_bfc", 95, 100, 0.0)])) else {
            panic!("95% of capacity must fire")
        };
        assert_eq!(findings[0].severity, Severity::High);
        assert_eq!(findings[0].time_lost_per_step_ps, None);
        assert_eq!(
            findings[0].evidence[0].cited[0].field,
            "[0].profile.allocators[0].summary.peak_stats.peak_bytes_in_use"
        );
        assert_eq!(findings[0].evidence[0].cited[1].value, 100.0);
    }

    #[test]
    fn heavy_fragmentation_fires_and_a_roomy_allocator_is_clear() {
        let Outcome::Found(findings) = check(&results(vec![allocator("GPU_0_bfc", 80, 100, 0.6)])) else {
            panic!("60% fragmentation must fire")
        };
        assert_eq!(findings[0].severity, Severity::Medium);
        assert!(findings[0].title.contains("60.0%"));
        assert!(matches!(check(&results(vec![allocator("GPU_0_bfc", 10, 100, 0.1)])), Outcome::Clear(_)));
    }

    #[test]
    fn pytorch_uses_reserved_memory_against_the_device_size_and_host_memory_has_no_capacity() {
        let mut cuda = allocator("cuda:0", 50, 50, 0.0);
        cuda.pytorch =
            Some(PytorchAllocator { device_type: 1, device_id: 0, peak_reserved_bytes: 97, ..Default::default() });
        let mut cpu = allocator("cpu", 10, 10, 0.0);
        cpu.pytorch = Some(PytorchAllocator { device_type: 0, device_id: -1, ..Default::default() });
        let mut results = results(vec![cpu.clone(), cuda]);
        results.device_memory = vec![DeviceMemory { host: "vm".into(), device: 0, bytes: 100 }];
        let Outcome::Found(findings) = check(&results) else { panic!("97 of 100 reserved must fire") };
        assert_eq!(findings.len(), 1);
        assert_eq!(findings[0].evidence[0].cited[0].field, "[0].profile.allocators[1].pytorch.peak_reserved_bytes");
        let Outcome::Clear(evidence) = check(&self::results(vec![cpu])) else { panic!("no capacity: clear") };
        assert!(evidence.text.contains("no capacity recorded"), "{}", evidence.text);
    }

    #[test]
    fn without_memory_events_it_does_not_apply() {
        assert!(matches!(check(&ToolResults::default()), Outcome::NotApplicable(_)));
    }
}
