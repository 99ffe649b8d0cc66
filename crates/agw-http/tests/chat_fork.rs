//! `POST /api/ap/chat/fork` over real HTTP (issue 37, "Fork, delete, retain": fork): a new chat
//! holding the source's history up to a run (or a step), whose next query continues from there
//! — the scripted provider's recorded request shows what the model saw. Edit and resend is a
//! fork `before` the run. A run in flight or waiting is refused (409 `chat_busy`), a run that is
//! not in the chat is 404 `fork_point_not_found`. Another user's chat is in `ownership.rs`. Run
//! again on PostgreSQL by `.ci/run` (`AGW_TEST_CHAT_STORE=postgres`).

mod common;

use agw_testkit::Transcript;
use common::{Gateway, LiveStream, ask_agent, oneshot_agent};
use serde_json::{Value, json};

/// A REACT agent with a backend tool: its runs have several steps.
fn weather_agent() -> (String, String) {
    let text = json!({"key": "w", "mode": "REACT", "modelConfig": {"providerKey": "fixture", "model": "m"},
        "toolConfig": {"backends": ["mock_city_weather"]},
        "react": {"systemPrompt": "You check the weather.", "maxSteps": 4}});
    ("w.json".into(), text.to_string())
}

async fn fork(gw: &Gateway, body: Value) -> (u16, Value) {
    let resp = gw.client.post(format!("{}/api/ap/chat/fork", gw.base)).json(&body).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// A whole run; its (chatId, runId).
async fn run(gw: &Gateway, body: Value) -> (String, String) {
    let stream = gw.run(&body).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let start = stream.of_type("run.start")[0];
    (start["chatId"].as_str().unwrap().to_owned(), start["runId"].as_str().unwrap().to_owned())
}

/// The chat's replay (`GET /api/ap/chat`) as text, to look for what it holds.
async fn replay(gw: &Gateway, chat_id: &str) -> String {
    let (status, detail) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    assert_eq!(status, 200, "{detail}");
    detail["data"].to_string()
}

/// The messages of the provider's last request, as text.
fn last_request(gw: &Gateway) -> String {
    gw.fixture.requests().last().unwrap().body["messages"].to_string()
}

/// A chat of two runs on the ONESHOT agent: (chatId, run 1, run 2).
async fn two_runs(gw: &Gateway) -> (String, String, String) {
    gw.fixture.on_message("first question", Transcript::openai_text(&["answer one"]));
    gw.fixture.on_message("second question", Transcript::openai_text(&["answer two"]));
    gw.fixture.on_message("third question", Transcript::openai_text(&["answer three"]));
    let (chat_id, run1) = run(gw, json!({"agentKey": "a", "message": "first question"})).await;
    let (_, run2) = run(gw, json!({"agentKey": "a", "chatId": chat_id, "message": "second question"})).await;
    (chat_id, run1, run2)
}

#[tokio::test]
async fn a_fork_after_a_run_holds_that_run_and_its_next_query_continues_from_there() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    let (chat_id, run1, _) = two_runs(&gw).await;
    let source_before = gw.history_json(&chat_id).await;

    let (status, body) = fork(&gw, json!({"chatId": chat_id, "runId": run1})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!((body["code"].as_i64(), body["msg"].as_str()), (Some(0), Some("success")));
    let data = &body["data"];
    let fork_id = data["chatId"].as_str().unwrap().to_owned();
    assert_ne!(fork_id, chat_id);
    assert_eq!(data["forkedFrom"], json!({"chatId": chat_id, "runId": run1, "position": "after"}));
    assert_eq!(data["chatName"], "first question");
    let runs = data["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["sourceRunId"], run1.as_str());
    let new_run = runs[0]["runId"].as_str().unwrap();
    assert_ne!(new_run, run1, "a copied run gets an id of its own");

    // The fork's replay has run 1 only; it is listed with the source's name; the source is as it was.
    let replayed = replay(&gw, &fork_id).await;
    assert!(replayed.contains("first question") && replayed.contains("answer one"), "{replayed}");
    assert!(!replayed.contains("second question") && !replayed.contains("answer two"), "{replayed}");
    // The run is the fork's own; its request and content ids are kept as stored (they were
    // derived from the source's run id, and name things only within a chat).
    let (_, detail) = gw.get_json(&format!("/api/ap/chat?chatId={fork_id}")).await;
    let run_ids: Vec<&Value> =
        detail["data"]["events"].as_array().unwrap().iter().filter_map(|e| e.get("runId")).collect();
    assert!(!run_ids.is_empty() && run_ids.iter().all(|id| *id == new_run), "{run_ids:?}");
    let (_, chats) = gw.get_json("/api/ap/chats").await;
    let listed = chats["data"].as_array().unwrap();
    let entry = listed.iter().find(|c| c["chatId"] == fork_id.as_str()).expect("the fork is listed");
    assert_eq!((entry["chatName"].as_str(), entry["firstAgentKey"].as_str()), (Some("first question"), Some("a")));
    assert_eq!(gw.history_json(&chat_id).await, source_before, "the source is unchanged");
    let lines = gw.history_json(&fork_id).await;
    assert!(lines.iter().all(|l| l["chatId"] == fork_id.as_str() && l["runId"] == new_run), "{lines:?}");

    // The next query continues the fork: the model sees run 1 and not run 2.
    let (continued, _) = run(&gw, json!({"agentKey": "a", "chatId": fork_id, "message": "third question"})).await;
    assert_eq!(continued, fork_id);
    let sent = last_request(&gw);
    assert!(
        sent.contains("first question") && sent.contains("answer one") && sent.contains("third question"),
        "{sent}"
    );
    assert!(!sent.contains("second question") && !sent.contains("answer two"), "{sent}");

    // Without a run: the whole chat.
    let (status, body) = fork(&gw, json!({"chatId": chat_id})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["runs"].as_array().unwrap().len(), 2);
    assert_eq!(body["data"]["forkedFrom"], json!({"chatId": chat_id, "position": "after"}));
}

#[tokio::test]
async fn edit_and_resend_is_a_fork_before_the_run_then_a_query() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    let (chat_id, run1, run2) = two_runs(&gw).await;

    let (status, body) = fork(&gw, json!({"chatId": chat_id, "runId": run2, "position": "before"})).await;
    assert_eq!(status, 200, "{body}");
    let fork_id = body["data"]["chatId"].as_str().unwrap().to_owned();
    assert_eq!(body["data"]["forkedFrom"]["position"], "before");
    let replayed = replay(&gw, &fork_id).await;
    assert!(replayed.contains("first question") && !replayed.contains("second question"), "{replayed}");
    gw.fixture.on_message("edited", Transcript::openai_text(&["edited answer"]));
    run(&gw, json!({"agentKey": "a", "chatId": fork_id, "message": "second question, edited"})).await;
    let sent = last_request(&gw);
    assert!(sent.contains("answer one") && sent.contains("second question, edited"), "{sent}");
    assert!(!sent.contains("answer two"), "{sent}");

    // Before the first run: a chat of its own with nothing in it yet.
    let (status, body) = fork(&gw, json!({"chatId": chat_id, "runId": run1, "position": "before"})).await;
    assert_eq!(status, 200, "{body}");
    let empty = body["data"]["chatId"].as_str().unwrap().to_owned();
    assert!(body["data"]["runs"].as_array().unwrap().is_empty());
    assert!(gw.history(&empty).await.is_empty());
    run(&gw, json!({"agentKey": "a", "chatId": empty, "message": "first question, edited"})).await;
    let sent = last_request(&gw);
    assert!(sent.contains("first question, edited") && !sent.contains("answer one"), "{sent}");
}

#[tokio::test]
async fn a_step_level_fork_keeps_the_run_up_to_that_step() {
    let gw = Gateway::start(&[weather_agent()], &[]).await;
    gw.fixture
        .on_message("paris", Transcript::openai_tool_call("call_w", "mock_city_weather", &["{\"city\":\"Paris\"}"]));
    gw.fixture.on_message("paris", Transcript::openai_text(&["Sunny in Paris."]));
    let (chat_id, run1) = run(&gw, json!({"agentKey": "w", "message": "weather in paris"})).await;
    let steps: Vec<i64> = gw
        .history_json(&chat_id)
        .await
        .iter()
        .filter(|l| l["_type"] == "step")
        .map(|l| l["_seq"].as_i64().unwrap())
        .collect();
    assert!(steps.len() >= 2, "a tool step and an answer step: {steps:?}");
    let first = steps[0];

    let (status, body) = fork(&gw, json!({"chatId": chat_id, "runId": run1, "stepSeq": first})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["forkedFrom"]["stepSeq"], first);
    let fork_id = body["data"]["chatId"].as_str().unwrap().to_owned();
    let lines = gw.history_json(&fork_id).await;
    let kept: Vec<i64> = lines.iter().filter(|l| l["_type"] == "step").map(|l| l["_seq"].as_i64().unwrap()).collect();
    assert_eq!(kept, [first]);
    let replayed = replay(&gw, &fork_id).await;
    assert!(replayed.contains("call_w") && !replayed.contains("Sunny in Paris."), "{replayed}");

    gw.fixture.on_message("tomorrow", Transcript::openai_text(&["Rain tomorrow."]));
    run(&gw, json!({"agentKey": "w", "chatId": fork_id, "message": "and tomorrow?"})).await;
    let sent = last_request(&gw);
    assert!(sent.contains("weather in paris") && sent.contains("and tomorrow?"), "{sent}");
    assert!(!sent.contains("Sunny in Paris."), "the step after the cut is not in the fork: {sent}");

    // A step the run does not have, a run the chat does not have, a bad body.
    let (status, body) = fork(&gw, json!({"chatId": chat_id, "runId": run1, "stepSeq": 99})).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("fork_point_not_found")), "{body}");
    assert_eq!(body["stepSeq"], 99);
    let unknown = "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01";
    let (status, body) = fork(&gw, json!({"chatId": chat_id, "runId": unknown})).await;
    assert_eq!((status, body["code"].as_str()), (404, Some("fork_point_not_found")), "{body}");
    assert_eq!((body["chatId"].as_str(), body["runId"].as_str()), (Some(chat_id.as_str()), Some(unknown)));
    let (status, _) = fork(&gw, json!({"chatId": unknown})).await;
    assert_eq!(status, 404, "a chat that does not exist");
    for bad in [
        json!({"chatId": "not-a-chat"}),
        json!({"chatId": chat_id, "runId": run1, "position": "before", "stepSeq": 1}),
        json!({"chatId": chat_id, "stepSeq": 1}),
        json!({"chatId": chat_id, "runId": run1, "stepSeq": 0}),
        json!({"chatId": chat_id, "position": "sideways"}),
        json!({"runId": run1}),
    ] {
        let (status, body) = fork(&gw, bad.clone()).await;
        assert_eq!(status, 400, "{bad}: {body}");
    }
}

