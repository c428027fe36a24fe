//! The `hta-csv` rendering: one CSV per analysis with HTA's column names, so
//! scripts written against HTA's DataFrames (`pd.read_csv`) keep working.
//!
//! Differences from `DataFrame.to_csv()` of HTA's results: no pandas index column,
//! a `rank` column where HTA returns one DataFrame per rank, and the two-level
//! `describe()` headers of the queue-length and bandwidth summaries flattened to
//! `rank,stream|name,count,mean,std,min,25%,50%,75%,max`. Numbers are written as
//! Python writes floats (`596037.0`, `4.8e-05`); missing values are empty.

use super::GpuAnalysis;
use super::describe::Describe;
use super::idle::IdleTime;
use super::kernel_breakdown::KernelBreakdown;
use super::launch::RankLaunchStats;
use super::memory_bw::MemoryBandwidth;
use super::overlap::CommCompOverlap;
use super::queue::StreamQueue;
use super::temporal::TemporalBreakdown;

/// One CSV file: its name and content.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsvFile {
    /// File name, e.g. `temporal_breakdown.csv`.
    pub name: String,
    /// The CSV text, header first, `\n` line ends.
    pub content: String,
}

/// The CSV files of every analysis in `analysis`.
pub fn files(analysis: &GpuAnalysis) -> Vec<CsvFile> {
    let mut files = Vec::new();
    if let Some(rows) = &analysis.temporal_breakdown {
        files.push(temporal_breakdown(rows));
    }
    if let Some(rows) = &analysis.idle_time_breakdown {
        files.extend(idle_time_breakdown(rows));
    }
    if let Some(breakdown) = &analysis.kernel_breakdown {
        files.extend(kernel_breakdown(breakdown));
    }
    if let Some(rows) = &analysis.comm_comp_overlap {
        files.push(comm_comp_overlap(rows));
    }
    if let Some(ranks) = &analysis.cuda_kernel_launch_stats {
        files.push(cuda_kernel_launch_stats(ranks));
    }
    if let Some(rows) = &analysis.queue_length_summary {
        files.extend(queue_length_summary(rows));
    }
    if let Some(rows) = &analysis.memory_bw_summary {
        files.push(memory_bw_summary(rows));
    }
    files
}

/// `temporal_breakdown.csv`: idle, compute and non-compute time per rank.
fn temporal_breakdown(rows: &[TemporalBreakdown]) -> CsvFile {
    let mut csv = Csv::new(&[
        "rank",
        "idle_time(us)",
        "compute_time(us)",
        "non_compute_time(us)",
        "kernel_time(us)",
        "idle_time_pctg",
        "compute_time_pctg",
        "non_compute_time_pctg",
    ]);
    for r in rows {
        csv.row(&[
            r.rank.to_string(),
            py_float(r.idle_time_us),
            py_float(r.compute_time_us),
            py_float(r.non_compute_time_us),
            py_float(r.kernel_time_us),
            py_float(r.idle_time_pctg),
            py_float(r.compute_time_pctg),
            py_float(r.non_compute_time_pctg),
        ]);
    }
    csv.file("temporal_breakdown.csv")
}

/// `idle_time_breakdown.csv` and `idle_time_interval_stats.csv`: idle time per rank,
/// stream and category, and the `describe()` of each category's intervals.
fn idle_time_breakdown(rows: &[IdleTime]) -> [CsvFile; 2] {
    let mut csv = Csv::new(&["rank", "stream", "idle_category", "idle_time", "idle_time_ratio"]);
    let mut stats =
        Csv::new(&["idle_category", "rank", "stream", "count", "mean", "std", "min", "25%", "50%", "75%", "max"]);
    for r in rows {
        let category = r.idle_category.name().to_string();
        csv.row(&[
            r.rank.to_string(),
            r.stream.to_string(),
            category.clone(),
            py_float(r.idle_time_us),
            opt(r.idle_time_ratio),
        ]);
        let mut row = vec![category, r.rank.to_string(), r.stream.to_string()];
        row.extend(describe_cells(&r.intervals, 2));
        stats.row(&row);
    }
    [csv.file("idle_time_breakdown.csv"), stats.file("idle_time_interval_stats.csv")]
}

/// `kernel_breakdown.csv` and `kernel_type_breakdown.csv`: time per kernel and per
/// kernel type.
fn kernel_breakdown(breakdown: &KernelBreakdown) -> [CsvFile; 2] {
    let mut csv = Csv::new(&["name", "sum (us)", "max (us)", "min (us)", "stddev", "mean (us)", "kernel_type", "rank"]);
    for k in &breakdown.hta_kernels {
        csv.row(&[
            k.name.clone(),
            py_float(k.sum_us),
            py_float(k.max_us),
            py_float(k.min_us),
            py_float(k.stddev_us),
            py_float(k.mean_us),
            k.kernel_type.name().to_string(),
            k.rank.to_string(),
        ]);
    }
    let mut types = Csv::new(&["kernel_type", "sum", "percentage"]);
    for t in &breakdown.kernel_types {
        types.row(&[t.kernel_type.clone(), format!("{}", t.sum_us), py_float(t.percentage)]);
    }
    [csv.file("kernel_breakdown.csv"), types.file("kernel_type_breakdown.csv")]
}

