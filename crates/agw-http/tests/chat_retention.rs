//! Chat retention over real HTTP (issue 37, "Fork, delete, retain": retain): with
//! `agw.memory.retention` set, the server deletes chats no run has touched for that long — gone
//! from the chat API and from the store — but not a chat whose run waits for a person (until
//! that run has ended), nor one used recently. Off by default. Run again on PostgreSQL by
//! `.ci/run` (`AGW_TEST_CHAT_STORE=postgres`).

mod common;

use std::time::{Duration, Instant};

use agw_testkit::Transcript;
use common::{Gateway, LiveStream, ask_agent, oneshot_agent};
use serde_json::json;

/// Long enough that a chat made after the first one is still young when the first goes, on a
/// busy machine; the sweep runs often.
const RETENTION: &str = "2s";
const SWEEP: &str = "200ms";

async fn chat_status(gw: &Gateway, chat_id: &str) -> u16 {
    gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await.0
}

/// Waits (up to `within`) until the chat API answers 404 for the chat.
async fn gone_within(gw: &Gateway, chat_id: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if chat_status(gw, chat_id).await == 404 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

async fn one_run(gw: &Gateway, message: &str) -> String {
    let stream = gw.run(&json!({"agentKey": "a", "message": message})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    stream.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn untouched_chats_go_a_waiting_or_recent_one_stays() {
    let env = [("AGW_MEMORY_RETENTION", RETENTION), ("AGW_MEMORY_RETENTION_SWEEP", SWEEP)];
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000), ask_agent()], &env).await;
    gw.fixture.set_default(Transcript::openai_text(&["hello"]));
    let started = Instant::now();
    let old = one_run(&gw, "an old chat").await;

    // A run that waits for a person, from the start on.
    gw.fixture.on_message("ask me", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{\"q\":1}"]));
    gw.fixture.on_message("ask me", Transcript::openai_text(&["Done."]));
    let mut stream = LiveStream::new(gw.post_query(&json!({"agentKey": "ask", "message": "ask me"})).await);
    let start = stream.until(|e| e["type"] == "run.start").await;
    let (waiting, run_id) = (start["chatId"].as_str().unwrap().to_owned(), start["runId"].as_str().unwrap().to_owned());
    let tool_id = stream.until(|e| e["type"] == "tool.end").await["toolId"].as_str().unwrap().to_owned();

    tokio::time::sleep(Duration::from_millis(1200).saturating_sub(started.elapsed())).await;
    let recent = one_run(&gw, "a recent chat").await;

    assert!(gone_within(&gw, &old, Duration::from_secs(5)).await, "the untouched chat was deleted");
    assert!(!gw.stored_anywhere(&old), "its history, record and marks are gone");
    let (_, chats) = gw.get_json("/api/ap/chats").await;
    assert!(chats["data"].as_array().unwrap().iter().all(|c| c["chatId"] != old.as_str()), "{chats}");
    // Past the retention for the waiting chat too, with sweeps since; still well within it for
    // the recent one.
    tokio::time::sleep(Duration::from_millis(2600).saturating_sub(started.elapsed())).await;
    assert_eq!(chat_status(&gw, &waiting).await, 200, "a chat whose run waits stays");
    assert_eq!(gw.waiting_runs().await, [(run_id.clone(), waiting.clone())]);
    assert_eq!(chat_status(&gw, &recent).await, 200, "a recent chat stays");

    // Answered, the run ends in its chat; the chat is old and idle then, and goes.
    gw.submit_accepted(&run_id, &tool_id, json!({"ok": true})).await;
    assert_eq!(stream.rest().await.last().unwrap()["type"], "run.complete");
    assert!(gone_within(&gw, &waiting, Duration::from_secs(5)).await, "idle and old after its run");
    assert!(!gw.stored_anywhere(&waiting) && gw.waiting_runs().await.is_empty());
    assert!(gone_within(&gw, &recent, Duration::from_secs(5)).await, "and so, in its time, is the recent one");
}

#[tokio::test]
async fn retention_is_off_by_default() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[("AGW_MEMORY_RETENTION_SWEEP", "50ms")]).await;
    gw.fixture.set_default(Transcript::openai_text(&["hello"]));
    assert!(gw.state.settings.memory.retention.is_zero());
    let chat = one_run(&gw, "kept forever").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(chat_status(&gw, &chat).await, 200);
    assert!(gw.stored_anywhere(&chat));
}
