//! FLOPs per output element of XLA's elementwise ops as XProf counts them on GPU:
//! XLA's measured cycle costs of the default GPU profile (`sm_86` in XLA's
//! `hlo_op_profiles`, which XProf uses whatever the GPU was, since it builds its cost
//! analysis without a device), by opcode and output element type; 3 for every pair the
//! profile does not list (f32 add, multiply, compare, divide; every bf16 op).

/// XLA's default cost of an elementwise op, in FLOPs per element.
const DEFAULT_FLOPS: u64 = 3;

/// Output element types of the profile's columns (XLA `PrimitiveType` numbers): S8,
/// S16, S32, S64, U8, U16, U32, U64, F16, F32, F64, C64, C128.
const TYPES: [i64; 13] = [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 18];

/// A pair the profile does not list.
const NONE: u32 = 0;

/// The `sm_86` profile: per opcode, FLOPs per element for each type of [`TYPES`].
const PROFILE: [(&str, [u32; 13]); 17] = [
    ("divide", [370, 367, 306, 918, 306, 302, 115, 838, NONE, NONE, 2016, 687, 7941]),
    ("power", [392, 396, NONE, 601, 388, 399, NONE, 604, 975, 925, 5511, 3351, 18205]),
    ("cbrt", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 925, 867, 6339, NONE, NONE]),
    ("cosine", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 691, 662, 1717, NONE, 6613]),
    ("exponential", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 108, 86, 1652, 1360, 4028]),
    ("exponential-minus-one", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 396, 381, 1900, 1400, 4161]),
    ("log", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 266, 244, 608, 950, 7599]),
    ("log-plus-one", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 284, 262, 2073, 842, 6962]),
    ("logistic", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 226, 176, 2412, NONE, NONE]),
    ("rsqrt", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 97, 75, 698, 2383, 11318]),
    ("sqrt", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 97, 75, 986, 3193, 15606]),
    ("tanh", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 212, 190, 1609, NONE, 9939]),
    ("atan2", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 482, 486, 3747, 5353, 39027]),
    ("sine", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 662, 1789, NONE, 5878]),
    ("add", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 97, NONE, 97]),
    ("multiply", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 97, NONE, 270]),
    ("subtract", [NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, NONE, 97, NONE, 97]),
];

/// FLOPs per output element of elementwise op `opcode` with output element type
/// `element_type`.
pub(super) fn flops_per_element(opcode: &str, element_type: i64) -> u64 {
    let Some(column) = TYPES.iter().position(|&t| t == element_type) else { return DEFAULT_FLOPS };
    PROFILE
        .iter()
        .find(|(name, _)| *name == opcode)
        .map(|(_, costs)| costs[column])
        .filter(|&cost| cost != NONE)
        .map_or(DEFAULT_FLOPS, u64::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_pairs_cost_their_cycles_and_the_rest_three() {
        const F32: i64 = 11;
        const BF16: i64 = 16;
        assert_eq!(flops_per_element("exponential", F32), 86);
        assert_eq!(flops_per_element("tanh", F32), 190);
        assert_eq!(flops_per_element("exponential", 10), 108);
        assert_eq!(flops_per_element("divide", 4), 306);
        // Not in the profile: f32 divide and add, every bf16 op, PRED outputs.
        assert_eq!(flops_per_element("divide", F32), 3);
        assert_eq!(flops_per_element("add", F32), 3);
        assert_eq!(flops_per_element("exponential", BF16), 3);
        assert_eq!(flops_per_element("compare", 1), 3);
    }
}
