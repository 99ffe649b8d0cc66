//! agw-tidy — checks of the workspace itself, run by `cargo test` (like rust-analyzer's tidy
//! tests): the dependency graph between agw's crates points downward only, every library crate
//! is ready to publish, and says in its crate docs what it owns and what it must never do, and no
//! function visible outside its module returns a `String` error.
//!
//! The checks live in `tests/`; this library reads `cargo metadata` and the sources (module
//! imports, the signatures of visible functions).

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

/// `text` with comments and the contents of string and character literals blanked out (spaces,
/// line breaks kept), so that braces, `fn` and `#[cfg(test)]` found in it are code. Lifetimes
/// (`'a`) are kept; string literals keep their quotes.
pub fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r')))
            && !ident_before
            && matches!(chars.get(i + 1 + usize::from(c == 'b')), Some('"' | '#'))
        {
            // A raw string `r#"…"#` (or `br…`), or a raw identifier `r#name`.
            let start = i + 1 + usize::from(c == 'b');
            let hashes = chars[start..].iter().take_while(|&&h| h == '#').count();
            if chars.get(start + hashes) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            out.extend(&chars[i..=start + hashes]);
            i = start + hashes + 1;
            while i < chars.len() {
                if chars[i] == '"' && chars[i + 1..].iter().take(hashes).filter(|&&h| h == '#').count() == hashes {
                    out.push('"');
                    out.extend(std::iter::repeat_n('#', hashes));
                    i += 1 + hashes;
                    break;
                }
                out.push(blank(chars[i]));
                i += 1;
            }
        } else if c == '"' {
            i = blank_quoted(&chars, i, '"', &mut out);
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal (a lifetime has no closing quote right after one character).
            i = blank_quoted(&chars, i, '\'', &mut out);
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// What a character of a blanked literal or comment becomes: a space, or itself if a newline
/// (line numbers stay right).
fn blank(c: char) -> char {
    if c == '\n' { '\n' } else { ' ' }
}

/// A string or character literal opening at `chars[start]` (`quote`), copied to `out` with its
/// quotes kept and its contents blanked (escapes included); the index after its closing quote.
fn blank_quoted(chars: &[char], start: usize, quote: char, out: &mut String) -> usize {
    out.push(quote);
    let mut i = start + 1;
    while i < chars.len() && chars[i] != quote {
        if chars[i] == '\\' {
            out.push(' ');
            i += 1;
        }
        if let Some(&c) = chars.get(i) {
            out.push(blank(c));
        }
        i += 1;
    }
    if i < chars.len() {
        out.push(quote);
        i += 1;
    }
    i
}

/// A function declared with a visibility (`pub`, `pub(crate)`, `pub(super)`, `pub(in …)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VisibleFn {
    /// The line of `pub` (1-based).
    pub line: usize,
    /// The function's name.
    pub name: String,
    /// Its return type, tokens joined by spaces (`Result < Vec < String > , String >`); empty for `()`.
    pub returns: String,
    /// The return type mentions `Result<…, String>` (at any depth: `BoxFuture<Result<_, String>>`).
    pub string_error: bool,
}

/// What [`visible_fns`] found in one file.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct FnScan {
    /// The functions with a visibility other than `pub(self)`, outside `#[cfg(test)]` items.
    pub fns: Vec<VisibleFn>,
    /// Modules declared `#[cfg(test)] mod name;` (their files are test code).
    pub test_modules: Vec<String>,
}

