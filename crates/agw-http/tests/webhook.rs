//! The chat-event webhook: signed, once per run, never delaying the stream.

mod common;

use std::time::{Duration, Instant};

use agw_testkit::Transcript;
use common::{Gateway, header, oneshot_agent, webhook_receiver as receiver};
use serde_json::{Value, json};

#[tokio::test]
async fn first_content_delta_posts_one_signed_chat_event() {
    let (url, received) = receiver(Duration::ZERO).await;
    let gw = Gateway::start(
        &[oneshot_agent("a", false, 5000)],
        &[("AGENT_CHAT_EVENT_CALLBACK_URL", &url), ("AGENT_CHAT_EVENT_CALLBACK_SECRET", "s3cret")],
    )
    .await;
    gw.fixture.set_default(Transcript::openai_text(&["one ", "two ", "three"]));
    let stream = gw.run(&json!({"agentKey": "a", "message": "Hello webhook"})).await;
    let run_id = stream.of_type("run.start")[0]["runId"].as_str().unwrap().to_string();
    let chat_id = stream.events()[0]["chatId"].as_str().unwrap().to_string();

    let deadline = Instant::now() + Duration::from_secs(3);
    while received.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "no chat event arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let calls = received.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "once per run, not per delta");
    let (headers, body) = &calls[0];
    let parsed: Value = serde_json::from_str(body).unwrap();
    let keys: Vec<&String> = parsed.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["chatId", "runId", "chatName", "updatedAt"]);
    assert_eq!((parsed["chatId"].as_str(), parsed["runId"].as_str()), (Some(chat_id.as_str()), Some(run_id.as_str())));
    assert_eq!(parsed["chatName"], "Hello webhook");
    assert_eq!(header(headers, "content-type"), "application/json");
    let ts: i64 = header(headers, "x-agent-timestamp").parse().unwrap();
    assert_eq!(header(headers, "x-agent-signature"), agw_http::runs::webhook::signature("s3cret", ts, body));
}

#[tokio::test]
async fn a_stalled_receiver_never_delays_the_stream() {
    let (url, received) = receiver(Duration::from_secs(5)).await;
    let gw = Gateway::start(
        &[oneshot_agent("a", false, 5000)],
        &[("AGENT_CHAT_EVENT_CALLBACK_URL", &url), ("AGENT_CHAT_EVENT_CALLBACK_REQUEST_TIMEOUT_MS", "300")],
    )
    .await;
    gw.fixture.set_default(Transcript::openai_text(&["quick"]));
    let started = Instant::now();
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    assert_eq!(stream.last()["type"], "run.complete");
    assert!(started.elapsed() < Duration::from_secs(2), "the stream waited for the webhook");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(received.lock().unwrap().len(), 1);
    // A dead receiver is only logged; the next run works.
    let again = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    assert_eq!(again.last()["type"], "run.complete");
}

#[tokio::test]
async fn disabled_webhook_sends_nothing() {
    let (url, received) = receiver(Duration::ZERO).await;
    let gw = Gateway::start(
        &[oneshot_agent("a", false, 5000)],
        &[("AGENT_CHAT_EVENT_CALLBACK_URL", &url), ("AGENT_CHAT_EVENT_CALLBACK_ENABLED", "false")],
    )
    .await;
    gw.fixture.set_default(Transcript::openai_text(&["x"]));
    gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(received.lock().unwrap().is_empty());
}
