//! Request bodies of `POST /api/ap/query` and `POST /api/ap/submit` (`docs/contract/http-api.md`
//! §5, §6), plus the small pure helpers around them.
//!
//! Unknown fields are ignored everywhere (agw decision; the reference rejected them). Type errors
//! are reported naming the field through [`QueryRequest::from_json`] /
//! [`SubmitRequest::from_json`], so the HTTP layer can answer
//! `400 {"code":400,"msg":"<which field and why>"}`.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::echoed::deserialize_lenient_scene;
use crate::event::RequestQuery;
use crate::ids;

pub use crate::echoed::{Reference, Scene};

/// Client params keys that are internal to the gateway and never echoed in `request.query`.
pub const INTERNAL_PARAM_KEYS: &[&str] = &["__agw_emit_chat_start"];

/// Why a request body was rejected. `Display` is the text for the 400 envelope's `msg`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The body is not JSON; holds the parser's message.
    #[error("invalid JSON body: {0}")]
    Json(String),
    /// The body is JSON but not an object.
    #[error("request body must be a JSON object")]
    NotAnObject,
    /// `{field} {reason}`, e.g. `message must not be blank`.
    #[error("{field} {reason}")]
    Field {
        /// The wire name of the field (`message`, `chatId`, …).
        field: &'static str,
        /// What is wrong with it, e.g. `must not be blank`.
        reason: String,
    },
}

impl RequestError {
    fn field(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Field { field, reason: reason.into() }
    }

    /// The offending field, when the error is about one.
    pub fn field_name(&self) -> Option<&'static str> {
        match self {
            Self::Field { field, .. } => Some(field),
            _ => None,
        }
    }
}

/// Body of `POST /api/ap/query`. Every field is optional at the type level; [`Self::validate`]
/// enforces the rules.
///
/// Serialising writes all nine keys in this order, absent ones as `null` — the exact shape of
/// the `query` object of a history query line (`docs/contract/memory-jsonl.md` §2.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueryRequest {
    /// Client correlation id; blank or absent means the run id (see
    /// [`Self::effective_request_id`]).
    #[serde(default)]
    pub request_id: Option<String>,
    /// The chat to continue, any UUID form; blank or absent starts a new chat (see
    /// [`Self::canonical_chat_id`]).
    #[serde(default)]
    pub chat_id: Option<String>,
    /// The agent to run, as sent; blank, `auto` or `default` mean the default agent.
    #[serde(default)]
    pub agent_key: Option<String>,
    /// Echoed and persisted only (the model always gets a user message); blank or absent
    /// means `user` (see [`Self::effective_role`]).
    #[serde(default)]
    pub role: Option<String>,
    /// The user's message, sent verbatim to the model. Required and non-blank.
    #[serde(default)]
    pub message: Option<String>,
    /// Attachments the client refers to: echoed, persisted and replayed, never sent to the
    /// model.
    #[serde(default)]
    pub references: Option<Vec<Reference>>,
    /// Free-form client parameters; echoed (minus [`INTERNAL_PARAM_KEYS`]) and persisted only.
    #[serde(default)]
    pub params: Option<Map<String, Value>>,
    /// Where the user is (`{url, title}`); echoed and persisted only. A JSON string holding the
    /// object is accepted too.
    #[serde(default, deserialize_with = "deserialize_lenient_scene")]
    pub scene: Option<Scene>,
    /// Echoed and persisted only: the response is always an SSE stream.
    #[serde(default)]
    pub stream: Option<bool>,
    /// agw extension: what the run does when its last observer leaves — `cancel` (at once) or
    /// `continue` (to the end); absent: the server's detach grace period. A transport option:
    /// never echoed or persisted.
    #[serde(default, skip_serializing)]
    pub on_disconnect: Option<OnDisconnect>,
    /// agw extension: a JSON Schema the run's answer must match (structured output,
    /// docs/models.md); replaces the agent's `outputSchema` for this run. Persisted with the
    /// query (a run continued after a restart keeps it), never echoed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

/// The query's `onDisconnect` (see [`QueryRequest::on_disconnect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnDisconnect {
    /// Cancel the run when its last observer leaves (the reference's behaviour).
    Cancel,
    /// Let the run finish even when nobody watches; it stays attachable.
    Continue,
}

