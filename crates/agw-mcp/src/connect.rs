//! Opening one MCP connection: spawn or dial, handshake, list the tools.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams, ProtocolVersion};
use rmcp::service::{ClientInitializeError, NotificationContext, Peer, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientCacheConfig, ClientHandler, ServiceError, ServiceExt};
use tokio::io::AsyncReadExt;
use tokio::sync::Notify;

use crate::config::{HttpConfig, McpServerConfig, McpTransport, StdioConfig};
use crate::limits::{McpLimits, SkipReason, SkippedTool, fits};

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

/// The client side of one connection: identifies agw and passes `tools/list_changed` on.
pub(crate) struct Handler {
    /// Woken by `tools/list_changed`. It holds at most one wake-up, so a flood of notifications
    /// coalesces into one refresh (the hub's refresher lists at most once per
    /// [`crate::limits::REFRESH_INTERVAL`]); `None` for a one-off connection ([`crate::check`]).
    refresh: Option<Arc<Notify>>,
}

impl Handler {
    pub(crate) fn new(refresh: Arc<Notify>) -> Handler {
        Handler { refresh: Some(refresh) }
    }

    /// For a one-off connection ([`crate::check`]): nothing to refresh.
    pub(crate) fn detached() -> Handler {
        Handler { refresh: None }
    }
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        // The newest version with the `initialize` handshake: every deployed server speaks it, and
        // on it a server can send `tools/list_changed` without a `subscriptions/listen` stream.
        ClientConfig::new(ClientCapabilities::default(), Implementation::new("agw", env!("CARGO_PKG_VERSION")))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        // No listing here: rmcp runs this in a task of its own for every notification, so a
        // server sending them every few milliseconds would have as many listings in flight.
        if let Some(refresh) = &self.refresh {
            refresh.notify_one();
        }
    }
}

/// How many skipped tools a [`Listing`] names (the others are only counted), so that what is
/// kept to log them stays small too.
const MAX_SKIPPED_NAMED: usize = 32;

/// One listing of a server's tools, within [`McpLimits`].
#[derive(Debug, Default)]
pub(crate) struct Listing {
    /// The tools taken, in listing order.
    pub tools: Vec<rmcp::model::Tool>,
    /// What was skipped.
    pub skipped: Skipped,
}

/// The tools a listing skipped: the first [`MAX_SKIPPED_NAMED`] by name, all by count.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Skipped {
    /// The first ones, with why.
    pub named: Vec<SkippedTool>,
    /// All of them.
    pub count: usize,
    /// The server still had pages after the most agw reads.
    pub pages_left: bool,
}

impl Skipped {
    fn push(&mut self, tool: &rmcp::model::Tool, reason: SkipReason) {
        // The one over the tool cap is always named: it ends the listing.
        if self.named.len() < MAX_SKIPPED_NAMED || matches!(reason, SkipReason::TooMany { .. }) {
            self.named.push(SkippedTool::new(tool, reason));
        }
        self.count += 1;
    }

    /// Logs what was skipped, naming the server and each named tool with the reason: at `warn`,
    /// or at `debug` when `again` (the same as the server's previous listing, so a server that is
    /// refreshed often does not repeat its warnings).
    pub(crate) fn log(&self, server: &str, again: bool) {
        for skipped in &self.named {
            let (tool, reason) = (&skipped.tool, &skipped.reason);
            if again {
                tracing::debug!(server = %server, tool = %tool, "MCP tool skipped: {reason}");
            } else {
                tracing::warn!(server = %server, tool = %tool, "MCP tool skipped: {reason}");
            }
        }
        let unnamed = self.count - self.named.len();
        if unnamed > 0 && !again {
            tracing::warn!(server = %server, "{unnamed} more MCP tools skipped as too large");
        }
        if self.pages_left && !again {
            tracing::warn!(
                server = %server,
                "MCP server has more pages of tools than agw reads (one more than the tool cap); the rest are skipped"
            );
        }
    }
}

