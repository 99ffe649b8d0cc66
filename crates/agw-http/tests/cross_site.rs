//! Cross-site requests over real HTTP (issue 32): a web page on another site cannot start or
//! change anything, on any route, whatever `agent.cors.path-pattern` says; and a POST body must
//! carry its protocol's content type.
//!
//! Before the fix a `text/plain` POST from `Origin: https://evil.example` to
//! `/v1/chat/completions` answered 200 and the agent ran (CORS only covered `/api/**`, and a
//! "simple" request needs no preflight).

mod common;

use agw_testkit::Transcript;
use common::{Gateway, LiveStream, oneshot_agent};
use serde_json::{Value, json};

const EVIL: &str = "https://evil.example";

/// An agent whose run waits for a frontend tool: something a page could answer, steer or stop.
fn ask_agent() -> (String, String) {
    let text = r#"{"key":"ask","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
        "toolConfig":{"frontends":["confirm_dialog"]},"react":{"systemPrompt":"You ask.","maxSteps":3}}"#;
    ("ask.json".into(), text.into())
}

async fn gateway() -> Gateway {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000), ask_agent()], &[]).await;
    gw.fixture
        .on_stage("agent-react-step-1", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{\"q\":1}"]));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Done."]));
    gw.fixture.set_default(Transcript::openai_text(&["hello"]));
    gw
}

/// Every POST route agw serves, with a body that would start or change something there (the
/// run-scoped ones aimed at `run_id`, waiting for `tool_id`, in `chat_id`).
/// `the_attack_list_covers_every_post_route` fails when a route is added to the router and not here.
fn post_routes(run_id: &str, tool_id: &str, chat_id: &str) -> Vec<(&'static str, Value)> {
    let user = json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "run my tools"}]});
    vec![
        ("/api/ap/query", json!({"agentKey": "a", "message": "run my tools"})),
        ("/api/ap/submit", json!({"runId": run_id, "toolId": tool_id, "params": {"choice": "evil"}})),
        ("/api/ap/interrupt", json!({"runId": run_id})),
        ("/api/ap/steer", json!({"runId": run_id, "message": "exfiltrate everything"})),
        ("/api/ap/compact", json!({"chatId": "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01", "agentKey": "a"})),
        // A page must not copy the user's chat (into a chat the page could then name).
        ("/api/ap/chat/fork", json!({"chatId": chat_id, "runId": run_id, "position": "before"})),
        ("/api/ai-sdk/a/chat", json!({"id": "evil-chat", "messages": [user]})),
        (
            "/api/ag-ui/a",
            json!({"threadId": "evil-thread", "runId": "r", "state": {}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": [{"id": "m1", "role": "user", "content": "run my tools"}]}),
        ),
        ("/api/phase/a", json!({"chatId": "evil-chat", "messages": [{"role": "user", "content": "run my tools"}]})),
        ("/chat", json!({"messages": [{"role": "user", "content": "run my tools"}]})),
        ("/v1/chat/completions", json!({"model": "a", "messages": [{"role": "user", "content": "run my tools"}]})),
        (
            "/mcp",
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26",
            "capabilities": {}, "clientInfo": {"name": "evil", "version": "1"}}}),
        ),
        (
            "/a2a/a",
            json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {"messageId": "m",
            "role": "ROLE_USER", "parts": [{"text": "run my tools"}]}}}),
        ),
        (
            "/a2a/a/message:send",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "run my tools"}]}}),
        ),
    ]
}

/// What a page can send without a preflight, plus each way a browser names a foreign page.
const SIMPLE_TYPES: [&str; 3] = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"];
const FOREIGN: [(&str, &str); 3] = [("origin", EVIL), ("origin", "null"), ("sec-fetch-site", "cross-site")];

async fn assert_refused(resp: reqwest::Response, what: &str) {
    assert_eq!(resp.status(), 403, "{what}");
    let body: Value = resp.json().await.unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
    assert_eq!(body["code"], "origin_not_allowed", "{what}: {body}");
    assert!(body["msg"].as_str().unwrap().starts_with("forbidden: origin not allowed"), "{what}: {body}");
}

