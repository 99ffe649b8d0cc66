//! Remote A2A agents as tools (issue 38, the client; docs/a2a.md), agw against agw over
//! loopback: one gateway serves its agents over A2A, another declares them in its
//! `agent.a2a.external-dir` and offers them to its lead agent as `a2a__<name>` tools. Each call
//! streams the remote task, answers with its state and text, continues the same remote
//! conversation for the same chat, hands a remote question back to the model (and its answer
//! back to the remote task), and cancels the remote task when the local run is interrupted.

mod common;

use std::time::{Duration, Instant};

use agw_testkit::Transcript;
use common::{Gateway, LiveStream, oneshot_agent};
use serde_json::{Value, json};

const LEAD: &str = r#"{"key":"lead","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
    "toolConfig":{"a2aAgents":["helper","asker","asker_model"],"subAgents":["a2a:helper","a2a:asker"]},"react":{"systemPrompt":"You delegate.","maxSteps":4}}"#;

/// The remote gateway (its agents `helper` and `asker`, the latter asking with a form) and the
/// local one that calls them; the declarations live in `dir`.
async fn gateways(dir: &std::path::Path) -> (Gateway, Gateway) {
    let asker = r#"{"key":"asker","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
        "toolConfig":{"frontends":["confirm_dialog"]},"react":{"systemPrompt":"You ask.","maxSteps":3}}"#;
    let remote =
        Gateway::start(&[oneshot_agent("helper", false, 5000), ("asker.json".into(), asker.into())], &[]).await;
    std::fs::create_dir_all(dir).unwrap();
    for name in ["helper", "asker"] {
        let file = json!({"url": format!("{}/a2a/{name}", remote.base)});
        std::fs::write(dir.join(format!("{name}.json")), file.to_string()).unwrap();
    }
    // The same remote agent, its questions going to the model instead of the user.
    let file = json!({"url": format!("{}/a2a/asker", remote.base), "inputRequired": "model"});
    std::fs::write(dir.join("asker_model.json"), file.to_string()).unwrap();
    let local =
        Gateway::start(&[("lead.json".into(), LEAD.into())], &[("AGENT_A2A_EXTERNAL_DIR", dir.to_str().unwrap())])
            .await;
    (remote, local)
}

