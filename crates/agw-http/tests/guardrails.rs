//! Guardrails over loopback HTTP (issue 36, docs/guardrails.md): rule sets, the classifier
//! webhook and judge agents on the input, on the answer while it streams (block → revoke, warn,
//! redact) and on tool arguments and results, with the scripted provider speaking the real wire
//! format.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agw_testkit::{StreamOutcome, Transcript};
use common::{Gateway, LiveStream, assert_chat_files_valid, assert_chat_replayable, header};
use serde_json::{Value, json};

const RULES: &str = r#"{"description": "test rules", "rules": [
    {"id": "recipe", "keywords": ["forbidden recipe"], "action": "block", "message": "dangerous instructions"},
    {"id": "dosage", "keywords": ["dosage"], "action": "warn", "message": "this reads like medical advice"},
    {"id": "email", "regex": "[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\\.[A-Za-z]{2,}", "action": "redact", "replacement": "[email]"}
]}"#;
const TOOL_IN: &str = r#"{"rules": [{"id": "secret", "keywords": ["topsecret"], "action": "block", "message": "no secrets in tool calls"}]}"#;
const TOOL_OUT: &str = r#"{"rules": [
    {"id": "city", "keywords": ["上海"], "action": "redact", "replacement": "[city]"},
    {"id": "mock", "keywords": ["随机"], "action": "warn", "message": "random mock data"}
]}"#;

