//! Providers by key, built from configuration (`agent.providers.<key>` /
//! `AGENT_PROVIDERS_<KEY>_*`), plus providers registered in code.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::Arc;

use crate::transport::ResponseLimits;
use crate::{ChatProvider, LlmError};

/// Wire protocol of a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProviderProtocol {
    /// OpenAI-style streaming chat completions (`POST <base>/v1/chat/completions`); the default.
    #[default]
    OpenAiCompatible,
    /// Anthropic Messages API ([`AnthropicProvider`](crate::AnthropicProvider)).
    Anthropic,
}

impl ProviderProtocol {
    /// The configuration spelling (`OPENAI_COMPATIBLE` / `ANTHROPIC`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderProtocol::OpenAiCompatible => "OPENAI_COMPATIBLE",
            ProviderProtocol::Anthropic => "ANTHROPIC",
        }
    }
}

impl FromStr for ProviderProtocol {
    type Err = String;

    /// Case-insensitive; surrounding whitespace ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_uppercase().as_str() {
            "OPENAI_COMPATIBLE" => Ok(ProviderProtocol::OpenAiCompatible),
            "ANTHROPIC" => Ok(ProviderProtocol::Anthropic),
            _ => Err(format!("unknown provider protocol {s:?} (expected OPENAI_COMPATIBLE or ANTHROPIC)")),
        }
    }
}

/// What a provider's models can read and write, as configured (`context-window`,
/// `max-output-tokens`); `None`: unknown, the reader's default applies (`docs/context.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ModelLimits {
    /// Tokens a request (input and output together) may hold.
    pub context_window: Option<u32>,
    /// Most tokens one answer may have.
    pub max_output_tokens: Option<u32>,
}

/// One configured provider.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ProviderConfig {
    /// The `providerKey` agents use (matched case-insensitively).
    pub key: String,
    /// Which API the provider speaks.
    pub protocol: ProviderProtocol,
    /// Where the API lives, with or without a trailing `/v1` (never doubled).
    pub base_url: String,
    /// Secret sent with every call (`Authorization: Bearer` or Anthropic's `x-api-key`). Masked in
    /// `Debug` output, errors and logs.
    pub api_key: String,
    /// Default model of the provider (used when an agent names none).
    pub model: String,
    /// Context window and output cap of the provider's models.
    pub limits: ModelLimits,
    /// OpenAI-compatible only: whether calls carry `prompt_cache_key` (docs/models.md); `None`:
    /// only to `api.openai.com`, since other servers may reject a field they do not know.
    pub prompt_cache_key: Option<bool>,
    /// OpenAI-compatible only: how calls with an output schema are sent (docs/models.md);
    /// `None`: natively (`response_format`). Anthropic always takes the answer as a tool call.
    pub structured_output: Option<crate::StructuredOutput>,
    /// Which attachments its models take besides text (docs/models.md); `None`: images and PDFs.
    pub attachments: Option<crate::AttachmentSupport>,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("key", &self.key)
            .field("protocol", &self.protocol)
            .field("base_url", &self.base_url)
            .field("api_key", &if self.api_key.is_empty() { "" } else { "***" })
            .field("model", &self.model)
            .field("limits", &self.limits)
            .field("prompt_cache_key", &self.prompt_cache_key)
            .field("structured_output", &self.structured_output)
            .field("attachments", &self.attachments)
            .finish()
    }
}

const ENV_PREFIX: &str = "AGENT_PROVIDERS_";
const ENV_FIELDS: [&str; 4] = ["_BASE_URL", "_API_KEY", "_MODEL", "_PROTOCOL"];

