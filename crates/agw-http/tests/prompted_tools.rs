//! Tool calling for models without native function calling (`modelConfig.toolCalling:
//! "prompted"`, docs/models.md) over real HTTP: the fixture provider replays what small local
//! models write (`agw-testkit/transcripts/prompted-*.json`) and checks what they were sent.

mod common;

use agw_testkit::{RecordedRequest, StreamOutcome, Transcript};
use common::Gateway;
use serde_json::{Value, json};

/// An agent on the fixture provider whose model is prompted; `extra` is merged into the
/// top-level object.
fn agent(key: &str, mode: &str, extra: Value) -> (String, String) {
    let mut root = json!({
        "key": key,
        "mode": mode,
        "modelConfig": {"providerKey": "fixture", "model": "qwen2.5-1.5b-instruct", "toolCalling": "prompted"},
        "toolConfig": {"backends": ["mock_city_weather"]},
        "react": {"systemPrompt": "You are a weather assistant.", "maxSteps": 4},
        "plain": {"systemPrompt": "You are a weather assistant."},
        "planExecute": {
            "plan": {"systemPrompt": "Plan the work."},
            "execute": {"systemPrompt": "Do the task."},
            "summary": {"systemPrompt": "Sum up."}
        }
    });
    for (k, v) in extra.as_object().unwrap() {
        root[k] = v.clone();
    }
    (format!("{key}.json"), root.to_string())
}

fn transcript(name: &str) -> Transcript {
    Transcript::provider_file(name).expect("transcript loads")
}

/// A prompted model's answer in these content chunks (llama-server-like: text only).
fn prompted(pieces: &[&str]) -> Transcript {
    Transcript::openai_text(pieces)
}

fn request(gw: &Gateway, stage: &str) -> RecordedRequest {
    gw.fixture.requests().into_iter().find(|r| r.stage() == Some(stage)).unwrap_or_else(|| panic!("no {stage} request"))
}

/// The request a prompted model gets: no tool fields, no tool roles, no native calls.
fn assert_text_only(body: &Value) {
    for key in ["tools", "tool_choice", "parallel_tool_calls"] {
        assert!(body.get(key).is_none(), "{key} sent: {body}");
    }
    for message in body["messages"].as_array().unwrap() {
        assert_ne!(message["role"], "tool", "{message}");
        assert!(message.get("tool_calls").is_none(), "{message}");
    }
}

fn system(body: &Value) -> &str {
    assert_eq!(body["messages"][0]["role"], "system");
    body["messages"][0]["content"].as_str().unwrap()
}

fn messages<'a>(body: &'a Value, role: &str) -> Vec<&'a str> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == role)
        .filter_map(|m| m["content"].as_str())
        .collect()
}

fn field<'a>(events: &[&'a Value], ty: &str, key: &str) -> Vec<&'a str> {
    events.iter().filter(|e| e["type"] == ty).filter_map(|e| e[key].as_str()).collect()
}

fn assert_no_markers(events: &[&Value]) {
    for event in events {
        if let Some(delta) = event["delta"].as_str() {
            assert!(!delta.contains('✿'), "a marker reached the client: {event}");
        }
    }
}

