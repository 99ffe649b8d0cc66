//! `agent.providers.<key>.*`: `[agent.providers.<key>]` tables, then
//! `AGENT_PROVIDERS_<KEY>_<FIELD>` variables, merged per field so a file can hold the URL and the
//! environment the secret.

use std::collections::{BTreeMap, HashMap};

use agw_llm::{ProviderConfig, ProviderProtocol};

use super::source::Source;
use super::table::{
    AGW_PROVIDER_MAX_LINE_BYTES, AGW_PROVIDER_MAX_RESPONSE_BYTES, AGW_PROVIDER_MAX_TOOL_CALLS, PROVIDER_FIELDS,
    PROVIDERS_ENV, ProviderField,
};
use super::{ConfigError, value};

/// `agw.provider.*`: the same caps for every provider (a hostile provider or proxy must not make
/// agw buffer without bound).
pub(super) fn limits(src: &Source) -> Result<agw_llm::ResponseLimits, ConfigError> {
    Ok(agw_llm::ResponseLimits {
        max_line_bytes: src.parse(&AGW_PROVIDER_MAX_LINE_BYTES, value::whole)?,
        max_response_bytes: src.parse(&AGW_PROVIDER_MAX_RESPONSE_BYTES, value::whole)?,
        max_tool_calls: src.parse(&AGW_PROVIDER_MAX_TOOL_CALLS, value::whole)?,
    })
}

pub(super) fn load(src: &Source) -> Result<Vec<ProviderConfig>, ConfigError> {
    let mut merged: BTreeMap<String, HashMap<&str, String>> = BTreeMap::new();
    if let Some(tables) = src.table.get("agent").and_then(|a| a.get("providers")).and_then(|p| p.as_table()) {
        for (key, value) in tables {
            let Some(fields) = value.as_table() else {
                return Err(ConfigError::Provider { key: key.clone(), message: "must be a table".into() });
            };
            let entry = merged.entry(key.trim().to_lowercase()).or_default();
            for field in PROVIDER_FIELDS {
                match fields.get(field.key) {
                    None => {}
                    Some(toml::Value::String(v)) => {
                        entry.insert(field.key, v.clone());
                    }
                    Some(toml::Value::Integer(n)) if matches!(field.key, "context-window" | "max-output-tokens") => {
                        entry.insert(field.key, n.to_string());
                    }
                    // Silently ignoring `model = 3` would leave the provider half-configured.
                    Some(_) => {
                        return Err(ConfigError::Provider {
                            key: key.clone(),
                            message: format!("{} must be a string", field.key),
                        });
                    }
                }
            }
        }
    }
    for (name, value) in &src.env {
        if let Some((key, field)) = env_field(name) {
            merged.entry(key.to_lowercase()).or_default().insert(field.key, value.trim().to_string());
        }
    }
    let mut out = Vec::new();
    for (key, fields) in merged {
        let protocol = match fields.get("protocol") {
            Some(p) => p
                .parse::<ProviderProtocol>()
                .map_err(|e| ConfigError::Provider { key: key.clone(), message: e.to_string() })?,
            None => ProviderProtocol::OpenAiCompatible,
        };
        let get = |f: &str| fields.get(f).cloned().unwrap_or_default();
        let tokens = |f: &str| -> Result<Option<u32>, ConfigError> {
            let Some(text) = fields.get(f).map(|v| v.trim()).filter(|v| !v.is_empty()) else { return Ok(None) };
            match text.parse::<u32>() {
                Ok(n) if n > 0 => Ok(Some(n)),
                _ => Err(ConfigError::Provider {
                    key: key.clone(),
                    message: format!("{f} must be a positive whole number of tokens, not {text:?}"),
                }),
            }
        };
        let limits = agw_llm::ModelLimits {
            context_window: tokens("context-window")?,
            max_output_tokens: tokens("max-output-tokens")?,
        };
        out.push(ProviderConfig {
            key,
            protocol,
            base_url: get("base-url"),
            api_key: get("api-key"),
            model: get("model"),
            limits,
        });
    }
    Ok(out)
}

/// The provider key (as written) and field a variable sets, if it is a provider variable.
pub(super) fn env_field(name: &str) -> Option<(&str, &'static ProviderField)> {
    let rest = name.strip_prefix(PROVIDERS_ENV)?;
    PROVIDER_FIELDS
        .iter()
        .find_map(|field| rest.strip_suffix(field.env_suffix).filter(|k| !k.is_empty()).map(|key| (key, field)))
}
