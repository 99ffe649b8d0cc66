//! What a run in flight keeps outside its history so that a restarted server can resume it
//! (crash recovery, `docs/run-lifecycle.md`): the chat store's *run mark*.
//!
//! The history stays the truth about what completed — every step line a run wrote is a step it
//! will not repeat. The mark adds what the history cannot hold yet: the run's request before
//! its first step line, and, while a tool batch runs, which of its calls finished (with their
//! results) and which one was running. It is rewritten whole at each of those points and removed
//! when the run ends.

use serde::{Deserialize, Serialize};

use super::{AwaitingCall, AwaitingResult, PendingStep, ResumeAt, SystemSnapshot};
use crate::request::QueryRequest;

/// `{"chatId","runId","startedAt","updatedAt","revision","attempts","lastSeq","query","system"?,"batch"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunMark {
    /// The chat of the run.
    pub chat_id: String,
    /// The run.
    pub run_id: String,
    /// Epoch ms when the run started (the first time).
    #[serde(default)]
    pub started_at: i64,
    /// Epoch ms of this version of the mark.
    #[serde(default)]
    pub updated_at: i64,
    /// Orders the versions of a mark: of two copies, the higher revision is the newer
    /// ([`Self::next_revision`]).
    #[serde(default)]
    pub revision: u64,
    /// The cluster node running the run (clustered mode): a replica that finds this node's
    /// lease gone takes the run over. `None` on a single node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// How many times the run was resumed after the process running it stopped.
    #[serde(default)]
    pub attempts: u32,
    /// Seq of the run's last event when the mark was written: where a resumed run numbers on
    /// from when the seq ledger has no note of it.
    #[serde(default)]
    pub last_seq: u64,
    /// The run's normalised request (its query line is written with its first step line).
    pub query: QueryRequest,
    /// The system snapshot for the run's first step line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemSnapshot>,
    /// The tool batch running now, or the last one (stale once its step line is written:
    /// [`BatchCheckpoint::steps_written`] tells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchCheckpoint>,
    /// The round of plan tasks running side by side now, or the last one (stale once its
    /// tasks' step lines are written: [`RoundCheckpoint::steps_written`] tells).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<RoundCheckpoint>,
}

/// Child tasks running side by side — a round of a plan whose tasks run in parallel, or the
/// sub-agents of an `agent_invoke` call — as far as each got (the run mark's `round`). Written
/// when they start, at each task's tool-batch checkpoints and when a task ends: their step
/// lines are only written together once the last one ended.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RoundCheckpoint {
    /// Step lines of the run written before the round: when the run has more, the round's
    /// lines were written and this checkpoint is stale.
    #[serde(default)]
    pub steps_written: i64,
    /// The `agent_invoke` call whose sub-agents these are (current while the run's batch has
    /// it running); `None` for the tasks of a parallel plan round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The round's tasks, in plan order.
    #[serde(default)]
    pub tasks: Vec<TaskCheckpoint>,
}

/// One task of a [`RoundCheckpoint`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskCheckpoint {
    /// The plan task.
    pub task_id: String,
    /// The task as its own copy of the plan had it at the checkpoint (its status, once the
    /// task updated it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<crate::PlanTask>,
    /// The task's step as recorded so far (its messages; the calls of its batch without
    /// results). Empty before its first checkpoint.
    #[serde(default)]
    pub step: PendingStep,
    /// The task's tool batch at its last checkpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<TaskBatch>,
    /// The task ended: its whole step line, written with its round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<Box<super::StepLine>>,
}

/// A task's tool batch as far as it got (see [`BatchCheckpoint`], whose fields these are).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskBatch {
    /// The batch's step in the task's own run (a sub-agent's `react-step-2`); nowhere for a plan
    /// task.
    #[serde(default)]
    pub resume_at: ResumeAt,
    /// The batch's calls, in call order.
    #[serde(default)]
    pub calls: Vec<AwaitingCall>,
    /// Results of the calls that finished, in call order.
    #[serde(default)]
    pub results: Vec<AwaitingResult>,
    /// The call that was running: run again only if its tool is idempotent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
    /// Every result streamed: the task goes on with its next model turn.
    #[serde(default)]
    pub done: bool,
}

