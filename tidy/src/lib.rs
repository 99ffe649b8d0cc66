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
