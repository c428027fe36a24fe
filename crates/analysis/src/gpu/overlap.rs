//! HTA's communication–computation overlap (`get_comm_comp_overlap`): the share of
//! the time communication kernels run during which computation kernels run too.

use serde::Serialize;

use super::intervals::{merge, time_by_combination, total};
use super::kernel_type::KernelType;
use super::{Context, round_to};

/// One rank's overlap.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CommCompOverlap {
    /// The rank.
    pub rank: i64,
    /// Overlapped time / communication time, in percent (2 decimals, as HTA);
    /// `None` when the rank ran no communication kernel.
    pub comp_comm_overlap_pctg: Option<f64>,
}

/// The overlap of every rank.
pub fn comm_comp_overlap(context: &Context) -> Vec<CommCompOverlap> {
    context
        .traces
        .ranks
        .iter()
        .map(|rank| {
            let of_type = |wanted: KernelType| {
                merge(
                    rank.rows
                        .iter()
                        .filter(|row| row.stream != -1 && context.kernel_type(row.name) == wanted)
                        .map(|row| (row.ts_ps, row.end_ps()))
                        .collect(),
                )
            };
            let communication = of_type(KernelType::Communication);
            let computation = of_type(KernelType::Computation);
            let communication_time = total(&communication);
            let overlapped: i64 = time_by_combination(&[communication, computation])
                .into_iter()
                .filter(|&(mask, _)| mask == 3)
                .map(|(_, time)| time)
                .sum();
            CommCompOverlap {
                rank: rank.rank,
                comp_comm_overlap_pctg: (communication_time > 0)
                    .then(|| round_to(100.0 * overlapped as f64 / communication_time as f64, 2)),
            }
        })
        .collect()
}
