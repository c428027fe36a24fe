//! XLA ops (JAX, TF with `jit_compile`): events with an `hlo_op` stat, on host threads
//! (XLA:CPU runs each thunk as a host event) and on device planes (kernels), named
//! through the host's HLO programs ([`HloModules`]).
//!
//! The one design decision to know: XProf's op databases leave these ops unnamed
//! (they need the HLO module map), so mlprof reads them here. An op's scope path is
//! its HLO instruction's framework op name (`jit(train_step)/jvp()/dot_general`),
//! its code path the instruction's Python stack, its graph node
//! `<module>/<instruction>` with the instruction's operands as inputs, its type the
//! HLO category (`dot`, `loop fusion`). Host-thread XLA ops nest by start time and
//! count their self time; device ops count their duration. The programs' entry
//! parameters become static nodes holding their element counts as `params`.

use std::collections::{BTreeSet, HashMap};

use mlprof_model::{Event, Line, Plane, names};

use super::super::nesting::nest;
use super::super::profile::{OpRecord, OpSource, Profile, ROOT_PATH};
use super::{HostContext, flops_of};
use crate::hlo::{HloModule, HloModules};
use crate::tf_op::{OpCategory, parse_tf_op};
use crate::xstats::{self, StatKeys};

/// Stat names read off XLA op events, in [`StatKeys`] order.
const STATS: [&str; 5] = ["hlo_op", "hlo_module", "program_id", "tf_op", "flops"];

/// What an instruction contributes to each record, computed once per instruction.
#[derive(Clone, Copy, Debug)]
struct Named {
    node: u32,
    op_type: u32,
    scope: u32,
    code: u32,
    input_shapes: Option<u32>,
    output_bytes: i64,
}

/// Collects the XLA op records of a host (none when no event has an `hlo_op` stat).
pub(super) fn collect(profile: &mut Profile, context: &HostContext<'_>) {
    let host = context.host;
    if !host.planes.iter().any(|plane| plane.find_stat_key(STATS[0]).is_some()) {
        return;
    }
    let mut xla =
        Collector { modules: HloModules::of_host(host), cache: HashMap::new(), used: BTreeSet::new(), unnamed: 0 };
    for (index, plane) in host.planes.iter().enumerate() {
        let is_host = plane.name == names::HOST_PLANE;
        if !is_host && !plane.name.starts_with(names::DEVICE_PLANE_PREFIX) {
            continue;
        }
        let keys = StatKeys::new(plane, STATS);
        if keys.key(0).is_none() {
            continue;
        }
        let device = context.device(profile, index);
        let plane = XlaPlane { index, plane, keys, is_host, device };
        for (line_index, line) in plane.plane.lines.iter().enumerate() {
            xla.collect_line(profile, context, &plane, line_index, line);
        }
    }
    add_parameters(profile, &xla.modules, &xla.used);
    if xla.unnamed > 0 {
        let why =
            if xla.modules.is_empty() { "the profile holds no HLO programs" } else { "their HLO programs lack them" };
        profile.notes.push(format!(
            "{} XLA op events could not be named ({why}): they are shown as `<module>/<instruction>`.",
            xla.unnamed
        ));
    }
}

/// A plane that holds XLA ops: the host plane or a device plane with `hlo_op` stats.
struct XlaPlane<'a> {
    /// Its index in the host.
    index: usize,
    /// The plane.
    plane: &'a Plane,
    /// Its keys of [`STATS`].
    keys: StatKeys<5>,
    /// Whether it is the host plane (ops nest and count self time) or a device plane.
    is_host: bool,
    /// The plane's device string.
    device: u32,
}

/// The state of collecting one host's XLA ops.
struct Collector {
    /// The host's HLO programs.
    modules: HloModules,
    /// What each `(module, module label, hlo_op)` contributes, computed once.
    cache: HashMap<(Option<usize>, String, String), Named>,
    /// The programs that ran, with the device and track of (one of) their ops.
    used: BTreeSet<(usize, u32, u32)>,
    /// Op events whose instruction the programs lack.
    unnamed: usize,
}

