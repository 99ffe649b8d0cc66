//! The output guard of one model turn: rule sets at every delta (a redact match never leaves;
//! only a tail that could still become one waits), classifiers on the text shown so far at each
//! boundary of the agent's granularity — one check in flight, never holding the stream — and
//! once more on the whole answer at the end of the turn.

use agw_guard::{Boundaries, StreamGuard};
use agw_protocol::guard::GuardStage;
use futures::FutureExt;
use futures::future::BoxFuture;

use super::checks::{Classified, classify, request};
use super::{Finding, StageGuards};
use crate::runtime::{RunContext, RunFailure};

/// What the rules let through of a delta.
pub(crate) struct Released {
    /// Text to show now (already redacted).
    pub text: String,
    /// New warn and block findings (redactions are already applied).
    pub findings: Vec<Finding>,
}

/// One turn's output guard; `None` from [`OutputGuard::for_turn`] when the agent has none.
pub(crate) struct OutputGuard<'a> {
    ctx: &'a RunContext,
    guards: StageGuards,
    rules: Option<StreamGuard>,
    /// What the classifiers judge: everything released so far (only kept when there are any).
    shown: String,
    boundaries: Option<Boundaries>,
    /// `shown.len()` when the last check started.
    checked: usize,
    pending: Option<BoxFuture<'a, Classified>>,
}

impl<'a> OutputGuard<'a> {
    pub(crate) fn for_turn(ctx: &'a RunContext) -> Result<Option<Self>, RunFailure> {
        let guards = super::stage_guards(ctx, GuardStage::Output)?;
        if guards.is_empty() {
            return Ok(None);
        }
        let rules = (!guards.rules.is_empty()).then(|| StreamGuard::new(guards.rules.clone()));
        let granularity = ctx.agent.guardrails.classify_every.unwrap_or(ctx.services.guards.classify_every);
        let boundaries = guards.classifies().then(|| Boundaries::new(granularity));
        Ok(Some(OutputGuard { ctx, guards, rules, shown: String::new(), boundaries, checked: 0, pending: None }))
    }

    /// One upstream delta through the rules.
    pub(crate) fn push(&mut self, delta: String) -> Released {
        let released = match self.rules.as_mut() {
            Some(rules) => rules.push(&delta),
            None => return self.released(delta, Vec::new()),
        };
        self.released(released.text, released.hits)
    }

    /// The end of the turn's text: what the rules held back.
    pub(crate) fn finish(&mut self) -> Released {
        match self.rules.as_mut() {
            Some(rules) => {
                let released = rules.finish();
                self.released(released.text, released.hits)
            }
            None => Released { text: String::new(), findings: Vec::new() },
        }
    }

    fn released(&mut self, text: String, hits: Vec<agw_guard::Hit>) -> Released {
        let findings: Vec<Finding> = hits
            .iter()
            .map(Finding::of_hit)
            .inspect(|f| super::found(GuardStage::Output, f))
            .filter(|f| f.action != agw_guard::Action::Redact)
            .collect();
        if let Some(boundaries) = self.boundaries.as_mut() {
            self.shown.push_str(&text);
            if self.pending.is_none() && boundaries.crossed(&self.shown) {
                self.start(false);
            }
        }
        Released { text, findings }
    }

    fn start(&mut self, complete: bool) {
        self.checked = self.shown.len();
        let request = request(self.ctx, GuardStage::Output, None, self.shown.clone(), complete);
        let (ctx, guards) = (self.ctx, self.guards.clone());
        self.pending = Some(async move { classify(ctx, &guards, request).await }.boxed());
    }

    /// A classifier check is in flight.
    pub(crate) fn waiting(&self) -> bool {
        self.pending.is_some()
    }

    /// The verdicts of the check in flight (call only while [`Self::waiting`]); a boundary
    /// passed meanwhile starts the next check.
    pub(crate) async fn verdict(&mut self) -> Classified {
        let classified = match self.pending.as_mut() {
            Some(pending) => pending.await,
            None => Classified::default(),
        };
        self.pending = None;
        if self.shown.len() > self.checked
            && let Some(boundaries) = self.boundaries.as_mut()
            && boundaries.crossed(&self.shown)
        {
            self.start(false);
        }
        classified
    }

    /// The end of the turn: the check in flight, then one on the whole answer (when it grew
    /// since the last check began).
    pub(crate) async fn settle(&mut self) -> Classified {
        if self.boundaries.is_none() {
            return Classified::default();
        }
        let mut all = Classified::default();
        if let Some(pending) = self.pending.take() {
            all = pending.await;
        }
        if all.findings.iter().any(Finding::is_block) || (self.checked == self.shown.len() && self.checked > 0) {
            return all;
        }
        if !self.shown.trim().is_empty() {
            self.start(true);
            if let Some(pending) = self.pending.take() {
                let last = pending.await;
                all.findings.extend(last.findings);
                all.usage.extend(last.usage);
            }
        }
        all
    }
}
