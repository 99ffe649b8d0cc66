//! Tools that pause for the user over loopback HTTP (issue 36, `docs/pausing-tools.md`): a
//! backend call answers "needs the user" (the bundled `mock_image_generate`: "Not enough
//! credits", status -1002, until the user continued once); the run waits like a frontend tool
//! (`awaiting.ask` `mode: "status"`), `continue` runs the same call again with the same
//! arguments, `cancel` tells the model the user declined, the timeout that nobody answered — and
//! the wait survives a restart of agw.

mod common;

use agw_testkit::Transcript;
use common::{Gateway, LiveStream, assert_chat_files_valid, assert_chat_replayable};
use serde_json::{Value, json};

const CREDITS: &str = "Not enough credits to generate an image";

fn agent() -> (String, String) {
    let text = json!({"key": "img", "mode": "REACT", "modelConfig": {"providerKey": "fixture", "model": "m"},
        "toolConfig": {"backends": ["mock_image_generate"]},
        "react": {"systemPrompt": "You draw images.", "maxSteps": 4}});
    ("img.json".into(), text.to_string())
}

fn image_call(id: &str) -> Transcript {
    Transcript::openai_tool_call(id, "mock_image_generate", &["{\"prompt\":", "\"a red fox\"}"])
}

async fn submit(gw: &Gateway, body: Value) -> Value {
    let resp = gw.client.post(format!("{}/api/ap/submit", gw.base)).json(&body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

fn run_id_of(events: &[Value]) -> String {
    events.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_owned()
}

/// The tool message the provider got back for `call_id` in the last request, and the arguments
/// of the assistant's call it answers.
fn sent_back(gw: &Gateway, call_id: &str) -> (Value, Value) {
    let request = gw.fixture.requests().last().unwrap().clone();
    let messages = request.body["messages"].as_array().unwrap().clone();
    let result = messages.iter().find(|m| m["tool_call_id"] == call_id).expect("the call's result went back");
    let call = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .find(|c| c["id"] == call_id)
        .expect("the call went back");
    (
        serde_json::from_str(result["content"].as_str().unwrap()).unwrap(),
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap(),
    )
}

/// Starts a run that pauses at `call_i` and reads up to its `awaiting.ask`.
async fn paused(gw: &Gateway) -> (LiveStream, Value) {
    gw.fixture.on_stage("agent-react-step-1", image_call("call_i"));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "img", "message": "Draw a red fox"})).await);
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    (live, ask)
}

#[tokio::test]
async fn continue_runs_the_same_call_again_and_the_run_completes() {
    let gw = Gateway::start(&[agent()], &[]).await;
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Here is your fox."]));
    let (mut live, ask) = paused(&gw).await;
    let types: Vec<&str> = live.seen.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[types.len() - 2..], ["tool.end", "awaiting.ask"], "asked after the call's tool.end");
    assert_eq!((ask["awaitingId"].as_str(), ask["mode"].as_str()), (Some("call_i"), Some("status")));
    assert_eq!(ask["toolName"], "mock_image_generate");
    assert_eq!(ask["arguments"], json!({"prompt": "a red fox"}));
    assert_eq!(ask["status"], json!({"code": -1002, "message": CREDITS, "data": {"balance": 0, "price": 10}}));
    let actions: Vec<&str> = ask["options"].as_array().unwrap().iter().map(|o| o["action"].as_str().unwrap()).collect();
    assert_eq!(actions, ["continue", "cancel"]);
    assert!(ask["timeout"].as_u64().unwrap() > 0);
    assert_eq!(gw.fixture.request_count(), 1, "the call waits: no next turn");
    assert!(live.seen.iter().all(|e| e["type"] != "tool.result"), "no result before the answer");

    let run_id = run_id_of(&live.seen);
    let answer = submit(&gw, json!({"runId": run_id, "toolId": "call_i", "params": "continue"})).await;
    assert_eq!(answer["data"]["status"], "accepted", "{answer}");
    let echoed = live.until(|e| e["type"] == "awaiting.answer").await;
    assert_eq!(echoed["answer"], json!({"mode": "status", "action": "continue"}));
    let result = live.until(|e| e["type"] == "tool.result").await;
    let image: Value = serde_json::from_str(result["result"].as_str().unwrap()).unwrap();
    assert_eq!(image["prompt"], "a red fox", "the same arguments: {image}");
    assert!(image["imageUrl"].as_str().unwrap().starts_with("https://images.example.com/"));
    let rest = live.rest().await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete");
    assert_eq!(rest.iter().filter(|e| e["type"] == "awaiting.ask").count(), 1, "continued once, paused once");

    // The model saw one call with its arguments and the image as its result.
    let (sent, args) = sent_back(&gw, "call_i");
    assert_eq!((sent["imageUrl"].clone(), args), (image["imageUrl"].clone(), json!({"prompt": "a red fox"})));
    assert_eq!(gw.fixture.request_count(), 2);
    let again = submit(&gw, json!({"runId": run_id, "toolId": "call_i", "params": "continue"})).await;
    assert_eq!(again["data"]["status"], "already_answered", "the run is over: {again}");

    let chat_id = live.seen[0]["chatId"].as_str().unwrap().to_owned();
    assert_chat_files_valid(&gw);
    let replay = assert_chat_replayable(&gw, &chat_id).await;
    assert!(replay.iter().any(|e| e["type"] == "tool.result" && e["toolId"] == "call_i"));
    assert_eq!(gw.state.runs.submits().pending(), 0);
}

