//! Encodes a [`Host`] as an XSpace protobuf, and a set of hosts as a TensorBoard log
//! directory (`OUT/plugins/profile/<session>/<host>.xplane.pb`) that XProf opens.
//!
//! Ids are written as the model keeps them (the original XSpace ids, or `1, 2, …` for
//! hosts read from other formats). A host without a `Task Environment` plane gets one
//! with `profile_start_time`/`profile_stop_time` when its start time is known, because
//! XProf reads the profile's wall-clock start from there. A host read from a Kineto trace
//! gets XProf's step markers ([`StepMarkers`]), so its steps survive the conversion.

use mlprof_model::{Event, Host, Line, Plane, SourceFormat, Stat, StatStore, StatValue, names};

use crate::wire::WireWriter;

/// Serialises `host` as XSpace protobuf bytes.
pub fn encode_xspace(host: &Host) -> Vec<u8> {
    let mut out = WireWriter::default();
    let mut plane_buf = WireWriter::default();
    let mut scratch = Scratch::default();
    for plane in &host.planes {
        plane_buf.buf.clear();
        let from_kineto = host.format == SourceFormat::Kineto;
        let markers = (from_kineto && plane.name == names::HOST_PLANE).then(|| StepMarkers::of(plane));
        let layout = Layout { markers: markers.as_ref(), by_start: from_kineto };
        encode_plane(plane, &layout, &mut plane_buf, &mut scratch);
        out.bytes_always(1, &plane_buf.buf);
    }
    if host.plane(names::TASK_ENVIRONMENT_PLANE).is_none()
        && let Some(start) = host.profile_start_ns
    {
        plane_buf.buf.clear();
        encode_task_environment(start, host.profile_stop_ns, &mut plane_buf);
        out.bytes_always(1, &plane_buf.buf);
    }
    for s in &host.errors {
        out.bytes_always(2, s.as_bytes());
    }
    for s in &host.warnings {
        out.bytes_always(3, s.as_bytes());
    }
    let hostnames: Vec<&str> = if host.hostnames.is_empty() {
        vec![host.name.as_str()]
    } else {
        host.hostnames.iter().map(String::as_str).collect()
    };
    for s in hostnames {
        out.bytes_always(4, s.as_bytes());
    }
    out.buf
}

/// Reusable buffers for nested messages, one per nesting level.
#[derive(Default)]
struct Scratch {
    line: WireWriter,
    event: WireWriter,
    stat: WireWriter,
    entry: WireWriter,
    value: WireWriter,
}

/// The stats that make PyTorch's `ProfilerStep#N` annotations steps for XProf: `_r = 1`
/// (the event is the root of a step group) and `step_num = N` on each such event, as
/// TensorFlow's and JAX's step events carry them. Ids for the two stats are the plane's
/// own when it has them, else new ones after its largest.
struct StepMarkers {
    /// The `_r` stat's id, and whether the plane lacks its metadata.
    root: (i64, bool),
    /// The `step_num` stat's id, and whether the plane lacks its metadata.
    step_num: (i64, bool),
}

/// The name prefix of PyTorch's step annotations.
const PROFILER_STEP_PREFIX: &str = "ProfilerStep#";

impl StepMarkers {
    fn of(plane: &Plane) -> StepMarkers {
        let mut next = plane.stat_metadata.iter().map(|m| m.id).max().unwrap_or(0);
        let mut id_of = |name: &str| match plane.stat_metadata.iter().find(|m| m.name == name) {
            Some(meta) => (meta.id, false),
            None => {
                next += 1;
                (next, true)
            }
        };
        StepMarkers { root: id_of(names::IS_ROOT), step_num: id_of(names::STEP_NUM) }
    }

    /// The step number of an event named `name`, when it is a step annotation.
    fn step_of(name: &str) -> Option<i64> {
        name.strip_prefix(PROFILER_STEP_PREFIX)?.parse().ok()
    }

    /// Writes the two stats of step `step` as stats (field `field`) of an event.
    fn encode(&self, step: i64, field: u32, out: &mut WireWriter, buf: &mut WireWriter) {
        for (id, value) in [(self.root.0, 1), (self.step_num.0, step)] {
            buf.buf.clear();
            buf.int64(1, id);
            buf.int64_always(4, value);
            out.bytes_always(field, &buf.buf);
        }
    }

    /// The stat metadata the plane lacks: `(id, name)`.
    fn missing_metadata(&self) -> impl Iterator<Item = (i64, &'static str)> {
        [(self.root, names::IS_ROOT), (self.step_num, names::STEP_NUM)]
            .into_iter()
            .filter(|((_, missing), _)| *missing)
            .map(|((id, _), name)| (id, name))
    }
}

/// What the writer adds to a host read from another format than XSpace.
struct Layout<'m> {
    /// The step markers of its host plane, if any.
    markers: Option<&'m StepMarkers>,
    /// Whether each line is written in start order (a Kineto trace lists a thread's events
    /// as flushed; an XSpace host keeps its file's order, byte for byte).
    by_start: bool,
}

