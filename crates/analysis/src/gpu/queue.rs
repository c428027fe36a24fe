//! HTA's queue length (`get_queue_length_summary`,
//! `get_time_spent_blocked_on_full_queue`): the number of ops enqueued on a stream
//! and not yet started. It goes up by one at each launch call (a kernel, memcpy or
//! memset launch that has a GPU op) and down by one when a GPU op starts.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::describe::{Describe, describe};
use super::{Context, us};

/// Runtime calls that enqueue work (HTA's `get_runtime_launch_events_query`).
const ENQUEUE_NAMES: [&str; 11] = [
    "cudaMemsetAsync",
    "cudaMemcpyAsync",
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "runFunction - job_prep_and_submit_for_execution",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipMemsetAsync",
    "hipMemcpyAsync",
    "hipMemcpyWithStream",
];

/// CUDA's launch queue depth per stream (HTA's `CUDA_MAX_LAUNCH_QUEUE_PER_STREAM`).
pub const MAX_QUEUE_LENGTH: i64 = 1024;

/// One stream's queue length.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamQueue {
    /// The rank.
    pub rank: i64,
    /// The CUDA stream.
    pub stream: i64,
    /// Statistics over the queue length after each change (HTA's summary).
    pub queue_length: Describe,
    /// Time the queue was at [`MAX_QUEUE_LENGTH`] or more, µs (launches block then).
    pub duration_at_max_queue_length_us: f64,
    /// That time over the rank's trace duration (0–1).
    pub relative_duration_at_max_queue_length: f64,
}

/// One stream's queue length over time.
#[derive(Clone, Debug, PartialEq)]
pub struct QueueSeries {
    /// The rank.
    pub rank: i64,
    /// The CUDA stream.
    pub stream: i64,
    /// (time in ps from the profile start, queue length after the change there), in time
    /// order: one point per launch and per GPU op start.
    pub points: Vec<(i64, i64)>,
}

/// Every rank's queues, by rank and stream.
pub fn queue_length(context: &Context) -> Vec<StreamQueue> {
    let durations: HashMap<i64, i64> = context.traces.ranks.iter().map(|rank| (rank.rank, rank.duration_ps)).collect();
    queue_series(context)
        .into_iter()
        .map(|QueueSeries { rank, stream, points }| {
            let duration_ps = durations.get(&rank).copied().unwrap_or(0);
            let at_max: i64 =
                points.windows(2).filter(|pair| pair[0].1 >= MAX_QUEUE_LENGTH).map(|pair| pair[1].0 - pair[0].0).sum();
            StreamQueue {
                rank,
                stream,
                queue_length: describe(points.iter().map(|&(_, length)| length as f64).collect()),
                duration_at_max_queue_length_us: us(at_max),
                relative_duration_at_max_queue_length: if duration_ps > 0 {
                    at_max as f64 / duration_ps as f64
                } else {
                    0.0
                },
            }
        })
        .collect()
}

/// Every rank's queue length over time, by rank and stream.
pub fn queue_series(context: &Context) -> Vec<QueueSeries> {
    let enqueue_ids: Vec<u32> = ENQUEUE_NAMES.iter().filter_map(|name| context.traces.symbols.id(name)).collect();
    let mut result = Vec::new();
    for (index, rank) in context.traces.ranks.iter().enumerate() {
        let by_correlation = context.by_correlation(index);
        // (time, tie order, stream, change): at equal times launches come before GPU op
        // starts, HTA's concatenation order, which its (unstable) sort keeps on small
        // inputs and may permute on large ones.
        let mut changes: Vec<(i64, usize, i64, i64)> = Vec::new();
        let launches = rank.rows.iter().filter(|row| enqueue_ids.contains(&row.name) && row.launches_gpu_op);
        let mut launched = Vec::new();
        for row in launches {
            launched.push(row.correlation);
            for gpu_side in by_correlation.of(&rank.rows, row.correlation) {
                changes.push((row.ts_ps, 0, gpu_side.stream, 1));
            }
        }
        launched.sort();
        launched.dedup();
        for &correlation in &launched {
            for gpu_side in by_correlation.of(&rank.rows, correlation) {
                changes.push((gpu_side.ts_ps, 1, gpu_side.stream, -1));
            }
        }
        // A few runs already in time order (each CPU thread's launches, the GPU ops by
        // correlation), which a stable sort merges; the order is total, so the result
        // is the one any sort gives.
        changes.sort();
        let mut per_stream: BTreeMap<i64, Vec<(i64, i64)>> = BTreeMap::new();
        for (time, _, stream, change) in changes {
            let points = per_stream.entry(stream).or_default();
            let length = points.last().map_or(0, |&(_, length)| length) + change;
            points.push((time, length));
        }
        result.extend(per_stream.into_iter().map(|(stream, points)| QueueSeries { rank: rank.rank, stream, points }));
    }
    result
}
