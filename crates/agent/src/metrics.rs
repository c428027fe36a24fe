//! The jobs as Prometheus metrics (text exposition format 0.0.4), so a cluster's own
//! Prometheus and Grafana chart every job of every node: one gauge family per signal,
//! each job's series labelled with its pid, name, user, framework and, where present,
//! its Slurm job and Kubernetes pod.

use std::fmt::Write;

use crate::jobs::JobView;
use crate::upload::UploadView;

/// The content type Prometheus expects for the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A per-job gauge: its name, its help text, and its value for a job (`None`: the job
/// has no series in it, e.g. no GPU or no probe with steps).
type Gauge = (&'static str, &'static str, fn(&JobView) -> Option<f64>);

/// Every per-job gauge but the top frames (which have a series per frame).
const GAUGES: [Gauge; 11] = [
    ("mlprof_job_cpu_percent", "CPU use of the job's processes over the last second, percent of one core.", |j| {
        Some(j.cpu_percent)
    }),
    ("mlprof_job_resident_memory_bytes", "Resident memory of the job's processes, bytes.", |j| {
        Some(j.rss_bytes as f64)
    }),
    ("mlprof_job_threads", "Threads of the job's processes.", |j| Some(f64::from(j.threads))),
    ("mlprof_job_processes", "Processes of the job.", |j| Some(j.pids.len() as f64)),
    ("mlprof_job_uses_gpu", "1 when the job maps NVIDIA's driver library or NVML lists it on a GPU.", |j| {
        Some(f64::from(u8::from(j.uses_gpu)))
    }),
    ("mlprof_job_gpu_memory_bytes", "Device memory the job's processes hold, bytes (NVML).", |j| {
        j.gpu_memory_bytes.map(|b| b as f64)
    }),
    ("mlprof_job_gpu_busy_percent", "Mean utilization of the job's GPUs, percent (NVML).", |j| j.gpu_busy_percent),
    ("mlprof_job_step_time_seconds", "Mean step time in the job's last probe of its framework trace, seconds.", |j| {
        probed(j).map(|p| p.step_time_ms / 1000.0)
    }),
    ("mlprof_job_input_percent", "Share of step time waiting for input in the job's last probe, percent.", |j| {
        probed(j).map(|p| p.input_percent)
    }),
    ("mlprof_job_probe_steps", "Steps found in the job's last probe.", |j| probed(j).map(|p| p.steps as f64)),
    (
        "mlprof_job_step_time_trend_percent",
        "How much slower the job's last probed step time is than the median of its earlier probes, percent.",
        |j| j.step_trend_percent,
    ),
];

/// The job's last probe, when it found steps.
fn probed(job: &JobView) -> Option<&crate::probe::ProbeView> {
    job.probe.as_ref().filter(|p| p.steps > 0)
}

