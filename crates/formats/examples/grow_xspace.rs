//! Makes a large XSpace for benchmarks from a real one, as `scripts/gen_kineto_trace.py`
//! does for Kineto traces: the profile is repeated in time, as if the capture had run
//! that many times longer. Not a fixture generator: the output only feeds `scripts/bench`.
//!
//! ```text
//! cargo run --release -p mlprof-formats --example grow_xspace -- REAL.xplane.pb OUT.xplane.pb SIZE_MB
//! ```
//!
//! Copy `c` (0, 1, …) of every line's events is appended to the same line, with:
//! - each offset `+ c × period`, where period = the span of the plane's events + 1 ms,
//!   so copies never overlap on a line and each line stays in time order;
//! - the values of the id stats that link events (`_p`, `_c`, `id`, `parent_id`,
//!   `element_id`, `step_id`, `group_id`, `correlation_id`) XORed with `c ×` a 64-bit
//!   odd constant, so producers and consumers stay paired within their copy and no id
//!   links two copies;
//! - `step_num` `+ c × (largest + 1)`, so step numbers keep counting up. `iter_num` is
//!   kept: it numbers a loop's iterations within one step (`step_id`), and a changed one
//!   would turn each step into a loop of several.
//!
//! Planes, lines, metadata and plane stats are kept; the Task Environment's
//! `profile_stop_time` moves to the end of the last copy. The number of copies is SIZE_MB
//! (10^6 bytes) over the input's size, rounded; scrambled ids take longer varints, so
//! the output is somewhat larger than that.

use std::collections::HashMap;
use std::time::Instant;

use mlprof_formats::xspace::{encode_xspace, read_xspace};
use mlprof_model::{Line, Plane, Stat, StatValue, names};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Stats whose values are ids pairing events; scrambled per copy.
const LINKING_IDS: [&str; 8] = ["_p", "_c", "id", "parent_id", "element_id", "step_id", "group_id", "correlation_id"];

/// Stats whose values count steps; shifted per copy.
const COUNTERS: [&str; 1] = ["step_num"];

/// Odd 64-bit constant (2^64 / golden ratio): `c ×` it differs for every copy.
const SCRAMBLE: u64 = 0x9E37_79B9_7F4A_7C15;

/// Picoseconds between the end of one copy and the start of the next.
const GAP_PS: i64 = 1_000_000_000;

