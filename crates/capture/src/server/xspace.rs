//! [`XSpace`]: what a profiling session recorded, as one `mlprof_model::Host` that
//! `mlprof_formats` encodes into the `tensorflow.profiler.XSpace` protobuf XProf reads.
//!
//! The design decision to know: the recorded events are laid out the way TF's own
//! post-processing leaves a host profile (`PostProcessSingleHostXSpace`): one
//! `/host:CPU` plane (id 49, XProf's `kHostPlaneId`) with one line per thread (line id =
//! OS thread id, name = thread name), events sorted by start with parents before their
//! children, times relative to the session start, and the epoch start/stop kept on the
//! host so the encoder adds the `Task Environment` plane. Event names are interned once
//! per plane and arguments become typed stats, so XProf's step grouping reads `_r` and
//! `step_num` as TF-written profiles have them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use mlprof_formats::output::{profile_root, write_atomically};
use mlprof_formats::xspace::encode_xspace;
use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue, names, time::PS_PER_NS};

use super::annotation::ArgValue;
use super::error::ServerError;
use super::recorder::Collected;
use crate::session_id::SessionIds;

/// XProf's id of the `/host:CPU` plane (`kHostPlaneId` in `xplane_schema.h`).
const HOST_PLANE_ID: i64 = 49;

/// A recorded profile of this process: one host with a `/host:CPU` plane.
#[derive(Clone, Debug, PartialEq)]
pub struct XSpace {
    host: Host,
}

impl XSpace {
    /// Lays out what a session collected, for the machine called `hostname`.
    pub(crate) fn from_collected(collected: Collected, hostname: &str) -> XSpace {
        let mut host = Host::new(hostname, "", SourceFormat::Xspace);
        host.hostnames.push(hostname.to_string());
        host.profile_start_ns = Some(collected.start_ns);
        host.profile_stop_ns = Some(collected.stop_ns);
        if collected.dropped > 0 {
            host.warnings.push(format!(
                "mlprof recorder: {} events were dropped because the recorder's buffers held their cap of \
                 events while this session ran; raise max_events or annotate less",
                collected.dropped
            ));
        }
        if collected.truncated > 0 {
            host.warnings.push(format!(
                "mlprof recorder: {} events were left out because the session recorded more than its \
                 max_events ({}); the earliest events were kept",
                collected.truncated, collected.max_events
            ));
        }
        let mut plane = PlaneBuilder::new(HOST_PLANE_ID, names::HOST_PLANE);
        let mut event_ids: HashMap<String, u32> = HashMap::new();
        let mut stat_keys: HashMap<&'static str, u32> = HashMap::new();
        let mut lost_strings = 0usize;
        let mut threads = collected.threads;
        threads.sort_by_key(|t| t.tid);
        for thread in threads {
            let mut line = Line::new(thread.tid, thread.name);
            let mut events = thread.events;
            events.sort_by_key(|e| (e.start_ns, std::cmp::Reverse(e.end_ns)));
            for event in &events {
                let metadata = match event_ids.get(event.name.as_ref()) {
                    Some(&m) => m,
                    None => {
                        let m = plane.event_metadata(&event.name, 0, |_| Vec::new());
                        event_ids.insert(event.name.to_string(), m);
                        m
                    }
                };
                for (key, value) in &event.args {
                    let key = *stat_keys.entry(key).or_insert_with(|| plane.stat_key(key));
                    match value {
                        ArgValue::Int(v) => line.stats.push(key, StatValue::Int(*v)),
                        ArgValue::Uint(v) => line.stats.push(key, StatValue::Uint(*v)),
                        ArgValue::Float(v) => line.stats.push(key, StatValue::Double(*v)),
                        ArgValue::Str(s) => {
                            if line.stats.push_str(key, s).is_err() {
                                lost_strings += 1;
                            }
                        }
                    }
                }
                let offset_ps = event.start_ns.saturating_sub(collected.start_ns).saturating_mul(PS_PER_NS);
                let duration_ps = event.end_ns.saturating_sub(event.start_ns).max(0).saturating_mul(PS_PER_NS);
                line.push_event(metadata, offset_ps, duration_ps);
            }
            plane.push_line(line);
        }
        if lost_strings > 0 {
            host.warnings.push(format!(
                "mlprof recorder: {lost_strings} string arguments were left out because a thread's \
                 arguments exceeded 4 GiB"
            ));
        }
        host.planes.push(plane.finish());
        XSpace { host }
    }

