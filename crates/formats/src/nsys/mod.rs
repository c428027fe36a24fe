//! Nsight Systems SQLite exports (`nsys export --type sqlite`, `nsys profile
//! --export=sqlite`): the CUDA activity of every process in the report, read from its
//! tables and laid out by [`crate::cupti_xspace`] exactly as `mlprof-inject`'s records
//! are, so every tool reads an export as it reads an XSpace GPU profile.
//!
//! What is read, by table (every table and column is optional: nsys creates tables
//! only when they hold rows, and adds columns, not always at the end, from version to
//! version; third-party tools such as DLProf and Extra-P add their own):
//! - `CUPTI_ACTIVITY_KIND_KERNEL`: kernels (name from `demangledName`, else
//!   `shortName`, through `StringIds`), with grid, block, registers and shared memory;
//! - `CUPTI_ACTIVITY_KIND_MEMCPY` / `_MEMSET`: copies and memsets (`copyKind` is
//!   CUPTI's memcpy kind; nsys numbers memory kinds from 0 = pageable where CUPTI has
//!   0 = unknown, so they move up by one);
//! - `CUPTI_ACTIVITY_KIND_RUNTIME`: CUDA runtime and driver calls by name (the
//!   `_v3020`-style version suffix dropped), on their thread, linked to the work they
//!   started by `correlationId`; `CUPTI_ACTIVITY_KIND_SYNCHRONIZATION` says what a
//!   synchronizing call waited for;
//! - `NVTX_EVENTS`: push/pop and start/end ranges (`eventType` 59, 60) and marks (34),
//!   named `NVTX:<domain>:<message>` as mlprof-inject names them (the message from
//!   `text`, else `textId`; the domain from its `eventType` 75 row);
//! - `OSRT_API`: OS runtime calls (`ioctl`, `poll`, `pthread_cond_wait`, file I/O), on
//!   a plane of their own ([`OS_RUNTIME_PLANE`]), a line per thread, each call named by
//!   its function with its `return_value`: what the threads waited on between CUDA
//!   calls (the XProf tools do not read that plane; the trace viewer shows it);
//! - `CUDA_GPU_MEMORY_USAGE_EVENTS`: `cudaMalloc`/`cudaFree` and friends, as
//!   TensorFlow's allocator events (`MemoryAllocation`/`MemoryDeallocation`) on a line
//!   [`CUDA_MEMORY_LINE`] of the host plane, one allocator per device and memory kind
//!   (`cuda:0 device`, `cuda:0 pinned`), with the running total and peak since the
//!   report began (allocations made before it are not known), so `memory_profile`
//!   reads a CUDA program's memory as it reads TensorFlow's;
//! - `TARGET_INFO_GPU`: each GPU's name, clock, SMs, memory, bandwidth and limits (for
//!   the device planes' stats and kernel occupancy);
//! - `GPU_METRICS` (or, before nsys 2023.4, `GENERIC_EVENTS`): the GPU metrics
//!   sampled with `--gpu-metrics-devices`, as counters ([`gpu_metrics`]);
//! - `TARGET_INFO_SESSION_START_TIME.utcEpochNs`: the report's start on the wall clock.
//!
//! Memory: every row becomes a record, then an event of the model, so what an export
//! costs grows with its rows (about 6 times the file for one of kernels and their
//! launches); GPUs and lines are bounded by [`crate::limits`] like any source's.
//!
//! Times are nanoseconds from the report's start. `globalTid` packs the process id in
//! bits 24-47 and the thread id in bits 0-23. Strings are read as bytes and decoded
//! leniently (Windows exports hold text in the machine's code page).
//!
//! The one design decision to know: rows become CUPTI records ([`Activity`]) and the
//! layout is the one `mlprof run` writes, so nsys's data meets the tools through the
//! same path as mlprof's own GPU recording. OS runtime calls, which that layout has no
//! place for, get their own plane, and GPU metrics go to the counters plane that
//! `mlprof run` fills with NVML's readings; CPU samples are not read yet.

mod gpu_metrics;

use std::collections::{HashMap, HashSet};
use std::path::Path;

use mlprof_cupti::layout;
use mlprof_cupti::records::{self, Activity};
use mlprof_cupti::wire::{DeviceInfo, StringKey};
use mlprof_model::{Host, names};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::cupti_xspace::{self, Clock, NO_NAME, Records};
use crate::error::{FormatError, Result};
use crate::intern::Interner;
use crate::limits;

/// The plane holding an export's OS runtime calls (`OSRT_API`).
pub const OS_RUNTIME_PLANE: &str = "/host:OS runtime";

