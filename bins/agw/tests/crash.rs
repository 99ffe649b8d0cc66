//! Crash safety of chat memory with the real binary: SIGKILL in the middle of a run, restart on
//! the same memory directory, and the chat is intact, listed, replayable and continues.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Agw, Events};
use serde_json::{Value, json};

/// A scratch directory (memory + data) removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("agw-crash-test-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn chats(&self) -> PathBuf {
        self.0.join("chats")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Agw {
    /// Bundled demo agents on the demo model, chat memory in `scratch`.
    fn start(scratch: &Scratch, chunk_delay_ms: u64) -> Agw {
        Self::start_with(scratch, chunk_delay_ms, &[])
    }

    /// [`Self::start`] with more environment.
    fn start_with(scratch: &Scratch, chunk_delay_ms: u64, extra: &[(&str, &str)]) -> Agw {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agw"));
        for var in ["AGENT_EXTERNAL_DIR", "AGW_CONFIG", "SERVER_ADDRESS", "SERVER_PORT", "AGENT_AUTH_ENABLED"] {
            cmd.env_remove(var);
        }
        cmd.args(["serve", "--port", "0"])
            .env("AGW_DEMO_CHUNK_DELAY_MS", chunk_delay_ms.to_string())
            .env("MEMORY_CHAT_DIR", scratch.chats())
            .env("AGENT_DATA_EXTERNAL_DIR", scratch.0.join("data"))
            .envs(extra.iter().copied())
            .stderr(Stdio::null());
        Agw::spawn(&mut cmd)
    }
}

async fn query(client: &reqwest::Client, agw: &Agw, body: Value) -> Events {
    let resp = client.post(format!("{}/api/ap/query", agw.base)).json(&body).send().await.expect("query");
    assert_eq!(resp.status(), 200);
    Events::new(resp)
}

