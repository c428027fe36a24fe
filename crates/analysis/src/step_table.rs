//! The `steps` tool: every step of every host, none left out, with its start, its
//! time and its breakdown by XProf's categories, and whether the overview and the
//! input-pipeline analyzer count it (they leave out the first and last step when a
//! host has more than five, as XProf does).

use mlprof_model::time::PS_PER_MS_F64;
use serde::Serialize;

use crate::input_pipeline::{NO_STEP_MARKER, StepBreakdown};
use crate::report::{Cell, Report, Section, Table};
use crate::steps::HostSteps;

/// Every step of every host.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StepTable {
    /// How the steps were found and which breakdown they show, in words.
    pub step_source: String,
    /// Per host, in host order, its steps.
    pub hosts: Vec<HostStepRows>,
}

/// One host's steps.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HostStepRows {
    /// Host name.
    pub host: String,
    /// The steps in step-number order.
    pub steps: Vec<StepRow>,
}

/// One step.
#[derive(Clone, Debug, Default, Serialize)]
pub struct StepRow {
    /// Its number, name, time and time by category (ms).
    #[serde(flatten)]
    pub breakdown: StepBreakdown,
    /// Its start, ms after the profile's start.
    pub begin_ms: f64,
    /// Whether the overview and the input-pipeline analyzer count it.
    pub in_overview: bool,
}

/// Every step of every host: `host_steps` are the hosts' step databases with no step
/// left out, `step_source` says how they were found.
pub fn analyze(host_steps: &[HostSteps], step_source: String) -> StepTable {
    StepTable { step_source, hosts: host_steps.iter().map(host_rows).collect() }
}

fn host_rows(host: &HostSteps) -> HostStepRows {
    let counted = host.complete_steps();
    let steps = host
        .steps
        .iter()
        .enumerate()
        .map(|(index, info)| StepRow {
            breakdown: StepBreakdown::of(info),
            begin_ms: info.begin_ps as f64 / PS_PER_MS_F64,
            in_overview: counted.contains(&index),
        })
        .collect();
    HostStepRows { host: host.host.clone(), steps }
}

/// A step's time in one category, ms.
type CategoryMs = fn(&StepBreakdown) -> f64;

/// The columns of the step table after Host, Step, Name, Start and Step time, with
/// the field each shows.
const CATEGORIES: [(&str, CategoryMs); 9] = [
    ("Device compute (ms)", |s| s.device_compute_ms),
    ("Device to device (ms)", |s| s.device_to_device_ms),
    ("Device collectives (ms)", |s| s.device_collectives_ms),
    ("Host compute (ms)", |s| s.host_compute_ms),
    ("Kernel launch (ms)", |s| s.kernel_launch_ms),
    ("Input (ms)", |s| s.input_ms),
    ("Output (ms)", |s| s.output_ms),
    ("Compile (ms)", |s| s.compile_ms),
    ("Other (ms)", |s| s.other_ms),
];

impl StepTable {
    /// The steps as one table, with a note on where they come from and which ones the
    /// overview leaves out.
    pub fn report(&self) -> Report {
        let mut table = Table::new(
            ["Host", "Step", "Name", "Start (ms)", "Step time (ms)"]
                .into_iter()
                .chain(CATEGORIES.iter().map(|(name, _)| *name))
                .chain(["In overview"]),
        );
        for host in &self.hosts {
            for step in &host.steps {
                let s = &step.breakdown;
                let mut row = vec![
                    Cell::text(&host.host),
                    Cell::Int(s.profile_step),
                    Cell::text(&s.step_name),
                    Cell::num(step.begin_ms, 3),
                    Cell::num(s.step_time_ms, 3),
                ];
                row.extend(CATEGORIES.iter().map(|(_, value)| Cell::num(value(s), 3)));
                row.push(Cell::text(if step.in_overview { "yes" } else { "no" }));
                table.push(row);
            }
        }
        // The categories that take the time stay on a narrow terminal, not the first in order.
        let table =
            table.key_columns_by_total(&["Host", "Step", "Name", "Step time (ms)"], &["Start (ms)", "In overview"]);
        let count: usize = self.hosts.iter().map(|h| h.steps.len()).sum();
        let left_out = self.hosts.iter().flat_map(|h| &h.steps).filter(|s| !s.in_overview).count();
        let mut section = Section::new("Steps");
        section = if count == 0 {
            section.note(NO_STEP_MARKER)
        } else {
            section.note(format!(
                "{count} steps on {} host(s), numbered as the profile numbers them. {}",
                self.hosts.len(),
                self.step_source
            ))
        };
        if left_out > 0 {
            section = section.note(format!(
                "The overview and the input-pipeline analyzer leave out {left_out} of them (In overview: no): the first and last step of a host with more than five, which may be cut by the profiling window."
            ));
        }
        Report { tool: "steps".into(), sections: vec![section.with_table(table).main()] }
    }
}
