//! CUPTI activity records laid out as an XSpace, the way XLA's CUPTI collector lays out
//! its own, so XProf and every mlprof tool read them unchanged. Two sources fill it:
//! the records `mlprof-inject` hands to `mlprof run` (CUPTI's own structs, decoded by
//! `mlprof-cupti`) and the tables of an Nsight Systems export ([`crate::nsys`]).
//!
//! - `/device:GPU:N` (id N): plane stats `device_vendor` "Nvidia", `gpu_device_name`,
//!   `clock_rate` (kHz), `core_count`, `memory_bandwidth` (bytes/s), `memory_size`,
//!   `compute_cap_major`/`_minor` where the device is known; one line per CUDA stream
//!   (`Stream #7(Compute,MemcpyH2D)`); kernels named by their demangled name with
//!   `kernel_details` ("regs:R static_shared:S dynamic_shared:D grid:x,y,z block:x,y,z
//!   occ_pct:P"), copies `MemcpyH2D`/`MemcpyD2H`/`MemcpyD2D`/`MemcpyP2P`/`MemcpyOther`
//!   with `memcpy_details`, memsets `Memset <kind>` with `Memset_details`, all with
//!   `correlation_id` (uint64) and `context_id` ("$$<id>").
//! - `/host:CPU` (id 49; XLA's `/host:CUPTI` after `PostProcessSingleHostXSpace` merged
//!   it): one line per thread (`Host Threads/<tid>`) with the CUDA runtime (and driver)
//!   API calls by name, each with `correlation_id` (a synchronizing call also with what
//!   it waited for: `synchronization` "cuStreamSynchronize", `stream_id`, from CUPTI's
//!   synchronization record); device memory allocations and frees on the thread that
//!   asked for them; NVTX ranges on `Host Threads/<tid>/NVTX`.
//! - `/host:metadata`: the stats the source gives (`profiler`, `cupti_version`).
//!
//! Where CUPTI records more than XLA (runtime API, synchronization, memory operations),
//! events are added in XLA's vocabulary rather than new planes. Times: CUPTI timestamps
//! are moved onto the wall clock with the source's [`Clock`], then made relative to the
//! window's start; events that began before the window are left out, as XLA leaves them
//! out.
//!
//! The one design decision to know: sources hand over CUPTI's records and enums as they
//! are ([`Activity`]); whatever a source calls them differently, it translates on its
//! side, so this layout has one vocabulary.

use std::collections::HashMap;

use mlprof_cupti::layout;
use mlprof_cupti::records::{self, Activity, Kernel};
use mlprof_cupti::wire::DeviceInfo;
use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue, names, time::PS_PER_NS};

use crate::intern::Interner;

/// XProf's id of the `/host:CPU` plane (`kHostPlaneId`).
const HOST_PLANE_ID: i64 = 49;
/// XLA's line id for overhead on a device or context (`0xdeadbeef + 6` as a C `int`).
const OVERHEAD_LINE_ID: i64 = -559_038_731;
/// The name index of a record without a name.
pub const NO_NAME: u32 = u32::MAX;

/// CUPTI's clock against the wall clock: one reading of both at the same moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Clock {
    /// A CUPTI timestamp, nanoseconds.
    pub cupti_ns: u64,
    /// The wall clock at that moment, Unix epoch nanoseconds.
    pub realtime_ns: i64,
}

impl Clock {
    /// Wall-clock nanoseconds (Unix epoch) of a CUPTI timestamp.
    pub fn wall_ns(&self, cupti_ns: u64) -> i64 {
        let delta = cupti_ns as i128 - self.cupti_ns as i128;
        (self.realtime_ns as i128 + delta).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}

/// The records of one window of one process (or one export), with their names.
#[derive(Clone, Copy, Debug)]
pub struct Records<'a> {
    /// Each record with the index of its name in `names` ([`NO_NAME`] for none): the
    /// kernel's demangled name, the API call's name without its version suffix, the
    /// NVTX range's `NVTX:<domain>:<message>`.
    pub activities: &'a [(Activity, u32)],
    /// The names.
    pub names: &'a Interner,
    /// How the records' timestamps map to the wall clock.
    pub clock: Clock,
}

