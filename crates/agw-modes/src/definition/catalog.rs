//! The set of agents loaded from a directory or from embedded sources (docs/contract/agent-definitions.md §1).
//! A catalog is an immutable snapshot: reloading builds a new one, so a reader never sees a half
//! loaded directory.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::agent::AgentDefinition;

/// A file that did not become an agent, and why (the one type for every skipped file).
pub use agw_tools::LoadProblem;

/// Agents by key, plus the files that were skipped.
#[derive(Debug, Clone, Default)]
pub struct AgentCatalog {
    agents: BTreeMap<String, Arc<AgentDefinition>>,
    problems: Vec<LoadProblem>,
}

/// One candidate file: its bare name (for the key and description), where it came from (for
/// messages) and its text, or why it could not be read.
struct Source {
    file_name: String,
    origin: String,
    text: Result<String, String>,
}

impl AgentCatalog {
    /// Loads every regular file directly in `dir` whose name ends with `.json` (case-sensitive),
    /// in ascending name order. A missing or unreadable directory yields an empty catalog.
    pub fn load_dir(dir: &Path) -> AgentCatalog {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "agents directory not readable; no agents loaded");
                return AgentCatalog::default();
            }
        };
        let mut sources = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            // Non-UTF-8 names cannot be agent keys; they are not `.json` files for our purposes.
            let Some(file_name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            // `metadata` follows symlinks, so a link to a regular file counts like the file.
            let is_file = std::fs::metadata(&path).is_ok_and(|m| m.is_file());
            if !is_file || !file_name.ends_with(".json") {
                continue;
            }
            sources.push(Source {
                text: std::fs::read_to_string(&path).map_err(|e| format!("cannot read file: {e}")),
                origin: path.display().to_string(),
                file_name,
            });
        }
        Self::build(sources)
    }

    /// Same rules as [`Self::load_dir`] over `(file name, text)` pairs, e.g. the built-in agents.
    pub fn from_sources(sources: impl IntoIterator<Item = (String, String)>) -> AgentCatalog {
        let sources = sources
            .into_iter()
            .filter(|(name, _)| name.ends_with(".json"))
            .map(|(file_name, text)| Source { origin: file_name.clone(), file_name, text: Ok(text) })
            .collect();
        Self::build(sources)
    }

    fn build(mut sources: Vec<Source>) -> AgentCatalog {
        sources.sort_by(|a, b| a.file_name.cmp(&b.file_name));
        let mut catalog = AgentCatalog::default();
        for source in sources {
            let parsed = source
                .text
                .and_then(|text| AgentDefinition::from_json(&source.file_name, &text).map_err(|e| e.to_string()));
            match parsed {
                Ok(mut definition) => {
                    definition.source_file = source.origin.clone();
                    catalog.insert(definition, source.origin);
                }
                Err(message) => catalog.problem(source.origin, message),
            }
        }
        catalog
    }

    /// First file wins: name order is the only deterministic tie-break a user can control.
    fn insert(&mut self, definition: AgentDefinition, origin: String) {
        if let Some(existing) = self.agents.get(&definition.key) {
            let message =
                format!("duplicate agent key \"{}\" (already defined by {})", definition.key, existing.source_file);
            self.problem(origin, message);
        } else {
            self.agents.insert(definition.key.clone(), Arc::new(definition));
        }
    }

    fn problem(&mut self, file: String, message: String) {
        tracing::warn!(file = %file, "skipping agent definition: {message}");
        self.problems.push(LoadProblem { file, message });
    }

    /// The agent with exactly this key (case-sensitive).
    pub fn get(&self, key: &str) -> Option<Arc<AgentDefinition>> {
        self.agents.get(key).cloned()
    }

    /// Agent keys in ascending order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.agents.keys().map(String::as_str)
    }

    /// Agents in ascending key order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<AgentDefinition>> {
        self.agents.values()
    }

    /// How many agents loaded.
    pub fn len(&self) -> usize {
        self.agents.len()
    }

    /// No agent loaded (files may still have been skipped).
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }

    /// Skipped files, in the order they were processed.
    pub fn problems(&self) -> &[LoadProblem] {
        &self.problems
    }
}