impl QueryRequest {
    /// Parses a request body, naming the field on type errors (`stream: invalid type: …`).
    pub fn from_json(body: &[u8]) -> Result<Self, RequestError> {
        let mut map = parse_object(body)?;
        Ok(Self {
            request_id: take(&mut map, "requestId")?,
            chat_id: take(&mut map, "chatId")?,
            agent_key: take(&mut map, "agentKey")?,
            role: take(&mut map, "role")?,
            message: take(&mut map, "message")?,
            references: take(&mut map, "references")?,
            params: take(&mut map, "params")?,
            scene: match map.remove("scene") {
                None => None,
                Some(v) => deserialize_lenient_scene(v)
                    .map_err(|e| RequestError::field("scene", format!("is invalid: {e}")))?,
            },
            stream: take(&mut map, "stream")?,
            on_disconnect: take(&mut map, "onDisconnect")?,
            output_schema: match map.remove("outputSchema") {
                None | Some(Value::Null) => None,
                Some(schema @ Value::Object(_)) => Some(schema),
                Some(_) => return Err(RequestError::field("outputSchema", "must be a JSON Schema object")),
            },
        })
    }

    /// Checks the rules of `docs/contract/http-api.md` §5 that need no server state: `message` present and
    /// non-blank; `chatId`, when present and non-blank, a UUID.
    pub fn validate(&self) -> Result<(), RequestError> {
        if self.message.as_deref().is_none_or(|m| m.trim().is_empty()) {
            return Err(RequestError::field("message", "must not be blank"));
        }
        self.canonical_chat_id().map(|_| ())
    }

    /// The chat id in canonical lower-case 8-4-4-4-12 form; `Ok(None)` when absent or blank
    /// (the server then generates one).
    pub fn canonical_chat_id(&self) -> Result<Option<String>, RequestError> {
        match self.chat_id.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(raw) => {
                ids::canonical_uuid(raw).map(Some).ok_or_else(|| RequestError::field("chatId", "must be a valid UUID"))
            }
        }
    }

    /// The trimmed `requestId`, or `run_id` when absent/blank.
    pub fn effective_request_id(&self, run_id: &str) -> String {
        non_blank_trimmed(self.request_id.as_deref()).unwrap_or(run_id).to_owned()
    }

    /// The trimmed `role`, or `user` when absent/blank.
    pub fn effective_role(&self) -> String {
        non_blank_trimmed(self.role.as_deref()).unwrap_or("user").to_owned()
    }

    /// Builds the `request.query` payload (§3.1): requestId/role defaulted, `agentKey` raw,
    /// `params` without [`INTERNAL_PARAM_KEYS`] and omitted when empty.
    pub fn to_event(&self, run_id: &str, chat_id: &str) -> RequestQuery {
        let params = self.params.as_ref().and_then(|params| {
            let kept: Map<String, Value> = params
                .iter()
                .filter(|(k, _)| !INTERNAL_PARAM_KEYS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            (!kept.is_empty()).then_some(kept)
        });
        RequestQuery {
            request_id: self.effective_request_id(run_id),
            chat_id: chat_id.to_owned(),
            role: self.effective_role(),
            message: self.message.clone().unwrap_or_default(),
            agent_key: self.agent_key.clone(),
            references: self.references.clone(),
            params,
            scene: self.scene.clone(),
            stream: self.stream,
        }
    }
}

/// Body of `POST /api/ap/submit`. Missing fields deserialise as blank/`null` so that
/// [`Self::validate`] can name them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubmitRequest {
    /// The waiting run, as streamed in `run.start`; must not be blank.
    #[serde(default)]
    pub run_id: String,
    /// The waiting frontend tool call, as streamed in `tool.start`; must not be blank.
    #[serde(default)]
    pub tool_id: String,
    /// Any JSON value; `null`/absent is rejected by [`Self::validate`].
    #[serde(default)]
    pub params: Value,
    /// The successor protocol's name for the wait (`awaiting.ask`'s `awaitingId`, which is the
    /// call id); when given without `toolId` it is the call answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_id: Option<String>,
}

impl SubmitRequest {
    /// Parses a request body, naming the field on type errors.
    pub fn from_json(body: &[u8]) -> Result<Self, RequestError> {
        let mut map = parse_object(body)?;
        let awaiting_id: Option<String> = take(&mut map, "awaitingId")?;
        let tool_id: Option<String> = take(&mut map, "toolId")?;
        Ok(Self {
            run_id: take(&mut map, "runId")?.unwrap_or_default(),
            tool_id: match tool_id {
                Some(tool) if !tool.trim().is_empty() || awaiting_id.is_none() => tool,
                _ => awaiting_id.clone().unwrap_or_default(),
            },
            params: map.remove("params").unwrap_or(Value::Null),
            awaiting_id,
        })
    }

