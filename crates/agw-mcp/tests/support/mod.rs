//! Shared helpers: the real MCP test server (the crate's `mcp-test-server` binary), configs
//! written in the file format, and bounded waits.

#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agw_mcp::{EnvLookup, McpHub, McpServerConfig, ServerState, ServerStatus, parse_server};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The test server binary, built by cargo for the integration tests.
pub const SERVER: &str = env!("CARGO_BIN_EXE_mcp-test-server");

/// How many tools the test server lists before any `add_tool` (in no hostile mode).
pub const TOOL_COUNT: usize = 12;

/// A server declaration as a file would have it, with `extra` keys merged in.
pub fn config(name: &str, base: Value, extra: Value) -> McpServerConfig {
    let mut object = base.as_object().cloned().unwrap_or_default();
    object.insert("timeouts".into(), json!({"connectMs": 5000, "callMs": 5000}));
    object.extend(extra.as_object().cloned().unwrap_or_default());
    parse_server(name, &Value::Object(object).to_string()).expect("valid test config")
}

/// A stdio declaration of the test server.
pub fn stdio(name: &str, extra: Value) -> McpServerConfig {
    config(name, json!({"transport": "stdio", "command": SERVER, "startup": "boot"}), extra)
}

/// An HTTP declaration of a test server at `url`.
pub fn http(name: &str, url: &str, extra: Value) -> McpServerConfig {
    config(name, json!({"transport": "http", "url": url, "startup": "boot"}), extra)
}

/// An environment with exactly these variables.
pub fn env(vars: &[(&str, &str)]) -> EnvLookup {
    let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    Arc::new(move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
}

/// A test server serving streamable HTTP, killed when dropped.
pub struct HttpServer {
    pub url: String,
    _child: tokio::process::Child,
}

/// Starts `mcp-test-server --http 127.0.0.1:0` (with `--require-token` when given).
pub async fn http_server(token: Option<&str>) -> HttpServer {
    let mut command = tokio::process::Command::new(SERVER);
    command.args(["--http", "127.0.0.1:0"]).stdout(std::process::Stdio::piped()).kill_on_drop(true);
    if let Some(token) = token {
        command.args(["--require-token", token]);
    }
    let mut child = command.spawn().expect("start the test server");
    let stdout = child.stdout.take().expect("piped stdout");
    let line = tokio::time::timeout(Duration::from_secs(10), BufReader::new(stdout).lines().next_line())
        .await
        .expect("the test server prints its URL")
        .expect("readable stdout")
        .expect("a URL line");
    HttpServer { url: line.trim().to_owned(), _child: child }
}

/// Polls `check` every 10 ms until it holds; panics after `limit`.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until `server`'s status satisfies `predicate` and returns it.
pub async fn wait_status(hub: &McpHub, server: &str, predicate: impl Fn(&ServerStatus) -> bool) -> ServerStatus {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status = hub.status(server).expect("declared server");
        if predicate(&status) {
            return status;
        }
        assert!(tokio::time::Instant::now() < deadline, "status of {server} stuck at {status:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether the process `pid` still exists (zombies count as gone: nothing runs any more).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name.
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Whether the server is connected.
pub fn is_connected(status: &ServerStatus) -> bool {
    status.state == ServerState::Connected
}
