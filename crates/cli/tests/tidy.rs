//! The habits the code keeps, checked over the source tree (not over behaviour): every
//! Rust file opens with a `//!` paragraph saying what it owns, and the model and the
//! analyses do no I/O — no files, network, processes, environment or printing outside
//! their tests (DESIGN.md: sources → model → analyses → views), and each crate's
//! top-level modules form layers, never importing one another in a cycle.

use std::path::{Path, PathBuf};

/// The repository root.
fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file below `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target" && n != "node_modules") {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let roots = ["crates", "fuzz/fuzz_targets", "examples"];
    let files: Vec<PathBuf> = roots.iter().flat_map(|root| rust_files(&repo().join(root))).collect();
    assert!(files.len() > 100, "the tree was found ({} files)", files.len());
    let undocumented: Vec<String> = files
        .iter()
        .filter(|path| !std::fs::read_to_string(path).expect("readable").starts_with("//!"))
        .map(|path| path.strip_prefix(repo()).unwrap_or(path).display().to_string())
        .collect();
    assert!(undocumented.is_empty(), "files that do not open with a //! paragraph: {undocumented:#?}");
}

/// What doing I/O looks like in Rust source.
const IO_MARKERS: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::env",
    "File::",
    "OpenOptions",
    "TcpStream",
    "println!",
    "eprintln!",
    "print!(",
    "eprint!(",
    "stdout()",
    "stderr()",
    "stdin()",
];

#[test]
fn the_model_and_the_analyses_do_no_io() {
    let mut found = Vec::new();
    for krate in ["crates/model/src", "crates/analysis/src"] {
        for path in rust_files(&repo().join(krate)) {
            if path.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            // Unit tests may read fixtures: only the code outside them counts.
            let code = code_outside_tests(&text);
            for (number, line) in code.lines().enumerate() {
                let line = line.trim_start();
                if line.starts_with("//") {
                    continue;
                }
                if let Some(marker) = IO_MARKERS.iter().find(|m| line.contains(*m)) {
                    let shown = path.strip_prefix(repo()).unwrap_or(&path).display();
                    found.push(format!("{shown}:{}: {marker}", number + 1));
                }
            }
        }
    }
    assert!(found.is_empty(), "I/O in the model or the analyses: {found:#?}");
}

/// What naming the source format looks like in analysis code.
const FORMAT_MARKERS: &[&str] = &["is_kineto", "SourceFormat::"];

/// The analysis files that may name the source format: the host facts (the one place
/// that picks each fact's adapter), the Kineto vocabulary, and what a format can have
/// (`tool_availability`). No tool reads the format itself (issue 18); this list may
/// only shrink.
const FORMAT_AWARE: &[&str] = &["facts/mod.rs", "kineto/mod.rs", "tool_availability.rs"];

#[test]
fn no_new_analysis_code_names_the_source_format() {
    let root = repo().join("crates/analysis/src");
    let mut found = Vec::new();
    let mut listed_but_clean = Vec::new();
    for path in rust_files(&root) {
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let relative = path.strip_prefix(&root).unwrap_or(&path).display().to_string();
        let text = std::fs::read_to_string(&path).expect("readable");
        let code = code_outside_tests(&text);
        let names_format = code
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .any(|line| FORMAT_MARKERS.iter().any(|marker| line.contains(marker)));
        match (names_format, FORMAT_AWARE.contains(&relative.as_str())) {
            (true, false) => found.push(relative),
            (false, true) => listed_but_clean.push(relative),
            _ => {}
        }
    }
    assert!(found.is_empty(), "analysis code naming the source format outside the adapters: {found:#?}");
    assert!(listed_but_clean.is_empty(), "no longer name the format; remove from FORMAT_AWARE: {listed_but_clean:#?}");
}

/// The crates whose top-level modules import one another without a cycle, checked by
/// [`no_crate_imports_its_modules_in_a_cycle`]: all of them.
const ACYCLIC_CRATES: &[&str] = &["analysis", "capture", "cli", "formats", "mapped", "model", "timeline", "web"];

/// A reference from one top-level module to another: where it is written.
struct Edge {
    from: String,
    to: String,
    at: String,
}

/// The top-level modules declared in a crate root (`mod name;`, any visibility or
/// attributes before it).
fn declared_modules(root: &str) -> Vec<String> {
    root.lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line.rsplit_once("mod ").filter(|(before, _)| before.is_empty() || before.ends_with(' '))?.1;
            let name = rest.strip_suffix(';')?;
            name.chars().all(|c| c.is_alphanumeric() || c == '_').then(|| name.to_string())
        })
        .collect()
}

/// The names a crate root re-exports from its modules (`pub use module::{A, B as C};`),
/// each with the module it comes from.
fn reexports(root: &str, modules: &[String]) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for line in root.lines() {
        let Some(path) = line.trim().strip_prefix("pub use ").and_then(|rest| rest.strip_suffix(';')) else {
            continue;
        };
        let path = path.strip_prefix("crate::").unwrap_or(path);
        let Some((module, items)) = path.split_once("::") else { continue };
        if !modules.iter().any(|m| m == module) {
            continue;
        }
        let items = items.rsplit_once("::{").map_or(items, |(_, group)| group).trim_end_matches('}');
        for item in items.split(',') {
            let named = item.rsplit(" as ").next().unwrap_or(item);
            let name = named.rsplit("::").next().unwrap_or(named).trim();
            if !name.is_empty() {
                found.push((name.to_string(), module.to_string()));
            }
        }
    }
    found
}

/// `text` without its test-only items: each `#[cfg(test)]` with the item after it (a
/// one-line item such as `mod tests;`, or a block up to its closing brace, counted
/// by braces on whole lines).
fn code_outside_tests(text: &str) -> String {
    let mut kept = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if line.trim() != "#[cfg(test)]" {
            kept.push_str(line);
            kept.push('\n');
            continue;
        }
        let mut depth = 0i64;
        for item in lines.by_ref() {
            depth += item.matches('{').count() as i64 - item.matches('}').count() as i64;
            if depth <= 0 && (item.trim_end().ends_with(';') || item.trim_end().ends_with('}')) {
                break;
            }
        }
    }
    kept
}