#[tokio::test]
async fn cancel_gives_the_model_the_declined_result_and_a_timeout_the_expired_one() {
    let gw = Gateway::start(&[agent()], &[]).await;
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Maybe later."]));
    let (mut live, _) = paused(&gw).await;
    let run_id = run_id_of(&live.seen);
    submit(&gw, json!({"runId": run_id, "toolId": "call_i", "params": {"action": "cancel"}})).await;
    let echoed = live.until(|e| e["type"] == "awaiting.answer").await;
    assert_eq!(echoed["answer"]["action"], "cancel");
    let declined = json!({"executed": false, "reason": "declined", "detail": format!("the user declined: {CREDITS}")});
    let result = live.until(|e| e["type"] == "tool.result").await;
    assert_eq!(result["result"], declined.to_string());
    assert_eq!(live.rest().await.last().unwrap()["type"], "run.complete");
    assert_eq!(sent_back(&gw, "call_i").0, declined, "the model's next request holds the declined result");

    // Nobody answers: awaiting.expired, the call is not run again, the run goes on.
    let gw = Gateway::start(&[agent()], &[("AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS", "300")]).await;
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Nobody answered."]));
    let (mut live, ask) = paused(&gw).await;
    assert_eq!(ask["timeout"], 300);
    let events = live.rest().await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"awaiting.expired"), "{types:?}");
    assert_eq!(types.last(), Some(&"run.complete"), "{types:?}");
    let (sent, _) = sent_back(&gw, "call_i");
    assert_eq!(sent["reason"], "status_expired", "{sent}");
    assert!(sent["detail"].as_str().unwrap().ends_with(CREDITS), "{sent}");
    assert_chat_files_valid(&gw);
}

#[tokio::test]
async fn an_answer_that_is_neither_continue_nor_cancel_does_not_run_the_call() {
    let gw = Gateway::start(&[agent()], &[]).await;
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Hm."]));
    let (mut live, _) = paused(&gw).await;
    let run_id = run_id_of(&live.seen);
    submit(&gw, json!({"runId": run_id, "toolId": "call_i", "params": {"code": -1002}})).await;
    let result = live.until(|e| e["type"] == "tool.result").await;
    let result: Value = serde_json::from_str(result["result"].as_str().unwrap()).unwrap();
    assert_eq!((result["executed"].as_bool(), result["reason"].as_str()), (Some(false), Some("invalid_answer")));
    assert_eq!(live.rest().await.last().unwrap()["type"], "run.complete");
}

// -- durable waiting: the server stops while a call waits for the user -------------------------

