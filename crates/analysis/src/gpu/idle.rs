//! HTA's idle-time breakdown (`get_idle_time_breakdown`), per rank and stream.
//!
//! On each stream, the kernels, memcpys and memsets (categories `kernel`,
//! `gpu_memcpy`, `gpu_memset` and their old spellings, `mtia_ccp_events`; not
//! `cuda_sync`) are taken in start order, and the gap before each is classified:
//! - **host wait**: the op's launch (its correlated runtime call) started after the
//!   previous op on the stream had ended — the CPU did not enqueue work in time;
//! - **kernel wait**: otherwise, when the gap is shorter than
//!   [`CONSECUTIVE_KERNEL_DELAY_US`] — the launch overhead between back-to-back ops;
//! - **other**: everything else (waiting on an event, a sync, another stream).
//!
//! The gap is `start − end of the previous op in start order` and is not clamped, so
//! overlapping ops give negative gaps (as in HTA). The first op on a stream has no
//! gap but is counted in `other`.

use mlprof_model::names::chrome;
use serde::Serialize;

use super::describe::{Describe, describe};
use super::{Context, round_to, us};

/// HTA's default `consecutive_kernel_delay`: 30 (trace time units, i.e. µs, although
/// HTA's documentation says ns).
pub const CONSECUTIVE_KERNEL_DELAY_US: i64 = 30;

/// Categories HTA counts as kernels for this analysis.
const KERNEL_CATEGORIES: [&str; 7] = [
    chrome::CAT_KERNEL,
    chrome::CAT_KERNEL_LEGACY,
    chrome::CAT_GPU_MEMSET,
    chrome::CAT_MEMSET_LEGACY,
    chrome::CAT_GPU_MEMCPY,
    chrome::CAT_MEMCPY_LEGACY,
    chrome::CAT_MTIA_CCP_EVENTS,
];

/// Why a stream was idle before an op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IdleCategory {
    /// The launch came after the stream had drained.
    HostWait,
    /// A short gap between back-to-back ops.
    KernelWait,
    /// Any other wait.
    Other,
}

impl IdleCategory {
    /// HTA's spelling.
    pub fn name(self) -> &'static str {
        match self {
            IdleCategory::HostWait => "host_wait",
            IdleCategory::KernelWait => "kernel_wait",
            IdleCategory::Other => "other",
        }
    }
}

/// Idle time of one category on one stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IdleTime {
    /// The rank.
    pub rank: i64,
    /// The CUDA stream.
    pub stream: i64,
    /// The category.
    pub idle_category: IdleCategory,
    /// Total idle time in microseconds.
    pub idle_time_us: f64,
    /// Share of the stream's idle time (0–1, 2 decimals, as HTA); `None` when the
    /// stream had no idle time.
    pub idle_time_ratio: Option<f64>,
    /// The gaps of this category (µs): count, mean, std, quartiles.
    pub intervals: Describe,
}

/// Every rank's idle time per stream (streams in order of their first op) and
/// category (in HTA's order; a category without any gap is left out).
pub fn idle_time_breakdown(context: &Context) -> Vec<IdleTime> {
    let kernel_cats: Vec<u32> = KERNEL_CATEGORIES.iter().filter_map(|cat| context.traces.symbols.id(cat)).collect();
    let threshold_ps = CONSECUTIVE_KERNEL_DELAY_US * 1_000_000;
    let mut result = Vec::new();
    for rank in &context.traces.ranks {
        let mut ops: Vec<_> =
            rank.rows.iter().filter(|row| row.stream != -1 && kernel_cats.contains(&row.cat)).collect();
        ops.sort_by_key(|row| row.ts_ps);
        let mut streams: Vec<i64> = Vec::new();
        for row in &ops {
            if !streams.contains(&row.stream) {
                streams.push(row.stream);
            }
        }
        for stream in streams {
            let mut gaps: [(bool, Vec<f64>, i64); 3] = Default::default();
            let mut previous_end: Option<i64> = None;
            for row in ops.iter().filter(|row| row.stream == stream) {
                let category = match previous_end {
                    None => IdleCategory::Other,
                    Some(end) if row.linked_cpu_ts_ps.is_some_and(|launch| launch > end) => IdleCategory::HostWait,
                    Some(end) if row.ts_ps - end < threshold_ps => IdleCategory::KernelWait,
                    Some(_) => IdleCategory::Other,
                };
                let slot = &mut gaps[category as usize];
                slot.0 = true;
                if let Some(end) = previous_end {
                    slot.1.push(us(row.ts_ps - end));
                    slot.2 += row.ts_ps - end;
                }
                previous_end = Some(row.end_ps());
            }
            let stream_total: i64 = gaps.iter().map(|g| g.2).sum();
            let categories = [IdleCategory::HostWait, IdleCategory::KernelWait, IdleCategory::Other];
            for (category, (seen, intervals, sum)) in categories.into_iter().zip(gaps) {
                if !seen {
                    continue;
                }
                result.push(IdleTime {
                    rank: rank.rank,
                    stream,
                    idle_category: category,
                    idle_time_us: us(sum),
                    idle_time_ratio: (stream_total != 0).then(|| round_to(sum as f64 / stream_total as f64, 2)),
                    intervals: describe(intervals),
                });
            }
        }
    }
    result
}
