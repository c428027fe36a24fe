//! Generated timelines of any size with the shape of real traces, for the benchmarks
//! and the property tests: device streams and host threads, nested call stacks,
//! durations spread over six orders of magnitude (log-uniform, so most events are
//! short and a few are long), bursts and idle gaps, a Zipf-like mix of many distinct
//! names, and launch → kernel flows from host threads to the streams' top-level events.
//! Threads nest up to `max_depth` levels, streams two (kernels in annotations).
//!
//! Deterministic: the same [`Synthetic`] always gives the same timeline.

use crate::builder::{EventRef, NameId, SectionKind, TimelineBuilder, TrackHandle};
use crate::error::BuildError;

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Synthetic {
    /// Total number of events.
    pub events: u64,
    /// Number of device streams (one section, `/device:GPU:0`).
    pub streams: u32,
    /// Number of host threads (one section, `/host:CPU`).
    pub threads: u32,
    /// Number of distinct event names.
    pub names: u32,
    /// Deepest nesting level.
    pub max_depth: u32,
    /// Longest top-level event, ps; durations range down to 1 ns.
    pub max_dur_ps: i64,
    /// One launch → kernel flow per this many host events (0 for none).
    pub flow_every: u32,
    /// Random seed.
    pub seed: u64,
}

impl Synthetic {
    /// A trace of `events` events on 8 streams and 24 threads with 50 000 names,
    /// stacks up to 12 deep, top-level events up to 50 ms.
    pub fn realistic(events: u64, seed: u64) -> Synthetic {
        Synthetic {
            events,
            streams: 8,
            threads: 24,
            names: 50_000,
            max_depth: 12,
            max_dur_ps: 50_000_000_000,
            flow_every: 16,
            seed,
        }
    }

    /// Adds the generated sections to `builder`.
    pub fn add_to(&self, builder: &mut TimelineBuilder) -> Result<(), BuildError> {
        let mut rng = Rng(self.seed ^ 0x5DEE_CE66_D1CE_B00C);
        let names: Vec<NameId> = (0..self.names.max(1) as usize)
            .map(|i| builder.name(&format!("{}::{}_{i}", PREFIXES[i % PREFIXES.len()], WORDS[i % WORDS.len()])))
            .collect();
        let gpu = builder.section("/device:GPU:0", SectionKind::Device);
        let streams: Vec<TrackHandle> =
            (0..self.streams).map(|s| builder.track(gpu, &format!("Stream #{}", s + 7))).collect::<Result<_, _>>()?;
        let host = builder.section("/host:CPU", SectionKind::Host);
        let threads: Vec<TrackHandle> = (0..self.threads)
            .map(|t| builder.track(host, &format!("thread {}", 1000 + t)))
            .collect::<Result<_, _>>()?;
        let tracks = (streams.len() + threads.len()).max(1) as u64;
        let budget = |i: usize| self.events / tracks + u64::from((i as u64) < self.events % tracks);
        // Host threads first, so that stream kernels can be linked to their launches.
        let mut launches: Vec<EventRef> = Vec::new();
        for (i, &track) in threads.iter().chain(&streams).enumerate() {
            builder.reserve_events(track, usize::try_from(budget(i)).unwrap_or(0));
        }
        for (i, &track) in threads.iter().enumerate() {
            let mut generator = TrackGenerator { spec: self, rng: &mut rng, names: &names, track, left: budget(i) };
            generator.fill(builder, &mut Ends::Launches(&mut launches))?;
        }
        let mut next_launch = launches.into_iter();
        for (i, &track) in streams.iter().enumerate() {
            let mut generator =
                TrackGenerator { spec: self, rng: &mut rng, names: &names, track, left: budget(threads.len() + i) };
            generator.fill(builder, &mut Ends::Kernels(&mut next_launch))?;
        }
        Ok(())
    }
}

