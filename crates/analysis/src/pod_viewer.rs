//! The pod viewer (XProf's `pod_viewer`): per step and per host, the step-time
//! breakdown by XProf's generic categories and the bottleneck category.
//!
//! The one design decision to know: it reads the combined step database without
//! XProf's first/last-step drop, as XProf's pod viewer does.
//!
//! Beyond XProf: with several hosts (PyTorch ranks, TF workers) each step names its
//! straggler — the slowest host, how far behind the fastest it was, and the category
//! in which it spent most more than the others' median — and the hosts that were
//! slowest most often are summed up (not in the `xprof-json` rendering).

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::input_pipeline;
use crate::report::{Cell, Report, Section, Table};
use crate::steps::{CombinedSteps, EventType, StepInfo};

/// XProf's generic categories with their ids, in id order.
pub const CATEGORIES: [(u32, &str); 9] = [
    (1, "Device compute"),
    (2, "Device to device"),
    (3, "Device collective communication"),
    (4, "Host compute"),
    (5, "Kernel launch"),
    (6, "Input"),
    (7, "Output"),
    (8, "Compilation"),
    (9, "All others"),
];

/// One host in one step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PodRecord {
    /// Host name.
    pub host: String,
    /// The machine the host ran on (XSpace hostname; what XProf shows as `hostName`).
    pub machine: String,
    /// XProf's core id (1 for the first host, `1000 × host index + 1` after).
    pub core_id: u32,
    /// Step time (µs).
    pub total_duration_us: f64,
    /// Time per category (µs), in [`CATEGORIES`] order.
    pub breakdown_us: [f64; 9],
    /// The largest category.
    pub bottleneck: String,
}

/// The slowest host of one step.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Straggler {
    /// Host name.
    pub host: String,
    /// Its step time minus the fastest host's (µs).
    pub behind_fastest_us: f64,
    /// Its step time minus the median host's (µs).
    pub behind_median_us: f64,
    /// The category in which it spent the most time beyond the other hosts' median.
    pub excess_category: String,
    /// That excess (µs).
    pub excess_us: f64,
}

/// One step across hosts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PodStep {
    /// Step number: the host's own (group id) with one host, 0, 1, … in the
    /// intersection of several (as XProf), PyTorch's N of `ProfilerStep#N`.
    pub step_num: i64,
    /// The step's number as the profile numbers it (`train 5` → 5; the first host's):
    /// what the report shows, as every mlprof output does.
    pub profile_step: i64,
    /// Per host.
    pub hosts: Vec<PodRecord>,
    /// The slowest host, when the step has more than one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub straggler: Option<Straggler>,
}

/// How often a host was the straggler.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StragglerCount {
    /// Host name.
    pub host: String,
    /// Steps in which it was the slowest.
    pub steps: usize,
    /// Average time behind the fastest host in those steps (µs).
    pub mean_behind_fastest_us: f64,
}

/// The pod viewer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PodViewer {
    /// The run environment's device type: `CPU`, or the GPU model (`Nvidia GPU (Hopper)`).
    pub device_type: String,
    /// Steps.
    pub steps: Vec<PodStep>,
    /// XProf's step diagnostics (no step marker, empty intersection).
    pub warnings: Vec<String>,
    /// Hosts that were the straggler of some step, most often first (several hosts only).
    pub stragglers: Vec<StragglerCount>,
}

/// Median of `values` (the lower middle one for an even count); 0 when empty.
fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len().saturating_sub(1) / 2).copied().unwrap_or(0.0)
}

