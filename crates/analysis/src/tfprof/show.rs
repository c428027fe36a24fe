//! tfprof's display algorithm (`tfprof_show.cc`, `tfprof_scope.cc`, `tfprof_op.cc`):
//! accounting, start nodes, the show/hide/trim filters, depth and minimums, sibling
//! order, and totals over what is displayed.
//!
//! Tree views (scope, code, graph), in tfprof's order of passes:
//! 1. account: a node is kept if its records' types are accounted or it has kept
//!    descendants; its total is its own numbers (when accounted) plus its kept
//!    children's totals; the root's total is the sum over the kept top nodes;
//! 2. start: with `--start-name-regexes`, the topmost matching nodes become the roots;
//! 3. show: a node is shown when it is within `--max-depth` of the start nodes, its
//!    totals reach `--min-micros`/`--min-bytes`, its own numbers reach
//!    `--min-occurrence`/`--min-params`/`--min-float-ops`, its name matches a show
//!    regex and no hide regex; a hidden node's shown descendants move up to its nearest
//!    shown ancestor; nothing below a `--trim-name-regexes` node is shown; with
//!    `--account-displayed-op-only` totals are recomputed over the shown nodes only.
//!
//! The op view is tfprof's flat list: types sorted, each row's total the sum from it
//! to the end of the accounted list (tfprof prints it as the cumulative share), the
//! list cut at `--max-depth` rows and at the first `--trim-name-regexes` match; its
//! minimums compare each type's own numbers.
//!
//! The one design decision to know: the graph view, a DAG, is shown as the
//! depth-first spanning tree from its roots (each node once, where first reached), as
//! tfprof's `visits` set does, so totals never count a node twice. Everything is
//! iterative: deep Python stacks and long op chains cannot overflow the stack.

use std::cmp::Ordering;

use super::forest::Forest;
use super::options::{Column, OrderBy, TfprofOptions, View};
use super::stats::{NodeStats, OwnFacts};

/// The name of the root row, as tfprof names it.
pub const ROOT_NAME: &str = "_TFProfRoot";

/// One displayed row.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct ShownRow {
    /// The forest node, `None` for the root row.
    pub node: Option<usize>,
    /// Indentation level (root 0).
    pub depth: usize,
    /// Totals as displayed.
    pub total: NodeStats,
}

/// What a view displays.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Shown {
    /// Rows in display order.
    pub rows: Vec<ShownRow>,
    /// The root's totals.
    pub root_total: NodeStats,
    /// Accounted op-view rows cut by `--max-depth` (op view only).
    pub cut_rows: usize,
}

/// Runs tfprof's display over `forest` whose nodes have `facts`.
pub(super) fn show(forest: &Forest, facts: &[OwnFacts], options: &TfprofOptions) -> Shown {
    match options.view {
        View::Op => show_list(forest, facts, options),
        View::Scope | View::Code | View::Graph => show_tree(forest, facts, options),
    }
}

/// The kept (accounted) tree: children and totals per node, and its roots.
struct Accounted {
    children: Vec<Vec<usize>>,
    totals: Vec<NodeStats>,
    roots: Vec<usize>,
}

/// Pass 1: the spanning tree from the roots (each node once), then kept nodes and
/// their totals bottom-up.
fn account(forest: &Forest, facts: &[OwnFacts]) -> Accounted {
    let n = forest.nodes.len();
    let mut tree_children: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut visited = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut tree_roots = Vec::new();
    // Iterative pre-order DFS; children pushed in reverse so the first is visited first.
    for &root in &forest.roots {
        if root >= n || visited[root] {
            continue;
        }
        visited[root] = true;
        tree_roots.push(root);
        let mut stack = vec![root];
        while let Some(node) = stack.pop() {
            order.push(node);
            let mut fresh = Vec::new();
            for &child in &forest.nodes[node].children {
                if child < n && !visited[child] {
                    visited[child] = true;
                    fresh.push(child);
                }
            }
            stack.extend(fresh.iter().rev());
            tree_children[node] = fresh;
        }
    }
    let mut kept = vec![false; n];
    let mut totals = vec![NodeStats::default(); n];
    let mut children = vec![Vec::new(); n];
    for &node in order.iter().rev() {
        let kept_children: Vec<usize> = tree_children[node].iter().copied().filter(|&c| kept[c]).collect();
        let own = &facts[node];
        kept[node] = own.accounted || !kept_children.is_empty();
        if own.accounted {
            totals[node] = own.stats;
        }
        for &child in &kept_children {
            let child_total = totals[child];
            totals[node].add(&child_total);
        }
        children[node] = kept_children;
    }
    let roots = tree_roots.into_iter().filter(|&r| kept[r]).collect();
    Accounted { children, totals, roots }
}

