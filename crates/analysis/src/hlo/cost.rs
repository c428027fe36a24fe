//! What one execution of an HLO instruction computes and moves: floating-point
//! operations and bytes accessed, counted from its shapes.
//!
//! The one design decision to know: FLOPs are the textbook analytic counts, not XLA's
//! GPU cost model. A dot (or a cuBLAS GEMM call) is 2·M·N·K, a convolution 2 × output
//! elements × kernel window × input features, a reduce one per input element, an
//! elementwise op one per output element, a fusion the sum of its fused instructions.
//! XProf counts dots the same way, but weighs elementwise ops by measured GPU cycle
//! costs (3 for an f32 add, about 80 for an exp), so its FLOP rates of elementwise
//! fusions are higher than mlprof's. Bytes accessed are the operands' bytes plus the
//! output's, as XProf's model gives for fusions and library calls.

use super::{ELEMENTWISE_OPCODES, HloInstruction, HloModule};

/// Fusions nest at most this deep before mlprof stops counting inside them.
const MAX_FUSION_DEPTH: usize = 8;

/// What one execution of an instruction costs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct HloCost {
    /// Floating-point operations.
    pub flops: u64,
    /// Bytes read (operands) and written (output).
    pub bytes_accessed: u64,
}

impl HloModule {
    /// The cost of one execution of instruction `index` (zero for an unknown index).
    pub(crate) fn cost(&self, index: usize) -> HloCost {
        let Some(instruction) = self.instructions.get(index) else { return HloCost::default() };
        let operand_bytes: u64 = instruction
            .operands
            .iter()
            .filter_map(|&operand| self.instructions.get(operand))
            .map(|operand| non_negative(operand.output_bytes.unwrap_or(0)))
            .fold(0, u64::saturating_add);
        HloCost {
            flops: self.flops(instruction, 0),
            bytes_accessed: operand_bytes.saturating_add(non_negative(instruction.output_bytes.unwrap_or(0))),
        }
    }

    fn flops(&self, instruction: &HloInstruction, depth: usize) -> u64 {
        let operand_dims =
            |i: usize| instruction.operands.get(i).and_then(|&o| self.instructions.get(o)).map(|o| &o.dims);
        match instruction.opcode.as_str() {
            "dot" => {
                contraction_flops(element_count(&instruction.dims), operand_dims(0), &instruction.lhs_contracting_dims)
            }
            "custom-call" if instruction.is_cublas_gemm => {
                let output =
                    if instruction.dims.is_empty() { &instruction.first_tuple_dims } else { &instruction.dims };
                contraction_flops(element_count(output), operand_dims(0), &instruction.lhs_contracting_dims)
            }
            "convolution" => {
                let (Some(kernel), Some((input_feature, spatial))) = (operand_dims(1), &instruction.conv_kernel_dims)
                else {
                    return 0;
                };
                let window =
                    spatial.iter().chain([input_feature]).map(|&d| dim(kernel, d)).fold(1u64, u64::saturating_mul);
                element_count(&instruction.dims).saturating_mul(window).saturating_mul(2)
            }
            "fusion" if depth < MAX_FUSION_DEPTH => instruction
                .called_computation_ids
                .iter()
                .filter_map(|id| self.computations.get(id))
                .flat_map(|range| self.instructions.get(range.clone()).unwrap_or_default())
                .map(|fused| self.flops(fused, depth + 1))
                .fold(0, u64::saturating_add),
            "reduce" => operand_dims(0).map_or(0, |dims| element_count(dims)),
            "constant" => 0,
            opcode if ELEMENTWISE_OPCODES.contains(&opcode) => element_count(&instruction.dims),
            _ => 0,
        }
    }
}

/// 2 × output elements × the product of the left operand's contracted dimensions.
fn contraction_flops(output_elements: u64, lhs_dims: Option<&Vec<i64>>, contracting: &[i64]) -> u64 {
    let Some(lhs) = lhs_dims else { return 0 };
    let k = contracting.iter().map(|&d| dim(lhs, d)).fold(1u64, u64::saturating_mul);
    output_elements.saturating_mul(k).saturating_mul(2)
}

/// Size of dimension `index` of `dims` (0 when out of range or negative).
fn dim(dims: &[i64], index: i64) -> u64 {
    usize::try_from(index).ok().and_then(|i| dims.get(i)).map_or(0, |&d| non_negative(d))
}

/// Number of elements of a shape (1 for a scalar; saturating).
fn element_count(dims: &[i64]) -> u64 {
    dims.iter().map(|&d| non_negative(d)).fold(1u64, u64::saturating_mul)
}

fn non_negative(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::super::decode_hlo_proto;
    use super::super::tests::sample_hlo_proto;
    use super::*;

    #[test]
    fn dots_count_two_flops_per_multiply_add_and_move_their_operands() {
        let module = decode_hlo_proto(&sample_hlo_proto("jit_f")).expect("module");
        let dot = module.instruction("dot.1").expect("dot");
        // dot.1: f32[2,2] from p f32[2,3] twice, contracting p's dimension 1 (K = 3).
        assert_eq!(module.cost(dot), HloCost { flops: 2 * 4 * 3, bytes_accessed: 24 + 24 + 16 });
        assert_eq!(module.cost(usize::MAX), HloCost::default());
    }
}
