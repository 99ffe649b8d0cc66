//! The AI SDK and AG-UI endpoints over loopback (issue 16), frame by frame. The real client
//! libraries drive the same endpoints in `scripts/protocols/` (run by `.ci/run`).

mod common;

use agw_testkit::Transcript;
use common::{Gateway, oneshot_agent};
use serde_json::{Value, json};

fn ask_agent() -> (String, String) {
    let text = r#"{"key":"ask","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
        "toolConfig":{"frontends":["confirm_dialog"]},"react":{"systemPrompt":"You ask.","maxSteps":3}}"#;
    ("ask.json".into(), text.into())
}

/// The `data:` payloads of an SSE body (comments and blank lines skipped).
fn data_frames(body: &str) -> Vec<String> {
    body.lines().filter_map(|l| l.strip_prefix("data: ")).map(str::to_owned).collect()
}

fn types(frames: &[String]) -> Vec<String> {
    frames
        .iter()
        .filter(|f| *f != "[DONE]")
        .map(|f| serde_json::from_str::<Value>(f).unwrap()["type"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn ai_sdk_streams_ui_message_chunks_and_resumes_after_add_tool_result() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000), ask_agent()], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["Hel", "lo"]));
    let url = format!("{}/api/ai-sdk/a/chat", gw.base);
    let body = json!({"id": "chat-1", "trigger": "submit-message",
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]});
    let resp = gw.client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(resp.headers()["x-vercel-ai-ui-message-stream"], "v1");
    let frames = data_frames(&resp.text().await.unwrap());
    assert_eq!(frames.last().unwrap(), "[DONE]");
    assert_eq!(
        types(&frames),
        ["start", "start-step", "text-start", "text-delta", "text-delta", "text-end", "finish-step", "finish"]
    );

    gw.fixture
        .on_stage("agent-react-step-1", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{\"q\":1}"]));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Done."]));
    let url = format!("{}/api/ai-sdk/ask/chat", gw.base);
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "ask"}]});
    let first = gw.client.post(&url).json(&json!({"id": "chat-2", "messages": [user.clone()]})).send().await.unwrap();
    let frames = data_frames(&first.text().await.unwrap());
    let chunks: Vec<Value> = frames[..frames.len() - 1].iter().map(|f| serde_json::from_str(f).unwrap()).collect();
    let message_id = chunks[0]["messageId"].as_str().unwrap().to_owned();
    let available = chunks.iter().find(|c| c["type"] == "tool-input-available").unwrap();
    assert_eq!(available["toolName"], "confirm_dialog");
    assert!(available.get("providerExecuted").is_none(), "a client-side tool");
    assert_eq!(chunks.last().unwrap()["finishReason"], "tool-calls", "the stream ends while the run waits");

    let assistant = json!({"id": message_id, "role": "assistant", "parts": [
        {"type": "tool-confirm_dialog", "toolCallId": "call_fe", "state": "output-available",
         "input": {"q": 1}, "output": {"choice": "yes"}}]});
    let body = json!({"id": "chat-2", "messages": [user.clone(), assistant]});
    let second = gw.client.post(&url).json(&body).send().await.unwrap();
    let frames = data_frames(&second.text().await.unwrap());
    let chunks: Vec<Value> = frames[..frames.len() - 1].iter().map(|f| serde_json::from_str(f).unwrap()).collect();
    let output = chunks.iter().find(|c| c["type"] == "tool-output-available").unwrap();
    assert_eq!((output["toolCallId"].as_str(), &output["output"]), (Some("call_fe"), &json!({"choice": "yes"})));
    assert!(chunks.iter().any(|c| c["type"] == "text-delta" && c["delta"] == "Done."));
    assert_eq!(chunks.last().unwrap()["finishReason"], "stop");
    let step2 = gw.fixture.requests().into_iter().find(|r| r.stage() == Some("agent-react-step-2")).unwrap();
    let last = step2.body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], "{\"choice\":\"yes\"}");

    let resume = gw.client.get(format!("{}/api/ai-sdk/ask/chat/chat-2/stream", gw.base)).send().await.unwrap();
    assert_eq!(resume.status(), 204, "nothing runs any more");
    let again = json!({"id": message_id, "role": "assistant", "parts": [{"type": "tool-confirm_dialog",
        "toolCallId": "call_fe", "state": "output-available", "output": 1}]});
    let stale = gw.client.post(&url).json(&json!({"id": "chat-2", "messages": [user, again]})).send().await.unwrap();
    assert_eq!(stale.status(), 409, "the run no longer waits");
}

