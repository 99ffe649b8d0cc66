//! Unit tests of the provider, and the two streaming paths against each other over real
//! loopback HTTP (whatever `AGW_OPENAI_STREAM` says, both are run here).

use std::time::Duration;

use agw_testkit::{End, FIXTURE_API_KEY, FIXTURE_MODEL, FixtureServer, RecordedRequest, Transcript, providers_dir};
use futures::StreamExt;

use super::*;

#[test]
fn invalid_configuration_is_an_error_not_a_panic() {
    assert!(matches!(OpenAiCompatibleProvider::new("p", "not a url", "k", "m"), Err(LlmError::InvalidRequest { .. })));
    let err = OpenAiCompatibleProvider::new("p", "http://127.0.0.1:1", "bad\nkey", "m").unwrap_err();
    assert!(!err.to_string().contains("bad\nkey"));
}

#[test]
fn debug_never_shows_the_key() {
    let provider = OpenAiCompatibleProvider::new("p", "http://127.0.0.1:1", "sk-very-secret", "m").unwrap();
    let text = format!("{provider:?}");
    assert!(!text.contains("sk-very-secret") && text.contains("http://127.0.0.1:1/v1/chat/completions"));
    let headers = provider.request_headers(&CallOptions { stage: "s".into(), ..Default::default() });
    assert!(!format!("{headers:?}").contains("sk-very-secret"), "sensitive header value");
    assert_eq!(provider.api_key(), "sk-very-secret");
}

#[test]
fn the_environment_selects_the_stream_path() {
    let wanted = std::env::var(STREAM_PATH_VAR).is_ok_and(|v| v.trim().eq_ignore_ascii_case("async-openai"));
    let provider = OpenAiCompatibleProvider::new("p", "http://127.0.0.1:1", "k", "m").unwrap();
    assert_eq!(matches!(provider.path, StreamPath::AsyncOpenAi(_)), wanted, "{STREAM_PATH_VAR} decides");
}

fn request() -> ChatRequest {
    ChatRequest {
        provider_key: "fixture".into(),
        model: "gpt-test".into(),
        messages: vec![crate::ChatMessage::System { content: "You are terse.".into() }, crate::ChatMessage::user("hi")],
        tools: vec![],
        tool_choice: None,
        reasoning: Default::default(),
        temperature: None,
        top_p: None,
        max_tokens: None,
        prompt_cache: Default::default(),
        response_format: None,
    }
}

fn options() -> CallOptions {
    CallOptions {
        inactivity_timeout: Duration::from_millis(1_500),
        max_retries: 1,
        stage: "parity".into(),
        run_id: "run_parity".into(),
        headers: vec![("traceparent".into(), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into())],
        ..CallOptions::default()
    }
}

/// What one call came to: the deltas, and the terminal error (its variant, and its text unless
/// it is a transport failure, whose wording comes from different readers).
#[derive(Debug, PartialEq)]
struct Outcome {
    deltas: Vec<LlmDelta>,
    error: Option<String>,
}

async fn run(server: &FixtureServer, async_openai: bool, limits: ResponseLimits) -> Outcome {
    let provider = OpenAiCompatibleProvider::new("fixture", &server.base_url(), FIXTURE_API_KEY, FIXTURE_MODEL)
        .expect("provider")
        .with_limits(limits)
        .on_async_openai(async_openai);
    let call = async {
        let mut stream = match provider.stream(request(), options()).await {
            Ok(stream) => stream,
            Err(error) => return Outcome { deltas: vec![], error: Some(describe(&error)) },
        };
        let mut deltas = Vec::new();
        while let Some(item) = stream.next().await {
            match item {
                Ok(delta) => deltas.push(delta),
                Err(error) => {
                    assert!(stream.next().await.is_none(), "an error is the last item");
                    return Outcome { deltas, error: Some(describe(&error)) };
                }
            }
        }
        Outcome { deltas, error: None }
    };
    tokio::time::timeout(Duration::from_secs(10), call).await.expect("the call ends")
}

fn describe(error: &LlmError) -> String {
    match error {
        LlmError::Connection { .. } => "Connection".to_owned(),
        other => format!("{other:?}"),
    }
}

/// Runs `transcript` through both paths and asserts they agree; returns the outcome.
async fn both_paths(transcript: Transcript, limits: ResponseLimits) -> (Outcome, [RecordedRequest; 2]) {
    let server = FixtureServer::with_default(transcript).await.expect("fixture server starts");
    let direct = run(&server, false, limits).await;
    let first = server.requests().pop().expect("a request");
    server.forget_requests();
    let via_async_openai = run(&server, true, limits).await;
    let second = server.requests().pop().expect("a request");
    assert_eq!(direct, via_async_openai);
    (direct, [first, second])
}

