//! TensorFlow ops of an XSpace host: the host op runs of XProf's host database (one
//! per TF op or tf.data iterator execution, with its self time) and the GPU kernels of
//! its device database (attributed to their TF op by the `tf_op` stat).
//!
//! The one design decision to know: a TF op's name is its scope path
//! (`model/dense/MatMul` → `model` › `dense` › `MatMul`, as tfprof's scope view), and
//! its kernels join the same node with their device time but no extra run, since the
//! host run already counts the op's execution.

use std::collections::HashMap;

use super::super::profile::{OpRecord, OpSource, Profile, ROOT_PATH};
use super::python::LineFrames;
use super::{HostContext, flops_of};
use crate::op_metrics::{xspace_device_op_runs, xspace_host_op_runs};

/// Collects the host and device op records of an XSpace host; returns each host op
/// run's record by `(line, event)` of the `/host:CPU` plane.
pub(super) fn collect(profile: &mut Profile, context: &HostContext<'_>) -> HashMap<(usize, usize), usize> {
    let mut by_event = HashMap::new();
    let (host, groups) = (context.host, context.groups);
    if let Some(plane_index) = context.host_plane() {
        let plane = &host.planes[plane_index];
        let has_tracer = plane.event_metadata.iter().any(|m| m.name.starts_with('$'));
        let frames: Vec<LineFrames> = if has_tracer {
            plane.lines.iter().map(|line| LineFrames::of_line(profile, plane, line)).collect()
        } else {
            Vec::new()
        };
        profile.availability.python_stacks |= frames.iter().any(|f| !f.is_empty());
        let flops = plane.find_stat_key("flops");
        let device = context.device(profile, plane_index);
        let mut tracks: HashMap<usize, u32> = HashMap::new();
        let mut named_by_stat = 0usize;
        xspace_host_op_runs(host, groups, |run| {
            let track = *tracks.entry(run.line).or_insert_with(|| context.track(profile, plane_index, run.line));
            let flops =
                plane.lines.get(run.line).and_then(|l| l.event(run.event)).map_or(0, |e| flops_of(plane, flops, &e));
            named_by_stat += usize::from(run.from_stat);
            if run.from_stat && run.time_ps == 0 {
                // An allocation naming its op: no run, no time.
                return;
            }
            let record = OpRecord {
                node: profile.strings.intern(run.name),
                op_type: profile.strings.intern(run.op_type),
                scope: profile.scope_of_name(ROOT_PATH, run.name),
                code: frames.get(run.line).map_or(ROOT_PATH, |f| f.path_at(run.start_ps)),
                device,
                track,
                start_ps: run.start_ps,
                duration_ps: i64::try_from(run.time_ps).unwrap_or(i64::MAX),
                step: context.steps.step(groups, plane_index, run.line, run.event),
                runs: u64::from(!run.from_stat),
                cpu_ps: i64::try_from(run.self_ps).unwrap_or(i64::MAX),
                float_ops: flops,
                ..OpRecord::default()
            };
            if !run.from_stat {
                by_event.insert((run.line, run.event), profile.records.len());
            }
            profile.kinds.insert(OpSource::TensorFlow);
            profile.records.push(record);
        });
        if named_by_stat > 0 {
            profile.notes.push(format!(
                "{named_by_stat} events name an op in a `tf_op` stat without being a run of it (allocations); \
                 their time counts for that op, but not as occurrences (XProf's framework_op_stats counts them)."
            ));
        }
    }
    let mut flops_keys: HashMap<usize, Option<u32>> = HashMap::new();
    xspace_device_op_runs(host, groups, |run| {
        let Some(plane) = host.planes.get(run.plane) else { return };
        let key = *flops_keys.entry(run.plane).or_insert_with(|| plane.find_stat_key("flops"));
        let event = plane.lines.get(run.line).and_then(|l| l.event(run.event));
        let flops = event.map_or(0, |e| flops_of(plane, key, &e));
        let record = OpRecord {
            node: profile.strings.intern(run.op_name),
            op_type: profile.strings.intern(run.op_type),
            scope: profile.scope_of_name(ROOT_PATH, run.op_name),
            device: context.device(profile, run.plane),
            track: context.track(profile, run.plane, run.line),
            start_ps: run.start_ps,
            duration_ps: run.duration_ps,
            step: context.steps.step(groups, run.plane, run.line, run.event),
            accelerator_ps: run.duration_ps.max(0),
            float_ops: flops,
            ..OpRecord::default()
        };
        profile.kinds.insert(OpSource::TensorFlow);
        profile.records.push(record);
    });
    by_event
}
