//! The nodes of each view and the records each node owns.
//!
//! - scope: one node per name-scope path (intermediate scopes become nodes of their
//!   own, as tfprof's `CreateParentNode`); a node's name is its full path
//!   (`model/dense/MatMul`);
//! - code: one node per Python call path, named by its frame (`train.py:42:step`, as
//!   tfprof names code nodes); ops without a stack go to one `(no Python frame)` node;
//! - op: one node per op type;
//! - graph: one node per op (graph node), whose children are its inputs; the roots are
//!   the nodes no other node reads.
//!
//! The one design decision to know: a node owns only the records whose path ends at
//! it; the views' totals then come from the tree, never from the records twice.

use std::collections::HashMap;

use super::options::View;
use super::profile::{Paths, Profile, ROOT_PATH};

/// The name of the code node that holds ops without a Python stack.
pub const NO_FRAME: &str = "(no Python frame)";

/// One node of a view.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct ViewNode {
    /// The name regexes match (full scope path, frame, op type or op name).
    pub name: String,
    /// The short name shown in the indented table (the last path component).
    pub label: String,
    /// Children (graph view: inputs), in first-seen order.
    pub children: Vec<usize>,
    /// The records this node owns (indices into the profile).
    pub records: Vec<usize>,
}

/// The nodes of one view.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Forest {
    /// All nodes.
    pub nodes: Vec<ViewNode>,
    /// Top-level nodes, in first-seen order.
    pub roots: Vec<usize>,
}

/// Builds the nodes of `view`.
pub(super) fn build(profile: &Profile, view: View) -> Forest {
    match view {
        View::Scope => from_paths(profile, &profile.scopes, |r| profile.records[r].scope, true),
        View::Code => from_paths(profile, &profile.code, |r| profile.records[r].code, false),
        View::Op => flat(profile, |r| profile.records[r].op_type),
        View::Graph => graph(profile),
    }
}

/// A tree from a path trie: every record's path and its ancestors become nodes.
fn from_paths(profile: &Profile, paths: &Paths, path_of: impl Fn(usize) -> u32, full_names: bool) -> Forest {
    let mut forest = Forest::default();
    let mut node_of: HashMap<u32, usize> = HashMap::new();
    for record in 0..profile.records.len() {
        let path = path_of(record);
        let node = node_for(profile, paths, path, full_names, &mut forest, &mut node_of);
        forest.nodes[node].records.push(record);
    }
    forest
}

/// The node of `path`, created with its ancestors on first use.
fn node_for(
    profile: &Profile,
    paths: &Paths,
    path: u32,
    full_names: bool,
    forest: &mut Forest,
    node_of: &mut HashMap<u32, usize>,
) -> usize {
    // Walk up to the first ancestor that has a node, then create the missing chain.
    let mut missing = Vec::new();
    let mut at = path;
    let mut attach_to = loop {
        if let Some(&node) = node_of.get(&at) {
            break Some(node);
        }
        missing.push(at);
        match paths.parent(at) {
            Some(parent) if parent != ROOT_PATH => at = parent,
            _ => break None,
        }
    };
    for &id in missing.iter().rev() {
        let label =
            if id == ROOT_PATH { NO_FRAME.to_string() } else { profile.strings.get(paths.component(id)).to_string() };
        let name = if full_names && id != ROOT_PATH { profile.path_name(paths, id) } else { label.clone() };
        let node = forest.nodes.len();
        forest.nodes.push(ViewNode { name, label, ..ViewNode::default() });
        match attach_to {
            Some(parent) => forest.nodes[parent].children.push(node),
            None => forest.roots.push(node),
        }
        node_of.insert(id, node);
        attach_to = Some(node);
    }
    attach_to.unwrap_or(0)
}

