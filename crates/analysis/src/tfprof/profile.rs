//! What every tfprof view is built from: one [`OpRecord`] per op run (or per GPU
//! activity of an op), with its name-scope path, Python-code path, graph node, step,
//! times and memory, collected once from all hosts.
//!
//! The one design decision to know: paths are interned in tries ([`Paths`]), one for
//! name scopes and one for Python stacks, so a record holds two `u32`s instead of two
//! vectors of strings, and each trie node *is* a node of the scope or code view.

use std::collections::{BTreeSet, HashMap};

/// Strings stored once, referred to by dense `u32` ids.
#[derive(Debug, Default)]
pub(super) struct Interner {
    strings: Vec<String>,
    index: HashMap<String, u32>,
}

impl Interner {
    /// The id of `text`, storing it on first use.
    pub(super) fn intern(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.index.get(text) {
            return id;
        }
        let id = u32::try_from(self.strings.len()).unwrap_or(u32::MAX);
        self.strings.push(text.to_string());
        self.index.insert(text.to_string(), id);
        id
    }

    /// The string of `id` ("" for an unknown id).
    pub(super) fn get(&self, id: u32) -> &str {
        self.strings.get(id as usize).map_or("", String::as_str)
    }
}

/// A trie of paths of interned components. Id 0 is the empty path (the root).
#[derive(Debug)]
pub(super) struct Paths {
    /// Per path id: its parent path (the root points to itself).
    parent: Vec<u32>,
    /// Per path id: its last component (unused for the root).
    component: Vec<u32>,
    index: HashMap<(u32, u32), u32>,
}

impl Default for Paths {
    fn default() -> Paths {
        Paths { parent: vec![ROOT_PATH], component: vec![0], index: HashMap::new() }
    }
}

/// The empty path.
pub(super) const ROOT_PATH: u32 = 0;

impl Paths {
    /// The path `parent` followed by `component`.
    pub(super) fn child(&mut self, parent: u32, component: u32) -> u32 {
        if let Some(&id) = self.index.get(&(parent, component)) {
            return id;
        }
        let id = u32::try_from(self.parent.len()).unwrap_or(u32::MAX);
        self.parent.push(parent);
        self.component.push(component);
        self.index.insert((parent, component), id);
        id
    }

    /// The path of `components` appended to `parent`.
    pub(super) fn extend(&mut self, parent: u32, components: impl IntoIterator<Item = u32>) -> u32 {
        components.into_iter().fold(parent, |path, component| self.child(path, component))
    }

    /// The parent of `id` (`None` for the root and unknown ids).
    pub(super) fn parent(&self, id: u32) -> Option<u32> {
        if id == ROOT_PATH {
            return None;
        }
        self.parent.get(id as usize).copied()
    }

    /// The last component of `id`.
    pub(super) fn component(&self, id: u32) -> u32 {
        self.component.get(id as usize).copied().unwrap_or(0)
    }
}

/// Where an event was drawn: one timeline track (a thread or a stream) of one host.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Track {
    /// Host index in the analysis.
    pub host: usize,
    /// Process name: the plane (`/host:CPU`, `/device:GPU:0`), prefixed by the host
    /// name when there are several hosts.
    pub process: String,
    /// Thread name: the line's name.
    pub thread: String,
}

/// One op run, or one GPU activity of an op.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct OpRecord {
    /// The graph node: the op name (TF op name, ATen op, `module/instruction` for XLA).
    pub node: u32,
    /// The op type (TF op type, ATen op, `CUDA runtime`, HLO category).
    pub op_type: u32,
    /// Name-scope path ([`Profile::scopes`]).
    pub scope: u32,
    /// Python-code path ([`Profile::code`]); [`ROOT_PATH`] when no stack is known.
    pub code: u32,
    /// The device it ran on (the plane name, host-prefixed with several hosts).
    pub device: u32,
    /// Index into [`Profile::tracks`].
    pub track: u32,
    /// Start, picoseconds relative to the profile start.
    pub start_ps: i64,
    /// Duration, picoseconds.
    pub duration_ps: i64,
    /// The step it belongs to (the step database's number), `None` outside steps.
    pub step: Option<i64>,
    /// Whether it is a static node (an XLA parameter): it has no time and belongs to
    /// every step.
    pub is_static: bool,
    /// Runs it counts: 1 for an op run, 0 for a GPU activity of an op counted on the host.
    pub runs: u64,
    /// Host (CPU) self time, picoseconds.
    pub cpu_ps: i64,
    /// Accelerator time, picoseconds.
    pub accelerator_ps: i64,
    /// Bytes the op asked the allocator for.
    pub requested_bytes: i64,
    /// Most bytes the op had allocated and not yet freed during the run.
    pub peak_bytes: i64,
    /// Bytes allocated by the op and not freed by its end.
    pub residual_bytes: i64,
    /// Bytes of the op's outputs.
    pub output_bytes: i64,
    /// Floating-point operations.
    pub float_ops: i64,
    /// Parameters (elements of a static node's shape).
    pub params: i64,
    /// Input shapes as text (`0:32x784|1:784x256`), interned.
    pub input_shapes: Option<u32>,
}