    /// The profile as the mlprof model (the same `Host` that reading the encoded bytes
    /// back with `mlprof_formats::xspace::read_xspace` gives, up to its source path).
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The profile as the mlprof model, by value.
    pub fn into_host(self) -> Host {
        self.host
    }

    /// Number of recorded events.
    pub fn event_count(&self) -> usize {
        self.host.event_count()
    }

    /// True when the session recorded no event (the gRPC response's `empty_trace`).
    pub fn is_empty(&self) -> bool {
        self.event_count() == 0
    }

    /// Problems met while recording (dropped or truncated events); also written into
    /// the encoded XSpace's `warnings`.
    pub fn warnings(&self) -> &[String] {
        &self.host.warnings
    }

    /// Session start, Unix epoch nanoseconds.
    pub fn start_ns(&self) -> i64 {
        self.host.profile_start_ns.unwrap_or(0)
    }

    /// Session stop, Unix epoch nanoseconds.
    pub fn stop_ns(&self) -> i64 {
        self.host.profile_stop_ns.unwrap_or(0)
    }

    /// The profile as `tensorflow.profiler.XSpace` protobuf bytes (what a
    /// `.xplane.pb` file holds), `Task Environment` plane included.
    pub fn encode(&self) -> Vec<u8> {
        encode_xspace(&self.host)
    }

    /// Saves the profile where TensorBoard and `mlprof analyze` look for it:
    /// `logdir/plugins/profile/<YYYY_MM_DD_HH_MM_SS>/<hostname>.xplane.pb` (local time
    /// now, as TF's `ExportToTensorBoard`; named by [`SessionIds`], so a session
    /// directory that already exists gets a `_01`, `_02`, … suffix). The file is written
    /// under a temporary name and renamed when complete. Returns its path.
    pub fn save(&self, logdir: impl AsRef<Path>) -> Result<PathBuf, ServerError> {
        let root = profile_root(logdir.as_ref());
        let session = SessionIds::new().next_now(&root);
        let path = root.join(session).join(format!("{}.xplane.pb", file_name_part(&self.host.name)));
        let bytes = self.encode();
        write_atomically(&path, |w| w.write_all(&bytes))?;
        Ok(path)
    }
}

