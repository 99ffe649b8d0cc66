//! The offline demo model and the provider registry.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agw_llm::demo::{DEMO_MODEL, script};
use agw_llm::fixture::{FIXTURE_MODEL, FixtureServer, Transcript};
use agw_llm::{
    ChatProvider, DemoProvider, LlmDelta, LlmError, ProviderConfig, ProviderProtocol, ProviderRegistry,
    ReasoningEffort, ReasoningSetting,
};
use common::{call, collect, describe, options, request, within};
use futures::StreamExt;

const GUARD: Duration = Duration::from_secs(10);

fn texts(deltas: &[LlmDelta], reasoning: bool) -> (usize, String) {
    let pieces: Vec<&str> = deltas
        .iter()
        .filter_map(|d| match d {
            LlmDelta::Reasoning { text } if reasoning => Some(text.as_str()),
            LlmDelta::Content { text } if !reasoning => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (pieces.len(), pieces.concat())
}

#[tokio::test]
async fn demo_streams_reasoning_then_a_deterministic_answer() {
    let mut req = request("What can you do?");
    req.reasoning = ReasoningSetting { enabled: true, effort: ReasoningEffort::Low };
    let provider = DemoProvider::with_chunk_delay(Duration::from_millis(0));
    let (deltas, error) = within(GUARD, call(&provider, req.clone(), options("agent-oneshot"))).await.expect("opens");
    assert!(error.is_none());

    let (reasoning_chunks, reasoning) = texts(&deltas, true);
    let (content_chunks, content) = texts(&deltas, false);
    assert!(reasoning_chunks >= 3, "reasoning in several small chunks");
    assert!(content_chunks >= 10, "answer in small chunks");
    assert!(reasoning.contains("What can you do?"));
    assert!(content.starts_with("You asked: \"What can you do?\""));
    assert!(content.contains("offline demo model"));
    assert!(content.contains(DEMO_MODEL));
    for var in ["AGENT_PROVIDERS_<KEY>_BASE_URL", "AGENT_PROVIDERS_<KEY>_API_KEY", "AGENT_PROVIDERS_<KEY>_MODEL"] {
        assert!(content.contains(var), "mentions {var}");
    }

    // Order: all reasoning, then all content, then finish, then usage.
    let kinds = describe(&deltas);
    let first_content = kinds.iter().position(|k| k.starts_with("content:")).expect("content");
    assert!(kinds[..first_content].iter().all(|k| k.starts_with("reasoning:")));
    assert_eq!(kinds[kinds.len() - 2], "finish:stop");
    let LlmDelta::Usage { usage } = deltas.last().expect("usage last") else { panic!("usage must be last") };
    let (prompt, completion) = (usage["prompt_tokens"].as_u64(), usage["completion_tokens"].as_u64());
    assert!(prompt.is_some_and(|p| p > 0) && completion.is_some_and(|c| c > 10));
    assert_eq!(usage["total_tokens"].as_u64(), Some(prompt.unwrap_or(0) + completion.unwrap_or(0)));

    // Deterministic.
    assert_eq!(script(&req), deltas);
    let (again, _) = call(&provider, req, options("agent-oneshot")).await.expect("opens");
    assert_eq!(again, deltas);
}

#[tokio::test]
async fn demo_without_reasoning_answers_directly() {
    let (deltas, error) =
        call(&DemoProvider::with_chunk_delay(Duration::ZERO), request("hi"), options("s")).await.expect("opens");
    assert!(error.is_none());
    assert!(deltas.iter().all(|d| !matches!(d, LlmDelta::Reasoning { .. })));
    assert!(matches!(&deltas[0], LlmDelta::Content { text } if text.starts_with("You asked")));
}

#[tokio::test]
async fn demo_paces_its_chunks_and_can_be_dropped() {
    let delay = Duration::from_millis(15);
    let provider = DemoProvider::with_chunk_delay(delay);
    let started = Instant::now();
    let (deltas, _) = within(GUARD, call(&provider, request("Pace me"), options("s"))).await.expect("opens");
    let (chunks, _) = texts(&deltas, false);
    let elapsed = started.elapsed();
    let minimum = delay * u32::try_from(chunks - 1).unwrap_or(u32::MAX);
    assert!(elapsed >= minimum, "{chunks} chunks in {elapsed:?}, expected at least {minimum:?}");

    // Dropping mid-stream is immediate (no pending work keeps running).
    let mut stream = provider.stream(request("Pace me"), options("s")).await.expect("opens");
    assert!(matches!(stream.next().await, Some(Ok(LlmDelta::Content { .. }))));
    drop(stream);

    assert_eq!(DemoProvider::new().chunk_delay(), Duration::from_millis(40));
}

#[tokio::test]
async fn registry_resolves_keys_case_insensitively() {
    let server = FixtureServer::with_default(Transcript::openai_text(&["real"])).await.expect("fixture server starts");
    let registry = ProviderRegistry::new([server.provider_config("Fixture")], true);
    assert_eq!(registry.keys(), ["demo", "fixture"]);
    assert_eq!(registry.default_model("FIXTURE").as_deref(), Some(FIXTURE_MODEL));
    assert_eq!(registry.default_model("demo").as_deref(), Some(DEMO_MODEL));
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
async fn registry_skips_incomplete_configs_and_real_demo_replaces_the_embedded_one() {
    let server = FixtureServer::with_default(Transcript::openai_text(&["from fixture"])).await.expect("starts");
    let mut incomplete = server.provider_config("broken");
    incomplete.api_key = "  ".into();
    let registry = ProviderRegistry::new([incomplete, server.provider_config("demo")], true);
    assert!(registry.get("broken").is_err());
    assert_eq!(registry.default_model("demo").as_deref(), Some(FIXTURE_MODEL));
    let demo = registry.get("demo").expect("real demo provider");
    let stream = within(GUARD, demo.stream(request("hi"), options("s"))).await.expect("opens");
    let (deltas, _) = collect(stream).await;
    assert_eq!(deltas[0], LlmDelta::Content { text: "from fixture".into() });

    let without_demo = ProviderRegistry::new(Vec::<ProviderConfig>::new(), false);
    assert!(without_demo.keys().is_empty());
    assert!(without_demo.get("demo").is_err());
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
    };
    let registry = ProviderRegistry::new([config], false);
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
    };
    assert!(ProviderRegistry::new([bad], false).get("broken").is_err(), "invalid configs are skipped");
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
    let registry = ProviderRegistry::new(configs, false);
    assert_eq!(registry.keys(), ["siliconflow"]);
    assert_eq!(registry.default_model("SiliconFlow").as_deref(), Some("Qwen/Qwen3-8B"));
}
