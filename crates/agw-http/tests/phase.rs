//! The phase stream (issue 35) over loopback: `POST /api/phase/{agentKey}`, `POST /chat`,
//! `GET /api/phase/attach`, line by line against the scripted fixture provider. The Node client
//! in `scripts/protocols/phase.mjs` reads the same endpoint the way the design's client guide
//! does.

mod common;

use agw_testkit::Transcript;
use common::{Gateway, oneshot_agent};
use futures::StreamExt;
use serde_json::{Value, json};

/// A REACT agent with a backend tool, a frontend tool and reasoning on.
fn tools_agent() -> (String, String) {
    let text = r#"{"key":"tools","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m",
        "reasoning":{"enabled":true,"effort":"LOW"}},
        "toolConfig":{"backends":["mock_city_weather"],"frontends":["confirm_dialog"]},
        "phaseStream":{"messages":{"en":{"tool_calling":"Checking the weather..."}}},
        "react":{"systemPrompt":"You use tools.","maxSteps":4}}"#;
    ("tools.json".into(), text.into())
}

async fn gateway() -> Gateway {
    Gateway::start(&[oneshot_agent("a", false, 5000), tools_agent()], &[]).await
}

/// The REACT run of most tests: reasoning and a weather call, then reasoning and the answer.
fn script_weather(gw: &Gateway) {
    let call = Transcript::new()
        .reasoning("Need the weather.")
        .tool_call_start(0, "call_w", "mock_city_weather")
        .tool_args(0, "{\"city\":")
        .tool_args(0, "\"Paris\"}")
        .finish("tool_calls")
        .usage(10, 3)
        .done();
    gw.fixture.on_stage("agent-react-step-1", call);
    gw.fixture
        .on_stage("agent-react-step-2", Transcript::openai_reasoning_text(&["Now answer."], &["It is ", "sunny."]));
}

fn user(text: &str) -> Value {
    json!({"messages": [{"role": "user", "content": text}]})
}

async fn post(gw: &Gateway, path: &str, body: &Value) -> reqwest::Response {
    gw.client.post(format!("{}{path}", gw.base)).json(body).send().await.unwrap()
}

/// The lines of a body: split on `\n`, blank lines skipped, each one JSON object.
fn lines(body: &str) -> Vec<Value> {
    body.split('\n').filter(|l| !l.trim().is_empty()).map(|l| serde_json::from_str(l).unwrap()).collect()
}

async fn read_lines(resp: reqwest::Response) -> Vec<Value> {
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    lines(&resp.text().await.unwrap())
}

fn types(lines: &[Value]) -> Vec<&str> {
    lines.iter().map(|l| l["type"].as_str().unwrap()).collect()
}

fn phases(lines: &[Value]) -> Vec<&str> {
    lines.iter().filter(|l| l["type"] == "phase_change").map(|l| l["phase"].as_str().unwrap()).collect()
}

fn text(lines: &[Value]) -> String {
    lines.iter().filter(|l| l["type"] == "text").map(|l| l["data"]["content"].as_str().unwrap()).collect()
}

