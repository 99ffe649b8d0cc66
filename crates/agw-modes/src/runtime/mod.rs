//! Running an agent: the sealed mode state machines and what they share.
//!
//! A run is `execute(ctx, sink)`: it dispatches on the agent's [`ModeDef`] (a sealed enum, so a
//! new mode is a compile error everywhere it matters), enforces the run budget, and reports a
//! [`RunOutcome`]. Modes talk to providers only through [`agw_llm::ChatProvider`] and to the
//! outside world only through a [`DeltaSink`].

mod budget;
mod failure;
mod oneshot;
mod prompt;
mod sink;
mod turn;

use std::sync::Arc;
use std::time::Duration;

use agw_llm::{ChatMessage, ProviderRegistry};
use agw_protocol::RunErrorInfo;

use crate::definition::{AgentDefinition, ModeDef};

pub use budget::BudgetTracker;
pub use failure::RunFailure;
pub use sink::{CollectingSink, DeltaSink, EmitError};

/// Everything a run needs besides its sink.
#[derive(Clone)]
pub struct RunContext {
    pub run_id: String,
    pub chat_id: String,
    /// The definition the run started with; later catalog reloads do not affect it.
    pub agent: Arc<AgentDefinition>,
    /// The user's message, sent verbatim as the last user turn.
    pub user_message: String,
    /// Earlier turns of this chat (already windowed), inserted between system prompt and message.
    pub history: Vec<ChatMessage>,
    pub providers: Arc<ProviderRegistry>,
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunOutcome {
    /// Normal end: `run.complete` with this finish reason.
    Completed { finish_reason: String },
    /// `run.error` with this payload.
    Failed(RunErrorInfo),
    /// The consumer disconnected; no terminal event can be delivered.
    Disconnected,
}

/// Runs the agent to completion, streaming into `sink`.
pub async fn execute<S: DeltaSink>(ctx: RunContext, sink: &mut S) -> RunOutcome {
    let budget = ctx.agent.budget;
    let run_timeout = Duration::from_millis(budget.run_timeout_ms);
    let mut tracker = BudgetTracker::new(budget);
    let fut = async {
        match &ctx.agent.mode {
            ModeDef::Oneshot { plain } => oneshot::run(&ctx, plain, &mut tracker, sink).await,
            // REACT and PLAN_EXECUTE arrive with their issues; until then they are refused
            // explicitly instead of being run as something they are not.
            ModeDef::React { .. } | ModeDef::PlanExecute { .. } => {
                Err(RunFailure::Internal(format!("mode {} is not supported by this build yet", ctx.agent.mode_kind())))
            }
        }
    };
    let result = match tokio::time::timeout(run_timeout, fut).await {
        Ok(r) => r,
        Err(_) => Err(RunFailure::Budget(format!("runTimeoutMs={}", run_timeout.as_millis()))),
    };
    match result {
        Ok(finish_reason) => RunOutcome::Completed { finish_reason },
        Err(RunFailure::Disconnected) => RunOutcome::Disconnected,
        Err(failure) => {
            tracing::warn!(run_id = %ctx.run_id, error = %failure, "run failed");
            RunOutcome::Failed(failure.to_error_info())
        }
    }
}
