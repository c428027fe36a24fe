//! From the model to a timeline: one host's planes, lines and events as sections,
//! tracks and events, with the flows between them, and the way back from an index
//! event to the model event's args.
//!
//! Mapping:
//! - Sections: every device plane (`/device:…`, by ordinal), then every other plane
//!   with events (`/host:CPU`); `/host:metadata` and `Task Environment` carry none.
//! - Tracks: one per line with events. On device planes the derived lines come first
//!   in XProf's order (`Steps`, `XLA Modules`, `XLA Ops`, …), then the streams in
//!   stored order; host threads keep their stored order.
//! - Events: every timed event, named by its metadata's display name (else name); on
//!   `Steps` lines the `step_name` stat wins, as in XProf's trace viewer. Aggregated
//!   XSpace events (`num_occurrences`) and Chrome flow markers (`ph` `s`/`t`/`f`, the
//!   arrows themselves) are not events. Each keeps its [`ModelRef`].
//! - Flows: launch → GPU activity by `correlation_id` (Kineto `correlation`, CUPTI in
//!   XSpace; the latest host event of an id to each device event of it, as HTA links
//!   them); XSpace `flow` stats (XProf's `XFlow`: the events of one flow id, in time
//!   order); XSpace producer → consumer context links (`_pt`/`_p` → `_ct`/`_c`: each
//!   consumer from the latest producer of its context that started before it);
//!   PyTorch's forward → backward links in Chrome traces (`cat` `fwdbwd` flow events,
//!   `s` → `f` by id, each end bound to a slice of its thread, see [`crate::fwdbwd`]).

use mlprof_model::names::{CORRELATION_ID, DEVICE_PLANE_PREFIX, INTERNAL_STATS, STEP_NAME, STEPS_LINE};
use mlprof_model::{Event, Host, Line, Plane, StatValue};

use crate::builder::{EventRef, NameId, SectionKind, TimelineBuilder, TrackHandle};
use crate::error::BuildError;
use crate::fwdbwd::{BoundEnds, EndKeys, LineEnds, Role, metadata_roles};

/// The version of the mapping described in this module (which model events become
/// which index events, their [`ModelRef`]s, names, tracks and flows). Bump it whenever
/// that changes, so indexes cached by an older mapping are rebuilt instead of pointing
/// at the wrong model events; callers put it in their [`crate::CacheKey`] variant.
pub const MAPPING_VERSION: u32 = 3;

/// Derived lines of device planes, in the order they are shown (XProf's derived
/// timelines), before the streams.
pub const DERIVED_LINES: &[&str] = &[
    STEPS_LINE,
    "XLA Modules",
    "XLA Ops",
    "Async XLA Ops",
    "XLA TraceMe",
    "Framework Name Scope",
    "Framework Ops",
    "Source code",
    "Launch Stats",
];

/// Where an index event comes from: plane, line and event positions in its [`Host`].
/// Stored in the index as the event's `source` ([`ModelRef::pack`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ModelRef {
    /// Index in `Host::planes`.
    pub plane: u32,
    /// Index in `Plane::lines`.
    pub line: u32,
    /// Index of the event in the line.
    pub event: u32,
}

const PLANE_BITS: u32 = 12;
const LINE_BITS: u32 = 20;

impl ModelRef {
    /// The reference as one number: plane (12 bits), line (20 bits), event (32 bits);
    /// `None` when the plane or line index does not fit.
    pub fn pack(self) -> Option<u64> {
        if self.plane >= 1 << PLANE_BITS || self.line >= 1 << LINE_BITS {
            return None;
        }
        Some((u64::from(self.plane) << (64 - PLANE_BITS)) | (u64::from(self.line) << 32) | u64::from(self.event))
    }

    /// The reference packed in `source`.
    pub fn unpack(source: u64) -> ModelRef {
        ModelRef {
            plane: (source >> (64 - PLANE_BITS)) as u32,
            line: ((source >> 32) & ((1 << LINE_BITS) - 1)) as u32,
            event: source as u32,
        }
    }