/// REACT with a backend tool, end to end: the tools are in the system prompt and not in the
/// request; the model's text call streams as tool.start / tool.args; the tool runs; its result
/// goes back as user text; no marker reaches the client.
#[tokio::test]
async fn react_backend_tool_end_to_end() {
    let gw = Gateway::start(&[agent("localReact", "REACT", json!({}))], &[]).await;
    gw.fixture.on_stage("agent-react-step-1", transcript("prompted-qwen-llama-server-call"));
    gw.fixture.on_stage("agent-react-step-2", transcript("prompted-qwen-llama-server-answer"));
    let stream = gw.run(&json!({"agentKey": "localReact", "message": "Weather in Tokyo on 2026-02-13?"})).await;
    let events = stream.events();
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert_eq!(stream.last()["finishReason"], "stop");
    assert_no_markers(&events);

    let first = request(&gw, "agent-react-step-1");
    assert_text_only(&first.body);
    let prompt = system(&first.body);
    assert!(prompt.starts_with("You are a weather assistant."), "{prompt}");
    assert!(prompt.contains("\n## mock_city_weather\nMock weather for a city on a date"), "{prompt}");
    assert!(prompt.contains("Arguments: {\"type\":\"object\",\"properties\":{\"city\":"), "{prompt}");
    assert!(prompt.contains("✿FUNCTION✿: the tool's name, one of [mock_city_weather]"), "{prompt}");
    assert_eq!(
        first.wait_outcome().await,
        StreamOutcome::ClientClosed,
        "agw hung up when the model began to invent a ✿RESULT✿"
    );

    // The call, as a native one would stream.
    let starts: Vec<&&Value> = events.iter().filter(|e| e["type"] == "tool.start").collect();
    assert_eq!(starts.len(), 1);
    assert_eq!(
        (starts[0]["toolName"].as_str(), starts[0]["toolType"].as_str()),
        (Some("mock_city_weather"), Some("function"))
    );
    let tool_id = starts[0]["toolId"].as_str().unwrap();
    assert!(tool_id.starts_with("call_prompted_"), "{tool_id}");
    let args = field(&events, "tool.args", "delta");
    assert!(args.len() > 10, "argument tokens stream one by one: {args:?}");
    let args: Value = serde_json::from_str(&args.concat()).unwrap();
    assert_eq!(args, json!({"city": "Tokyo", "date": "2026-02-13"}));
    let types = stream.types();
    let at = |ty: &str| types.iter().position(|t| t == ty).unwrap_or_else(|| panic!("no {ty}: {types:?}"));
    assert!(at("tool.start") < at("tool.end") && at("tool.end") < at("tool.result"));
    let result = field(&events, "tool.result", "result")[0];
    let weather: Value = serde_json::from_str(result).unwrap();
    assert!(weather.get("temperatureC").is_some(), "the tool really ran: {result}");

    // One upstream token, one content event, before and after the call.
    let text = field(&events, "content.delta", "delta");
    assert_eq!(text[..10].concat(), "I'll check the weather in Tokyo for you.\n");
    assert_eq!(text.len(), 10 + 23, "{text:?}");
    assert_eq!(text[10..].concat(), "In Tokyo on 2026-02-13 it is 21 °C and sunny.");

    // The second request carries the call and its result as text.
    let second = request(&gw, "agent-react-step-2");
    assert_text_only(&second.body);
    let assistant = messages(&second.body, "assistant");
    assert_eq!(
        assistant.last().copied(),
        Some("✿FUNCTION✿: mock_city_weather\n✿ARGS✿: {\"city\":\"Tokyo\",\"date\":\"2026-02-13\"}")
    );
    let users = messages(&second.body, "user");
    assert_eq!(users.last().copied(), Some(format!("✿RESULT✿: {result}").as_str()));
    assert!(system(&second.body).contains("## mock_city_weather"), "the tools are offered again");

    // The chat's history holds no marker, replays, and a later run's window is sent as text.
    let chat = events[0]["chatId"].as_str().unwrap().to_owned();
    common::assert_chat_replayable(&gw, &chat).await;
    let history = serde_json::to_string(&gw.history_json(&chat).await).unwrap();
    assert!(!history.contains('✿'), "{history}");
    gw.fixture.set_responder(|_, body| {
        let last = body["messages"].as_array()?.last()?["content"].as_str()?;
        last.contains("Thanks").then(|| prompted(&["You're welcome."]))
    });
    let next = gw.run(&json!({"agentKey": "localReact", "chatId": chat, "message": "Thanks!"})).await;
    assert_eq!(next.last()["type"], "run.complete", "{:?}", next.types());
    let later = gw.fixture.requests().last().unwrap().body.clone();
    assert_text_only(&later);
    let earlier = messages(&later, "assistant").join("\n");
    assert!(earlier.contains("✿FUNCTION✿: mock_city_weather\n✿ARGS✿: {"), "{later}");
}

