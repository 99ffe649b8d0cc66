//! The [`Tool`] trait every backend implementation satisfies, and the values that cross it.

use futures::future::BoxFuture;
use serde_json::Value;

use crate::definition::default_parameters;

/// A backend tool implementation (docs/contract/tools-skills-viewports.md §4).
///
/// Object safe: the registry holds implementations as `Arc<dyn Tool>`. `call` returns a boxed
/// future; dropping it must stop the work (a tool that starts a process spawns it with
/// `kill_on_drop`), because that is how a cancelled run or a timeout stops a tool.
pub trait Tool: Send + Sync {
    /// Lower-case tool name, the key the model calls it by.
    fn name(&self) -> &str;

    /// Description used when no definition file describes the tool.
    fn description(&self) -> &str {
        ""
    }

    /// JSON schema of the arguments used when no definition file describes the tool.
    fn parameters(&self) -> Value {
        default_parameters()
    }

    /// Instruction appended to the prompt for after the call, used when the definition file has
    /// none.
    fn after_call_hint(&self) -> &str {
        ""
    }

    /// Running a call twice has the effect of running it once (a read, a pure function): a
    /// call that was running when agw stopped runs again when its run is resumed. A definition
    /// file's `idempotent: true` says so for any tool.
    fn idempotent(&self) -> bool {
        false
    }

    /// Runs the tool. `args` is always a JSON object ([`crate::execute_backend`] turns anything
    /// else into `{}`), with argument templates already resolved.
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;

    /// [`Self::call`], sending the text of the answer to `text` as it arrives (a remote agent
    /// run as a sub-agent streams into its child's lane); the default streams nothing.
    fn call_streaming<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolContext,
        text: futures::channel::mpsc::UnboundedSender<String>,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        drop(text);
        self.call(args, ctx)
    }
}

/// What a tool returns: a JSON value or plain text — or, instead of a result, that it cannot go
/// on without the user (`docs/pausing-tools.md`).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutput {
    /// A JSON result, sent to the model compact with its key order kept.
    Json(Value),
    /// A text result, sent as-is.
    Text(String),
    /// No result: the user must act first (top up credits, sign in, …). A run pauses the call,
    /// shows the status to its client and, when the user says "continue", calls the tool again
    /// with the same arguments and [`ToolContext::continued`] one higher.
    NeedsUser(UserStatus),
}

impl ToolOutput {
    /// The output a tool that speaks JSON (a script's stdout, an MCP result) gave: a JSON value
    /// whose only top-level key is `needsUser` asks for the user ([`UserStatus::from_signal`]);
    /// anything else is a JSON result.
    pub fn from_json(value: Value) -> ToolOutput {
        match UserStatus::from_signal(&value) {
            Some(status) => ToolOutput::NeedsUser(status),
            None => ToolOutput::Json(value),
        }
    }

    /// The text sent to the model as the tool result (§5.4): text as-is, JSON compact with its
    /// key order kept, JSON null as `null`; a [`ToolOutput::NeedsUser`] seen where nobody can
    /// be asked is its [`UserStatus::unanswered_result`].
    pub fn to_result_text(&self) -> String {
        match self {
            ToolOutput::Text(text) => text.clone(),
            ToolOutput::Json(value) => value.to_string(),
            ToolOutput::NeedsUser(status) => status.unanswered_result(),
        }
    }
}

/// The `code` of a [`UserStatus`] a tool gives none: the source document's "credits exhausted"
/// (-1002), the status that pauses a run until the user acts.
pub const NEEDS_USER_CODE: i64 = -1002;

/// The code of the user's "continue" (-2001): a client may answer a pause with `{"code": -2001}`.
pub const CONTINUE_CODE: i64 = -2001;

/// Most characters of a [`UserStatus::message`]; a longer one is cut (with `…`).
pub const USER_STATUS_MESSAGE_MAX_CHARS: usize = 500;

/// Most bytes of a [`UserStatus::data`] (compact JSON); larger data is dropped (`{}`) and the
/// message kept.
pub const USER_STATUS_DATA_MAX_BYTES: usize = 8 * 1024;

