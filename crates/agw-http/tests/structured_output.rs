//! Structured output over real HTTP (issue 39, docs/models.md "Structured output"): an agent's
//! (or a request's) `outputSchema` reaches an OpenAI-compatible provider as `response_format`
//! and Anthropic as a forced answer tool whose arguments stream as the answer; the answer is
//! checked, a mismatch withdrawn and repaired once, and the JSON is `run.complete`'s `output`,
//! in history and in its replay.

mod common;

use agw_testkit::{FixtureServer, Transcript};
use common::{Gateway, assert_chat_replayable};
use serde_json::{Value, json};

fn schema() -> Value {
    json!({
        "title": "weather",
        "type": "object",
        "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
        "required": ["city", "celsius"]
    })
}

/// An agent of `mode` on `provider` answering in [`schema`]; REACT agents get a weather tool.
fn agent(key: &str, mode: &str, provider: &str) -> (String, String) {
    let mut text = json!({"key": key, "mode": mode, "outputSchema": schema(),
        "modelConfig": {"providerKey": provider, "model": "m"}});
    match mode {
        "REACT" => {
            text["toolConfig"] = json!({"backends": ["mock_city_weather"]});
            text["react"] = json!({"systemPrompt": "You report the weather.", "maxSteps": 3});
        }
        _ => text["plain"] = json!({"systemPrompt": "You report the weather."}),
    }
    (format!("{key}.json"), text.to_string())
}

fn answer(pieces: &[&str]) -> Transcript {
    let mut transcript = Transcript::new();
    for piece in pieces {
        transcript = transcript.content(piece);
    }
    transcript.finish("stop").usage(50, 10).done()
}

fn deltas(stream: &common::Stream) -> Vec<String> {
    stream.of_type("content.delta").iter().map(|e| e["delta"].as_str().unwrap().to_owned()).collect()
}

