//! Every host (rank) of a run on one time axis: the trace endpoints' `host=all` for a
//! run with two or more hosts, aligned by the hosts' clocks, and `host=all@steps`,
//! aligned on the first step every host recorded, as the step tools find steps
//! (multi-rank PyTorch, multi-host JAX and TensorFlow).
//!
//! One index holds them all: each host's sections are named `HOST · SECTION`, its
//! events shifted by its offset, and its model references count planes after those of
//! the hosts before it ([`Placement::plane_base`]), so an event's host is found from its
//! plane. Hosts are placed by rank, then name.

use std::sync::Arc;

use mlprof_analysis::counters::{CounterSeries, counter_series};
use mlprof_analysis::steps::StepOptions;
use mlprof_model::{Host, Session};
use mlprof_timeline::ModelRef;

use crate::error::ApiError;
use crate::placements::{Placement, Placements};
use crate::state::{AppState, HostKey};
use crate::tool_output::from_session;

/// Every host, aligned by their clocks.
pub(crate) const ALL: &str = "all";
/// Every host, aligned on their first common step.
pub(crate) const ALL_BY_STEPS: &str = "all@steps";

/// Whether `host` names every host of a run rather than one.
pub(crate) fn is_together(host: &str) -> bool {
    host == ALL || host == ALL_BY_STEPS
}

/// The placements of `host` (`all` or `all@steps`) of `run`: kept, or worked out from
/// its session (by steps, that runs the step analysis of every host) and kept.
pub(crate) async fn placed(state: &Arc<AppState>, run: &str, host: &str) -> Result<Arc<Placements>, ApiError> {
    let what = "placing the hosts on one time axis".to_string();
    from_session(state, state.placements(), &HostKey::new(run, host), what, |session, key| {
        Ok(placements(session, &key.host))
    })
    .await
}

/// The hosts of `session` placed on one axis (by steps for [`ALL_BY_STEPS`]), with a
/// sentence saying how they were aligned.
pub(crate) fn placements(session: &Session, host: &str) -> Placements {
    let mut order: Vec<usize> = (0..session.hosts.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&session.hosts[a], &session.hosts[b]);
        a.rank.unwrap_or(i64::MAX).cmp(&b.rank.unwrap_or(i64::MAX)).then_with(|| a.name.cmp(&b.name))
    });
    let hosts: Vec<&Host> = order.iter().map(|&i| &session.hosts[i]).collect();
    let (starts, how) = match (host == ALL_BY_STEPS).then(|| step_starts(&hosts)).flatten() {
        Some((step, starts)) => (starts, format!("aligned on step {step}, the first step every host recorded")),
        None => clock_starts(&hosts, host == ALL_BY_STEPS),
    };
    // The latest start goes to the earliest time: no host begins before 0.
    let latest = starts.iter().copied().max().unwrap_or(0);
    let mut plane_base = 0u32;
    let hosts = order
        .iter()
        .zip(&starts)
        .map(|(&index, &start)| {
            let placement = Placement { host: index, offset_ps: latest - start, plane_base };
            plane_base =
                plane_base.saturating_add(u32::try_from(session.hosts[index].planes.len()).unwrap_or(u32::MAX));
            placement
        })
        .collect();
    Placements { hosts, alignment: how }
}

/// Each host's reference time (ps) such that equal values are the same moment: its
/// profile start's wall clock, or 0 for all when a host does not say when it started.
fn clock_starts(hosts: &[&Host], steps_wanted: bool) -> (Vec<i64>, String) {
    let wanted = if steps_wanted { "no step is common to every host, so " } else { "" };
    match hosts.iter().map(|h| h.profile_start_ns).collect::<Option<Vec<i64>>>() {
        Some(starts) => {
            let first = starts.iter().copied().min().unwrap_or(0);
            // Later starts sit further right: the reference is minus the wall-clock delay.
            let refs = starts.iter().map(|&s| -(s - first).saturating_mul(1000)).collect();
            (refs, format!("{wanted}aligned by the hosts' clocks"))
        }
        None => {
            (vec![0; hosts.len()], format!("{wanted}aligned at their starts (a host does not say when it started)"))
        }
    }
}

/// The first step number every host recorded and each host's start of it (ps), if any.
fn step_starts(hosts: &[&Host]) -> Option<(i64, Vec<i64>)> {
    let steps: Vec<Vec<(i64, i64)>> = hosts.iter().map(|h| steps_of(h)).collect();
    let first = steps.first()?;
    let common = first.iter().map(|&(n, _)| n).filter(|n| steps.iter().all(|s| s.iter().any(|(m, _)| m == n))).min()?;
    let starts = steps.iter().map(|s| s.iter().find(|(n, _)| *n == common).map_or(0, |&(_, at)| at)).collect();
    Some((common, starts))
}

/// A host's steps as (number as the profile numbers it, start ps), found as every step
/// tool finds them (PyTorch's `ProfilerStep#N`, XProf's step markers and fallbacks).
fn steps_of(host: &Host) -> Vec<(i64, i64)> {
    let groups = mlprof_analysis::facts::step_groups(host);
    let found = mlprof_analysis::steps::host_steps(host, &groups, StepOptions::default());
    let mut steps: Vec<(i64, i64)> = found.steps.iter().map(|s| (s.profile_step, s.begin_ps)).collect();
    steps.sort_unstable();
    steps.dedup_by_key(|s| s.0);
    steps
}

/// The host of the event at `at` (its plane counted across hosts), that host's offset
/// (ps), and the reference within that host.
pub(crate) fn locate<'s>(
    session: &'s Session,
    placed: &[Placement],
    at: ModelRef,
) -> Option<(&'s Host, i64, ModelRef)> {
    let placement = placed.iter().filter(|p| p.plane_base <= at.plane).max_by_key(|p| p.plane_base)?;
    let host = session.hosts.get(placement.host)?;
    Some((host, placement.offset_ps, ModelRef { plane: at.plane - placement.plane_base, ..at }))
}

/// Every host's counter series, each group named after its host and shifted by its
/// offset.
pub(crate) fn counters(session: &Session, placed: &[Placement]) -> Vec<CounterSeries> {
    let mut all = Vec::new();
    for placement in placed {
        let Some(host) = session.hosts.get(placement.host) else { continue };
        for mut series in counter_series(host) {
            series.group = format!("{} · {}", host.name, series.group);
            series.points.iter_mut().for_each(|point| point.0 = point.0.saturating_add(placement.offset_ps));
            all.push(series);
        }
    }
    all
}

/// The name put before each section of `host`.
pub(crate) fn section_prefix(host: &Host) -> String {
    format!("{} · ", host.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(relative: &str) -> Session {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data").join(relative);
        mlprof_formats::discover::load(&path).expect("loads").pop().expect("a session")
    }

    #[test]
    fn steps_are_found_as_the_step_tools_find_them() {
        // (case, first step number and how many there are), as `mlprof analyze --tool steps` lists them.
        for (case, first, count) in [
            ("xspace/jax_profile/logdir", 2, 10),
            ("xspace/tf_keras2_input_bound/logdir", 5, 6),
            ("kineto/hta/trace_filter", 551, 2),
        ] {
            let session = session(case);
            let steps = steps_of(&session.hosts[0]);
            assert_eq!((steps.first().map(|s| s.0), steps.len()), (Some(first), count), "{case}");
        }
    }
}
