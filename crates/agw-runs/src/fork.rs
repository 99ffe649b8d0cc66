//! Forking a chat (`POST /api/ap/chat/fork`): a new chat, owned by the caller, holding the
//! source chat's history up to a run (or a step of it); the next query into it continues from
//! there. Edit and resend is a fork `before` the run, then a query into the fork.
//!
//! Which lines are copied, and why every copied run gets a new id: `agw_memory`'s `fork.rs`.
//! Here: who may fork (whoever may read the source chat), and that the point is a finished run.

use serde::{Deserialize, Serialize};

use agw_memory::{ForkError, ForkPoint};
use agw_protocol::ids;

use crate::locate::{self, Located};
use crate::principal::{Principal, may_access};
use crate::service::RunService;
use crate::sink::now_ms;
use crate::{RunError, control};

/// Which side of the run the fork is cut on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ForkPosition {
    /// The run is the fork's last (the default).
    #[default]
    After,
    /// The fork ends just before the run (edit and resend).
    Before,
}

/// What to fork.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkRequest {
    /// The source chat.
    pub chat_id: String,
    /// The run the fork is cut at; none: the whole chat as stored.
    #[serde(default)]
    pub run_id: Option<String>,
    /// Which side of the run.
    #[serde(default)]
    pub position: ForkPosition,
    /// With `after`: keep the run's step lines only up to this `_seq`.
    #[serde(default)]
    pub step_seq: Option<i64>,
}

/// Where a fork came from, as its answer names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkedFrom {
    /// The source chat (canonical).
    pub chat_id: String,
    /// The run it was cut at, as the source names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// `after` or `before`.
    pub position: ForkPosition,
    /// The step it was cut at.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_seq: Option<i64>,
}

/// A copied run: its id in the source chat and in the fork.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkedRun {
    /// The run's id in the source chat.
    pub source_run_id: String,
    /// The id the fork gave it.
    pub run_id: String,
}

/// The answer to a fork.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatForked {
    /// The new chat.
    pub chat_id: String,
    /// Its name (the source's).
    pub chat_name: String,
    /// Where it came from.
    pub forked_from: ForkedFrom,
    /// The runs it holds, in order.
    pub runs: Vec<ForkedRun>,
}

impl RunService {
    /// Forks a chat the caller may read (another user's answers [`RunError::ChatNotFound`],
    /// like an absent one) into a new chat the caller owns. [`RunError::ForkPointNotFound`]
    /// when the run (or its step) is not in the chat; [`RunError::ChatBusy`] when the fork
    /// would end with a run that has not finished — in flight here or on another replica, or
    /// waiting for a person — or, without a run, when any run of the chat is in flight here.
    /// The source chat is only read: a fork `before` a run may be taken while that run goes on.
    pub async fn fork_chat(&self, request: ForkRequest, principal: Option<&Principal>) -> Result<ChatForked, RunError> {
        let core = &self.core;
        if !core.settings.memory {
            return Err(RunError::MemoryDisabled);
        }
        let source =
            ids::canonical_uuid(&request.chat_id).ok_or_else(|| RunError::invalid("chatId must be a valid UUID"))?;
        let run_id = request.run_id.as_deref().map(str::trim).filter(|r| !r.is_empty()).map(str::to_owned);
        let point = match (run_id.clone(), request.position, request.step_seq) {
            (_, _, Some(seq)) if seq < 1 => return Err(RunError::invalid("stepSeq must be 1 or more")),
            (None, _, Some(_)) | (_, ForkPosition::Before, Some(_)) => {
                return Err(RunError::invalid("stepSeq needs a runId and position \"after\""));
            }
            (None, ForkPosition::Before, None) => return Err(RunError::invalid("position \"before\" needs a runId")),
            (None, ForkPosition::After, None) => ForkPoint::Whole,
            (Some(run_id), ForkPosition::After, step_seq) => ForkPoint::After { run_id, step_seq },
            (Some(run_id), ForkPosition::Before, None) => ForkPoint::Before { run_id },
        };
        let (store, id) = (core.chats.clone(), source.clone());
        let owner = tokio::task::spawn_blocking(move || store.chat_owner(&id))
            .await
            .map_err(RunError::memory)?
            .map_err(RunError::memory)?;
        if !owner.is_some_and(|owner| may_access(principal, owner.as_ref())) {
            return Err(RunError::ChatNotFound { chat_id: request.chat_id.clone() });
        }
        // The run the fork ends with must have ended; the history's `awaiting` line is checked
        // by the store, a run in flight here or elsewhere here.
        let busy = |run_id: String| RunError::ChatBusy { chat_id: source.clone(), run_id };
        match &point {
            ForkPoint::Before { .. } => {}
            ForkPoint::Whole => {
                if let Some(run) = control::live_run(core, &source) {
                    return Err(busy(run.run_id.clone()));
                }
            }
            ForkPoint::After { run_id, .. } => match locate::find_run(self, run_id, principal).await? {
                Located::Here(handle)
                    if handle.chat_id == source && (!handle.status().is_finished() || handle.is_waiting()) =>
                {
                    return Err(busy(run_id.clone()));
                }
                Located::Elsewhere(remote) | Located::Orphaned(remote) if remote.record.chat_id == source => {
                    return Err(busy(run_id.clone()));
                }
                _ => {}
            },
        }
        let new_chat = ids::new_chat_id();
        let (store, from, to, at) = (core.chats.clone(), source.clone(), new_chat.clone(), point.clone());
        let owner = principal.map(Principal::owner);
        let forked = tokio::task::spawn_blocking(move || store.fork_chat(&from, &to, &at, owner.as_ref(), now_ms()))
            .await
            .map_err(RunError::memory)?;
        let forked = match forked {
            Ok(forked) => forked,
            Err(ForkError::RunNotFound { run_id, .. }) => {
                return Err(RunError::ForkPointNotFound { chat_id: source, run_id, step_seq: None });
            }
            Err(ForkError::StepNotFound { run_id, step_seq, .. }) => {
                return Err(RunError::ForkPointNotFound { chat_id: source, run_id, step_seq: Some(step_seq) });
            }
            Err(ForkError::RunWaiting { run_id, .. }) => return Err(busy(run_id)),
            Err(e) => return Err(RunError::memory(e)),
        };
        tracing::info!(
            chatId = %forked.chat_id,
            from = %source,
            runId = run_id.as_deref().unwrap_or("-"),
            position = ?request.position,
            step_seq = request.step_seq,
            runs = forked.runs.len(),
            lines = forked.lines,
            owner = principal.map_or("-", |p| p.subject.as_str()),
            "chat forked"
        );
        Ok(ChatForked {
            chat_id: forked.chat_id,
            chat_name: forked.chat_name,
            forked_from: ForkedFrom { chat_id: source, run_id, position: request.position, step_seq: request.step_seq },
            runs: forked.runs.into_iter().map(|(source_run_id, run_id)| ForkedRun { source_run_id, run_id }).collect(),
        })
    }
}
