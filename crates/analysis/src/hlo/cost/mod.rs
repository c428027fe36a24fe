//! What one execution of an HLO instruction computes and moves, as XProf's GPU cost
//! model counts it: XLA's `GpuHloCostAnalysis` under XProf's `XProfGpuCostAnalysis`,
//! with the options XProf uses (pointer size 8, inputs read at most once) and no device
//! description.
//!
//! The rules, by instruction (`handlers`): a dot is 2·M·N·K, a convolution 2 × the
//! multiply-adds its window really makes; an elementwise op costs the default GPU
//! profile's cycles per output element (`elementwise`); a reduce applies its reducer
//! once per reduced element; a fusion sums what each fused instruction computes for the
//! share of its output that is used, and reads only the used share of each operand
//! (`fusion`). Bytes are operands plus output unless a rule says otherwise (slices read
//! what they keep; a tuple is its 8-byte pointers). `model_flops` are XLA's count;
//! `flops` are what the device does: half of it for 8-bit inputs, a quarter for 4-bit.

use std::cell::Cell;

mod elementwise;
mod fusion;
mod handlers;

use super::{HloInstruction, HloModule, TUPLE, element_bits};

/// Computations nest at most this deep (fusions in fusions, loops in loops) before
/// mlprof stops counting inside them.
const MAX_DEPTH: usize = 8;

/// At most this many instruction costs are computed for one instruction's cost (a
/// damaged program whose computations call each other many times over costs nothing
/// past it).
const MAX_STEPS: u64 = 1 << 20;

/// What one execution of an instruction costs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct HloCost {
    /// FLOPs the device performs (XProf's normalized FLOPs).
    pub flops: u64,
    /// FLOPs as XLA's cost model counts them (XProf's model FLOPs).
    pub model_flops: u64,
    /// Bytes read and written.
    pub bytes_accessed: u64,
}

/// An instruction's properties as XLA's cost analysis records them: FLOPs, bytes, and
/// for each operand the share of its elements that are read (utilization).
#[derive(Clone, Debug, Default)]
struct Properties {
    flops: f64,
    bytes: f64,
    operand_utilization: Vec<f64>,
}

impl Properties {
    /// No FLOPs, `bytes` bytes, every operand read once.
    fn bytes(instruction: &HloInstruction, bytes: f64) -> Properties {
        Properties { flops: 0.0, bytes, operand_utilization: vec![1.0; instruction.operands.len()] }
    }

    fn utilization(&self, operand: usize) -> f64 {
        self.operand_utilization.get(operand).copied().unwrap_or(1.0)
    }

    /// Sets the share of operand `operand` read (nothing when there is no such operand).
    fn set_utilization(&mut self, operand: usize, share: f64) {
        if let Some(utilization) = self.operand_utilization.get_mut(operand) {
            *utilization = share;
        }
    }
}

/// One cost computation over a module, with its step budget.
struct Costing<'m> {
    module: &'m HloModule,
    steps: Cell<u64>,
}

impl std::ops::Deref for Costing<'_> {
    type Target = HloModule;

    fn deref(&self) -> &HloModule {
        self.module
    }
}

impl Costing<'_> {
    /// Counts one step; false once the budget is spent.
    fn step(&self) -> bool {
        let steps = self.steps.get().saturating_add(1);
        self.steps.set(steps);
        steps <= MAX_STEPS
    }

    /// The summed FLOPs and bytes of the instructions of computation `id` (a reducer,
    /// a loop body, a called function), as XLA's `ProcessSubcomputation` gives them.
    fn computation_properties(&self, id: i64, depth: usize) -> (f64, f64) {
        if depth >= MAX_DEPTH {
            return (0.0, 0.0);
        }
        self.computation(id)
            .iter()
            .map(|instruction| self.properties(instruction, depth + 1))
            .fold((0.0, 0.0), |(flops, bytes), p| (flops + p.flops, bytes + p.bytes))
    }
}

