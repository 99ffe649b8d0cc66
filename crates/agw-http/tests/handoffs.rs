//! Handoffs over loopback HTTP (issue 34, `docs/multi-agent.md` "Handoffs"): an agent hands the
//! conversation to another through `transfer_to_<agentKey>`; the next agent continues the same
//! run with the conversation so far (through its input filter), the stream and the replay show
//! `agent.handoff`, the chat's next turns go to the agent it ended with, unlisted transfers are
//! refused and chains are bounded.

mod common;

use agw_testkit::Transcript;
use common::{Gateway, assert_chat_files_valid, assert_chat_replayable};
use serde_json::{Value, json};

fn agents(triage_handoffs: Value) -> Vec<(String, String)> {
    let model = json!({"providerKey": "fixture", "model": "m"});
    let triage = json!({"key": "triage", "description": "Sorts out what the user needs.", "mode": "REACT",
        "modelConfig": model, "toolConfig": {"backends": [], "handoffs": triage_handoffs},
        "react": {"systemPrompt": "TRIAGE: you route users.", "maxSteps": 4}});
    let billing = json!({"key": "billing", "description": "Handles invoices and refunds.", "mode": "REACT",
        "modelConfig": model, "toolConfig": {"backends": ["mock_city_weather"]},
        "react": {"systemPrompt": "BILLING: you fix invoices.", "maxSteps": 3}});
    let outsider = json!({"key": "outsider", "mode": "ONESHOT", "modelConfig": model,
        "plain": {"systemPrompt": "OUTSIDER"}});
    let ping = json!({"key": "ping", "mode": "REACT", "modelConfig": model, "toolConfig": {"handoffs": ["pong"]},
        "react": {"systemPrompt": "PING", "maxSteps": 3}});
    let pong = json!({"key": "pong", "mode": "ONESHOT", "modelConfig": model, "toolConfig": {"handoffs": ["ping"]},
        "plain": {"systemPrompt": "PONG"}});
    [("triage", triage), ("billing", billing), ("outsider", outsider), ("ping", ping), ("pong", pong)]
        .into_iter()
        .map(|(key, text)| (format!("{key}.json"), text.to_string()))
        .collect()
}

fn system(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap_or("")
}