/// The host plane's line of CUDA memory allocations and frees.
pub const CUDA_MEMORY_LINE: &str = "CUDA memory";

/// The first 16 bytes of every SQLite database file.
pub const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The longest name kept, bytes (kernel names of templated code run to kilobytes).
const MAX_NAME: usize = 64 << 10;

/// NVTX `eventType`s (nsys's `ENUM_NSYS_EVENT_TYPE`).
const NVTX_MARK: i64 = 34;
const NVTX_PUSH_POP_RANGE: i64 = 59;
const NVTX_START_END_RANGE: i64 = 60;
const NVTX_DOMAIN_CREATE: i64 = 75;

/// Whether `head`, a file's first bytes, is a SQLite database.
pub fn is_sqlite(head: &[u8]) -> bool {
    head.starts_with(SQLITE_MAGIC)
}

/// Reads the Nsight Systems export at `path` as one host named `host_name`.
pub fn read_nsys(path: &Path, host_name: &str) -> Result<Host> {
    let shown = path.display().to_string();
    let export = Export::open(path, &shown)?;
    let mut host = export.host(host_name)?;
    host.source_path = shown;
    Ok(host)
}

/// An open export and what every table's rows refer to.
struct Export {
    db: Connection,
    shown: String,
    strings: HashMap<i64, String>,
}

impl Export {
    fn open(path: &Path, shown: &str) -> Result<Export> {
        // Read-only and immutable: no lock, no journal beside the file, nothing written.
        let uri = format!("file:{}?immutable=1", uri_path(path));
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let db = Connection::open_with_flags(uri, flags).map_err(|e| sqlite_error(shown, &e))?;
        let mut export = Export { db, shown: shown.to_string(), strings: HashMap::new() };
        if export.columns("StringIds")?.is_empty() {
            return Err(FormatError::unrecognized(
                shown,
                "a SQLite database without a StringIds table: not an Nsight Systems export",
            ));
        }
        export.strings = export.read_strings()?;
        Ok(export)
    }

