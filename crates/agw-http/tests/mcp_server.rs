//! agw's agents as MCP tools over `/mcp` (issue 17, `docs/mcp.md` "Serving agents over MCP"),
//! driven by a real MCP client — rmcp's streamable HTTP client, the official Rust SDK — against
//! the gateway on loopback with the scripted fixture provider behind it.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agw_http::runs::{CancelReason, RunStatus};
use agw_testkit::{StreamOutcome, Transcript};
use aws_lc_rs::encoding::AsDer;
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature;
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use common::{Gateway, assert_chat_replayable, read_stream};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ErrorCode, Implementation,
    ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceError, ServiceExt};
use serde_json::{Value, json};

/// An MCP host that records the progress notifications it gets.
#[derive(Clone, Default)]
struct Host {
    progress: Arc<Mutex<Vec<ProgressNotificationParam>>>,
    /// Speak the stateless 2026-07-28 revision (no initialize handshake, no session).
    stateless: bool,
}

impl Host {
    fn progress(&self) -> Vec<ProgressNotificationParam> {
        self.progress.lock().unwrap().clone()
    }

    /// Waits until `n` progress notifications arrived (they are handled off the response path).
    async fn wait_progress(&self, n: usize) -> Vec<ProgressNotificationParam> {
        for _ in 0..200 {
            let seen = self.progress();
            if seen.len() >= n {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.progress()
    }
}

impl ClientHandler for Host {
    fn get_info(&self) -> ClientConfig {
        // The session-based protocol (initialize handshake) that Claude Desktop and the other
        // hosts of today speak.
        let version = if self.stateless { ProtocolVersion::LATEST } else { ProtocolVersion::LATEST_WITH_INITIALIZE };
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("test-host", "0"))
            .with_protocol_version(version)
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _context: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params);
    }
}

type Client = RunningService<RoleClient, Host>;

async fn connect(gw: &Gateway, token: Option<&str>) -> (Client, Host) {
    connect_as(gw, token, Host::default()).await
}

async fn connect_as(gw: &Gateway, token: Option<&str>, host: Host) -> (Client, Host) {
    let mut config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", gw.base));
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let client = tokio::time::timeout(
        Duration::from_secs(10),
        host.clone().serve(StreamableHttpClientTransport::from_config(config)),
    )
    .await
    .expect("handshake in time")
    .expect("MCP handshake");
    (client, host)
}

fn agent(key: &str, description: &str) -> (String, String) {
    let mut text = json!({
        "key": key,
        "name": format!("The {key} agent"),
        "description": description,
        "mode": "ONESHOT",
        "modelConfig": {"providerKey": "fixture", "model": "fixture-model"},
        "budget": {"runTimeoutMs": 20000, "model": {"maxCalls": 3, "timeoutMs": 15000}},
        "plain": {"systemPrompt": "You are a test agent."},
    });
    if description.is_empty() {
        text.as_object_mut().unwrap().remove("description");
    }
    (format!("{}.json", key.replace(['.', ' '], "_")), text.to_string())
}

fn args(value: Value) -> rmcp::model::JsonObject {
    value.as_object().cloned().unwrap()
}

async fn call(client: &Client, tool: &str, arguments: Value) -> Result<CallToolResult, ServiceError> {
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args(arguments));
    tokio::time::timeout(Duration::from_secs(20), client.peer().call_tool(params)).await.expect("call in time")
}

fn text_of(result: &CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).map(|t| t.text.as_str()).collect()
}