/// Pass 2: the topmost nodes matching the start regexes.
fn start_nodes(forest: &Forest, accounted: &Accounted, options: &TfprofOptions) -> Vec<usize> {
    if options.start_name_regexes.is_everything() {
        return accounted.roots.clone();
    }
    let mut found = Vec::new();
    let mut stack: Vec<usize> = accounted.roots.iter().rev().copied().collect();
    while let Some(node) = stack.pop() {
        if options.start_name_regexes.is_match(&forest.nodes[node].name) {
            found.push(node);
        } else {
            stack.extend(accounted.children[node].iter().rev());
        }
    }
    found
}

/// Whether a node at `depth` passes the filters (tfprof's `ShouldShow`).
fn passes(name: &str, accounted_total: &NodeStats, own: &OwnFacts, depth: usize, options: &TfprofOptions) -> bool {
    let own_stats = if own.accounted { own.stats } else { NodeStats::default() };
    depth <= options.max_depth
        && accounted_total.micros_ps >= options.min_micros_ps
        && accounted_total.requested_bytes >= options.min_bytes
        && own_stats.occurrence >= options.min_occurrence
        && own_stats.params >= options.min_params
        && own_stats.float_ops >= options.min_float_ops
        && options.show_name_regexes.is_match(name)
        && !options.hide_name_regexes.is_match(name)
}

/// A node being displayed: its shown descendants so far.
struct Frame {
    node: usize,
    depth: usize,
    shown: bool,
    next_child: usize,
    results: Vec<usize>,
}

/// A shown node with its shown children (indices into the same list).
struct Placed {
    node: usize,
    total: NodeStats,
    children: Vec<usize>,
}

fn show_tree(forest: &Forest, facts: &[OwnFacts], options: &TfprofOptions) -> Shown {
    let accounted = account(forest, facts);
    let accounted_root: NodeStats = accounted.roots.iter().fold(NodeStats::default(), |mut sum, &r| {
        sum.add(&accounted.totals[r]);
        sum
    });
    let starts = start_nodes(forest, &accounted, options);
    let mut placed: Vec<Placed> = Vec::new();
    let mut top: Vec<usize> = Vec::new();
    for &start in &starts {
        let mut stack = vec![new_frame(forest, facts, &accounted, options, start, 1)];
        while let Some(frame) = stack.last_mut() {
            let node = frame.node;
            let descend =
                frame.depth < options.max_depth && !options.trim_name_regexes.is_match(&forest.nodes[node].name);
            if descend && let Some(&child) = accounted.children[node].get(frame.next_child) {
                frame.next_child += 1;
                let depth = frame.depth + 1;
                stack.push(new_frame(forest, facts, &accounted, options, child, depth));
                continue;
            }
            let Some(done) = stack.pop() else { break };
            let results = if done.shown {
                let mut children = done.results;
                sort_nodes(&mut children, &placed, forest, facts, options);
                let mut total = if options.account_displayed_op_only {
                    if facts[node].accounted { facts[node].stats } else { NodeStats::default() }
                } else {
                    accounted.totals[node]
                };
                if options.account_displayed_op_only {
                    for &child in &children {
                        total.add(&placed[child].total);
                    }
                }
                placed.push(Placed { node, total, children });
                vec![placed.len() - 1]
            } else {
                done.results
            };
            match stack.last_mut() {
                Some(parent) => parent.results.extend(results),
                None => top.extend(results),
            }
        }
    }
    sort_nodes(&mut top, &placed, forest, facts, options);
    let root_total = if options.account_displayed_op_only {
        top.iter().fold(NodeStats::default(), |mut sum, &p| {
            sum.add(&placed[p].total);
            sum
        })
    } else {
        accounted_root
    };
    let mut rows = vec![ShownRow { node: None, depth: 0, total: root_total }];
    let mut stack: Vec<(usize, usize)> = top.iter().rev().map(|&p| (p, 1)).collect();
    while let Some((p, depth)) = stack.pop() {
        rows.push(ShownRow { node: Some(placed[p].node), depth, total: placed[p].total });
        stack.extend(placed[p].children.iter().rev().map(|&c| (c, depth + 1)));
    }
    Shown { rows, root_total, cut_rows: 0 }
}

fn new_frame(
    forest: &Forest,
    facts: &[OwnFacts],
    accounted: &Accounted,
    options: &TfprofOptions,
    node: usize,
    depth: usize,
) -> Frame {
    let shown = passes(&forest.nodes[node].name, &accounted.totals[node], &facts[node], depth, options);
    Frame { node, depth, shown, next_child: 0, results: Vec::new() }
}

