//! Limits a run shares with other runs — the serving layer's daily quotas per user and per agent
//! — checked before every model call and told every call's usage as soon as it is known, so
//! that runs in flight see each other's spend while they run, not only when they end.
//!
//! The runtime knows nothing of how they are counted (one process, or Redis across replicas):
//! it holds a [`QuotaGate`] in its context, or none.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{RunContext, RunFailure, RunState};

/// What one model call used, as the gate is told it.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CallSpend {
    /// Input plus output tokens the provider reported.
    pub tokens: u64,
    /// The call's cost in its price's currency; `None` when its model has no price.
    pub cost: Option<f64>,
}

/// A quota that refuses the next model call. The message names the quota, whose it is and the
/// limit; it becomes the `run.error` message (code `quota_exceeded`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QuotaRefused(pub String);

/// Shared limits a run's model calls count against (implemented by the serving layer).
pub trait QuotaGate: Send + Sync {
    /// Asked right before every model call (context summaries included). `Err`: the call is
    /// not made and the run ends with `run.error` `quota_exceeded`.
    fn may_call(&self) -> BoxFuture<'_, Result<(), QuotaRefused>>;

    /// Told once per call whose usage the provider reported, before the run goes on.
    fn spent(&self, spend: CallSpend) -> BoxFuture<'_, ()>;
}

/// The run's gate, if it has one.
fn gate(ctx: &RunContext) -> Option<&Arc<dyn QuotaGate>> {
    ctx.quota.as_ref()
}

/// Before every model call: the run's own spend budget (`maxTokens` / `maxCost`), then the
/// shared quotas.
pub(crate) async fn before_call(ctx: &RunContext, state: &RunState) -> Result<(), RunFailure> {
    state.budget.check_spend(&state.usage, &ctx.services.prices)?;
    may_call(ctx).await
}

/// The shared quotas allow a model call now.
async fn may_call(ctx: &RunContext) -> Result<(), RunFailure> {
    match gate(ctx) {
        Some(gate) => gate.may_call().await.map_err(|refused| {
            tracing::info!(run_id = %ctx.run_id, reason = %refused, "model call refused by a quota");
            RunFailure::Quota(refused.0)
        }),
        None => Ok(()),
    }
}

/// After a call's usage is known.
pub(crate) async fn spent(ctx: &RunContext, spend: CallSpend) {
    if let Some(gate) = gate(ctx) {
        gate.spent(spend).await;
    }
}
