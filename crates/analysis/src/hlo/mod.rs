//! The compiled XLA programs an XSpace carries (`/host:metadata` plane, one event
//! metadata per program with an `Hlo Proto` stat): for each HLO instruction its
//! framework op name (`jit(train_step)/jvp()/dot_general`), opcode and fusion kind,
//! output shape, operands and the Python stack that created it.
//!
//! The one design decision to know: only what tfprof's views and the XLA device op
//! metrics need is decoded, field by field from the wire format (`xla/service/hlo.proto`, `xla/xla_data.proto`), by
//! the lenient reader of `mlprof_formats::wire` (`lenient_fields`), and anything
//! missing or malformed just leaves that fact unknown. XLA op events name
//! their instruction (`hlo_op`) and program (`program_id`, else `hlo_module`).

use std::collections::HashMap;

use mlprof_formats::wire::{WireValue, lenient_fields, push_ints};
use mlprof_model::{Host, StatValue, names};

mod cost;

pub(crate) use cost::HloCost;

/// The programs of one host, found by program id or module name.
#[derive(Debug, Default)]
pub(crate) struct HloModules {
    modules: Vec<HloModule>,
    by_program: HashMap<i64, usize>,
    by_name: HashMap<String, usize>,
}

/// One compiled program.
#[derive(Debug, Default)]
pub(crate) struct HloModule {
    /// Module name (`jit_train_step`).
    pub name: String,
    /// Instructions of all computations, entry computation included.
    pub instructions: Vec<HloInstruction>,
    by_name: HashMap<String, usize>,
    /// Per computation id, its instructions (a range of `instructions`).
    computations: HashMap<i64, std::ops::Range<usize>>,
    /// Per computation id, its root instruction (an index into `instructions`).
    roots: HashMap<i64, usize>,
    frames: StackFrames,
}

/// One HLO instruction.
#[derive(Debug, Default)]
pub(crate) struct HloInstruction {
    /// Instruction name, unique in its module (`dot.2`, `ynn_fusion.6`).
    pub name: String,
    /// Opcode (`dot`, `fusion`, `parameter`).
    pub opcode: String,
    /// Fusion kind of a fusion (`kLoop`, `kOutput`, …), else empty.
    pub fusion_kind: String,
    /// The framework op it was lowered from (metadata `op_name`), possibly empty.
    pub op_name: String,
    /// That op's type (metadata `op_type`, `dot_general`, `MatMul`), possibly empty.
    pub op_type: String,
    /// Metadata `deduplicated_name`: the name shared by instructions XLA deduplicated
    /// into one (empty when none).
    pub deduplicated_name: String,
    /// Metadata `stack_frame_id` (0 when none).
    pub stack_frame_id: i64,
    /// Metadata `source_file` and `source_line` when the producer set them.
    pub source: Option<(String, i64)>,
    /// Operands, as indices into the module's instructions.
    pub operands: Vec<usize>,
    /// Dimensions of the output (empty for scalars and tuples).
    pub dims: Vec<i64>,
    /// The output's element type (XLA `PrimitiveType`: 11 is F32); [`TUPLE`] for a tuple.
    pub element_type: i64,
    /// A tuple output's elements, in order (empty for an array).
    pub tuple_shapes: Vec<ArrayShape>,
    /// Bytes of the output when the element types are known.
    pub output_bytes: Option<i64>,
    /// Whether it belongs to the entry computation.
    pub in_entry: bool,
    /// Ids of the computations it calls (a fusion's fused computation, …).
    pub called_computation_ids: Vec<i64>,
    /// The contracted dimensions of the left operand of a dot (or of a cuBLAS GEMM
    /// custom call, from its backend config).
    pub lhs_contracting_dims: Vec<i64>,
    /// A convolution's (or cuDNN convolution call's) dimension numbers.
    pub conv: Option<ConvDims>,
    /// A convolution's feature and batch group counts (1 when unset).
    pub group_counts: (i64, i64),
    /// The window of a convolution, reduce-window or select-and-scatter.
    pub window: Vec<WindowDim>,
    /// The `dimensions` attribute: reduced, broadcast or concatenated dimensions.
    pub dimensions: Vec<i64>,
    /// A parameter's number in its computation.
    pub parameter_number: i64,
    /// A custom call's target (`__cublas$lt$matmul`, `__cudnn$convForward`).
    pub custom_call_target: String,
    /// A custom call's own cost estimate (`cost_estimate_json` in its backend config):
    /// FLOPs and bytes accessed, each when given.
    pub cost_estimate: (Option<i64>, Option<i64>),
}

/// One array of a tuple-shaped output: element type and dimensions (a nested tuple
/// has type [`TUPLE`] and no dimensions).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ArrayShape {
    /// XLA `PrimitiveType`.
    pub element_type: i64,
    /// Dimensions.
    pub dims: Vec<i64>,
}

