//! Opening one MCP connection: spawn or dial, handshake, list the tools.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{ClientInitializeError, NotificationContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, ServiceError, ServiceExt};
use tokio::io::AsyncReadExt;

use crate::config::{HttpConfig, McpServerConfig, McpTransport, StdioConfig};
use crate::hub::{Inner, Slot};

/// Looks up a variable of agw's environment: `envPassthrough` and `bearerTokenEnv` read through
/// it. [`process_env`] reads the process environment; embedders and tests may pass their own.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The process environment (variables that are not UTF-8 count as unset).
pub fn process_env() -> EnvLookup {
    Arc::new(|name| std::env::var(name).ok())
}

/// Longest stderr line kept from a stdio server (the rest of the line is dropped).
const MAX_STDERR_LINE: usize = 2048;
/// How many of a stdio server's last stderr lines are kept to explain a failure.
const STDERR_TAIL_LINES: usize = 5;

/// A server's last stderr lines, shared with the task reading them.
#[derive(Default)]
pub(crate) struct StderrTail(Mutex<VecDeque<String>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    pub(crate) fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// `reason`, with the last stderr line appended when there is one.
    pub(crate) fn explain(&self, reason: String) -> String {
        match self.0.lock().unwrap_or_else(|e| e.into_inner()).back() {
            Some(line) => format!("{reason}; last stderr line: {line}"),
            None => reason,
        }
    }
}

/// The client side of one connection: identifies agw and refreshes the server's tools when it
/// says they changed.
pub(crate) struct Handler {
    hub: Weak<Inner>,
    slot: Option<Arc<Slot>>,
    generation: u64,
}

impl Handler {
    pub(crate) fn new(hub: Weak<Inner>, slot: Arc<Slot>, generation: u64) -> Handler {
        Handler { hub, slot: Some(slot), generation }
    }

    /// For a one-off connection ([`crate::check`]): nothing to refresh.
    pub(crate) fn detached() -> Handler {
        Handler { hub: Weak::new(), slot: None, generation: 0 }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // The newest version with the `initialize` handshake: every deployed server speaks it, and
        // on it a server can send `tools/list_changed` without a `subscriptions/listen` stream.
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("agw", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let Some(slot) = &self.slot else { return };
        let server = &slot.config.name;
        tracing::debug!(server = %server, "MCP server says its tools changed");
        // rmcp dropped its cached `tools/list` pages before calling this, so this lists anew.
        match tokio::time::timeout(slot.config.timeouts.connect, context.peer.list_all_tools()).await {
            Ok(Ok(tools)) => {
                if slot.set_tools(self.generation, tools).await
                    && let Some(hub) = self.hub.upgrade()
                {
                    hub.rebuild_catalog();
                }
            }
            Ok(Err(e)) => tracing::warn!(server = %server, error = %e, "MCP tools/list after list_changed failed"),
            Err(_) => tracing::warn!(server = %server, "MCP tools/list after list_changed timed out"),
        }
    }
}

/// An open connection and what it offered.
pub(crate) struct Connection {
    pub running: RunningService<RoleClient, Handler>,
    pub pid: Option<u32>,
    pub tools: Vec<rmcp::model::Tool>,
}

/// Starts or dials the server, does the MCP handshake and lists every page of its tools, all
/// within `timeouts.connect`. Dropping the future (or failing) stops a started process.
pub(crate) async fn connect(
    config: &McpServerConfig,
    handler: Handler,
    env: &EnvLookup,
    stderr: Option<Arc<StderrTail>>,
) -> Result<Connection, String> {
    let limit = config.timeouts.connect;
    let attempt = async {
        let (running, pid) = match &config.transport {
            McpTransport::Stdio(stdio) => {
                let (transport, pid) = spawn(&config.name, stdio, env, stderr)?;
                (handler.serve(transport).await.map_err(describe_init_error)?, pid)
            }
            McpTransport::Http(http) => {
                let transport = StreamableHttpClientTransport::from_config(http_transport_config(http, env)?);
                (handler.serve(transport).await.map_err(describe_init_error)?, None)
            }
        };
        let tools = running
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list failed: {}", describe_service_error(&e)))?;
        Ok(Connection { running, pid, tools })
    };
    match tokio::time::timeout(limit, attempt).await {
        Ok(result) => result,
        Err(_) => Err(format!("not connected within {} ms (timeouts.connectMs)", limit.as_millis())),
    }
}

/// A handshake error for people: rmcp's transport errors name the transport's Rust type, which
/// says nothing to an operator, so only the error chain and the step are kept.
fn describe_init_error(error: ClientInitializeError) -> String {
    let auth = if error.is_authorization_required() { "authorization refused (check bearerTokenEnv); " } else { "" };
    let detail = match &error {
        ClientInitializeError::TransportError { error, context } => {
            format!("{} (while trying to {context})", error_chain(error.error.as_ref()))
        }
        other => other.to_string(),
    };
    format!("MCP handshake failed: {auth}{detail}")
}

/// A request error for people (see [`describe_init_error`]).
pub(crate) fn describe_service_error(error: &ServiceError) -> String {
    match error {
        ServiceError::TransportSend(error) => error_chain(error.error.as_ref()),
        other => other.to_string(),
    }
}

/// `error` and its sources, `: `-separated, skipping a source its parent already quotes.
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let message = cause.to_string();
        if !text.contains(&message) {
            text = format!("{text}: {message}");
        }
        source = cause.source();
    }
    text
}