#[tokio::test]
async fn tools_list_offers_every_agent_with_the_message_schema() {
    let gw = Gateway::start(&[agent("helper", "Answers questions"), agent("odd.key", "")], &[]).await;
    let (client, _) = connect(&gw, None).await;
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["helper", "odd_key"], "one tool per agent, keys sanitised");
    let helper = &tools[0];
    assert_eq!(helper.description.as_deref(), Some("Answers questions"));
    assert_eq!(helper.title.as_deref(), Some("The helper agent"));
    assert_eq!(
        Value::Object((*helper.input_schema).clone()),
        json!({"type": "object",
               "properties": {"message": {"type": "string"},
                              "chatId": {"type": "string", "description": "continue this chat"}},
               "required": ["message"]})
    );
    // An agent file without a description gets agw's default one.
    assert_eq!(tools[1].description.as_deref(), Some("external agent from odd_key.json"));
    // The sanitised name runs the agent it stands for.
    gw.fixture.push(Transcript::openai_text(&["odd"]));
    let result = call(&client, "odd_key", json!({"message": "hi"})).await.expect("tools/call");
    assert_eq!(text_of(&result), "odd");
    assert_eq!(
        gw.state
            .runs
            .tracker()
            .get(result.structured_content.as_ref().unwrap()["runId"].as_str().unwrap())
            .unwrap()
            .agent_key,
        "odd.key"
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_call_answers_with_the_final_text_and_streams_it_as_progress() {
    let gw = Gateway::start(&[agent("helper", "Answers questions")], &[]).await;
    gw.fixture.push(Transcript::openai_text(&["Hel", "lo ", "world"]).with_chunk_delay_ms(150));
    let (client, host) = connect(&gw, None).await;
    let result = call(&client, "helper", json!({"message": "say hello"})).await.expect("tools/call");
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text_of(&result), "Hello world");
    let structured = result.structured_content.clone().expect("structuredContent");
    assert_eq!(structured["answer"], "Hello world");
    let chat_id = structured["chatId"].as_str().expect("chatId").to_owned();
    let run_id = structured["runId"].as_str().expect("runId").to_owned();
    let meta = result.meta.clone().expect("_meta");
    assert_eq!(meta.0.get("chatId"), Some(&json!(chat_id)));
    assert_eq!(meta.0.get("runId"), Some(&json!(run_id)));

    // One notification per delta (the deltas are 150 ms apart), numbered, the text in order.
    let progress = host.wait_progress(3).await;
    let messages: Vec<&str> = progress.iter().filter_map(|p| p.message.as_deref()).collect();
    assert_eq!(messages.concat(), "Hello world", "{progress:?}");
    assert_eq!(messages, ["Hel", "lo ", "world"]);
    let numbers: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert_eq!(numbers, [1.0, 2.0, 3.0]);

    // The run is an ordinary agw run: the provider saw the message, the chat replays it.
    assert_eq!(gw.fixture.requests()[0].last_user_message(), Some("say hello"));
    let events = assert_chat_replayable(&gw, &chat_id).await;
    assert_eq!(events.last().unwrap()["type"], "run.complete", "{events:#?}");
    assert_eq!(gw.state.runs.tracker().get(&run_id).unwrap().status(), RunStatus::Completed);
    client.cancel().await.ok();
}

#[tokio::test]
async fn the_text_of_every_model_turn_is_the_answer_and_progress_only_grows() {
    let react = json!({
        "key": "weather", "mode": "REACT",
        "modelConfig": {"providerKey": "fixture", "model": "fixture-model"},
        "toolConfig": {"backends": ["mock_city_weather"]},
        "react": {"systemPrompt": "You use tools.", "maxSteps": 4},
    });
    let gw = Gateway::start(&[("weather.json".to_owned(), react.to_string())], &[]).await;
    gw.fixture.push(
        Transcript::new()
            .content("Let me check.")
            .tool_call_start(0, "call_w", "mock_city_weather")
            .tool_args(0, r#"{"city":"Paris","date":"2026-02-13"}"#)
            .finish("tool_calls")
            .done(),
    );
    gw.fixture.push(Transcript::openai_text(&["Sunny", " in Paris."]));
    let (client, host) = connect(&gw, None).await;
    let result = call(&client, "weather", json!({"message": "weather in Paris?"})).await.unwrap();
    // The two model turns' texts, apart; the tool call itself is in the chat, not the answer.
    assert_eq!(text_of(&result), "Let me check.\n\nSunny in Paris.");
    let progress = host.wait_progress(3).await;
    assert_eq!(progress.iter().filter_map(|p| p.message.as_deref()).collect::<String>(), text_of(&result));
    let numbers: Vec<f64> = progress.iter().map(|p| p.progress).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "progress must grow with every notification: {numbers:?}");
    assert_eq!(numbers.last(), Some(&3.0));
    client.cancel().await.ok();
}