    /// The columns of `table`, empty when there is no such table.
    fn columns(&self, table: &str) -> Result<Vec<String>> {
        let mut statement = self.db.prepare("SELECT name FROM pragma_table_info(?1)").map_err(|e| self.error(&e))?;
        let rows = statement.query_map([table], |row| row.get::<_, String>(0)).map_err(|e| self.error(&e))?;
        rows.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| self.error(&e))
    }

    fn error(&self, e: &rusqlite::Error) -> FormatError {
        sqlite_error(&self.shown, e)
    }

    fn read_strings(&self) -> Result<HashMap<i64, String>> {
        let mut strings = HashMap::new();
        self.rows("StringIds", &["id", "value"], |row| {
            if let (Some(id), Some(text)) = (row.int(0), row.text(1)) {
                strings.insert(id, text);
            }
        })?;
        Ok(strings)
    }

    /// Calls `each` with every row of `table`, its `wanted` columns in order (a column
    /// the table lacks reads as NULL). Nothing when the table is absent.
    fn rows(&self, table: &str, wanted: &[&str], mut each: impl FnMut(&Row<'_>)) -> Result<()> {
        let present = self.columns(table)?;
        if present.is_empty() {
            return Ok(());
        }
        let select: Vec<String> = wanted
            .iter()
            .map(|c| if present.iter().any(|p| p == c) { format!("\"{c}\"") } else { "NULL".to_string() })
            .collect();
        let sql = format!("SELECT {} FROM \"{table}\"", select.join(", "));
        let mut statement = self.db.prepare(&sql).map_err(|e| self.error(&e))?;
        let mut rows = statement.query([]).map_err(|e| self.error(&e))?;
        while let Some(row) = rows.next().map_err(|e| self.error(&e))? {
            each(&Row { row });
        }
        Ok(())
    }

    fn string(&self, id: Option<i64>) -> Option<&str> {
        id.and_then(|id| self.strings.get(&id)).map(String::as_str)
    }

    fn host(&self, host_name: &str) -> Result<Host> {
        let start_ns = self.session_start_ns()?;
        let mut names = Names::default();
        let mut activities: Vec<(Activity, u32)> = Vec::new();
        let mut last_ns: u64 = 0;
        let mut end_at = |end: u64| last_ns = last_ns.max(end);
        self.kernels(&mut names, &mut activities, &mut end_at)?;
        let async_calls = self.api_calls(&mut names, &mut activities, &mut end_at)?;
        self.copies(&async_calls, &mut activities, &mut end_at)?;
        self.nvtx(&mut names, &mut activities, &mut end_at)?;
        self.check_structure(&activities)?;
        let devices = self.devices()?;
        let records = Records {
            activities: &activities,
            names: &names.interned,
            clock: Clock { cupti_ns: 0, realtime_ns: start_ns },
        };
        let stop_ns = start_ns.saturating_add(i64::try_from(last_ns).unwrap_or(i64::MAX));
        let version = self.product_version()?;
        let metadata = [(names::PROFILER_STAT, names::NSYS), ("nsys_version", version.as_deref().unwrap_or("unknown"))];
        let mut host = cupti_xspace::to_host(&records, host_name, (start_ns, stop_ns), &devices, &metadata);
        for plane in [self.os_runtime()?, gpu_metrics::gpu_metrics_plane(self)?].into_iter().flatten() {
            let at = host.planes.len().saturating_sub(1);
            host.planes.insert(at, plane);
        }
        if let Some(host_plane) = host.planes.iter_mut().find(|p| p.name == names::HOST_PLANE) {
            self.cuda_memory(host_plane)?;
        }
        Ok(host)
    }

    /// Adds the CUDA memory operations (`CUDA_GPU_MEMORY_USAGE_EVENTS`) to the host
    /// plane as allocator events, in time order, each with its allocator's total and
    /// peak after it.
    fn cuda_memory(&self, plane: &mut mlprof_model::Plane) -> Result<()> {
        let columns = ["start", "deviceId", "address", "bytes", "memKind", "memoryOperationType", "name"];
        let mut rows: Vec<MemoryUsage> = Vec::new();
        self.rows("CUDA_GPU_MEMORY_USAGE_EVENTS", &columns, |row| {
            rows.push(MemoryUsage {
                start_ns: row.u64(0),
                device: row.int(1).unwrap_or(0),
                address: row.int(2).unwrap_or(0),
                bytes: row.int(3).unwrap_or(0).max(0),
                kind: row.int(4).unwrap_or(-1),
                frees: row.int(5) == Some(1),
                variable: row.text(6),
            });
        })?;
        if rows.is_empty() {
            return Ok(());
        }
        rows.sort_by_key(|row| row.start_ns);
        let mut keys = PlaneKeys { plane };
        let allocation = keys.event("MemoryAllocation");
        let deallocation = keys.event("MemoryDeallocation");
        let [name, allocated, reserved, peak, requested, size, address, op, region] = [
            "allocator_name",
            "bytes_allocated",
            "bytes_reserved",
            "peak_bytes_in_use",
            "requested_bytes",
            "allocation_bytes",
            "addr",
            "tf_op",
            "region_type",
        ]
        .map(|stat| keys.stat(stat));
        let mut line = mlprof_model::Line::new(CUDA_MEMORY_LINE_ID, CUDA_MEMORY_LINE);
        line.display_id = CUDA_MEMORY_LINE_ID;
        let mut totals: HashMap<(i64, i64), (i64, i64)> = HashMap::new();
        for MemoryUsage { start_ns, device, address: addr, bytes, kind, frees, variable } in rows {
            let (now, most) = totals.entry((device, kind)).or_default();
            *now = if frees { now.saturating_sub(bytes).max(0) } else { now.saturating_add(bytes) };
            *most = (*most).max(*now);
            let stats = &mut line.stats;
            let kind_name = memory_kind_name(kind);
            let _ = stats.push_str(name, &format!("cuda:{device} {kind_name}"));
            stats.push(allocated, mlprof_model::StatValue::Int(*now));
            stats.push(reserved, mlprof_model::StatValue::Int(0));
            stats.push(peak, mlprof_model::StatValue::Int(*most));
            stats.push(requested, mlprof_model::StatValue::Int(bytes));
            stats.push(size, mlprof_model::StatValue::Int(bytes));
            stats.push(address, mlprof_model::StatValue::Int(addr));
            let _ = stats.push_str(op, variable.as_deref().unwrap_or(allocating_call(kind, frees)));
            let _ = stats.push_str(region, kind_name);
            let at_ps = i64::try_from(start_ns).unwrap_or(i64::MAX).saturating_mul(1000);
            line.push_event(if frees { deallocation } else { allocation }, at_ps, 0);
        }
        plane.lines.push(line);
        Ok(())
    }

    /// The OS runtime calls (`OSRT_API`): a line per thread, in thread order; `None`
    /// when the export has none.
    fn os_runtime(&self) -> Result<Option<mlprof_model::Plane>> {
        let mut builder = mlprof_model::PlaneBuilder::new(0, OS_RUNTIME_PLANE);
        let return_value = builder.stat_key("return_value");
        let mut lines: HashMap<u32, mlprof_model::Line> = HashMap::new();
        let mut names: HashMap<i64, u32> = HashMap::new();
        let mut too_many = false;
        let columns = ["start", "end", "globalTid", "nameId", "returnValue"];
        self.rows("OSRT_API", &columns, |row| {
            let (start_ns, end_ns) = row.span(0, 1);
            let thread = process_and_thread(row.int(2)).1;
            if !lines.contains_key(&thread) && lines.len() >= limits::MAX_LINES {
                too_many = true;
                return;
            }
            let name_id = row.int(3).unwrap_or(-1);
            let metadata = *names.entry(name_id).or_insert_with(|| {
                let name = self.string(Some(name_id)).unwrap_or("(unnamed)");
                builder.event_metadata(name, 0, |_| Vec::new())
            });
            let line = lines.entry(thread).or_insert_with(|| {
                let mut line = mlprof_model::Line::new(i64::from(thread), format!("OS runtime/{thread}"));
                line.display_id = i64::from(thread);
                line
            });
            line.stats.push(return_value, mlprof_model::StatValue::Int(row.int(4).unwrap_or(0)));
            let to_ps = |ns: u64| i64::try_from(ns).unwrap_or(i64::MAX).saturating_mul(1000);
            line.push_event(metadata, to_ps(start_ns), to_ps(end_ns.saturating_sub(start_ns)));
        })?;
        if too_many {
            let what = "threads with OS runtime calls";
            return Err(FormatError::unrecognized(&self.shown, limits::too_many(what, limits::MAX_LINES)));
        }
        if lines.is_empty() {
            return Ok(None);
        }
        let mut threads: Vec<u32> = lines.keys().copied().collect();
        threads.sort_unstable();
        for thread in threads {
            if let Some(line) = lines.remove(&thread) {
                builder.push_line(line);
            }
        }
        Ok(Some(builder.finish()))
    }

    /// Refuses an export whose rows would make more GPU planes or lines (streams,
    /// threads) than [`limits`] allows: rows of a few bytes each could otherwise ask
    /// for a plane or a line apiece.
    fn check_structure(&self, activities: &[(Activity, u32)]) -> Result<()> {
        let mut devices = HashSet::new();
        let mut lines = HashSet::new();
        for (activity, _) in activities {
            let (device, line) = match activity {
                Activity::Kernel(k) => (Some(k.device_id), (k.device_id, k.stream_id, false)),
                Activity::Memcpy(m) => (Some(m.device_id), (m.device_id, m.stream_id, false)),
                Activity::Memset(m) => (Some(m.device_id), (m.device_id, m.stream_id, false)),
                Activity::Api(a) => (None, (0, a.thread_id, true)),
                Activity::Marker(m) => (None, (0, m.thread_id, true)),
                _ => continue,
            };
            devices.extend(device);
            lines.insert(line);
            if devices.len() > limits::MAX_PLANES {
                return Err(FormatError::unrecognized(&self.shown, limits::too_many("GPUs", limits::MAX_PLANES)));
            }
            if lines.len() > limits::MAX_LINES {
                let what = "streams and threads";
                return Err(FormatError::unrecognized(&self.shown, limits::too_many(what, limits::MAX_LINES)));
            }
        }
        Ok(())
    }

    /// The report's start, Unix epoch nanoseconds (0 where the export does not say).
    fn session_start_ns(&self) -> Result<i64> {
        let mut start = None;
        self.rows("TARGET_INFO_SESSION_START_TIME", &["utcEpochNs"], |row| start = start.or(row.int(0)))?;
        Ok(start.unwrap_or(0).max(0))
    }

    /// `EXPORT_PRODUCT_VERSION` from the metadata table (`META_DATA_EXPORT` from nsys
    /// 2023.4, `EXPORT_META_DATA` before).
    fn product_version(&self) -> Result<Option<String>> {
        let mut version = None;
        for table in ["META_DATA_EXPORT", "EXPORT_META_DATA"] {
            self.rows(table, &["name", "value"], |row| {
                if row.text(0).as_deref() == Some("EXPORT_PRODUCT_VERSION") {
                    version = version.take().or_else(|| row.text(1));
                }
            })?;
        }
        Ok(version)
    }

    fn kernels(&self, names: &mut Names, out: &mut Vec<(Activity, u32)>, end_at: &mut impl FnMut(u64)) -> Result<()> {
        let columns = device_columns(&[
            "demangledName",
            "shortName",
            "gridX",
            "gridY",
            "gridZ",
            "blockX",
            "blockY",
            "blockZ",
            "registersPerThread",
            "staticSharedMemory",
            "dynamicSharedMemory",
        ]);
        self.rows("CUPTI_ACTIVITY_KIND_KERNEL", &columns, |row| {
            let work = row.device_work();
            end_at(work.end_ns);
            let kernel = records::Kernel {
                start_ns: work.start_ns,
                end_ns: work.end_ns,
                device_id: work.device_id,
                context_id: work.context_id,
                stream_id: work.stream_id,
                grid: [row.i32(8), row.i32(9), row.i32(10)],
                block: [row.i32(11), row.i32(12), row.i32(13)],
                registers_per_thread: u16::try_from(row.int(14).unwrap_or(0).max(0)).unwrap_or(u16::MAX),
                static_shared_memory: row.i32(15),
                dynamic_shared_memory: row.i32(16),
                correlation_id: work.correlation_id,
                name: 0,
            };
            let string = row.int(6).filter(|id| self.strings.contains_key(id)).or(row.int(7));
            let name = names.of_string(string, |id| self.string(Some(id)).map(str::to_string));
            out.push((Activity::Kernel(kernel), name));
        })
    }

    fn copies(
        &self,
        async_calls: &HashSet<i64>,
        out: &mut Vec<(Activity, u32)>,
        end_at: &mut impl FnMut(u64),
    ) -> Result<()> {
        let columns = device_columns(&["bytes", "copyKind", "srcKind", "dstKind", "srcDeviceId", "dstDeviceId"]);
        self.rows("CUPTI_ACTIVITY_KIND_MEMCPY", &columns, |row| {
            let work = row.device_work();
            end_at(work.end_ns);
            let copy_kind = row.u32(7);
            let peer = (copy_kind == layout::MEMCPY_PTOP).then(|| (row.u32(10), row.u32(11)));
            let copy = records::Memcpy {
                copy_kind: u8::try_from(copy_kind).unwrap_or(0),
                src_kind: cupti_memory_kind(row.int(8)) as u8,
                dst_kind: cupti_memory_kind(row.int(9)) as u8,
                is_async: async_calls.contains(&i64::from(work.correlation_id)),
                bytes: row.u64(6),
                start_ns: work.start_ns,
                end_ns: work.end_ns,
                device_id: work.device_id,
                context_id: work.context_id,
                stream_id: work.stream_id,
                peer,
                correlation_id: work.correlation_id,
            };
            out.push((Activity::Memcpy(copy), NO_NAME));
        })?;
        let columns = device_columns(&["value", "bytes", "memKind"]);
        self.rows("CUPTI_ACTIVITY_KIND_MEMSET", &columns, |row| {
            let work = row.device_work();
            end_at(work.end_ns);
            let memset = records::Memset {
                value: row.u32(6),
                bytes: row.u64(7),
                start_ns: work.start_ns,
                end_ns: work.end_ns,
                device_id: work.device_id,
                context_id: work.context_id,
                stream_id: work.stream_id,
                correlation_id: work.correlation_id,
                is_async: async_calls.contains(&i64::from(work.correlation_id)),
                memory_kind: cupti_memory_kind(row.int(8)) as u16,
            };
            out.push((Activity::Memset(memset), NO_NAME));
        })
    }

    /// The CUDA runtime and driver calls, and what synchronizing ones waited for; returns
    /// the correlation ids of the calls that return before their work is done
    /// (`cudaMemcpyAsync`, `cuMemsetD8Async`): nsys keeps no asynchronous flag on a copy
    /// or memset, so the call that started it says.
    fn api_calls(
        &self,
        names: &mut Names,
        out: &mut Vec<(Activity, u32)>,
        end_at: &mut impl FnMut(u64),
    ) -> Result<HashSet<i64>> {
        let mut async_calls = HashSet::new();
        let mut is_async: HashMap<i64, bool> = HashMap::new();
        let columns = ["start", "end", "globalTid", "correlationId", "nameId", "returnValue"];
        self.rows("CUPTI_ACTIVITY_KIND_RUNTIME", &columns, |row| {
            let (start_ns, end_ns) = row.span(0, 1);
            end_at(end_ns);
            let (process_id, thread_id) = process_and_thread(row.int(2));
            let call = records::ApiCall {
                callback: StringKey::Pointer(0),
                start_ns,
                end_ns,
                process_id,
                thread_id,
                correlation_id: row.u32(3),
                return_value: row.u32(5),
            };
            let name = names.of_string(row.int(4), |id| {
                self.string(Some(id)).map(|name| cupti_xspace::without_version(name).to_string())
            });
            out.push((Activity::Api(call), name));
            let returns_early = row.int(4).is_some_and(|id| {
                *is_async.entry(id).or_insert_with(|| self.string(Some(id)).is_some_and(|n| n.contains("Async")))
            });
            if let (true, Some(correlation)) = (returns_early, row.int(3)) {
                async_calls.insert(correlation);
            }
        })?;
        let columns = ["start", "end", "contextId", "streamId", "correlationId", "syncType"];
        self.rows("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", &columns, |row| {
            let (start_ns, end_ns) = row.span(0, 1);
            let wait = records::Synchronization {
                kind: row.u32(5),
                start_ns,
                end_ns,
                correlation_id: row.u32(4),
                context_id: row.u32(2),
                stream_id: row.int(3).and_then(|s| u32::try_from(s).ok()).unwrap_or(u32::MAX),
            };
            out.push((Activity::Synchronization(wait), NO_NAME));
        })?;
        Ok(async_calls)
    }

    /// NVTX ranges as a start and an end marker each (paired by a fresh id), marks as
    /// instantaneous markers; one pass over the table, the names made once every domain
    /// (an `eventType` 75 row, wherever it is) is known.
    fn nvtx(&self, names: &mut Names, out: &mut Vec<(Activity, u32)>, end_at: &mut impl FnMut(u64)) -> Result<()> {
        let columns = ["start", "end", "eventType", "text", "textId", "globalTid", "endGlobalTid", "domainId"];
        let mut domains: HashMap<i64, String> = HashMap::new();
        let mut events: Vec<NvtxEvent> = Vec::new();
        self.rows("NVTX_EVENTS", &columns, |row| {
            let kind = row.int(2);
            let message = || row.text(3).or_else(|| self.string(row.int(4)).map(str::to_string));
            if kind == Some(NVTX_DOMAIN_CREATE) {
                if let (Some(domain), Some(name)) = (row.int(7), message()) {
                    domains.insert(domain, name);
                }
                return;
            }
            if !matches!(kind, Some(NVTX_MARK | NVTX_PUSH_POP_RANGE | NVTX_START_END_RANGE)) {
                return;
            }
            let thread_id = process_and_thread(row.int(5)).1;
            let range = (kind != Some(NVTX_MARK) && row.int(1).is_some()).then(|| {
                let end_thread = row.int(6).map_or(thread_id, |tid| process_and_thread(Some(tid)).1);
                (row.span(0, 1).1, end_thread)
            });
            let domain = row.int(7).filter(|&d| d != 0);
            events.push(NvtxEvent {
                start_ns: row.u64(0),
                thread_id,
                range,
                domain,
                message: message().unwrap_or_default(),
            });
        })?;
        let mut next_id: u32 = 1;
        for event in events {
            let name = match event.domain.and_then(|d| domains.get(&d)) {
                Some(domain) => format!("NVTX:{domain}:{}", event.message),
                None => format!("NVTX:{}", event.message),
            };
            let name = names.interned.intern(&name).unwrap_or(NO_NAME);
            let marker = |flags: u32, timestamp_ns: u64, thread_id: u32, id: u32| {
                Activity::Marker(records::Marker { flags, timestamp_ns, id, thread_id, name: 0, domain: 0 })
            };
            let Some((end_ns, end_thread)) = event.range else {
                out.push((marker(layout::MARKER_FLAG_INSTANTANEOUS, event.start_ns, event.thread_id, 0), name));
                continue;
            };
            end_at(end_ns);
            let id = next_id;
            next_id = next_id.wrapping_add(1);
            out.push((marker(layout::MARKER_FLAG_START, event.start_ns, event.thread_id, id), name));
            out.push((marker(layout::MARKER_FLAG_END, end_ns, end_thread, id), NO_NAME));
        }
        Ok(())
    }

    /// The GPUs of `TARGET_INFO_GPU`, by CUDA ordinal (`cuDevice`, else `id`).
    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let columns = [
            "id",
            "cuDevice",
            "name",
            "totalMemory",
            "memoryBandwidth",
            "clockRate",
            "smCount",
            "maxShmemPerSm",
            "maxRegistersPerSm",
            "threadsPerWarp",
            "maxWarpsPerSm",
            "maxBlocksPerSm",
            "computeMajor",
            "computeMinor",
        ];
        let mut devices: Vec<DeviceInfo> = Vec::new();
        self.rows("TARGET_INFO_GPU", &columns, |row| {
            let ordinal = row.int(1).or(row.int(0)).and_then(|o| u32::try_from(o).ok()).unwrap_or(0);
            let warp = row.int(9).unwrap_or(0);
            let device = DeviceInfo {
                ordinal,
                name: row.text(2).unwrap_or_default(),
                clock_khz: row.int(5).unwrap_or(0) / 1000,
                multiprocessors: row.int(6).unwrap_or(0),
                compute_capability_major: row.int(12).unwrap_or(0),
                compute_capability_minor: row.int(13).unwrap_or(0),
                max_threads_per_multiprocessor: row.int(10).unwrap_or(0).saturating_mul(warp),
                warp_size: warp,
                max_registers_per_multiprocessor: row.int(8).unwrap_or(0),
                max_shared_memory_per_multiprocessor: row.int(7).unwrap_or(0),
                max_blocks_per_multiprocessor: row.int(11).unwrap_or(0),
                memory_bandwidth: row.u64(4),
                memory_size: row.u64(3),
            };
            if !devices.iter().any(|d| d.ordinal == ordinal) {
                devices.push(device);
            }
        })?;
        Ok(devices)
    }
}