/// One dimension of an XLA `Window` (sizes in elements; strides and dilations 1 when
/// unset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WindowDim {
    /// Window size.
    pub size: i64,
    /// Stride.
    pub stride: i64,
    /// Padding before the first element.
    pub padding_low: i64,
    /// Padding after the last element.
    pub padding_high: i64,
    /// Dilation of the window.
    pub window_dilation: i64,
    /// Dilation of the input.
    pub base_dilation: i64,
}

/// XLA's `ConvolutionDimensionNumbers`: which dimension of the input, the kernel and
/// the output holds batch, features and space.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ConvDims {
    /// Input batch dimension.
    pub input_batch: i64,
    /// Input feature dimension.
    pub input_feature: i64,
    /// Input spatial dimensions.
    pub input_spatial: Vec<i64>,
    /// Kernel spatial dimensions.
    pub kernel_spatial: Vec<i64>,
    /// Output feature dimension.
    pub output_feature: i64,
    /// Output spatial dimensions.
    pub output_spatial: Vec<i64>,
}

impl HloInstruction {
    /// XProf-style category: `<kind> fusion` for fusions (`loop fusion`), else the
    /// opcode.
    pub(crate) fn category(&self) -> String {
        if self.opcode == "fusion" && !self.fusion_kind.is_empty() {
            let kind = self.fusion_kind.strip_prefix('k').unwrap_or(&self.fusion_kind);
            format!("{} fusion", kind.to_ascii_lowercase())
        } else {
            self.opcode.clone()
        }
    }

    /// The category XProf shows for this instruction (XLA's
    /// `HloInstruction::ToCategory`): `loop fusion`, `input fusion`, `output fusion` or
    /// `custom fusion` for fusions, `data formatting` for copies, transposes, bitcasts and
    /// reshapes, `non-fusion elementwise` for elementwise ops, else the opcode.
    pub(crate) fn xprof_category(&self) -> &str {
        if self.opcode == "fusion" {
            return match self.fusion_kind.as_str() {
                "kLoop" => "loop fusion",
                "kInput" => "input fusion",
                "kOutput" => "output fusion",
                "kCustom" => "custom fusion",
                _ => &self.opcode,
            };
        }
        if DATA_FORMATTING_OPCODES.contains(&self.opcode.as_str()) {
            "data formatting"
        } else if ELEMENTWISE_OPCODES.contains(&self.opcode.as_str()) {
            "non-fusion elementwise"
        } else {
            &self.opcode
        }
    }

    /// The framework op as XProf names it for this instruction (XLA's `TfOpFullname`):
    /// `op_name:op_type`; empty when the metadata names no op; `XLA_Args` and
    /// `XLA_Retvals` without a type are their own type.
    pub(crate) fn tf_op_fullname(&self) -> String {
        if self.op_type.is_empty() {
            if self.op_name.is_empty() {
                return String::new();
            }
            if self.op_name == "XLA_Args" || self.op_name == "XLA_Retvals" {
                return format!("{0}:{0}", self.op_name);
            }
        }
        format!("{}:{}", self.op_name, self.op_type)
    }

    /// The output shape as tfprof prints shapes: dimensions joined by `x`, `()` for a
    /// scalar.
    pub(crate) fn shape_text(&self) -> String {
        if self.dims.is_empty() {
            "()".to_string()
        } else {
            self.dims.iter().map(i64::to_string).collect::<Vec<_>>().join("x")
        }
    }

    /// Number of elements of the output (0 when a dimension is negative or the
    /// product overflows).
    pub(crate) fn element_count(&self) -> i64 {
        self.dims.iter().try_fold(1i64, |acc, &d| if d < 0 { None } else { acc.checked_mul(d) }).unwrap_or(0)
    }
}

/// The module's `StackFrameIndexProto`: interned files, functions, locations and
/// frames (ids are 1-based).
#[derive(Debug, Default)]
struct StackFrames {
    files: Vec<String>,
    functions: Vec<String>,
    /// `(file id, function id, line)`.
    locations: Vec<(i64, i64, i64)>,
    /// `(location id, parent frame id)`.
    frames: Vec<(i64, i64)>,
}

/// Opcodes XLA's `ToCategory` calls `data formatting`.
const DATA_FORMATTING_OPCODES: [&str; 4] = ["transpose", "copy", "reshape", "dynamic-reshape"];