/// What a copy does to one stat key's values.
#[derive(Clone, Copy)]
enum Rewrite {
    Keep,
    Scramble,
    /// Added to the value once per copy: the largest value seen + 1.
    Count(i64),
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, size_mb] = args.as_slice() else {
        return Err("usage: grow_xspace REAL.xplane.pb OUT.xplane.pb SIZE_MB".into());
    };
    let target_bytes = size_mb.parse::<f64>()? * 1e6;
    let started = Instant::now();
    let bytes = std::fs::read(input)?;
    let copies = ((target_bytes / bytes.len() as f64).round() as i64).max(1);
    let mut host = read_xspace(&bytes, input, "grown")?;
    drop(bytes);
    let mut stretch_ps = 0;
    for plane in &mut host.planes {
        stretch_ps = stretch_ps.max(grow_plane(plane, copies)?);
    }
    move_profile_stop(&mut host.planes, stretch_ps);
    let encoded = encode_xspace(&host);
    std::fs::write(output, &encoded)?;
    let events: usize = host.planes.iter().map(Plane::event_count).sum();
    println!(
        "{output}: {copies} copies, {events} events, {:.1} MB, {:.1} s",
        encoded.len() as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Repeats every line's events `copies` times in `plane`; returns how far the plane's
/// events now reach past the original end, in picoseconds.
fn grow_plane(plane: &mut Plane, copies: i64) -> Result<i64> {
    let Some((first, last)) = plane.span_ps() else { return Ok(0) };
    let period = last - first + GAP_PS;
    let rewrites = rewrites_of(plane);
    for line in &mut plane.lines {
        *line = grown_line(line, copies, period, &rewrites)?;
    }
    Ok(period * (copies - 1))
}

/// How each stat key of `plane` is rewritten, by dense key.
fn rewrites_of(plane: &Plane) -> Vec<Rewrite> {
    let mut largest: HashMap<u32, i64> = HashMap::new();
    for line in &plane.lines {
        for stat in line.stats.stats() {
            let value = stat.value();
            if let StatValue::Int(v) = value {
                let entry = largest.entry(stat.key()).or_insert(0);
                *entry = (*entry).max(v);
            }
        }
    }
    let rewrite = |key: usize, name: &str| {
        if LINKING_IDS.contains(&name) {
            Rewrite::Scramble
        } else if COUNTERS.contains(&name) {
            Rewrite::Count(largest.get(&(key as u32)).copied().unwrap_or(0) + 1)
        } else {
            Rewrite::Keep
        }
    };
    plane.stat_metadata.iter().enumerate().map(|(key, m)| rewrite(key, &m.name)).collect()
}

/// `line` with its events repeated `copies` times, `period` picoseconds apart.
fn grown_line(line: &Line, copies: i64, period: i64, rewrites: &[Rewrite]) -> Result<Line> {
    let mut grown = Line {
        id: line.id,
        display_id: line.display_id,
        name: line.name.clone(),
        display_name: line.display_name.clone(),
        timestamp_ns: line.timestamp_ns,
        duration_ps: line.duration_ps,
        chrome_track: line.chrome_track.clone(),
        ..Line::default()
    };
    let events = line.len() * copies as usize;
    grown.events.reserve(events);
    grown.stats.reserve(line.stats.len() * copies as usize, 0);
    for copy in 0..copies {
        for event in line.iter() {
            for stat in event.stats() {
                let value = rewritten(stat.value(), rewrites.get(stat.key() as usize), copy);
                grown
                    .stats
                    .push_copy(&line.stats, &Stat::new(stat.key(), value), stat.key())
                    .map_err(|_| format!("line {}: more than 4 GiB of strings", line.name))?;
            }
            let offset = if event.num_occurrences().is_some() { 0 } else { event.offset_ps() + copy * period };
            if let Some(n) = event.num_occurrences() {
                grown.events.occurrences.push((grown.len() as u32, n));
            }
            grown.push_event(event.metadata_index(), offset, event.duration_ps());
        }
    }
    Ok(grown)
}

/// `value` as copy `copy` holds it.
fn rewritten(value: StatValue, rewrite: Option<&Rewrite>, copy: i64) -> StatValue {
    let mask = (copy as u64).wrapping_mul(SCRAMBLE);
    match (rewrite, value) {
        (Some(Rewrite::Scramble), StatValue::Int(v)) => StatValue::Int(((v as u64) ^ mask) as i64),
        (Some(Rewrite::Scramble), StatValue::Uint(v)) => StatValue::Uint(v ^ mask),
        (Some(Rewrite::Count(step)), StatValue::Int(v)) => StatValue::Int(v + copy * step),
        _ => value,
    }
}

/// Moves the Task Environment's `profile_stop_time` (ns) `stretch_ps` later.
fn move_profile_stop(planes: &mut [Plane], stretch_ps: i64) {
    for plane in planes.iter_mut().filter(|p| p.name == names::TASK_ENVIRONMENT_PLANE) {
        let Some(key) = plane.find_stat_key(names::PROFILE_STOP_TIME) else { continue };
        let range = plane.stats.start as usize..plane.stats.end as usize;
        let Some(own) = plane.metadata_stats.stats_mut().get_mut(range) else { continue };
        for stat in own.iter_mut().filter(|s| s.key() == key) {
            if let StatValue::Int(ns) = stat.value() {
                stat.set_value(StatValue::Int(ns + stretch_ps / 1000));
            }
        }
    }
}