/// The columns every device activity table starts with, in [`Row::device_work`]'s
/// order, then `extra` (read from index [`DEVICE_COLUMNS`]'s length on).
fn device_columns<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    DEVICE_COLUMNS.iter().chain(extra).copied().collect()
}

/// See [`device_columns`].
const DEVICE_COLUMNS: [&str; 6] = ["start", "end", "deviceId", "contextId", "streamId", "correlationId"];

/// Where and when one device activity ran: start and end (ns from the report's start),
/// device, context, stream and correlation id.
struct DeviceWork {
    start_ns: u64,
    end_ns: u64,
    device_id: u32,
    context_id: u32,
    stream_id: u32,
    correlation_id: u32,
}

/// One NVTX range or mark as read, before its domain's name is known.
struct NvtxEvent {
    start_ns: u64,
    thread_id: u32,
    /// A range's end (ns) and the thread that ended it; `None` for a mark.
    range: Option<(u64, u32)>,
    domain: Option<i64>,
    message: String,
}

/// One row, its columns read leniently: a NULL, a missing column or a value of another
/// type reads as absent, never as an error.
struct Row<'r> {
    row: &'r rusqlite::Row<'r>,
}

impl Row<'_> {
    fn int(&self, at: usize) -> Option<i64> {
        match self.row.get_ref(at).ok()? {
            ValueRef::Integer(v) => Some(v),
            ValueRef::Real(v) if v.is_finite() => Some(v as i64),
            _ => None,
        }
    }

    fn u32(&self, at: usize) -> u32 {
        self.int(at).and_then(|v| u32::try_from(v).ok()).unwrap_or(0)
    }

    fn i32(&self, at: usize) -> i32 {
        self.int(at).and_then(|v| i32::try_from(v).ok()).unwrap_or(0)
    }

    fn u64(&self, at: usize) -> u64 {
        self.int(at).and_then(|v| u64::try_from(v).ok()).unwrap_or(0)
    }

    /// Start and end (ns from the report's start) of columns `start` and `end`; an end
    /// before the start (or none) is the start.
    fn span(&self, start: usize, end: usize) -> (u64, u64) {
        let start_ns = self.u64(start);
        (start_ns, self.u64(end).max(start_ns))
    }

    /// The [`DEVICE_COLUMNS`] of a row read with [`device_columns`].
    fn device_work(&self) -> DeviceWork {
        let (start_ns, end_ns) = self.span(0, 1);
        DeviceWork {
            start_ns,
            end_ns,
            device_id: self.u32(2),
            context_id: self.u32(3),
            stream_id: self.u32(4),
            correlation_id: self.u32(5),
        }
    }

    fn text(&self, at: usize) -> Option<String> {
        match self.row.get_ref(at).ok()? {
            ValueRef::Text(bytes) | ValueRef::Blob(bytes) => {
                let bytes = &bytes[..bytes.len().min(MAX_NAME)];
                Some(String::from_utf8_lossy(bytes).into_owned())
            }
            _ => None,
        }
    }
}