#[test]
fn test_only_items_are_left_out_and_the_code_after_them_kept() {
    let text =
        "use a;\n#[cfg(test)]\nmod helpers;\nfn b() {}\n#[cfg(test)]\nmod tests {\n    fn t() {\n    }\n}\nfn c() {}\n";
    assert_eq!(code_outside_tests(text), "use a;\nfn b() {}\nfn c() {}\n");
}

/// The source code of `text` that builds into the crate: without its test-only items
/// ([`code_outside_tests`]) and without comments (doc links are no imports).
fn code_without_tests_or_comments(text: &str) -> String {
    let code = code_outside_tests(text);
    let mut kept = String::new();
    for line in code.lines() {
        let code = line.split("//").next().unwrap_or_default();
        kept.push_str(code);
        kept.push('\n');
    }
    kept
}

fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The first path segments named after `text`'s start: one identifier, or each item of
/// a `{…}` group (nested groups ignored).
fn first_segments(text: &str) -> Vec<String> {
    if let Some(group) = text.strip_prefix('{') {
        let mut depth = 0;
        let mut item = String::new();
        let mut items = Vec::new();
        for c in group.chars() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => break,
                '}' => depth -= 1,
                ',' if depth == 0 => items.push(std::mem::take(&mut item)),
                _ if depth == 0 => item.push(c),
                _ => {}
            }
        }
        items.push(item);
        return items
            .iter()
            .map(|item| item.trim().chars().take_while(|c| is_ident_char(*c)).collect::<String>())
            .filter(|name| !name.is_empty())
            .collect();
    }
    let name: String = text.chars().take_while(|c| is_ident_char(*c)).collect();
    if name.is_empty() { Vec::new() } else { vec![name] }
}

/// The crate-level names `code` refers to: after `crate::`, and after as many
/// `super::` as the file is deep (`depth`: 1 for `src/a.rs` or `src/a/mod.rs`).
fn crate_level_names(code: &str, depth: usize) -> Vec<(String, usize)> {
    let mut names = Vec::new();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident_char(c) || c == '$' || c == ':') {
            continue;
        }
        for name in first_segments(&code[at + "crate::".len()..]) {
            names.push((name, line_of(at)));
        }
    }
    for (at, _) in code.match_indices("super::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident_char(c) || c == ':') {
            continue;
        }
        let mut rest = &code[at..];
        let mut chain = 0;
        while let Some(after) = rest.strip_prefix("super::") {
            chain += 1;
            rest = after;
        }
        if chain == depth {
            for name in first_segments(rest) {
                names.push((name, line_of(at)));
            }
        }
    }
    names
}

/// How deep the module of `file` (below `src`) is: `a.rs` and `a/mod.rs` are 1.
fn module_depth(file: &Path, src: &Path) -> usize {
    let relative = file.strip_prefix(src).unwrap_or(file);
    let parts = relative.components().count();
    if relative.file_name().is_some_and(|n| n == "mod.rs") { parts - 1 } else { parts }
}

