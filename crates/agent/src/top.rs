//! `mlprof top`'s table: one line per job, widest columns cut to fit the terminal (the
//! `--once` and piped output; [`crate::top_screen`] lays the same cells out on screen).

use std::fmt::Write;

use crate::{JobView, Snapshot};

/// The columns' headers.
pub const HEADERS: [&str; 11] =
    ["PID", "USER", "FRAMEWORK", "CPU%", "MEM", "GPU", "STEP", "TREND", "INPUT%", "JOB", "TOP PYTHON FRAME"];

/// Each column's width (the last takes what is left) and whether it is right-aligned.
pub const WIDTHS: [(usize, bool); 10] = [
    (7, true),
    (10, false),
    (10, false),
    (6, true),
    (8, true),
    (4, true),
    (9, true),
    (5, true),
    (6, true),
    (24, false),
];

/// One job's cells, in [`HEADERS`]' order.
pub fn cells(job: &JobView) -> [String; 11] {
    let top = job
        .top_frames
        .first()
        .map(|f| format!("{:.0}% {}", f.percent, f.frame))
        .or_else(|| job.sampling_note.clone())
        .unwrap_or_else(|| "—".to_string());
    // The last probe's steps: their mean time and input share.
    let (step, input) = match &job.probe {
        Some(probe) if probe.steps > 0 => {
            (mlprof_model::human::duration_ms(probe.step_time_ms), format!("{:.0}", probe.input_percent))
        }
        _ => ("—".to_string(), "—".to_string()),
    };
    [
        job.pid.to_string(),
        cut(&job.user, WIDTHS[1].0),
        job.framework.clone().unwrap_or_else(|| "python".to_string()),
        format!("{:.1}", job.cpu_percent),
        mlprof_model::human::bytes(job.rss_bytes as f64),
        gpu_column(job),
        step,
        job.step_trend_percent.map_or_else(|| "—".to_string(), |t| format!("{t:+.0}%")),
        input,
        cut(&job.name, WIDTHS[9].0),
        top,
    ]
}

/// `cells` laid out in their columns, one space apart.
fn row(cells: &[String]) -> String {
    let mut line = String::new();
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            line.push(' ');
        }
        match WIDTHS.get(i) {
            Some((width, true)) => {
                let _ = write!(line, "{cell:>width$}");
            }
            Some((width, false)) => {
                let _ = write!(line, "{cell:<width$}");
            }
            None => line.push_str(cell),
        }
    }
    line
}

/// The table of `snapshot`, at most `width` columns wide.
pub fn render(snapshot: &Snapshot, width: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", cut(&title(snapshot), width));
    let headers: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
    let _ = writeln!(out, "{}", cut(&row(&headers), width));
    for job in &snapshot.jobs {
        let _ = writeln!(out, "{}", cut(&row(&cells(job)), width));
    }
    out
}

/// The first line: how many jobs, what the agent costs.
pub fn title(snapshot: &Snapshot) -> String {
    format!(
        "mlprof top: {} job(s); the agent used {} of CPU in {}",
        snapshot.jobs.len(),
        mlprof_model::human::duration_ms(snapshot.agent_cpu_s * 1e3),
        mlprof_model::human::duration_ms(snapshot.uptime_s * 1e3)
    )
}

/// How busy the job's GPUs are, where NVML tells; `yes` for a job that only maps CUDA.
fn gpu_column(job: &JobView) -> String {
    match (job.gpu_busy_percent, job.uses_gpu) {
        (Some(busy), _) => format!("{busy:.0}%"),
        (None, true) => "yes".to_string(),
        (None, false) => String::new(),
    }
}

/// `text`, cut to `width` characters with an ellipsis.
pub fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut kept: String = text.chars().take(width.saturating_sub(1)).collect();
    kept.push('…');
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where `unit` ends in the job's line (its first occurrence).
    fn line_end_of(text: &str, unit: &str) -> Option<usize> {
        let line = text.lines().nth(2)?;
        line.find(unit).map(|at| line[..at + unit.len()].chars().count())
    }

    #[test]
    fn a_line_per_job_cut_to_the_width() {
        let job = JobView { user: "a-very-long-user-name".into(), ..JobView::example() };
        let snapshot =
            Snapshot { agent_pid: 1, uptime_s: 10.0, agent_cpu_s: 0.2, jobs: vec![job], ..Snapshot::default() };
        let text = render(&snapshot, 200);
        let header = text.lines().nth(1).expect("the header");
        assert_eq!(header.find("STEP").map(|at| at + 4), line_end_of(&text, "ms"), "{text}");
        let line = text.lines().nth(2).expect("the job's line");
        assert_eq!(
            line,
            "   4242 a-very-lo… pytorch     187.2 2.33 GiB  87%   9.62 ms  +40%     12 train.py                 42% step (train.py:10)"
        );
        assert!(render(&snapshot, 40).lines().all(|l| l.chars().count() <= 40));
    }
}
