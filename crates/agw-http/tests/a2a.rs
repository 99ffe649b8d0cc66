//! A2A 1.0 (issue 38, first part) over loopback against the scripted fixture provider: agent
//! cards, the JSON-RPC binding's `SendMessage` (blocking and `returnImmediately`),
//! `SendStreamingMessage`, `GetTask`, `CancelTask`, `SubscribeToTask`, a follow-up message in the
//! same `contextId` continuing the chat, the version check and the protocol's errors.

mod common;

use agw_testkit::Transcript;
use common::{Gateway, oneshot_agent};
use serde_json::{Value, json};

async fn gateway() -> Gateway {
    Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await
}

async fn rpc(gw: &Gateway, agent: &str, method: &str, params: Value) -> Value {
    let resp = gw
        .client
        .post(format!("{}/a2a/{agent}", gw.base))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!((body["jsonrpc"].as_str(), &body["id"]), (Some("2.0"), &json!(7)), "{body}");
    body
}

fn message(text: &str, context: Option<&str>) -> Value {
    let mut m = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]});
    if let Some(context) = context {
        m["contextId"] = json!(context);
    }
    json!({"message": m})
}

/// The `data:` payloads of an SSE body.
fn sse_results(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|frame| frame.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|data| serde_json::from_str::<Value>(data).unwrap())
        .collect()
}