#[tokio::test]
async fn ag_ui_streams_events_and_continues_with_tool_messages() {
    let gw = Gateway::start(&[ask_agent()], &[]).await;
    gw.fixture.on_stage("agent-react-step-1", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{}"]));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Thanks."]));
    let url = format!("{}/api/ag-ui/ask", gw.base);
    let input = json!({"threadId": "t-1", "runId": "client-run", "state": {}, "tools": [], "context": [],
        "forwardedProps": {}, "messages": [{"id": "m1", "role": "user", "content": "ask"}]});
    let frames = data_frames(&gw.client.post(&url).json(&input).send().await.unwrap().text().await.unwrap());
    let events: Vec<Value> = frames.iter().map(|f| serde_json::from_str(f).unwrap()).collect();
    assert_eq!(events[0]["type"], "RUN_STARTED");
    let finished = events.last().unwrap();
    assert_eq!(finished["type"], "RUN_FINISHED");
    assert_eq!(finished["outcome"], json!({"type": "success", "pendingToolCallIds": ["call_fe"]}));

    let mut next = input.clone();
    next["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "tr", "role": "tool", "toolCallId": "call_fe", "content": "{\"ok\":true}"}));
    let frames = data_frames(&gw.client.post(&url).json(&next).send().await.unwrap().text().await.unwrap());
    let events: Vec<Value> = frames.iter().map(|f| serde_json::from_str(f).unwrap()).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[0], "RUN_STARTED");
    assert!(kinds.contains(&"TOOL_CALL_RESULT") && kinds.contains(&"TEXT_MESSAGE_CONTENT"), "{kinds:?}");
    assert_eq!(events.last().unwrap()["outcome"], json!({"type": "success"}));
    let usage = &events.last().unwrap()["usage"][0];
    assert!(usage["inputTokens"].as_u64().unwrap() > 0 && usage["totalTokens"].as_u64().is_some(), "{usage}");
}

/// `GET …/chat/{id}/stream` of a chat whose run is still streaming: the run from its start.
#[tokio::test]
async fn ai_sdk_resume_follows_a_running_run() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["one ", "two ", "three"]).with_chunk_delay_ms(150));
    let url = format!("{}/api/ai-sdk/a/chat", gw.base);
    let body =
        json!({"id": "resumable", "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "q"}]}]});
    let first = gw.client.post(&url).json(&body).send().await.unwrap();
    let mut stream = first.bytes_stream();
    use futures::StreamExt;
    let _ = stream.next().await; // the run has started; the client "reloads the page"
    drop(stream);
    let resumed = gw.client.get(format!("{url}/resumable/stream")).send().await.unwrap();
    assert_eq!(resumed.status(), 200);
    assert_eq!(resumed.headers()["x-vercel-ai-ui-message-stream"], "v1");
    let frames = data_frames(&resumed.text().await.unwrap());
    assert_eq!(types(&frames)[0], "start", "from the run's start");
    let text: String = frames
        .iter()
        .filter(|f| *f != "[DONE]")
        .map(|f| serde_json::from_str::<Value>(f).unwrap())
        .filter(|c| c["type"] == "text-delta")
        .map(|c| c["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, "one two three");
}

/// `trigger: regenerate-message` answers the last user message again without the answer it
/// replaces in the model's context (the file keeps both runs).
#[tokio::test]
async fn ai_sdk_regenerate_leaves_the_replaced_answer_out_of_the_model_context() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.push(Transcript::openai_text(&["first answer"]));
    gw.fixture.push(Transcript::openai_text(&["second answer"]));
    let url = format!("{}/api/ai-sdk/a/chat", gw.base);
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "question"}]});
    let first = gw.client.post(&url).json(&json!({"id": "regen", "messages": [user.clone()]})).send().await.unwrap();
    assert!(first.text().await.unwrap().contains("first answer"));
    let body = json!({"id": "regen", "trigger": "regenerate-message", "messages": [user]});
    let second = gw.client.post(&url).json(&body).send().await.unwrap().text().await.unwrap();
    assert!(second.contains("second answer"));
    let request = gw.fixture.request(1).unwrap();
    let contents: Vec<&str> =
        request.body["messages"].as_array().unwrap().iter().filter_map(|m| m["content"].as_str()).collect();
    assert_eq!(contents[1..], ["question"], "neither the replaced answer nor the question twice: {contents:?}");
}

