//! Writes hosts as one Chrome trace JSON document.
//!
//! Hosts read from a Chrome/Kineto trace are written back as they came (their own pids,
//! tids, `ph`, `cat`, `M` records and top-level keys; see the conventions in
//! [`super`]). Hosts read from XSpace follow XProf's trace viewer
//! (`xplane_to_trace_events.cc`): one process per plane with lines — `/host:CPU` is
//! pid 701, `/device:*:N` is pid N + 1, other planes 501 and up — one thread per line
//! named after it, event args from metadata stats then event stats (XProf's internal
//! stats hidden), the `step_name` stat as the event name when present, and flow arrows
//! between host and device events that share a `correlation_id`. Unlike XProf, no
//! event is dropped or capped. With several hosts, each host's pids are offset by
//! `host index × 1000` (XSpace) or `host index × 10^10` (Chrome), and process names
//! are prefixed by the host name.

use std::collections::HashSet;
use std::io::{self, Write};

use mlprof_model::names::chrome::{
    BINDING_ENCLOSING, CAT_FLOW, PH_COMPLETE, PH_COUNTER, PH_FLOW_END, PH_FLOW_START, PH_METADATA,
};
use mlprof_model::{ChromeTraceInfo, Host, Line, Plane, StatStore, StatValue, TrackId, names};

use super::emitter::TraceWriter;
use super::json_text::{push_double, push_json_str, push_us};
use super::{CAT_STAT, FIELD_PREFIX, PH_STAT, arg_name_for_stat};

/// Writes `hosts` as one Chrome trace (`{"traceEvents": [...]}`) to `out`.
pub fn write_chrome_trace(hosts: &[&Host], out: &mut dyn Write) -> io::Result<()> {
    let single_chrome = match hosts {
        [host] => host.chrome.as_ref().filter(|c| !c.bare_array),
        _ => None,
    };
    let mut top_level = String::new();
    match single_chrome {
        Some(info) => {
            for (key, raw) in &info.top_level {
                push_json_str(&mut top_level, key);
                top_level.push(':');
                top_level.push_str(raw);
                top_level.push(',');
            }
        }
        None => top_level.push_str("\"displayTimeUnit\":\"ns\",\"metadata\":{\"highres-ticks\":true},"),
    }
    let mut em = TraceWriter::start(out, &top_level);
    let multi = hosts.len() > 1;
    for (index, host) in hosts.iter().enumerate() {
        let prefix = multi.then_some(host.name.as_str());
        match &host.chrome {
            Some(info) => write_chrome_host(&mut em, host, info, index, prefix)?,
            None => write_xspace_host(&mut em, host, index, prefix)?,
        }
    }
    em.finish()
}

fn push_track(out: &mut String, id: &TrackId) {
    match id {
        TrackId::Int(v) => out.push_str(&v.to_string()),
        TrackId::Str(s) => push_json_str(out, s),
    }
}

/// Renames a Chrome pid for host `index` of a multi-host trace.
fn chrome_pid(pid: &TrackId, index: usize, prefix: Option<&str>) -> TrackId {
    match (pid, prefix) {
        (_, None) => pid.clone(),
        (TrackId::Int(v), Some(_)) => TrackId::Int(v + index as i64 * 10_000_000_000),
        (TrackId::Str(s), Some(host)) => TrackId::Str(format!("{host}: {s}")),
    }
}

/// Appends a stat value as JSON, typed (numbers stay numbers, refs become their name).
fn push_value(out: &mut String, plane: &Plane, store: &StatStore, value: StatValue) {
    match value {
        StatValue::Int(v) => out.push_str(&v.to_string()),
        StatValue::Uint(v) => out.push_str(&v.to_string()),
        StatValue::Double(v) => push_double(out, v),
        StatValue::Str(r) => push_json_str(out, store.text(r)),
        StatValue::Json(r) => out.push_str(store.text(r)),
        StatValue::Bytes(r) => push_json_str(out, &format!("<{} bytes>", store.bytes(r).len())),
        StatValue::Ref(k) => push_json_str(out, plane.stat_name(k)),
    }
}

