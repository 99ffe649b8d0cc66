//! What one run may make agw hold, measured on the real binary: a client that reads one byte every
//! 100 ms while the provider streams 10,000 chunks of 8 KiB (an 80 MiB answer). The run does not
//! wait for the client (runs belong to the server), so everything it reads at the provider's pace
//! must be bounded by the run's own caps — the event buffer for attach and the output cap of a
//! model response — not by the answer's size.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use agw_testkit::{FixtureServer, StreamOutcome, Transcript, slow_client};
use common::Agw;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

const MIB: u64 = 1024 * 1024;

/// A ONESHOT agent on the fixture provider, no reasoning.
const AGENT: &str = r#"{"key":"a","mode":"ONESHOT","modelConfig":{"providerKey":"fixture","model":"m","reasoning":{"enabled":false}},
  "plain":{"systemPrompt":"You are a test agent."},"budget":{"runTimeoutMs":120000,"model":{"timeoutMs":60000}}}"#;

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `VmRSS` / `VmHWM` (peak) of a process, in bytes.
fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Resets the peak RSS of `pid` to its current RSS (`clear_refs` 5, Linux 4.0+).
fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

/// The run's terminal event: an attach from the oldest held event reads to the run's end.
async fn finished(client: &reqwest::Client, base: &str, run_id: &str) -> Value {
    let resp = client.get(format!("{base}/api/ap/attach?runId={run_id}")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let text = tokio::time::timeout(Duration::from_secs(120), resp.text()).await.expect("the run ends").unwrap();
    let last = text.lines().rev().find_map(|l| l.strip_prefix("data:")).expect("events");
    serde_json::from_str(last).unwrap()
}

#[tokio::test]
async fn a_slow_reader_of_an_80_mib_answer_costs_at_most_32_mib() {
    const CHUNKS: usize = 10_000;
    const PIECE_BYTES: usize = 8 * 1024;
    let dir = std::env::temp_dir().join(format!("agw-slow-reader-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("agents")).unwrap();
    std::fs::write(dir.join("agents/a.json"), AGENT).unwrap();
    let scratch = Scratch(dir.clone());

    let fixture = FixtureServer::start().await.expect("fixture");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agw"));
    for var in
        ["AGW_CONFIG", "SERVER_ADDRESS", "SERVER_PORT", "AGENT_AUTH_ENABLED", "AGW_REDIS_URL", "AGW_DATABASE_URL"]
    {
        cmd.env_remove(var);
    }
    cmd.args(["serve", "--port", "0"])
        .env("AGENT_EXTERNAL_DIR", dir.join("agents"))
        .env("AGW_RESOURCES_SYNC_BUNDLED", "false")
        .env("AGENT_DATA_EXTERNAL_DIR", dir.join("data"))
        .env("MEMORY_CHAT_DIR", dir.join("chats"))
        .env("AGENT_CHAT_EVENT_CALLBACK_ENABLED", "false")
        .env("AGENT_PROVIDERS_FIXTURE_BASE_URL", fixture.base_url())
        .env("AGENT_PROVIDERS_FIXTURE_API_KEY", "fixture-key")
        .env("AGENT_PROVIDERS_FIXTURE_MODEL", "m")
        .stderr(Stdio::null());
    let agw = Agw::spawn(&mut cmd);
    let pid = agw.child.id();
    let client = reqwest::Client::new();

    // Warm-up: the same path once with a short answer, so the baseline has the code paged in.
    fixture.set_default(Transcript::openai_text(&["warm", "ing up"]));
    let warm = client.post(format!("{}/api/ap/query", agw.base)).json(&json!({"agentKey": "a", "message": "hi"}));
    let warm = warm.send().await.unwrap().text().await.unwrap();
    assert!(warm.contains("run.complete"), "{warm}");

    let piece = "x".repeat(PIECE_BYTES);
    let pieces: Vec<&str> = vec![piece.as_str(); CHUNKS];
    fixture.set_default(Transcript::openai_text(&pieces));

    let body = json!({"agentKey": "a", "message": "a very long answer please"}).to_string();
    let baseline = proc_status(pid, "VmRSS:");
    assert!(reset_peak(pid), "clear_refs is needed to measure the peak");
    let mut conn = slow_client(&agw.base, "POST", "/api/ap/query", Some(&body)).await;

    let upstream = tokio::time::timeout(Duration::from_secs(10), fixture.wait_for_requests(2)).await.unwrap();
    let upstream = upstream[1].clone();
    // One byte every 100 ms until the run is over.
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let reader = tokio::spawn(async move {
        let mut received = Vec::new();
        let mut byte = [0u8; 1];
        loop {
            match conn.read(&mut byte).await {
                Ok(0) | Err(_) => break,
                Ok(_) => received.push(byte[0]),
            }
            tokio::select! {
                _ = &mut stopped => break,
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
        (conn, received)
    });
    let outcome = tokio::time::timeout(Duration::from_secs(60), upstream.wait_outcome()).await.expect("provider read");
    assert_ne!(outcome, StreamOutcome::InProgress);

    // The run ends whatever the client does.
    let run_id = upstream.headers.get("x-agw-run-id").expect("run id header").to_str().unwrap().to_owned();
    let terminal = finished(&client, &agw.base, &run_id).await;
    let peak = proc_status(pid, "VmHWM:");
    let growth = peak.saturating_sub(baseline);
    let _ = stop.send(());
    let (_conn, received) = reader.await.unwrap();
    eprintln!(
        "slow reader: baseline RSS {} KiB, peak {} KiB (+{} KiB); the client read {} bytes; the run ended with {}",
        baseline / 1024,
        peak / 1024,
        growth / 1024,
        received.len(),
        terminal
    );
    let status_line = b"HTTP/1.1 200";
    let n = received.len().min(status_line.len());
    assert!(n > 0 && received[..n] == status_line[..n], "{:?}", String::from_utf8_lossy(&received));
    assert!(received.len() < 4096, "the client stayed slow while the run went on: read {} bytes", received.len());
    assert!(growth <= 32 * MIB, "one run grew agw by {} KiB (limit 32 MiB)", growth / 1024);
    // An 80 MiB answer is past the output cap (4 MiB of text by default): the run ends there.
    assert_eq!(terminal["type"], "run.error", "{terminal}");
    assert_eq!(terminal["error"]["code"], "provider_error", "{terminal}");
    assert!(terminal["error"]["message"].as_str().unwrap().contains("output text"), "{terminal}");
    drop(scratch);
}
