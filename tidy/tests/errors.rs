//! No `Result<_, String>` across module boundaries (issue 33): a function visible outside its
//! module (`pub`, `pub(crate)`, `pub(super)`, `pub(in …)`, async or not) returns a typed error —
//! a `thiserror` enum or a small error struct named for what failed — whose `Display` gives the
//! text where a message is needed. A `String` error tells the caller nothing it can act on, and
//! the text gets re-wrapped at every layer. Private helpers may still build a message for their
//! own module; test code (`tests.rs`, `tests/` under `src/`, `#[cfg(test)]` items and the files
//! of `#[cfg(test)] mod name;`) is not checked.

use std::path::{Path, PathBuf};

use agw_tidy::{metadata, packages, rust_files, visible_fns, workspace_root};

/// Visible functions that may still return `Result<…, String>`, as `(file from the workspace
/// root, function, why)`. Each entry is a debt to pay back; an entry that no longer matches fails
/// the test, so the list only shrinks. Empty: every one has a typed error.
const ALLOWED: &[(&str, &str, &str)] = &[];

/// Each workspace package's `src/`.
fn source_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = packages(&metadata())
        .into_iter()
        .filter_map(|(_, package)| {
            let manifest = Path::new(package["manifest_path"].as_str()?);
            Some(manifest.parent()?.join("src"))
        })
        .filter(|src| src.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The directory a file's child modules live in (`a/lib.rs`, `a/mod.rs` → `a/`; `a/b.rs` → `a/b/`).
fn child_module_dir(file: &Path) -> PathBuf {
    let parent = file.parent().map(Path::to_path_buf).unwrap_or_default();
    match file.file_name().and_then(|n| n.to_str()) {
        Some("lib.rs" | "main.rs" | "mod.rs") => parent,
        _ => parent.join(file.file_stem().unwrap_or_default()),
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(workspace_root()).unwrap_or(path).display().to_string()
}

/// `(file, line, function, return type)` of every visible function returning `Result<…, String>`
/// outside test code.
fn string_errors() -> Vec<(String, usize, String, String)> {
    let mut found = Vec::new();
    for src in source_dirs() {
        let files = rust_files(&src);
        let scans: Vec<_> =
            files.iter().map(|file| visible_fns(&std::fs::read_to_string(file).unwrap_or_default())).collect();
        // Files of `#[cfg(test)] mod name;` (and their submodules) are test code.
        let test_roots: Vec<PathBuf> = files
            .iter()
            .zip(&scans)
            .flat_map(|(file, scan)| scan.test_modules.iter().map(move |name| child_module_dir(file).join(name)))
            .collect();
        for (file, scan) in files.iter().zip(scans) {
            let inside_src = file.strip_prefix(&src).unwrap_or(file);
            let test_file = file.file_name().is_some_and(|n| n == "tests.rs")
                || inside_src.components().any(|c| c.as_os_str() == "tests")
                || test_roots.iter().any(|root| file.starts_with(root) || *file == root.with_extension("rs"));
            if test_file {
                continue;
            }
            for function in scan.fns.into_iter().filter(|f| f.string_error) {
                found.push((relative(file), function.line, function.name, function.returns));
            }
        }
    }
    found
}

#[test]
fn no_visible_function_returns_a_string_error() {
    let found = string_errors();
    let allowed = |file: &str, name: &str| ALLOWED.iter().any(|(f, n, _)| *f == file && *n == name);
    let offending: Vec<String> = found
        .iter()
        .filter(|(file, _, name, _)| !allowed(file, name))
        .map(|(file, line, name, returns)| format!("{file}:{line}: fn {name} -> {returns}"))
        .collect();
    assert!(
        offending.is_empty(),
        "visible functions returning Result<_, String> (return a typed error whose Display is the message; \
         see issue 33):\n{}",
        offending.join("\n")
    );
    let stale: Vec<String> = ALLOWED
        .iter()
        .filter(|(file, name, _)| !found.iter().any(|(f, _, n, _)| f == file && n == name))
        .map(|(file, name, _)| format!("{file}: fn {name}"))
        .collect();
    assert!(stale.is_empty(), "allowed String errors that are gone; remove them from ALLOWED:\n{}", stale.join("\n"));
}

/// The scan itself: what it must find and what it must leave alone, so that the check above
/// cannot pass by seeing nothing.
#[test]
fn the_scan_finds_string_errors_in_visible_signatures_only() {
    let source = r##"
pub fn plain() -> Result<(), String> { Ok(()) }
pub(crate) async fn multi_line(
    x: u8,
) -> Result<Vec<String>, String> {
    Ok(Vec::new())
}
pub(super) fn boxed() -> BoxFuture<'static, Result<u8, String>> { todo!() }
pub(in crate::a) fn generic<T>() -> Result<T, String> where T: Default { Ok(T::default()) }
pub fn std_path() -> Result<u8, std::string::String> { Ok(1) }
pub fn closure_argument(f: impl Fn(&str) -> Result<u8, String>) -> Result<u8, Typed> { f("") }
pub fn map_of_strings() -> Result<BTreeMap<String, String>, Typed> { todo!() }
pub fn string_value() -> Result<String, Typed> { todo!() }
fn private() -> Result<(), String> { Ok(()) }
pub(self) fn also_private() -> Result<(), String> { Ok(()) }
// pub fn in_a_comment() -> Result<(), String>
const TEXT: &str = "pub fn in_a_string() -> Result<(), String> {";
const RAW: &str = r#"pub fn in_a_raw_string() -> Result<(), String> {"#;
#[cfg(test)]
fn brace_literal() -> char { '{' }
#[cfg(test)]
pub fn test_helper() -> Result<(), String> { Ok(()) }
#[cfg(test)]
mod tests {
    pub fn inside_tests() -> Result<(), String> { Ok(()) }
}
#[cfg(test)]
mod helpers;
impl Thing {
    #[cfg(test)]
    pub(crate) fn test_only_method(&self) -> Result<(), String> { Ok(()) }
    pub fn after_the_test_items(&self) -> Result<(), String> { Ok(()) }
}
"##;
    let scan = visible_fns(source);
    let flagged: Vec<&str> = scan.fns.iter().filter(|f| f.string_error).map(|f| f.name.as_str()).collect();
    assert_eq!(flagged, ["plain", "multi_line", "boxed", "generic", "std_path", "after_the_test_items"]);
    let names: Vec<&str> = scan.fns.iter().map(|f| f.name.as_str()).collect();
    for unseen in ["private", "also_private", "in_a_comment", "in_a_string", "in_a_raw_string", "test_helper"] {
        assert!(!names.contains(&unseen), "{unseen} was taken for a visible function");
    }
    assert!(!names.contains(&"inside_tests") && !names.contains(&"test_only_method"));
    assert_eq!(scan.test_modules, ["helpers"]);
    assert_eq!(scan.fns.iter().find(|f| f.name == "multi_line").map(|f| f.line), Some(3));
}