/// Opcodes of instructions XLA counts as elementwise (`HloInstruction::IsOpElementwise`,
/// plus constants, `rng` and `map`, whose instruction classes say so).
const ELEMENTWISE_OPCODES: [&str; 52] = [
    "abs",
    "round-nearest-afz",
    "round-nearest-even",
    "ceil",
    "count-leading-zeros",
    "convert",
    "bitcast-convert",
    "cosine",
    "erf",
    "exponential",
    "exponential-minus-one",
    "floor",
    "imag",
    "is-finite",
    "log",
    "log-plus-one",
    "not",
    "negate",
    "popcnt",
    "real",
    "reduce-precision",
    "rsqrt",
    "logistic",
    "sign",
    "sine",
    "sqrt",
    "cbrt",
    "tan",
    "tanh",
    "add",
    "atan2",
    "compare",
    "complex",
    "divide",
    "maximum",
    "minimum",
    "multiply",
    "power",
    "remainder",
    "subtract",
    "and",
    "or",
    "xor",
    "shift-left",
    "shift-right-arithmetic",
    "shift-right-logical",
    "stochastic-convert",
    "select",
    "clamp",
    "constant",
    "rng",
    "map",
];

/// The deepest Python stack mlprof follows (guards against cyclic frame ids).
const MAX_STACK_DEPTH: usize = 256;

/// The HLO instruction an `hlo_op` stat names: the innermost of its `::`-joined
/// annotations (`fusion.3` of `while.1::fusion.3`), as XProf's `GpuEventStats` takes it.
pub(crate) fn innermost_hlo_op(hlo_op: &str) -> &str {
    hlo_op.rsplit("::").next().unwrap_or(hlo_op)
}

impl HloModules {
    /// The programs the GPU kernels of `host` need: every program, decoded, when a GPU
    /// plane has XLA kernels (an `hlo_op` stat), else none (no decoding).
    pub(crate) fn for_gpu_kernels(host: &Host) -> HloModules {
        let has_xla = host.planes.iter().any(|plane| plane.is_gpu() && plane.find_stat_key("hlo_op").is_some());
        if has_xla { HloModules::of_host(host) } else { HloModules::default() }
    }

    /// Decodes every `Hlo Proto` of the host's `/host:metadata` plane.
    pub(crate) fn of_host(host: &Host) -> HloModules {
        let mut result = HloModules::default();
        let Some(plane) = host.plane(names::METADATA_PLANE) else { return result };
        let (Some(proto_key), program_key) = (plane.find_stat_key("Hlo Proto"), plane.find_stat_key("program_id"))
        else {
            return result;
        };
        for metadata in &plane.event_metadata {
            let proto = plane.metadata_stat(metadata, proto_key).and_then(|value| match value {
                StatValue::Bytes(r) | StatValue::Str(r) => Some(plane.metadata_stats.bytes(r)),
                _ => None,
            });
            let Some(module) = proto.and_then(decode_hlo_proto) else { continue };
            let index = result.modules.len();
            // XProf's `ParseHloProtosFromXSpace`: the `program_id` stat, else the
            // metadata's own id.
            let program = program_key
                .and_then(|key| plane.metadata_stat(metadata, key))
                .and_then(crate::xstats::as_int)
                .unwrap_or(metadata.id);
            result.by_program.entry(program).or_insert(index);
            result.by_name.entry(module.name.clone()).or_insert(index);
            result.modules.push(module);
        }
        result
    }

    /// Whether no program was decoded.
    pub(crate) fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }

    /// The module of program `program_id`, else the one named `module_name`.
    pub(crate) fn find(&self, program_id: Option<i64>, module_name: Option<&str>) -> Option<usize> {
        program_id
            .and_then(|id| self.by_program.get(&id))
            .or_else(|| module_name.and_then(|name| self.by_name.get(name)))
            .copied()
    }

    /// The module of program `program_id` only (XProf's `GetHloModule`: no fallback to
    /// the module name).
    pub(crate) fn by_program_id(&self, program_id: i64) -> Option<&HloModule> {
        self.by_program.get(&program_id).and_then(|&index| self.modules.get(index))
    }

    /// The instruction `name` of program `program_id` (XProf's `GetHloInstruction`).
    pub(crate) fn instruction(&self, program_id: i64, name: &str) -> Option<&HloInstruction> {
        self.locate(program_id, name).and_then(|(module, index)| module.instructions.get(index))
    }

    /// The module of program `program_id` and the index of its instruction `name` in
    /// it, for [`HloModule::cost`].
    pub(crate) fn locate(&self, program_id: i64, name: &str) -> Option<(&HloModule, usize)> {
        let module = self.by_program_id(program_id)?;
        module.instruction(name).filter(|&index| index < module.instructions.len()).map(|index| (module, index))
    }

    /// Module `index`.
    pub(crate) fn module(&self, index: usize) -> Option<&HloModule> {
        self.modules.get(index)
    }
}

