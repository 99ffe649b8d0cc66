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
    assert_eq!(gw.state.runs.submits().pending(), 0);
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
        let durable = gw.state.runs.tracker().get(run_id).is_some_and(|run| run.is_waiting());
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
    first.state.runs.tracker().stop_all();
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
    first.state.runs.tracker().stop_all();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    // The run goes on as the server starts: its next model turn is scripted before.
    first.state.runs.tracker().stop_all();
    let store = first.store_env();
    let vars: Vec<(&str, &str)> = store.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let second = Gateway::start_scripted(&[agent(json!({"mock_city_weather": "ask"}))], &vars, |fixture| {
        fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Nobody approved."]));
    })
    .await;
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

// -- issue 32: rules match what would run; every kind of call; `always` per agent and tool ---------

/// An agent `key` with this `toolConfig` (approvals included), REACT, four steps.
fn agent_with(key: &str, tool_config: Value) -> (String, String) {
    let text = json!({"key": key, "mode": "REACT", "modelConfig": {"providerKey": "fixture", "model": "m"},
        "toolConfig": tool_config, "react": {"systemPrompt": "You use tools.", "maxSteps": 4}});
    (format!("{key}.json"), text.to_string())
}

/// One model turn calling `_bash_` once per command, ids `call_0`, `call_1`, ….
fn bash_calls(commands: &[&str]) -> Transcript {
    bash_calls_named("call", commands)
}

/// [`bash_calls`] with ids `<prefix>_0`, `<prefix>_1`, ….
fn bash_calls_named(prefix: &str, commands: &[&str]) -> Transcript {
    let mut transcript = Transcript::new();
    for (i, command) in commands.iter().enumerate() {
        let index = i as u32;
        transcript = transcript
            .tool_call_start(index, &format!("{prefix}_{i}"), "_bash_")
            .tool_args(index, &json!({"command": command}).to_string());
    }
    transcript.finish("tool_calls").usage(10, commands.len() as u64).done()
}

/// The `tool.result` of `call_id` as JSON; a result that is not JSON (the command ran and
/// `_bash_` printed its output) is returned as a string.
fn result_of(events: &[&Value], call_id: &str) -> Value {
    let result = events
        .iter()
        .find(|e| e["type"] == "tool.result" && e["toolId"] == call_id)
        .unwrap_or_else(|| panic!("no tool.result for {call_id}"));
    let text = result["result"].as_str().unwrap();
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned()))
}

/// The rules of the issue: reading the secret with `cat` or the log is denied, `head` is asked.
fn secret_rules() -> Value {
    json!({"_bash_:cat *": "deny", "_bash_:git log*": "deny", "_bash_:head *": "ask"})
}

#[tokio::test]
async fn deny_rules_hold_for_every_spelling_bash_would_run_the_same() {
    let gw =
        Gateway::start(&[agent_with("sh", json!({"backends": ["_bash_"], "approvals": secret_rules()}))], &[]).await;
    std::fs::create_dir_all(gw.agents_dir.join("bash")).unwrap();
    std::fs::write(gw.agents_dir.join("bash/secret.txt"), "TOP-SECRET-32\n").unwrap();
    // Each of these ran before: the rule was globbed against the raw text, `_bash_` split it on
    // any Unicode whitespace and git ignored its global options.
    let denied = [
        "cat secret.txt",
        "cat\tsecret.txt",
        "cat  secret.txt",
        "git  log",
        "git\tlog",
        "git --no-pager log",
        "git -P log",
        "git -P --no-pager log --oneline",
    ];
    let refused = ["cat\u{a0}secret.txt", "cat\u{3000}secret.txt", "cat\u{2028}secret.txt", "cat\u{1}secret.txt"];
    let commands: Vec<&str> = denied.iter().chain(refused.iter()).copied().collect();
    gw.fixture.on_stage("agent-react-step-1", bash_calls(&commands));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Nothing ran."]));
    let stream = gw.run(&json!({"agentKey": "sh", "message": "read the secret"})).await;
    let events = stream.events();
    assert!(stream.of_type("awaiting.ask").is_empty(), "a deny asks nobody");
    for (i, command) in commands.iter().enumerate() {
        let result = result_of(&events, &format!("call_{i}"));
        assert_eq!(result["executed"], false, "{command:?} ran: {result}");
        let expected = if i < denied.len() { "denied" } else { "invalid_command" };
        assert_eq!(result["reason"], expected, "{command:?}: {result}");
    }
    let git = result_of(&events, "call_6");
    assert_eq!(git["detail"], "denied by policy _bash_:git log*", "{git}");
    let nbsp = result_of(&events, &format!("call_{}", denied.len()));
    assert!(nbsp["detail"].as_str().unwrap().contains("U+00A0"), "the refusal names the character: {nbsp}");
    assert!(!stream.events().iter().any(|e| e.to_string().contains("TOP-SECRET-32")), "the file was never read");
    assert_eq!(stream.last()["type"], "run.complete");
}

