//! Counter series of a host, drawn by the trace viewer as counter tracks: values over
//! time, one series per counter and source.
//!
//! Where they come from:
//! - **counter events**: every event carrying XProf's `counter_value` stat — what
//!   `mlprof run` and `attach` record on `/host:counters` (CPU, memory and I/O of each
//!   process, NVML's GPU counters), and XProf's own counter lines. A series per (line,
//!   event name): `python3 (pid 12)` / `CPU (%)`;
//! - **Chrome-trace counter events** (`ph: "C"`, as Kineto and other tracers write them):
//!   each numeric arg a series, named `event arg`, grouped by the event's thread;
//! - **PyTorch's memory**: the `Total Allocated` and `Total Reserved` bytes after each
//!   `[memory]` event (`profile_memory=True`), a series each per device;
//! - **GPU queue lengths**: HTA's queue length of each stream (ops launched and not yet
//!   started, [`crate::gpu::queue`]) on PyTorch traces, over HTA's window (the last
//!   `ProfilerStep` is left out when there are two or more).
//!
//! Points are in time order; a reading holds until the next one.

use std::collections::BTreeMap;

use mlprof_model::Host;
use mlprof_model::names::sampled::COUNTER_VALUE_STAT;
use serde::Serialize;

use crate::memory_profile::kineto::events::memory_events;
use crate::xstats;

/// One counter over time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CounterSeries {
    /// What it counts, with its unit where the source gives one (`CPU (%)`,
    /// `Allocated (bytes)`).
    pub name: String,
    /// Whose it is: the line of its readings (`python3 (pid 12)`, `GPU 0`) or the
    /// device (`PyTorch memory, cuda:0`).
    pub group: String,
    /// Readings as (time in ps from the profile start, value), in time order.
    pub points: Vec<(i64, f64)>,
}

/// Every counter series of `host`, by group (numbers in it by value), then by name.
pub fn counter_series(host: &Host) -> Vec<CounterSeries> {
    let mut series: BTreeMap<(String, String), Vec<(i64, f64)>> = BTreeMap::new();
    counter_events(host, &mut series);
    chrome_counters(host, &mut series);
    pytorch_memory(host, &mut series);
    queue_lengths(host, &mut series);
    let mut series: Vec<CounterSeries> = series
        .into_iter()
        .map(|((group, name), mut points)| {
            points.sort_by_key(|&(time, _)| time);
            CounterSeries { name, group, points }
        })
        .collect();
    series
        .sort_by(|a, b| numbers_by_value(&a.group).cmp(&numbers_by_value(&b.group)).then_with(|| a.name.cmp(&b.name)));
    series
}

/// `text` as a sort key in which runs of digits compare by value (`GPU stream 7` before
/// `GPU stream 23`, `cuda:2` before `cuda:10`).
fn numbers_by_value(text: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let letters = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let (word, after) = rest.split_at(letters);
        let digits = after.find(|c: char| !c.is_ascii_digit()).unwrap_or(after.len());
        let (number, after) = after.split_at(digits);
        key.push((word.to_string(), number.parse().unwrap_or(u64::MAX)));
        rest = after;
    }
    key
}

/// The readings of events with a `counter_value` stat, by (line, event name).
fn counter_events(host: &Host, series: &mut BTreeMap<(String, String), Vec<(i64, f64)>>) {
    for plane in &host.planes {
        let Some(key) = plane.find_stat_key(COUNTER_VALUE_STAT) else { continue };
        for line in &plane.lines {
            for event in line.iter() {
                let Some(value) = event.stat(plane, key).and_then(xstats::as_f64) else { continue };
                let Some(metadata) = plane.metadata_of(&event) else { continue };
                let name = if metadata.display_name.is_empty() { &metadata.name } else { &metadata.display_name };
                series
                    .entry((line.shown_name().to_string(), name.clone()))
                    .or_default()
                    .push((event.start_ps(), value));
            }
        }
    }
}

