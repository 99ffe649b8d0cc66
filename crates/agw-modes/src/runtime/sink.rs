//! Where a running mode sends its semantic deltas.

use std::future::Future;

use std::time::Duration;

use agw_protocol::AgentDelta;
use agw_protocol::event::AwaitingAsk;
use agw_protocol::history::{AwaitingCall, AwaitingResult, ResumeAt};

/// Why a sink refused a delta. Either way the run must stop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmitError {
    /// The consumer is gone (client disconnected): stop quietly, drop upstream requests.
    #[error("the run's consumer went away")]
    Closed,
    /// The delta broke the event protocol (a bug in a mode): end the run with `run.error`.
    #[error("protocol violation: {0}")]
    Protocol(String),
    /// The run's history could not be written (disk full, read-only, …): end with `run.error`.
    #[error("{0}")]
    Storage(String),
}

/// A run begins to wait for a person: a frontend tool's submit, a tool approval, or a paused
/// backend call's `continue` (`docs/pausing-tools.md`). What a sink
/// that persists the run keeps so that the run can go on in another process
/// ([`super::resume`]): the wait, and where the run stands.
#[derive(Debug, Clone, PartialEq)]
pub struct WaitPoint {
    /// The wait as `awaiting.ask` shows it (`mode` `form` for a frontend tool, `approval`,
    /// `status` for a paused backend call).
    pub ask: AwaitingAsk,
    /// How long the run waits from now.
    pub timeout: Duration,
    /// The step that waits (`react-step-2`, `oneshot`); nowhere when the mode cannot go on
    /// from here in another process (PLAN_EXECUTE).
    pub resume_at: ResumeAt,
    /// The tool calls of the model turn that waits, in call order.
    pub calls: Vec<AwaitingCall>,
    /// Results of the calls of that turn that already ran.
    pub results: Vec<AwaitingResult>,
    /// A status wait: how many times the user already said "continue" to the call (recorded
    /// as the awaiting line's `continued`); 0 for the other kinds.
    pub continued: u32,
}

/// A tool batch reached a point a run could be resumed from in another process after this one
/// stopped (crash recovery, [`super::recover`]): before a call with effects runs, and once
/// every result of the batch streamed.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchPoint {
    /// The step of the batch (`react-step-2`, `oneshot`); nowhere when the mode cannot go on
    /// from it in another process.
    pub resume_at: ResumeAt,
    /// The batch's calls, in call order.
    pub calls: Vec<AwaitingCall>,
    /// Results of the calls that finished.
    pub results: Vec<AwaitingResult>,
    /// The call about to run.
    pub running: Option<String>,
    /// Every result streamed: the run goes on with its next model turn.
    pub done: bool,
    /// In a plan task running beside others: its own copy of the plan's tasks (where its
    /// status changes until the round merges the copies).
    pub forked_plan: Option<Vec<agw_protocol::PlanTask>>,
}

/// Child tasks running side by side (a parallel plan round, an `agent_invoke` call's
/// sub-agents) reached a point a run could be resumed from after its process stopped (crash recovery; [`DeltaSink::task_checkpoint`]). Each arrives
/// after every delta its task emitted before it.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskPoint {
    /// Child tasks start (in their order), before any of them streams: a round of plan tasks,
    /// or the sub-agents of the `agent_invoke` call `call`.
    Round {
        /// The tasks.
        tasks: Vec<String>,
        /// The `agent_invoke` call whose sub-agents they are.
        call: Option<String>,
    },
    /// A task's tool batch reached `point` (before a call with effects runs, or done).
    Batch {
        /// The task.
        task_id: String,
        /// Where its batch is.
        point: BatchPoint,
    },
    /// A task ended (after its end frame).
    Ended {
        /// The task.
        task_id: String,
        /// The task as its copy of the plan has it.
        task: Option<agw_protocol::PlanTask>,
    },
}

/// The consumer of a run's [`AgentDelta`]s: the HTTP layer's SSE sink (assembler + framing),
/// a test collector, or an embedder's own sink. `emit` may wait (backpressure from a slow client
/// travels back to the provider stream instead of piling up in memory).
pub trait DeltaSink: Send {
    /// Delivers one delta; an error ends the run.
    fn emit(&mut self, delta: AgentDelta) -> impl Future<Output = Result<(), EmitError>> + Send;

    /// Called when the run begins to wait for a person, after everything it streamed so far
    /// was emitted. A sink that records the run makes the wait durable here; the default keeps
    /// nothing (the wait then lasts only as long as this process).
    fn waiting(&mut self, wait: &WaitPoint) -> impl Future<Output = Result<(), EmitError>> + Send {
        let _ = wait;
        std::future::ready(Ok(()))
    }

    /// The wait announced by [`Self::waiting`] is over (answered, or timed out): the run goes on
    /// in this process.
    fn wait_over(&mut self) {}

    /// Whether the sink keeps [`Self::checkpoint`]s (the run mode builds them only then).
    fn checkpoints(&self) -> bool {
        false
    }

    /// A tool batch reached `point`. A sink that records the run for crash recovery keeps it
    /// before it returns — before the call it names runs; the default keeps nothing.
    fn checkpoint(&mut self, point: &BatchPoint) -> impl Future<Output = ()> + Send {
        let _ = point;
        std::future::ready(())
    }

    /// A round of parallel plan tasks reached `point`; kept like [`Self::checkpoint`] (only
    /// called when [`Self::checkpoints`] says so).
    fn task_checkpoint(&mut self, point: TaskPoint) -> impl Future<Output = ()> + Send {
        let _ = point;
        std::future::ready(())
    }
}

/// A sink that keeps every delta; for tests and embedders that post-process a whole run.
#[derive(Debug, Default)]
pub struct CollectingSink {
    /// Every delta emitted, in order.
    pub deltas: Vec<AgentDelta>,
}

impl DeltaSink for CollectingSink {
    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        self.deltas.push(delta);
        Ok(())
    }
}
