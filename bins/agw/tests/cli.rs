//! Drives the real `agw` binary: the README's first command must stream with zero configuration.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agw_protocol::sse::SseDecoder;
use serde_json::Value;

struct Running {
    child: Child,
    base: String,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("agw-cli-test-{}", std::process::id())));
    }
}

fn agw() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agw"));
    // A clean slate: no operator configuration leaks into the test.
    for var in ["AGENT_EXTERNAL_DIR", "AGW_CONFIG", "SERVER_ADDRESS", "SERVER_PORT", "AGENT_AUTH_ENABLED"] {
        cmd.env_remove(var);
    }
    cmd
}

fn start(args: &[&str], env: &[(&str, &str)]) -> Running {
    let mut cmd = agw();
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let scratch = std::env::temp_dir().join(format!("agw-cli-test-{}", std::process::id()));
    cmd.env("MEMORY_CHAT_DIR", scratch.join("chats")).env("AGENT_DATA_EXTERNAL_DIR", scratch.join("data"));
    let mut child = cmd.spawn().expect("spawn agw");
    let stdout = child.stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("read listening line");
    let base = line
        .trim()
        .strip_prefix("agw listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    Running { child, base }
}

#[tokio::test]
async fn serve_with_no_configuration_streams_the_demo_model() {
    let agw = start(&["serve", "--port", "0"], &[("AGW_DEMO_CHUNK_DELAY_MS", "20")]);
    assert!(agw.base.starts_with("http://127.0.0.1:"), "no auth → loopback only: {}", agw.base);
    let client = reqwest::Client::new();

    let agents: Value = client.get(format!("{}/api/ap/agents", agw.base)).send().await.unwrap().json().await.unwrap();
    let keys: Vec<&str> = agents["data"].as_array().unwrap().iter().map(|a| a["key"].as_str().unwrap()).collect();
    assert!(keys.contains(&"demoModePlain") && keys.contains(&"demoModeThinking"), "{keys:?}");

    let mut resp = client
        .post(format!("{}/api/ap/query", agw.base))
        .json(&serde_json::json!({"agentKey": "demoModeThinking", "message": "What is carbon?"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let mut decoder = SseDecoder::new();
    let mut frames = Vec::new();
    let mut events: Vec<(Instant, Value)> = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), resp.chunk()).await.unwrap().unwrap() {
        decoder.feed(&chunk, &mut frames);
        for f in frames.drain(..) {
            if !f.is_heartbeat() {
                events.push((Instant::now(), serde_json::from_str(&f.data).unwrap()));
            }
        }
    }
    let types: Vec<&str> = events.iter().map(|(_, e)| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[..4], ["request.query", "chat.start", "run.start", "reasoning.start"]);
    assert_eq!(*types.last().unwrap(), "run.complete");
    let reasoning = types.iter().filter(|t| **t == "reasoning.delta").count();
    let content: Vec<&(Instant, Value)> = events.iter().filter(|(_, e)| e["type"] == "content.delta").collect();
    assert!(reasoning >= 2 && content.len() >= 3, "streams in small chunks: {types:?}");
    // Real streaming, not one burst: the demo model waits between chunks and so do the events.
    let spread = content.last().unwrap().0.duration_since(content[0].0);
    assert!(
        spread >= Duration::from_millis(20 * (content.len() as u64 - 1) / 2),
        "content arrived in one burst ({spread:?})"
    );
    let answer: String = content.iter().map(|(_, e)| e["delta"].as_str().unwrap()).collect();
    assert!(answer.contains("What is carbon?"), "the demo answer quotes the question: {answer}");
}

async fn events_of(resp: reqwest::Response) -> Vec<Value> {
    let mut resp = resp;
    let mut decoder = SseDecoder::new();
    let mut frames = Vec::new();
    let mut events = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), resp.chunk()).await.unwrap().unwrap() {
        decoder.feed(&chunk, &mut frames);
        events.extend(frames.drain(..).filter(|f| !f.is_heartbeat()).map(|f| serde_json::from_str(&f.data).unwrap()));
    }
    events
}