    /// `runId`, `toolId` non-blank; `params` present and not `null`.
    pub fn validate(&self) -> Result<(), RequestError> {
        if self.run_id.trim().is_empty() {
            return Err(RequestError::field("runId", "must not be blank"));
        }
        if self.tool_id.trim().is_empty() {
            return Err(RequestError::field("toolId", "must not be blank"));
        }
        if self.params.is_null() {
            return Err(RequestError::field("params", "must not be null"));
        }
        Ok(())
    }

    /// The waiter key `trim(runId) + "#" + trim(toolId)` (`docs/contract/http-api.md` §6).
    pub fn waiter_key(&self) -> String {
        format!("{}#{}", self.run_id.trim(), self.tool_id.trim())
    }
}

fn non_blank_trimmed(value: Option<&str>) -> Option<&str> {
    value.map(str::trim).filter(|v| !v.is_empty())
}

fn parse_object(body: &[u8]) -> Result<Map<String, Value>, RequestError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(RequestError::NotAnObject),
        Err(e) => Err(RequestError::Json(e.to_string())),
    }
}

/// Removes `field` from the body and converts it; `null` counts as absent.
fn take<T: DeserializeOwned>(map: &mut Map<String, Value>, field: &'static str) -> Result<Option<T>, RequestError> {
    match map.remove(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => {
            serde_json::from_value(value).map(Some).map_err(|e| RequestError::field(field, format!("is invalid: {e}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_full_query_and_ignores_unknown_fields() {
        let body = br#"{"requestId":" r1 ","chatId":"123E4567-E89B-12D3-A456-426614174000",
            "agentKey":"auto","role":"","message":"hi","extra":1,
            "references":[{"id":"ref_001","type":"url","unknownInner":true}],
            "params":{"a":1,"__agw_emit_chat_start":true},
            "scene":{"url":"https://x","title":"t","other":2},"stream":true}"#;
        let req = QueryRequest::from_json(body).expect("valid body");
        assert_eq!(req.agent_key.as_deref(), Some("auto"));
        assert_eq!(req.references.as_ref().map(Vec::len), Some(1));
        assert_eq!(req.scene, Some(Scene { url: Some("https://x".into()), title: Some("t".into()) }));
        req.validate().expect("valid");
        // the serde derive path agrees with the field-naming parser
        let derived: QueryRequest = serde_json::from_slice(body).expect("derive");
        assert_eq!(derived, req);

        let event = req.to_event("run-1", "123e4567-e89b-12d3-a456-426614174000");
        assert_eq!(event.request_id, "r1");
        assert_eq!(event.role, "user");
        assert_eq!(event.params, Some(json!({"a":1}).as_object().cloned().unwrap_or_default()));
        let text = serde_json::to_string(&event).expect("serialise");
        assert!(text.contains(r#""references":[{"id":"ref_001","type":"url","name":null,"mimeType":null,"sizeBytes":null,"url":null,"sha256":null,"meta":null}]"#), "{text}");
        assert!(text.contains(r#""scene":{"url":"https://x","title":"t"}"#), "{text}");
    }

    #[test]
    fn request_id_defaults_to_run_id_and_internal_only_params_are_omitted() {
        let req = QueryRequest {
            message: Some("m".into()),
            params: Some(Map::from_iter([("__agw_emit_chat_start".to_owned(), json!(true))])),
            request_id: Some("   ".into()),
            ..QueryRequest::default()
        };
        let event = req.to_event("run-9", "c");
        assert_eq!(event.request_id, "run-9");
        assert_eq!(event.params, None);
    }

    #[test]
    fn on_disconnect_is_read_but_never_persisted() {
        let req = QueryRequest::from_json(br#"{"message":"x","onDisconnect":"continue"}"#).unwrap();
        assert_eq!(req.on_disconnect, Some(OnDisconnect::Continue));
        assert!(!serde_json::to_string(&req).unwrap().contains("onDisconnect"));
        let err = QueryRequest::from_json(br#"{"message":"x","onDisconnect":"later"}"#).unwrap_err();
        assert_eq!(err.field_name(), Some("onDisconnect"), "{err}");
    }

    #[test]
    fn query_serialises_all_nine_keys_for_the_history_file() {
        let req = QueryRequest {
            message: Some("x".into()),
            on_disconnect: Some(OnDisconnect::Cancel),
            ..QueryRequest::default()
        };
        assert_eq!(
            serde_json::to_string(&req).expect("serialise"),
            r#"{"requestId":null,"chatId":null,"agentKey":null,"role":null,"message":"x","references":null,"params":null,"scene":null,"stream":null}"#
        );
    }

    #[test]
    fn blank_or_missing_message_is_rejected_by_name() {
        for body in [r#"{}"#, r#"{"message":"  \n"}"#, r#"{"message":null}"#] {
            let req = QueryRequest::from_json(body.as_bytes()).expect("parses");
            let err = req.validate().expect_err("must fail");
            assert_eq!(err.to_string(), "message must not be blank");
            assert_eq!(err.field_name(), Some("message"));
        }
    }

    #[test]
    fn chat_id_rules() {
        let with = |chat: &str| QueryRequest {
            message: Some("m".into()),
            chat_id: Some(chat.into()),
            ..QueryRequest::default()
        };
        let err = with("not-a-uuid").validate().expect_err("bad uuid");
        assert_eq!(err.to_string(), "chatId must be a valid UUID");
        assert_eq!(with("  ").canonical_chat_id(), Ok(None));
        assert_eq!(
            with("5D2E8C41-9A7B-4C3D-8E1F-2A3B4C5D6E7F").canonical_chat_id(),
            Ok(Some("5d2e8c41-9a7b-4c3d-8e1f-2a3b4c5d6e7f".into()))
        );
    }

    #[test]
    fn type_errors_name_the_field() {
        let err = QueryRequest::from_json(br#"{"message":5}"#).expect_err("wrong type");
        assert_eq!(err.field_name(), Some("message"));
        assert!(err.to_string().starts_with("message is invalid: invalid type"), "{err}");
        let err = QueryRequest::from_json(br#"{"message":"m","stream":"yes"}"#).expect_err("type");
        assert_eq!(err.field_name(), Some("stream"));
        let err = QueryRequest::from_json(br#"{"message":"m","scene":[1]}"#).expect_err("type");
        assert_eq!(err.field_name(), Some("scene"));
        assert_eq!(QueryRequest::from_json(b"[1]"), Err(RequestError::NotAnObject));
        assert!(matches!(QueryRequest::from_json(b"{"), Err(RequestError::Json(_))));
    }

    #[test]
    fn string_encoded_scene_is_accepted() {
        let req = QueryRequest::from_json(br#"{"message":"m","scene":"{\"url\":\"u\"}"}"#).expect("parses");
        assert_eq!(req.scene, Some(Scene { url: Some("u".into()), title: None }));
    }

    #[test]
    fn submit_rules() {
        let ok = SubmitRequest::from_json(br#"{"runId":" r ","toolId":"t","params":{"a":1},"x":0}"#).expect("parses");
        ok.validate().expect("valid");
        assert_eq!(ok.waiter_key(), "r#t");
        assert_eq!(ok.params, json!({"a":1}));

        let cases = [
            (r#"{"toolId":"t","params":1}"#, "runId must not be blank"),
            (r#"{"runId":"r","toolId":" ","params":1}"#, "toolId must not be blank"),
            (r#"{"runId":"r","toolId":"t"}"#, "params must not be null"),
            (r#"{"runId":"r","toolId":"t","params":null}"#, "params must not be null"),
        ];
        for (body, msg) in cases {
            let req = SubmitRequest::from_json(body.as_bytes()).expect("parses");
            assert_eq!(req.validate().expect_err(body).to_string(), msg);
            let derived: SubmitRequest = serde_json::from_str(body).expect("derive");
            assert_eq!(derived, req);
        }
        let aliased = SubmitRequest::from_json(br#"{"runId":"r","awaitingId":"a","params":"once"}"#).unwrap();
        assert_eq!(
            (aliased.tool_id.as_str(), aliased.awaiting_id.as_deref()),
            ("a", Some("a")),
            "awaitingId names the call"
        );
        aliased.validate().expect("valid");
        let err = SubmitRequest::from_json(br#"{"runId":1}"#).expect_err("type");
        assert_eq!(err.field_name(), Some("runId"));
    }
}
