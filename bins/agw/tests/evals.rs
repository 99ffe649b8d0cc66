//! The example evalset of the bundled demo agents (`crates/agw-eval/evalsets/demo.json`, issue
//! 42) played against the real binary on the offline demo model, offline: every case's turns are
//! sent, the waits answered as the case says, each last run's events scored with agw-eval. All
//! pass; a changed expectation (a tool the agent never calls) fails with its reason. This loop is
//! the seed of `agw eval run`'s runner.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agw_eval::{Case, EvalSet, Observed, score};
use agw_protocol::event::Event;
use agw_protocol::sse::SseDecoder;
use serde_json::{Value, json};

struct Running {
    child: Child,
    base: String,
    scratch: std::path::PathBuf,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

fn start() -> Running {
    let scratch = std::env::temp_dir().join(format!("agw-evals-test-{}", std::process::id()));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agw"));
    for var in ["AGENT_EXTERNAL_DIR", "AGW_CONFIG", "SERVER_ADDRESS", "SERVER_PORT", "AGENT_AUTH_ENABLED"] {
        cmd.env_remove(var);
    }
    cmd.args(["serve", "--port", "0"])
        .env("AGW_DEMO_CHUNK_DELAY_MS", "0")
        .env("MEMORY_CHAT_DIR", scratch.join("chats"))
        .env("AGENT_DATA_EXTERNAL_DIR", scratch.join("data"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn agw");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("listening line");
    let base = line.trim().strip_prefix("agw listening on ").expect("listening line").to_string();
    Running { child, base, scratch }
}

/// Plays `case`'s turns in one chat; returns the last run's events. A wait (a frontend tool's
/// `tool.end`, an `awaiting.ask`) takes the case's next answer for that tool.
async fn play(agw: &Running, set: &EvalSet, case: &Case) -> Vec<Event> {
    let client = reqwest::Client::new();
    let mut chat: Option<String> = None;
    let mut events = Vec::new();
    for turn in &case.turns {
        let mut answers = turn.answers.iter();
        let mut body = json!({"agentKey": set.agent_of(case), "message": turn.message});
        if let Some(chat) = &chat {
            body["chatId"] = json!(chat);
        }
        let mut resp = client.post(format!("{}/api/ap/query", agw.base)).json(&body).send().await.unwrap();
        assert_eq!(resp.status(), 200, "case {}", case.id);
        let (mut decoder, mut frames) = (SseDecoder::new(), Vec::new());
        events.clear();
        // Frontend calls by id, with their tool name.
        let mut frontend: Vec<(String, String)> = Vec::new();
        while let Some(chunk) = tokio::time::timeout(Duration::from_secs(30), resp.chunk()).await.unwrap().unwrap() {
            decoder.feed(&chunk, &mut frames);
            for frame in frames.drain(..).filter(|f| !f.is_heartbeat()) {
                let value: Value = serde_json::from_str(&frame.data).unwrap();
                let wait = match value["type"].as_str() {
                    Some("tool.start") if value["toolKey"].is_string() => {
                        frontend.push((
                            value["toolId"].as_str().unwrap().into(),
                            value["toolName"].as_str().unwrap().into(),
                        ));
                        None
                    }
                    Some("tool.end") => frontend
                        .iter()
                        .find(|(id, _)| value["toolId"] == *id)
                        .map(|(id, name)| (json!({"toolId": id}), name.clone())),
                    Some("awaiting.ask") => {
                        // An approval names its tool in its approval; a paused tool at the top.
                        let tool = value["toolName"].as_str().or_else(|| value["approvals"][0]["toolName"].as_str());
                        Some((json!({"awaitingId": value["awaitingId"]}), tool.unwrap_or_default().into()))
                    }
                    _ => None,
                };
                if let Some((mut target, tool)) = wait {
                    let answer = answers.next().unwrap_or_else(|| panic!("case {}: no answer for {tool}", case.id));
                    assert_eq!(answer.tool, tool, "case {}: the run waits for another tool", case.id);
                    target["runId"] = value["runId"].clone();
                    if target["runId"].is_null() {
                        target["runId"] = json!(run_id(&events));
                    }
                    target["params"] = answer.params.clone();
                    let submitted =
                        client.post(format!("{}/api/ap/submit", agw.base)).json(&target).send().await.unwrap();
                    assert_eq!(submitted.status(), 200, "case {}", case.id);
                }
                events.push(serde_json::from_value::<Event>(value).unwrap());
            }
        }
        chat = events.iter().find_map(|e| match &e.payload {
            agw_protocol::event::EventPayload::RunStart(start) => Some(start.chat_id.clone()),
            _ => None,
        });
    }
    events
}

fn run_id(events: &[Event]) -> String {
    events
        .iter()
        .find_map(|e| match &e.payload {
            agw_protocol::event::EventPayload::RunStart(start) => Some(start.run_id.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn the_demo_evalset_passes_offline_and_a_changed_expectation_fails() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../crates/agw-eval/evalsets/demo.json"))
            .expect("the example evalset");
    let set = EvalSet::from_json(&text).expect("a valid evalset");
    let agw = start();
    let mut observed = Vec::new();
    for case in &set.cases {
        let events = play(&agw, &set, case).await;
        let seen = Observed::from_events(&events);
        let scored = score(&case.expect, &seen);
        assert!(
            scored.pass,
            "case {}: {:?} (calls {:?}, answer {:?})",
            case.id, scored.failures, seen.calls, seen.answer
        );
        observed.push(seen);
    }
    assert_eq!(observed.len(), 6);

    // The same run against an expectation the agent does not meet: a second tool, exactly.
    let mut changed = set.cases[0].expect.clone();
    changed.trajectory.as_mut().unwrap().calls.push(serde_json::from_value(json!({"name": "city_datetime"})).unwrap());
    let scored = score(&changed, &observed[0]);
    assert!(!scored.pass);
    assert_eq!(scored.trajectory, Some(0.5));
    assert!(scored.failures[0].starts_with("trajectory scored 0.50"), "{:?}", scored.failures);
}
