//! The cost of a fusion as XLA's GPU cost model gives it (`HandleFusion` with
//! `GpuHloCostAnalysis::FusionCalculateUtilizations`).
//!
//! Walking the fused computation from its root to its parameters, each instruction
//! gets a utilization: the share of its output the fusion's output needs. The root
//! needs all of it; an elementwise op (or a tuple, or a same-shape bitcast) needs of
//! its operands what is needed of it; any other op makes each operand a new root that
//! needs its share of it (a slice the sliced part, a reduce's init value once per
//! output element), rounded up to whole elements, several such uses adding up. FLOPs
//! are each instruction's own FLOPs times its utilization. Bytes are the outputs (the
//! update of an in-place dynamic-update-slice), each parameter times its utilization
//! capped at one, and constants of more than 8 elements likewise. A custom fusion
//! around a gather or a scatter costs what that instruction costs.

use std::collections::{BTreeSet, HashMap};

use super::super::{ELEMENTWISE_OPCODES, HloInstruction, TUPLE};
use super::{Costing, Properties, array_bytes, output_elements, shape_size};

/// Constants of at most this many elements are immediates, not memory reads (XLA's GPU
/// `immediate_constant_max_elements`).
const IMMEDIATE_CONSTANT_ELEMENTS: f64 = 8.0;

/// Opcodes through which utilization passes unchanged besides the elementwise ones.
const PASS_THROUGH_OPCODES: [&str; 3] = ["tuple", "get-tuple-element", "copy"];

