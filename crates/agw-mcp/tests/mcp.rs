//! agw-mcp against a real MCP server (the crate's `mcp-test-server`, built on rmcp), over stdio
//! and streamable HTTP.

mod support;

use std::sync::Arc;
use std::time::Duration;

use agw_mcp::{McpHub, McpServerConfig, ServerState, check, check_with_env};
use agw_tools::{Tool, ToolContext, ToolError, ToolOutput, execute_backend};
use serde_json::{Value, json};
use support::{TOOL_COUNT, env, eventually, http, http_server, is_connected, process_alive, stdio, wait_status};

fn ctx() -> ToolContext {
    ToolContext::new("run-1", "chat-1")
}

async fn started(configs: Vec<McpServerConfig>) -> Arc<McpHub> {
    let hub = McpHub::new(configs);
    hub.start().await;
    hub
}

fn tool(hub: &McpHub, name: &str) -> Arc<dyn Tool> {
    hub.tools().into_iter().find(|t| t.name() == name).unwrap_or_else(|| panic!("no tool {name}"))
}

async fn cancelled_count(hub: &McpHub, server: &str) -> String {
    match hub.call(server, "cancelled_count", json!({})).await {
        Ok(ToolOutput::Text(count)) => count,
        other => panic!("cancelled_count: {other:?}"),
    }
}

// ----- listing --------------------------------------------------------------------------------

async fn lists_every_page_with_names_schemas_and_descriptions(hub: &McpHub, server: &str) {
    let status = hub.status(server).unwrap();
    assert_eq!(status.state, ServerState::Connected);
    assert_eq!(status.tools, TOOL_COUNT, "all three pages of 4 were listed");
    let names = hub.tool_names_of(server);
    assert_eq!(names.len(), TOOL_COUNT);
    for expected in ["echo", "add", "slow", "fail", "image", "crash", "add_tool", "env", "weird_name_with_spaces"] {
        assert!(names.contains(&format!("mcp__{server}__{expected}")), "{expected} missing from {names:?}");
    }
    let echo = tool(hub, &format!("mcp__{server}__echo"));
    assert_eq!(echo.description(), "Echoes its text");
    assert_eq!(
        echo.parameters(),
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    );
    let weird = hub.mcp_tools().into_iter().find(|t| t.name() == format!("mcp__{server}__weird_name_with_spaces"));
    let weird = weird.expect("sanitised tool");
    assert_eq!(weird.mcp_name(), "weird.name/with spaces");
    assert_eq!(weird.server(), server);
    assert_eq!(hub.tools_of(server).len(), TOOL_COUNT);
    assert!(hub.tools_of("other").is_empty());
    assert!(hub.name_collisions().is_empty());
}

#[tokio::test]
async fn stdio_lists_tools() {
    let hub = started(vec![stdio("local", json!({}))]).await;
    lists_every_page_with_names_schemas_and_descriptions(&hub, "local").await;
    hub.shutdown().await;
}

#[tokio::test]
async fn http_lists_tools() {
    let server = http_server(None).await;
    let hub = started(vec![http("remote", &server.url, json!({}))]).await;
    lists_every_page_with_names_schemas_and_descriptions(&hub, "remote").await;
    hub.shutdown().await;
}

#[tokio::test]
async fn servers_whose_names_sanitise_alike_keep_one_of_each_name() {
    let dot = stdio("a.b", json!({"env": {"WHO": "dot"}}));
    let underscore = stdio("a_b", json!({"env": {"WHO": "underscore"}}));
    let hub = started(vec![underscore, dot]).await;
    // "a.b" sorts first and keeps the names; every tool of "a_b" wants one of them and is
    // skipped (never renamed), each reported.
    assert_eq!(hub.tool_names_of("a.b").len(), TOOL_COUNT);
    assert!(hub.tool_names_of("a.b").iter().all(|name| name.starts_with("mcp__a_b__")));
    assert!(hub.tool_names_of("a_b").is_empty());
    assert!(hub.tools().iter().all(|tool| !tool.name().ends_with("_2")));
    let collisions = hub.name_collisions();
    assert_eq!(collisions.len(), TOOL_COUNT);
    assert!(collisions.iter().all(|c| c.server == "a_b" && c.kept_server == "a.b" && c.tool == c.kept_tool));
    // The name calls the server that kept it.
    let out = tool(&hub, "mcp__a_b__env").call(json!({"name": "WHO"}), &ctx()).await;
    assert_eq!(out, Ok(ToolOutput::Json(json!({"name": "WHO", "value": "dot"}))));
    hub.shutdown().await;
}