fn last_message(body: &Value) -> &Value {
    body["messages"].as_array().and_then(|m| m.last()).unwrap_or(&Value::Null)
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| tools.iter().filter_map(|t| t["function"]["name"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default()
}

fn transfer(to: &str) -> Transcript {
    Transcript::openai_tool_call("call_h", &format!("transfer_to_{to}"), &["{}"])
}

/// Triage answers the first turn of a chat by handing over (it has seen no tool result yet);
/// billing answers.
fn script_desk(gw: &Gateway) {
    gw.fixture.set_responder(|_, body| {
        let system = system(body);
        Some(if system.starts_with("TRIAGE") {
            if last_message(body)["role"] == "tool" {
                Transcript::openai_text(&["Triage ", "again."])
            } else {
                transfer("billing")
            }
        } else if system.starts_with("BILLING") {
            Transcript::openai_text(&["Your refund ", "is on its way."])
        } else {
            Transcript::openai_text(&["Outsider here."])
        })
    });
}

fn chat_id_of(events: &[&Value]) -> String {
    events.iter().find(|e| e["type"] == "run.start").unwrap()["chatId"].as_str().unwrap().to_owned()
}

fn first_request_of(gw: &Gateway, prefix: &str) -> Value {
    gw.fixture.requests().into_iter().find(|r| system(&r.body).starts_with(prefix)).expect(prefix).body
}

#[tokio::test]
async fn a_handoff_continues_the_run_with_the_next_agent_and_the_conversation_so_far() {
    let gw = Gateway::start(&agents(json!(["billing"])), &[]).await;
    script_desk(&gw);
    let stream = gw.run(&json!({"agentKey": "triage", "message": "My invoice is wrong."})).await;
    let types = stream.types();
    assert_eq!(stream.last()["type"], "run.complete", "{types:?}");
    assert_eq!(stream.of_type("run.start").len(), 1, "one run");
    assert_eq!(stream.of_type("run.complete").len(), 1);

    // Triage was offered one transfer tool, described by its target.
    let triage = first_request_of(&gw, "TRIAGE");
    assert_eq!(tool_names(&triage), ["transfer_to_billing"]);
    assert!(triage["tools"].to_string().contains("Handles invoices and refunds."), "{}", triage["tools"]);

    // The stream: the transfer call and its result, then the handoff naming both agents, then
    // billing's answer.
    let handoffs = stream.of_type("agent.handoff");
    assert_eq!(handoffs.len(), 1, "{types:?}");
    let handoff = handoffs[0];
    let call_id = stream.of_type("tool.start")[0]["toolId"].as_str().unwrap().to_owned();
    assert_eq!(
        (handoff["fromAgentKey"].as_str(), handoff["toAgentKey"].as_str(), handoff["toolId"].as_str()),
        (Some("triage"), Some("billing"), Some(call_id.as_str()))
    );
    assert_eq!(handoff["runId"], stream.of_type("run.start")[0]["runId"]);
    let at = |ty: &str| types.iter().position(|t| t == ty).unwrap();
    assert!(at("tool.result") < at("agent.handoff") && at("agent.handoff") < at("content.start"), "{types:?}");
    let result = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_owned();
    assert!(result.contains("\"transferred\":true") && result.contains("billing"), "{result}");
    let text: String = stream.of_type("content.delta").iter().map(|e| e["delta"].as_str().unwrap()).collect();
    assert_eq!(text, "Your refund is on its way.");

    // Billing's first request: its own prompt and tools, the conversation so far (the user's
    // message once, triage's transfer call and result).
    let billing = first_request_of(&gw, "BILLING");
    assert_eq!(tool_names(&billing), ["mock_city_weather"], "billing's own tools");
    let messages = billing["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"], "{messages:?}");
    assert_eq!(messages[1]["content"], "My invoice is wrong.");
    assert_eq!(messages[2]["tool_calls"][0]["function"]["name"], "transfer_to_billing");
    assert_eq!(gw.fixture.requests().iter().filter(|r| system(&r.body).starts_with("TRIAGE")).count(), 1);

    // The history replays the handoff where it happened.
    let chat_id = chat_id_of(&stream.events());
    let replay = assert_chat_replayable(&gw, &chat_id).await;
    let replayed: Vec<&str> = replay.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let handoff_at = replayed.iter().position(|t| *t == "agent.handoff").expect("replayed handoff");
    let result_at = replayed.iter().position(|t| *t == "tool.result").unwrap();
    let answer_at = replayed.iter().position(|t| *t == "content.snapshot").unwrap();
    assert!(result_at < handoff_at && handoff_at < answer_at, "{replayed:?}");
    for key in ["fromAgentKey", "toAgentKey", "toolId", "runId"] {
        assert_eq!(replay[handoff_at][key], handoff[key], "{key}");
    }
    assert_chat_files_valid(&gw);
}

#[tokio::test]
async fn later_turns_of_the_chat_go_to_the_agent_it_ended_with_unless_another_is_named() {
    let gw = Gateway::start(&agents(json!(["billing"])), &[]).await;
    script_desk(&gw);
    let stream = gw.run(&json!({"agentKey": "triage", "message": "My invoice is wrong."})).await;
    let chat_id = chat_id_of(&stream.events());
    let (_, chats) = gw.get_json("/api/ap/chats").await;
    assert_eq!(chats["data"][0]["firstAgentKey"], "triage");
    assert_eq!(chats["data"][0]["lastAgentKey"], "billing", "{chats}");

    // The chat's first agent, or no agent at all: billing answers, with the whole chat.
    for agent_key in [Some("triage"), None] {
        gw.fixture.forget_requests();
        let mut query = json!({"message": "And the second invoice?", "chatId": chat_id});
        if let Some(key) = agent_key {
            query["agentKey"] = key.into();
        }
        let again = gw.run(&query).await;
        assert_eq!(again.last()["type"], "run.complete", "{:?}", again.types());
        assert!(again.of_type("agent.handoff").is_empty());
        let requests = gw.fixture.requests();
        assert_eq!(requests.len(), 1, "only billing ran");
        assert!(system(&requests[0].body).starts_with("BILLING"), "{agent_key:?}");
        let history = requests[0].body["messages"].to_string();
        assert!(history.contains("My invoice is wrong.") && history.contains("Your refund is on its way."));
    }

    // Another agent named explicitly wins, and the chat then stays with it.
    gw.fixture.forget_requests();
    let other = gw.run(&json!({"agentKey": "outsider", "message": "Hello?", "chatId": chat_id})).await;
    assert_eq!(other.last()["type"], "run.complete");
    assert!(system(&gw.fixture.requests()[0].body).starts_with("OUTSIDER"));
    let (_, chats) = gw.get_json("/api/ap/chats").await;
    assert_eq!(chats["data"][0]["lastAgentKey"], "outsider", "{chats}");
    gw.fixture.forget_requests();
    gw.run(&json!({"message": "Still there?", "chatId": chat_id})).await;
    assert!(system(&gw.fixture.requests()[0].body).starts_with("OUTSIDER"));
}

#[tokio::test]
async fn an_input_filter_trims_what_the_next_agent_receives() {
    let gw = Gateway::start(&agents(json!([{"agentKey": "billing", "inputFilter": "lastUserMessage"}])), &[]).await;
    gw.fixture.set_responder(|_, body| {
        let system = system(body);
        Some(if system.starts_with("TRIAGE") {
            if last_message(body)["content"] == "Refund please." {
                transfer("billing")
            } else {
                Transcript::openai_text(&["Hello!"])
            }
        } else {
            Transcript::openai_text(&["Billing here."])
        })
    });
    // A first turn triage answers itself, then one it hands over.
    let first = gw.run(&json!({"agentKey": "triage", "message": "Hi there"})).await;
    let chat_id = chat_id_of(&first.events());
    gw.fixture.forget_requests();
    let second = gw.run(&json!({"agentKey": "triage", "message": "Refund please.", "chatId": chat_id})).await;
    assert_eq!(second.of_type("agent.handoff").len(), 1, "{:?}", second.types());
    let billing = first_request_of(&gw, "BILLING");
    let messages = billing["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user"], "only the last user message: {messages:?}");
    assert_eq!(messages[1]["content"], "Refund please.");
}

