//! MCP servers' tools in real runs (issue 17, client side): the gateway over loopback with the
//! fixture provider; the MCP servers are agw-mcp's `mcp-test-server` (a real rmcp server over
//! stdio). The model calls `mcp__…` tools → `tool.result` in the stream → the next model request
//! carries the result → the history replays it.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use agw_mcp::ServerState;
use agw_testkit::Transcript;
use common::{Gateway, assert_chat_replayable};
use serde_json::{Value, json};

/// The test server binary (built by `cargo test --workspace`; built here when missing, e.g.
/// under `cargo test -p agw-http`).
fn test_server() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe.parent().and_then(|deps| deps.parent()).unwrap().join("mcp-test-server");
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args(["build", "-p", "agw-mcp", "--bin", "mcp-test-server"])
            .status()
            .unwrap();
        assert!(status.success(), "building mcp-test-server");
    }
    path
}

fn mcp_dir(servers: &[(&str, &str)]) -> PathBuf {
    let servers: Vec<(&str, &str, &[&str])> =
        servers.iter().map(|(name, startup)| (*name, *startup, &[][..])).collect();
    mcp_dir_with(&servers)
}

/// Server files of the test server started with `args` (its hostile modes).
fn mcp_dir_with(servers: &[(&str, &str, &[&str])]) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("agw-http-mcp-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let command = test_server();
    for (name, startup, args) in servers {
        let file = json!({"transport": "stdio", "command": command, "startup": startup, "args": args});
        std::fs::write(dir.join(format!("{name}.json")), file.to_string()).unwrap();
    }
    dir
}

fn agent(key: &str, servers: Value) -> (String, String) {
    let text = json!({
        "key": key, "mode": "REACT",
        "modelConfig": {"providerKey": "fixture", "model": "m"},
        "toolConfig": {"mcpServers": servers},
        "react": {"systemPrompt": "You use tools.", "maxSteps": 4}
    });
    (format!("{key}.json"), text.to_string())
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"].as_array().map_or_else(Vec::new, |tools| {
        tools.iter().map(|t| t["function"]["name"].as_str().unwrap_or_default().to_owned()).collect()
    })
}