impl Records<'_> {
    fn name(&self, id: u32) -> Option<&str> {
        (id != NO_NAME && (id as usize) < self.names.len()).then(|| self.names.get(id))
    }
}

/// `records` as one host named `hostname`, from `start_ns` to `stop_ns` (wall clock,
/// Unix epoch nanoseconds), with the GPUs as `devices` describes them and `metadata`
/// as the stats of its `/host:metadata` plane (name, text).
pub fn to_host(
    records: &Records<'_>,
    hostname: &str,
    (start_ns, stop_ns): (i64, i64),
    devices: &[DeviceInfo],
    metadata: &[(&str, &str)],
) -> Host {
    let mut host = Host::new(hostname, "", SourceFormat::Xspace);
    host.hostnames.push(hostname.to_string());
    host.profile_start_ns = Some(start_ns);
    host.profile_stop_ns = Some(stop_ns);
    let mut planes = Planes::new(records, start_ns, devices);
    for &(activity, name) in records.activities {
        planes.add(&activity, name);
    }
    let Planes { mut gpus, cpu, .. } = planes;
    // A plane for every GPU the process has, busy or not (as XLA writes them).
    let mut ordinals: Vec<u32> = gpus.keys().copied().chain(devices.iter().map(|d| d.ordinal)).collect();
    ordinals.sort_unstable();
    ordinals.dedup();
    for ordinal in ordinals {
        let gpu = gpus.remove(&ordinal).unwrap_or_else(|| Gpu::new(ordinal));
        host.planes.push(gpu.finish(devices.iter().find(|d| d.ordinal == ordinal)));
    }
    host.planes.push(cpu.finish());
    host.planes.push(metadata_plane(metadata));
    host
}

/// `/host:metadata` (as XLA's `AddGpuMetadata` writes it) with `stats` as text stats.
fn metadata_plane(stats: &[(&str, &str)]) -> mlprof_model::Plane {
    let mut plane = PlaneBuilder::new(0, names::METADATA_PLANE);
    let mut values = Vec::new();
    for &(name, text) in stats {
        let key = plane.stat_key(name);
        if let Ok(value) = plane.metadata_str(text) {
            values.push((key, value));
        }
    }
    plane.set_plane_stats(values);
    plane.finish()
}

/// What a stream's line carries, for its name (`Stream #7(Compute,MemcpyH2D)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum StreamWork {
    Compute,
    MemcpyH2D,
    MemcpyD2H,
    MemcpyD2D,
    MemcpyP2P,
    MemcpyOther,
    Memset,
    Overhead,
}

impl StreamWork {
    fn label(self) -> &'static str {
        match self {
            StreamWork::Compute => "Compute",
            StreamWork::MemcpyH2D => "MemcpyH2D",
            StreamWork::MemcpyD2H => "MemcpyD2H",
            StreamWork::MemcpyD2D => "MemcpyD2D",
            StreamWork::MemcpyP2P => "MemcpyP2P",
            StreamWork::MemcpyOther => "MemcpyOther",
            StreamWork::Memset => "Memset",
            StreamWork::Overhead => "Overhead",
        }
    }
}

/// Events of one line, before sorting.
struct PendingLine {
    name: String,
    work: Vec<StreamWork>,
    events: Vec<PendingEvent>,
}

/// One event before it is stored: offset and duration (ps), metadata index, and where
/// its stats are in [`Tracks::stats`] (a range: one allocation for all events).
struct PendingEvent {
    offset: i64,
    duration: i64,
    metadata: u32,
    stats: (u32, u32),
}

/// A stat value before it is stored; a text by its id in [`Tracks::texts`] (kernel
/// details and contexts repeat from event to event: each distinct one is held once).
#[derive(Clone, Copy)]
enum Value {
    Uint(u64),
    Double(f64),
    Text(u32),
}

