//! What callers send the run service and get back, and how an operation forwarded to another
//! replica travels: the request, its caller, and the answer or the typed refusal.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use agw_cluster::{ControlKind, ControlReply};
use agw_protocol::request::SubmitRequest;

use crate::principal::Principal;
use crate::{Observer, RunError};

/// A run's stream, as an attach gets it.
pub enum Attached {
    /// A run this replica holds: its buffer, then live.
    Here(Observer),
    /// A run another replica holds (or held): its SSE frames from the cluster, ending after its
    /// terminal event.
    Elsewhere(futures::stream::BoxStream<'static, Bytes>),
}

/// The answer to an interrupt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Interrupted {
    /// The cancellation was requested now (`false`: the run had already finished).
    pub accepted: bool,
    /// `cancelled`, `cancelling`, or how the run had ended.
    pub status: String,
    /// The run.
    pub run_id: String,
    /// For people.
    pub detail: String,
}

/// A steer: a user message the run takes at its next model-turn boundary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SteerRequest {
    /// The run.
    pub run_id: String,
    /// The message; must not be blank.
    pub message: String,
    /// The caller's id for the steer; one is made when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steer_id: Option<String>,
    /// The caller's request id, echoed in the steer's events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// The answer to a steer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Steered {
    /// Always `true`: a refused steer is a [`RunError`].
    pub accepted: bool,
    /// `queued`.
    pub status: String,
    /// The run.
    pub run_id: String,
    /// The steer's id.
    pub steer_id: String,
    /// For people.
    pub detail: String,
}

/// The answer to a submit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Submitted {
    /// The answer reached a waiting call.
    pub accepted: bool,
    /// `accepted`, `already_answered` or `unmatched`.
    pub status: String,
    /// The run.
    pub run_id: String,
    /// The call answered.
    pub tool_id: String,
    /// For people.
    pub detail: String,
    /// The request's `awaitingId`, echoed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub awaiting_id: Option<String>,
}

/// The answer to a chat's deletion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatDeleted {
    /// The chat (canonical).
    pub chat_id: String,
    /// Always `true`: a chat that cannot be deleted is a [`RunError`].
    pub deleted: bool,
}

/// The answer to a compaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Compacted {
    /// The chat.
    pub chat_id: String,
    /// A checkpoint was written.
    pub compacted: bool,
    /// Why nothing was compacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The newest run the summary covers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub through_run_id: Option<String>,
    /// Messages the summary replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_messages: Option<u64>,
    /// Estimated tokens of the history before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_before: Option<u64>,
    /// Estimated tokens after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_after: Option<u64>,
    /// The summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// An operation forwarded to the replica that holds the run.
pub(crate) enum Control {
    Interrupt,
    Steer(SteerRequest),
    Submit(SubmitRequest),
}

impl Control {
    pub(crate) fn kind(&self) -> ControlKind {
        match self {
            Control::Interrupt => ControlKind::Interrupt,
            Control::Steer(_) => ControlKind::Steer,
            Control::Submit(_) => ControlKind::Submit,
        }
    }

    /// The request's body as it travels.
    pub(crate) fn body(&self) -> Value {
        match self {
            Control::Interrupt => Value::Null,
            Control::Steer(steer) => serde_json::to_value(steer).unwrap_or_default(),
            Control::Submit(submit) => serde_json::to_value(submit).unwrap_or_default(),
        }
    }

    /// The owner's reading of a forwarded body.
    pub(crate) fn decode(kind: ControlKind, run_id: &str, body: Value) -> Result<Control, RunError> {
        let invalid =
            |e: &dyn std::fmt::Display| RunError::invalid(format!("invalid forwarded {kind} for {run_id}: {e}"));
        match kind {
            ControlKind::Interrupt => Ok(Control::Interrupt),
            ControlKind::Steer => serde_json::from_value(body).map(Control::Steer).map_err(|e| invalid(&e)),
            ControlKind::Submit => {
                let bytes = serde_json::to_vec(&body).unwrap_or_default();
                SubmitRequest::from_json(&bytes).map(Control::Submit).map_err(|e| invalid(&e))
            }
        }
    }
}

/// A control handler's answer as it travels: the answer's data, or the typed refusal.
pub(crate) fn reply<T: serde::Serialize>(result: Result<T, RunError>) -> ControlReply {
    match result.map(|data| serde_json::to_value(data)) {
        Ok(Ok(data)) => ControlReply { status: 200, body: json!({ "data": data }) },
        Ok(Err(e)) => reply(Err::<(), _>(RunError::internal(format!("the answer did not encode: {e}")))),
        Err(error) => ControlReply { status: 409, body: json!({ "error": error }) },
    }
}

/// The forwarding side of [`reply`]: the answer, or the refusal as the owner typed it.
pub(crate) fn decode_reply<T: serde::de::DeserializeOwned>(reply: ControlReply) -> Result<T, RunError> {
    let refused = || RunError::internal("refused by the run's replica");
    if reply.status == 200 {
        let data = reply.body.get("data").cloned().unwrap_or(Value::Null);
        return serde_json::from_value(data).map_err(|_| refused());
    }
    Err(reply.body.get("error").and_then(|e| serde_json::from_value(e.clone()).ok()).unwrap_or_else(refused))
}

/// The caller of a forwarded request as it travels (the [`Principal`] the forwarding replica
/// authenticated).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Caller {
    sub: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    operator: bool,
}

impl Caller {
    pub(crate) fn of(p: &Principal) -> Caller {
        Caller { sub: p.subject.clone(), tenant: p.tenant.clone(), operator: p.operator }
    }

    /// The principal it names; `None` for a blank subject (no owner has one).
    pub(crate) fn principal(self) -> Option<Principal> {
        (!self.sub.trim().is_empty()).then_some(Principal {
            subject: self.sub,
            tenant: self.tenant,
            operator: self.operator,
        })
    }
}
