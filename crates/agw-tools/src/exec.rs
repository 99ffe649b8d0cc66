//! Running a backend tool under the run's tool budget, and shaping what goes back to the model
//! (docs/contract/tools-skills-viewports.md §5.3–§5.4).

use std::time::Duration;

use serde_json::{Map, Value};

use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, UserStatus};

/// Default cap on a tool result sent to the model: 50 KiB.
pub const DEFAULT_RESULT_LIMIT_BYTES: usize = 51_200;

/// How a backend call ended: a result for the model, or a pause for the user.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendOutcome {
    /// The result text: the tool's output (§5.4) or the error result object of [`error_result`].
    Result(String),
    /// The tool answered [`ToolOutput::NeedsUser`] (bounded): nothing ran to completion, the
    /// caller shows the status to the user and may call again once they continue
    /// (`docs/pausing-tools.md`). Never retried.
    NeedsUser(UserStatus),
}

impl BackendOutcome {
    /// The text for the model where nobody can be asked: the result, or the status's
    /// [`UserStatus::unanswered_result`].
    pub fn into_text(self) -> String {
        match self {
            BackendOutcome::Result(text) => text,
            BackendOutcome::NeedsUser(status) => status.unanswered_result(),
        }
    }

    /// The result text, if this is one.
    pub fn as_result(&self) -> Option<&str> {
        match self {
            BackendOutcome::Result(text) => Some(text),
            BackendOutcome::NeedsUser(_) => None,
        }
    }
}

/// Runs `tool` with `timeout` per attempt and up to `retries` extra attempts after a timeout or a
/// [`ToolError::Failed`]; [`ToolError::InvalidArguments`] is answered at once, and so is
/// [`ToolOutput::NeedsUser`] (a pause, not a failure: [`BackendOutcome::NeedsUser`], bounded).
/// Otherwise the result text: the tool's output (§5.4) or the error result object of
/// [`error_result`].
///
/// Arguments that are not a JSON object become `{}` (§4). Dropping the returned future cancels the
/// attempt in flight. The text is not truncated: apply [`truncate_output`] where it goes to the
/// model.
pub async fn execute_backend(
    tool: &dyn Tool,
    args: Value,
    ctx: &ToolContext,
    timeout: Duration,
    retries: u32,
) -> BackendOutcome {
    execute(tool, args, ctx, timeout, retries, None).await
}

/// [`execute_backend`], the text a tool streams while it runs ([`Tool::call_streaming`]) sent to
/// `progress` as it arrives. A retried attempt streams again.
pub async fn execute_backend_streaming(
    tool: &dyn Tool,
    args: Value,
    ctx: &ToolContext,
    timeout: Duration,
    retries: u32,
    progress: futures::channel::mpsc::UnboundedSender<String>,
) -> BackendOutcome {
    execute(tool, args, ctx, timeout, retries, Some(progress)).await
}

async fn execute(
    tool: &dyn Tool,
    args: Value,
    ctx: &ToolContext,
    timeout: Duration,
    retries: u32,
    progress: Option<futures::channel::mpsc::UnboundedSender<String>>,
) -> BackendOutcome {
    let args = if args.is_object() { args } else { Value::Object(Map::new()) };
    let name = tool.name();
    let mut last_error = String::new();
    for attempt in 0..=retries {
        let call = match &progress {
            Some(progress) => tool.call_streaming(args.clone(), ctx, progress.clone()),
            None => tool.call(args.clone(), ctx),
        };
        match tokio::time::timeout(timeout, call).await {
            Ok(Ok(ToolOutput::NeedsUser(status))) => {
                tracing::debug!(tool = %name, code = status.code, continued = ctx.continued, "backend tool needs the user");
                return BackendOutcome::NeedsUser(status.bounded());
            }
            Ok(Ok(output)) => return BackendOutcome::Result(output.to_result_text()),
            Ok(Err(error @ ToolError::InvalidArguments(_))) => {
                return BackendOutcome::Result(error_result(name, &error.to_string()));
            }
            Ok(Err(error @ ToolError::Failed(_))) => last_error = error.to_string(),
            Err(_elapsed) => {
                last_error = format!("Backend tool timeout: tool={name}, timeoutMs={}", timeout.as_millis());
            }
        }
        if attempt < retries {
            tracing::debug!(tool = %name, attempt = attempt + 1, error = %last_error, "backend tool attempt failed; retrying");
        }
    }
    tracing::warn!(tool = %name, error = %last_error, "backend tool failed");
    BackendOutcome::Result(error_result(name, &last_error))
}

/// The error result object `{"tool":"<name>","ok":false,"error":"<message>"}` (compact, this key
/// order).
pub fn error_result(name: &str, message: &str) -> String {
    let mut object = Map::new();
    object.insert("tool".to_owned(), Value::from(name));
    object.insert("ok".to_owned(), Value::Bool(false));
    object.insert("error".to_owned(), Value::from(message));
    Value::Object(object).to_string()
}

/// Cuts `text` to at most `limit_bytes` bytes (on a UTF-8 character boundary) and appends a notice
/// telling the model that the output was truncated and how big it was. Text within the limit is
/// returned unchanged. The notice itself comes on top of the limit.
pub fn truncate_output(text: &str, limit_bytes: usize) -> String {
    if text.len() <= limit_bytes {
        return text.to_owned();
    }
    let mut end = limit_bytes;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n…[output truncated: {} bytes total, showing the first {end}]", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_result_shape() {
        assert_eq!(error_result("x", "boom \"q\""), r#"{"tool":"x","ok":false,"error":"boom \"q\""}"#);
    }

    #[test]
    fn truncation_keeps_short_text() {
        assert_eq!(truncate_output("héllo", 6), "héllo");
        assert_eq!(truncate_output("", 0), "");
    }

    #[test]
    fn truncation_cuts_on_a_char_boundary() {
        // "é" is 2 bytes: a limit of 2 would split it, so only "h" is kept.
        let out = truncate_output("héllo", 2);
        assert_eq!(out, "h\n…[output truncated: 6 bytes total, showing the first 1]");
        // 4-byte characters.
        let text = "😀😀😀";
        for limit in 0..text.len() {
            let out = truncate_output(text, limit);
            let kept = out.split('\n').next().unwrap();
            assert_eq!(kept.len(), limit / 4 * 4, "limit {limit}");
            assert!(out.contains("12 bytes total"));
        }
    }
}