const PREFIXES: &[&str] = &["aten", "cuda", "xla", "py", "nccl"];
const WORDS: &[&str] = &[
    "matmul",
    "conv2d",
    "add",
    "relu",
    "softmax",
    "layer_norm",
    "copy_",
    "embedding",
    "all_reduce",
    "gemm",
    "elementwise_kernel",
    "reduce_kernel",
    "fused_attention",
    "to",
    "view",
    "empty",
    "dataloader_next",
];

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Log-uniform in [lo, hi] (lo ≥ 1).
    fn log_uniform(&mut self, lo: i64, hi: i64) -> i64 {
        let lo = lo.max(1) as f64;
        let hi = (hi as f64).max(lo);
        (lo * (hi / lo).powf(self.unit())) as i64
    }
}

/// Where flow ends go while a track is generated.
enum Ends<'a> {
    /// Host thread: every `flow_every`-th event is a launch, recorded here.
    Launches(&'a mut Vec<EventRef>),
    /// Stream: each top-level kernel is linked from the next launch.
    Kernels(&'a mut std::vec::IntoIter<EventRef>),
}

/// Generates the events of one track.
struct TrackGenerator<'a> {
    spec: &'a Synthetic,
    rng: &'a mut Rng,
    names: &'a [NameId],
    track: TrackHandle,
    left: u64,
}

/// Shortest event, ps (1 ns).
const MIN_DUR_PS: i64 = 1_000;

impl TrackGenerator<'_> {
    /// Top-level events one after another, each with its nested calls, until the
    /// track's budget is spent.
    fn fill(&mut self, builder: &mut TimelineBuilder, ends: &mut Ends<'_>) -> Result<(), BuildError> {
        let mut t = self.rng.log_uniform(MIN_DUR_PS, self.spec.max_dur_ps);
        while self.left > 0 {
            // Bursts of back-to-back events, sometimes a long idle gap.
            let gap = if self.rng.unit() < 0.02 {
                self.rng.log_uniform(MIN_DUR_PS, self.spec.max_dur_ps * 4)
            } else {
                self.rng.log_uniform(MIN_DUR_PS, 50_000_000)
            };
            t = t.saturating_add(gap);
            let dur = self.rng.log_uniform(MIN_DUR_PS, self.spec.max_dur_ps);
            self.event(builder, ends, t, dur, 0)?;
            t = t.saturating_add(dur);
        }
        Ok(())
    }

    /// One event and, below it, children filling part of its time.
    fn event(
        &mut self,
        builder: &mut TimelineBuilder,
        ends: &mut Ends<'_>,
        start: i64,
        dur: i64,
        depth: u32,
    ) -> Result<(), BuildError> {
        if self.left == 0 {
            return Ok(());
        }
        self.left -= 1;
        // Zipf-like: low name indices are much more frequent.
        let pick = (self.names.len() as f64).powf(self.rng.unit()) as usize - 1;
        let name = self.names[pick.min(self.names.len() - 1)];
        let added = builder.event(self.track, start, dur, name, self.left)?;
        match ends {
            Ends::Launches(launches) => {
                if self.spec.flow_every > 0 && self.left.is_multiple_of(u64::from(self.spec.flow_every)) {
                    launches.push(added);
                }
            }
            Ends::Kernels(launches) => {
                if depth == 0
                    && let Some(launch) = launches.next()
                {
                    builder.flow(launch, added);
                }
            }
        }
        // Streams nest little (kernels inside an annotation), threads deeply.
        let max_depth = if matches!(ends, Ends::Kernels(_)) { 2 } else { self.spec.max_depth };
        if depth + 1 >= max_depth || dur < 4 * MIN_DUR_PS || self.rng.unit() < 0.3 {
            return Ok(());
        }
        let end = start.saturating_add(dur);
        let mut t = start.saturating_add(self.rng.log_uniform(1, dur / 8));
        while t < end && self.left > 0 {
            let child = self.rng.log_uniform(MIN_DUR_PS, (end - t) / 2).min(end - t);
            self.event(builder, ends, t, child, depth + 1)?;
            t = t.saturating_add(child).saturating_add(self.rng.log_uniform(1, dur / 16 + 1));
        }
        Ok(())
    }
}