#[tokio::test]
async fn ask_rules_hold_for_every_spelling_and_refused_characters_are_never_asked_about() {
    let gw =
        Gateway::start(&[agent_with("sh", json!({"backends": ["_bash_"], "approvals": secret_rules()}))], &[]).await;
    let asked = ["head\t-n 1 secret.txt", "head  -n 1 secret.txt", "head -n\t1 secret.txt"];
    let refused = ["head\u{a0}-n 1 secret.txt", "head -n 1\u{2028}secret.txt"];
    let commands: Vec<&str> = asked.iter().chain(refused.iter()).copied().collect();
    gw.fixture.on_stage("agent-react-step-1", bash_calls(&commands));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Done."]));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "sh", "message": "peek"})).await);
    let run_id = {
        live.until(|e| e["type"] == "run.start").await;
        run_id_of(&live.seen)
    };
    for (i, command) in asked.iter().enumerate() {
        let ask = live.until(|e| e["type"] == "awaiting.ask").await;
        assert_eq!(ask["awaitingId"], format!("call_{i}"), "{command:?} is asked about: {ask}");
        assert_eq!(ask["approvals"][0]["rule"], "_bash_:head *");
        submit(&gw, json!({"runId": run_id, "awaitingId": format!("call_{i}"), "params": "reject"})).await;
    }
    let events = live.rest().await;
    let events: Vec<&Value> = events.iter().collect();
    assert_eq!(events.iter().filter(|e| e["type"] == "awaiting.ask").count(), asked.len(), "no other call is asked");
    for i in 0..asked.len() {
        assert_eq!(result_of(&events, &format!("call_{i}"))["reason"], "rejected");
    }
    for i in asked.len()..commands.len() {
        let result = result_of(&events, &format!("call_{i}"));
        assert_eq!((result["executed"].as_bool(), result["reason"].as_str()), (Some(false), Some("invalid_command")));
    }
}

/// The types of the events about `call_id` (its `tool.*` / `action.*` / `awaiting.*`).
fn call_events(events: &[Value], call_id: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["toolId"] == call_id || e["actionId"] == call_id || e["awaitingId"] == call_id)
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect()
}

fn theme_call(id: &str) -> Transcript {
    Transcript::openai_tool_call(id, "switch_theme", &["{\"theme\":", "\"dark\"}"])
}

#[tokio::test]
async fn a_denied_action_never_reaches_the_client_and_the_model_reads_the_refusal() {
    let tools = json!({"actions": ["switch_theme"], "approvals": {"switch_theme": "deny"}});
    let gw = Gateway::start(&[agent_with("ui", tools)], &[]).await;
    gw.fixture.on_stage("agent-react-step-1", theme_call("call_a"));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["The theme stays."]));
    let stream = gw.run(&json!({"agentKey": "ui", "message": "go dark"})).await;
    let events: Vec<Value> = stream.events().into_iter().cloned().collect();
    // A client performs an action from `action.start` and its arguments: a denied one must not
    // be streamed as an action at all. It is shown as a call that was not executed.
    assert_eq!(call_events(&events, "call_a"), ["tool.start", "tool.args", "tool.end", "tool.result"]);
    let start = events.iter().find(|e| e["type"] == "tool.start").unwrap();
    assert_eq!((start["toolName"].as_str(), start["toolType"].as_str()), (Some("switch_theme"), Some("function")));
    assert_eq!(
        result_of(&stream.events(), "call_a"),
        json!({"executed": false, "reason": "denied", "detail": "denied by policy switch_theme"})
    );
    assert_eq!(tool_result_sent(&gw, "call_a")["reason"], "denied", "the model reads the refusal");
    assert_eq!(stream.last()["type"], "run.complete");
    let chat_id = stream.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned();
    assert_chat_files_valid(&gw);
    assert_chat_replayable(&gw, &chat_id).await;
}

