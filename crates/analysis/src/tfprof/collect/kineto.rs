//! PyTorch ops of a Kineto host: the host op runs of the Kineto op database (`cpu_op`s,
//! CUDA runtime and driver calls, with their self time) and the GPU activities each
//! `cpu_op` launched, with the name-scope and Python-code paths around each op.
//!
//! The one design decision to know: on each thread, ops, `record_function` ranges
//! (`user_annotation`, except `ProfilerStep#N`, which `--step` selects instead) and
//! Python frames are nested together: each in the innermost span that contains it (a
//! range opened inside the short Python call `record_function.__enter__` belongs
//! to that call's caller, not to the call). An op's scope path is the chain
//! of annotations, `nn.Module` frames (`with_modules=True`) and enclosing ops down to
//! itself (`forward_backward` › `aten::linear` › `aten::addmm`); its code path is the
//! chain of Python frames around it. A kernel joins the node of the `cpu_op` that
//! launched it (`External id`, else correlation), adding device time but no run.

use std::collections::HashMap;

use mlprof_model::StatValue;
use serde_json::Value;

use super::super::nesting::nest_contained;
use super::super::profile::{OpRecord, OpSource, Profile, ROOT_PATH};
use super::python::frame_name;
use super::{HostContext, flops_of};
use crate::kineto::{self, Category};
use crate::op_metrics::{kineto_device_op_runs, kineto_host_op_runs};
use crate::xstats::{self, StatKeys};

/// The name prefix of `nn.Module` frames (`with_modules=True`).
const MODULE_PREFIX: &str = "nn.Module: ";

/// How far a child may outlast its parent and still nest in it: Kineto rounds `ts` and
/// `dur` separately to the nanosecond (the Kineto op database's reason to nest by
/// start).
const ROUNDING_PS: i64 = 1_000;

/// What an event of a host thread is to the scope and code views.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// A host op (`cpu_op`, runtime or driver call): a scope component.
    Op,
    /// A `record_function` range: a scope component.
    Annotation,
    /// An `nn.Module` frame: a scope component and a code frame.
    Module,
    /// Another Python frame: a code frame.
    Frame,
}

/// Collects the op records of a Kineto host; returns each host op run's record by
/// `(line, event)` of the `/host:CPU` plane.
pub(super) fn collect(profile: &mut Profile, context: &HostContext<'_>) -> HashMap<(usize, usize), usize> {
    let mut by_event: HashMap<(usize, usize), usize> = HashMap::new();
    let (host, groups) = (context.host, context.groups);
    if let Some(plane_index) = context.host_plane() {
        let plane = &host.planes[plane_index];
        let paths = thread_paths(profile, plane);
        let keys = StatKeys::new(plane, ["Input Dims", "flops"]);
        let device = context.device(profile, plane_index);
        let mut tracks: HashMap<usize, u32> = HashMap::new();
        let mut shapes: HashMap<String, Option<u32>> = HashMap::new();
        kineto_host_op_runs(host, |run| {
            let track = *tracks.entry(run.line).or_insert_with(|| context.track(profile, plane_index, run.line));
            let event = plane.lines.get(run.line).and_then(|line| line.event(run.event));
            let input_shapes = event.and_then(|event| {
                let raw = input_dims_text(plane, &event, keys.key(0))?;
                if let Some(&known) = shapes.get(raw) {
                    return known;
                }
                let id = shapes_text(raw).map(|text| profile.strings.intern(&text));
                shapes.insert(raw.to_string(), id);
                id
            });
            let (scope, code) = paths.get(&(run.line, run.event)).copied().unwrap_or_else(|| {
                let component = profile.strings.intern(run.name);
                (profile.scopes.child(ROOT_PATH, component), ROOT_PATH)
            });
            // tfprof's op view groups ATen ops by name, as PyTorch's own op table does;
            // only runtime and driver calls share a type.
            let op_type = if run.op_type == kineto::op_library(run.name) { run.name } else { run.op_type };
            let record = OpRecord {
                node: profile.strings.intern(run.name),
                op_type: profile.strings.intern(op_type),
                scope,
                code,
                device,
                track,
                start_ps: run.start_ps,
                duration_ps: i64::try_from(run.time_ps).unwrap_or(i64::MAX),
                step: context.steps.step(groups, plane_index, run.line, run.event),
                runs: 1,
                cpu_ps: i64::try_from(run.self_ps).unwrap_or(i64::MAX),
                float_ops: event.map_or(0, |event| flops_of(plane, keys.key(1), &event)),
                input_shapes,
                ..OpRecord::default()
            };
            by_event.insert((run.line, run.event), profile.records.len());
            profile.kinds.insert(OpSource::PyTorch);
            profile.records.push(record);
        });
        profile.availability.input_shapes |= !shapes.values().all(Option::is_none);
    }
    kineto_device_op_runs(host, |run| {
        profile.kinds.insert(OpSource::PyTorch);
        let launched = run.launched_by.and_then(|at| by_event.get(&at)).and_then(|&i| profile.records.get(i));
        let (node, op_type, scope, code, runs) = match launched {
            Some(op) => (op.node, op.op_type, op.scope, op.code, 0),
            None => {
                let node = profile.strings.intern(run.kernel);
                (node, profile.strings.intern(run.op_type), profile.scopes.child(ROOT_PATH, node), ROOT_PATH, 1)
            }
        };
        let record = OpRecord {
            node,
            op_type,
            scope,
            code,
            device: context.device(profile, run.plane),
            track: context.track(profile, run.plane, run.line),
            start_ps: run.start_ps,
            duration_ps: run.duration_ps,
            step: context.steps.step(groups, run.plane, run.line, run.event),
            runs,
            accelerator_ps: run.duration_ps.max(0),
            ..OpRecord::default()
        };
        profile.records.push(record);
    });
    by_event
}

