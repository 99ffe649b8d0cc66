//! The crate layering of ARCHITECTURE.md, checked against `cargo metadata`: a new edge that is
//! not in the table below fails here, so a wrong dependency cannot land unnoticed.

use agw_tidy::{Edge, internal_edges, metadata, packages};

/// Each crate and the agw crates it may depend on (normal dependencies). Lower layers first;
/// every edge points to a crate above it in this list.
const LAYERS: &[(&str, &[&str])] = &[
    ("agw-protocol", &[]),
    ("agw-tools", &[]),
    ("agw-guard", &[]),
    ("agw-skills", &["agw-tools"]),
    ("agw-mcp", &["agw-tools"]),
    ("agw-a2a", &["agw-tools"]),
    ("agw-cluster", &[]),
    ("agw-memory", &["agw-protocol"]),
    ("agw-llm", &["agw-protocol"]),
    ("agw-modes", &["agw-protocol", "agw-llm", "agw-tools", "agw-skills", "agw-guard"]),
    ("agw-testkit", &["agw-llm"]),
    ("agw-demo", &["agw-llm", "agw-modes", "agw-skills"]),
    (
        "agw-runs",
        &["agw-protocol", "agw-llm", "agw-tools", "agw-skills", "agw-guard", "agw-modes", "agw-memory", "agw-cluster"],
    ),
    (
        "agw-http",
        &[
            "agw-protocol",
            "agw-llm",
            "agw-modes",
            "agw-tools",
            "agw-skills",
            "agw-guard",
            "agw-mcp",
            "agw-a2a",
            "agw-memory",
            "agw-cluster",
            "agw-demo",
            "agw-runs",
        ],
    ),
    // Evaluations: the format, the scores of runs' events, and a runner that plays cases over
    // agw's public HTTP API (so no server crate below it).
    ("agw-eval", &["agw-protocol"]),
    ("agw", &["agw-http", "agw-llm", "agw-eval", "agw-protocol"]),
    // Test and benchmark support, never depended on by the crates above.
    ("agw-fuzz", &["agw-protocol", "agw-llm", "agw-modes", "agw-tools", "agw-skills", "agw-memory", "agw-demo"]),
    ("agw-bench", &["agw-testkit"]),
    ("agw-tidy", &[]),
];

/// Dev-dependencies may also reach the test kit and lower layers (examples and tests).
const DEV_ONLY: &[&str] = &["agw-testkit"];

fn rank(name: &str) -> usize {
    LAYERS.iter().position(|(n, _)| *n == name).unwrap_or_else(|| panic!("crate {name} is not in LAYERS"))
}

#[test]
fn every_workspace_crate_has_a_place_in_the_layers() {
    let meta = metadata();
    let mut names: Vec<String> = packages(&meta).into_iter().map(|(n, _)| n).collect();
    names.sort();
    let mut listed: Vec<String> = LAYERS.iter().map(|(n, _)| (*n).to_owned()).collect();
    listed.sort();
    assert_eq!(names, listed, "LAYERS must list exactly the workspace's crates");
}

#[test]
fn normal_dependencies_follow_the_layer_table() {
    let meta = metadata();
    let wrong: Vec<Edge> = internal_edges(&meta)
        .into_iter()
        .filter(|e| e.kind == "normal")
        .filter(|e| {
            let allowed = LAYERS.iter().find(|(n, _)| *n == e.from).map(|(_, a)| *a).unwrap_or(&[]);
            !allowed.contains(&e.to.as_str())
        })
        .collect();
    assert!(wrong.is_empty(), "dependency edges not in the layer table (ARCHITECTURE.md): {wrong:#?}");
}

#[test]
fn dependencies_point_downward_only() {
    for (from, allowed) in LAYERS {
        for to in *allowed {
            assert!(rank(to) < rank(from), "{from} → {to} points upward or sideways in LAYERS");
        }
    }
    // Dev-dependencies may go to the test kit (a dev-dependency cycle is fine in cargo) or down.
    for edge in internal_edges(&metadata()).into_iter().filter(|e| e.kind == "dev") {
        let ok = DEV_ONLY.contains(&edge.to.as_str()) || rank(&edge.to) < rank(&edge.from);
        assert!(ok, "dev-dependency {} → {} points upward", edge.from, edge.to);
    }
}

/// The pure bottom layer stays pure: protocol types usable from any runtime (or none).
#[test]
fn the_protocol_crate_has_no_runtime_or_io_dependency() {
    let meta = metadata();
    let (_, protocol) = packages(&meta).into_iter().find(|(n, _)| n == "agw-protocol").expect("agw-protocol");
    let forbidden = ["tokio", "hyper", "reqwest", "async-openai", "futures", "http", "mio"];
    for dep in protocol["dependencies"].as_array().into_iter().flatten() {
        let name = dep["name"].as_str().unwrap_or_default();
        if dep["kind"].as_str().unwrap_or("normal") == "normal" {
            assert!(!forbidden.contains(&name), "agw-protocol must not depend on {name}");
        }
    }
}

/// The run core is driven from routes, tools, other runs and remote agents alike: it names no
/// HTTP server type (direct dependencies and source), so only the edge turns its errors into
/// statuses. Its one outbound HTTP call, the chat-event webhook, goes through reqwest's client
/// (as agw-llm's provider calls do) and names no `http::` type either.
#[test]
fn the_run_core_depends_on_no_http_crate() {
    let meta = metadata();
    let (_, runs) = packages(&meta).into_iter().find(|(n, _)| n == "agw-runs").expect("agw-runs");
    let forbidden = ["hyper", "hyper-util", "http", "http-body", "http-body-util", "axum", "tower"];
    for dep in runs["dependencies"].as_array().into_iter().flatten() {
        let name = dep["name"].as_str().unwrap_or_default();
        assert!(!forbidden.contains(&name), "agw-runs must not depend on {name}");
    }
    let src = agw_tidy::workspace_root().join("crates/agw-runs/src");
    for entry in std::fs::read_dir(&src).expect("crates/agw-runs/src") {
        let path = entry.expect("a source file").path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for name in ["hyper::", "http::", "axum::", "agw_http::"] {
            assert!(!text.contains(name), "{} names {name}", path.display());
        }
    }
}

/// Storing conversations needs no provider client.
#[test]
fn memory_does_not_depend_on_the_provider_client() {
    let meta = metadata();
    let (_, memory) = packages(&meta).into_iter().find(|(n, _)| n == "agw-memory").expect("agw-memory");
    for dep in memory["dependencies"].as_array().into_iter().flatten() {
        let name = dep["name"].as_str().unwrap_or_default();
        assert!(!["agw-llm", "async-openai", "reqwest", "hyper"].contains(&name), "agw-memory depends on {name}");
    }
}
