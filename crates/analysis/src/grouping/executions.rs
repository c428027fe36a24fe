//! Steps inferred from repeated executions of one compiled program, for XSpace
//! profiles (JAX, TensorFlow) without any step marker: a job captured without profiler
//! code of its own (`mlprof run`, `mlprof capture` of its profiler server) has no
//! `StepTraceAnnotation` and no Keras `step_num`, and XProf finds no steps in it.
//!
//! Evidence: a training loop executes the same program once per iteration. On the
//! `/host:CPU` plane an execution shows as
//! - `PjitFunction(f)` / `PmapFunction(f)`: JAX dispatching a jitted (pmapped) function;
//! - an event with a `tf_function_call` stat, named after the Python function: TensorFlow
//!   calling a `tf.function`; and `EagerLocalExecute: __inference_f_N`, the run of its
//!   concrete function;
//! - an event with a `program_id` or `hlo_module` stat but no `hlo_op`: the run of an XLA
//!   executable (an event with `hlo_op` is one of its ops);
//! - an NVTX range (or mark) the program itself records, `NVTX:<domain>:<message>` in a
//!   CUDA profile of mlprof-inject or an Nsight Systems export, its step number left out
//!   of the message (`step_3` and `step_4` are two executions of `step`).
//!
//! Executions of one program that overlap in time (a dispatch nested in one of the same
//! name, the same program on several threads at once) count as one.
//!
//! Rule: among the programs executed at least twice, keep those whose executions
//! (1) cover most of the traced time — from the first execution's start to the last's
//!     is at least half of the host plane's span — and
//! (2) keep going through it — with three periods or more (a period: the time from
//!     one start to the next), no period is longer than half of that stretch (bursts
//!     with a long pause between them fail). Pauses that are short next to the stretch
//!     pass however uneven they are: on a busy node the scheduler stops a job now and
//!     then, so a loop whose steps come 0.4 ms apart while it runs shows periods of
//!     several ms besides, and a test on the median period failed such loops;
//!
//! then take the one with the most execution time in all (the training step is where the
//! time goes; a helper executed as often, such as a random-key split or a metrics step,
//! weighs less; a dispatch weighs more than the executable run inside it, so the step
//! starts where the iteration's host work starts), ties to more executions, then to the
//! name. One program only: a train step and a metrics step executed alternately never
//! make double steps.
//!
//! Steps: step k runs from the start of execution k to the start of execution k + 1 (one
//! loop iteration, the input work between two executions included), numbered from 1 and
//! named `<program> <k>` as XProf names a group. n executions make n − 1 steps: the last
//! execution's iteration is cut by the profile's end, and its events stay ungrouped, as
//! events after the last marked step do. Host events belong to the step whose span holds
//! their start (on any thread); a GPU event to the step of the launch that started it;
//! grouping then gives other GPU events the step before them, as for marked steps.
//!
//! The one design decision to know: inferred steps have no marker events, so their spans
//! travel in [`HostGroups::step_spans`](super::HostGroups::step_spans) and the step
//! database takes each as its step's host marker.

use std::cmp::Ordering;
use std::collections::HashMap;

use mlprof_model::{Host, Plane, names};

use super::forest::{Forest, Kind};
use super::{GroupId, Grouper, NO_GROUP, StepSource};
use crate::xstats::{self, StatSlots};

/// How an execution shows in the profile, in order of preference on a tie.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Evidence {
    /// `PjitFunction(f)` / `PmapFunction(f)`.
    JaxDispatch,
    /// An event with `tf_function_call`, named after the `tf.function`.
    TfFunctionCall,
    /// `EagerLocalExecute: __inference_f_N`.
    TfFunctionRun,
    /// An event with `program_id` / `hlo_module` and no `hlo_op`.
    XlaProgram,
    /// An NVTX range or mark, `NVTX:<domain>:<message>` as mlprof-inject and the Nsight
    /// Systems reader name them; the step number a message ends with is not part of the
    /// program (`step_3`, `ProfilerStep#3` are `step`, `ProfilerStep`).
    NvtxRange,
}

/// One program: how it shows, its name (the function, the concrete function or the HLO
/// module) and, for XLA programs, its `program_id`.
type ProgramKey<'h> = (Evidence, &'h str, Option<i64>);

/// The steps inferred for one host.
#[derive(Clone, Debug, PartialEq)]
pub struct InferredSteps {
    /// The program or function whose executions are the steps (`train_step`); the steps
    /// are named after it.
    pub program: String,
    /// What its executions are in the profile, in words.
    pub evidence: String,
    /// Number of executions (after merging overlapping ones).
    pub executions: usize,
    /// Per step, its span `(begin_ps, end_ps)`: from one execution's start to the next's.
    pub spans: Vec<(i64, i64)>,
}

