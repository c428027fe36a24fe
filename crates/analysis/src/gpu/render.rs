//! The `gpu` tool's result laid out for people.

use crate::report::{Cell, Report, Section, Table, clip};

use super::GpuAnalysis;
use super::launch::{LAUNCH_DELAY_CUTOFF_US, RUNTIME_CUTOFF_US};
use super::queue::MAX_QUEUE_LENGTH;

impl GpuAnalysis {
    /// Sections in reading order: temporal breakdown (the main table), idle time,
    /// kernel types, top kernels, overlap, launches, queues, memory bandwidth.
    pub fn report(&self) -> Report {
        let mut sections = vec![self.intro()];
        sections.extend(self.temporal_section());
        sections.extend(self.idle_section());
        sections.extend(self.kernel_sections());
        sections.extend(self.overlap_section());
        sections.extend(self.launch_section());
        sections.extend(self.queue_section());
        sections.extend(self.memory_bw_section());
        Report { tool: "gpu".into(), sections }
    }

    fn intro(&self) -> Section {
        let ranks: Vec<String> = self.ranks.iter().map(i64::to_string).collect();
        let mut section = Section::new("GPU analyses (Holistic Trace Analysis definitions)")
            .note(format!("Ranks: {}.", if ranks.is_empty() { "none".into() } else { ranks.join(", ") }));
        section = section.note(if self.last_step_dropped {
            "The last ProfilerStep and the GPU work it launched are left out, as HTA does by default."
        } else {
            "Fewer than two ProfilerStep#N in the traces, so every event is analysed (HTA: \"the analysis result may not be accurate\")."
        });
        section
    }

    fn temporal_section(&self) -> Option<Section> {
        let rows = self.temporal_breakdown.as_ref()?;
        let mut table = Table::new([
            "Rank",
            "Idle (us)",
            "Compute (us)",
            "Non-compute (us)",
            "Kernel time (us)",
            "Idle (%)",
            "Compute (%)",
            "Non-compute (%)",
        ]);
        let mut section = Section::new("Temporal breakdown").note(
            "Kernel time runs from the first GPU op's start to the last one's end; idle is when no op runs; \
             non-compute is communication or memory work not overlapped by a compute kernel.",
        );
        for r in rows {
            table.push(vec![
                Cell::Int(r.rank),
                Cell::num(r.idle_time_us, 0),
                Cell::num(r.compute_time_us, 0),
                Cell::num(r.non_compute_time_us, 0),
                Cell::num(r.kernel_time_us, 0),
                Cell::num(r.idle_time_pctg, 2),
                Cell::num(r.compute_time_pctg, 2),
                Cell::num(r.non_compute_time_pctg, 2),
            ]);
            if r.idle_time_pctg >= 50.0 {
                section = section.note(format!(
                    "Rank {}: the GPU is idle {:.1}% of the time; see the idle time breakdown for why.",
                    r.rank, r.idle_time_pctg
                ));
            }
        }
        if rows.is_empty() {
            section = section.note("No GPU ops in the analysed events.");
        }
        Some(section.with_table(table).main())
    }

    fn idle_section(&self) -> Option<Section> {
        let rows = self.idle_time_breakdown.as_ref()?;
        let mut table = Table::new([
            "Rank",
            "Stream",
            "Category",
            "Idle (us)",
            "Ratio",
            "Gaps",
            "Mean gap (us)",
            "Median gap (us)",
            "Max gap (us)",
        ]);
        for r in rows {
            table.push(vec![
                Cell::Int(r.rank),
                Cell::Int(r.stream),
                Cell::text(r.idle_category.name()),
                Cell::num(r.idle_time_us, 0),
                r.idle_time_ratio.map_or(Cell::missing(), |v| Cell::num(v, 2)),
                Cell::Int(r.intervals.count as i64),
                optional(r.intervals.mean, 1),
                optional(r.intervals.p50, 1),
                optional(r.intervals.max, 1),
            ]);
        }
        Some(
            Section::new("Idle time breakdown per stream")
                .note(
                    "host_wait: the launch came after the stream had drained (the CPU was late); \
                     kernel_wait: gaps under 30 µs between back-to-back ops; other: waits on events, syncs or other streams.",
                )
                .with_table(table),
        )
    }