/// One event's stats, as it is built.
struct EventStats<'a> {
    plane: &'a mut PlaneBuilder,
    stats: &'a mut Vec<(u32, Value)>,
    texts: &'a mut Interner,
    /// The keys of the few stat names events carry, so each event looks up none.
    keys: &'a mut Vec<(&'static str, u32)>,
}

impl EventStats<'_> {
    fn key(&mut self, name: &'static str) -> u32 {
        if let Some(&(_, key)) = self.keys.iter().find(|(known, _)| *known == name) {
            return key;
        }
        let key = self.plane.stat_key(name);
        self.keys.push((name, key));
        key
    }
    fn uint(&mut self, name: &'static str, v: u64) {
        let key = self.key(name);
        self.stats.push((key, Value::Uint(v)));
    }
    fn double(&mut self, name: &'static str, v: f64) {
        let key = self.key(name);
        self.stats.push((key, Value::Double(v)));
    }
    fn text(&mut self, name: &'static str, v: &str) {
        let key = self.key(name);
        let id = self.texts.intern(v).unwrap_or(NO_NAME);
        self.stats.push((key, Value::Text(id)));
    }
    fn correlation(&mut self, id: u32) {
        self.uint(names::CORRELATION_ID, u64::from(id));
    }
    fn context(&mut self, id: u32) {
        self.text(names::CONTEXT_ID, &format!("$${id}"));
    }
}

/// The planes [`to_host`] fills as it walks the records: one per GPU by
/// ordinal and the host's, with what some records need from others.
struct Planes<'p> {
    records: &'p Records<'p>,
    /// The window's start, Unix epoch nanoseconds: records before it are left out.
    start_ns: i64,
    devices: &'p [DeviceInfo],
    gpus: HashMap<u32, Gpu>,
    cpu: Tracks,
    /// Which thread made each API call, for records that only carry its correlation id.
    thread_of: HashMap<u32, u32>,
    /// Which device each context is on.
    device_of_context: HashMap<u32, u32>,
    /// What each synchronizing call waited for: a CUPTI synchronization record
    /// describes the wait of the API call with its correlation id, so it becomes stats
    /// of that call, not a second event the tools would count twice.
    wait_of: HashMap<u32, records::Synchronization>,
}