impl Costing<'_> {
    /// The properties of fusion `fusion` (`depth`: how many computations deep).
    pub(super) fn fusion_properties(&self, fusion: &HloInstruction, depth: usize) -> Properties {
        let Some(&computation) = fusion.called_computation_ids.first() else {
            return Properties::bytes(fusion, 0.0);
        };
        let Some(range) = self.computations.get(&computation).cloned() else {
            return Properties::bytes(fusion, 0.0);
        };
        if fusion.fusion_kind == "kCustom" {
            let inner = range.clone().find(|&i| matches!(self.instructions[i].opcode.as_str(), "gather" | "scatter"));
            if let Some(inner) = inner {
                return self.properties(&self.instructions[inner], depth + 1);
            }
        }
        let Some(&root) = self.roots.get(&computation) else { return Properties::bytes(fusion, 0.0) };
        let order = self.post_order(root, &range);
        let own: HashMap<usize, Properties> =
            order.iter().map(|&i| (i, self.properties(&self.instructions[i], depth + 1))).collect();

        let mut bytes = 0.0;
        // Outputs: each array of the fusion's output, or the update of an in-place
        // dynamic-update-slice (whose buffer is then not read).
        let mut in_place: Vec<usize> = Vec::new();
        let root_instruction = &self.instructions[root];
        let outputs: Vec<(usize, f64)> = if fusion.element_type == TUPLE {
            fusion
                .tuple_shapes
                .iter()
                .enumerate()
                .filter(|(_, shape)| shape.element_type != TUPLE)
                .map(|(i, shape)| {
                    let producer = if root_instruction.opcode == "tuple" {
                        root_instruction.operands.get(i).copied()
                    } else {
                        None
                    };
                    (producer.unwrap_or(root), array_bytes(shape.element_type, &shape.dims))
                })
                .collect()
        } else {
            vec![(root, shape_size(fusion))]
        };
        for (producer, size) in outputs {
            let instruction = &self.instructions[producer];
            if instruction.opcode == "dynamic-update-slice" {
                bytes += self.operand(instruction, 1).map_or(0.0, shape_size);
                in_place.push(producer);
            } else {
                bytes += size;
            }
        }

        let utilization = self.utilizations(root, &order, &own, &in_place);
        let flops = order.iter().map(|i| utilization[i] * own[i].flops).sum();
        for &i in &order {
            let instruction = &self.instructions[i];
            let used = utilization[&i].min(1.0);
            match instruction.opcode.as_str() {
                "parameter" if instruction.element_type == TUPLE => {
                    // A tuple parameter is read element by element, as far as its
                    // `get-tuple-element` users need them.
                    bytes += order
                        .iter()
                        .filter(|&&u| {
                            self.instructions[u].opcode == "get-tuple-element" && self.instructions[u].operands == [i]
                        })
                        .map(|&u| (shape_size(&self.instructions[u]) * utilization[&u].min(1.0)).round())
                        .sum::<f64>();
                }
                "parameter" => bytes += (shape_size(instruction) * used).round(),
                "constant" if output_elements(instruction) > IMMEDIATE_CONSTANT_ELEMENTS => {
                    bytes += shape_size(instruction) * used;
                }
                _ => {}
            }
        }
        Properties { flops, bytes, operand_utilization: vec![1.0; fusion.operands.len()] }
    }

    /// The instructions of the computation in `range` that `root` depends on,
    /// operands before users.
    fn post_order(&self, root: usize, range: &std::ops::Range<usize>) -> Vec<usize> {
        let mut order = Vec::new();
        let mut seen = vec![false; range.len()];
        // (instruction, whether its operands are already pushed)
        let mut stack = vec![(root, false)];
        while let Some((i, expanded)) = stack.pop() {
            let Some(local) = i.checked_sub(range.start).filter(|&l| l < range.len()) else { continue };
            if expanded {
                order.push(i);
                continue;
            }
            if seen[local] {
                continue;
            }
            seen[local] = true;
            stack.push((i, true));
            for &operand in self.instructions[i].operands.iter().rev() {
                if operand >= range.start && operand < range.end && !seen[operand - range.start] {
                    stack.push((operand, false));
                }
            }
        }
        order
    }

    /// Each fused instruction's utilization (see the module documentation); `order` is
    /// the post order ending at `root`; `in_place` are dynamic-update-slices written in
    /// place, whose buffer operand is not read.
    fn utilizations(
        &self,
        root: usize,
        order: &[usize],
        own: &HashMap<usize, Properties>,
        in_place: &[usize],
    ) -> HashMap<usize, f64> {
        let mut root_utilization: HashMap<usize, f64> = order.iter().map(|&i| (i, 0.0)).collect();
        let mut use_roots: HashMap<usize, BTreeSet<usize>> = order.iter().map(|&i| (i, BTreeSet::new())).collect();
        let mut utilization: HashMap<usize, f64> = HashMap::with_capacity(order.len());
        root_utilization.insert(root, 1.0);
        use_roots.entry(root).or_default().insert(root);
        for &i in order.iter().rev() {
            let roots = use_roots.get(&i).cloned().unwrap_or_default();
            let used: f64 = roots.iter().map(|r| root_utilization.get(r).copied().unwrap_or(0.0)).sum();
            utilization.insert(i, used);
            let instruction = &self.instructions[i];
            let passes_through = self.passes_through(instruction);
            for (k, &operand) in instruction.operands.iter().enumerate() {
                if !use_roots.contains_key(&operand) {
                    continue;
                }
                if passes_through {
                    use_roots.entry(operand).or_default().extend(roots.iter().copied());
                    continue;
                }
                use_roots.entry(operand).or_default().insert(operand);
                let share = if k == 0 && in_place.contains(&i) { 0.0 } else { own[&i].utilization(k) };
                let n = output_elements(&self.instructions[operand]);
                let needed = if n > 0.0 { (used * share * n).ceil() / n } else { 0.0 };
                *root_utilization.entry(operand).or_default() += needed;
            }
        }
        utilization
    }

    /// Whether `instruction` needs of its operands exactly what is needed of it.
    fn passes_through(&self, instruction: &HloInstruction) -> bool {
        let opcode = instruction.opcode.as_str();
        (ELEMENTWISE_OPCODES.contains(&opcode) && opcode != "constant")
            || PASS_THROUGH_OPCODES.contains(&opcode)
            || (opcode == "bitcast" && self.operand(instruction, 0).is_some_and(|o| o.dims == instruction.dims))
    }
}
