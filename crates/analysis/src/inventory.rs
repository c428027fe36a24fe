//! The inventory of a load (`mlprof info`): sessions → hosts → planes → lines with
//! event counts, time spans, device properties and which stats occur.
//!
//! Stat usage is counted per plane over plane stats, event-metadata stats and event
//! stats separately (`plane:NAME`, `event_metadata:NAME`, `event:NAME`), the same
//! keys as the fixtures' `xplane_summary.json`, so the two can be compared directly.

use std::collections::BTreeMap;

use mlprof_model::{Host, Plane, Session, SourceFormat, names};
use serde::Serialize;

/// A time span in picoseconds relative to the profile start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SpanPs {
    /// Earliest event start (ps).
    pub start_ps: i64,
    /// Latest event end (ps).
    pub end_ps: i64,
    /// `end_ps - start_ps`.
    pub duration_ps: i64,
}

impl SpanPs {
    fn of(span: Option<(i64, i64)>) -> Option<SpanPs> {
        span.map(|(start_ps, end_ps)| SpanPs { start_ps, end_ps, duration_ps: end_ps.saturating_sub(start_ps) })
    }
}

/// Everything `mlprof info` shows.
#[derive(Clone, Debug, Serialize)]
pub struct Inventory {
    /// One entry per session, oldest first.
    pub sessions: Vec<SessionInventory>,
}

/// One session.
#[derive(Clone, Debug, Serialize)]
pub struct SessionInventory {
    /// Session name.
    pub name: String,
    /// Where it was read from.
    pub path: String,
    /// Total events over all hosts.
    pub events: usize,
    /// The hosts.
    pub hosts: Vec<HostInventory>,
}

/// One host.
#[derive(Clone, Debug, Serialize)]
pub struct HostInventory {
    /// Host name.
    pub name: String,
    /// Source file.
    pub path: String,
    /// Source format.
    pub format: SourceFormat,
    /// Size of the source file on disk, bytes.
    pub bytes: u64,
    /// Distributed rank, when known.
    pub rank: Option<i64>,
    /// XSpace hostnames.
    pub hostnames: Vec<String>,
    /// Errors the profiler recorded.
    pub errors: Vec<String>,
    /// Warnings the profiler recorded.
    pub warnings: Vec<String>,
    /// Total events.
    pub events: usize,
    /// Profile start, Unix epoch nanoseconds, when known.
    pub profile_start_ns: Option<i64>,
    /// Profile stop, Unix epoch nanoseconds, when known.
    pub profile_stop_ns: Option<i64>,
    /// Span of all events.
    pub span: Option<SpanPs>,
    /// The planes.
    pub planes: Vec<PlaneInventory>,
}

/// One plane.
#[derive(Clone, Debug, Serialize)]
pub struct PlaneInventory {
    /// XSpace plane id.
    pub id: i64,
    /// Plane name.
    pub name: String,
    /// Total events over its lines.
    pub events: usize,
    /// Number of event-metadata entries (distinct event kinds).
    pub event_metadata: usize,
    /// Number of stat keys.
    pub stat_metadata: usize,
    /// Span of its events.
    pub span: Option<SpanPs>,
    /// Device properties (device capability stats of a device plane; empty otherwise).
    pub device_properties: BTreeMap<String, String>,
    /// The plane's own stats, rendered as text.
    pub plane_stats: BTreeMap<String, String>,
    /// Well-known stats (see [`names::WELL_KNOWN_STATS`]) used by this plane's events or
    /// event metadata.
    pub well_known_stats: Vec<String>,
    /// How often each stat occurs: keys `plane:NAME`, `event_metadata:NAME`, `event:NAME`.
    pub stats_used: BTreeMap<String, usize>,
    /// The lines.
    pub lines: Vec<LineInventory>,
}

/// One line.
#[derive(Clone, Debug, Serialize)]
pub struct LineInventory {
    /// XSpace line id.
    pub id: i64,
    /// XSpace display id.
    pub display_id: i64,
    /// Line name.
    pub name: String,
    /// Display name ("" if none).
    pub display_name: String,
    /// Number of events.
    pub events: usize,
    /// Line start in nanoseconds relative to the profile start.
    pub timestamp_ns: i64,
    /// Span of its events.
    pub span: Option<SpanPs>,
}

/// Builds the inventory of loaded sessions.
pub fn inventory(sessions: &[Session]) -> Inventory {
    Inventory {
        sessions: sessions
            .iter()
            .map(|s| SessionInventory {
                name: s.name.clone(),
                path: s.path.clone(),
                events: s.event_count(),
                hosts: s.hosts.iter().map(host_inventory).collect(),
            })
            .collect(),
    }
}