impl<'p> Planes<'p> {
    fn new(records: &'p Records<'p>, start_ns: i64, devices: &'p [DeviceInfo]) -> Planes<'p> {
        let mut planes = Planes {
            records,
            start_ns,
            devices,
            gpus: HashMap::new(),
            cpu: Tracks::new(HOST_PLANE_ID, names::HOST_PLANE),
            thread_of: HashMap::new(),
            device_of_context: HashMap::new(),
            wait_of: HashMap::new(),
        };
        for (activity, _) in records.activities {
            match activity {
                Activity::Api(a) => {
                    planes.thread_of.insert(a.correlation_id, a.thread_id);
                }
                Activity::Context { context_id, device_id, .. } => {
                    planes.device_of_context.insert(*context_id, *device_id);
                }
                Activity::Synchronization(s) => {
                    planes.wait_of.insert(s.correlation_id, *s);
                }
                _ => {}
            }
        }
        planes
    }

    /// Offset from the window's start and duration, picoseconds, of a record from
    /// `start` to `end` (CUPTI nanoseconds); `None` before the window.
    fn span(&self, start: u64, end: u64) -> Option<(i64, i64)> {
        let s = self.records.clock.wall_ns(start);
        let e = self.records.clock.wall_ns(end.max(start));
        (s >= self.start_ns).then(|| {
            (s.saturating_sub(self.start_ns).saturating_mul(PS_PER_NS), e.saturating_sub(s).saturating_mul(PS_PER_NS))
        })
    }

    fn gpu(&mut self, ordinal: u32) -> &mut Gpu {
        self.gpus.entry(ordinal).or_insert_with(|| Gpu::new(ordinal))
    }

    /// Adds one record named `name` where it belongs.
    fn add(&mut self, activity: &Activity, name: u32) {
        match activity {
            Activity::Kernel(k) => self.kernel(k, name),
            Activity::Memcpy(m) => self.memcpy(m),
            Activity::Memset(m) => self.memset(m),
            Activity::Api(a) => self.api(a, name),
            // Stats of the API call it belongs to.
            Activity::Synchronization(_) => {}
            Activity::Memory(m) => self.memory(m),
            Activity::Overhead(o) => self.overhead(o),
            Activity::Marker(m) => {
                let at = self.span(m.timestamp_ns, m.timestamp_ns);
                self.cpu.marker(m, self.records.name(name), at);
            }
            Activity::ExternalCorrelation { .. } | Activity::Context { .. } => {}
        }
    }

    fn kernel(&mut self, k: &Kernel, name: u32) {
        let Some((offset, duration)) = self.span(k.start_ns, k.end_ns) else { return };
        let occupancy = self.devices.iter().find(|d| d.ordinal == k.device_id).map_or(0.0, |d| occupancy_pct(d, k));
        let name = self.records.name(name).unwrap_or("Kernel");
        let details = format!(
            "regs:{} static_shared:{} dynamic_shared:{} grid:{},{},{} block:{},{},{} occ_pct:{}",
            k.registers_per_thread,
            k.static_shared_memory as u32,
            k.dynamic_shared_memory as u32,
            k.grid[0] as u32,
            k.grid[1] as u32,
            k.grid[2] as u32,
            k.block[0] as u32,
            k.block[1] as u32,
            k.block[2] as u32,
            six_significant(occupancy)
        );
        self.gpu(k.device_id).push(i64::from(k.stream_id), StreamWork::Compute, name, offset, duration, |e| {
            e.correlation(k.correlation_id);
            e.context(k.context_id);
            e.double("theoretical_occupancy_pct", occupancy);
            e.text("kernel_details", &details);
        });
    }

    fn memcpy(&mut self, m: &records::Memcpy) {
        let Some((offset, duration)) = self.span(m.start_ns, m.end_ns) else { return };
        let (label, work) = memcpy_name(u32::from(m.copy_kind));
        let device = m.peer.map_or(m.device_id, |(src, _)| src);
        let dest = m.peer.map_or(m.device_id, |(_, dst)| dst);
        let details = format!(
            "kind_src:{} kind_dst:{} size:{} dest:{} async:{}",
            memory_kind_name(u32::from(m.src_kind)),
            memory_kind_name(u32::from(m.dst_kind)),
            m.bytes,
            dest,
            u8::from(m.is_async)
        );
        self.gpu(device).push(i64::from(m.stream_id), work, label, offset, duration, |e| {
            e.correlation(m.correlation_id);
            e.context(m.context_id);
            e.text("memcpy_details", &details);
        });
    }

    fn memset(&mut self, m: &records::Memset) {
        let Some((offset, duration)) = self.span(m.start_ns, m.end_ns.max(m.start_ns.saturating_add(1))) else {
            return;
        };
        let details = format!(
            "kind:{} num_bytes:{} async:{}",
            memory_kind_name(u32::from(m.memory_kind)),
            m.bytes,
            u8::from(m.is_async)
        );
        let label = format!("Memset {}", m.memory_kind);
        self.gpu(m.device_id).push(i64::from(m.stream_id), StreamWork::Memset, &label, offset, duration, |e| {
            e.correlation(m.correlation_id);
            e.context(m.context_id);
            e.text("Memset_details", &details);
        });
    }

    fn api(&mut self, a: &records::ApiCall, name: u32) {
        let Some((offset, duration)) = self.span(a.start_ns, a.end_ns) else { return };
        let name = self.records.name(name).unwrap_or("CUDA API");
        let wait = self.wait_of.get(&a.correlation_id);
        self.cpu.push(i64::from(a.thread_id), thread_line(a.thread_id), name, offset, duration, |e| {
            e.correlation(a.correlation_id);
            if a.return_value != 0 {
                e.uint("cuda_error", u64::from(a.return_value));
            }
            if let Some(wait) = wait {
                e.text("synchronization", synchronization_name(wait.kind));
                e.context(wait.context_id);
                if wait.stream_id != u32::MAX {
                    e.uint("stream_id", u64::from(wait.stream_id));
                }
            }
        });
    }

    fn memory(&mut self, m: &records::MemoryOperation) {
        let Some(&tid) = self.thread_of.get(&m.correlation_id) else { return };
        let Some((offset, _)) = self.span(m.timestamp_ns, m.timestamp_ns) else { return };
        let (label, stat) = if m.operation == layout::MEMORY_OP_RELEASE {
            ("MemoryFree", "MemFree_details")
        } else {
            ("MemoryAlloc", "memalloc_details")
        };
        let details = format!("kind:{} num_bytes:{}", memory_kind_name(m.memory_kind), m.bytes);
        let device = self.device_of_context.get(&m.context_id).copied().unwrap_or(m.device_id);
        self.cpu.push(i64::from(tid), thread_line(tid), label, offset, 0, |e| {
            e.uint(names::DEVICE_ID, u64::from(device));
            e.correlation(m.correlation_id);
            e.text(stat, &details);
            e.uint("address", m.address);
        });
    }

    /// An overhead record, placed by what it happened on, as XLA places it.
    fn overhead(&mut self, o: &records::Overhead) {
        let Some((offset, duration)) = self.span(o.start_ns, o.end_ns) else { return };
        let label = overhead_name(o.kind);
        let [first, second, third] = o.object_id;
        match o.object_kind {
            layout::OBJECT_PROCESS | layout::OBJECT_THREAD => {
                self.cpu.push(i64::from(second), thread_line(second), label, offset, duration, |_| {});
            }
            layout::OBJECT_STREAM => {
                self.gpu(first).push(i64::from(third), StreamWork::Overhead, label, offset, duration, |_| {});
            }
            layout::OBJECT_DEVICE | layout::OBJECT_CONTEXT => {
                self.gpu(first).push(OVERHEAD_LINE_ID, StreamWork::Overhead, label, offset, duration, |_| {});
            }
            _ => {}
        }
    }
}

/// A plane under construction: lines by id, events in arrival order.
struct Tracks {
    plane: PlaneBuilder,
    lines: HashMap<i64, PendingLine>,
    /// NVTX ranges open per (thread, marker id): start offset and name.
    /// By marker id: (thread, start offset, name) of each open range with that id.
    open_ranges: HashMap<u32, Vec<(u32, i64, u32)>>,
    /// Every pending event's stats, in arrival order.
    stats: Vec<(u32, Value)>,
    texts: Interner,
    stat_keys: Vec<(&'static str, u32)>,
}

impl Tracks {
    fn new(id: i64, name: &str) -> Tracks {
        Tracks {
            plane: PlaneBuilder::new(id, name),
            lines: HashMap::new(),
            open_ranges: HashMap::new(),
            stats: Vec::new(),
            texts: Interner::default(),
            stat_keys: Vec::new(),
        }
    }

