//! Model fallbacks (docs/models.md, "Fallbacks"): which models a call tries, in which order, when
//! a failure moves on to the next, and the cool-down that makes later calls skip a model that
//! just failed.
//!
//! A call moves on only while nothing of it reached the client — an error while opening the
//! stream, or as its first item — so nothing streamed is ever sent twice; the caller decides
//! where that line is ([`Fallbacks::next`] is only asked before it).
//!
//! The cool-down store is a trait: one process keeps it in memory ([`LocalCooldowns`]); replicas
//! of a cluster share one in Redis (agw-runs), so a model one replica saw fail is skipped by all.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agw_llm::{FallbackReason, LlmError, ReasonSet};
use agw_protocol::AgentDelta;
use agw_protocol::event::ModelFallback;
use dashmap::DashMap;
use futures::future::BoxFuture;

use crate::definition::{ModelRef, ResolvedModel};

/// Counter: model calls that moved on to a fallback, by `from_provider`, `from_model`,
/// `to_provider`, `to_model` and `reason`.
pub const FALLBACKS_METRIC: &str = "agw_model_fallbacks_total";

/// A model that failed is skipped for at least this long (`agw.provider.fallback-cooldown`).
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(30);
/// … and at most this long, whatever `Retry-After` said (`agw.provider.fallback-cooldown-max`).
pub const DEFAULT_MAX_COOLDOWN: Duration = Duration::from_secs(600);

/// Where cool-downs are kept: shared by every run of a process, or of a cluster.
pub trait CooldownStore: Send + Sync {
    /// Which of `models` are cooling down now, one answer per model, in order. A store that
    /// cannot answer says "none" (a cool-down only orders the models, it must not stop a run).
    fn cooling<'a>(&'a self, models: &'a [ModelRef]) -> BoxFuture<'a, Vec<bool>>;

    /// `model` failed: calls skip it until `duration` from now (a later failure sets a new end).
    fn cool_down<'a>(&'a self, model: &'a ModelRef, duration: Duration) -> BoxFuture<'a, ()>;
}

/// The name of a model's cool-down: `provider/model`, the provider key lower-cased (keys are
/// case-insensitive; model names are not). Provider keys have no `/`, so this is unambiguous.
pub fn cooldown_key(model: &ModelRef) -> String {
    format!("{}/{}", model.provider_key.trim().to_ascii_lowercase(), model.model)
}

/// Cool-downs in this process's memory.
#[derive(Debug, Default)]
pub struct LocalCooldowns {
    until: DashMap<String, Instant>,
}

impl LocalCooldowns {
    /// Whether `model` is cooling down now (an expired entry is dropped).
    pub fn is_cooling(&self, model: &ModelRef) -> bool {
        let key = cooldown_key(model);
        let now = Instant::now();
        if self.until.get(&key).is_some_and(|until| *until > now) {
            return true;
        }
        self.until.remove_if(&key, |_, until| *until <= now);
        false
    }

    /// Skips `model` until `duration` from now.
    pub fn set(&self, model: &ModelRef, duration: Duration) {
        // A duration past the clock's end is as good as "for a very long time".
        let until = Instant::now().checked_add(duration).unwrap_or_else(|| Instant::now() + DEFAULT_MAX_COOLDOWN);
        self.until.insert(cooldown_key(model), until);
    }
}

impl CooldownStore for LocalCooldowns {
    fn cooling<'a>(&'a self, models: &'a [ModelRef]) -> BoxFuture<'a, Vec<bool>> {
        Box::pin(async move { models.iter().map(|m| self.is_cooling(m)).collect() })
    }

    fn cool_down<'a>(&'a self, model: &'a ModelRef, duration: Duration) -> BoxFuture<'a, ()> {
        self.set(model, duration);
        Box::pin(async {})
    }
}

/// The run's cool-down store and how long a failed model is skipped.
#[derive(Clone)]
pub struct Cooldowns {
    /// Where they are kept.
    pub store: Arc<dyn CooldownStore>,
    /// The least time a failed model is skipped (when `Retry-After` asks for less or nothing).
    pub min: Duration,
    /// The most time a failed model is skipped, whatever `Retry-After` asks.
    pub max: Duration,
}

impl Cooldowns {
    /// In this process's memory, with the default durations.
    pub fn local() -> Self {
        Cooldowns { store: Arc::new(LocalCooldowns::default()), min: DEFAULT_COOLDOWN, max: DEFAULT_MAX_COOLDOWN }
    }

    /// How long a model that failed with `error` is skipped: what the provider asked
    /// (`Retry-After`), at least `min`, at most `max`.
    pub fn duration(&self, error: &LlmError) -> Duration {
        error.retry_after().unwrap_or_default().max(self.min).min(self.max.max(self.min))
    }
}

impl Default for Cooldowns {
    fn default() -> Self {
        Self::local()
    }
}

impl std::fmt::Debug for Cooldowns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cooldowns").field("min", &self.min).field("max", &self.max).finish_non_exhaustive()
    }
}

