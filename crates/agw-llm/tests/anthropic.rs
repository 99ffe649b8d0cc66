//! The Anthropic Messages API provider against real loopback HTTP: transcripts → deltas, the
//! request it sends, retries only before the body, timeouts, malformed input and cancellation.

mod common;

use std::time::{Duration, Instant};

use agw_llm::{
    ChatMessage, ChatProvider, LlmDelta, LlmError, ReasoningEffort, ReasoningSetting, TimeoutPhase, ToolCallMessage,
    ToolChoice, ToolSpec,
};
use agw_testkit::{End, FIXTURE_API_KEY, FixtureServer, StreamOutcome, Transcript};
use common::{call, describe, lines, options, request, within};
use futures::StreamExt;
use serde_json::json;

const GUARD: Duration = Duration::from_secs(10);

async fn server() -> FixtureServer {
    FixtureServer::start().await.expect("fixture server starts")
}

/// Replays `fixtures/providers/<name>.json` and returns every delta (no error allowed).
async fn replay(name: &str) -> Vec<LlmDelta> {
    let server = FixtureServer::with_default(Transcript::provider_file(name).expect("transcript loads")).await.unwrap();
    let (deltas, error) =
        within(GUARD, call(&server.anthropic_provider("claude"), request("hi"), options("s"))).await.expect("opens");
    assert!(error.is_none(), "{error:?}");
    assert_eq!(server.requests()[0].path, "/v1/messages");
    deltas
}