/// Names interned for [`Records::names`], also by `StringIds` id: most rows name what
/// others named before.
#[derive(Default)]
struct Names {
    interned: Interner,
    by_string: HashMap<i64, u32>,
}

impl Names {
    /// The name of `StringIds` entry `string` (through `name_of`, once per entry).
    fn of_string(&mut self, string: Option<i64>, name_of: impl FnOnce(i64) -> Option<String>) -> u32 {
        let Some(string) = string else { return NO_NAME };
        if let Some(&id) = self.by_string.get(&string) {
            return id;
        }
        let id = name_of(string).and_then(|name| self.interned.intern(&name).ok()).unwrap_or(NO_NAME);
        self.by_string.insert(string, id);
        id
    }
}

/// Process and thread id of an nsys `globalTid` (pid in bits 24-47, tid in bits 0-23).
fn process_and_thread(global_tid: Option<i64>) -> (u32, u32) {
    let tid = global_tid.unwrap_or(0);
    (((tid >> 24) & 0xFF_FFFF) as u32, (tid & 0xFF_FFFF) as u32)
}

/// CUPTI's memory kind of an nsys memory kind (`ENUM_CUDA_MEM_KIND`: 0 pageable …
/// 6 managed static, 7 unknown; CUPTI: 0 unknown, 1 pageable … 7 managed static).
fn cupti_memory_kind(nsys: Option<i64>) -> u32 {
    match nsys {
        Some(kind @ 0..=6) => kind as u32 + 1,
        _ => 0,
    }
}

