//! The GPU op metrics database (XProf's `ConvertDeviceTraceXPlaneToOpMetricsDb`) and
//! its roll-up to framework ops (`CreateTfMetricsDbFromDeviceOpMetricsDb`).
//!
//! Kernels never nest, so each kernel's self time is its duration. Kernels that carry a
//! `tf_op` stat become ops named `<tf op name>/<kernel>`; XLA kernels (an `hlo_op`
//! stat) become their HLO instruction, named from the compiled programs of the
//! host's `/host:metadata` plane (`op_metrics::xla_device`).

use mlprof_model::{Host, Plane, names};

use super::xla_device::{XlaKernel, XlaRuns};
use super::{DbBuilder, DeviceOpRun, IDLE, OpMetricsDb, is_derived_line_id, ps};
use crate::grouping::HostGroups;
use crate::hlo::HloModules;
use crate::tf_op::parse_tf_op;
use crate::xstats::{self, StatSlots};

/// XProf's `device_op_metrics_db` of an XSpace host: every GPU plane's kernels that
/// carry a `tf_op` stat, keyed `<tf op name>/<kernel name>`, and its XLA kernels, keyed
/// by their HLO instruction (named from `modules`, the host's programs), with each
/// plane's `IDLE` row, combined over the planes. Empty for CPU-only hosts, and for TPU
/// hosts (XProf reads TPU planes differently; not supported).
pub(crate) fn xspace_device_op_metrics_db(host: &Host, groups: &HostGroups, modules: &HloModules) -> OpMetricsDb {
    if host.planes.iter().any(|plane| plane.name.starts_with(names::TPU_PLANE_PREFIX)) {
        return OpMetricsDb::default();
    }
    let gpu_planes = host.planes.iter().enumerate().filter(|(_, p)| p.is_gpu());
    let mut combined = DbBuilder::default();
    for (plane_index, plane) in gpu_planes {
        let mut db = plane_db(plane, plane_index, groups, modules);
        let (mut first_ps, mut last_ps) = (i64::MAX, 0i64);
        for line in plane.lines.iter().filter(|line| !is_derived_line_id(line.id)) {
            for event in line.iter() {
                // XProf takes offsets within each line here, not absolute times.
                first_ps = first_ps.min(event.offset_ps());
                last_ps = last_ps.max(event.offset_ps().saturating_add(event.duration_ps()));
            }
        }
        db.set_total_time(if last_ps != 0 { ps(last_ps - first_ps) } else { 0 });
        db.add_idle_op();
        combined.combine(&db, true);
    }
    combined.finish()
}

/// The ops of one GPU plane, in XProf's order: per stream, each TF kernel as it comes
/// and each run of XLA kernels when it ends.
fn plane_db(plane: &Plane, plane_index: usize, groups: &HostGroups, modules: &HloModules) -> OpMetricsDb {
    let mut builder = DbBuilder::default();
    let mut xla = XlaRuns::new(modules);
    plane_kernels(plane, plane_index, groups, |kernel| match kernel {
        GpuKernel::Xla(kernel) => xla.add(&kernel, &mut builder),
        GpuKernel::Tf(run) => {
            xla.flush(&mut builder);
            let time_ps = ps(run.duration_ps);
            let metrics = builder.add_occurrence(0, &format!("{}/{}", run.op_name, run.kernel), time_ps, time_ps);
            if metrics.occurrences == 1 && metrics.category.is_empty() && metrics.provenance.is_empty() {
                metrics.category = if run.op_type.is_empty() { "unknown".into() } else { run.op_type.into() };
                metrics.provenance = run.provenance.to_string();
                metrics.is_eager |= run.is_eager;
            }
        }
        GpuKernel::LineEnd => xla.flush(&mut builder),
    });
    builder.finish()
}