/// The references between the top-level modules of the crate in `crates/<krate>`.
fn module_edges(krate: &str) -> Vec<Edge> {
    let src = repo().join("crates").join(krate).join("src");
    let root_file = ["lib.rs", "main.rs"].iter().map(|f| src.join(f)).find(|f| f.exists());
    let root = std::fs::read_to_string(root_file.expect("a crate root")).expect("readable");
    let modules = declared_modules(&root);
    let exported = reexports(&root, &modules);
    let mut edges = Vec::new();
    for module in &modules {
        let mut files = vec![src.join(format!("{module}.rs"))];
        files.extend(rust_files(&src.join(module)));
        for file in files.iter().filter(|f| f.exists() && f.file_name().is_some_and(|n| n != "tests.rs")) {
            let code = code_without_tests_or_comments(&std::fs::read_to_string(file).expect("readable"));
            for (name, line) in crate_level_names(&code, module_depth(file, &src)) {
                let target = if modules.contains(&name) {
                    Some(name)
                } else {
                    exported.iter().find(|(item, _)| *item == name).map(|(_, m)| m.clone())
                };
                if let Some(to) = target.filter(|to| to != module) {
                    let shown = file.strip_prefix(repo()).unwrap_or(file).display();
                    edges.push(Edge { from: module.clone(), to, at: format!("{shown}:{line}") });
                }
            }
        }
    }
    edges
}

/// The cycles of `edges`: each strongly connected set of two or more modules, sorted,
/// with the references that join them (Tarjan's algorithm).
fn cycles(edges: &[Edge]) -> Vec<Vec<String>> {
    let mut nodes: Vec<&str> = edges.iter().flat_map(|e| [e.from.as_str(), e.to.as_str()]).collect();
    nodes.sort_unstable();
    nodes.dedup();
    let index_of = |name: &str| nodes.binary_search(&name).unwrap_or_default();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for edge in edges {
        next[index_of(&edge.from)].push(index_of(&edge.to));
    }
    struct Tarjan<'a> {
        next: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        counter: usize,
        components: Vec<Vec<usize>>,
    }
    impl Tarjan<'_> {
        fn visit(&mut self, v: usize) {
            self.index[v] = Some(self.counter);
            self.low[v] = self.counter;
            self.counter += 1;
            self.stack.push(v);
            self.on_stack[v] = true;
            for w in self.next[v].clone() {
                match self.index[w] {
                    None => {
                        self.visit(w);
                        self.low[v] = self.low[v].min(self.low[w]);
                    }
                    Some(index) if self.on_stack[w] => self.low[v] = self.low[v].min(index),
                    Some(_) => {}
                }
            }
            if Some(self.low[v]) == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                self.components.push(component);
            }
        }
    }
    let mut tarjan = Tarjan {
        next: &next,
        index: vec![None; nodes.len()],
        low: vec![0; nodes.len()],
        on_stack: vec![false; nodes.len()],
        stack: Vec::new(),
        counter: 0,
        components: Vec::new(),
    };
    for v in 0..nodes.len() {
        if tarjan.index[v].is_none() {
            tarjan.visit(v);
        }
    }
    let mut found = Vec::new();
    for component in tarjan.components.iter().filter(|c| c.len() > 1) {
        let members: Vec<&str> = component.iter().map(|&v| nodes[v]).collect();
        let mut shown: Vec<String> = edges
            .iter()
            .filter(|e| members.contains(&e.from.as_str()) && members.contains(&e.to.as_str()))
            .map(|e| format!("{} -> {} ({})", e.from, e.to, e.at))
            .collect();
        shown.sort();
        shown.dedup_by(|a, b| a.split(" (").next() == b.split(" (").next());
        found.push(shown);
    }
    found
}

/// Each crate's top-level modules form layers: a module never reaches, through the
/// modules it imports (`crate::…`, `super::…` up to the crate root, or a name the crate
/// root re-exports), back to itself. Unit tests (after `#[cfg(test)]`) and comments
/// do not count.
#[test]
fn no_crate_imports_its_modules_in_a_cycle() {
    let mut found = Vec::new();
    for krate in ACYCLIC_CRATES {
        let edges = module_edges(krate);
        for cycle in cycles(&edges) {
            found.push(format!("crates/{krate}: {cycle:#?}"));
        }
    }
    assert!(found.is_empty(), "import cycles between top-level modules:\n{}", found.join("\n"));
}

#[test]
fn the_cycle_check_finds_a_cycle() {
    let edge = |from: &str, to: &str| Edge { from: from.into(), to: to.into(), at: String::new() };
    let edges = [edge("a", "b"), edge("b", "c"), edge("c", "a"), edge("c", "d")];
    assert_eq!(cycles(&edges).len(), 1);
    assert!(cycles(&[edge("a", "b"), edge("b", "c")]).is_empty());
    let code = "use crate::{a::B, c};\nuse super::super::d::E;\n// crate::f\nlet x = $crate::g;";
    let names: Vec<String> =
        crate_level_names(&code_without_tests_or_comments(code), 2).into_iter().map(|n| n.0).collect();
    assert_eq!(names, ["a", "c", "d"]);
}
