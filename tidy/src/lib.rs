//! agw-tidy — checks of the workspace itself, run by `cargo test` (like rust-analyzer's tidy
//! tests): the dependency graph between agw's crates points downward only, every library crate
//! is ready to publish, and says in its crate docs what it owns and what it must never do.
//!
//! The checks live in `tests/`; this library only reads `cargo metadata`.

#![forbid(unsafe_code)]
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The workspace root (where the top `Cargo.toml` is).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

/// `cargo metadata --no-deps` of the workspace, from the cargo that runs the tests.
pub fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(workspace_root())
        .output()
        .expect("cargo metadata runs");
    assert!(output.status.success(), "cargo metadata failed: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

/// One dependency edge between workspace packages.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Edge {
    /// The package that depends.
    pub from: String,
    /// The package depended on.
    pub to: String,
    /// `normal`, `dev` or `build`.
    pub kind: String,
}

/// The workspace's packages as `(name, manifest JSON)`.
pub fn packages(metadata: &Value) -> Vec<(String, Value)> {
    metadata["packages"]
        .as_array()
        .map(|p| p.iter().map(|p| (p["name"].as_str().unwrap_or_default().to_owned(), p.clone())).collect())
        .unwrap_or_default()
}

/// Every dependency of a workspace package on another workspace package.
pub fn internal_edges(metadata: &Value) -> Vec<Edge> {
    let names: Vec<String> = packages(metadata).into_iter().map(|(n, _)| n).collect();
    let mut edges = Vec::new();
    for (from, package) in packages(metadata) {
        for dep in package["dependencies"].as_array().into_iter().flatten() {
            let to = dep["name"].as_str().unwrap_or_default();
            if names.iter().any(|n| n == to) {
                let kind = dep["kind"].as_str().unwrap_or("normal").to_owned();
                edges.push(Edge { from: from.clone(), to: to.to_owned(), kind });
            }
        }
    }
    edges.sort();
    edges
}

/// Every `.rs` file under `dir`, recursively, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The top-level module a source file of `src` belongs to (`routes/query.rs` → `routes`,
/// `lib.rs` → `lib`).
pub fn top_module(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap_or(file);
    let first = relative.components().next().map(|c| c.as_os_str().to_string_lossy().into_owned()).unwrap_or_default();
    first.trim_end_matches(".rs").to_owned()
}

/// The top-level modules of a crate each top-level module names as `crate::<module>` (in `use`
/// lines, grouped `crate::{a::X, b}` imports and paths; comments are skipped), self-references
/// left out.
pub fn module_graph(src: &Path) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut graph: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    for file in rust_files(src) {
        let from = top_module(src, &file);
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        let code: String =
            text.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n");
        let targets = graph.entry(from.clone()).or_default();
        let mut rest = code.as_str();
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let names: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
                // The group's items at depth 0, each by its first path segment.
                let mut depth = 0usize;
                let end = group
                    .char_indices()
                    .find(|&(_, c)| {
                        match c {
                            '{' => depth += 1,
                            '}' if depth == 0 => return true,
                            '}' => depth -= 1,
                            _ => {}
                        }
                        false
                    })
                    .map_or(group.len(), |(i, _)| i);
                let mut items = Vec::new();
                let mut depth = 0usize;
                let mut item = String::new();
                for c in group[..end].chars() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth = depth.saturating_sub(1),
                        ',' if depth == 0 => items.push(std::mem::take(&mut item)),
                        _ => {}
                    }
                    if !(c == ',' && depth == 0) {
                        item.push(c);
                    }
                }
                items.push(item);
                items.iter().map(|i| first_segment(i.trim())).collect()
            } else {
                vec![first_segment(rest)]
            };
            for name in names {
                if !name.is_empty() && name != from && name.chars().next().is_some_and(char::is_lowercase) {
                    targets.insert(name);
                }
            }
        }
    }
    graph
}

fn first_segment(path: &str) -> String {
    path.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
}

/// The circles of a module graph: each strongly connected set of two or more modules, sorted.
pub fn circles(graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    let reaches = |from: &str, to: &str| {
        let mut seen = std::collections::BTreeSet::new();
        let mut pending = vec![from.to_owned()];
        while let Some(at) = pending.pop() {
            for next in graph.get(&at).into_iter().flatten() {
                if next == to {
                    return true;
                }
                if seen.insert(next.clone()) {
                    pending.push(next.clone());
                }
            }
        }
        false
    };
    let mut circles: Vec<Vec<String>> = Vec::new();
    for module in graph.keys() {
        if circles.iter().any(|c| c.contains(module)) {
            continue;
        }
        let circle: Vec<String> = graph
            .keys()
            .filter(|other| *other == module || (reaches(module, other) && reaches(other, module)))
            .cloned()
            .collect();
        if circle.len() > 1 {
            circles.push(circle);
        }
    }
    circles
}
