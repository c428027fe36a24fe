//! The derivation rules on small hand-built GPU planes (XProf's `derived_timeline_test`
//! cases and the cases the jax_gpu_xla fixture does not have).

use mlprof_model::{Host, Line, Plane, PlaneBuilder, SourceFormat, StatValue};

use super::*;
use crate::grouping::{GroupId, NO_GROUP};
use crate::hlo::tests::sample_metadata_plane;

/// A stat value of a test event.
#[derive(Clone, Copy)]
enum V<'a> {
    S(&'a str),
    I(i64),
}

/// A test event: start and duration (ns), group, stats.
type TestEvent<'a> = (i64, i64, Option<GroupId>, &'a [(&'a str, V<'a>)]);

const NS: i64 = 1_000;

/// An XLA kernel of program 7 (`sample_hlo_proto`: `dot.1` is `jit(f)/dot_general`,
/// `fusion.1` has no framework op) in module `jit_f`.
const fn xla(op: &str) -> [(&str, V<'_>); 4] {
    [("kernel_details", V::S("regs:32")), ("hlo_op", V::S(op)), ("hlo_module", V::S("jit_f")), ("program_id", V::I(7))]
}

/// A host with `/host:metadata` (program 7) and one GPU plane of `streams` (line id,
/// name, events), and the step groups of its events (`train 0`, `train 1`, …).
fn host(streams: &[(i64, &str, &[TestEvent<'_>])]) -> (Host, HostGroups) {
    let mut gpu = PlaneBuilder::new(1, "/device:GPU:0");
    let metadata = gpu.event_metadata("kernel", 0, |_| Vec::new());
    let mut planes_groups = Vec::new();
    for &(id, name, events) in streams {
        let mut line = Line::new(id, name);
        let mut groups = Vec::new();
        for &(start, duration, group, stats) in events {
            for &(stat, value) in stats {
                let key = gpu.stat_key(stat);
                let value = match value {
                    V::S(text) => StatValue::Str(line.stats.store_bytes(text.as_bytes()).expect("fits")),
                    V::I(number) => StatValue::Int(number),
                };
                line.stats.push(key, value);
            }
            line.push_event(metadata, start * NS, duration * NS);
            groups.push(group.unwrap_or(NO_GROUP));
        }
        gpu.push_line(line);
        planes_groups.push(groups);
    }
    let mut host = Host::new("vm", "/p/vm.xplane.pb", SourceFormat::Xspace);
    host.planes = vec![sample_metadata_plane(7), gpu.finish()];
    let mut groups = HostGroups::none(&host);
    for (line, line_groups) in planes_groups.iter().enumerate() {
        groups.line_mut(1, line).copy_from_slice(line_groups);
    }
    groups.names = (0..4).map(|g| format!("train {g}")).collect();
    (host, groups)
}

/// A derived event as (level, name, start ns, end ns).
type Shown = (u32, String, i64, i64);

/// Per track: its name and its events.
type Shape = Vec<(String, Vec<Shown>)>;

/// The tracks of `planes` with their events.
fn shape(planes: &[DerivedPlane]) -> Shape {
    planes
        .iter()
        .flat_map(|plane| &plane.tracks)
        .map(|track| {
            let events = track
                .events
                .iter()
                .map(|e| (e.level, track.name_of(e).to_string(), e.begin_ps / NS, e.end_ps() / NS))
                .collect();
            (track.name.clone(), events)
        })
        .collect()
}

fn events(list: &[(u32, &str, i64, i64)]) -> Vec<Shown> {
    list.iter().map(|&(level, name, begin, end)| (level, name.to_string(), begin, end)).collect()
}

fn track<'a>(shape: &'a Shape, name: &str) -> Option<&'a Vec<Shown>> {
    shape.iter().find(|(n, _)| n == name).map(|(_, events)| events)
}

#[test]
fn consecutive_kernels_of_one_op_and_step_are_one_event_across_gaps() {
    let (host, groups) = host(&[(
        7,
        "Stream #7(Kernel)",
        &[
            (0, 10, Some(0), &xla("dot.1")),
            (20, 10, Some(0), &xla("dot.1")),
            (40, 10, Some(0), &xla("fusion.1")),
            (60, 10, Some(1), &xla("dot.1")),
        ],
    )]);
    let derived = derive(&host, &groups);
    assert_eq!(derived.len(), 1);
    assert_eq!(derived[0].plane, 1);
    let shape = shape(&derived);
    let names: Vec<&str> = shape.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Steps",
            "Framework Name Scope - from #7",
            "Framework Ops - from #7",
            "XLA Modules - from #7",
            "XLA Ops - from #7"
        ]
    );
    assert_eq!(shape[0].1, events(&[(0, "train 0", 0, 50), (0, "train 1", 60, 70)]));
    // fusion.1 has no framework op (`:`), so no scope: jit(f) stays open over it, but
    // the next step's module event closes it.
    assert_eq!(shape[1].1, events(&[(0, "jit(f)", 0, 30), (0, "jit(f)", 60, 70)]));
    assert_eq!(shape[2].1, events(&[(0, "dot_general", 0, 30), (0, ":", 40, 50), (0, "dot_general", 60, 70)]));
    assert_eq!(shape[3].1, events(&[(0, "jit_f(7)", 0, 50), (0, "jit_f(7)", 60, 70)]));
    assert_eq!(shape[4].1, events(&[(0, "dot.1", 0, 30), (0, "fusion.1", 40, 50), (0, "dot.1", 60, 70)]));
    // Each derived event points at the first kernel it covers.
    let xla_ops = &derived[0].tracks[4];
    let at: Vec<EventAt> = xla_ops.events.iter().map(|e| e.at).collect();
    assert_eq!(at, [(1, 0, 0), (1, 0, 2), (1, 0, 3)]);
}