fn write_chrome_host(
    em: &mut TraceWriter<'_>,
    host: &Host,
    info: &ChromeTraceInfo,
    index: usize,
    prefix: Option<&str>,
) -> io::Result<()> {
    for m in &info.metadata_events {
        em.begin_event(PH_METADATA)?;
        em.buf.push_str(",\"name\":");
        push_json_str(&mut em.buf, &m.name);
        em.buf.push_str(",\"pid\":");
        push_track(&mut em.buf, &chrome_pid(&m.pid, index, prefix));
        if let Some(tid) = &m.tid {
            em.buf.push_str(",\"tid\":");
            push_track(&mut em.buf, tid);
        }
        if let Some(ts) = m.ts_ps {
            em.buf.push_str(",\"ts\":");
            push_us(&mut em.buf, info.origin_us, ts);
        }
        if !m.args_json.is_empty() {
            em.buf.push_str(",\"args\":");
            match (prefix, m.name.as_str()) {
                (Some(host_name), "process_name") => {
                    let original = serde_json::from_str::<serde_json::Value>(&m.args_json)
                        .ok()
                        .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_string))
                        .unwrap_or_default();
                    em.buf.push_str("{\"name\":");
                    push_json_str(&mut em.buf, &format!("{host_name}: {original}"));
                    em.buf.push('}');
                }
                _ => em.buf.push_str(&m.args_json),
            }
        }
        em.buf.push('}');
    }
    for plane in &host.planes {
        let kinds = EventKinds::of(plane);
        for line in &plane.lines {
            let (pid, tid) = match &line.chrome_track {
                Some((pid, tid)) => (chrome_pid(pid, index, prefix), tid.clone()),
                None => (TrackId::Int(plane.id + index as i64 * 10_000_000_000), TrackId::Int(line.id)),
            };
            let mut track = String::new();
            track.push_str(",\"pid\":");
            push_track(&mut track, &pid);
            track.push_str(",\"tid\":");
            push_track(&mut track, &tid);
            write_chrome_line(em, plane, line, &kinds, &track, info.origin_us)?;
        }
    }
    Ok(())
}

/// Per-plane lookups for writing Chrome events: each metadata's `ph`/`cat`, and which
/// stat keys are event fields rather than args.
struct EventKinds {
    ph: Vec<String>,
    cat: Vec<Option<String>>,
    /// Output name of each stat key, and whether it is a top-level field.
    keys: Vec<(String, bool)>,
}

impl EventKinds {
    fn of(plane: &Plane) -> EventKinds {
        let cat_key = plane.find_stat_key(CAT_STAT);
        let ph_key = plane.find_stat_key(PH_STAT);
        let text_of = |meta, key: Option<u32>| {
            plane.metadata_stat(meta, key?).map(|value| plane.format_value(&plane.metadata_stats, value))
        };
        let mut ph = Vec::new();
        let mut cat = Vec::new();
        for meta in &plane.event_metadata {
            ph.push(text_of(meta, ph_key).unwrap_or_else(|| PH_COMPLETE.to_string()));
            cat.push(text_of(meta, cat_key));
        }
        let keys = plane
            .stat_metadata
            .iter()
            .map(|m| match m.name.strip_prefix(FIELD_PREFIX) {
                Some(field) => (field.to_string(), true),
                None => (arg_name_for_stat(&m.name).to_string(), false),
            })
            .collect();
        EventKinds { ph, cat, keys }
    }
}

fn write_chrome_line(
    em: &mut TraceWriter<'_>,
    plane: &Plane,
    line: &Line,
    kinds: &EventKinds,
    track: &str,
    origin_us: i64,
) -> io::Result<()> {
    for event in line.iter() {
        let meta = event.metadata_index() as usize;
        let ph = kinds.ph.get(meta).map_or(PH_COMPLETE, String::as_str);
        em.begin_event(ph)?;
        if let Some(Some(cat)) = kinds.cat.get(meta) {
            em.buf.push_str(",\"cat\":");
            push_json_str(&mut em.buf, cat);
        }
        em.buf.push_str(",\"name\":");
        push_json_str(&mut em.buf, plane.event_metadata.get(meta).map_or("", |m| m.name.as_str()));
        em.buf.push_str(track);
        em.buf.push_str(",\"ts\":");
        push_us(&mut em.buf, origin_us, event.start_ps());
        if ph == PH_COMPLETE {
            em.buf.push_str(",\"dur\":");
            push_us(&mut em.buf, 0, event.duration_ps());
        }
        let mut args_open = false;
        for stat in event.stats() {
            let Some((name, is_field)) = kinds.keys.get(stat.key() as usize) else { continue };
            if *is_field {
                em.buf.push(',');
                push_json_str(&mut em.buf, name);
                em.buf.push(':');
                push_value(&mut em.buf, plane, &line.stats, stat.value());
            }
        }
        for stat in event.stats() {
            let Some((name, is_field)) = kinds.keys.get(stat.key() as usize) else { continue };
            if *is_field {
                continue;
            }
            em.buf.push_str(if args_open { "," } else { ",\"args\":{" });
            args_open = true;
            push_json_str(&mut em.buf, name);
            em.buf.push(':');
            push_value(&mut em.buf, plane, &line.stats, stat.value());
        }
        if args_open {
            em.buf.push('}');
        }
        em.buf.push('}');
    }
    Ok(())
}