/// Orders shown siblings by `--order-by` (numbers: larger first; names and text:
/// ascending; ties by name).
fn sort_nodes(siblings: &mut [usize], placed: &[Placed], forest: &Forest, facts: &[OwnFacts], options: &TfprofOptions) {
    siblings.sort_by(|&a, &b| {
        let (na, nb) = (placed[a].node, placed[b].node);
        let by_name = forest.nodes[na].name.cmp(&forest.nodes[nb].name);
        compare(options.order_by, &placed[a].total, &placed[b].total, &facts[na], &facts[nb]).then(by_name)
    });
}

/// Compares two nodes by `order` on their totals `ta`, `tb` and own facts.
fn compare(order: OrderBy, ta: &NodeStats, tb: &NodeStats, fa: &OwnFacts, fb: &OwnFacts) -> Ordering {
    let OrderBy::Column(column) = order else { return Ordering::Equal };
    match column {
        Column::Device => join(&fa.devices).cmp(&join(&fb.devices)),
        Column::OpTypes => join(&fa.op_types).cmp(&join(&fb.op_types)),
        Column::InputShapes => {
            let first = |f: &OwnFacts| f.input_shapes.keys().next().cloned().unwrap_or_default();
            first(fa).cmp(&first(fb))
        }
        numeric => value(tb, numeric).cmp(&value(ta, numeric)),
    }
}

fn join(set: &std::collections::BTreeSet<String>) -> String {
    set.iter().cloned().collect::<Vec<_>>().join("|")
}

/// The value of a numeric column in `stats`.
pub(super) fn value(stats: &NodeStats, column: Column) -> i64 {
    match column {
        Column::Params => stats.params,
        Column::FloatOps => stats.float_ops,
        Column::Bytes => stats.requested_bytes,
        Column::PeakBytes => stats.peak_bytes,
        Column::ResidualBytes => stats.residual_bytes,
        Column::OutputBytes => stats.output_bytes,
        Column::Micros => stats.micros_ps,
        Column::AcceleratorMicros => stats.accelerator_ps,
        Column::CpuMicros => stats.cpu_ps,
        Column::Occurrence => stats.occurrence,
        Column::Device | Column::OpTypes | Column::InputShapes => 0,
    }
}

/// The op view (tfprof's `TFOp::ShowInternal`).
fn show_list(forest: &Forest, facts: &[OwnFacts], options: &TfprofOptions) -> Shown {
    let own = |node: usize| if facts[node].accounted { facts[node].stats } else { NodeStats::default() };
    let mut nodes: Vec<usize> = (0..forest.nodes.len()).collect();
    nodes.sort_by(|&a, &b| {
        compare(options.order_by, &own(a), &own(b), &facts[a], &facts[b])
            .then_with(|| forest.nodes[a].name.cmp(&forest.nodes[b].name))
    });
    let listed: Vec<usize> = nodes.into_iter().filter(|&n| facts[n].accounted).collect();
    let cumulative = |list: &[usize]| {
        let mut totals = vec![NodeStats::default(); list.len()];
        let mut below = NodeStats::default();
        for (i, &node) in list.iter().enumerate().rev() {
            below.add(&own(node));
            totals[i] = below;
        }
        totals
    };
    let listed_totals = cumulative(&listed);
    let start = if options.start_name_regexes.is_everything() {
        0
    } else {
        listed.iter().position(|&n| options.start_name_regexes.is_match(&forest.nodes[n].name)).unwrap_or(listed.len())
    };
    let mut shown: Vec<usize> = Vec::new();
    let mut cut_rows = 0;
    for (offset, i) in (start..listed.len()).enumerate() {
        let node = listed[i];
        let depth = offset + 1;
        if depth > options.max_depth {
            cut_rows = listed.len() - i;
            break;
        }
        if options.trim_name_regexes.is_match(&forest.nodes[node].name) {
            break;
        }
        // Minimums compare the type's own numbers (tfprof compares the running sum,
        // which no type falls below once one above it passes).
        if passes(&forest.nodes[node].name, &own(node), &facts[node], depth, options) {
            shown.push(i);
        }
    }
    let (rows, root_total) = if options.account_displayed_op_only {
        let shown_nodes: Vec<usize> = shown.iter().map(|&i| listed[i]).collect();
        let totals = cumulative(&shown_nodes);
        let rows =
            shown_nodes.iter().zip(&totals).map(|(&node, &total)| ShownRow { node: Some(node), depth: 1, total });
        (rows.collect(), totals.first().copied().unwrap_or_default())
    } else {
        let rows = shown.iter().map(|&i| ShownRow { node: Some(listed[i]), depth: 1, total: listed_totals[i] });
        (rows.collect(), listed_totals.first().copied().unwrap_or_default())
    };
    Shown { rows, root_total, cut_rows }
}

