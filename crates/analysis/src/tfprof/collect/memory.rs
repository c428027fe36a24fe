//! tfprof's memory columns from allocation events: per op run, the bytes it requested,
//! its peak (the most bytes it had allocated and not yet freed during the run), its
//! residual bytes (allocated by it and not freed by its end) and its output bytes.
//!
//! Sources: TensorFlow's `MemoryAllocation` / `MemoryDeallocation` events (the op is
//! the `tf_op` stat; an allocation whose `region_type` is `output` is an output) and
//! PyTorch's `[memory]` instants (the op is the innermost enclosing `cpu_op`, found
//! by `memory_profile`'s sweep; PyTorch does not say which allocations are outputs).
//!
//! The one design decision to know: allocations and frees are replayed in time order
//! and matched by (allocator, address); a free counts against its allocating op only
//! if it happens before that op's run ends, which makes peak and residual per run.

use std::collections::HashMap;

use super::super::profile::{OpRecord, Profile};
use super::HostContext;
use crate::facts::{self, AllocationRecords};
use crate::memory_profile::kineto_memory_events;
use crate::xstats::{self, StatKeys};

/// One allocation (`bytes` > 0) or free (`bytes` < 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct MemoryOp {
    /// Time, picoseconds.
    pub time_ps: i64,
    /// Tie-breaker at equal times (event order).
    pub order: (i64, usize, usize),
    /// `(allocator, address)`.
    pub block: (u64, u64),
    /// Signed size.
    pub bytes: i64,
    /// The record of the op that allocated (allocations only).
    pub owner: Option<usize>,
    /// Whether the allocation holds an output of the op.
    pub is_output: bool,
}

/// Fills the memory columns of the host's records (those from index `first` on);
/// `host_runs` maps `(line, event)` of the `/host:CPU` plane to host op records.
pub(super) fn attribute(
    profile: &mut Profile,
    context: &HostContext<'_>,
    host_runs: &HashMap<(usize, usize), usize>,
    first: usize,
) {
    let ops = match facts::allocation_records(context.host) {
        AllocationRecords::PytorchMemoryEvents => kineto_ops(context, host_runs),
        AllocationRecords::TfAllocatorEvents => xspace_ops(profile, context, first),
    };
    if ops.is_empty() {
        return;
    }
    profile.availability.memory = true;
    let unattributed = ops.iter().filter(|op| op.bytes > 0 && op.owner.is_none()).count();
    replay(&mut profile.records, ops);
    if unattributed > 0 {
        profile.notes.push(format!(
            "{unattributed} allocations of {} happened outside any op and count for none.",
            context.host.name
        ));
    }
}

/// Replays allocations and frees in time order into the owners' memory columns.
pub(super) fn replay(records: &mut [OpRecord], mut ops: Vec<MemoryOp>) {
    ops.sort_by_key(|op| (op.time_ps, op.order));
    let mut live: HashMap<(u64, u64), (Option<usize>, i64)> = HashMap::new();
    let mut live_by_owner: HashMap<usize, i64> = HashMap::new();
    for op in ops {
        if op.bytes > 0 {
            live.insert(op.block, (op.owner, op.bytes));
            let Some(record) = op.owner.and_then(|owner| records.get_mut(owner).map(|r| (owner, r))) else { continue };
            let (owner, record) = record;
            record.requested_bytes = record.requested_bytes.saturating_add(op.bytes);
            if op.is_output {
                record.output_bytes = record.output_bytes.saturating_add(op.bytes);
            }
            let now = live_by_owner.entry(owner).or_insert(0);
            *now = now.saturating_add(op.bytes);
            record.peak_bytes = record.peak_bytes.max(*now);
        } else if let Some((Some(owner), bytes)) = live.remove(&op.block)
            && let Some(record) = records.get(owner)
            && op.time_ps <= record.start_ps.saturating_add(record.duration_ps)
        {
            let now = live_by_owner.entry(owner).or_insert(0);
            *now = now.saturating_sub(bytes);
        }
    }
    for (owner, bytes) in live_by_owner {
        if let Some(record) = records.get_mut(owner) {
            record.residual_bytes = bytes.max(0);
        }
    }
}

