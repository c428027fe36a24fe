//! The `transfers` tool's result laid out for people: the ranked findings (the main
//! table), their fixes, then the evidence — blocking calls, copy bandwidth,
//! copy/compute overlap, GPU gaps.

use crate::report::{Cell, Report, Section, Table, clip};

use super::Transfers;
use super::findings::Finding;
use super::gaps::TOP_GAPS;

/// Findings shown in the report (all are in `--format json`).
const FINDINGS_SHOWN: usize = 50;
/// Findings whose fix is spelled out.
const FIXES_SHOWN: usize = 10;
/// Widest "what" / "where" cell.
const TEXT_CHARS: usize = 70;

fn ms(ps: i64) -> Cell {
    Cell::num(ps as f64 / 1e9, 3)
}

fn us(ps: i64) -> Cell {
    Cell::num(ps as f64 / 1e6, 1)
}

fn optional(value: Option<f64>, decimals: u8) -> Cell {
    value.map_or(Cell::missing(), |v| Cell::num(v, decimals))
}

impl Transfers {
    /// Sections in reading order: overview, findings (main table), fixes, blocking
    /// calls, copy bandwidth, copy/compute overlap, GPU gaps.
    pub fn report(&self) -> Report {
        let mut sections = vec![self.overview(), self.findings_section()];
        sections.extend(self.fixes_section());
        sections.push(self.blocking_section());
        sections.push(self.bandwidth_section());
        sections.push(self.overlap_section());
        sections.extend(self.gap_sections());
        Report { tool: "transfers".into(), sections }
    }

    fn several_hosts(&self) -> bool {
        self.hosts.len() > 1
    }

    fn overview(&self) -> Section {
        let mut section = Section::new("Transfers and synchronisation");
        for host in &self.hosts {
            let steps = if host.steps == 0 {
                "no step markers; totals over the profile".to_string()
            } else {
                format!("{} steps ({}); per-step values = total ÷ {}", host.steps, host.step_source, host.steps)
            };
            let devices: Vec<String> = host
                .devices
                .iter()
                .map(|d| format!("GPU {} {}", d.device, d.name.as_deref().unwrap_or("(name unknown)")))
                .collect();
            section = section.note(format!(
                "{} ({}): {steps}; {}.",
                host.host,
                host.source,
                if devices.is_empty() { "no GPU ops".to_string() } else { devices.join(", ") }
            ));
        }
        section
            .note(format!(
                "GPU gaps: idle longer than {} on every stream of a device.",
                mlprof_model::human::duration(self.gap_threshold_ps)
            ))
            .note(
                "Time lost: host time blocked for copies and synchronisations, device time for gaps, bandwidth and \
                 overlap; each host call counts once. Host and device findings can describe the same wall time, \
                 so rank them, do not add them up.",
            )
    }

    fn findings_section(&self) -> Section {
        let mut columns = vec!["#", "Kind", "What", "Where"];
        if self.several_hosts() {
            columns.push("Host");
        }
        columns.extend(["GPU", "Count", "Time lost (ms)", "Per step (ms)", "MB"]);
        // The numbers that rank the findings: the finding says what, then where it happened.
        let mut table = Table::new(columns).key_columns(&["#", "What", "Time lost (ms)", "Where", "Kind", "Count"]);
        for (i, f) in self.findings.iter().take(FINDINGS_SHOWN).enumerate() {
            let mut row = vec![
                Cell::Int(i as i64 + 1),
                Cell::text(f.kind.name()),
                Cell::text(clip(&f.what, TEXT_CHARS)),
                Cell::text(clip(&f.location.describe(), TEXT_CHARS)),
            ];
            if self.several_hosts() {
                row.push(Cell::text(&f.host));
            }
            row.extend([
                f.device.map_or(Cell::missing(), Cell::Int),
                Cell::Int(f.count as i64),
                ms(f.time_lost_ps),
                f.time_lost_per_step_ps.map_or(Cell::missing(), ms),
                // Gaps and waits move no bytes: no size rather than 0.000 MB.
                if f.bytes > 0 { Cell::num(f.bytes as f64 / 1e6, 3) } else { Cell::missing() },
            ]);
            table.push(row);
        }
        let mut section = Section::new("Findings, most time lost first");
        if self.findings.is_empty() {
            section = section.note(
                "Nothing found: no pageable or synchronous copies, no blocking calls, no GPU gaps above the threshold.",
            );
        } else if self.findings.len() > FINDINGS_SHOWN {
            section = section.note(format!(
                "The {FINDINGS_SHOWN} costliest of {} findings; all are in --format json.",
                self.findings.len()
            ));
        }
        section.with_table(table).main()
    }