#[tokio::test]
async fn a_run_that_has_not_finished_is_refused_but_forking_before_it_is_not() {
    let gw = Gateway::start(&[ask_agent()], &[]).await;
    gw.fixture.on_message("hello", Transcript::openai_text(&["Hi."]));
    let (chat_id, _) = run(&gw, json!({"agentKey": "ask", "message": "hello"})).await;
    gw.fixture.on_message("ask me", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{\"q\":1}"]));
    gw.fixture.on_message("ask me", Transcript::openai_text(&["Done."]));
    let resp = gw.post_query(&json!({"agentKey": "ask", "chatId": chat_id, "message": "ask me"})).await;
    let mut stream = LiveStream::new(resp);
    let run_id = stream.until(|e| e["type"] == "run.start").await["runId"].as_str().unwrap().to_owned();
    let tool_id = stream.until(|e| e["type"] == "tool.end").await["toolId"].as_str().unwrap().to_owned();

    // In flight, then waiting (once its `awaiting` line is written): refused either way.
    for _ in 0..100 {
        let (status, body) = fork(&gw, json!({"chatId": chat_id, "runId": run_id})).await;
        assert_eq!((status, body["code"].as_str()), (409, Some("chat_busy")), "{body}");
        assert_eq!(body["runId"], run_id.as_str());
        if !gw.waiting_runs().await.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(gw.waiting_runs().await.len(), 1, "the run waits");
    let (status, body) = fork(&gw, json!({"chatId": chat_id, "runId": run_id})).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("chat_busy")), "{body}");
    let (status, body) = fork(&gw, json!({"chatId": chat_id})).await;
    assert_eq!(status, 409, "the whole chat ends with it: {body}");
    // Before it: the runs before it have ended.
    let (status, body) = fork(&gw, json!({"chatId": chat_id, "runId": run_id, "position": "before"})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"]["runs"].as_array().unwrap().len(), 1);

    // Answered and ended, it forks; no `awaiting` line goes with it.
    gw.submit_accepted(&run_id, &tool_id, json!({"ok": true})).await;
    assert_eq!(stream.rest().await.last().unwrap()["type"], "run.complete");
    let (status, body) = fork(&gw, json!({"chatId": chat_id, "runId": run_id})).await;
    assert_eq!(status, 200, "{body}");
    let fork_id = body["data"]["chatId"].as_str().unwrap().to_owned();
    let lines = gw.history_json(&fork_id).await;
    assert!(lines.iter().all(|l| l["_type"] == "query" || l["_type"] == "step"), "{lines:?}");
    assert!(gw.history_json(&chat_id).await.iter().any(|l| l["_type"] == "awaiting"), "the source keeps its own");
}
