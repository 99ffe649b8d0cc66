//! Caps on what one MCP server can make agw hold and offer to models.
//!
//! A server is configured by the operator, but what it *lists* is its own: a hostile or broken
//! server could offer thousands of tools or megabytes of description per tool (every model request
//! would carry them), or send `tools/list_changed` without pause. [`McpLimits`] bounds the first;
//! the hub coalesces the second ([`REFRESH_INTERVAL`]). rmcp itself caps one message at 16 MiB
//! (stdio line, HTTP body or SSE event), which bounds a single `tools/list` page.

use std::time::Duration;

use rmcp::model::Tool;

/// Default [`McpLimits::max_tools_per_server`].
pub const DEFAULT_MAX_TOOLS_PER_SERVER: usize = 256;
/// Default [`McpLimits::max_tool_bytes`]: 16 KiB.
pub const DEFAULT_MAX_TOOL_BYTES: usize = 16 * 1024;
/// At most one `tools/list` refresh per server in this interval, however often the server says
/// its tools changed (notifications in between are coalesced into the next refresh).
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(1);
/// Longest tool name quoted in a log line (a skipped tool's name is the server's text).
const MAX_QUOTED_NAME: usize = 128;

/// Caps on the tools agw takes from one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpLimits {
    /// Most tools taken from one server; later ones (in listing order) are skipped, and the
    /// server's further `tools/list` pages are not read.
    pub max_tools_per_server: usize,
    /// Largest definition of one tool, in bytes of its JSON as listed (name, title, description,
    /// input and output schemas, annotations, `_meta`): larger ones are skipped.
    pub max_tool_bytes: usize,
}

impl Default for McpLimits {
    fn default() -> Self {
        McpLimits { max_tools_per_server: DEFAULT_MAX_TOOLS_PER_SERVER, max_tool_bytes: DEFAULT_MAX_TOOL_BYTES }
    }
}

/// Why a listed tool was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SkipReason {
    /// Its definition is larger than [`McpLimits::max_tool_bytes`].
    #[error("its definition is larger than {limit} bytes")]
    TooLarge {
        /// The cap.
        limit: usize,
    },
    /// The server offers more than [`McpLimits::max_tools_per_server`] tools: this one and every
    /// later one are skipped.
    #[error("the server offers more than {limit} tools; this one and every later one are skipped")]
    TooMany {
        /// The cap.
        limit: usize,
    },
}

/// A listed tool agw did not take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedTool {
    /// Its MCP name (cut to 128 characters: it is the server's text, quoted in logs).
    pub tool: String,
    /// Why.
    pub reason: SkipReason,
}

impl SkippedTool {
    pub(crate) fn new(tool: &Tool, reason: SkipReason) -> SkippedTool {
        SkippedTool { tool: tool.name.chars().take(MAX_QUOTED_NAME).collect(), reason }
    }
}

/// Whether `tool`'s JSON fits in `limit` bytes; serialisation stops at the first byte past it.
pub(crate) fn fits(tool: &Tool, limit: usize) -> bool {
    struct Meter {
        left: usize,
    }
    impl std::io::Write for Meter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.left = self.left.checked_sub(buf.len()).ok_or_else(|| std::io::Error::other("over the cap"))?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(Meter { left: limit }, tool).is_ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    #[test]
    fn the_whole_definition_counts() {
        let schema = Arc::new(json!({"type": "object"}).as_object().cloned().unwrap_or_default());
        let tool = Tool::new("t", "d".repeat(100), schema);
        let size = serde_json::to_vec(&tool).unwrap().len();
        assert!(fits(&tool, size));
        assert!(!fits(&tool, size - 1));
        let big_schema = json!({"type": "object", "properties": {"x": {"description": "y".repeat(200)}}});
        let tool = Tool::new("t", "short", Arc::new(big_schema.as_object().cloned().unwrap_or_default()));
        assert!(!fits(&tool, 200));
    }

    #[test]
    fn quoted_names_are_cut() {
        let tool = Tool::new("n".repeat(1000), "", Arc::default());
        let skipped = SkippedTool::new(&tool, SkipReason::TooLarge { limit: 1 });
        assert_eq!(skipped.tool.len(), MAX_QUOTED_NAME);
    }
}