    /// The model event this refers to, with its plane.
    pub fn resolve<'h>(&self, host: &'h Host) -> Option<(&'h Plane, Event<'h>)> {
        let plane = host.planes.get(self.plane as usize)?;
        let event = plane.lines.get(self.line as usize)?.event(self.event as usize)?;
        Some((plane, event))
    }
}

/// Order of the planes shown: devices by kind and ordinal, then the rest as stored.
fn plane_order(host: &Host) -> Vec<(usize, SectionKind)> {
    let mut devices: Vec<(usize, SectionKind)> = Vec::new();
    let mut others = Vec::new();
    for (i, plane) in host.planes.iter().enumerate() {
        if plane.event_count() == 0 {
            continue;
        }
        if plane.name.starts_with(DEVICE_PLANE_PREFIX) {
            devices.push((i, SectionKind::Device));
        } else {
            others.push((i, SectionKind::Host));
        }
    }
    devices.sort_by_key(|&(i, _)| {
        let plane = &host.planes[i];
        let ordinal = mlprof_model::names::device_ordinal(&plane.name).unwrap_or(plane.id);
        (!plane.is_gpu(), ordinal, plane.name.clone())
    });
    devices.extend(others);
    devices
}

/// Order of the lines of a plane shown as tracks.
fn line_order(plane: &Plane, kind: SectionKind) -> Vec<usize> {
    let mut order: Vec<usize> = (0..plane.lines.len()).filter(|&l| !plane.lines[l].is_empty()).collect();
    if kind == SectionKind::Device {
        let rank = |line: &Line| DERIVED_LINES.iter().position(|&d| d == line.name).unwrap_or(DERIVED_LINES.len());
        order.sort_by_key(|&l| rank(&plane.lines[l]));
    }
    order
}

/// The stat keys of one plane that the mapping reads.
struct PlaneKeys {
    correlation: Option<u32>,
    flow: Option<u32>,
    producer_type: Option<u32>,
    producer_id: Option<u32>,
    consumer_type: Option<u32>,
    consumer_id: Option<u32>,
    step_name: Option<u32>,
}

impl PlaneKeys {
    fn of(plane: &Plane) -> PlaneKeys {
        PlaneKeys {
            correlation: plane.find_stat_key(CORRELATION_ID),
            flow: plane.find_stat_key("flow"),
            producer_type: plane.find_stat_key("_pt"),
            producer_id: plane.find_stat_key("_p"),
            consumer_type: plane.find_stat_key("_ct"),
            consumer_id: plane.find_stat_key("_c"),
            step_name: plane.find_stat_key(STEP_NAME),
        }
    }

    fn any_link(&self) -> bool {
        self.correlation.is_some() || self.flow.is_some() || self.producer_id.is_some() || self.consumer_id.is_some()
    }
}

/// Flow ends found while adding events, linked at the end.
#[derive(Default)]
struct FlowEnds {
    /// (correlation id, on a device, start, event).
    correlations: Vec<(u64, bool, i64, EventRef)>,
    /// (XFlow category and id, start, event).
    xflows: Vec<(u64, i64, EventRef)>,
    /// ((context type, id), start, event) of producers and of consumers.
    producers: Vec<((u64, u64), i64, EventRef)>,
    consumers: Vec<((u64, u64), i64, EventRef)>,
    /// Forward → backward flow ends of Chrome traces, bound to their slices.
    fwdbwd: BoundEnds,
}

fn as_u64(value: StatValue) -> Option<u64> {
    match value {
        StatValue::Int(v) => Some(v as u64),
        StatValue::Uint(v) => Some(v),
        _ => None,
    }
}