/// PyTorch's `[memory]` events of the host, each allocation owned by the record of
/// its enclosing `cpu_op`.
fn kineto_ops(context: &HostContext<'_>, host_runs: &HashMap<(usize, usize), usize>) -> Vec<MemoryOp> {
    let host_plane = context.host_plane();
    kineto_memory_events(context.host)
        .into_iter()
        .filter(|event| event.bytes != 0)
        .map(|event| {
            let (plane, line, index) =
                (event.position.0 as usize, event.position.1 as usize, event.position.2 as usize);
            let owner = event
                .op_event
                .filter(|_| Some(plane) == host_plane)
                .and_then(|op_event| host_runs.get(&(line, op_event as usize)).copied());
            let allocator = ((event.device_type as u64) << 32) ^ (event.device_id as u64 & 0xffff_ffff);
            MemoryOp {
                time_ps: event.time_ps,
                order: (event.ev_idx, line, index),
                block: (allocator, event.address),
                bytes: event.bytes,
                owner,
                is_output: false,
            }
        })
        .collect()
}

/// Stat names of TensorFlow's allocator events, in [`StatKeys`] order.
const TF_STATS: [&str; 6] = ["tf_op", "requested_bytes", "allocation_bytes", "addr", "allocator_name", "region_type"];

/// TensorFlow's allocator events of the host plane, each allocation owned by a run of
/// the op its `tf_op` names ([`find_run`]).
fn xspace_ops(profile: &mut Profile, context: &HostContext<'_>, first: usize) -> Vec<MemoryOp> {
    let Some(plane_index) = context.host_plane() else { return Vec::new() };
    let plane = &context.host.planes[plane_index];
    let kinds: Vec<i8> = plane
        .event_metadata
        .iter()
        .map(|m| match m.name.as_str() {
            "MemoryAllocation" => 1,
            "MemoryDeallocation" => -1,
            _ => 0,
        })
        .collect();
    if !kinds.iter().any(|&k| k != 0) {
        return Vec::new();
    }
    let keys = StatKeys::new(plane, TF_STATS);
    let runs = RunIndex::new(&profile.records, first);
    let mut allocators: HashMap<String, u64> = HashMap::new();
    let mut ops = Vec::new();
    for (line_index, line) in plane.lines.iter().enumerate() {
        let track = context.track(profile, plane_index, line_index);
        for event in line.iter() {
            let kind = kinds.get(event.metadata_index() as usize).copied().unwrap_or(0);
            if kind == 0 {
                continue;
            }
            let int = |i: usize| xstats::event_int(plane, &event, keys.key(i));
            let allocator = xstats::event_str(plane, &event, keys.key(4)).unwrap_or("").to_string();
            let next = allocators.len() as u64;
            let allocator = *allocators.entry(allocator).or_insert(next);
            let requested = int(1).filter(|&b| b > 0).or_else(|| int(2)).unwrap_or(0);
            let block = (allocator, int(3).unwrap_or(0) as u64);
            let time_ps = event.start_ps();
            let order = (0, line_index, event.index());
            if kind < 0 {
                ops.push(MemoryOp { time_ps, order, block, bytes: -requested.max(1), owner: None, is_output: false });
                continue;
            }
            if requested <= 0 {
                continue;
            }
            let op_name = xstats::event_str(plane, &event, keys.key(0)).unwrap_or("");
            let owner = (!op_name.is_empty())
                .then(|| profile.strings.intern(op_name))
                .and_then(|node| runs.find_run(&profile.records, node, track, time_ps));
            let is_output = xstats::event_str(plane, &event, keys.key(5)) == Some("output");
            profile.availability.output_bytes |= is_output;
            ops.push(MemoryOp { time_ps, order, block, bytes: requested, owner, is_output });
        }
    }
    ops
}