    fn push(
        &mut self,
        line: i64,
        line_name: String,
        event: &str,
        offset: i64,
        duration: i64,
        stats: impl FnOnce(&mut EventStats<'_>),
    ) {
        let metadata = self.plane.event_metadata(event, 0, |_| Vec::new());
        let first = self.stats.len() as u32;
        let mut e = EventStats {
            plane: &mut self.plane,
            stats: &mut self.stats,
            texts: &mut self.texts,
            keys: &mut self.stat_keys,
        };
        stats(&mut e);
        let stats = (first, self.stats.len() as u32);
        let pending = self.lines.entry(line).or_insert_with(|| PendingLine {
            name: line_name,
            work: Vec::new(),
            events: Vec::new(),
        });
        pending.events.push(PendingEvent { offset, duration, metadata, stats });
    }

    /// An NVTX mark, or one end of a range (ranges are paired by marker id).
    fn marker(&mut self, m: &records::Marker, name: Option<&str>, at: Option<(i64, i64)>) {
        let Some((offset, _)) = at else { return };
        let line = (1i64 << 32) + i64::from(m.thread_id);
        let line_name = format!("Host Threads/{}/NVTX", m.thread_id);
        if m.flags & layout::MARKER_FLAG_START != 0 {
            let id = name.map_or(u32::MAX, |n| self.plane.event_metadata(n, 0, |_| Vec::new()));
            self.open_ranges.entry(m.id).or_default().push((m.thread_id, offset, id));
        } else if m.flags & layout::MARKER_FLAG_END != 0 {
            // An end's thread may differ from its start's (ranges across threads): the
            // same thread's range first, else any open one with the id.
            let opened = self.open_ranges.get_mut(&m.id).and_then(|open| {
                let at = open.iter().position(|(thread, _, _)| *thread == m.thread_id).unwrap_or(0);
                (at < open.len()).then(|| open.swap_remove(at))
            });
            if self.open_ranges.get(&m.id).is_some_and(Vec::is_empty) {
                self.open_ranges.remove(&m.id);
            }
            if let Some((_, start, metadata)) = opened
                && metadata != u32::MAX
            {
                let pending = self.lines.entry(line).or_insert_with(|| PendingLine {
                    name: line_name,
                    work: Vec::new(),
                    events: Vec::new(),
                });
                pending.events.push(PendingEvent {
                    offset: start,
                    duration: offset.saturating_sub(start).max(0),
                    metadata,
                    stats: (0, 0),
                });
            }
        } else if let Some(name) = name {
            self.push(line, line_name, name, offset, 0, |_| {});
        }
    }

    fn finish(mut self) -> mlprof_model::Plane {
        let mut ids: Vec<i64> = self.lines.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let Some(pending) = self.lines.remove(&id) else { continue };
            let mut line = Line::new(id, pending.name);
            let mut events = pending.events;
            events.sort_by_key(|e| (e.offset, std::cmp::Reverse(e.duration)));
            for PendingEvent { offset, duration, metadata, stats: (first, end) } in events {
                for &(key, value) in self.stats.get(first as usize..end as usize).unwrap_or_default() {
                    match value {
                        Value::Uint(v) => line.stats.push(key, StatValue::Uint(v)),
                        Value::Double(v) => line.stats.push(key, StatValue::Double(v)),
                        Value::Text(t) => {
                            let _ = line.stats.push_str(key, self.texts.get(t));
                        }
                    }
                }
                line.push_event(metadata, offset, duration);
            }
            self.plane.push_line(line);
        }
        self.plane.finish()
    }
}

/// One GPU's plane under construction.
struct Gpu {
    tracks: Tracks,
}

impl Gpu {
    fn new(ordinal: u32) -> Gpu {
        Gpu { tracks: Tracks::new(i64::from(ordinal), &format!("{}{ordinal}", names::GPU_PLANE_PREFIX)) }
    }