/// A call the model writes wrong is answered with an error result it can act on; the model's
/// corrected call runs on the next turn and the run completes.
#[tokio::test]
async fn a_malformed_call_is_corrected_on_the_next_turn() {
    let gw = Gateway::start(&[agent("localFix", "REACT", json!({}))], &[]).await;
    gw.fixture.on_stage("agent-react-step-1", transcript("prompted-llama-ollama-malformed"));
    gw.fixture.on_stage("agent-react-step-2", transcript("prompted-llama-ollama-corrected"));
    gw.fixture.on_stage("agent-react-step-3", prompted(&["Tokyo: ", "21 °C, sunny."]));
    let stream = gw.run(&json!({"agentKey": "localFix", "message": "Weather in Tokyo on 2026-02-13?"})).await;
    let events = stream.events();
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert_no_markers(&events);

    let results = field(&events, "tool.result", "result");
    assert_eq!(results.len(), 2);
    let error: Value = serde_json::from_str(results[0]).unwrap();
    assert_eq!(error["ok"], false);
    let message = error["error"].as_str().unwrap();
    assert!(message.starts_with("Invalid tool call: the arguments are not valid JSON"), "{message}");
    assert!(message.contains("✿ARGS✿: {\"name\": \"value\"}"), "it says what to write: {message}");
    assert!(serde_json::from_str::<Value>(results[1]).unwrap().get("temperatureC").is_some(), "{}", results[1]);

    // The model sees its own call as it wrote it, then the error.
    let second = request(&gw, "agent-react-step-2");
    assert_text_only(&second.body);
    assert_eq!(
        messages(&second.body, "assistant").last().copied(),
        Some("✿FUNCTION✿: mock_city_weather\n✿ARGS✿: {city: \"Tokyo\", date: \"2026-02-13\"}")
    );
    assert_eq!(messages(&second.body, "user").last().copied(), Some(format!("✿RESULT✿: {}", results[0]).as_str()));
    assert_eq!(field(&events, "content.delta", "delta").concat(), "Tokyo: 21 °C, sunny.");
}

/// The id of the current plan task, from the task prompt of an execute round.
fn current_task_id(body: &Value) -> Option<String> {
    messages(body, "user").iter().rev().find_map(|text| {
        let line = text.lines().find(|l| l.starts_with("Current task ID: "))?;
        Some(line.trim_start_matches("Current task ID: ").trim().to_owned())
    })
}

/// PLAN_EXECUTE: the forced plan tool is an instruction in the prompt, the plan and the task's
/// calls come back from text, the summary offers no tools.
#[tokio::test]
async fn plan_execute_with_text_calls() {
    let gw = Gateway::start(&[agent("localPlan", "PLAN_EXECUTE", json!({}))], &[]).await;
    gw.fixture.set_responder(|stage, body| {
        let answer = match stage? {
            "agent-plan-generate" => prompted(&[
                "✿FUNCTION✿: _plan_add",
                "_tasks_\n✿AR",
                "GS✿: {\"tasks\": [{\"description\": \"Look up the weather in Tokyo\"}]}",
            ]),
            "agent-plan-execute-step-1" => prompted(&[
                "✿FUNCTION✿: mock_city_weather\n",
                "✿ARGS✿: {\"city\": \"Tokyo\", \"date\": \"2026-02-13\"}",
            ]),
            "agent-plan-execute-step-1-work-2" => {
                let id = current_task_id(body)?;
                let args = json!({"taskId": id, "status": "completed"});
                prompted(&["Done.\n✿FUNCTION✿: _plan_update_task_\n", &format!("✿ARGS✿: {args}")])
            }
            "agent-plan-final" => prompted(&["Tokyo: ", "21 °C, sunny."]),
            _ => return None,
        };
        Some(answer)
    });
    let stream =
        gw.run(&json!({"agentKey": "localPlan", "message": "What is the weather in Tokyo on 2026-02-13?"})).await;
    let events = stream.events();
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert_no_markers(&events);
    let names = field(&events, "tool.start", "toolName");
    assert_eq!(names, ["_plan_add_tasks_", "mock_city_weather", "_plan_update_task_"]);
    let types = stream.types();
    assert!(types.iter().any(|t| t == "task.complete"), "{types:?}");
    let plans: Vec<&&Value> = events.iter().filter(|e| e["type"] == "plan.update").collect();
    assert_eq!(plans.last().unwrap()["plan"][0]["status"], "completed");

    let generate = request(&gw, "agent-plan-generate");
    assert_text_only(&generate.body);
    let prompt = system(&generate.body);
    assert!(prompt.contains("## _plan_add_tasks_"), "{prompt}");
    assert!(
        prompt.ends_with("In this reply you must call the tool _plan_add_tasks_."),
        "the required choice: {prompt}"
    );
    let work = request(&gw, "agent-plan-execute-step-1-work-2");
    assert_text_only(&work.body);
    let users = messages(&work.body, "user");
    assert!(users.last().unwrap().starts_with("✿RESULT✿: {"), "{users:?}");
    let summary = request(&gw, "agent-plan-final");
    assert_text_only(&summary.body);
    let prompt = system(&summary.body);
    assert!(prompt.contains("You cannot call tools in this reply."), "{prompt}");
    assert_eq!(field(&events, "content.delta", "delta").last().copied(), Some("21 °C, sunny."));
}