/// Where a profile's ops come from (each kind says so in one note).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum OpSource {
    /// TensorFlow ops of XProf's op databases.
    TensorFlow,
    /// PyTorch ops of the Kineto op databases.
    PyTorch,
    /// XLA ops named through HLO programs.
    Xla,
}

/// Which optional facts the profile holds (a column without them shows "—").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Availability {
    /// Allocation events attributed to ops (bytes, peak and residual bytes).
    pub memory: bool,
    /// Output sizes (TF `region_type` = `output`, XLA output shapes).
    pub output_bytes: bool,
    /// Parameter shapes (XLA entry parameters).
    pub params: bool,
    /// FLOP counts (`flops` stats).
    pub float_ops: bool,
    /// Input shapes (Kineto `Input Dims`, XLA operand shapes).
    pub input_shapes: bool,
    /// Op inputs (XLA operands).
    pub graph_inputs: bool,
    /// Python stacks (PyTorch `python_function`, Python tracer, XLA stack frames).
    pub python_stacks: bool,
    /// Any accelerator time.
    pub accelerator: bool,
}

/// Everything the views need, from all hosts.
#[derive(Debug, Default)]
pub(super) struct Profile {
    /// Names, types, devices, shapes and path components.
    pub strings: Interner,
    /// Name-scope paths.
    pub scopes: Paths,
    /// Python-code paths.
    pub code: Paths,
    /// The op records.
    pub records: Vec<OpRecord>,
    /// Per graph node, its inputs (graph nodes), where the profile says.
    pub inputs: HashMap<u32, Vec<u32>>,
    /// Timeline tracks, indexed by [`OpRecord::track`].
    pub tracks: Vec<Track>,
    track_index: HashMap<Track, u32>,
    /// What the profile can tell.
    pub availability: Availability,
    /// The steps of the step database(s), by number.
    pub steps: BTreeSet<i64>,
    /// How the steps were found (one sentence per host kind).
    pub step_sources: BTreeSet<String>,
    /// Sentences on how the records were obtained and what was left out.
    pub notes: Vec<String>,
    /// The kinds of ops found.
    pub kinds: BTreeSet<OpSource>,
    /// Number of hosts.
    pub host_count: usize,
}

impl Profile {
    /// An empty profile of `host_count` hosts.
    pub(super) fn new(host_count: usize) -> Profile {
        Profile { host_count, ..Profile::default() }
    }

    /// The id of a track, storing it on first use.
    pub(super) fn track(&mut self, track: Track) -> u32 {
        if let Some(&id) = self.track_index.get(&track) {
            return id;
        }
        let id = u32::try_from(self.tracks.len()).unwrap_or(u32::MAX);
        self.tracks.push(track.clone());
        self.track_index.insert(track, id);
        id
    }

    /// The device or process name of `plane` on host `host_name`, prefixed by the
    /// host when the analysis has several.
    pub(super) fn place(&self, host_name: &str, plane: &str) -> String {
        if self.host_count > 1 { format!("{host_name}:{plane}") } else { plane.to_string() }
    }

    /// The scope path of a `/`-separated op name appended to `parent`; `/` inside
    /// brackets or parentheses (`jit(f/g)`) does not separate.
    pub(super) fn scope_of_name(&mut self, parent: u32, name: &str) -> u32 {
        let mut path = parent;
        for component in split_scopes(name) {
            let id = self.strings.intern(component);
            path = self.scopes.child(path, id);
        }
        path
    }

    /// A path's components joined with `/` (its full name in the views).
    pub(super) fn path_name(&self, paths: &Paths, id: u32) -> String {
        let mut parts = Vec::new();
        let mut at = id;
        while let Some(parent) = paths.parent(at) {
            parts.push(self.strings.get(paths.component(at)));
            at = parent;
        }
        parts.reverse();
        parts.join("/")
    }
}

/// The `/`-separated components of an op name, not splitting inside `()`, `[]`, `{}`;
/// empty components are dropped.
pub(super) fn split_scopes(name: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in name.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '/' if depth == 0 => {
                parts.push(&name[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&name[start..]);
    parts.retain(|p| !p.is_empty());
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_split_outside_brackets_and_paths_intern() {
        assert_eq!(split_scopes("model/dense/MatMul"), ["model", "dense", "MatMul"]);
        assert_eq!(
            split_scopes("jit(f/g)/transpose(jvp())/dot_general"),
            ["jit(f/g)", "transpose(jvp())", "dot_general"]
        );
        assert_eq!(split_scopes("/a//b/"), ["a", "b"]);
        let mut profile = Profile::default();
        let a = profile.scope_of_name(ROOT_PATH, "m/a");
        let b = profile.scope_of_name(ROOT_PATH, "m/a/b");
        assert_eq!(profile.scopes.parent(b), Some(a));
        assert_eq!(profile.path_name(&profile.scopes, b), "m/a/b");
        assert_eq!(profile.scope_of_name(ROOT_PATH, "m"), profile.scopes.parent(a).expect("m"));
        assert_eq!(profile.scopes.parent(ROOT_PATH), None);
    }
}