#[tokio::test]
async fn the_demo_model_drives_tools_viewports_and_the_frontend_round_trip() {
    let agw = start(&["serve", "--port", "0"], &[("AGW_DEMO_CHUNK_DELAY_MS", "0")]);
    let client = reqwest::Client::new();
    let query = |body: Value| client.post(format!("{}/api/ap/query", agw.base)).json(&body).send();

    // REACT: think, call the weather tool, answer from its result.
    let events = events_of(
        query(serde_json::json!({"agentKey": "demoModeReact", "message": "What's the weather in Tokyo?"}))
            .await
            .unwrap(),
    )
    .await;
    let start = events.iter().find(|e| e["type"] == "tool.start").expect("the demo model calls a tool");
    assert_eq!(start["toolName"], "mock_city_weather");
    let result = events.iter().find(|e| e["type"] == "tool.result").unwrap()["result"].as_str().unwrap().to_string();
    assert!(result.contains("\"city\":\"东京\""), "{result}");
    let answer: String =
        events.iter().filter(|e| e["type"] == "content.delta").map(|e| e["delta"].as_str().unwrap()).collect();
    assert!(answer.contains("mock_city_weather"), "{answer}");
    assert_eq!(events.last().unwrap()["type"], "run.complete");

    // The weather card viewport block, as the tool's after-call hint asks.
    let events = events_of(
        query(serde_json::json!({"agentKey": "demoViewport", "message": "Weather in Paris?"})).await.unwrap(),
    )
    .await;
    let answer: String =
        events.iter().filter(|e| e["type"] == "content.delta").map(|e| e["delta"].as_str().unwrap()).collect();
    assert!(answer.contains("```viewport\ntype=html, key=show_weather_card\n{"), "{answer}");

    // Structured output: the weather tool, then a JSON answer of the agent's outputSchema, typed on
    // run.complete.
    let events = events_of(
        query(serde_json::json!({"agentKey": "demoStructuredOutput", "message": "Weather in Paris?"})).await.unwrap(),
    )
    .await;
    assert!(events.iter().any(|e| e["type"] == "tool.result"), "the tool ran first");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "run.complete", "{done}");
    let output = &done["output"];
    assert!(output["city"].is_string() && output["temperatureC"].is_number(), "{output}");
    assert!(output["advice"].as_str().unwrap().contains("offline demo model"), "{output}");
    // The last text block is the answer (the first said it would call the tool).
    let last_block = &events.iter().rfind(|e| e["type"] == "content.start").unwrap()["contentId"];
    let answer: String = events
        .iter()
        .filter(|e| e["type"] == "content.delta" && e["contentId"] == *last_block)
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&answer).unwrap(), *output, "the streamed text is the same JSON");

    // A team: one agent_invoke runs two demo agents at once, each framed by its task.
    let events = events_of(
        query(serde_json::json!({"agentKey": "demoTeam", "message": "What's the weather in Tokyo?"})).await.unwrap(),
    )
    .await;
    let agents: Vec<&str> =
        events.iter().filter(|e| e["type"] == "task.start").map(|e| e["subAgentKey"].as_str().unwrap()).collect();
    assert_eq!(agents, ["demoModeReact", "demoModePlain"]);
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool.start" && e["toolName"] == "mock_city_weather" && e["taskId"].is_string())
    );
    assert_eq!(events.iter().filter(|e| e["type"] == "task.complete").count(), 2);
    let answer: String = events
        .iter()
        .filter(|e| e["type"] == "content.delta" && e["taskId"].is_null())
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(answer.contains("`demoModeReact` →") && answer.contains("`demoModePlain` →"), "{answer}");
    assert_eq!(events.last().unwrap()["type"], "run.complete");

    // Citations: the demo model cites each chat message it uses; no marker reaches the text.
    let events = events_of(
        query(serde_json::json!({"agentKey": "demoCitations", "message": "What did the team report last week?"}))
            .await
            .unwrap(),
    )
    .await;
    let cited: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "content.citation")
        .map(|e| e["record"]["messageId"].as_str().unwrap())
        .collect();
    assert_eq!(cited, ["361", "362", "401", "431", "432"]);
    let answer: String =
        events.iter().filter(|e| e["type"] == "content.delta").map(|e| e["delta"].as_str().unwrap()).collect();
    assert!(answer.contains("Coral: The translation") && !answer.contains("[cite:"), "{answer}");

    // Guardrails: the demo model echoes the question, the bundled rule set checks it as it
    // streams — an address is redacted before it leaves, a medical word warns, a forbidden topic
    // is revoked after it began to stream.
    let events = events_of(
        query(serde_json::json!({"agentKey": "demoGuardrails", "message": "What dosage? Mail ann@example.com"}))
            .await
            .unwrap(),
    )
    .await;
    let answer: String =
        events.iter().filter(|e| e["type"] == "content.delta").map(|e| e["delta"].as_str().unwrap()).collect();
    assert!(answer.contains("[email]") && !answer.contains("ann@"), "{answer}");
    assert!(events.iter().any(|e| e["type"] == "guard.warning" && e["rule"] == "medical-advice"));
    assert_eq!(events.last().unwrap()["type"], "run.complete");
    let events = events_of(
        query(serde_json::json!({"agentKey": "demoGuardrails", "message": "Tell me about the nerve agent"}))
            .await
            .unwrap(),
    )
    .await;
    let revoke = events.iter().find(|e| e["type"] == "content.revoke").expect("a revoke");
    assert_eq!(revoke["rule"], "forbidden-topic");
    assert!(events.iter().filter(|e| e["type"] == "content.delta").count() >= 2, "some text streamed first");
    assert_eq!(events.last().unwrap()["error"]["code"], "guardrail_blocked");

    // Actions: fire and forget.
    let events = events_of(
        query(serde_json::json!({"agentKey": "demoAction", "message": "switch to the dark theme"})).await.unwrap(),
    )
    .await;
    assert!(events.iter().any(|e| e["type"] == "action.result" && e["result"] == "OK"));

    // Frontend tool: the run waits for the person's answer.
    let resp =
        query(serde_json::json!({"agentKey": "demoConfirmDialog", "message": "Should we go hiking?"})).await.unwrap();
    let mut body = resp;
    let mut decoder = SseDecoder::new();
    let mut frames = Vec::new();
    let mut seen: Vec<Value> = Vec::new();
    while !seen.iter().any(|e| e["type"] == "tool.end") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.chunk()).await.unwrap().unwrap().unwrap();
        decoder.feed(&chunk, &mut frames);
        seen.extend(frames.drain(..).filter(|f| !f.is_heartbeat()).map(|f| serde_json::from_str(&f.data).unwrap()));
    }
    let run_id = seen.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_string();
    let tool_id = seen.iter().find(|e| e["type"] == "tool.start").unwrap()["toolId"].as_str().unwrap().to_string();
    let submit: Value = client
        .post(format!("{}/api/ap/submit", agw.base))
        .json(&serde_json::json!({"runId": run_id, "toolId": tool_id, "params": {"selectedOption": "Yes", "selectedIndex": 1}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(submit["data"]["accepted"], true);
    let rest = events_of(body).await;
    assert!(
        rest.iter()
            .any(|e| e["type"] == "tool.result" && e["result"] == "{\"selectedOption\":\"Yes\",\"selectedIndex\":1}")
    );
    assert_eq!(rest.last().unwrap()["type"], "run.complete");

    // A tool that pauses for the user: "Not enough credits" until the person continues.
    let mut body =
        query(serde_json::json!({"agentKey": "demoCredits", "message": "Draw a red fox in the snow"})).await.unwrap();
    let mut seen: Vec<Value> = Vec::new();
    while !seen.iter().any(|e| e["type"] == "awaiting.ask") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.chunk()).await.unwrap().unwrap().unwrap();
        decoder.feed(&chunk, &mut frames);
        seen.extend(frames.drain(..).filter(|f| !f.is_heartbeat()).map(|f| serde_json::from_str(&f.data).unwrap()));
    }
    let ask = seen.iter().find(|e| e["type"] == "awaiting.ask").unwrap();
    assert_eq!((ask["mode"].as_str(), ask["toolName"].as_str()), (Some("status"), Some("mock_image_generate")));
    assert_eq!(ask["status"]["code"], -1002);
    assert_eq!(ask["status"]["message"], "Not enough credits to generate an image");
    let run_id = seen.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_string();
    let submit: Value = client
        .post(format!("{}/api/ap/submit", agw.base))
        .json(&serde_json::json!({"runId": run_id, "toolId": ask["awaitingId"], "params": "continue"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(submit["data"]["accepted"], true);
    let rest = events_of(body).await;
    assert!(rest.iter().any(|e| e["type"] == "awaiting.answer" && e["answer"]["action"] == "continue"));
    let result = rest.iter().find(|e| e["type"] == "tool.result").unwrap()["result"].as_str().unwrap().to_string();
    assert!(result.contains("\"imageUrl\""), "{result}");
    let answer: String =
        rest.iter().filter(|e| e["type"] == "content.delta").map(|e| e["delta"].as_str().unwrap()).collect();
    assert!(answer.contains("![Draw a red fox in the snow](https://images.example.com/"), "{answer}");
    assert_eq!(rest.last().unwrap()["type"], "run.complete");
}

#[tokio::test]
async fn the_demo_model_runs_a_skill_script() {
    let agw = start(&["serve", "--port", "0"], &[("AGW_DEMO_CHUNK_DELAY_MS", "0")]);
    let client = reqwest::Client::new();
    let detail: Value = client
        .get(format!("{}/api/ap/agent?agentKey=demoMathSkill", agw.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(detail["data"]["meta"]["skills"], serde_json::json!(["math_basic", "math_stats", "text_utils"]));

    let resp = client
        .post(format!("{}/api/ap/query", agw.base))
        .json(&serde_json::json!({"agentKey": "demoMathSkill", "message": "What is 12 * 7?"}))
        .send()
        .await
        .unwrap();
    let events = events_of(resp).await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(*types.last().unwrap(), "run.complete", "{types:?}");

    // The demo model picks math_basic from the catalog in its system prompt and runs calc.py.
    let start = events.iter().find(|e| e["type"] == "tool.start").expect("the demo model runs a skill script");
    assert_eq!(start["toolName"], "_skill_run_script_");
    let args: String =
        events.iter().filter(|e| e["type"] == "tool.args").map(|e| e["delta"].as_str().unwrap()).collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        serde_json::json!({"skill": "math_basic", "script": "scripts/calc.py", "args": ["--op", "mul", "--a", "12", "--b", "7"]})
    );
    let result = events.iter().find(|e| e["type"] == "tool.result").unwrap()["result"].as_str().unwrap();
    let result: Value = serde_json::from_str(result).unwrap();
    assert_eq!((result["ok"].as_bool(), result["exitCode"].as_i64()), (Some(true), Some(0)), "{result}");
    let stdout: Value = serde_json::from_str(result["stdout"].as_str().unwrap()).unwrap();
    assert_eq!(stdout, serde_json::json!({"ok": true, "op": "mul", "a": 12, "b": 7, "result": 84}));

    // The final answer, after the result, from the script's output.
    let after_result = types.iter().position(|t| *t == "tool.result").unwrap();
    let answer: String = events[after_result..]
        .iter()
        .filter(|e| e["type"] == "content.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(answer.starts_with("12 × 7 = 84."), "{answer}");
}

#[tokio::test]
async fn the_demo_model_runs_a_plan_to_its_summary() {
    let agw = start(&["serve", "--port", "0"], &[("AGW_DEMO_CHUNK_DELAY_MS", "0")]);
    let client = reqwest::Client::new();
    let resp = client
        .post(format!("{}/api/ap/query", agw.base))
        .json(&serde_json::json!({
            "agentKey": "demoModePlanExecute",
            "message": "What's the weather in Tokyo and what time is it there?"
        }))
        .send()
        .await
        .unwrap();
    let events = events_of(resp).await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(*types.last().unwrap(), "run.complete", "{types:?}");
    assert_eq!(events.last().unwrap()["finishReason"], "stop");

    // The plan: two tasks cut from the message, shown as soon as they exist.
    let first_plan = events.iter().find(|e| e["type"] == "plan.update").expect("plan.update");
    let plan = first_plan["plan"].as_array().unwrap();
    assert_eq!(plan.len(), 2, "{first_plan}");
    assert!(plan.iter().all(|t| t["status"] == "init"));
    let task_ids: Vec<&str> = plan.iter().map(|t| t["taskId"].as_str().unwrap()).collect();

    // Each task starts and completes, in plan order, with a tool call inside the first one.
    let lifecycle: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("task."))
        .map(|e| (e["type"].as_str().unwrap(), e["taskId"].as_str().unwrap()))
        .collect();
    assert_eq!(
        lifecycle,
        [
            ("task.start", task_ids[0]),
            ("task.complete", task_ids[0]),
            ("task.start", task_ids[1]),
            ("task.complete", task_ids[1])
        ]
    );
    let weather = events.iter().find(|e| e["type"] == "tool.start" && e["toolName"] == "mock_city_weather").unwrap();
    assert_eq!(weather["taskId"], task_ids[0]);
    let last_plan = events.iter().rev().find(|e| e["type"] == "plan.update").unwrap();
    assert!(last_plan["plan"].as_array().unwrap().iter().all(|t| t["status"] == "completed"), "{last_plan}");

    // The summary comes after the last task, outside any task.
    let last_task = types.iter().rposition(|t| *t == "task.complete").unwrap();
    let summary_start = events[last_task..].iter().find(|e| e["type"] == "content.start").expect("summary");
    assert!(summary_start.get("taskId").is_none());
    let summary: String = events[last_task..]
        .iter()
        .filter(|e| e["type"] == "content.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(summary.starts_with("Summary for"), "{summary}");
    assert!(summary.contains("mock_city_weather"), "{summary}");
}

#[test]
fn serve_help_documents_every_setting() {
    let out = agw().args(["serve", "--help"]).output().expect("run agw serve --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for var in [
        "SERVER_PORT",
        "SERVER_ADDRESS",
        "SERVER_MAX_REQUEST_BYTES",
        "AGENT_EXTERNAL_DIR",
        "AGW_SSE_HEARTBEAT_INTERVAL",
        "AGENT_PROVIDERS_<KEY>_BASE_URL",
    ] {
        assert!(help.contains(var), "--help lacks {var}:\n{help}");
    }
}

#[test]
fn invalid_configuration_fails_at_startup_naming_the_setting() {
    let out = agw().args(["serve", "--port", "0"]).env("SERVER_ADDRESS", "0.0.0.0").output().expect("run agw");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("SERVER_ADDRESS") && err.contains("AGENT_AUTH_ENABLED=false"), "{err}");
}