/// A tool batch as far as it got (the run mark's `batch`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchCheckpoint {
    /// The step of the batch (`react-step-2`, `oneshot`); empty where the mode cannot go on
    /// from a batch in another process.
    #[serde(default)]
    pub resume_at: ResumeAt,
    /// Step lines of the run written before the batch's step: when the run has more, the
    /// batch's step was written whole and this checkpoint is stale.
    #[serde(default)]
    pub steps_written: i64,
    /// The batch's step as recorded so far (its text and calls).
    pub step: PendingStep,
    /// The batch's calls, in call order.
    #[serde(default)]
    pub calls: Vec<AwaitingCall>,
    /// Results of the calls that finished, in call order.
    #[serde(default)]
    pub results: Vec<AwaitingResult>,
    /// The call that was running when the checkpoint was written: it started and has no
    /// result. Run again only if its tool is idempotent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<String>,
    /// Every call finished and every result was streamed: the run goes on with its next turn.
    #[serde(default)]
    pub done: bool,
}

impl RunMark {
    /// Moves to the revision of the mark's next write: higher than the last (and than `now_us`,
    /// microseconds since the epoch, so a later process's marks are newer), of the other
    /// parity, so that a store keeping two copies alternates between them.
    pub fn next_revision(&mut self, now_us: u64) {
        let mut next = (self.revision + 1).max(now_us);
        if next % 2 == self.revision % 2 {
            next += 1;
        }
        self.revision = next;
    }

    /// The mark of a run that starts now; its request is filled in before it is written.
    pub fn new(chat_id: &str, run_id: &str, now_ms: i64) -> RunMark {
        RunMark {
            chat_id: chat_id.to_owned(),
            run_id: run_id.to_owned(),
            started_at: now_ms,
            updated_at: now_ms,
            revision: 0,
            node: None,
            attempts: 0,
            last_seq: 0,
            query: QueryRequest::default(),
            system: None,
            batch: None,
            round: None,
        }
    }
}

/// One step line of a run being resumed (crash recovery): what a mode that rebuilds its own
/// conversation from the run's steps needs (PLAN_EXECUTE adds each task's prompt back).
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveredStep {
    /// `plan`, `execute`, `react`, `oneshot`, `summary`.
    pub stage: String,
    /// The step's messages as the model is sent them (the run's first step starts with its
    /// user message).
    pub messages: Vec<crate::chat::ChatMessage>,
    /// The plan after the step, when it changed in it.
    pub plan: Option<super::PlanSnapshot>,
    /// The plan task the step is (a task of a parallel round, written as its own line).
    pub task_id: Option<String>,
    /// The step ended with a handoff: the agents that handed the conversation over and took it.
    pub handoff: Option<(String, String)>,
}

/// A task of a parallel round being resumed (crash recovery), from its [`TaskCheckpoint`].
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveredTask {
    /// The plan task.
    pub task_id: String,
    /// The task as its copy of the plan had it (status, description), when it changed.
    pub task: Option<crate::PlanTask>,
    /// The task's messages so far, as the model is sent them (its prompt not included; a
    /// running batch's calls are in `batch`).
    pub messages: Vec<crate::chat::ChatMessage>,
    /// The batch it was in at its last checkpoint.
    pub batch: Option<TaskBatch>,
    /// It ended before the process stopped: it does not run again.
    pub ended: bool,
    /// A sub-agent that ended: how (its line's frame: status, error).
    pub sub_agent: Option<Box<super::SubAgentStep>>,
    /// A running sub-agent's stages so far (its mode's plan, execute and summary stages, or
    /// REACT steps), the last one open: `messages` cut where each began.
    pub stages: Vec<RecoveredStep>,
}