/// The models one call tries, in order, and where it is.
pub(crate) struct Fallbacks {
    /// The models in the order they are tried: those not cooling down first (primary, then the
    /// fallbacks as listed), then those cooling down in the same order — a last resort, so a
    /// call is never refused because every model failed recently.
    order: Vec<ModelRef>,
    reasons: ReasonSet,
    /// The model being tried (an index into `order`).
    at: usize,
}

impl Fallbacks {
    /// The models a call with `model` tries (only `model` when it has no fallbacks).
    pub(crate) async fn plan(cooldowns: &Cooldowns, model: &ResolvedModel) -> Fallbacks {
        let mut all = Vec::with_capacity(1 + model.fallbacks.len());
        all.push(model.model_ref());
        all.extend(model.fallbacks.iter().cloned());
        let reasons = model.fallback_on;
        if all.len() == 1 {
            return Fallbacks { order: all, reasons, at: 0 };
        }
        let cooling = cooldowns.store.cooling(&all).await;
        let is_cooling = |i: usize| cooling.get(i).copied().unwrap_or(false);
        let (mut order, mut last) = (Vec::new(), Vec::new());
        for (i, candidate) in all.into_iter().enumerate() {
            if is_cooling(i) { last.push(candidate) } else { order.push(candidate) }
        }
        if !last.is_empty() {
            tracing::debug!(cooling = ?last, "models cooling down are tried last");
        }
        order.extend(last);
        Fallbacks { order, reasons, at: 0 }
    }

    /// The model being tried.
    pub(crate) fn current(&self) -> &ModelRef {
        &self.order[self.at]
    }

    /// `model` with the current model's provider and name: the request's other settings are the
    /// `modelConfig`'s, whichever of its models answers. Its fallbacks are the models still
    /// left to try, so a call made on its behalf (a summary) tries them in the same order.
    pub(crate) fn resolved(&self, model: &ResolvedModel) -> ResolvedModel {
        let ModelRef { provider_key, model: name } = self.current().clone();
        ResolvedModel { provider_key, model: name, fallbacks: self.order[self.at + 1..].to_vec(), ..model.clone() }
    }

    /// Whether another model is left after the current one.
    pub(crate) fn has_next(&self) -> bool {
        self.at + 1 < self.order.len()
    }

    /// What the current call may hand back at once instead of retrying (the transport waits out
    /// a rate limit before a retry; with another model ready that wait is wasted).
    pub(crate) fn fail_fast(&self) -> ReasonSet {
        if !self.has_next() {
            return ReasonSet::EMPTY;
        }
        self.reasons.intersect(ReasonSet::EMPTY.with(FallbackReason::RateLimit).with(FallbackReason::Overloaded))
    }

    /// The current model failed with `error` before anything of its call reached the client:
    /// records the failure (cool-down, metric, log) and, when `error`'s reason is one the
    /// config falls back on and a model is left, moves to it and returns the `model.fallback`
    /// delta to emit. `None`: the call fails with `error`.
    pub(crate) async fn next(&mut self, cooldowns: &Cooldowns, run_id: &str, error: &LlmError) -> Option<AgentDelta> {
        let reason = self.failed(cooldowns, error).await?;
        if !self.has_next() {
            return None;
        }
        let from = self.current().clone();
        self.at += 1;
        let to = self.current().clone();
        tracing::warn!(run_id, %from, %to, %reason, %error, "model call failed; falling back");
        metrics::counter!(
            FALLBACKS_METRIC,
            "from_provider" => from.provider_key.clone(), "from_model" => from.model.clone(),
            "to_provider" => to.provider_key.clone(), "to_model" => to.model.clone(),
            "reason" => reason.as_str(),
        )
        .increment(1);
        Some(AgentDelta::Fallback(ModelFallback {
            run_id: run_id.to_owned(),
            from,
            to,
            reason: reason.as_str().to_owned(),
            message: error.to_string(),
        }))
    }

