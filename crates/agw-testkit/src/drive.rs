//! Helpers for tests that call a [`ChatProvider`] directly: a minimal request, short-timeout call
//! options, draining a stream into its deltas and terminal error, and a one-line description of
//! each delta that makes expected sequences easy to write.
//!
//! ```
//! # async fn demo(provider: &dyn agw_llm::ChatProvider) {
//! use agw_testkit::drive::{call, describe, options, request};
//! let (deltas, error) = call(provider, request("hi"), options("test")).await.expect("opens");
//! assert!(error.is_none());
//! assert_eq!(describe(&deltas)[0], "content:Hello");
//! # }
//! ```

use std::time::{Duration, Instant};

use agw_llm::{CallOptions, ChatMessage, ChatProvider, ChatRequest, DeltaStream, LlmDelta, LlmError, ReasoningSetting};
use futures::StreamExt;

/// A plain request with one user message.
pub fn request(user: &str) -> ChatRequest {
    ChatRequest {
        provider_key: "fixture".into(),
        model: "gpt-test".into(),
        messages: vec![ChatMessage::System { content: "You are terse.".into() }, ChatMessage::user(user)],
        tools: vec![],
        tool_choice: None,
        reasoning: ReasoningSetting::default(),
        temperature: None,
        top_p: None,
        max_tokens: None,
        prompt_cache: Default::default(),
        response_format: None,
    }
}

/// Short timeouts keep the suite fast; fast retries too.
pub fn options(stage: &str) -> CallOptions {
    CallOptions {
        inactivity_timeout: Duration::from_secs(2),
        max_retries: 2,
        stage: stage.into(),
        run_id: "run_test_1".into(),
        ..CallOptions::default()
    }
}

/// Every item of a stream: the deltas, and the terminal error if there was one.
pub async fn collect(mut stream: DeltaStream) -> (Vec<LlmDelta>, Option<LlmError>) {
    let mut deltas = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(delta) => deltas.push(delta),
            Err(error) => {
                assert!(stream.next().await.is_none(), "an error item must be the last item");
                return (deltas, Some(error));
            }
        }
    }
    (deltas, None)
}

/// Opens and drains one call.
pub async fn call(
    provider: &dyn ChatProvider,
    request: ChatRequest,
    options: CallOptions,
) -> Result<(Vec<LlmDelta>, Option<LlmError>), LlmError> {
    let stream = provider.stream(request, options).await?;
    Ok(collect(stream).await)
}

/// Each delta as one short line: `content:Hello`, `tool:0|call_1|function|f|{`, `finish:stop`,
/// `usage:<total_tokens>`.
pub fn describe(deltas: &[LlmDelta]) -> Vec<String> {
    deltas
        .iter()
        .map(|delta| match delta {
            LlmDelta::Reasoning { text } => format!("reasoning:{text}"),
            LlmDelta::Content { text } => format!("content:{text}"),
            LlmDelta::ToolCall(f) => format!(
                "tool:{}|{}|{}|{}|{}",
                f.index.map(|i| i.to_string()).unwrap_or_default(),
                f.id.clone().unwrap_or_default(),
                f.call_type.clone().unwrap_or_default(),
                f.name.clone().unwrap_or_default(),
                f.arguments
            ),
            LlmDelta::Finish { reason } => format!("finish:{reason}"),
            LlmDelta::Usage { usage } => format!("usage:{}", usage["total_tokens"]),
        })
        .collect()
}

/// Expected lines from `&str`s.
pub fn lines(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// Runs `future` with a generous guard so a bug hangs no test for long.
pub async fn within<T>(limit: Duration, future: impl std::future::Future<Output = T>) -> T {
    let started = Instant::now();
    match tokio::time::timeout(limit, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {:?}", started.elapsed()),
    }
}