#[cfg(test)]
mod tests {
    use super::super::forest::ViewNode;
    use super::super::options::Regexes;
    use super::*;

    /// `a` (own 1) › `a/b` (own 10) › `a/b/c` (own 100), and `d` (own 1000), in µs.
    fn sample() -> (Forest, Vec<OwnFacts>) {
        let node = |name: &str, children: Vec<usize>| ViewNode {
            name: name.into(),
            label: name.rsplit('/').next().unwrap_or(name).into(),
            children,
            records: Vec::new(),
        };
        let forest = Forest {
            nodes: vec![node("a", vec![1]), node("a/b", vec![2]), node("a/b/c", vec![]), node("d", vec![])],
            roots: vec![0, 3],
        };
        let facts = [1, 10, 100, 1000]
            .iter()
            .map(|&us| OwnFacts {
                accounted: true,
                stats: NodeStats {
                    micros_ps: us * 1_000_000,
                    cpu_ps: us * 1_000_000,
                    occurrence: 1,
                    ..NodeStats::default()
                },
                ..OwnFacts::default()
            })
            .collect();
        (forest, facts)
    }

    /// `(name or root, depth, total µs)` of each row.
    fn rows(shown: &Shown, forest: &Forest) -> Vec<(String, usize, i64)> {
        shown
            .rows
            .iter()
            .map(|r| {
                let name = r.node.map_or(ROOT_NAME.to_string(), |n| forest.nodes[n].name.clone());
                (name, r.depth, r.total.micros_ps / 1_000_000)
            })
            .collect()
    }

    fn row(name: &str, depth: usize, us: i64) -> (String, usize, i64) {
        (name.to_string(), depth, us)
    }

    #[test]
    fn the_tree_shows_totals_in_name_order_by_default() {
        let (forest, facts) = sample();
        let shown = show(&forest, &facts, &TfprofOptions::default());
        let expected =
            [row(ROOT_NAME, 0, 1111), row("a", 1, 111), row("a/b", 2, 110), row("a/b/c", 3, 100), row("d", 1, 1000)];
        assert_eq!(rows(&shown, &forest), expected);
    }

    #[test]
    fn order_by_a_column_puts_larger_totals_first() {
        let (forest, facts) = sample();
        let options = TfprofOptions { order_by: OrderBy::Column(Column::Micros), ..TfprofOptions::default() };
        let names: Vec<String> = rows(&show(&forest, &facts, &options), &forest).into_iter().map(|r| r.0).collect();
        assert_eq!(names, [ROOT_NAME, "d", "a", "a/b", "a/b/c"]);
    }

    #[test]
    fn depth_and_minimums_hide_nodes_and_hidden_nodes_pass_children_up() {
        let (forest, facts) = sample();
        let options = TfprofOptions { max_depth: 2, ..TfprofOptions::default() };
        let expected = [row(ROOT_NAME, 0, 1111), row("a", 1, 111), row("a/b", 2, 110), row("d", 1, 1000)];
        assert_eq!(rows(&show(&forest, &facts, &options), &forest), expected);
        // `a/b` totals 110 µs: hidden below 111 µs, its child moves up under `a`.
        let options = TfprofOptions { min_micros_ps: 111_000_000, ..TfprofOptions::default() };
        let expected = [row(ROOT_NAME, 0, 1111), row("a", 1, 111), row("d", 1, 1000)];
        assert_eq!(rows(&show(&forest, &facts, &options), &forest), expected);
        let hide =
            TfprofOptions { hide_name_regexes: Regexes::parse("h", "a/b").expect("ok"), ..TfprofOptions::default() };
        let expected = [row(ROOT_NAME, 0, 1111), row("a", 1, 111), row("a/b/c", 2, 100), row("d", 1, 1000)];
        assert_eq!(rows(&show(&forest, &facts, &hide), &forest), expected);
        let occurrence = TfprofOptions { min_occurrence: 2, ..TfprofOptions::default() };
        assert_eq!(rows(&show(&forest, &facts, &occurrence), &forest), [row(ROOT_NAME, 0, 1111)]);
    }