    /// Adds an event on line `line` (a stream id, or XLA's overhead line), noting what
    /// kind of work the line carries for its name.
    fn push(
        &mut self,
        line: i64,
        work: StreamWork,
        event: &str,
        offset: i64,
        duration: i64,
        stats: impl FnOnce(&mut EventStats<'_>),
    ) {
        self.tracks.push(line, String::new(), event, offset, duration, stats);
        if let Some(pending) = self.tracks.lines.get_mut(&line)
            && !pending.work.contains(&work)
        {
            pending.work.push(work);
        }
    }

    fn finish(mut self, device: Option<&DeviceInfo>) -> mlprof_model::Plane {
        for (&id, pending) in self.tracks.lines.iter_mut() {
            pending.work.sort_unstable();
            pending.name = if pending.work.contains(&StreamWork::Overhead) {
                "CUPTI overhead".to_string()
            } else {
                let kinds: Vec<&str> = pending.work.iter().map(|w| w.label()).collect();
                format!("Stream #{id}({})", kinds.join(","))
            };
        }
        let plane = &mut self.tracks.plane;
        let mut stats = Vec::new();
        let vendor = plane.stat_key("device_vendor");
        if let Ok(v) = plane.metadata_str("Nvidia") {
            stats.push((vendor, v));
        }
        if let Some(d) = device {
            let key = plane.stat_key("gpu_device_name");
            if let Ok(v) = plane.metadata_str(&d.name) {
                stats.push((key, v));
            }
            let ints = [
                ("clock_rate", StatValue::Int(d.clock_khz)),
                ("core_count", StatValue::Int(d.multiprocessors)),
                ("memory_bandwidth", StatValue::Uint(d.memory_bandwidth)),
                ("memory_size", StatValue::Uint(d.memory_size)),
                ("compute_cap_major", StatValue::Int(d.compute_capability_major)),
                ("compute_cap_minor", StatValue::Int(d.compute_capability_minor)),
            ];
            for (name, value) in ints {
                let key = plane.stat_key(name);
                stats.push((key, value));
            }
        }
        plane.set_plane_stats(stats);
        self.tracks.finish()
    }
}

fn thread_line(tid: u32) -> String {
    format!("Host Threads/{tid}")
}

/// XLA's event name and line kind of a copy.
fn memcpy_name(copy_kind: u32) -> (&'static str, StreamWork) {
    match copy_kind {
        layout::MEMCPY_HTOD => ("MemcpyH2D", StreamWork::MemcpyH2D),
        layout::MEMCPY_DTOH => ("MemcpyD2H", StreamWork::MemcpyD2H),
        layout::MEMCPY_DTOD => ("MemcpyD2D", StreamWork::MemcpyD2D),
        layout::MEMCPY_PTOP => ("MemcpyP2P", StreamWork::MemcpyP2P),
        _ => ("MemcpyOther", StreamWork::MemcpyOther),
    }
}

/// XLA's names of CUPTI memory kinds (`GetMemoryKindName`).
fn memory_kind_name(kind: u32) -> &'static str {
    match kind {
        layout::MEMORY_KIND_ARRAY => "array",
        layout::MEMORY_KIND_DEVICE => "device",
        layout::MEMORY_KIND_DEVICE_STATIC => "device_static",
        layout::MEMORY_KIND_MANAGED => "managed",
        layout::MEMORY_KIND_MANAGED_STATIC => "managed_static",
        layout::MEMORY_KIND_PAGEABLE => "pageable",
        layout::MEMORY_KIND_PINNED => "pinned",
        _ => "unknown",
    }
}

/// XLA's names of CUPTI synchronization types.
fn synchronization_name(kind: u32) -> &'static str {
    match kind {
        layout::SYNC_EVENT_SYNCHRONIZE => "cuEventSynchronize",
        layout::SYNC_STREAM_WAIT_EVENT => "cuStreamWaitEvent",
        layout::SYNC_STREAM_SYNCHRONIZE => "cuStreamSynchronize",
        layout::SYNC_CONTEXT_SYNCHRONIZE => "cuCtxSynchronize",
        _ => "Synchronization",
    }
}

/// XLA's names of CUPTI overhead kinds (`COMPILER`, `BUFFER_FLUSH`, ...; the kinds
/// newer than XLA's list by their CUPTI names).
fn overhead_name(kind: u32) -> &'static str {
    match kind {
        layout::OVERHEAD_DRIVER_COMPILER => "COMPILER",
        layout::OVERHEAD_CUPTI_BUFFER_FLUSH => "BUFFER_FLUSH",
        layout::OVERHEAD_CUPTI_INSTRUMENTATION => "INSTRUMENTATION",
        layout::OVERHEAD_CUPTI_RESOURCE => "RESOURCE",
        layout::OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING => "RUNTIME_TRIGGERED_MODULE_LOADING",
        layout::OVERHEAD_LAZY_FUNCTION_LOADING => "LAZY_FUNCTION_LOADING",
        layout::OVERHEAD_COMMAND_BUFFER_FULL => "COMMAND_BUFFER_FULL",
        layout::OVERHEAD_ACTIVITY_BUFFER_REQUEST => "ACTIVITY_BUFFER_REQUEST",
        layout::OVERHEAD_UVM_ACTIVITY_INIT => "UVM_ACTIVITY_INIT",
        _ => "<UNKNOWN>",
    }
}