fn chat_of(stream: &common::Stream) -> String {
    stream.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_react_answer_is_sent_as_response_format_streamed_as_text_and_completed_as_json() {
    let gw = Gateway::start(&[agent("w", "REACT", common::FIXTURE_PROVIDER)], &[]).await;
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::new()
            .tool_call_start(0, "call_1", "mock_city_weather")
            .tool_args(0, r#"{"city":"Paris","date":"2026-02-13"}"#)
            .finish("tool_calls")
            .done(),
    );
    gw.fixture.on_stage("agent-react-step-2", answer(&[r#"{"city":"Paris","#, r#""celsius":21}"#]));

    let stream = gw.run(&json!({"agentKey": "w", "message": "Weather in Paris?"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    // One upstream chunk, one delta: the JSON streams like any answer.
    assert_eq!(deltas(&stream), [r#"{"city":"Paris","#, r#""celsius":21}"#]);
    let output = json!({"city": "Paris", "celsius": 21});
    assert_eq!(stream.last()["output"], output);

    // Every answer turn carries the schema (any REACT step may be the last), tools beside it.
    let requests = gw.fixture.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(
            request.body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "weather", "schema": schema(), "strict": false}})
        );
        assert!(request.body["tools"].is_array(), "tools stay offered: {}", request.body);
    }

    // History keeps it on the run's last step line, and the replay's run.complete carries it.
    let chat = chat_of(&stream);
    let steps: Vec<Value> = gw.history_json(&chat).await.into_iter().filter(|l| l["_type"] == "step").collect();
    assert_eq!(steps.last().unwrap()["_runOutput"], output);
    assert!(steps[..steps.len() - 1].iter().all(|s| s.get("_runOutput").is_none()));
    let replay = assert_chat_replayable(&gw, &chat).await;
    let done = replay.iter().find(|e| e["type"] == "run.complete").expect("replayed run.complete");
    assert_eq!(done["output"], output);
}

#[tokio::test]
async fn a_mismatch_is_withdrawn_and_the_model_repairs_it_once_seeing_what_was_wrong() {
    let gw = Gateway::start(&[agent("o", "ONESHOT", common::FIXTURE_PROVIDER)], &[]).await;
    gw.fixture.on_stage("agent-oneshot", answer(&["It is ", "sunny, 21 degrees."]));
    // The next run's answer (a stage's last transcript repeats; earlier ones are used once).
    gw.fixture.on_stage("agent-oneshot", answer(&[r#"{"city":"Rome","celsius":25}"#]));
    gw.fixture
        .on_stage("agent-oneshot-output-repair", answer(&["```json\n", r#"{"city":"Paris","celsius":21}"#, "\n```"]));

    let stream = gw.run(&json!({"agentKey": "o", "message": "Weather in Paris?"})).await;
    let types = stream.types();
    assert_eq!(stream.last()["type"], "run.complete", "{types:?}");
    // The prose streamed, was withdrawn, and the repaired answer streamed in a new block.
    let revoke = stream.of_type("content.revoke");
    assert_eq!(revoke.len(), 1, "{types:?}");
    assert_eq!(revoke[0]["guard"], "output-schema");
    assert!(revoke[0]["reason"].as_str().unwrap().starts_with("the answer is not JSON"), "{}", revoke[0]);
    let starts = stream.of_type("content.start");
    assert_eq!(starts.len(), 2);
    assert_eq!(revoke[0]["contentId"], starts[0]["contentId"]);
    assert_eq!(stream.last()["output"], json!({"city": "Paris", "celsius": 21}), "the fence is not part of it");

    // The repair turn saw its answer and what was wrong with it.
    let repair = gw.fixture.requests().into_iter().find(|r| r.stage() == Some("agent-oneshot-output-repair")).unwrap();
    let messages = repair.body["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(messages[n - 2], json!({"role": "assistant", "content": "It is sunny, 21 degrees."}));
    let told = messages[n - 1]["content"].as_str().unwrap();
    assert!(told.contains("not JSON") && told.contains("Answer again"), "{told}");

    // The withdrawn text never reaches the model again: the next run sees only the repaired one.
    gw.fixture.forget_requests();
    let next = gw.run(&json!({"agentKey": "o", "message": "And Rome?", "chatId": chat_of(&stream)})).await;
    assert_eq!(next.last()["output"], json!({"city": "Rome", "celsius": 25}));
    let sent = gw.fixture.requests()[0].body["messages"].to_string();
    assert!(!sent.contains("sunny, 21 degrees") && sent.contains(r#"\"city\":\"Paris\""#), "{sent}");
}

#[tokio::test]
async fn a_second_mismatch_ends_the_run_with_output_invalid() {
    let gw = Gateway::start(&[agent("o", "ONESHOT", common::FIXTURE_PROVIDER)], &[]).await;
    gw.fixture.on_stage("agent-oneshot", answer(&[r#"{"city":"Paris"}"#]));
    gw.fixture.on_stage("agent-oneshot-output-repair", answer(&[r#"{"city":"Paris","celsius":"warm"}"#]));

    let stream = gw.run(&json!({"agentKey": "o", "message": "Weather in Paris?"})).await;
    let done = stream.last();
    assert_eq!(done["type"], "run.error", "{:?}", stream.types());
    assert_eq!(done["error"]["code"], "output_invalid");
    let message = done["error"]["message"].as_str().unwrap();
    assert!(message.contains("/celsius") && message.contains("number"), "{message}");
    assert_eq!(stream.of_type("content.revoke").len(), 1, "only the first answer was withdrawn");
    let repair = gw.fixture.requests().into_iter().find(|r| r.stage() == Some("agent-oneshot-output-repair")).unwrap();
    let told = repair.last_user_message().unwrap();
    assert!(told.contains("celsius") && told.contains("required"), "{told}");
}

#[tokio::test]
async fn anthropic_is_forced_to_call_the_answer_tool_whose_arguments_stream_as_the_answer() {
    let (gw, claude) = Gateway::start_with_claude(&[agent("c", "ONESHOT", common::CLAUDE_PROVIDER)], &[]).await;
    claude.on_stage(
        "agent-oneshot",
        Transcript::new()
            .anthropic_start(80)
            .anthropic_block_start(0, json!({"type": "tool_use", "id": "toolu_1", "name": "_answer_", "input": {}}))
            .anthropic_delta(0, json!({"type": "input_json_delta", "partial_json": "{\"city\": \"Oslo\","}))
            .anthropic_delta(0, json!({"type": "input_json_delta", "partial_json": " \"celsius\": -3}"}))
            .anthropic_block_stop(0)
            .anthropic_stop("tool_use", 12),
    );

    let stream = gw.run(&json!({"agentKey": "c", "message": "Weather in Oslo?"})).await;
    let types = stream.types();
    assert_eq!(stream.last()["type"], "run.complete", "{types:?}");
    assert!(stream.of_type("tool.start").is_empty(), "the answer tool is not a tool call: {types:?}");
    assert_eq!(deltas(&stream), ["{\"city\": \"Oslo\",", " \"celsius\": -3}"]);
    assert_eq!(stream.last()["output"], json!({"city": "Oslo", "celsius": -3}));

    let body = &claude.requests()[0].body;
    assert_eq!(body["tools"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["tools"][0]["name"], "_answer_");
    assert_eq!(body["tools"][0]["input_schema"], schema());
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    assert!(body.get("response_format").is_none());
}

#[tokio::test]
async fn an_openai_server_without_json_schema_output_gets_the_answer_tool_beside_its_tools() {
    let lab = FixtureServer::start().await.expect("fixture");
    let base_url = lab.base_url();
    let gw = Gateway::start(
        &[agent("w", "REACT", "lab")],
        &[
            ("AGENT_PROVIDERS_LAB_BASE_URL", base_url.as_str()),
            ("AGENT_PROVIDERS_LAB_API_KEY", "sk-lab"),
            ("AGENT_PROVIDERS_LAB_MODEL", "m"),
            ("AGENT_PROVIDERS_LAB_STRUCTURED_OUTPUT", "tool"),
        ],
    )
    .await;
    lab.on_stage(
        "agent-react-step-1",
        Transcript::new()
            .tool_call_start(0, "call_9", "_answer_")
            .tool_args(0, r#"{"city":"Lima","#)
            .tool_args(0, r#""celsius":19}"#)
            .finish("tool_calls")
            .done(),
    );
    let stream = gw.run(&json!({"agentKey": "w", "message": "Weather in Lima?"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert_eq!(deltas(&stream), [r#"{"city":"Lima","#, r#""celsius":19}"#]);
    assert_eq!(stream.last()["output"], json!({"city": "Lima", "celsius": 19}));
    assert_eq!(stream.last()["finishReason"], "stop");

    let body = &lab.requests()[0].body;
    let names: Vec<&str> =
        body["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["_answer_", "mock_city_weather"], "sorted, the agent's tool kept");
    assert_eq!(body["tool_choice"], "auto", "the model may still call its tools");
    assert!(body.get("response_format").is_none());
}

#[tokio::test]
async fn a_request_brings_its_own_schema_and_a_bad_one_is_refused_before_anything_runs() {
    let plain = json!({"key": "p", "mode": "ONESHOT", "modelConfig": {"providerKey": common::FIXTURE_PROVIDER, "model": "m"},
        "plain": {"systemPrompt": "Answer."}});
    let gw = Gateway::start(&[("p.json".into(), plain.to_string())], &[]).await;
    gw.fixture.on_stage("agent-oneshot", answer(&[r#"{"n":3}"#]));
    let own = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let stream = gw.run(&json!({"agentKey": "p", "message": "Three?", "outputSchema": own})).await;
    assert_eq!(stream.last()["output"], json!({"n": 3}), "{:?}", stream.types());
    assert_eq!(gw.fixture.requests()[0].body["response_format"]["json_schema"]["name"], "output");

    for (schema, says) in [
        (json!({"type": "array"}), "outputSchema must describe an object"),
        (json!("object"), "outputSchema"),
        (json!({"type": "object", "$ref": "https://example.com/s.json"}), "outputSchema is not a usable JSON Schema"),
    ] {
        let resp = gw.post_query(&json!({"agentKey": "p", "message": "x", "outputSchema": schema})).await;
        assert_eq!(resp.status(), 400);
        let body: Value = resp.json().await.unwrap();
        assert!(body["msg"].as_str().unwrap_or_default().contains(says), "{body}");
    }
    assert_eq!(gw.fixture.request_count(), 1, "no refused request reached the model");
}

#[tokio::test]
async fn the_openai_facade_takes_response_format() {
    let plain = json!({"key": "p", "mode": "ONESHOT", "modelConfig": {"providerKey": common::FIXTURE_PROVIDER, "model": "m"},
        "plain": {"systemPrompt": "Answer."}});
    let gw = Gateway::start(&[("p.json".into(), plain.to_string())], &[]).await;
    gw.fixture.on_stage("agent-oneshot", answer(&[r#"{"n":"#, "3}"]));
    let format = json!({"type": "json_schema", "json_schema": {"name": "count", "strict": true,
        "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}});
    let resp = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.base))
        .json(&json!({"model": "p", "messages": [{"role": "user", "content": "Three?"}], "response_format": format}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], r#"{"n":3}"#);
    let sent = &gw.fixture.requests()[0].body["response_format"];
    assert_eq!(sent["json_schema"]["name"], "count", "its name kept: {sent}");

    let json_mode =
        json!({"model": "p", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}});
    let resp = gw.client.post(format!("{}/v1/chat/completions", gw.base)).json(&json_mode).send().await.unwrap();
    assert_eq!(resp.status(), 400);
}
