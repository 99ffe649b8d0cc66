//! The tool registry: definition files merged with the built-in implementations (§2, §2.1).
//! A registry is an immutable snapshot; a reload builds a new one.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::definition::{ToolDef, ToolKind, normalize_parameters, parse_file};
use crate::dirscan::{SourceFile, scan};
use crate::exec::{BackendOutcome, error_result, execute_backend};
use crate::tool::{Tool, ToolContext};

/// A file that was skipped while loading a directory of definitions — tools, viewports, MCP
/// servers, agents (agw-modes), skills (agw-skills) — and why. Loading never fails on one file:
/// the others still load, and the problems are logged and listed by `agw check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadProblem {
    /// Path (directory loads) or name (embedded sources) of the file.
    pub file: String,
    /// Why it was skipped, for people (one line).
    pub message: String,
}

impl std::fmt::Display for LoadProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.message)
    }
}

/// Tools by name: what the model may call, how each call is executed, and what went wrong loading.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    /// The listing (§2.1): built-ins sorted by name, then definitions without an implementation.
    tools: Vec<ToolDef>,
    index: HashMap<String, usize>,
    /// Every surviving definition, including ACTION/FRONTEND ones hidden by a built-in of the same
    /// name: type lookups see them (§2.1).
    definitions: HashMap<String, ToolKind>,
    implementations: BTreeMap<String, Arc<dyn Tool>>,
    problems: Vec<LoadProblem>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.tools.iter().map(|t| &t.name).collect::<Vec<_>>())
            .field("problems", &self.problems)
            .finish()
    }
}

/// One definition and the file it came from.
struct Sourced {
    def: ToolDef,
    origin: String,
}

impl ToolRegistry {
    /// Loads the definition files directly in `dir` (`*.backend`, `*.frontend`, `*.action`, suffix
    /// case-insensitive, name order) and merges them with `builtins`. `None` or a missing
    /// directory means built-ins only.
    pub fn load(dir: Option<&Path>, builtins: Vec<Arc<dyn Tool>>) -> ToolRegistry {
        let sources = dir.map(|dir| scan(dir, |name| ToolKind::from_file_name(name).is_some())).unwrap_or_default();
        Self::build(sources, builtins)
    }

    /// The built-in implementations this registry was built with (to rebuild it on reload).
    pub fn builtins(&self) -> Vec<Arc<dyn Tool>> {
        self.implementations.values().cloned().collect()
    }

    /// Same rules as [`Self::load`] over `(file name, text)` pairs, e.g. the bundled definitions.
    pub fn from_sources<N, T>(sources: impl IntoIterator<Item = (N, T)>, builtins: Vec<Arc<dyn Tool>>) -> ToolRegistry
    where
        N: Into<String>,
        T: Into<String>,
    {
        let mut sources: Vec<SourceFile> = sources
            .into_iter()
            .map(|(name, text)| {
                let file_name: String = name.into();
                SourceFile { origin: file_name.clone(), file_name, text: Ok(text.into()) }
            })
            .filter(|s| !s.file_name.starts_with('.') && ToolKind::from_file_name(&s.file_name).is_some())
            .collect();
        sources.sort_by(|a, b| a.file_name.cmp(&b.file_name));
        Self::build(sources, builtins)
    }

    fn build(sources: Vec<SourceFile>, builtins: Vec<Arc<dyn Tool>>) -> ToolRegistry {
        let mut registry = ToolRegistry::default();
        let mut found = Vec::new();
        for source in sources {
            let Some(kind) = ToolKind::from_file_name(&source.file_name) else { continue };
            let parsed = match source.text {
                Ok(text) => parse_file(kind, &source.file_name, &text).map_err(|e| e.to_string()),
                Err(message) => Err(message),
            };
            match parsed {
                Ok(parsed) => {
                    for message in parsed.skipped {
                        registry.problem(&source.origin, message);
                    }
                    found.extend(parsed.defs.into_iter().map(|def| Sourced { def, origin: source.origin.clone() }));
                }
                Err(message) => registry.problem(&source.origin, format!("file skipped: {message}")),
            }
        }
        let definitions = registry.drop_conflicts(found);

        for tool in builtins {
            let name = tool.name().trim().to_lowercase();
            if registry.implementations.insert(name.clone(), tool).is_some() {
                tracing::warn!(tool = %name, "two built-in implementations share a name; the last one is used");
            }
        }
        registry.merge(definitions);
        registry
    }