/// One row of `CUDA_GPU_MEMORY_USAGE_EVENTS`.
struct MemoryUsage {
    /// When, ns from the report's start.
    start_ns: u64,
    /// CUDA device.
    device: i64,
    /// The block's address.
    address: i64,
    /// Bytes.
    bytes: i64,
    /// nsys's `CUDA_MEMOPR_MEMORY_KIND`.
    kind: i64,
    /// A free rather than an allocation.
    frees: bool,
    /// The variable's name, when the export has it.
    variable: Option<String>,
}

/// The id of the host plane's [`CUDA_MEMORY_LINE`] (above any thread id, 24 bits).
const CUDA_MEMORY_LINE_ID: i64 = 1 << 40;

/// nsys's `CUDA_MEMOPR_MEMORY_KIND` names.
fn memory_kind_name(kind: i64) -> &'static str {
    match kind {
        0 => "pageable",
        1 => "pinned",
        2 => "device",
        3 => "array",
        4 => "managed",
        5 => "device static",
        6 => "managed static",
        _ => "unknown",
    }
}

/// The call that allocates (or frees) memory of nsys kind `kind`, as the op of an
/// allocator event when the export names no variable.
fn allocating_call(kind: i64, frees: bool) -> &'static str {
    match (kind, frees) {
        (1, false) => "cudaMallocHost",
        (1, true) => "cudaFreeHost",
        (4, false) => "cudaMallocManaged",
        (_, false) => "cudaMalloc",
        (_, true) => "cudaFree",
    }
}