async fn get(client: &reqwest::Client, agw: &Agw, path: &str) -> Value {
    let resp = client.get(format!("{}{path}", agw.base)).send().await.expect("get");
    assert_eq!(resp.status(), 200, "{path}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["code"], 0, "{body}");
    body["data"].clone()
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

fn content_text(events: &[Value]) -> String {
    of_type(events, "content.delta").iter().map(|e| e["delta"].as_str().unwrap()).collect()
}

fn run_id(events: &[Value]) -> String {
    of_type(events, "run.start")[0]["runId"].as_str().unwrap().to_owned()
}

/// The history file's lines: every one parses, except possibly `torn` (a fragment left by the
/// kill, last at first and isolated on its own line by the next append). Returns the parsed
/// lines and the unparseable last line, if any.
fn history_lines(path: &Path, torn: Option<&str>) -> (Vec<Value>, Option<String>) {
    let text = std::fs::read_to_string(path).expect("history file exists");
    let lines: Vec<&str> = text.split('\n').filter(|l| !l.is_empty()).collect();
    let mut parsed = Vec::new();
    let mut last_torn = None;
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Value>(line) {
            Ok(v) => parsed.push(v),
            Err(_) if torn == Some(*line) => {}
            Err(e) => {
                assert_eq!(i + 1, lines.len(), "only the last line may be torn; line {i}: {e}: {line}");
                last_torn = Some((*line).to_owned());
            }
        }
    }
    (parsed, last_torn)
}

/// With crash recovery off, a run killed in flight is gone; what completed before it stays
/// (with recovery on, the killed run is resumed: `tests/recovery.rs`).
#[tokio::test]
async fn sigkill_mid_run_loses_nothing_that_completed() {
    let scratch = Scratch::new("mid-run");
    let client = reqwest::Client::new();
    let off = [("AGW_RECOVERY_ENABLED", "false")];

    // First life: one complete run, then a run killed after its first content.delta.
    let mut agw = Agw::start_with(&scratch, 50, &off);
    let first =
        query(&client, &agw, json!({"agentKey": "demoModePlain", "message": "first question"})).await.all().await;
    assert_eq!(first.last().unwrap()["type"], "run.complete");
    let chat_id = first[0]["chatId"].as_str().unwrap().to_owned();
    let first_run = run_id(&first);
    let first_text = content_text(&first);
    assert!(first_text.contains("first question"), "{first_text}");

    let mut second =
        query(&client, &agw, json!({"agentKey": "demoModePlain", "message": "doomed question", "chatId": chat_id}))
            .await;
    while let Some(event) = second.next().await {
        if event["type"] == "content.delta" {
            break;
        }
        assert_ne!(event["type"], "run.complete", "the run must still be streaming");
    }
    assert!(second.seen.iter().any(|e| e["type"] == "content.delta"), "saw content before the kill");
    agw.kill();
    // The client sees the connection end without a terminal event.
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        let mut after = Vec::new();
        loop {
            match tokio::time::timeout(Duration::from_secs(5), second.resp.chunk()).await.unwrap() {
                Ok(Some(chunk)) => after.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break after,
            }
        }
    })
    .await
    .unwrap();
    assert!(!String::from_utf8_lossy(&rest).contains("run.complete"), "no run.complete after SIGKILL");

    let history = scratch.chats().join(format!("{chat_id}.json"));
    let (lines, torn) = history_lines(&history, None);
    let first_lines: Vec<&Value> = lines.iter().filter(|l| l["runId"] == first_run.as_str()).collect();
    assert_eq!(first_lines[0]["_type"], "query");
    assert!(first_lines.iter().any(|l| l["_type"] == "step"), "the completed run is on disk");

    // Second life on the same directory.
    let agw = Agw::start_with(&scratch, 5, &off);
    let chats = get(&client, &agw, "/api/ap/chats").await;
    let listed = chats.as_array().unwrap().iter().find(|c| c["chatId"] == chat_id.as_str()).expect("chat listed");
    assert_eq!(listed["chatName"], "first question");
    assert_eq!(listed["firstAgentKey"], "demoModePlain");

    let data = get(&client, &agw, &format!("/api/ap/chat?chatId={chat_id}")).await;
    let events = data["events"].as_array().unwrap().clone();
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>(), "gapless replay");
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[..3], ["request.query", "chat.start", "run.start"], "{types:?}");
    assert_eq!(events[0]["message"], "first question");
    assert_eq!(events[2]["runId"], first_run.as_str());
    let first_snapshot = of_type(&events, "content.snapshot")[0];
    assert_eq!(first_snapshot["text"], first_text.as_str(), "the completed run replays in full");
    let live_content_id = of_type(&first, "content.delta")[0]["contentId"].clone();
    assert_eq!(first_snapshot["contentId"], live_content_id, "with the live id");
    assert!(
        of_type(&events, "run.complete").iter().any(|e| e["runId"] == first_run.as_str()),
        "run.complete for the first run: {types:?}"
    );

    // The chat continues.
    let third =
        query(&client, &agw, json!({"agentKey": "demoModePlain", "message": "after the crash", "chatId": chat_id}))
            .await
            .all()
            .await;
    let third_types: Vec<&str> = third.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(*third_types.last().unwrap(), "run.complete", "{third_types:?}");
    assert!(!third_types.contains(&"chat.start"), "the chat survived the restart");
    let third_text = content_text(&third);
    assert!(third_text.contains("after the crash"), "{third_text}");

    let data = get(&client, &agw, &format!("/api/ap/chat?chatId={chat_id}")).await;
    let events = data["events"].as_array().unwrap().clone();
    let runs: Vec<&str> = of_type(&events, "run.start").iter().map(|e| e["runId"].as_str().unwrap()).collect();
    assert_eq!(runs.first(), Some(&first_run.as_str()));
    assert_eq!(runs.last(), Some(&run_id(&third).as_str()), "the new run is replayable");
    let snapshot_texts: Vec<&str> =
        of_type(&events, "content.snapshot").iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(snapshot_texts.first(), Some(&first_text.as_str()));
    assert_eq!(snapshot_texts.last(), Some(&third_text.as_str()));
    assert_eq!(of_type(&events, "chat.start").len(), 1);
    let (lines, torn_now) = history_lines(&history, torn.as_deref());
    assert_eq!(torn_now, None, "the file ends with a complete line after the new run");
    assert!(lines.iter().any(|l| l["runId"] == run_id(&third).as_str() && l["_type"] == "step"));
    drop(agw);
}