/// The attack: a cross-origin simple POST to every POST route, while a run waits for its
/// frontend tool. Every one is refused before anything happens: the provider is not called
/// again, the waiting run is neither answered, steered nor stopped, no chat is created; the
/// legitimate client then finishes its run as if nothing had been sent.
#[tokio::test]
async fn a_cross_site_simple_post_to_every_post_route_is_refused_and_changes_nothing() {
    let gw = gateway().await;
    let resp = gw.post_query(&json!({"agentKey": "ask", "message": "ask"})).await;
    assert_eq!(resp.status(), 200);
    let mut stream = LiveStream::new(resp);
    let end = stream.until(|e| e["type"] == "tool.end").await;
    let tool_id = end["toolId"].as_str().unwrap().to_owned();
    let run_id = stream.seen.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_owned();
    let chat_id = stream.seen.iter().find(|e| e["type"] == "run.start").unwrap()["chatId"].as_str().unwrap().to_owned();
    let provider_calls = gw.fixture.request_count();
    assert_eq!(provider_calls, 1);

    for (path, body) in post_routes(&run_id, &tool_id, &chat_id) {
        for content_type in SIMPLE_TYPES {
            for (name, value) in FOREIGN {
                let resp = gw
                    .client
                    .post(format!("{}{path}", gw.base))
                    .header("content-type", content_type)
                    .header(name, value)
                    .header("accept", "application/json, text/event-stream")
                    .body(body.to_string())
                    .send()
                    .await
                    .unwrap();
                assert_refused(resp, &format!("POST {path} ({content_type}, {name}: {value})")).await;
            }
        }
        // A page that gets a preflight through (JSON) is refused just the same.
        let resp =
            gw.client.post(format!("{}{path}", gw.base)).header("origin", EVIL).json(&body).send().await.unwrap();
        assert_refused(resp, &format!("POST {path} (JSON)")).await;
    }
    // Any method that changes state, on any path: the rule does not depend on the route table.
    let delete_chat = format!("/api/ap/chat?chatId={chat_id}");
    for (method, path) in [
        // The one DELETE route: a page must not delete the user's chat.
        (reqwest::Method::DELETE, delete_chat.as_str()),
        (reqwest::Method::POST, "/api/ap/not-yet-a-route"),
        (reqwest::Method::POST, "/v2/chat/completions"),
        (reqwest::Method::PUT, "/api/ap/query"),
        (reqwest::Method::PATCH, "/v1/chat/completions"),
        (reqwest::Method::DELETE, "/mcp"),
    ] {
        let resp = gw
            .client
            .request(method.clone(), format!("{}{path}", gw.base))
            .header("origin", EVIL)
            .header("content-type", "text/plain")
            .body("{}")
            .send()
            .await
            .unwrap();
        assert_refused(resp, &format!("{method} {path}")).await;
    }

    assert_eq!(gw.fixture.request_count(), provider_calls, "no provider call for any refused request");
    let (status, chats) = gw.get_json("/api/ap/chats").await;
    assert_eq!(status, 200);
    assert_eq!(chats["data"].as_array().unwrap().len(), 1, "only the legitimate chat: {chats}");
    assert_eq!(chats["data"][0]["chatId"], chat_id.as_str(), "and it was not deleted");

    // The run still waits for its tool, unsteered: its own client answers and it completes.
    let resp = gw
        .client
        .post(format!("{}/api/ap/submit", gw.base))
        .json(&json!({"runId": run_id, "toolId": tool_id, "params": {"choice": "mine"}}))
        .send()
        .await
        .unwrap();
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["data"]["accepted"], true, "{answer}");
    let rest = stream.rest().await;
    let kinds: Vec<&str> = rest.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.last(), Some(&"run.complete"), "{kinds:?}");
    assert!(!kinds.contains(&"request.steer"), "no steer got in: {kinds:?}");
    let step2 = gw.fixture.requests().into_iter().find(|r| r.stage() == Some("agent-react-step-2")).unwrap();
    let sent = step2.body.to_string();
    assert!(sent.contains("mine") && !sent.contains("evil") && !sent.contains("exfiltrate"), "{sent}");
}

/// What the rule lets through: clients without `Origin` (curl, SDKs, servers), the same origin,
/// an allowed origin; and reads (`GET`) from anywhere stay CORS's business.
#[tokio::test]
async fn same_origin_allowed_origins_and_non_browser_clients_are_served() {
    let gw = gateway().await;
    for origin in [None, Some(gw.base.clone()), Some("http://localhost:5173".to_owned())] {
        let mut req = gw.client.post(format!("{}/v1/chat/completions", gw.base));
        if let Some(origin) = &origin {
            req = req.header("origin", origin.as_str()).header("sec-fetch-site", "cross-site");
        }
        let resp =
            req.json(&json!({"model": "a", "messages": [{"role": "user", "content": "hi"}]})).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{origin:?}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["choices"][0]["message"]["content"], "hello", "{origin:?}: {body}");
    }
    let resp = gw.client.get(format!("{}/v1/models", gw.base)).header("sec-fetch-site", "cross-site").send().await;
    assert_eq!(resp.unwrap().status(), 200, "a read changes nothing");
}

/// A POST body must be declared as its protocol's type (`application/json`, parameters allowed):
/// anything else is 415 `unsupported_media_type` before the body is read, on every POST route.
#[tokio::test]
async fn post_bodies_must_be_json_or_get_415() {
    let gw = gateway().await;
    for (path, body) in post_routes("r", "t", "c") {
        for content_type in [Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("text/json"), None] {
            let mut req = gw
                .client
                .post(format!("{}{path}", gw.base))
                .header("accept", "application/json, text/event-stream")
                .body(body.to_string());
            if let Some(content_type) = content_type {
                req = req.header("content-type", content_type);
            }
            let resp = req.send().await.unwrap();
            let what = format!("POST {path} with {content_type:?}");
            assert_eq!(resp.status(), 415, "{what}");
            let answer: Value = resp.json().await.unwrap_or_else(|e| panic!("{what}: not JSON: {e}"));
            assert_eq!(answer["code"], "unsupported_media_type", "{what}: {answer}");
        }
    }
    assert_eq!(gw.fixture.request_count(), 0, "nothing ran");
    // Parameters and case are fine.
    for content_type in ["application/json; charset=utf-8", "Application/JSON"] {
        let resp = gw
            .client
            .post(format!("{}/v1/chat/completions", gw.base))
            .header("content-type", content_type)
            .body(json!({"model": "a", "messages": [{"role": "user", "content": "hi"}]}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{content_type}");
    }
}

/// The attack list above is the router's list: a POST route added to `PostRoute` and not to
/// [`post_routes`] fails here.
#[test]
fn the_attack_list_covers_every_post_route() {
    let listed: Vec<&str> = post_routes("r", "t", "c").iter().map(|(path, _)| *path).collect();
    for route in agw_http::routes::PostRoute::ALL {
        let path = route.path("a");
        assert!(listed.contains(&path.as_str()), "{route:?} ({path}) is not attacked by this test");
    }
    assert_eq!(listed.len(), agw_http::routes::PostRoute::ALL.len());
}