fn usage_of(deltas: &[LlmDelta]) -> serde_json::Value {
    let usages: Vec<_> = deltas.iter().filter(|d| matches!(d, LlmDelta::Usage { .. })).collect();
    assert_eq!(usages.len(), 1, "exactly one usage delta");
    assert!(matches!(deltas.last(), Some(LlmDelta::Usage { .. })), "usage comes last");
    match usages[0] {
        LlmDelta::Usage { usage } => usage.clone(),
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn text_transcript() {
    let deltas = replay("anthropic-text").await;
    assert_eq!(
        describe(&deltas[..deltas.len() - 1]),
        lines(&["content:Hello", "content:!", "content:\n\n", "content:How can I help?", "finish:stop"])
    );
    assert_eq!(
        usage_of(&deltas),
        json!({"input_tokens":25,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":12,"service_tier":"standard"})
    );
}

#[tokio::test]
async fn thinking_transcript() {
    let deltas = replay("anthropic-thinking").await;
    assert_eq!(
        describe(&deltas[..deltas.len() - 1]),
        lines(&[
            "reasoning:I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n",
            "reasoning:1071 = 2 × 462 + 147\n462 = 3 × 147 + 21\n147 = 7 × 21 + 0",
            "content:The greatest common divisor of 1071 and 462 is ",
            "content:**21**.",
            "finish:stop",
        ])
    );
    assert_eq!(usage_of(&deltas)["output_tokens"], 178);
}

#[tokio::test]
async fn tool_use_transcript() {
    let deltas = replay("anthropic-tool-use").await;
    assert_eq!(
        describe(&deltas[..deltas.len() - 1]),
        lines(&[
            "content:Okay, let me check the weather for San Francisco, CA:",
            "tool:1|toolu_01T1x1fJ34qAmk2tNTrN7Up6||get_weather|",
            "tool:1||||",
            "tool:1||||{\"location\":",
            "tool:1|||| \"San Francisco, CA\"}",
            "finish:tool_calls",
        ])
    );
    assert_eq!(usage_of(&deltas)["input_tokens"], 472);
}

fn tool_request() -> agw_llm::ChatRequest {
    let mut req = request("weather?");
    req.messages.extend([
        ChatMessage::Assistant {
            content: "Checking.".into(),
            tool_calls: vec![
                ToolCallMessage {
                    id: "toolu_a".into(),
                    call_type: "function".into(),
                    name: "get_weather".into(),
                    arguments: "{\"city\":\"Paris\"}".into(),
                },
                ToolCallMessage {
                    id: "toolu_b".into(),
                    call_type: "action".into(),
                    name: "get_time".into(),
                    arguments: String::new(),
                },
            ],
        },
        ChatMessage::Tool { tool_call_id: "toolu_a".into(), name: "get_weather".into(), content: "sunny".into() },
        ChatMessage::Tool { tool_call_id: "toolu_b".into(), name: "get_time".into(), content: "noon".into() },
    ]);
    req.tools = vec![
        ToolSpec {
            name: "get_weather".into(),
            description: "Weather by city".into(),
            parameters: json!({"type":"object","properties":{"city":{"type":"string"}}}),
        },
        ToolSpec { name: "get_time".into(), description: " ".into(), parameters: serde_json::Value::Null },
    ];
    req.tool_choice = Some(ToolChoice::Auto);
    req.temperature = Some(0.3);
    req
}

#[tokio::test]
async fn request_body_and_headers() {
    let server = server().await;
    server.set_default(Transcript::anthropic_text(&["ok"]));
    let (_, error) =
        within(GUARD, call(&server.anthropic_provider("claude"), tool_request(), options("agent-react-step-2")))
            .await
            .expect("opens");
    assert!(error.is_none(), "{error:?}");
    let recorded = server.request(0).expect("recorded");
    assert_eq!(recorded.method, "POST");
    assert_eq!(recorded.path, "/v1/messages");
    assert_eq!(recorded.header("x-api-key"), Some(FIXTURE_API_KEY));
    assert!(recorded.header("authorization").is_none(), "no bearer token");
    assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(recorded.header("content-type"), Some("application/json"));
    assert_eq!(recorded.header("accept"), Some("text/event-stream"));
    assert_eq!(recorded.header("x-agw-stage"), Some("agent-react-step-2"));
    assert_eq!(recorded.header("x-agw-run-id"), Some("run_test_1"));
    assert_eq!(
        recorded.body,
        json!({
            "model": "gpt-test",
            "max_tokens": 4096,
            "stream": true,
            "system": "You are terse.",
            "messages": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "noon"},
                ]},
            ],
            "tools": [
                {"name": "get_time", "input_schema": {"type": "object", "properties": {}}},
                {"name": "get_weather", "description": "Weather by city",
                 "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
            ],
            "tool_choice": {"type": "auto"},
            "temperature": 0.3,
        })
    );
    assert!(!recorded.raw_body.contains(FIXTURE_API_KEY));
}

#[tokio::test]
async fn thinking_budget_max_tokens_and_forced_tools() {
    let server = server().await;
    server.set_default(Transcript::anthropic_text(&["ok"]));
    let provider = server.anthropic_provider("claude");
    let mut req = request("think");
    req.reasoning = ReasoningSetting { enabled: true, effort: ReasoningEffort::Medium };
    req.max_tokens = Some(1000);
    req.temperature = Some(0.5);
    call(&provider, req.clone(), options("s")).await.expect("opens");
    let body = server.request(0).unwrap().body;
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 4096}));
    assert_eq!(body["max_tokens"], 4096 + 4096, "raised above the budget");
    assert!(body.get("temperature").is_none(), "thinking only accepts the default temperature");
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none(), "no tools offered");

    req.reasoning.effort = ReasoningEffort::Low;
    req.max_tokens = None;
    req.tools = vec![ToolSpec { name: "f".into(), description: "d".into(), parameters: json!({"type": "object"}) }];
    req.tool_choice = Some(ToolChoice::Required);
    call(&provider, req.clone(), options("s")).await.expect("opens");
    let body = server.request(1).unwrap().body;
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    assert!(body.get("thinking").is_none(), "forced tool use is incompatible with thinking");

    req.tool_choice = None;
    call(&provider, req, options("s")).await.expect("opens");
    let body = server.request(2).unwrap().body;
    assert!(body.get("tools").is_none(), "tool choice NONE sends no tools");
    assert_eq!(body["thinking"]["budget_tokens"], 1024);
    assert_eq!(body["max_tokens"], 4096);
}