impl Collector {
    /// Adds one record per XLA op of `line`.
    fn collect_line(
        &mut self,
        profile: &mut Profile,
        context: &HostContext<'_>,
        plane: &XlaPlane<'_>,
        line_index: usize,
        line: &Line,
    ) {
        let ops: Vec<usize> = line
            .iter()
            .filter(|event| is_xla_op(plane.plane, &plane.keys, event, plane.is_host))
            .map(|e| e.index())
            .collect();
        if ops.is_empty() {
            return;
        }
        let spans: Vec<(i64, i64)> =
            ops.iter().map(|&i| line.event(i).map_or((0, 0), |e| (e.start_ps(), e.duration_ps().max(0)))).collect();
        let children_ps = if plane.is_host { children_ps(&spans) } else { vec![0i64; ops.len()] };
        let track = context.track(profile, plane.index, line_index);
        for (at, &event_index) in ops.iter().enumerate() {
            let Some(event) = line.event(event_index) else { continue };
            let named = self.name(profile, plane, &event, track);
            profile.kinds.insert(OpSource::Xla);
            let (start_ps, duration_ps) = spans[at];
            let own_ps = duration_ps.saturating_sub(children_ps[at]);
            profile.records.push(OpRecord {
                node: named.node,
                op_type: named.op_type,
                scope: named.scope,
                code: named.code,
                device: plane.device,
                track,
                start_ps,
                duration_ps,
                step: context.steps.step(context.groups, plane.index, line_index, event_index),
                runs: 1,
                cpu_ps: if plane.is_host { own_ps } else { 0 },
                accelerator_ps: if plane.is_host { 0 } else { duration_ps },
                output_bytes: named.output_bytes,
                float_ops: flops_of(plane.plane, plane.keys.key(4), &event),
                input_shapes: named.input_shapes,
                ..OpRecord::default()
            });
        }
    }

    /// What the XLA op `event` on `track` contributes to its record: its instruction
    /// found in the host's programs (counted as unnamed when missing), named once per
    /// instruction; marks its program as used.
    fn name(&mut self, profile: &mut Profile, plane: &XlaPlane<'_>, event: &Event<'_>, track: u32) -> Named {
        let hlo_op = xstats::event_str(plane.plane, event, plane.keys.key(0)).unwrap_or("");
        let module_name = xstats::event_str(plane.plane, event, plane.keys.key(1));
        let program = xstats::event_int(plane.plane, event, plane.keys.key(2));
        let module_index = self.modules.find(program, module_name);
        let module = module_index.and_then(|m| self.modules.module(m));
        let module_label = module.map_or_else(|| module_name.unwrap_or("").to_string(), |m| m.name.clone());
        let instruction = module.and_then(|m| m.instruction(hlo_op));
        if instruction.is_none() {
            self.unnamed += 1;
        }
        let key = (module_index, module_label.clone(), hlo_op.to_string());
        let named = match self.cache.get(&key) {
            Some(named) => *named,
            None => {
                let named = name_op(profile, module, instruction, &module_label, hlo_op);
                self.cache.insert(key, named);
                named
            }
        };
        if let Some(m) = module_index {
            self.used.insert((m, plane.device, track));
        }
        named
    }
}

/// The time (ps) of each span's direct children, host-thread spans `(start,
/// duration)` nested by start time.
fn children_ps(spans: &[(i64, i64)]) -> Vec<i64> {
    let mut children_ps = vec![0i64; spans.len()];
    let nesting = nest(spans);
    for (at, parent) in nesting.parent.iter().enumerate() {
        if let Some(parent) = parent {
            children_ps[*parent] = children_ps[*parent].saturating_add(spans[at].1);
        }
    }
    children_ps
}

/// Whether `event` is an XLA op tfprof reads here: it has an `hlo_op` stat and is not
/// already a TensorFlow op of the host database (a `name:Type` event or one with `tf_op`).
fn is_xla_op(plane: &Plane, keys: &StatKeys<5>, event: &Event<'_>, is_host: bool) -> bool {
    if xstats::event_str(plane, event, keys.key(0)).is_none_or(str::is_empty) {
        return false;
    }
    if xstats::event_str(plane, event, keys.key(3)).is_some_and(|op| !op.is_empty()) {
        return false;
    }
    !is_host || parse_tf_op(xstats::event_name(plane, event)).category == OpCategory::Unknown
}

