//! The PyTorch side of the input-pipeline analyzer: the `torch.utils.data.DataLoader`
//! as the profiler records it (the `enumerate(DataLoader)#…__next__` annotation on
//! the training thread — PyTorch's `IteratorGetNext`), its time per step, what that
//! time was spent on, and advice in PyTorch's own terms (`num_workers`,
//! `pin_memory`, `prefetch_factor`, `persistent_workers`).
//!
//! What the time inside `__next__` was spent on comes from the events nested in it on
//! the same thread, outermost per stage: Python frames (`with_stack=True`) named
//! `__getitem__`/`__getitems__` (the Dataset), `…collate…` (collate_fn),
//! `pin_memory` (the pin-memory step), `_try_get_data`/`_get_data` (waiting for worker
//! processes), and without stacks the ops `aten::stack` (collate) and
//! `aten::pin_memory`/`aten::_pin_memory`; the rest is the sampler and Python overhead.

use std::collections::BTreeMap;

use mlprof_model::{Event, Host, Plane, human, names};
use serde::Serialize;

use super::Summary;
use crate::facts::{self, Framework};
use crate::grouping::profiler_steps::{self, ProfilerStep};
use crate::kineto::{self, Category, CopyDirection};
use crate::xstats;

use mlprof_model::time::PS_PER_MS_F64;

/// Where time inside the DataLoader's `__next__` went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// `Dataset.__getitem__` / `__getitems__`: loading and per-sample preprocessing.
    Dataset,
    /// `collate_fn`: assembling the batch.
    Collate,
    /// Copying the batch into pinned memory.
    PinMemory,
    /// Waiting for batches from worker processes.
    WorkerWait,
    /// Everything else: the sampler, Python overhead, untraced work.
    Other,
}

impl Stage {
    /// The label people read.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Dataset => "Dataset __getitem__",
            Stage::Collate => "collate_fn",
            Stage::PinMemory => "pin memory",
            Stage::WorkerWait => "waiting for worker processes",
            Stage::Other => "sampler and other Python",
        }
    }

    /// The stage an event nested in `__next__` marks, if any.
    fn of(category: Category, name: &str) -> Option<Stage> {
        match category {
            Category::PythonFunction => {
                let function = name.rsplit(": ").next().unwrap_or(name);
                if function == "__getitem__" || function == "__getitems__" {
                    Some(Stage::Dataset)
                } else if function.contains("collate") {
                    Some(Stage::Collate)
                } else if function == "pin_memory" {
                    Some(Stage::PinMemory)
                } else if function == "_try_get_data" || function == "_get_data" {
                    Some(Stage::WorkerWait)
                } else {
                    None
                }
            }
            Category::CpuOp => match name {
                "aten::stack" => Some(Stage::Collate),
                "aten::pin_memory" | "aten::_pin_memory" => Some(Stage::PinMemory),
                _ => None,
            },
            _ => None,
        }
    }
}

/// DataLoader time of one step on one host.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DataLoaderStep {
    /// Host name.
    pub host: String,
    /// `ProfilerStep#N`.
    pub step_name: String,
    /// Step time (ms).
    pub step_time_ms: f64,
    /// `__next__` calls in the step.
    pub calls: u64,
    /// Time the training thread spent in `__next__` (ms).
    pub wait_ms: f64,
}

/// Time of one stage over all `__next__` calls.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StageTime {
    /// The stage.
    pub stage: Stage,
    /// Total time (ms).
    pub time_ms: f64,
    /// Share of all DataLoader time (%).
    pub percent: f64,
}

/// The DataLoader analysis of PyTorch traces.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DataLoaderAnalysis {
    /// The iterator classes seen (`_SingleProcessDataLoaderIter`, …).
    pub iterators: Vec<String>,
    /// Whether batches come from worker processes (`num_workers > 0`).
    pub multiprocess: bool,
    /// All `__next__` calls.
    pub calls: u64,
    /// Per host and step.
    pub steps: Vec<DataLoaderStep>,
    /// Statistics of the per-step wait (ms).
    pub wait_per_step_ms: Summary,
    /// Statistics of single `__next__` calls (ms).
    pub call_ms: Summary,
    /// Median single call (ms).
    pub median_call_ms: f64,
    /// Where the DataLoader time went, largest first.
    pub stages: Vec<StageTime>,
    /// Host-to-device copies from pageable memory, per step on average.
    pub pageable_h2d_copies_per_step: f64,
    /// Their time per step on average (ms).
    pub pageable_h2d_ms_per_step: f64,
    /// Host-to-device copies from pinned memory, per step on average.
    pub pinned_h2d_copies_per_step: f64,
}

