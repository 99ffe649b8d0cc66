//! Every library crate can be published and embedded on its own: complete metadata, crate docs
//! that say what it owns and must never do, and no file included from outside its directory.

use std::path::{Path, PathBuf};

use agw_tidy::{metadata, packages, workspace_root};

/// Packages that are published (everything without `publish = false`).
fn published() -> Vec<(String, serde_json::Value)> {
    packages(&metadata()).into_iter().filter(|(_, p)| p["publish"].as_array().is_none_or(|a| !a.is_empty())).collect()
}

fn crate_dir(package: &serde_json::Value) -> PathBuf {
    Path::new(package["manifest_path"].as_str().unwrap_or_default()).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_library_crates_are_the_published_ones() {
    let mut names: Vec<String> = published().into_iter().map(|(n, _)| n).collect();
    names.sort();
    let expected = [
        "agw",
        "agw-a2a",
        "agw-cluster",
        "agw-demo",
        "agw-eval",
        "agw-guard",
        "agw-http",
        "agw-llm",
        "agw-mcp",
        "agw-memory",
        "agw-modes",
        "agw-protocol",
        "agw-runs",
        "agw-skills",
        "agw-testkit",
        "agw-tools",
    ];
    assert_eq!(names, expected);
}

#[test]
fn published_crates_have_complete_metadata() {
    for (name, package) in published() {
        for field in ["description", "license", "repository"] {
            let value = package[field].as_str().unwrap_or_default();
            assert!(!value.trim().is_empty(), "{name}: `{field}` is missing");
        }
        for field in ["keywords", "categories"] {
            let n = package[field].as_array().map_or(0, Vec::len);
            assert!((1..=5).contains(&n), "{name}: `{field}` needs 1–5 entries, has {n}");
        }
    }
}

#[test]
fn library_crate_docs_say_what_they_own_and_must_never_do() {
    for (name, package) in published().into_iter().filter(|(n, _)| n != "agw") {
        let lib = crate_dir(&package).join("src/lib.rs");
        let text = std::fs::read_to_string(&lib).unwrap_or_default();
        let docs: String =
            text.lines().take_while(|l| l.starts_with("//!") || l.is_empty()).collect::<Vec<_>>().join("\n");
        assert!(docs.contains("Owns:"), "{name}: crate docs lack an `Owns:` paragraph");
        assert!(docs.contains("Must never"), "{name}: crate docs lack a `Must never` paragraph");
    }
}

/// `include_str!`/`include_bytes!` of a file outside the crate would build here but not from
/// the published package.
#[test]
fn no_crate_includes_files_from_outside_its_directory() {
    let mut offenders = Vec::new();
    for (name, package) in published() {
        let dir = crate_dir(&package).canonicalize().unwrap_or_default();
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for (i, _) in text.match_indices("include_") {
                let rest = &text[i..];
                let Some(open) = rest.find("!(\"") else { continue };
                if !(rest.starts_with("include_str!") || rest.starts_with("include_bytes!")) {
                    continue;
                }
                let start = open + 3;
                let Some(len) = rest[start..].find('"') else { continue };
                let included = file.parent().unwrap_or(Path::new("")).join(&rest[start..start + len]);
                match included.canonicalize() {
                    Ok(path) if path.starts_with(&dir) => {}
                    _ => offenders.push(format!("{name}: {} includes {}", file.display(), included.display())),
                }
            }
        }
    }
    assert!(offenders.is_empty(), "files included from outside their crate:\n{}", offenders.join("\n"));
    assert!(workspace_root().join("Cargo.toml").exists());
}