/// The message of a status that gives none.
const DEFAULT_STATUS_MESSAGE: &str = "The tool needs you to act before it can go on.";

/// Why a tool cannot go on without the user: shown to the user (`awaiting.ask` `mode: "status"`),
/// never to the model. Built through [`UserStatus::new`] or [`UserStatus::from_signal`], both
/// bounded: a tool may be hostile, and what it says reaches a person's screen and the history.
#[derive(Debug, Clone, PartialEq)]
pub struct UserStatus {
    /// The status code; [`NEEDS_USER_CODE`] unless the tool says otherwise.
    pub code: i64,
    /// What the user is told (at most [`USER_STATUS_MESSAGE_MAX_CHARS`] characters, no control
    /// characters but newlines and tabs).
    pub message: String,
    /// What a client needs to render the status (a balance, a price, a link): a JSON object of
    /// at most [`USER_STATUS_DATA_MAX_BYTES`] bytes.
    pub data: Value,
}

impl UserStatus {
    /// A status with [`NEEDS_USER_CODE`], `message` (bounded) and empty data.
    pub fn new(message: impl Into<String>) -> UserStatus {
        UserStatus { code: NEEDS_USER_CODE, message: String::new(), data: Value::Object(Default::default()) }
            .with_message(message)
    }

    /// The same status with another code.
    pub fn with_code(mut self, code: i64) -> UserStatus {
        self.code = code;
        self
    }

    /// The same status with another message (bounded).
    pub fn with_message(mut self, message: impl Into<String>) -> UserStatus {
        self.message = bounded_message(&message.into());
        self
    }

    /// The same status with `data` (an object of at most [`USER_STATUS_DATA_MAX_BYTES`]; else
    /// `{}`).
    pub fn with_data(mut self, data: Value) -> UserStatus {
        self.data = bounded_data(data);
        self
    }

    /// This status within its bounds (for a status built field by field).
    pub fn bounded(self) -> UserStatus {
        let UserStatus { code, message, data } = self;
        UserStatus { code, message: bounded_message(&message), data: bounded_data(data) }
    }

    /// Reads the signal of a tool that speaks JSON: a JSON object whose only key is `needsUser`,
    /// holding `{"code"?, "message"?, "data"?}`. `None` when `value` is not that (a result);
    /// `{"needsUser": null}` and `{"needsUser": false}` are results too. Lenient and bounded: a
    /// code that is not an integer is [`NEEDS_USER_CODE`], a missing or non-string message a
    /// default one, data that is not an object (or too big) `{}`; `{"needsUser": "text"}` is
    /// that message.
    pub fn from_signal(value: &Value) -> Option<UserStatus> {
        let object = value.as_object()?;
        if object.len() != 1 {
            return None;
        }
        let signal = object.get("needsUser")?;
        let status = match signal {
            Value::Null | Value::Bool(false) => return None,
            Value::String(message) => UserStatus::new(message.as_str()),
            Value::Object(fields) => {
                let message = fields.get("message").and_then(Value::as_str).unwrap_or_default();
                let mut status = UserStatus::new(message);
                if let Some(code) = fields.get("code").and_then(Value::as_i64) {
                    status.code = code;
                }
                if let Some(data) = fields.get("data") {
                    status = status.with_data(data.clone());
                }
                status
            }
            _ => UserStatus::new(""),
        };
        Some(status)
    }

    /// The signal a JSON-speaking tool writes for this status (`{"needsUser":{code,message,data}}`).
    pub fn to_signal(&self) -> Value {
        serde_json::json!({"needsUser": {"code": self.code, "message": self.message, "data": self.data}})
    }

    /// The result a model gets for a call that asked for the user where nobody can be asked
    /// (a tool run outside a run, e.g. directly): `{"executed":false,"reason":"needs_user",
    /// "detail":"<message>","code":<code>}`.
    pub fn unanswered_result(&self) -> String {
        serde_json::json!({"executed": false, "reason": "needs_user",
            "detail": format!("the tool needs the user: {}", self.message), "code": self.code})
        .to_string()
    }
}

