//! The cost of each kind of HLO instruction on its own (XLA's `HloCostAnalysis`
//! handlers with `GpuHloCostAnalysis`'s overrides): FLOPs, bytes accessed and the share
//! of each operand read. Fusions are in `fusion`.

use super::super::{ELEMENTWISE_OPCODES, HloInstruction, WindowDim};
use super::{
    Costing, MAX_DEPTH, Properties, array_bytes, elements, elementwise, leaf_bytes, output_elements, shape_size,
};

/// 2 FLOPs per multiply-add.
const FMA_FLOPS: f64 = 2.0;

/// cuBLASLt GEMM custom-call targets XLA's GPU cost model recognises.
const CUBLAS_LT_TARGETS: [&str; 4] =
    ["__cublas$lt$matmul", "__cublas$lt$matmul$f8", "__cublas$lt$matmul$mx", "__cublas$lt$groupedMatmul"];

/// cuDNN convolution custom-call targets.
const CUDNN_CONV_TARGETS: [&str; 5] = [
    "__cudnn$convForward",
    "__cudnn$convForwardGraph",
    "__cudnn$convBackwardInput",
    "__cudnn$convBackwardFilter",
    "__cudnn$convBiasActivationForward",
];

/// Opcodes that cost nothing and touch no memory.
const FREE_OPCODES: [&str; 7] =
    ["parameter", "constant", "get-tuple-element", "bitcast", "after-all", "add-dependency", "domain"];

/// Whether `instruction` is a cuBLASLt GEMM call.
pub(super) fn is_cublas_lt_gemm(instruction: &HloInstruction) -> bool {
    CUBLAS_LT_TARGETS.contains(&instruction.custom_call_target.as_str())
}

