//! The module structure inside the crates: in no library crate do two modules import each other
//! (directly or through others), and in the HTTP crate only the protocol modules act on runs.

use agw_tidy::{circles, module_graph, rust_files, top_module, workspace_root};

/// A circle of imports makes every module in it depend on all the others: none can be read,
/// tested or moved alone. Checked on the top-level modules of each library crate.
#[test]
fn no_library_crate_has_a_circle_of_module_imports() {
    let crates = workspace_root().join("crates");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("crates/").flatten() {
        let src = entry.path().join("src");
        if !src.join("lib.rs").exists() {
            continue;
        }
        for circle in circles(&module_graph(&src)) {
            found.push(format!("{}: {}", entry.file_name().to_string_lossy(), circle.join(" ⇄ ")));
        }
    }
    found.sort();
    assert!(found.is_empty(), "modules that import each other in a circle:\n{}", found.join("\n"));
}

/// agw-http is the edge: the modules that decode a protocol's requests (the routes, the MCP
/// server) call the run service; the rest of the edge (auth, CORS, hosts, limits, bodies,
/// envelopes, config) never acts on a run — `state` holds the service and `gateway` starts and
/// stops it.
#[test]
fn only_the_protocol_modules_of_the_edge_act_on_runs() {
    let src = workspace_root().join("crates/agw-http/src");
    let allowed = ["routes", "mcp_server", "state", "gateway", "lib"];
    let mut wrong = Vec::new();
    for file in rust_files(&src) {
        if allowed.contains(&top_module(&src, &file).as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains("state.runs.") || code.contains("RunService") {
                wrong.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(wrong.is_empty(), "modules outside the protocol layer acting on runs:\n{}", wrong.join("\n"));
}
