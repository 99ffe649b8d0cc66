//! agw-mcp — the MCP (Model Context Protocol) client side of agw: tools of MCP servers offered to
//! models as agw tools, on the official Rust SDK (`rmcp`).
//!
//! Owns:
//! * server declarations: one `*.json` file per server in a directory, stdio (a program started
//!   without a shell, with a cleared environment plus `env` and `envPassthrough`) or streamable
//!   HTTP (static headers, a bearer token read from the variable named by `bearerTokenEnv`), with
//!   `startup` and `timeouts` ([`McpServerConfig`], [`load_dir`]); a broken file is a
//!   [`LoadProblem`] and the others still load;
//! * tool naming: `mcp__<server>__<tool>`, sanitised to `[a-z0-9_-]`, at most 64 characters; of
//!   two tools with one name the later (in server, tool order) is skipped ([`naming`]);
//! * the caps on what a server may offer ([`McpLimits`]): tools per server, bytes per tool
//!   definition; tools beyond them are skipped and logged;
//! * the connections ([`McpHub`]): one per server shared by every run, started at boot or on
//!   first use, tool lists cached and refreshed on `tools/list_changed` (at most once a second),
//!   dead connections restarted with backoff, status per server, shutdown that stops every stdio
//!   process; [`check`] for `agw check`;
//! * [`McpTool`]: each MCP tool as an [`agw_tools::Tool`], results converted to text or JSON
//!   ([`convert`]).
//!
//! Must never: start a server through a shell or hand it agw's environment beyond `env` and
//! `envPassthrough`; read a credential from a server file or write one to a log, `Debug` output or
//! error; panic or hang on a server that fails, hangs or misbehaves (every connect and call is
//! bounded by the server's timeouts and ends in an error result); outlive [`McpHub::shutdown`]
//! with a child process; pass binary content (images, audio, blobs) to a model; hold more of a
//! server's tools than [`McpLimits`] allows (plus one `tools/list` page while it is read), or list
//! them more than once a second however often the server says they changed; know about agents,
//! modes, HTTP routes or model providers.

#![forbid(unsafe_code)]

pub mod config;
mod connect;
pub mod convert;
mod hub;
pub mod limits;
pub mod naming;

use serde_json::Value;

pub use agw_tools::LoadProblem;
pub use config::{
    ConfigError, HttpConfig, McpServerConfig, McpTransport, Startup, StdioConfig, Timeouts, load_dir, load_sources,
    parse_server,
};
pub use connect::{ConnectError, EnvLookup, process_env};
pub use hub::{INITIAL_BACKOFF, MAX_BACKOFF, McpHub, McpTool, ServerState, ServerStatus, ServerUnavailable};
pub use limits::{McpLimits, SkipReason, SkippedTool};
pub use naming::NameCollision;

/// A tool as [`check`] saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// The model-facing name (`mcp__<server>__<tool>`).
    pub name: String,
    /// The name on the server.
    pub mcp_name: String,
    /// The server's description ("" when it has none).
    pub description: String,
    /// The input JSON schema.
    pub parameters: Value,
}

/// Connects to `config`'s server once (within its `connectMs`), lists its tools and disconnects,
/// for `agw check`. `Err` says why it could not (the spawn, handshake or listing error). The tools
/// are those the hub would take: within the default [`McpLimits`], a tool whose name another of
/// the server's tools has left out (both logged).
pub async fn check(config: &McpServerConfig) -> Result<Vec<ToolInfo>, ConnectError> {
    check_with(config, process_env(), McpLimits::default()).await
}

/// [`check`] with another source of environment variables.
pub async fn check_with_env(config: &McpServerConfig, env: EnvLookup) -> Result<Vec<ToolInfo>, ConnectError> {
    check_with(config, env, McpLimits::default()).await
}

/// [`check`] with another source of environment variables and other limits.
pub async fn check_with(
    config: &McpServerConfig,
    env: EnvLookup,
    limits: McpLimits,
) -> Result<Vec<ToolInfo>, ConnectError> {
    let connect::Connection { running, listing, .. } =
        connect::connect(config, connect::Handler::detached(), &env, None, &limits).await?;
    // Closing stops a stdio process (stdin closed, then SIGTERM, then SIGKILL).
    let _ = tokio::time::timeout(connect::STOP_GRACE, running.cancel()).await;
    listing.skipped.log(&config.name, false);
    let tools = listing.tools;
    let pairs: Vec<(&str, &str)> = tools.iter().map(|tool| (config.name.as_str(), tool.name.as_ref())).collect();
    let (names, collisions) = naming::assign_names(&pairs);
    for collision in &collisions {
        collision.log();
    }
    Ok(tools
        .iter()
        .zip(names)
        .filter_map(|(tool, name)| {
            Some(ToolInfo {
                name: name?,
                mcp_name: tool.name.to_string(),
                description: tool.description.as_deref().unwrap_or_default().to_owned(),
                parameters: tool.schema_as_json_value(),
            })
        })
        .collect())
}