/// Waits until the gateway's tool registry lists `name` (boot servers start in the background).
async fn wait_for_tool(gw: &Gateway, name: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while gw.state.catalogs().tools.load().get(name).is_none() {
        assert!(std::time::Instant::now() < deadline, "{name} never appeared in the tool registry");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_model_calls_an_mcp_tool_and_sees_its_result() {
    let dir = mcp_dir(&[("tools", "boot"), ("later", "lazy")]);
    let dir_text = dir.to_string_lossy().into_owned();
    let agents = [
        agent("echoer", json!(["tools"])),
        agent("narrow", json!([{"server": "tools", "tools": ["fail"]}])),
        agent("lazy", json!(["later"])),
    ];
    let gw = Gateway::start(&agents, &[("AGENT_MCP_EXTERNAL_DIR", &dir_text)]).await;
    wait_for_tool(&gw, "mcp__tools__echo").await;

    gw.fixture.push(Transcript::openai_tool_call("call_e", "mcp__tools__echo", &[r#"{"text":"#, r#""hello mcp"}"#]));
    gw.fixture.push(Transcript::openai_text(&["It said hello."]));
    let stream = gw.run(&json!({"agentKey": "echoer", "message": "echo something"})).await;
    let result = stream.of_type("tool.result");
    assert_eq!(result.len(), 1, "{:?}", stream.events());
    assert_eq!(result[0]["result"], "hello mcp");
    assert_eq!(stream.last()["type"], "run.complete");

    let requests = gw.fixture.requests();
    let offered = tool_names(&requests[0].body);
    for name in ["mcp__tools__echo", "mcp__tools__add", "mcp__tools__fail", "mcp__tools__weird_name_with_spaces"] {
        assert!(offered.iter().any(|n| n == name), "{name} offered: {offered:?}");
    }
    let echo = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__tools__echo")
        .unwrap();
    assert_eq!(echo["function"]["description"], "Echoes its text");
    assert_eq!(echo["function"]["parameters"]["properties"]["text"]["type"], "string");
    // The next model request carries the tool's result.
    let tool_message =
        requests[1].body["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").unwrap().clone();
    assert_eq!(tool_message["content"], "hello mcp");
    // The history replays it.
    let chat = stream.events()[0]["chatId"].as_str().unwrap().to_owned();
    let replay = assert_chat_replayable(&gw, &chat).await;
    assert!(replay.iter().any(|e| e["type"] == "tool.result" && e["result"] == "hello mcp"), "{replay:?}");

    // Narrowed to one tool; an MCP error result is a tool error the model reads, not a failed run.
    gw.fixture.forget_requests();
    gw.fixture.push(Transcript::openai_tool_call("call_f", "mcp__tools__fail", &["{}"]));
    gw.fixture.push(Transcript::openai_text(&["It failed."]));
    let stream = gw.run(&json!({"agentKey": "narrow", "message": "fail please"})).await;
    assert_eq!(tool_names(&gw.fixture.requests()[0].body), ["mcp__tools__fail"]);
    let result = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_owned();
    assert!(result.contains("the fail tool always fails"), "{result}");
    assert_eq!(stream.last()["type"], "run.complete");

    // A lazy server starts for the first run that needs it, which is offered its tools.
    assert!(gw.state.catalogs().tools.load().get("mcp__later__echo").is_none(), "lazy: not started before use");
    gw.fixture.forget_requests();
    gw.fixture.push(Transcript::openai_tool_call("call_l", "mcp__later__echo", &[r#"{"text":"late"}"#]));
    gw.fixture.push(Transcript::openai_text(&["Late."]));
    let stream = gw.run(&json!({"agentKey": "lazy", "message": "echo late"})).await;
    assert_eq!(stream.of_type("tool.result")[0]["result"], "late");
    assert!(tool_names(&gw.fixture.requests()[0].body).iter().all(|n| n.starts_with("mcp__later__")));

    // The agents API shows the MCP tools like any other.
    let (status, detail) = gw.get_json("/api/ap/agent?agentKey=narrow").await;
    assert_eq!(status, 200);
    assert_eq!(detail["data"]["meta"]["tools"], json!(["mcp__tools__fail"]), "{detail}");
    let (_, list) = gw.get_json("/api/ap/agents").await;
    let echoer = list["data"].as_array().unwrap().iter().find(|a| a["key"] == "echoer").unwrap();
    assert!(echoer["meta"]["tools"].as_array().unwrap().iter().any(|t| t == "mcp__tools__echo"), "{echoer}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn server_files_are_hot_reloaded_and_a_broken_edit_keeps_the_last_good_version() {
    use agw_http::reload::{Catalog, Reloader, WatchedDir};
    let dir = mcp_dir(&[("first", "boot")]);
    let dir_text = dir.to_string_lossy().into_owned();
    let gw =
        Gateway::start(&[agent("both", json!(["first", "second"]))], &[("AGENT_MCP_EXTERNAL_DIR", &dir_text)]).await;
    let _reload = Reloader::new(
        gw.state.clone(),
        vec![WatchedDir { catalog: Catalog::Mcp, dir: dir.clone(), rescan_every: Duration::from_millis(100) }],
    )
    .start();
    wait_for_tool(&gw, "mcp__first__echo").await;

    // A new server file: its tools join, the agent that names it is offered them.
    let second = json!({"transport": "stdio", "command": test_server(), "startup": "boot"});
    std::fs::write(dir.join("second.json"), second.to_string()).unwrap();
    wait_for_tool(&gw, "mcp__second__echo").await;
    assert!(gw.state.catalogs().tools.load().get("mcp__first__echo").is_some(), "unchanged servers keep their tools");
    gw.fixture.push(Transcript::openai_text(&["Both."]));
    gw.run(&json!({"agentKey": "both", "message": "hi"})).await;
    let offered = tool_names(&gw.fixture.requests()[0].body);
    assert!(
        offered.contains(&"mcp__first__echo".to_owned()) && offered.contains(&"mcp__second__echo".to_owned()),
        "{offered:?}"
    );

    // A broken edit keeps the last good declaration; deleting the file removes the server's tools.
    std::fs::write(dir.join("second.json"), "{ broken").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(gw.state.catalogs().tools.load().get("mcp__second__echo").is_some(), "the last good version keeps serving");
    std::fs::remove_file(dir.join("second.json")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while gw.state.catalogs().tools.load().get("mcp__second__echo").is_some() {
        assert!(std::time::Instant::now() < deadline, "the removed server's tools are still offered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn approval_rules_match_mcp_tool_names() {
    let dir = mcp_dir(&[("tools", "boot")]);
    let dir_text = dir.to_string_lossy().into_owned();
    let guarded = json!({
        "key": "guarded", "mode": "REACT",
        "modelConfig": {"providerKey": "fixture", "model": "m"},
        "toolConfig": {"mcpServers": ["tools"], "approvals": {"mcp__tools__*": "deny"}},
        "react": {"systemPrompt": "You use tools.", "maxSteps": 4}
    });
    let gw =
        Gateway::start(&[("guarded.json".into(), guarded.to_string())], &[("AGENT_MCP_EXTERNAL_DIR", &dir_text)]).await;
    wait_for_tool(&gw, "mcp__tools__echo").await;
    gw.fixture.push(Transcript::openai_tool_call("call_d", "mcp__tools__echo", &[r#"{"text":"secret"}"#]));
    gw.fixture.push(Transcript::openai_text(&["Refused."]));
    let stream = gw.run(&json!({"agentKey": "guarded", "message": "echo"})).await;
    let result = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_owned();
    assert!(
        !result.contains("secret") && result.contains("denied"),
        "the denied call never reached the server: {result}"
    );
    assert_eq!(stream.last()["type"], "run.complete");
    let _ = std::fs::remove_dir_all(&dir);
}

// ----- a hostile MCP server (issue 32) --------------------------------------------------------

/// What the MCP tools of a model request weigh: name, description and parameters, as agw counts
/// them against `agw.mcp.max-request-tool-bytes`.
fn mcp_definition_bytes(request: &Value, prefix: &str) -> (usize, usize) {
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    let mcp: Vec<&Value> =
        tools.iter().filter(|t| t["function"]["name"].as_str().unwrap_or_default().starts_with(prefix)).collect();
    let bytes = mcp
        .iter()
        .map(|t| {
            let function = &t["function"];
            function["name"].as_str().unwrap_or_default().len()
                + function["description"].as_str().unwrap_or_default().len()
                + function["parameters"].to_string().len()
        })
        .sum();
    (mcp.len(), bytes)
}

/// This process's resident memory.
fn rss_kib() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap_or_default();
    line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
}

#[tokio::test]
async fn ten_thousand_tools_of_twelve_kib_are_cut_to_the_caps() {
    // Every tool fits agw.mcp.max-tool-bytes (16 KiB); 10,000 of them would be a 120 MB request.
    let args: &[&str] = &["--tools", "10000", "--description-bytes", "12000", "--page-size", "50"];
    let dir = mcp_dir_with(&[("many", "boot", args)]);
    let dir_text = dir.to_string_lossy().into_owned();
    let rss_before = rss_kib();
    let gw = Gateway::start(&[agent("greedy", json!(["many"]))], &[("AGENT_MCP_EXTERNAL_DIR", &dir_text)]).await;
    wait_for_tool(&gw, "mcp__many__echo").await;
    let registered =
        gw.state.catalogs().tools.load().list().iter().filter(|d| d.name.starts_with("mcp__many__")).count();
    assert_eq!(registered, 256, "agw.mcp.max-tools-per-server");

    gw.fixture.push(Transcript::openai_text(&["So many tools."]));
    let stream = gw.run(&json!({"agentKey": "greedy", "message": "hi"})).await;
    assert_eq!(stream.last()["type"], "run.complete");
    let request = &gw.fixture.requests()[0].body;
    let (offered, bytes) = mcp_definition_bytes(request, "mcp__many__");
    // 256 tools of ~12 KiB are ~3 MiB: the request takes what fits in 2 MiB.
    assert!(bytes <= 2 * 1024 * 1024, "{bytes} bytes of MCP tool definitions in one request");
    assert!((150..256).contains(&offered), "{offered} tools offered");
    let whole = request["tools"].to_string().len();
    assert!(whole < 2 * 1024 * 1024 + 64 * 1024, "the request's tools are {whole} bytes");
    // What the process grew by: a gateway (+17 MiB with a well-behaved server), the 256 tools in
    // its catalogs, one run, the fixture's copy of the request; +49 MiB measured alone. Other
    // tests of this file run alongside: a loose bound (10,000 such tools are 120 MB).
    let grown_mib = rss_kib().saturating_sub(rss_before) / 1024;
    eprintln!("10,000 MCP tools of 12 KiB: {offered} offered, {bytes} bytes in the request, RSS +{grown_mib} MiB");
    assert!(grown_mib < 80, "the process grew by {grown_mib} MiB");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_colliding_tool_name_cannot_dodge_a_deny_rule() {
    // The server lists `Echo` and `echo`: both are mcp__tools__echo once sanitised. `Echo` sorts
    // first and keeps the name; `echo` used to become mcp__tools__echo_2, out of the rule's reach.
    let dir = mcp_dir_with(&[("tools", "boot", &["--colliding"])]);
    let dir_text = dir.to_string_lossy().into_owned();
    let guarded = json!({
        "key": "guarded", "mode": "REACT",
        "modelConfig": {"providerKey": "fixture", "model": "m"},
        "toolConfig": {"mcpServers": ["tools"], "approvals": {"mcp__tools__echo": "deny"}},
        "react": {"systemPrompt": "You use tools.", "maxSteps": 4}
    });
    let gw =
        Gateway::start(&[("guarded.json".into(), guarded.to_string())], &[("AGENT_MCP_EXTERNAL_DIR", &dir_text)]).await;
    wait_for_tool(&gw, "mcp__tools__echo").await;

    gw.fixture.push(
        Transcript::new()
            .tool_call_start(0, "call_renamed", "mcp__tools__echo_2")
            .tool_args(0, r#"{"text":"secret"}"#)
            .tool_call_start(1, "call_named", "mcp__tools__echo")
            .tool_args(1, r#"{"text":"secret"}"#)
            .finish("tool_calls")
            .done(),
    );
    gw.fixture.push(Transcript::openai_text(&["Refused."]));
    let stream = gw.run(&json!({"agentKey": "guarded", "message": "echo"})).await;
    assert_eq!(stream.last()["type"], "run.complete");
    let offered = tool_names(&gw.fixture.requests()[0].body);
    assert!(
        offered.contains(&"mcp__tools__echo".to_owned()) && !offered.iter().any(|n| n.ends_with("_2")),
        "{offered:?}"
    );
    let results = stream.of_type("tool.result");
    assert_eq!(results.len(), 2, "{:?}", stream.events());
    for result in results {
        let text = result["result"].to_string();
        assert!(!text.contains("secret") && !text.contains("twin"), "the call never reached the server: {text}");
    }
    assert!(
        gw.state.catalogs().tools.load().get("mcp__tools__echo_2").is_none(),
        "the later tool is skipped, not renamed"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_run_started_while_its_server_connects_waits_for_its_tools() {
    // The server answers `initialize` after 2 s; the run starts right away.
    let dir = mcp_dir_with(&[("slow", "boot", &["--initialize-delay-ms", "2000"])]);
    let dir_text = dir.to_string_lossy().into_owned();
    let gw = Gateway::start(&[agent("patient", json!(["slow"]))], &[("AGENT_MCP_EXTERNAL_DIR", &dir_text)]).await;
    let hub = gw.state.mcp_hub().expect("MCP configured");
    let state = hub.status("slow").expect("declared").state;
    assert!(matches!(state, ServerState::NotStarted | ServerState::Starting), "still connecting: {state:?}");
    assert!(gw.state.catalogs().tools.load().get("mcp__slow__echo").is_none());

    gw.fixture.push(Transcript::openai_tool_call("call_w", "mcp__slow__echo", &[r#"{"text":"waited"}"#]));
    gw.fixture.push(Transcript::openai_text(&["Done."]));
    let stream = gw.run(&json!({"agentKey": "patient", "message": "echo"})).await;
    assert!(tool_names(&gw.fixture.requests()[0].body).contains(&"mcp__slow__echo".to_owned()));
    assert_eq!(stream.of_type("tool.result")[0]["result"], "waited", "{:?}", stream.events());
    let _ = std::fs::remove_dir_all(&dir);
}