/// `name` as one file-name component: XProf writes `:` in host names as `_`; path
/// separators and control characters go the same way.
fn file_name_part(name: &str) -> String {
    mlprof_formats::output::path_component(name, "localhost")
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use mlprof_formats::xspace::read_xspace;

    use super::*;
    use crate::server::recorder::{RawEvent, ThreadEvents};

    fn event(name: &'static str, start_ns: i64, end_ns: i64, args: Vec<(&'static str, ArgValue)>) -> RawEvent {
        RawEvent { name: Cow::Borrowed(name), start_ns, end_ns, args }
    }

    fn sample() -> Collected {
        let t0 = 1_700_000_000_000_000_000;
        let step = vec![("step_num", ArgValue::Int(4)), ("_r", ArgValue::Int(1))];
        let args = vec![
            ("bytes", ArgValue::Uint(1 << 40)),
            ("loss", ArgValue::Float(0.25)),
            ("file", ArgValue::Str("shard-0".into())),
            ("delta", ArgValue::Int(-3)),
        ];
        Collected {
            start_ns: t0,
            stop_ns: t0 + 1_000,
            threads: vec![
                ThreadEvents { tid: 20, name: "loader".into(), events: vec![event("read", t0 + 5, t0 + 9, args)] },
                ThreadEvents {
                    tid: 10,
                    name: "main".into(),
                    // In drop order: the child ends first.
                    events: vec![
                        event("forward", t0 + 100, t0 + 200, Vec::new()),
                        event("train", t0 + 100, t0 + 500, step),
                        event("forward", t0 + 600, t0 + 700, Vec::new()),
                    ],
                },
            ],
            max_events: 10,
            dropped: 2,
            truncated: 1,
        }
    }

    #[test]
    fn lines_events_and_typed_stats_survive_encoding() {
        let space = XSpace::from_collected(sample(), "box:1");
        let bytes = space.encode();
        let host = read_xspace(&bytes, "mem.xplane.pb", "box:1").expect("what we encode reads back");
        assert_eq!(host.hostnames, ["box:1"]);
        assert_eq!(host.profile_start_ns, Some(1_700_000_000_000_000_000));
        assert_eq!(host.profile_stop_ns, Some(1_700_000_000_000_001_000));
        assert_eq!(host.warnings.len(), 2);
        let plane = host.plane(names::HOST_PLANE).expect("host plane");
        assert_eq!(plane.id, HOST_PLANE_ID);
        let lines: Vec<(i64, &str)> = plane.lines.iter().map(|l| (l.id, l.name.as_str())).collect();
        assert_eq!(lines, [(10, "main"), (20, "loader")]);
        // Event names are interned once per plane.
        assert_eq!(plane.event_metadata.iter().filter(|m| m.name == "forward").count(), 1);

        let main = &plane.lines[0];
        let shown: Vec<(String, i64, i64)> =
            main.iter().map(|e| (plane.metadata_of(&e).unwrap().name.clone(), e.start_ps(), e.duration_ps())).collect();
        assert_eq!(
            shown,
            [
                ("train".to_string(), 100_000, 400_000),
                ("forward".to_string(), 100_000, 100_000),
                ("forward".to_string(), 600_000, 100_000)
            ]
        );
        let stat = |line: &Line, event: usize, key: &str| {
            let k = plane.find_stat_key(key).unwrap();
            let e = line.event(event).unwrap();
            e.stat_and_store(plane, k).map(|(value, store)| plane.format_value(store, value))
        };
        assert_eq!(stat(main, 0, "step_num").as_deref(), Some("4"));
        assert_eq!(stat(main, 0, "_r").as_deref(), Some("1"));
        let loader = &plane.lines[1];
        let value = |key: &str| {
            let k = plane.find_stat_key(key).unwrap();
            loader.event(0).unwrap().stat(plane, k).unwrap()
        };
        assert_eq!(value("bytes"), StatValue::Uint(1 << 40));
        assert_eq!(value("loss"), StatValue::Double(0.25));
        assert_eq!(value("delta"), StatValue::Int(-3));
        assert_eq!(stat(loader, 0, "file").as_deref(), Some("shard-0"));
        assert!(host.plane(names::TASK_ENVIRONMENT_PLANE).is_some());
    }

    #[test]
    fn an_empty_session_still_encodes_a_readable_profile() {
        let space = XSpace::from_collected(Collected::empty(1_000, 5), "h");
        assert!(space.is_empty());
        assert!(space.warnings().is_empty());
        let host = read_xspace(&space.encode(), "h.xplane.pb", "h").unwrap();
        assert_eq!(host.event_count(), 0);
        assert_eq!(host.profile_start_ns, Some(1_000));
    }

    #[test]
    fn saving_writes_a_tensorboard_session_directory() {
        let dir = tempfile::tempdir().unwrap();
        let space = XSpace::from_collected(sample(), "box:1");
        let first = space.save(dir.path()).unwrap();
        let second = space.save(dir.path()).unwrap();
        assert_ne!(first, second, "a second save in the same second gets its own directory");
        for path in [&first, &second] {
            assert_eq!(path.file_name().unwrap(), "box_1.xplane.pb");
            let session = path.parent().unwrap();
            assert_eq!(session.parent().unwrap(), dir.path().join("plugins").join("profile"));
            assert_eq!(std::fs::read(path).unwrap(), space.encode());
        }
        let stamp = first.parent().unwrap().file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(stamp.len(), "2026_01_02_03_04_05".len(), "{stamp}");
        assert!(stamp.chars().all(|c| c.is_ascii_digit() || c == '_'));
    }

    #[test]
    fn host_names_become_one_path_component() {
        assert_eq!(file_name_part("host:6009"), "host_6009");
        assert_eq!(file_name_part("../etc"), ".._etc");
        assert_eq!(file_name_part(".."), "localhost");
    }
}