/// The DataLoader analysis of the PyTorch hosts among `hosts`; `None` when none is a
/// PyTorch host with `ProfilerStep#N` steps.
pub fn analyze(hosts: &[&Host]) -> Option<DataLoaderAnalysis> {
    let mut gathered = Gathered::default();
    for host in hosts.iter().filter(|host| facts::framework(host) == Framework::Pytorch) {
        let steps = profiler_steps::find(host);
        if steps.is_empty() {
            continue;
        }
        gathered.step_count += steps.len();
        let per_step = gathered.add_next_calls(host, &steps);
        for (step, (calls, wait_ps)) in steps.iter().zip(per_step) {
            gathered.result.steps.push(DataLoaderStep {
                host: host.name.clone(),
                step_name: step.name.clone(),
                step_time_ms: (step.end_ps - step.begin_ps) as f64 / PS_PER_MS_F64,
                calls,
                wait_ms: wait_ps as f64 / PS_PER_MS_F64,
            });
        }
        gathered.add_h2d_copies(host, &steps);
    }
    if gathered.step_count == 0 {
        return None;
    }
    Some(gathered.finish())
}

/// What the walk over the hosts collects before the statistics are taken.
#[derive(Default)]
struct Gathered {
    /// The analysis so far: iterators, multiprocess, calls and steps filled.
    result: DataLoaderAnalysis,
    /// Every `__next__` call's time (ms).
    calls_ms: Vec<f64>,
    /// Time per stage over all calls (ps).
    stage_ps: BTreeMap<Stage, i64>,
    /// Time in all `__next__` calls (ps).
    total_wait_ps: i64,
    /// Steps over all hosts.
    step_count: usize,
    /// Host-to-device copies from pageable memory within steps.
    pageable: u64,
    /// Their time (ps).
    pageable_ps: i64,
    /// Host-to-device copies from pinned memory within steps.
    pinned: u64,
}

impl Gathered {
    /// Adds the `__next__` calls on `host`'s threads; returns the calls and their time
    /// (ps) per step of `steps`.
    fn add_next_calls(&mut self, host: &Host, steps: &[ProfilerStep]) -> Vec<(u64, i64)> {
        let mut per_step: Vec<(u64, i64)> = vec![(0, 0); steps.len()];
        let Some(plane) = host.plane(names::HOST_PLANE) else { return per_step };
        let categories = kineto::categories(plane);
        for line in &plane.lines {
            // Lines keep the file's order: sort by start (outer events first).
            let mut events: Vec<_> = line.iter().collect();
            events.sort_by_key(|e| (e.start_ps(), std::cmp::Reverse(e.end_ps())));
            for (i, event) in events.iter().enumerate() {
                let name = xstats::event_name(plane, event);
                if kineto::category_of(&categories, event) != Category::UserAnnotation
                    || !kineto::is_dataloader_next(name)
                {
                    continue;
                }
                let iterator = name.rsplit('#').next().unwrap_or(name).trim_end_matches(".__next__");
                if !self.result.iterators.iter().any(|known| known == iterator) {
                    self.result.iterators.push(iterator.to_string());
                }
                self.result.multiprocess |= kineto::is_multiprocess_dataloader(name);
                let (begin, end) = (event.start_ps(), event.end_ps());
                self.result.calls += 1;
                self.calls_ms.push((end - begin) as f64 / PS_PER_MS_F64);
                self.total_wait_ps += end - begin;
                if let Some(step) = profiler_steps::step_at(steps, begin) {
                    per_step[step].0 += 1;
                    per_step[step].1 += end - begin;
                }
                self.add_stages(plane, &categories, event, &events[i + 1..]);
            }
        }
        per_step
    }