impl InferredSteps {
    /// The [`StepSource`] these steps report.
    pub fn source(&self) -> StepSource {
        StepSource::ProgramExecutions {
            program: self.program.clone(),
            evidence: self.evidence.clone(),
            executions: self.executions,
            groups: self.spans.len(),
        }
    }

    /// The name of step `index` (0-based): `<program> <index + 1>`.
    fn step_name(&self, index: usize) -> String {
        format!("{} {}", self.program, index + 1)
    }
}

const STATS: [&str; 4] = ["tf_function_call", "program_id", "hlo_module", "hlo_op"];
const TF_FUNCTION_CALL: usize = 0;
const PROGRAM_ID: usize = 1;
const HLO_MODULE: usize = 2;
const HLO_OP: usize = 3;

/// The steps of `host` inferred from the program it executes again and again (the rule
/// in the module docs); `None` when no program qualifies.
pub fn infer(host: &Host) -> Option<InferredSteps> {
    let mut programs: HashMap<ProgramKey<'_>, Vec<(i64, i64)>> = HashMap::new();
    let mut traced: Option<(i64, i64)> = None;
    for plane in host.planes.iter().filter(|plane| plane.name == names::HOST_PLANE) {
        collect_executions(plane, &mut programs);
        if let Some((begin, end)) = plane.span_ps() {
            traced = Some(traced.map_or((begin, end), |(b, e)| (b.min(begin), e.max(end))));
        }
    }
    let (traced_begin, traced_end) = traced?;
    let traced_ps = traced_end - traced_begin;
    let mut best: Option<(Candidate, ProgramKey<'_>)> = None;
    for (key, executions) in programs {
        let Some(candidate) = Candidate::of(executions, traced_ps) else { continue };
        let better = best.as_ref().is_none_or(|(chosen, chosen_key)| {
            candidate.cmp_weight(chosen).then_with(|| chosen_key.cmp(&key)) == Ordering::Greater
        });
        if better {
            best = Some((candidate, key));
        }
    }
    let (candidate, key) = best?;
    let (program, evidence) = describe(host, key);
    let spans = candidate.executions.windows(2).map(|pair| (pair[0].0, pair[1].0)).collect();
    Some(InferredSteps { program, evidence, executions: candidate.executions.len(), spans })
}

/// Adds the executions on `plane` to `programs`, by program.
fn collect_executions<'h>(plane: &'h Plane, programs: &mut HashMap<ProgramKey<'h>, Vec<(i64, i64)>>) {
    let by_name: Vec<Option<(Evidence, &str)>> =
        plane.event_metadata.iter().map(|metadata| evidence_in_name(&metadata.name)).collect();
    let slots = StatSlots::new(plane, STATS);
    let read_stats = [TF_FUNCTION_CALL, PROGRAM_ID, HLO_MODULE].iter().any(|&stat| slots.resolves(stat));
    for line in &plane.lines {
        for event in line.iter() {
            let span = (event.start_ps(), event.end_ps());
            if let Some(&Some((evidence, name))) = by_name.get(event.metadata_index() as usize) {
                programs.entry((evidence, name, None)).or_default().push(span);
                continue;
            }
            if !read_stats {
                continue;
            }
            let row = slots.row(plane, &event);
            if row.get(TF_FUNCTION_CALL).is_some() {
                let name = xstats::event_name(plane, &event);
                programs.entry((Evidence::TfFunctionCall, name, None)).or_default().push(span);
            } else if row.get(HLO_OP).is_none() && (row.get(PROGRAM_ID).is_some() || row.get(HLO_MODULE).is_some()) {
                let module = row.str(HLO_MODULE, plane, &event).unwrap_or("");
                programs.entry((Evidence::XlaProgram, module, row.int(PROGRAM_ID))).or_default().push(span);
            }
        }
    }
}

/// The evidence an event's name alone gives, with the program it names.
fn evidence_in_name(name: &str) -> Option<(Evidence, &str)> {
    let dispatched = ["PjitFunction(", "PmapFunction("]
        .iter()
        .find_map(|prefix| name.strip_prefix(prefix))
        .and_then(|rest| rest.strip_suffix(')'));
    if let Some(function) = dispatched.filter(|f| !f.is_empty()) {
        return Some((Evidence::JaxDispatch, function));
    }
    if let Some(range) = name.strip_prefix(NVTX_PREFIX) {
        let unnumbered = without_step_number(range);
        return (!unnumbered.is_empty()).then_some((Evidence::NvtxRange, unnumbered));
    }
    let run = name.strip_prefix("EagerLocalExecute: ").filter(|f| f.starts_with(INFERENCE_PREFIX))?;
    Some((Evidence::TfFunctionRun, run))
}

/// How NVTX ranges and marks are named in the XSpace layout of CUDA activity.
const NVTX_PREFIX: &str = "NVTX:";