/// Every line is `{type, phase, data}` and every `phase_change` changes the phase.
fn assert_well_formed(lines: &[Value]) {
    let mut phase: Option<&Value> = None;
    for line in lines {
        let object = line.as_object().unwrap();
        assert_eq!(object.len(), 3, "{line}");
        assert!(line["type"].is_string() && line["phase"].is_string() && line["data"].is_object(), "{line}");
        if line["type"] == "phase_change" {
            assert_ne!(phase, Some(&line["phase"]), "a phase_change that changes nothing: {line}");
            assert!(line["data"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{line}");
            phase = Some(&line["phase"]);
        } else if line["type"] != "input_required" {
            assert_eq!(phase, Some(&line["phase"]), "a line outside its phase: {line}");
        }
    }
    let last = types(lines).last().copied();
    assert!(matches!(last, Some("done") | Some("error")), "ends with done or error: {:?}", types(lines));
}

#[tokio::test]
async fn a_react_run_goes_through_its_phases_in_order_with_every_line_shaped() {
    let gw = gateway().await;
    script_weather(&gw);
    let resp = post(&gw, "/api/phase/tools", &user("weather in Paris")).await;
    let run_id = resp.headers()["x-agw-run-id"].to_str().unwrap().to_owned();
    let chat_id = resp.headers()["x-agw-chat-id"].to_str().unwrap().to_owned();
    assert!(agw_protocol::ids::canonical_uuid(&chat_id).is_some(), "{chat_id}");
    let out = read_lines(resp).await;
    assert_well_formed(&out);
    assert_eq!(phases(&out), ["thinking", "tool_calling", "thinking", "generating", "completed"]);
    assert_eq!(
        types(&out),
        [
            "phase_change",
            "phase_change",
            "tool_start",
            "tool_end",
            "phase_change",
            "phase_change",
            "text",
            "text",
            "phase_change",
            "done"
        ]
    );
    assert_eq!(
        out[0],
        json!({"type": "phase_change", "phase": "thinking", "data": {"message": "正在分析您的问题..."}})
    );
    assert_eq!(out[2]["data"]["toolName"], "mock_city_weather");
    assert_eq!(out[2]["data"]["params"], json!({"city": "Paris"}));
    assert!(out[2]["data"]["toolDescription"].as_str().is_some_and(|d| !d.is_empty()));
    let end = &out[3]["data"];
    assert_eq!((end["toolName"].as_str(), end["success"].as_bool()), (Some("mock_city_weather"), Some(true)));
    assert!(end["summary"].as_str().is_some_and(|s| !s.is_empty()) && end.get("error").is_none(), "{end}");
    assert_eq!(text(&out), "It is sunny.");
    assert_eq!(
        out.last().unwrap(),
        &json!({"type": "done", "phase": "completed", "data": {"finishReason": "stop",
            "stats": {"totalTokens": 13 + 13, "iterations": 2}}})
    );
    // The native stream of the same run: one run, the events agw recorded.
    let (status, body) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    assert_eq!(status, 200, "{body}");
    let events = body["data"]["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["type"] == "run.start" && e["runId"] == run_id.as_str()));
}

#[tokio::test]
async fn the_switches_choose_what_is_shown() {
    let gw = gateway().await;
    script_weather(&gw);
    let body = json!({"messages": [{"role": "user", "content": "weather"}],
        "options": {"showThinking": true, "showToolCalls": false}});
    let out = read_lines(post(&gw, "/api/phase/tools", &body).await).await;
    assert_well_formed(&out);
    assert_eq!(phases(&out), ["thinking", "tool_calling", "thinking", "generating", "completed"]);
    let thinking: Vec<&str> =
        out.iter().filter(|l| l["type"] == "thinking").map(|l| l["data"]["content"].as_str().unwrap()).collect();
    assert_eq!(thinking, ["Need the weather.", "Now answer."]);
    assert!(out.iter().all(|l| l["type"] != "tool_start" && l["type"] != "tool_end"), "{:?}", types(&out));

    script_weather(&gw);
    let body = json!({"messages": [{"role": "user", "content": "weather"}],
        "options": {"showThinking": false, "showToolCalls": true}});
    let out = read_lines(post(&gw, "/api/phase/tools", &body).await).await;
    assert!(out.iter().all(|l| l["type"] != "thinking"));
    assert_eq!(out.iter().filter(|l| l["type"] == "tool_start" || l["type"] == "tool_end").count(), 2);
}

#[tokio::test]
async fn the_language_comes_from_the_options_the_header_or_the_default() {
    let gw = gateway().await;
    script_weather(&gw);
    let resp = gw
        .client
        .post(format!("{}/api/phase/tools", gw.base))
        .header("accept-language", "en-US,en;q=0.9")
        .json(&user("weather"))
        .send()
        .await
        .unwrap();
    let out = read_lines(resp).await;
    let messages: Vec<&str> =
        out.iter().filter(|l| l["type"] == "phase_change").map(|l| l["data"]["message"].as_str().unwrap()).collect();
    assert_eq!(messages[..2], ["Analyzing your question...", "Checking the weather..."], "the agent's own for en");

    gw.fixture.set_default(Transcript::openai_text(&["hi"]));
    let body = json!({"messages": [{"role": "user", "content": "x"}], "options": {"language": "en"}});
    let resp = gw
        .client
        .post(format!("{}/api/phase/a", gw.base))
        .header("accept-language", "zh-CN")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(read_lines(resp).await[0]["data"]["message"], "Analyzing your question...", "options win");
}

#[tokio::test]
async fn a_provider_failure_mid_run_ends_with_an_error_line() {
    let gw = gateway().await;
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call("call_w", "mock_city_weather", &["{\"city\":\"Paris\"}"]),
    );
    gw.fixture.on_stage("agent-react-step-2", Transcript::http_error(400, "{\"error\":{\"message\":\"bad\"}}"));
    let out = read_lines(post(&gw, "/api/phase/tools", &user("weather")).await).await;
    assert_well_formed(&out);
    assert_eq!(phases(&out), ["thinking", "tool_calling", "error"]);
    let error = out.last().unwrap();
    assert_eq!((error["type"].as_str(), error["phase"].as_str()), (Some("error"), Some("error")));
    assert_eq!(error["data"]["code"], "provider_error");
    assert_eq!(error["data"]["recoverable"], false, "a 400 is not worth sending again");
    assert!(error["data"]["message"].as_str().is_some_and(|m| !m.is_empty()));
}

#[tokio::test]
async fn a_run_is_interrupted_through_the_native_api_with_the_run_id_header() {
    let gw = gateway().await;
    gw.fixture.set_default(Transcript::openai_text(&["one ", "two ", "three ", "four"]).with_chunk_delay_ms(300));
    let resp = post(&gw, "/api/phase/a", &user("count")).await;
    let run_id = resp.headers()["x-agw-run-id"].to_str().unwrap().to_owned();
    let mut body = resp.bytes_stream();
    let mut received = String::new();
    while !received.contains("\"type\":\"text\"") {
        received.push_str(std::str::from_utf8(&body.next().await.unwrap().unwrap()).unwrap());
    }
    let answer =
        gw.client.post(format!("{}/api/ap/interrupt", gw.base)).json(&json!({"runId": run_id})).send().await.unwrap();
    assert_eq!(answer.status(), 200);
    while let Some(chunk) = body.next().await {
        received.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    let out = lines(&received);
    assert_well_formed(&out);
    let done = out.last().unwrap();
    assert_eq!((done["type"].as_str(), done["phase"].as_str()), (Some("done"), Some("completed")));
    assert_eq!(done["data"]["finishReason"], "cancelled");
    assert!(!text(&out).contains("four"));
}

#[tokio::test]
async fn user_and_device_ids_are_recorded_with_the_run_and_checked() {
    let gw = gateway().await;
    gw.fixture.set_default(Transcript::openai_text(&["hi"]));
    let resp = gw
        .client
        .post(format!("{}/api/phase/a", gw.base))
        .header("user-id", "u-42")
        .header("device-id", "ios-7F3A")
        .json(&user("hello"))
        .send()
        .await
        .unwrap();
    let chat_id = resp.headers()["x-agw-chat-id"].to_str().unwrap().to_owned();
    read_lines(resp).await;
    let (_, body) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    let query = body["data"]["events"].as_array().unwrap().iter().find(|e| e["type"] == "request.query").unwrap();
    assert_eq!(query["params"], json!({"userId": "u-42", "deviceId": "ios-7F3A"}), "{query}");
    assert_eq!(query["message"], "hello");

    for (name, value) in [("user-id", "has space"), ("device-id", &"x".repeat(129)[..])] {
        let resp = gw
            .client
            .post(format!("{}/api/phase/a", gw.base))
            .header(name, value)
            .json(&user("hello"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{name}: {value}");
        let body: Value = resp.json().await.unwrap();
        assert!(body["msg"].as_str().unwrap().contains(name), "{body}");
    }
}

#[tokio::test]
async fn bad_requests_name_what_is_wrong() {
    let gw = gateway().await;
    for (body, needle) in [
        (json!({"messages": []}), "messages"),
        (json!({"messages": [{"role": "assistant", "content": "x"}]}), "messages"),
        (json!({"messages": [{"role": "user", "content": "  "}]}), "messages"),
        (json!({"messages": [{"role": "user", "content": "x"}], "options": {"showThinking": "yes"}}), "options"),
        (json!({"messages": [{"role": "user", "content": "x"}], "options": {"language": 5}}), "options.language"),
    ] {
        let resp = post(&gw, "/api/phase/a", &body).await;
        assert_eq!(resp.status(), 400, "{body}");
        let answer: Value = resp.json().await.unwrap();
        assert!(answer["msg"].as_str().unwrap().contains(needle), "{body}: {answer}");
    }
    let resp = post(&gw, "/api/phase/nobody", &user("x")).await;
    assert_eq!(resp.status(), 404);
    let resp = gw.client.post(format!("{}/api/phase/a?framing=xml", gw.base)).json(&user("x")).send().await.unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(gw.fixture.request_count(), 0);
}

#[tokio::test]
async fn chat_serves_the_default_agent_and_sse_framing_is_offered() {
    let gw = gateway().await;
    gw.fixture.set_default(Transcript::openai_text(&["Hel", "lo"]));
    // `a` is the first agent by key: the default.
    let resp = post(&gw, "/chat?framing=sse", &user("hi")).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let body = resp.text().await.unwrap();
    let mut decoder = agw_protocol::sse::SseDecoder::default();
    let mut frames = Vec::new();
    decoder.feed(body.as_bytes(), &mut frames);
    let out: Vec<Value> =
        frames.iter().filter(|f| !f.is_heartbeat()).map(|f| serde_json::from_str(&f.data).unwrap()).collect();
    assert_well_formed(&out);
    assert_eq!(phases(&out), ["thinking", "generating", "completed"]);
    assert_eq!(text(&out), "Hello");
    let request = gw.fixture.request(0).unwrap();
    assert!(request.body.to_string().contains("You are a test agent."), "the default agent ran");
}

#[tokio::test]
async fn a_phase_chat_replays_natively_and_a_native_chat_continues_here() {
    let gw = gateway().await;
    gw.fixture.push(Transcript::openai_text(&["first answer"]));
    gw.fixture.push(Transcript::openai_text(&["second answer"]));
    gw.fixture.push(Transcript::openai_text(&["third answer"]));
    let resp =
        post(&gw, "/api/phase/a", &json!({"chatId": "my-chat", "messages": [{"role": "user", "content": "q1"}]})).await;
    let chat_id = resp.headers()["x-agw-chat-id"].to_str().unwrap().to_owned();
    read_lines(resp).await;
    // Replays natively.
    let (_, body) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    let events = body["data"]["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["type"] == "content.snapshot" && e["text"] == "first answer"), "{body}");
    // The native API continues it.
    let native = gw.run(&json!({"agentKey": "a", "chatId": chat_id, "message": "q2"})).await;
    assert_eq!(native.last()["type"], "run.complete");
    // And the phase stream continues the native chat by its id, with its history.
    let body = json!({"chatId": chat_id, "messages": [{"role": "user", "content": "q3"}]});
    let out = read_lines(post(&gw, "/api/phase/a", &body).await).await;
    assert_eq!(text(&out), "third answer");
    let sent = gw.fixture.request(2).unwrap().body.to_string();
    for earlier in ["q1", "first answer", "q2", "second answer"] {
        assert!(sent.contains(earlier), "{earlier} in the model's context: {sent}");
    }
    // The same client string names the same chat.
    gw.fixture.set_default(Transcript::openai_text(&["again"]));
    let resp =
        post(&gw, "/api/phase/a", &json!({"chatId": "my-chat", "messages": [{"role": "user", "content": "q4"}]})).await;
    assert_eq!(resp.headers()["x-agw-chat-id"].to_str().unwrap(), chat_id);
    read_lines(resp).await;
}

/// A phase stream read up to its `input_required` line, the rest of it still to come.
struct Waiting {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    received: String,
    /// The `input_required` line.
    asked: Value,
}

impl Waiting {
    async fn read(resp: reqwest::Response) -> Self {
        let mut body = Box::pin(resp.bytes_stream());
        let mut received = String::new();
        while !received.contains("input_required") {
            received.push_str(std::str::from_utf8(&body.next().await.unwrap().unwrap()).unwrap());
        }
        let asked = lines(&received).into_iter().find(|l| l["type"] == "input_required").unwrap();
        Self { body, received, asked }
    }

    /// Every line of the stream, once it ended.
    async fn rest(&mut self) -> Vec<Value> {
        while let Some(chunk) = self.body.next().await {
            self.received.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
        lines(&self.received)
    }
}

#[tokio::test]
async fn a_frontend_tool_asks_for_input_and_the_native_submit_answers_it() {
    let gw = gateway().await;
    gw.fixture
        .on_stage("agent-react-step-1", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{\"q\":1}"]));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Confirmed."]));
    let resp = post(&gw, "/api/phase/tools", &user("ask me")).await;
    let mut waiting = Waiting::read(resp).await;
    let asked = waiting.asked.clone();
    assert_eq!(asked["phase"], "tool_calling");
    let data = &asked["data"];
    assert_eq!((data["kind"].as_str(), data["toolName"].as_str()), (Some("frontend"), Some("confirm_dialog")));
    assert_eq!(data["params"], json!({"q": 1}));
    let submit = json!({"runId": data["runId"], "toolId": data["toolId"], "params": {"choice": "yes"}});
    let answer: Value =
        gw.client.post(format!("{}/api/ap/submit", gw.base)).json(&submit).send().await.unwrap().json().await.unwrap();
    assert_eq!(answer["data"]["accepted"], true, "{answer}");
    let out = waiting.rest().await;
    assert_well_formed(&out);
    let end = out.iter().find(|l| l["type"] == "tool_end").unwrap();
    assert_eq!(end["data"]["success"], true);
    assert_eq!(text(&out), "Confirmed.");
    assert_eq!(phases(&out), ["thinking", "tool_calling", "generating", "completed"]);
}

#[tokio::test]
async fn attach_replays_the_phase_stream_from_the_start_then_follows_it() {
    let gw = gateway().await;
    gw.fixture.set_default(Transcript::openai_text(&["one ", "two ", "three"]).with_chunk_delay_ms(200));
    let resp = post(&gw, "/api/phase/a", &user("count")).await;
    let run_id = resp.headers()["x-agw-run-id"].to_str().unwrap().to_owned();
    let mut stream = resp.bytes_stream();
    let _ = stream.next().await; // the run has started; the client goes away
    drop(stream);
    let resp =
        gw.client.get(format!("{}/api/phase/attach?runId={run_id}&showToolCalls=false", gw.base)).send().await.unwrap();
    assert_eq!(resp.headers()["x-agw-run-id"].to_str().unwrap(), run_id);
    let out = read_lines(resp).await;
    assert_well_formed(&out);
    assert_eq!(phases(&out), ["thinking", "generating", "completed"], "from the run's start");
    assert_eq!(text(&out), "one two three");

    let missing = gw.client.get(format!("{}/api/phase/attach?runId=nope", gw.base)).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let bad = gw.client.get(format!("{}/api/phase/attach?runId={run_id}&showThinking=maybe", gw.base)).send().await;
    assert_eq!(bad.unwrap().status(), 400);
}

/// The design's client guide, in Rust: read the body chunk by chunk, keep the unfinished tail,
/// split the rest on `\n`, skip blank lines, parse each line, dispatch on `type`.
#[derive(Default)]
struct GuideClient {
    buffer: String,
    phases: Vec<String>,
    text: String,
    citations: Vec<Value>,
    tools: Vec<(String, String)>,
    done: Option<Value>,
    error: Option<Value>,
}

impl GuideClient {
    fn feed(&mut self, chunk: &str) {
        self.buffer.push_str(chunk);
        let mut parts: Vec<String> = self.buffer.split('\n').map(str::to_owned).collect();
        self.buffer = parts.pop().unwrap_or_default();
        for line in parts {
            if line.trim().is_empty() {
                continue;
            }
            self.handle_line(serde_json::from_str(&line).expect("each line is JSON"));
        }
    }

    fn handle_line(&mut self, event: Value) {
        let data = &event["data"];
        match event["type"].as_str().unwrap() {
            "phase_change" => self.phases.push(event["phase"].as_str().unwrap().to_owned()),
            "text" => self.text.push_str(data["content"].as_str().unwrap()),
            "citation" => self.citations.push(data.clone()),
            "tool_start" => self.tools.push(("start".into(), data["toolName"].as_str().unwrap().into())),
            "tool_end" => self.tools.push(("end".into(), data["toolName"].as_str().unwrap().into())),
            "done" => self.done = Some(data.clone()),
            "error" => self.error = Some(data.clone()),
            _ => {} // unknown types are skipped
        }
    }
}

#[tokio::test]
async fn a_client_written_like_the_guide_consumes_a_whole_react_run() {
    let gw = gateway().await;
    script_weather(&gw);
    let resp = post(&gw, "/api/phase/tools", &user("weather in Paris")).await;
    let mut body = resp.bytes_stream();
    let mut client = GuideClient::default();
    let mut chunks = 0;
    while let Some(chunk) = body.next().await {
        client.feed(std::str::from_utf8(&chunk.unwrap()).unwrap());
        chunks += 1;
    }
    assert!(chunks > 1, "streamed, not sent at once");
    assert!(client.buffer.is_empty(), "every line ends with \\n");
    assert_eq!(client.phases, ["thinking", "tool_calling", "thinking", "generating", "completed"]);
    assert_eq!(
        client.tools,
        [("start".to_owned(), "mock_city_weather".to_owned()), ("end".to_owned(), "mock_city_weather".to_owned())]
    );
    assert_eq!(client.text, "It is sunny.");
    assert!(client.citations.is_empty() && client.error.is_none());
    assert_eq!(client.done.unwrap()["finishReason"], "stop");
}

/// An agent whose citable tool (`mock_chat_messages`, records under `/messages`) it cites.
fn cited_agent() -> (String, String) {
    let text = r#"{"key":"cited","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
        "toolConfig":{"backends":["mock_chat_messages"]},
        "react":{"systemPrompt":"You summarise the chat.","maxSteps":3}}"#;
    ("cited.json".into(), text.into())
}

/// First turn: read the chat; second turn: answer with `chunks`.
fn script_citing(gw: &Gateway, chunks: &'static [&'static str]) {
    gw.fixture.set_responder(move |_, body| {
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or(Value::Null);
        Some(if last["role"] == "tool" {
            Transcript::openai_text(chunks)
        } else {
            Transcript::openai_tool_call("call_m", "mock_chat_messages", &["{}"])
        })
    });
}

#[tokio::test]
async fn a_marker_split_across_chunks_becomes_a_citation_line_right_after_its_text() {
    let gw = Gateway::start(&[cited_agent()], &[]).await;
    script_citing(&gw, &["Coral reported the translation bug [ci", "te:361]. Mandy", " agreed[cite:999]."]);
    let out = read_lines(post(&gw, "/api/phase/cited", &user("What did the team report?")).await).await;
    assert_well_formed(&out);
    assert_eq!(text(&out), "Coral reported the translation bug . Mandy agreed.", "no marker shown, not even half");
    let at = out.iter().position(|l| l["type"] == "citation").unwrap();
    assert_eq!(out[at - 1]["type"], "text");
    assert!(out[at - 1]["data"]["content"].as_str().unwrap().ends_with("bug "), "{}", out[at - 1]);
    let citation = &out[at];
    assert_eq!(citation["phase"], "generating");
    let data = citation["data"].as_object().unwrap();
    assert_eq!(data["index"], 0);
    assert_eq!(data["messageId"], "361");
    assert_eq!(data["senderName"], "Coral");
    assert_eq!(data["senderId"], "123456");
    assert_eq!(data["timestamp"], 1_736_985_600_000_i64);
    assert_eq!(data["chatId"], "11200463399");
    assert_eq!(data["content"], "The translation in the input box cannot be turned off");
    assert_eq!(out.iter().filter(|l| l["type"] == "citation").count(), 1, "the unknown id is not cited");

    // The guide's client collects it; without details only the index and the id.
    script_citing(&gw, &["Coral reported it [cite:361]."]);
    let body = json!({"messages": [{"role": "user", "content": "again"}], "options": {"detailedCitations": false}});
    let out = read_lines(post(&gw, "/api/phase/cited", &body).await).await;
    let citation = out.iter().find(|l| l["type"] == "citation").unwrap();
    assert_eq!(citation["data"], json!({"index": 0, "messageId": "361"}));
    let mut client = GuideClient::default();
    for line in &out {
        client.feed(&format!("{line}\n"));
    }
    assert_eq!(client.citations, [json!({"index": 0, "messageId": "361"})]);
    assert_eq!(client.text, "Coral reported it .");
}

/// An approval rule makes the run wait: the phase stream says so (`input_required`, kind
/// `approval`, with the decisions offered) and goes on once the native submit decides.
#[tokio::test]
async fn an_approval_asks_for_input_and_the_native_submit_decides_it() {
    let guarded = r#"{"key":"guarded","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
        "toolConfig":{"backends":["mock_city_weather"],"approvals":{"mock_city_weather":"ask"}},
        "react":{"systemPrompt":"You use tools.","maxSteps":4}}"#;
    let gw = Gateway::start(&[("guarded.json".into(), guarded.into())], &[]).await;
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call("call_w", "mock_city_weather", &["{\"city\":\"Rome\"}"]),
    );
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Sunny in Rome."]));
    let resp = post(&gw, "/api/phase/guarded", &user("weather in Rome")).await;
    let mut waiting = Waiting::read(resp).await;
    let asked = waiting.asked.clone();
    assert_eq!(asked["phase"], "tool_calling");
    let data = &asked["data"];
    assert_eq!((data["kind"].as_str(), data["toolName"].as_str()), (Some("approval"), Some("mock_city_weather")));
    assert_eq!(data["params"], json!({"city": "Rome"}));
    let decisions: Vec<&str> =
        data["options"].as_array().unwrap().iter().filter_map(|o| o["decision"].as_str()).collect();
    assert!(decisions.contains(&"once"), "{decisions:?}");
    let submit = json!({"runId": data["runId"], "awaitingId": data["toolId"], "params": {"decision": "once"}});
    let resp = gw.client.post(format!("{}/api/ap/submit", gw.base)).json(&submit).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let out = waiting.rest().await;
    assert_well_formed(&out);
    assert_eq!(out.iter().filter(|l| l["type"] == "input_required").count(), 1, "asked once");
    let end = out.iter().find(|l| l["type"] == "tool_end").unwrap();
    assert_eq!(end["data"]["success"], true, "{end}");
    assert_eq!(text(&out), "Sunny in Rome.");
    assert_eq!(out.last().unwrap()["type"], "done");
}