/// The exposition of `jobs`, the agent's own `cpu_seconds` (user plus system) and its
/// uploads (with `--upload`).
pub fn render(jobs: &[JobView], agent_cpu_seconds: f64, uploads: Option<&UploadView>) -> String {
    let mut out = String::new();
    family(&mut out, "mlprof_jobs", "gauge", "ML jobs the agent sees on this node.");
    let _ = writeln!(out, "mlprof_jobs {}", jobs.len());
    for (name, help, value) in GAUGES {
        family(&mut out, name, "gauge", help);
        for job in jobs {
            if let Some(value) = value(job) {
                let _ = writeln!(out, "{name}{{{}}} {}", labels(job), number(value));
            }
        }
    }
    let name = "mlprof_job_step_breakdown_seconds";
    family(&mut out, name, "gauge", "Mean step time by category (the overview's) in the job's last probe, seconds.");
    for job in jobs {
        for (category, ms) in probed(job).map(|p| p.breakdown_ms.as_slice()).unwrap_or_default() {
            let _ =
                writeln!(out, "{name}{{{},category=\"{}\"}} {}", labels(job), escape(category), number(ms / 1000.0));
        }
    }
    let name = "mlprof_job_captures_total";
    family(&mut out, name, "counter", "Captures of the job the agent saved (asked for, or started by a slowdown).");
    for job in jobs {
        let _ = writeln!(out, "{name}{{{}}} {}", labels(job), job.captures);
    }
    let name = "mlprof_job_top_frame_percent";
    family(&mut out, name, "gauge", "Share of the job's running Python samples in its most frequent innermost frames.");
    for job in jobs {
        for frame in &job.top_frames {
            let _ =
                writeln!(out, "{name}{{{},frame=\"{}\"}} {}", labels(job), escape(&frame.frame), number(frame.percent));
        }
    }
    family(&mut out, "mlprof_agent_cpu_seconds_total", "counter", "CPU time the agent itself used, seconds.");
    let _ = writeln!(out, "mlprof_agent_cpu_seconds_total {}", number(agent_cpu_seconds));
    if let Some(uploads) = uploads {
        let name = "mlprof_agent_uploads_total";
        family(&mut out, name, "counter", "Captures the agent uploaded to its object store, or failed to.");
        let url = escape(&uploads.url);
        let _ = writeln!(out, "{name}{{url=\"{url}\",result=\"uploaded\"}} {}", uploads.uploaded);
        let _ = writeln!(out, "{name}{{url=\"{url}\",result=\"failed\"}} {}", uploads.failed);
        let name = "mlprof_agent_uploads_queued";
        family(&mut out, name, "gauge", "Captures waiting for their upload, or being uploaded.");
        let _ = writeln!(out, "{name}{{url=\"{url}\"}} {}", uploads.queued);
    }
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A job's labels, without braces.
fn labels(job: &JobView) -> String {
    let mut labels = format!(
        "pid=\"{}\",job=\"{}\",user=\"{}\",framework=\"{}\"",
        job.pid,
        escape(&job.name),
        escape(&job.user),
        job.framework.as_deref().unwrap_or("")
    );
    if let Some(id) = &job.slurm_job_id {
        let _ = write!(labels, ",slurm_job_id=\"{}\"", escape(id));
    }
    if let Some(pod) = &job.kubernetes_pod {
        let _ = write!(labels, ",pod=\"{}\"", escape(pod));
    }
    labels
}

/// A label value as the text format escapes it: backslash, double quote, line feed.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// A sample value: finite numbers as Rust prints them (shortest round trip).
fn number(value: f64) -> String {
    if value.is_finite() { format!("{value}") } else { "NaN".to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::FrameShare;

    fn job() -> JobView {
        JobView {
            pid: 42,
            pids: vec![42, 43],
            name: "tr\"ain\\.py\n".into(),
            slurm_job_id: Some("7".into()),
            cpu_percent: 97.5,
            top_frames: vec![FrameShare { frame: "step (train.py:10)".into(), percent: 40.0 }],
            probe: None,
            ..JobView::example()
        }
    }

    #[test]
    fn every_family_is_declared_and_label_values_are_escaped() {
        let text = render(&[job()], 1.25, None);
        assert!(text.starts_with("# HELP mlprof_jobs "), "{text}");
        let labels = r#"pid="42",job="tr\"ain\\.py\n",user="ana",framework="pytorch",slurm_job_id="7""#;
        assert!(text.contains(&format!("mlprof_job_cpu_percent{{{labels}}} 97.5\n")), "{text}");
        assert!(text.contains(&format!("mlprof_job_processes{{{labels}}} 2\n")), "{text}");
        assert!(text.contains(&format!("mlprof_job_top_frame_percent{{{labels},frame=\"step (train.py:10)\"}} 40\n")));
        assert!(text.ends_with("mlprof_agent_cpu_seconds_total 1.25\n"), "{text}");
        assert!(text.contains(&format!("mlprof_job_gpu_memory_bytes{{{labels}}} 536870912\n")), "{text}");
        assert!(!text.contains("mlprof_job_step_breakdown_seconds{"), "no probe, no breakdown");
        assert!(text.contains(&format!("mlprof_job_captures_total{{{labels}}} 0\n")), "{text}");
        let probe = crate::probe::ProbeView {
            steps: 3,
            step_time_ms: 10.0,
            breakdown_ms: vec![("Input".into(), 2.5), ("Host compute".into(), 7.5)],
            ..Default::default()
        };
        let uploads = UploadView { url: "s3://b/p".into(), uploaded: 3, failed: 1, queued: 2, ..Default::default() };
        let probed = render(&[JobView { probe: Some(probe), captures: 2, ..job() }], 0.0, Some(&uploads));
        assert!(probed.contains(&format!("mlprof_job_step_breakdown_seconds{{{labels},category=\"Input\"}} 0.0025\n")));
        assert!(probed.contains(&format!("mlprof_job_captures_total{{{labels}}} 2\n")), "{probed}");
        assert!(probed.contains("mlprof_agent_uploads_total{url=\"s3://b/p\",result=\"failed\"} 1\n"), "{probed}");
        assert!(probed.contains("mlprof_agent_uploads_queued{url=\"s3://b/p\"} 2\n"), "{probed}");
        for line in text.lines().chain(probed.lines()).filter(|l| !l.starts_with('#')) {
            let name = line.split(['{', ' ']).next().unwrap_or("");
            assert!(probed.contains(&format!("# TYPE {name} ")), "{name} is not declared");
        }
    }
}