    /// Conflict policy (§2): a name defined more than once, in any files and kinds, loses every
    /// definition. Definitions come back sorted by name.
    fn drop_conflicts(&mut self, found: Vec<Sourced>) -> BTreeMap<String, Sourced> {
        let mut by_name: BTreeMap<String, Vec<Sourced>> = BTreeMap::new();
        for sourced in found {
            by_name.entry(sourced.def.name.clone()).or_default().push(sourced);
        }
        let mut unique = BTreeMap::new();
        for (name, mut all) in by_name {
            if all.len() == 1 {
                if let Some(only) = all.pop() {
                    unique.insert(name, only);
                }
                continue;
            }
            let files: Vec<&str> = all.iter().map(|s| s.origin.as_str()).collect();
            let message = format!(
                "tool \"{name}\" is defined more than once ({}); all its definitions are dropped",
                files.join(", ")
            );
            for sourced in &all {
                self.problem(&sourced.origin, message.clone());
            }
        }
        unique
    }

    /// Listing order (§2.1): built-in implementations sorted by name, then definitions sorted by
    /// name.
    fn merge(&mut self, mut definitions: BTreeMap<String, Sourced>) {
        for (name, tool) in &self.implementations {
            let def = match definitions.get(name) {
                Some(sourced) if sourced.def.kind == ToolKind::Backend => {
                    let mut def = sourced.def.clone();
                    if def.after_call_hint.is_empty() {
                        def.after_call_hint = tool.after_call_hint().trim().to_owned();
                    }
                    def
                }
                // An ACTION/FRONTEND definition named like a built-in stays out of the listing;
                // type lookups still see it.
                _ => builtin_def(name.clone(), tool.as_ref()),
            };
            self.tools.push(def);
        }
        let mut unimplemented = Vec::new();
        for (name, sourced) in &definitions {
            if self.implementations.contains_key(name) {
                continue;
            }
            if sourced.def.kind == ToolKind::Backend {
                // No plugin mechanism: a backend definition needs a built-in to run it (§1).
                unimplemented.push(name.clone());
                self.problem(
                    &sourced.origin,
                    format!("backend tool \"{name}\" has no built-in implementation; skipped"),
                );
                continue;
            }
            self.tools.push(sourced.def.clone());
        }
        for name in unimplemented {
            definitions.remove(&name);
        }
        self.definitions = definitions.into_iter().map(|(name, sourced)| (name, sourced.def.kind)).collect();
        self.index = self.tools.iter().enumerate().map(|(i, def)| (def.name.clone(), i)).collect();
    }

    fn problem(&mut self, file: &str, message: String) {
        tracing::warn!(file = %file, "tool definition problem: {message}");
        self.problems.push(LoadProblem { file: file.to_owned(), message });
    }