fn scratch(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agw-a2a-client-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn call(id: &str, tool: &str, args: Value) -> Transcript {
    Transcript::openai_tool_call(id, tool, &[&args.to_string()])
}

/// The remote `asker`'s next turn: a form asking to confirm (its task then waits for input).
fn asks_to_confirm(remote: &Gateway) {
    remote.fixture.push(call(
        "call_c",
        "confirm_dialog",
        json!({"question": "Really book?", "options": ["Yes", "No"]}),
    ));
}

/// The tool result the local run got for its remote call.
fn remote_result(stream: &common::Stream) -> Value {
    let result = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_owned();
    serde_json::from_str(&result).unwrap()
}

#[tokio::test]
async fn a_remote_agent_answers_as_a_tool_and_keeps_the_chats_conversation() {
    let dir = scratch("answers");
    let (remote, local) = gateways(&dir).await;
    let (_, agent) = local.get_json("/api/ap/agent?agentKey=lead").await;
    assert!(agent.to_string().contains("a2a__helper"), "the lead is offered the remote agent: {agent}");

    local.fixture.push(call("call_1", "a2a__helper", json!({"message": "What is the weather?"})));
    local.fixture.push(Transcript::openai_text(&["It is sunny."]));
    remote.fixture.push(Transcript::openai_text(&["Sunny ", "today."]));
    let first = local.run(&json!({"agentKey": "lead", "message": "weather?"})).await;
    assert_eq!(first.last()["type"], "run.complete", "{:?}", first.types());
    let result = remote_result(&first);
    assert_eq!(
        (result["state"].as_str(), result["answer"].as_str()),
        (Some("completed"), Some("Sunny today.")),
        "{result}"
    );
    assert_eq!(result["ok"], true);
    // The remote answer showed while the call ran: one tool.progress per remote artifact update,
    // between the call's tool.end and its tool.result.
    let progress: Vec<&str> = first.of_type("tool.progress").iter().map(|e| e["delta"].as_str().unwrap()).collect();
    assert_eq!(progress, ["Sunny ", "today."], "{:?}", first.types());
    assert!(first.of_type("tool.progress").iter().all(|e| e["toolId"] == first.of_type("tool.result")[0]["toolId"]));
    let types = first.types();
    let at = |ty: &str| types.iter().position(|t| t == ty).unwrap();
    assert!(at("tool.end") < at("tool.progress") && at("tool.progress") < at("tool.result"), "{types:?}");
    let asked = remote.fixture.requests().last().unwrap().body.to_string();
    assert!(asked.contains("What is the weather?"), "{asked}");

    // The same chat's next call continues the remote conversation: the remote model sees it.
    let chat_id = first.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned();
    local.fixture.push(call("call_2", "a2a__helper", json!({"message": "And tomorrow?"})));
    local.fixture.push(Transcript::openai_text(&["Rain tomorrow."]));
    remote.fixture.push(Transcript::openai_text(&["Rainy."]));
    let second = local.run(&json!({"agentKey": "lead", "message": "and tomorrow?", "chatId": chat_id})).await;
    assert_eq!(remote_result(&second)["answer"], "Rainy.");
    let asked = remote.fixture.requests().last().unwrap().body.to_string();
    assert!(
        asked.contains("What is the weather?") && asked.contains("Sunny today.") && asked.contains("And tomorrow?"),
        "{asked}"
    );
    // Another chat starts another remote conversation.
    local.fixture.push(call("call_3", "a2a__helper", json!({"message": "Fresh question"})));
    local.fixture.push(Transcript::openai_text(&["ok"]));
    remote.fixture.push(Transcript::openai_text(&["Fresh answer."]));
    local.run(&json!({"agentKey": "lead", "message": "new chat"})).await;
    let asked = remote.fixture.requests().last().unwrap().body.to_string();
    assert!(!asked.contains("What is the weather?"), "{asked}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_remote_question_goes_to_the_model_and_its_answer_back() {
    let dir = scratch("question");
    let (remote, local) = gateways(&dir).await;
    local.fixture.push(call("call_1", "a2a__asker_model", json!({"message": "Book it"})));
    asks_to_confirm(&remote);
    local.fixture.push(Transcript::openai_text(&["The agent asks whether to book."]));
    let first = local.run(&json!({"agentKey": "lead", "message": "book"})).await;
    let result = remote_result(&first);
    assert_eq!(result["state"], "input_required", "{result}");
    assert_eq!(result["asked"]["kind"], "form");
    assert_eq!(result["asked"]["arguments"]["question"], "Really book?");
    let task_id = result["taskId"].as_str().unwrap().to_owned();

    // The model answers the remote task with its taskId; the remote run goes on to its end.
    let chat_id = first.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned();
    local.fixture.push(call("call_2", "a2a__asker_model", json!({"message": "Yes", "taskId": task_id})));
    local.fixture.push(Transcript::openai_text(&["Booked."]));
    remote.fixture.push(Transcript::openai_text(&["Booking done."]));
    let second = local.run(&json!({"agentKey": "lead", "message": "yes, book", "chatId": chat_id})).await;
    let result = remote_result(&second);
    assert_eq!(
        (result["state"].as_str(), result["answer"].as_str()),
        (Some("completed"), Some("Booking done.")),
        "{result}"
    );
    assert_eq!(result["taskId"], task_id.as_str(), "the same remote task");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn interrupting_the_local_run_cancels_the_remote_task() {
    let dir = scratch("cancel");
    let (remote, local) = gateways(&dir).await;
    local.fixture.push(call("call_1", "a2a__helper", json!({"message": "Take your time"})));
    let words: Vec<String> = (0..40).map(|i| format!("w{i} ")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    remote.fixture.push(Transcript::openai_text(&words).with_chunk_delay_ms(100));
    let resp = local.post_query(&json!({"agentKey": "lead", "message": "slow one"})).await;
    let mut stream = LiveStream::new(resp);
    let start = stream.until(|e| e["type"] == "run.start").await;
    let run_id = start["runId"].as_str().unwrap().to_owned();
    stream.until(|e| e["type"] == "tool.end").await;
    // Wait until the remote task is streaming.
    let deadline = Instant::now() + Duration::from_secs(10);
    while remote.fixture.request_count() == 0 {
        assert!(Instant::now() < deadline, "the remote agent was never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let interrupted: Value = local
        .client
        .post(format!("{}/api/ap/interrupt", local.base))
        .json(&json!({"runId": run_id}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(interrupted["data"]["accepted"], true, "{interrupted}");
    // The remote task ends cancelled, long before its answer would have.
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}});
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let listed: Value = remote
            .client
            .post(format!("{}/a2a/helper", remote.base))
            .header("A2A-Version", "1.0")
            .json(&list)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if listed["result"]["tasks"][0]["status"]["state"] == "TASK_STATE_CANCELED" {
            break;
        }
        assert!(Instant::now() < deadline, "the remote task was not cancelled: {listed}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// By default a remote question asks the local run's user: the run pauses with it
/// (`awaiting.ask` `mode: "status"`), and the user's `continue` with an `answer` goes back to the
/// remote task, which goes on to its end; the model reads the final answer.
#[tokio::test]
async fn a_remote_question_asks_the_local_user() {
    let dir = scratch("ask-user");
    let (remote, local) = gateways(&dir).await;
    local.fixture.push(call("call_1", "a2a__asker", json!({"message": "Book it"})));
    asks_to_confirm(&remote);
    let resp = local.post_query(&json!({"agentKey": "lead", "message": "book"})).await;
    let mut stream = LiveStream::new(resp);
    let run_id = stream.until(|e| e["type"] == "run.start").await["runId"].as_str().unwrap().to_owned();
    let ask = stream.until(|e| e["type"] == "awaiting.ask").await;
    assert_eq!(ask["mode"], "status", "{ask}");
    assert!(ask["status"]["message"].as_str().unwrap().contains("confirm_dialog asks for input"), "{ask}");
    assert_eq!(ask["status"]["data"]["answerWith"], "text");
    assert_eq!(ask["status"]["data"]["asked"]["arguments"]["question"], "Really book?", "what was asked, for a client");
    local.fixture.push(Transcript::openai_text(&["Booked, as you said."]));
    remote.fixture.push(Transcript::openai_text(&["Booking done."]));
    let answer = json!({"action": "continue", "answer": "Yes"});
    local.submit_accepted(&run_id, ask["awaitingId"].as_str().unwrap(), answer).await;
    let rest = stream.rest().await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete", "{rest:?}");
    let result = rest.iter().find(|e| e["type"] == "tool.result").unwrap()["result"].as_str().unwrap().to_owned();
    let result: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(
        (result["state"].as_str(), result["answer"].as_str()),
        (Some("completed"), Some("Booking done.")),
        "{result}"
    );
    // The remote task got the user's answer as its form's submit.
    let remote_last =
        remote.fixture.requests().last().unwrap().body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(remote_last["role"], "tool");
    assert!(remote_last["content"].to_string().contains("Yes"), "{remote_last}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A remote agent as a sub-agent (`a2a:<name>` in `subAgents`): its task is a child of the run
/// whose lane streams the remote answer as it arrives (the remote task's progress in this run's
/// stream), and the lead reads it in `agent_invoke`'s result.
#[tokio::test]
async fn a_remote_agent_is_a_sub_agent_streaming_into_its_lane() {
    let dir = scratch("sub-agent");
    let (remote, local) = gateways(&dir).await;
    let tasks = json!({"tasks": [{"subAgentKey": "a2a:helper", "task": "What is the weather?"}]});
    local.fixture.push(call("call_inv", "agent_invoke", tasks));
    local.fixture.push(Transcript::openai_text(&["The helper says sunny."]));
    remote.fixture.push(Transcript::openai_text(&["Sunny ", "today", "."]));
    let stream = local.run(&json!({"agentKey": "lead", "message": "ask the helper"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let start = stream.of_type("task.start")[0];
    assert_eq!(start["subAgentKey"], "a2a:helper");
    let task_id = start["taskId"].as_str().unwrap();
    let deltas: Vec<&str> = stream
        .of_type("content.delta")
        .into_iter()
        .filter(|e| e["taskId"] == task_id)
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["Sunny ", "today", "."], "one delta per remote artifact update");
    assert_eq!(stream.of_type("task.complete").len(), 1);
    let result = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_owned();
    assert!(result.contains("Sunny today.") && result.contains("completed"), "{result}");
    let offered = local.fixture.requests()[0].body.to_string();
    assert!(offered.contains("a2a:helper"), "agent_invoke names the remote agent: {offered}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A remote sub-agent that asks (`INPUT_REQUIRED`) pauses its child like a local child's paused
/// tool: `awaiting.ask` in the child's lane, answered through the root run; the answer goes to the
/// remote task, which finishes, and the child completes. A declined question fails the child.
#[tokio::test]
async fn a_remote_sub_agents_question_asks_the_local_user_in_its_lane() {
    let dir = scratch("sub-agent-ask");
    let (remote, local) = gateways(&dir).await;
    for (answer, completes) in [(json!({"action": "continue", "answer": "Yes"}), true), (json!("cancel"), false)] {
        let tasks = json!({"tasks": [{"subAgentKey": "a2a:asker", "task": "Book it"}]});
        local.fixture.push(call("call_inv", "agent_invoke", tasks));
        asks_to_confirm(&remote);
        let resp = local.post_query(&json!({"agentKey": "lead", "message": "book"})).await;
        let mut stream = LiveStream::new(resp);
        let run_id = stream.until(|e| e["type"] == "run.start").await["runId"].as_str().unwrap().to_owned();
        let start = stream.until(|e| e["type"] == "task.start").await;
        assert_eq!(start["subAgentKey"], "a2a:asker");
        let task_id = start["taskId"].as_str().unwrap().to_owned();
        let ask = stream.until(|e| e["type"] == "awaiting.ask").await;
        assert_eq!(ask["taskId"], task_id.as_str(), "the ask is in the child's lane: {ask}");
        assert_eq!(ask["runId"], run_id.as_str(), "answered through the root run");
        assert_eq!(ask["mode"], "status");
        assert!(ask["awaitingId"].as_str().unwrap().starts_with(&task_id), "{ask}");
        assert!(ask["status"]["message"].as_str().unwrap().contains("confirm_dialog asks for input"), "{ask}");
        assert_eq!(ask["status"]["data"]["asked"]["arguments"]["question"], "Really book?");
        if completes {
            remote.fixture.push(Transcript::openai_text(&["Booking ", "done."]));
        }
        local.fixture.push(Transcript::openai_text(&["Done."]));
        local.submit_accepted(&run_id, ask["awaitingId"].as_str().unwrap(), answer).await;
        let rest = stream.rest().await;
        assert_eq!(rest.last().unwrap()["type"], "run.complete", "{rest:?}");
        let result = rest.iter().find(|e| e["type"] == "tool.result").unwrap()["result"].as_str().unwrap().to_owned();
        if completes {
            let lane: String = rest
                .iter()
                .filter(|e| e["type"] == "content.delta" && e["taskId"] == task_id.as_str())
                .map(|e| e["delta"].as_str().unwrap())
                .collect();
            assert_eq!(lane, "Booking done.", "{rest:?}");
            assert!(rest.iter().any(|e| e["type"] == "task.complete"), "{rest:?}");
            assert!(result.contains("completed") && result.contains("Booking done."), "{result}");
            // The remote task got the user's answer as its form's submit.
            let remote_last =
                remote.fixture.requests().last().unwrap().body["messages"].as_array().unwrap().last().unwrap().clone();
            assert_eq!(remote_last["role"], "tool");
            assert!(remote_last["content"].to_string().contains("Yes"), "{remote_last}");
        } else {
            let failed = rest.iter().find(|e| e["type"] == "task.fail").expect("the child fails");
            assert!(failed["error"]["message"].as_str().unwrap().contains("declined"), "{failed}");
            assert!(result.contains("failed"), "{result}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The declarations are reloaded: a remote agent whose file goes is no longer offered to the
/// model, and one declared while agw runs is.
#[tokio::test]
async fn declarations_are_hot_reloaded() {
    let dir = scratch("reload");
    let (remote, local) = gateways(&dir).await;
    let _reload = agw_http::reload::Reloader::new(
        local.state.clone(),
        vec![agw_http::reload::WatchedDir {
            catalog: agw_http::reload::Catalog::A2aAgents,
            dir: dir.clone(),
            rescan_every: Duration::from_millis(200),
        }],
    )
    .start();
    // Whether the lead's model is offered the remote agent now (one short run asks it).
    let offered = || async {
        local.fixture.push(Transcript::openai_text(&["ok"]));
        local.run(&json!({"agentKey": "lead", "message": "which tools?"})).await;
        let tools = local.fixture.requests().last().unwrap().body["tools"].to_string();
        tools.contains("a2a__helper")
    };
    assert!(offered().await);
    std::fs::remove_file(dir.join("helper.json")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while offered().await {
        assert!(Instant::now() < deadline, "a removed declaration was still offered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let file = json!({"url": format!("{}/a2a/helper", remote.base)});
    std::fs::write(dir.join("helper.json"), file.to_string()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while !offered().await {
        assert!(Instant::now() < deadline, "a new declaration was never offered");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}