/// The scope and code paths of every host op event of the plane, by `(line, event)`.
fn thread_paths(profile: &mut Profile, plane: &mlprof_model::Plane) -> HashMap<(usize, usize), (u32, u32)> {
    let categories = kineto::categories(plane);
    let mut paths = HashMap::new();
    for (line_index, line) in plane.lines.iter().enumerate() {
        let items: Vec<(usize, Role)> = line
            .iter()
            .filter_map(|event| {
                let role = match kineto::category_of(&categories, &event) {
                    Category::CpuOp | Category::CudaRuntime | Category::CudaDriver => Role::Op,
                    Category::UserAnnotation => {
                        let name = xstats::event_name(plane, &event);
                        if kineto::profiler_step_number(name).is_some() {
                            return None;
                        }
                        Role::Annotation
                    }
                    Category::PythonFunction if xstats::event_name(plane, &event).starts_with(MODULE_PREFIX) => {
                        Role::Module
                    }
                    Category::PythonFunction => Role::Frame,
                    _ => return None,
                };
                Some((event.index(), role))
            })
            .collect();
        if items.is_empty() {
            continue;
        }
        let spans: Vec<(i64, i64)> = items
            .iter()
            .map(|&(event, _)| line.event(event).map_or((0, 0), |e| (e.start_ps(), e.duration_ps())))
            .collect();
        let nesting = nest_contained(&spans, ROUNDING_PS);
        let mut scope = vec![ROOT_PATH; items.len()];
        let mut code = vec![ROOT_PATH; items.len()];
        for &at in &nesting.order {
            let (event_index, role) = items[at];
            let (parent_scope, parent_code) =
                nesting.parent[at].map_or((ROOT_PATH, ROOT_PATH), |p| (scope[p], code[p]));
            let name = line.event(event_index).map_or("", |event| xstats::event_name(plane, &event));
            scope[at] = match role {
                Role::Op | Role::Annotation | Role::Module => {
                    let component = profile.strings.intern(name);
                    profile.scopes.child(parent_scope, component)
                }
                Role::Frame => parent_scope,
            };
            code[at] = match role {
                Role::Module | Role::Frame => {
                    profile.availability.python_stacks = true;
                    let component = profile.strings.intern(&frame_name(name));
                    profile.code.child(parent_code, component)
                }
                Role::Op | Role::Annotation => parent_code,
            };
            if role == Role::Op {
                paths.insert((line_index, event_index), (scope[at], code[at]));
            }
        }
    }
    paths
}

/// The raw text of an op's `Input Dims` stat (a JSON array), if recorded.
fn input_dims_text<'p>(
    plane: &'p mlprof_model::Plane,
    event: &mlprof_model::Event<'p>,
    key: Option<u32>,
) -> Option<&'p str> {
    let (value, store) = event.stat_and_store(plane, key?)?;
    match value {
        StatValue::Json(text) | StatValue::Str(text) => Some(store.text(text)),
        _ => None,
    }
}

/// `Input Dims` (`[[512, 1, 28, 28], [], []]`) as tfprof prints input shapes:
/// `0:512x1x28x28|1:()|2:()` (`()` for a scalar or non-tensor argument); `None` when
/// it is no list of lists or holds no input.
pub(super) fn shapes_text(raw: &str) -> Option<String> {
    let Value::Array(inputs) = serde_json::from_str::<Value>(raw).ok()? else { return None };
    if inputs.is_empty() {
        return None;
    }
    let parts: Vec<String> = inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let dims: Vec<String> = match input {
                Value::Array(dims) => {
                    dims.iter().map(|d| d.as_i64().map_or_else(|| "?".to_string(), |d| d.to_string())).collect()
                }
                _ => Vec::new(),
            };
            if dims.is_empty() { format!("{i}:()") } else { format!("{i}:{}", dims.join("x")) }
        })
        .collect();
    Some(parts.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_dims_read_as_tfprof_shapes() {
        assert_eq!(shapes_text("[[512, 1, 28, 28], [], []]").as_deref(), Some("0:512x1x28x28|1:()|2:()"));
        assert_eq!(shapes_text("[[2, \"x\"]]").as_deref(), Some("0:2x?"));
        assert_eq!(shapes_text("[]"), None);
        assert_eq!(shapes_text("not json"), None);
        assert_eq!(shapes_text("{\"a\": 1}"), None);
    }
}