/// One node per distinct `key` (op types), no children.
fn flat(profile: &Profile, key: impl Fn(usize) -> u32) -> Forest {
    let mut forest = Forest::default();
    let mut node_of: HashMap<u32, usize> = HashMap::new();
    for record in 0..profile.records.len() {
        let id = key(record);
        let node = *node_of.entry(id).or_insert_with(|| {
            let name = profile.strings.get(id).to_string();
            forest.nodes.push(ViewNode { label: name.clone(), name, ..ViewNode::default() });
            forest.roots.push(forest.nodes.len() - 1);
            forest.nodes.len() - 1
        });
        forest.nodes[node].records.push(record);
    }
    forest
}

/// One node per op; children are the op's inputs that are nodes too.
fn graph(profile: &Profile) -> Forest {
    let mut forest = flat(profile, |r| profile.records[r].node);
    let node_of: HashMap<&str, usize> =
        forest.nodes.iter().enumerate().map(|(i, node)| (node.name.as_str(), i)).collect();
    let mut is_input = vec![false; forest.nodes.len()];
    let mut children = vec![Vec::new(); forest.nodes.len()];
    for (node, kids) in children.iter_mut().enumerate() {
        let Some(&first) = forest.nodes[node].records.first() else { continue };
        let id = profile.records[first].node;
        for input in profile.inputs.get(&id).into_iter().flatten() {
            if let Some(&child) = node_of.get(profile.strings.get(*input)) {
                kids.push(child);
                is_input[child] = true;
            }
        }
    }
    for (node, kids) in children.into_iter().enumerate() {
        forest.nodes[node].children = kids;
    }
    forest.roots = (0..forest.nodes.len()).filter(|&n| !is_input[n]).collect();
    forest
}

#[cfg(test)]
mod tests {
    use super::super::profile::OpRecord;
    use super::*;

    #[test]
    fn scope_nodes_create_their_parents_and_own_only_their_records() {
        let mut profile = Profile::default();
        let a = profile.scope_of_name(ROOT_PATH, "m/a");
        let b = profile.scope_of_name(ROOT_PATH, "m/a/b");
        let c = profile.scope_of_name(ROOT_PATH, "n");
        for scope in [b, a, c, b] {
            profile.records.push(OpRecord { scope, ..OpRecord::default() });
        }
        let forest = build(&profile, View::Scope);
        let names: Vec<&str> = forest.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["m", "m/a", "m/a/b", "n"]);
        assert_eq!(forest.roots, [0, 3]);
        assert_eq!(forest.nodes[1].children, [2]);
        assert_eq!((forest.nodes[2].records.clone(), forest.nodes[1].records.clone()), (vec![0, 3], vec![1]));
        assert_eq!(forest.nodes[2].label, "b");
    }

    #[test]
    fn code_nodes_are_named_by_frame_and_stackless_ops_share_one_node() {
        let mut profile = Profile::default();
        let main = profile.strings.intern("train.py:1:<module>");
        let step = profile.strings.intern("train.py:9:step");
        let path = profile.code.extend(ROOT_PATH, [main, step]);
        profile.records.push(OpRecord { code: path, ..OpRecord::default() });
        profile.records.push(OpRecord { code: ROOT_PATH, ..OpRecord::default() });
        let forest = build(&profile, View::Code);
        let names: Vec<&str> = forest.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["train.py:1:<module>", "train.py:9:step", NO_FRAME]);
        assert_eq!(forest.roots, [0, 2]);
    }

    #[test]
    fn graph_nodes_read_their_inputs() {
        let mut profile = Profile::default();
        let (x, dot, out) =
            (profile.strings.intern("m/x"), profile.strings.intern("m/dot"), profile.strings.intern("m/out"));
        let missing = profile.strings.intern("m/constant");
        for node in [x, dot, out] {
            profile.records.push(OpRecord { node, ..OpRecord::default() });
        }
        profile.inputs.insert(dot, vec![x, x, missing]);
        profile.inputs.insert(out, vec![dot]);
        let forest = build(&profile, View::Graph);
        assert_eq!(forest.roots, [2]);
        assert_eq!(forest.nodes[1].children, [0, 0]);
        let ops = build(&profile, View::Op);
        assert_eq!(ops.nodes.len(), 1);
        assert_eq!(ops.nodes[0].records, [0, 1, 2]);
    }
}
