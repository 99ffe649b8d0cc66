//! Reliability under provider faults and hostile clients (`docs/reliability.md`).
//!
//! Every scenario checks three things: the run ends with the right outcome (the right `run.error`
//! code, or a transparent retry when nothing had been streamed yet), the chat files on disk stay
//! valid JSONL that replays, and the server serves the next request. The faults `faults.rs`
//! already covered (500 forever, 429 then success, 429 forever, a chunk that is not JSON, a stall
//! mid-stream, a stream without finish, client disconnect) carry the same checks there; this file
//! has the rest.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agw_testkit::{End, StreamOutcome, Transcript};
use common::{Gateway, LiveStream, Stream, assert_chat_files_valid, assert_chat_replayable, oneshot_agent};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

// -- helpers --------------------------------------------------------------------------------------

/// A REACT agent on the fixture provider with one backend tool and one frontend tool.
fn react_agent(key: &str, model_timeout_ms: u64) -> (String, String) {
    let text = json!({
        "key": key,
        "mode": "REACT",
        "modelConfig": {"providerKey": "fixture", "model": "m"},
        "toolConfig": {"backends": ["mock_city_weather"], "frontends": ["confirm_dialog"]},
        "budget": {"runTimeoutMs": 20000, "model": {"maxCalls": 4, "timeoutMs": model_timeout_ms}},
        "react": {"systemPrompt": "You are a test agent.", "maxSteps": 3}
    });
    (format!("{key}.json"), text.to_string())
}

/// The message of the health-check run: a rule on it answers every later check.
const HEALTH_CHECK: &str = "health check after the fault";

/// The server answers the next request normally (agent `a`, a ONESHOT agent every gateway here has).
async fn assert_still_serving(gw: &Gateway) {
    gw.fixture.on_message(HEALTH_CHECK, Transcript::openai_text(&["fine"]));
    let stream = gw.run(&json!({"agentKey": "a", "message": HEALTH_CHECK})).await;
    assert_eq!(stream.last()["type"], "run.complete", "the next request is served: {:?}", stream.types());
}

/// Chat files valid and the chat of `stream` replayable; returns the replay events.
async fn assert_chat_ok(gw: &Gateway, stream: &Stream) -> Vec<Value> {
    assert_chat_files_valid(gw);
    let chat_id = stream.events()[0]["chatId"].as_str().expect("chatId").to_string();
    assert_chat_replayable(gw, &chat_id).await
}

/// The stream is well formed: seq 1..N, exactly one terminal event and it is last, every opened
/// reasoning/content/tool/action block closed exactly once, before the terminal event.
fn assert_well_formed(stream: &Stream) {
    let events = stream.events();
    let mut open: HashMap<String, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "seq is 1..N: {e}");
        let ty = e["type"].as_str().unwrap();
        let id = ["reasoningId", "contentId", "toolId", "actionId"].iter().find_map(|k| e[*k].as_str());
        if let Some(id) = id {
            if ty.ends_with(".start") {
                assert!(open.insert(id.to_string(), i).is_none(), "{id} started twice");
            } else if ty.ends_with(".end") {
                assert!(open.remove(id).is_some(), "{ty} for {id} without a start");
            }
        }
        let terminal = ty == "run.complete" || ty == "run.error";
        assert_eq!(terminal, i == events.len() - 1, "exactly one terminal event, last: {:?}", stream.types());
    }
    assert!(open.is_empty(), "blocks never closed: {open:?}");
}

fn run_error(stream: &Stream) -> Value {
    assert_well_formed(stream);
    let last = stream.last().clone();
    assert_eq!(last["type"], "run.error", "stream must end with run.error: {:?}", stream.types());
    last["error"].clone()
}

fn assert_completed(stream: &Stream) {
    assert_well_formed(stream);
    assert_eq!(stream.last()["type"], "run.complete", "run must complete: {:?}", stream.types());
}

fn text_of(stream: &Stream, ty: &str) -> String {
    stream.of_type(ty).iter().map(|e| e["delta"].as_str().unwrap()).collect()
}

/// Concatenated `content.snapshot` texts of a replay.
fn replayed_content(events: &[Value]) -> String {
    events.iter().filter(|e| e["type"] == "content.snapshot").map(|e| e["text"].as_str().unwrap()).collect()
}