impl TimelineBuilder {
    /// Adds `host`'s planes as sections after those added so far (see the module docs),
    /// with their flows.
    pub fn add_host(&mut self, host: &Host) -> Result<(), BuildError> {
        let mut ends = FlowEnds::default();
        for (plane_index, kind) in plane_order(host) {
            let plane = &host.planes[plane_index];
            let section = self.section(&plane.name, kind);
            let keys = PlaneKeys::of(plane);
            let roles = metadata_roles(plane);
            let end_keys = EndKeys::of(plane);
            let has_ends = roles.iter().any(|&r| matches!(r, Role::FlowStart | Role::FlowFinish));
            let mut names: Vec<Option<NameId>> = vec![None; plane.event_metadata.len()];
            for line_index in line_order(plane, kind) {
                let line = &plane.lines[line_index];
                let track = self.track(section, &track_name(line, line_index))?;
                let steps = line.name == STEPS_LINE;
                let plane_base = self.plane_base();
                let at = |event: usize| {
                    let plane = plane_base.saturating_add(plane_index as u32);
                    ModelRef { plane, line: line_index as u32, event: event as u32 }
                        .pack()
                        .ok_or(BuildError::SourceOutOfRange { plane: plane as usize, line: line_index })
                };
                let mut aggregated = line.events.occurrences.iter().map(|&(i, _)| i as usize).peekable();
                let mut line_ends = LineEnds::default();
                self.reserve_events(track, line.len());
                for event in line.iter() {
                    if aggregated.peek() == Some(&event.index()) {
                        aggregated.next();
                        continue;
                    }
                    let metadata = event.metadata_index() as usize;
                    let role = roles.get(metadata).copied().unwrap_or(Role::Slice);
                    if !role.is_shown() {
                        if matches!(role, Role::FlowStart | Role::FlowFinish) {
                            line_ends.end(end_keys, role, &event);
                        }
                        continue;
                    }
                    let name = match steps.then(|| step_name(plane, &event, keys.step_name)).flatten() {
                        Some(text) => self.name(text),
                        None => self.metadata_name(plane, &mut names, metadata),
                    };
                    let source = at(event.index())?;
                    let added = self.event(track, event.start_ps(), event.duration_ps(), name, source)?;
                    if keys.any_link() {
                        collect_flow_ends(&mut ends, &keys, &event, kind == SectionKind::Device, added);
                    }
                    if has_ends && role == Role::Slice {
                        line_ends.slice(event.start_ps(), event.duration_ps(), added);
                    }
                }
                line_ends.bind_into(&mut ends.fwdbwd);
            }
        }
        self.link(ends);
        Ok(())
    }

    /// The name id of metadata `index` of `plane`, interned once per plane.
    fn metadata_name(&mut self, plane: &Plane, names: &mut [Option<NameId>], index: usize) -> NameId {
        if let Some(Some(id)) = names.get(index) {
            return *id;
        }
        let text = plane
            .event_metadata
            .get(index)
            .map_or("", |m| if m.display_name.is_empty() { m.name.as_str() } else { m.display_name.as_str() });
        let id = self.name(text);
        if let Some(slot) = names.get_mut(index) {
            *slot = Some(id);
        }
        id
    }

    /// Turns the collected flow ends into flows.
    fn link(&mut self, mut ends: FlowEnds) {
        // Grouped by id alone (the order of the flows added does not matter: `finish`
        // sorts them): the latest host end of a group launches all its device ends.
        // Each line's ids come in increasing order, runs that the stable sort merges.
        ends.correlations.sort_by_key(|&(id, ..)| id);
        for group in ends.correlations.chunk_by(|a, b| a.0 == b.0) {
            let host_ends = group.iter().filter(|e| !e.1);
            let Some(launch) = host_ends.max_by_key(|&&(_, _, start, e)| (start, e)) else { continue };
            for &(_, _, _, target) in group.iter().filter(|e| e.1) {
                self.flow(launch.3, target);
            }
        }
        ends.xflows.sort_unstable_by_key(|&(id, start, e)| (id, start, e));
        for pair in ends.xflows.windows(2) {
            if pair[0].0 == pair[1].0 {
                self.flow(pair[0].2, pair[1].2);
            }
        }
        ends.producers.sort_unstable_by_key(|&(context, start, e)| (context, start, e));
        for &(context, start, consumer) in &ends.consumers {
            let first = ends.producers.partition_point(|p| p.0 < context);
            let end = ends.producers.partition_point(|p| p.0 <= context);
            let of_context = &ends.producers[first..end];
            // The latest producer that started at or before the consumer, else the first.
            let before = of_context.partition_point(|p| p.1 <= start);
            if let Some(producer) = of_context.get(before.saturating_sub(1)).filter(|p| p.2 != consumer) {
                self.flow(producer.2, consumer);
            }
        }
        for (start, finish) in ends.fwdbwd.pairs() {
            self.flow(start, finish);
        }
    }

