//! Every provider transcript in `fixtures/providers/` parses into the expected deltas over
//! real loopback HTTP.

mod common;

use std::time::Duration;

use agw_testkit::{FixtureServer, Transcript, providers_dir};
use common::{call, describe, lines, options, request, within};

async fn replay(name: &str) -> Vec<String> {
    let server = FixtureServer::with_default(Transcript::provider_file(name).expect("transcript loads"))
        .await
        .expect("fixture server starts");
    let provider = server.provider("fixture");
    let (deltas, error) =
        within(Duration::from_secs(5), call(&provider, request("hi"), options("oneshot"))).await.expect("stream opens");
    assert!(error.is_none(), "{name}: unexpected error {error:?}");
    assert_eq!(server.request_count(), 1);
    describe(&deltas)
}

#[tokio::test]
async fn openai_text() {
    assert_eq!(
        replay("openai-text").await,
        lines(&[
            "content:Hello",
            "content:!",
            "content:\n\n",
            "content:How can I help",
            "content: you today?",
            "finish:stop",
            "usage:29",
        ])
    );
}

#[tokio::test]
async fn openai_tool_call() {
    assert_eq!(
        replay("openai-tool-call").await,
        lines(&[
            "tool:0|call_DdmO9pD3xa9XTPNJ32zg2hcA|function|get_weather|",
            "tool:0||||{\"",
            "tool:0||||location",
            "tool:0||||\":\"",
            "tool:0||||Paris",
            "tool:0||||, France",
            "tool:0||||\"}",
            "finish:tool_calls",
            "usage:98",
        ])
    );
}

#[tokio::test]
async fn deepseek_reasoning() {
    assert_eq!(
        replay("deepseek-reasoning").await,
        lines(&[
            "reasoning:Okay",
            "reasoning:, the user",
            "reasoning: greets me",
            "reasoning:.",
            "reasoning: I should",
            "reasoning: greet back",
            "reasoning:.",
            "content:Hello",
            "content:!",
            "content: How can",
            "content: I assist you",
            "content: today?",
            "finish:stop",
            "usage:51",
        ])
    );
}

#[tokio::test]
async fn qwen_reasoning() {
    assert_eq!(
        replay("qwen-reasoning").await,
        lines(&[
            "reasoning:Okay",
            "reasoning:,",
            "reasoning: the user",
            "reasoning: asks what",
            "reasoning: 2+2 is",
            "reasoning:. Simple",
            "reasoning: arithmetic",
            "reasoning:.",
            "reasoning:\n",
            "content:2 + 2",
            "content: = **4**",
            "content:.",
            "finish:stop",
            "usage:66",
        ])
    );
}

#[tokio::test]
async fn qwen_tool_call() {
    assert_eq!(
        replay("qwen-tool-call").await,
        lines(&[
            "tool:0|call_8f08d2b0fc0c4d8fab7123|function|get_current_weather|{\"location\":",
            "tool:0||function|| \"Hang",
            "tool:0||function||zhou\"}",
            "finish:tool_calls",
            "usage:238",
        ])
    );
}

#[tokio::test]
async fn rate_limited_transcript_is_an_http_error() {
    let mut transcript = Transcript::provider_file("openai-rate-limited").expect("transcript loads");
    // Keep the test fast: the Retry-After itself is exercised in `openai_faults.rs`.
    transcript.headers.clear();
    let server = FixtureServer::with_default(transcript).await.expect("fixture server starts");
    let provider = server.provider("fixture");
    let mut opts = options("oneshot");
    opts.max_retries = 0;
    let error = call(&provider, request("hi"), opts).await.expect_err("429 fails the call");
    assert_eq!(error.status(), Some(429));
    assert!(error.to_string().contains("rate_limit_exceeded"), "{error}");
}

#[test]
fn every_transcript_file_loads_and_streams_end_properly() {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(providers_dir()).expect("fixtures/providers exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let transcript = Transcript::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let anthropic = path.file_stem().and_then(|s| s.to_str()).is_some_and(|s| s.starts_with("anthropic-"));
        if transcript.status == 200 {
            let last = transcript.frames.last().map(|f| f.raw.as_str());
            if anthropic {
                let last = last.unwrap_or_default();
                assert!(last.starts_with("event: message_stop\ndata: "), "{}", path.display());
            } else {
                assert_eq!(last, Some("data: [DONE]\n\n"), "{}", path.display());
            }
        }
        names.push(path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned());
    }
    names.sort();
    assert_eq!(
        names,
        [
            "anthropic-text",
            "anthropic-thinking",
            "anthropic-tool-use",
            "deepseek-reasoning",
            "openai-rate-limited",
            "openai-text",
            "openai-tool-call",
            "qwen-reasoning",
            "qwen-tool-call"
        ]
    );
}