/// `step_3` → `step`, `ProfilerStep#12` → `ProfilerStep`, `iteration 7` → `iteration`: a
/// message without the number it ends with and the separator before it; a message that is
/// only a number stays as it is.
fn without_step_number(message: &str) -> &str {
    let digits = message.trim_end_matches(|c: char| c.is_ascii_digit());
    if digits.len() == message.len() {
        return message;
    }
    let base = digits.trim_end_matches(['#', '_', ' ', '-', ':', '.']);
    if base.is_empty() { message } else { base }
}

/// The prefix of a `tf.function`'s concrete function (`__inference_train_step_140`).
const INFERENCE_PREFIX: &str = "__inference_";

/// A program that qualifies, with its executions merged and in time order.
struct Candidate {
    executions: Vec<(i64, i64)>,
    /// Total execution time (ps).
    busy_ps: i64,
}

impl Candidate {
    /// `executions` merged where they overlap, if they pass the rule's two tests
    /// against `traced_ps`, the host's traced time.
    fn of(mut executions: Vec<(i64, i64)>, traced_ps: i64) -> Option<Candidate> {
        executions.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::with_capacity(executions.len());
        for (begin, end) in executions {
            match merged.last_mut() {
                Some(last) if begin < last.1 => last.1 = last.1.max(end),
                _ => merged.push((begin, end)),
            }
        }
        let (first, last) = (merged.first()?.0, merged.last()?.0);
        let stretch = i128::from(last - first);
        if merged.len() < 2 || stretch * 2 < i128::from(traced_ps) {
            return None;
        }
        let periods = merged.windows(2).map(|pair| pair[1].0 - pair[0].0);
        let longest = periods.clone().max().map_or(0, i128::from);
        if stretch <= 0 || (periods.len() >= 3 && longest * 2 > stretch) {
            return None;
        }
        let busy_ps = merged.iter().map(|(begin, end)| end - begin).sum();
        Some(Candidate { executions: merged, busy_ps })
    }

    /// More execution time first, then more executions.
    fn cmp_weight(&self, other: &Candidate) -> Ordering {
        self.busy_ps.cmp(&other.busy_ps).then(self.executions.len().cmp(&other.executions.len()))
    }
}

/// The program's name and, in words, what its executions are.
fn describe(host: &Host, (evidence, name, program_id): ProgramKey<'_>) -> (String, String) {
    match evidence {
        Evidence::JaxDispatch => {
            let module = jax_module(host, name).map(|m| format!("; XLA program {m}")).unwrap_or_default();
            (name.to_string(), format!("jitted function {name} (PjitFunction events{module})"))
        }
        Evidence::TfFunctionCall => (name.to_string(), format!("tf.function {name} (events with tf_function_call)")),
        Evidence::TfFunctionRun => {
            let function = concrete_function_name(name);
            (function.to_string(), format!("tf.function {function} ({name} runs)"))
        }
        Evidence::XlaProgram => {
            let program = if name.is_empty() { "XLA program".to_string() } else { name.to_string() };
            let id = program_id.map(|id| format!(" (program_id {id})")).unwrap_or_default();
            (program.clone(), format!("XLA program {program}{id}"))
        }
        Evidence::NvtxRange => (name.to_string(), format!("NVTX range {name} (numbered or not)")),
    }
}

/// `train_step` for `__inference_train_step_140`.
fn concrete_function_name(name: &str) -> &str {
    let base = name.strip_prefix(INFERENCE_PREFIX).unwrap_or(name);
    match base.rsplit_once('_') {
        Some((function, id)) if !function.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) => function,
        _ => base,
    }
}

/// The XLA program JAX compiled for jitted function `function`: the one HLO module of
/// the `/host:metadata` plane named `jit_<function>(<program_id>)`, as
/// `jit_<function>, program_id N`; `None` when there is none or several.
fn jax_module(host: &Host, function: &str) -> Option<String> {
    let prefix = format!("jit_{function}(");
    let mut found = host
        .planes
        .iter()
        .filter(|plane| plane.name == names::METADATA_PLANE)
        .flat_map(|plane| &plane.event_metadata)
        .filter_map(|metadata| metadata.name.strip_prefix(&prefix)?.strip_suffix(')'));
    let id = found.next()?;
    if found.next().is_some() {
        return None;
    }
    Some(format!("jit_{function}, program_id {id}"))
}

/// The index of the span (in `spans`, sorted and not overlapping) that holds `ts_ps`.
fn span_at(spans: &[(i64, i64)], ts_ps: i64) -> Option<usize> {
    let index = spans.partition_point(|&(begin, _)| begin <= ts_ps).checked_sub(1)?;
    (ts_ps < spans[index].1).then_some(index)
}

