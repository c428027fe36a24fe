//! Copy/compute overlap per stream: how much of each stream's copy time runs while a
//! compute kernel runs on another stream of the same device, and the finding for
//! host↔device copies that run alone.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use super::copies::is_flagged;
use super::findings::{FindingKind, Location, Occurrence};
use crate::facts::activity::{Device, GpuKind, HostRef, ProfileView};
use crate::gpu::intervals;
use crate::gpu::kernel_type::{KernelType, kernel_type};
use crate::kineto::CopyDirection;

/// Streams whose copies overlap compute less than this fraction get a finding.
pub const SERIALIZED_FRACTION: f64 = 0.5;

/// Overlap of one stream's copies with compute on the other streams.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamOverlap {
    /// GPU ordinal.
    pub device: i64,
    /// Stream.
    pub stream: i64,
    /// Copies on the stream.
    pub copies: u64,
    /// Device time of the copies (union), ps.
    pub copy_time_ps: i64,
    /// Part of it during which a compute kernel ran on another stream, ps.
    pub overlapped_ps: i64,
    /// `overlapped_ps / copy_time_ps` (0 when there is no copy time).
    pub overlap_fraction: f64,
}

/// The length of `[start, end)` covered by the disjoint sorted `union`.
fn covered(union: &[(i64, i64)], start: i64, end: i64) -> i64 {
    let first = union.partition_point(|&(_, e)| e <= start);
    union[first..]
        .iter()
        .take_while(|&&(s, _)| s < end)
        .map(|&(s, e)| e.min(end) - s.max(start))
        .filter(|&d| d > 0)
        .sum()
}

/// The union of compute kernels on every stream of `device` except `stream`.
fn compute_elsewhere(device: &Device<'_>, stream: i64) -> Vec<(i64, i64)> {
    intervals::merge(
        device
            .ops
            .iter()
            .filter(|op| op.stream != stream && op.kind == GpuKind::Kernel)
            .filter(|op| kernel_type(op.name) == KernelType::Computation)
            .map(|op| (op.start_ps, op.end_ps))
            .collect(),
    )
}

/// Overlap per stream with copies, and a finding per stream whose host↔device copies
/// mostly run alone: time lost = device time of its copies not already counted by
/// another finding ([`is_flagged`]) during which no compute kernel ran elsewhere.
pub fn overlap(view: &ProfileView<'_>, consumed: &HashSet<HostRef>) -> (Vec<StreamOverlap>, Vec<Occurrence>) {
    let mut rows = Vec::new();
    let mut occurrences = Vec::new();
    for device in &view.devices {
        let has_compute =
            device.ops.iter().any(|op| op.kind == GpuKind::Kernel && kernel_type(op.name) == KernelType::Computation);
        let mut streams: BTreeMap<i64, Vec<usize>> = BTreeMap::new();
        for (i, op) in device.ops.iter().enumerate() {
            if matches!(op.kind, GpuKind::Copy(_)) {
                streams.entry(op.stream).or_default().push(i);
            }
        }
        for (stream, copies) in streams {
            let compute = compute_elsewhere(device, stream);
            let copy_union =
                intervals::merge(copies.iter().map(|&i| (device.ops[i].start_ps, device.ops[i].end_ps)).collect());
            let copy_time_ps = intervals::total(&copy_union);
            let overlapped_ps: i64 = copy_union.iter().map(|&(s, e)| covered(&compute, s, e)).sum();
            let overlap_fraction = if copy_time_ps > 0 { overlapped_ps as f64 / copy_time_ps as f64 } else { 0.0 };
            rows.push(StreamOverlap {
                device: device.ordinal,
                stream,
                copies: copies.len() as u64,
                copy_time_ps,
                overlapped_ps,
                overlap_fraction,
            });
            if !has_compute || overlap_fraction >= SERIALIZED_FRACTION {
                continue;
            }
            let mut alone_ps = 0;
            let mut bytes = 0;
            let mut count = 0u64;
            for &i in &copies {
                let op = &device.ops[i];
                let GpuKind::Copy(copy) = op.kind else { continue };
                if !matches!(copy.direction, CopyDirection::HostToDevice | CopyDirection::DeviceToHost)
                    || is_flagged(view, op, consumed)
                {
                    continue;
                }
                alone_ps += op.duration_ps() - covered(&compute, op.start_ps, op.end_ps);
                bytes += op.bytes.unwrap_or(0);
                count += 1;
            }
            if alone_ps <= 0 {
                continue;
            }
            occurrences.push(Occurrence {
                kind: FindingKind::SerializedCopy,
                what: format!(
                    "stream {stream}: {count} host↔device copies; {:.0}% of the stream's copy time overlaps compute",
                    overlap_fraction * 100.0
                ),
                device: Some(device.ordinal),
                location: Location::default(),
                time_lost_ps: alone_ps,
                bytes,
                fix: "Issue the copies ahead of use on a separate stream (`torch.cuda.Stream`) with `non_blocking=True` \
                      from pinned memory (prefetch the next batch), and order them with `wait_stream` / `record_stream`."
                    .into(),
            });
        }
    }
    (rows, occurrences)
}

#[cfg(test)]
mod tests {
    use super::covered;

    #[test]
    fn covered_time_clips_to_the_window() {
        let union = [(0, 10), (20, 30), (40, 50)];
        assert_eq!(covered(&union, 5, 45), 5 + 10 + 5);
        assert_eq!(covered(&union, 10, 20), 0);
        assert_eq!(covered(&union, 60, 70), 0);
    }
}