    /// Adds a track whose events are model events, e.g. a derived `Steps` track made by
    /// the caller: each `(start_ps, dur_ps, name, at)` becomes an event with `at` as
    /// its source. Returns the track.
    pub fn add_model_track(
        &mut self,
        section: crate::builder::SectionHandle,
        name: &str,
        events: impl IntoIterator<Item = (i64, i64, String, ModelRef)>,
    ) -> Result<TrackHandle, BuildError> {
        let track = self.track(section, name)?;
        let plane_base = self.plane_base();
        for (start_ps, dur_ps, event_name, at) in events {
            let at = ModelRef { plane: plane_base.saturating_add(at.plane), ..at };
            let source =
                at.pack().ok_or(BuildError::SourceOutOfRange { plane: at.plane as usize, line: at.line as usize })?;
            let name = self.name(&event_name);
            self.event(track, start_ps, dur_ps, name, source)?;
        }
        Ok(track)
    }
}

/// The event's own `step_name` (XProf's trace viewer reads it off the event only).
fn step_name<'p>(plane: &'p Plane, event: &Event<'p>, key: Option<u32>) -> Option<&'p str> {
    plane.str_value(event.store(), event.own_stat(key?)?)
}

fn collect_flow_ends(ends: &mut FlowEnds, keys: &PlaneKeys, event: &Event<'_>, on_device: bool, at: EventRef) {
    let (mut producer, mut consumer) = ((None, None), (None, None));
    for stat in event.stats() {
        let key = Some(stat.key());
        if key == keys.correlation {
            if let Some(id) = as_u64(stat.value()) {
                ends.correlations.push((id, on_device, event.start_ps(), at));
            }
        } else if key == keys.flow {
            // XFlow: direction in the low 2 bits, then a 56-bit id and a 6-bit category.
            if let Some(encoded) = as_u64(stat.value()) {
                ends.xflows.push((encoded >> 2, event.start_ps(), at));
            }
        } else if key == keys.producer_type {
            producer.0 = as_u64(stat.value());
        } else if key == keys.producer_id {
            producer.1 = as_u64(stat.value());
        } else if key == keys.consumer_type {
            consumer.0 = as_u64(stat.value());
        } else if key == keys.consumer_id {
            consumer.1 = as_u64(stat.value());
        }
    }
    if let (Some(kind), Some(id)) = producer {
        ends.producers.push(((kind, id), event.start_ps(), at));
    }
    if let (Some(kind), Some(id)) = consumer {
        ends.consumers.push(((kind, id), event.start_ps(), at));
    }
}

/// The args of a model event as `(name, text)` pairs, as XProf's trace viewer shows
/// them: the metadata's stats, then the event's own (which replace metadata stats of
/// the same name), without XProf's internal stats or the `@` fields a Chrome trace
/// keeps for writing back; plus `long_name` when the event is shown by its display
/// name.
pub fn event_args(host: &Host, at: ModelRef) -> Option<Vec<(String, String)>> {
    let (plane, event) = at.resolve(host)?;
    let mut args: Vec<(String, String)> = Vec::new();
    let mut put = |name: &str, value: String| {
        if INTERNAL_STATS.contains(&name) || name.starts_with('@') {
            return;
        }
        match args.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value,
            None => args.push((name.to_string(), value)),
        }
    };
    if let Some(metadata) = plane.metadata_of(&event)
        && !metadata.display_name.is_empty()
        && metadata.display_name != metadata.name
    {
        put("long_name", metadata.name.clone());
    }
    for (stat, store) in event.stats_with_metadata(plane) {
        put(plane.stat_name(stat.key()), plane.format_value(store, stat.value()));
    }
    Some(args)
}