impl ProviderConfig {
    /// Providers named by `AGENT_PROVIDERS_<KEY>_BASE_URL|API_KEY|MODEL|PROTOCOL` variables
    /// (`<KEY>` lower-cased becomes the key), sorted by key. Missing fields stay blank (the
    /// registry skips such providers with a warning); an unknown protocol skips the provider
    /// with a warning.
    pub fn from_env(vars: impl Iterator<Item = (String, String)>) -> Vec<ProviderConfig> {
        let mut by_key: BTreeMap<String, (ProviderConfig, Option<String>)> = BTreeMap::new();
        for (name, value) in vars {
            let upper = name.to_ascii_uppercase();
            let Some(rest) = upper.strip_prefix(ENV_PREFIX) else { continue };
            let Some((key, field)) = ENV_FIELDS
                .iter()
                .find_map(|field| rest.strip_suffix(field).map(|key| (key, *field)))
                .filter(|(key, _)| !key.is_empty())
            else {
                continue;
            };
            let (config, protocol) = by_key.entry(key.to_ascii_lowercase()).or_insert_with(|| {
                let config = ProviderConfig {
                    key: key.to_ascii_lowercase(),
                    protocol: ProviderProtocol::default(),
                    base_url: String::new(),
                    api_key: String::new(),
                    model: String::new(),
                    limits: ModelLimits::default(),
                    prompt_cache_key: None,
                    structured_output: None,
                    attachments: None,
                };
                (config, None)
            });
            let value = value.trim().to_owned();
            match field {
                "_BASE_URL" => config.base_url = value,
                "_API_KEY" => config.api_key = value,
                "_MODEL" => config.model = value,
                _ => *protocol = Some(value),
            }
        }
        by_key
            .into_values()
            .filter_map(|(mut config, protocol)| {
                match protocol.filter(|p| !p.is_empty()).map(|p| p.parse::<ProviderProtocol>()) {
                    None => {}
                    Some(Ok(protocol)) => config.protocol = protocol,
                    Some(Err(reason)) => {
                        tracing::warn!(provider = %config.key, "ignoring provider: {reason}");
                        return None;
                    }
                }
                Some(config)
            })
            .collect()
    }

    /// Whether base URL, API key and model are all set.
    pub fn is_complete(&self) -> bool {
        [&self.base_url, &self.api_key, &self.model].iter().all(|v| !v.trim().is_empty())
    }
}

struct Entry {
    provider: Arc<dyn ChatProvider>,
    /// `gen_ai.provider.name` of its calls: the protocol's (`openai`, `anthropic`) for configured
    /// providers, the key for providers registered in code.
    name: String,
    model: String,
    limits: ModelLimits,
    structured: crate::StructuredOutput,
    attachments: crate::AttachmentSupport,
}

/// The providers a server can call, by lower-cased key.
pub struct ProviderRegistry {
    entries: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderRegistry").field("keys", &self.keys()).finish()
    }
}

impl ProviderRegistry {
    /// Builds every usable provider of `configs`. Incomplete or invalid ones are skipped with a
    /// warning. Other providers (the offline demo model, test doubles, an embedder's own) are
    /// added with [`ProviderRegistry::insert`].
    pub fn new(configs: impl IntoIterator<Item = ProviderConfig>) -> Self {
        Self::with_limits(configs, ResponseLimits::default())
    }

    /// [`ProviderRegistry::new`] with `limits` on every provider's responses.
    pub fn with_limits(configs: impl IntoIterator<Item = ProviderConfig>, limits: ResponseLimits) -> Self {
        let mut entries = BTreeMap::new();
        for config in configs {
            let key = config.key.trim().to_ascii_lowercase();
            if key.is_empty() {
                tracing::warn!("ignoring a provider without a key");
                continue;
            }
            if !config.is_complete() {
                tracing::warn!(provider = %key, "ignoring provider: base-url, api-key and model are all required");
                continue;
            }
            let model = config.model.trim();
            let provider = match open_provider(&config, &key, model, limits) {
                Ok(provider) => provider,
                Err(error) => {
                    tracing::warn!(provider = %key, "ignoring provider: {error}");
                    continue;
                }
            };
            let name = match config.protocol {
                ProviderProtocol::OpenAiCompatible => "openai",
                ProviderProtocol::Anthropic => "anthropic",
            };
            let structured = match config.protocol {
                ProviderProtocol::OpenAiCompatible => config.structured_output.unwrap_or_default(),
                ProviderProtocol::Anthropic => crate::StructuredOutput::Tool,
            };
            let entry = Entry {
                provider,
                name: name.to_owned(),
                model: config.model.trim().to_owned(),
                limits: config.limits,
                structured,
                attachments: config.attachments.unwrap_or(crate::AttachmentSupport::ALL),
            };
            entries.insert(key, entry);
        }
        Self { entries }
    }

    /// The provider registered under `key` (case-insensitive).
    pub fn get(&self, key: &str) -> Result<Arc<dyn ChatProvider>, LlmError> {
        self.entries
            .get(&key.trim().to_ascii_lowercase())
            .map(|entry| entry.provider.clone())
            .ok_or_else(|| LlmError::NotConfigured { key: key.to_owned() })
    }