#[test]
fn nested_xla_annotations_nest_and_ops_of_other_programs_stay_apart() {
    let mut other = xla("dot.1");
    other[3] = ("program_id", V::I(8));
    let (host, groups) = host(&[(
        3,
        "Stream #3",
        &[
            (0, 10, None, &xla("while.1::dot.1")),
            (10, 10, None, &xla("while.1::fusion.1")),
            (30, 10, None, &xla("dot.1")),
            (40, 10, None, &other),
        ],
    )]);
    let shape = shape(&derive(&host, &groups));
    let xla_ops = track(&shape, "XLA Ops - from #3").expect("XLA ops");
    assert_eq!(
        *xla_ops,
        events(&[
            (0, "while.1", 0, 20),
            (1, "dot.1", 0, 10),
            (1, "fusion.1", 10, 20),
            (0, "dot.1", 30, 40),
            (0, "dot.1", 40, 50)
        ])
    );
    // Program 8 is unknown: another module, no framework op for its kernel.
    let modules = track(&shape, "XLA Modules - from #3").expect("modules");
    assert_eq!(*modules, events(&[(0, "jit_f(7)", 0, 40), (0, "jit_f(8)", 40, 50)]));
    let ops = track(&shape, "Framework Ops - from #3").expect("framework ops");
    assert_eq!(*ops, events(&[(0, "dot_general", 0, 10), (0, ":", 10, 20), (0, "dot_general", 30, 40)]));
    assert!(track(&shape, "Steps").is_none(), "no kernel has a step group");
}

