//! Unit tests on small hand-built host planes.

use mlprof_model::{Host, Line, PlaneBuilder, SourceFormat, StatValue, names};
use serde_json::Value;

use super::*;

const US: i64 = 1_000_000;

/// One event to build: name, start and duration in µs, integer stats.
type Ev<'a> = (&'a str, i64, i64, &'a [(&'a str, i64)]);

/// A host whose `/host:CPU` plane has one line per entry of `lines`.
fn host(lines: &[&[Ev<'_>]]) -> Host {
    let mut b = PlaneBuilder::new(0, names::HOST_PLANE);
    for (n, events) in lines.iter().enumerate() {
        let mut line = Line::new(n as i64 + 1, format!("thread {n}"));
        for &(name, start_us, duration_us, stats) in events.iter() {
            let metadata = b.event_metadata(name, 0, |_| Vec::new());
            for &(stat, value) in stats {
                let key = b.stat_key(stat);
                line.stats.push(key, StatValue::Int(value));
            }
            line.push_event(metadata, start_us * US, duration_us * US);
        }
        b.push_line(line);
    }
    let mut host = Host::new("h", "h.xplane.pb", SourceFormat::Xspace);
    host.planes.push(b.finish());
    host
}

fn graph_types(analysis: &TfDataAnalysis) -> Vec<(String, i64)> {
    let json = analysis.to_xprof_json();
    json[0]["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| (r["c"][3]["v"].as_str().unwrap_or("").to_string(), r["c"][5]["v"].as_i64().unwrap_or(-1)))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn critical_path_crosses_threads_through_prefetch() {
    let consumer: &[Ev<'_>] = &[
        ("Iterator::Root", 0, 100, &[("id", 1)]),
        ("Iterator::Root::Prefetch", 10, 80, &[("id", 2), ("parent_id", 1)]),
        ("PrefetchConsume", 20, 60, &[("element_id", 7)]),
        ("PrefetchConsume", 82, 3, &[("element_id", 6)]),
    ];
    let producer: &[Ev<'_>] = &[
        ("PrefetchProduce", 0, 85, &[("element_id", 7)]),
        ("Iterator::Root::Prefetch::Map", 5, 75, &[("id", 3), ("parent_id", 2)]),
        ("Iterator::Root::Prefetch::Map::TFRecord", 10, 10, &[("id", 4), ("parent_id", 3)]),
        // Produced long after the consumer asked: linked, but off the critical path.
        ("PrefetchProduce", 150, 100, &[("element_id", 6)]),
        ("Iterator::Root::Prefetch::Filter", 150, 90, &[("id", 5), ("parent_id", 2)]),
    ];
    let h = host(&[consumer, producer]);
    let analysis = analyze(&[&h]);
    let pipeline = &analysis.hosts[0].pipelines[0];
    assert_eq!((pipeline.name.as_str(), pipeline.kind, pipeline.num_calls), ("Host:0", PipelineKind::Host, 1));
    let call = &pipeline.calls[0];
    let stat = |id: i64| call.iterators.iter().find(|s| s.id == id).cloned().unwrap_or_default();
    assert_eq!(stat(1).self_time_ps, 20 * US);
    assert_eq!(stat(2).self_time_ps, 10 * US, "80 minus the 70 µs overlap with Map");
    assert_eq!(stat(3).self_time_ps, 65 * US);
    assert_eq!(stat(4).self_time_ps, 10 * US);
    assert_eq!(stat(5).self_time_ps, 90 * US);
    assert!(stat(1).is_blocking && stat(2).is_blocking && stat(3).is_blocking && stat(4).is_blocking);
    assert!(!stat(5).is_blocking, "Filter does not overlap its consumer");
    assert_eq!((call.bottleneck_iterator_id, call.bottleneck_self_time_ps), (3, 65 * US));
    let types = graph_types(&analysis);
    let expect = [("1", 1), ("2", 1), ("3", 2), ("4", 1), ("5", 0)];
    assert_eq!(types, expect.map(|(id, t)| (id.to_string(), t)).to_vec());
    let b = &analysis.bottlenecks[0];
    assert_eq!((b.iterator_name.as_str(), b.iterator_long_name.as_str()), ("Map", "Iterator::Root::Prefetch::Map"));
    assert_eq!(b.kind, BottleneckKind::SlowTransformationWithParallelVersion);
    assert!(analysis.is_input_bound);
    assert_eq!(analysis.hosts[0].iterators.iter().find(|m| m.id == 2).map(|m| m.is_async), Some(true));
    // The report's tree shows the critical path.
    let report = analysis.report();
    let tree = report.sections.iter().find(|s| s.title == "Iterator graph").and_then(|s| s.table.as_ref());
    let rows: Vec<(String, String)> =
        tree.map(|t| t.rows.iter().map(|r| (r[2].display(), r[4].display())).collect()).unwrap_or_default();
    assert_eq!(rows[0], ("Root".to_string(), "blocking".to_string()));
    assert!(rows.contains(&("    Map".to_string(), "bottleneck".to_string())), "{rows:?}");
    assert!(rows.contains(&("    Filter".to_string(), String::new())), "{rows:?}");
}

#[test]
fn slow_calls_are_those_over_50_us() {
    let line: &[Ev<'_>] = &[
        ("Iterator::Root", 0, 50, &[("id", 1)]),
        ("Iterator::Root", 100, 10, &[("id", 1)]),
        ("Iterator::Root", 200, 51, &[("id", 1)]),
    ];
    let h = host(&[line]);
    let analysis = analyze(&[&h]);
    let p = &analysis.hosts[0].pipelines[0];
    assert_eq!((p.num_calls, p.num_slow_calls), (3, 1), "exactly 50 µs is not slow");
    assert_eq!((p.min_latency_ps, p.avg_latency_ps, p.max_latency_ps), (10 * US, 37 * US, 51 * US));
    let latencies: Vec<i64> = p.calls.iter().map(|c| c.latency_ps).collect();
    assert_eq!(latencies, vec![51 * US, 50 * US, 10 * US], "slowest call first");
    assert!(analysis.is_input_bound);

    let fast: &[Ev<'_>] = &[("Iterator::Root", 0, 50, &[("id", 1)])];
    let h = host(&[fast]);
    let analysis = analyze(&[&h]);
    assert!(!analysis.is_input_bound);
    assert!(analysis.summary.starts_with("Your profile does not have any tf.data input pipeline slower than 50 us."));
    let json = analysis.to_xprof_json();
    assert_eq!(json[2]["p"]["is_input_bound"], "false");
    assert_eq!(json[1]["rows"][0]["c"][6]["v"], 0);
}

#[test]
fn suggestions_follow_the_iterator_kind() {
    let cases = [
        ("TFRecord", BottleneckKind::SlowSource, "Parallelize reading from this dataset source."),
        ("Generator", BottleneckKind::SlowSource, "#source_datasets"),
        ("DataService", BottleneckKind::SlowDataService, "Profile the tf.data service worker"),
        ("Courier", BottleneckKind::SlowRemoteSource, "The remote data source is slow."),
        ("Map", BottleneckKind::SlowTransformationWithParallelVersion, "num_parallel_calls=tf.data.experimental"),
        ("Interleave", BottleneckKind::SlowTransformationWithParallelVersion, "#caching"),
        ("Batch", BottleneckKind::SlowTransformationWithoutParallelVersion, "inherently sequential"),
        ("Filter", BottleneckKind::SlowTransformationWithoutParallelVersion, "#3_are_you_reaching"),
        ("BatchV2", BottleneckKind::Other, "for suggestions."),
        ("ParallelMapV2", BottleneckKind::Other, "for suggestions."),
    ];
    for (name, kind, needle) in cases {
        assert_eq!(BottleneckKind::of(name), kind, "{name}");
        assert!(kind.suggestion_html().contains(needle), "{name}: {}", kind.suggestion_html());
    }
    assert_eq!(
        BottleneckKind::Other.suggestion_html(),
        "See <a href=\"https://www.tensorflow.org/guide/data_performance_analysis\" target=\"_blank\">this</a> \
         for suggestions."
    );
}

#[test]
fn no_tf_data_events_says_so() {
    let line: &[Ev<'_>] = &[("train_step", 0, 100, &[]), ("Iterator", 10, 5, &[("id", 3)])];
    let with_plane = host(&[line]);
    let without_plane = Host::new("bare", "bare.xplane.pb", SourceFormat::Xspace);
    let analysis = analyze(&[&with_plane, &without_plane]);
    assert_eq!(
        analysis.summary,
        "No tf.data activity captured in your profile. If your job uses tf.data, try to capture a longer profile."
    );
    assert!(!analysis.is_input_bound && analysis.bottlenecks.is_empty());
    assert!(analysis.hosts.iter().all(|h| h.pipelines.is_empty()));
    let json = analysis.to_xprof_json();
    for table in json.as_array().into_iter().flatten() {
        assert_eq!(table["rows"].as_array().map(Vec::len), Some(0));
    }
    assert_eq!(json[2]["p"]["summary_message"], Value::String(analysis.summary.clone()));
    assert_eq!(analysis.report().sections.len(), 4);
}

#[test]
fn odd_input_does_not_panic() {
    let a: &[Ev<'_>] = &[
        // No id: not an iterator call.
        ("Iterator::Root", 0, 10, &[]),
        // Overlapping, not nested.
        ("Iterator::Root", 5, 20, &[("id", 1)]),
        ("Iterator::Root::Map", 15, 30, &[("id", 2), ("parent_id", 1)]),
        // Negative duration.
        ("Iterator::Root", 60, -5, &[("id", 1)]),
        // Consume without element, produce without a parent id on its iterator.
        ("PrefetchConsume", 16, 1, &[]),
        ("PrefetchProduce", 100, 10, &[("element_id", 1)]),
        ("Iterator::Root::Prefetch", 100, 5, &[("id", 9)]),
        // A producer link from an iterator to itself (a cycle).
        ("PrefetchProduce", 200, 100, &[("element_id", 2)]),
        ("Iterator::Root::X", 200, 100, &[("id", 5), ("parent_id", 5)]),
        ("PrefetchConsume", 210, 10, &[("element_id", 2)]),
        ("Iterator:", 400, 1, &[("id", 6)]),
        ("Iterator::", 410, 1, &[("id", 7)]),
        ("Iterator::Root", 300, 1000, &[("id", 5), ("is_async", 1)]),
    ];
    let h = host(&[a, &[], a]);
    let analysis = analyze(&[&h, &h]);
    let _ = analysis.to_xprof_json();
    let _ = analysis.report();
    assert!(serde_json::to_string(&analysis).is_ok());
    assert_eq!(analysis.hosts.len(), 2);
    // A uint64 id reads as 0, as in XProf.
    let mut h = host(&[&[("Iterator::Root", 0, 10, &[])]]);
    if let Some(plane) = h.planes.first_mut() {
        let key = plane.stat_metadata.len() as u32;
        plane.stat_metadata.push(mlprof_model::StatMetadata { id: 99, name: "id".into(), description: String::new() });
        let line = &mut plane.lines[0];
        line.stats.push(key, StatValue::Uint(u64::MAX));
        line.events.stat_start = mlprof_model::PackedU32::from_iter([0, 1]);
    }
    let analysis = analyze(&[&h]);
    assert_eq!(analysis.hosts[0].pipelines[0].id, 0);
}

/// A consumer iterator's children are the events it encloses, then every producer
/// iterator made for the element it consumed, in the order the producers were met; a
/// producer's are the events it encloses.
#[test]
fn consumers_link_every_producer_of_their_element_in_order() {
    let consumer: &[Ev<'_>] = &[
        ("Iterator::Root", 0, 100, &[("id", 1)]),
        ("Iterator::Root::Prefetch", 10, 80, &[("id", 2), ("parent_id", 1)]),
        ("PrefetchConsume", 20, 60, &[("element_id", 7)]),
    ];
    let producer: &[Ev<'_>] = &[
        ("PrefetchProduce", 0, 30, &[("element_id", 7)]),
        ("Iterator::Root::Prefetch::Map", 5, 20, &[("id", 3), ("parent_id", 2)]),
        ("PrefetchProduce", 40, 30, &[("element_id", 7)]),
        ("Iterator::Root::Prefetch::Filter", 45, 20, &[("id", 5), ("parent_id", 2)]),
        // Another element: not linked to this consumer.
        ("PrefetchProduce", 100, 10, &[("element_id", 8)]),
        ("Iterator::Root::Prefetch::Map", 101, 5, &[("id", 3), ("parent_id", 2)]),
    ];
    let h = host(&[consumer, producer]);
    let forest = forest::Forest::build(&h.planes[0]);
    let children = |node: u32| forest.children(node).collect::<Vec<u32>>();
    assert_eq!(children(0), [1]);
    assert_eq!(children(1), [2, 4, 6], "the consume event, then both producers of element 7");
    assert_eq!(children(3), [4]);
    assert_eq!(children(7), [8]);
    assert!(children(8).is_empty());
}