#[tokio::test]
async fn every_agent_has_a_card_naming_its_json_rpc_endpoint() {
    let gw = gateway().await;
    let (status, card) = gw.get_json("/a2a/a/.well-known/agent-card.json").await;
    assert_eq!(status, 200, "{card}");
    let iface = &card["supportedInterfaces"][0];
    assert_eq!(iface["protocolBinding"], "JSONRPC");
    assert_eq!(iface["protocolVersion"], "1.0");
    assert!(iface["url"].as_str().unwrap().ends_with("/a2a/a"), "{iface}");
    assert_eq!(card["capabilities"]["streaming"], true);
    assert_eq!(card["skills"][0]["id"], "a");
    assert!(card.get("securitySchemes").is_none(), "no auth, no scheme");
    let (status, site) = gw.get_json("/.well-known/agent-card.json").await;
    assert_eq!((status, &site["skills"][0]["id"]), (200, &json!("a")), "the default agent's card");
    let (status, _) = gw.get_json("/a2a/nobody/.well-known/agent-card.json").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn send_message_runs_the_agent_and_answers_with_the_completed_task() {
    let gw = gateway().await;
    gw.fixture.push(Transcript::openai_text(&["Hello ", "there."]));
    let body = rpc(&gw, "a", "SendMessage", message("hi", None)).await;
    let task = &body["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Hello there.");
    let (task_id, context) = (task["id"].as_str().unwrap(), task["contextId"].as_str().unwrap().to_owned());
    assert!(agw_protocol::ids::canonical_uuid(&context).is_some(), "the context is the chat: {context}");

    // GetTask reads the same task back.
    let got = rpc(&gw, "a", "GetTask", json!({"id": task_id})).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_COMPLETED", "{got}");
    assert_eq!(got["result"]["artifacts"][0]["parts"][0]["text"], "Hello there.");

    // A follow-up in the same context continues the chat: the model sees the first exchange.
    gw.fixture.push(Transcript::openai_text(&["Again."]));
    let next = rpc(&gw, "a", "SendMessage", message("and now?", Some(&context))).await;
    assert_eq!(next["result"]["task"]["contextId"], context.as_str());
    let last = gw.fixture.requests().last().unwrap().body.to_string();
    assert!(last.contains("Hello there.") && last.contains("and now?"), "{last}");
}

#[tokio::test]
async fn send_streaming_message_streams_one_artifact_update_per_delta() {
    let gw = gateway().await;
    gw.fixture.push(Transcript::openai_text(&["One ", "two ", "three."]));
    let resp = gw
        .client
        .post(format!("{}/a2a/a", gw.base))
        .header("A2A-Version", "1.0")
        .json(
            &json!({"jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage", "params": message("count", None)}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let results = sse_results(&resp.text().await.unwrap());
    assert!(results.iter().all(|r| r["id"] == "s1" && r["jsonrpc"] == "2.0"));
    let results: Vec<&Value> = results.iter().map(|r| &r["result"]).collect();
    assert_eq!(results[0]["task"]["status"]["state"], "TASK_STATE_SUBMITTED", "{results:?}");
    let deltas: Vec<&str> = results
        .iter()
        .filter_map(|r| r.get("artifactUpdate"))
        .filter_map(|u| u["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(deltas, ["One ", "two ", "three."]);
    let last = results.last().unwrap();
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
}

#[tokio::test]
async fn a_task_returned_at_once_is_cancelled_and_subscribed_to() {
    let gw = gateway().await;
    let slow: Vec<String> = (0..50).map(|i| format!("w{i} ")).collect();
    let slow: Vec<&str> = slow.iter().map(String::as_str).collect();
    gw.fixture.push(Transcript::openai_text(&slow).with_chunk_delay_ms(50));
    let mut params = message("take your time", None);
    params["configuration"] = json!({"returnImmediately": true});
    let body = rpc(&gw, "a", "SendMessage", params).await;
    let task_id = body["result"]["task"]["id"].as_str().unwrap().to_owned();
    assert!(!body["result"]["task"]["status"]["state"].as_str().unwrap().contains("COMPLETED"), "{body}");

    // SubscribeToTask: the stream from the task's start, live.
    let resp = gw
        .client
        .post(format!("{}/a2a/a", gw.base))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task_id}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let cancelled = rpc(&gw, "a", "CancelTask", json!({"id": task_id})).await;
    assert_eq!(cancelled["result"]["status"]["state"], "TASK_STATE_CANCELED", "{cancelled}");
    let results = sse_results(&resp.text().await.unwrap());
    assert_eq!(results.last().unwrap()["result"]["statusUpdate"]["status"]["state"], "TASK_STATE_CANCELED");
    assert!(results.iter().any(|r| r["result"].get("artifactUpdate").is_some()), "it had streamed");

    let again = rpc(&gw, "a", "CancelTask", json!({"id": task_id})).await;
    assert_eq!(again["error"]["code"], -32002, "an ended task is not cancelable: {again}");
    let ended = rpc(&gw, "a", "SubscribeToTask", json!({"id": task_id})).await;
    assert_eq!(ended["error"]["code"], -32004, "{ended}");
}

/// `a2a.enabled: false` takes one agent off A2A; `agw.a2a.enabled=false` all of them.
#[tokio::test]
async fn agents_opt_out_alone_or_all_at_once() {
    let hidden = r#"{"key":"hidden","mode":"ONESHOT","modelConfig":{"providerKey":"fixture","model":"m"},
        "a2a":{"enabled":false},"plain":{"systemPrompt":"s"}}"#;
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000), ("hidden.json".into(), hidden.into())], &[]).await;
    let (status, _) = gw.get_json("/a2a/hidden/.well-known/agent-card.json").await;
    assert_eq!(status, 404);
    let resp = gw
        .client
        .post(format!("{}/a2a/hidden", gw.base))
        .header("A2A-Version", "1.0")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": message("hi", None)}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(gw.get_json("/a2a/a/.well-known/agent-card.json").await.0, 200, "the others stay");
    let off = Gateway::start(&[oneshot_agent("a", false, 5000)], &[("AGW_A2A_ENABLED", "false")]).await;
    assert_eq!(off.get_json("/a2a/a/.well-known/agent-card.json").await.0, 404);
    assert_eq!(off.get_json("/.well-known/agent-card.json").await.0, 404);
    assert_eq!(gw.fixture.request_count() + off.fixture.request_count(), 0, "nothing ran");
}

#[tokio::test]
async fn the_protocols_errors() {
    let gw = gateway().await;
    // No A2A-Version means 0.3.
    let resp = gw
        .client
        .post(format!("{}/a2a/a", gw.base))
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}))
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32009, "{body}");
    let cases = [
        ("GetTask", json!({"id": "00000000-0000-4000-8000-000000000000"}), -32001),
        ("GetTask", json!({}), -32602),
        ("NoSuchMethod", json!({}), -32601),
        ("CreateTaskPushNotificationConfig", json!({}), -32003),
        ("GetExtendedAgentCard", json!({}), -32007),
        ("SendMessage", json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}), -32602),
        (
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"url": "http://x/y"}]}}),
            -32005,
        ),
    ];
    for (method, params, code) in cases {
        let body = rpc(&gw, "a", method, params.clone()).await;
        assert_eq!(body["error"]["code"], code, "{method} {params}: {body}");
    }
    let resp = gw
        .client
        .post(format!("{}/a2a/a", gw.base))
        .header("A2A-Version", "1.0")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!((body["error"]["code"].as_i64(), &body["id"]), (Some(-32700), &Value::Null), "{body}");
}