    /// What to change for the costliest findings; findings with the same advice (and
    /// stack) share one paragraph (`#2, #3, #5 gpu_gap — …`). None without findings.
    fn fixes_section(&self) -> Option<Section> {
        let mut paragraphs: Vec<(Vec<usize>, &Finding, Option<String>)> = Vec::new();
        for (i, f) in self.findings.iter().take(FIXES_SHOWN).enumerate() {
            let stack = stack_line(f);
            match paragraphs.iter_mut().find(|(_, g, s)| g.kind == f.kind && g.fix == f.fix && *s == stack) {
                Some((numbers, _, _)) => numbers.push(i + 1),
                None => paragraphs.push((vec![i + 1], f, stack)),
            }
        }
        if paragraphs.is_empty() {
            return None;
        }
        let mut section = Section::new("What to change");
        for (numbers, f, stack) in paragraphs {
            let numbers: Vec<String> = numbers.iter().map(|n| format!("#{n}")).collect();
            section = section.note(format!("{} {} — {}", numbers.join(", "), f.kind.name(), f.fix));
            if let Some(line) = stack {
                section = section.note(line);
            }
        }
        Some(section)
    }

    fn blocking_section(&self) -> Section {
        let mut table = Table::new(["Host", "Call", "Calls", "Host time (ms)"]);
        for host in &self.hosts {
            for call in &host.blocking_calls {
                table.push(vec![
                    Cell::text(&host.host),
                    Cell::text(&call.name),
                    Cell::Int(call.count as i64),
                    ms(call.host_time_ps),
                ]);
            }
        }
        Section::new("Blocking host calls")
            .note("Every call that returns only when the device is done, whichever finding counts it.")
            .with_table(table)
    }

    fn bandwidth_section(&self) -> Section {
        let mut table = Table::new([
            "Host",
            "GPU",
            "Copy kind",
            "Copies",
            "MB",
            "Device time (us)",
            "Achieved (GB/s)",
            "Peak (GB/s)",
            "Of peak (%)",
            "Peak from",
        ]);
        for host in &self.hosts {
            for row in &host.copy_bandwidth {
                table.push(vec![
                    Cell::text(&host.host),
                    Cell::Int(row.device),
                    Cell::text(&row.kind),
                    Cell::Int(row.count as i64),
                    Cell::num(row.bytes as f64 / 1e6, 3),
                    us(row.duration_ps),
                    optional(row.achieved_gbps, 2),
                    optional(row.peak_gbps, 2),
                    optional(row.percent_of_peak, 1),
                    Cell::text(&row.peak_source),
                ]);
            }
        }
        Section::new("Copy bandwidth")
            .note(
                "Achieved = bytes ÷ device time, over all copies of the kind (small copies are latency-bound). \
                 Host copies are compared with the PCIe link per direction, device-to-device copies with half the \
                 memory bandwidth (each byte is read and written).",
            )
            .with_table(table)
    }

    fn overlap_section(&self) -> Section {
        let mut table =
            Table::new(["Host", "GPU", "Stream", "Copies", "Copy time (us)", "Overlapped (us)", "Overlap (%)"]);
        for host in &self.hosts {
            for row in &host.copy_compute_overlap {
                table.push(vec![
                    Cell::text(&host.host),
                    Cell::Int(row.device),
                    Cell::Int(row.stream),
                    Cell::Int(row.copies as i64),
                    us(row.copy_time_ps),
                    us(row.overlapped_ps),
                    Cell::num(row.overlap_fraction * 100.0, 1),
                ]);
            }
        }
        Section::new("Copy/compute overlap per stream")
            .note("The share of each stream's copy time during which a compute kernel runs on another stream.")
            .with_table(table)
    }

    fn gap_sections(&self) -> Vec<Section> {
        let mut by_cause = Table::new(["Host", "GPU", "Cause", "Gaps", "Total (ms)"]);
        let mut top = Table::new(["Host", "GPU", "Start (ms)", "Gap (us)", "Cause", "Doing", "Where", "Next op"]);
        for host in &self.hosts {
            for device in &host.gaps {
                for &(cause, count, total_ps) in &device.by_cause {
                    by_cause.push(vec![
                        Cell::text(&host.host),
                        Cell::Int(device.device),
                        Cell::text(cause.describe()),
                        Cell::Int(count as i64),
                        ms(total_ps),
                    ]);
                }
                for gap in &device.top {
                    top.push(vec![
                        Cell::text(&host.host),
                        Cell::Int(gap.device),
                        ms(gap.start_ps),
                        us(gap.duration_ps),
                        Cell::text(gap.cause.describe()),
                        Cell::text(clip(&gap.activity, 40)),
                        Cell::text(clip(&gap.location.describe(), 40)),
                        Cell::text(clip(&gap.next_op, 40)),
                    ]);
                }
            }
        }
        vec![
            Section::new("GPU gaps by cause")
                .note(
                    "What the thread that launched the op ending each gap was doing during the gap (the event \
                     covering most of it).",
                )
                .with_table(by_cause),
            Section::new(format!("Longest GPU gaps (up to {TOP_GAPS} per GPU)")).with_table(top),
        ]
    }
}

/// `stack: a ← b ← c` for a finding with Python frames.
fn stack_line(finding: &Finding) -> Option<String> {
    (!finding.location.stack.is_empty()).then(|| format!("   stack: {}", finding.location.stack.join(" ← ")))
}
