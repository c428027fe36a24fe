//! `op_placement`: TensorFlow ops that ran on the host of a GPU profile while the
//! device waited. Fires on TensorFlow profiles with a device when Host compute (host
//! op time not overlapped by device work, in the step-time breakdown) is ≥ 3 % of the
//! step (high at 15 %, XProf's thresholds for the other host-side categories) and
//! framework ops other than input, transfer and bookkeeping ops ran on the host. Time
//! lost per step: the mean Host compute time per step; the evidence lists the host ops
//! with the most self time (`framework_op_stats`) and the overview's host op share.
//! PyTorch places ops by tensor device and JAX runs jitted programs on the device, so
//! their host compute is the host side of device ops (see `host_overhead`).

use crate::advise::{Evidence, Finding, Framework, Outcome, Severity, ToolResults, ms_to_ps};
use crate::framework_op_stats::OpStatsRow;
use mlprof_model::human;

use super::ms;

/// The rule's name.
pub const NAME: &str = "op_placement";

/// Host compute share that fires (XProf's moderate host-side threshold, %).
const MODERATE_PERCENT: f64 = 3.0;
/// Host compute share that is high (%).
const HIGH_PERCENT: f64 = 15.0;
/// Host ops listed in the evidence.
const LISTED_OPS: usize = 5;

/// Op types that belong on the host: input, transfers, Python, bookkeeping.
const HOST_OP_TYPES: [&str; 23] = [
    "Dataset",
    "IteratorGetNext",
    "IteratorGetNextSync",
    "IteratorGetNextAsOptional",
    "MultiDeviceIteratorGetNextFromShard",
    "_Send",
    "_Recv",
    "_HostSend",
    "_HostRecv",
    "Send",
    "Recv",
    "EagerPyFunc",
    "PyFunc",
    "PyFuncStateless",
    "NoOp",
    "Identity",
    "IdentityN",
    "_Arg",
    "_Retval",
    "Const",
    "VarHandleOp",
    "StatefulPartitionedCall",
    "PartitionedCall",
];

/// The rule.
pub fn check(results: &ToolResults) -> Outcome {
    if results.framework != Framework::Tensorflow {
        return Outcome::NotApplicable(
            "not a TensorFlow profile: ops run where their tensors or jitted programs are".into(),
        );
    }
    if !results.has_device() || results.steps().is_empty() {
        return Outcome::NotApplicable("no device steps: every op runs on the host".into());
    }
    let host_ms = results.category_mean_ms("hostComputeTimeMs");
    let share = results.step_share_percent(host_ms);
    let field = "category_ms[\"hostComputeTimeMs\"].average";
    let ops = placed_on_host(results);
    if share < MODERATE_PERCENT || ops.is_empty() {
        return Outcome::Clear(
            Evidence::new(
                "input_pipeline_analyzer",
                format!(
                    "host compute is {} per step, {share:.1}% of the step (flagged from {MODERATE_PERCENT}%), with {} \
                     framework ops on the host",
                    ms(host_ms),
                    ops.len()
                ),
            )
            .cite(field, host_ms),
        );
    }
    let mut listed = Evidence::new("framework_op_stats", String::new());
    let mut names = Vec::new();
    for (index, row) in ops.iter().take(LISTED_OPS) {
        names.push(format!(
            "{} ({}, {} times, {})",
            row.op_name,
            row.op_type,
            row.occurrences,
            human::duration_us(row.total_self_time_us)
        ));
        listed = listed.cite(format!("without_idle.rows[{index}].total_self_time_us"), row.total_self_time_us);
    }
    listed.text = format!("Framework ops on the host, most self time first: {}.", names.join("; "));
    let host_percent = results.overview.host_tf_op_percent;
    let finding = Finding::new(
        NAME,
        Severity::by_share(share, MODERATE_PERCENT, HIGH_PERCENT),
        format!("Ops placed on the CPU: the device waits {} per step for host ops", ms(host_ms)),
    )
    .time_lost(Some(ms_to_ps(host_ms)), "mean Host compute time per step (step-time breakdown)")
    .evidence(
        Evidence::new(
            "input_pipeline_analyzer",
            format!("Host compute is {} per step, {share:.1}% of the step time.", ms(host_ms)),
        )
        .cite(field, host_ms),
    )
    .evidence(
        Evidence::new("overview_page", format!("{host_percent:.1}% of the TF ops executed ran on the host."))
            .cite("host_tf_op_percent", host_percent),
    )
    .evidence(listed)
    .fixes([
        "Find where each op runs with `tf.debugging.set_log_device_placement(True)`: ops without a GPU kernel \
         (string ops, some integer ops, `tf.py_function`) fall back to the CPU. Replace them, or move them into the \
         tf.data pipeline where they overlap the step.",
        "Make silent CPU fallbacks errors that name the op: `tf.config.set_soft_device_placement(False)`.",
        "Place the model explicitly (`with tf.device('/GPU:0')`) and keep preprocessing in tf.data.",
    ]);
    Outcome::Found(vec![finding])
}

