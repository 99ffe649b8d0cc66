//! What a run's model calls used, counted once per call: into the run's usage (for
//! `budget.maxTokens` / `maxCost`), into the process metrics (`GET /metrics`,
//! `docs/observability.md`), and — returned as a [`CallSpend`] — into the shared quotas.

use std::time::Duration;

use agw_protocol::CallUsage;
use agw_protocol::usage::TokenCounts;

use super::{CallSpend, RunContext, RunState};

/// Histogram: model call duration (request to last chunk), by `provider`, `model`, `outcome`
/// (`ok`, `error`).
pub const MODEL_CALL_DURATION_METRIC: &str = "agw_model_call_duration_seconds";
/// Counter: tokens by `agent`, `provider`, `model`, `kind` (`input`, `output`, `cached_input`,
/// `cache_write_input`, `reasoning`).
pub const TOKENS_METRIC: &str = "agw_tokens_total";
/// Counter: cost in millionths of the `currency`, by `agent`, `provider`, `model` (only calls
/// whose model has a price).
pub const COST_METRIC: &str = "agw_cost_micros_total";

/// Counts one call's usage; returns what it spent, for the shared quotas.
pub(crate) fn usage(ctx: &RunContext, state: &mut RunState, call: &CallUsage) -> CallSpend {
    let tokens = TokenCounts::from_usage(&call.usage);
    state.usage.add_counts(&call.provider, &call.model, &tokens, 1);
    let labels = [("agent", ctx.agent.key.clone()), ("provider", call.provider.clone()), ("model", call.model.clone())];
    for (kind, n) in [
        ("input", tokens.input_tokens),
        ("output", tokens.output_tokens),
        ("cached_input", tokens.cached_input_tokens),
        ("cache_write_input", tokens.cache_write_input_tokens),
        ("reasoning", tokens.reasoning_tokens),
    ] {
        if n > 0 {
            let mut labels = labels.to_vec();
            labels.push(("kind", kind.to_owned()));
            metrics::counter!(TOKENS_METRIC, &labels).increment(n);
        }
    }
    let mut cost = None;
    if let Some(price) = ctx.services.prices.find(&call.provider, &call.model) {
        let amount = price.charge(&tokens);
        let micros = (amount * 1e6).round() as u64;
        let mut labels = labels.to_vec();
        labels.push(("currency", price.currency.clone()));
        metrics::counter!(COST_METRIC, &labels).increment(micros);
        cost = Some(amount);
    }
    CallSpend { tokens: tokens.input_tokens.saturating_add(tokens.output_tokens), cost }
}

/// Records how long one model call took.
pub(crate) fn call_duration(provider: &str, model: &str, ok: bool, took: Duration) {
    let outcome = if ok { "ok" } else { "error" };
    metrics::histogram!(MODEL_CALL_DURATION_METRIC, "provider" => provider.to_owned(), "model" => model.to_owned(), "outcome" => outcome)
        .record(took.as_secs_f64());
}
