//! Synchronisation findings: implicit syncs (a framework op that copies device→host
//! and then waits: `.item()`, `.cpu()`, `if tensor:`), explicit synchronising calls,
//! and synchronisations the device recorded without a host call; plus the inventory
//! of blocking calls by API.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use super::findings::{FindingKind, Location, Occurrence};
use crate::facts::activity::{Call, GpuKind, HostKind, HostRef, ProfileView, Thread};
use crate::kineto::CopyDirection;

/// Blocking host calls of one API name (every call, whichever finding it went to).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BlockingCalls {
    /// The API (`cudaStreamSynchronize`, `cudaMemcpy`).
    pub name: String,
    /// Calls.
    pub count: u64,
    /// Host time inside the calls, ps.
    pub host_time_ps: i64,
}

/// Every host call that blocks until the device is done, by name.
pub fn blocking_calls(view: &ProfileView<'_>) -> Vec<BlockingCalls> {
    let mut by_name: BTreeMap<&str, (u64, i64)> = BTreeMap::new();
    for event in view.threads.iter().flat_map(|t| &t.events) {
        if let HostKind::Runtime(call) = event.kind
            && call.blocks_host()
        {
            let entry = by_name.entry(event.name).or_default();
            entry.0 += 1;
            entry.1 += event.duration_ps();
        }
    }
    let mut calls: Vec<BlockingCalls> = by_name
        .into_iter()
        .map(|(name, (count, host_time_ps))| BlockingCalls { name: name.to_string(), count, host_time_ps })
        .collect();
    calls.sort_by(|a, b| b.host_time_ps.cmp(&a.host_time_ps).then(a.name.cmp(&b.name)));
    calls
}

/// Whether the copy call `at` moves data device→host (by its GPU op, else its name).
fn is_device_to_host_copy(view: &ProfileView<'_>, gpu_ops: &HashMap<i64, Vec<(usize, usize)>>, at: HostRef) -> bool {
    let Some(event) = view.event(at) else { return false };
    if !matches!(event.kind, HostKind::Runtime(Call::CopyAsync | Call::CopySync)) {
        return false;
    }
    let by_op = event.correlation.and_then(|c| gpu_ops.get(&c)).and_then(|ops| {
        ops.iter().find_map(|&(d, o)| match view.devices.get(d)?.ops.get(o)?.kind {
            GpuKind::Copy(copy) => Some(copy.direction == CopyDirection::DeviceToHost),
            _ => None,
        })
    });
    by_op.unwrap_or_else(|| event.name.contains("DtoH"))
}

/// Implicit syncs: each top-level framework op whose subtree holds a device→host copy
/// followed by a blocking call (or a copy call that is itself blocking). Returns the
/// occurrences and the host calls they account for (no other finding counts them).
pub fn implicit_syncs(
    view: &ProfileView<'_>,
    gpu_ops: &HashMap<i64, Vec<(usize, usize)>>,
) -> (Vec<Occurrence>, HashSet<HostRef>) {
    let mut occurrences = Vec::new();
    let mut consumed = HashSet::new();
    let mut seen_tops: HashSet<HostRef> = HashSet::new();
    for (t, thread) in view.threads.iter().enumerate() {
        for (e, event) in thread.events.iter().enumerate() {
            let at = (t as u32, e as u32);
            if !matches!(event.kind, HostKind::Runtime(Call::CopyAsync | Call::CopySync))
                || !is_device_to_host_copy(view, gpu_ops, at)
            {
                continue;
            }
            let Some(top) = outermost_op_index(thread, at.1) else { continue };
            if !seen_tops.insert((at.0, top)) {
                continue;
            }
            if let Some(occurrence) = implicit_sync_in(view, gpu_ops, at.0, top, &mut consumed) {
                occurrences.push(occurrence);
            }
        }
    }
    (occurrences, consumed)
}

/// The index of the outermost framework op enclosing event `index`.
fn outermost_op_index(thread: &Thread<'_>, index: u32) -> Option<u32> {
    thread.chain(index).filter(|(_, e)| e.kind == HostKind::CpuOp).map(|(i, _)| i).last()
}

/// The implicit sync inside top-level op `top` of thread `t`, if its first
/// device→host copy is followed by a blocking call (or blocks itself).
fn implicit_sync_in(
    view: &ProfileView<'_>,
    gpu_ops: &HashMap<i64, Vec<(usize, usize)>>,
    t: u32,
    top: u32,
    consumed: &mut HashSet<HostRef>,
) -> Option<Occurrence> {
    let thread = view.threads.get(t as usize)?;
    let top_event = thread.events.get(top as usize)?;
    let subtree = (top as usize + 1..thread.events.len()).take_while(|&i| thread.events[i].start_ps < top_event.end_ps);
    let mut first_copy: Option<u32> = None;
    let mut calls: Vec<u32> = Vec::new();
    let mut waits: Vec<&str> = Vec::new();
    for i in subtree {
        let event = &thread.events[i];
        let HostKind::Runtime(call) = event.kind else { continue };
        let index = i as u32;
        if first_copy.is_none() && is_device_to_host_copy(view, gpu_ops, (t, index)) {
            first_copy = Some(index);
            calls.push(index);
            if call.blocks_host() {
                waits.push(event.name);
            }
        } else if first_copy.is_some() && call.blocks_host() {
            calls.push(index);
            waits.push(event.name);
        }
    }
    let copy = first_copy?;
    if waits.is_empty() {
        return None;
    }
    let mut time_lost_ps = 0;
    for &index in &calls {
        consumed.insert((t, index));
        time_lost_ps += thread.events[index as usize].duration_ps();
    }
    let mut chain: Vec<&str> =
        thread.chain(copy).filter(|(_, e)| e.kind == HostKind::CpuOp).map(|(_, e)| e.name).collect();
    chain.reverse();
    waits.dedup();
    let bytes = thread.events[copy as usize]
        .correlation
        .and_then(|c| gpu_ops.get(&c))
        .and_then(|ops| ops.first())
        .and_then(|&(d, o)| view.devices.get(d)?.ops.get(o)?.bytes)
        .unwrap_or(0);
    Some(Occurrence {
        kind: FindingKind::ImplicitSync,
        what: format!("{}: device→host copy, then {}", chain.join(" > "), waits.join(", ")),
        device: None,
        location: Location::of(view, (t, top)),
        time_lost_ps,
        bytes,
        fix: implicit_sync_fix(top_event.name),
    })
}

