//! A host's allocator trace ([`mlprof_model::AllocatorTrace`], a PyTorch memory
//! snapshot's entries) read as the memory profile's events: per device, its `alloc`
//! and `free_requested` records in time order with the totals after each, and its
//! `oom` records.
//!
//! The one design decision to know: nothing is copied per record but its index and
//! its totals (20 bytes), and the profile reads each record through
//! [`MemoryEvents`] when it needs it, so the tens of millions of records of a
//! multi-GB snapshot are never held twice. Records at the same time keep their trace
//! order: the order the allocator did them in, under its lock.

use std::sync::Arc;

use mlprof_model::fxhash::FxMap;
use mlprof_model::{AllocatorAction, AllocatorRecord, AllocatorTrace, ByDevice};

use super::kineto::events::{MemoryEvent, OpInfo};
use super::kineto::{Brief, MemoryEvents};
use super::snapshot::stack_label;
use crate::grouping::profiler_steps::{self, ProfilerStep};

/// `c10::DeviceType::CUDA`: the allocator a memory snapshot records.
pub(crate) const CUDA: i64 = 1;

/// One device's records as the memory profile reads them.
#[derive(Debug, Default)]
pub(crate) struct DeviceRecords {
    /// The device ordinal.
    pub device: u16,
    /// Its `alloc` and `free_requested` records (trace indices) in time order.
    pub order: Vec<u32>,
    /// (allocated, reserved) bytes after each of them, by position in `order`.
    pub totals: Vec<(i64, i64)>,
    /// Its `oom` records: trace index and the totals when it failed, in time order.
    pub ooms: Vec<(u32, (i64, i64))>,
}

/// Each device's records, by ordinal, in one replay of the trace.
pub(crate) fn per_device(trace: &AllocatorTrace) -> Vec<DeviceRecords> {
    let mut devices: ByDevice<Option<DeviceRecords>> = ByDevice::default();
    trace.totals(|index, record, totals| {
        let device = devices
            .get_mut(record.device)
            .get_or_insert_with(|| DeviceRecords { device: record.device, ..DeviceRecords::default() });
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        match record.action {
            AllocatorAction::Alloc | AllocatorAction::FreeRequested => {
                device.order.push(index);
                device.totals.push(totals);
            }
            AllocatorAction::Oom => device.ooms.push((index, totals)),
            _ => {}
        }
    });
    let mut devices: Vec<DeviceRecords> = devices.into_values().filter_map(|(_, device)| device).collect();
    for device in &mut devices {
        device.sort_by_time(trace);
    }
    devices
}

impl DeviceRecords {
    /// Puts the records in time order (ties: trace order), where the trace is not.
    fn sort_by_time(&mut self, trace: &AllocatorTrace) {
        let time = |index: u32| trace.get(index as usize).map_or(0, |r| r.time_ps);
        let sorted = |indices: &mut dyn Iterator<Item = u32>| {
            let mut last = i64::MIN;
            for index in indices {
                let t = time(index);
                if t < last {
                    return false;
                }
                last = t;
            }
            true
        };
        if !sorted(&mut self.order.iter().copied()) {
            let mut paired: Vec<(u32, (i64, i64))> =
                self.order.iter().copied().zip(self.totals.iter().copied()).collect();
            paired.sort_by_key(|&(index, _)| (time(index), index));
            (self.order, self.totals) = paired.into_iter().unzip();
        }
        if !sorted(&mut self.ooms.iter().map(|&(index, _)| index)) {
            self.ooms.sort_by_key(|&(index, _)| (time(index), index));
        }
    }

    /// The peak the timeline reports (see `kineto::allocator`): the position of the
    /// last record reaching the largest allocated total; `None` without records.
    pub fn peak(&self) -> Option<usize> {
        let mut peak: Option<(usize, i64)> = None;
        for (position, &(allocated, _)) in self.totals.iter().enumerate() {
            if peak.is_none_or(|(_, most)| allocated >= most) {
                peak = Some((position, allocated));
            }
        }
        peak.map(|(position, _)| position)
    }

