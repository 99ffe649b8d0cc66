//! Tool approvals over loopback HTTP (issue 15, `docs/approvals.md`): `toolConfig.approvals`
//! asks a person before a backend call runs — once, always (remembered for the chat), reject —
//! or denies it, and a wait nobody answers expires.

mod common;

use agw_testkit::Transcript;
use common::{Gateway, LiveStream, assert_chat_files_valid, assert_chat_replayable};
use serde_json::{Value, json};

fn agent(approvals: Value) -> (String, String) {
    let text = json!({"key": "w", "mode": "REACT", "modelConfig": {"providerKey": "fixture", "model": "m"},
        "toolConfig": {"backends": ["mock_city_weather", "city_datetime"], "approvals": approvals},
        "react": {"systemPrompt": "You check the weather.", "maxSteps": 4}});
    ("w.json".into(), text.to_string())
}

fn weather_call(id: &str) -> Transcript {
    Transcript::openai_tool_call(id, "mock_city_weather", &["{\"city\":\"Paris\"}"])
}

async fn submit(gw: &Gateway, body: Value) -> Value {
    let resp = gw.client.post(format!("{}/api/ap/submit", gw.base)).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

fn run_id_of(events: &[Value]) -> String {
    events.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_owned()
}

/// The tool message the provider got back for `call_id` in the last request.
fn tool_result_sent(gw: &Gateway, call_id: &str) -> Value {
    let request = gw.fixture.requests().last().unwrap().clone();
    let message = request.body["messages"].as_array().unwrap().iter().find(|m| m["tool_call_id"] == call_id).cloned();
    serde_json::from_str(message.expect("the call's result went back")["content"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn once_runs_the_call_after_the_answer_and_a_second_answer_is_already_answered() {
    let gw = Gateway::start(&[agent(json!({"mock_city_weather": "ask"}))], &[]).await;
    gw.fixture.on_stage("agent-react-step-1", weather_call("call_w"));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Sunny."]));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "w", "message": "weather?"})).await);
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    let types: Vec<&str> = live.seen.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[types.len() - 2..], ["tool.end", "awaiting.ask"], "asked after the call's tool.end");
    assert_eq!((ask["awaitingId"].as_str(), ask["mode"].as_str()), (Some("call_w"), Some("approval")));
    let approval = &ask["approvals"][0];
    assert_eq!(approval["arguments"], json!({"city": "Paris"}), "the exact arguments that will run");
    assert_eq!(
        (approval["rule"].as_str(), approval["toolName"].as_str()),
        (Some("mock_city_weather"), Some("mock_city_weather"))
    );
    let decisions: Vec<&str> =
        approval["options"].as_array().unwrap().iter().map(|o| o["decision"].as_str().unwrap()).collect();
    assert_eq!(decisions, ["once", "always", "reject"]);
    assert_eq!(gw.fixture.request_count(), 1, "the call waits: nothing ran, no next turn");

    let run_id = run_id_of(&live.seen);
    let answer = submit(&gw, json!({"runId": run_id, "awaitingId": "call_w", "params": {"decision": "once"}})).await;
    assert_eq!(
        (answer["data"]["status"].as_str(), answer["data"]["awaitingId"].as_str()),
        (Some("accepted"), Some("call_w"))
    );
    let echoed = live.until(|e| e["type"] == "awaiting.answer").await;
    assert_eq!(echoed["answer"]["approvals"][0], json!({"id": "call_w", "decision": "once"}));
    let result = live.until(|e| e["type"] == "tool.result").await;
    assert!(result["result"].as_str().unwrap().contains("temperatureC"), "the tool ran: {result}");
    let twice = submit(&gw, json!({"runId": run_id, "toolId": "call_w", "params": "once"})).await;
    assert_eq!(twice["data"]["status"], "already_answered", "{twice}");
    assert_eq!(live.rest().await.last().unwrap()["type"], "run.complete");
    assert_chat_files_valid(&gw);
}

#[tokio::test]
async fn always_is_remembered_for_the_chat_and_reject_tells_the_model() {
    let gw = Gateway::start(&[agent(json!({"mock_*": "ask"}))], &[]).await;
    // Three runs below; a stage's transcripts are used in order (the last one sticks).
    for (step1, step2) in [
        (weather_call("call_1"), weather_call("call_2")),
        (weather_call("call_3"), Transcript::openai_text(&["Again."])),
        (weather_call("call_4"), Transcript::openai_text(&["Understood."])),
    ] {
        gw.fixture.on_stage("agent-react-step-1", step1);
        gw.fixture.on_stage("agent-react-step-2", step2);
    }
    gw.fixture.on_stage("agent-react-step-3", Transcript::openai_text(&["Done."]));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "w", "message": "weather twice"})).await);
    live.until(|e| e["type"] == "awaiting.ask").await;
    let run_id = run_id_of(&live.seen);
    let chat_id = live.seen.iter().find(|e| e["type"] == "run.start").unwrap()["chatId"].as_str().unwrap().to_owned();
    submit(
        &gw,
        json!({"runId": run_id, "toolId": "call_1", "params": {"approvals": [{"id": "call_1", "decision": "always"}]}}),
    )
    .await;
    let events = live.rest().await;
    let asks = events.iter().filter(|e| e["type"] == "awaiting.ask").count();
    assert_eq!(asks, 1, "only the first call of the rule is asked");
    assert_eq!(events.iter().filter(|e| e["type"] == "tool.result").count(), 2, "both calls ran");
    let file = std::fs::read_to_string(gw.state.chats.config().dir.join(format!("{chat_id}.json"))).unwrap();
    assert!(file.lines().any(|l| l.contains("\"_type\":\"approval\"") && l.contains("\"rule\":\"mock_*\"")), "{file}");

    // A later run of the chat: not asked either; the replay is unaffected by the approval line.
    let again = gw.run(&json!({"agentKey": "w", "message": "and now?", "chatId": chat_id})).await;
    assert!(again.of_type("awaiting.ask").is_empty());
    assert_eq!(again.last()["type"], "run.complete");
    assert_chat_replayable(&gw, &chat_id).await;

    // Another chat has no such memory; reject gives the model the refusal.
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "w", "message": "weather?"})).await);
    live.until(|e| e["type"] == "awaiting.ask").await;
    let run_id = run_id_of(&live.seen);
    submit(&gw, json!({"runId": run_id, "toolId": "call_4", "params": "reject"})).await;
    let result = live.until(|e| e["type"] == "tool.result").await;
    assert_eq!(
        result["result"],
        json!({"executed": false, "reason": "rejected", "detail": "the user rejected this call"}).to_string()
    );
    live.rest().await;
    assert_eq!(tool_result_sent(&gw, "call_4")["reason"], "rejected", "the model reads the refusal");
}

