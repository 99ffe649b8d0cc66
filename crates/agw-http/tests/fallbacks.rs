//! Model fallbacks over real HTTP (issue 39, docs/models.md "Fallbacks"): a model call that fails
//! before it streamed anything moves on to the next model of `modelConfig.fallbacks` — also in
//! the middle of a run, after tool calls — with the same transcript, no tool call repeated and
//! nothing streamed twice; a `model.fallback` event says so; usage and cost name the model that
//! answered; the failed model cools down so the next run skips it. A reason outside `fallbackOn`
//! and a failure after output started end the run as before.

mod common;

use agw_testkit::{FixtureServer, Transcript};
use common::{FIXTURE_PROVIDER, Gateway, SECOND_FIXTURE_PROVIDER};
use serde_json::{Value, json};

/// A REACT weather agent on the first fixture provider, falling back to the second.
fn agent(key: &str, fallback_on: Option<Value>) -> (String, String) {
    let mut model = json!({"providerKey": FIXTURE_PROVIDER, "model": "m",
        "fallbacks": [{"providerKey": SECOND_FIXTURE_PROVIDER, "model": "m2"}]});
    if let Some(reasons) = fallback_on {
        model["fallbackOn"] = reasons;
    }
    let text = json!({"key": key, "mode": "REACT", "modelConfig": model,
        "toolConfig": {"backends": ["mock_city_weather"]},
        "react": {"systemPrompt": "You check the weather.", "maxSteps": 4}});
    (format!("{key}.json"), text.to_string())
}