fn host_inventory(host: &Host) -> HostInventory {
    HostInventory {
        name: host.name.clone(),
        path: host.source_path.clone(),
        format: host.format,
        bytes: host.source_bytes,
        rank: host.rank,
        hostnames: host.hostnames.clone(),
        errors: host.errors.clone(),
        warnings: host.warnings.clone(),
        events: host.event_count(),
        profile_start_ns: host.profile_start_ns,
        profile_stop_ns: host.profile_stop_ns,
        span: SpanPs::of(host.span_ps()),
        planes: host.planes.iter().map(plane_inventory).collect(),
    }
}

fn plane_inventory(plane: &Plane) -> PlaneInventory {
    let mut plane_stats = BTreeMap::new();
    for stat in plane.plane_stats() {
        let text = plane.format_value(&plane.metadata_stats, stat.value());
        plane_stats.insert(plane.stat_name(stat.key()).to_string(), text);
    }
    let is_device = plane.name.starts_with(names::DEVICE_PLANE_PREFIX);
    let device_properties = if is_device { plane_stats.clone() } else { BTreeMap::new() };

    let keys = plane.stat_metadata.len();
    let (mut on_plane, mut on_metadata, mut on_events) = (vec![0usize; keys], vec![0usize; keys], vec![0usize; keys]);
    let count = |counts: &mut Vec<usize>, key: u32| {
        if let Some(c) = counts.get_mut(key as usize) {
            *c += 1;
        }
    };
    for stat in plane.plane_stats() {
        count(&mut on_plane, stat.key());
    }
    for meta in &plane.event_metadata {
        for stat in plane.metadata_stats_of(meta) {
            count(&mut on_metadata, stat.key());
        }
    }
    for line in &plane.lines {
        for stat in line.stats.stats() {
            count(&mut on_events, stat.key());
        }
    }
    let mut stats_used = BTreeMap::new();
    let mut well_known = Vec::new();
    for (key, meta) in plane.stat_metadata.iter().enumerate() {
        for (prefix, counts) in [("plane", &on_plane), ("event_metadata", &on_metadata), ("event", &on_events)] {
            if counts[key] > 0 {
                *stats_used.entry(format!("{prefix}:{}", meta.name)).or_insert(0) += counts[key];
            }
        }
        let used = on_metadata[key] + on_events[key] > 0;
        if used && names::WELL_KNOWN_STATS.contains(&meta.name.as_str()) && !well_known.contains(&meta.name) {
            well_known.push(meta.name.clone());
        }
    }
    well_known.sort();

    PlaneInventory {
        id: plane.id,
        name: plane.name.clone(),
        events: plane.event_count(),
        event_metadata: plane.event_metadata.len(),
        stat_metadata: plane.stat_metadata.len(),
        span: SpanPs::of(plane.span_ps()),
        device_properties,
        plane_stats,
        well_known_stats: well_known,
        stats_used,
        lines: plane
            .lines
            .iter()
            .map(|l| LineInventory {
                id: l.id,
                display_id: l.display_id,
                name: l.name.clone(),
                display_name: l.display_name.clone(),
                events: l.len(),
                timestamp_ns: l.timestamp_ns,
                span: SpanPs::of(l.span_ps()),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mlprof_model::{Line, PlaneBuilder, StatValue};

    #[test]
    fn counts_events_and_stats_per_plane_and_line() {
        let mut b = PlaneBuilder::new(0, "/device:GPU:0");
        let corr = b.stat_key("correlation_id");
        let cores = b.stat_key("core_count");
        b.set_plane_stats(vec![(cores, StatValue::Int(108))]);
        let kernel = b.event_metadata("kernel", 0, |_| Vec::new());
        let mut line = Line::new(7, "Stream #7");
        line.stats.push(corr, StatValue::Int(1));
        line.push_event(kernel, 0, 1_000);
        line.push_event(kernel, 2_000, 1_000);
        b.push_line(line);
        let mut host = Host::new("h", "h.json", SourceFormat::Kineto);
        host.planes.push(b.finish());
        let session = Session { name: "s".into(), path: "p".into(), hosts: vec![host] };
        let inv = inventory(&[session]);
        let plane = &inv.sessions[0].hosts[0].planes[0];
        assert_eq!(plane.events, 2);
        assert_eq!(plane.lines[0].events, 2);
        assert_eq!(plane.stats_used.get("event:correlation_id"), Some(&1));
        assert_eq!(plane.stats_used.get("plane:core_count"), Some(&1));
        assert_eq!(plane.device_properties.get("core_count").map(String::as_str), Some("108"));
        assert_eq!(plane.well_known_stats, vec!["correlation_id".to_string()]);
        assert_eq!(plane.span, Some(SpanPs { start_ps: 0, end_ps: 3_000, duration_ps: 3_000 }));
    }
}
