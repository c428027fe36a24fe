//! Nsight Systems' GPU metrics (`nsys profile --gpu-metrics-devices`): each GPU's
//! hardware counters sampled at a fixed rate (10 kHz by default) — SMs active, SM
//! issue, tensor pipes, DRAM and PCIe/NVLink throughput, as percentages of peak, and
//! clocks in MHz — as counter readings on mlprof's counters plane
//! ([`names::sampled::COUNTERS_PLANE`]), a line per GPU named as `mlprof run` names its
//! NVML line (`GPU 0`), every reading an instant named by its metric as nsys names it
//! (`SMs Active [Throughput %]`) with the value in [`names::sampled::COUNTER_VALUE_STAT`].
//! The trace viewer draws them as counter tracks under the kernels; `convert` writes
//! them as Chrome counter events.
//!
//! The two layouts nsys has written:
//! - from 2023.4: `GPU_METRICS(timestamp, typeId, metricId, value)`, a row per sample and
//!   metric, named by `TARGET_INFO_GPU_METRICS(typeId, metricId, metricName)`;
//! - before: `GENERIC_EVENTS(timestamp, typeId, data)`, a row per sample whose `data` is
//!   a JSON object of metric name to value (names without their unit).
//!
//! In both, the GPU is `typeId & 0xFF`, nsys's id of the GPU (`TARGET_INFO_GPU.id`),
//! shown by its CUDA ordinal (`cuDevice`) where the export gives one, and `timestamp` is
//! nanoseconds from the session start, the clock of the CUPTI tables. Samples before
//! the session start (negative times) are dropped, as NVIDIA's recipes drop them.
//! Negative integer values, a known nsys defect (unsigned 32-bit values stored as
//! signed), are read back as the unsigned values they were.
//!
//! The one design decision to know: a reading holds until the next one, so a run of
//! equal readings keeps only its first (and the series its last): the counters draw
//! and integrate over time exactly as every sample would, at a fraction of the memory
//! (an idle GPU's metrics are long runs of zeros).

use std::collections::{BTreeMap, HashMap};

use mlprof_model::names::sampled::{COUNTER_VALUE_STAT, COUNTERS_PLANE, GPU_COUNTER_LINE_BASE};
use mlprof_model::{Line, Plane, PlaneBuilder, StatValue};

use super::Export;
use crate::error::{FormatError, Result};
use crate::limits;

/// A series' readings: (ns from the session start, value).
type Readings = Vec<(i64, f64)>;

/// Every series read so far, by GPU and metric name.
#[derive(Default)]
struct Series {
    index: HashMap<i64, HashMap<String, usize>>,
    list: Vec<((i64, String), Readings)>,
}

impl Series {
    /// The index of the series of `metric` on `gpu`, created on first use.
    fn of(&mut self, gpu: i64, metric: &str) -> usize {
        let by_name = self.index.entry(gpu).or_default();
        if let Some(&at) = by_name.get(metric) {
            return at;
        }
        self.list.push(((gpu, metric.to_string()), Vec::new()));
        by_name.insert(metric.to_string(), self.list.len() - 1);
        self.list.len() - 1
    }

    fn push(&mut self, at: usize, time_ns: i64, value: f64) {
        if let Some((_, readings)) = self.list.get_mut(at) {
            readings.push((time_ns, value));
        }
    }
}

/// The GPU metrics of `export` as a counters plane; `None` when it records none.
pub(super) fn gpu_metrics_plane(export: &Export) -> Result<Option<Plane>> {
    let mut series = Series::default();
    if !export.columns("GPU_METRICS")?.is_empty() {
        metrics_table(export, &mut series)?;
    } else {
        generic_events(export, &mut series)?;
    }
    if series.list.is_empty() {
        return Ok(None);
    }
    let mut series = series.list;
    series.sort_by(|a, b| a.0.cmp(&b.0));
    let ordinals = cuda_ordinals(export)?;
    let mut builder = PlaneBuilder::new(0, COUNTERS_PLANE);
    let value_key = builder.stat_key(COUNTER_VALUE_STAT);
    let mut lines: BTreeMap<i64, Line> = BTreeMap::new();
    for ((gpu, metric), mut readings) in series {
        let ordinal = ordinals.get(&gpu).copied().unwrap_or(gpu);
        let id = GPU_COUNTER_LINE_BASE.saturating_add(ordinal);
        if !lines.contains_key(&id) && lines.len() >= limits::MAX_LINES {
            let what = "GPUs with GPU metrics";
            return Err(FormatError::unrecognized(&export.shown, limits::too_many(what, limits::MAX_LINES)));
        }
        let line = lines.entry(id).or_insert_with(|| {
            let mut line = Line::new(id, format!("GPU {ordinal}"));
            line.display_id = id;
            line
        });
        let metadata = builder.event_metadata(&metric, 0, |_| Vec::new());
        readings.sort_by_key(|&(time, _)| time);
        for (index, &(time_ns, value)) in readings.iter().enumerate() {
            let repeats = index > 0 && readings[index - 1].1 == value && index + 1 < readings.len();
            if repeats {
                continue;
            }
            line.stats.push(value_key, StatValue::Double(value));
            line.push_event(metadata, time_ns.saturating_mul(1000), 0);
        }
    }
    for (_, line) in lines {
        builder.push_line(line);
    }
    Ok(Some(builder.finish()))
}