impl HloModule {
    /// The instruction called `name`, as an index into `instructions`.
    pub(crate) fn instruction(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The Python stack of stack frame `frame_id`, outermost first, each frame as
    /// `file:line:function`; empty when the module has no such frame.
    pub(crate) fn stack(&self, frame_id: i64) -> Vec<String> {
        let mut stack = Vec::new();
        let mut at = frame_id;
        while at > 0 && stack.len() < MAX_STACK_DEPTH {
            let Some(&(location, parent)) = usize::try_from(at - 1).ok().and_then(|i| self.frames.frames.get(i)) else {
                break;
            };
            if let Some(&(file, function, line)) =
                location.checked_sub(1).and_then(|i| usize::try_from(i).ok()).and_then(|i| self.frames.locations.get(i))
            {
                let text = |table: &[String], id: i64| {
                    id.checked_sub(1)
                        .and_then(|i| usize::try_from(i).ok())
                        .and_then(|i| table.get(i))
                        .cloned()
                        .unwrap_or_default()
                };
                stack.push(format!(
                    "{}:{line}:{}",
                    text(&self.frames.files, file),
                    text(&self.frames.functions, function)
                ));
            }
            at = parent;
        }
        stack.reverse();
        stack
    }
}

/// `HloProto.hlo_module` (field 1) decoded; `None` when there is none.
fn decode_hlo_proto(proto: &[u8]) -> Option<HloModule> {
    let module = lenient_fields(proto).find(|(field, _)| *field == 1)?.1.bytes()?;
    let mut result = HloModule::default();
    let mut entry_name = "";
    let mut entry_id = None;
    let mut computations: Vec<Computation<'_>> = Vec::new();
    for (field, value) in lenient_fields(module) {
        match field {
            1 => result.name = value.text().to_string(),
            2 => entry_name = value.text(),
            3 => computations.push(decode_computation(value.bytes().unwrap_or(&[]))),
            6 => entry_id = value.int(),
            17 => result.frames = decode_stack_frames(value.bytes().unwrap_or(&[])),
            _ => {}
        }
    }
    let mut by_id: HashMap<i64, usize> = HashMap::new();
    let mut operand_ids: Vec<Vec<i64>> = Vec::new();
    let mut root_ids: Vec<(i64, i64)> = Vec::new();
    for Computation { name, id, root_id, instructions } in computations {
        let in_entry = name == entry_name || (entry_id.is_some() && id == entry_id);
        if let Some(id) = id {
            let first = result.instructions.len();
            result.computations.entry(id).or_insert(first..first + instructions.len());
            // The proto's `root_id`, else its last instruction (XLA writes post order).
            let root = root_id.or_else(|| instructions.last().map(|(_, xla_id, _)| *xla_id));
            root_ids.extend(root.map(|root| (id, root)));
        }
        for (mut instruction, xla_id, operands) in instructions {
            instruction.in_entry = in_entry;
            let index = result.instructions.len();
            by_id.entry(xla_id).or_insert(index);
            result.by_name.entry(instruction.name.clone()).or_insert(index);
            result.instructions.push(instruction);
            operand_ids.push(operands);
        }
    }
    for (instruction, operands) in result.instructions.iter_mut().zip(operand_ids) {
        instruction.operands = operands.iter().filter_map(|id| by_id.get(id).copied()).collect();
    }
    for (computation, root) in root_ids {
        if let Some(&index) = by_id.get(&root) {
            result.roots.entry(computation).or_insert(index);
        }
    }
    Some(result)
}

/// One decoded `HloComputationProto`.
struct Computation<'a> {
    name: &'a str,
    id: Option<i64>,
    root_id: Option<i64>,
    /// Each instruction with its XLA id and its operands' XLA ids.
    instructions: Vec<(HloInstruction, i64, Vec<i64>)>,
}

fn decode_computation(message: &[u8]) -> Computation<'_> {
    let mut computation = Computation { name: "", id: None, root_id: None, instructions: Vec::new() };
    for (field, value) in lenient_fields(message) {
        match field {
            1 => computation.name = value.text(),
            2 => computation.instructions.push(decode_instruction(value.bytes().unwrap_or(&[]))),
            5 => computation.id = value.int(),
            6 => computation.root_id = value.int(),
            _ => {}
        }
    }
    computation
}