/// The names, paths and sizes of instruction `instruction` of `module` (or of an
/// instruction the profile cannot resolve).
fn name_op(
    profile: &mut Profile,
    module: Option<&HloModule>,
    instruction: Option<usize>,
    module_label: &str,
    hlo_op: &str,
) -> Named {
    let node_name = format!("{module_label}/{hlo_op}");
    let node = profile.strings.intern(&node_name);
    let fallback_scope = |profile: &mut Profile| {
        let (m, i) = (profile.strings.intern(module_label), profile.strings.intern(hlo_op));
        profile.scopes.extend(ROOT_PATH, [m, i])
    };
    let (Some(module), Some(index)) = (module, instruction) else {
        let op_type = hlo_op.trim_end_matches(|c: char| c.is_ascii_digit()).trim_end_matches('.');
        return Named {
            node,
            op_type: profile.strings.intern(if op_type.is_empty() { hlo_op } else { op_type }),
            scope: fallback_scope(profile),
            code: ROOT_PATH,
            input_shapes: None,
            output_bytes: 0,
        };
    };
    let instruction = &module.instructions[index];
    let scope = if instruction.op_name.is_empty() {
        fallback_scope(profile)
    } else {
        profile.scope_of_name(ROOT_PATH, &instruction.op_name)
    };
    let mut frames = module.stack(instruction.stack_frame_id);
    if frames.is_empty()
        && let Some((file, line)) = &instruction.source
    {
        frames.push(format!("{file}:{line}"));
    }
    profile.availability.python_stacks |= !frames.is_empty();
    let code = frames.iter().fold(ROOT_PATH, |path, frame| {
        let component = profile.strings.intern(frame);
        profile.code.child(path, component)
    });
    let operands: Vec<&crate::hlo::HloInstruction> =
        instruction.operands.iter().filter_map(|&i| module.instructions.get(i)).collect();
    let input_shapes = (!operands.is_empty()).then(|| {
        profile.availability.input_shapes = true;
        let text: Vec<String> = operands.iter().enumerate().map(|(i, op)| format!("{i}:{}", op.shape_text())).collect();
        profile.strings.intern(&text.join("|"))
    });
    if !operands.is_empty() {
        profile.availability.graph_inputs = true;
        let inputs: Vec<u32> =
            operands.iter().map(|op| profile.strings.intern(&format!("{module_label}/{}", op.name))).collect();
        profile.inputs.entry(node).or_insert(inputs);
    }
    let output_bytes = instruction.output_bytes.unwrap_or(0);
    profile.availability.output_bytes |= instruction.output_bytes.is_some();
    Named { node, op_type: profile.strings.intern(&instruction.category()), scope, code, input_shapes, output_bytes }
}

/// One static record per entry parameter of every program that ran, holding its
/// element count as `params`.
fn add_parameters(profile: &mut Profile, modules: &HloModules, used: &BTreeSet<(usize, u32, u32)>) {
    let mut done = BTreeSet::new();
    for &(module_index, device, track) in used {
        if !done.insert(module_index) {
            continue;
        }
        let Some(module) = modules.module(module_index) else { continue };
        for instruction in module.instructions.iter().filter(|i| i.in_entry && i.opcode == "parameter") {
            let node = profile.strings.intern(&format!("{}/{}", module.name, instruction.name));
            let scope = if instruction.op_name.is_empty() {
                let (m, i) = (profile.strings.intern(&module.name), profile.strings.intern(&instruction.name));
                profile.scopes.extend(ROOT_PATH, [m, i])
            } else {
                profile.scope_of_name(ROOT_PATH, &instruction.op_name)
            };
            profile.availability.params = true;
            profile.records.push(OpRecord {
                node,
                op_type: profile.strings.intern("parameter"),
                scope,
                device,
                track,
                is_static: true,
                params: instruction.element_count(),
                ..OpRecord::default()
            });
        }
    }
}