/// Waits until the run's wait is recorded (the store's mark, and the run knows its wait is
/// durable); see `approvals.rs`.
async fn wait_for_mark(gw: &Gateway, run_id: &str) {
    for _ in 0..200 {
        let durable = gw.state.runs.tracker().get(run_id).is_some_and(|run| run.is_waiting());
        if durable && gw.waiting_runs().await.iter().any(|(run, _)| run == run_id) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the wait of {run_id} was never recorded");
}

#[tokio::test]
async fn a_pause_survives_a_restart_and_continue_runs_the_call_in_the_new_server() {
    let first = Gateway::start(&[agent()], &[]).await;
    let (live, ask) = paused(&first).await;
    let run_id = run_id_of(&live.seen);
    let chat_id = live.seen[0]["chatId"].as_str().unwrap().to_owned();
    let last_seq = ask["seq"].as_u64().unwrap();
    wait_for_mark(&first, &run_id).await;
    let history = first.history_json(&chat_id).await;
    let awaiting = history.iter().find(|l| l["_type"] == "awaiting").expect("the wait is in the history");
    assert_eq!((awaiting["awaitingId"].as_str(), awaiting["ask"]["mode"].as_str()), (Some("call_i"), Some("status")));
    assert!(awaiting.get("continued").is_none(), "not continued yet: {awaiting}");

    // Stopped the way a graceful shutdown ends its grace period; a new server on the same chats.
    first.state.runs.tracker().stop_all();
    let store = first.store_env();
    let vars: Vec<(&str, &str)> = store.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let second = Gateway::start(&[agent()], &vars).await;
    second.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Here is your fox."]));

    let url = format!("{}/api/ap/attach?runId={run_id}&lastSeq={last_seq}", second.base);
    let resp = second.client.get(url).send().await.unwrap();
    assert_eq!(resp.status(), 200, "a restored run is attachable");
    let mut attached = LiveStream::new(resp);
    let shown = attached.next_event().await.expect("the wait is shown again");
    assert_eq!((shown["type"].as_str(), shown["mode"].as_str()), (Some("awaiting.ask"), Some("status")), "{shown}");
    assert_eq!(shown["seq"], last_seq + 1);
    assert_eq!(shown["status"]["code"], -1002);
    assert_eq!(shown["arguments"], json!({"prompt": "a red fox"}));
    assert_eq!(second.fixture.request_count(), 0, "nothing runs before the answer");

    // The source document's resume code.
    let answer = submit(&second, json!({"runId": run_id, "toolId": "call_i", "params": {"code": -2001}})).await;
    assert_eq!(answer["data"]["status"], "accepted", "{answer}");
    let rest: Vec<Value> =
        attached.rest().await.into_iter().filter(|e| e["seq"].as_u64() > shown["seq"].as_u64()).collect();
    let types: Vec<&str> = rest.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"awaiting.answer"), "{types:?}");
    assert_eq!(types.last(), Some(&"run.complete"), "{types:?}");
    assert!(!types.contains(&"awaiting.ask"), "continued once: the call ran with continued = 1 and answered");
    let result = rest.iter().find(|e| e["type"] == "tool.result" && e["toolId"] == "call_i").expect("the call ran");
    assert!(result["result"].as_str().unwrap().contains("imageUrl"), "{result}");
    let (sent, args) = sent_back(&second, "call_i");
    assert!(sent["imageUrl"].is_string());
    assert_eq!(args, json!({"prompt": "a red fox"}), "the same call, the same arguments");

    assert_chat_files_valid(&second);
    let replay = assert_chat_replayable(&second, &chat_id).await;
    assert_eq!(replay.iter().filter(|e| e["type"] == "run.start").count(), 1);
    assert!(!second.waiting_runs().await.iter().any(|(run, _)| *run == run_id), "the mark is gone");
}

#[tokio::test]
async fn a_declined_pause_after_a_restart_tells_the_model() {
    let first = Gateway::start(&[agent()], &[]).await;
    let (live, ask) = paused(&first).await;
    let run_id = run_id_of(&live.seen);
    wait_for_mark(&first, &run_id).await;
    first.state.runs.tracker().stop_all();
    let store = first.store_env();
    let vars: Vec<(&str, &str)> = store.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let second = Gateway::start(&[agent()], &vars).await;
    second.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Fine."]));
    let url = format!("{}/api/ap/attach?runId={run_id}&lastSeq={}", second.base, ask["seq"]);
    let mut attached = LiveStream::new(second.client.get(url).send().await.unwrap());
    attached.until(|e| e["type"] == "awaiting.ask").await;
    submit(&second, json!({"runId": run_id, "toolId": "call_i", "params": "cancel"})).await;
    assert_eq!(attached.rest().await.last().unwrap()["type"], "run.complete");
    let (sent, _) = sent_back(&second, "call_i");
    assert_eq!(
        sent,
        json!({"executed": false, "reason": "declined", "detail": format!("the user declined: {CREDITS}")})
    );
}

// -- the other protocols: AI SDK tool approval, AG-UI interrupt --------------------------------