#[tokio::test]
async fn a_transfer_to_an_unlisted_agent_is_refused_and_the_agent_goes_on() {
    let gw = Gateway::start(&agents(json!(["billing"])), &[]).await;
    gw.fixture.set_responder(|_, body| {
        Some(if last_message(body)["role"] == "tool" {
            Transcript::openai_text(&["I'll help."])
        } else {
            transfer("outsider")
        })
    });
    let stream = gw.run(&json!({"agentKey": "triage", "message": "Let me talk to the outsider."})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    assert!(stream.of_type("agent.handoff").is_empty());
    let result = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_owned();
    assert!(result.contains("not an agent this agent may hand off to (it may hand off to: billing)"), "{result}");
    assert!(!gw.fixture.requests().iter().any(|r| system(&r.body).starts_with("OUTSIDER")));
}

#[tokio::test]
async fn a_chain_of_handoffs_stops_at_the_limit() {
    let gw = Gateway::start(&agents(json!(["billing"])), &[]).await;
    // Ping and pong hand the conversation to each other until a transfer is refused.
    gw.fixture.set_responder(|_, body| {
        let last = last_message(body);
        let refused = last["role"] == "tool" && last["content"].as_str().is_some_and(|c| c.contains("yourself"));
        Some(if refused {
            Transcript::openai_text(&["Fine, ", "I'll answer."])
        } else if system(body).starts_with("PING") {
            transfer("pong")
        } else {
            transfer("ping")
        })
    });
    let stream = gw.run(&json!({"agentKey": "ping", "message": "Who answers?"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let handoffs = stream.of_type("agent.handoff");
    assert_eq!(handoffs.len(), 5, "at most five per run");
    let chain: Vec<&str> = handoffs.iter().map(|h| h["toAgentKey"].as_str().unwrap()).collect();
    assert_eq!(chain, ["pong", "ping", "pong", "ping", "pong"]);
    let last_result = stream.of_type("tool.result").last().unwrap()["result"].as_str().unwrap().to_owned();
    assert!(last_result.contains("already handed the conversation over 5 times"), "{last_result}");
    let text: String = stream.of_type("content.delta").iter().map(|e| e["delta"].as_str().unwrap()).collect();
    assert_eq!(text, "Fine, I'll answer.");
    // Call ids stay unique across the agents of the run.
    let mut ids: Vec<&str> = stream.of_type("tool.start").iter().map(|e| e["toolId"].as_str().unwrap()).collect();
    let count = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), count, "{ids:?}");
}