/// Every GPU kernel of an XSpace host that [`xspace_device_op_metrics_db`] counts as a TF op
/// (kernels with a `tf_op` stat and no `hlo_op`), one call per kernel. TPU hosts have
/// none (as in the database).
pub(crate) fn xspace_device_op_runs(host: &Host, groups: &HostGroups, mut visit: impl FnMut(&DeviceOpRun<'_>)) {
    if host.planes.iter().any(|plane| plane.name.starts_with(names::TPU_PLANE_PREFIX)) {
        return;
    }
    for (plane_index, plane) in host.planes.iter().enumerate() {
        if plane.is_gpu() {
            plane_kernels(plane, plane_index, groups, |kernel| {
                if let GpuKernel::Tf(run) = kernel {
                    visit(&run);
                }
            });
        }
    }
}

/// What one event of a GPU stream is to the op database.
enum GpuKernel<'p> {
    /// A kernel XLA launched (it has an `hlo_op` stat).
    Xla(XlaKernel<'p>),
    /// A kernel of a TF op (a `tf_op` stat and no `hlo_op`).
    Tf(DeviceOpRun<'p>),
    /// The end of a stream.
    LineEnd,
}

/// Stats read off GPU events, in [`StatSlots`] order.
const KERNEL_STATS: [&str; 6] = ["tf_op", "hlo_op", "is_eager", "program_id", "flops", "bytes_accessed"];

/// The kernels of one GPU plane's streams in order, each followed by the end of its
/// stream; events that are neither TF nor XLA kernels are skipped.
fn plane_kernels<'p>(plane: &'p Plane, plane_index: usize, groups: &HostGroups, mut visit: impl FnMut(GpuKernel<'p>)) {
    let slots = StatSlots::new(plane, KERNEL_STATS);
    for (line_index, line) in plane.lines.iter().enumerate() {
        if is_derived_line_id(line.id) {
            continue;
        }
        for event in line.iter() {
            let stats = slots.row(plane, &event);
            // Only asked of kernels (other events are skipped).
            let is_eager =
                || stats.int(2).is_some_and(|v| v != 0) || groups.is_eager(plane_index, line_index, event.index());
            if let Some(hlo_op) = stats.str(1, plane, &event) {
                visit(GpuKernel::Xla(XlaKernel {
                    line: line_index,
                    program_id: stats.int(3),
                    hlo_op,
                    group: groups.group_of(plane_index, line_index, event.index()),
                    is_eager: is_eager(),
                    duration_ps: event.duration_ps(),
                    flops: stats.int(4).map_or(0, |v| v as u64),
                    bytes_accessed: stats.int(5).map_or(0, |v| v as u64),
                }));
                continue;
            }
            let Some(full) = stats.str(0, plane, &event).filter(|s| !s.is_empty()) else {
                continue;
            };
            let op = parse_tf_op(full);
            visit(GpuKernel::Tf(DeviceOpRun {
                plane: plane_index,
                line: line_index,
                event: event.index(),
                op_name: op.name,
                op_type: op.op_type,
                provenance: full,
                kernel: xstats::event_name(plane, &event),
                start_ps: event.start_ps(),
                duration_ps: event.duration_ps(),
                is_eager: is_eager(),
                launched_by: None,
            }));
        }
        visit(GpuKernel::LineEnd);
    }
}

/// Rolls device ops up to the framework ops they came from (by provenance), as XProf
/// does before showing device rows in `framework_op_stats` (a provenance with a stated
/// type, as Kineto's ATen ops, is taken as is): times add up, occurrences
/// are the largest among the op's kernels, eagerness is the last kernel's. With
/// `with_idle` the `IDLE` row is kept and the total time is the device's; without, both
/// are dropped and the total is the op time.
pub fn tf_metrics_db_from_device(device: &OpMetricsDb, with_idle: bool) -> OpMetricsDb {
    let mut builder = DbBuilder::default();
    for op in &device.metrics {
        let (name, op_type) = if op.is_idle() {
            if !with_idle {
                continue;
            }
            (IDLE, IDLE)
        } else if op.provenance.is_empty() {
            (op.name.as_str(), "")
        } else if !op.provenance_type.is_empty() {
            (op.provenance.as_str(), op.provenance_type.as_str())
        } else {
            let tf_op = parse_tf_op(&op.provenance);
            (tf_op.name, tf_op.op_type)
        };
        let tf = builder.entry(0, name);
        if tf.category.is_empty() {
            tf.category = if op_type.is_empty() { "Unknown".into() } else { op_type.into() };
        }
        tf.is_eager = op.is_eager;
        tf.occurrences = tf.occurrences.max(op.occurrences);
        tf.time_ps += op.time_ps;
        tf.self_time_ps += op.self_time_ps;
        tf.flops = tf.flops.saturating_add(op.flops);
        tf.model_flops = tf.model_flops.saturating_add(op.model_flops);
        tf.bytes_accessed = tf.bytes_accessed.saturating_add(op.bytes_accessed);
    }
    let mut db = builder.finish();
    db.total_op_time_ps = device.total_op_time_ps;
    db.total_time_ps = if with_idle { device.total_time_ps } else { device.total_op_time_ps };
    db
}

#[cfg(test)]
mod tests {
    use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat};

    use super::*;
    use crate::facts::{device_op_metrics_db, step_groups};

    /// `(name, start_ps, duration_ps, tf_op stat)`.
    type TestEvent<'a> = (&'a str, i64, i64, Option<&'a str>);

    /// A GPU plane with one line per stream; events `(kernel, start_ps, duration_ps, tf_op)`.
    fn gpu_host(streams: &[&[TestEvent<'_>]]) -> Host {
        let mut builder = PlaneBuilder::new(1, "/device:GPU:0");
        let tf_op = builder.stat_key("tf_op");
        for (i, events) in streams.iter().enumerate() {
            let mut line = Line::new(i as i64 + 7, format!("Stream #{}", i + 7));
            for &(name, start, duration, stat) in *events {
                let metadata = builder.event_metadata(name, 0, |_| Vec::new());
                if let Some(text) = stat {
                    line.stats.push_str(tf_op, text).unwrap();
                }
                line.push_event(metadata, start, duration);
            }
            builder.push_line(line);
        }
        let mut host = Host::new("h", "h", SourceFormat::Xspace);
        host.planes.push(PlaneBuilder::new(0, names::HOST_PLANE).finish());
        host.planes.push(builder.finish());
        host
    }

    #[test]
    fn kernels_on_two_streams_roll_up_to_tf_ops() {
        let host = gpu_host(&[
            &[("gemm", 100, 50, Some("model/dense/MatMul:MatMul")), ("relu", 160, 10, Some("model/Relu:Relu"))],
            &[("gemm_splitk", 120, 40, Some("model/dense/MatMul:MatMul")), ("memset", 300, 5, None)],
        ]);
        let device = device_op_metrics_db(&host, &step_groups(&host));
        let names: Vec<_> = device.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["model/dense/MatMul/gemm", "model/Relu/relu", "model/dense/MatMul/gemm_splitk", IDLE]);
        assert_eq!(device.total_op_time_ps, 100);
        assert_eq!(device.total_time_ps, 205);
        assert_eq!(device.metrics[3].self_time_ps, 105);
        assert_eq!(device.metrics[0].provenance, "model/dense/MatMul:MatMul");

        let tf = tf_metrics_db_from_device(&device, true);
        let matmul = &tf.metrics[0];
        assert_eq!((matmul.name.as_str(), matmul.category.as_str()), ("model/dense/MatMul", "MatMul"));
        assert_eq!((matmul.occurrences, matmul.self_time_ps), (1, 90));
        assert_eq!(tf.total_time_ps, 205);
        let without = tf_metrics_db_from_device(&device, false);
        assert!(without.metrics.iter().all(|m| !m.is_idle()));
        assert_eq!(without.total_time_ps, 100);
    }

    #[test]
    fn cpu_only_hosts_have_an_empty_device_db() {
        let host = Host::new("h", "h", SourceFormat::Xspace);
        assert_eq!(device_op_metrics_db(&host, &step_groups(&host)), OpMetricsDb::default());
    }
}
