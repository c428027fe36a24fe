//! What mlprof itself cost the machine over a run or an attach: its own CPU time (every
//! thread of mlprof, never the job's: `getrusage(RUSAGE_SELF)` leaves children out) and
//! its peak memory, said in one line at the end so that the cost of profiling is never a
//! guess.

use std::time::Instant;

/// mlprof's own resource use since a moment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OwnUse {
    /// Wall time since that moment, s.
    pub wall_s: f64,
    /// CPU time of all of mlprof's threads (user and system) since the process started, s.
    pub cpu_s: f64,
    /// The most memory mlprof held at once, bytes.
    pub peak_rss_bytes: u64,
}

impl OwnUse {
    /// Reads mlprof's use now; `since` is when the run or attach began.
    pub fn now(since: Instant) -> Option<OwnUse> {
        // SAFETY: getrusage fills the zeroed struct it is given and reads nothing else.
        let usage = unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            (libc::getrusage(libc::RUSAGE_SELF, &mut usage) == 0).then_some(usage)
        }?;
        let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Some(OwnUse {
            wall_s: since.elapsed().as_secs_f64(),
            cpu_s: seconds(usage.ru_utime) + seconds(usage.ru_stime),
            // ru_maxrss is in KiB on Linux.
            peak_rss_bytes: u64::try_from(usage.ru_maxrss).unwrap_or(0) * 1024,
        })
    }

    /// The share of one core mlprof kept busy, percent.
    pub fn core_percent(&self) -> f64 {
        if self.wall_s > 0.0 { 100.0 * self.cpu_s / self.wall_s } else { 0.0 }
    }
}

impl std::fmt::Display for OwnUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "own cost: {} of CPU over {} ({} of one core), at most {} of memory",
            mlprof_model::human::duration_ms(self.cpu_s * 1e3),
            mlprof_model::human::duration_ms(self.wall_s * 1e3),
            mlprof_model::human::percent(self.core_percent()),
            mlprof_model::human::bytes(self.peak_rss_bytes as f64)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_work_shows_as_cpu_and_the_line_says_it() {
        // Spin until the process has used 0.1 s more CPU: on a loaded machine 200 ms of
        // wall time gave only 0.08 s of it (failed beside four busy processes). Ten
        // seconds of spinning without that much CPU time means the count is wrong.
        let since = Instant::now();
        let before = OwnUse::now(since).expect("getrusage");
        let mut x = 0u64;
        let mut after = before;
        while after.cpu_s - before.cpu_s <= 0.1 && since.elapsed().as_secs() < 10 {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
            after = OwnUse::now(since).expect("getrusage");
        }
        assert!(after.cpu_s - before.cpu_s > 0.1, "{before:?} {after:?}");
        assert!(after.peak_rss_bytes > 1_000_000, "{after:?}");
        let line = OwnUse { wall_s: 20.0, cpu_s: 3.0, peak_rss_bytes: 48_000_000 }.to_string();
        assert_eq!(line, "own cost: 3 s of CPU over 20 s (15.0% of one core), at most 45.8 MiB of memory");
    }
}
