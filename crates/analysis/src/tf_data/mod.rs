//! `tf_data_bottleneck_analysis`: per host, the tf.data input pipelines seen in the
//! host plane, how long each `GetNext` call of their root iterator took, which
//! iterators were on its critical path, and which of those was the bottleneck; over
//! all hosts, the slowest pipelines with a suggestion each. Reproduces XProf's
//! `xplane_to_tf_data_stats.cc` (removed from XProf in 2025) and, for
//! `--format xprof-json`, the three gviz DataTables its Python front end made.
//!
//! The one design decision to know: an iterator is *blocking* in a call when it is the
//! root iterator, or when its parent is blocking and the two overlap in time; the
//! blocking iterators form the critical path, and the bottleneck is the blocking
//! iterator with the largest self time (its time minus the overlap with its child
//! iterators). Where XProf iterates hash maps (pipeline naming, tie-breaking), we use
//! ascending iterator ids so results are deterministic.
//!
//! Known quirk kept for parity: XProf reads the `id`/`parent_id` stats with
//! `IntValue()`, which gives 0 for ids TensorFlow stored as `uint64` (those ≥ 2^63,
//! about half of them), so such iterators merge into one "iterator 0".

mod forest;
mod render;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};

use mlprof_model::fxhash::FxMap;
use mlprof_model::{Host, Plane, names};
use serde::Serialize;

use forest::Forest;

/// A call slower than this (50 µs, in ps) is a slow call; a pipeline whose slowest call
/// is slower makes the job input bound
/// (<https://www.tensorflow.org/guide/data_performance_analysis>).
pub const SLOW_CALL_THRESHOLD_PS: i64 = 50_000_000;

/// Deepest iterator nesting walked below a root iterator (as XProf).
const MAX_DEPTH: usize = 100;

/// Most iterator events walked for one root call: a guard against inputs whose
/// producer links fan out combinatorially (real profiles stay far below it).
const MAX_VISITS_PER_CALL: usize = 1_000_000;

/// Iterator kinds that run asynchronously (in background threads).
const ASYNC_ITERATORS: [&str; 8] = [
    "Prefetch",
    "ParallelInterleave",
    "ParallelMap",
    "ParseExample",
    "MapAndBatch",
    "DataService",
    "LegacyParallelInterleave",
    "ParallelBatch",
];

/// The combined tf.data analysis of a set of hosts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TfDataAnalysis {
    /// Per host, in the order given to [`analyze`].
    pub hosts: Vec<HostTfData>,
    /// The slowest call of every host input pipeline (device pipelines excluded), with
    /// its bottleneck, slowest first.
    pub bottlenecks: Vec<PipelineBottleneck>,
    /// Whether the slowest pipeline's slowest call took longer than 50 µs.
    pub is_input_bound: bool,
    /// XProf's one-paragraph verdict.
    pub summary: String,
}

/// What one host's plane shows of tf.data.
#[derive(Clone, Debug, Default, Serialize)]
pub struct HostTfData {
    /// Host name ([`Host::name`]).
    pub host: String,
    /// Every iterator seen, by ascending id.
    pub iterators: Vec<IteratorMetadata>,
    /// The input pipelines (one per root iterator id), by ascending root iterator id.
    pub pipelines: Vec<InputPipeline>,
}

/// An iterator of a tf.data pipeline (from its first event).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IteratorMetadata {
    /// Iterator id (the event's `id` stat; 0 when stored as unsigned, as XProf reads it).
    pub id: i64,
    /// The parent iterator's id (`parent_id` stat); 0 for none.
    pub parent_id: i64,
    /// Kind of iterator: the last `::` segment of the event name (`Prefetch`).
    pub name: String,
    /// Full event name (`Iterator::Root::Prefetch`).
    pub long_name: String,
    /// Whether this kind runs asynchronously (Prefetch, ParallelMap, …).
    pub is_async: bool,
}

/// Whether an input pipeline feeds the host or a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PipelineKind {
    /// A host input pipeline (`Host:<n>`).
    Host,
    /// A device input pipeline (`Device:<n>`, under `Iterator::Prefetch::Generator`).
    Device,
}

