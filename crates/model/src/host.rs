//! Sessions and hosts: the top of the model.

use serde::Serialize;

use crate::allocator_trace::AllocatorTrace;
use crate::line::TrackId;
use crate::plane::Plane;

/// Which file format a host was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceFormat {
    /// TensorFlow / JAX XSpace protobuf (`.xplane.pb`, optionally gzipped).
    Xspace,
    /// PyTorch profiler / Kineto Chrome-trace JSON (optionally gzipped).
    Kineto,
}

impl SourceFormat {
    /// Its name as JSON outputs write it and option specs list it (`xspace`, `kineto`).
    pub fn name(self) -> &'static str {
        match self {
            SourceFormat::Xspace => "xspace",
            SourceFormat::Kineto => "kineto",
        }
    }

    /// What people call it: `XSpace (TensorFlow, JAX)`, `PyTorch (Kineto)`.
    pub fn label(self) -> &'static str {
        match self {
            SourceFormat::Xspace => "XSpace (TensorFlow, JAX)",
            SourceFormat::Kineto => "PyTorch (Kineto)",
        }
    }
}

/// A Chrome-trace `"ph": "M"` metadata record (`process_name`, `thread_name`,
/// `process_labels`, `process_sort_index`, `thread_sort_index`), kept verbatim.
#[derive(Clone, Debug, PartialEq)]
pub struct ChromeMetadataEvent {
    /// The record's `name` (`process_name`, …).
    pub name: String,
    /// Its `pid`.
    pub pid: TrackId,
    /// Its `tid`, when present.
    pub tid: Option<TrackId>,
    /// Its `ts` in picoseconds relative to the profile start, when present.
    pub ts_ps: Option<i64>,
    /// Its `args` as raw JSON text (`{"name": "python"}`), or "" when absent.
    pub args_json: String,
}

/// What a Chrome/Kineto trace carries beyond its events, kept so that writing it back
/// loses nothing.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ChromeTraceInfo {
    /// Every top-level key except `traceEvents`, in file order, with its raw JSON value
    /// (`schemaVersion`, `deviceProperties`, `distributedInfo`, `baseTimeNanoseconds`, …).
    pub top_level: Vec<(String, String)>,
    /// The `"ph": "M"` records, in file order.
    pub metadata_events: Vec<ChromeMetadataEvent>,
    /// The trace time (whole microseconds, as written in `ts`) that the model's time 0
    /// stands for. `ts_us = origin_us + start_ps / 1e6`.
    pub origin_us: i64,
    /// True when the trace file was a bare JSON array of events (no top-level object).
    pub bare_array: bool,
}

/// One profiled process: an XSpace file, or one rank's Kineto trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Host {
    /// Host name: the XSpace file name without `.xplane.pb`, or the trace file name
    /// without `.pt.trace.json`/`.json`/`.gz`.
    pub name: String,
    /// Path of the file this host was read from.
    pub source_path: String,
    /// Size of that file in bytes (as stored, i.e. compressed for `.gz`).
    pub source_bytes: u64,
    /// Its format.
    pub format: SourceFormat,
    /// Distributed rank (Kineto `distributedInfo.rank`), when known.
    pub rank: Option<i64>,
    /// XSpace `hostnames`.
    pub hostnames: Vec<String>,
    /// XSpace `errors` (problems the profiler reported while collecting).
    pub errors: Vec<String>,
    /// XSpace `warnings`.
    pub warnings: Vec<String>,
    /// The planes, in stored order.
    pub planes: Vec<Plane>,
    /// Profile start as Unix epoch nanoseconds, when the source says (`Task Environment`
    /// `profile_start_time`, or Kineto `baseTimeNanoseconds` + the trace origin).
    pub profile_start_ns: Option<i64>,
    /// Profile stop as Unix epoch nanoseconds, when the source says.
    pub profile_stop_ns: Option<i64>,
    /// Chrome-trace extras (Kineto input only).
    pub chrome: Option<ChromeTraceInfo>,
    /// A caching allocator's trace (PyTorch memory snapshots only), kept as columns
    /// rather than as events.
    pub allocator_trace: Option<AllocatorTrace>,
}

impl Host {
    /// An empty host read from `source_path`.
    pub fn new(name: impl Into<String>, source_path: impl Into<String>, format: SourceFormat) -> Host {
        Host {
            name: name.into(),
            source_path: source_path.into(),
            source_bytes: 0,
            format,
            rank: None,
            hostnames: Vec::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
            planes: Vec::new(),
            profile_start_ns: None,
            profile_stop_ns: None,
            chrome: None,
            allocator_trace: None,
        }
    }

    /// Total number of events over all planes.
    pub fn event_count(&self) -> usize {
        self.planes.iter().map(Plane::event_count).sum()
    }

    /// Whether some GPU plane (`/device:GPU:N`) holds an event: what the GPU tools
    /// (`gpu`, `transfers`) need.
    pub fn has_gpu_events(&self) -> bool {
        self.planes.iter().any(|p| p.is_gpu() && p.event_count() > 0)
    }

    /// The first plane called `name`.
    pub fn plane(&self, name: &str) -> Option<&Plane> {
        self.planes.iter().find(|p| p.name == name)
    }

    /// Earliest event start and latest event end over all planes (picoseconds relative
    /// to the profile start).
    pub fn span_ps(&self) -> Option<(i64, i64)> {
        self.planes.iter().filter_map(Plane::span_ps).reduce(|(s1, e1), (s2, e2)| (s1.min(s2), e1.max(e2)))
    }
}

/// One profiling session: what one capture produced, one host per profiled process.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// Session name: the `plugins/profile/<session>` directory name (prefixed by the
    /// TensorBoard run's relative path when there is one), or the trace's name.
    pub name: String,
    /// Directory (or file) the session was read from.
    pub path: String,
    /// The hosts, ordered by rank, then name.
    pub hosts: Vec<Host>,
}

impl Session {
    /// Total number of events over all hosts.
    pub fn event_count(&self) -> usize {
        self.hosts.iter().map(Host::event_count).sum()
    }
}