/// Lists the server's tools page by page, keeping only what fits `limits`: a tool whose
/// definition is too large is dropped as soon as its page is read, and once the server has offered
/// more than `max_tools_per_server` tools no further page is asked for. So what agw holds is at
/// most the cap's worth of tools plus one page (rmcp caps a message at 16 MiB), whatever the
/// server lists. At most `max_tools_per_server + 1` pages are read (with at least one tool per
/// page that is enough to fill the cap), so endless empty pages end too.
pub(crate) async fn list_tools(peer: &Peer<RoleClient>, limits: &McpLimits) -> Result<Listing, ServiceError> {
    let mut listing = Listing::default();
    let mut cursor = None;
    for _page in 0..=limits.max_tools_per_server {
        let page = peer.list_tools(Some(PaginatedRequestParams::default().with_cursor(cursor))).await?;
        for tool in page.tools {
            if listing.tools.len() == limits.max_tools_per_server {
                listing.skipped.push(&tool, SkipReason::TooMany { limit: limits.max_tools_per_server });
                return Ok(listing);
            }
            if fits(&tool, limits.max_tool_bytes) {
                listing.tools.push(tool);
            } else {
                listing.skipped.push(&tool, SkipReason::TooLarge { limit: limits.max_tool_bytes });
            }
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    listing.skipped.pages_left = cursor.is_some();
    Ok(listing)
}

/// Why a server could not be connected: spawned or dialled, handshaken and listed. The display
/// text is for operators (`agw check`, logs, [`crate::ServerState::Failed`]); rmcp's errors are
/// kept as their description (`describe_service_error`), which leaves out Rust type names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The stdio server's program could not be started.
    #[error("cannot start `{command}`: {reason}")]
    Spawn {
        /// `command` as declared.
        command: String,
        /// The OS error.
        reason: String,
    },
    /// A declared HTTP header is not a valid header name or value.
    #[error("header `{name}`: {reason}")]
    Header {
        /// The header name (lower-cased once it parsed).
        name: String,
        /// Why it is invalid.
        reason: String,
    },
    /// The variable named by `bearerTokenEnv` is unset or blank.
    #[error("environment variable {variable} (bearerTokenEnv) is not set")]
    BearerTokenUnset {
        /// The variable's name.
        variable: String,
    },
    /// The MCP `initialize` handshake failed.
    #[error(
        "MCP handshake failed: {}{detail}",
        if *.authorization_refused { "authorization refused (check bearerTokenEnv); " } else { "" }
    )]
    Handshake {
        /// The server asked for authorization (HTTP 401/403).
        authorization_refused: bool,
        /// The error chain and the step that failed.
        detail: String,
    },
    /// The first `tools/list` failed.
    #[error("tools/list failed: {detail}")]
    ListTools {
        /// The request error.
        detail: String,
    },
    /// Not connected within `timeouts.connectMs`.
    #[error("not connected within {} ms (timeouts.connectMs)", .limit.as_millis())]
    Timeout {
        /// `timeouts.connectMs`.
        limit: Duration,
    },
}

/// An open connection and what it offered.
pub(crate) struct Connection {
    pub running: RunningService<RoleClient, Handler>,
    pub pid: Option<u32>,
    pub listing: Listing,
}

/// Starts or dials the server, does the MCP handshake and lists its tools ([`list_tools`]), all
/// within `timeouts.connect`. Dropping the future (or failing) stops a started process.
pub(crate) async fn connect(
    config: &McpServerConfig,
    handler: Handler,
    env: &EnvLookup,
    stderr: Option<Arc<StderrTail>>,
    limits: &McpLimits,
) -> Result<Connection, ConnectError> {
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
        // rmcp would keep `tools/list` pages a server marks cacheable (up to 512 of them, each up
        // to 16 MiB); agw keeps its own, filtered list instead.
        running.peer().set_response_cache_config(ClientCacheConfig::disabled()).await;
        let listing = list_tools(running.peer(), limits)
            .await
            .map_err(|e| ConnectError::ListTools { detail: describe_service_error(&e) })?;
        Ok(Connection { running, pid, listing })
    };
    match tokio::time::timeout(limit, attempt).await {
        Ok(result) => result,
        Err(_) => Err(ConnectError::Timeout { limit }),
    }
}

/// A handshake error for people: rmcp's transport errors name the transport's Rust type, which
/// says nothing to an operator, so only the error chain and the step are kept.
fn describe_init_error(error: ClientInitializeError) -> ConnectError {
    let detail = match &error {
        ClientInitializeError::TransportError { error, context } => {
            format!("{} (while trying to {context})", error_chain(error.error.as_ref()))
        }
        other => other.to_string(),
    };
    ConnectError::Handshake { authorization_refused: error.is_authorization_required(), detail }
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
) -> Result<(TokioChildProcess, Option<u32>), ConnectError> {
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
        .map_err(|e| ConnectError::Spawn { command: stdio.command.clone(), reason: e.to_string() })?;
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

fn http_transport_config(
    http: &HttpConfig,
    env: &EnvLookup,
) -> Result<StreamableHttpClientTransportConfig, ConnectError> {
    let invalid = |name: &dyn std::fmt::Display, e: &dyn std::fmt::Display| ConnectError::Header {
        name: name.to_string(),
        reason: e.to_string(),
    };
    let mut headers = HashMap::new();
    for (name, value) in &http.headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| invalid(name, &e))?;
        let value = http::HeaderValue::from_str(value).map_err(|e| invalid(&name, &e))?;
        headers.insert(name, value);
    }
    let mut transport = StreamableHttpClientTransportConfig::with_uri(http.url.as_str()).custom_headers(headers);
    if let Some(variable) = &http.bearer_token_env {
        // Read at every connect, so a rotated token is picked up by the next (re)connect.
        match env(variable) {
            Some(token) if !token.trim().is_empty() => transport = transport.auth_header(token.trim()),
            _ => return Err(ConnectError::BearerTokenUnset { variable: variable.clone() }),
        }
    }
    Ok(transport)
}

/// How long [`crate::McpHub::shutdown`] waits for one server to stop before abandoning it to the
/// kill-on-drop of its process.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(7);