/// A loopback port with nothing listening on it.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    port
}

// -- provider faults --------------------------------------------------------------------------------

#[tokio::test]
async fn http_429_with_retry_after_waits_that_long_then_retries() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.push(
        Transcript::http_error(429, r#"{"error":{"message":"slow down","type":"rate_limit"}}"#)
            .with_header("Retry-After", "1"),
    );
    gw.fixture.push(Transcript::openai_text(&["after ", "the wait"]));
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    assert_completed(&stream);
    assert_eq!(text_of(&stream, "content.delta"), "after the wait");
    let requests = gw.fixture.requests();
    assert_eq!(requests.len(), 2);
    let waited = requests[1].received_at.duration_since(requests[0].received_at);
    assert!(waited >= Duration::from_millis(950), "Retry-After: 1 must be honoured, retried after {waited:?}");
    let replay = assert_chat_ok(&gw, &stream).await;
    assert_eq!(replayed_content(&replay), "after the wait");
    assert_still_serving(&gw).await;
}

/// 429 (Retry-After 0), 500, 502 and 503 before any byte of the body: retried transparently.
#[tokio::test]
async fn transient_http_errors_before_output_are_retried_transparently() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    for status in [429, 500, 502, 503] {
        let before = gw.fixture.request_count();
        gw.fixture.push(
            Transcript::http_error(status, r#"{"error":{"message":"try again"}}"#).with_header("Retry-After", "0"),
        );
        gw.fixture.push(Transcript::openai_text(&["ok ", &status.to_string()]));
        let stream = gw.run(&json!({"agentKey": "a", "message": format!("status {status}")})).await;
        assert_completed(&stream);
        assert_eq!(text_of(&stream, "content.delta"), format!("ok {status}"));
        assert_eq!(gw.fixture.request_count() - before, 2, "{status}: one failure, one retry");
        let replay = assert_chat_ok(&gw, &stream).await;
        assert_eq!(replayed_content(&replay), format!("ok {status}"));
    }
    assert_still_serving(&gw).await;
}

/// 503 on every attempt: one try plus two retries, then a retriable `provider_error`.
#[tokio::test]
async fn http_503_forever_ends_with_retriable_provider_error() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::http_error(503, r#"{"error":{"message":"overloaded"}}"#));
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    let error = run_error(&stream);
    assert_eq!(error["code"], "provider_error");
    assert_eq!(error["retriable"], true);
    assert!(error["message"].as_str().unwrap().contains("503"), "{error}");
    assert_eq!(gw.fixture.request_count(), 3, "one attempt plus two retries");
    assert_chat_ok(&gw, &stream).await;
    assert_still_serving(&gw).await;
}

/// A 4xx other than 429 is the request's fault: no retry, not retriable.
#[tokio::test]
async fn http_400_is_not_retried() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.push(Transcript::http_error(400, r#"{"error":{"message":"bad model"}}"#));
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    let error = run_error(&stream);
    assert_eq!(error["code"], "provider_error");
    assert_eq!(error["retriable"], false);
    assert_eq!(gw.fixture.request_count(), 1);
    assert_chat_ok(&gw, &stream).await;
    assert_still_serving(&gw).await;
}

#[tokio::test]
async fn connection_refused_is_retried_then_ends_with_retriable_provider_error() {
    let dead = format!("http://127.0.0.1:{}", closed_port());
    let dead_agent = json!({
        "key": "dead", "mode": "ONESHOT",
        "modelConfig": {"providerKey": "dead", "model": "m"},
        "plain": {"systemPrompt": "x"}
    });
    let gw = Gateway::start(
        &[oneshot_agent("a", false, 5000), ("dead.json".into(), dead_agent.to_string())],
        &[
            ("AGENT_PROVIDERS_DEAD_BASE_URL", &dead),
            ("AGENT_PROVIDERS_DEAD_API_KEY", "sk-x"),
            ("AGENT_PROVIDERS_DEAD_MODEL", "m"),
        ],
    )
    .await;
    let started = Instant::now();
    let stream = gw.run(&json!({"agentKey": "dead", "message": "q"})).await;
    let error = run_error(&stream);
    assert_eq!(error["code"], "provider_error");
    assert_eq!(error["retriable"], true);
    let message = error["message"].as_str().unwrap().to_lowercase();
    assert!(message.contains("connect"), "names the connection failure: {message}");
    // Backoff 100 ms + 200 ms between the three attempts.
    assert!(started.elapsed() >= Duration::from_millis(300), "retried with backoff: {:?}", started.elapsed());
    assert!(stream.of_type("content.delta").is_empty());
    assert_chat_ok(&gw, &stream).await;
    assert_still_serving(&gw).await;
}

/// The connection is cut after two content chunks: what was streamed stays streamed and
/// recorded, the run ends with `provider_error`, the stream is never replayed.
#[tokio::test]
async fn connection_reset_mid_stream_ends_with_provider_error_and_keeps_the_partial_text() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::new().content("partial ").content("answer").with_end(End::Abort));
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    let error = run_error(&stream);
    assert_eq!(error["code"], "provider_error");
    assert!(error["message"].as_str().unwrap().contains("interrupted"), "{error}");
    assert_eq!(text_of(&stream, "content.delta"), "partial answer");
    assert_eq!(gw.fixture.request_count(), 1, "a stream that produced output is never replayed");
    assert_eq!(gw.fixture.request(0).unwrap().outcome(), StreamOutcome::Aborted);
    let replay = assert_chat_ok(&gw, &stream).await;
    assert_eq!(replayed_content(&replay), "partial answer", "what the client saw is in the history");
    assert_still_serving(&gw).await;
}

