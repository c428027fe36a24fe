//! A node's numbers: what its own op records add up to under the chosen accounting
//! (op types) and step selection, and how totals add children up.
//!
//! The one design decision to know: with `--step -1` each node is averaged over the
//! steps it ran in, as tfprof's `TFGraphNode` does (sums per step, then an integer
//! average over those steps); a node's peak bytes are the largest of its runs' peaks
//! within a step, its other numbers sums. Static nodes (XLA parameters) belong to
//! every step and only carry `params`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::options::{Regexes, StepSelection};
use super::profile::{OpRecord, Profile};

/// The numbers of a node (its own, or a total over its subtree).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NodeStats {
    /// Runs.
    pub occurrence: i64,
    /// Execution time (CPU + accelerator), picoseconds.
    pub micros_ps: i64,
    /// Accelerator time, picoseconds.
    pub accelerator_ps: i64,
    /// CPU time, picoseconds.
    pub cpu_ps: i64,
    /// Requested bytes.
    pub requested_bytes: i64,
    /// Peak bytes.
    pub peak_bytes: i64,
    /// Residual bytes.
    pub residual_bytes: i64,
    /// Output bytes.
    pub output_bytes: i64,
    /// Parameters.
    pub params: i64,
    /// Floating-point operations.
    pub float_ops: i64,
}

impl NodeStats {
    /// Adds `other` to these numbers (totals: every field sums, peaks included, as
    /// tfprof's `AggregateTotalStats`).
    pub fn add(&mut self, other: &NodeStats) {
        self.occurrence = self.occurrence.saturating_add(other.occurrence);
        self.micros_ps = self.micros_ps.saturating_add(other.micros_ps);
        self.accelerator_ps = self.accelerator_ps.saturating_add(other.accelerator_ps);
        self.cpu_ps = self.cpu_ps.saturating_add(other.cpu_ps);
        self.requested_bytes = self.requested_bytes.saturating_add(other.requested_bytes);
        self.peak_bytes = self.peak_bytes.saturating_add(other.peak_bytes);
        self.residual_bytes = self.residual_bytes.saturating_add(other.residual_bytes);
        self.output_bytes = self.output_bytes.saturating_add(other.output_bytes);
        self.params = self.params.saturating_add(other.params);
        self.float_ops = self.float_ops.saturating_add(other.float_ops);
    }

    /// Adds one record of a node (peak: the largest run's).
    fn add_record(&mut self, record: &OpRecord) {
        let runs = i64::try_from(record.runs).unwrap_or(i64::MAX);
        self.occurrence = self.occurrence.saturating_add(runs);
        self.cpu_ps = self.cpu_ps.saturating_add(record.cpu_ps);
        self.accelerator_ps = self.accelerator_ps.saturating_add(record.accelerator_ps);
        self.micros_ps = self.cpu_ps.saturating_add(self.accelerator_ps);
        self.requested_bytes = self.requested_bytes.saturating_add(record.requested_bytes);
        self.peak_bytes = self.peak_bytes.max(record.peak_bytes);
        self.residual_bytes = self.residual_bytes.saturating_add(record.residual_bytes);
        self.output_bytes = self.output_bytes.saturating_add(record.output_bytes);
        self.float_ops = self.float_ops.saturating_add(record.float_ops);
    }

    /// These numbers divided by `steps` (integer division, as tfprof).
    fn divided(mut self, steps: i64) -> NodeStats {
        let steps = steps.max(1);
        for field in [
            &mut self.occurrence,
            &mut self.micros_ps,
            &mut self.accelerator_ps,
            &mut self.cpu_ps,
            &mut self.requested_bytes,
            &mut self.peak_bytes,
            &mut self.residual_bytes,
            &mut self.output_bytes,
            &mut self.float_ops,
        ] {
            *field /= steps;
        }
        self
    }
}

/// Which records count, and for which steps.
#[derive(Clone, Copy, Debug)]
pub(super) struct Selection<'o> {
    /// `--account-type-regexes`.
    pub account_types: &'o Regexes,
    /// `--step`.
    pub step: StepSelection,
}

impl Selection<'_> {
    /// Whether `record`'s type is accounted.
    pub(super) fn accounts(&self, profile: &Profile, record: &OpRecord) -> bool {
        self.account_types.is_match(profile.strings.get(record.op_type))
    }
}

/// A node's own numbers and facts.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct OwnFacts {
    /// Whether any of its records is accounted (or the node accounts everything).
    pub accounted: bool,
    /// Its own numbers under the selection.
    pub stats: NodeStats,
    /// Op types of its accounted records.
    pub op_types: BTreeSet<String>,
    /// Devices of its accounted records.
    pub devices: BTreeSet<String>,
    /// Input shapes of its selected runs, with their run counts.
    pub input_shapes: BTreeMap<String, i64>,
}

