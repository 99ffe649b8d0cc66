//! Where a setting's text comes from: the environment first, then the config file, then the
//! table's default.

use std::collections::HashMap;
use std::fmt::Display;

use super::ConfigError;
use super::table::SettingSpec;

/// The parsed config file and the environment, read by the section loaders.
pub(super) struct Source {
    pub table: toml::Table,
    /// Environment variables with a non-blank value (an empty value counts as unset, docs/contract/config.md §5).
    pub env: HashMap<String, String>,
}

impl Source {
    /// The raw text of a setting, trimmed when it comes from the environment.
    pub fn text(&self, spec: &SettingSpec) -> Option<String> {
        if let Some(v) = self.env.get(spec.env) {
            return Some(v.trim().to_string());
        }
        toml_lookup(&self.table, spec.property).or_else(|| spec.default.map(str::to_string))
    }

    /// The setting parsed by `f`; `None` when it is unset and has no default. A parse failure
    /// names the setting and its variable, then the value and `f`'s error.
    pub fn parse_opt<T, E: Display>(
        &self,
        spec: &SettingSpec,
        f: impl Fn(&str) -> Result<T, E>,
    ) -> Result<Option<T>, ConfigError> {
        self.text(spec)
            .map(|v| {
                f(&v).map_err(|message| ConfigError::Invalid {
                    property: spec.property,
                    env: spec.env,
                    message: format!("{v:?}: {message}"),
                })
            })
            .transpose()
    }

    /// Like [`Source::parse_opt`], for settings with a default.
    pub fn parse<T, E: Display>(&self, spec: &SettingSpec, f: impl Fn(&str) -> Result<T, E>) -> Result<T, ConfigError> {
        self.parse_opt(spec, f)?.ok_or(ConfigError::Invalid {
            property: spec.property,
            env: spec.env,
            message: "missing".into(),
        })
    }
}

/// Scalar at a dotted path, rendered as a string.
fn toml_lookup(table: &toml::Table, property: &str) -> Option<String> {
    let mut parts = property.split('.').peekable();
    let mut current = table;
    while let Some(part) = parts.next() {
        let value = current.get(part)?;
        if parts.peek().is_none() {
            return match value {
                toml::Value::String(s) => Some(s.clone()),
                toml::Value::Integer(i) => Some(i.to_string()),
                toml::Value::Float(f) => Some(f.to_string()),
                toml::Value::Boolean(b) => Some(b.to_string()),
                // Lists may be TOML arrays or comma-separated strings, like the environment form.
                toml::Value::Array(items) => {
                    Some(items.iter().filter_map(|i| i.as_str().map(str::to_string)).collect::<Vec<_>>().join(","))
                }
                _ => None,
            };
        }
        current = value.as_table()?;
    }
    None
}