/// One `HloInstructionProto` with its XLA id and its operands' XLA ids.
fn decode_instruction(message: &[u8]) -> (HloInstruction, i64, Vec<i64>) {
    let mut instruction = HloInstruction { group_counts: (1, 1), ..HloInstruction::default() };
    let (mut id, mut operands) = (0, Vec::new());
    let mut backend_config = "";
    for (field, value) in lenient_fields(message) {
        match field {
            1 => instruction.name = value.text().to_string(),
            2 => instruction.opcode = value.text().to_string(),
            3 => {
                let shape = decode_shape(value.bytes().unwrap_or(&[]), 0);
                instruction.dims = shape.dims;
                instruction.element_type = shape.element_type;
                instruction.output_bytes = shape.bytes;
                instruction.tuple_shapes = shape.tuple_shapes;
            }
            7 => decode_metadata(value.bytes().unwrap_or(&[]), &mut instruction),
            9 => instruction.parameter_number = value.int().unwrap_or(0),
            11 => instruction.fusion_kind = value.text().to_string(),
            14 => push_ints(value, &mut instruction.dimensions),
            15 => instruction.window = decode_window(value.bytes().unwrap_or(&[])),
            16 => instruction.conv = Some(decode_conv_dims(value.bytes().unwrap_or(&[]))),
            28 => instruction.custom_call_target = value.text().to_string(),
            50 => instruction.group_counts.0 = value.int().filter(|&n| n > 0).unwrap_or(1),
            58 => instruction.group_counts.1 = value.int().filter(|&n| n > 0).unwrap_or(1),
            30 => {
                for (f, v) in lenient_fields(value.bytes().unwrap_or(&[])) {
                    if f == 1 {
                        push_ints(v, &mut instruction.lhs_contracting_dims);
                    }
                }
            }
            35 => id = value.int().unwrap_or(0),
            36 => push_ints(value, &mut operands),
            38 => push_ints(value, &mut instruction.called_computation_ids),
            43 => backend_config = value.text(),
            _ => {}
        }
    }
    if instruction.custom_call_target.starts_with(CUBLAS_TARGET_PREFIX) {
        instruction.lhs_contracting_dims = gemm_lhs_contracting_dims(backend_config);
    }
    if instruction.opcode == "custom-call" {
        instruction.cost_estimate = cost_estimate(backend_config);
    }
    (instruction, id, operands)
}

/// Custom-call targets of XLA's cuBLAS GEMMs (`__cublas$gemm`, `__cublas$lt$matmul`).
const CUBLAS_TARGET_PREFIX: &str = "__cublas$";

/// A custom call's own cost estimate in its backend config (JAX and Pallas kernels
/// declare `"cost_estimate_json": "{\"flops\": N, …, \"bytes_accessed\": M}"`), read
/// as XLA reads it: the first integer after each key, past the `cost_estimate_json`
/// marker.
fn cost_estimate(backend_config: &str) -> (Option<i64>, Option<i64>) {
    let Some(at) = backend_config.find("cost_estimate_json") else { return (None, None) };
    let estimate = &backend_config[at..];
    let number_after = |key: &str| {
        let rest = &estimate[estimate.find(key)? + key.len()..];
        let start = rest.find(|c: char| c.is_ascii_digit() || c == '-')?;
        let digits: String = rest[start..]
            .char_indices()
            .take_while(|&(i, c)| c.is_ascii_digit() || (i == 0 && c == '-'))
            .map(|(_, c)| c)
            .collect();
        digits.parse::<i64>().ok().filter(|&n| n >= 0)
    };
    (number_after("flops"), number_after("bytes_accessed"))
}

/// The left operand's contracted dimensions of a cuBLAS GEMM, from the
/// `gemm_backend_config.dot_dimension_numbers` of its JSON backend config (empty when
/// the config says nothing readable).
fn gemm_lhs_contracting_dims(backend_config: &str) -> Vec<i64> {
    let Ok(config) = serde_json::from_str::<serde_json::Value>(backend_config) else { return Vec::new() };
    let dims = &config["gemm_backend_config"]["dot_dimension_numbers"]["lhs_contracting_dimensions"];
    dims.as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d.as_i64().or_else(|| d.as_str().and_then(|s| s.parse().ok())))
        .collect()
}

/// `ConvolutionDimensionNumbers` (`xla_data.proto`).
fn decode_conv_dims(message: &[u8]) -> ConvDims {
    let mut dims = ConvDims::default();
    for (field, value) in lenient_fields(message) {
        match field {
            6 => push_ints(value, &mut dims.kernel_spatial),
            7 => dims.input_batch = value.int().unwrap_or(0),
            8 => dims.input_feature = value.int().unwrap_or(0),
            10 => dims.output_feature = value.int().unwrap_or(0),
            11 => push_ints(value, &mut dims.input_spatial),
            12 => push_ints(value, &mut dims.output_spatial),
            _ => {}
        }
    }
    dims
}

/// `Window` (`xla_data.proto`): one `WindowDimension` per dimension.
fn decode_window(message: &[u8]) -> Vec<WindowDim> {
    let at_least_one = |v: i64| if v > 0 { v } else { 1 };
    lenient_fields(message)
        .filter(|(field, _)| *field == 1)
        .map(|(_, value)| {
            let mut dim =
                WindowDim { size: 1, stride: 1, padding_low: 0, padding_high: 0, window_dilation: 1, base_dilation: 1 };
            for (field, v) in lenient_fields(value.bytes().unwrap_or(&[])) {
                let n = v.int().unwrap_or(0);
                match field {
                    1 => dim.size = n,
                    2 => dim.stride = at_least_one(n),
                    3 => dim.padding_low = n,
                    4 => dim.padding_high = n,
                    5 => dim.window_dilation = at_least_one(n),
                    6 => dim.base_dilation = at_least_one(n),
                    _ => {}
                }
            }
            dim
        })
        .collect()
}

