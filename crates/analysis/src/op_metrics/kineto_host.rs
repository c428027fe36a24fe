//! The host op metrics database of a Kineto (PyTorch) trace.
//!
//! The one design decision to know: what counts as a host op is chosen to match what
//! PyTorch users read in `prof.key_averages()`, within XProf's self-time arithmetic.
//!
//! - Every `cpu_op` (`aten::addmm`, `autograd::engine::evaluate_function:
//!   AddmmBackward0`, `AddmmBackward0`) is a framework op; its type and its name are the
//!   op name (PyTorch has no instance names).
//! - CUDA runtime and driver calls (`cudaLaunchKernel`, `cudaMemcpyAsync`,
//!   `cudaStreamSynchronize`, `cuLaunchKernel`) are rows of their own, named by the call,
//!   typed `CUDA runtime` / `CUDA driver`. So an ATen op's self time is its own CPU
//!   work, launch overhead shows up as `cudaLaunchKernel`, and a `torch.cuda.synchronize()`
//!   outside any op is `cudaDeviceSynchronize` time rather than IDLE.
//! - `user_annotation`s (`ProfilerStep#N`, `record_function` ranges, the DataLoader's
//!   `__next__`, `Optimizer.step#…`) and `python_function` frames are not ops and are
//!   transparent: the ops inside them are top-level ops, as XProf ignores TraceMes that
//!   are no op. The step tools read them instead.
//! - Self time = duration − the durations of the host ops directly nested in it, per
//!   thread; each thread adds an `IDLE` row = its op span (first op start to last op
//!   end) − the self time of its ops, as XProf does. No op is eager (XProf's eager/graph
//!   split is TensorFlow's).

use mlprof_model::{Host, names};

use super::{DbBuilder, HostOpRun, OpMetricsDb, ps};
use crate::kineto;
use crate::kineto::thread_ops;
use crate::xstats;

/// The host op metrics of a Kineto host: `cpu_op`s and runtime / driver calls of every
/// thread of the `/host:CPU` plane with total and self times (ps), plus one combined
/// `IDLE` row. Empty when the host has no such plane.
pub(crate) fn kineto_host_op_metrics_db(host: &Host) -> OpMetricsDb {
    let mut combined = DbBuilder::default();
    for_each_thread(host, |_, runs| {
        let mut builder = DbBuilder::default();
        for run in runs {
            let metrics = builder.add_occurrence(0, run.name, run.time_ps, run.self_ps);
            if metrics.category.is_empty() {
                metrics.category = run.op_type.to_string();
            }
        }
        let first = runs.iter().map(|run| run.start_ps).min();
        let last = runs.iter().map(|run| run.start_ps.saturating_add(run.time_ps as i64)).max();
        let mut db = builder.finish();
        if let (Some(first), Some(last)) = (first, last) {
            db.set_total_time(ps(last.saturating_sub(first)));
        }
        db.add_idle_op();
        combined.combine(&db, false);
    });
    combined.finish()
}

/// Every host op run of a Kineto host (what [`kineto_host_op_metrics_db`] sums), per thread
/// in start order.
pub(crate) fn kineto_host_op_runs(host: &Host, mut visit: impl FnMut(&HostOpRun<'_>)) {
    for_each_thread(host, |_, runs| runs.iter().for_each(&mut visit));
}

/// Calls `per_thread` with each line's index and its host op runs (sorted by start,
/// longer first), for every line of the `/host:CPU` plane.
fn for_each_thread(host: &Host, mut per_thread: impl FnMut(usize, &[HostOpRun<'_>])) {
    let Some(plane) = host.planes.iter().find(|plane| plane.name == names::HOST_PLANE) else {
        return;
    };
    let categories = kineto::categories(plane);
    for (line_index, line) in plane.lines.iter().enumerate() {
        let ops = thread_ops(line, &categories);
        let mut children_ps = vec![0i64; ops.len()];
        for op in &ops {
            if let Some(parent) = op.parent {
                children_ps[parent] = children_ps[parent].saturating_add(op.duration_ps);
            }
        }
        let runs: Vec<HostOpRun<'_>> = ops
            .iter()
            .zip(&children_ps)
            .filter_map(|(op, children)| {
                let event = line.event(op.event)?;
                let name = xstats::event_name(plane, &event);
                Some(HostOpRun {
                    line: line_index,
                    event: op.event,
                    name,
                    op_type: op.kind.op_type(name),
                    module_id: 0,
                    start_ps: op.start_ps,
                    time_ps: ps(op.duration_ps),
                    self_ps: ps(op.duration_ps.saturating_sub(*children)),
                    from_stat: false,
                })
            })
            .collect();
        per_thread(line_index, &runs);
    }
}
