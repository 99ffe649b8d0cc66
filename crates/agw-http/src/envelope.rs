//! The `{code,msg,data}` JSON envelope of every non-SSE endpoint (`docs/contract/http-api.md` §0.3).

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde::Serialize;
use serde_json::json;

use crate::body::{BoxBody, full};
use crate::runs::RunError;

/// A request that cannot be served: the status and the message for `msg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP status, also sent as the envelope's `code`.
    pub status: StatusCode,
    /// The human-readable reason, sent as `msg`.
    pub msg: String,
    /// For answers a client acts on (`seq_expired`, `chat_busy`): the body's fields, a string
    /// `code` first, instead of the plain envelope.
    pub body: Option<serde_json::Map<String, serde_json::Value>>,
    /// Sent as `Retry-After` (whole seconds, at least 1) when set (429 quota answers).
    pub retry_after: Option<std::time::Duration>,
}

impl ApiError {
    /// An error with this status and message (the plain envelope).
    pub fn new(status: StatusCode, msg: impl Into<String>) -> Self {
        Self { status, msg: msg.into(), body: None, retry_after: None }
    }
    /// 409 with a machine-readable body: `fields` (an object with a string `code`) plus `msg`.
    pub fn conflict(msg: impl Into<String>, fields: serde_json::Value) -> Self {
        Self::with_fields(StatusCode::CONFLICT, msg, fields)
    }
    /// `status` with a machine-readable body: `fields` (an object with a string `code`) plus `msg`.
    pub fn with_fields(status: StatusCode, msg: impl Into<String>, fields: serde_json::Value) -> Self {
        let body = match fields {
            serde_json::Value::Object(map) => Some(map),
            _ => None,
        };
        Self { status, msg: msg.into(), body, retry_after: None }
    }
    /// 400: the request is malformed; `msg` names the problem (often the field).
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, msg.into())
    }
    /// `msg` is prefixed with `forbidden: `, as 401 messages are with `unauthorized: `.
    pub fn forbidden(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, format!("forbidden: {}", msg.into()))
    }
    /// 404: `msg` says what was not found.
    pub fn not_found(msg: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, msg.into())
    }
    /// 413: the body exceeded `limit` bytes.
    pub fn payload_too_large(limit: usize) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, format!("request body larger than {limit} bytes"))
    }
    /// 408: the request body did not arrive within `timeout`.
    pub fn request_timeout(timeout: std::time::Duration) -> Self {
        Self::new(StatusCode::REQUEST_TIMEOUT, format!("request body not received within {} ms", timeout.as_millis()))
    }

    /// 405 on a known path.
    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
    }
    /// 500 with a fixed message: the details go to the log, never to the client.
    pub fn internal() -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "Internal server error")
    }

    /// The envelope `{"code":<status>,"msg":<msg>,"data":{}}` with that status (or the
    /// machine-readable body, see [`Self::conflict`]).
    pub fn into_response(self) -> Response<BoxBody> {
        let mut response = if let Some(mut fields) = self.body {
            fields.insert("msg".into(), self.msg.into());
            json_response(self.status, &fields)
        } else {
            let body = json!({ "code": self.status.as_u16(), "msg": self.msg, "data": {} });
            json_response(self.status, &body)
        };
        if let Some(after) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(after.as_secs().max(1)));
        }
        response
    }

    /// Adds `Retry-After`.
    pub fn with_retry_after(mut self, after: std::time::Duration) -> Self {
        self.retry_after = Some(after);
        self
    }
}

/// `{"code":0,"msg":"success","data":<data>}`.
pub fn success<T: Serialize>(data: &T) -> Response<BoxBody> {
    #[derive(Serialize)]
    struct Envelope<'a, T> {
        code: u16,
        msg: &'static str,
        data: &'a T,
    }
    json_response(StatusCode::OK, &Envelope { code: 0, msg: "success", data })
}