fn tools_agent() -> (String, String) {
    let text = r#"{"key":"tools","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
        "toolConfig":{"backends":["mock_city_weather"],"frontends":["confirm_dialog"],
        "approvals":{"mock_city_weather":"ask"}},"react":{"systemPrompt":"You use tools.","maxSteps":4}}"#;
    ("tools.json".into(), text.into())
}

/// The chunks of a UI message stream response, `[DONE]` left out.
async fn ui_chunks(resp: reqwest::Response) -> Vec<Value> {
    assert_eq!(resp.status(), 200);
    let frames = data_frames(&resp.text().await.unwrap());
    assert_eq!(frames.last().map(String::as_str), Some("[DONE]"));
    frames[..frames.len() - 1].iter().map(|f| serde_json::from_str(f).unwrap()).collect()
}

/// Every chunk that opens model output (text, reasoning, a tool call) comes after a `start-step`
/// with no tool output between them: a model turn never shares its step with the tool outputs
/// that preceded it. `useChat`'s `lastAssistantMessageIsCompleteWithToolCalls` reads the last
/// step; a tool output in the same step as the next turn's text makes it post the output again.
fn assert_each_turn_starts_a_step(chunks: &[Value]) {
    let kinds: Vec<&str> = chunks.iter().map(|c| c["type"].as_str().unwrap()).collect();
    let mut open = false;
    let mut outputs_in_step = false;
    for kind in &kinds {
        match *kind {
            "start-step" => (open, outputs_in_step) = (true, false),
            "finish-step" => open = false,
            "tool-output-available" | "tool-output-error" => outputs_in_step = true,
            "text-start" | "reasoning-start" | "tool-input-start" => {
                assert!(open && !outputs_in_step, "{kind} outside a fresh step: {kinds:?}")
            }
            _ => {}
        }
    }
}

