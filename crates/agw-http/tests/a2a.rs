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
        ("CreateTaskPushNotificationConfig", json!({}), -32602),
        ("GetExtendedAgentCard", json!({}), -32007),
        ("SendMessage", json!({"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}}), -32602),
        (
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}, {"video": true}]}}),
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

async fn stream_rpc(gw: &Gateway, agent: &str, method: &str, params: Value, last_event_id: Option<u64>) -> String {
    let mut req = gw.client.post(format!("{}/a2a/{agent}", gw.base)).header("A2A-Version", "1.0");
    if let Some(seq) = last_event_id {
        req = req.header("Last-Event-ID", seq.to_string());
    }
    let resp = req.json(&json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params})).send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    resp.text().await.unwrap()
}

/// The SSE ids (the run's seqs) of a body's frames.
fn sse_ids(body: &str) -> Vec<u64> {
    body.split("\n\n")
        .filter_map(|f| f.lines().find_map(|l| l.strip_prefix("id: ")))
        .map(|id| id.parse().unwrap())
        .collect()
}

fn ask_gateway_agents() -> Vec<(String, String)> {
    let guarded = r#"{"key":"guarded","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
        "toolConfig":{"backends":["mock_city_weather"],"approvals":{"mock_city_weather":"ask"}},
        "react":{"systemPrompt":"You check first.","maxSteps":3}}"#;
    vec![common::ask_agent(), ("guarded.json".into(), guarded.into())]
}

