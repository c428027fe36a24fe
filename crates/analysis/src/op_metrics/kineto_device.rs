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

use mlprof_model::{Host, names};

use super::{DbBuilder, KinetoOpIndex, OpMetricsDb, ps};
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
pub(super) fn device_op_metrics_db(host: &Host) -> OpMetricsDb {
    let index = KinetoOpIndex::new(host);
    let mut combined = DbBuilder::default();
    for plane in host.planes.iter().filter(|plane| plane.name.starts_with(names::GPU_PLANE_PREFIX)) {
        let categories = kineto::categories(plane);
        let keys = KinetoOpIndex::device_keys(plane);
        let mut builder = DbBuilder::default();
        let mut span: Option<(i64, i64)> = None;
        for line in &plane.lines {
            for event in line.iter() {
                if !is_device_activity(kineto::category_of(&categories, &event)) {
                    continue;
                }
                let (start, end) = (event.start_ps(), event.start_ps().saturating_add(event.duration_ps().max(0)));
                span = Some(span.map_or((start, end), |(first, last)| (first.min(start), last.max(end))));
                let kernel = xstats::event_name(plane, &event);
                let op = index.op_of(plane, &keys, &event);
                let name = op.map_or_else(|| kernel.to_string(), |op| format!("{op}/{kernel}"));
                let time_ps = ps(event.duration_ps());
                let metrics = builder.add_occurrence(0, &name, time_ps, time_ps);
                if metrics.occurrences == 1 {
                    metrics.category = op.unwrap_or(UNKNOWN_TYPE).to_string();
                    metrics.provenance = op.unwrap_or_default().to_string();
                    metrics.provenance_type = metrics.provenance.clone();
                }
            }
        }
        let mut db = builder.finish();
        db.set_total_time(span.map_or(0, |(first, last)| ps(last.saturating_sub(first))));
        db.add_idle_op();
        combined.combine(&db, true);
    }
    combined.finish()
}
