//! What the model reads back from a `tools/call` result.
//!
//! * `isError: true` → [`ToolError::Failed`] with the rendered content (the structured content
//!   when there is no content), so the model gets it as an error result;
//! * `structuredContent` present → [`ToolOutput::Json`] of it alone: the spec has servers repeat
//!   it as JSON text in `content`, so sending both would double the tokens;
//! * otherwise the content blocks rendered one after another, separated by a newline, as
//!   [`ToolOutput::Text`] (a text that happens to be JSON stays text; the model reads it the same):
//!   text as-is; an image `[image: image/png, 12345 bytes base64]`; audio likewise; an embedded
//!   resource `[resource: <uri> (<mime>)]` followed by its text, or by `, N bytes base64` for a
//!   blob; a resource link `[resource link: <uri>]`. Binary data never reaches the model.
//! * a tool that cannot go on without the user (`docs/pausing-tools.md`) answers, instead of a
//!   result, a JSON object whose only key is `needsUser` — as `structuredContent`, or as the text
//!   of its only content block — which becomes [`ToolOutput::NeedsUser`] (bounded; never for an
//!   `isError` result).

use agw_tools::{ToolError, ToolOutput, UserStatus};
use rmcp::model::{CallToolResult, ContentBlock, ResourceContents};

/// Converts a `tools/call` result (see the module docs).
pub fn convert_result(result: CallToolResult) -> Result<ToolOutput, ToolError> {
    if result.is_error == Some(true) {
        let mut text = render_content(&result.content);
        if text.is_empty() {
            text = match &result.structured_content {
                Some(value) => value.to_string(),
                None => "the MCP tool reported an error without a message".to_owned(),
            };
        }
        return Err(ToolError::Failed(text));
    }
    if let Some(value) = result.structured_content {
        return Ok(ToolOutput::from_json(value));
    }
    if let [ContentBlock::Text(text)] = result.content.as_slice()
        && text.text.trim_start().starts_with('{')
        && let Ok(value) = serde_json::from_str::<serde_json::Value>(&text.text)
        && let Some(status) = UserStatus::from_signal(&value)
    {
        return Ok(ToolOutput::NeedsUser(status));
    }
    Ok(ToolOutput::Text(render_content(&result.content)))
}

/// The content blocks as text, one block after another separated by `\n`.
pub fn render_content(blocks: &[ContentBlock]) -> String {
    blocks.iter().map(render_block).collect::<Vec<_>>().join("\n")
}

fn render_block(block: &ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!("[image: {}, {} bytes base64]", image.mime_type, image.data.len()),
        ContentBlock::Audio(audio) => format!("[audio: {}, {} bytes base64]", audio.mime_type, audio.data.len()),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { uri, mime_type, text, .. } => {
                format!("[resource: {uri} ({})]\n{text}", mime_type.as_deref().unwrap_or("unknown type"))
            }
            ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => format!(
                "[resource: {uri} ({}), {} bytes base64]",
                mime_type.as_deref().unwrap_or("unknown type"),
                blob.len()
            ),
            _ => "[resource: unsupported MCP resource contents]".to_owned(),
        },
        ContentBlock::ResourceLink(link) => format!("[resource link: {}]", link.uri),
        // A content type newer than this client: say so rather than drop it silently.
        _ => "[unsupported MCP content]".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn result(value: serde_json::Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn a_needs_user_signal_pauses_from_structured_content_or_the_only_text() {
        let signal = json!({"needsUser": {"code": -1002, "message": "Top up", "data": {"balance": 0}}});
        let expected = ToolOutput::NeedsUser(UserStatus::new("Top up").with_data(json!({"balance": 0})));
        let structured =
            result(json!({"content": [{"type": "text", "text": signal.to_string()}], "structuredContent": signal}));
        assert_eq!(convert_result(structured), Ok(expected.clone()));
        let text = result(json!({"content": [{"type": "text", "text": signal.to_string()}]}));
        assert_eq!(convert_result(text), Ok(expected));

        // Not a pause: an error, a second block, another key beside it.
        let error = result(json!({"content": [{"type": "text", "text": signal.to_string()}], "isError": true}));
        assert!(matches!(convert_result(error), Err(ToolError::Failed(_))));
        let two = json!({"content": [{"type": "text", "text": signal.to_string()}, {"type": "text", "text": "more"}]});
        assert!(matches!(convert_result(result(two)), Ok(ToolOutput::Text(_))));
        let other = json!({"structuredContent": {"needsUser": {"message": "x"}, "balance": 0}, "content": []});
        assert!(matches!(convert_result(result(other)), Ok(ToolOutput::Json(_))));
    }

    #[test]
    fn text_blocks_are_joined() {
        let out = convert_result(result(json!({"content": [
            {"type": "text", "text": "one"}, {"type": "text", "text": "two"}
        ]})));
        assert_eq!(out, Ok(ToolOutput::Text("one\ntwo".into())));
    }

    #[test]
    fn json_text_stays_text() {
        let out = convert_result(result(json!({"content": [{"type": "text", "text": "{\"a\":1}"}]})));
        assert_eq!(out, Ok(ToolOutput::Text("{\"a\":1}".into())));
    }

    #[test]
    fn structured_content_wins_over_its_text_copy() {
        let out = convert_result(result(json!({
            "content": [{"type": "text", "text": "{\"sum\":3}"}],
            "structuredContent": {"sum": 3}
        })));
        assert_eq!(out, Ok(ToolOutput::Json(json!({"sum": 3}))));
    }

    #[test]
    fn binary_content_is_described_not_sent() {
        let out = convert_result(result(json!({"content": [
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAAAA=="}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"}
        ]})));
        assert_eq!(
            out,
            Ok(ToolOutput::Text(
                "[image: image/png, 8 bytes base64]\n[audio: audio/wav, 4 bytes base64]\n\
                 [resource: file:///a.txt (text/plain)]\nhello\n\
                 [resource: file:///b.bin (unknown type), 8 bytes base64]\n[resource link: file:///c]"
                    .into()
            ))
        );
    }

    #[test]
    fn is_error_becomes_a_failed_tool_error() {
        let out =
            convert_result(result(json!({"content": [{"type": "text", "text": "no such repo"}], "isError": true})));
        assert_eq!(out, Err(ToolError::Failed("no such repo".into())));
        let out = convert_result(result(json!({"structuredContent": {"code": 7}, "isError": true})));
        assert_eq!(out, Err(ToolError::Failed("{\"code\":7}".into())));
        let out = convert_result(result(json!({"content": [], "isError": true})));
        assert!(matches!(out, Err(ToolError::Failed(m)) if m.contains("without a message")));
    }

    #[test]
    fn empty_content_is_empty_text() {
        assert_eq!(convert_result(result(json!({"content": []}))), Ok(ToolOutput::Text(String::new())));
    }
}