    fn kernel_sections(&self) -> Vec<Section> {
        let Some(breakdown) = &self.kernel_breakdown else { return Vec::new() };
        let mut types = Table::new(["Kernel type", "Time (us)", "Share (%)"]);
        for t in &breakdown.kernel_types {
            types.push(vec![Cell::text(&t.kernel_type), Cell::num(t.sum_us, 0), Cell::num(t.percentage, 1)]);
        }
        let mut kernels = Table::new([
            "Rank",
            "Type",
            "Kernel",
            "Count",
            "Total (us)",
            "Mean (us)",
            "Min (us)",
            "Max (us)",
            "Std dev (us)",
        ]);
        for k in &breakdown.kernels {
            kernels.push(vec![
                Cell::Int(k.rank),
                Cell::text(k.kernel_type.name()),
                Cell::text(clip(&k.name, NAME_CHARS)),
                Cell::Int(k.count as i64),
                Cell::num(k.sum_us, 0),
                Cell::num(k.mean_us, 1),
                Cell::num(k.min_us, 1),
                Cell::num(k.max_us, 1),
                Cell::num(k.stddev_us, 1),
            ]);
        }
        vec![
            Section::new("GPU time by kernel type (all ranks)").with_table(types),
            Section::new("Kernels by total time").with_table(kernels),
        ]
    }

    fn overlap_section(&self) -> Option<Section> {
        let rows = self.comm_comp_overlap.as_ref()?;
        let mut table = Table::new(["Rank", "Communication overlapped by computation (%)"]);
        for r in rows {
            table.push(vec![Cell::Int(r.rank), r.comp_comm_overlap_pctg.map_or(Cell::missing(), |v| Cell::num(v, 2))]);
        }
        Some(
            Section::new("Communication–computation overlap")
                .note("The share of communication-kernel time during which a computation kernel runs too; — where a rank runs no communication kernel.")
                .with_table(table),
        )
    }

    fn launch_section(&self) -> Option<Section> {
        let ranks = self.cuda_kernel_launch_stats.as_ref()?;
        let mut table = Table::new([
            "Rank",
            "Launches",
            "Short GPU ops",
            "Runtime outliers",
            "Launch delay outliers",
            "Launch delay total (us)",
            "Launch delay max (us)",
        ]);
        for r in ranks {
            table.push(vec![
                Cell::Int(r.rank),
                Cell::Int(r.launches.len() as i64),
                Cell::Int(r.short_gpu_kernels as i64),
                Cell::Int(r.runtime_outliers as i64),
                Cell::Int(r.launch_delay_outliers as i64),
                Cell::num(r.launch_delay_sum_us, 0),
                optional(r.launch_delay_max_us, 0),
            ]);
        }
        Some(
            Section::new("CUDA kernel launches")
                .note(format!(
                    "Short GPU ops ran shorter than the launch call (call ≤ {RUNTIME_CUTOFF_US} µs): batching them \
                     (CUDA graphs, fusion) saves launch time. Runtime outliers: calls over {RUNTIME_CUTOFF_US} µs. \
                     Launch delay outliers: GPU start more than {LAUNCH_DELAY_CUTOFF_US} µs after the call ended."
                ))
                .with_table(table),
        )
    }

    fn queue_section(&self) -> Option<Section> {
        let rows = self.queue_length_summary.as_ref()?;
        let mut table = Table::new([
            "Rank",
            "Stream",
            "Changes",
            "Mean length",
            "Median length",
            "Max length",
            "Time at max queue (us)",
        ]);
        for r in rows {
            table.push(vec![
                Cell::Int(r.rank),
                Cell::Int(r.stream),
                Cell::Int(r.queue_length.count as i64),
                optional(r.queue_length.mean, 2),
                optional(r.queue_length.p50, 1),
                optional(r.queue_length.max, 0),
                Cell::num(r.duration_at_max_queue_length_us, 0),
            ]);
        }
        Some(
            Section::new("Launch queue length per stream")
                .note(format!(
                    "Ops launched and not yet started; at {MAX_QUEUE_LENGTH} the CPU blocks in the launch call. \
                     A queue that stays near 0 means the GPU waits for the CPU."
                ))
                .with_table(table),
        )
    }

    fn memory_bw_section(&self) -> Option<Section> {
        let rows = self.memory_bw_summary.as_ref()?;
        let mut table = Table::new(["Rank", "Memory op", "Samples", "Mean (GB/s)", "Median (GB/s)", "Max (GB/s)"]);
        for r in rows {
            table.push(vec![
                Cell::Int(r.rank),
                Cell::text(&r.name),
                Cell::Int(r.memory_bw_gbps.count as i64),
                optional(r.memory_bw_gbps.mean, 3),
                optional(r.memory_bw_gbps.p50, 3),
                optional(r.memory_bw_gbps.max, 3),
            ]);
        }
        Some(Section::new("Memory copy and set bandwidth").with_table(table))
    }
}

/// Longest kernel name shown in the table view.
const NAME_CHARS: usize = 90;

fn optional(value: Option<f64>, decimals: u8) -> Cell {
    value.map_or(Cell::missing(), |v| Cell::num(v, decimals))
}