/// XProf's trace-viewer process id of a plane, or `None` for planes it does not show.
fn xprof_pid(plane: &Plane, next_custom: &mut i64) -> Option<i64> {
    if plane.lines.is_empty() {
        return None;
    }
    if plane.name == names::HOST_PLANE {
        return Some(701);
    }
    if let Some(ordinal) = names::device_ordinal(&plane.name).filter(|o| (0..500).contains(o))
        && !plane.name.starts_with(names::CUSTOM_PLANE_PREFIX)
    {
        return Some(ordinal + 1);
    }
    *next_custom += 1;
    Some(*next_custom - 1)
}

/// Thread ids for a plane's lines: `display_id` when distinct, else the low 32 bits of
/// the line id when distinct (host thread ids are 64-bit hashes, too large for
/// JavaScript numbers), else the line's position.
fn xprof_tids(plane: &Plane) -> Vec<i64> {
    let distinct = |ids: &[i64]| ids.iter().collect::<HashSet<_>>().len() == ids.len();
    let display: Vec<i64> = plane.lines.iter().map(|l| l.display_id).collect();
    if distinct(&display) {
        return display;
    }
    let low: Vec<i64> = plane.lines.iter().map(|l| i64::from(l.id as u32)).collect();
    if distinct(&low) {
        return low;
    }
    (1..=plane.lines.len() as i64).collect()
}

fn write_xspace_host(em: &mut TraceWriter<'_>, host: &Host, index: usize, prefix: Option<&str>) -> io::Result<()> {
    let flows = CorrelationFlows::of(host);
    let mut next_custom = 501;
    for plane in &host.planes {
        let Some(pid) = xprof_pid(plane, &mut next_custom) else { continue };
        let pid = pid + index as i64 * 1000;
        let process = match prefix {
            Some(h) => format!("{h}: {}", plane.name),
            None => plane.name.clone(),
        };
        write_metadata(em, "process_name", pid, None, "name", &process)?;
        write_metadata(em, "process_sort_index", pid, None, "sort_index", &pid.to_string())?;
        let tids = xprof_tids(plane);
        let mut order: Vec<usize> = (0..plane.lines.len()).collect();
        if plane.name == names::HOST_PLANE {
            order.sort_by(|&a, &b| plane.lines[a].shown_name().cmp(plane.lines[b].shown_name()));
        }
        for (rank, &i) in order.iter().enumerate() {
            write_metadata(em, "thread_name", pid, Some(tids[i]), "name", plane.lines[i].shown_name())?;
            write_metadata(em, "thread_sort_index", pid, Some(tids[i]), "sort_index", &rank.to_string())?;
        }
        let is_device = plane.name.starts_with(names::DEVICE_PLANE_PREFIX);
        let context = XspaceContext::of(plane);
        let counters = plane.name == names::sampled::COUNTERS_PLANE;
        for (line, tid) in plane.lines.iter().zip(&tids) {
            let track = format!(",\"pid\":{pid},\"tid\":{tid}");
            if counters {
                write_counter_line(em, plane, line, &track)?;
            } else {
                write_xspace_line(em, plane, line, &context, &track, &flows, is_device)?;
            }
        }
    }
    Ok(())
}

/// Writes the readings of one line of mlprof's counters plane as Chrome counter events
/// (`ph: "C"`), one counter per line and reading name (`python3 (pid 7): CPU (%)`), so
/// Perfetto and chrome://tracing draw them as counter tracks.
fn write_counter_line(em: &mut TraceWriter<'_>, plane: &Plane, line: &Line, track: &str) -> io::Result<()> {
    let Some(value_key) = plane.find_stat_key(names::sampled::COUNTER_VALUE_STAT) else { return Ok(()) };
    for event in line.iter() {
        let value = match event.stat(plane, value_key) {
            Some(StatValue::Double(v)) if v.is_finite() => v,
            Some(StatValue::Int(v)) => v as f64,
            Some(StatValue::Uint(v)) => v as f64,
            _ => continue,
        };
        let counter = plane.metadata_of(&event).map_or("", |m| m.name.as_str());
        em.begin_event(PH_COUNTER)?;
        em.buf.push_str(",\"name\":");
        push_json_str(&mut em.buf, &format!("{}: {counter}", line.shown_name()));
        em.buf.push_str(track);
        em.buf.push_str(",\"ts\":");
        push_us(&mut em.buf, 0, event.start_ps());
        em.buf.push_str(",\"args\":{");
        push_json_str(&mut em.buf, counter);
        em.buf.push_str(&format!(":{value}}}}}"));
    }
    Ok(())
}