/// Issue 32: after a client-side tool output the continuation stream went
/// `tool-output-available`, `text-start` with no `start-step` between them.
#[tokio::test]
async fn ai_sdk_every_model_turn_starts_a_new_step_also_in_a_continuation() {
    let gw = Gateway::start(&[tools_agent()], &[]).await;
    let url = format!("{}/api/ai-sdk/tools/chat", gw.base);
    let user = |text: &str| json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]});

    // A backend tool, then the answer: two model turns in one stream.
    gw.fixture.push(Transcript::openai_tool_call("call_w", "mock_city_weather", &["{\"city\":\"Paris\"}"]));
    gw.fixture.push(Transcript::openai_text(&["Sunny."]));
    let approval = ui_chunks(
        gw.client.post(&url).json(&json!({"id": "steps-1", "messages": [user("weather")]})).send().await.unwrap(),
    )
    .await;
    assert_each_turn_starts_a_step(&approval);
    let request = approval.iter().find(|c| c["type"] == "tool-approval-request").expect("the call asks first");
    let message_id = approval[0]["messageId"].as_str().unwrap().to_owned();
    let answered = json!({"id": message_id, "role": "assistant", "parts": [{"type": "dynamic-tool",
        "toolName": "mock_city_weather", "toolCallId": "call_w", "state": "approval-responded",
        "input": {"city": "Paris"}, "approval": {"id": request["approvalId"], "approved": true}}]});
    let body = json!({"id": "steps-1", "messages": [user("weather"), answered]});
    let after_approval = ui_chunks(gw.client.post(&url).json(&body).send().await.unwrap()).await;
    let kinds: Vec<&str> = after_approval.iter().map(|c| c["type"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"tool-output-available") && kinds.contains(&"text-delta"), "{kinds:?}");
    assert_each_turn_starts_a_step(&after_approval);

    // A frontend tool answered by addToolResult, then the answer.
    gw.fixture.push(Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{\"q\":1}"]));
    gw.fixture.push(Transcript::openai_text(&["You chose."]));
    let first = ui_chunks(
        gw.client.post(&url).json(&json!({"id": "steps-2", "messages": [user("ask")]})).send().await.unwrap(),
    )
    .await;
    assert_each_turn_starts_a_step(&first);
    let message_id = first[0]["messageId"].as_str().unwrap().to_owned();
    let answered = json!({"id": message_id, "role": "assistant", "parts": [{"type": "tool-confirm_dialog",
        "toolCallId": "call_fe", "state": "output-available", "input": {"q": 1}, "output": {"choice": "yes"}}]});
    let body = json!({"id": "steps-2", "messages": [user("ask"), answered]});
    let continuation = ui_chunks(gw.client.post(&url).json(&body).send().await.unwrap()).await;
    let kinds: Vec<&str> = continuation.iter().map(|c| c["type"].as_str().unwrap()).collect();
    let output = kinds.iter().position(|k| *k == "tool-output-available").expect("the client's output");
    assert_eq!(kinds[output + 1..output + 3], ["start-step", "text-start"], "{kinds:?}");
    assert_each_turn_starts_a_step(&continuation);
}

/// A lead that invokes a researcher (whose weather lookups need approval) and a slow writer.
fn team_agents() -> Vec<(String, String)> {
    let model = json!({"providerKey": "fixture", "model": "m"});
    let lead = json!({"key": "lead", "mode": "REACT", "modelConfig": model,
        "toolConfig": {"backends": [], "subAgents": ["researcher", "writer"], "approvals": {"mock_city_weather": "ask"}},
        "react": {"systemPrompt": "LEAD", "maxSteps": 4}});
    let researcher = json!({"key": "researcher", "description": "Looks up.", "mode": "REACT", "modelConfig": model,
        "toolConfig": {"backends": ["mock_city_weather"]}, "react": {"systemPrompt": "RESEARCHER", "maxSteps": 3}});
    let writer = json!({"key": "writer", "description": "Writes.", "mode": "ONESHOT", "modelConfig": model,
        "plain": {"systemPrompt": "WRITER"}});
    [("lead", lead), ("researcher", researcher), ("writer", writer)]
        .into_iter()
        .map(|(key, text)| (format!("{key}.json"), text.to_string()))
        .collect()
}