// ----- calls and result conversion ------------------------------------------------------------

async fn calls_convert_results(hub: &McpHub, server: &str) {
    let call = |name: &str, args: Value| {
        let tool = tool(hub, &format!("mcp__{server}__{name}"));
        async move { tool.call(args, &ctx()).await }
    };
    assert_eq!(call("echo", json!({"text": "héllo"})).await, Ok(ToolOutput::Text("héllo".into())));
    assert_eq!(call("add", json!({"a": 2, "b": 3})).await, Ok(ToolOutput::Json(json!({"sum": 5.0}))));
    assert_eq!(call("fail", json!({})).await, Err(ToolError::Failed("the fail tool always fails".into())));
    let Ok(ToolOutput::Text(image)) = call("image", json!({})).await else { panic!("image") };
    assert!(image.starts_with("[image: image/png, ") && image.ends_with(" bytes base64]"), "{image}");
    assert_eq!(
        call("mixed", json!({})).await,
        Ok(ToolOutput::Text(
            "mixed\n[audio: audio/wav, 8 bytes base64]\n[resource: file:///hello.txt (text/plain)]\nhello resource\n\
             [resource link: file:///linked.txt]"
                .into()
        ))
    );
    assert_eq!(call("weird_name_with_spaces", json!({})).await, Ok(ToolOutput::Text("weird".into())));
    // A protocol-level "invalid params" is an argument error (never retried).
    let Err(ToolError::InvalidArguments(message)) = call("echo", json!({})).await else { panic!("invalid args") };
    assert!(message.contains(&format!("MCP server {server}")) && message.contains("`text`"), "{message}");
    // Through the gateway's own executor: result text, and the error result object for isError.
    let echo = tool(hub, &format!("mcp__{server}__echo"));
    let text = execute_backend(&*echo, json!({"text": "x"}), &ctx(), Duration::from_secs(5), 0).await.into_text();
    assert_eq!(text, "x");
    let fail = tool(hub, &format!("mcp__{server}__fail"));
    let text = execute_backend(&*fail, json!({}), &ctx(), Duration::from_secs(5), 0).await.into_text();
    assert_eq!(text, format!(r#"{{"tool":"mcp__{server}__fail","ok":false,"error":"the fail tool always fails"}}"#));
}

#[tokio::test]
async fn stdio_calls_convert_results() {
    let hub = started(vec![stdio("local", json!({}))]).await;
    calls_convert_results(&hub, "local").await;
    hub.shutdown().await;
}

#[tokio::test]
async fn http_calls_convert_results() {
    let server = http_server(None).await;
    let hub = started(vec![http("remote", &server.url, json!({}))]).await;
    calls_convert_results(&hub, "remote").await;
    hub.shutdown().await;
}

// ----- timeouts and cancellation --------------------------------------------------------------

async fn timeout_and_cancellation(hub: &McpHub, server: &str) {
    // Past callMs (300 ms): an error naming the server, and the server is told to stop.
    let slow = tool(hub, &format!("mcp__{server}__slow"));
    let started = tokio::time::Instant::now();
    let Err(ToolError::Failed(message)) = slow.call(json!({"ms": 10_000}), &ctx()).await else { panic!("timeout") };
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(message.starts_with(&format!("MCP server {server}: ")) && message.contains("callMs"), "{message}");
    let hub_ref = hub;
    eventually(Duration::from_secs(3), "the timed-out call to be cancelled", || async {
        cancelled_count(hub_ref, server).await == "1"
    })
    .await;

    // Dropping the call future (how the gateway cancels a run) cancels the request too.
    let dropped = tokio::time::timeout(Duration::from_millis(100), slow.call(json!({"ms": 10_000}), &ctx())).await;
    assert!(dropped.is_err(), "the outer timeout dropped the call");
    eventually(Duration::from_secs(3), "the dropped call to be cancelled", || async {
        cancelled_count(hub_ref, server).await == "2"
    })
    .await;
    // The connection is still good.
    assert_eq!(hub.call(server, "echo", json!({"text": "ok"})).await, Ok(ToolOutput::Text("ok".into())));
}

#[tokio::test]
async fn stdio_timeout_and_cancellation() {
    let hub = started(vec![stdio("local", json!({"timeouts": {"connectMs": 5000, "callMs": 300}}))]).await;
    timeout_and_cancellation(&hub, "local").await;
    hub.shutdown().await;
}

#[tokio::test]
async fn http_timeout_and_cancellation() {
    let server = http_server(None).await;
    let hub = started(vec![http("remote", &server.url, json!({"timeouts": {"connectMs": 5000, "callMs": 300}}))]).await;
    timeout_and_cancellation(&hub, "remote").await;
    hub.shutdown().await;
}

// ----- tools/list_changed ---------------------------------------------------------------------

async fn list_changed_refreshes(hub: &McpHub, server: &str) {
    let mut changes = hub.subscribe();
    changes.borrow_and_update();
    assert_eq!(hub.call(server, "add_tool", json!({"name": "fresh.tool"})).await, Ok(ToolOutput::Text("added".into())));
    tokio::time::timeout(Duration::from_secs(5), changes.changed()).await.expect("catalog change").expect("hub alive");
    let name = format!("mcp__{server}__fresh_tool");
    assert!(hub.tool_names_of(server).contains(&name));
    assert_eq!(hub.status(server).unwrap().tools, TOOL_COUNT + 1);
    assert_eq!(tool(hub, &name).call(json!({}), &ctx()).await, Ok(ToolOutput::Text("dynamic fresh.tool".into())));
}

#[tokio::test]
async fn stdio_list_changed_refreshes_the_tools() {
    let hub = started(vec![stdio("local", json!({}))]).await;
    list_changed_refreshes(&hub, "local").await;
    hub.shutdown().await;
}

#[tokio::test]
async fn http_list_changed_refreshes_the_tools() {
    let server = http_server(None).await;
    let hub = started(vec![http("remote", &server.url, json!({}))]).await;
    list_changed_refreshes(&hub, "remote").await;
    hub.shutdown().await;
}

// ----- health: crash, restart, failure to start -----------------------------------------------

#[tokio::test]
async fn a_crashed_stdio_server_is_restarted_with_backoff() {
    let hub = started(vec![stdio("local", json!({}))]).await;
    let first_pid = hub.status("local").unwrap().pid.expect("pid");

    let crashed_at = tokio::time::Instant::now();
    let Err(ToolError::Failed(message)) = hub.call("local", "crash", json!({})).await else { panic!("crash") };
    assert!(message.starts_with("MCP server local: ") && message.contains("connection was lost"), "{message}");
    // Right after the crash the restart is still pending (backoff): a clear error, no waiting.
    let Err(ToolError::Failed(message)) = hub.call("local", "echo", json!({"text": "x"})).await else {
        panic!("call during backoff")
    };
    assert!(message.starts_with("MCP server local: "), "{message}");
    let failed = wait_status(&hub, "local", |s| matches!(s.state, ServerState::Failed { .. })).await;
    let ServerState::Failed { reason, .. } = failed.state else { unreachable!() };
    assert!(reason.contains("closed the connection"), "{reason}");
    assert_eq!(failed.tools, TOOL_COUNT, "the tools stay listed while it restarts");

    let restarted = wait_status(&hub, "local", is_connected).await;
    assert!(crashed_at.elapsed() >= agw_mcp::INITIAL_BACKOFF, "restarted only after the backoff");
    assert_ne!(restarted.pid, Some(first_pid));
    assert!(!process_alive(first_pid));
    assert_eq!(hub.call("local", "echo", json!({"text": "back"})).await, Ok(ToolOutput::Text("back".into())));
    hub.shutdown().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_fails_with_its_reason() {
    let missing = stdio("broken", json!({"command": "/nonexistent/agw-mcp-server"}));
    let hub = started(vec![missing, stdio("local", json!({}))]).await;
    let ServerState::Failed { reason, .. } = hub.status("broken").unwrap().state else { panic!("not failed") };
    assert!(reason.contains("cannot start `/nonexistent/agw-mcp-server`"), "{reason}");
    // Another server is unaffected.
    assert!(is_connected(&hub.status("local").unwrap()));
    assert!(hub.tools_of("broken").is_empty());
    assert!(hub.ensure("broken").await.unwrap_err().to_string().contains("cannot start"));
    let Err(ToolError::Failed(message)) = hub.call("broken", "echo", json!({"text": "x"})).await else {
        panic!("call on a failed server")
    };
    assert!(message.starts_with("MCP server broken: cannot start"), "{message}");
    assert!(message.contains("next start attempt in"), "{message}");
    hub.shutdown().await;
}

#[tokio::test]
async fn a_server_that_exits_during_the_handshake_fails() {
    // `mcp-test-server --http` with a bad address exits at once with an error on stderr.
    let bad = stdio("bad", json!({"args": ["--http", "not-an-address"]}));
    let hub = started(vec![bad]).await;
    let ServerState::Failed { reason, .. } = hub.status("bad").unwrap().state else { panic!("not failed") };
    assert!(reason.contains("MCP handshake failed") || reason.contains("connectMs"), "{reason}");
    hub.shutdown().await;
}

// ----- startup, environment, shutdown ---------------------------------------------------------

#[tokio::test]
async fn a_lazy_server_starts_on_first_use() {
    let hub = started(vec![stdio("later", json!({"startup": "lazy"}))]).await;
    assert_eq!(hub.status("later").unwrap().state, ServerState::NotStarted);
    assert!(hub.tools().is_empty());
    let changes = hub.subscribe();
    // A call starts it too; `ensure` is how the gateway asks for its tools.
    assert_eq!(hub.call("later", "echo", json!({"text": "lazy"})).await, Ok(ToolOutput::Text("lazy".into())));
    assert!(changes.has_changed().unwrap());
    assert_eq!(hub.ensure("later").await, Ok(()));
    assert_eq!(hub.tools_of("later").len(), TOOL_COUNT);
    hub.shutdown().await;
}

#[tokio::test]
async fn the_child_gets_only_env_and_passed_through_variables() {
    let config = stdio("local", json!({"env": {"FOO": "bar"}, "envPassthrough": ["ALLOWED", "UNSET"], "cwd": "/"}));
    let hub = McpHub::with_env(vec![config], env(&[("ALLOWED", "yes"), ("SECRET", "no"), ("FOO", "agw's")]));
    hub.start().await;
    let read = |name: &'static str| {
        let hub = hub.clone();
        async move {
            match hub.call("local", "env", json!({"name": name})).await {
                Ok(ToolOutput::Json(value)) => value["value"].clone(),
                other => panic!("env {name}: {other:?}"),
            }
        }
    };
    assert_eq!(read("FOO").await, json!("bar"), "`env` wins over agw's value");
    assert_eq!(read("ALLOWED").await, json!("yes"));
    assert_eq!(read("SECRET").await, Value::Null, "not passed through");
    assert_eq!(read("UNSET").await, Value::Null);
    // Nothing of the test process's own environment leaks either.
    assert!(std::env::var_os("PATH").is_some());
    assert_eq!(read("PATH").await, Value::Null);
    hub.shutdown().await;
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn shutdown_stops_the_child_process() {
    let hub = started(vec![stdio("local", json!({}))]).await;
    let pid = hub.status("local").unwrap().pid.expect("pid");
    assert!(process_alive(pid));
    hub.shutdown().await;
    assert!(!process_alive(pid), "shutdown waits for the child to exit");
    assert_eq!(hub.status("local").unwrap().state, ServerState::Stopped);
    let tool = tool(&hub, "mcp__local__echo");
    let Err(ToolError::Failed(message)) = tool.call(json!({"text": "x"}), &ctx()).await else {
        panic!("after shutdown")
    };
    assert!(message.contains("shut down"), "{message}");
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn dropping_the_hub_stops_the_child_process() {
    let hub = started(vec![stdio("local", json!({}))]).await;
    let pid = hub.status("local").unwrap().pid.expect("pid");
    let tool = tool(&hub, "mcp__local__echo");
    drop(hub);
    eventually(Duration::from_secs(5), "the child to exit", || async { !process_alive(pid) }).await;
    let Err(ToolError::Failed(message)) = tool.call(json!({"text": "x"}), &ctx()).await else { panic!("after drop") };
    assert!(message.contains("shut down"), "{message}");
}

// ----- HTTP bearer token ----------------------------------------------------------------------

#[tokio::test]
async fn http_bearer_token_is_read_from_the_named_variable() {
    let server = http_server(Some("s3cret-token")).await;
    let config = http("secure", &server.url, json!({"bearerTokenEnv": "SECURE_MCP_TOKEN"}));

    let hub = McpHub::with_env(vec![config.clone()], env(&[("SECURE_MCP_TOKEN", "s3cret-token")]));
    hub.start().await;
    assert!(is_connected(&hub.status("secure").unwrap()), "{:?}", hub.status("secure"));
    assert_eq!(hub.call("secure", "echo", json!({"text": "in"})).await, Ok(ToolOutput::Text("in".into())));
    hub.shutdown().await;

    let unset = McpHub::with_env(vec![config.clone()], env(&[]));
    unset.start().await;
    let ServerState::Failed { reason, .. } = unset.status("secure").unwrap().state else { panic!("not failed") };
    assert!(reason.contains("SECURE_MCP_TOKEN") && reason.contains("not set"), "{reason}");
    unset.shutdown().await;

    let wrong = McpHub::with_env(vec![config.clone()], env(&[("SECURE_MCP_TOKEN", "guess")]));
    wrong.start().await;
    let ServerState::Failed { reason, .. } = wrong.status("secure").unwrap().state else { panic!("not failed") };
    assert!(reason.contains("MCP handshake failed"), "{reason}");
    assert!(!reason.contains("guess"), "the token never appears in a reason: {reason}");
    wrong.shutdown().await;
}

// ----- agw check ------------------------------------------------------------------------------

#[tokio::test]
async fn check_connects_lists_and_disconnects() {
    let tools = check(&stdio("local", json!({}))).await.expect("check");
    assert_eq!(tools.len(), TOOL_COUNT);
    let weird = tools.iter().find(|t| t.mcp_name == "weird.name/with spaces").expect("listed");
    assert_eq!(weird.name, "mcp__local__weird_name_with_spaces");
    assert_eq!(weird.description, "A tool whose name needs sanitising");

    let server = http_server(Some("t0k")).await;
    let secure = http("secure", &server.url, json!({"bearerTokenEnv": "T"}));
    assert_eq!(check_with_env(&secure, env(&[("T", "t0k")])).await.map(|t| t.len()), Ok(TOOL_COUNT));
    assert_eq!(
        check_with_env(&secure, env(&[])).await.unwrap_err().to_string(),
        "environment variable T (bearerTokenEnv) is not set"
    );

    let err = check(&stdio("broken", json!({"command": "/nonexistent/agw-mcp-server"}))).await.unwrap_err();
    assert!(err.to_string().starts_with("cannot start `/nonexistent/agw-mcp-server`: "), "{err}");
}
