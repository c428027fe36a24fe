//! The rolling history of every job's light signals, on disk: each tick appends one line
//! of JSON (the time and, per job, its CPU, memory, GPU busy share and memory, last
//! probed step time and input share, and top Python frame) to the hour's segment,
//! `<data>/history/YYYY-MM-DDTHH.jsonl` (UTC). [`Retain`] bounds what the agent keeps:
//! the oldest history segments and captured sessions go first once the data directory
//! is over its size, and any older than its age go. Reading back ([`read`]) takes the
//! segments a time range touches, skips lines it cannot read (a segment cut by a crash),
//! and thins the points it returns.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use crate::jobs::JobView;

/// The history's folder under the data directory.
pub const FOLDER: &str = "history";
/// The most points [`read`] returns per job.
pub const MAX_POINTS: usize = 2000;
/// Ticks between two applications of [`Retain`] (captures land between them).
const ENFORCE_EVERY: u32 = 60;
/// The largest segment read back, bytes (a segment is an hour of ticks).
const MAX_SEGMENT: u64 = 256 * 1024 * 1024;

/// How much the agent keeps on disk: a size, an age, or both (`1GB`, `7d`, `1GB,7d`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retain {
    /// The most bytes of history and captures together.
    pub max_bytes: Option<u64>,
    /// The oldest history and captures kept.
    pub max_age: Option<Duration>,
}

impl Default for Retain {
    /// 1 GB and 7 days.
    fn default() -> Retain {
        Retain { max_bytes: Some(1_000_000_000), max_age: Some(Duration::from_secs(7 * 86_400)) }
    }
}

impl std::str::FromStr for Retain {
    type Err = String;

    /// `SIZE`, `AGE` or `SIZE,AGE`: sizes in B, KB, MB, GB, TB (powers of 1000), ages in
    /// s, m, h, d.
    fn from_str(text: &str) -> Result<Retain, String> {
        let mut retain = Retain { max_bytes: None, max_age: None };
        for part in text.split(',').map(str::trim) {
            let digits = part.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(part.len());
            let (number, unit) = part.split_at(digits);
            let number: f64 = number.parse().map_err(|_| format!("{part:?}: a number and a unit (1GB, 7d)"))?;
            let bytes = |scale: f64| Some((number * scale) as u64);
            let seconds = |scale: f64| Duration::try_from_secs_f64(number * scale).ok();
            match unit.to_ascii_lowercase().as_str() {
                "b" => retain.max_bytes = bytes(1.0),
                "kb" => retain.max_bytes = bytes(1e3),
                "mb" => retain.max_bytes = bytes(1e6),
                "gb" => retain.max_bytes = bytes(1e9),
                "tb" => retain.max_bytes = bytes(1e12),
                "s" => retain.max_age = seconds(1.0),
                "m" => retain.max_age = seconds(60.0),
                "h" => retain.max_age = seconds(3600.0),
                "d" => retain.max_age = seconds(86_400.0),
                _ => return Err(format!("{part:?}: the unit is one of B, KB, MB, GB, TB, s, m, h, d")),
            }
        }
        let ages = text.split(',').filter(|p| p.trim().ends_with(['s', 'm', 'h', 'd'])).count();
        if ages > 0 && retain.max_age.is_none() {
            return Err(format!("{text:?}: an age too long to count"));
        }
        if retain.max_bytes == Some(0) || retain.max_age.is_some_and(|age| age.is_zero()) {
            return Err(format!("{text:?}: keep more than nothing"));
        }
        Ok(retain)
    }
}

/// One tick of one job, as the history keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Seconds since the Unix epoch.
    pub t: f64,
    /// The job's first process.
    pub pid: u32,
    /// Its short name.
    pub name: String,
    /// CPU, percent of one core.
    pub cpu: f64,
    /// Resident memory, bytes.
    pub rss: u64,
    /// Its GPUs' busy share, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_busy: Option<f64>,
    /// Its device memory, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_mem: Option<u64>,
    /// Its last probe's mean step time, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_ms: Option<f64>,
    /// Its last probe's share of step time waiting for input, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_pct: Option<f64>,
    /// The Python frame it ran most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame: Option<String>,
}

impl Point {
    /// `job` at `t`.
    pub fn of(job: &JobView, t: f64) -> Point {
        let probe = job.probe.as_ref().filter(|p| p.steps > 0);
        Point {
            t,
            pid: job.pid,
            name: job.name.clone(),
            cpu: (job.cpu_percent * 10.0).round() / 10.0,
            rss: job.rss_bytes,
            gpu_busy: job.gpu_busy_percent,
            gpu_mem: job.gpu_memory_bytes,
            step_ms: probe.map(|p| p.step_time_ms),
            input_pct: probe.map(|p| p.input_percent),
            frame: job.top_frames.first().map(|f| f.frame.clone()),
        }
    }
}

/// One line of a segment.
#[derive(Serialize, Deserialize)]
struct Line {
    t: f64,
    jobs: Vec<Point>,
}

