//! Secrets never reach the logs, even at debug level with the LLM interaction log on.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use agw_testkit::{FixtureServer, Transcript};

const API_KEY: &str = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c";
const BEARER: &str = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl";

#[tokio::test]
async fn api_keys_and_bearer_tokens_are_masked_in_debug_logs() {
    let fixture =
        FixtureServer::with_default(Transcript::openai_text(&["I will not ", "repeat secrets."])).await.unwrap();
    let dir = std::env::temp_dir().join(format!("agw-secrets-test-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("agents")).unwrap();
    std::fs::write(
        dir.join("agents/leaky.json"),
        r#"{"key":"leaky","mode":"ONESHOT","modelConfig":{"providerKey":"real"},"plain":{"systemPrompt":"Echo."}}"#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agw"))
        .args(["serve", "--port", "0"])
        .env("AGW_LOG", "debug")
        .env("AGENT_EXTERNAL_DIR", dir.join("agents"))
        .env("MEMORY_CHAT_DIR", dir.join("chats"))
        .env("AGENT_PROVIDERS_REAL_BASE_URL", fixture.base_url())
        .env("AGENT_PROVIDERS_REAL_API_KEY", API_KEY)
        .env("AGENT_PROVIDERS_REAL_MODEL", "gpt-test")
        .env_remove("SERVER_ADDRESS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let base = String::from_utf8(line).unwrap().trim().strip_prefix("agw listening on ").unwrap().to_string();

    let body = serde_json::json!({
        "agentKey": "leaky",
        "message": format!("Use this header: Authorization: Bearer {BEARER} and my apiKey {API_KEY}"),
        "params": {"apiKey": API_KEY, "password": "hunter2-correct-horse"}
    });
    let text = reqwest::Client::new()
        .post(format!("{base}/api/ap/query"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(text.contains("run.complete"), "{text}");
    // The provider really received the secret-bearing request (it is the user's data) …
    let upstream = fixture.request(0).unwrap();
    assert_eq!(upstream.header("authorization"), Some(format!("Bearer {API_KEY}").as_str()));

    tokio::time::sleep(Duration::from_millis(200)).await;
    let _ = child.kill();
    let mut logs = String::new();
    child.stderr.take().unwrap().read_to_string(&mut logs).unwrap();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);

    // … but the logs only ever show it masked.
    assert!(logs.contains("llm request") && logs.contains("llm delta"), "the interaction log is on at debug:\n{logs}");
    assert!(logs.contains("***"), "secrets are masked, not dropped");
    for secret in [API_KEY, BEARER, "hunter2-correct-horse"] {
        assert!(!logs.contains(secret), "secret {secret} appeared in the logs");
    }
}