/// The fix for an implicit sync in op `op`.
fn implicit_sync_fix(op: &str) -> String {
    let what = match op {
        "aten::item" | "aten::_local_scalar_dense" | "aten::is_nonzero" => {
            "`.item()` / `float(t)` / `if t:` reads a GPU value on the host and waits for the GPU"
        }
        "aten::nonzero" | "aten::masked_select" | "aten::unique" | "aten::_unique2" | "aten::index" => {
            "this op's output size depends on GPU data, so it copies the size to the host and waits; prefer fixed-size forms (torch.where with a mask) and"
        }
        _ => "`.cpu()` / `.to('cpu')` / `.tolist()` / `print(t)` copies to the host and waits for the GPU",
    };
    format!(
        "{what}: keep values on the device (accumulate losses and metrics in a GPU tensor, read them every N steps), \
         or copy with `non_blocking=True` into pinned memory and read after a CUDA event."
    )
}

/// The fix for an explicit synchronising call `name` made inside op `op`.
fn sync_fix(name: &str, op: Option<&str>) -> String {
    if name.contains("EventSynchronize") || name == "Event Sync" {
        "`event.synchronize()` / `event.elapsed_time()` blocks the host: read timing events after the loop or poll \
         `event.query()`; to order streams use `stream.wait_event()`, which does not block the host."
            .into()
    } else if name.contains("StreamSynchronize") || name == "Stream Sync" {
        match op {
            Some(op) if op.contains("copy") || op.starts_with("aten::to") || op.starts_with("aten::_to") => {
                "a blocking copy (`.to(device)` without `non_blocking=True`) waits for the stream: copy from pinned \
                 memory with `non_blocking=True` and let stream order do the waiting."
                    .into()
            }
            _ => "`cudaStreamSynchronize` (`stream.synchronize()` in PyTorch, or a library call doing it) drains the \
                  stream every time: remove it from the loop, or wait on a CUDA event recorded where the result is \
                  produced."
                .into(),
        }
    } else {
        "`cudaDeviceSynchronize` (`torch.cuda.synchronize()` in PyTorch) waits for all GPU work and empties the \
         launch queue: remove it from the loop (time with CUDA events; synchronise only where results are read)."
            .into()
    }
}

/// Explicit synchronising calls not already counted (`consumed`): one occurrence per
/// call, time lost = host time in the call; and `cuda_sync` records whose host call
/// is missing from the profile (time lost = the record's duration). Stream waits
/// (`Stream Wait Event`) block no host and are not findings.
pub fn sync_calls(
    view: &ProfileView<'_>,
    gpu_ops: &HashMap<i64, Vec<(usize, usize)>>,
    consumed: &HashSet<HostRef>,
) -> Vec<Occurrence> {
    let mut occurrences = Vec::new();
    for (t, thread) in view.threads.iter().enumerate() {
        for (e, event) in thread.events.iter().enumerate() {
            let at = (t as u32, e as u32);
            if event.kind != HostKind::Runtime(Call::Sync) || consumed.contains(&at) {
                continue;
            }
            let recorded = event.correlation.and_then(|c| gpu_ops.get(&c)).and_then(|ops| {
                ops.iter().find_map(|&(d, o)| {
                    let op = view.devices.get(d)?.ops.get(o)?;
                    (op.kind == GpuKind::Sync).then_some(op.name)
                })
            });
            let location = Location::of(view, at);
            let fix = sync_fix(event.name, location.op.as_deref());
            occurrences.push(Occurrence {
                kind: FindingKind::SyncCall,
                what: match recorded {
                    Some(kind) => format!("{} ({kind})", event.name),
                    None => event.name.to_string(),
                },
                device: None,
                location,
                time_lost_ps: event.duration_ps(),
                bytes: 0,
                fix,
            });
        }
    }
    for device in &view.devices {
        for op in device.ops.iter().filter(|op| op.kind == GpuKind::Sync && op.name != "Stream Wait Event") {
            if view.runtime_call(op.correlation).is_some() {
                continue;
            }
            occurrences.push(Occurrence {
                kind: FindingKind::SyncCall,
                what: format!("{} (no host call recorded)", op.name),
                device: Some(device.ordinal),
                location: Location::default(),
                time_lost_ps: op.duration_ps(),
                bytes: 0,
                fix: sync_fix(op.name, None),
            });
        }
    }
    occurrences
}