/// The provider accepts the request and never sends the headers.
#[tokio::test]
async fn stall_before_the_headers_ends_with_provider_timeout() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 300)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["late"]).with_headers_delay_ms(5_000));
    let started = Instant::now();
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    assert_eq!(run_error(&stream)["code"], "provider_timeout");
    assert!(started.elapsed() < Duration::from_secs(3), "the timeout ends the wait: {:?}", started.elapsed());
    assert_eq!(gw.fixture.request_count(), 1, "timeouts are not retried");
    assert_chat_ok(&gw, &stream).await;
    assert_still_serving(&gw).await;
}

/// The very first chunk is not JSON.
#[tokio::test]
async fn first_chunk_not_json_ends_with_provider_error() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::new().raw("data: <html>502 Bad Gateway</html>\n\n").finish("stop").done());
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    let error = run_error(&stream);
    assert_eq!(error["code"], "provider_error");
    assert!(error["message"].as_str().unwrap().contains("502 Bad Gateway"), "names the chunk: {error}");
    assert_eq!(gw.fixture.request_count(), 1);
    assert_chat_ok(&gw, &stream).await;
    assert_still_serving(&gw).await;
}

/// finish_reason and usage arrive, then the body ends without `data: [DONE]`: complete.
#[tokio::test]
async fn stream_without_done_after_a_finish_reason_completes() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::new().content("no ").content("done marker").finish("stop").usage(3, 2));
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    assert_completed(&stream);
    assert_eq!(stream.last()["finishReason"], "stop");
    let replay = assert_chat_ok(&gw, &stream).await;
    assert_eq!(replayed_content(&replay), "no done marker");
    assert_still_serving(&gw).await;
}

/// Neither finish_reason nor `[DONE]`: the answer may be cut, so the run fails.
#[tokio::test]
async fn stream_without_done_and_without_finish_ends_with_provider_error() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::new().content("cut ").content("off"));
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    let error = run_error(&stream);
    assert_eq!(error["code"], "provider_error");
    assert!(error["message"].as_str().unwrap().contains("finish"), "{error}");
    let replay = assert_chat_ok(&gw, &stream).await;
    assert_eq!(replayed_content(&replay), "cut off");
    assert_still_serving(&gw).await;
}

