//! Every provider transcript in `fixtures/providers/` parses into the expected deltas over
//! real loopback HTTP.

mod common;

use std::time::Duration;

use agw_llm::prompted::{self, CallProblem};
use agw_llm::{ChatProvider, ToolChoice, ToolSpec};
use agw_testkit::{FixtureServer, StreamOutcome, Transcript, providers_dir};
use common::{call, collect, describe, lines, options, request, within};
use serde_json::{Value, json};

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
            "prompted-llama-ollama-corrected",
            "prompted-llama-ollama-malformed",
            "prompted-qwen-llama-server-answer",
            "prompted-qwen-llama-server-call",
            "qwen-reasoning",
            "qwen-tool-call"
        ]
    );
}

/// A prompted-tool-calling transcript (a small local model's answer) through
/// `agw_llm::prompted`: the body the model was sent, the deltas agw made of the answer, and how
/// the response ended.
async fn replay_prompted(name: &str) -> (Value, Vec<String>, StreamOutcome) {
    let server = FixtureServer::with_default(Transcript::provider_file(name).expect("transcript loads"))
        .await
        .expect("fixture server starts");
    let provider = server.provider("fixture");
    let mut native = request("Weather in Tokyo on 2026-02-13?");
    native.tools = vec![ToolSpec {
        name: "mock_city_weather".into(),
        description: "Mock weather for a city on a date.".into(),
        parameters: json!({"type": "object", "properties": {"city": {"type": "string"}, "date": {"type": "string"}}}),
    }];
    native.tool_choice = Some(ToolChoice::Auto);
    let stream = within(Duration::from_secs(5), provider.stream(prompted::prompt_request(native), options("react")))
        .await
        .expect("stream opens");
    let (deltas, error) = within(Duration::from_secs(5), collect(prompted::parse_calls(stream, "call_p_"))).await;
    assert!(error.is_none(), "{name}: unexpected error {error:?}");
    let sent = server.request(0).expect("one request");
    let outcome = within(Duration::from_secs(5), sent.wait_outcome()).await;
    (sent.body, describe(&deltas), outcome)
}

/// The content lines and the calls' (name, arguments) of described deltas.
fn content_and_calls(lines: &[String]) -> (Vec<&str>, Vec<(String, String)>) {
    let content = lines.iter().filter_map(|l| l.strip_prefix("content:")).collect();
    let mut calls: Vec<(String, String)> = Vec::new();
    for line in lines.iter().filter_map(|l| l.strip_prefix("tool:")) {
        let fields: Vec<&str> = line.splitn(5, '|').collect();
        if !fields[3].is_empty() {
            calls.push((fields[3].to_owned(), String::new()));
        }
        calls.last_mut().expect("a call is named first").1.push_str(fields[4]);
    }
    (content, calls)
}

#[tokio::test]
async fn prompted_qwen_on_llama_server_calls_and_is_cut_at_its_made_up_result() {
    let (body, lines, outcome) = replay_prompted("prompted-qwen-llama-server-call").await;
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none(), "{body}");
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are terse.\n\n# Tools\n") && system.contains("## mock_city_weather\n"), "{system}");

    let (content, calls) = content_and_calls(&lines);
    // One upstream token, one content delta: the text before the call streams as it came.
    assert_eq!(content, ["I", "'ll", " check", " the", " weather", " in", " Tokyo", " for", " you", ".\n"]);
    assert_eq!(calls, [("mock_city_weather".to_owned(), r#"{"city": "Tokyo", "date": "2026-02-13"}"#.to_owned())]);
    assert!(lines.iter().all(|l| !l.contains('✿')), "no marker leaves: {lines:?}");
    assert!(lines.contains(&"tool:0|call_p_1||mock_city_weather|".to_owned()), "{lines:?}");
    assert_eq!(lines.last().map(String::as_str), Some("finish:tool_calls"));
    assert!(!lines.iter().any(|l| l.starts_with("usage:")), "the usage chunk after the cut is never read");
    assert_eq!(outcome, StreamOutcome::ClientClosed, "the made-up ✿RESULT✿ closed the connection");
}

#[tokio::test]
async fn prompted_qwen_answer_drops_its_return_marker() {
    let (_, lines, outcome) = replay_prompted("prompted-qwen-llama-server-answer").await;
    let (content, calls) = content_and_calls(&lines);
    assert!(calls.is_empty());
    assert_eq!(content.concat(), "In Tokyo on 2026-02-13 it is 21 °C and sunny.");
    assert_eq!(content[0], "In", "the `: ` after the marker is dropped with it");
    assert_eq!(lines[lines.len() - 2..], ["finish:stop".to_owned(), "usage:758".to_owned()]);
    assert_eq!(outcome, StreamOutcome::Completed);
}

#[tokio::test]
async fn prompted_llama_on_ollama_malformed_then_corrected() {
    let (_, lines, _) = replay_prompted("prompted-llama-ollama-malformed").await;
    let (content, calls) = content_and_calls(&lines);
    assert!(content.is_empty(), "{lines:?}");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].1, r#"{city: "Tokyo", date: "2026-02-13"}"#);
    assert!(matches!(prompted::check_call(&calls[0].0, &calls[0].1), Err(CallProblem::NotJson { .. })));
    assert_eq!(lines[lines.len() - 2..], ["finish:tool_calls".to_owned(), "usage:729".to_owned()]);

    let (_, lines, _) = replay_prompted("prompted-llama-ollama-corrected").await;
    let (_, calls) = content_and_calls(&lines);
    assert_eq!(calls[0].1, r#"{"city": "Tokyo", "date": "2026-02-13"}"#);
    assert_eq!(prompted::check_call(&calls[0].0, &calls[0].1), Ok(()));
}