fn decode_metadata(message: &[u8], instruction: &mut HloInstruction) {
    let (mut file, mut line) = ("", None);
    for (field, value) in lenient_fields(message) {
        match field {
            1 => instruction.op_type = value.text().to_string(),
            2 => instruction.op_name = value.text().to_string(),
            3 => file = value.text(),
            4 => line = value.int(),
            12 => instruction.deduplicated_name = value.text().to_string(),
            15 => instruction.stack_frame_id = value.int().unwrap_or(0),
            _ => {}
        }
    }
    if !file.is_empty() {
        instruction.source = Some((file.to_string(), line.unwrap_or(0)));
    }
}

/// A decoded `ShapeProto`: element type, dimensions and total bytes (tuples: the sum
/// of their elements).
struct Shape {
    element_type: i64,
    dims: Vec<i64>,
    bytes: Option<i64>,
    /// A tuple's elements.
    tuple_shapes: Vec<ArrayShape>,
}

/// Tuples nest at most this deep before mlprof stops counting their bytes.
const MAX_TUPLE_DEPTH: usize = 8;

fn decode_shape(message: &[u8], depth: usize) -> Shape {
    let (mut element_type, mut dims, mut tuple_bytes, mut is_tuple) = (0, Vec::new(), Some(0i64), false);
    let mut tuple_shapes = Vec::new();
    for (field, value) in lenient_fields(message) {
        match field {
            2 => element_type = value.int().unwrap_or(0),
            3 => push_ints(value, &mut dims),
            4 => {
                is_tuple = true;
                let element = if depth < MAX_TUPLE_DEPTH {
                    let element = decode_shape(value.bytes().unwrap_or(&[]), depth + 1);
                    tuple_shapes.push(ArrayShape { element_type: element.element_type, dims: element.dims });
                    element.bytes
                } else {
                    None
                };
                tuple_bytes = tuple_bytes.zip(element).and_then(|(a, b)| a.checked_add(b));
            }
            _ => {}
        }
    }
    if is_tuple || element_type == TUPLE {
        return Shape { element_type: TUPLE, dims: Vec::new(), bytes: tuple_bytes, tuple_shapes };
    }
    let count = dims.iter().try_fold(1i64, |acc, &d| if d < 0 { None } else { acc.checked_mul(d) });
    let bytes = element_bits(element_type)
        .zip(count)
        .and_then(|(bits, n)| n.checked_mul(bits))
        .map(|b| b.saturating_add(7) / 8);
    Shape { element_type, dims, bytes, tuple_shapes }
}

/// `PrimitiveType.TUPLE`.
pub(crate) const TUPLE: i64 = 13;

/// Bits an element of an XLA `PrimitiveType` takes in memory (`None` for tokens, opaque
/// and unknown types).
pub(crate) fn element_bits(element_type: i64) -> Option<i64> {
    Some(match element_type {
        1 | 2 | 6 => 8,                             // PRED, S8, U8
        3 | 7 | 10 | 16 => 16,                      // S16, U16, F16, BF16
        4 | 8 | 11 => 32,                           // S32, U32, F32
        5 | 9 | 12 | 15 => 64,                      // S64, U64, F64, C64
        18 => 128,                                  // C128
        19 | 20 | 23 | 24 | 25 | 28 | 29 | 31 => 8, // 8-bit floats
        21 | 22 | 30 => 4,                          // S4, U4, F4E2M1FN
        26 | 27 => 2,                               // S2, U2
        _ => return None,
    })
}

fn decode_stack_frames(message: &[u8]) -> StackFrames {
    let mut frames = StackFrames::default();
    for (field, value) in lenient_fields(message) {
        let sub = value.bytes().unwrap_or(&[]);
        match field {
            1 => frames.files.push(value.text().to_string()),
            2 => frames.functions.push(value.text().to_string()),
            3 => {
                let (mut file, mut function, mut line) = (0, 0, 0);
                for (f, v) in lenient_fields(sub) {
                    match (f, v) {
                        (1, WireValue::Varint(x)) => file = x as i64,
                        (2, WireValue::Varint(x)) => function = x as i64,
                        (3, WireValue::Varint(x)) => line = x as i64,
                        _ => {}
                    }
                }
                frames.locations.push((file, function, line));
            }
            4 => {
                let (mut location, mut parent) = (0, 0);
                for (f, v) in lenient_fields(sub) {
                    match (f, v) {
                        (1, WireValue::Varint(x)) => location = x as i64,
                        (2, WireValue::Varint(x)) => parent = x as i64,
                        _ => {}
                    }
                }
                frames.frames.push((location, parent));
            }
            _ => {}
        }
    }
    frames
}

#[cfg(test)]
pub(crate) mod tests {
    use mlprof_model::{EventMetadata, Plane, StatMetadata};

    use mlprof_formats::wire::WireWriter;

    use super::*;