    /// Splits the time of the `__next__` call `call` into stages, from the outermost
    /// event of each stage among those nested in it (`later`: the events that start
    /// after it on its thread, by start); what no stage covers is [`Stage::Other`].
    fn add_stages(&mut self, plane: &Plane, categories: &[Category], call: &Event<'_>, later: &[Event<'_>]) {
        let (begin, end) = (call.start_ps(), call.end_ps());
        let mut covered = 0;
        let mut stage_end: BTreeMap<Stage, i64> = BTreeMap::new();
        for nested in later.iter().take_while(|e| e.start_ps() < end) {
            let Some(stage) = Stage::of(kineto::category_of(categories, nested), xstats::event_name(plane, nested))
            else {
                continue;
            };
            if stage_end.get(&stage).is_some_and(|&open| nested.start_ps() < open) {
                continue;
            }
            let nested_end = nested.end_ps().min(end);
            stage_end.insert(stage, nested_end);
            *self.stage_ps.entry(stage).or_default() += nested_end - nested.start_ps();
            covered += nested_end - nested.start_ps();
        }
        *self.stage_ps.entry(Stage::Other).or_default() += (end - begin - covered).max(0);
    }

    /// Counts the host-to-device copies within `steps` on `host`'s GPUs, from pageable
    /// and from pinned memory.
    fn add_h2d_copies(&mut self, host: &Host, steps: &[ProfilerStep]) {
        for plane in host.planes.iter().filter(|p| p.is_gpu()) {
            let categories = kineto::categories(plane);
            for line in &plane.lines {
                for event in line.iter() {
                    if kineto::category_of(&categories, &event) != Category::GpuMemcpy
                        || profiler_steps::step_at(steps, event.start_ps()).is_none()
                    {
                        continue;
                    }
                    let Some(copy) = kineto::parse_copy(xstats::event_name(plane, &event)) else { continue };
                    if copy.direction != CopyDirection::HostToDevice {
                        continue;
                    }
                    if copy.is_pageable() {
                        self.pageable += 1;
                        self.pageable_ps += event.duration_ps();
                    } else if copy.source == kineto::MemoryKind::Pinned {
                        self.pinned += 1;
                    }
                }
            }
        }
    }

    /// The analysis: statistics of the waits and calls, stage shares and copies per
    /// step (`step_count` > 0).
    fn finish(mut self) -> DataLoaderAnalysis {
        let mut result = self.result;
        let waits: Vec<f64> = result.steps.iter().map(|s| s.wait_ms).collect();
        result.wait_per_step_ms = Summary::of(&waits);
        result.call_ms = Summary::of(&self.calls_ms);
        self.calls_ms.sort_by(f64::total_cmp);
        result.median_call_ms = self.calls_ms.get(self.calls_ms.len() / 2).copied().unwrap_or(0.0);
        let total_ms = self.total_wait_ps as f64 / PS_PER_MS_F64;
        result.stages = self
            .stage_ps
            .into_iter()
            .filter(|(_, ps)| *ps > 0)
            .map(|(stage, ps)| {
                let time_ms = ps as f64 / PS_PER_MS_F64;
                StageTime { stage, time_ms, percent: if total_ms > 0.0 { 100.0 * time_ms / total_ms } else { 0.0 } }
            })
            .collect();
        result.stages.sort_by(|a, b| b.time_ms.total_cmp(&a.time_ms).then(a.stage.cmp(&b.stage)));
        let steps = self.step_count as f64;
        result.pageable_h2d_copies_per_step = self.pageable as f64 / steps;
        result.pageable_h2d_ms_per_step = self.pageable_ps as f64 / PS_PER_MS_F64 / steps;
        result.pinned_h2d_copies_per_step = self.pinned as f64 / steps;
        result
    }
}

