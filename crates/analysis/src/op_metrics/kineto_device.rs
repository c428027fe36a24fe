//! The GPU op metrics database of a Kineto (PyTorch) trace: XProf's device database
//! with ATen ops in the place of `tf_op`s.
//!
//! The one design decision to know: every kernel, copy (`gpu_memcpy`) and memset
//! (`gpu_memset`) of a `/device:GPU:N` plane is a device op named `<op>/<kernel>`, where
//! `<op>` is the `cpu_op` that launched it ([`KinetoOpIndex`]); its provenance is that
//! op, so XProf's roll-up gives one device row per ATen op (self time = its GPU time,
//! occurrences = the most launches of one of its kernels). An activity no op launched
//! is named by itself and rolls up to a row of type `Unknown`, as XProf does for kernels
//! without `tf_op`. Each device's `IDLE` row is the span of its activities (first start
//! to last end, absolute times) minus their summed durations, at least 0; annotations
//! projected on streams (`gpu_user_annotation`) and `cuda_sync` records are not ops.

use mlprof_model::{Host, Plane};

use super::{DbBuilder, DeviceOpRun, KinetoOpIndex, OpMetricsDb, ps};
use crate::kineto::{self, Category};
use crate::xstats;

/// The op type of GPU activities no op launched.
const UNKNOWN_TYPE: &str = "Unknown";

/// Whether an event of `category` is a device op: a kernel, copy or memset.
pub(crate) fn is_device_activity(category: Category) -> bool {
    matches!(category, Category::Kernel | Category::GpuMemcpy | Category::GpuMemset)
}

/// The device op metrics of a Kineto host: per GPU plane, its activities keyed
/// `<op>/<kernel>` with the plane's `IDLE` row, combined over the planes.
pub(crate) fn kineto_device_op_metrics_db(host: &Host) -> OpMetricsDb {
    let index = KinetoOpIndex::new(host);
    let mut combined = DbBuilder::default();
    for (plane_index, plane) in host.planes.iter().enumerate() {
        if !plane.is_gpu() {
            continue;
        }
        let mut builder = DbBuilder::default();
        let mut span: Option<(i64, i64)> = None;
        plane_runs(&index, plane, plane_index, |run| {
            let (start, end) = (run.start_ps, run.start_ps.saturating_add(run.duration_ps.max(0)));
            span = Some(span.map_or((start, end), |(first, last)| (first.min(start), last.max(end))));
            let name =
                if run.op_name.is_empty() { run.kernel.to_string() } else { format!("{}/{}", run.op_name, run.kernel) };
            let time_ps = ps(run.duration_ps);
            let metrics = builder.add_occurrence(0, &name, time_ps, time_ps);
            if metrics.occurrences == 1 {
                metrics.category = run.op_type.to_string();
                metrics.provenance = run.provenance.to_string();
                // The framework op's type, as XProf's rollup takes it (its library; none
                // for a kernel no op launched).
                metrics.provenance_type =
                    if run.provenance.is_empty() { String::new() } else { run.op_type.to_string() };
            }
        });
        let mut db = builder.finish();
        db.set_total_time(span.map_or(0, |(first, last)| ps(last.saturating_sub(first))));
        db.add_idle_op();
        combined.combine(&db, true);
    }
    combined.finish()
}

/// Every kernel, copy and memset of the host's GPU planes, each as a run of the
/// `cpu_op` that launched it (`launched_by`), or of no op (empty `op_name`, type
/// `Unknown`): what [`kineto_device_op_metrics_db`] adds up.
pub(crate) fn kineto_device_op_runs(host: &Host, mut visit: impl FnMut(&DeviceOpRun<'_>)) {
    let index = KinetoOpIndex::new(host);
    for (plane_index, plane) in host.planes.iter().enumerate() {
        if plane.is_gpu() {
            plane_runs(&index, plane, plane_index, &mut visit);
        }
    }
}

/// The device activities of one GPU plane with the op that launched each.
fn plane_runs<'p>(
    index: &KinetoOpIndex<'p>,
    plane: &'p Plane,
    plane_index: usize,
    mut visit: impl FnMut(&DeviceOpRun<'p>),
) {
    let categories = kineto::categories(plane);
    let keys = KinetoOpIndex::device_keys(plane);
    for (line_index, line) in plane.lines.iter().enumerate() {
        for event in line.iter() {
            if !is_device_activity(kineto::category_of(&categories, &event)) {
                continue;
            }
            let launched = index.op_event_of(plane, &keys, &event);
            let op_name = launched.map_or("", |(name, _, _)| name);
            visit(&DeviceOpRun {
                plane: plane_index,
                line: line_index,
                event: event.index(),
                op_name,
                op_type: if op_name.is_empty() { UNKNOWN_TYPE } else { kineto::op_library(op_name) },
                provenance: op_name,
                kernel: xstats::event_name(plane, &event),
                start_ps: event.start_ps(),
                duration_ps: event.duration_ps(),
                is_eager: false,
                launched_by: launched.map(|(_, line, event)| (line, event)),
            });
        }
    }
}
