//! The GPU activity one process recorded through `mlprof-inject` during one trace
//! window, decoded as it arrives (names resolved from each buffer's string table,
//! bounded by [`MAX_WINDOW_BYTES`]), and handed to `mlprof_formats::cupti_xspace`, which
//! lays it out as an XSpace the way XLA's CUPTI collector lays out its own (so XProf
//! and every mlprof tool read it unchanged). The clock: CUPTI timestamps are moved onto
//! the wall clock with the offset the injection measured at start.

use std::collections::HashMap;

use mlprof_cupti::records::{self, Activity};
use mlprof_cupti::wire::{Buffer, DeviceInfo, Hello, StringKey};
use mlprof_formats::cupti_xspace::{self, Clock, NO_NAME, Records, without_version};
use mlprof_formats::intern::Interner;
use mlprof_model::{Host, names};

/// The most memory one window of one process may hold, bytes: decoded records (each
/// costs `size_of::<(Activity, u32)>()`) and their names (about 10 M records); later
/// buffers are counted and left out.
pub const MAX_WINDOW_BYTES: usize = 1 << 30;
/// The longest name kept, bytes (the injection reads at most 64 KiB).
const MAX_NAME: usize = 64 << 10;

/// One window of one process's GPU activity.
#[derive(Debug)]
pub struct CuptiProfile {
    hello: Hello,
    names: Interner,
    activities: Vec<(Activity, u32)>,
    /// Bytes of records taken.
    bytes: usize,
    /// Buffers left out past [`MAX_WINDOW_BYTES`].
    buffers_over_cap: usize,
    /// Records that could not be read.
    bad_records: usize,
    /// Buffers whose record offsets did not fit their data.
    bad_buffers: usize,
    /// Records CUPTI dropped.
    dropped: u64,
}

/// What a window held, for the one line `mlprof run` prints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Kernels.
    pub kernels: usize,
    /// Copies.
    pub memcpys: usize,
    /// Memsets.
    pub memsets: usize,
    /// Runtime and driver API calls.
    pub api_calls: usize,
    /// Synchronization records.
    pub synchronizations: usize,
    /// Summed kernel time, nanoseconds.
    pub kernel_ns: u64,
}

impl CuptiProfile {
    /// An empty window of the process that sent `hello`.
    pub fn new(hello: Hello) -> CuptiProfile {
        CuptiProfile {
            hello,
            names: Interner::default(),
            activities: Vec::new(),
            bytes: 0,
            buffers_over_cap: 0,
            bad_records: 0,
            bad_buffers: 0,
            dropped: 0,
        }
    }

    /// Decodes one buffer's records, naming them from its string table.
    pub fn add_buffer(&mut self, buffer: &Buffer) {
        let Some(records) = buffer.records() else {
            self.bad_buffers += 1;
            return;
        };
        let strings_bytes: usize = buffer.strings.iter().map(|(_, text)| text.len().min(MAX_NAME)).sum();
        let cost = records.len() * std::mem::size_of::<(Activity, u32)>() + strings_bytes;
        if self.bytes + cost > MAX_WINDOW_BYTES {
            self.buffers_over_cap += 1;
            return;
        }
        self.bytes += cost;
        let strings: HashMap<StringKey, &[u8]> = buffer.strings.iter().map(|(k, v)| (*k, v.as_slice())).collect();
        // Each distinct name is resolved (demangled, stripped, composed) once per buffer:
        // a buffer holds thousands of launches of a few kernels.
        let mut resolved: HashMap<(StringKey, u64), u32> = HashMap::new();
        self.activities.reserve(records.len());
        for record in records {
            let activity = match records::decode(record) {
                Ok(a) => a,
                Err(_) => {
                    self.bad_records += 1;
                    continue;
                }
            };
            let key = match activity {
                Activity::Kernel(k) if k.name != 0 => Some((StringKey::Pointer(k.name), 0)),
                Activity::Api(a) => Some((a.callback, 0)),
                Activity::Marker(m) if m.name != 0 => Some((StringKey::Pointer(m.name), m.domain)),
                _ => None,
            };
            let name = match key {
                None => NO_NAME,
                Some(key) => match resolved.get(&key) {
                    Some(&id) => id,
                    None => {
                        let id = self.resolve(&activity, key, &strings);
                        resolved.insert(key, id);
                        id
                    }
                },
            };
            self.activities.push((activity, name));
        }
    }