    /// Record `position` of `order`.
    pub fn record(&self, trace: &AllocatorTrace, position: usize) -> AllocatorRecord {
        let index = self.order.get(position).copied().unwrap_or(u32::MAX);
        trace.get(index as usize).unwrap_or(AllocatorRecord {
            action: AllocatorAction::Alloc,
            address: 0,
            size: 0,
            device: self.device,
            stream: 0,
            stack: None,
            time_ps: 0,
        })
    }
}

/// One device's records as [`MemoryEvents`].
pub(crate) struct TraceEvents<'a> {
    pub trace: &'a AllocatorTrace,
    pub records: &'a DeviceRecords,
    /// The host's `ProfilerStep#N` ranges (from the snapshot's annotations).
    pub steps: &'a [ProfilerStep],
    /// Stack names by stack id (`u32::MAX` for none), made once each.
    pub labels: FxMap<u32, Arc<str>>,
}

impl MemoryEvents for TraceEvents<'_> {
    fn len(&self) -> usize {
        self.records.order.len()
    }

    fn event(&self, index: usize) -> MemoryEvent {
        let record = self.records.record(self.trace, index);
        let (allocated, reserved) = self.records.totals.get(index).copied().unwrap_or_default();
        let step = profiler_steps::step_at(self.steps, record.time_ps).map_or(-1, |i| self.steps[i].number);
        MemoryEvent {
            time_ps: record.time_ps,
            ev_idx: 0,
            position: (0, 0, self.records.order.get(index).copied().unwrap_or(u32::MAX)),
            device_type: CUDA,
            device_id: i64::from(record.device),
            bytes: record.action.signed(record.size),
            address: record.address,
            allocated_bytes: allocated,
            reserved_bytes: reserved,
            op_event: None,
            step,
        }
    }

    fn brief(&self, index: usize) -> Brief {
        let at = self.records.order.get(index).map_or(usize::MAX, |&i| i as usize);
        let (allocated, reserved) = self.records.totals.get(index).copied().unwrap_or_default();
        let size = self.trace.size(at);
        Brief {
            bytes: self.trace.action(at).map_or(size, |action| action.signed(size)),
            address: self.trace.address(at),
            allocated_bytes: allocated,
            reserved_bytes: reserved,
            has_op: false,
        }
    }

    fn offset_ps(&self, index: usize) -> i64 {
        self.records.record(self.trace, index).time_ps
    }

    fn op(&self, _: usize) -> Option<OpInfo> {
        None
    }

    fn stack_label(&mut self, index: usize) -> Option<Arc<str>> {
        let stack = self.records.record(self.trace, index).stack;
        let trace = self.trace;
        let label = self
            .labels
            .entry(stack.unwrap_or(u32::MAX))
            .or_insert_with(|| Arc::from(stack_label(stack.map_or("", |id| trace.stack(id)))));
        Some(label.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(action: AllocatorAction, size: i64, device: u16, time_ps: i64) -> AllocatorRecord {
        AllocatorRecord { action, address: time_ps as u64, size, device, stream: 0, stack: None, time_ps }
    }

    #[test]
    fn records_out_of_time_order_are_sorted_with_the_totals_replayed_in_trace_order() {
        let mut trace = AllocatorTrace::default();
        trace.push(record(AllocatorAction::Alloc, 10, 1, 5));
        trace.push(record(AllocatorAction::Oom, 1 << 30, 1, 6));
        trace.push(record(AllocatorAction::Alloc, 20, 1, 3));
        trace.push(record(AllocatorAction::FreeCompleted, 20, 0, 4));
        trace.push(record(AllocatorAction::FreeRequested, 10, 1, 7));
        trace.start_totals = vec![(1, 100, 0)];
        let devices = per_device(&trace);
        assert_eq!(devices.iter().map(|d| d.device).collect::<Vec<_>>(), vec![0, 1]);
        assert!(devices[0].order.is_empty() && devices[0].ooms.is_empty());
        let device = &devices[1];
        assert_eq!(device.order, vec![2, 0, 4]);
        assert_eq!(device.totals, vec![(130, 0), (110, 0), (120, 0)]);
        assert_eq!(device.ooms, vec![(1, (110, 0))]);
        // The last record reaching the most allocated bytes.
        assert_eq!(device.peak(), Some(0));
        let freed = device.record(&trace, 2);
        assert_eq!(freed.action.signed(freed.size), -10);
    }
}