/// One input pipeline: all calls of one root iterator.
#[derive(Clone, Debug, Serialize)]
pub struct InputPipeline {
    /// Root iterator id.
    pub id: i64,
    /// `Host:<n>` or `Device:<n>`, numbered per host in ascending id order.
    pub name: String,
    /// Host or device pipeline.
    pub kind: PipelineKind,
    /// Shortest call (ps).
    pub min_latency_ps: i64,
    /// Mean call, truncated to whole ps (ps).
    pub avg_latency_ps: i64,
    /// Longest call (ps).
    pub max_latency_ps: i64,
    /// Number of calls.
    pub num_calls: i64,
    /// Calls longer than [`SLOW_CALL_THRESHOLD_PS`].
    pub num_slow_calls: i64,
    /// The calls, longest first.
    pub calls: Vec<PipelineCall>,
}

/// One call of a root iterator with the iterators it ran.
#[derive(Clone, Debug, Serialize)]
pub struct PipelineCall {
    /// Duration of the root iterator event (ps).
    pub latency_ps: i64,
    /// Id of the blocking iterator with the largest self time (0 when none has any).
    pub bottleneck_iterator_id: i64,
    /// That iterator's self time in this call (ps).
    pub bottleneck_self_time_ps: i64,
    /// Per iterator reached from the root, by ascending id.
    pub iterators: Vec<IteratorCallStats>,
}

/// One iterator's share of one call.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct IteratorCallStats {
    /// Iterator id.
    pub id: i64,
    /// Start of the first of its events reached in this call (ps, relative to the
    /// profile start).
    pub start_ps: i64,
    /// Sum of its events' durations (ps).
    pub duration_ps: i64,
    /// Sum of its events' self times: duration minus the overlap with child iterator
    /// events (ps).
    pub self_time_ps: i64,
    /// Whether it is on the call's critical path.
    pub is_blocking: bool,
    /// Number of its events reached.
    pub num_calls: i64,
}

/// Which kind of fix applies to a bottleneck iterator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BottleneckKind {
    /// Reading a source (files, tensors, generators).
    SlowSource,
    /// Fetching from the tf.data service.
    SlowDataService,
    /// Reading a remote source.
    SlowRemoteSource,
    /// A transformation that has a parallel version (`map`, `interleave`).
    SlowTransformationWithParallelVersion,
    /// A transformation without one (`filter`, `batch`, `unbatch`).
    SlowTransformationWithoutParallelVersion,
    /// Anything else.
    Other,
}

impl BottleneckKind {
    /// The kind for an iterator name (the last segment, e.g. `TFRecord`).
    pub fn of(iterator_name: &str) -> BottleneckKind {
        match iterator_name {
            "TFRecord"
            | "SSTable"
            | "RecordIO"
            | "Spanner"
            | "TFColumn"
            | "SleepwalkRemoteDataset"
            | "TextLine"
            | "StitchedTimelineDataset"
            | "DateKeyDataset"
            | "CapacitorProto"
            | "LMDB"
            | "ExternalDataset"
            | "PearModel"
            | "FixedLengthRecordV2"
            | "FromTensor"
            | "TensorSlice"
            | "Generator"
            | "SyntheticDatasetOp" => BottleneckKind::SlowSource,
            "DataService" => BottleneckKind::SlowDataService,
            "GuzzlerDataGuzzlerRemoteDataset"
            | "ReverbDataset"
            | "DatasetSampleGame"
            | "Courier"
            | "ReverbEpisodeDataset" => BottleneckKind::SlowRemoteSource,
            "Map" | "Interleave" => BottleneckKind::SlowTransformationWithParallelVersion,
            "Filter" | "Batch" | "Unbatch" => BottleneckKind::SlowTransformationWithoutParallelVersion,
            _ => BottleneckKind::Other,
        }
    }