impl HloModule {
    /// The cost of one execution of instruction `index` (zero for an unknown index).
    pub(crate) fn cost(&self, index: usize) -> HloCost {
        let Some(instruction) = self.instructions.get(index) else { return HloCost::default() };
        let properties = Costing { module: self, steps: Cell::new(0) }.properties(instruction, 0);
        // XLA marks costs it cannot estimate as -1; XProf reads them as 0.
        let model_flops = if properties.flops > 0.0 { properties.flops } else { 0.0 };
        let flops = model_flops / self.device_flops_divisor(instruction);
        HloCost {
            flops: flops as u64,
            model_flops: model_flops as u64,
            bytes_accessed: if properties.bytes > 0.0 { properties.bytes.round() as u64 } else { 0 },
        }
    }

    /// XProf's device FLOPs adjustment: the device does twice the work per cycle on
    /// 8-bit inputs and four times on 4-bit ones (the widest operand decides; for a
    /// cuBLAS GEMM its first operand; other custom calls are not adjusted).
    fn device_flops_divisor(&self, instruction: &HloInstruction) -> f64 {
        let widths = instruction
            .operands
            .iter()
            .filter_map(|&o| self.instructions.get(o))
            .filter_map(|operand| bit_width(operand.element_type));
        let widest = if instruction.opcode == "custom-call" {
            if !handlers::is_cublas_lt_gemm(instruction) {
                return 1.0;
            }
            widths.take(1).max()
        } else {
            widths.max()
        };
        match widest {
            Some(8) => 2.0,
            Some(4) => 4.0,
            _ => 1.0,
        }
    }

    /// The operand `i` of `instruction`.
    fn operand(&self, instruction: &HloInstruction, i: usize) -> Option<&HloInstruction> {
        instruction.operands.get(i).and_then(|&o| self.instructions.get(o))
    }

    /// The instructions of computation `id` (empty when unknown).
    fn computation(&self, id: i64) -> &[HloInstruction] {
        self.computations.get(&id).and_then(|range| self.instructions.get(range.clone())).unwrap_or_default()
    }
}

/// Bits of an element of `element_type` for XProf's device-FLOPs adjustment (PRED is
/// one bit); `None` for tuples, tokens and opaque values.
fn bit_width(element_type: i64) -> Option<i64> {
    match element_type {
        1 => Some(1),
        TUPLE | 14 | 17 => None,
        other => element_bits(other),
    }
}

/// Elements of a shape with dimensions `dims` (1 for a scalar; 0 when a dimension is
/// negative).
fn elements(dims: &[i64]) -> f64 {
    dims.iter().map(|&d| d.max(0) as f64).product()
}

/// Elements of `instruction`'s output, every array of a tuple counted (XLA's
/// `ElementsInRecursive`).
fn output_elements(instruction: &HloInstruction) -> f64 {
    if instruction.element_type == TUPLE {
        instruction
            .tuple_shapes
            .iter()
            .filter(|shape| shape.element_type != TUPLE)
            .map(|shape| elements(&shape.dims))
            .sum()
    } else {
        elements(&instruction.dims)
    }
}

/// Bytes of an array of `element_type` with dimensions `dims` (PRED takes a byte).
fn array_bytes(element_type: i64, dims: &[i64]) -> f64 {
    element_bits(element_type).map_or(0.0, |bits| (elements(dims) * bits as f64 / 8.0).ceil())
}

/// XLA's `GetShapeSize` of an instruction's output: an array's bytes, a tuple's 8-byte
/// pointer table.
fn shape_size(instruction: &HloInstruction) -> f64 {
    if instruction.element_type == TUPLE {
        8.0 * instruction.tuple_shapes.len() as f64
    } else {
        array_bytes(instruction.element_type, &instruction.dims)
    }
}

/// The bytes of every array of `instruction`'s output (a tuple's arrays summed, as the
/// decoder counts them).
fn leaf_bytes(instruction: &HloInstruction) -> f64 {
    instruction.output_bytes.unwrap_or(0) as f64
}

#[cfg(test)]
mod tests;