/// The straggler among `records` (two or more hosts).
fn straggler(records: &[PodRecord]) -> Option<Straggler> {
    if records.len() < 2 {
        return None;
    }
    let slowest = records.iter().max_by(|a, b| a.total_duration_us.total_cmp(&b.total_duration_us))?;
    let fastest = records.iter().map(|r| r.total_duration_us).fold(f64::INFINITY, f64::min);
    let median_step = median(records.iter().map(|r| r.total_duration_us).collect());
    let others: Vec<&PodRecord> = records.iter().filter(|r| !std::ptr::eq(*r, slowest)).collect();
    let mut excess = (0usize, f64::NEG_INFINITY);
    for category in 0..CATEGORIES.len() {
        let typical = median(others.iter().map(|r| r.breakdown_us[category]).collect());
        let extra = slowest.breakdown_us[category] - typical;
        if extra > excess.1 {
            excess = (category, extra);
        }
    }
    Some(Straggler {
        host: slowest.host.clone(),
        behind_fastest_us: slowest.total_duration_us - fastest,
        behind_median_us: slowest.total_duration_us - median_step,
        excess_category: CATEGORIES[excess.0].1.to_string(),
        excess_us: excess.1.max(0.0),
    })
}

/// Straggler counts per host over `steps`, most often first.
fn straggler_counts(steps: &[PodStep]) -> Vec<StragglerCount> {
    let mut counts: Vec<StragglerCount> = Vec::new();
    for straggler in steps.iter().filter_map(|s| s.straggler.as_ref()) {
        match counts.iter_mut().find(|c| c.host == straggler.host) {
            Some(count) => {
                count.mean_behind_fastest_us += straggler.behind_fastest_us;
                count.steps += 1;
            }
            None => counts.push(StragglerCount {
                host: straggler.host.clone(),
                steps: 1,
                mean_behind_fastest_us: straggler.behind_fastest_us,
            }),
        }
    }
    for count in &mut counts {
        count.mean_behind_fastest_us /= count.steps as f64;
    }
    counts.sort_by(|a, b| b.steps.cmp(&a.steps).then(a.host.cmp(&b.host)));
    counts
}

fn breakdown(info: &StepInfo) -> [f64; 9] {
    let us = |kinds: &[EventType]| kinds.iter().map(|&k| info.ps(k) as f64 / 1e6).sum::<f64>();
    [
        us(&[EventType::DeviceCompute16, EventType::DeviceCompute32]),
        us(&[EventType::DeviceToDevice, EventType::DeviceWaitDevice]),
        us(&[EventType::DeviceCollectives]),
        us(&[EventType::HostCompute]),
        us(&[EventType::HostPrepare]),
        us(&[EventType::HostWaitInput, EventType::HostToDevice, EventType::DeviceWaitHost]),
        us(&[EventType::DeviceToHost]),
        us(&[EventType::HostCompile]),
        us(&[EventType::UnknownTime]),
    ]
}

/// Builds the pod viewer from combined (not dropped) steps; `machines[i]` is the
/// machine host `i` of `steps.hosts` ran on; `device_type` is the run environment's
/// (`CPU`, `Nvidia GPU (Hopper)`).
pub fn analyze(steps: &CombinedSteps, machines: &[String], device_type: &str) -> PodViewer {
    let mut viewer = PodViewer { device_type: device_type.into(), ..PodViewer::default() };
    if steps.steps.is_empty() {
        viewer.warnings.push(input_pipeline::step_warning(steps.empty_intersection).to_string());
    }
    for per_host in &steps.steps {
        let Some((_, first)) = per_host.first() else { continue };
        let hosts = per_host
            .iter()
            .map(|(index, info)| {
                let breakdown_us = breakdown(info);
                let mut best = 0;
                for (i, value) in breakdown_us.iter().enumerate() {
                    if *value > breakdown_us[best] {
                        best = i;
                    }
                }
                PodRecord {
                    host: steps.hosts.get(*index).cloned().unwrap_or_default(),
                    machine: machines.get(*index).or(steps.hosts.get(*index)).cloned().unwrap_or_default(),
                    core_id: (*index as u32) * 1000 + 1,
                    total_duration_us: info.duration_ps as f64 / 1e6,
                    breakdown_us,
                    bottleneck: CATEGORIES[best].1.to_string(),
                }
            })
            .collect::<Vec<_>>();
        let straggler = straggler(&hosts);
        viewer.steps.push(PodStep { step_num: first.step_num, profile_step: first.profile_step, hosts, straggler });
    }
    viewer.stragglers = straggler_counts(&viewer.steps);
    viewer
}