const PRICES: [(&str, &str); 2] = [
    ("AGENT_PROVIDERS_FIXTURE_PRICES", r#"{"*":{"input":1,"output":1}}"#),
    ("AGENT_PROVIDERS_FIXTURE2_PRICES", r#"{"*":{"input":10,"output":10}}"#),
];

fn weather_call(id: &str, city: &str, usage: (u64, u64)) -> Transcript {
    Transcript::new()
        .tool_call_start(0, id, "mock_city_weather")
        .tool_args(0, &format!(r#"{{"city":"{city}","date":"2026-02-13"}}"#))
        .finish("tool_calls")
        .usage(usage.0, usage.1)
        .done()
}

fn answer(pieces: &[&str], usage: (u64, u64)) -> Transcript {
    let mut transcript = Transcript::new();
    for piece in pieces {
        transcript = transcript.content(piece);
    }
    transcript.finish("stop").usage(usage.0, usage.1).done()
}

fn text(stream: &common::Stream) -> String {
    stream.of_type("content.delta").iter().map(|e| e["delta"].as_str().unwrap()).collect()
}

fn stages(fixture: &FixtureServer) -> Vec<String> {
    fixture.requests().iter().map(|r| r.stage().unwrap_or_default().to_owned()).collect()
}

/// The issue's case: the third model turn of a REACT run, after two tool calls, gets a 429; the
/// run goes on with the fallback model and the same transcript. Then a second run skips the
/// primary, which is cooling down.
#[tokio::test]
async fn a_rate_limit_mid_run_continues_on_the_fallback_and_later_runs_skip_the_primary() {
    let gw = Gateway::start_with_second_provider(&[agent("w", None)], &PRICES).await;
    let spare = gw.fixture2.as_ref().unwrap();
    gw.fixture.on_stage("agent-react-step-1", weather_call("call_1", "Tokyo", (100, 10)));
    gw.fixture.on_stage("agent-react-step-2", weather_call("call_2", "Paris", (200, 10)));
    gw.fixture.on_stage(
        "agent-react-step-3",
        Transcript::http_error(429, r#"{"error":{"message":"Rate limit reached for m","type":"rate_limit_error"}}"#)
            .with_header("Retry-After", "120"),
    );
    spare.on_stage("agent-react-step-3", answer(&["Sunny in Tokyo, ", "rainy in Paris."], (300, 20)));

    let stream = gw.run(&json!({"agentKey": "w", "message": "Weather in Tokyo and Paris?"})).await;
    let types = stream.types();
    assert_eq!(stream.last()["type"], "run.complete", "{types:?}");

    // Each tool ran once; the answer streamed once, from the fallback model.
    let results: Vec<&str> = stream.of_type("tool.result").iter().map(|e| e["toolId"].as_str().unwrap()).collect();
    assert_eq!(results, ["call_1", "call_2"], "{types:?}");
    assert_eq!(text(&stream), "Sunny in Tokyo, rainy in Paris.");

    // The event: between the last tool result and the answer.
    let fallbacks = stream.of_type("model.fallback");
    assert_eq!(fallbacks.len(), 1, "{types:?}");
    let event = fallbacks[0];
    assert_eq!(event["from"], json!({"providerKey": FIXTURE_PROVIDER, "model": "m"}));
    assert_eq!(event["to"], json!({"providerKey": SECOND_FIXTURE_PROVIDER, "model": "m2"}));
    assert_eq!(event["reason"], "rate_limit");
    let message = event["message"].as_str().unwrap();
    assert!(message.contains("429") && message.contains("Rate limit reached"), "{message}");
    let at = |ty: &str| types.iter().rposition(|t| t == ty).unwrap();
    assert!(at("tool.result") < at("model.fallback") && at("model.fallback") < at("content.delta"), "{types:?}");

    // The primary was asked once for the third turn: with a fallback ready, its 429 is not
    // waited out and retried. The fallback got the very same conversation, both results in it.
    assert_eq!(stages(&gw.fixture), ["agent-react-step-1", "agent-react-step-2", "agent-react-step-3"]);
    assert_eq!(stages(spare), ["agent-react-step-3"]);
    let (failed, answered) = (&gw.fixture.requests()[2].body, &spare.requests()[0].body);
    assert_eq!(answered["messages"], failed["messages"]);
    assert_eq!(answered["tools"], failed["tools"]);
    assert_eq!(answered["model"], "m2");
    let tool_messages = answered["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(tool_messages, 2);

    // Usage and cost name the model that answered.
    let done = stream.last();
    assert_eq!(
        done["usage"]["byModel"],
        json!([{"provider": FIXTURE_PROVIDER, "model": "m", "calls": 2, "inputTokens": 300, "outputTokens": 20},
               {"provider": SECOND_FIXTURE_PROVIDER, "model": "m2", "calls": 1, "inputTokens": 300, "outputTokens": 20}])
    );
    // 320 tokens at 1 per million, 320 at 10 per million.
    let cost = done["cost"]["amount"].as_f64().unwrap();
    assert!((cost - 0.00352).abs() < 1e-9, "{}", done["cost"]);

    // The next run: the primary is cooling down (Retry-After 120 s), so it is not even asked.
    spare.on_stage("agent-react-step-1", answer(&["Cloudy."], (50, 5)));
    let second = gw.run(&json!({"agentKey": "w", "message": "And now?"})).await;
    assert_eq!(second.last()["type"], "run.complete", "{:?}", second.types());
    assert_eq!(text(&second), "Cloudy.");
    assert_eq!(gw.fixture.request_count(), 3, "the cooling primary received no request");
    assert!(second.of_type("model.fallback").is_empty(), "skipping a cooling model is not a fallback");
    assert_eq!(second.last()["usage"]["byModel"][0]["model"], "m2");
}

/// A failure whose reason `fallbackOn` does not list ends the run as it did without fallbacks.
#[tokio::test]
async fn a_reason_not_in_fallback_on_fails_the_run() {
    let gw = Gateway::start_with_second_provider(&[agent("w", Some(json!(["overloaded", "server_error"])))], &[]).await;
    gw.fixture.set_default(
        Transcript::http_error(429, r#"{"error":{"message":"quota exceeded"}}"#).with_header("Retry-After", "0"),
    );
    let stream = gw.run(&json!({"agentKey": "w", "message": "q"})).await;
    let error = &stream.last()["error"];
    assert_eq!(stream.last()["type"], "run.error", "{:?}", stream.types());
    assert_eq!((error["code"].as_str(), error["retriable"].as_bool()), (Some("provider_error"), Some(true)));
    assert!(error["message"].as_str().unwrap().contains("429"));
    assert!(stream.of_type("model.fallback").is_empty());
    assert_eq!(gw.fixture2.as_ref().unwrap().request_count(), 0);
    assert_eq!(gw.fixture.request_count(), 3, "retried as before (max retries 2)");

    // A reason it does list moves on.
    gw.fixture.set_default(Transcript::http_error(503, "busy"));
    gw.fixture2.as_ref().unwrap().set_default(answer(&["Fine."], (1, 1)));
    let stream = gw.run(&json!({"agentKey": "w", "message": "q"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert_eq!(stream.of_type("model.fallback")[0]["reason"], "overloaded");
}

/// Once output started, a failure is not retried elsewhere: nothing already streamed is sent
/// again. The model still cools down for later runs.
#[tokio::test]
async fn a_failure_after_output_started_does_not_fall_back() {
    let gw = Gateway::start_with_second_provider(&[agent("w", None)], &[]).await;
    let spare = gw.fixture2.as_ref().unwrap();
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::new().content("Let me ").content("check").raw("data: {\"error\":{\"message\":\"overloaded\"}}\n\n"),
    );
    spare.set_default(answer(&["never"], (1, 1)));
    let stream = gw.run(&json!({"agentKey": "w", "message": "q"})).await;
    assert_eq!(stream.last()["type"], "run.error", "{:?}", stream.types());
    assert_eq!(stream.last()["error"]["code"], "provider_error");
    assert_eq!(text(&stream), "Let me check", "streamed once, never again");
    assert!(stream.of_type("model.fallback").is_empty());
    assert_eq!(spare.request_count(), 0);

    // The overloaded primary cools down: the next run starts on the fallback.
    spare.set_default(answer(&["Fine."], (1, 1)));
    let next = gw.run(&json!({"agentKey": "w", "message": "again"})).await;
    assert_eq!((next.last()["type"].as_str(), text(&next).as_str()), (Some("run.complete"), "Fine."));
    assert_eq!(gw.fixture.request_count(), 1);
}

/// Anthropic reports overload inside a healthy 200 stream (`event: error`, `overloaded_error`):
/// as the stream's first item, before any output, it moves on like a 529 would.
#[tokio::test]
async fn an_anthropic_overloaded_error_in_the_stream_falls_back() {
    let agent = json!({"key": "c", "mode": "ONESHOT",
        "modelConfig": {"providerKey": "claude", "model": "claude-sonnet-4-5",
            "fallbacks": [{"providerKey": FIXTURE_PROVIDER, "model": "gpt-spare"}]},
        "plain": {"systemPrompt": "Answer briefly."}});
    let (gw, claude) = Gateway::start_with_claude(&[("c.json".to_string(), agent.to_string())], &[]).await;
    claude.set_default(
        Transcript::new()
            .anthropic_start(10)
            .event("error", &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})),
    );
    gw.fixture.set_default(answer(&["Hello ", "there."], (5, 2)));
    let stream = gw.run(&json!({"agentKey": "c", "message": "hi"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert_eq!(text(&stream), "Hello there.");
    let event = stream.of_type("model.fallback")[0];
    assert_eq!(event["from"], json!({"providerKey": "claude", "model": "claude-sonnet-4-5"}));
    assert_eq!(event["to"], json!({"providerKey": FIXTURE_PROVIDER, "model": "gpt-spare"}));
    assert_eq!(event["reason"], "overloaded");
    assert!(event["message"].as_str().unwrap().contains("overloaded_error: Overloaded"), "{event}");
    assert!(!event.to_string().contains(common::CLAUDE_API_KEY));
    assert_eq!(claude.request_count(), 1);
    assert_eq!(gw.fixture.requests()[0].body["model"], "gpt-spare");
}