#[tokio::test]
async fn an_asked_action_reaches_the_client_only_once_it_is_allowed() {
    let tools = json!({"actions": ["switch_theme"], "approvals": {"switch_theme": "ask"}});
    let gw = Gateway::start(&[agent_with("ui", tools)], &[]).await;
    for id in ["call_a", "call_b"] {
        gw.fixture.on_stage("agent-react-step-1", theme_call(id));
        gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Done."]));
    }
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "ui", "message": "go dark"})).await);
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    assert_eq!(call_events(&live.seen, "call_a"), ["awaiting.ask"], "nothing of the action before the question");
    let approval = &ask["approvals"][0];
    assert_eq!(
        (approval["toolName"].as_str(), approval["rule"].as_str()),
        (Some("switch_theme"), Some("switch_theme"))
    );
    assert_eq!(approval["arguments"], json!({"theme": "dark"}));
    let run_id = run_id_of(&live.seen);
    submit(&gw, json!({"runId": run_id, "awaitingId": "call_a", "params": "once"})).await;
    let events = live.rest().await;
    assert_eq!(
        call_events(&events, "call_a"),
        ["awaiting.ask", "awaiting.answer", "action.start", "action.args", "action.end", "action.result"]
    );
    let start = events.iter().find(|e| e["type"] == "action.start").unwrap();
    assert_eq!(start["actionName"], "switch_theme");
    let args = events.iter().find(|e| e["type"] == "action.args").unwrap();
    assert_eq!(serde_json::from_str::<Value>(args["delta"].as_str().unwrap()).unwrap(), json!({"theme": "dark"}));
    assert_eq!(events.iter().find(|e| e["type"] == "action.result").unwrap()["result"], "OK");
    assert_eq!(events.last().unwrap()["type"], "run.complete");

    // Rejected: never an action; the model reads the refusal.
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "ui", "message": "go dark again"})).await);
    live.until(|e| e["type"] == "awaiting.ask").await;
    let run_id = run_id_of(&live.seen);
    submit(&gw, json!({"runId": run_id, "awaitingId": "call_b", "params": "reject"})).await;
    let events = live.rest().await;
    assert_eq!(
        call_events(&events, "call_b"),
        ["awaiting.ask", "awaiting.answer", "tool.start", "tool.args", "tool.end", "tool.result"]
    );
    assert_eq!(tool_result_sent(&gw, "call_b")["reason"], "rejected");
    assert_chat_files_valid(&gw);
}

fn dialog_call(id: &str) -> Transcript {
    Transcript::openai_tool_call(id, "confirm_dialog", &["{\"question\":\"Go?\",", "\"options\":[\"A\",\"B\"]}"])
}

#[tokio::test]
async fn a_denied_frontend_tool_is_not_shown_and_nothing_waits_for_it() {
    let tools = json!({"frontends": ["confirm_dialog"], "approvals": {"confirm_dialog": "deny"}});
    let gw = Gateway::start(&[agent_with("fe", tools)], &[("AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS", "3000")]).await;
    gw.fixture.on_stage("agent-react-step-1", dialog_call("call_f"));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["No dialog."]));
    let stream = gw.run(&json!({"agentKey": "fe", "message": "ask me"})).await;
    let start = stream.of_type("tool.start")[0];
    assert!(start.get("toolKey").is_none() && start["toolType"] == "function", "not rendered as a form: {start}");
    assert_eq!(result_of(&stream.events(), "call_f")["reason"], "denied");
    assert_eq!(stream.last()["type"], "run.complete", "nothing waited for a submit");
    assert_eq!(gw.state.runs.submits().pending(), 0);
}

