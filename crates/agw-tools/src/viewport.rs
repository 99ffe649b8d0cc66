//! Viewports: the UI fragments a client fetches to render a tool result or a frontend tool
//! (docs/contract/tools-skills-viewports.md §10). agw serves all five types the design names (README decision).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::dirscan::{SourceFile, scan};
use crate::registry::LoadProblem;

/// The type of a viewport, from its file suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ViewportKind {
    /// `.html`: an HTML fragment, kept as text.
    Html,
    /// `.qlc`: a JSON document.
    Qlc,
    /// `.dqlc`: a JSON document.
    Dqlc,
    /// `.json_schema`: a JSON Schema document.
    JsonSchema,
    /// `.custom`: client-defined text, kept as is.
    Custom,
}

/// Longest suffix first, so `x.json_schema` is never read as something shorter.
const SUFFIXES: [(&str, ViewportKind); 5] = [
    (".json_schema", ViewportKind::JsonSchema),
    (".custom", ViewportKind::Custom),
    (".html", ViewportKind::Html),
    (".dqlc", ViewportKind::Dqlc),
    (".qlc", ViewportKind::Qlc),
];

impl ViewportKind {
    /// The type name used by `GET /api/ap/viewport` and SSE `toolType`.
    pub fn viewport_type_str(self) -> &'static str {
        match self {
            ViewportKind::Html => "html",
            ViewportKind::Qlc => "qlc",
            ViewportKind::Dqlc => "dqlc",
            ViewportKind::JsonSchema => "json_schema",
            ViewportKind::Custom => "custom",
        }
    }

    /// The kind and the key (`file name minus suffix`, trimmed, lower-case) of a viewport file.
    pub fn split_file_name(file_name: &str) -> Option<(ViewportKind, String)> {
        let lower = file_name.to_ascii_lowercase();
        SUFFIXES.iter().find(|(suffix, _)| lower.ends_with(suffix)).and_then(|&(suffix, kind)| {
            let key = file_name.get(..file_name.len() - suffix.len())?.trim().to_lowercase();
            (!key.is_empty()).then_some((kind, key))
        })
    }

    /// Text types keep the file text; the others are JSON documents.
    fn is_text(self) -> bool {
        matches!(self, ViewportKind::Html | ViewportKind::Custom)
    }
}

/// What a viewport holds.
#[derive(Debug, Clone, PartialEq)]
pub enum ViewportPayload {
    /// `.html` / `.custom`: the file text, verbatim.
    Text(String),
    /// `.qlc` / `.dqlc` / `.json_schema`: the parsed JSON document.
    Json(Value),
}

/// One loaded viewport file.
#[derive(Debug, Clone, PartialEq)]
pub struct Viewport {
    /// The file name minus its suffix, trimmed, lower-case; what tools name as `viewportKey`.
    pub key: String,
    /// The type, from the file suffix.
    pub kind: ViewportKind,
    /// The content served; its variant follows `kind`.
    pub payload: ViewportPayload,
}

impl Viewport {
    /// The type name of [`Self::kind`], as used by `GET /api/ap/viewport` and SSE `toolType`.
    pub fn viewport_type_str(&self) -> &'static str {
        self.kind.viewport_type_str()
    }
}