    /// The current model failed with `error` (before or after its output started): a model with
    /// fallbacks that failed for a reason its config falls back on is cooled down, so that later
    /// calls try the others first. Returns that reason. A too-long request says nothing about
    /// the model's health, so `context_window` cools nothing down.
    pub(crate) async fn failed(&self, cooldowns: &Cooldowns, error: &LlmError) -> Option<FallbackReason> {
        let reason = error.fallback_reason().filter(|r| self.reasons.contains(*r))?;
        if self.order.len() > 1 && reason != FallbackReason::ContextWindow {
            cooldowns.store.cool_down(self.current(), cooldowns.duration(error)).await;
        }
        Some(reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(p: &str, m: &str) -> ModelRef {
        ModelRef { provider_key: p.into(), model: m.into() }
    }

    fn resolved(fallbacks: &[ModelRef], reasons: ReasonSet) -> ResolvedModel {
        ResolvedModel {
            provider_key: "main".into(),
            model: "big".into(),
            reasoning: Default::default(),
            temperature: Some(0.3),
            top_p: None,
            max_tokens: None,
            context_window: None,
            max_output_tokens: None,
            fallbacks: fallbacks.to_vec(),
            fallback_on: reasons,
            prompt_cache: true,
            tool_calling: Default::default(),
        }
    }

    fn limited(retry_after: Option<u64>) -> LlmError {
        LlmError::Http { status: 429, retry_after: retry_after.map(Duration::from_secs), body: "slow down".into() }
    }

    #[tokio::test]
    async fn cooling_models_go_last_and_every_model_is_tried_in_order() {
        let cooldowns = Cooldowns::local();
        let chain = resolved(&[model("spare", "small"), model("third", "tiny")], ReasonSet::all());
        let plan = Fallbacks::plan(&cooldowns, &chain).await;
        assert_eq!(plan.order, [model("main", "big"), model("spare", "small"), model("third", "tiny")]);

        cooldowns.store.cool_down(&model("MAIN", "big"), Duration::from_secs(30)).await;
        let mut plan = Fallbacks::plan(&cooldowns, &chain).await;
        assert_eq!(plan.current(), &model("spare", "small"), "the cooling primary is skipped");
        assert_eq!(plan.order.last(), Some(&model("main", "big")), "… but still a last resort");
        assert_eq!(plan.resolved(&chain).temperature, Some(0.3), "the config's settings for every model");
        assert_eq!(plan.resolved(&chain).fallbacks, [model("third", "tiny"), model("main", "big")]);

        let Some(AgentDelta::Fallback(event)) = plan.next(&cooldowns, "run", &limited(Some(5))).await else {
            panic!("a rate limit falls back")
        };
        assert_eq!(
            (event.from, event.to, event.reason.as_str()),
            (model("spare", "small"), model("third", "tiny"), "rate_limit")
        );
        assert!(event.message.contains("429") && event.message.contains("slow down"), "{}", event.message);
        assert!(LocalCooldowns::default().cooling(&[model("spare", "small")]).await == [false]);
        assert_eq!(cooldowns.store.cooling(&[model("spare", "small")]).await, [true], "the failed model cools down");

        // Every model cooling: all are still tried, in order.
        cooldowns.store.cool_down(&model("third", "tiny"), Duration::from_secs(30)).await;
        let plan = Fallbacks::plan(&cooldowns, &chain).await;
        assert_eq!(plan.order, [model("main", "big"), model("spare", "small"), model("third", "tiny")]);
    }

    #[tokio::test]
    async fn only_the_configured_reasons_move_on() {
        let cooldowns = Cooldowns::local();
        let chain = resolved(&[model("spare", "small")], ReasonSet::EMPTY.with(FallbackReason::Overloaded));
        let mut plan = Fallbacks::plan(&cooldowns, &chain).await;
        assert!(plan.next(&cooldowns, "run", &limited(None)).await.is_none(), "429 is not in fallbackOn");
        assert_eq!(cooldowns.store.cooling(&[model("main", "big")]).await, [false], "nor cooled down");
        let bad = LlmError::Http { status: 400, retry_after: None, body: "invalid tool schema".into() };
        assert!(plan.next(&cooldowns, "run", &bad).await.is_none());
        assert_eq!(plan.fail_fast(), ReasonSet::EMPTY.with(FallbackReason::Overloaded));
        let overloaded = LlmError::Http { status: 529, retry_after: None, body: String::new() };
        assert!(plan.next(&cooldowns, "run", &overloaded).await.is_some());
        assert!(!plan.has_next());
        assert_eq!(plan.fail_fast(), ReasonSet::EMPTY, "the last model retries as before");
        assert!(plan.next(&cooldowns, "run", &overloaded).await.is_none(), "no model left");
    }

    #[tokio::test]
    async fn a_too_long_request_cools_nothing_down() {
        let cooldowns = Cooldowns::local();
        let chain = resolved(&[model("spare", "huge")], ReasonSet::all());
        let mut plan = Fallbacks::plan(&cooldowns, &chain).await;
        let long = LlmError::Http { status: 400, retry_after: None, body: "context_length_exceeded".into() };
        assert!(plan.next(&cooldowns, "run", &long).await.is_some());
        assert_eq!(cooldowns.store.cooling(&[model("main", "big")]).await, [false]);
    }

    #[test]
    fn the_cool_down_honours_retry_after_within_bounds() {
        let cooldowns = Cooldowns { min: Duration::from_secs(30), max: Duration::from_secs(600), ..Cooldowns::local() };
        assert_eq!(cooldowns.duration(&limited(None)), Duration::from_secs(30));
        assert_eq!(cooldowns.duration(&limited(Some(5))), Duration::from_secs(30));
        assert_eq!(cooldowns.duration(&limited(Some(90))), Duration::from_secs(90));
        assert_eq!(cooldowns.duration(&limited(Some(86_400))), Duration::from_secs(600));
    }

    #[test]
    fn keys_ignore_the_provider_keys_case_only() {
        assert_eq!(cooldown_key(&model(" Main ", "Org/Model-7B")), "main/Org/Model-7B");
        let local = LocalCooldowns::default();
        local.set(&model("p", "m"), Duration::ZERO);
        assert!(!local.is_cooling(&model("p", "m")), "an expired cool-down is gone");
        assert!(local.until.is_empty());
    }
}