/// Durable waiting: a run that waits for a frontend submit survives SIGKILL. After the restart
/// attach shows the wait again, the submit continues the run in the new process, and the chat
/// holds the whole run as if nothing had happened.
#[tokio::test]
async fn a_run_waiting_for_a_submit_survives_sigkill_and_completes_after_restart() {
    let scratch = Scratch::new("waiting");
    let client = reqwest::Client::new();
    let mut agw = Agw::start(&scratch, 0);
    let mut live =
        query(&client, &agw, json!({"agentKey": "demoConfirmDialog", "message": "Should we go hiking?"})).await;
    while let Some(event) = live.next().await {
        if event["type"] == "tool.end" {
            break;
        }
    }
    let seen = live.seen.clone();
    let run = run_id(&seen);
    let chat_id = seen[0]["chatId"].as_str().unwrap().to_owned();
    let tool_id = of_type(&seen, "tool.start")[0]["toolId"].as_str().unwrap().to_owned();
    let last_seq = seen.last().unwrap()["seq"].as_u64().unwrap();
    // The wait is recorded right after its tool.end is published.
    let mark = scratch.chats().join("_waiting").join(format!("{run}.wait"));
    for _ in 0..200 {
        if mark.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(mark.exists(), "the waiting run is marked");
    agw.kill();

    let agw = Agw::start(&scratch, 0);
    let resp =
        client.get(format!("{}/api/ap/attach?runId={run}&lastSeq={last_seq}", agw.base)).send().await.expect("attach");
    assert_eq!(resp.status(), 200, "the run is attachable after the restart");
    let mut attached = Events::new(resp);
    let ask = attached.next().await.expect("the wait is shown again");
    assert_eq!(ask["type"], "awaiting.ask", "{ask}");
    assert_eq!(ask["mode"], "form");
    assert_eq!(ask["awaitingId"], tool_id.as_str());
    assert_eq!(ask["runId"], run.as_str());
    assert_eq!(ask["toolName"], "confirm_dialog");
    assert_eq!(ask["viewportKey"], "confirm_dialog");
    assert_eq!(ask["seq"], last_seq + 1, "numbered after the last event of the first life");
    assert!(ask["timeout"].as_u64().unwrap() > 0);

    let params = json!({"selectedOption": "Yes", "selectedIndex": 1});
    let submit: Value = client
        .post(format!("{}/api/ap/submit", agw.base))
        .json(&json!({"runId": run, "toolId": tool_id, "params": params}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(submit["data"]["accepted"], true, "{submit}");
    let rest = attached.all().await;
    let types: Vec<&str> = rest.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.last(), Some(&"run.complete"), "{types:?}");
    let result = of_type(&rest, "tool.result")[0];
    assert_eq!(result["toolId"], tool_id.as_str());
    assert_eq!(result["result"], params.to_string());
    assert!(!content_text(&rest).is_empty(), "the next model turn ran in the new process");
    // Its marks (the wait's, and the run mark crash recovery keeps) go with its end.
    assert!(!mark.exists());
    assert!(
        ["a", "b"].iter().all(|c| !scratch.chats().join("_waiting").join(format!("{run}.{c}.run")).exists()),
        "the run mark is removed"
    );
    let seqs: Vec<u64> = rest.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (last_seq + 1..last_seq + 1 + rest.len() as u64).collect::<Vec<_>>(), "gapless");
    assert!(!types.contains(&"run.start"), "the same run goes on: {types:?}");

    // The chat: every line parses, the mark is gone, the replay holds the whole run once.
    let history = scratch.chats().join(format!("{chat_id}.json"));
    let (lines, torn) = history_lines(&history, None);
    assert_eq!(torn, None);
    assert_eq!(lines.iter().filter(|l| l["_type"] == "query").count(), 1, "one query line for the run");
    assert!(lines.iter().any(|l| l["_type"] == "awaiting"), "the wait is in the history");
    assert!(!mark.exists(), "the mark goes with the wait");
    let data = get(&client, &agw, &format!("/api/ap/chat?chatId={chat_id}")).await;
    let events = data["events"].as_array().unwrap().clone();
    let replay_types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(of_type(&events, "run.start").len(), 1, "{replay_types:?}");
    assert_eq!(of_type(&events, "tool.result")[0]["result"], params.to_string());
    assert_eq!(replay_types.last(), Some(&"run.complete"), "{replay_types:?}");

    // The chat goes on.
    let next = query(&client, &agw, json!({"agentKey": "demoModePlain", "message": "and now?", "chatId": chat_id}))
        .await
        .all()
        .await;
    assert_eq!(next.last().unwrap()["type"], "run.complete");
}