    /// XProf's suggestion for this kind, as HTML (`<br/>`, `<code>`, links).
    pub fn suggestion_html(self) -> String {
        const PLAYBOOK: &str = "https://www.tensorflow.org/guide/data_performance_analysis";
        const SOURCE: &str = "https://www.tensorflow.org/guide/data_performance_analysis#source_datasets";
        const CPU: &str =
            "https://www.tensorflow.org/guide/data_performance_analysis#3_are_you_reaching_high_cpu_utilization";
        const TRANSFORMATION: &str =
            "https://www.tensorflow.org/guide/data_performance_analysis#transformation_datasets";
        const EXTRACTION: &str = "https://www.tensorflow.org/guide/data_performance#parallelizing_data_extraction";
        const PARALLEL: &str = "https://www.tensorflow.org/guide/data_performance#parallelizing_data_transformation";
        const CACHE: &str = "https://www.tensorflow.org/guide/data_performance#caching";
        const SERVICE: &str = "https://www.tensorflow.org/api_docs/python/tf/data/experimental/service?version=nightly";
        const CACHE_ADVICE: &str = "Consider adding <code>cache</code> after this transformation if your data fits \
             into memory and it is appropriate (e.g., there is no randomness in upstream transformations like \
             <code>shuffle</code>).";
        let a = |url: &str, text: &str| format!("<a href=\"{url}\" target=\"_blank\">{text}</a>");
        match self {
            BottleneckKind::SlowSource => format!(
                "1. Check the locality of a host and input data. Ideally, they should be in the same cell (or very \
                 close, like the same region).<br/>2. Parallelize reading from this dataset source. See {} and {} \
                 for more details.<br/>",
                a(SOURCE, "here"),
                a(EXTRACTION, "here")
            ),
            BottleneckKind::SlowDataService => format!(
                "1. Fetching data from tf.data service took a while. Profile the tf.data service worker to analyze \
                 the issue further.<br/>2. See {} for more details on tf.data service.<br/>3. See {} for other \
                 suggestions.",
                a(SERVICE, "this"),
                a(PLAYBOOK, "this")
            ),
            BottleneckKind::SlowRemoteSource => format!(
                "1. The remote data source is slow. Profile its host to analyze the issue further.<br/>2. See {} \
                 for other suggestions.",
                a(PLAYBOOK, "this")
            ),
            BottleneckKind::SlowTransformationWithParallelVersion => format!(
                "1. Parallelize this transformation by setting \
                 <code>num_parallel_calls=tf.data.experimental.AUTOTUNE</code>. See {} for more details.<br/>2. \
                 {CACHE_ADVICE} See {} for more details.<br/>3. Find more resources {}.",
                a(PARALLEL, "this"),
                a(CACHE, "this"),
                a(TRANSFORMATION, "here")
            ),
            BottleneckKind::SlowTransformationWithoutParallelVersion => format!(
                "1. This transformation is inherently sequential. Add outer parallelism by running multiple copies \
                 of the input pipeline over sharded inputs and combining the results. See {} for more \
                 details.<br/>2. {CACHE_ADVICE} See {} for more details.<br/>3. Find more resources {}.",
                a(TRANSFORMATION, "this"),
                a(CACHE, "this"),
                a(CPU, "here")
            ),
            BottleneckKind::Other => format!("See {} for suggestions.", a(PLAYBOOK, "this")),
        }
    }
}

/// The slowest call of one host input pipeline and its bottleneck.
#[derive(Clone, Debug, Serialize)]
pub struct PipelineBottleneck {
    /// Host name.
    pub host: String,
    /// Pipeline name (`Host:0`).
    pub input_pipeline: String,
    /// The pipeline's longest call (ps).
    pub max_latency_ps: i64,
    /// Bottleneck iterator id (0 when the call had no blocking self time).
    pub iterator_id: i64,
    /// Bottleneck iterator kind (`MapAndBatch`; "" when unknown).
    pub iterator_name: String,
    /// Its full name (`Iterator::Root::MapAndBatch`).
    pub iterator_long_name: String,
    /// Its self time in that call (ps).
    pub iterator_self_time_ps: i64,
    /// Which kind of fix applies.
    pub kind: BottleneckKind,
    /// XProf's suggestion (HTML).
    pub suggestion_html: String,
}