/// The own facts of a node made of `records` (indices into the profile).
pub(super) fn own_facts(profile: &Profile, records: &[usize], selection: &Selection<'_>) -> OwnFacts {
    let mut facts = OwnFacts { accounted: selection.account_types.is_everything(), ..OwnFacts::default() };
    let mut per_step: BTreeMap<i64, NodeStats> = BTreeMap::new();
    let mut params = 0i64;
    for record in records.iter().filter_map(|&i| profile.records.get(i)) {
        if !selection.accounts(profile, record) {
            continue;
        }
        facts.accounted = true;
        facts.op_types.insert(profile.strings.get(record.op_type).to_string());
        facts.devices.insert(profile.strings.get(record.device).to_string());
        if record.is_static {
            params = params.max(record.params);
            continue;
        }
        let step = match (selection.step, record.step) {
            (StepSelection::Whole, _) => 0,
            (StepSelection::Step(wanted), Some(step)) if step == wanted => step,
            (StepSelection::Average, Some(step)) => step,
            _ => continue,
        };
        per_step.entry(step).or_default().add_record(record);
        if let Some(shapes) = record.input_shapes.filter(|_| record.runs > 0) {
            *facts.input_shapes.entry(profile.strings.get(shapes).to_string()).or_insert(0) += 1;
        }
    }
    let steps = per_step.len() as i64;
    let mut total = NodeStats::default();
    per_step.values().for_each(|stats| total.add(stats));
    if matches!(selection.step, StepSelection::Average) {
        total = total.divided(steps);
        // Peaks are per step: the average of each step's largest run.
        total.peak_bytes = per_step.values().fold(0i64, |sum, s| sum.saturating_add(s.peak_bytes)) / steps.max(1);
    } else {
        total.peak_bytes = per_step.values().map(|s| s.peak_bytes).max().unwrap_or(0);
    }
    total.params = params;
    facts.stats = total;
    facts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(records: Vec<OpRecord>) -> Profile {
        let mut profile = Profile::new(1);
        profile.records = records;
        profile.strings.intern("MatMul");
        profile.strings.intern("Relu");
        profile
    }

    fn run(op_type: u32, step: Option<i64>, cpu_ps: i64, peak_bytes: i64) -> OpRecord {
        OpRecord { op_type, step, cpu_ps, peak_bytes, runs: 1, requested_bytes: 10, ..OpRecord::default() }
    }

    #[test]
    fn steps_select_or_average_and_types_account() {
        let profile = profile(vec![
            run(0, Some(1), 100, 5),
            run(0, Some(1), 50, 7),
            run(0, Some(2), 30, 1),
            run(1, None, 1000, 0),
            OpRecord { is_static: true, params: 12, op_type: 0, ..OpRecord::default() },
        ]);
        let all = Regexes::everything();
        let records = [0, 1, 2, 3, 4];
        let whole = own_facts(&profile, &records, &Selection { account_types: &all, step: StepSelection::Whole });
        assert_eq!((whole.stats.cpu_ps, whole.stats.micros_ps, whole.stats.occurrence), (1180, 1180, 4));
        assert_eq!((whole.stats.peak_bytes, whole.stats.params, whole.stats.requested_bytes), (7, 12, 40));
        assert_eq!(whole.op_types.iter().collect::<Vec<_>>(), ["MatMul", "Relu"]);
        let step = own_facts(&profile, &records, &Selection { account_types: &all, step: StepSelection::Step(1) });
        assert_eq!((step.stats.cpu_ps, step.stats.occurrence, step.stats.params), (150, 2, 12));
        let average = own_facts(&profile, &records, &Selection { account_types: &all, step: StepSelection::Average });
        // Steps 1 and 2: (150 + 30) / 2 and (2 + 1) / 2 runs; peaks (7 + 1) / 2.
        assert_eq!((average.stats.cpu_ps, average.stats.occurrence, average.stats.peak_bytes), (90, 1, 4));
        let relu = Regexes::parse("account-type-regexes", "Relu").expect("valid");
        let relu_only = own_facts(&profile, &records, &Selection { account_types: &relu, step: StepSelection::Whole });
        assert_eq!((relu_only.accounted, relu_only.stats.cpu_ps, relu_only.stats.params), (true, 1000, 0));
        let none = own_facts(&profile, &[0], &Selection { account_types: &relu, step: StepSelection::Whole });
        assert!(!none.accounted);
        assert_eq!(none.stats, NodeStats::default());
    }
}
