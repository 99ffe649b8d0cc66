//! Failure handling of the OpenAI-compatible client against real loopback HTTP: retries only
//! before the body started, timeouts, malformed input, cancellation, and no buffering.

mod common;

use std::time::{Duration, Instant};

use agw_llm::{ChatProvider, LlmDelta, LlmError, OpenAiCompatibleProvider, ResponseLimits, TimeoutPhase};
use agw_testkit::{End, FIXTURE_API_KEY, FixtureServer, StreamOutcome, Transcript};
use common::{call, collect, describe, lines, options, request, within};
use futures::StreamExt;

const GUARD: Duration = Duration::from_secs(10);

async fn server() -> FixtureServer {
    FixtureServer::start().await.expect("fixture server starts")
}

#[tokio::test]
async fn whitespace_only_content_is_streamed() {
    let server = server().await;
    server.set_default(Transcript::new().content(" ").content("\n\n").content("").content("x").finish("stop").done());
    let (deltas, error) = call(&server.provider("f"), request("hi"), options("s")).await.expect("stream opens");
    assert!(error.is_none());
    assert_eq!(describe(&deltas), lines(&["content: ", "content:\n\n", "content:x", "finish:stop"]));
}

#[tokio::test]
async fn server_error_then_success_is_retried() {
    let server = server().await;
    server.push(Transcript::http_error(503, "busy"));
    server.push(Transcript::openai_text(&["ok"]));
    let (deltas, error) =
        within(GUARD, call(&server.provider("f"), request("hi"), options("s"))).await.expect("retried and opened");
    assert!(error.is_none());
    assert_eq!(describe(&deltas), lines(&["content:ok", "finish:stop", "usage:11"]));
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn rate_limit_honours_retry_after() {
    let server = server().await;
    server.push(Transcript::http_error(429, r#"{"error":{"message":"slow down"}}"#).with_header("Retry-After", "1"));
    server.push(Transcript::openai_text(&["ok"]));
    let started = Instant::now();
    let (deltas, error) =
        within(GUARD, call(&server.provider("f"), request("hi"), options("s"))).await.expect("retried and opened");
    let waited = started.elapsed();
    assert!(error.is_none());
    assert_eq!(deltas.first(), Some(&LlmDelta::Content { text: "ok".into() }));
    assert!(waited >= Duration::from_millis(950), "retried after {waited:?}, before Retry-After");
    assert!(waited < Duration::from_secs(3), "took {waited:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let gap = requests[1].received_at - requests[0].received_at;
    assert!(gap >= Duration::from_millis(950), "second attempt after {gap:?}");
}

#[tokio::test]
async fn persistent_server_error_fails_with_status_and_excerpt() {
    let server = server().await;
    server.set_default(Transcript::http_error(500, &format!("upstream exploded {}", "x".repeat(2000))));
    let error =
        within(GUARD, call(&server.provider("f"), request("hi"), options("s"))).await.expect_err("500 forever fails");
    assert_eq!(server.request_count(), 3, "one attempt plus max_retries = 2");
    assert_eq!(error.status(), Some(500));
    assert_eq!(error.code(), "provider_error");
    assert!(error.retriable());
    let LlmError::Http { body, .. } = &error else { panic!("expected an HTTP error, got {error:?}") };
    assert!(body.starts_with("upstream exploded"));
    assert!(body.chars().count() <= 512, "excerpt is bounded");
}

#[tokio::test]
async fn client_errors_are_not_retried_and_never_show_the_key() {
    let server = server().await;
    server.set_default(Transcript::http_error(
        401,
        &format!(r#"{{"error":{{"message":"Incorrect API key provided: {FIXTURE_API_KEY}"}}}}"#),
    ));
    let error = call(&server.provider("f"), request("hi"), options("s")).await.expect_err("401 fails");
    assert_eq!(server.request_count(), 1);
    assert_eq!(error.status(), Some(401));
    assert!(!error.retriable());
    let text = format!("{error} {error:?}");
    assert!(!text.contains(FIXTURE_API_KEY), "key leaked: {text}");
    assert!(text.contains("Incorrect API key provided: ***"), "{text}");
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    }; // closed again: connecting is refused
    let provider = OpenAiCompatibleProvider::new("f", &format!("http://127.0.0.1:{port}"), "k", "m").expect("provider");
    let mut opts = options("s");
    opts.max_retries = 1;
    let started = Instant::now();
    let error = within(GUARD, call(&provider, request("hi"), opts)).await.expect_err("nothing listens");
    assert!(matches!(error, LlmError::Connection { .. }), "{error:?}");
    assert_eq!(error.code(), "provider_error");
    assert!(error.retriable());
    assert!(started.elapsed() >= Duration::from_millis(100), "one backoff before the retry");
}

#[tokio::test]
async fn failure_after_output_is_not_retried() {
    let server = server().await;
    server.set_default(Transcript::openai_text(&["partial", "never"]).truncated(1).with_end(End::Abort));
    let (deltas, error) = within(GUARD, call(&server.provider("f"), request("hi"), options("s"))).await.expect("opens");
    assert_eq!(describe(&deltas), lines(&["content:partial"]));
    let error = error.expect("the cut connection is reported");
    assert!(matches!(error, LlmError::Connection { .. }), "{error:?}");
    assert_eq!(error.code(), "provider_error");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.request_count(), 1, "a stream that produced output is never replayed");
}

#[tokio::test]
async fn malformed_chunk_ends_the_stream_with_an_error() {
    let server = server().await;
    server.set_default(
        Transcript::new().content("a").raw("data: {\"choices\": [oops\n\n").content("b").finish("stop").done(),
    );
    let (deltas, error) = within(GUARD, call(&server.provider("f"), request("hi"), options("s"))).await.expect("opens");
    assert_eq!(describe(&deltas), lines(&["content:a"]));
    let error = error.expect("malformed chunk reported");
    assert!(matches!(&error, LlmError::MalformedChunk { excerpt } if excerpt.contains("oops")), "{error:?}");
    assert_eq!(error.code(), "provider_error");
    assert!(!error.retriable());
}

#[tokio::test]
async fn in_stream_error_object_is_reported() {
    let server = server().await;
    server.set_default(Transcript::new().raw("data: {\"error\":{\"message\":\"overloaded\"}}\n\n").done());
    let (deltas, error) = call(&server.provider("f"), request("hi"), options("s")).await.expect("opens");
    assert!(deltas.is_empty());
    assert!(matches!(&error, Some(LlmError::Upstream { excerpt }) if excerpt.contains("overloaded")), "{error:?}");
}

#[tokio::test]
async fn stall_mid_stream_times_out_and_closes_the_connection() {
    let server = server().await;
    server.set_default(Transcript::openai_text(&["a", "b"]).truncated(1).with_end(End::Stall));
    let mut opts = options("s");
    opts.inactivity_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let (deltas, error) = within(GUARD, call(&server.provider("f"), request("hi"), opts)).await.expect("opens");
    assert_eq!(describe(&deltas), lines(&["content:a"]));
    let error = error.expect("stall reported");
    assert!(matches!(error, LlmError::Timeout { phase: TimeoutPhase::BetweenChunks, ms: 300 }), "{error:?}");
    assert_eq!(error.code(), "provider_timeout");
    assert!(started.elapsed() >= Duration::from_millis(300));
    let recorded = server.request(0).expect("recorded");
    assert_eq!(within(GUARD, recorded.wait_outcome()).await, StreamOutcome::ClientClosed);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn no_headers_within_the_timeout_is_a_timeout() {
    let server = server().await;
    server.set_default(Transcript::openai_text(&["late"]).with_headers_delay_ms(2_000));
    let mut opts = options("s");
    opts.inactivity_timeout = Duration::from_millis(200);
    let error = within(GUARD, call(&server.provider("f"), request("hi"), opts)).await.expect_err("times out");
    assert!(matches!(error, LlmError::Timeout { phase: TimeoutPhase::BeforeFirstChunk, ms: 200 }), "{error:?}");
    assert!(error.retriable());
    assert_eq!(server.request_count(), 1, "timeouts are not retried automatically");
}

#[tokio::test]
async fn stream_without_finish_reason_is_an_error() {
    for transcript in [
        Transcript::new().content("a").usage(1, 1).done(), // [DONE] but no finish
        Transcript::new().content("a"),                    // plain EOF
    ] {
        let server = server().await;
        server.set_default(transcript);
        let (deltas, error) = call(&server.provider("f"), request("hi"), options("s")).await.expect("opens");
        assert_eq!(deltas.first(), Some(&LlmDelta::Content { text: "a".into() }));
        let error = error.expect("missing finish reported");
        assert!(matches!(error, LlmError::EndedWithoutFinish), "{error:?}");
        assert_eq!(error.code(), "provider_error");
    }
}

#[tokio::test]
async fn stream_ends_after_done_even_if_more_follows() {
    let server = server().await;
    server.set_default(Transcript::openai_text(&["a"]).content("ignored").with_end(End::Stall));
    let (deltas, error) = within(GUARD, call(&server.provider("f"), request("hi"), options("s"))).await.expect("opens");
    assert!(error.is_none());
    assert_eq!(describe(&deltas), lines(&["content:a", "finish:stop", "usage:11"]));
}

#[tokio::test]
async fn dropping_the_stream_closes_the_upstream_connection() {
    let server = server().await;
    let pieces: Vec<String> = (0..20).map(|i| format!("w{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    server.set_default(Transcript::openai_text(&pieces).with_chunk_delay_ms(100));
    let mut stream = open(&server, request("hi")).await;
    let first = within(GUARD, stream.next()).await;
    assert!(matches!(first, Some(Ok(LlmDelta::Content { .. }))));
    let dropped_at = Instant::now();
    drop(stream);
    let recorded = server.request(0).expect("recorded");
    let outcome = within(Duration::from_secs(2), recorded.wait_outcome()).await;
    assert_eq!(outcome, StreamOutcome::ClientClosed);
    assert!(dropped_at.elapsed() < Duration::from_secs(1), "closed promptly");
    assert!(recorded.frame_times().len() < 5, "the server stopped writing");
}

#[tokio::test]
async fn each_chunk_is_delivered_before_the_next_is_written() {
    let server = server().await;
    server.set_default(Transcript::openai_text(&["one", "two", "three"]).with_chunk_delay_ms(150));
    let mut stream = open(&server, request("hi")).await;
    let mut received = Vec::new();
    while let Some(item) = within(GUARD, stream.next()).await {
        if let Ok(LlmDelta::Content { .. }) = item {
            received.push(Instant::now());
        }
    }
    let frames = server.request(0).expect("recorded").frame_times();
    assert_eq!(received.len(), 3);
    for (i, at) in received.iter().enumerate() {
        assert!(*at < frames[i + 1], "content {i} was held back until the next frame was written");
    }
}

#[tokio::test]
async fn dropping_the_pending_call_cancels_the_request() {
    let server = server().await;
    server.set_default(Transcript::openai_text(&["late"]).with_headers_delay_ms(5_000));
    let pending = server.provider("f").stream(request("hi"), options("s"));
    assert!(tokio::time::timeout(Duration::from_millis(200), pending).await.is_err(), "still waiting for headers");
    let recorded = within(GUARD, server.wait_for_requests(1)).await.remove(0);
    assert_eq!(within(Duration::from_secs(2), recorded.wait_outcome()).await, StreamOutcome::ClientClosed);
}

/// Opens one call and returns its stream (panics on failure).
async fn open(server: &FixtureServer, request: agw_llm::ChatRequest) -> agw_llm::DeltaStream {
    within(GUARD, server.provider("f").stream(request, options("s"))).await.expect("stream opens")
}

#[tokio::test]
async fn collect_sees_the_whole_stream() {
    // Sanity check of the helper itself against a multi-delta chunk.
    let server = server().await;
    server.set_default(
        Transcript::new()
            .data(&serde_json::json!({"choices": [{"index": 0, "delta": {"reasoning_content": "r", "content": "c"}, "finish_reason": "stop"}], "usage": {"total_tokens": 5}}))
            .done(),
    );
    let stream = open(&server, request("hi")).await;
    let (deltas, error) = collect(stream).await;
    assert!(error.is_none());
    assert_eq!(describe(&deltas), lines(&["reasoning:r", "content:c", "finish:stop", "usage:5"]));
}

/// Attack (issue 22 #6): a provider that answers 307 to another host must not make agw re-send
/// the prompt there. Failed before the shared transport's redirect policy (reqwest follows 307
/// with the body by default).
#[tokio::test]
async fn redirect_to_another_origin_is_not_followed() {
    let elsewhere = server().await;
    elsewhere.set_default(Transcript::openai_text(&["stolen"]));
    let provider_host = server().await;
    let target = format!("{}/v1/chat/completions", elsewhere.base_url());
    provider_host.set_default(Transcript::http_error(307, "").with_header("location", &target));
    let provider = provider_host.provider("f");
    for p in [&provider as &dyn ChatProvider, &provider_host.anthropic_provider("a")] {
        let error = within(GUARD, call(p, request("my secret prompt"), options("s"))).await.expect_err("fails");
        assert!(matches!(error, LlmError::Http { status: 307, .. }), "{error:?}");
    }
    assert_eq!(elsewhere.request_count(), 0, "the prompt never reached the other origin");
    assert_eq!(provider_host.request_count(), 2, "one attempt each, 3xx is not retried");
}

/// A redirect within the provider's own origin (e.g. a path fix) is still followed.
#[tokio::test]
async fn redirect_within_the_same_origin_is_followed() {
    let server = server().await;
    let target = format!("{}/v2/chat/completions", server.base_url());
    server.push(Transcript::http_error(307, "").with_header("location", &target));
    server.push(Transcript::openai_text(&["ok"]));
    let (deltas, error) = within(GUARD, call(&server.provider("f"), request("hi"), options("s"))).await.expect("opens");
    assert!(error.is_none());
    assert_eq!(describe(&deltas)[0], "content:ok");
    assert_eq!(server.request(1).expect("second request").path, "/v2/chat/completions");
}

/// Attack (issue 14, hostile provider): a line that never ends. Before the response limits the
/// SSE readers buffered it without bound; now the call ends with `provider_error` after the cap,
/// and the provider sees the client hang up long before it finished sending.
#[tokio::test]
async fn an_endless_line_ends_the_call_at_the_line_cap() {
    let limits = ResponseLimits { max_line_bytes: 64 * 1024, ..ResponseLimits::default() };
    let piece = "x".repeat(16 * 1024);
    let mut endless = Transcript::new().raw("data: {\"choices\":[{\"delta\":{\"content\":\"");
    for _ in 0..1024 {
        endless = endless.raw(&piece); // 16 MiB in all, never a line end
    }
    let server = server().await;
    server.set_default(endless.clone());
    let providers: [Box<dyn ChatProvider>; 2] = [
        Box::new(server.provider("f").with_limits(limits)),
        Box::new(server.anthropic_provider("a").with_limits(limits)),
    ];
    for (i, provider) in providers.iter().enumerate() {
        let (deltas, error) = within(GUARD, call(provider.as_ref(), request("hi"), options("s"))).await.expect("opens");
        assert!(deltas.is_empty());
        let error = error.expect("the call fails");
        assert!(matches!(error, LlmError::LimitExceeded { limit: 65536, .. }), "{error:?}");
        assert_eq!(error.code(), "provider_error");
        let recorded = server.request(i).expect("recorded");
        assert_eq!(recorded.wait_outcome().await, StreamOutcome::ClientClosed, "agw stopped reading");
        assert!(recorded.frame_times().len() < 1024, "stopped long before the provider finished");
    }
}

/// A body that never ends (each line short) is cut at the response cap.
#[tokio::test]
async fn an_endless_body_ends_the_call_at_the_response_cap() {
    let limits = ResponseLimits { max_response_bytes: 256 * 1024, ..ResponseLimits::default() };
    // 16 MB of short comment lines: more than loopback's socket buffers can hold, so the
    // provider can only finish if agw keeps reading.
    let lines = ": keep-alive comment line that never carries any data at all\n".repeat(256);
    let mut endless = Transcript::new();
    for _ in 0..1_000 {
        endless = endless.raw(&lines);
    }
    let server = server().await;
    server.set_default(endless);
    let (_, error) = within(GUARD, call(&server.provider("f").with_limits(limits), request("hi"), options("s")))
        .await
        .expect("opens");
    let error = error.expect("fails");
    assert!(error.to_string().contains("response size"), "{error}");
    assert_eq!(server.request(0).expect("recorded").wait_outcome().await, StreamOutcome::ClientClosed);
}

/// A turn with more tool calls than the cap ends with `provider_error` naming the limit.
#[tokio::test]
async fn too_many_tool_calls_in_one_turn_end_the_call() {
    let limits = ResponseLimits { max_tool_calls: 3, ..ResponseLimits::default() };
    let mut many = Transcript::new();
    for i in 0..5 {
        many = many.tool_call_start(i, &format!("call_{i}"), "lookup").tool_args(i, "{}");
    }
    let server = server().await;
    server.set_default(many.finish("tool_calls").done());
    let (deltas, error) = within(GUARD, call(&server.provider("f").with_limits(limits), request("hi"), options("s")))
        .await
        .expect("opens");
    let error = error.expect("fails");
    assert!(error.to_string().contains("tool calls per turn"), "{error}");
    let calls = deltas.iter().filter(|d| matches!(d, LlmDelta::ToolCall(f) if f.id.is_some())).count();
    assert_eq!(calls, 3, "the calls up to the cap were streamed, the fourth was not");
}

/// Text past the output cap ends the call, whatever its framing: reasoning, answer and tool
/// arguments count together, and reading stops there (a run holds at most that much of a turn).
#[tokio::test]
async fn output_text_past_the_cap_ends_the_call() {
    let limits = ResponseLimits { max_output_bytes: 64 * 1024, ..ResponseLimits::default() };
    let piece = "y".repeat(1024);
    let mut long = Transcript::new().reasoning(&piece).tool_call_start(0, "call_0", "lookup").tool_args(0, &piece);
    // 20 MB: more than loopback's socket buffers, so the provider finishes only if agw keeps reading.
    for _ in 0..20_000 {
        long = long.content(&piece);
    }
    let server = server().await;
    server.set_default(long.finish("stop").done());
    let (deltas, error) = within(GUARD, call(&server.provider("f").with_limits(limits), request("hi"), options("s")))
        .await
        .expect("opens");
    let error = error.expect("fails");
    assert!(error.to_string().contains("output text (bytes)"), "{error}");
    assert_eq!(error.code(), "provider_error");
    let text: usize = deltas
        .iter()
        .map(|d| match d {
            LlmDelta::Content { text } | LlmDelta::Reasoning { text } => text.len(),
            LlmDelta::ToolCall(fragment) => fragment.arguments.len(),
            _ => 0,
        })
        .sum();
    assert!(text <= 64 * 1024, "nothing past the cap was handed on: {text}");
    assert_eq!(
        server.request(0).expect("recorded").wait_outcome().await,
        StreamOutcome::ClientClosed,
        "agw stopped reading"
    );
}