fn data_frames(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|f| *f != "[DONE]")
        .map(|f| serde_json::from_str(f).unwrap())
        .collect()
}

#[tokio::test]
async fn the_ai_sdk_sees_a_tool_approval_and_approving_continues_the_call() {
    let gw = Gateway::start(&[agent()], &[]).await;
    gw.fixture.on_stage("agent-react-step-1", image_call("call_i"));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Done."]));
    let url = format!("{}/api/ai-sdk/img/chat", gw.base);
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Draw a red fox"}]});
    let first = gw.client.post(&url).json(&json!({"id": "chat-img", "messages": [user.clone()]})).send().await.unwrap();
    let chunks = data_frames(&first.text().await.unwrap());
    let message_id = chunks[0]["messageId"].as_str().unwrap().to_owned();
    let status = chunks.iter().find(|c| c["type"] == "data-tool-status").expect("the status part");
    assert_eq!((status["data"]["state"].as_str(), status["data"]["code"].as_i64()), (Some("waiting"), Some(-1002)));
    assert_eq!(status["data"]["message"], CREDITS);
    let request = chunks.iter().find(|c| c["type"] == "tool-approval-request").expect("an approval request");
    assert_eq!(request["toolCallId"], "call_i");
    assert_eq!(chunks.last().unwrap()["finishReason"], "tool-calls", "the stream ends while the run waits");

    // `addToolApprovalResponse({approved: true})`: continue.
    let assistant = json!({"id": message_id, "role": "assistant", "parts": [{"type": "dynamic-tool",
        "toolName": "mock_image_generate", "toolCallId": "call_i", "state": "approval-responded",
        "input": {"prompt": "a red fox"}, "approval": {"id": request["approvalId"], "approved": true}}]});
    let second =
        gw.client.post(&url).json(&json!({"id": "chat-img", "messages": [user, assistant]})).send().await.unwrap();
    assert_eq!(second.status(), 200);
    let chunks = data_frames(&second.text().await.unwrap());
    let settled = chunks.iter().find(|c| c["type"] == "data-tool-status").expect("the status part, settled");
    assert_eq!(settled["data"]["state"], "continued");
    let output = chunks.iter().find(|c| c["type"] == "tool-output-available").expect("the call's output");
    assert!(output["output"]["imageUrl"].is_string(), "{output}");
    assert_eq!(chunks.last().unwrap()["finishReason"], "stop");
}

#[tokio::test]
async fn ag_ui_ends_with_an_interrupt_and_a_resume_entry_answers_it() {
    let gw = Gateway::start(&[agent()], &[]).await;
    gw.fixture.on_stage("agent-react-step-1", image_call("call_i"));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Maybe later."]));
    let url = format!("{}/api/ag-ui/img", gw.base);
    let input = json!({"threadId": "t-img", "runId": "client-run", "state": {}, "tools": [], "context": [],
        "forwardedProps": {}, "messages": [{"id": "m1", "role": "user", "content": "Draw a red fox"}]});
    let events = data_frames(&gw.client.post(&url).json(&input).send().await.unwrap().text().await.unwrap());
    let finished = events.last().unwrap();
    assert_eq!(finished["type"], "RUN_FINISHED");
    let outcome = &finished["outcome"];
    assert_eq!(outcome["type"], "interrupt", "{finished}");
    let interrupt = &outcome["interrupts"][0];
    assert_eq!((interrupt["id"].as_str(), interrupt["toolCallId"].as_str()), (Some("call_i"), Some("call_i")));
    assert_eq!((interrupt["reason"].as_str(), interrupt["message"].as_str()), (Some("agw.tool_status"), Some(CREDITS)));
    assert_eq!(interrupt["metadata"]["agw"]["code"], -1002);

    let mut next = input.clone();
    next["resume"] = json!([{"interruptId": "call_i", "status": "cancelled"}]);
    let events = data_frames(&gw.client.post(&url).json(&next).send().await.unwrap().text().await.unwrap());
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "RUN_STARTED");
    let result = events.iter().find(|e| e["type"] == "TOOL_CALL_RESULT").expect("the call's result");
    assert!(result["content"].as_str().unwrap().contains("\"reason\":\"declined\""), "{result}");
    assert_eq!(events.last().unwrap()["outcome"]["type"], "success");

    // Answered already: nothing waits.
    let stale = gw.client.post(&url).json(&next).send().await.unwrap();
    assert_eq!(stale.status(), 404);
}
