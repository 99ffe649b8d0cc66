//! [`McpTool`]: one MCP server tool as an [`agw_tools::Tool`]. Part of the hub: the hub makes
//! each tool, and a tool calls through the hub's connection to its server (by a weak handle: a
//! tool kept after the hub is gone fails its calls).

use std::sync::Weak;

use agw_tools::{Tool, ToolContext, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::Value;

use super::Inner;

/// A tool of an MCP server, offered to the model as `mcp__<server>__<tool>`.
///
/// `call` sends `tools/call` with the tool's MCP name over the server's shared connection,
/// within the server's `callMs`; dropping the future cancels the request on the server. Errors
/// are [`ToolError::Failed`] starting `MCP server <name>: `, except a tool-reported `isError`
/// result (its own text) and invalid parameters ([`ToolError::InvalidArguments`], not retried).
pub struct McpTool {
    hub: Weak<Inner>,
    server: String,
    mcp_name: String,
    name: String,
    title: Option<String>,
    description: String,
    parameters: Value,
    /// The server annotates it read-only or idempotent: a call may run again after a crash.
    idempotent: bool,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("name", &self.name)
            .field("server", &self.server)
            .field("mcp_name", &self.mcp_name)
            .finish_non_exhaustive()
    }
}

impl McpTool {
    pub(super) fn new(hub: Weak<Inner>, server: &str, tool: &rmcp::model::Tool, name: String) -> McpTool {
        McpTool {
            hub,
            server: server.to_owned(),
            mcp_name: tool.name.to_string(),
            name,
            title: tool.title.clone(),
            description: tool.description.as_deref().unwrap_or_default().to_owned(),
            parameters: tool.schema_as_json_value(),
            // Hints, which agw trusts only for this: a server that claims a tool is harmless to
            // repeat gets a repeated call after a crash, never more access.
            idempotent: tool
                .annotations
                .as_ref()
                .is_some_and(|a| a.read_only_hint == Some(true) || a.idempotent_hint == Some(true)),
        }
    }

    /// The server it belongs to.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Its name on the server (what `tools/call` sends).
    pub fn mcp_name(&self) -> &str {
        &self.mcp_name
    }

    /// The server's human-readable title for it, if any.
    pub fn title(&self) -> Option<&str> {
        self.title.as_deref()
    }

    /// Same server, names, description and schema (the hub's "did the catalog change" test).
    pub(super) fn same_definition(&self, other: &McpTool) -> bool {
        self.server == other.server
            && self.mcp_name == other.mcp_name
            && self.name == other.name
            && self.title == other.title
            && self.description == other.description
            && self.parameters == other.parameters
            && self.idempotent == other.idempotent
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn idempotent(&self) -> bool {
        self.idempotent
    }

    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let Some(hub) = self.hub.upgrade() else {
                return Err(ToolError::Failed(format!("MCP server {}: agw's MCP client is shut down", self.server)));
            };
            hub.call(&self.server, &self.mcp_name, args).await
        })
    }
}