/// The functions of a Rust source file that are visible outside their module, skipping every
/// item marked `#[cfg(test)]` (test modules, test-only helpers).
pub fn visible_fns(text: &str) -> FnScan {
    let tokens = tokens(&code_only(text));
    let mut scan = FnScan::default();
    let mut i = 0;
    while i < tokens.len() {
        let at = |k: usize| tokens.get(k).map_or("", |(t, _)| t.as_str());
        if at(i) == "#" && (i + 1..i + 7).map(at).eq(["[", "cfg", "(", "test", ")", "]"]) {
            let (end, module) = skip_item(&tokens, i + 7);
            scan.test_modules.extend(module);
            i = end;
            continue;
        }
        if at(i) != "pub" {
            i += 1;
            continue;
        }
        let line = tokens[i].1;
        let mut k = i + 1;
        if at(k) == "(" {
            let private = at(k + 1) == "self";
            while k < tokens.len() && at(k) != ")" {
                k += 1;
            }
            k += 1;
            if private {
                i = k;
                continue;
            }
        }
        while matches!(at(k), "const" | "async" | "unsafe" | "extern" | "default") || at(k).starts_with('"') {
            k += 1;
        }
        if at(k) != "fn" {
            i = k.max(i + 1);
            continue;
        }
        let name = at(k + 1).to_owned();
        // The signature runs to the body or the `;` of a declaration; the return type follows the
        // first `->` outside parentheses and angle brackets.
        let (mut parens, mut angles) = (0i32, 0i32);
        let mut returns: Option<Vec<&str>> = None;
        k += 2;
        while k < tokens.len() {
            let token = at(k);
            if parens == 0 && angles == 0 && (token == "{" || token == ";") {
                break;
            }
            match token {
                "(" | "[" => parens += 1,
                ")" | "]" => parens -= 1,
                "<" => angles += 1,
                ">" => angles -= 1,
                _ => {}
            }
            if let Some(returns) = returns.as_mut() {
                if token == "where" && angles == 0 && parens == 0 {
                    break;
                }
                returns.push(token);
            } else if token == "->" && parens == 0 && angles == 0 {
                returns = Some(Vec::new());
            }
            k += 1;
        }
        let returns = returns.unwrap_or_default();
        let string_error = mentions_string_error(&returns);
        scan.fns.push(VisibleFn { line, name, returns: returns.join(" "), string_error });
        i = k;
    }
    scan
}

/// Whether `tokens` (a type) contain `Result<…, String>`.
fn mentions_string_error(tokens: &[&str]) -> bool {
    (0..tokens.len()).any(|start| {
        if tokens[start] != "Result" || tokens.get(start + 1) != Some(&"<") {
            return false;
        }
        let mut depth = 0i32;
        let mut last_arg: Vec<&str> = Vec::new();
        for &token in &tokens[start + 1..] {
            match token {
                "<" | "(" | "[" => depth += 1,
                ">" | ")" | "]" => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                break;
            }
            if depth == 1 && token == "," {
                last_arg.clear();
            } else if !(depth == 1 && token == "<") {
                last_arg.push(token);
            }
        }
        let last_arg = last_arg.concat();
        matches!(last_arg.as_str(), "String" | "std::string::String" | "alloc::string::String")
    })
}

/// Skips the item an attribute applies to, from `start` (after the attribute): further
/// attributes, then up to its `;`, its body's closing brace, or the `,` or closing bracket that
/// ends a field, variant or argument. Returns where the next item starts, and the module's name
/// when the item is `mod name;`.
fn skip_item(tokens: &[(String, usize)], start: usize) -> (usize, Option<String>) {
    let at = |k: usize| tokens.get(k).map_or("", |(t, _)| t.as_str());
    let mut k = start;
    while at(k) == "#" && at(k + 1) == "[" {
        let mut depth = 0;
        k += 1;
        while k < tokens.len() {
            match at(k) {
                "[" => depth += 1,
                "]" => depth -= 1,
                _ => {}
            }
            k += 1;
            if depth == 0 {
                break;
            }
        }
    }
    let first = k;
    let mut depth = 0i32;
    while k < tokens.len() {
        match at(k) {
            "(" | "[" => depth += 1,
            ")" | "]" | "}" if depth == 0 => return (k, None),
            ")" | "]" => depth -= 1,
            "," if depth == 0 => return (k + 1, None),
            ";" if depth == 0 => {
                let module = (k >= first + 2 && at(k - 2) == "mod").then(|| at(k - 1).to_owned());
                return (k + 1, module);
            }
            "{" if depth == 0 => {
                let mut braces = 0i32;
                while k < tokens.len() {
                    match at(k) {
                        "{" => braces += 1,
                        "}" => braces -= 1,
                        _ => {}
                    }
                    k += 1;
                    if braces == 0 {
                        return (k, None);
                    }
                }
            }
            _ => {}
        }
        k += 1;
    }
    (k, None)
}

/// Tokens of code (see [`code_only`]) with their lines: identifiers and numbers, string literals
/// (as `""`), `->`, `::`, and single punctuation characters.
fn tokens(code: &str) -> Vec<(String, usize)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((chars[start..i].iter().collect(), line));
        } else if c == '"' {
            let start_line = line;
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                line += usize::from(chars[i] == '\n');
                i += 1;
            }
            i += 1;
            out.push(("\"\"".to_owned(), start_line));
        } else if (c == '-' && chars.get(i + 1) == Some(&'>')) || (c == ':' && chars.get(i + 1) == Some(&':')) {
            out.push((chars[i..i + 2].iter().collect(), line));
            i += 2;
        } else {
            out.push((c.to_string(), line));
            i += 1;
        }
    }
    out
}