/// Writes one `M` record whose args hold one value (`sort_index` values are numbers).
fn write_metadata(
    em: &mut TraceWriter<'_>,
    name: &str,
    pid: i64,
    tid: Option<i64>,
    arg: &str,
    value: &str,
) -> io::Result<()> {
    em.begin_event(PH_METADATA)?;
    em.buf.push_str(",\"name\":");
    push_json_str(&mut em.buf, name);
    em.buf.push_str(&format!(",\"pid\":{pid}"));
    if let Some(tid) = tid {
        em.buf.push_str(&format!(",\"tid\":{tid}"));
    }
    em.buf.push_str(",\"args\":{");
    push_json_str(&mut em.buf, arg);
    em.buf.push(':');
    if arg == "sort_index" {
        em.buf.push_str(value);
    } else {
        push_json_str(&mut em.buf, value);
    }
    em.buf.push_str("}}");
    Ok(())
}

/// Per-plane stat keys the XSpace event writer needs.
struct XspaceContext {
    internal: Vec<bool>,
    step_name: Option<u32>,
    correlation: Option<u32>,
}

impl XspaceContext {
    fn of(plane: &Plane) -> XspaceContext {
        XspaceContext {
            internal: plane.stat_metadata.iter().map(|m| names::INTERNAL_STATS.contains(&m.name.as_str())).collect(),
            step_name: plane.find_stat_key(names::STEP_NAME),
            correlation: plane.find_stat_key(names::CORRELATION_ID),
        }
    }
}

/// Correlation ids that occur on both a host plane and a device plane: each becomes a
/// flow arrow from the host event (launch) to the device event (kernel, copy).
struct CorrelationFlows {
    linked: HashSet<i64>,
}

impl CorrelationFlows {
    fn of(host: &Host) -> CorrelationFlows {
        let mut on_host = HashSet::new();
        let mut on_device = HashSet::new();
        for plane in &host.planes {
            let Some(key) = plane.find_stat_key(names::CORRELATION_ID) else { continue };
            let target = if plane.name.starts_with(names::DEVICE_PLANE_PREFIX) { &mut on_device } else { &mut on_host };
            for line in &plane.lines {
                for stat in line.stats.stats().iter().filter(|s| s.key() == key) {
                    if let Some(id) = int_value(stat.value()) {
                        target.insert(id);
                    }
                }
            }
        }
        CorrelationFlows { linked: on_host.intersection(&on_device).copied().collect() }
    }
}

fn int_value(value: StatValue) -> Option<i64> {
    match value {
        StatValue::Int(v) => Some(v),
        StatValue::Uint(v) => i64::try_from(v).ok(),
        _ => None,
    }
}