fn agent(key: &str, mode: &str, extra: Value) -> (String, String) {
    let mut root = json!({"key": key, "mode": mode, "modelConfig": {"providerKey": "fixture", "model": "m"},
        "plain": {"systemPrompt": format!("AGENT {key}")}, "react": {"systemPrompt": format!("AGENT {key}"), "maxSteps": 3}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        root[k] = v.clone();
    }
    (format!("{key}.json"), root.to_string())
}

fn agents() -> Vec<(String, String)> {
    vec![
        agent("out", "ONESHOT", json!({"guardrails": {"output": ["rules:t"]}})),
        agent("inp", "ONESHOT", json!({"guardrails": {"input": ["rules:t"]}})),
        agent(
            "tools",
            "REACT",
            json!({"toolConfig": {"backends": ["mock_city_weather"]},
                "guardrails": {"toolInput": ["rules:tin"], "toolOutput": ["rules:tout"]}}),
        ),
        agent("hooked", "ONESHOT", json!({"guardrails": {"output": ["webhook"], "classifyEvery": "sentence"}})),
        agent("judged", "ONESHOT", json!({"guardrails": {"input": ["judge:judge"], "output": ["judge:judge"]}})),
        agent("judge", "ONESHOT", json!({})),
        agent("missing", "ONESHOT", json!({"guardrails": {"output": ["rules:nope"]}})),
        agent(
            "steered",
            "REACT",
            json!({"toolConfig": {"backends": ["mock_city_weather"]}, "guardrails": {"input": ["rules:t"]}}),
        ),
    ]
}

/// A gateway whose guardrails directory holds the test's rule sets.
async fn gateway(env: &[(&str, &str)]) -> Gateway {
    let dir = std::env::temp_dir().join(format!("agw-guard-rules-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("t.json"), RULES).unwrap();
    std::fs::write(dir.join("tin.json"), TOOL_IN).unwrap();
    std::fs::write(dir.join("tout.json"), TOOL_OUT).unwrap();
    std::fs::write(dir.join("broken.json"), "{\"rules\": [{\"id\": \"x\"}]}").unwrap();
    let dir = dir.display().to_string();
    let mut vars: Vec<(&str, &str)> = vec![("AGW_GUARDRAILS_DIR", &dir)];
    vars.extend_from_slice(env);
    Gateway::start(&agents(), &vars).await
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn streamed(events: &[&Value]) -> String {
    events.iter().filter(|e| e["type"] == "content.delta").map(|e| e["delta"].as_str().unwrap()).collect()
}

fn chat_of(stream: &common::Stream) -> String {
    stream.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_block_after_deltas_revokes_them_closes_the_provider_stream_and_the_next_turn_never_sees_them() {
    agw_http::metrics::install();
    let gw = gateway(&[]).await;
    // The match spans two chunks; chunks after it must never be read.
    gw.fixture.set_default(
        Transcript::openai_text(&["Here is ", "the answer: ", "the forbidden ", "recipe is", " step one", " step two"])
            .with_chunk_delay_ms(30),
    );
    let stream = gw.run(&json!({"agentKey": "out", "message": "tell me"})).await;
    let events = stream.events();
    assert_eq!(stream.last()["type"], "run.error", "{:?}", stream.types());
    assert_eq!(stream.last()["error"]["code"], "guardrail_blocked");
    assert_eq!(stream.last()["error"]["retriable"], false);
    assert!(stream.last()["error"]["message"].as_str().unwrap().contains("rules:t"), "{}", stream.last());
    // What the client saw before the block: everything up to the chunk that completed the match.
    assert_eq!(streamed(&events), "Here is the answer: the forbidden ");
    let revoke = stream.of_type("content.revoke");
    assert_eq!(revoke.len(), 1, "{:?}", stream.types());
    let content_id = stream.of_type("content.start")[0]["contentId"].clone();
    assert_eq!(revoke[0]["contentId"], content_id);
    assert_eq!(revoke[0]["guard"], "rules:t");
    assert_eq!(revoke[0]["rule"], "recipe");
    assert_eq!(revoke[0]["reason"], "dangerous instructions");
    assert_eq!(revoke[0]["statusCode"], -1006);
    let at = |ty: &str| events.iter().position(|e| e["type"] == ty).unwrap();
    assert!(at("content.end") < at("content.revoke") && at("content.revoke") < at("run.error"));

    // The provider's response was abandoned mid-stream: its connection was closed.
    let request = gw.fixture.requests().into_iter().next().unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(5), request.wait_outcome()).await.unwrap();
    assert_eq!(outcome, StreamOutcome::ClientClosed);

    // History marks the text revoked; a replay shows the revoke after the snapshot.
    let chat_id = chat_of(&stream);
    let replay = assert_chat_replayable(&gw, &chat_id).await;
    let snapshot = replay.iter().position(|e| e["type"] == "content.snapshot").unwrap();
    let replayed = replay.iter().position(|e| e["type"] == "content.revoke").expect("replayed revoke");
    assert!(replayed > snapshot);
    assert_eq!(replay[replayed]["contentId"], content_id);
    assert_chat_files_valid(&gw);

    // The next turn's prompt does not carry the revoked text.
    gw.fixture.forget_requests();
    gw.fixture.set_default(Transcript::openai_text(&["Sorry."]));
    let next = gw.run(&json!({"agentKey": "out", "message": "and now?", "chatId": chat_id})).await;
    assert_eq!(next.last()["type"], "run.complete");
    let body = gw.fixture.requests()[0].body.to_string();
    assert!(body.contains("tell me") && !body.contains("the forbidden"), "{body}");

    let metrics = gw.client.get(format!("{}/metrics", gw.base)).send().await.unwrap().text().await.unwrap();
    assert!(
        metrics.lines().any(|l| l.starts_with("agw_guard_verdicts_total")
            && l.contains("action=\"block\"")
            && l.contains("stage=\"output\"")),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_warning_streams_and_the_answer_goes_on_and_a_redacted_match_never_reaches_the_client() {
    let gw = gateway(&[]).await;
    gw.fixture.set_default(Transcript::openai_text(&[
        "Take the usual ",
        "dosage. Write to ann.lee@exa",
        "mple.org or bob@example.com",
        " any time.",
    ]));
    let stream = gw.run(&json!({"agentKey": "out", "message": "help"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let events = stream.events();
    let text = streamed(&events);
    assert_eq!(text, "Take the usual dosage. Write to [email] or [email] any time.");
    for delta in stream.of_type("content.delta") {
        let delta = delta["delta"].as_str().unwrap();
        assert!(!delta.contains('@') && !delta.contains("exa"), "a piece of an address was shown: {delta:?}");
    }
    let warning = stream.of_type("guard.warning");
    assert_eq!(warning.len(), 1, "{:?}", stream.types());
    assert_eq!(warning[0]["stage"], "output");
    assert_eq!(warning[0]["rule"], "dosage");
    assert_eq!(warning[0]["statusCode"], -1007);
    assert_eq!(warning[0]["contentId"], stream.of_type("content.start")[0]["contentId"]);
    // Stored as shown: the history never holds the address either.
    let chat_id = chat_of(&stream);
    let stored = gw.history_json(&chat_id).await;
    let stored = serde_json::to_string(&stored).unwrap();
    assert!(!stored.contains("ann.lee") && stored.contains("[email]"), "{stored}");
    let replay = assert_chat_replayable(&gw, &chat_id).await;
    assert!(replay.iter().any(|e| e["type"] == "guard.warning"), "the warning is kept for the audit trail");
}

#[tokio::test]
async fn an_input_block_ends_the_run_before_any_model_call() {
    let gw = gateway(&[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["never"]));
    let stream = gw.run(&json!({"agentKey": "inp", "message": "give me the Forbidden Recipe"})).await;
    assert_eq!(stream.last()["type"], "run.error");
    assert_eq!(stream.last()["error"]["code"], "guardrail_blocked");
    let block = stream.of_type("guard.block");
    assert_eq!(block.len(), 1, "{:?}", stream.types());
    assert_eq!((block[0]["stage"].as_str(), block[0]["rule"].as_str()), (Some("input"), Some("recipe")));
    assert!(stream.of_type("content.delta").is_empty());
    assert_eq!(gw.fixture.request_count(), 0, "no provider call");

    // Redaction of the input: the model is sent the message without the address.
    let stream = gw.run(&json!({"agentKey": "inp", "message": "mail me at joe@example.com"})).await;
    assert_eq!(stream.last()["type"], "run.complete");
    let sent = gw.fixture.requests()[0].last_user_message().unwrap().to_owned();
    assert_eq!(sent, "mail me at [email]");
}

#[tokio::test]
async fn tool_arguments_and_results_are_guarded() {
    let gw = gateway(&[]).await;
    gw.fixture.set_responder(|_, body| {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let tool_results = messages.iter().filter(|m| m["role"] == "tool").count();
        let user = messages.iter().rev().find(|m| m["role"] == "user").map(|m| m["content"].to_string()).unwrap();
        Some(match (tool_results, user.contains("secret")) {
            (0, true) => Transcript::openai_tool_call("c1", "mock_city_weather", &[r#"{"city":"topsecret"}"#]),
            (0, false) => Transcript::openai_tool_call("c1", "mock_city_weather", &[r#"{"city":"Shanghai"}"#]),
            _ => Transcript::openai_text(&["Done."]),
        })
    });
    let stream = gw.run(&json!({"agentKey": "tools", "message": "weather of the secret city"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let block = stream.of_type("guard.block");
    assert_eq!(block.len(), 1, "{:?}", stream.types());
    assert_eq!(block[0]["stage"], "toolInput");
    let tool_id = stream.of_type("tool.start")[0]["toolId"].clone();
    assert_eq!(block[0]["toolId"], tool_id);
    let result: Value = serde_json::from_str(stream.of_type("tool.result")[0]["result"].as_str().unwrap()).unwrap();
    assert_eq!((result["executed"].as_bool(), result["reason"].as_str()), (Some(false), Some("guardrail")));
    let told = gw.fixture.requests()[1].body.to_string();
    assert!(told.contains("guardrail") && told.contains("no secrets in tool calls"), "{told}");

    gw.fixture.forget_requests();
    let stream = gw.run(&json!({"agentKey": "tools", "message": "weather in Shanghai"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let result = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_owned();
    assert!(result.contains("[city]") && !result.contains("上海"), "{result}");
    let warning = stream.of_type("guard.warning");
    assert_eq!((warning[0]["stage"].as_str(), warning[0]["rule"].as_str()), (Some("toolOutput"), Some("mock")));
    let told = gw.fixture.requests()[1].body.to_string();
    assert!(told.contains("[city]") && !told.contains("上海"), "{told}");
}

/// A classifier webhook: answers `respond(body)` after its delay, records each request.
type Seen = Arc<Mutex<Vec<(Vec<(String, String)>, Value)>>>;

async fn classifier(respond: impl Fn(&Value) -> (Duration, Value) + Send + Sync + 'static) -> (String, Seen) {
    let respond = Arc::new(respond);
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let url = common::http_receiver(move |headers, body| {
        let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        log.lock().unwrap().push((headers, body.clone()));
        let (delay, answer) = respond(&body);
        (delay, answer.to_string())
    })
    .await;
    (url, seen)
}

#[tokio::test]
async fn a_webhook_block_revokes_what_was_shown_and_requests_are_signed() {
    let (url, seen) = classifier(|body| {
        let text = body["text"].as_str().unwrap_or_default();
        let verdict = if text.contains("bad") {
            json!({"action": "block", "reason": "the classifier found something bad"})
        } else {
            json!({"action": "allow"})
        };
        (Duration::ZERO, verdict)
    })
    .await;
    let gw = gateway(&[("AGW_GUARDRAILS_WEBHOOK_URL", &url), ("AGW_GUARDRAILS_WEBHOOK_SECRET", "s3cret")]).await;
    gw.fixture.set_default(
        Transcript::openai_text(&["All good so far. ", "Then something ", "bad happens. ", "More text ", "and more."])
            .with_chunk_delay_ms(60),
    );
    let stream = gw.run(&json!({"agentKey": "hooked", "message": "go"})).await;
    assert_eq!(stream.last()["type"], "run.error", "{:?}", stream.types());
    assert_eq!(stream.last()["error"]["code"], "guardrail_blocked");
    let revoke = stream.of_type("content.revoke");
    assert_eq!(revoke.len(), 1);
    assert_eq!(revoke[0]["guard"], "webhook");
    assert_eq!(revoke[0]["reason"], "the classifier found something bad");
    assert!(streamed(&stream.events()).starts_with("All good so far. Then something bad happens."));
    assert!(!streamed(&stream.events()).contains("and more"), "the stream stopped at the verdict");

    let seen = seen.lock().unwrap().clone();
    let (headers, first) = &seen[0];
    assert_eq!(first["stage"], "output");
    assert_eq!(first["agentKey"], "hooked");
    assert_eq!(first["complete"], false);
    assert_eq!(first["text"], "All good so far. ");
    let timestamp: i64 = header(headers, "x-agent-timestamp").parse().unwrap();
    let signature = header(headers, "x-agent-signature");
    let body = serde_json::to_string(first).unwrap();
    // Signed like the chat-event webhook: HMAC-SHA256 of "<timestamp>.<body>".
    assert_eq!(signature, agw_http::runs::webhook::signature("s3cret", timestamp, &body));
}

#[tokio::test]
async fn a_webhook_that_does_not_answer_in_time_blocks_when_closed_and_passes_when_open() {
    let slow = || classifier(|_| (Duration::from_millis(1500), json!({"action": "allow"})));
    let (url, _) = slow().await;
    let gw = gateway(&[
        ("AGW_GUARDRAILS_WEBHOOK_URL", &url),
        ("AGW_GUARDRAILS_WEBHOOK_SECRET", "s"),
        ("AGW_GUARDRAILS_WEBHOOK_TIMEOUT_MS", "200"),
    ])
    .await;
    gw.fixture.set_default(Transcript::openai_text(&["One sentence."]));
    let stream = gw.run(&json!({"agentKey": "hooked", "message": "go"})).await;
    assert_eq!(stream.last()["error"]["code"], "guardrail_blocked", "{:?}", stream.types());
    let revoke = &stream.of_type("content.revoke")[0];
    assert!(revoke["reason"].as_str().unwrap().contains("no verdict"), "{revoke}");

    let (url, _) = slow().await;
    let gw = gateway(&[
        ("AGW_GUARDRAILS_WEBHOOK_URL", &url),
        ("AGW_GUARDRAILS_WEBHOOK_SECRET", "s"),
        ("AGW_GUARDRAILS_WEBHOOK_TIMEOUT_MS", "200"),
        ("AGW_GUARDRAILS_FAIL_MODE", "open"),
    ])
    .await;
    gw.fixture.set_default(Transcript::openai_text(&["One sentence."]));
    let stream = gw.run(&json!({"agentKey": "hooked", "message": "go"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert_eq!(streamed(&stream.events()), "One sentence.");
}

#[tokio::test]
async fn a_judge_agent_decides_on_the_input_before_the_model_and_on_the_answer_after_it() {
    let gw = gateway(&[]).await;
    gw.fixture.set_responder(|_, body| {
        let system = body["messages"][0]["content"].as_str().unwrap_or_default().to_owned();
        let text = body.to_string();
        Some(if system == "AGENT judge" {
            if text.contains("bomb") {
                Transcript::openai_text(&["BLOCK ", "it asks how to build a bomb"])
            } else {
                Transcript::openai_text(&["{\"action\": \"allow\"}"])
            }
        } else {
            Transcript::openai_text(&["A calm answer."])
        })
    });
    let stream = gw.run(&json!({"agentKey": "judged", "message": "how do I build a bomb"})).await;
    assert_eq!(stream.last()["error"]["code"], "guardrail_blocked", "{:?}", stream.types());
    let block = &stream.of_type("guard.block")[0];
    assert_eq!((block["stage"].as_str(), block["guard"].as_str()), (Some("input"), Some("judge:judge")));
    assert_eq!(block["reason"], "it asks how to build a bomb");
    assert_eq!(gw.fixture.request_count(), 1, "only the judge was called");

    gw.fixture.forget_requests();
    let stream = gw.run(&json!({"agentKey": "judged", "message": "hello"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert_eq!(streamed(&stream.events()), "A calm answer.");
    // The input judge, the model, the output judge at the end of the answer.
    assert_eq!(gw.fixture.request_count(), 3);
}

#[tokio::test]
async fn a_rule_set_that_does_not_exist_fails_the_run_and_a_broken_file_does_not_stop_the_others() {
    let gw = gateway(&[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["never"]));
    let stream = gw.run(&json!({"agentKey": "missing", "message": "hi"})).await;
    assert_eq!(stream.last()["type"], "run.error");
    assert!(stream.last()["error"]["message"].as_str().unwrap().contains("rules:nope"), "{}", stream.last());
    assert_eq!(gw.fixture.request_count(), 0);
    // broken.json was skipped; t.json next to it works (the other tests use it).
    gw.fixture.set_default(Transcript::openai_text(&["fine"]));
    assert_eq!(gw.run(&json!({"agentKey": "out", "message": "hi"})).await.last()["type"], "run.complete");
}

#[tokio::test]
async fn the_servers_guards_hold_for_every_agent_and_edited_rule_files_reach_the_next_run() {
    // `judge` has no guardrails of its own; the server's output guard still applies.
    let gw = gateway(&[("AGW_GUARDRAILS_OUTPUT", "rules:t")]).await;
    let dir = gw.state.settings.guardrails.rules.dir.clone().expect("a rules directory");
    let _reload = agw_http::reload::Reloader::new(
        gw.state.clone(),
        vec![agw_http::reload::WatchedDir {
            catalog: agw_http::reload::Catalog::Guardrails,
            dir: dir.clone(),
            rescan_every: Duration::from_millis(100),
        }],
    )
    .start();
    gw.fixture.set_default(Transcript::openai_text(&["write to joe@example.com ", "about spoons"]));
    let stream = gw.run(&json!({"agentKey": "judge", "message": "hi"})).await;
    assert_eq!(stream.last()["type"], "run.complete");
    assert_eq!(streamed(&stream.events()), "write to [email] about spoons");

    // A new rule reaches the next run; a broken edit keeps the last good set.
    let edited = RULES.replace(r#""keywords": ["dosage"]"#, r#""keywords": ["dosage", "spoons"]"#);
    std::fs::write(dir.join("t.json"), edited).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let stream = gw.run(&json!({"agentKey": "judge", "message": "hi"})).await;
        if !stream.of_type("guard.warning").is_empty() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the edited rule file was not picked up");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::write(dir.join("t.json"), "{\"rules\": [").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let stream = gw.run(&json!({"agentKey": "judge", "message": "hi"})).await;
    assert_eq!(streamed(&stream.events()), "write to [email] about spoons", "the last good set still redacts");
    assert_eq!(stream.of_type("guard.warning").len(), 1);
}

#[tokio::test]
async fn a_steered_message_is_input_too() {
    let gw = gateway(&[]).await;
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call("call_w", "mock_city_weather", &["{\"city\":", "\"Paris\"}"])
            .with_chunk_delay_ms(150),
    );
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["never"]));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "steered", "message": "weather?"})).await);
    live.until(|e| e["type"] == "tool.start").await;
    let run_id = live.seen.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_owned();
    let steer = json!({"runId": run_id, "message": "now the forbidden recipe please"});
    let resp = gw.client.post(format!("{}/api/ap/steer", gw.base)).json(&steer).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let events = live.rest().await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let steered = types.iter().position(|t| *t == "request.steer").expect("the steer was taken");
    let block = types.iter().position(|t| *t == "guard.block").expect("and blocked");
    assert!(steered < block, "{types:?}");
    assert_eq!(events.last().unwrap()["error"]["code"], "guardrail_blocked");
    assert!(
        gw.fixture.requests().iter().all(|r| r.stage() != Some("agent-react-step-2")),
        "the blocked steer never reached a model"
    );
}