impl PodViewer {
    /// XProf's `PodViewerDatabase` proto3 JSON.
    pub fn to_xprof_json(&self) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|step| {
                let mut per_core = Map::new();
                for record in &step.hosts {
                    let mut breakdown = Map::new();
                    for ((id, _), value) in CATEGORIES.iter().zip(record.breakdown_us) {
                        breakdown.insert(id.to_string(), json!(value));
                    }
                    per_core.insert(
                        record.core_id.to_string(),
                        json!({
                            "hostName": record.machine,
                            "chipId": 0,
                            "nodeId": 0,
                            "stepNum": step.step_num,
                            "totalDurationUs": record.total_duration_us,
                            "bottleneck": record.bottleneck,
                            "stepBreakdownUs": breakdown,
                        }),
                    );
                }
                json!({"stepNum": step.step_num, "podStatsPerCore": per_core, "channelDb": [], "coreIdToReplicaIdMap": {}, "allReduceOpDb": []})
            })
            .collect();
        let mut out = Map::new();
        out.insert("podStatsSequence".into(), json!({ "podStatsMap": steps }));
        out.insert("diagnostics".into(), json!({"info": [], "warnings": self.warnings, "errors": []}));
        out.insert(
            "stepBreakdownEvents".into(),
            Value::Array(CATEGORIES.iter().map(|(id, name)| json!({"id": id, "name": name})).collect()),
        );
        out.insert("deviceType".into(), json!(self.device_type));
        Value::Object(out)
    }

    /// The pod viewer laid out for people: one row per step and host.
    pub fn report(&self) -> Report {
        let mut columns = vec!["Step".to_string(), "Host".to_string(), "Step time (us)".to_string()];
        columns.extend(CATEGORIES.iter().map(|(_, name)| format!("{name} (us)")));
        columns.push("Bottleneck".into());
        let mut table = Table::new(columns);
        for step in &self.steps {
            for record in &step.hosts {
                let mut row = vec![
                    Cell::Int(step.profile_step),
                    Cell::text(&record.host),
                    Cell::num(record.total_duration_us, 1),
                ];
                row.extend(record.breakdown_us.iter().map(|v| Cell::num(*v, 1)));
                row.push(Cell::text(&record.bottleneck));
                table.push(row);
            }
        }
        // The categories that take the time stay on a narrow terminal, not the first in order.
        let table = table.key_columns_by_total(&["Step", "Host", "Step time (us)", "Bottleneck"], &[]);
        let note = if self.steps.is_empty() {
            self.warnings.join(" ")
        } else {
            format!("{} steps on {} device type.", self.steps.len(), self.device_type)
        };
        let mut sections = vec![Section::new("Pod viewer").note(note).with_table(table).main()];
        if !self.stragglers.is_empty() {
            let mut section = Section::new("Stragglers");
            for count in &self.stragglers {
                section = section.note(format!(
                    "{} was the slowest host in {} of {} steps, on average {} behind the fastest.",
                    count.host,
                    count.steps,
                    self.steps.len(),
                    mlprof_model::human::duration_us(count.mean_behind_fastest_us)
                ));
            }
            let mut table = Table::new([
                "Step",
                "Slowest host",
                "Behind fastest (us)",
                "Behind median (us)",
                "Most excess in",
                "Excess (us)",
            ]);
            for step in &self.steps {
                let Some(s) = &step.straggler else { continue };
                table.push(vec![
                    Cell::Int(step.profile_step),
                    Cell::text(&s.host),
                    Cell::num(s.behind_fastest_us, 1),
                    Cell::num(s.behind_median_us, 1),
                    Cell::text(&s.excess_category),
                    Cell::num(s.excess_us, 1),
                ]);
            }
            sections.push(section.with_table(table));
        }
        Report { tool: "pod_viewer".into(), sections }
    }
}
