//! Request validation and the agent endpoints.

mod common;

use common::{Gateway, oneshot_agent};
use serde_json::{Value, json};

async fn error_of(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    assert_eq!(resp.headers()["content-type"], "application/json", "errors are JSON, not SSE");
    (status, resp.json().await.unwrap())
}

#[tokio::test]
async fn bad_queries_get_400_naming_the_problem() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[]).await;

    let (status, body) = error_of(gw.post_query(&json!({"agentKey": "a", "message": "   "})).await).await;
    assert_eq!(status, 400);
    assert_eq!(body["code"], 400);
    assert!(body["msg"].as_str().unwrap().contains("message"), "{body}");
    assert_eq!(body["data"], json!({}));

    let (status, body) = error_of(gw.post_query(&json!({"agentKey": "a"})).await).await;
    assert_eq!(status, 400);
    assert!(body["msg"].as_str().unwrap().contains("message"), "{body}");

    let (status, body) = error_of(gw.post_raw("{\"message\": \"hi\"").await).await;
    assert_eq!(status, 400);
    assert!(body["msg"].as_str().unwrap().to_lowercase().contains("json"), "{body}");

    let (status, body) = error_of(gw.post_query(&json!({"message": "hi", "chatId": "not-a-uuid"})).await).await;
    assert_eq!(status, 400);
    assert_eq!(body["msg"], "chatId must be a valid UUID");

    let (status, body) = error_of(gw.post_query(&json!({"message": "hi", "stream": "yes"})).await).await;
    assert_eq!(status, 400);
    assert!(body["msg"].as_str().unwrap().contains("stream"), "wrong type names the field: {body}");

    assert_eq!(gw.fixture.request_count(), 0, "nothing reached the provider");
}

#[tokio::test]
async fn unknown_agent_is_404_and_unknown_fields_are_ignored() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[]).await;
    let (status, body) = error_of(gw.post_query(&json!({"agentKey": "ghost", "message": "hi"})).await).await;
    assert_eq!(status, 404);
    assert_eq!(body, json!({"code": 404, "msg": "agent not found: ghost", "data": {}}));

    gw.fixture.set_default(agw_testkit::Transcript::openai_text(&["ok"]));
    let stream = gw.run(&json!({"agentKey": "a", "message": "hi", "someFutureField": 1})).await;
    assert_eq!(stream.last()["type"], "run.complete");
}

#[tokio::test]
async fn oversized_body_is_413() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[("SERVER_MAX_REQUEST_BYTES", "1024")]).await;
    let big = format!("{{\"message\":\"{}\"}}", "x".repeat(4096));
    let (status, body) = error_of(gw.post_raw(big).await).await;
    assert_eq!(status, 413);
    assert_eq!(body["code"], 413);
}

#[tokio::test]
async fn default_agent_is_the_first_by_key() {
    let gw =
        Gateway::start(&[oneshot_agent("b_second", false, 1000), oneshot_agent("a_first", false, 1000)], &[]).await;
    gw.fixture.set_default(agw_testkit::Transcript::openai_text(&["ok"]));
    for key in [json!(null), json!("auto"), json!(" DEFAULT ")] {
        let stream = gw.run(&json!({"agentKey": key, "message": "hi"})).await;
        assert_eq!(stream.last()["type"], "run.complete");
    }
    // The echoed agentKey is the raw request value, omitted when absent.
    let stream = gw.run(&json!({"message": "hi"})).await;
    assert!(stream.events()[0].get("agentKey").is_none());
}

#[tokio::test]
async fn agent_list_and_detail() {
    let broken = ("broken.json".to_string(), "{ not json".to_string());
    let legacy =
        ("legacy.json".to_string(), r#"{"mode":"ONESHOT","providerKey":"x","plain":{"systemPrompt":"p"}}"#.to_string());
    let gw =
        Gateway::start(&[oneshot_agent("b", true, 1000), oneshot_agent("a", false, 1000), broken, legacy], &[]).await;

    let (status, body) = gw.get_json("/api/ap/agents").await;
    assert_eq!(status, 200);
    assert_eq!(body["code"], 0);
    assert_eq!(body["msg"], "success");
    let keys: Vec<&str> = body["data"].as_array().unwrap().iter().map(|a| a["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["a", "b"], "broken files are skipped, the others load, sorted by key");
    let a = &body["data"][0];
    assert_eq!(a["capabilities"], Value::Null);
    assert_eq!(a["meta"]["mode"], "ONESHOT");
    assert_eq!(a["meta"]["model"], "fixture-model");
    assert_eq!(a["meta"]["tools"], json!([]));
    assert_eq!(a["meta"]["skills"], json!([]));
    assert!(a["meta"].get("providerType").is_none());

    let (status, body) = gw.get_json("/api/ap/agents?tag=B").await;
    assert_eq!(status, 200);
    assert_eq!(body["data"].as_array().unwrap().len(), 1);

    let (status, body) = gw.get_json("/api/ap/agent?agentKey=b").await;
    assert_eq!(status, 200);
    assert_eq!(body["data"]["key"], "b");
    assert_eq!(body["data"]["instructions"], "You are a test agent.");

    let (status, body) = gw.get_json("/api/ap/agent?agentKey=nope").await;
    assert_eq!((status, body["msg"].as_str().unwrap()), (404, "agent not found: nope"));
    let (status, _) = gw.get_json("/api/ap/agent").await;
    assert_eq!(status, 400);

    let (status, body) = gw.get_json("/healthz").await;
    assert_eq!((status, body["status"].as_str().unwrap()), (200, "ok"));
    let (status, _) = gw.get_json("/api/ap/nothing-here").await;
    assert_eq!(status, 404);
}
