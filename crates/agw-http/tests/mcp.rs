//! MCP servers' tools in real runs (issue 17, client side): the gateway over loopback with the
//! fixture provider; the MCP servers are agw-mcp's `mcp-test-server` (a real rmcp server over
//! stdio). The model calls `mcp__…` tools → `tool.result` in the stream → the next model request
//! carries the result → the history replays it.

mod common;

use std::path::PathBuf;
use std::time::Duration;

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
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("agw-http-mcp-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let command = test_server();
    for (name, startup) in servers {
        let file = json!({"transport": "stdio", "command": command, "startup": startup});
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
    while gw.state.tools.load().get(name).is_none() {
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
    assert!(gw.state.tools.load().get("mcp__later__echo").is_none(), "lazy: not started before use");
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
    assert!(gw.state.tools.load().get("mcp__first__echo").is_some(), "unchanged servers keep their tools");
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
    assert!(gw.state.tools.load().get("mcp__second__echo").is_some(), "the last good version keeps serving");
    std::fs::remove_file(dir.join("second.json")).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while gw.state.tools.load().get("mcp__second__echo").is_some() {
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
