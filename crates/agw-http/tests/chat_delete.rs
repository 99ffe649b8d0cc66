//! `DELETE /api/ap/chat` over real HTTP (issue 37, "Fork, delete, retain": delete only): a chat
//! is deleted whole — history, index record, waiting marks, the retained runs' buffers — and
//! reads as one that never existed; a chat with a run in flight or waiting is refused (409
//! `chat_busy` naming the run). Another user's chat is in `ownership.rs`. Run again on
//! PostgreSQL by `.ci/run` (`AGW_TEST_CHAT_STORE=postgres`).

mod common;

use agw_testkit::Transcript;
use common::{Gateway, LiveStream, ask_agent, oneshot_agent};
use serde_json::{Value, json};

async fn delete(gw: &Gateway, chat_id: &str) -> (u16, Value) {
    let resp = gw.client.delete(format!("{}/api/ap/chat?chatId={chat_id}", gw.base)).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

fn listed(chats: &Value) -> Vec<&str> {
    chats["data"].as_array().unwrap().iter().map(|c| c["chatId"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn a_deleted_chat_is_gone_everywhere_and_its_id_starts_a_new_chat() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["hello"]));
    let first = gw.run(&json!({"agentKey": "a", "message": "remember the secret word"})).await;
    let chat_id = first.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned();
    let run_id = first.of_type("run.start")[0]["runId"].as_str().unwrap().to_owned();
    let other = gw.run(&json!({"agentKey": "a", "message": "another chat"})).await;
    let other_id = other.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned();
    assert!(gw.stored_anywhere(&chat_id));
    let attach = format!("{}/api/ap/attach?runId={run_id}", gw.base);
    assert_eq!(gw.client.get(&attach).send().await.unwrap().status(), 200, "retained before");

    let (status, body) = delete(&gw, &chat_id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"code": 0, "msg": "success", "data": {"chatId": chat_id, "deleted": true}}));

    let (status, body) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    assert_eq!(status, 404, "{body}");
    let (_, chats) = gw.get_json("/api/ap/chats").await;
    assert_eq!(listed(&chats), [other_id.as_str()]);
    assert!(gw.history(&chat_id).await.is_empty());
    assert!(!gw.stored_anywhere(&chat_id), "history, index record and marks are gone");
    assert_eq!(gw.client.get(&attach).send().await.unwrap().status(), 404, "its finished run is not attachable");
    let (status, _) = gw.get_json(&format!("/api/ap/chat?chatId={other_id}")).await;
    assert_eq!(status, 200, "the other chat is untouched");

    // Deleted twice, never made, not a UUID, no id.
    assert_eq!(delete(&gw, &chat_id).await.0, 404);
    assert_eq!(delete(&gw, "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01").await.0, 404);
    assert_eq!(delete(&gw, "not-a-chat").await.0, 400);
    let resp = gw.client.delete(format!("{}/api/ap/chat", gw.base)).send().await.unwrap();
    assert_eq!(resp.status(), 400);

    // The same id again: a new chat, whose model sees none of the old one.
    let again = gw.run(&json!({"agentKey": "a", "chatId": chat_id, "message": "who are you"})).await;
    assert_eq!(again.of_type("chat.start").len(), 1, "{:?}", again.types());
    assert_eq!(again.last()["type"], "run.complete");
    let sent = gw.fixture.requests().last().unwrap().body.to_string();
    assert!(sent.contains("who are you") && !sent.contains("secret word"), "{sent}");
    let (status, detail) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    assert_eq!(status, 200);
    assert_eq!(detail["data"]["chatName"], "who are you");
}

#[tokio::test]
async fn a_chat_whose_run_waits_for_a_person_is_not_deleted_until_the_run_ends() {
    let gw = Gateway::start(&[ask_agent()], &[]).await;
    gw.fixture
        .on_stage("agent-react-step-1", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{\"q\":1}"]));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Done."]));
    let resp = gw.post_query(&json!({"agentKey": "ask", "message": "ask me"})).await;
    assert_eq!(resp.status(), 200);
    let mut stream = LiveStream::new(resp);
    let start = stream.until(|e| e["type"] == "run.start").await;
    let (chat_id, run_id) = (start["chatId"].as_str().unwrap().to_owned(), start["runId"].as_str().unwrap().to_owned());
    let end = stream.until(|e| e["type"] == "tool.end").await;
    let tool_id = end["toolId"].as_str().unwrap().to_owned();
    // The wait is marked once the awaiting line is written.
    for _ in 0..100 {
        if !gw.waiting_runs().await.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(gw.waiting_runs().await, [(run_id.clone(), chat_id.clone())]);

    let (status, body) = delete(&gw, &chat_id).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["code"], "chat_busy", "{body}");
    assert_eq!((body["chatId"].as_str(), body["runId"].as_str()), (Some(chat_id.as_str()), Some(run_id.as_str())));
    let (status, _) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    assert_eq!(status, 200, "nothing deleted");
    assert_eq!(gw.waiting_runs().await.len(), 1, "the mark stays");

    // Answered, the run completes in its chat; then the chat can go.
    gw.submit_accepted(&run_id, &tool_id, json!({"ok": true})).await;
    let rest = stream.rest().await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete");
    let (status, body) = delete(&gw, &chat_id).await;
    assert_eq!(status, 200, "{body}");
    assert!(gw.waiting_runs().await.is_empty());
    assert!(!gw.stored_anywhere(&chat_id));
}
