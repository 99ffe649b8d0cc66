//! The offline demo model: deterministic streaming, pacing, cancellation, and its place in a
//! provider registry.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agw_demo::{DEMO_MODEL, DEMO_PROVIDER_KEY, DemoProvider, script};
use agw_llm::{ChatProvider, LlmDelta, ProviderRegistry, ReasoningEffort, ReasoningSetting};
use agw_testkit::drive::{call, describe, options, request, within};
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
async fn demo_registers_like_any_provider() {
    let mut registry = ProviderRegistry::new([]);
    registry.insert(DEMO_PROVIDER_KEY, DEMO_MODEL, Arc::new(DemoProvider::with_chunk_delay(Duration::ZERO)));
    assert_eq!(registry.keys(), ["demo"]);
    assert_eq!(registry.default_model("DEMO").as_deref(), Some(DEMO_MODEL));
    let provider = registry.get("demo").expect("registered");
    let (deltas, error) = within(GUARD, call(provider.as_ref(), request("hi"), options("s"))).await.expect("opens");
    assert!(error.is_none());
    assert!(matches!(&deltas[0], LlmDelta::Content { text } if text.starts_with("You asked")));
}
