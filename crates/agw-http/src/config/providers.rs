//! `agent.providers.<key>.*`: `[agent.providers.<key>]` tables, then
//! `AGENT_PROVIDERS_<KEY>_<FIELD>` variables, merged per field so a file can hold the URL and the
//! environment the secret.

use std::collections::{BTreeMap, HashMap};

use agw_llm::{ProviderConfig, ProviderProtocol};
use agw_protocol::usage::{Price, PriceTable};

use super::source::Source;
use super::table::{
    AGW_PROVIDER_FALLBACK_COOLDOWN, AGW_PROVIDER_FALLBACK_COOLDOWN_MAX, AGW_PROVIDER_MAX_LINE_BYTES,
    AGW_PROVIDER_MAX_OUTPUT_BYTES, AGW_PROVIDER_MAX_RESPONSE_BYTES, AGW_PROVIDER_MAX_TOOL_CALLS, PROVIDER_FIELDS,
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
        max_output_bytes: src.parse(&AGW_PROVIDER_MAX_OUTPUT_BYTES, value::whole)?,
    })
}

/// `agw.provider.fallback-cooldown` and `…-max`: how long a model that failed is skipped
/// (docs/models.md, "Fallbacks").
pub(super) fn cooldown(src: &Source) -> Result<FallbackCooldown, ConfigError> {
    Ok(FallbackCooldown {
        min: src.parse(&AGW_PROVIDER_FALLBACK_COOLDOWN, value::duration)?,
        max: src.parse(&AGW_PROVIDER_FALLBACK_COOLDOWN_MAX, value::duration)?,
    })
}

/// How long a model that failed is skipped by calls with fallbacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FallbackCooldown {
    /// At least this long (`agw.provider.fallback-cooldown`).
    pub min: std::time::Duration,
    /// At most this long, whatever `Retry-After` asks (`agw.provider.fallback-cooldown-max`).
    pub max: std::time::Duration,
}

/// The providers, and the prices their `prices` fields declare.
pub(super) fn load(src: &Source) -> Result<(Vec<ProviderConfig>, PriceTable), ConfigError> {
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
                    Some(toml::Value::Boolean(b)) if field.key == "prompt-cache-key" => {
                        entry.insert(field.key, b.to_string());
                    }
                    // Prices are a table of models; kept as JSON, the form the variable takes.
                    Some(prices @ toml::Value::Table(_)) if field.key == "prices" => {
                        let json = serde_json::to_string(prices)
                            .map_err(|e| ConfigError::Provider { key: key.clone(), message: format!("prices: {e}") })?;
                        entry.insert(field.key, json);
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
    let mut prices = Vec::new();
    for (key, fields) in merged {
        if let Some(json) = fields.get("prices") {
            prices.extend(parse_prices(&key, json)?);
        }
        // Only prices (or limits) for a provider configured elsewhere, e.g. the demo model.
        if ["base-url", "api-key", "model", "protocol"].iter().all(|f| !fields.contains_key(f)) {
            continue;
        }
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
        let prompt_cache_key = match fields.get("prompt-cache-key").map(|v| v.trim().to_ascii_lowercase()) {
            None => None,
            Some(v) if v == "true" => Some(true),
            Some(v) if v == "false" => Some(false),
            Some(v) => {
                return Err(ConfigError::Provider {
                    key: key.clone(),
                    message: format!("prompt-cache-key must be true or false, not {v:?}"),
                });
            }
        };
        let structured_output = match fields.get("structured-output").map(|v| v.trim()) {
            None | Some("") => None,
            Some(v) => Some(v.parse::<agw_llm::StructuredOutput>().map_err(|()| ConfigError::Provider {
                key: key.clone(),
                message: format!("structured-output must be native or tool, not {v:?}"),
            })?),
        };
        let attachments = match fields.get("attachments").map(|v| v.trim().to_ascii_lowercase()) {
            None => None,
            Some(v) if v.is_empty() => None,
            Some(v) => Some(v.parse::<agw_llm::AttachmentSupport>().map_err(|reason| ConfigError::Provider {
                key: key.clone(),
                message: format!("attachments: {reason}"),
            })?),
        };
        out.push(ProviderConfig {
            key,
            protocol,
            base_url: get("base-url"),
            api_key: get("api-key"),
            model: get("model"),
            limits,
            prompt_cache_key,
            structured_output,
            attachments,
        });
    }
    Ok((out, PriceTable::new(prices)))
}

/// `{"<model>|*": {"input": …, "output": …, "cached-input"?: …, "cache-write"?: …, "currency"?: "USD"}}`, per
/// million tokens.
fn parse_prices(key: &str, json: &str) -> Result<Vec<Price>, ConfigError> {
    let invalid =
        |message: String| ConfigError::Provider { key: key.to_owned(), message: format!("prices: {message}") };
    let table: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(json).map_err(|e| invalid(format!("must be a table of models: {e}")))?;
    let mut out = Vec::new();
    for (model, entry) in table {
        let Some(fields) = entry.as_object() else {
            return Err(invalid(format!("{model} must be a table with input and output")));
        };
        if let Some(unknown) = fields
            .keys()
            .find(|k| !["input", "output", "cached-input", "cache-write", "currency"].contains(&k.as_str()))
        {
            return Err(invalid(format!(
                "{model}.{unknown} is not a price field (input, output, cached-input, cache-write, currency)"
            )));
        }
        let amount = |name: &str| -> Result<Option<f64>, ConfigError> {
            match fields.get(name) {
                None => Ok(None),
                Some(v) => match v.as_f64() {
                    Some(n) if n >= 0.0 && n.is_finite() => Ok(Some(n)),
                    _ => Err(invalid(format!("{model}.{name} must be a non-negative number (per million tokens)"))),
                },
            }
        };
        let (Some(input), Some(output)) = (amount("input")?, amount("output")?) else {
            return Err(invalid(format!("{model} needs both input and output")));
        };
        let currency = match fields.get("currency") {
            None => "USD".to_owned(),
            Some(serde_json::Value::String(c)) if c.len() == 3 && c.chars().all(|ch| ch.is_ascii_uppercase()) => {
                c.clone()
            }
            Some(other) => {
                return Err(invalid(format!("{model}.currency must be an ISO 4217 code like \"USD\", not {other}")));
            }
        };
        let cached_input = amount("cached-input")?;
        let cache_write = amount("cache-write")?;
        out.push(Price {
            provider: key.to_owned(),
            model: model.clone(),
            input,
            output,
            cached_input,
            cache_write,
            currency,
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
