//! Why a run stopped early, mapped onto the `run.error` codes of the contract.

use agw_llm::LlmError;
use agw_protocol::{ErrorCode, RunErrorInfo};

use super::sink::EmitError;

/// A run that cannot finish normally.
#[derive(Debug, thiserror::Error)]
pub enum RunFailure {
    /// The model call failed (transport, HTTP status, timeout, or no such provider).
    #[error(transparent)]
    Provider(#[from] LlmError),
    /// A limit of the run's budget was hit; carries it as `<limit>=<value>`, e.g.
    /// `model.maxCalls=15`.
    #[error("Budget exceeded: {0}")]
    Budget(String),
    /// `toolChoice: REQUIRED` and the model never called a tool.
    #[error("{0}")]
    ToolRequired(String),
    /// REACT used every step without producing an answer.
    #[error("{0}")]
    MaxSteps(String),
    /// PLAN_EXECUTE cannot go on: no plan was created, a task was never updated or was marked
    /// failed, or the summary came back empty.
    #[error("{0}")]
    PlanStalled(String),
    /// A frontend tool waited past `agent.tools.frontend.submit-timeout-ms`.
    #[error("{0}")]
    FrontendTimeout(String),
    /// The model kept calling this tool with the same arguments after it was told it repeats
    /// itself (`contextConfig.doomLoopThreshold`).
    #[error("doom loop: the model kept calling {0} with the same arguments after it was told it repeats itself")]
    DoomLoop(String),
    /// A daily quota the run shares with its user's or agent's other runs refused its next
    /// model call ([`super::QuotaGate`]); the message names the quota.
    #[error("{0}")]
    Quota(String),
    /// An input or output guard blocked (docs/guardrails.md); the message names the stage, the
    /// guard and its reason. `run.error` code `guardrail_blocked`.
    #[error("{0}")]
    Guarded(String),
    /// The run has an output schema and its answer broke it again after the repair turn
    /// (docs/models.md, "Structured output"); `run.error` code `output_invalid`.
    #[error("the answer does not match the output schema, even after a repair turn: {0}")]
    OutputInvalid(crate::definition::AnswerMismatch),
    /// A run resumed after its process stopped is somewhere its mode cannot go on from
    /// (crash recovery); `run.error` code `recovery_exhausted`.
    #[error("{0}")]
    Unrecoverable(String),
    /// A bug, a storage failure, or an agent its mode cannot run (e.g. PLAN_EXECUTE with
    /// `toolChoice: NONE`); `run.error` code `internal`.
    #[error("{0}")]
    Internal(String),
    /// Not a failure: the agent handed the conversation over (docs/multi-agent.md, "Handoffs").
    /// It unwinds the agent's mode from the batch that made it; `execute` catches it and goes on
    /// with the next agent, so it never ends a run.
    #[error("handed off to agent {}", .0.to.key)]
    HandedOff(Box<super::HandedOff>),
    /// The consumer went away; nothing more can be emitted.
    #[error("client disconnected")]
    Disconnected,
}

impl From<EmitError> for RunFailure {
    fn from(e: EmitError) -> Self {
        match e {
            EmitError::Closed => RunFailure::Disconnected,
            EmitError::Protocol(m) => RunFailure::Internal(format!("protocol violation: {m}")),
            EmitError::Storage(m) => RunFailure::Internal(m),
        }
    }
}

impl RunFailure {
    /// The `run.error` payload for this failure.
    pub fn to_error_info(&self) -> RunErrorInfo {
        let (code, retriable) = match self {
            RunFailure::Provider(e) => (
                match e.code() {
                    "provider_timeout" => ErrorCode::ProviderTimeout,
                    "provider_not_configured" => ErrorCode::ProviderNotConfigured,
                    _ => ErrorCode::ProviderError,
                },
                e.retriable(),
            ),
            RunFailure::Budget(_) => (ErrorCode::BudgetExceeded, false),
            RunFailure::ToolRequired(_) => (ErrorCode::ToolRequired, false),
            RunFailure::MaxSteps(_) => (ErrorCode::MaxSteps, false),
            RunFailure::PlanStalled(_) => (ErrorCode::PlanStalled, false),
            RunFailure::FrontendTimeout(_) => (ErrorCode::FrontendSubmitTimeout, true),
            RunFailure::DoomLoop(_) => (ErrorCode::DoomLoop, false),
            // Like a provider's 429: the same query can succeed once the quota allows it again.
            RunFailure::Quota(_) => (ErrorCode::QuotaExceeded, true),
            // The same query would be blocked again.
            RunFailure::Guarded(_) => (ErrorCode::GuardrailBlocked, false),
            // Another run may well answer in shape: the model is not deterministic.
            RunFailure::OutputInvalid(_) => (ErrorCode::OutputInvalid, true),
            RunFailure::Unrecoverable(_) => (ErrorCode::RecoveryExhausted, false),
            RunFailure::Internal(_) | RunFailure::HandedOff(_) | RunFailure::Disconnected => {
                (ErrorCode::Internal, false)
            }
        };
        RunErrorInfo { code, message: self.to_string(), retriable }
    }
}