#[tokio::test]
async fn signed_thinking_of_a_tool_turn_is_sent_back() {
    let server = server().await;
    let provider = server.anthropic_provider("claude");
    server.push(
        Transcript::new()
            .anthropic_start(5)
            .anthropic_block_start(0, json!({"type": "thinking", "thinking": ""}))
            .anthropic_delta(0, json!({"type": "thinking_delta", "thinking": "Need weather."}))
            .anthropic_delta(0, json!({"type": "signature_delta", "signature": "sig-1"}))
            .anthropic_block_stop(0)
            .anthropic_block_start(1, json!({"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {}}))
            .anthropic_delta(1, json!({"type": "input_json_delta", "partial_json": "{}"}))
            .anthropic_block_stop(1)
            .anthropic_stop("tool_use", 3),
    );
    server.push(Transcript::anthropic_text(&["Sunny."]));
    let mut req = request("weather?");
    req.reasoning = ReasoningSetting { enabled: true, effort: ReasoningEffort::Low };
    req.tools = vec![ToolSpec { name: "get_weather".into(), description: String::new(), parameters: json!({}) }];
    req.tool_choice = Some(ToolChoice::Auto);
    let (deltas, error) = call(&provider, req.clone(), options("s")).await.expect("opens");
    assert!(error.is_none());
    assert!(deltas.contains(&LlmDelta::Finish { reason: "tool_calls".into() }));
    req.messages.push(ChatMessage::Assistant {
        content: String::new(),
        tool_calls: vec![ToolCallMessage {
            id: "toolu_w".into(),
            call_type: "function".into(),
            name: "get_weather".into(),
            arguments: "{}".into(),
        }],
    });
    req.messages.push(ChatMessage::Tool {
        tool_call_id: "toolu_w".into(),
        name: "get_weather".into(),
        content: "sun".into(),
    });
    call(&provider, req.clone(), options("s")).await.expect("opens");
    let body = server.request(1).unwrap().body;
    assert_eq!(body["thinking"]["budget_tokens"], 1024);
    assert_eq!(
        body["messages"][1]["content"],
        json!([
            {"type": "thinking", "thinking": "Need weather.", "signature": "sig-1"},
            {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {}},
        ])
    );

    // Another provider instance never saw that turn: thinking is left out rather than rejected.
    server.push(Transcript::anthropic_text(&["Sunny."]));
    call(&server.anthropic_provider("claude"), req, options("s")).await.expect("opens");
    let body = server.request(2).unwrap().body;
    assert!(body.get("thinking").is_none());
    assert_eq!(body["messages"][1]["content"][0]["type"], "tool_use");
}

#[tokio::test]
async fn overloaded_and_server_errors_are_retried_then_success() {
    let server = server().await;
    server.push(Transcript::http_error(
        529,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ));
    server.push(Transcript::http_error(500, r#"{"type":"error","error":{"type":"api_error","message":"boom"}}"#));
    server.push(Transcript::anthropic_text(&["ok"]));
    let (deltas, error) =
        within(GUARD, call(&server.anthropic_provider("c"), request("hi"), options("s"))).await.expect("retried");
    assert!(error.is_none());
    assert_eq!(deltas.first(), Some(&LlmDelta::Content { text: "ok".into() }));
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn rate_limit_honours_retry_after() {
    let server = server().await;
    server.push(
        Transcript::http_error(429, r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow"}}"#)
            .with_header("Retry-After", "1"),
    );
    server.push(Transcript::anthropic_text(&["ok"]));
    let started = Instant::now();
    let (_, error) =
        within(GUARD, call(&server.anthropic_provider("c"), request("hi"), options("s"))).await.expect("ok");
    assert!(error.is_none());
    assert!(started.elapsed() >= Duration::from_millis(950), "waited for Retry-After");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn persistent_errors_keep_status_and_a_redacted_excerpt() {
    let server = server().await;
    server.set_default(Transcript::http_error(529, &format!("overloaded {}", "x".repeat(2000))));
    let error = within(GUARD, call(&server.anthropic_provider("c"), request("hi"), options("s")))
        .await
        .expect_err("529 forever fails");
    assert_eq!(server.request_count(), 3, "one attempt plus max_retries = 2");
    assert_eq!(error.status(), Some(529));
    assert_eq!(error.code(), "provider_error");
    let LlmError::Http { body, .. } = &error else { panic!("{error:?}") };
    assert!(body.starts_with("overloaded") && body.chars().count() <= 512);

    let server = self::server().await;
    server.set_default(Transcript::http_error(
        401,
        &format!(r#"{{"type":"error","error":{{"type":"authentication_error","message":"invalid x-api-key {FIXTURE_API_KEY}"}}}}"#),
    ));
    let error = call(&server.anthropic_provider("c"), request("hi"), options("s")).await.expect_err("401");
    assert_eq!(server.request_count(), 1, "client errors are not retried");
    let text = format!("{error} {error:?}");
    assert!(!text.contains(FIXTURE_API_KEY), "key leaked: {text}");
}

#[tokio::test]
async fn error_event_ends_the_stream() {
    let server = server().await;
    server.set_default(
        Transcript::new()
            .anthropic_start(1)
            .anthropic_block_start(0, json!({"type": "text", "text": ""}))
            .anthropic_delta(0, json!({"type": "text_delta", "text": "par"}))
            .event("error", &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
            .anthropic_stop("end_turn", 1),
    );
    let (deltas, error) = call(&server.anthropic_provider("c"), request("hi"), options("s")).await.expect("opens");
    assert_eq!(describe(&deltas), lines(&["content:par"]));
    let error = error.expect("error event reported");
    assert!(matches!(&error, LlmError::Upstream { excerpt } if excerpt == "overloaded_error: Overloaded"), "{error:?}");
    assert_eq!(error.code(), "provider_error");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(server.request_count(), 1, "never replayed");
}

#[tokio::test]
async fn malformed_data_is_an_error() {
    let server = server().await;
    server.set_default(
        Transcript::new()
            .anthropic_start(1)
            .anthropic_block_start(0, json!({"type": "text", "text": ""}))
            .anthropic_delta(0, json!({"type": "text_delta", "text": "a"}))
            .raw("event: content_block_delta\ndata: {\"type\": oops\n\n")
            .anthropic_stop("end_turn", 1),
    );
    let (deltas, error) = call(&server.anthropic_provider("c"), request("hi"), options("s")).await.expect("opens");
    assert_eq!(describe(&deltas), lines(&["content:a"]));
    let error = error.expect("malformed reported");
    assert!(matches!(&error, LlmError::MalformedChunk { excerpt } if excerpt.contains("oops")), "{error:?}");
}

#[tokio::test]
async fn stall_times_out_and_closes_the_connection() {
    let server = server().await;
    server.set_default(Transcript::anthropic_text(&["a", "b"]).truncated(3).with_end(End::Stall));
    let mut opts = options("s");
    opts.inactivity_timeout = Duration::from_millis(300);
    let (deltas, error) =
        within(GUARD, call(&server.anthropic_provider("c"), request("hi"), opts)).await.expect("opens");
    assert_eq!(describe(&deltas), lines(&["content:a"]));
    let error = error.expect("stall reported");
    assert!(matches!(error, LlmError::Timeout { phase: TimeoutPhase::BetweenChunks, ms: 300 }), "{error:?}");
    assert_eq!(error.code(), "provider_timeout");
    let recorded = server.request(0).expect("recorded");
    assert_eq!(within(GUARD, recorded.wait_outcome()).await, StreamOutcome::ClientClosed);

    let server = self::server().await;
    server.set_default(Transcript::anthropic_text(&["late"]).with_headers_delay_ms(2_000));
    let mut opts = options("s");
    opts.inactivity_timeout = Duration::from_millis(200);
    let error = within(GUARD, call(&server.anthropic_provider("c"), request("hi"), opts)).await.expect_err("timeout");
    assert!(matches!(error, LlmError::Timeout { phase: TimeoutPhase::BeforeFirstChunk, ms: 200 }), "{error:?}");
    assert_eq!(server.request_count(), 1, "timeouts are not retried automatically");
}

#[tokio::test]
async fn eof_without_stop_reason_is_an_error() {
    let server = server().await;
    // message_start, block start, one delta — then the body ends.
    server.set_default(Transcript::anthropic_text(&["a", "b"]).truncated(3));
    let (deltas, error) = call(&server.anthropic_provider("c"), request("hi"), options("s")).await.expect("opens");
    assert_eq!(describe(&deltas), lines(&["content:a"]));
    assert!(matches!(error, Some(LlmError::EndedWithoutFinish)), "{error:?}");

    // A stop reason without message_stop still completes the message (usage included).
    let server = self::server().await;
    let full = Transcript::anthropic_text(&["a"]);
    let n = full.frames.len();
    server.set_default(full.truncated(n - 1));
    let (deltas, error) = call(&server.anthropic_provider("c"), request("hi"), options("s")).await.expect("opens");
    assert!(error.is_none(), "{error:?}");
    assert_eq!(describe(&deltas[..2]), lines(&["content:a", "finish:stop"]));
    assert_eq!(deltas[2], LlmDelta::Usage { usage: json!({"input_tokens": 10, "output_tokens": 1}) });
}

#[tokio::test]
async fn nothing_after_message_stop_is_read() {
    let server = server().await;
    server.set_default(
        Transcript::anthropic_text(&["a"])
            .anthropic_delta(0, json!({"type": "text_delta", "text": "ignored"}))
            .with_end(End::Stall),
    );
    let (deltas, error) =
        within(GUARD, call(&server.anthropic_provider("c"), request("hi"), options("s"))).await.expect("opens");
    assert!(error.is_none());
    assert_eq!(describe(&deltas[..2]), lines(&["content:a", "finish:stop"]));
    assert_eq!(deltas.len(), 3);
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let server = server().await;
    let pieces: Vec<String> = (0..20).map(|i| format!("w{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    server.set_default(Transcript::anthropic_text(&pieces).with_chunk_delay_ms(100));
    let mut stream =
        within(GUARD, server.anthropic_provider("c").stream(request("hi"), options("s"))).await.expect("opens");
    let first = within(GUARD, stream.next()).await;
    assert!(matches!(first, Some(Ok(LlmDelta::Content { .. }))), "{first:?}");
    let dropped_at = Instant::now();
    drop(stream);
    let recorded = server.request(0).expect("recorded");
    assert_eq!(within(Duration::from_secs(2), recorded.wait_outcome()).await, StreamOutcome::ClientClosed);
    assert!(dropped_at.elapsed() < Duration::from_secs(1), "closed promptly");
    assert!(recorded.frame_times().len() < 8, "the server stopped writing");
}

#[tokio::test]
async fn each_delta_arrives_before_the_next_event_is_written() {
    let server = server().await;
    server.set_default(Transcript::anthropic_text(&["one", "two", "three"]).with_chunk_delay_ms(150));
    let mut stream =
        within(GUARD, server.anthropic_provider("c").stream(request("hi"), options("s"))).await.expect("opens");
    let mut received = Vec::new();
    while let Some(item) = within(GUARD, stream.next()).await {
        if let Ok(LlmDelta::Content { .. }) = item {
            received.push(Instant::now());
        }
    }
    let frames = server.request(0).expect("recorded").frame_times();
    assert_eq!(received.len(), 3);
    // Frames: message_start, block_start, then one per text delta (indexes 2, 3, 4).
    for (i, at) in received.iter().enumerate() {
        assert!(*at < frames[i + 3], "content {i} was held back until the next event was written");
    }
}

/// The output cap applies to the Anthropic stream the same way (answer and thinking together).
#[tokio::test]
async fn output_text_past_the_cap_ends_the_call() {
    let limits = agw_llm::ResponseLimits { max_output_bytes: 32 * 1024, ..agw_llm::ResponseLimits::default() };
    let piece = "z".repeat(1024);
    // 20 MB: more than loopback's socket buffers, so the provider finishes only if agw keeps reading.
    let pieces: Vec<&str> = vec![piece.as_str(); 20_000];
    let server = FixtureServer::with_default(Transcript::anthropic_text(&pieces)).await.unwrap();
    let provider = server.anthropic_provider("claude").with_limits(limits);
    let (deltas, error) = within(GUARD, call(&provider, request("hi"), options("s"))).await.expect("opens");
    let error = error.expect("fails");
    assert!(error.to_string().contains("output text (bytes)"), "{error}");
    let text: usize = deltas.iter().map(|d| if let LlmDelta::Content { text } = d { text.len() } else { 0 }).sum();
    assert!(text <= 32 * 1024, "nothing past the cap was handed on: {text}");
    assert_eq!(server.request(0).expect("recorded").wait_outcome().await, StreamOutcome::ClientClosed);
}