/// Runs the analysis over `hosts` (each host's `/host:CPU` plane; a host without one
/// contributes nothing).
pub fn analyze(hosts: &[&Host]) -> TfDataAnalysis {
    let hosts: Vec<HostTfData> = hosts
        .iter()
        .map(|host| match host.plane(names::HOST_PLANE) {
            Some(plane) => analyze_plane(&host.name, plane),
            None => HostTfData { host: host.name.clone(), ..HostTfData::default() },
        })
        .collect();
    let bottlenecks = bottlenecks(&hosts);
    let max_latency_ps = bottlenecks.first().map_or(0, |b| b.max_latency_ps);
    let is_input_bound = max_latency_ps > SLOW_CALL_THRESHOLD_PS;
    let summary = if is_input_bound {
        "Your profile has a tf.data input pipeline slower than 50 us. For each slow input pipeline, below shows a \
         bottleneck in the input pipeline and a suggestion on how to fix it."
    } else if max_latency_ps > 0 {
        "Your profile does not have any tf.data input pipeline slower than 50 us. Your job could be still input \
         bound if this profile didn't capture all workers."
    } else {
        "No tf.data activity captured in your profile. If your job uses tf.data, try to capture a longer profile."
    };
    TfDataAnalysis { hosts, bottlenecks, is_input_bound, summary: summary.to_string() }
}

/// The analysis of one host plane.
fn analyze_plane(host: &str, plane: &Plane) -> HostTfData {
    let forest = Forest::build(plane);
    let mut iterators: HashMap<i64, IteratorMetadata> = HashMap::new();
    let mut roots: BTreeMap<i64, Vec<u32>> = BTreeMap::new();
    for &node in &forest.iterators {
        let Some(id) = forest.id(node) else { continue };
        let name = forest.name(plane, node);
        iterators.entry(id).or_insert_with(|| iterator_metadata(id, &forest, plane, node));
        if name.split("::").count() == 2 {
            roots.entry(id).or_default().push(node);
        }
    }
    let mut device_pipelines: HashSet<i64> = HashSet::new();
    for &node in &forest.device_second_iterators {
        let Some(id) = forest.id(node) else { continue };
        if let std::collections::hash_map::Entry::Vacant(slot) = iterators.entry(id) {
            slot.insert(iterator_metadata(id, &forest, plane, node));
            if let Some(parent) = forest.parent_id(node) {
                device_pipelines.insert(parent);
            }
        }
    }
    let (mut host_count, mut device_count) = (0, 0);
    let mut pipelines = Vec::with_capacity(roots.len());
    for (id, mut events) in roots {
        events.sort_by_key(|&node| std::cmp::Reverse(forest.nodes[node as usize].duration_ps));
        let (kind, name) = if device_pipelines.contains(&id) {
            device_count += 1;
            (PipelineKind::Device, format!("Device:{}", device_count - 1))
        } else {
            host_count += 1;
            (PipelineKind::Host, format!("Host:{}", host_count - 1))
        };
        let calls: Vec<PipelineCall> = events.iter().map(|&root| walk_call(&forest, root)).collect();
        let latencies = events.iter().map(|&node| forest.nodes[node as usize].duration_ps);
        let total: i128 = latencies.clone().map(i128::from).sum();
        let num_calls = events.len() as i64;
        pipelines.push(InputPipeline {
            id,
            name,
            kind,
            min_latency_ps: latencies.clone().min().unwrap_or(0),
            avg_latency_ps: if num_calls > 0 { (total / i128::from(num_calls)) as i64 } else { 0 },
            max_latency_ps: latencies.clone().max().unwrap_or(0).max(0),
            num_calls,
            num_slow_calls: latencies.filter(|&l| l > SLOW_CALL_THRESHOLD_PS).count() as i64,
            calls,
        });
    }
    let mut iterators: Vec<IteratorMetadata> = iterators.into_values().collect();
    iterators.sort_by_key(|m| m.id);
    HostTfData { host: host.to_string(), iterators, pipelines }
}