/// `comm_comp_overlap.csv`: the share of communication overlapped by compute per rank.
fn comm_comp_overlap(rows: &[CommCompOverlap]) -> CsvFile {
    let mut csv = Csv::new(&["rank", "comp_comm_overlap_pctg"]);
    for r in rows {
        csv.row(&[r.rank.to_string(), opt(r.comp_comm_overlap_pctg)]);
    }
    csv.file("comm_comp_overlap.csv")
}

/// `cuda_kernel_launch_stats.csv`: one row per kernel launch of every rank.
fn cuda_kernel_launch_stats(ranks: &[RankLaunchStats]) -> CsvFile {
    let mut csv = Csv::new(&["rank", "correlation", "cpu_duration", "gpu_duration", "launch_delay"]);
    for rank in ranks {
        for l in &rank.launches {
            csv.row(&[
                rank.rank.to_string(),
                l.correlation.to_string(),
                py_float(l.cpu_duration_us),
                py_float(l.gpu_duration_us),
                py_float(l.launch_delay_us),
            ]);
        }
    }
    csv.file("cuda_kernel_launch_stats.csv")
}

/// `queue_length_summary.csv` and `time_spent_blocked_on_full_queue.csv`: the
/// `describe()` of each stream's queue length, and the streams that reached a full
/// queue.
fn queue_length_summary(rows: &[StreamQueue]) -> [CsvFile; 2] {
    let mut csv = Csv::new(&["rank", "stream", "count", "mean", "std", "min", "25%", "50%", "75%", "max"]);
    let mut blocked =
        Csv::new(&["rank", "stream", "duration_at_max_queue_length", "relative_duration_at_max_queue_length"]);
    for r in rows {
        let mut row = vec![r.rank.to_string(), r.stream.to_string()];
        row.extend(describe_cells(&r.queue_length, 17));
        csv.row(&row);
        if r.duration_at_max_queue_length_us > 0.0 {
            blocked.row(&[
                r.rank.to_string(),
                r.stream.to_string(),
                py_float(r.duration_at_max_queue_length_us),
                py_float(r.relative_duration_at_max_queue_length),
            ]);
        }
    }
    [csv.file("queue_length_summary.csv"), blocked.file("time_spent_blocked_on_full_queue.csv")]
}

/// `memory_bw_summary.csv`: the `describe()` of each memory-bandwidth counter.
fn memory_bw_summary(rows: &[MemoryBandwidth]) -> CsvFile {
    let mut csv = Csv::new(&["rank", "name", "count", "mean", "std", "min", "25%", "50%", "75%", "max"]);
    for r in rows {
        let mut row = vec![r.rank.to_string(), r.name.clone()];
        row.extend(describe_cells(&r.memory_bw_gbps, 17));
        csv.row(&row);
    }
    csv.file("memory_bw_summary.csv")
}

/// `count,mean,std,min,25%,50%,75%,max`, values rounded to `decimals` places.
fn describe_cells(d: &Describe, decimals: i32) -> Vec<String> {
    let round = |v: Option<f64>| opt(v.map(|v| if decimals >= 17 { v } else { super::round_to(v, decimals) }));
    vec![
        py_float(d.count as f64),
        round(d.mean),
        round(d.std),
        round(d.min),
        round(d.p25),
        round(d.p50),
        round(d.p75),
        round(d.max),
    ]
}

fn opt(value: Option<f64>) -> String {
    value.filter(|v| v.is_finite()).map(py_float).unwrap_or_default()
}

/// `value` as Python's `repr(float)`: shortest round-trip digits, a `.0` on whole
/// numbers, exponent notation below 1e-4 and from 1e16.
pub fn py_float(value: f64) -> String {
    if value.is_nan() {
        return String::new();
    }
    let magnitude = value.abs();
    if magnitude != 0.0 && !(1e-4..1e16).contains(&magnitude) {
        let text = format!("{value:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        let sign = if exponent < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exponent.abs());
    }
    if value.fract() == 0.0 { format!("{value:.1}") } else { format!("{value}") }
}

/// A CSV being written.
struct Csv {
    text: String,
}

impl Csv {
    fn new(columns: &[&str]) -> Csv {
        let mut csv = Csv { text: String::new() };
        csv.row(&columns.iter().map(|c| c.to_string()).collect::<Vec<_>>());
        csv
    }

    fn row(&mut self, cells: &[String]) {
        crate::report::write_csv_row(&mut self.text, cells.iter().map(String::as_str));
    }

    fn file(self, name: &str) -> CsvFile {
        CsvFile { name: name.to_string(), content: self.text }
    }
}

#[cfg(test)]
mod tests {
    use super::py_float;

    #[test]
    fn floats_print_as_python_does() {
        assert_eq!(py_float(596037.0), "596037.0");
        assert_eq!(py_float(0.45), "0.45");
        assert_eq!(py_float(0.00048828125), "0.00048828125");
        assert_eq!(py_float(4.8e-5), "4.8e-05");
        assert_eq!(py_float(1e16), "1e+16");
        assert_eq!(py_float(-0.0), "-0.0");
        assert_eq!(py_float(f64::NAN), "");
    }
}