fn write_xspace_line(
    em: &mut TraceWriter<'_>,
    plane: &Plane,
    line: &Line,
    ctx: &XspaceContext,
    track: &str,
    flows: &CorrelationFlows,
    is_device: bool,
) -> io::Result<()> {
    for event in line.iter() {
        let meta = plane.metadata_of(&event);
        let long_name = meta.map_or("", |m| m.name.as_str());
        let step_name = ctx.step_name.and_then(|key| event.own_stat(key));
        let shown = match (step_name, meta) {
            (Some(value), _) => plane.format_value(&line.stats, value),
            (None, Some(m)) if !m.display_name.is_empty() => m.display_name.clone(),
            _ => long_name.to_string(),
        };
        em.begin_event(PH_COMPLETE)?;
        em.buf.push_str(",\"name\":");
        push_json_str(&mut em.buf, &shown);
        em.buf.push_str(track);
        em.buf.push_str(",\"ts\":");
        push_us(&mut em.buf, 0, event.start_ps());
        em.buf.push_str(",\"dur\":");
        push_us(&mut em.buf, 0, event.duration_ps());
        em.buf.push_str(",\"args\":{");
        let mut first = true;
        let mut arg = |em: &mut TraceWriter<'_>, name: &str| {
            if !first {
                em.buf.push(',');
            }
            first = false;
            push_json_str(&mut em.buf, name);
            em.buf.push(':');
        };
        if shown != long_name {
            arg(em, "long_name");
            push_json_str(&mut em.buf, long_name);
        }
        if let Some(n) = event.num_occurrences() {
            arg(em, "num_occurrences");
            em.buf.push_str(&n.to_string());
        }
        let mut correlation = None;
        for (stat, store) in event.stats_with_metadata(plane) {
            if ctx.internal.get(stat.key() as usize).copied().unwrap_or(false) {
                continue;
            }
            if Some(stat.key()) == ctx.correlation {
                correlation = int_value(stat.value()).filter(|id| flows.linked.contains(id));
            }
            arg(em, plane.stat_name(stat.key()));
            push_value(&mut em.buf, plane, store, stat.value());
        }
        em.buf.push_str("}}");
        if let Some(id) = correlation {
            // Host → device: the launch starts the arrow, the kernel or copy ends it.
            em.begin_event(if is_device { PH_FLOW_END } else { PH_FLOW_START })?;
            if is_device {
                em.buf.push_str(",\"bp\":");
                push_json_str(&mut em.buf, BINDING_ENCLOSING);
            }
            em.buf.push_str(",\"cat\":");
            push_json_str(&mut em.buf, CAT_FLOW);
            em.buf.push_str(",\"name\":");
            push_json_str(&mut em.buf, CAT_FLOW);
            em.buf.push_str(track);
            em.buf.push_str(&format!(",\"id\":{id},\"ts\":"));
            push_us(&mut em.buf, 0, event.start_ps());
            em.buf.push('}');
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlprof_model::{Line, PlaneBuilder, SourceFormat};

    /// A host with a CUDA launch on a host thread and its kernel on a GPU stream.
    fn launch_and_kernel() -> Host {
        let mut cpu = PlaneBuilder::new(0, names::HOST_PLANE);
        let corr = cpu.stat_key(names::CORRELATION_ID);
        let launch = cpu.event_metadata("cudaLaunchKernel", 0, |_| Vec::new());
        let mut thread = Line::new(42, "python");
        thread.stats.push(corr, StatValue::Int(7));
        thread.push_event(launch, 1_000_000, 500_000);
        thread.stats.push(corr, StatValue::Int(99));
        thread.push_event(launch, 3_000_000, 500_000);
        cpu.push_line(thread);

        let mut gpu = PlaneBuilder::new(0, "/device:GPU:0");
        let corr = gpu.stat_key(names::CORRELATION_ID);
        let kernel = gpu.event_metadata("gemm", 0, |_| Vec::new());
        let mut stream = Line::new(7, "Stream #7");
        stream.display_id = 7;
        stream.stats.push(corr, StatValue::Int(7));
        stream.push_event(kernel, 2_000_000, 1_500_000);
        gpu.push_line(stream);

        let mut host = Host::new("h", "h.xplane.pb", SourceFormat::Xspace);
        host.planes = vec![cpu.finish(), gpu.finish()];
        host
    }

    fn events(host: &Host) -> Vec<serde_json::Value> {
        let mut out = Vec::new();
        write_chrome_trace(&[host], &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        doc["traceEvents"].as_array().unwrap().clone()
    }

    #[test]
    fn correlation_ids_on_host_and_device_become_flow_arrows() {
        let events = events(&launch_and_kernel());
        let starts: Vec<_> = events.iter().filter(|e| e["ph"] == "s").collect();
        let finishes: Vec<_> = events.iter().filter(|e| e["ph"] == "f").collect();
        // Correlation 99 has no device event: no dangling arrow.
        assert_eq!(starts.len(), 1);
        assert_eq!(finishes.len(), 1);
        assert_eq!(
            (starts[0]["id"].as_i64(), starts[0]["pid"].as_i64(), starts[0]["ts"].as_f64()),
            (Some(7), Some(701), Some(1.0))
        );
        assert_eq!(
            (finishes[0]["pid"].as_i64(), finishes[0]["tid"].as_i64(), finishes[0]["bp"].as_str()),
            (Some(1), Some(7), Some("e"))
        );
        let kernel = events.iter().find(|e| e["name"] == "gemm").unwrap();
        assert_eq!((kernel["ts"].as_f64(), kernel["dur"].as_f64()), (Some(2.0), Some(1.5)));
        assert_eq!(kernel["args"]["correlation_id"], 7);
    }

    #[test]
    fn processes_and_threads_are_named_as_xprof_names_them() {
        let events = events(&launch_and_kernel());
        let named = |what: &str, pid: i64| {
            events
                .iter()
                .find(|e| e["ph"] == "M" && e["name"] == what && e["pid"] == pid)
                .map(|e| e["args"]["name"].clone())
        };
        assert_eq!(named("process_name", 701), Some("/host:CPU".into()));
        assert_eq!(named("process_name", 1), Some("/device:GPU:0".into()));
        assert_eq!(named("thread_name", 1), Some("Stream #7".into()));
    }
}