fn iterator_metadata(id: i64, forest: &Forest, plane: &Plane, node: u32) -> IteratorMetadata {
    let long_name = forest.name(plane, node);
    let name = long_name.rsplit("::").next().unwrap_or(long_name);
    IteratorMetadata {
        id,
        parent_id: forest.parent_id(node).unwrap_or(0),
        name: name.to_string(),
        long_name: long_name.to_string(),
        is_async: ASYNC_ITERATORS.contains(&name),
    }
}

/// Walks one call of a root iterator: per iterator, time, self time and whether it is
/// on the critical path; then picks the bottleneck.
fn walk_call(forest: &Forest, root: u32) -> PipelineCall {
    let mut walk = CallWalk { forest, stats: Vec::new(), index: FxMap::default(), visits: 0 };
    walk.visit(root, true, 0);
    let mut iterators = walk.stats;
    iterators.sort_by_key(|s| s.id);
    let (mut bottleneck_iterator_id, mut bottleneck_self_time_ps) = (0, 0);
    for stat in &iterators {
        if stat.is_blocking && stat.self_time_ps > bottleneck_self_time_ps {
            bottleneck_iterator_id = stat.id;
            bottleneck_self_time_ps = stat.self_time_ps;
        }
    }
    PipelineCall {
        latency_ps: forest.nodes[root as usize].duration_ps,
        bottleneck_iterator_id,
        bottleneck_self_time_ps,
        iterators,
    }
}

struct CallWalk<'a> {
    forest: &'a Forest,
    /// Per iterator, in first-reached order.
    stats: Vec<IteratorCallStats>,
    /// Iterator id → position in `stats`.
    index: FxMap<i64, usize>,
    visits: usize,
}

impl CallWalk<'_> {
    fn visit(&mut self, node: u32, is_blocking: bool, depth: usize) {
        if depth > MAX_DEPTH || self.visits >= MAX_VISITS_PER_CALL {
            return;
        }
        self.visits += 1;
        let event = &self.forest.nodes[node as usize];
        let Some(id) = self.forest.id(node) else { return };
        let slot = match self.index.get(&id) {
            Some(&slot) => slot,
            None => {
                self.stats.push(IteratorCallStats { id, start_ps: event.start_ps, ..IteratorCallStats::default() });
                self.index.insert(id, self.stats.len() - 1);
                self.stats.len() - 1
            }
        };
        self.stats[slot].duration_ps = self.stats[slot].duration_ps.saturating_add(event.duration_ps);
        let mut self_time_ps = event.duration_ps;
        for child in self.forest.children(node) {
            if !self.forest.is_tf_data(child) {
                continue;
            }
            let overlap = event.overlap_ps(&self.forest.nodes[child as usize]);
            self.visit(child, is_blocking && overlap > 0, depth + 1);
            self_time_ps = self_time_ps.saturating_sub(overlap);
        }
        let stat = &mut self.stats[slot];
        stat.self_time_ps = stat.self_time_ps.saturating_add(self_time_ps);
        stat.is_blocking |= is_blocking;
        stat.num_calls += 1;
    }
}

/// The slowest call of every host pipeline of every host, slowest first.
fn bottlenecks(hosts: &[HostTfData]) -> Vec<PipelineBottleneck> {
    let mut out = Vec::new();
    for host in hosts {
        for pipeline in host.pipelines.iter().filter(|p| p.kind == PipelineKind::Host) {
            let Some(slowest) = pipeline.calls.first() else { continue };
            let metadata = host.iterators.iter().find(|m| m.id == slowest.bottleneck_iterator_id);
            let iterator_name = metadata.map(|m| m.name.clone()).unwrap_or_default();
            let kind = BottleneckKind::of(&iterator_name);
            out.push(PipelineBottleneck {
                host: host.host.clone(),
                input_pipeline: pipeline.name.clone(),
                max_latency_ps: pipeline.max_latency_ps,
                iterator_id: slowest.bottleneck_iterator_id,
                iterator_long_name: metadata.map(|m| m.long_name.clone()).unwrap_or_default(),
                iterator_name,
                iterator_self_time_ps: slowest.bottleneck_self_time_ps,
                kind,
                suggestion_html: kind.suggestion_html(),
            });
        }
    }
    out.sort_by_key(|b| std::cmp::Reverse(b.max_latency_ps));
    out
}