/// A tool-call continuation fragment for an index no call was opened on, with no id and no
/// name: nothing names a function to call, so no tool is opened or executed; the turn's text is
/// the answer and the run completes.
#[tokio::test]
async fn tool_fragment_for_an_unknown_index_starts_nothing() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000), react_agent("r", 5000)], &[]).await;
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::new()
            .content("let me check")
            .delta(json!({"tool_calls": [{"index": 7, "function": {"arguments": "{\"city\":\"Paris\"}"}}]}))
            .finish("tool_calls")
            .done(),
    );
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["answer"]));
    gw.fixture.on_stage("agent-react-final", Transcript::openai_text(&["final"]));
    let stream = gw.run(&json!({"agentKey": "r", "message": "weather?"})).await;
    assert_completed(&stream);
    assert!(stream.of_type("tool.start").is_empty(), "a nameless orphan fragment opens no tool");
    assert!(stream.of_type("tool.result").is_empty(), "and runs nothing");
    assert_eq!(text_of(&stream, "content.delta"), "let me check");
    assert_eq!(gw.fixture.request_count(), 1, "no tool result to send back, so no second turn");
    assert_chat_ok(&gw, &stream).await;
    assert_still_serving(&gw).await;
}

/// A fragment for an unknown index after a real call: attribution follows ids, so it is
/// argument text of the call being streamed; the call still gets exactly one result.
#[tokio::test]
async fn tool_fragment_for_an_unknown_index_after_a_call_is_attributed_to_that_call() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000), react_agent("r", 5000)], &[]).await;
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::new()
            .tool_call_start(0, "call_w", "mock_city_weather")
            .tool_args(0, "{\"city\":\"Paris\",")
            .tool_args(5, "\"date\":\"2026-02-13\"}")
            .finish("tool_calls")
            .done(),
    );
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["sunny"]));
    let stream = gw.run(&json!({"agentKey": "r", "message": "weather?"})).await;
    assert_completed(&stream);
    let args: String = stream.of_type("tool.args").iter().map(|e| e["delta"].as_str().unwrap()).collect();
    assert_eq!(args, "{\"city\":\"Paris\",\"date\":\"2026-02-13\"}");
    assert_eq!(stream.of_type("tool.result").len(), 1);
    assert_chat_ok(&gw, &stream).await;
    assert_still_serving(&gw).await;
}

/// The model starts a tool call and the response ends (cut, stalled or aborted) before the call's
/// arguments are complete: the tool is closed (`tool.end`) but never executed, and the run fails.
#[tokio::test]
async fn a_response_that_never_finishes_its_tool_call_fails_without_running_the_tool() {
    let unfinished =
        || Transcript::new().tool_call_start(0, "call_w", "mock_city_weather").tool_args(0, "{\"city\":\"Par");
    for (name, transcript, code) in [
        ("ended", unfinished(), "provider_error"),
        ("aborted", unfinished().with_end(End::Abort), "provider_error"),
        ("stalled", unfinished().with_end(End::Stall), "provider_timeout"),
    ] {
        let gw = Gateway::start(&[oneshot_agent("a", false, 5000), react_agent("r", 400)], &[]).await;
        gw.fixture.on_stage("agent-react-step-1", transcript);
        let stream = gw.run(&json!({"agentKey": "r", "message": "weather?"})).await;
        let error = run_error(&stream);
        assert_eq!(error["code"], code, "{name}: {error}");
        assert_eq!(stream.of_type("tool.start").len(), 1, "{name}");
        assert_eq!(stream.of_type("tool.end").len(), 1, "{name}: the open tool is closed");
        assert!(stream.of_type("tool.result").is_empty(), "{name}: a half-streamed call is never executed");
        assert_eq!(gw.fixture.request_count(), 1, "{name}: no second model turn");
        assert_chat_ok(&gw, &stream).await;
        assert_still_serving(&gw).await;
    }
}

// -- client faults ----------------------------------------------------------------------------------