/// The host op runs of one host by node, sorted by start.
struct RunIndex {
    by_node: HashMap<u32, Vec<usize>>,
}

/// How far back [`RunIndex::find_run`] looks for a run that contains the time.
const MAX_CANDIDATES: usize = 64;

impl RunIndex {
    fn new(records: &[OpRecord], first: usize) -> RunIndex {
        let mut by_node: HashMap<u32, Vec<usize>> = HashMap::new();
        for (index, record) in records.iter().enumerate().skip(first) {
            if record.runs > 0 && record.accelerator_ps == 0 && !record.is_static {
                by_node.entry(record.node).or_default().push(index);
            }
        }
        for runs in by_node.values_mut() {
            runs.sort_by_key(|&i| (records[i].start_ps, i));
        }
        RunIndex { by_node }
    }

    /// The run of `node` an allocation at `time_ps` on `track` belongs to: the latest
    /// run containing the time on the same thread, else on any thread, else the
    /// latest run started before it.
    fn find_run(&self, records: &[OpRecord], node: u32, track: u32, time_ps: i64) -> Option<usize> {
        let runs = self.by_node.get(&node)?;
        let started = runs.partition_point(|&i| records[i].start_ps <= time_ps);
        let candidates = runs[..started].iter().rev().take(MAX_CANDIDATES);
        let contains = |&&i: &&usize| records[i].start_ps.saturating_add(records[i].duration_ps) >= time_ps;
        let mut containing = candidates.clone().filter(contains);
        let same_thread = containing.clone().find(|&&i| records[i].track == track);
        same_thread.or_else(|| containing.next()).or_else(|| runs[..started].last()).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(start_ps: i64, duration_ps: i64) -> OpRecord {
        OpRecord { start_ps, duration_ps, runs: 1, ..OpRecord::default() }
    }

    fn op(time_ps: i64, addr: u64, bytes: i64, owner: Option<usize>) -> MemoryOp {
        MemoryOp { time_ps, order: (0, 0, time_ps as usize), block: (0, addr), bytes, owner, is_output: bytes > 100 }
    }

    #[test]
    fn peak_and_residual_follow_frees_within_the_run() {
        // Run 0 [0, 100): allocates 10 @1 and 200 @2, frees @1 at 50 (peak 210, 200
        // left); run 1 [200, 300) allocates 5 @3, freed at 400 after its end; @2 is
        // freed at 500, after run 0 ended: still residual for run 0.
        let mut records = vec![record(0, 100), record(200, 100)];
        let ops = vec![
            op(10, 1, 10, Some(0)),
            op(20, 2, 200, Some(0)),
            op(50, 1, -10, None),
            op(210, 3, 5, Some(1)),
            op(400, 3, -5, None),
            op(500, 2, -200, None),
            op(600, 9, 7, None),
        ];
        replay(&mut records, ops);
        let memory = |r: &OpRecord| (r.requested_bytes, r.peak_bytes, r.residual_bytes, r.output_bytes);
        assert_eq!(memory(&records[0]), (210, 210, 200, 200));
        assert_eq!(memory(&records[1]), (5, 5, 5, 0));
    }

    #[test]
    fn allocations_find_the_run_of_their_op() {
        let mut records = vec![record(0, 100), record(50, 10), record(200, 10)];
        records[1].track = 1;
        let index = RunIndex::new(&records, 0);
        // All runs share node 0 here; the same-thread run containing the time wins.
        assert_eq!(index.find_run(&records, 0, 1, 55), Some(1));
        assert_eq!(index.find_run(&records, 0, 0, 55), Some(0));
        assert_eq!(index.find_run(&records, 0, 0, 150), Some(1));
        assert_eq!(index.find_run(&records, 0, 0, -5), None);
        assert_eq!(index.find_run(&records, 7, 0, 55), None);
    }
}