/// `message` without control characters (newlines and tabs stay), trimmed, at most
/// [`USER_STATUS_MESSAGE_MAX_CHARS`] characters; empty: the default message.
fn bounded_message(message: &str) -> String {
    let clean: String = message.trim().chars().filter(|c| !c.is_control() || *c == '\n' || *c == '\t').collect();
    if clean.trim().is_empty() {
        return DEFAULT_STATUS_MESSAGE.to_owned();
    }
    if clean.chars().count() <= USER_STATUS_MESSAGE_MAX_CHARS {
        return clean;
    }
    let mut cut: String = clean.chars().take(USER_STATUS_MESSAGE_MAX_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// `data` when it is an object within [`USER_STATUS_DATA_MAX_BYTES`], else `{}`.
fn bounded_data(data: Value) -> Value {
    match data {
        Value::Object(_) if data.to_string().len() <= USER_STATUS_DATA_MAX_BYTES => data,
        Value::Object(_) => {
            tracing::warn!(max = USER_STATUS_DATA_MAX_BYTES, "a tool's status data is too big; dropped");
            Value::Object(Default::default())
        }
        _ => Value::Object(Default::default()),
    }
}

/// Why a tool call failed. The display text becomes the `error` of the error result object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The arguments can never work; retrying would give the same answer, so it is never retried.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// A runtime failure that may go away; retried up to the budget's `retryCount`.
    #[error("{0}")]
    Failed(String),
}

/// Facts about the run a tool is called from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolContext {
    /// The calling run's id.
    pub run_id: String,
    /// The chat the calling run belongs to.
    pub chat_id: String,
    /// What the calling agent lets model-started code do; the default grants nothing.
    pub grants: CodeGrants,
    /// How many times the user already said "continue" to this call after it answered
    /// [`ToolOutput::NeedsUser`]: 0 on the first call. A tool that paused may decide
    /// differently now (look at the balance again; the bundled `mock_image_generate` goes on
    /// once it is 1 or more).
    pub continued: u32,
    /// What the user answered the pause with, when the answer carried one (`continue` with an
    /// `answer`, `docs/pausing-tools.md`): the tool asked something and gets the reply.
    pub reply: Option<UserReply>,
}

/// The user's reply to a paused call: their `answer`, and the status data the call paused with
/// (so the tool knows what was asked, across a restart too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserReply {
    /// The `answer` of the submit (any JSON; usually text).
    pub answer: Value,
    /// The [`UserStatus::data`] the call paused with.
    pub paused_with: Value,
}

impl ToolContext {
    /// A context that grants nothing; add grants with [`Self::with_grants`].
    pub fn new(run_id: impl Into<String>, chat_id: impl Into<String>) -> ToolContext {
        ToolContext {
            run_id: run_id.into(),
            chat_id: chat_id.into(),
            grants: CodeGrants::default(),
            continued: 0,
            reply: None,
        }
    }

    /// The same context with the calling agent's grants.
    pub fn with_grants(mut self, grants: CodeGrants) -> ToolContext {
        self.grants = grants;
        self
    }

    /// The same context for a call the user continued `continued` times.
    pub fn with_continued(mut self, continued: u32) -> ToolContext {
        self.continued = continued;
        self
    }

    /// The same context carrying the user's reply to the call's last pause.
    pub fn with_reply(mut self, reply: Option<UserReply>) -> ToolContext {
        self.reply = reply;
        self
    }
}