/// The layout from nsys 2023.4: `GPU_METRICS` rows named by `TARGET_INFO_GPU_METRICS`.
fn metrics_table(export: &Export, series: &mut Series) -> Result<()> {
    let mut names: HashMap<(i64, i64), String> = HashMap::new();
    export.rows("TARGET_INFO_GPU_METRICS", &["typeId", "metricId", "metricName"], |row| {
        if let (Some(type_id), Some(metric), Some(name)) = (row.int(0), row.int(1), row.text(2)) {
            names.insert((type_id, metric), name);
        }
    })?;
    // Rows come in the table's order; a series is looked up once per run of its rows.
    let mut current: Option<((i64, i64), usize)> = None;
    export.rows("GPU_METRICS", &["timestamp", "typeId", "metricId", "value"], |row| {
        let (Some(time_ns), Some(type_id), Some(metric), Some(value)) =
            (row.int(0), row.int(1), row.int(2), row.int(3))
        else {
            return;
        };
        if time_ns < 0 {
            return;
        }
        let at = match current {
            Some((ids, at)) if ids == (type_id, metric) => at,
            _ => {
                let unnamed = format!("metric {metric}");
                let name = names.get(&(type_id, metric)).unwrap_or(&unnamed);
                let at = series.of(gpu_of(type_id), name);
                current = Some(((type_id, metric), at));
                at
            }
        };
        series.push(at, time_ns, unsigned_value(value));
    })
}

/// The layout before nsys 2023.4: a JSON object of readings per `GENERIC_EVENTS` row.
fn generic_events(export: &Export, series: &mut Series) -> Result<()> {
    export.rows("GENERIC_EVENTS", &["timestamp", "typeId", "data"], |row| {
        let (Some(time_ns), Some(type_id), Some(data)) = (row.int(0), row.int(1), row.text(2)) else { return };
        if time_ns < 0 {
            return;
        }
        let Ok(serde_json::Value::Object(readings)) = serde_json::from_str::<serde_json::Value>(&data) else { return };
        let gpu = gpu_of(type_id);
        for (metric, value) in readings {
            if let Some(value) = value.as_f64().filter(|v| v.is_finite()) {
                let at = series.of(gpu, &metric);
                series.push(at, time_ns, value);
            }
        }
    })
}

/// nsys's GPU id of a GPU-metrics `typeId` (`<hardware:8><vm:8><source:16><tag:24><gpu:8>`).
fn gpu_of(type_id: i64) -> i64 {
    type_id & 0xFF
}

/// A sample's value: nsys stores some unsigned 32-bit counters as signed, so a
/// negative value that fits 32 bits is the unsigned value it was.
fn unsigned_value(value: i64) -> f64 {
    match i32::try_from(value) {
        Ok(v) if v < 0 => f64::from(v as u32),
        _ => value as f64,
    }
}

/// nsys GPU id (`TARGET_INFO_GPU.id`) → CUDA ordinal (`cuDevice`), where given and
/// unique (exports list other vendors' GPUs with `cuDevice` 0 too: then ids are kept).
fn cuda_ordinals(export: &Export) -> Result<HashMap<i64, i64>> {
    let mut ordinals = HashMap::new();
    export.rows("TARGET_INFO_GPU", &["id", "cuDevice"], |row| {
        if let (Some(id), Some(ordinal)) = (row.int(0), row.int(1)) {
            ordinals.entry(id).or_insert(ordinal);
        }
    })?;
    let mut uses: HashMap<i64, usize> = HashMap::new();
    for ordinal in ordinals.values() {
        *uses.entry(*ordinal).or_default() += 1;
    }
    ordinals.retain(|_, ordinal| uses.get(ordinal) == Some(&1));
    Ok(ordinals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_come_from_the_low_byte_and_negative_values_are_unsigned() {
        assert_eq!(gpu_of((0x01 << 56) | (0x0002 << 32) | (0x10 << 8) | 3), 3);
        assert_eq!(unsigned_value(-1), 4_294_967_295.0);
        assert_eq!(unsigned_value(1_410), 1_410.0);
        assert_eq!(unsigned_value(-5_000_000_000), -5_000_000_000.0);
    }
}