impl Costing<'_> {
    /// The properties of `instruction` executed on its own (`depth`: how many
    /// computations deep it is).
    pub(super) fn properties(&self, instruction: &HloInstruction, depth: usize) -> Properties {
        let opcode = instruction.opcode.as_str();
        if FREE_OPCODES.contains(&opcode) || !self.step() {
            return Properties::bytes(instruction, 0.0);
        }
        let mut properties = Properties::bytes(instruction, self.default_bytes(instruction));
        let called = |i: usize| instruction.called_computation_ids.get(i).copied();
        let flops_of = |i: usize| called(i).map_or(0.0, |id| self.computation_properties(id, depth).0);
        let operand_elements = |i: usize| self.operand(instruction, i).map_or(0.0, output_elements);
        match opcode {
            "tuple" => properties.bytes = shape_size(instruction),
            "fusion" if depth < MAX_DEPTH => return self.fusion_properties(instruction, depth),
            "dot" => properties.flops = self.dot_flops(instruction, &instruction.dims),
            "convolution" => properties.flops = self.convolution_flops(instruction, &instruction.dims),
            "custom-call" => self.custom_call(instruction, &mut properties),
            "reduce" => {
                let output = first_array_elements(instruction);
                properties.flops = flops_of(0) * (operand_elements(0) - output);
                // GPU: inputs and outputs once, each init value once per output element.
                let inputs = instruction.operands.len() / 2;
                properties.bytes = leaf_bytes(instruction)
                    + (0..instruction.operands.len())
                        .filter_map(|i| self.operand(instruction, i).map(|o| (i, shape_size(o))))
                        .map(|(i, size)| if i < inputs { size } else { output * size })
                        .sum::<f64>();
                for utilization in properties.operand_utilization.iter_mut().skip(inputs) {
                    *utilization = output;
                }
            }
            "reduce-window" => properties.flops = flops_of(0) * reduce_window_count(instruction),
            "select-and-scatter" => {
                let source = operand_elements(1);
                let window: f64 = instruction.window.iter().map(|d| d.size as f64).product();
                properties.flops = flops_of(0) * source * (window - 1.0) + flops_of(1) * source;
            }
            "map" => properties.flops = flops_of(0) * output_elements(instruction),
            "sort" => {
                let n = operand_elements(0);
                properties.flops = if n > 1.0 { n * n.log2().ceil() } else { 0.0 };
            }
            "scatter" => {
                let inputs = instruction.operands.len().saturating_sub(1) / 2;
                let updates: f64 = (inputs + 1..instruction.operands.len())
                    .filter_map(|i| self.operand(instruction, i))
                    .map(shape_size)
                    .sum();
                let indices = self.operand(instruction, inputs).map_or(0.0, shape_size);
                properties.flops = flops_of(0) * operand_elements(inputs + 1);
                properties.bytes = 3.0 * updates + indices;
            }
            "gather" => {
                properties.bytes = 2.0 * shape_size(instruction) + self.operand(instruction, 1).map_or(0.0, shape_size);
                properties.set_utilization(0, share(output_elements(instruction), operand_elements(0)));
            }
            "slice" | "dynamic-slice" => {
                // XLA counts the first start index only (its size, not all of them).
                let indices =
                    if opcode == "slice" { 0.0 } else { self.operand(instruction, 1).map_or(0.0, shape_size) };
                properties.bytes = 2.0 * shape_size(instruction) + indices;
                properties.set_utilization(0, share(output_elements(instruction), operand_elements(0)));
            }
            "dynamic-update-slice" => {
                let update = self.operand(instruction, 1).map_or(0.0, shape_size);
                let indices = self.operand(instruction, 2).map_or(0.0, shape_size);
                properties.bytes = 2.0 * update + indices;
                let output = output_elements(instruction);
                properties.set_utilization(0, share(output - operand_elements(1), output));
            }
            "concatenate" => {
                // A compare and a branch per element; both branches where a warp spans
                // two operands along a minor dimension.
                let dim = instruction.dimensions.first().copied().unwrap_or(0);
                let split = self
                    .operand(instruction, 0)
                    .and_then(|o| usize::try_from(dim).ok().and_then(|d| o.dims.get(d)))
                    .is_some_and(|&size| size % 32 != 0);
                let per_element = if dim > 0 && split { 400.0 } else { 6.0 };
                properties.flops = per_element * output_elements(instruction);
            }
            "all-reduce" | "all-reduce-start" => {
                let root = called(0).and_then(|id| self.computation_root(id));
                let per_element =
                    root.map_or(3, |root| elementwise::flops_per_element(&root.opcode, instruction.element_type));
                properties.flops = per_element as f64 * output_elements(instruction);
                if opcode == "all-reduce-start" {
                    properties.bytes = leaf_bytes(instruction);
                }
            }
            "while" | "call" => {
                let (flops, bytes) = instruction
                    .called_computation_ids
                    .iter()
                    .map(|&id| self.computation_properties(id, depth))
                    .fold((0.0, 0.0), |(f, b), (cf, cb)| (f + cf, b + cb));
                (properties.flops, properties.bytes) = (flops, bytes);
            }
            "conditional" => {
                let branches: Vec<(f64, f64)> = instruction
                    .called_computation_ids
                    .iter()
                    .map(|&id| self.computation_properties(id, depth))
                    .collect();
                properties.flops = branches.iter().map(|b| b.0).fold(0.0, f64::max);
                properties.bytes = branches.iter().map(|b| b.1).fold(0.0, f64::max);
            }
            // XLA's GPU model costs an async computation only for collectives it models.
            "async-start" => properties.bytes = 0.0,
            "copy" | "rng" | "rng-bit-generator" => {}
            _ if ELEMENTWISE_OPCODES.contains(&opcode) => {
                let per_element = elementwise::flops_per_element(opcode, instruction.element_type);
                properties.flops = per_element as f64 * output_elements(instruction);
            }
            _ => {}
        }
        properties
    }

    /// Operands plus output (XLA's `Preprocess`): each by `GetShapeSize`.
    fn default_bytes(&self, instruction: &HloInstruction) -> f64 {
        let operands: f64 = instruction.operands.iter().filter_map(|&o| self.instructions.get(o)).map(shape_size).sum();
        operands + shape_size(instruction)
    }

    /// The root instruction of computation `id`.
    pub(super) fn computation_root(&self, id: i64) -> Option<&HloInstruction> {
        self.roots.get(&id).and_then(|&i| self.instructions.get(i))
    }

    /// 2 × output elements × the product of the left operand's contracted dimensions.
    fn dot_flops(&self, instruction: &HloInstruction, output_dims: &[i64]) -> f64 {
        let Some(lhs) = self.operand(instruction, 0) else { return 0.0 };
        let width: f64 = instruction
            .lhs_contracting_dims
            .iter()
            .map(|&d| usize::try_from(d).ok().and_then(|d| lhs.dims.get(d)).map_or(0.0, |&n| n.max(0) as f64))
            .product();
        FMA_FLOPS * elements(output_dims) * width
    }

    /// cuBLASLt GEMMs and cuDNN convolutions count their product and their real
    /// output (not the workspace beside it); other custom calls are unknown (-1) unless
    /// they carry their own estimate.
    fn custom_call(&self, instruction: &HloInstruction, properties: &mut Properties) {
        let result = instruction.tuple_shapes.first().filter(|_| instruction.element_type == super::TUPLE);
        let result_dims = result.map_or(&instruction.dims, |shape| &shape.dims);
        let result_bytes = result.map_or_else(|| shape_size(instruction), |s| array_bytes(s.element_type, &s.dims));
        let target = instruction.custom_call_target.as_str();
        if is_cublas_lt_gemm(instruction) || CUDNN_CONV_TARGETS.contains(&target) {
            properties.flops = if CUDNN_CONV_TARGETS.contains(&target) {
                self.convolution_flops(instruction, result_dims)
            } else {
                self.dot_flops(instruction, result_dims)
            };
            properties.bytes += result_bytes - shape_size(instruction);
            return;
        }
        let (flops, bytes) = instruction.cost_estimate;
        properties.flops = flops.map_or(-1.0, |f| f as f64);
        properties.bytes = bytes.map_or(-1.0, |b| b as f64);
    }

    /// XLA's `GetConvolutionFlops`: 2 × (input features ÷ feature groups) × output
    /// features × (batch ÷ batch groups) × per spatial dimension the (kernel, output)
    /// position pairs that fall inside the input (padding, stride and dilations
    /// counted); `output_dims` are the result's (a cuDNN call's first tuple element).
    fn convolution_flops(&self, instruction: &HloInstruction, output_dims: &[i64]) -> f64 {
        let (Some(lhs), Some(rhs), Some(dnums)) =
            (self.operand(instruction, 0), self.operand(instruction, 1), instruction.conv.as_ref())
        else {
            return 0.0;
        };
        let dim = |dims: &[i64], d: i64| usize::try_from(d).ok().and_then(|d| dims.get(d)).map_or(0, |&n| n.max(0));
        let (feature_groups, batch_groups) = instruction.group_counts;
        let input_feature = dim(&lhs.dims, dnums.input_feature) / feature_groups.max(1);
        let batch = dim(&lhs.dims, dnums.input_batch) / batch_groups.max(1);
        let output_feature = dim(output_dims, dnums.output_feature);
        let positions: f64 = instruction
            .window
            .iter()
            .enumerate()
            .map(|(i, window)| {
                let at = |dims: &[i64], spatial: &[i64]| spatial.get(i).map_or(1, |&d| dim(dims, d));
                let limits = Limits {
                    input: at(&lhs.dims, &dnums.input_spatial),
                    kernel: at(&rhs.dims, &dnums.kernel_spatial),
                    output: at(output_dims, &dnums.output_spatial),
                };
                valid_positions(&limits, window) as f64
            })
            .product();
        FMA_FLOPS * input_feature as f64 * output_feature as f64 * batch as f64 * positions
    }
}