    /// The configured default model of `key`.
    pub fn default_model(&self, key: &str) -> Option<String> {
        self.entries.get(&key.trim().to_ascii_lowercase()).map(|entry| entry.model.clone())
    }

    /// What tracing calls `key`'s provider (`gen_ai.provider.name`): `openai` or `anthropic` by
    /// protocol for configured providers, the key itself for those registered in code.
    pub fn provider_name(&self, key: &str) -> String {
        let key = key.trim().to_ascii_lowercase();
        self.entries.get(&key).map_or(key, |entry| entry.name.clone())
    }

    /// The configured limits of `key`'s models (all unknown for an unknown key).
    pub fn limits(&self, key: &str) -> ModelLimits {
        self.entries.get(&key.trim().to_ascii_lowercase()).map(|entry| entry.limits).unwrap_or_default()
    }

    /// How `key`'s provider takes an output schema (natively for an unknown key).
    pub fn structured_output(&self, key: &str) -> crate::StructuredOutput {
        self.entries.get(&key.trim().to_ascii_lowercase()).map(|entry| entry.structured).unwrap_or_default()
    }

    /// Sets how a registered provider takes an output schema (no-op for an unknown key): an
    /// embedder's provider without a JSON-schema mode takes [`crate::StructuredOutput::Tool`].
    pub fn set_structured_output(&mut self, key: &str, mode: crate::StructuredOutput) {
        if let Some(entry) = self.entries.get_mut(&key.trim().to_ascii_lowercase()) {
            entry.structured = mode;
        }
    }

    /// Which attachments `key`'s models take besides text (text only for an unknown key).
    pub fn attachments(&self, key: &str) -> crate::AttachmentSupport {
        self.entries
            .get(&key.trim().to_ascii_lowercase())
            .map_or(crate::AttachmentSupport::TEXT, |entry| entry.attachments)
    }

    /// Sets which attachments a registered provider's models take (no-op for an unknown key).
    pub fn set_attachments(&mut self, key: &str, support: crate::AttachmentSupport) {
        if let Some(entry) = self.entries.get_mut(&key.trim().to_ascii_lowercase()) {
            entry.attachments = support;
        }
    }