/// A citing agent's answer has no markers; its citations are in `structuredContent.citations`,
/// each placed by its offset into the whole answer (the second turn's block starts after the
/// first turn's text and the blank line between them).
#[tokio::test]
async fn a_citing_agents_answer_carries_its_citations_with_offsets_into_the_answer() {
    let react = json!({
        "key": "cited", "mode": "REACT",
        "modelConfig": {"providerKey": "fixture", "model": "fixture-model"},
        "toolConfig": {"backends": ["mock_chat_messages"]},
        "react": {"systemPrompt": "You summarise the chat.", "maxSteps": 3},
    });
    let gw = Gateway::start(&[("cited.json".to_owned(), react.to_string())], &[]).await;
    gw.fixture.push(
        Transcript::new()
            .content("Reading.")
            .tool_call_start(0, "call_m", "mock_chat_messages")
            .tool_args(0, "{}")
            .finish("tool_calls")
            .done(),
    );
    gw.fixture.push(Transcript::openai_text(&["Coral: input box [ci", "te:361]; Mandy: voice[cite:401]."]));
    let (client, _host) = connect(&gw, None).await;
    let result = call(&client, "cited", json!({"message": "what was reported?"})).await.unwrap();
    let answer = text_of(&result);
    assert_eq!(answer, "Reading.\n\nCoral: input box ; Mandy: voice.");
    let structured = result.structured_content.clone().unwrap();
    let citations = structured["citations"].as_array().expect("citations").clone();
    let ids: Vec<&str> = citations.iter().map(|c| c["messageId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["361", "401"]);
    let before = |c: &Value| answer.encode_utf16().take(c["offset"].as_u64().unwrap() as usize).collect::<Vec<u16>>();
    assert_eq!(String::from_utf16(&before(&citations[0])).unwrap(), "Reading.\n\nCoral: input box ");
    assert_eq!(String::from_utf16(&before(&citations[1])).unwrap(), "Reading.\n\nCoral: input box ; Mandy: voice");
    assert_eq!(citations[0]["senderName"], "Coral");
    assert!(citations[0].get("contentId").is_none());
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_second_call_with_the_chat_id_continues_the_chat() {
    let gw = Gateway::start(&[agent("helper", "Answers questions")], &[]).await;
    let (client, _) = connect(&gw, None).await;
    gw.fixture.push(Transcript::openai_text(&["Paris."]));
    let first = call(&client, "helper", json!({"message": "capital of France?"})).await.unwrap();
    let chat_id = first.structured_content.as_ref().unwrap()["chatId"].as_str().unwrap().to_owned();

    gw.fixture.push(Transcript::openai_text(&["About 2 million."]));
    let second = call(&client, "helper", json!({"message": "population?", "chatId": chat_id})).await.unwrap();
    assert_eq!(text_of(&second), "About 2 million.");
    assert_eq!(second.structured_content.as_ref().unwrap()["chatId"], json!(chat_id));

    // The model was sent the first exchange before the new question.
    let body = &gw.fixture.requests()[1].body;
    let turns: Vec<(String, String)> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| {
            (m["role"].as_str().unwrap_or_default().to_owned(), m["content"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    assert_eq!(
        turns,
        [
            ("user".to_owned(), "capital of France?".to_owned()),
            ("assistant".to_owned(), "Paris.".to_owned()),
            ("user".to_owned(), "population?".to_owned()),
        ]
    );
    client.cancel().await.ok();
}

#[tokio::test]
async fn cancelling_a_call_ends_the_run_with_run_cancel() {
    let gw = Gateway::start(&[agent("helper", "Answers questions")], &[]).await;
    gw.fixture.push(Transcript::openai_text(&["Once", " upon", " a", " time", " …"]).with_chunk_delay_ms(1000));
    let (client, host) = connect(&gw, None).await;
    let peer = client.peer().clone();
    let params = CallToolRequestParams::new("helper").with_arguments(args(json!({"message": "tell a story"})));
    let pending = tokio::spawn(async move { peer.call_tool(params).await });
    // The run streams its first delta, then the host gives up on the call: dropping the request
    // future makes rmcp send `notifications/cancelled`.
    let seen = host.wait_progress(1).await;
    assert_eq!(seen.first().and_then(|p| p.message.as_deref()), Some("Once"));
    pending.abort();
    let _ = pending.await;

    let run_id = gw.state.runs.tracker().ids().pop().expect("the call's run");
    let handle = gw.state.runs.tracker().get(&run_id).unwrap();
    assert_eq!(handle.wait_finished(Duration::from_secs(5)).await, RunStatus::Cancelled);
    // Interrupted by the call's cancellation (as `POST /api/ap/interrupt` does), not merely
    // abandoned by a vanished reader.
    let reason = tokio::time::timeout(Duration::from_secs(1), handle.cancelled()).await.unwrap();
    assert_eq!(reason, CancelReason::Interrupted);
    // The provider request was aborted, and the chat records the cancellation.
    let upstream = gw.fixture.requests()[0].clone();
    let outcome = tokio::time::timeout(Duration::from_secs(5), upstream.wait_outcome()).await.unwrap();
    assert_eq!(outcome, StreamOutcome::ClientClosed);
    // The run's own stream (still attachable) ends with run.cancel, and the chat keeps what was
    // streamed before it.
    let attach = gw.client.get(format!("{}/api/ap/attach?runId={run_id}&lastSeq=0", gw.base)).send().await.unwrap();
    let stream = read_stream(attach).await;
    assert_eq!(stream.last()["type"], "run.cancel", "{:?}", stream.types());
    let events = assert_chat_replayable(&gw, &handle.chat_id).await;
    let snapshot = events.iter().find(|e| e["type"] == "content.snapshot").expect("the streamed text is kept");
    assert_eq!(snapshot["text"], "Once", "{snapshot}");
    client.cancel().await.ok();
}

#[tokio::test]
async fn ending_the_session_cancels_its_calls() {
    let gw = Gateway::start(&[agent("helper", "Answers questions")], &[]).await;
    gw.fixture.push(Transcript::openai_text(&["One", " two", " three", " four"]).with_chunk_delay_ms(4000));
    let opened = post_mcp(&gw, None, None, &initialize()).await;
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    drop(opened);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post_mcp(&gw, None, Some(&session), &initialized).await.status(), 202);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": "helper", "arguments": {"message": "count"}, "_meta": {"progressToken": "p"}}});
    let mut stream = post_mcp(&gw, None, Some(&session), &call).await;
    assert_eq!(stream.status(), 200);
    // Read the call's stream until its first progress notification: the run is streaming.
    let mut seen = String::new();
    while !seen.contains("notifications/progress") {
        let chunk = tokio::time::timeout(Duration::from_secs(5), stream.chunk()).await.unwrap().unwrap();
        seen.push_str(&String::from_utf8_lossy(&chunk.expect("stream open")));
    }
    let ended = gw.client.delete(format!("{}/mcp", gw.base)).header("mcp-session-id", &session).send().await.unwrap();
    assert_eq!(ended.status(), 204);
    let run_id = gw.state.runs.tracker().ids().pop().expect("the call's run");
    let handle = gw.state.runs.tracker().get(&run_id).unwrap();
    // rmcp first lets the session's calls answer for 5 s, then cancels them.
    assert_eq!(handle.wait_finished(Duration::from_secs(10)).await, RunStatus::Cancelled);
    let reason = tokio::time::timeout(Duration::from_secs(1), handle.cancelled()).await.unwrap();
    assert_eq!(reason, CancelReason::Interrupted);
}

#[tokio::test]
async fn a_failed_run_is_an_error_result_and_bad_calls_are_invalid_params() {
    let gw = Gateway::start(&[agent("helper", "Answers questions")], &[]).await;
    let (client, _) = connect(&gw, None).await;
    gw.fixture.push(Transcript::http_error(400, r#"{"error":{"message":"scripted provider error"}}"#));
    let failed = call(&client, "helper", json!({"message": "break please"})).await.expect("a result");
    assert_eq!(failed.is_error, Some(true));
    assert!(text_of(&failed).starts_with("the run failed (provider_error)"), "{}", text_of(&failed));
    let meta = failed.meta.expect("_meta names the run");
    let run_id = meta.0["runId"].as_str().unwrap();
    assert_eq!(gw.state.runs.tracker().get(run_id).unwrap().status(), RunStatus::Failed);

    for (tool, arguments, needle) in [
        ("nope", json!({"message": "hi"}), "unknown tool"),
        ("helper", json!({}), "`message` is required"),
        ("helper", json!({"message": "  "}), "must not be blank"),
        ("helper", json!({"message": "hi", "chatId": "not-a-uuid"}), "chatId"),
    ] {
        match call(&client, tool, arguments).await {
            Err(ServiceError::McpError(e)) => {
                assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{tool}: {e:?}");
                assert!(e.message.contains(needle), "{tool}: {}", e.message);
            }
            other => panic!("{tool}: expected invalid params, got {other:?}"),
        }
    }
    // Nothing of that reached the provider.
    assert_eq!(gw.fixture.request_count(), 1);
    client.cancel().await.ok();
}

#[tokio::test]
async fn a_host_of_the_stateless_revision_is_served_too() {
    let gw = Gateway::start(&[agent("helper", "Answers questions")], &[]).await;
    let (client, host) = connect_as(&gw, None, Host { stateless: true, ..Host::default() }).await;
    let tools = client.peer().list_all_tools().await.expect("tools/list");
    assert_eq!(tools.len(), 1);
    gw.fixture.push(Transcript::openai_text(&["Hi", " there"]).with_chunk_delay_ms(100));
    let result = call(&client, "helper", json!({"message": "hello"})).await.expect("tools/call");
    assert_eq!(text_of(&result), "Hi there");
    let progress = host.wait_progress(2).await;
    assert_eq!(progress.iter().filter_map(|p| p.message.as_deref()).collect::<String>(), "Hi there");
    client.cancel().await.ok();
}

#[tokio::test]
async fn the_host_allow_list_applies_to_mcp() {
    let gw = Gateway::start(&[agent("helper", "Answers questions")], &[]).await;
    let resp = gw
        .client
        .post(format!("{}/mcp", gw.base))
        .header("host", "evil.example")
        .header("accept", "application/json, text/event-stream")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
}

// ------------------------------------------------------------------------------------- auth

/// An RSA key that signs test tokens; its public half is the gateway's local key.
struct TestKey(KeyPair);

impl TestKey {
    fn generate() -> Self {
        Self(KeyPair::generate(KeySize::Rsa2048).expect("RSA key generation"))
    }

    fn public_pem(&self) -> String {
        use aws_lc_rs::signature::KeyPair as _;
        let der = self.0.public_key().as_der().expect("SPKI DER");
        let b64 = STANDARD.encode(der.as_ref());
        let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
        format!("-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n", lines.join("\n"))
    }

    fn token(&self, sub: &str) -> String {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let header = URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "typ": "JWT"}).to_string());
        let claims = URL_SAFE_NO_PAD.encode(json!({"sub": sub, "iat": now, "exp": now + 300}).to_string());
        let input = format!("{header}.{claims}");
        let mut sig = vec![0; self.0.public_modulus_len()];
        self.0.sign(&signature::RSA_PKCS1_SHA256, &SystemRandom::new(), input.as_bytes(), &mut sig).expect("sign");
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig))
    }
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
           "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
}

/// A raw JSON-RPC POST to `/mcp`.
async fn post_mcp(gw: &Gateway, token: Option<&str>, session: Option<&str>, body: &Value) -> reqwest::Response {
    let mut req = gw
        .client
        .post(format!("{}/mcp", gw.base))
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(body);
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(session) = session {
        req = req.header("mcp-session-id", session);
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn with_auth_mcp_needs_the_token_and_runs_and_sessions_belong_to_the_caller() {
    let key = TestKey::generate();
    let pem = key.public_pem();
    let gw = Gateway::start(
        &[agent("helper", "Answers questions")],
        &[("SERVER_ADDRESS", "127.0.0.1"), ("AGENT_AUTH_LOCAL_PUBLIC_KEY", &pem)],
    )
    .await;
    let (alice, bob) = (key.token("alice"), key.token("bob"));

    // No token, a bad one: 401 with the Bearer challenge, before rmcp sees anything.
    let resp = post_mcp(&gw, None, None, &initialize()).await;
    assert_eq!(resp.status(), 401);
    assert_eq!(resp.headers()["www-authenticate"], "Bearer");
    assert_eq!(post_mcp(&gw, Some("not.a.jwt"), None, &initialize()).await.status(), 401);
    assert!(gw.client.get(format!("{}/mcp", gw.base)).send().await.unwrap().status() == 401);

    // With the token: the run belongs to the caller.
    let (client, _) = connect(&gw, Some(&alice)).await;
    gw.fixture.push(Transcript::openai_text(&["Hi Alice."]));
    let result = call(&client, "helper", json!({"message": "hello"})).await.unwrap();
    assert_eq!(text_of(&result), "Hi Alice.");
    let structured = result.structured_content.clone().unwrap();
    let run = gw.state.runs.tracker().get(structured["runId"].as_str().unwrap()).unwrap();
    assert_eq!(run.owner.as_ref().map(|o| o.sub.as_str()), Some("alice"));
    let chat_id = structured["chatId"].as_str().unwrap().to_owned();

    // Bob cannot continue Alice's chat: it is as absent to him as on /api/ap/query.
    let (bobs, _) = connect(&gw, Some(&bob)).await;
    let refused = call(&bobs, "helper", json!({"message": "and me?", "chatId": chat_id})).await.unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(text_of(&refused).contains("chat not found"), "{}", text_of(&refused));
    assert_eq!(gw.fixture.request_count(), 1, "Bob's call never reached the provider");

    // Nor use Alice's session (to cancel her calls or read her streams).
    let opened = post_mcp(&gw, Some(&alice), None, &initialize()).await;
    assert_eq!(opened.status(), 200);
    let session = opened.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    drop(opened);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post_mcp(&gw, Some(&bob), Some(&session), &initialized).await.status(), 404);
    assert_eq!(post_mcp(&gw, Some(&alice), Some(&session), &initialized).await.status(), 202);
    let delete = |token: String| {
        gw.client.delete(format!("{}/mcp", gw.base)).bearer_auth(token).header("mcp-session-id", &session).send()
    };
    assert_eq!(delete(bob.clone()).await.unwrap().status(), 404, "Bob cannot end Alice's session");
    assert_eq!(delete(alice.clone()).await.unwrap().status(), 204, "Alice can");
    assert_eq!(post_mcp(&gw, Some(&alice), Some(&session), &initialized).await.status(), 404, "it is gone");
    client.cancel().await.ok();
    bobs.cancel().await.ok();
}

#[tokio::test]
async fn a_browser_client_may_read_the_session_id() {
    // `/mcp` is inside the default CORS path patterns (`/api/**,/v1/**,/mcp,/chat`, issue 32).
    let gw = Gateway::start(&[agent("helper", "Answers questions")], &[]).await;
    let opened = gw
        .client
        .post(format!("{}/mcp", gw.base))
        .header("origin", "http://localhost:5173")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    assert!(opened.headers().contains_key("mcp-session-id"));
    assert_eq!(opened.headers()["access-control-allow-origin"], "http://localhost:5173");
    let exposed = opened.headers()["access-control-expose-headers"].to_str().unwrap().to_owned();
    assert_eq!(exposed, "Content-Type, Mcp-Session-Id", "the configured list, plus the session id");
    // Other routes keep the configured list only.
    let agents = gw
        .client
        .get(format!("{}/api/ap/agents", gw.base))
        .header("origin", "http://localhost:5173")
        .send()
        .await
        .unwrap();
    assert_eq!(agents.headers()["access-control-expose-headers"], "Content-Type");
}

#[tokio::test]
async fn a_call_on_an_agent_with_sub_agents_answers_with_its_own_text_only() {
    let mut lead: Value = serde_json::from_str(&agent("lead", "Leads").1).unwrap();
    lead["mode"] = json!("REACT");
    lead["react"] = json!({"systemPrompt": "LEAD", "maxSteps": 3});
    lead["toolConfig"] = json!({"subAgents": ["helper"]});
    let gw = Gateway::start(&[("lead.json".into(), lead.to_string()), agent("helper", "Helps")], &[]).await;
    gw.fixture.set_responder(|_, body| {
        let lead = body["messages"][0]["content"].as_str().is_some_and(|s| s.starts_with("LEAD"));
        let answered = body["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
        Some(match (lead, answered) {
            (true, false) => Transcript::openai_tool_call(
                "call_team",
                "agent_invoke",
                &[&json!({"tasks": [{"subAgentKey": "helper", "task": "Say hi."}]}).to_string()],
            ),
            (true, true) => Transcript::openai_text(&["The helper said hi."]),
            (false, _) => Transcript::openai_text(&["Hi from the child."]),
        })
    });
    let (client, _host) = connect(&gw, None).await;
    let result = call(&client, "lead", json!({"message": "Ask the helper."})).await.expect("tools/call");
    assert_eq!(text_of(&result), "The helper said hi.", "a child's text is not the answer");
    client.cancel().await.ok();
}