/// `value` as a JSON body with `status`; 500 with the error envelope if it cannot be serialised.
pub fn json_response<T: Serialize>(status: StatusCode, value: &T) -> Response<BoxBody> {
    let (status, bytes) = match serde_json::to_vec(value) {
        Ok(v) => (status, Bytes::from(v)),
        Err(e) => {
            tracing::error!(error = %e, "response serialisation failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                Bytes::from_static(br#"{"code":500,"msg":"Internal server error","data":{}}"#),
            )
        }
    };
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

/// The one place the run core's refusals become status codes and bodies: each machine-readable
/// `code` of `docs/contract/http-api.md` comes from its variant.
impl From<RunError> for ApiError {
    fn from(error: RunError) -> Self {
        let msg = error.to_string();
        match error {
            RunError::Invalid { .. } | RunError::NoAgents | RunError::SeqAhead { .. } => ApiError::bad_request(msg),
            RunError::AgentNotFound { .. }
            | RunError::ChatNotFound { .. }
            | RunError::RunNotFound { .. }
            | RunError::NotWaiting { .. } => ApiError::not_found(msg),
            RunError::ChatBusy { chat_id, run_id } => {
                ApiError::conflict(msg, json!({"code": "chat_busy", "chatId": chat_id, "runId": run_id}))
            }
            RunError::QuotaExceeded { exceeded } => ApiError::with_fields(
                StatusCode::TOO_MANY_REQUESTS,
                msg,
                json!({
                    "code": "quota_exceeded",
                    "quota": exceeded.quota,
                    "limit": exceeded.limit,
                    "retryAfter": exceeded.retry_after_secs(),
                }),
            )
            .with_retry_after(exceeded.retry_after),
            RunError::ForkPointNotFound { chat_id, run_id, step_seq } => ApiError::with_fields(
                StatusCode::NOT_FOUND,
                msg,
                json!({"code": "fork_point_not_found", "chatId": chat_id, "runId": run_id, "stepSeq": step_seq}),
            ),
            RunError::RunFinished { run_id, status } => {
                ApiError::conflict(msg, json!({"code": "run_finished", "runId": run_id, "status": status}))
            }
            RunError::SteerQueueFull { run_id, .. } => ApiError::with_fields(
                StatusCode::TOO_MANY_REQUESTS,
                msg,
                json!({"code": "steer_queue_full", "runId": run_id}),
            ),
            RunError::TooManyObservers { run_id, .. } => ApiError::with_fields(
                StatusCode::TOO_MANY_REQUESTS,
                msg,
                json!({"code": "too_many_observers", "runId": run_id}),
            ),
            RunError::SeqExpired { run_id, last_seq, oldest, latest } => ApiError::conflict(
                msg,
                json!({"code": "seq_expired", "runId": run_id, "oldestSeq": oldest, "latestSeq": latest, "lastSeq": last_seq}),
            ),
            RunError::ClusterUnavailable => {
                ApiError::with_fields(StatusCode::SERVICE_UNAVAILABLE, msg, json!({"code": "cluster_unavailable"}))
            }
            RunError::OwnerUnreachable { run_id } => ApiError::with_fields(
                StatusCode::SERVICE_UNAVAILABLE,
                msg,
                json!({"code": "owner_unreachable", "runId": run_id}),
            ),
            RunError::RunMoving { run_id } => ApiError::with_fields(
                StatusCode::SERVICE_UNAVAILABLE,
                msg,
                json!({"code": "run_moving", "runId": run_id}),
            ),
            RunError::Stopping => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, msg),
            RunError::MemoryDisabled => ApiError::conflict(msg, json!({"code": "memory_disabled"})),
            RunError::Memory => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, msg),
            RunError::SummaryFailed { .. } => {
                ApiError::with_fields(StatusCode::BAD_GATEWAY, msg, json!({"code": "summary_failed"}))
            }
            RunError::Internal { message } => {
                tracing::error!(%message, "internal error");
                ApiError::internal()
            }
        }
    }
}
