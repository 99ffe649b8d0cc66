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
    let history = gw.history_json(&chat_id).await;
    assert!(history.iter().any(|l| l["_type"] == "approval" && l["rule"] == "mock_*"), "{history:?}");

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

// -- durable waiting: the server stops while a run waits for an approval ----------------------

/// Whether the store holds a waiting mark for the run.
async fn marked(gw: &Gateway, run_id: &str) -> bool {
    gw.waiting_runs().await.iter().any(|(run, _)| run == run_id)
}

/// Waits until the run's wait is recorded: the store has its mark and the run itself knows its
/// wait is durable. The mark is written a moment before the run learns it was; a stop in between
/// (a busy machine) ends the run with `run.error` instead of leaving it to the next server.
async fn wait_for_mark(gw: &Gateway, run_id: &str) {
    for _ in 0..200 {
        let durable = gw.state.runs.get(run_id).is_some_and(|run| run.is_waiting());
        if durable && marked(gw, run_id).await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the wait of {run_id} was never recorded");
}

/// A second server on the first one's chats (its chat directory, or its PostgreSQL schema), as
/// after a restart; the first one is stopped the way a graceful shutdown ends its grace period.
async fn restart(first: &Gateway, approvals: Value, env: &[(&str, &str)]) -> Gateway {
    first.state.runs.stop_all();
    let store = first.store_env();
    let mut vars: Vec<(&str, &str)> = store.iter().map(|(k, v)| (*k, v.as_str())).collect();
    vars.extend_from_slice(env);
    Gateway::start(&[agent(approvals)], &vars).await
}

async fn attach(gw: &Gateway, run_id: &str, last_seq: u64) -> LiveStream {
    let url = format!("{}/api/ap/attach?runId={run_id}&lastSeq={last_seq}", gw.base);
    let resp = gw.client.get(url).send().await.unwrap();
    assert_eq!(resp.status(), 200, "a restored run is attachable");
    LiveStream::new(resp)
}

/// Asks for an approval on the first server and returns (run id, chat id, last seq seen).
async fn ask_then_stop_watching(gw: &Gateway) -> (String, String, u64) {
    gw.fixture.on_stage("agent-react-step-1", weather_call("call_w"));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "w", "message": "weather?"})).await);
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    let run_id = run_id_of(&live.seen);
    let chat_id = live.seen[0]["chatId"].as_str().unwrap().to_owned();
    wait_for_mark(gw, &run_id).await;
    (run_id, chat_id, ask["seq"].as_u64().unwrap())
}

#[tokio::test]
async fn an_approval_survives_a_restart_and_the_run_continues_in_the_new_server() {
    let first = Gateway::start(&[agent(json!({"mock_city_weather": "ask"}))], &[]).await;
    let (run_id, chat_id, last_seq) = ask_then_stop_watching(&first).await;
    let second = restart(&first, json!({"mock_city_weather": "ask"}), &[]).await;
    second.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Sunny in Paris."]));

    let mut attached = attach(&second, &run_id, last_seq).await;
    let ask = attached.next_event().await.expect("the wait is shown again");
    assert_eq!((ask["type"].as_str(), ask["mode"].as_str()), (Some("awaiting.ask"), Some("approval")), "{ask}");
    assert_eq!(ask["seq"], last_seq + 1);
    assert_eq!(ask["approvals"][0]["arguments"], json!({"city": "Paris"}));
    assert_eq!(second.fixture.request_count(), 0, "nothing runs before the answer");

    let answer =
        submit(&second, json!({"runId": run_id, "awaitingId": "call_w", "params": {"decision": "once"}})).await;
    assert_eq!(answer["data"]["status"], "accepted", "{answer}");
    let rest: Vec<Value> =
        attached.rest().await.into_iter().filter(|e| e["seq"].as_u64() > ask["seq"].as_u64()).collect();
    let types: Vec<&str> = rest.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"awaiting.answer"), "{types:?}");
    assert_eq!(types.last(), Some(&"run.complete"), "{types:?}");
    assert!(rest.iter().any(|e| e["type"] == "tool.result" && e["result"].as_str().unwrap().contains("temperatureC")));
    // The model's next turn, in the new server, saw the whole run: the question, the call, its result.
    assert!(tool_result_sent(&second, "call_w")["temperatureC"].is_number());
    let sent = &second.fixture.requests()[0].body["messages"];
    let users: Vec<&Value> = sent.as_array().unwrap().iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(users.len(), 1, "the question once: {sent}");
    assert_eq!(users[0]["content"], "weather?");

    assert_chat_files_valid(&second);
    let replay = assert_chat_replayable(&second, &chat_id).await;
    assert_eq!(replay.iter().filter(|e| e["type"] == "run.start").count(), 1);
    assert!(!marked(&second, &run_id).await, "the mark of the finished run is gone");
}