/// Groups `forest`'s events into `steps`: host events by their start, GPU events by the
/// launch that started them (the rest of the GPU events are left to grouping's
/// inheritance).
pub(super) fn group<'f, 'h>(forest: &'f Forest<'h>, steps: &InferredSteps) -> Grouper<'f, 'h> {
    let mut grouper = Grouper::new(forest);
    for (plane, line, first, _) in forest.line_ranges() {
        let plane = &forest.host.planes[plane];
        if plane.name != names::HOST_PLANE {
            continue;
        }
        for event in plane.lines[line].iter() {
            let Some(step) = span_at(&steps.spans, event.start_ps()) else { continue };
            if let Some(group) = grouper.group_of.get_mut(first as usize + event.index()) {
                *group = step as GroupId;
            }
        }
    }
    for launch in 0..forest.len() {
        let group = grouper.group_of[launch as usize];
        if group == NO_GROUP || forest.kinds[launch as usize] != Kind::KernelLaunch {
            continue;
        }
        for child in forest.children(launch) {
            let index = child as usize;
            if forest.kinds[index] == Kind::KernelExecute && grouper.group_of[index] == NO_GROUP {
                grouper.group_of[index] = group;
            }
        }
    }
    grouper.names = (0..steps.spans.len()).map(|index| steps.step_name(index)).collect();
    grouper
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_give_the_program() {
        assert_eq!(evidence_in_name("PjitFunction(train_step)"), Some((Evidence::JaxDispatch, "train_step")));
        assert_eq!(evidence_in_name("PmapFunction(update)"), Some((Evidence::JaxDispatch, "update")));
        assert_eq!(evidence_in_name("PjitFunction()"), None);
        assert_eq!(
            evidence_in_name("EagerLocalExecute: __inference_train_step_140"),
            Some((Evidence::TfFunctionRun, "__inference_train_step_140"))
        );
        assert_eq!(evidence_in_name("EagerLocalExecute: MatMul"), None);
        assert_eq!(concrete_function_name("__inference_train_step_140"), "train_step");
        assert_eq!(concrete_function_name("__inference_step"), "step");
        let nvtx = |name| evidence_in_name(name).map(|(_, program)| program);
        assert_eq!(nvtx("NVTX:ProfilerStep#12"), Some("ProfilerStep"));
        assert_eq!(nvtx("NVTX:train:step_3"), Some("train:step"));
        assert_eq!(nvtx("NVTX:iteration 7"), Some("iteration"));
        assert_eq!(nvtx("NVTX:forward"), Some("forward"));
        assert_eq!(nvtx("NVTX:42"), Some("42"));
        assert_eq!(nvtx("NVTX:"), None);
    }

    #[test]
    fn overlapping_executions_merge_and_must_cover_the_traced_time_without_a_long_pause() {
        // Nested dispatches of one function merge: 4 executions every 100 ps over 400.
        let nested = vec![(0, 50), (5, 45), (100, 150), (105, 140), (200, 250), (300, 350)];
        let candidate = Candidate::of(nested, 400).expect("qualifies");
        assert_eq!(candidate.executions, vec![(0, 50), (100, 150), (200, 250), (300, 350)]);
        assert_eq!(candidate.busy_ps, 200);
        // Executions only in the first quarter of the traced time.
        assert!(Candidate::of(vec![(0, 10), (50, 60), (100, 110)], 1000).is_none());
        // Two bursts far apart: one pause holds most of the stretch.
        let bursts = vec![(0, 1), (10, 11), (20, 21), (1000, 1001), (1010, 1011), (1020, 1021)];
        assert!(Candidate::of(bursts, 1100).is_none());
        // A loop the scheduler pauses: most periods 4 ps, every third one 60 ps, so the
        // median period (4) times the 29 periods is less than half the stretch (620).
        let starved: Vec<(i64, i64)> = (0..30)
            .scan(0, |start, k| {
                let begin = *start;
                *start += if k % 3 == 2 { 60 } else { 4 };
                Some((begin, begin + 2))
            })
            .collect();
        let candidate = Candidate::of(starved, 700).expect("a paused loop qualifies");
        assert_eq!(candidate.executions.len(), 30);
        // Three executions, or two: too few periods to call uneven.
        assert!(Candidate::of(vec![(0, 1), (100, 101), (900, 901)], 1000).is_some());
        assert!(Candidate::of(vec![(0, 1), (900, 901)], 1000).is_some());
        assert!(Candidate::of(vec![(0, 10)], 10).is_none());
    }

    #[test]
    fn times_fall_in_the_span_that_holds_them() {
        let spans = [(100, 200), (200, 300)];
        assert_eq!(span_at(&spans, 99), None);
        assert_eq!(span_at(&spans, 100), Some(0));
        assert_eq!(span_at(&spans, 200), Some(1));
        assert_eq!(span_at(&spans, 300), None);
    }
}