#[tokio::test]
async fn an_asked_frontend_tool_asks_first_then_shows_its_form() {
    let tools = json!({"frontends": ["confirm_dialog"], "approvals": {"confirm_dialog": "ask"}});
    let gw = Gateway::start(&[agent_with("fe", tools)], &[("AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS", "5000")]).await;
    gw.fixture.on_stage("agent-react-step-1", dialog_call("call_f"));
    gw.fixture.on_stage("agent-react-step-1", dialog_call("call_g"));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["You picked A."]));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "fe", "message": "ask me"})).await);
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    assert_eq!(ask["mode"], "approval");
    assert_eq!(call_events(&live.seen, "call_f"), ["awaiting.ask"], "the form is not shown before the approval");
    let run_id = run_id_of(&live.seen);
    // A form answer before the approval is not taken as one.
    let early = submit(&gw, json!({"runId": run_id, "toolId": "call_f", "params": {"selectedOption": "A"}})).await;
    assert_eq!(early["data"]["status"], "accepted", "it answers the approval: {early}");
    let refused = live.until(|e| e["type"] == "tool.result").await;
    assert_eq!(
        serde_json::from_str::<Value>(refused["result"].as_str().unwrap()).unwrap()["reason"],
        "invalid_decision"
    );
    live.rest().await;

    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "fe", "message": "ask me again"})).await);
    live.until(|e| e["type"] == "awaiting.ask").await;
    let run_id = run_id_of(&live.seen);
    submit(&gw, json!({"runId": run_id, "awaitingId": "call_g", "params": "once"})).await;
    let start = live.until(|e| e["type"] == "tool.start").await;
    assert_eq!((start["toolKey"].as_str(), start["toolType"].as_str()), (Some("confirm_dialog"), Some("html")));
    live.until(|e| e["type"] == "tool.end").await;
    let form = json!({"selectedOption": "A", "selectedIndex": 1});
    let answer = submit(&gw, json!({"runId": run_id, "toolId": "call_g", "params": form})).await;
    assert_eq!(answer["data"]["status"], "accepted", "{answer}");
    let result = live.until(|e| e["type"] == "tool.result").await;
    assert_eq!(serde_json::from_str::<Value>(result["result"].as_str().unwrap()).unwrap(), form);
    let events = live.rest().await;
    assert_eq!(
        call_events(&events, "call_g"),
        ["awaiting.ask", "awaiting.answer", "tool.start", "tool.args", "tool.end", "tool.result"]
    );
    assert_eq!(events.last().unwrap()["type"], "run.complete");
}

#[tokio::test]
async fn always_is_remembered_for_one_agent_and_one_tool_only() {
    // The same rule text in two agents of one chat, and two tools under one rule.
    let gw = Gateway::start(
        &[
            agent_with("a", json!({"backends": ["mock_city_weather", "_bash_"], "approvals": {"*": "ask"}})),
            agent_with("b", json!({"backends": ["_bash_"], "approvals": {"*": "ask"}})),
        ],
        &[],
    )
    .await;
    // Three runs: a stage's transcripts are used in order.
    for (step, transcripts) in [
        ("agent-react-step-1", [weather_call("call_w"), bash_calls_named("b", &["pwd"]), weather_call("call_w2")]),
        (
            "agent-react-step-2",
            [bash_calls_named("a", &["pwd"]), Transcript::openai_text(&["Done."]), Transcript::openai_text(&["Done."])],
        ),
    ] {
        for transcript in transcripts {
            gw.fixture.on_stage(step, transcript);
        }
    }
    gw.fixture.on_stage("agent-react-step-3", Transcript::openai_text(&["Done."]));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "a", "message": "weather"})).await);
    live.until(|e| e["type"] == "awaiting.ask").await;
    let run_id = run_id_of(&live.seen);
    let chat_id = live.seen[0]["chatId"].as_str().unwrap().to_owned();
    submit(&gw, json!({"runId": run_id, "awaitingId": "call_w", "params": "always"})).await;
    // The same agent's `_bash_` under the same rule is still asked about.
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    assert_eq!(ask["awaitingId"], "a_0", "{ask}");
    submit(&gw, json!({"runId": run_id, "awaitingId": "a_0", "params": "reject"})).await;
    live.rest().await;
    let remembered: Vec<Value> =
        gw.history_json(&chat_id).await.into_iter().filter(|l| l["_type"] == "approval").collect();
    assert_eq!(remembered.len(), 1, "{remembered:?}");
    assert_eq!(
        (remembered[0]["agentKey"].as_str(), remembered[0]["toolName"].as_str(), remembered[0]["rule"].as_str()),
        (Some("a"), Some("mock_city_weather"), Some("*"))
    );

    // Agent b in the same chat: its `_bash_` is asked about — also with a line of the earlier
    // format (the rule alone) for `_bash_` in the history, which remembers nothing now.
    let old_format = agw_protocol::history::ApprovalLine {
        chat_id: chat_id.clone(),
        run_id: run_id.clone(),
        updated_at: 1,
        rule: "*".into(),
        tool_name: "_bash_".into(),
        decision: "always".into(),
        agent_key: String::new(),
    };
    let store = gw.state.runs.chat_store().clone();
    let chat = chat_id.clone();
    tokio::task::spawn_blocking(move || {
        store.append(&chat, &[agw_protocol::history::HistoryLine::Approval(old_format)]).unwrap()
    })
    .await
    .unwrap();
    let mut live =
        LiveStream::new(gw.post_query(&json!({"agentKey": "b", "message": "where", "chatId": chat_id})).await);
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    assert_eq!(ask["awaitingId"], "b_0");
    submit(&gw, json!({"runId": run_id_of(&live.seen), "awaitingId": "b_0", "params": "reject"})).await;
    live.rest().await;

    // Agent a's weather stays remembered.
    let again = gw.run(&json!({"agentKey": "a", "message": "weather again", "chatId": chat_id})).await;
    assert!(again.of_type("awaiting.ask").is_empty(), "{:?}", again.types());
    assert!(result_of(&again.events(), "call_w2").to_string().contains("temperatureC"));
}