    /// Registered keys, sorted (lower-cased).
    pub fn keys(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    /// Registers (or replaces) a provider directly — for embedders and tests.
    pub fn insert(&mut self, key: &str, model: &str, provider: Arc<dyn ChatProvider>) {
        let key = key.trim().to_ascii_lowercase();
        let entry = Entry {
            provider,
            name: key.clone(),
            model: model.to_owned(),
            limits: ModelLimits::default(),
            structured: crate::StructuredOutput::default(),
            attachments: crate::AttachmentSupport::TEXT,
        };
        self.entries.insert(key, entry);
    }

    /// Sets the limits of a registered provider's models (no-op for an unknown key).
    pub fn set_limits(&mut self, key: &str, limits: ModelLimits) {
        if let Some(entry) = self.entries.get_mut(&key.trim().to_ascii_lowercase()) {
            entry.limits = limits;
        }
    }
}

/// Builds the provider `config` names, with `limits` on its responses. A protocol whose feature
/// was compiled out is an error, never a fallback.
fn open_provider(
    config: &ProviderConfig,
    key: &str,
    model: &str,
    limits: ResponseLimits,
) -> Result<Arc<dyn ChatProvider>, LlmError> {
    let (url, api_key) = (config.base_url.as_str(), config.api_key.as_str());
    // Built without any provider feature, nothing below reads these.
    #[cfg(not(any(feature = "openai", feature = "anthropic")))]
    let _ = (url, api_key, model, limits);
    match config.protocol {
        ProviderProtocol::OpenAiCompatible => {
            #[cfg(feature = "openai")]
            return crate::openai::OpenAiCompatibleProvider::new(key, url, api_key, model).map(|p| {
                let p = match config.prompt_cache_key {
                    Some(send) => p.with_prompt_cache_key(send),
                    None => p,
                };
                Arc::new(p.with_limits(limits)) as _
            });
            #[cfg(not(feature = "openai"))]
            return Err(missing_feature(key, "OPENAI_COMPATIBLE", "openai"));
        }
        ProviderProtocol::Anthropic => {
            #[cfg(feature = "anthropic")]
            return crate::anthropic::AnthropicProvider::new(key, url, api_key, model)
                .map(|p| Arc::new(p.with_limits(limits)) as _);
            #[cfg(not(feature = "anthropic"))]
            return Err(missing_feature(key, "ANTHROPIC", "anthropic"));
        }
    }
}

/// The registry error for a provider whose protocol was compiled out.
#[cfg_attr(all(feature = "openai", feature = "anthropic"), allow(dead_code))]
fn missing_feature(key: &str, protocol: &str, feature: &str) -> LlmError {
    LlmError::InvalidRequest {
        message: format!(
            "provider {key} uses protocol {protocol}, but agw-llm was built without its `{feature}` feature"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Iterator<Item = (String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>().into_iter()
    }

    #[test]
    fn protocol_parsing() {
        assert_eq!("openai_compatible".parse(), Ok(ProviderProtocol::OpenAiCompatible));
        assert_eq!(" Anthropic ".parse(), Ok(ProviderProtocol::Anthropic));
        assert!("grpc".parse::<ProviderProtocol>().is_err());
    }

    #[test]
    fn from_env_groups_by_key() {
        let configs = ProviderConfig::from_env(vars(&[
            ("AGENT_PROVIDERS_BAILIAN_BASE_URL", "https://dashscope.example/compatible-mode"),
            ("AGENT_PROVIDERS_BAILIAN_API_KEY", "sk-1 "),
            ("AGENT_PROVIDERS_BAILIAN_MODEL", "qwen3-max"),
            ("AGENT_PROVIDERS_MY_LAB_MODEL", "m"),
            ("AGENT_PROVIDERS_MY_LAB_PROTOCOL", "anthropic"),
            ("AGENT_PROVIDERS_BAD_PROTOCOL", "soap"),
            ("AGENT_PROVIDERS__MODEL", "no key"),
            ("PATH", "/bin"),
        ]));
        assert_eq!(configs.len(), 2);
        assert_eq!(configs[0].key, "bailian");
        assert_eq!(configs[0].api_key, "sk-1");
        assert_eq!(configs[0].protocol, ProviderProtocol::OpenAiCompatible);
        assert_eq!(configs[1].key, "my_lab");
        assert_eq!(configs[1].protocol, ProviderProtocol::Anthropic);
        assert!(!configs[1].is_complete());
    }

    #[test]
    fn debug_masks_the_api_key() {
        let config = ProviderConfig {
            key: "k".into(),
            protocol: ProviderProtocol::OpenAiCompatible,
            base_url: "http://x".into(),
            api_key: "sk-secret".into(),
            model: "m".into(),
            limits: ModelLimits::default(),
            prompt_cache_key: None,
            structured_output: None,
            attachments: None,
        };
        let text = format!("{config:?}");
        assert!(!text.contains("sk-secret") && text.contains("***"));
        let registry = ProviderRegistry::new([config]);
        assert!(!format!("{registry:?}").contains("sk-secret"));
    }

    #[test]
    fn provider_names_follow_the_protocol_or_the_key() {
        let config = |key: &str, protocol| ProviderConfig {
            key: key.into(),
            protocol,
            base_url: "http://x".into(),
            api_key: "sk".into(),
            model: "m".into(),
            limits: ModelLimits::default(),
            prompt_cache_key: None,
            structured_output: None,
            attachments: None,
        };
        let mut registry = ProviderRegistry::new([
            config("bailian", ProviderProtocol::OpenAiCompatible),
            config("lab", ProviderProtocol::Anthropic),
        ]);
        let in_code = registry.get("bailian").unwrap();
        registry.insert(" Demo ", "d", in_code);
        assert_eq!(registry.provider_name("BAILIAN"), "openai");
        assert_eq!(registry.provider_name("lab"), "anthropic");
        assert_eq!(registry.provider_name("demo"), "demo");
        assert_eq!(registry.provider_name("unknown"), "unknown");
    }

    // Always compiled: the dev-dependency on agw-testkit turns both features on in test builds,
    // so a cfg'd-out test would never run.
    #[test]
    fn a_protocol_compiled_out_is_a_clear_error() {
        let error = missing_feature("lab", "OPENAI_COMPATIBLE", "openai").to_string();
        assert!(error.contains("lab") && error.contains("`openai` feature"), "{error}");
        assert_eq!(missing_feature("lab", "ANTHROPIC", "anthropic").code(), "provider_error");
    }
}
