//! Why an operation on a run was refused: one enum for every operation of the run service. Only
//! the edge turns it into a status code; between replicas it travels as JSON tagged by `code`.

use serde::{Deserialize, Serialize};

use crate::quotas::QuotaExceeded;

/// Why the run service refused an operation.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "code", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum RunError {
    /// The request itself is wrong (a blank id, a chat id that is not a UUID, a blank message).
    #[error("{message}")]
    Invalid {
        /// What is wrong, for the caller.
        message: String,
    },
    /// The catalog has no agent at all.
    #[error("No agents available")]
    NoAgents,
    /// No agent has this key.
    #[error("agent not found: {key}")]
    AgentNotFound {
        /// The key asked for.
        key: String,
    },
    /// No chat the caller may see has this id.
    #[error("chat not found: {chat_id}")]
    ChatNotFound {
        /// The id asked for.
        chat_id: String,
    },
    /// One run per chat: this one holds it.
    #[error("chat {chat_id} has a run in progress ({run_id}); attach to it or interrupt it first")]
    ChatBusy {
        /// The chat.
        chat_id: String,
        /// Its run in progress.
        run_id: String,
    },
    /// A quota refused the run or the model call.
    #[error("{}", .exceeded.message())]
    QuotaExceeded {
        /// Which quota, its limit and when to retry.
        exceeded: QuotaExceeded,
    },
    /// No run the caller may see has this id.
    #[error("run not found: {run_id}")]
    RunNotFound {
        /// The id asked for.
        run_id: String,
    },
    /// A fork's point is not in the chat: no run with this id, or the run has no such step.
    #[error("{}", fork_point_message(.chat_id, .run_id, *.step_seq))]
    ForkPointNotFound {
        /// The source chat.
        chat_id: String,
        /// The run asked for.
        run_id: String,
        /// The step asked for, when one was.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step_seq: Option<i64>,
    },
    /// The run has ended (or is ending): it takes no more messages.
    #[error("run {run_id} has finished ({status}); it takes no more messages")]
    RunFinished {
        /// The run.
        run_id: String,
        /// How it ended.
        status: String,
    },
    /// The run's steering queue is full.
    #[error("run {run_id} already holds {capacity} steers it has not taken yet")]
    SteerQueueFull {
        /// The run.
        run_id: String,
        /// The queue's bound.
        capacity: usize,
    },
    /// The run has as many observers as it may.
    #[error("the run already has {max} observers")]
    TooManyObservers {
        /// The run.
        run_id: String,
        /// `agw.runs.max-observers`.
        max: usize,
    },
    /// The events after `last_seq` are no longer held.
    #[error("events after {last_seq} are no longer buffered; the oldest held is {oldest}")]
    SeqExpired {
        /// The run.
        run_id: String,
        /// What the caller had seen.
        last_seq: u64,
        /// The oldest event still held.
        oldest: u64,
        /// The newest event.
        latest: u64,
    },
    /// `last_seq` is after the last event of a run that has ended.
    #[error("lastSeq {last_seq} is after the run's last event ({latest})")]
    SeqAhead {
        /// What the caller asked for.
        last_seq: u64,
        /// The run's last event.
        latest: u64,
    },
    /// A waiting run to adopt no longer waits.
    #[error("run {run_id} no longer waits")]
    NotWaiting {
        /// The run.
        run_id: String,
    },
    /// Redis did not answer.
    #[error("the cluster's shared state (Redis) is unavailable; retry shortly")]
    ClusterUnavailable,
    /// The replica that holds the run did not answer a forwarded request.
    #[error("the replica running run {run_id} did not answer; retry shortly")]
    OwnerUnreachable {
        /// The run.
        run_id: String,
    },
    /// Another replica is adopting the run right now.
    #[error("run {run_id} is being taken over by another replica; retry shortly")]
    RunMoving {
        /// The run.
        run_id: String,
    },
    /// This replica is shutting down.
    #[error("the replica is stopping")]
    Stopping,
    /// Chat memory is off: there is no history to act on.
    #[error("chat memory is off: there is no stored history to compact")]
    MemoryDisabled,
    /// The chat store failed (logged where it happened).
    #[error("chat memory unavailable")]
    Memory,
    /// The summary model call of a compaction failed.
    #[error("the summary call failed: {reason}")]
    SummaryFailed {
        /// The provider's or runtime's reason.
        reason: String,
    },
    /// Anything else; the message is for the log and the caller.
    #[error("{message}")]
    Internal {
        /// What happened.
        message: String,
    },
}

fn fork_point_message(chat_id: &str, run_id: &str, step_seq: Option<i64>) -> String {
    match step_seq {
        Some(seq) => format!("run {run_id} of chat {chat_id} has no step {seq}"),
        None => format!("run {run_id} is not a run of chat {chat_id}"),
    }
}

impl RunError {
    /// [`RunError::Invalid`] with this message.
    pub fn invalid(message: impl Into<String>) -> Self {
        RunError::Invalid { message: message.into() }
    }

    /// [`RunError::RunNotFound`], the id trimmed as it is looked up.
    pub fn run_not_found(run_id: &str) -> Self {
        RunError::RunNotFound { run_id: run_id.trim().to_owned() }
    }

    /// [`RunError::Internal`] with this message.
    pub fn internal(message: impl Into<String>) -> Self {
        RunError::Internal { message: message.into() }
    }

    /// The chat store failed: logged here, answered as [`RunError::Memory`].
    pub(crate) fn memory(e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "chat memory unavailable");
        RunError::Memory
    }

    /// Redis failed: logged here, answered as [`RunError::ClusterUnavailable`].
    pub(crate) fn cluster(e: impl std::fmt::Display) -> Self {
        tracing::error!(error = %e, "cluster state unavailable");
        RunError::ClusterUnavailable
    }
}

impl From<QuotaExceeded> for RunError {
    fn from(exceeded: QuotaExceeded) -> Self {
        tracing::info!(quota = %exceeded.quota, key = %exceeded.key, limit = %exceeded.limit, "refused by a quota");
        RunError::QuotaExceeded { exceeded }
    }
}