#[tokio::test]
async fn deny_never_asks_and_an_unanswered_ask_expires() {
    let gw = Gateway::start(
        &[agent(json!({"city_datetime": "deny", "mock_city_weather": "ask"}))],
        &[("AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS", "300")],
    )
    .await;
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call("call_t", "city_datetime", &["{\"city\":\"Paris\"}"]),
    );
    gw.fixture.on_stage("agent-react-step-2", weather_call("call_w"));
    gw.fixture.on_stage("agent-react-step-3", Transcript::openai_text(&["Fine."]));
    let stream = gw.run(&json!({"agentKey": "w", "message": "time and weather"})).await;
    let results = stream.of_type("tool.result");
    let denied: Value = serde_json::from_str(results[0]["result"].as_str().unwrap()).unwrap();
    assert_eq!(
        (denied["reason"].as_str(), denied["detail"].as_str()),
        (Some("denied"), Some("denied by policy city_datetime"))
    );
    assert_eq!(stream.of_type("awaiting.ask").len(), 1, "deny asks nobody");
    assert_eq!(stream.of_type("awaiting.expired")[0]["awaitingId"], "call_w");
    let expired: Value = serde_json::from_str(results[1]["result"].as_str().unwrap()).unwrap();
    assert_eq!((expired["executed"].as_bool(), expired["reason"].as_str()), (Some(false), Some("approval_expired")));
    assert_eq!(stream.last()["type"], "run.complete", "the run goes on without the call");
    assert_eq!(gw.state.submits.pending(), 0);
}