/// What a line's track is called: its name, or, where the profile names it only by its
/// id (a Kineto thread with no `thread_name` record, `thread N`) or not at all, a name
/// that says so (`unnamed thread N`; `unnamed line N` for the plane's `index`th line,
/// counted from 1, since an unnamed line's id may be a hash of its key).
fn track_name(line: &Line, index: usize) -> String {
    let name = line.shown_name();
    if name.is_empty() {
        format!("unnamed line {}", index + 1)
    } else if name.strip_prefix("thread ").is_some_and(|id| id == line.display_id.to_string()) {
        format!("unnamed {name}")
    } else {
        name.to_string()
    }
}

#[cfg(test)]
mod tests {
    use mlprof_model::{Line, PlaneBuilder, SourceFormat};

    use super::*;
    use crate::index::{FlowDirection, FlowLink};

    /// (metadata, start, duration, stats) of a test event.
    type TestEvent<'a> = (u32, i64, i64, &'a [(u32, StatValue)]);

    #[test]
    fn tracks_named_only_by_an_id_say_they_are_unnamed() {
        let named = |id: i64, name: &str| Line { display_id: id, ..Line::new(id, name) };
        assert_eq!(track_name(&named(12, "thread 12"), 0), "unnamed thread 12");
        assert_eq!(track_name(&named(-247_463_936, "thread -247463936"), 0), "unnamed thread -247463936");
        assert_eq!(track_name(&named(5_472_609_002_491_880_000, ""), 6), "unnamed line 7");
        assert_eq!(track_name(&named(3, "thread 3 (python)"), 0), "thread 3 (python)");
        assert_eq!(track_name(&named(3, "thread 4"), 0), "thread 4", "a name that is not its own id stays");
    }

    fn line(id: i64, name: &str, events: &[TestEvent<'_>]) -> Line {
        let mut line = Line::new(id, name);
        for &(metadata, start, dur, stats) in events {
            for &(key, value) in stats {
                line.stats.push(key, value);
            }
            line.push_event(metadata, start, dur);
        }
        line
    }

    /// A GPU host: a stream and derived lines on the device, a launching thread with a
    /// Chrome flow marker, an aggregated event, context links and an XFlow.
    fn host() -> Host {
        let mut gpu = PlaneBuilder::new(0, "/device:GPU:0");
        let corr = gpu.stat_key(CORRELATION_ID);
        let step = gpu.stat_key(STEP_NAME);
        let kernel = gpu.event_metadata("gemm_kernel", 0, |_| Vec::new());
        let op = gpu.event_metadata("fusion.1", 0, |_| Vec::new());
        let step_meta = gpu.event_metadata("0", 0, |_| Vec::new());
        gpu.push_line(line(7, "Stream #7", &[(kernel, 1_000, 500, &[(corr, StatValue::Int(42))])]));
        gpu.push_line(line(1, "XLA Ops", &[(op, 1_000, 500, &[])]));
        let mut steps = line(2, STEPS_LINE, &[]);
        let text = steps.stats.store_bytes(b"train_step 5").expect("arena");
        steps.stats.push(step, StatValue::Str(text));
        steps.push_event(step_meta, 0, 3_000);
        gpu.push_line(steps);
        let mut cpu = PlaneBuilder::new(0, "/host:CPU");
        let corr_cpu = cpu.stat_key(CORRELATION_ID);
        let ph = cpu.stat_key("ph");
        let (pt, p, ct, c, flow) =
            (cpu.stat_key("_pt"), cpu.stat_key("_p"), cpu.stat_key("_ct"), cpu.stat_key("_c"), cpu.stat_key("flow"));
        let launch = cpu.event_metadata("cudaLaunchKernel", 0, |_| Vec::new());
        let marker = cpu.event_metadata("ac2g", 1, |b| vec![(ph, b.metadata_str("s").expect("arena"))]);
        let dispatch = cpu.event_metadata("dispatch", 0, |_| Vec::new());
        let execute = cpu.event_metadata("execute", 0, |_| Vec::new());
        cpu.push_line(line(
            100,
            "python",
            &[
                (launch, 900, 50, &[(corr_cpu, StatValue::Int(42))]),
                (marker, 900, 0, &[]),
                (
                    dispatch,
                    2_000,
                    100,
                    &[(pt, StatValue::Int(5)), (p, StatValue::Uint(77)), (flow, StatValue::Uint((9 << 2) | 2))],
                ),
                (dispatch, 0, 10, &[]),
            ],
        ));
        cpu.push_line(line(
            101,
            "worker",
            &[(
                execute,
                2_200,
                100,
                &[(ct, StatValue::Int(5)), (c, StatValue::Int(77)), (flow, StatValue::Uint((9 << 2) | 1))],
            )],
        ));
        let mut cpu = cpu.finish();
        cpu.lines[0].events.occurrences.push((3, 12));
        let mut host = Host::new("vm", "/p/vm.xplane.pb", SourceFormat::Xspace);
        host.planes = vec![mlprof_model::Plane::new(0, "/host:metadata"), cpu, gpu.finish()];
        host
    }

    #[test]
    fn planes_become_sections_with_derived_lines_first_and_links_as_flows() {
        let host = host();
        let mut b = TimelineBuilder::new();
        b.add_host(&host).expect("add");
        let index = b.finish().expect("finish").into_index().expect("open");
        let sections: Vec<_> = index.sections().map(|s| (s.name.to_string(), s.kind)).collect();
        assert_eq!(
            sections,
            vec![("/device:GPU:0".into(), SectionKind::Device), ("/host:CPU".into(), SectionKind::Host)]
        );
        let tracks: Vec<_> =
            (0..index.track_count()).map(|t| index.track(t).expect("track").name.to_string()).collect();
        assert_eq!(tracks, ["Steps", "XLA Ops", "Stream #7", "python", "worker"]);
        // 7 model events: the flow marker and the aggregated event are not events.
        assert_eq!(index.event_count(), 6);
        let names: Vec<_> = (0..6).map(|id| index.name(index.event(id).expect("event").name).to_string()).collect();
        assert_eq!(names, ["train_step 5", "fusion.1", "gemm_kernel", "cudaLaunchKernel", "dispatch", "execute"]);
        let kernel = index.event(2).expect("kernel");
        assert_eq!(ModelRef::unpack(kernel.source), ModelRef { plane: 2, line: 0, event: 0 });
        // Launch → kernel by correlation; dispatch → execute by context (and XFlow, once).
        assert_eq!(index.flows_of(2), vec![FlowLink { direction: FlowDirection::In, event: 3 }]);
        assert_eq!(index.flows_of(4), vec![FlowLink { direction: FlowDirection::Out, event: 5 }]);
        assert_eq!(index.flow_count(), 2);
    }

    #[test]
    fn args_come_from_the_model_with_internal_stats_hidden() {
        let host = host();
        let args = event_args(&host, ModelRef { plane: 1, line: 0, event: 2 }).expect("args");
        assert_eq!(args, vec![("flow".to_string(), "38".to_string())]);
        let args = event_args(&host, ModelRef { plane: 1, line: 0, event: 0 }).expect("args");
        assert_eq!(args, vec![("correlation_id".to_string(), "42".to_string())]);
        assert!(event_args(&host, ModelRef { plane: 1, line: 0, event: 9 }).is_none());
        let packed = ModelRef { plane: 4095, line: (1 << 20) - 1, event: u32::MAX };
        assert_eq!(ModelRef::unpack(packed.pack().expect("fits")), packed);
        assert_eq!(ModelRef { plane: 4096, line: 0, event: 0 }.pack(), None);
    }
}
