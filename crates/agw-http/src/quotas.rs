//! Quotas per subject and per agent (`docs/observability.md#quotas`): runs in flight, runs per
//! minute, tokens and cost per UTC day. Checked when a run is admitted — before anything is
//! streamed or any provider is called — and refused with 429 `quota_exceeded` and
//! `Retry-After`. The counters live in this process (one node; a clustered store comes with
//! scale-out).
//!
//! Admission checks every limit and reserves the run under one lock, so concurrent requests
//! can never start more runs than a limit allows.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agw_protocol::usage::Cost;

use crate::config::{QuotaLimits, QuotaSettings};

const MINUTE: Duration = Duration::from_secs(60);

/// Which quota refused a run.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaExceeded {
    /// `subject.concurrent-runs`, `agent.tokens-per-day`, …
    pub quota: String,
    /// The subject or agent it counts.
    pub key: String,
    /// The limit, as configured.
    pub limit: String,
    /// When trying again can succeed.
    pub retry_after: Duration,
}

#[derive(Debug, Default)]
struct Counters {
    running: u32,
    /// Starts within the last minute, oldest first.
    starts: VecDeque<Instant>,
    /// Days since the epoch (UTC) the spend below counts.
    day: i64,
    tokens: u64,
    cost: f64,
}

impl Counters {
    fn roll(&mut self, now: Instant, day: i64) {
        while self.starts.front().is_some_and(|t| now.duration_since(*t) >= MINUTE) {
            self.starts.pop_front();
        }
        if self.day != day {
            self.day = day;
            self.tokens = 0;
            self.cost = 0.0;
        }
    }

    fn check(&self, limits: &QuotaLimits, now: Instant) -> Option<(&'static str, String, Duration)> {
        if limits.concurrent_runs > 0 && self.running >= limits.concurrent_runs {
            return Some(("concurrent-runs", limits.concurrent_runs.to_string(), Duration::from_secs(1)));
        }
        if limits.runs_per_minute > 0 && self.starts.len() >= limits.runs_per_minute as usize {
            let oldest = self.starts.front().copied().unwrap_or(now);
            let wait = MINUTE.saturating_sub(now.duration_since(oldest));
            return Some(("runs-per-minute", limits.runs_per_minute.to_string(), wait));
        }
        if limits.tokens_per_day > 0 && self.tokens >= limits.tokens_per_day {
            return Some(("tokens-per-day", limits.tokens_per_day.to_string(), until_midnight()));
        }
        if limits.cost_per_day > 0.0 && self.cost >= limits.cost_per_day {
            return Some(("cost-per-day", limits.cost_per_day.to_string(), until_midnight()));
        }
        None
    }
}

fn epoch() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

fn today() -> i64 {
    (epoch().as_secs() / 86_400) as i64
}

fn until_midnight() -> Duration {
    Duration::from_secs(86_400 - epoch().as_secs() % 86_400)
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Subject(String),
    Agent(String),
}

/// The quota counters of this process.
#[derive(Debug, Default)]
pub struct Quotas {
    settings: QuotaSettings,
    counters: Mutex<HashMap<Key, Counters>>,
}

impl Quotas {
    /// Counters for these limits.
    pub fn new(settings: QuotaSettings) -> Self {
        Self { settings, counters: Mutex::default() }
    }

    /// Admits a run of `agent` for `subject` and reserves it, or says which quota refuses it.
    /// Without any limit configured this takes no lock.
    pub fn admit(self: &Arc<Self>, subject: &str, agent: &str) -> Result<QuotaPermit, QuotaExceeded> {
        let (subject_limits, agent_limits) = (self.settings.subject, self.settings.agent);
        if !subject_limits.any() && !agent_limits.any() {
            return Ok(QuotaPermit { quotas: None, keys: Vec::new() });
        }
        let keys = [(Key::Subject(subject.to_owned()), subject_limits), (Key::Agent(agent.to_owned()), agent_limits)];
        let (now, day) = (Instant::now(), today());
        let mut counters = self.counters.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for (key, limits) in &keys {
            let entry = counters.entry(key.clone()).or_default();
            entry.roll(now, day);
            if let Some((name, limit, retry_after)) = entry.check(limits, now) {
                let (scope, who) = match key {
                    Key::Subject(s) => ("subject", s.clone()),
                    Key::Agent(a) => ("agent", a.clone()),
                };
                return Err(QuotaExceeded { quota: format!("{scope}.{name}"), key: who, limit, retry_after });
            }
        }
        for (key, _) in &keys {
            let entry = counters.entry(key.clone()).or_default();
            entry.running += 1;
            entry.starts.push_back(now);
        }
        Ok(QuotaPermit { quotas: Some(self.clone()), keys: keys.into_iter().map(|(k, _)| k).collect() })
    }
}

