//! Prompt caching (issue 39) over loopback HTTP: Anthropic breakpoints checked by a simulated
//! cache, so a chat's second run reads what its first wrote — in usage, cost and history —
//! and OpenAI's per-chat `prompt_cache_key`.

mod common;

use std::sync::Arc;

use agw_testkit::prompt_cache::PromptCacheSim;
use agw_testkit::{FixtureServer, Transcript};
use common::Gateway;
use serde_json::{Value, json};

/// A REACT agent on the `claude` fixture provider; `extra` goes into its `modelConfig`.
fn claude_agent(key: &str, extra: &str) -> (String, String) {
    let text = format!(
        r#"{{"key":"{key}","mode":"REACT","modelConfig":{{"providerKey":"claude","model":"claude-x"{extra}}},
            "toolConfig":{{"backends":["mock_city_weather"]}},
            "react":{{"systemPrompt":"You are a weather assistant. Answer in one line.","maxSteps":3}}}}"#
    );
    (format!("{key}.json"), text)
}

async fn claude_gateway(agents: &[(String, String)], prices: &str) -> (Gateway, FixtureServer) {
    Gateway::start_with_claude(agents, &[("AGENT_PROVIDERS_CLAUDE_PRICES", prices)]).await
}

async fn ask(gw: &Gateway, agent: &str, message: &str, chat: Option<&str>) -> Vec<Value> {
    let mut body = json!({"agentKey": agent, "message": message});
    if let Some(chat) = chat {
        body["chatId"] = json!(chat);
    }
    gw.run(&body).await.events().into_iter().cloned().collect()
}

fn chat_of(events: &[Value]) -> String {
    events.iter().find(|e| e["type"] == "run.start").expect("run.start")["chatId"].as_str().expect("chatId").to_owned()
}

#[tokio::test]
async fn a_chats_second_run_reads_the_cache_its_first_run_wrote() {
    // $3 input, $0.3 cache read, $3.75 cache write, $15 output per million tokens.
    let prices = r#"{"*":{"input":3,"output":15,"cached-input":0.3,"cache-write":3.75}}"#;
    let (gw, claude) = claude_gateway(&[claude_agent("cached", "")], prices).await;
    let cache = Arc::new(PromptCacheSim::new());
    let sim = cache.clone();
    claude.set_responder(move |_, body| Some(sim.answer(body, "Sunny.")));

    let first = ask(&gw, "cached", "Weather in Paris?", None).await;
    let done = first.last().expect("events");
    assert_eq!(done["type"], "run.complete", "{first:?}");
    let usage = &done["usage"];
    assert!(usage["cacheWriteInputTokens"].as_u64().unwrap_or(0) > 0, "the first run writes: {usage}");
    assert!(usage.get("cachedInputTokens").is_none(), "and reads nothing: {usage}");

    let chat = chat_of(&first);
    let second = ask(&gw, "cached", "And in Rome?", Some(&chat)).await;
    let done = second.last().expect("events");
    assert_eq!(done["type"], "run.complete", "{second:?}");
    let usage = &done["usage"];
    let read = usage["cachedInputTokens"].as_u64().unwrap_or(0);
    let written = usage["cacheWriteInputTokens"].as_u64().unwrap_or(0);
    let input = usage["inputTokens"].as_u64().unwrap_or(0);
    // The tools, the system prompt and the whole first exchange come from the cache; only the
    // new turn is written.
    assert!(read > written, "{usage}");
    assert!(read + written <= input, "reads and writes are part of the input: {usage}");
    assert_eq!(usage["byModel"][0]["cachedInputTokens"], read);
    // Priced apart: fresh × 3 + read × 0.3 + written × 3.75 + output × 15, per million.
    let output = usage["outputTokens"].as_u64().unwrap_or(0);
    let expected =
        ((input - read - written) as f64 * 3.0 + read as f64 * 0.3 + written as f64 * 3.75 + output as f64 * 15.0)
            / 1e6;
    let amount = done["cost"]["amount"].as_f64().expect("priced");
    assert!((amount - expected).abs() < 1e-9, "{amount} vs {expected}");

    // Every request the simulated API accepted: at most four breakpoints, none misplaced.
    for request in claude.requests() {
        let used = cache.check(&request.body).expect("breakpoints the API accepts");
        assert!((1..=4).contains(&used.breakpoints), "{}", request.body);
    }
    // History keeps the split.
    let (status, detail) = gw.get_json(&format!("/api/ap/chat?chatId={chat}")).await;
    assert_eq!(status, 200);
    assert_eq!(detail["data"]["usage"]["cachedInputTokens"], read);
}

#[tokio::test]
async fn an_agent_can_turn_caching_off() {
    let (gw, claude) =
        claude_gateway(&[claude_agent("uncached", r#","promptCache":false"#)], r#"{"*":{"input":1,"output":1}}"#).await;
    claude.set_default(Transcript::anthropic_text(&["Sunny."]));
    let events = ask(&gw, "uncached", "Weather?", None).await;
    assert_eq!(events.last().expect("events")["type"], "run.complete");
    let body = &claude.request(0).expect("one call").body;
    assert!(body["system"].is_string(), "no breakpoint, plain system text: {body}");
    assert!(!body.to_string().contains("cache_control"), "{body}");
}

#[tokio::test]
async fn openai_calls_carry_one_cache_key_per_chat_where_the_provider_takes_it() {
    let fixture = FixtureServer::with_default(Transcript::openai_text(&["Sunny."])).await.expect("fixture");
    let base_url = fixture.base_url();
    let agent = |key: &str, extra: &str| {
        (
            format!("{key}.json"),
            format!(
                r#"{{"key":"{key}","mode":"ONESHOT","modelConfig":{{"providerKey":"lab","model":"m"{extra}}},
                    "plain":{{"systemPrompt":"You answer."}}}}"#
            ),
        )
    };
    let gw = Gateway::start(
        &[agent("keyed", ""), agent("unkeyed", r#","promptCache":false"#)],
        &[
            ("AGENT_PROVIDERS_LAB_BASE_URL", base_url.as_str()),
            ("AGENT_PROVIDERS_LAB_API_KEY", "sk-lab"),
            ("AGENT_PROVIDERS_LAB_MODEL", "m"),
            ("AGENT_PROVIDERS_LAB_PROMPT_CACHE_KEY", "true"),
        ],
    )
    .await;
    let first = ask(&gw, "keyed", "one", None).await;
    let chat = chat_of(&first);
    ask(&gw, "keyed", "two", Some(&chat)).await;
    ask(&gw, "keyed", "other chat", None).await;
    ask(&gw, "unkeyed", "no key", None).await;
    let keys: Vec<Value> = fixture.requests().iter().map(|r| r.body["prompt_cache_key"].clone()).collect();
    assert_eq!(keys.len(), 4);
    let key = keys[0].as_str().expect("a key");
    assert_eq!(keys[1], keys[0], "one key for the chat's calls");
    assert_ne!(keys[2], keys[0], "another chat, another key");
    assert!(!key.contains(&chat), "the key does not reveal the chat id");
    assert_eq!(keys[3], Value::Null, "caching off: no key");
}