/// The child's environment is only `env` plus the `envPassthrough` variables; it runs in its own
/// process group so a terminal's Ctrl-C reaches agw, which stops it, rather than the server.
fn spawn(
    server: &str,
    stdio: &StdioConfig,
    env: &EnvLookup,
    stderr: Option<Arc<StderrTail>>,
) -> Result<(TokioChildProcess, Option<u32>), String> {
    let mut command = tokio::process::Command::new(&stdio.command);
    command.args(&stdio.args).env_clear().kill_on_drop(true);
    for name in &stdio.env_passthrough {
        if let Some(value) = env(name) {
            command.env(name, value);
        }
    }
    command.envs(&stdio.env);
    if let Some(cwd) = &stdio.cwd {
        command.current_dir(cwd);
    }
    #[cfg(unix)]
    command.process_group(0);
    let (child, child_stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start `{}`: {e}", stdio.command))?;
    if let Some(child_stderr) = child_stderr {
        tokio::spawn(forward_stderr(server.to_owned(), child_stderr, stderr));
    }
    let pid = child.id();
    Ok((child, pid))
}

/// Logs a stdio server's stderr line by line (it is the server's log) and keeps the last lines
/// to explain a failure. Lines are cut at [`MAX_STDERR_LINE`] bytes, so memory stays bounded.
async fn forward_stderr(server: String, mut stderr: tokio::process::ChildStderr, tail: Option<Arc<StderrTail>>) {
    let mut buffer = [0u8; 4096];
    let mut line = Vec::new();
    let emit = |line: &[u8]| {
        let text = String::from_utf8_lossy(line).trim_end().to_owned();
        if text.is_empty() {
            return;
        }
        tracing::info!(target: "agw_mcp::stderr", server = %server, "{text}");
        if let Some(tail) = &tail {
            tail.push(text);
        }
    };
    loop {
        let n = match stderr.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &byte in &buffer[..n] {
            if byte == b'\n' {
                emit(&line);
                line.clear();
            } else if line.len() < MAX_STDERR_LINE {
                line.push(byte);
            }
        }
    }
    emit(&line);
}

fn http_transport_config(http: &HttpConfig, env: &EnvLookup) -> Result<StreamableHttpClientTransportConfig, String> {
    let mut headers = HashMap::new();
    for (name, value) in &http.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("header `{name}`: {e}"))?;
        let value = http::HeaderValue::from_str(value).map_err(|e| format!("header `{name}`: {e}"))?;
        headers.insert(name, value);
    }
    let mut transport = StreamableHttpClientTransportConfig::with_uri(http.url.as_str()).custom_headers(headers);
    if let Some(variable) = &http.bearer_token_env {
        // Read at every connect, so a rotated token is picked up by the next (re)connect.
        match env(variable) {
            Some(token) if !token.trim().is_empty() => transport = transport.auth_header(token.trim()),
            _ => return Err(format!("environment variable {variable} (bearerTokenEnv) is not set")),
        }
    }
    Ok(transport)
}

/// How long [`crate::McpHub::shutdown`] waits for one server to stop before abandoning it to the
/// kill-on-drop of its process.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(7);
