//! The provider registry: configuration → providers by key.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agw_llm::{ChatProvider, LlmDelta, LlmError, ProviderConfig, ProviderProtocol, ProviderRegistry};
use agw_testkit::{FIXTURE_MODEL, FixtureServer, Transcript};
use common::{call, collect, options, request, within};

const GUARD: Duration = Duration::from_secs(10);

#[tokio::test]
async fn registry_resolves_keys_case_insensitively() {
    let server = FixtureServer::with_default(Transcript::openai_text(&["real"])).await.expect("fixture server starts");
    let registry = ProviderRegistry::new([server.provider_config("Fixture")]);
    assert_eq!(registry.keys(), ["fixture"]);
    assert_eq!(registry.default_model("FIXTURE").as_deref(), Some(FIXTURE_MODEL));
    assert_eq!(registry.default_model("nope"), None);

    let provider = registry.get("FIXTURE").expect("configured");
    let (deltas, error) = within(GUARD, call(provider.as_ref(), request("hi"), options("s"))).await.expect("opens");
    assert!(error.is_none());
    assert_eq!(deltas[0], LlmDelta::Content { text: "real".into() });

    let error = registry.get("nope").err().expect("unknown key");
    assert!(matches!(&error, LlmError::NotConfigured { key } if key == "nope"));
    assert_eq!(error.code(), "provider_not_configured");
    assert!(error.to_string().contains("nope"));
}

#[tokio::test]
async fn registry_skips_incomplete_configs() {
    let server = FixtureServer::with_default(Transcript::openai_text(&["from fixture"])).await.expect("starts");
    let mut incomplete = server.provider_config("broken");
    incomplete.api_key = "  ".into();
    let registry = ProviderRegistry::new([incomplete, server.provider_config("demo")]);
    assert!(registry.get("broken").is_err());
    assert_eq!(registry.default_model("demo").as_deref(), Some(FIXTURE_MODEL));
    let demo = registry.get("demo").expect("real demo provider");
    let stream = within(GUARD, demo.stream(request("hi"), options("s"))).await.expect("opens");
    let (deltas, _) = collect(stream).await;
    assert_eq!(deltas[0], LlmDelta::Content { text: "from fixture".into() });

    let empty = ProviderRegistry::new(Vec::<ProviderConfig>::new());
    assert!(empty.keys().is_empty(), "no provider is built in");
    assert!(empty.get("demo").is_err());
}

#[tokio::test]
async fn anthropic_providers_speak_the_messages_api() {
    let server = FixtureServer::with_default(Transcript::anthropic_text(&["from claude"])).await.expect("fixture");
    let config = ProviderConfig {
        key: "claude".into(),
        protocol: ProviderProtocol::Anthropic,
        base_url: format!("{}/v1/", server.base_url()),
        api_key: "sk-ant-secret".into(),
        model: "claude-sonnet".into(),
        limits: Default::default(),
        prompt_cache_key: None,
        structured_output: None,
        attachments: None,
    };
    let registry = ProviderRegistry::new([config]);
    let provider: Arc<dyn ChatProvider> = registry.get("claude").expect("registered");
    let stream = within(GUARD, provider.stream(request("hi"), options("s"))).await.expect("opens");
    let (deltas, error) = collect(stream).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(deltas[0], LlmDelta::Content { text: "from claude".into() });
    let recorded = server.request(0).expect("recorded");
    assert_eq!(recorded.path, "/v1/messages", "no doubled /v1");
    assert_eq!(recorded.header("x-api-key"), Some("sk-ant-secret"));
    assert!(!format!("{registry:?}").contains("sk-ant-secret"));

    let bad = ProviderConfig {
        key: "broken".into(),
        protocol: ProviderProtocol::Anthropic,
        base_url: "not a url".into(),
        api_key: "k".into(),
        model: "m".into(),
        limits: Default::default(),
        prompt_cache_key: None,
        structured_output: None,
        attachments: None,
    };
    assert!(ProviderRegistry::new([bad]).get("broken").is_err(), "invalid configs are skipped");
}

#[test]
fn configs_from_environment_feed_the_registry() {
    let vars = [
        ("AGENT_PROVIDERS_SILICONFLOW_BASE_URL", "https://api.siliconflow.cn/v1"),
        ("AGENT_PROVIDERS_SILICONFLOW_API_KEY", "sk-sf"),
        ("AGENT_PROVIDERS_SILICONFLOW_MODEL", "Qwen/Qwen3-8B"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let configs = ProviderConfig::from_env(vars);
    assert_eq!(configs.len(), 1);
    assert!(configs[0].is_complete());
    let registry = ProviderRegistry::new(configs);
    assert_eq!(registry.keys(), ["siliconflow"]);
    assert_eq!(registry.default_model("SiliconFlow").as_deref(), Some("Qwen/Qwen3-8B"));
}