fn encode_plane(plane: &Plane, layout: &Layout<'_>, out: &mut WireWriter, s: &mut Scratch) {
    out.int64(1, plane.id);
    out.bytes(2, plane.name.as_bytes());
    for line in &plane.lines {
        s.line.buf.clear();
        encode_line(plane, line, layout, &mut s.line, &mut s.event, &mut s.stat);
        out.bytes_always(3, &s.line.buf);
    }
    for meta in &plane.event_metadata {
        s.value.buf.clear();
        s.value.int64(1, meta.id);
        s.value.bytes(2, meta.name.as_bytes());
        s.value.bytes(3, &meta.metadata);
        s.value.bytes(4, meta.display_name.as_bytes());
        for stat in plane.metadata_stats_of(meta) {
            encode_stat(plane, &plane.metadata_stats, stat, 5, &mut s.value, &mut s.stat);
        }

        for &child in &meta.child_ids {
            s.value.int64_always(6, child);
        }
        s.entry.buf.clear();
        s.entry.int64_always(1, meta.id);
        s.entry.bytes_always(2, &s.value.buf);
        out.bytes_always(4, &s.entry.buf);
    }
    for meta in &plane.stat_metadata {
        s.value.buf.clear();
        s.value.int64(1, meta.id);
        s.value.bytes(2, meta.name.as_bytes());
        s.value.bytes(3, meta.description.as_bytes());
        s.entry.buf.clear();
        s.entry.int64_always(1, meta.id);
        s.entry.bytes_always(2, &s.value.buf);
        out.bytes_always(5, &s.entry.buf);
    }
    for (id, name) in layout.markers.into_iter().flat_map(StepMarkers::missing_metadata) {
        s.value.buf.clear();
        s.value.int64(1, id);
        s.value.bytes(2, name.as_bytes());
        s.entry.buf.clear();
        s.entry.int64_always(1, id);
        s.entry.bytes_always(2, &s.value.buf);
        out.bytes_always(5, &s.entry.buf);
    }
    for stat in plane.plane_stats() {
        encode_stat(plane, &plane.metadata_stats, stat, 6, out, &mut s.stat);
    }
}

fn encode_line(
    plane: &Plane,
    line: &Line,
    layout: &Layout<'_>,
    out: &mut WireWriter,
    event: &mut WireWriter,
    stat: &mut WireWriter,
) {
    out.int64(1, line.id);
    out.bytes(2, line.name.as_bytes());
    out.int64(3, line.timestamp_ns);
    out.int64(9, line.duration_ps);
    out.int64(10, line.display_id);
    out.bytes(11, line.display_name.as_bytes());
    let events: Vec<Event<'_>> = if layout.by_start { in_start_order(line) } else { line.iter().collect() };
    for e in events {
        event.buf.clear();
        let id = plane.event_metadata.get(e.metadata_index() as usize).map_or(0, |m| m.id);
        event.int64(1, id);
        match e.num_occurrences() {
            Some(n) => event.int64_always(5, n),
            None => event.int64(2, e.offset_ps()),
        }
        event.int64(3, e.duration_ps());
        for st in e.stats() {
            encode_stat(plane, &line.stats, st, 4, event, stat);
        }
        let step =
            layout.markers.and_then(|_| StepMarkers::step_of(plane.metadata_of(&e).map_or("", |m| m.name.as_str())));
        if let (Some(markers), Some(step)) = (layout.markers, step) {
            let has = |id: i64| {
                e.stats().iter().any(|st| plane.stat_metadata.get(st.key() as usize).is_some_and(|m| m.id == id))
            };
            if !has(markers.root.0) && !has(markers.step_num.0) {
                markers.encode(step, 4, event, stat);
            }
        }
        out.bytes_always(4, &event.buf);
    }
}

/// The events of `line` by start time (stable), as XProf's grouping nests them.
fn in_start_order(line: &Line) -> Vec<Event<'_>> {
    let mut events: Vec<_> = line.iter().collect();
    if !events.is_sorted_by_key(|e| e.offset_ps()) {
        events.sort_by_key(|e| e.offset_ps());
    }
    events
}

/// Writes `stat` as field `field` of `out` (stats are field 6 of XPlane, 4 of XEvent,
/// 5 of XEventMetadata).
fn encode_stat(plane: &Plane, store: &StatStore, stat: &Stat, field: u32, out: &mut WireWriter, buf: &mut WireWriter) {
    buf.buf.clear();
    let id = plane.stat_metadata.get(stat.key() as usize).map_or(0, |m| m.id);
    buf.int64(1, id);
    match stat.value() {
        StatValue::Double(v) => buf.double_always(2, v),
        StatValue::Uint(v) => buf.uint64_always(3, v),
        StatValue::Int(v) => buf.int64_always(4, v),
        StatValue::Str(r) | StatValue::Json(r) => buf.bytes_always(5, store.bytes(r)),
        StatValue::Bytes(r) => buf.bytes_always(6, store.bytes(r)),
        StatValue::Ref(k) => {
            let target = plane.stat_metadata.get(k as usize).map_or(0, |m| m.id);
            buf.uint64_always(7, target as u64);
        }
    }
    out.bytes_always(field, &buf.buf);
}

fn encode_task_environment(start_ns: i64, stop_ns: Option<i64>, out: &mut WireWriter) {
    let mut entry = WireWriter::default();
    let mut value = WireWriter::default();
    out.bytes_always(2, names::TASK_ENVIRONMENT_PLANE.as_bytes());
    let stats: Vec<(i64, &str, i64)> = std::iter::once((1, names::PROFILE_START_TIME, start_ns))
        .chain(stop_ns.map(|stop| (2, names::PROFILE_STOP_TIME, stop)))
        .collect();
    for (id, name, _) in &stats {
        value.buf.clear();
        value.int64(1, *id);
        value.bytes(2, name.as_bytes());
        entry.buf.clear();
        entry.int64_always(1, *id);
        entry.bytes_always(2, &value.buf);
        out.bytes_always(5, &entry.buf);
    }
    for (id, _, v) in &stats {
        value.buf.clear();
        value.int64(1, *id);
        value.uint64_always(3, *v as u64);
        out.bytes_always(6, &value.buf);
    }
}