    #[test]
    fn displayed_only_accounting_drops_hidden_nodes_from_totals() {
        let (forest, facts) = sample();
        let options = TfprofOptions {
            show_name_regexes: Regexes::parse("s", "a,a/b/c").expect("ok"),
            account_displayed_op_only: true,
            ..TfprofOptions::default()
        };
        // `a/b` (10) and `d` (1000) are hidden, so they count for nothing.
        let expected = [row(ROOT_NAME, 0, 101), row("a", 1, 101), row("a/b/c", 2, 100)];
        assert_eq!(rows(&show(&forest, &facts, &options), &forest), expected);
        let counted = TfprofOptions { account_displayed_op_only: false, ..options };
        let expected = [row(ROOT_NAME, 0, 1111), row("a", 1, 111), row("a/b/c", 2, 100)];
        assert_eq!(rows(&show(&forest, &facts, &counted), &forest), expected);
    }

    #[test]
    fn start_and_trim_regexes_cut_the_tree() {
        let (forest, facts) = sample();
        let start =
            TfprofOptions { start_name_regexes: Regexes::parse("s", "a/b").expect("ok"), ..TfprofOptions::default() };
        // The root keeps the accounted total of the whole tree, as tfprof.
        let expected = [row(ROOT_NAME, 0, 1111), row("a/b", 1, 110), row("a/b/c", 2, 100)];
        assert_eq!(rows(&show(&forest, &facts, &start), &forest), expected);
        let trim =
            TfprofOptions { trim_name_regexes: Regexes::parse("t", "a/b").expect("ok"), ..TfprofOptions::default() };
        let expected = [row(ROOT_NAME, 0, 1111), row("a", 1, 111), row("a/b", 2, 110), row("d", 1, 1000)];
        assert_eq!(rows(&show(&forest, &facts, &trim), &forest), expected);
    }

    #[test]
    fn unaccounted_nodes_keep_accounted_descendants_only() {
        let (forest, mut facts) = sample();
        facts[1].accounted = false;
        facts[3].accounted = false;
        let shown = show(&forest, &facts, &TfprofOptions::default());
        let expected = [row(ROOT_NAME, 0, 101), row("a", 1, 101), row("a/b", 2, 100), row("a/b/c", 3, 100)];
        assert_eq!(rows(&shown, &forest), expected);
    }

    #[test]
    fn the_op_view_lists_types_with_cumulative_totals() {
        let (mut forest, facts) = sample();
        forest.nodes.iter_mut().for_each(|n| n.children.clear());
        forest.roots = vec![0, 1, 2, 3];
        let options =
            TfprofOptions { view: View::Op, order_by: OrderBy::Column(Column::Micros), ..TfprofOptions::default() };
        let shown = show(&forest, &facts, &options);
        let expected = [row("d", 1, 1111), row("a/b/c", 1, 111), row("a/b", 1, 11), row("a", 1, 1)];
        assert_eq!(rows(&shown, &forest), expected);
        assert_eq!(shown.root_total.micros_ps, 1111 * 1_000_000);
        let cut = TfprofOptions { max_depth: 2, ..options.clone() };
        let shown = show(&forest, &facts, &cut);
        assert_eq!((shown.rows.len(), shown.cut_rows), (2, 2));
        let trimmed = TfprofOptions { trim_name_regexes: Regexes::parse("t", "a/b").expect("ok"), ..options.clone() };
        assert_eq!(show(&forest, &facts, &trimmed).rows.len(), 2);
        let started = TfprofOptions { start_name_regexes: Regexes::parse("s", "a/b").expect("ok"), ..options };
        assert_eq!(rows(&show(&forest, &facts, &started), &forest), [row("a/b", 1, 11), row("a", 1, 1)]);
    }

    #[test]
    fn the_graph_spanning_tree_counts_shared_inputs_once() {
        // out reads x and y; y reads x: x is shown once, under out (reached first).
        let node = |name: &str, children: Vec<usize>| ViewNode {
            name: name.into(),
            label: name.into(),
            children,
            records: Vec::new(),
        };
        let forest =
            Forest { nodes: vec![node("out", vec![1, 2]), node("x", vec![]), node("y", vec![1])], roots: vec![0] };
        let facts: Vec<OwnFacts> = [1, 10, 100]
            .iter()
            .map(|&us| OwnFacts {
                accounted: true,
                stats: NodeStats { micros_ps: us * 1_000_000, ..NodeStats::default() },
                ..OwnFacts::default()
            })
            .collect();
        let options = TfprofOptions { view: View::Graph, ..TfprofOptions::default() };
        let expected = [row(ROOT_NAME, 0, 111), row("out", 1, 111), row("x", 2, 10), row("y", 2, 100)];
        assert_eq!(rows(&show(&forest, &facts, &options), &forest), expected);
    }
}
