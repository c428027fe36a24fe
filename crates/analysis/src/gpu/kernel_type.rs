//! HTA's kernel types, decided from the kernel name alone (`hta/utils/utils.py`).
//!
//! - `COMMUNICATION`: the name starts with `nccl` and later contains `Kernel`.
//! - `MEMORY`: the name starts with `Memcpy`, `Memset` or `dma`.
//! - `COMPUTATION`: none of the above, and the name neither contains `Memcpy` nor
//!   `Sync` nor starts with `Memset`.
//! - `OTHER`: everything else (e.g. `cudaStreamSynchronize` shown on a stream).

use serde::Serialize;

/// A GPU op's kind, as HTA classifies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum KernelType {
    /// NCCL collectives and point-to-point kernels.
    Communication,
    /// Memory copies and sets.
    Memory,
    /// Compute kernels.
    Computation,
    /// Anything else on a stream.
    Other,
}

impl KernelType {
    /// HTA's spelling (`COMMUNICATION`, …).
    pub fn name(self) -> &'static str {
        match self {
            KernelType::Communication => "COMMUNICATION",
            KernelType::Memory => "MEMORY",
            KernelType::Computation => "COMPUTATION",
            KernelType::Other => "OTHER",
        }
    }
}

/// The type of a kernel named `name`.
pub fn kernel_type(name: &str) -> KernelType {
    if is_communication(name) {
        KernelType::Communication
    } else if name.starts_with("Memcpy") || name.starts_with("Memset") || name.starts_with("dma") {
        KernelType::Memory
    } else if name.contains("Memcpy") || name.starts_with("Memset") || name.contains("Sync") {
        KernelType::Other
    } else {
        KernelType::Computation
    }
}

/// HTA's `^nccl.*Kernel`.
fn is_communication(name: &str) -> bool {
    name.strip_prefix("nccl").is_some_and(|rest| rest.contains("Kernel"))
}

/// HTA's memory-op kind for the bandwidth summary: `Memset`, the first 11 characters
/// of a `Memcpy` name (`Memcpy HtoD`, `Memcpy DtoH`, `Memcpy DtoD`, …), else
/// `Memcpy Unknown`.
pub fn memory_kind(name: &str) -> String {
    if name.starts_with("Memset") {
        "Memset".to_string()
    } else if name.starts_with("Memcpy") {
        name.chars().take(11).collect()
    } else {
        "Memcpy Unknown".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_classify_as_hta_does() {
        assert_eq!(kernel_type("ncclKernel_AllReduce_RING_LL_Sum_float"), KernelType::Communication);
        assert_eq!(kernel_type("ncclDevKernel_SendRecv"), KernelType::Communication);
        assert_eq!(kernel_type("nccl:all_reduce"), KernelType::Computation);
        assert_eq!(kernel_type("Memcpy HtoD (Pageable -> Device)"), KernelType::Memory);
        assert_eq!(kernel_type("Memset (Device)"), KernelType::Memory);
        assert_eq!(kernel_type("void at::native::copy_Memcpy_kernel"), KernelType::Other);
        assert_eq!(kernel_type("cudaStreamSynchronize"), KernelType::Other);
        assert_eq!(kernel_type("ampere_sgemm_128x64_nn"), KernelType::Computation);
        assert_eq!(memory_kind("Memcpy DtoH (Device -> Pinned)"), "Memcpy DtoH");
        assert_eq!(memory_kind("Memset (Device)"), "Memset");
        assert_eq!(memory_kind("dma_copy"), "Memcpy Unknown");
    }
}