/// The writer of the history.
pub struct History {
    data_dir: PathBuf,
    retain: Retain,
    /// The open segment and its name.
    segment: Option<(String, std::fs::File)>,
    /// Ticks recorded since [`Retain`] was last applied.
    since_enforced: u32,
}

impl History {
    /// A history under `data_dir`, kept within `retain` (what is over it goes now).
    pub fn open(data_dir: &Path, retain: Retain) -> std::io::Result<History> {
        std::fs::create_dir_all(data_dir.join(FOLDER))?;
        let history = History { data_dir: data_dir.to_path_buf(), retain, segment: None, since_enforced: 0 };
        history.enforce(SystemTime::now());
        Ok(history)
    }

    /// Appends `jobs` at `now`; a new hour opens a new segment. [`Retain`] is applied
    /// then and every [`ENFORCE_EVERY`] ticks.
    pub fn record(&mut self, now: SystemTime, jobs: &[JobView]) -> std::io::Result<()> {
        let t = unix_seconds(now);
        let name = segment_name(t);
        self.since_enforced += 1;
        if self.segment.as_ref().is_none_or(|(open, _)| *open != name) {
            let path = self.data_dir.join(FOLDER).join(&name);
            let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
            self.segment = Some((name, file));
            self.since_enforced = ENFORCE_EVERY;
        }
        if self.since_enforced >= ENFORCE_EVERY {
            self.since_enforced = 0;
            self.enforce(now);
        }
        let line = Line { t, jobs: jobs.iter().map(|job| Point::of(job, t)).collect() };
        let mut text = serde_json::to_vec(&line).map_err(std::io::Error::other)?;
        text.push(b'\n');
        match &mut self.segment {
            Some((_, file)) => file.write_all(&text),
            None => Ok(()),
        }
    }

    /// Removes what is older than the age, then the oldest until the size holds:
    /// history segments and captured sessions alike (never the open segment, nor probes,
    /// which keep one per job by themselves).
    pub fn enforce(&self, now: SystemTime) {
        let open = self.segment.as_ref().map(|(name, _)| self.data_dir.join(FOLDER).join(name));
        let mut items = kept_items(&self.data_dir);
        items.retain(|item| Some(&item.path) != open.as_ref());
        items.sort_by_key(|item| item.modified);
        let mut total: u64 = items.iter().map(|item| item.bytes).sum::<u64>()
            + open.as_ref().and_then(|p| std::fs::metadata(p).ok()).map_or(0, |m| m.len());
        for item in items {
            let too_old = self
                .retain
                .max_age
                .is_some_and(|age| now.duration_since(item.modified).is_ok_and(|elapsed| elapsed > age));
            let too_big = self.retain.max_bytes.is_some_and(|max| total > max);
            if !too_old && !too_big {
                continue;
            }
            let removed =
                if item.path.is_dir() { std::fs::remove_dir_all(&item.path) } else { std::fs::remove_file(&item.path) };
            if removed.is_ok() {
                total = total.saturating_sub(item.bytes);
            }
        }
    }
}

/// A history segment or a captured session.
struct Item {
    path: PathBuf,
    modified: SystemTime,
    bytes: u64,
}

/// Every history segment and captured session under `data_dir`.
fn kept_items(data_dir: &Path) -> Vec<Item> {
    let mut items = Vec::new();
    let entries = |dir: &Path| std::fs::read_dir(dir).into_iter().flatten().flatten().map(|e| e.path());
    for path in entries(&data_dir.join(FOLDER)) {
        if let Ok(meta) = std::fs::metadata(&path)
            && meta.is_file()
        {
            items.push(Item { modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), bytes: meta.len(), path });
        }
    }
    for job in entries(data_dir).filter(|p| p.is_dir()) {
        let name = job.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if name == FOLDER || name == "probes" {
            continue;
        }
        for session in entries(&mlprof_formats::output::profile_root(&job)).filter(|p| p.is_dir()) {
            let files: Vec<std::fs::Metadata> = entries(&session).filter_map(|f| std::fs::metadata(f).ok()).collect();
            let bytes = files.iter().map(std::fs::Metadata::len).sum();
            let modified = files.iter().filter_map(|m| m.modified().ok()).max();
            let modified = modified.or_else(|| std::fs::metadata(&session).and_then(|m| m.modified()).ok());
            items.push(Item { path: session, modified: modified.unwrap_or(SystemTime::UNIX_EPOCH), bytes });
        }
    }
    items
}

