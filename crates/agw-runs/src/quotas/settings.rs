//! `agw.quotas.*` as the run core reads it (agw-http loads it from settings).

/// The limits of one kind of key (a subject, or an agent); 0 = no limit.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QuotaLimits {
    /// Runs in flight at once.
    pub concurrent_runs: u32,
    /// Runs started in any 60 s.
    pub runs_per_minute: u32,
    /// Tokens (input + output) per UTC day.
    pub tokens_per_day: u64,
    /// Cost per UTC day, in the prices' currency.
    pub cost_per_day: f64,
}

impl QuotaLimits {
    /// Any limit set.
    pub fn any(&self) -> bool {
        self.concurrent_runs > 0 || self.runs_per_minute > 0 || self.daily()
    }

    /// A daily token or cost limit set: checked before every model call.
    pub fn daily(&self) -> bool {
        self.tokens_per_day > 0 || self.cost_per_day > 0.0
    }
}

/// `agw.quotas.*`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct QuotaSettings {
    /// Per subject: the JWT `sub` within its tenant (all unauthenticated callers share one
    /// subject).
    pub subject: QuotaLimits,
    /// Per agent, all subjects together.
    pub agent: QuotaLimits,
    /// Tokens an admitted run reserves against each daily token limit until its calls' usage
    /// is known (0 = none).
    pub reserve_tokens: u64,
}

impl QuotaSettings {
    /// Any limit set, for subjects or agents.
    pub fn any(&self) -> bool {
        self.subject.any() || self.agent.any()
    }
}