/// A run admitted by [`Quotas::admit`]: it counts as in flight until dropped; what it used is
/// added with [`Self::spend`].
#[derive(Debug)]
pub struct QuotaPermit {
    quotas: Option<Arc<Quotas>>,
    keys: Vec<Key>,
}

impl QuotaPermit {
    /// Adds a finished run's tokens and cost (when priced) to today's spend of its subject and
    /// agent.
    pub fn spend(&self, tokens: u64, cost: Option<&Cost>) {
        let Some(quotas) = &self.quotas else { return };
        let day = today();
        let mut counters = quotas.counters.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for key in &self.keys {
            let entry = counters.entry(key.clone()).or_default();
            entry.roll(Instant::now(), day);
            entry.tokens += tokens;
            entry.cost += cost.map_or(0.0, |c| c.amount);
        }
    }
}

impl Drop for QuotaPermit {
    fn drop(&mut self) {
        let Some(quotas) = &self.quotas else { return };
        let mut counters = quotas.counters.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for key in &self.keys {
            if let Some(entry) = counters.get_mut(key) {
                entry.running = entry.running.saturating_sub(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quotas(subject: QuotaLimits, agent: QuotaLimits) -> Arc<Quotas> {
        Arc::new(Quotas::new(QuotaSettings { subject, agent }))
    }

    #[test]
    fn concurrency_is_reserved_at_admission_and_released_on_drop() {
        let q = quotas(QuotaLimits { concurrent_runs: 2, ..Default::default() }, QuotaLimits::default());
        let a = q.admit("alice", "x").expect("first");
        let _b = q.admit("alice", "x").expect("second");
        let refused = q.admit("alice", "x").expect_err("third");
        assert_eq!(
            (refused.quota.as_str(), refused.key.as_str(), refused.limit.as_str()),
            ("subject.concurrent-runs", "alice", "2")
        );
        assert!(q.admit("bob", "x").is_ok(), "per subject");
        drop(a);
        assert!(q.admit("alice", "x").is_ok());
    }

    #[test]
    fn runs_per_minute_and_daily_spend_per_agent() {
        let q = quotas(
            QuotaLimits::default(),
            QuotaLimits { runs_per_minute: 2, tokens_per_day: 100, ..Default::default() },
        );
        let first = q.admit("a", "bot").unwrap();
        first.spend(60, None);
        drop(q.admit("b", "bot").unwrap());
        let refused = q.admit("c", "bot").expect_err("third run in the minute");
        assert_eq!(refused.quota, "agent.runs-per-minute");
        assert!(refused.retry_after <= MINUTE && refused.retry_after > Duration::from_secs(50));
        first.spend(40, None);
        let q2 = quotas(QuotaLimits::default(), QuotaLimits { tokens_per_day: 100, ..Default::default() });
        q2.admit("a", "bot").unwrap().spend(100, None);
        let refused = q2.admit("a", "bot").expect_err("tokens spent");
        assert_eq!(refused.quota, "agent.tokens-per-day");
        assert!(refused.retry_after <= Duration::from_secs(86_400));
    }

    #[test]
    fn no_limits_take_no_lock() {
        let q = quotas(QuotaLimits::default(), QuotaLimits::default());
        for _ in 0..100 {
            q.admit("a", "b").unwrap().spend(1, None);
        }
        assert!(q.counters.lock().unwrap().is_empty());
    }
}