/// The share `part / whole` (0 when `whole` is 0).
fn share(part: f64, whole: f64) -> f64 {
    if whole > 0.0 { part / whole } else { 0.0 }
}

/// Elements of the output, or of a tuple output's first array (a variadic reduce).
fn first_array_elements(instruction: &HloInstruction) -> f64 {
    match instruction.tuple_shapes.first() {
        Some(first) if instruction.element_type == super::TUPLE => elements(&first.dims),
        _ => elements(&instruction.dims),
    }
}

/// How many times a reduce-window applies its reducer: window size − 1 per output
/// element, or, for a window over one padded dimension that reduces it whole and
/// broadcasts it back (a cumulative sum), once per reduced row plus once per element of
/// the dimension.
fn reduce_window_count(instruction: &HloInstruction) -> f64 {
    let output = first_array_elements(instruction);
    let window: f64 = instruction.window.iter().map(|d| d.size as f64).product();
    let reduced: Vec<(usize, &WindowDim)> =
        instruction.window.iter().enumerate().filter(|(_, d)| d.size != 1).collect();
    let padded = instruction.window.iter().filter(|d| d.padding_low != 0 || d.padding_high != 0).count();
    if reduced.len() == 1 && padded == 1 && instruction.element_type != super::TUPLE {
        let (index, d) = reduced[0];
        let whole = d.padding_low != 0
            && d.padding_low == d.padding_high
            && d.size == 2 * d.padding_low + 1
            && instruction.dims.get(index).is_some_and(|&size| d.padding_low == size - 1);
        if whole {
            let size = instruction.dims[index] as f64;
            return output / size + (size - 1.0);
        }
    }
    (window - 1.0) * output
}

/// The sizes along one spatial dimension of a convolution.
struct Limits {
    input: i64,
    kernel: i64,
    output: i64,
}

/// The (kernel, output) position pairs of one spatial dimension whose input index is
/// inside the input and not a hole of its dilation.
fn valid_positions(limits: &Limits, window: &WindowDim) -> i64 {
    let Limits { input, kernel, output } = *limits;
    // XLA's shortcuts for a dimension that is all window, and for a full padding.
    if input == output
        && kernel == output
        && input == window.base_dilation
        && window.window_dilation == 1
        && (input - 1).max(1) == window.stride
        && window.padding_low == 0
        && window.padding_high == 0
    {
        return input;
    }
    if input == 1
        && kernel == output
        && window.window_dilation == 1
        && window.base_dilation == 1
        && window.stride == 1
        && window.padding_high == output - 1
        && window.padding_low == output - 1
    {
        return output;
    }
    let mut count = 0;
    for k in 0..kernel {
        if window.stride == 1 && window.base_dilation == 1 {
            let base = window.padding_low - k * window.window_dilation;
            count += ((input + base).min(output) - base.max(0)).max(0);
            continue;
        }
        for o in 0..output {
            let undilated = o * window.stride - window.padding_low + k * window.window_dilation;
            let index = undilated.div_euclid(window.base_dilation);
            if undilated == index * window.base_dilation && (0..input).contains(&index) {
                count += 1;
            }
        }
    }
    count
}