/// Issue 34: a child's approval ends the AI SDK stream while the other child still writes; the
/// client answers through the root run, and the continuation carries everything the writer did
/// meanwhile (it starts where the first stream ended, not at the run's latest event).
#[tokio::test]
async fn ai_sdk_a_childs_approval_is_answered_through_the_root_run_and_nothing_of_the_others_is_lost() {
    let gw = Gateway::start(&team_agents(), &[]).await;
    gw.fixture.set_responder(|_, body| {
        let system = body["messages"][0]["content"].as_str().unwrap_or("");
        // The agent's prompt comes first; agw may add to it.
        let agent = ["LEAD", "RESEARCHER"].into_iter().find(|p| system.starts_with(p)).unwrap_or("WRITER");
        let answered = body["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        Some(match (agent, answered) {
            ("LEAD", false) => Transcript::openai_tool_call(
                "call_team",
                "agent_invoke",
                &[&json!({"tasks": [{"subAgentKey": "researcher", "task": "Weather?"},
                    {"subAgentKey": "writer", "task": "Haiku."}]})
                .to_string()],
            ),
            ("LEAD", true) => Transcript::openai_text(&["Team ", "done."]),
            ("RESEARCHER", false) => {
                Transcript::openai_tool_call("call_w", "mock_city_weather", &["{\"city\":\"Paris\"}"])
            }
            ("RESEARCHER", true) => Transcript::openai_text(&["Sunny."]),
            _ => Transcript::openai_text(&["Soft ", "rain ", "falls."]).with_chunk_delay_ms(300),
        })
    });
    let url = format!("{}/api/ai-sdk/lead/chat", gw.base);
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Team up."}]});
    let first =
        ui_chunks(gw.client.post(&url).json(&json!({"id": "team-1", "messages": [user]})).send().await.unwrap()).await;
    let request = first.iter().find(|c| c["type"] == "tool-approval-request").expect("the child asks");
    let call_id = request["toolCallId"].as_str().unwrap().to_owned();
    let task = |c: &Value| c["providerMetadata"]["agw"]["taskId"].as_str().map(str::to_owned);
    let call = first.iter().find(|c| c["type"] == "tool-input-start" && c["toolCallId"] == call_id.as_str()).unwrap();
    let research = task(call).expect("the child's call names its task");
    assert_eq!(first.last().unwrap()["type"], "finish");

    // The writer finishes while the client decides.
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let message_id = first[0]["messageId"].as_str().unwrap().to_owned();
    let answered = json!({"id": message_id, "role": "assistant", "parts": [{"type": "dynamic-tool",
        "toolName": "mock_city_weather", "toolCallId": call_id, "state": "approval-responded",
        "input": {"city": "Paris"}, "approval": {"id": request["approvalId"], "approved": true}}]});
    let body = json!({"id": "team-1", "messages": [user, answered]});
    let second = ui_chunks(gw.client.post(&url).json(&body).send().await.unwrap()).await;
    assert_eq!(second.last().unwrap()["type"], "finish", "{second:?}");
    let output = second.iter().find(|c| c["toolCallId"] == call_id.as_str() && c["type"] == "tool-output-available");
    assert!(output.unwrap()["output"]["temperatureC"].is_number());

    // Text per task over both streams: every delta's part was opened in its own stream.
    let mut texts: std::collections::HashMap<Option<String>, String> = Default::default();
    for stream in [&first, &second] {
        let mut owners: std::collections::HashMap<String, Option<String>> = Default::default();
        for c in stream.iter() {
            let id = c["id"].as_str().unwrap_or_default().to_owned();
            match c["type"].as_str().unwrap() {
                "text-start" => {
                    owners.insert(id, task(c));
                }
                "text-delta" => {
                    let owner = owners.get(&id).unwrap_or_else(|| panic!("a delta of a part not open: {c}"));
                    texts.entry(owner.clone()).or_default().push_str(c["delta"].as_str().unwrap());
                }
                _ => {}
            }
        }
    }
    assert_eq!(texts.get(&Some(research)).map(String::as_str), Some("Sunny."));
    assert_eq!(texts.get(&None).map(String::as_str), Some("Team done."), "the parent's answer alone");
    let writer: Vec<&String> =
        texts.iter().filter(|(k, _)| k.is_some()).map(|(_, v)| v).filter(|v| *v != "Sunny.").collect();
    assert_eq!(writer, ["Soft rain falls."], "the writer's text, whole: {texts:?}");
}