impl DataLoaderAnalysis {
    /// PyTorch advice for a job whose input (DataLoader wait plus host-to-device
    /// copies) is `input_percent` % of its step time.
    pub fn advice(&self, input_percent: f64) -> Vec<String> {
        let mut advice = Vec::new();
        let wait = human::duration_ms(self.wait_per_step_ms.average);
        if self.calls == 0 {
            if input_percent >= 5.0 {
                advice.push("No DataLoader iteration was recorded inside the profiled steps: if you feed batches another way, wrap the fetch in torch.profiler.record_function(\"enumerate(DataLoader)#…__next__\") so the profiler can attribute input time.".to_string());
            }
        } else if input_percent >= 5.0 {
            if self.multiprocess {
                advice.push(format!(
                    "The training loop still waits {wait} per step for DataLoader workers: increase num_workers (worker processes preparing batches in parallel) and prefetch_factor (batches each worker keeps ready ahead, default 2)."
                ));
            } else {
                advice.push(format!(
                    "The DataLoader runs in the training process (num_workers=0): {wait} per step is spent preparing batches while nothing else runs. Set num_workers > 0 (start with the CPU cores available per GPU, e.g. 4–8) so worker processes prepare the next batches during the step."
                ));
            }
            if let Some(top) = self.stages.first().filter(|s| s.percent >= 50.0) {
                let fix = match top.stage {
                    Stage::Dataset => {
                        "move per-sample decoding and preprocessing offline, batch it in __getitems__, or do augmentation on the GPU"
                    }
                    Stage::Collate => {
                        "simplify collate_fn (stack tensors rather than converting Python objects), or return ready batches from the Dataset"
                    }
                    Stage::PinMemory => {
                        "pin fewer, larger buffers or pin in the workers (pin_memory_device) rather than in the main process"
                    }
                    Stage::WorkerWait => {
                        "the workers cannot keep up: add workers, raise prefetch_factor, or make each sample cheaper"
                    }
                    Stage::Other => {
                        "look at the sampler and Python code around the loop (record with with_stack=True to see it)"
                    }
                };
                advice.push(format!("{:.0}% of the DataLoader time is {}: {fix}.", top.percent, top.stage.label()));
            }
        } else {
            advice.push(format!(
                "The DataLoader is not the bottleneck ({wait} per step, {input_percent:.1}% of the step time with host-to-device copies): keep num_workers as it is and look at the other categories."
            ));
        }
        if self.multiprocess && self.median_call_ms > 0.0 && self.call_ms.maximum > 5.0 * self.median_call_ms {
            advice.push(format!(
                "The slowest DataLoader call took {} against a median of {}, the signature of worker processes starting (each epoch by default): set persistent_workers=True to keep them between epochs.",
                human::duration_ms(self.call_ms.maximum),
                human::duration_ms(self.median_call_ms)
            ));
        }
        if self.pageable_h2d_copies_per_step > 0.0 {
            advice.push(format!(
                "{} host-to-device copies per step read pageable memory ({} per step on the GPU), which the driver stages and cannot overlap with compute: set pin_memory=True in the DataLoader and copy with .to(device, non_blocking=True).",
                human::count(self.pageable_h2d_copies_per_step),
                human::duration_ms(self.pageable_h2d_ms_per_step)
            ));
        }
        advice
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_come_from_python_frames_and_ops() {
        assert_eq!(Stage::of(Category::PythonFunction, "train.py(38): __getitem__"), Some(Stage::Dataset));
        assert_eq!(
            Stage::of(Category::PythonFunction, "torch/utils/data/_utils/collate.py(340): default_collate"),
            Some(Stage::Collate)
        );
        assert_eq!(Stage::of(Category::CpuOp, "aten::_pin_memory"), Some(Stage::PinMemory));
        assert_eq!(
            Stage::of(Category::PythonFunction, "torch/utils/data/dataloader.py(1300): _try_get_data"),
            Some(Stage::WorkerWait)
        );
        assert_eq!(Stage::of(Category::CpuOp, "aten::mean"), None);
    }

    #[test]
    fn advice_names_the_pytorch_knobs() {
        let single = DataLoaderAnalysis {
            calls: 3,
            wait_per_step_ms: Summary { average: 1.7, ..Summary::default() },
            stages: vec![StageTime { stage: Stage::Dataset, time_ms: 4.4, percent: 85.0 }],
            ..DataLoaderAnalysis::default()
        };
        let advice = single.advice(24.0);
        assert!(advice[0].contains("num_workers > 0"), "{advice:?}");
        assert!(advice[1].contains("Dataset __getitem__"), "{advice:?}");
        let workers = DataLoaderAnalysis {
            multiprocess: true,
            calls: 10,
            median_call_ms: 0.1,
            call_ms: Summary { maximum: 900.0, ..Summary::default() },
            pageable_h2d_copies_per_step: 2.0,
            ..DataLoaderAnalysis::default()
        };
        let advice = workers.advice(2.0).join("\n");
        assert!(advice.contains("not the bottleneck"));
        assert!(advice.contains("persistent_workers=True"));
        assert!(advice.contains("pin_memory=True"));
        let advice = workers.advice(30.0).join("\n");
        assert!(advice.contains("prefetch_factor"));
    }
}