/// A second server on the first one's chats with these agents, as after a restart.
async fn restart_with(first: &Gateway, agents: &[(String, String)]) -> Gateway {
    first.state.runs.tracker().stop_all();
    let store = first.store_env();
    let vars: Vec<(&str, &str)> = store.iter().map(|(k, v)| (*k, v.as_str())).collect();
    Gateway::start(agents, &vars).await
}

#[tokio::test]
async fn a_frontend_tool_waiting_for_its_approval_survives_a_restart_and_shows_its_form_after_it() {
    let agents = [agent_with("fe", json!({"frontends": ["confirm_dialog"], "approvals": {"confirm_dialog": "ask"}}))];
    let first = Gateway::start(&agents, &[]).await;
    first.fixture.on_stage("agent-react-step-1", dialog_call("call_f"));
    let mut live = LiveStream::new(first.post_query(&json!({"agentKey": "fe", "message": "ask me"})).await);
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    let run_id = run_id_of(&live.seen);
    let chat_id = live.seen[0]["chatId"].as_str().unwrap().to_owned();
    wait_for_mark(&first, &run_id).await;

    let second = restart_with(&first, &agents).await;
    second.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["You picked B."]));
    let mut attached = attach(&second, &run_id, ask["seq"].as_u64().unwrap()).await;
    let again = attached.next_event().await.expect("the approval is shown again");
    assert_eq!((again["type"].as_str(), again["mode"].as_str()), (Some("awaiting.ask"), Some("approval")), "{again}");
    assert_eq!(again["approvals"][0]["agentKey"], "fe");
    submit(&second, json!({"runId": run_id, "awaitingId": "call_f", "params": "once"})).await;
    // Only now the form: its start (registered first, so this submit is matched), then its wait.
    let start = attached.until(|e| e["type"] == "tool.start").await;
    assert_eq!(start["toolKey"], "confirm_dialog", "{start}");
    attached.until(|e| e["type"] == "tool.end").await;
    let form = json!({"selectedOption": "B", "selectedIndex": 2});
    let answer = submit(&second, json!({"runId": run_id, "toolId": "call_f", "params": form})).await;
    assert_eq!(answer["data"]["status"], "accepted", "{answer}");
    let rest = attached.rest().await;
    let result = rest.iter().find(|e| e["type"] == "tool.result").expect("the form's answer");
    assert_eq!(serde_json::from_str::<Value>(result["result"].as_str().unwrap()).unwrap(), form);
    assert_eq!(rest.last().unwrap()["type"], "run.complete");
    assert_eq!(tool_result_sent(&second, "call_f"), form, "the model reads the form's answer");
    assert_chat_files_valid(&second);
    assert_chat_replayable(&second, &chat_id).await;
}

#[tokio::test]
async fn an_action_waiting_for_its_approval_survives_a_restart_and_is_rejected_as_a_tool_call() {
    let agents = [agent_with("ui", json!({"actions": ["switch_theme"], "approvals": {"switch_theme": "ask"}}))];
    let first = Gateway::start(&agents, &[]).await;
    first.fixture.on_stage("agent-react-step-1", theme_call("call_a"));
    let mut live = LiveStream::new(first.post_query(&json!({"agentKey": "ui", "message": "go dark"})).await);
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    let run_id = run_id_of(&live.seen);
    wait_for_mark(&first, &run_id).await;

    let second = restart_with(&first, &agents).await;
    second.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Kept."]));
    let mut attached = attach(&second, &run_id, ask["seq"].as_u64().unwrap()).await;
    attached.until(|e| e["type"] == "awaiting.ask").await;
    submit(&second, json!({"runId": run_id, "awaitingId": "call_a", "params": "reject"})).await;
    let rest = attached.rest().await;
    assert_eq!(
        call_events(&rest, "call_a"),
        ["awaiting.ask", "awaiting.answer", "tool.start", "tool.args", "tool.end", "tool.result"]
    );
    assert_eq!(rest.last().unwrap()["type"], "run.complete");
    assert_eq!(tool_result_sent(&second, "call_a")["reason"], "rejected");
    assert_chat_files_valid(&second);
}