#[tokio::test]
async fn both_paths_send_the_same_request() {
    let (outcome, [direct, via_async_openai]) = both_paths(Transcript::openai_text(&["ok"]), Default::default()).await;
    assert!(outcome.error.is_none());
    assert_eq!(direct.method, via_async_openai.method);
    assert_eq!(direct.path, via_async_openai.path);
    assert_eq!(direct.raw_body, via_async_openai.raw_body, "same bytes");
    assert_eq!(direct.headers, via_async_openai.headers, "same headers on the wire");
    assert_eq!(direct.header("authorization"), Some(format!("Bearer {FIXTURE_API_KEY}").as_str()));
    assert_eq!(direct.header("content-type"), Some("application/json"));
    assert_eq!(direct.header("accept"), Some("text/event-stream"));
    assert_eq!(direct.header("x-agw-run-id"), Some("run_parity"));
    assert!(direct.header("traceparent").is_some());
}

#[tokio::test]
async fn both_paths_read_every_transcript_the_same() {
    let mut transcripts = Vec::new();
    for entry in std::fs::read_dir(providers_dir()).expect("transcripts dir") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_owned();
        if path.extension().is_some_and(|e| e == "json") && !name.starts_with("anthropic-") {
            let mut transcript = Transcript::load(&path).expect("transcript loads");
            transcript.headers.clear(); // no Retry-After wait: retries are tested elsewhere
            transcripts.push(transcript);
        }
    }
    transcripts.extend([
        Transcript::openai_reasoning_text(&["r"], &["c"]),
        Transcript::openai_tool_call("call_1", "f", &["{\"a\":", "1}"]),
        Transcript::new().content(" ").content("\n\n").content("").content("x").finish("stop").done(),
        // Malformed, in-stream error, no finish before [DONE], plain EOF, content after [DONE].
        Transcript::new().content("a").raw("data: {\"choices\": [oops\n\n").content("b").finish("stop").done(),
        Transcript::new().raw("data: {\"error\":{\"message\":\"overloaded\"}}\n\n").done(),
        Transcript::new().content("a").usage(1, 1).done(),
        Transcript::new().content("a"),
        Transcript::openai_text(&["a"]).content("ignored").with_end(End::Stall),
        // Comments, CRLF line ends, a frame split across writes, an event name.
        Transcript::new()
            .raw(": ping\r\n\r\n")
            .raw("data: {\"choices\":[{\"delta\":{\"content\":\"sp")
            .raw("lit\"}}]}\r\n\r\nevent: message\r\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n")
            .done(),
        // Cut mid-body, HTTP errors.
        Transcript::openai_text(&["partial", "never"]).truncated(1).with_end(End::Abort),
        Transcript::http_error(400, "bad request"),
        Transcript::http_error(503, "busy"),
    ]);
    for transcript in transcripts {
        let _ = both_paths(transcript, Default::default()).await;
    }
}

#[tokio::test]
async fn both_paths_time_out_and_enforce_the_limits_the_same() {
    let (outcome, _) =
        both_paths(Transcript::openai_text(&["a", "b"]).truncated(1).with_end(End::Stall), Default::default()).await;
    assert_eq!(outcome.error.as_deref(), Some("Timeout { phase: BetweenChunks, ms: 1500 }"));

    let limits = ResponseLimits { max_tool_calls: 2, ..Default::default() };
    let mut many = Transcript::new();
    for i in 0..4 {
        many = many.tool_call_start(i, &format!("call_{i}"), "lookup").tool_args(i, "{}");
    }
    let (outcome, _) = both_paths(many.finish("tool_calls").done(), limits).await;
    assert!(outcome.error.is_some_and(|e| e.contains("tool calls per turn")));

    let limits = ResponseLimits { max_line_bytes: 1024, ..Default::default() };
    let long = format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n", "x".repeat(4096));
    // (The line is the first thing in the body: the direct path meters whole network reads, the
    // async-openai path the body's frames, so what came before it in the same read may differ.)
    let (outcome, _) = both_paths(Transcript::new().raw(&long).finish("stop").done(), limits).await;
    assert!(outcome.error.is_some_and(|e| e.contains("LimitExceeded")));
}