    /// The interned name of `activity`, whose name is `key` (and, for an NVTX mark, the
    /// domain's address), from the buffer's `strings`.
    fn resolve(&mut self, activity: &Activity, key: (StringKey, u64), strings: &HashMap<StringKey, &[u8]>) -> u32 {
        let text = |key: StringKey| {
            strings.get(&key).map(|b| String::from_utf8_lossy(&b[..b.len().min(MAX_NAME)]).into_owned())
        };
        let name = match activity {
            Activity::Kernel(_) => text(key.0).map(|n| demangle(&n)),
            Activity::Api(_) => text(key.0).map(|n| without_version(&n).to_string()),
            Activity::Marker(_) => {
                text(key.0).map(|n| match (key.1 != 0).then(|| text(StringKey::Pointer(key.1))).flatten() {
                    Some(domain) if !domain.is_empty() => format!("NVTX:{domain}:{n}"),
                    _ => format!("NVTX:{n}"),
                })
            }
            _ => None,
        };
        name.and_then(|n| self.names.intern(&n).ok()).unwrap_or(NO_NAME)
    }

    /// Records CUPTI dropped (no buffer free).
    pub fn add_dropped(&mut self, records: u64) {
        self.dropped = self.dropped.saturating_add(records);
    }

    /// Nothing was recorded in the window, nor dropped.
    pub fn is_empty(&self) -> bool {
        self.activities.is_empty() && self.dropped == 0
    }

    /// What the window holds.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for (activity, _) in &self.activities {
            match activity {
                Activity::Kernel(k) => {
                    c.kernels += 1;
                    c.kernel_ns += k.end_ns.saturating_sub(k.start_ns);
                }
                Activity::Memcpy(_) => c.memcpys += 1,
                Activity::Memset(_) => c.memsets += 1,
                Activity::Api(_) => c.api_calls += 1,
                Activity::Synchronization(_) => c.synchronizations += 1,
                _ => {}
            }
        }
        c
    }

    /// Problems worth a warning in the profile (and a line from `mlprof run`).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.dropped > 0 {
            out.push(format!(
                "CUPTI dropped {} activity records: every buffer was in use (mlprof-inject holds at most 128 MiB)",
                self.dropped
            ));
        }
        if self.buffers_over_cap > 0 {
            out.push(format!(
                "{} CUPTI buffers were left out: this window passed {} MiB of records",
                self.buffers_over_cap,
                MAX_WINDOW_BYTES >> 20
            ));
        }
        if self.bad_records > 0 || self.bad_buffers > 0 {
            out.push(format!(
                "{} CUPTI records and {} buffers could not be read (CUPTI {})",
                self.bad_records, self.bad_buffers, self.hello.cupti_api_version
            ));
        }
        out
    }

    /// The window as one host named `hostname`, from `start_ns` to `stop_ns` (wall
    /// clock, Unix epoch nanoseconds), with the process's GPUs as `devices` describes
    /// them; `/host:metadata` says mlprof-inject recorded it, with which CUPTI.
    pub fn to_host(&self, hostname: &str, start_ns: i64, stop_ns: i64, devices: &[DeviceInfo]) -> Host {
        let clock = Clock { cupti_ns: self.hello.cupti_timestamp_ns, realtime_ns: self.hello.realtime_ns };
        let records = Records { activities: &self.activities, names: &self.names, clock };
        let v = self.hello.cupti_api_version;
        // CUPTI 13 numbers its API versions MMmmpp (130001); CUPTI 12 counted up (26 = 12.8).
        let version = if v >= 10_000 { format!("{}.{}", v / 10_000, v / 100 % 100) } else { format!("API {v}") };
        let metadata = [(names::PROFILER_STAT, names::MLPROF_INJECT), ("cupti_version", version.as_str())];
        let mut host = cupti_xspace::to_host(&records, hostname, (start_ns, stop_ns), devices, &metadata);
        host.warnings = self.warnings();
        host
    }
}

/// A C++ symbol as people read it (`_Z6vecAddPfS_S_i` → `vecAdd(float*, float*, float*,
/// int)`), or the name as given when it is not a mangled C++ name.
pub fn demangle(name: &str) -> String {
    if !name.starts_with("_Z") {
        return name.to_string();
    }
    cpp_demangle::Symbol::new(name.as_bytes())
        .ok()
        .and_then(|symbol| symbol.demangle(&cpp_demangle::DemangleOptions::default()).ok())
        .unwrap_or_else(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_people_expect() {
        assert_eq!(without_version("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
        assert_eq!(without_version("cudaMemcpy"), "cudaMemcpy");
        assert_eq!(without_version("cu_v"), "cu_v");
        assert_eq!(demangle("_Z6vecAddPfS_S_i"), "vecAdd(float*, float*, float*, int)");
        assert_eq!(demangle("ampere_sgemm_128x64_nn"), "ampere_sgemm_128x64_nn");
    }
}