/// Why a viewport file is unusable: a JSON kind (`.qlc`, `.dqlc`, `.json_schema`) whose text does
/// not parse. The display text is the reason reported for the file.
#[derive(Debug, thiserror::Error)]
#[error("invalid JSON: {0}")]
pub struct ViewportFileError(#[source] serde_json::Error);

/// Viewports by key; an immutable snapshot, rebuilt on reload.
#[derive(Debug, Clone, Default)]
pub struct ViewportRegistry {
    viewports: HashMap<String, Arc<Viewport>>,
    problems: Vec<LoadProblem>,
}

impl ViewportRegistry {
    /// Loads the viewport files directly in `dir` in name order; a missing directory gives an
    /// empty registry. Symlinks leading out of the directory are not followed.
    pub fn load(dir: &Path) -> ViewportRegistry {
        Self::build(scan(dir, |name| ViewportKind::split_file_name(name).is_some()))
    }

    /// Checks one viewport file on its own (JSON kinds must parse). Files with other suffixes
    /// always pass. Used by hot reload to keep serving a file's last good version.
    pub fn validate_file(file_name: &str, text: &str) -> Result<(), ViewportFileError> {
        match ViewportKind::split_file_name(file_name) {
            Some((kind, _)) if !kind.is_text() => {
                serde_json::from_str::<Value>(text).map(|_| ()).map_err(ViewportFileError)
            }
            _ => Ok(()),
        }
    }

    /// Same rules as [`Self::load`] over `(file name, text)` pairs, e.g. the bundled viewports.
    pub fn from_sources<N, T>(sources: impl IntoIterator<Item = (N, T)>) -> ViewportRegistry
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
            .filter(|s| !s.file_name.starts_with('.') && ViewportKind::split_file_name(&s.file_name).is_some())
            .collect();
        sources.sort_by(|a, b| a.file_name.cmp(&b.file_name));
        Self::build(sources)
    }

    fn build(sources: Vec<SourceFile>) -> ViewportRegistry {
        let mut registry = ViewportRegistry::default();
        for source in sources {
            let Some((kind, key)) = ViewportKind::split_file_name(&source.file_name) else { continue };
            let payload = source.text.and_then(|text| {
                if kind.is_text() {
                    Ok(ViewportPayload::Text(text))
                } else {
                    serde_json::from_str(&text).map(ViewportPayload::Json).map_err(|e| ViewportFileError(e).to_string())
                }
            });
            match payload {
                Err(message) => registry.problem(source.origin, message),
                // First file wins (name order), so `x.html` beats `x.qlc`.
                Ok(_) if registry.viewports.contains_key(&key) => {
                    registry.problem(source.origin, format!("duplicate viewport key \"{key}\"; the first file wins"))
                }
                Ok(payload) => {
                    registry.viewports.insert(key.clone(), Arc::new(Viewport { key, kind, payload }));
                }
            }
        }
        registry
    }

    fn problem(&mut self, file: String, message: String) {
        tracing::warn!(file = %file, "viewport skipped: {message}");
        self.problems.push(LoadProblem { file, message });
    }

    /// The viewport for `key` (trimmed, case-insensitive).
    pub fn get(&self, key: &str) -> Option<Arc<Viewport>> {
        self.viewports.get(&key.trim().to_lowercase()).cloned()
    }

    /// Registered keys, sorted.
    pub fn keys(&self) -> Vec<&str> {
        let mut keys: Vec<&str> = self.viewports.keys().map(String::as_str).collect();
        keys.sort_unstable();
        keys
    }

    /// How many viewports are registered.
    pub fn len(&self) -> usize {
        self.viewports.len()
    }

    /// No viewport is registered.
    pub fn is_empty(&self) -> bool {
        self.viewports.is_empty()
    }

    /// Files that were skipped, in the order they were met.
    pub fn problems(&self) -> &[LoadProblem] {
        &self.problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_and_keys() {
        let split = ViewportKind::split_file_name;
        assert_eq!(split("Weather_Card.HTML"), Some((ViewportKind::Html, "weather_card".into())));
        assert_eq!(split("f.qlc"), Some((ViewportKind::Qlc, "f".into())));
        assert_eq!(split("f.dqlc"), Some((ViewportKind::Dqlc, "f".into())));
        assert_eq!(split("f.Json_Schema"), Some((ViewportKind::JsonSchema, "f".into())));
        assert_eq!(split("f.custom"), Some((ViewportKind::Custom, "f".into())));
        assert_eq!(split(" spaced .html"), Some((ViewportKind::Html, "spaced".into())));
        assert_eq!(split("f.json"), None);
        assert_eq!(split(".html"), None);
        assert_eq!(split("f.html.bak"), None);
    }

    #[test]
    fn type_names() {
        let names: Vec<_> = SUFFIXES.iter().map(|(_, k)| k.viewport_type_str()).collect();
        assert_eq!(names, ["json_schema", "custom", "html", "dqlc", "qlc"]);
    }
}