    /// Test encoder: a varint field.
    fn int_field(out: &mut Vec<u8>, field: u32, v: i64) {
        let mut w = WireWriter { buf: std::mem::take(out) };
        w.int64_always(field, v);
        *out = w.buf;
    }

    /// Test encoder: a length-delimited field.
    fn bytes_field(out: &mut Vec<u8>, field: u32, data: &[u8]) {
        let mut w = WireWriter { buf: std::mem::take(out) };
        w.bytes_always(field, data);
        *out = w.buf;
    }

    /// A serialized `HloProto` of module `name`: an entry computation `main` with a
    /// parameter `p` (f32[2,3], op name `x`), and `dot.1` (f32[2,2], op name
    /// `jit(f)/dot_general`, created at frame 2 = `f` called from `<module>`) reading
    /// `p` twice, contracting dimension 1; a second computation with a loop fusion
    /// `fusion.1`.
    pub(crate) fn sample_hlo_proto(name: &str) -> Vec<u8> {
        let shape = |dims: &[i64]| {
            let mut s = Vec::new();
            int_field(&mut s, 2, 11);
            for &d in dims {
                int_field(&mut s, 3, d);
            }
            s
        };
        let instruction = |name: &str, opcode: &str, id: i64, dims: &[i64], op_name: &str, frame: i64, ops: &[i64]| {
            let mut i = Vec::new();
            bytes_field(&mut i, 1, name.as_bytes());
            bytes_field(&mut i, 2, opcode.as_bytes());
            bytes_field(&mut i, 3, &shape(dims));
            let mut metadata = Vec::new();
            bytes_field(&mut metadata, 2, op_name.as_bytes());
            int_field(&mut metadata, 15, frame);
            bytes_field(&mut i, 7, &metadata);
            int_field(&mut i, 35, id);
            for &op in ops {
                int_field(&mut i, 36, op);
            }
            i
        };
        let mut entry = Vec::new();
        bytes_field(&mut entry, 1, b"main");
        bytes_field(&mut entry, 2, &instruction("p", "parameter", 1, &[2, 3], "x", 0, &[]));
        let mut dot = instruction("dot.1", "dot", 2, &[2, 2], "jit(f)/dot_general", 2, &[1, 1]);
        let mut dot_dims = Vec::new();
        int_field(&mut dot_dims, 1, 1);
        bytes_field(&mut dot, 30, &dot_dims);
        bytes_field(&mut entry, 2, &dot);
        let mut other = Vec::new();
        bytes_field(&mut other, 1, b"fused");
        let mut fusion = instruction("fusion.1", "fusion", 3, &[4], "", 0, &[]);
        bytes_field(&mut fusion, 11, b"kLoop");
        bytes_field(&mut other, 2, &fusion);
        let mut frames = Vec::new();
        bytes_field(&mut frames, 1, b"train.py");
        bytes_field(&mut frames, 2, b"<module>");
        bytes_field(&mut frames, 2, b"f");
        let location = |function: i64, line: i64| {
            let mut l = Vec::new();
            int_field(&mut l, 1, 1);
            int_field(&mut l, 2, function);
            int_field(&mut l, 3, line);
            l
        };
        bytes_field(&mut frames, 3, &location(1, 10));
        bytes_field(&mut frames, 3, &location(2, 4));
        let frame = |location: i64, parent: i64| {
            let mut f = Vec::new();
            int_field(&mut f, 1, location);
            int_field(&mut f, 2, parent);
            f
        };
        bytes_field(&mut frames, 4, &frame(1, 0));
        bytes_field(&mut frames, 4, &frame(2, 1));
        let mut module = Vec::new();
        bytes_field(&mut module, 1, name.as_bytes());
        bytes_field(&mut module, 2, b"main");
        bytes_field(&mut module, 3, &entry);
        bytes_field(&mut module, 3, &other);
        bytes_field(&mut module, 17, &frames);
        let mut proto = Vec::new();
        bytes_field(&mut proto, 1, &module);
        proto
    }

    /// A `/host:metadata` plane holding [`sample_hlo_proto`] `jit_f` as program
    /// `program_id`.
    pub(crate) fn sample_metadata_plane(program_id: i64) -> Plane {
        let mut metadata = Plane::new(0, names::METADATA_PLANE);
        metadata.stat_metadata = ["Hlo Proto", "program_id"]
            .iter()
            .enumerate()
            .map(|(i, name)| StatMetadata { id: i as i64 + 1, name: (*name).into(), description: String::new() })
            .collect();
        let proto = metadata.metadata_stats.store_bytes(&sample_hlo_proto("jit_f")).expect("fits");
        metadata.metadata_stats.push(0, StatValue::Bytes(proto));
        metadata.metadata_stats.push(1, StatValue::Int(program_id));
        metadata.event_metadata.push(EventMetadata {
            id: 1,
            name: format!("jit_f({program_id})"),
            stats: 0..2,
            ..EventMetadata::default()
        });
        metadata
    }