/// Seconds since the Unix epoch.
pub fn unix_seconds(time: SystemTime) -> f64 {
    time.duration_since(SystemTime::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The segment holding time `t` (Unix seconds): `YYYY-MM-DDTHH.jsonl`, UTC.
fn segment_name(t: f64) -> String {
    let hour = chrono::DateTime::from_timestamp(t as i64, 0).unwrap_or_default();
    format!("{}.jsonl", hour.format("%Y-%m-%dT%H"))
}

/// Every job's points from `since` (Unix seconds) on, by pid (only `pid`'s where given),
/// each job's thinned to [`MAX_POINTS`] evenly spread, the last kept.
pub fn read(data_dir: &Path, since: f64, pid: Option<u32>) -> BTreeMap<u32, Vec<Point>> {
    let dir = data_dir.join(FOLDER);
    let first = segment_name(since);
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|name| name.ends_with(".jsonl") && *name >= first)
        .collect();
    names.sort();
    let mut by_job: BTreeMap<u32, Vec<Point>> = BTreeMap::new();
    for name in names {
        let path = dir.join(name);
        if std::fs::metadata(&path).map_or(true, |m| m.len() > MAX_SEGMENT) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        for line in text.lines() {
            let Ok(line) = serde_json::from_str::<Line>(line) else { continue };
            if line.t < since {
                continue;
            }
            for point in line.jobs.into_iter().filter(|p| pid.is_none_or(|pid| p.pid == pid)) {
                by_job.entry(point.pid).or_default().push(point);
            }
        }
    }
    for points in by_job.values_mut() {
        thin(points, MAX_POINTS);
    }
    by_job
}

/// Keeps at most `most` of `points`, evenly spread, the first and last among them.
fn thin(points: &mut Vec<Point>, most: usize) {
    if points.len() <= most || most < 2 {
        return;
    }
    let last = points.len() - 1;
    let keep: Vec<usize> = (0..most).map(|i| i * last / (most - 1)).collect();
    let mut index = 0;
    points.retain(|_| {
        let kept = keep.binary_search(&index).is_ok();
        index += 1;
        kept
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retain_reads_sizes_and_ages() {
        assert_eq!(
            "1GB,7d".parse::<Retain>(),
            Ok(Retain { max_bytes: Some(1_000_000_000), max_age: Some(Duration::from_secs(604_800)) })
        );
        assert_eq!("500MB".parse::<Retain>(), Ok(Retain { max_bytes: Some(500_000_000), max_age: None }));
        assert_eq!("12h".parse::<Retain>(), Ok(Retain { max_bytes: None, max_age: Some(Duration::from_secs(43_200)) }));
        assert!("7 weeks".parse::<Retain>().unwrap_err().contains("unit"));
        assert!("0GB".parse::<Retain>().unwrap_err().contains("more than nothing"));
        assert!("GB".parse::<Retain>().is_err());
        assert!("99999999999999999999999d".parse::<Retain>().unwrap_err().contains("too long"), "found by fuzzing");
    }

    #[test]
    fn ticks_are_read_back_per_job_from_a_time_on() {
        let data = tempfile::tempdir().unwrap();
        let mut history = History::open(data.path(), Retain::default()).unwrap();
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_158_400);
        let mut other = JobView::example();
        other.pid = 7;
        for second in 0..5 {
            history.record(t0 + Duration::from_secs(second), &[JobView::example(), other.clone()]).unwrap();
        }
        // An hour later: a new segment.
        history.record(t0 + Duration::from_secs(3600), &[JobView::example()]).unwrap();
        // A line cut by a crash is skipped.
        let segment = data.path().join(FOLDER).join(segment_name(unix_seconds(t0)));
        std::fs::OpenOptions::new().append(true).open(&segment).unwrap().write_all(b"{\"t\":17641").unwrap();
        let all = read(data.path(), unix_seconds(t0 + Duration::from_secs(2)), None);
        assert_eq!(all.keys().copied().collect::<Vec<_>>(), [7, 4242]);
        assert_eq!(all[&4242].len(), 4, "seconds 2, 3, 4 and the next hour");
        assert_eq!(all[&7].len(), 3);
        let point = &all[&4242][0];
        assert_eq!(
            (point.cpu, point.step_ms, point.frame.as_deref()),
            (187.3, Some(9.625), Some("step (train.py:10)"))
        );
        assert_eq!(read(data.path(), 0.0, Some(7))[&7].len(), 5);
    }

    #[test]
    fn the_oldest_goes_first_once_over_the_size_and_anything_past_the_age() {
        let data = tempfile::tempdir().unwrap();
        let session = |job: &str, name: &str, bytes: usize| {
            let dir = data.path().join(job).join("plugins/profile").join(name);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("h.xplane.pb"), vec![0u8; bytes]).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            dir
        };
        let old = session("a.py-1", "2026_01_01_00_00_00", 600);
        let newer = session("b.py-2", "2026_01_01_00_00_01", 600);
        let probe = session("probes", "2026_01_01_00_00_02", 5000);
        let retain = Retain { max_bytes: Some(1000), max_age: None };
        let _history = History::open(data.path(), retain).unwrap();
        assert!(!old.exists(), "the oldest capture went");
        assert!(newer.exists() && probe.exists(), "probes are not counted");
        let now = SystemTime::now() + Duration::from_secs(7200);
        History { data_dir: data.path().into(), retain: "1h".parse().unwrap(), segment: None, since_enforced: 0 }
            .enforce(now);
        assert!(!newer.exists(), "older than an hour");
    }

    #[test]
    fn thinning_keeps_the_ends() {
        let mut points: Vec<Point> = (0..10).map(|i| Point::of(&JobView::example(), f64::from(i))).collect();
        thin(&mut points, 4);
        assert_eq!(points.iter().map(|p| p.t).collect::<Vec<_>>(), [0.0, 3.0, 6.0, 9.0]);
    }
}
