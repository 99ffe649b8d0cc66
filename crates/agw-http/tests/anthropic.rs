//! End to end over the `ANTHROPIC` protocol: a REACT run against a loopback Messages API
//! fixture configured through `AGENT_PROVIDERS_CLAUDE_*`.

mod common;

use agw_testkit::Transcript;
use common::Gateway;
use serde_json::json;

#[tokio::test]
async fn react_run_with_thinking_and_a_tool_call() {
    let agent = json!({
        "key": "claudeReact",
        "mode": "REACT",
        "modelConfig": {"providerKey": "claude", "model": "claude-sonnet-4-5", "reasoning": {"enabled": true, "effort": "LOW"}},
        "toolConfig": {"backends": ["mock_city_weather"]},
        "react": {"systemPrompt": "You are a weather assistant.", "maxSteps": 3}
    });
    let (gw, claude) = Gateway::start_with_claude(&[("claudeReact.json".to_string(), agent.to_string())], &[]).await;

    claude.on_stage(
        "agent-react-step-1",
        Transcript::new()
            .anthropic_start(120)
            .anthropic_block_start(0, json!({"type": "thinking", "thinking": ""}))
            .anthropic_delta(0, json!({"type": "thinking_delta", "thinking": "The user wants the weather"}))
            .anthropic_delta(0, json!({"type": "thinking_delta", "thinking": " in Shanghai."}))
            .anthropic_delta(0, json!({"type": "signature_delta", "signature": "sig-e2e"}))
            .anthropic_block_stop(0)
            .event("ping", &json!({"type": "ping"}))
            .anthropic_block_start(
                1,
                json!({"type": "tool_use", "id": "toolu_01Weather", "name": "mock_city_weather", "input": {}}),
            )
            .anthropic_delta(1, json!({"type": "input_json_delta", "partial_json": "{\"city\":"}))
            .anthropic_delta(1, json!({"type": "input_json_delta", "partial_json": " \"Shanghai\"}"}))
            .anthropic_block_stop(1)
            .anthropic_stop("tool_use", 40),
    );
    claude.on_stage(
        "agent-react-step-2",
        Transcript::new()
            .anthropic_start(200)
            .anthropic_block_start(0, json!({"type": "thinking", "thinking": ""}))
            .anthropic_delta(0, json!({"type": "thinking_delta", "thinking": "Got it."}))
            .anthropic_delta(0, json!({"type": "signature_delta", "signature": "sig-2"}))
            .anthropic_block_stop(0)
            .anthropic_block_start(1, json!({"type": "text", "text": ""}))
            .anthropic_delta(1, json!({"type": "text_delta", "text": "Shanghai: "}))
            .anthropic_delta(1, json!({"type": "text_delta", "text": "light snow."}))
            .anthropic_block_stop(1)
            .anthropic_stop("end_turn", 12),
    );

    let stream = gw.run(&json!({"agentKey": "claudeReact", "message": "Weather in Shanghai?"})).await;
    let types = stream.types();
    let deltas = |ty: &str, field: &str| -> Vec<String> {
        stream.of_type(ty).iter().map(|e| e[field].as_str().unwrap_or_default().to_owned()).collect()
    };
    assert_eq!(
        deltas("reasoning.delta", "delta"),
        ["The user wants the weather", " in Shanghai.", "Got it."],
        "{types:?}"
    );
    let start = stream.of_type("tool.start");
    assert_eq!(start.len(), 1, "{types:?}");
    assert_eq!(start[0]["toolId"], "toolu_01Weather");
    assert_eq!(start[0]["toolName"], "mock_city_weather");
    assert_eq!(deltas("tool.args", "delta"), ["{\"city\":", " \"Shanghai\"}"]);
    assert_eq!(stream.of_type("tool.end").len(), 1);
    let result = stream.of_type("tool.result");
    assert_eq!(result.len(), 1);
    assert_eq!(result[0]["toolId"], "toolu_01Weather");
    let result_text = result[0]["result"].as_str().expect("result text").to_owned();
    assert!(result_text.contains("\"city\""), "{result_text}");
    assert_eq!(deltas("content.delta", "delta"), ["Shanghai: ", "light snow."]);
    let last = stream.last();
    assert_eq!(last["type"], "run.complete", "{types:?}");
    assert_eq!(last["finishReason"], "stop");
    let order = |ty: &str| types.iter().position(|t| t == ty).unwrap_or_else(|| panic!("no {ty}: {types:?}"));
    assert!(order("reasoning.delta") < order("tool.start"));
    assert!(order("tool.start") < order("tool.args") && order("tool.args") < order("tool.end"));
    assert!(order("tool.end") < order("tool.result") && order("tool.result") < order("content.delta"));

    // The wire: Messages API requests, the key only in x-api-key.
    let requests = claude.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(request.path, "/v1/messages");
        assert_eq!(request.header("x-api-key"), Some(common::CLAUDE_API_KEY));
        assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
        assert!(request.header("authorization").is_none());
        assert_eq!(request.body["model"], "claude-sonnet-4-5");
        assert_eq!(request.body["thinking"], json!({"type": "enabled", "budget_tokens": 1024}));
        // Prompt caching is on by default: the system prompt is one marked block, so is the tool.
        let system = &request.body["system"][0];
        assert!(system["text"].as_str().unwrap_or_default().starts_with("You are a weather assistant."));
        assert_eq!(system["cache_control"], json!({"type": "ephemeral"}));
        assert_eq!(request.body["tools"][0]["name"], "mock_city_weather");
        assert_eq!(request.body["tools"][0]["cache_control"], json!({"type": "ephemeral"}));
        assert_eq!(request.body["tool_choice"], json!({"type": "auto"}));
    }
    // The second request carries the tool_use / tool_result pair, with the signed thinking.
    let messages = requests[1].body["messages"].as_array().expect("messages");
    let n = messages.len();
    assert_eq!(
        messages[n - 2],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "The user wants the weather in Shanghai.", "signature": "sig-e2e"},
            {"type": "tool_use", "id": "toolu_01Weather", "name": "mock_city_weather", "input": {"city": "Shanghai"}},
        ]})
    );
    assert_eq!(
        messages[n - 1],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01Weather", "content": result_text,
             "cache_control": {"type": "ephemeral"}},
        ]})
    );
}