/// A frontend tool's form is `INPUT_REQUIRED`: the blocking `SendMessage` answers with the task
/// waiting (what is asked in its status message), the next message of the task — a data part
/// with the form's values — answers it, and the task goes on to its end.
#[tokio::test]
async fn a_form_is_input_required_and_the_next_message_answers_it() {
    let gw = Gateway::start(&ask_gateway_agents(), &[]).await;
    let ask = r#"{"question":"Go?","options":["Yes","No"]}"#;
    gw.fixture.push(Transcript::openai_tool_call("call_c", "confirm_dialog", &[ask]));
    let body = rpc(&gw, "ask", "SendMessage", message("ask me", None)).await;
    let task = &body["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{body}");
    let asked = &task["status"]["message"]["parts"][1]["data"];
    assert_eq!((asked["kind"].as_str(), asked["toolName"].as_str()), (Some("form"), Some("confirm_dialog")), "{asked}");
    assert_eq!(asked["arguments"]["question"], "Go?");
    let (task_id, context) = (task["id"].as_str().unwrap().to_owned(), task["contextId"].as_str().unwrap().to_owned());

    // GetTask shows the wait too.
    let got = rpc(&gw, "ask", "GetTask", json!({"id": task_id})).await;
    assert_eq!(got["result"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED");

    gw.fixture.push(Transcript::openai_text(&["You ", "chose yes."]));
    let values = json!({"selectedOption": "Yes", "selectedIndex": 0});
    let answer = json!({"message": {"messageId": "m2", "role": "ROLE_USER", "taskId": task_id, "contextId": context,
        "parts": [{"data": values}]}});
    let done = rpc(&gw, "ask", "SendMessage", answer).await;
    let task = &done["result"]["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    assert_eq!(task["id"], task_id.as_str(), "the same task");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "You chose yes.");
    let last = gw.fixture.requests().last().unwrap().body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["role"].as_str(), last["content"].clone()), (Some("tool"), json!(values.to_string())));

    // The task has ended: another answer is refused.
    let again =
        json!({"message": {"messageId": "m3", "role": "ROLE_USER", "taskId": task_id, "parts": [{"text": "yes"}]}});
    let refused = rpc(&gw, "ask", "SendMessage", again).await;
    assert_eq!(refused["error"]["code"], -32004, "{refused}");
}

/// An approval is `INPUT_REQUIRED` in a stream, which ends there; the answer (`once`) streams the
/// rest of the task from where it waited.
#[tokio::test]
async fn an_approval_streams_as_input_required_and_a_word_answers_it() {
    let gw = Gateway::start(&ask_gateway_agents(), &[]).await;
    gw.fixture.push(Transcript::openai_tool_call("call_w", "mock_city_weather", &[r#"{"city":"Rome"}"#]));
    let body = stream_rpc(&gw, "guarded", "SendStreamingMessage", message("weather in Rome", None), None).await;
    let results: Vec<Value> = sse_results(&body).into_iter().map(|r| r["result"].clone()).collect();
    let last = results.last().unwrap();
    assert_eq!(last["statusUpdate"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{results:#?}");
    let asked = &last["statusUpdate"]["status"]["message"]["parts"][1]["data"];
    assert_eq!((asked["kind"].as_str(), asked["toolName"].as_str()), (Some("approval"), Some("mock_city_weather")));
    let task_id = results[0]["task"]["id"].as_str().unwrap().to_owned();
    let ids = sse_ids(&body);
    assert_eq!(ids.len(), results.len(), "every frame carries its seq");
    assert!(ids.windows(2).all(|w| w[0] <= w[1]), "{ids:?}");

    gw.fixture.push(Transcript::openai_text(&["Sunny ", "in Rome."]));
    let answer =
        json!({"message": {"messageId": "m2", "role": "ROLE_USER", "taskId": task_id, "parts": [{"text": "once"}]}});
    let body = stream_rpc(&gw, "guarded", "SendStreamingMessage", answer, None).await;
    let results: Vec<Value> = sse_results(&body).into_iter().map(|r| r["result"].clone()).collect();
    assert_eq!(results[0]["task"]["status"]["state"], "TASK_STATE_WORKING", "{results:#?}");
    assert!(
        results.iter().any(|r| r["statusUpdate"]["status"]["message"]["parts"][0]["data"]["kind"] == "tool_result"),
        "the approved call ran: {results:#?}"
    );
    let text: String = results
        .iter()
        .filter_map(|r| r.get("artifactUpdate"))
        .filter_map(|u| u["artifact"]["parts"][0]["text"].as_str())
        .collect();
    assert_eq!(text, "Sunny in Rome.");
    assert_eq!(results.last().unwrap()["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");
}

/// `SubscribeToTask` with `Last-Event-ID` (agw's seq extension, declared in the card) goes on
/// right after that event: what a client dropped in between, no duplicate; without it, the
/// task as it stands comes first.
#[tokio::test]
async fn subscribe_resumes_after_the_last_event_seen() {
    let gw = gateway().await;
    let (_, card) = gw.get_json("/a2a/a/.well-known/agent-card.json").await;
    let extension = card["capabilities"]["extensions"][0]["uri"].as_str().unwrap().to_owned();
    assert!(extension.contains("seq-resume"), "{card}");
    let words: Vec<String> = (0..12).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    gw.fixture.push(Transcript::openai_text(&words).with_chunk_delay_ms(60));
    let mut params = message("go slowly", None);
    params["configuration"] = json!({"returnImmediately": true});
    let task_id = rpc(&gw, "a", "SendMessage", params).await["result"]["task"]["id"].as_str().unwrap().to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    // A client that saw up to seq 5 and dropped.
    let body = stream_rpc(&gw, "a", "SubscribeToTask", json!({"id": task_id}), Some(5)).await;
    let ids = sse_ids(&body);
    assert!(ids.first().is_some_and(|first| *first > 5), "{ids:?}");
    let results: Vec<Value> = sse_results(&body).into_iter().map(|r| r["result"].clone()).collect();
    assert!(results[0].get("task").is_none(), "no task first: {results:#?}");
    // Seqs 1..=5 held the start and the first words; every word after them arrives once.
    let text: String = results
        .iter()
        .filter_map(|r| r.get("artifactUpdate"))
        .filter_map(|u| u["artifact"]["parts"][0]["text"].as_str())
        .collect();
    let all: String = words.concat();
    assert!(all.ends_with(&text) && !text.is_empty(), "{text:?}");
    let task = rpc(&gw, "a", "GetTask", json!({"id": task_id})).await;
    let artifact = task["result"]["artifacts"][0]["parts"][0]["text"].as_str().unwrap().to_owned();
    assert_eq!(artifact, all);
    // What the client had before seq 5 plus what followed is the whole answer.
    let seen_before = &all[..all.len() - text.len()];
    assert!(!seen_before.is_empty() && seen_before.len() < all.len(), "{seen_before:?}");
}

/// `ListTasks`: the caller's tasks of the agent, newest first, by context and status, paged.
#[tokio::test]
async fn list_tasks_filters_and_pages() {
    let gw = gateway().await;
    let mut contexts = Vec::new();
    for i in 0..3 {
        gw.fixture.push(Transcript::openai_text(&[&format!("answer {i}")]));
        let task = rpc(&gw, "a", "SendMessage", message(&format!("q{i}"), None)).await["result"]["task"].clone();
        contexts.push(task["contextId"].as_str().unwrap().to_owned());
    }
    let all = rpc(&gw, "a", "ListTasks", json!({})).await;
    assert_eq!(all["result"]["totalSize"], 3, "{all}");
    let tasks = all["result"]["tasks"].as_array().unwrap();
    assert!(tasks.iter().all(|t| t.get("artifacts").is_none()), "artifacts only when asked for");
    let page = rpc(&gw, "a", "ListTasks", json!({"pageSize": 2, "includeArtifacts": true})).await;
    assert_eq!(page["result"]["tasks"].as_array().unwrap().len(), 2);
    assert!(page["result"]["tasks"][0]["artifacts"].is_array());
    let token = page["result"]["nextPageToken"].as_str().unwrap().to_owned();
    let rest = rpc(&gw, "a", "ListTasks", json!({"pageSize": 2, "pageToken": token})).await;
    assert_eq!(rest["result"]["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(rest["result"]["nextPageToken"], "");
    let one = rpc(&gw, "a", "ListTasks", json!({"contextId": contexts[1]})).await;
    assert_eq!(one["result"]["totalSize"], 1);
    assert_eq!(one["result"]["tasks"][0]["contextId"], contexts[1].as_str());
    let none = rpc(&gw, "a", "ListTasks", json!({"status": "TASK_STATE_FAILED"})).await;
    assert_eq!(none["result"]["totalSize"], 0);
    let bad = rpc(&gw, "a", "ListTasks", json!({"pageSize": 1000})).await;
    assert_eq!(bad["error"]["code"], -32602);
}

/// A task refused before it runs (a quota) is `REJECTED`, its status message saying why.
#[tokio::test]
async fn a_quota_refusal_is_a_rejected_task() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[("AGW_QUOTAS_AGENT_RUNS_PER_MINUTE", "1")]).await;
    gw.fixture.push(Transcript::openai_text(&["One."]));
    let first = rpc(&gw, "a", "SendMessage", message("one", None)).await;
    assert_eq!(first["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{first}");
    let second = rpc(&gw, "a", "SendMessage", message("two", None)).await;
    let status = &second["result"]["task"]["status"];
    assert_eq!(status["state"], "TASK_STATE_REJECTED", "{second}");
    assert!(status["message"]["parts"][0]["text"].as_str().unwrap().contains("quota"), "{status}");
    let streamed = stream_rpc(&gw, "a", "SendStreamingMessage", message("three", None), None).await;
    let results = sse_results(&streamed);
    assert_eq!(results.len(), 1, "the rejected task alone: {results:?}");
    assert_eq!(results[0]["result"]["task"]["status"]["state"], "TASK_STATE_REJECTED");
    assert_eq!(gw.fixture.request_count(), 1, "nothing ran after the first");
}

/// Push notifications: a webhook registered with `SendMessage` (and one more with
/// `CreateTaskPushNotificationConfig`) receives each state change of the task and the task at its
/// end, with the config's token and authentication; the configs are listed, read and deleted;
/// a URL that resolves to a private address is refused unless allowed.
#[tokio::test]
async fn push_notifications_reach_the_webhooks_of_a_task() {
    let (url, received) = common::webhook_receiver(std::time::Duration::ZERO).await;
    let gw = Gateway::start(&ask_gateway_agents(), &[("AGW_A2A_PUSH_ALLOW_PRIVATE_NETWORKS", "true")]).await;
    let (_, card) = gw.get_json("/a2a/ask/.well-known/agent-card.json").await;
    assert_eq!(card["capabilities"]["pushNotifications"], true);
    let ask = r#"{"question":"Go?","options":["Yes","No"]}"#;
    gw.fixture.push(Transcript::openai_tool_call("call_c", "confirm_dialog", &[ask]));
    let mut params = message("ask me", None);
    params["configuration"] = json!({"taskPushNotificationConfig": {"url": url, "token": "tok-1",
        "authentication": {"scheme": "Bearer", "credentials": "hook-secret"}}});
    let body = rpc(&gw, "ask", "SendMessage", params).await;
    let task_id = body["result"]["task"]["id"].as_str().unwrap().to_owned();
    assert_eq!(body["result"]["task"]["status"]["state"], "TASK_STATE_INPUT_REQUIRED", "{body}");

    let second =
        rpc(&gw, "ask", "CreateTaskPushNotificationConfig", json!({"taskId": task_id, "id": "two", "url": url})).await;
    assert_eq!(second["result"]["id"], "two", "{second}");
    let listed = rpc(&gw, "ask", "ListTaskPushNotificationConfigs", json!({"taskId": task_id})).await;
    assert_eq!(listed["result"]["configs"].as_array().unwrap().len(), 2, "{listed}");
    assert!(listed.to_string().find("hook-secret").is_none(), "credentials are never shown back");
    let got = rpc(&gw, "ask", "GetTaskPushNotificationConfig", json!({"taskId": task_id, "id": "two"})).await;
    assert_eq!(got["result"]["url"], url.as_str());
    rpc(&gw, "ask", "DeleteTaskPushNotificationConfig", json!({"taskId": task_id, "id": "two"})).await;
    let listed = rpc(&gw, "ask", "ListTaskPushNotificationConfigs", json!({"taskId": task_id})).await;
    assert_eq!(listed["result"]["configs"].as_array().unwrap().len(), 1);

    gw.fixture.push(Transcript::openai_text(&["Done."]));
    let answer = json!({"message": {"messageId": "m2", "role": "ROLE_USER", "taskId": task_id,
        "parts": [{"data": {"selectedOption": "Yes", "selectedIndex": 0}}]}});
    let done = rpc(&gw, "ask", "SendMessage", answer).await;
    assert_eq!(done["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{done}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let last_is_task = |r: &common::Webhooks| {
        r.lock().unwrap().last().is_some_and(|(_, body)| body.contains("\"task\"") && body.contains("COMPLETED"))
    };
    while !last_is_task(&received) {
        assert!(std::time::Instant::now() < deadline, "the final task was never pushed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let pushed = received.lock().unwrap().clone();
    let states: Vec<String> = pushed
        .iter()
        .map(|(_, body)| {
            let v: Value = serde_json::from_str(body).unwrap();
            v["statusUpdate"]["status"]["state"].as_str().or(v["task"]["status"]["state"].as_str()).unwrap().to_owned()
        })
        .collect();
    // The first webhook's own deliveries (the second, registered while the task waited, got
    // that state too, with neither token nor credentials).
    let header = |headers: &[(String, String)], name: &str| common::header(headers, name).to_owned();
    let first: Vec<&String> = pushed
        .iter()
        .zip(&states)
        .filter(|((h, _), _)| header(h, "x-a2a-notification-token") == "tok-1")
        .map(|(_, state)| state)
        .collect();
    assert_eq!(
        first,
        ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"],
        "each change once, then the task: {states:?}"
    );
    for (headers, _) in &pushed {
        let token = header(headers, "x-a2a-notification-token");
        let auth = header(headers, "authorization");
        assert!(
            (token == "tok-1" && auth == "Bearer hook-secret") || (token.is_empty() && auth.is_empty()),
            "{headers:?}"
        );
    }

    // Without the setting, a loopback webhook is refused before anything starts.
    let strict = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    let mut params = message("hi", None);
    params["configuration"] = json!({"taskPushNotificationConfig": {"url": url}});
    let refused = rpc(&strict, "a", "SendMessage", params).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("not a public address"), "{refused}");
    assert_eq!(strict.fixture.request_count(), 0, "nothing ran");
}

/// The HTTP+JSON binding: the same methods at REST paths under `/a2a/{agentKey}`, the bare
/// objects as answers, streams without the JSON-RPC envelope, errors as HTTP statuses with a
/// `google.rpc.Status` whose `ErrorInfo` reason is A2A's.
#[tokio::test]
async fn the_http_json_binding_serves_the_same_methods() {
    let gw = gateway().await;
    let (_, card) = gw.get_json("/a2a/a/.well-known/agent-card.json").await;
    let bindings: Vec<&str> = card["supportedInterfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["protocolBinding"].as_str().unwrap())
        .collect();
    assert_eq!(bindings, ["JSONRPC", "HTTP+JSON"]);
    let base = format!("{}/a2a/a", gw.base);
    let v1 = |req: reqwest::RequestBuilder| req.header("A2A-Version", "1.0");

    gw.fixture.push(Transcript::openai_text(&["Hello ", "REST."]));
    let resp = v1(gw.client.post(format!("{base}/message:send"))).json(&message("hi", None)).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let sent: Value = resp.json().await.unwrap();
    let task = &sent["task"];
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{sent}");
    let task_id = task["id"].as_str().unwrap().to_owned();

    let got: Value = v1(gw.client.get(format!("{base}/tasks/{task_id}"))).send().await.unwrap().json().await.unwrap();
    assert_eq!(got["artifacts"][0]["parts"][0]["text"], "Hello REST.", "{got}");
    let listed: Value = v1(gw.client.get(format!("{base}/tasks?pageSize=10&includeArtifacts=true")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["totalSize"], 1, "{listed}");
    assert!(listed["tasks"][0]["artifacts"].is_array());

    gw.fixture.push(Transcript::openai_text(&["Streamed."]));
    let resp =
        v1(gw.client.post(format!("{base}/message:stream"))).json(&message("stream", None)).send().await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let results = sse_results(&resp.text().await.unwrap());
    assert!(results[0].get("task").is_some() && results[0].get("jsonrpc").is_none(), "{results:?}");
    assert_eq!(results.last().unwrap()["statusUpdate"]["status"]["state"], "TASK_STATE_COMPLETED");

    // Errors: a task that does not exist, an ended task cancelled, no version.
    let missing = v1(gw.client.get(format!("{base}/tasks/00000000-0000-4000-8000-000000000000"))).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let body: Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["status"], "NOT_FOUND");
    assert_eq!(body["error"]["details"][0]["reason"], "TASK_NOT_FOUND", "{body}");
    let cancel = v1(gw.client.post(format!("{base}/tasks/{task_id}:cancel"))).json(&json!({})).send().await.unwrap();
    assert_eq!(cancel.status(), 400);
    let body: Value = cancel.json().await.unwrap();
    assert_eq!(body["error"]["details"][0]["reason"], "TASK_NOT_CANCELABLE", "{body}");
    let unversioned = gw.client.get(format!("{base}/tasks/{task_id}")).send().await.unwrap();
    assert_eq!(unversioned.status(), 400);
    // A subscription is a POST without a body; an ended task cannot be subscribed to.
    let sub = v1(gw.client.post(format!("{base}/tasks/{task_id}:subscribe"))).send().await.unwrap();
    let body: Value = sub.json().await.unwrap();
    assert_eq!(body["error"]["details"][0]["reason"], "UNSUPPORTED_OPERATION", "{body}");
    // Any other POST needs its JSON body, as every POST route.
    let plain = v1(gw.client.post(format!("{base}/message:send")))
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 415);
}

/// A new task's data parts reach the model as JSON beside its text, its file parts as files
/// (docs/models.md); a part that is none of these is refused.
#[tokio::test]
async fn a_data_part_is_json_the_model_reads() {
    let gw = gateway().await;
    gw.fixture.push(Transcript::openai_text(&["Got it."]));
    let params = json!({"message": {"messageId": "m1", "role": "ROLE_USER",
        "parts": [{"text": "book this"}, {"data": {"flight": "LH 400", "seats": 2}}]}});
    let body = rpc(&gw, "a", "SendMessage", params).await;
    assert_eq!(body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    let sent = gw.fixture.requests().last().unwrap().body["messages"].to_string();
    assert!(sent.contains("book this") && sent.contains(r#"\"flight\":\"LH 400\""#), "{sent}");
    gw.fixture.push(Transcript::openai_text(&["Read it."]));
    let file = json!({"message": {"messageId": "m2", "role": "ROLE_USER",
        "parts": [{"text": "read this"}, {"raw": "aGk=", "mediaType": "text/plain", "filename": "n.txt"}]}});
    let body = rpc(&gw, "a", "SendMessage", file).await;
    assert_eq!(body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    let sent = gw.fixture.requests().last().unwrap().body["messages"].to_string();
    assert!(sent.contains(r#"<file name=\"n.txt\" type=\"text/plain\">\nhi\n</file>"#), "{sent}");
    let odd = json!({"message": {"messageId": "m3", "role": "ROLE_USER", "parts": [{"text": "x"}, {"video": true}]}});
    assert_eq!(rpc(&gw, "a", "SendMessage", odd).await["error"]["code"], -32005);
}