/// A client that reads one byte every 100 ms from a long, fast stream (24 MiB). The run does not
/// wait for it (a slow observer never slows a run, issue 15): the provider is read at its own
/// pace, the run's event buffer stays within `agw.runs.buffer-bytes` (1 MiB here) by dropping its
/// oldest frames, and the gateway's memory stays bounded. The slow client can re-attach to what
/// is still held; what the buffer dropped is in the chat history.
#[tokio::test]
async fn slow_reader_neither_slows_the_run_nor_grows_the_gateway() {
    const CHUNKS: usize = 3_000;
    const PIECE_BYTES: usize = 8 * 1024;
    // The output cap (4 MiB of text by default) is raised: this test is about the buffer.
    let gw = Gateway::start(
        &[oneshot_agent("a", false, 20_000)],
        &[("AGW_RUNS_BUFFER_BYTES", "1048576"), ("AGW_PROVIDER_MAX_OUTPUT_BYTES", "33554432")],
    )
    .await;
    let piece = "x".repeat(PIECE_BYTES);
    let pieces: Vec<&str> = vec![piece.as_str(); CHUNKS];
    gw.fixture.set_default(Transcript::openai_text(&pieces));

    let body = json!({"agentKey": "a", "message": "a very long answer please"}).to_string();
    let rss_before = common::rss_bytes();
    let mut conn = agw_testkit::slow_client(&gw.base, "POST", "/api/ap/query", Some(&body)).await;

    let upstream = tokio::time::timeout(Duration::from_secs(5), gw.fixture.wait_for_requests(1)).await.unwrap();
    let upstream = upstream[0].clone();
    let reader = tokio::spawn(async move {
        let mut received = Vec::new();
        let mut byte = [0u8; 1];
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(3) {
            if conn.read(&mut byte).await.unwrap() == 0 {
                break;
            }
            received.push(byte[0]);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (conn, received)
    });
    let outcome = tokio::time::timeout(Duration::from_secs(20), upstream.wait_outcome()).await.expect("provider read");
    assert_eq!(outcome, StreamOutcome::Completed, "the provider stream was read to the end at its own pace");
    let (conn, received) = reader.await.unwrap();
    let rss_growth = common::rss_bytes().saturating_sub(rss_before);
    eprintln!(
        "slow reader: read {} bytes in 3 s while the run read all {} KiB from the provider; RSS grew {} KiB",
        received.len(),
        CHUNKS * PIECE_BYTES / 1024,
        rss_growth / 1024
    );
    assert!(String::from_utf8_lossy(&received).starts_with("HTTP/1.1 200"), "{:?}", String::from_utf8_lossy(&received));
    // The history write of a 24 MiB answer holds it once; the buffer holds at most 1 MiB.
    assert!(rss_growth < 96 * MIB, "the gateway's memory stays bounded: RSS grew {} KiB", rss_growth / 1024);

    let run_id = gw.state.runs.tracker().ids().pop().expect("the run is registered");
    let handle = gw.state.runs.tracker().get(&run_id).unwrap();
    let status = handle.wait_finished(Duration::from_secs(10)).await;
    assert_eq!(status.as_str(), "completed");
    assert!(handle.buffered_bytes() <= MIB as usize + PIECE_BYTES * 2, "buffer bounded: {}", handle.buffered_bytes());
    let expired = gw.client.get(format!("{}/api/ap/attach?runId={run_id}&lastSeq=0", gw.base)).send().await.unwrap();
    assert_eq!(expired.status(), 409, "the beginning was dropped from the buffer");
    drop(conn);
    let files = assert_chat_files_valid(&gw);
    assert_eq!(files.chats.len(), 1, "the whole run is recorded");
    let replay = assert_chat_replayable(&gw, &files.chats[0]).await;
    let text: usize = replayed_content(&replay).len();
    assert_eq!(text, CHUNKS * PIECE_BYTES, "nothing the slow client missed is lost");
    assert_still_serving(&gw).await;
}

/// Hundreds of submits with wrong ids (wrong run, wrong tool, blank, malformed) while a frontend
/// tool waits: none matches or disturbs the waiter, no state is left behind, the right submit
/// still lands.
#[tokio::test]
async fn a_flood_of_wrong_submits_matches_nothing_and_leaves_nothing_behind() {
    const FLOOD: usize = 600;
    let gw = Gateway::start(
        &[oneshot_agent("a", false, 5000), react_agent("r", 5000)],
        &[("AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS", "30000")],
    )
    .await;
    gw.fixture.on_stage("agent-react-step-1", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{}"]));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["thanks"]));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "r", "message": "ask me"})).await);
    live.until(|e| e["type"] == "tool.end").await;
    let run_id = live.seen.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_string();
    assert_eq!(gw.state.runs.submits().pending(), 1, "one frontend tool is waiting");

    let submit_url = format!("{}/api/ap/submit", gw.base);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..FLOOD {
        let (client, url, run_id) = (gw.client.clone(), submit_url.clone(), run_id.clone());
        tasks.spawn(async move {
            let body = match i % 6 {
                0 => json!({"runId": run_id, "toolId": format!("call_{i}"), "params": {"x": i}}).to_string(),
                1 => json!({"runId": format!("run-{i}"), "toolId": "call_fe", "params": {"x": i}}).to_string(),
                2 => json!({"runId": uuid::Uuid::new_v4().to_string(), "toolId": "call_fe", "params": {}}).to_string(),
                3 => json!({"runId": run_id, "toolId": "  ", "params": {}}).to_string(),
                4 => json!({"runId": run_id, "toolId": "call_fe"}).to_string(),
                _ => format!("{{\"runId\":\"{run_id}\",\"toolId\":"),
            };
            let resp = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("submit answered");
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.expect("envelope");
            (i % 6, status, body)
        });
    }
    let mut unmatched = 0;
    let mut rejected = 0;
    while let Some(result) = tasks.join_next().await {
        let (kind, status, body) = result.unwrap();
        match kind {
            0..=2 => {
                assert_eq!((status, body["data"]["status"].as_str()), (200, Some("unmatched")), "{body}");
                assert_eq!(body["data"]["accepted"], false);
                unmatched += 1;
            }
            _ => {
                assert_eq!(status, 400, "blank/missing/malformed fields are refused: {body}");
                rejected += 1;
            }
        }
    }
    let elapsed = started.elapsed();
    eprintln!("submit flood: {FLOOD} submits in {elapsed:?}: {unmatched} unmatched, {rejected} rejected with 400");
    assert_eq!(gw.state.runs.submits().pending(), 1, "the flood neither matched nor removed the real waiter");

    let ok: Value = gw
        .client
        .post(&submit_url)
        .json(&json!({"runId": run_id, "toolId": "call_fe", "params": {"selectedOption": "A"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ok["data"]["status"], "accepted");
    let rest = live.rest().await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete");
    assert_eq!(gw.state.runs.submits().pending(), 0, "nothing left behind");
    assert_chat_files_valid(&gw);
    assert_still_serving(&gw).await;
}

/// A hand-written HTTP/1.1 request whose body is sent by a writer task while the response is
/// read: `(status line, body bytes the client had sent when the response arrived, total body
/// bytes the client managed to send, time to the response)`. "Sent" counts bytes the kernel
/// accepted: what the server read plus what sits in the socket buffers in between.
async fn upload(gw: &Gateway, head: &str, body_bytes: u64, chunked: bool) -> (String, u64, u64, Duration) {
    let addr: std::net::SocketAddr = gw.base.trim_start_matches("http://").parse().unwrap();
    // A small send buffer, so that "sent" is close to what the server's side accepted.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_send_buffer_size(64 * 1024).unwrap();
    let conn = socket.connect(addr).await.unwrap();
    let (mut reader, mut writer) = conn.into_split();
    writer.write_all(head.as_bytes()).await.unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let (sent_w, stop_w) = (sent.clone(), stop.clone());
    let writer_task = tokio::spawn(async move {
        // A valid JSON object prefix, then filler: the server can only judge it by its size.
        let mut chunk = vec![b'x'; 64 * 1024];
        chunk[..14].copy_from_slice(b"{\"message\":\"xx");
        let mut first = true;
        while sent_w.load(Ordering::Relaxed) < body_bytes && !stop_w.load(Ordering::Relaxed) {
            let left = (body_bytes - sent_w.load(Ordering::Relaxed)).min(chunk.len() as u64) as usize;
            let piece = if first { &chunk[..left] } else { &chunk[14..14 + left.min(chunk.len() - 14)] };
            first = false;
            let result = if chunked {
                let mut framed = format!("{:x}\r\n", piece.len()).into_bytes();
                framed.extend_from_slice(piece);
                framed.extend_from_slice(b"\r\n");
                writer.write_all(&framed).await
            } else {
                writer.write_all(piece).await
            };
            if result.is_err() {
                break; // the server closed the connection
            }
            sent_w.fetch_add(piece.len() as u64, Ordering::Relaxed);
        }
        writer
    });
    let mut response = Vec::new();
    let mut buf = [0u8; 4096];
    let (status_line, sent_at_response, elapsed) = loop {
        let n = tokio::time::timeout(Duration::from_secs(30), reader.read(&mut buf)).await.expect("response").unwrap();
        assert!(n > 0, "connection closed without a response");
        response.extend_from_slice(&buf[..n]);
        if let Some(end) = response.windows(2).position(|w| w == b"\r\n") {
            let line = String::from_utf8_lossy(&response[..end]).into_owned();
            break (line, sent.load(Ordering::Relaxed), started.elapsed());
        }
    };
    // Let the writer find out whether the server still reads, then stop it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let _ = tokio::time::timeout(Duration::from_secs(5), writer_task).await;
    (status_line, sent_at_response, sent.load(Ordering::Relaxed), elapsed)
}

const MIB: u64 = 1024 * 1024;

fn query_head(addr: &str, length: Option<u64>) -> String {
    let framing = match length {
        Some(n) => format!("Content-Length: {n}"),
        None => "Transfer-Encoding: chunked".to_string(),
    };
    format!("POST /api/ap/query HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{framing}\r\n\r\n")
}

/// 100 MiB bodies are refused with 413 as soon as they pass the limit: at once when the length
/// is declared, after about the limit when it is not (chunked) — never read to the end.
#[tokio::test]
async fn a_100_mib_body_is_refused_early_with_413() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    let addr = gw.base.trim_start_matches("http://").to_string();
    let body = 100 * MIB;

    let (status, at_response, total, elapsed) = upload(&gw, &query_head(&addr, Some(body)), body, false).await;
    eprintln!(
        "100 MiB, Content-Length declared: {status} after {elapsed:?}; {at_response} bytes sent at the response, {total} in all"
    );
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    assert!(total < 4 * MIB, "the body was not read: {total} bytes went out before the server closed");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");

    let (status, at_response, total, elapsed) = upload(&gw, &query_head(&addr, None), body, true).await;
    eprintln!("100 MiB, chunked: {status} after {elapsed:?}; {at_response} bytes sent at the response, {total} in all");
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    assert!(at_response < 8 * MIB, "refused near the 1 MiB limit, not at the end: {at_response}");
    assert!(total < 8 * MIB, "the rest of the body was not read: {total}");
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");

    assert_eq!(gw.fixture.request_count(), 0);
    assert_still_serving(&gw).await;
}

/// The default limit is 1 MiB: a body of exactly 1 MiB is read, one byte more is refused.
/// `SERVER_MAX_REQUEST_BYTES` changes the limit.
#[tokio::test]
async fn one_mib_bodies_and_a_configured_limit() {
    let body_of = |size: usize| {
        let prefix = "{\"agentKey\":\"a\",\"message\":\"";
        let suffix = "\"}";
        format!("{prefix}{}{suffix}", "m".repeat(size - prefix.len() - suffix.len()))
    };
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["read it"]));
    let resp = gw.post_raw(body_of(MIB as usize)).await;
    assert_eq!(resp.status(), 200, "exactly the limit is accepted");
    let stream = common::read_stream(resp).await;
    assert_completed(&stream);
    let resp = gw.post_raw(body_of(MIB as usize + 1)).await;
    assert_eq!(resp.status(), 413);
    let envelope: Value = resp.json().await.unwrap();
    assert_eq!(envelope["code"], 413);
    let submit = gw
        .client
        .post(format!("{}/api/ap/submit", gw.base))
        .header("content-type", "application/json")
        .body(format!("{{\"runId\":\"r\",\"toolId\":\"t\",\"params\":\"{}\"}}", "p".repeat(MIB as usize)))
        .send()
        .await
        .unwrap();
    assert_eq!(submit.status(), 413, "submit has the same limit");
    assert_chat_files_valid(&gw);

    let small = Gateway::start(&[oneshot_agent("a", false, 5000)], &[("SERVER_MAX_REQUEST_BYTES", "65536")]).await;
    let addr = small.base.trim_start_matches("http://").to_string();
    let (status, _, total, elapsed) = upload(&small, &query_head(&addr, None), MIB, true).await;
    eprintln!("1 MiB chunked against a 64 KiB limit: {status} after {elapsed:?}, {total} bytes sent in all");
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    let resp = small.post_raw(body_of(65_536)).await;
    assert_eq!(resp.status(), 200, "the configured limit itself is accepted");
    assert_still_serving(&small).await;
}
