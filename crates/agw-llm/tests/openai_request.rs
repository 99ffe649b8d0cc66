//! What the OpenAI-compatible client sends: URL, headers, body (key order included).

mod common;

use std::time::Duration;

use agw_llm::{
    ChatMessage, ChatRequest, OpenAiCompatibleProvider, ReasoningEffort, ReasoningSetting, ToolCallMessage, ToolChoice,
    ToolSpec,
};
use agw_testkit::{FIXTURE_API_KEY, FixtureServer, RecordedRequest, Transcript};
use common::{call, options, request, within};
use serde_json::{Value, json};

/// Sends `request` to a fresh fixture and returns what the server received.
async fn sent(request: ChatRequest) -> RecordedRequest {
    let server = FixtureServer::with_default(Transcript::openai_text(&["ok"])).await.expect("fixture server starts");
    let provider = server.provider("fixture");
    let (_, error) =
        within(Duration::from_secs(5), call(&provider, request, options("agent-oneshot"))).await.expect("stream opens");
    assert!(error.is_none());
    server.request(0).expect("one request recorded")
}

fn keys(value: &Value) -> Vec<&str> {
    value.as_object().map(|o| o.keys().map(String::as_str).collect()).unwrap_or_default()
}

fn full_request() -> ChatRequest {
    let mut req = request("What's the weather in Paris?");
    req.provider_key = "BaiLian".into();
    req.messages.insert(
        2,
        ChatMessage::Assistant {
            content: String::new(),
            tool_calls: vec![ToolCallMessage {
                id: "call_1".into(),
                call_type: "function".into(),
                name: "city_datetime".into(),
                arguments: "{\"city\":\"Paris\"}".into(),
            }],
        },
    );
    req.messages.insert(
        3,
        ChatMessage::Tool { tool_call_id: "call_1".into(), name: "city_datetime".into(), content: "12:00".into() },
    );
    req.tools = vec![
        ToolSpec {
            name: "mock_city_weather".into(),
            description: "Weather of a city".into(),
            parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        },
        ToolSpec { name: "city_datetime".into(), description: "  ".into(), parameters: Value::Null },
    ];
    req.tool_choice = Some(ToolChoice::Required);
    req.reasoning = ReasoningSetting { enabled: true, effort: ReasoningEffort::High };
    req.max_tokens = Some(1024);
    req.temperature = Some(0.3);
    req.top_p = Some(0.9);
    req
}

#[tokio::test]
async fn full_body_in_contract_order() {
    let recorded = sent(full_request()).await;
    let body = &recorded.body;
    assert_eq!(
        keys(body),
        [
            "model",
            "stream",
            "stream_options",
            "messages",
            "max_tokens",
            "temperature",
            "top_p",
            "enable_thinking",
            "reasoning",
            "tools",
            "tool_choice",
            "parallel_tool_calls"
        ]
    );
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(body["temperature"], 0.3);
    assert_eq!(body["top_p"], 0.9);
    assert_eq!(body["enable_thinking"], true);
    assert_eq!(body["reasoning"], json!({"effort": "high"}));
    assert_eq!(body["tool_choice"], "required");
    assert_eq!(body["parallel_tool_calls"], false);

    let messages = body["messages"].as_array().expect("messages array");
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[0].to_string(), r#"{"role":"system","content":"You are terse."}"#);
    assert_eq!(messages[1].to_string(), r#"{"role":"user","content":"What's the weather in Paris?"}"#);
    assert_eq!(
        messages[2].to_string(),
        r#"{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"city_datetime","arguments":"{\"city\":\"Paris\"}"}}]}"#
    );
    assert_eq!(
        messages[3].to_string(),
        r#"{"role":"tool","tool_call_id":"call_1","name":"city_datetime","content":"12:00"}"#
    );

    // Sorted by name; blank description omitted; default schema; strict false.
    assert_eq!(
        body["tools"][0].to_string(),
        r#"{"type":"function","function":{"name":"city_datetime","parameters":{"type":"object","properties":{},"additionalProperties":true},"strict":false}}"#
    );
    assert_eq!(body["tools"][1]["function"]["name"], "mock_city_weather");
    assert_eq!(body["tools"][1]["function"]["description"], "Weather of a city");
    assert_eq!(keys(&body["tools"][1]["function"]), ["name", "description", "parameters", "strict"]);

    // The raw text has the same order (the fixture parses with order preserved, but check bytes too).
    assert!(
        recorded
            .raw_body
            .starts_with(r#"{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":["#)
    );
}

#[tokio::test]
async fn optional_keys_only_when_set() {
    let mut req = request("hi");
    req.tools = vec![ToolSpec { name: "t".into(), description: "d".into(), parameters: json!({}) }];
    req.tool_choice = None; // NONE: tools are not offered at all
    req.reasoning = ReasoningSetting { enabled: false, effort: ReasoningEffort::Low };
    let body = sent(req).await.body;
    assert_eq!(keys(&body), ["model", "stream", "stream_options", "messages"]);
}

#[tokio::test]
async fn enable_thinking_only_for_bailian() {
    let mut req = request("hi");
    req.provider_key = "bailian".into();
    let body = sent(req.clone()).await.body;
    assert_eq!(body["enable_thinking"], false, "bailian always gets the switch");
    assert!(body.get("reasoning").is_none());

    req.provider_key = "siliconflow".into();
    req.reasoning = ReasoningSetting { enabled: true, effort: ReasoningEffort::Medium };
    let body = sent(req).await.body;
    assert!(body.get("enable_thinking").is_none());
    assert_eq!(body["reasoning"], json!({"effort": "medium"}));
}

#[tokio::test]
async fn headers_and_default_path() {
    let recorded = sent(request("hi")).await;
    assert_eq!(recorded.method, "POST");
    assert_eq!(recorded.path, "/v1/chat/completions");
    assert_eq!(recorded.header("authorization"), Some(format!("Bearer {FIXTURE_API_KEY}").as_str()));
    assert_eq!(recorded.header("accept"), Some("text/event-stream"));
    assert_eq!(recorded.header("content-type"), Some("application/json"));
    assert_eq!(recorded.header("x-agw-stage"), Some("agent-oneshot"));
    assert_eq!(recorded.header("x-agw-run-id"), Some("run_test_1"));
    // async-openai's OPENAI_* environment defaults never leak into other providers' requests.
    assert!(recorded.header("openai-organization").is_none());
    assert!(recorded.header("openai-project").is_none());
}

#[tokio::test]
async fn v1_path_rule() {
    let server = FixtureServer::with_default(Transcript::openai_text(&["ok"])).await.expect("fixture server starts");
    let base = server.base_url();
    let cases = [
        (base.clone(), "/v1/chat/completions"),
        (format!("{base}/"), "/v1/chat/completions"),
        (format!("{base}/v1"), "/v1/chat/completions"),
        (format!("{base}/compatible-mode/V1/"), "/compatible-mode/V1/chat/completions"),
        (format!("{base}/api"), "/api/v1/chat/completions"),
    ];
    for (i, (base_url, path)) in cases.iter().enumerate() {
        let provider = OpenAiCompatibleProvider::new("p", base_url, "k", "m").expect("valid provider");
        let (_, error) = call(&provider, request("hi"), options("s")).await.expect("stream opens");
        assert!(error.is_none());
        assert_eq!(server.request(i).expect("recorded").path, *path, "base {base_url}");
    }
}