/// ONESHOT with toolChoice REQUIRED: a first answer without a call gets the repair turn, which
/// carries the instruction too; its text call runs and the final answer follows.
#[tokio::test]
async fn oneshot_required_repair_turn() {
    let gw = Gateway::start(&[agent("localOne", "ONESHOT", json!({"toolChoice": "REQUIRED"}))], &[]).await;
    gw.fixture.on_stage("agent-oneshot-tool-first", prompted(&["It is probably sunny."]));
    gw.fixture.on_stage(
        "agent-oneshot-tool-first-repair",
        prompted(&["✿FUNCTION✿: mock_city_weather\n✿ARGS✿: {\"city\": \"Tokyo\", \"date\": \"2026-02-13\"}\n"]),
    );
    gw.fixture.on_stage("agent-oneshot-tool-final", prompted(&["Sunny, 21 °C."]));
    let stream = gw.run(&json!({"agentKey": "localOne", "message": "Weather in Tokyo on 2026-02-13?"})).await;
    let events = stream.events();
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert_no_markers(&events);
    for stage in ["agent-oneshot-tool-first", "agent-oneshot-tool-first-repair"] {
        let body = request(&gw, stage).body;
        assert_text_only(&body);
        assert!(system(&body).ends_with("In this reply you must call the tool mock_city_weather."), "{stage}");
    }
    assert_eq!(field(&events, "tool.start", "toolName"), ["mock_city_weather"]);
    let last = request(&gw, "agent-oneshot-tool-final").body;
    assert_text_only(&last);
    assert!(messages(&last, "user").last().unwrap().starts_with("✿RESULT✿: {"));
}

/// Prompted tool calling on the Anthropic protocol: the Messages API request carries no
/// `tools` and no `tool_use` / `tool_result` blocks — the tools are in `system`, the call and
/// its result are text — and the call parsed out of Claude's text runs like a native one.
#[tokio::test]
async fn an_anthropic_model_is_prompted_the_same_way() {
    let agent = json!({"key": "claudeLocal", "mode": "REACT",
        "modelConfig": {"providerKey": common::CLAUDE_PROVIDER, "model": "claude-x", "toolCalling": "prompted"},
        "toolConfig": {"backends": ["mock_city_weather"]},
        "react": {"systemPrompt": "You are a weather assistant.", "maxSteps": 4}});
    let (gw, claude) = Gateway::start_with_claude(&[("claudeLocal.json".into(), agent.to_string())], &[]).await;
    claude.on_stage(
        "agent-react-step-1",
        Transcript::anthropic_text(&[
            "✿FUNCTION✿: mock_city_weather\n✿ARGS✿: ",
            r#"{"city": "Paris", "date": "2026-02-13"}"#,
        ]),
    );
    claude.on_stage("agent-react-step-2", Transcript::anthropic_text(&["Sunny in Paris."]));

    let stream = gw.run(&json!({"agentKey": "claudeLocal", "message": "Weather in Paris?"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let start = &stream.of_type("tool.start")[0];
    assert_eq!(start["toolName"], "mock_city_weather");
    assert_eq!(stream.of_type("tool.result").len(), 1);
    let text: String = stream.of_type("content.delta").iter().map(|e| e["delta"].as_str().unwrap()).collect();
    assert!(!text.contains('✿'), "markers never reach the client: {text}");

    let requests = claude.requests();
    let first = &requests[0].body;
    assert!(first.get("tools").is_none() && first.get("tool_choice").is_none(), "{first}");
    let system = first["system"].to_string();
    assert!(system.contains("# Tools") && system.contains("## mock_city_weather"), "{system}");
    let second = &requests[1].body;
    let sent = second["messages"].to_string();
    assert!(!sent.contains("tool_use") && !sent.contains("tool_result"), "{sent}");
    assert!(sent.contains("✿FUNCTION✿: mock_city_weather") && sent.contains("✿RESULT✿:"), "{sent}");
}