#[test]
fn framework_ops_of_non_xla_kernels_come_from_tf_op_with_nested_scopes() {
    let op = |name: &'static str| [("kernel_details", V::S("k")), ("tf_op", V::S(name))];
    let (add, mul, sub) = (op("a/b/c/Add:Add"), op("a/d/Mul:Mul"), op("TraceMe  "));
    let graph = [("cuda_graph_exec_id", V::I(1)), ("tf_op", V::S("a/d/Mul:Mul"))];
    let memcpy = [("memcpy_details", V::S("kind_src:pageable size:8"))];
    let (host, groups) = host(&[(
        0,
        "Stream #0",
        &[
            (0, 10, None, &add),
            (20, 10, None, &mul),
            (30, 10, None, &graph),
            (45, 5, None, &memcpy),
            (50, 5, None, &sub),
        ],
    )]);
    let shape = shape(&derive(&host, &groups));
    // XProf's TfOpNameScopeShrinkTest: c, identical to b, is 1 ns shorter; the open
    // stack (a, d) is not shortened.
    let scopes = track(&shape, "Framework Name Scope - from #0").expect("scopes");
    assert_eq!(*scopes, events(&[(0, "a", 0, 40), (1, "b", 0, 10), (2, "c", 0, 9), (1, "d", 20, 40)]));
    // The CUDA graph launch counts as a kernel; the copy does not; a name that is no op
    // is shown trimmed, without scopes.
    let ops = track(&shape, "Framework Ops - from #0").expect("ops");
    assert_eq!(*ops, events(&[(0, "Add", 0, 10), (0, "Mul", 20, 40), (0, "TraceMe", 50, 55)]));
    assert!(track(&shape, "XLA Ops - from #0").is_none() && track(&shape, "XLA Modules - from #0").is_none());
}

#[test]
fn a_module_without_an_xla_op_keeps_the_kernels_tf_op() {
    let kernel = [("kernel_details", V::S("k")), ("hlo_module", V::S("cluster_1")), ("tf_op", V::S("m/MatMul:MatMul"))];
    let (host, groups) = host(&[(0, "Stream #0", &[(0, 5, None, &kernel), (5, 5, None, &kernel)])]);
    let shape = shape(&derive(&host, &groups));
    let names: Vec<&str> = shape.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["Framework Name Scope - from #0", "Framework Ops - from #0", "XLA Modules - from #0"]);
    assert_eq!(shape[1].1, events(&[(0, "MatMul", 0, 10)]));
    assert_eq!(shape[2].1, events(&[(0, "cluster_1", 0, 10)]), "no program id, no (id) suffix");
}

#[test]
fn steps_cover_every_stream_and_streams_are_ordered_as_xprof_does() {
    let kernel = [("kernel_details", V::S("k")), ("tf_op", V::S("m/MatMul:MatMul"))];
    let copy = [("memcpy_details", V::S("size:8"))];
    let (host, groups) = host(&[
        (1, "Stream #1(Kernel)", &[(0, 5, Some(0), &kernel), (100, 5, Some(1), &kernel), (110, 5, Some(1), &kernel)]),
        (2, "Stream #2(Compute)", &[(50, 5, Some(0), &kernel)]),
        (3, "Stream #3(MemcpyH2D)", &[(10, 100, Some(0), &copy), (200, 5, None, &copy)]),
    ]);
    let derived = derive(&host, &groups);
    let shape = shape(&derived);
    let names: Vec<&str> = shape.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "Steps",
            "Framework Name Scope - from #2",
            "Framework Ops - from #2",
            "Framework Name Scope - from #1",
            "Framework Ops - from #1"
        ],
        "the compute stream first, then by number of events; the copy stream derives nothing"
    );
    // Step 0 spans the copy that outlasts the kernels; step 1 starts at the first
    // event of group 1 in time order, whatever its stream; the ungrouped copy is left out.
    assert_eq!(shape[0].1, events(&[(0, "train 0", 0, 110), (0, "train 1", 100, 115)]));
    assert_eq!(derived[0].tracks[0].events[0].at, (1, 0, 0));
}

#[test]
fn ungrouped_kernels_merge_by_name_alone() {
    let kernel = [("kernel_details", V::S("k")), ("tf_op", V::S("MatMul:MatMul"))];
    let (host, groups) = host(&[(0, "Stream #0", &[(0, 5, None, &kernel), (1_000, 5, None, &kernel)])]);
    let shape = shape(&derive(&host, &groups));
    assert_eq!(shape, [("Framework Ops - from #0".to_string(), events(&[(0, "MatMul", 0, 1_005)]))]);
}