/// Host rows of framework ops that could run on a device, with their row index.
fn placed_on_host(results: &ToolResults) -> Vec<(usize, &OpStatsRow)> {
    let Some(stats) = &results.framework_op_stats else { return Vec::new() };
    stats
        .without_idle
        .rows
        .iter()
        .enumerate()
        .filter(|(_, row)| {
            row.host_or_device == "Host"
                && !HOST_OP_TYPES.contains(&row.op_type.as_str())
                && !row.op_type.starts_with("Memcpy")
                && !row.op_name.starts_with("Iterator::")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::framework_op_stats::{FrameworkOpStats, OpStatsTable};

    fn row(op_type: &str, op_name: &str, self_us: f64) -> OpStatsRow {
        OpStatsRow {
            rank: 1,
            host_or_device: "Host".into(),
            op_type: op_type.into(),
            op_name: op_name.into(),
            occurrences: 4,
            total_time_us: self_us,
            avg_time_us: 0.0,
            total_self_time_us: self_us,
            avg_self_time_us: 0.0,
            device_self_time_fraction: 0.0,
            device_cumulative_self_time_fraction: 0.0,
            host_self_time_fraction: 0.0,
            host_cumulative_self_time_fraction: 0.0,
            measured_flop_rate_gflops: 0.0,
            model_flop_rate_gflops: 0.0,
            measured_memory_bw_gibps: 0.0,
            operational_intensity_flops_per_byte: 0.0,
            gpu_tensorcore_utilization: 0.0,
            bound_by: String::new(),
            is_eager: false,
        }
    }

    fn results(rows: Vec<OpStatsRow>, host_ms: f64) -> ToolResults {
        let mut results = crate::advise::rules::test_support::gpu_steps(1, 10.0, &[("hostComputeTimeMs", host_ms)]);
        let table = OpStatsTable { rows, ..OpStatsTable::default() };
        results.framework_op_stats = Some(FrameworkOpStats {
            device_type: "GPU".into(),
            host_total_time_ps: 0,
            host_op_time_ps: 0,
            device_total_time_ps: 0,
            device_op_time_ps: 0,
            with_idle: table.clone(),
            without_idle: table,
            include_idle: true,
        });
        results
    }

    #[test]
    fn host_compute_ops_on_a_gpu_profile_fire_and_are_listed() {
        let rows = vec![row("Dataset", "Iterator::Root", 900.0), row("StringToNumber", "parse/StringToNumber", 500.0)];
        let Outcome::Found(findings) = check(&results(rows, 1.0)) else { panic!("10% host compute must fire") };
        let listed = findings[0].evidence.iter().find(|e| e.tool == "framework_op_stats").expect("ops");
        assert!(listed.text.contains("parse/StringToNumber"), "{}", listed.text);
        assert!(!listed.text.contains("Iterator::Root"), "input ops belong on the host");
        assert_eq!(listed.cited[0].field, "without_idle.rows[1].total_self_time_us");
        assert_eq!(findings[0].time_lost_per_step_ps, Some(1_000_000_000));
    }

    #[test]
    fn only_input_ops_on_the_host_is_clear_and_pytorch_does_not_apply() {
        assert!(matches!(check(&results(vec![row("Dataset", "Iterator::Root", 900.0)], 1.0)), Outcome::Clear(_)));
        let mut pytorch = results(vec![row("aten::mm", "aten::mm", 900.0)], 1.0);
        pytorch.framework = Framework::Pytorch;
        assert!(matches!(check(&pytorch), Outcome::NotApplicable(_)));
    }
}