/// `cudaLaunchKernel_v7000` → `cudaLaunchKernel`: CUPTI's callback names carry the API
/// version they appeared in.
pub fn without_version(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((base, digits))
            if !base.is_empty() && !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

/// `absl::StrCat(double)`: six significant digits, no trailing zeros.
fn six_significant(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".to_string();
    }
    let digits = 6 - 1 - v.abs().log10().floor() as i32;
    let text = format!("{:.*}", digits.max(0) as usize, v);
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text }
}

/// Theoretical occupancy of a kernel, percent: the resident blocks per multiprocessor
/// that the warp, block, register and shared-memory limits allow, times the block's
/// threads, over the multiprocessor's thread capacity (the rule of CUDA's occupancy
/// calculator, with its allocation granularities: registers per warp in units of 256,
/// shared memory in units of 128 bytes plus 1 KiB reserved per block from compute
/// capability 8.0).
pub fn occupancy_pct(device: &DeviceInfo, kernel: &Kernel) -> f64 {
    // Values from the driver, but checked as any input: saturating, never dividing by 0.
    let threads = kernel.block.iter().fold(1u64, |n, &b| n.saturating_mul(b.max(0) as u64));
    let warp = device.warp_size.clamp(1, 1024) as u64;
    let max_warps = device.max_threads_per_multiprocessor.clamp(0, 1 << 20) as u64 / warp;
    if threads == 0 || max_warps == 0 {
        return 0.0;
    }
    let warps_per_block = threads.div_ceil(warp);
    let mut blocks = max_warps / warps_per_block;
    blocks = blocks.min(device.max_blocks_per_multiprocessor.max(0) as u64);
    let regs = u64::from(kernel.registers_per_thread);
    if regs > 0 {
        let per_warp = (regs * warp).div_ceil(256) * 256;
        let warps_by_registers =
            (device.max_registers_per_multiprocessor.max(0) as u64).checked_div(per_warp).unwrap_or(0);
        blocks = blocks.min(warps_by_registers / warps_per_block);
    }
    let reserved = if device.compute_capability_major >= 8 { 1024 } else { 0 };
    let shared =
        (kernel.static_shared_memory.max(0) as u64 + kernel.dynamic_shared_memory.max(0) as u64).div_ceil(128) * 128;
    if shared > 0 {
        blocks = blocks.min((device.max_shared_memory_per_multiprocessor.max(0) as u64) / (shared + reserved));
    }
    blocks.saturating_mul(threads) as f64 * 100.0 / (max_warps * warp) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlprof_cupti::records::build::h100;

    #[test]
    fn occupancy_follows_the_tightest_limit_and_prints_as_absl_prints() {
        let mut k = match records::decode(&records::build::kernel(0, 1, 7, 1, 0)) {
            Ok(Activity::Kernel(k)) => k,
            other => panic!("{other:?}"),
        };
        // 256 threads, 32 registers, 1 KiB static shared: 8 blocks by warps → 100 %.
        assert_eq!(occupancy_pct(&h100(), &k), 100.0);
        // 128 registers per thread: 64 Ki / (128 × 32) = 16 warps = 2 blocks → 25 %.
        k.registers_per_thread = 128;
        assert_eq!(occupancy_pct(&h100(), &k), 25.0);
        // 100 KiB of shared memory per block: 2 blocks fit in 228 KiB → 25 %.
        k.registers_per_thread = 32;
        k.dynamic_shared_memory = 99 << 10;
        assert_eq!(occupancy_pct(&h100(), &k), 25.0);
        // Six significant digits, no trailing zeros: 66.666666 → 66.6667, 100.0 → 100.
        let digits: Vec<String> = [100.0, 66.666666, 0.0, 12.5].map(six_significant).into();
        assert_eq!(digits, ["100", "66.6667", "0", "12.5"]);
    }
}