    /// The listed tool with this name (trimmed, case-insensitive).
    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.index.get(&normalize_name(name)).map(|&i| &self.tools[i])
    }

    /// How a call to `name` is executed (§2.1): a surviving definition decides (even one hidden
    /// from the listing by a built-in), else a built-in is a backend tool, else an unknown name is
    /// treated as a backend tool (its execution then fails with `Unknown tool`).
    pub fn kind_of(&self, name: &str) -> ToolKind {
        self.definitions.get(&normalize_name(name)).copied().unwrap_or(ToolKind::Backend)
    }

    /// A call to `name` may run again after a crash (`idempotent` in its definition, or its
    /// implementation says so: the read-only built-ins, MCP tools annotated idempotent or
    /// read-only).
    pub fn is_idempotent(&self, name: &str) -> bool {
        self.get(name).is_some_and(|def| def.idempotent) || self.implementation(name).is_some_and(|t| t.idempotent())
    }

    /// The built-in implementation for `name` (trimmed, case-insensitive).
    pub fn implementation(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.implementations.get(&normalize_name(name)).cloned()
    }

    /// Runs the built-in implementation of `name` with [`execute_backend`]'s timeout and retry
    /// rules; a name without one answers `Unknown tool: <name>` (§5.3). Only for calls whose kind
    /// is [`ToolKind::Backend`]: actions and frontend tools are answered by the modes.
    pub async fn execute(
        &self,
        name: &str,
        args: Value,
        ctx: &ToolContext,
        timeout: Duration,
        retries: u32,
    ) -> BackendOutcome {
        match self.implementation(name) {
            Some(tool) => execute_backend(tool.as_ref(), args, ctx, timeout, retries).await,
            None => BackendOutcome::Result(error_result(name, &format!("Unknown tool: {name}"))),
        }
    }

    /// A copy of this registry with `tools` added as frontend tools for one run (tools a client
    /// declares, e.g. AG-UI's `RunAgentInput.tools`): a name the registry already knows, or one
    /// that is not a valid tool name, is skipped. Returns the copy and the names added.
    pub fn with_client_tools(&self, tools: Vec<ToolDef>) -> (ToolRegistry, Vec<String>) {
        let mut registry = self.clone();
        let mut added = Vec::new();
        for mut def in tools {
            def.name = normalize_name(&def.name);
            let valid = !def.name.is_empty()
                && def.name.len() <= 64
                && def.name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !valid || registry.definitions.contains_key(&def.name) || registry.index.contains_key(&def.name) {
                tracing::warn!(tool = %def.name, "client tool skipped: invalid name or taken by a registered tool");
                continue;
            }
            def.kind = ToolKind::Frontend;
            def.parameters = normalize_parameters(Some(&def.parameters));
            registry.definitions.insert(def.name.clone(), ToolKind::Frontend);
            registry.index.insert(def.name.clone(), registry.tools.len());
            added.push(def.name.clone());
            registry.tools.push(def);
        }
        (registry, added)
    }

    /// A copy of this registry whose backend tools named `prefix…` are exactly `tools` (the
    /// previous ones of that namespace removed): how tools that come and go at run time (an MCP
    /// server's, prefix `mcp__`) join the file-defined and built-in ones. A tool outside the
    /// namespace, or one whose name is taken, is skipped with a warning.
    pub fn with_namespace(&self, prefix: &str, tools: Vec<Arc<dyn Tool>>) -> ToolRegistry {
        let mut registry = self.clone();
        registry.implementations.retain(|name, _| !name.starts_with(prefix));
        registry.definitions.retain(|name, _| !name.starts_with(prefix));
        registry.tools.retain(|def| !def.name.starts_with(prefix));
        for tool in tools {
            let name = normalize_name(tool.name());
            if !name.starts_with(prefix) || registry.implementations.contains_key(&name) {
                tracing::warn!(tool = %name, "namespaced tool skipped: outside {prefix} or a duplicate");
                continue;
            }
            registry.tools.push(builtin_def(name.clone(), tool.as_ref()));
            registry.implementations.insert(name, tool);
        }
        registry.index = registry.tools.iter().enumerate().map(|(i, def)| (def.name.clone(), i)).collect();
        registry
    }

    /// Every listed tool in listing order (§2.1).
    pub fn list(&self) -> &[ToolDef] {
        &self.tools
    }

    /// Files, entries and names that were skipped, in the order they were met.
    pub fn problems(&self) -> &[LoadProblem] {
        &self.problems
    }
}

/// The listing of an implementation no definition file describes: a backend tool with the
/// implementation's own description, hint and parameters.
fn builtin_def(name: String, tool: &dyn Tool) -> ToolDef {
    ToolDef {
        name,
        description: tool.description().trim().to_owned(),
        after_call_hint: tool.after_call_hint().trim().to_owned(),
        parameters: normalize_parameters(Some(&tool.parameters())),
        kind: ToolKind::Backend,
        tool_api: None,
        viewport_key: None,
        citations: None,
        idempotent: false,
    }
}

fn normalize_name(name: &str) -> String {
    name.trim().to_lowercase()
}