/// What an agent's definition allows the code its model starts (`_skill_run_script_`,
/// `_bash_`). The default allows nothing, so a caller that forgets to pass an agent's grants
/// fails closed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodeGrants {
    /// Skill ids the agent configures (trimmed, lower-case): the only skills whose scripts run.
    pub skills: Vec<String>,
    /// `skillConfig.allowInlineCode`: `_skill_run_script_` may run inline `pythonCode`.
    pub allow_inline_code: bool,
    /// `sandbox.network`: started processes may open IP sockets.
    pub network: bool,
    /// `sandbox.unixSockets`: started processes may open `AF_UNIX` sockets, and so connect to any
    /// pathname socket file permissions let them write (a local database's, D-Bus's).
    pub unix_sockets: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_signal_is_an_object_whose_only_key_is_needs_user() {
        let status = UserStatus::from_signal(
            &json!({"needsUser": {"code": -1002, "message": "Top up", "data": {"balance": 0, "price": 10}}}),
        )
        .unwrap();
        assert_eq!(status, UserStatus::new("Top up").with_data(json!({"balance": 0, "price": 10})));
        assert_eq!(
            status.to_signal(),
            json!({"needsUser": {"code": -1002, "message": "Top up", "data": {"balance": 0, "price": 10}}})
        );
        assert_eq!(UserStatus::from_signal(&status.to_signal()), Some(status));

        // Results, not signals.
        for value in [
            json!({"needsUser": {"message": "x"}, "other": 1}),
            json!({"needsuser": {"message": "x"}}),
            json!({"needsUser": null}),
            json!({"needsUser": false}),
            json!([{"needsUser": {}}]),
            json!("needsUser"),
            json!({}),
        ] {
            assert_eq!(UserStatus::from_signal(&value), None, "{value}");
            assert_eq!(ToolOutput::from_json(value.clone()), ToolOutput::Json(value));
        }
    }

    #[test]
    fn a_signal_is_read_leniently_and_bounded() {
        let default = UserStatus::from_signal(&json!({"needsUser": {}})).unwrap();
        assert_eq!((default.code, default.message.as_str()), (NEEDS_USER_CODE, DEFAULT_STATUS_MESSAGE));
        assert_eq!(default.data, json!({}));
        let text = UserStatus::from_signal(&json!({"needsUser": "Sign in first"})).unwrap();
        assert_eq!(text.message, "Sign in first");
        let odd = UserStatus::from_signal(&json!({"needsUser": {"code": "x", "message": 5, "data": [1, 2]}})).unwrap();
        assert_eq!((odd.code, odd.message.as_str(), &odd.data), (NEEDS_USER_CODE, DEFAULT_STATUS_MESSAGE, &json!({})));
        let other = UserStatus::from_signal(&json!({"needsUser": {"code": -1003, "message": "Log in"}})).unwrap();
        assert_eq!(other.code, -1003);
        assert_eq!(UserStatus::from_signal(&json!({"needsUser": true})).unwrap().message, DEFAULT_STATUS_MESSAGE);

        let long = "é".repeat(USER_STATUS_MESSAGE_MAX_CHARS + 50);
        let cut = UserStatus::from_signal(&json!({"needsUser": {"message": long}})).unwrap();
        assert_eq!(cut.message.chars().count(), USER_STATUS_MESSAGE_MAX_CHARS);
        assert!(cut.message.ends_with('…'));
        let controls = UserStatus::new("  bell\u{7} and\u{1b}[31m red\nline\t ");
        assert_eq!(controls.message, "bell and[31m red\nline");

        let big = json!({"blob": "x".repeat(USER_STATUS_DATA_MAX_BYTES)});
        assert_eq!(UserStatus::new("m").with_data(big.clone()).data, json!({}));
        let built = UserStatus { code: 1, message: "\u{0}".into(), data: big }.bounded();
        assert_eq!((built.message.as_str(), &built.data), (DEFAULT_STATUS_MESSAGE, &json!({})));
    }

    #[test]
    fn a_pause_where_nobody_can_answer_is_a_result_saying_so() {
        let output = ToolOutput::NeedsUser(UserStatus::new("Not enough credits"));
        let text: Value = serde_json::from_str(&output.to_result_text()).unwrap();
        assert_eq!(
            text,
            json!({"executed": false, "reason": "needs_user", "detail": "the tool needs the user: Not enough credits", "code": -1002})
        );
    }
}