/// The numeric args of Chrome-trace counter events (metadata stat `ph` = `C`), by (line,
/// `event arg`).
fn chrome_counters(host: &Host, series: &mut BTreeMap<(String, String), Vec<(i64, f64)>>) {
    for plane in &host.planes {
        let Some(ph) = plane.find_stat_key("ph") else { continue };
        let counters: Vec<bool> = plane
            .event_metadata
            .iter()
            .map(|m| plane.metadata_stat(m, ph).and_then(|v| plane.str_value(&plane.metadata_stats, v)) == Some("C"))
            .collect();
        if !counters.contains(&true) {
            continue;
        }
        for line in &plane.lines {
            for event in line.iter().filter(|e| counters.get(e.metadata_index() as usize).copied().unwrap_or(false)) {
                let name = plane.metadata_of(&event).map_or("", |m| m.name.as_str());
                for stat in event.stats() {
                    let Some(value) = xstats::as_f64(stat.value()) else { continue };
                    let key = (line.shown_name().to_string(), format!("{name} {}", plane.stat_name(stat.key())));
                    series.entry(key).or_default().push((event.start_ps(), value));
                }
            }
        }
    }
}

/// Readings as (time in ps from the profile start, value).
type Points = Vec<(i64, f64)>;

/// PyTorch's allocated and reserved bytes after each `[memory]` event, per device.
fn pytorch_memory(host: &Host, series: &mut BTreeMap<(String, String), Vec<(i64, f64)>>) {
    // Per device, its two series, moved into `series` at the end (millions of events
    // from a memory snapshot: no key is built per event).
    let mut devices: BTreeMap<(i64, i64), [Points; 2]> = BTreeMap::new();
    for event in memory_events(host) {
        let [allocated, reserved] = devices.entry((event.device_type, event.device_id)).or_default();
        allocated.push((event.time_ps, event.allocated_bytes as f64));
        reserved.push((event.time_ps, event.reserved_bytes as f64));
    }
    for ((device_type, device_id), [allocated, reserved]) in devices {
        let device = match (device_type, device_id) {
            (0, _) => "cpu".to_string(),
            (1, id) => format!("cuda:{id}"),
            (kind, id) => format!("device type {kind}:{id}"),
        };
        let group = format!("PyTorch memory, {device}");
        for (name, points) in [("Allocated (bytes)", allocated), ("Reserved (bytes)", reserved)] {
            series.entry((group.clone(), name.to_string())).or_default().extend(points);
        }
    }
}

/// Each CUDA stream's queue length, by (`GPU stream N`, `Queue length (ops)`), on PyTorch
/// traces (HTA's input; reading the rows of another host would cost a pass for nothing).
fn queue_lengths(host: &Host, series: &mut BTreeMap<(String, String), Vec<(i64, f64)>>) {
    if crate::facts::framework(host) != crate::facts::Framework::Pytorch {
        return;
    }
    let context = crate::gpu::Context::new(&[host], crate::gpu::trace::CpuRows::Correlated);
    for queue in crate::gpu::queue::queue_series(&context) {
        series
            .entry((format!("GPU stream {}", queue.stream), QUEUE_LENGTH.to_string()))
            .or_default()
            .extend(queue.points.iter().map(|&(time, length)| (time, length as f64)));
    }
}

/// The name of a stream's queue-length series.
pub const QUEUE_LENGTH: &str = "Queue length (ops)";

#[cfg(test)]
mod tests {
    use super::numbers_by_value;

    #[test]
    fn groups_sort_with_their_numbers_by_value() {
        let mut groups = vec!["GPU stream 203", "GPU stream 23", "GPU stream 7", "cuda:10", "cuda:2", "GPU 0"];
        groups.sort_by_key(|g| numbers_by_value(g));
        assert_eq!(groups, ["GPU 0", "GPU stream 7", "GPU stream 23", "GPU stream 203", "cuda:2", "cuda:10"]);
    }
}