/// Event names and stat keys added to a finished plane.
struct PlaneKeys<'p> {
    plane: &'p mut mlprof_model::Plane,
}

impl PlaneKeys<'_> {
    /// The dense index of event metadata `name`, added when the plane has none.
    fn event(&mut self, name: &str) -> u32 {
        let metadata = &mut self.plane.event_metadata;
        if let Some(index) = metadata.iter().position(|m| m.name == name) {
            return index as u32;
        }
        metadata.push(mlprof_model::EventMetadata {
            id: metadata.len() as i64 + 1,
            name: name.to_string(),
            ..Default::default()
        });
        (metadata.len() - 1) as u32
    }

    /// The dense index of stat key `name`, added when the plane has none.
    fn stat(&mut self, name: &str) -> u32 {
        if let Some(key) = self.plane.find_stat_key(name) {
            return key;
        }
        let stats = &mut self.plane.stat_metadata;
        stats.push(mlprof_model::StatMetadata {
            id: stats.len() as i64 + 1,
            name: name.to_string(),
            description: String::new(),
        });
        (stats.len() - 1) as u32
    }
}

/// `path` for a SQLite `file:` URI: `%`, `?` and `#` escaped (`%` first).
fn uri_path(path: &Path) -> String {
    path.to_string_lossy().replace('%', "%25").replace('?', "%3f").replace('#', "%23")
}

fn sqlite_error(shown: &str, e: &rusqlite::Error) -> FormatError {
    FormatError::Sqlite { path: shown.to_string(), message: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_ids_memory_kinds_and_uris_read_as_nsys_writes_them() {
        // 0x10042AC000000 + 0x42AC: pid 17068 (bits 24-47), tid 17068, host id 1 << 48.
        assert_eq!(process_and_thread(Some(0x1_0042_AC00_42AC)), (0x42AC, 0x42AC));
        assert_eq!(process_and_thread(None), (0, 0));
        assert_eq!(cupti_memory_kind(Some(0)), layout::MEMORY_KIND_PAGEABLE);
        assert_eq!(cupti_memory_kind(Some(2)), layout::MEMORY_KIND_DEVICE);
        assert_eq!(cupti_memory_kind(Some(7)), 0);
        assert_eq!(uri_path(Path::new("/tmp/a?b#c%d.sqlite")), "/tmp/a%3fb%23c%25d.sqlite");
        assert!(is_sqlite(b"SQLite format 3\0rest"));
        assert!(!is_sqlite(b"SQLite format 2\0rest"));
    }
}
