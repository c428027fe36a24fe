//! HTA's memory bandwidth summary (`get_memory_bw_summary`): per rank and kind of
//! memory op (`Memcpy HtoD`, `Memcpy DtoH`, `Memcpy DtoD`, `Memset`, …), statistics
//! of the bandwidth in use over time — the sum of the `memory bandwidth (GB/s)` of
//! the ops of that kind running at each change, counting only positive values.
//! A zero-length op is taken to last 1 µs, as in HTA.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Context;
use super::describe::{Describe, describe};
use super::kernel_type::{KernelType, memory_kind};

/// Bandwidth statistics of one kind of memory op on one rank.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemoryBandwidth {
    /// The rank.
    pub rank: i64,
    /// `Memcpy HtoD`, `Memcpy DtoH`, `Memcpy DtoD`, `Memset`, …
    pub name: String,
    /// Statistics of the bandwidth in use, GB/s.
    pub memory_bw_gbps: Describe,
}

/// Bandwidth changes `(time in ps, GB/s added)` of one kind of op.
type Changes = Vec<(i64, f64)>;

/// Every rank's memory bandwidth summary, by rank and kind.
pub fn memory_bw_summary(context: &Context) -> Vec<MemoryBandwidth> {
    let mut result = Vec::new();
    for rank in &context.traces.ranks {
        let mut by_kind: BTreeMap<String, (Changes, Changes)> = BTreeMap::new();
        for row in
            rank.rows.iter().filter(|row| row.stream != -1 && context.kernel_type(row.name) == KernelType::Memory)
        {
            let duration = if row.dur_ps == 0 { 1_000_000 } else { row.dur_ps };
            let (starts, ends) = by_kind.entry(memory_kind(context.traces.symbols.text(row.name))).or_default();
            starts.push((row.ts_ps, row.memory_bw_gbps));
            ends.push((row.ts_ps + duration, -row.memory_bw_gbps));
        }
        for (name, (starts, ends)) in by_kind {
            // Starts before ends at equal times: HTA's concatenation order, which its
            // (unstable) sort keeps on small inputs and may permute on large ones.
            let mut changes: Vec<(i64, f64)> = starts.into_iter().chain(ends).collect();
            changes.sort_by_key(|&(time, _)| time);
            let mut in_use = 0.0;
            let mut values = Vec::with_capacity(changes.len());
            for (_, change) in changes {
                in_use += change;
                if in_use > 0.0 {
                    values.push(in_use);
                }
            }
            if values.is_empty() {
                continue;
            }
            result.push(MemoryBandwidth { rank: rank.rank, name, memory_bw_gbps: describe(values) });
        }
    }
    result
}