#[test]
fn scope_range_ids_keep_runs_of_one_module_or_op_apart() {
    let scoped = |op: &'static str, scope: i64| {
        let [details, hlo_op, module, program] = xla(op);
        [details, hlo_op, module, program, ("scope_range_id", V::I(scope))]
    };
    let (a, b, c, d) =
        (scoped("while.1::dot.1", 11), scoped("while.1::dot.1", 11), scoped("while.1::dot.1", 21), xla("dot.1"));
    let (mut host, groups) =
        host(&[(0, "Stream #0", &[(0, 5, None, &a), (5, 5, None, &b), (10, 5, None, &c), (15, 5, None, &d)])]);
    // Scope 11 runs in module scope 10, 21 in 20.
    let mut tree = PlaneBuilder::new(2, SCOPE_RANGE_PLANE);
    let stats: Vec<(u32, StatValue)> = [(11, 10), (21, 20)]
        .iter()
        .map(|&(child, parent)| {
            let key = tree.stat_key(&format!("scope {child}"));
            (key, StatValue::Int(parent))
        })
        .collect();
    tree.set_plane_stats(stats);
    let mut tree = tree.finish();
    for (metadata, id) in tree.stat_metadata.iter_mut().zip([11, 21]) {
        metadata.id = id;
    }
    host.planes.push(tree);
    let shape = shape(&derive(&host, &groups));
    let modules = track(&shape, "XLA Modules - from #0").expect("modules");
    // Module scope 10, then 20; the kernel without a scope range joins the open run.
    assert_eq!(*modules, events(&[(0, "jit_f(7)", 0, 10), (0, "jit_f(7)", 10, 20)]));
    // Closed stacks of identical spans lose 1 ns per level (the inner dot.1s).
    let xla_ops = track(&shape, "XLA Ops - from #0").expect("XLA ops");
    assert_eq!(
        *xla_ops,
        events(&[
            (0, "while.1", 0, 10),
            (1, "dot.1", 0, 9),
            (0, "while.1", 10, 15),
            (1, "dot.1", 10, 14),
            (0, "dot.1", 15, 20)
        ])
    );
}

#[test]
fn planes_with_derived_lines_other_devices_and_kineto_hosts_are_left_alone() {
    let kernel = [("kernel_details", V::S("k")), ("tf_op", V::S("MatMul:MatMul"))];
    let (mut host, groups) = host(&[(0, "Stream #0", &[(0, 5, Some(0), &kernel)])]);
    assert_eq!(planes_to_derive(&host), [1]);
    let steps_line_id = i64::from(0xdead_beef_u32 as i32);
    for (id, name) in [(steps_line_id, "Steps"), (5, "XLA Ops - from #0"), (5, "Steps")] {
        let mut copy = host.clone();
        copy.planes[1].lines.push(Line::new(id, name));
        assert!(derive(&copy, &groups).is_empty(), "{name}");
    }
    let mut tpu = host.clone();
    tpu.planes[1].name = "/device:TPU:0".into();
    assert!(derive(&tpu, &groups).is_empty());
    host.format = SourceFormat::Kineto;
    assert!(planes_to_derive(&host).is_empty());
    let empty = Host::new("vm", "vm", SourceFormat::Xspace);
    assert!(derive(&empty, &HostGroups::default()).is_empty());
    let mut no_events = Host::new("vm", "vm", SourceFormat::Xspace);
    no_events.planes.push(Plane::new(0, "/device:GPU:0"));
    assert!(planes_to_derive(&no_events).is_empty());
}

#[test]
fn derived_line_ids_are_xprofs_range_read_as_32_bits() {
    let min = i64::from(0xdead_beef_u32 as i32);
    assert!(is_derived_line_id(min) && is_derived_line_id(min + 389));
    assert!(!is_derived_line_id(min - 1) && !is_derived_line_id(min + 390));
    assert!(!is_derived_line_id(7));
    // Only the low 32 bits count, as in XProf's `IsDerivedThreadId(int)`.
    assert!(is_derived_line_id(0xdead_beef + (1 << 32)));
}
