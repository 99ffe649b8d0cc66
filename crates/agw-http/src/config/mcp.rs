//! `agw.mcp.*`: caps on what an MCP server can make agw hold and send to models (a server lists
//! what it likes; docs/mcp.md "Limits").

use super::source::Source;
use super::table::{AGW_MCP_MAX_REQUEST_TOOL_BYTES, AGW_MCP_MAX_TOOL_BYTES, AGW_MCP_MAX_TOOLS_PER_SERVER};
use super::{ConfigError, value};

/// `agw.mcp.*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpSettings {
    /// Tools per server and bytes per tool definition: what the MCP client takes as it lists.
    pub limits: agw_mcp::McpLimits,
    /// Most bytes of MCP tool definitions offered in one model request.
    pub max_request_tool_bytes: usize,
}

pub(super) fn load(src: &Source) -> Result<McpSettings, ConfigError> {
    Ok(McpSettings {
        limits: agw_mcp::McpLimits {
            max_tools_per_server: src.parse(&AGW_MCP_MAX_TOOLS_PER_SERVER, value::whole)?,
            max_tool_bytes: src.parse(&AGW_MCP_MAX_TOOL_BYTES, value::whole)?,
        },
        max_request_tool_bytes: src.parse(&AGW_MCP_MAX_REQUEST_TOOL_BYTES, value::whole)?,
    })
}
