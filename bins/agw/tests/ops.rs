//! Operations over the real binary: graceful shutdown, `agw check`, `/metrics`.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agw_protocol::sse::SseDecoder;
use serde_json::Value;

struct Agw {
    child: Child,
    base: String,
    dir: std::path::PathBuf,
}

impl Drop for Agw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agw-ops-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn start(tag: &str, env: &[(&str, &str)]) -> Agw {
    start_logging(tag, env, Stdio::null())
}

fn start_logging(tag: &str, env: &[(&str, &str)], stderr: Stdio) -> Agw {
    let dir = scratch(tag);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_agw"));
    cmd.args(["serve", "--port", "0"])
        .env("MEMORY_CHAT_DIR", dir.join("chats"))
        .env("AGENT_CHAT_EVENT_CALLBACK_ENABLED", "false")
        .env_remove("AGENT_EXTERNAL_DIR")
        .env_remove("SERVER_ADDRESS")
        .stdout(Stdio::piped())
        .stderr(stderr);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while stdout.read(&mut byte).unwrap() == 1 && byte[0] != b'\n' {
        line.push(byte[0]);
    }
    let base = String::from_utf8(line).unwrap().trim().strip_prefix("agw listening on ").unwrap().to_string();
    Agw { child, base, dir }
}

fn sigterm(child: &Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

/// Reads events until one satisfies `stop` (inclusive) or the stream ends.
async fn read_until(
    resp: &mut reqwest::Response,
    decoder: &mut SseDecoder,
    stop: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let mut out = Vec::new();
    let mut frames = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), resp.chunk()).await.unwrap().unwrap() {
        decoder.feed(&chunk, &mut frames);
        for f in frames.drain(..).filter(|f| !f.is_heartbeat()) {
            let e: Value = serde_json::from_str(&f.data).unwrap();
            let done = stop(&e);
            out.push(e);
            if done {
                return out;
            }
        }
    }
    out
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "agw did not exit within {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One REACT run of the demo agent (a tool call, then the answer), read to its end.
async fn weather_run(client: &reqwest::Client, agw: &Agw) {
    let body = client
        .post(format!("{}/api/ap/query", agw.base))
        .json(&serde_json::json!({"agentKey": "demoModeReact", "message": "weather in Tokyo?"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("run.complete"));
}

#[tokio::test]
async fn sigterm_lets_a_streaming_run_finish_and_keeps_its_history() {
    let mut agw = start("drain", &[("AGW_DEMO_CHUNK_DELAY_MS", "25"), ("SERVER_SHUTDOWN_GRACE_MS", "10000")]);
    let mut resp = reqwest::Client::new()
        .post(format!("{}/api/ap/query", agw.base))
        .json(&serde_json::json!({"agentKey": "demoModeThinking", "message": "Explain carbon in detail"}))
        .send()
        .await
        .unwrap();
    let mut decoder = SseDecoder::new();
    let first = read_until(&mut resp, &mut decoder, |e| e["type"] == "content.delta").await;
    sigterm(&agw.child);
    let rest = read_until(&mut resp, &mut decoder, |e| e["type"] == "run.complete" || e["type"] == "run.error").await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete", "the in-flight run finished within the grace period");
    let status = wait_exit(&mut agw.child, Duration::from_secs(10));
    assert!(status.success(), "clean exit: {status:?}");

    // The whole answer is on disk.
    let chat = first[0]["chatId"].as_str().unwrap();
    let answer: String = first
        .iter()
        .chain(&rest)
        .filter(|e| e["type"] == "content.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    let history = std::fs::read_to_string(agw.dir.join("chats").join(format!("{chat}.json"))).unwrap();
    assert!(history.ends_with('\n'));
    let stored: String = history
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("every line is valid JSON"))
        .filter(|l| l["_type"] == "step")
        .flat_map(|l| l["messages"].as_array().unwrap().clone())
        .filter_map(|m| m["content"][0]["text"].as_str().map(str::to_string).filter(|_| m["role"] == "assistant"))
        .collect();
    assert_eq!(stored, answer);
}

/// With crash recovery off; with it on, such a run is left to the next start
/// (`tests/recovery.rs`).
#[tokio::test]
async fn after_the_grace_period_remaining_runs_end_with_run_error() {
    let mut agw = start(
        "grace",
        &[("AGW_DEMO_CHUNK_DELAY_MS", "200"), ("SERVER_SHUTDOWN_GRACE_MS", "300"), ("AGW_RECOVERY_ENABLED", "false")],
    );
    let mut resp = reqwest::Client::new()
        .post(format!("{}/api/ap/query", agw.base))
        .json(&serde_json::json!({"agentKey": "demoModePlain", "message": "a long answer please"}))
        .send()
        .await
        .unwrap();
    let mut decoder = SseDecoder::new();
    read_until(&mut resp, &mut decoder, |e| e["type"] == "content.delta").await;
    let signalled = Instant::now();
    sigterm(&agw.child);
    let rest = read_until(&mut resp, &mut decoder, |e| e["type"] == "run.complete" || e["type"] == "run.error").await;
    let last = rest.last().unwrap();
    assert_eq!(last["type"], "run.error");
    assert_eq!(last["error"]["code"], "internal");
    assert!(last["error"]["message"].as_str().unwrap().contains("shutting down"));
    assert!(wait_exit(&mut agw.child, Duration::from_secs(10)).success());
    assert!(signalled.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn metrics_count_runs_and_events() {
    let prices = ("AGENT_PROVIDERS_DEMO_PRICES", r#"{"*":{"input":1,"output":2}}"#);
    let agw = start("metrics", &[("AGW_DEMO_CHUNK_DELAY_MS", "0"), prices]);
    let client = reqwest::Client::new();
    weather_run(&client, &agw).await;
    // The run task ends (and stops counting as active) a moment after its terminal event reached
    // the client: the stream belongs to the run's observers, not to the task.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let text = loop {
        let resp = client.get(format!("{}/metrics", agw.base)).send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(resp.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
        let text = resp.text().await.unwrap();
        if text.contains("agw_runs_active 0") || std::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    for needle in [
        "agw_runs_total{outcome=\"completed\",code=\"\"} 1",
        "agw_runs_active 0",
        "agw_events_streamed_total",
        "agw_tool_duration_seconds_count{tool=\"mock_city_weather\"} 1",
        "agw_model_call_duration_seconds_count{provider=\"demo\",model=\"agw-demo\",outcome=\"ok\"} 2",
        "agw_tokens_total{agent=\"demoModeReact\",provider=\"demo\",model=\"agw-demo\",kind=\"input\"}",
        "agw_tokens_total{agent=\"demoModeReact\",provider=\"demo\",model=\"agw-demo\",kind=\"output\"}",
        "agw_cost_micros_total{agent=\"demoModeReact\",provider=\"demo\",model=\"agw-demo\",currency=\"USD\"}",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
}

// Multi-threaded: the receiver must answer while this thread waits for agw to exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_go_to_the_otlp_grpc_endpoint_and_stay_out_of_the_logs() {
    let receiver = agw_testkit::otlp::OtlpReceiver::start().await.unwrap();
    let endpoint = receiver.endpoint();
    let log_path = std::env::temp_dir().join(format!("agw-ops-otel-{}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).unwrap();
    let env = [
        ("AGW_DEMO_CHUNK_DELAY_MS", "0"),
        ("AGW_LOG", "debug,hyper=info,h2=info,tonic=info,tower=info,reqwest=info"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        // Nothing leaves on a timer: the spans arrive only through the flush at shutdown.
        ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
    ];
    let mut agw = start_logging("otel", &env, Stdio::from(log));
    weather_run(&reqwest::Client::new(), &agw).await;
    sigterm(&agw.child);
    assert!(wait_exit(&mut agw.child, Duration::from_secs(10)).success());

    let spans = receiver.spans();
    let root = spans.iter().find(|s| s.name == "invoke_agent demoModeReact").unwrap_or_else(|| {
        panic!(
            "the run's span was flushed at exit: {:?}\n{}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>(),
            std::fs::read_to_string(&log_path).unwrap()
        )
    });
    let steps: Vec<&str> = spans.iter().filter(|s| s.parent_span_id == root.span_id).map(|s| s.name.as_str()).collect();
    assert!(steps.contains(&"chat agw-demo") && steps.contains(&"execute_tool mock_city_weather"), "{steps:?}");
    assert_eq!(root.service_name, "agw");
    assert!(receiver.transports().iter().all(|t| *t == "grpc"), "{:?}", receiver.transports());

    let log = std::fs::read_to_string(&log_path).unwrap();
    let _ = std::fs::remove_file(&log_path);
    assert!(log.contains("OpenTelemetry: exporting traces over OTLP"), "{log}");
    assert!(!log.contains("gen_ai."), "run spans are not log context:\n{log}");
}

/// A collector that accepts connections and never answers: runs are not slowed, the failed
/// exports are log lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_collector_never_blocks_a_run() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let held = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let holder = held.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            holder.lock().unwrap().push(stream);
        }
    });
    let log_path = std::env::temp_dir().join(format!("agw-ops-stalled-{}.log", std::process::id()));
    let env = [
        ("AGW_DEMO_CHUNK_DELAY_MS", "0"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "300"),
        ("OTEL_BSP_SCHEDULE_DELAY", "10"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "16"),
    ];
    let mut agw = start_logging("stalled", &env, Stdio::from(std::fs::File::create(&log_path).unwrap()));
    let client = reqwest::Client::new();
    let started = Instant::now();
    for _ in 0..10 {
        weather_run(&client, &agw).await;
    }
    // Each run takes milliseconds; an export waits 300 ms for an answer that never comes.
    assert!(started.elapsed() < Duration::from_secs(3), "10 runs took {:?}", started.elapsed());
    let deadline = Instant::now() + Duration::from_secs(10);
    let log = loop {
        let log = std::fs::read_to_string(&log_path).unwrap();
        if log.contains("Export") || Instant::now() > deadline {
            break log;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(log.contains("WARN") && log.contains("Export"), "the failed export is logged:\n{log}");
    assert!(!held.lock().unwrap().is_empty(), "agw did try the collector");
    sigterm(&agw.child);
    assert!(wait_exit(&mut agw.child, Duration::from_secs(15)).success());
    let _ = std::fs::remove_file(&log_path);
}

#[test]
fn check_reports_every_problem_with_its_file_and_fails_on_errors() {
    let dir = scratch("check");
    let agents = dir.join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(agents.join("broken.json"), "{ not json").unwrap();
    std::fs::write(agents.join("legacy.json"), r#"{"mode":"ONESHOT","providerKey":"x","plain":{"systemPrompt":"p"}}"#)
        .unwrap();
    std::fs::write(
        agents.join("lost.json"),
        r#"{"key":"lost","mode":"ONESHOT","modelConfig":{"providerKey":"nowhere"},"toolConfig":{"backends":["no_such_tool"],"mcpServers":["ghost"]},"plain":{"systemPrompt":"p"}}"#,
    )
    .unwrap();
    let mcp = dir.join("mcp");
    std::fs::create_dir_all(&mcp).unwrap();
    std::fs::write(
        mcp.join("leaky.json"),
        r#"{"transport":"http","url":"https://x.example/mcp","headers":{"Authorization":"Bearer x"}}"#,
    )
    .unwrap();
    std::fs::write(mcp.join("missing.json"), r#"{"transport":"stdio","command":"/nonexistent/mcp-server"}"#).unwrap();
    let run = |agents_dir: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_agw"))
            .arg("check")
            .env("AGENT_EXTERNAL_DIR", agents_dir)
            .env("AGENT_MCP_EXTERNAL_DIR", &mcp)
            .env("AGW_RESOURCES_SYNC_BUNDLED", "false")
            .env_remove("SERVER_ADDRESS")
            .output()
            .unwrap()
    };
    let out = run(&agents);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("broken.json") && text.contains("legacy.json"), "{text}");
    assert!(text.contains("\"providerKey\""), "the rejected field is named: {text}");
    assert!(text.contains("lost.json") && text.contains("nowhere"), "{text}");
    assert!(text.contains("warning:") && text.contains("no_such_tool"), "{text}");
    assert!(text.contains("leaky.json") && text.contains("bearerTokenEnv"), "MCP files are checked: {text}");
    assert!(text.contains("\"ghost\""), "undeclared MCP servers are named: {text}");
    assert!(
        text.contains("missing.json")
            && text.contains("could not be started")
            && text.contains("/nonexistent/mcp-server"),
        "a server that cannot start is reported with the reason: {text}"
    );
    assert!(std::fs::read_dir(&agents).unwrap().count() == 3, "check writes nothing");

    let clean = dir.join("clean");
    std::fs::create_dir_all(&clean).unwrap();
    std::fs::remove_file(mcp.join("leaky.json")).unwrap();
    std::fs::remove_file(mcp.join("missing.json")).unwrap();
    std::fs::write(
        clean.join("ok.json"),
        r#"{"key":"ok","mode":"ONESHOT","modelConfig":{"providerKey":"demo"},"plain":{"systemPrompt":"p"}}"#,
    )
    .unwrap();
    let out = run(&clean);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 error(s)"));
    let bad_config =
        Command::new(env!("CARGO_BIN_EXE_agw")).arg("check").env("SERVER_PORT", "eighty").output().unwrap();
    assert_eq!(bad_config.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad_config.stdout).contains("SERVER_PORT"));
    let _ = std::fs::remove_dir_all(dir);
}