#[tokio::test]
async fn a_restored_wait_can_be_interrupted_and_one_that_expired_while_down_goes_on_without_the_call() {
    // Interrupted after the restart: run.cancel, the call answered `cancelled` in the history.
    let first = Gateway::start(&[agent(json!({"mock_city_weather": "ask"}))], &[]).await;
    let (run_id, chat_id, last_seq) = ask_then_stop_watching(&first).await;
    let second = restart(&first, json!({"mock_city_weather": "ask"}), &[]).await;
    let mut attached = attach(&second, &run_id, last_seq).await;
    attached.until(|e| e["type"] == "awaiting.ask").await;
    let resp = second
        .client
        .post(format!("{}/api/ap/interrupt", second.base))
        .json(&json!({"runId": run_id}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let rest = attached.rest().await;
    let cancelled = rest.iter().find(|e| e["type"] == "tool.result").expect("the call is answered");
    assert_eq!(cancelled["result"], r#"{"executed":false,"reason":"cancelled"}"#);
    assert_eq!(rest.last().unwrap()["type"], "run.cancel");
    assert_chat_files_valid(&second);
    let replay = assert_chat_replayable(&second, &chat_id).await;
    assert!(replay.iter().any(|e| e["type"] == "tool.result" && e["toolId"] == "call_w"));

    // Expired while no server ran: the new one goes on at once, the call is not run.
    let first = Gateway::start(
        &[agent(json!({"mock_city_weather": "ask"}))],
        &[("AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS", "300")],
    )
    .await;
    let (run_id, _, last_seq) = ask_then_stop_watching(&first).await;
    first.state.runs.stop_all();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let second = restart(&first, json!({"mock_city_weather": "ask"}), &[]).await;
    second.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Nobody approved."]));
    let events = attach(&second, &run_id, last_seq).await.rest().await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"awaiting.expired"), "{types:?}");
    assert_eq!(types.last(), Some(&"run.complete"), "{types:?}");
    assert_eq!(tool_result_sent(&second, "call_w")["reason"], "approval_expired");
    assert_chat_files_valid(&second);
}

/// A run continued after a restart goes through the daily quotas like any run (issue 32: it
/// never checked nor spent them): its model calls are refused once the day is spent, and what
/// they use counts.
#[tokio::test]
async fn a_run_continued_after_a_restart_is_checked_and_counted_against_daily_quotas() {
    let quota = [("AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY", "100")];
    let approvals = json!({"mock_city_weather": "ask"});
    let approve = |run_id: &str| json!({"runId": run_id, "awaitingId": "call_w", "params": {"decision": "once"}});
    let uses_150 = |text: &str| Transcript::new().content(text).finish("stop").usage(100, 50).done();

    // The new server's day is spent by another run meanwhile: the continued run's next model
    // call is refused before it is sent.
    let first = Gateway::start(&[agent(approvals.clone())], &quota).await;
    let (run_id, _, last_seq) = ask_then_stop_watching(&first).await;
    let second = restart(&first, approvals.clone(), &quota).await;
    second.fixture.on_stage("agent-react-step-1", uses_150("The day is spent."));
    second.fixture.on_stage("agent-react-step-2", uses_150("Sunny in Paris."));
    let other = second.run(&json!({"agentKey": "w", "message": "something else"})).await;
    assert_eq!(other.last()["usage"]["totalTokens"], 150);
    let mut attached = attach(&second, &run_id, last_seq).await;
    attached.until(|e| e["type"] == "awaiting.ask").await;
    assert_eq!(submit(&second, approve(&run_id)).await["data"]["status"], "accepted");
    let rest = attached.rest().await;
    assert!(rest.iter().any(|e| e["type"] == "tool.result" && e["toolId"] == "call_w"), "the approved call ran");
    let end = rest.last().unwrap();
    assert_eq!(
        (end["type"].as_str(), end["error"]["code"].as_str()),
        (Some("run.error"), Some("quota_exceeded")),
        "{end}"
    );
    assert!(end["error"]["message"].as_str().unwrap().contains("subject.tokens-per-day of anonymous"), "{end}");
    assert_eq!(second.fixture.request_count(), 1, "only the other run's call reached the provider");

    // The continued run's model call counts: the next run is refused.
    let first = Gateway::start(&[agent(approvals.clone())], &quota).await;
    let (run_id, _, last_seq) = ask_then_stop_watching(&first).await;
    let second = restart(&first, approvals, &quota).await;
    second.fixture.on_stage("agent-react-step-2", uses_150("Sunny in Paris."));
    let mut attached = attach(&second, &run_id, last_seq).await;
    attached.until(|e| e["type"] == "awaiting.ask").await;
    assert_eq!(submit(&second, approve(&run_id)).await["data"]["status"], "accepted");
    let end = attached.rest().await.last().cloned().unwrap();
    assert_eq!((end["type"].as_str(), end["usage"]["totalTokens"].as_u64()), (Some("run.complete"), Some(150)));
    let resp = second.post_query(&json!({"agentKey": "w", "message": "again?"})).await;
    assert_eq!(resp.status(), 429, "the continued run spent the day");
    assert_eq!(resp.json::<Value>().await.unwrap()["quota"], "subject.tokens-per-day");
}