    #[test]
    fn decodes_instructions_operands_shapes_and_stacks() {
        let module = decode_hlo_proto(&sample_hlo_proto("jit_f")).expect("module");
        assert_eq!(module.name, "jit_f");
        let dot = &module.instructions[module.instruction("dot.1").expect("dot")];
        assert_eq!((dot.op_name.as_str(), dot.category(), dot.in_entry), ("jit(f)/dot_general", "dot".into(), true));
        assert_eq!((dot.shape_text(), dot.output_bytes, dot.element_count()), ("2x2".into(), Some(16), 4));
        let p = module.instruction("p").expect("p");
        assert_eq!(dot.operands, [p, p]);
        assert_eq!(module.stack(dot.stack_frame_id), ["train.py:10:<module>", "train.py:4:f"]);
        assert!(module.stack(0).is_empty() && module.stack(99).is_empty());
        let fusion = &module.instructions[module.instruction("fusion.1").expect("fusion")];
        assert_eq!((fusion.category(), fusion.in_entry), ("loop fusion".into(), false));
    }

    #[test]
    fn categories_and_framework_ops_as_xprof_names_them() {
        let of = |opcode: &str, fusion_kind: &str| HloInstruction {
            opcode: opcode.into(),
            fusion_kind: fusion_kind.into(),
            ..HloInstruction::default()
        };
        let cases = [
            (of("fusion", "kLoop"), "loop fusion"),
            (of("fusion", "kInput"), "input fusion"),
            (of("fusion", "kOutput"), "output fusion"),
            (of("fusion", "kCustom"), "custom fusion"),
            (of("fusion", ""), "fusion"),
            (of("copy", ""), "data formatting"),
            (of("transpose", ""), "data formatting"),
            (of("add", ""), "non-fusion elementwise"),
            (of("cosine", ""), "non-fusion elementwise"),
            (of("constant", ""), "non-fusion elementwise"),
            (of("dot", ""), "dot"),
            (of("custom-call", ""), "custom-call"),
            (of("copy-start", ""), "copy-start"),
        ];
        for (instruction, category) in cases {
            assert_eq!(instruction.xprof_category(), category, "{}", instruction.opcode);
        }
        let named = |op_name: &str, op_type: &str| {
            HloInstruction { op_name: op_name.into(), op_type: op_type.into(), ..HloInstruction::default() }
                .tf_op_fullname()
        };
        assert_eq!(named("jit(f)/dot_general", "dot_general"), "jit(f)/dot_general:dot_general");
        assert_eq!(named("jit(f)/exp", ""), "jit(f)/exp:");
        assert_eq!(named("", ""), "");
        assert_eq!(named("", "Add"), ":Add");
        assert_eq!(named("XLA_Args", ""), "XLA_Args:XLA_Args");
    }

    #[test]
    fn custom_call_cost_estimates_are_read_from_the_backend_config() {
        let config = r#"{"cost_estimate_json":"{\"flops\": 1024, \"transcendentals\": 0, \"bytes_accessed\": 4096}"}"#;
        assert_eq!(cost_estimate(config), (Some(1024), Some(4096)));
        assert_eq!(cost_estimate(r#"{"cost_estimate_json":"{\"flops\": -1}"}"#), (None, None));
        assert_eq!(cost_estimate(r#"{"operation_queue_id":"0"}"#), (None, None));
    }

    #[test]
    fn damaged_protos_give_what_they_hold() {
        let proto = sample_hlo_proto("jit_f");
        for cut in [0, 3, proto.len() / 2, proto.len() - 1] {
            // Never panics; a cut message yields fewer facts.
            let _ = decode_hlo_proto(&proto[..cut]);
        }
        assert!(decode_hlo_proto(&[]).is_none());
        let mut cyclic = StackFrames::default();
        cyclic.frames.push((1, 1));
        cyclic.locations.push((1, 1, 1));
        let module = HloModule { frames: cyclic, ..HloModule::default() };
        assert_eq!(module.stack(1).len(), MAX_STACK_DEPTH);
    }

    #[test]
    fn any_bytes_decode_without_panicking() {
        // Every single-byte change of a real-shaped proto, and pseudo-random bytes.
        let proto = sample_hlo_proto("jit_f");
        for at in 0..proto.len() {
            for byte in [0x00, 0x7f, 0x80, 0xff] {
                let mut damaged = proto.clone();
                damaged[at] = byte;
                if let Some(module) = decode_hlo_proto(&damaged) {
                    for instruction in &module.instructions {
                        let _ = (
                            module.stack(instruction.stack_frame_id),
                            instruction.category(),
                            instruction.element_count(),
                        );
                    }
                }
            }
        }
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..2000 {
            let bytes: Vec<u8> = (0..64)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 56) as u8
                })
                .collect();
            let _ = decode_hlo_proto(&bytes);
        }
    }
}
