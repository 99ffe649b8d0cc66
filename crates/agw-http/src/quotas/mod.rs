//! Quotas per subject and per agent (`docs/observability.md#quotas`): runs in flight, runs per
//! minute, tokens and cost per UTC day. Checked when a run is admitted — before anything is
//! streamed or any provider is called — and refused with 429 `quota_exceeded` and
//! `Retry-After`. On one node the counters live in this process; in a cluster
//! (`agw.redis.url`) they live in Redis and hold across replicas ([`admit_shared`]).
//!
//! Admission checks every limit and reserves the run under one lock (in a cluster: one atomic
//! Redis script per limit), so concurrent requests can never start more runs than a limit
//! allows.

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
            return Ok(QuotaPermit { quotas: None, keys: Vec::new(), shared: None });
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
        Ok(QuotaPermit { quotas: Some(self.clone()), keys: keys.into_iter().map(|(k, _)| k).collect(), shared: None })
    }
}

/// A run admitted by [`Quotas::admit`] or [`admit_shared`]: it counts as in flight until
/// dropped; what it used is added with [`Self::spend`].
#[derive(Debug)]
pub struct QuotaPermit {
    quotas: Option<Arc<Quotas>>,
    keys: Vec<Key>,
    shared: Option<Shared>,
}

/// The cluster side of a permit: the Redis keys it counts under.
#[derive(Debug)]
struct Shared {
    cluster: agw_cluster::Cluster,
    run_id: String,
    /// Key prefixes (`quota:subject:<sub>`, `quota:agent:<key>`) whose spend this run adds to.
    scopes: Vec<String>,
    /// The concurrency sets the run entered.
    entered: Vec<String>,
}

const DAY: Duration = Duration::from_secs(86_400);

fn refused(scope: &str, who: &str, name: &str, limit: String, retry_after: Duration) -> QuotaExceeded {
    QuotaExceeded { quota: format!("{scope}.{name}"), key: who.to_owned(), limit, retry_after }
}

/// [`Quotas::admit`] across replicas: the same limits, counted in Redis. Runs in flight are a
/// set per subject and agent whose members on lost replicas do not count; runs per minute a
/// counter per fixed minute window; tokens and cost (in micro-units) counters per UTC day.
/// Redis unreachable: the run is admitted (quotas protect cost, they must not stop service) and
/// the failure is logged.
pub async fn admit_shared(
    cluster: &agw_cluster::Cluster,
    settings: &QuotaSettings,
    subject: &str,
    agent: &str,
    run_id: &str,
) -> Result<QuotaPermit, QuotaExceeded> {
    let mut shared =
        Shared { cluster: cluster.clone(), run_id: run_id.to_owned(), scopes: Vec::new(), entered: Vec::new() };
    let day = today();
    for (scope, who, limits) in [("subject", subject, settings.subject), ("agent", agent, settings.agent)] {
        if !limits.any() {
            continue;
        }
        let base = format!("quota:{scope}:{who}");
        shared.scopes.push(base.clone());
        let checked: Result<Option<QuotaExceeded>, agw_cluster::ClusterError> = async {
            if limits.concurrent_runs > 0 {
                let key = format!("{base}:running");
                if !cluster.enter_limited(&key, run_id, u64::from(limits.concurrent_runs)).await? {
                    let limit = limits.concurrent_runs.to_string();
                    return Ok(Some(refused(scope, who, "concurrent-runs", limit, Duration::from_secs(1))));
                }
                shared.entered.push(key);
            }
            if limits.runs_per_minute > 0 {
                let (count, left) = cluster.hit_window(&format!("{base}:minute"), MINUTE).await?;
                if count > u64::from(limits.runs_per_minute) {
                    let limit = limits.runs_per_minute.to_string();
                    return Ok(Some(refused(scope, who, "runs-per-minute", limit, left.max(Duration::from_secs(1)))));
                }
            }
            if limits.tokens_per_day > 0 {
                let spent = cluster.get_counter(&format!("{base}:tokens:{day}")).await?;
                if spent >= 0 && spent as u64 >= limits.tokens_per_day {
                    let limit = limits.tokens_per_day.to_string();
                    return Ok(Some(refused(scope, who, "tokens-per-day", limit, until_midnight())));
                }
            }
            if limits.cost_per_day > 0.0 {
                let micros = cluster.get_counter(&format!("{base}:cost:{day}")).await?;
                if micros as f64 / 1e6 >= limits.cost_per_day {
                    let limit = limits.cost_per_day.to_string();
                    return Ok(Some(refused(scope, who, "cost-per-day", limit, until_midnight())));
                }
            }
            Ok(None)
        }
        .await;
        match checked {
            Ok(None) => {}
            // Dropping the permit leaves the sets entered so far.
            Ok(Some(exceeded)) => return Err(exceeded),
            Err(e) => tracing::warn!(error = %e, scope, who, "shared quotas unavailable; the run is admitted"),
        }
    }
    Ok(QuotaPermit { quotas: None, keys: Vec::new(), shared: Some(shared) })
}

impl QuotaPermit {
    /// Adds a finished run's tokens and cost (when priced) to today's spend of its subject and
    /// agent.
    pub fn spend(&self, tokens: u64, cost: Option<&Cost>) {
        if let Some(shared) = &self.shared {
            let (cluster, scopes, day) = (shared.cluster.clone(), shared.scopes.clone(), today());
            let micros = cost.map_or(0, |c| (c.amount * 1e6).round() as i64);
            tokio::spawn(async move {
                for base in scopes {
                    let tokens = i64::try_from(tokens).unwrap_or(i64::MAX);
                    let added = async {
                        cluster.add_counter(&format!("{base}:tokens:{day}"), tokens, 2 * DAY).await?;
                        cluster.add_counter(&format!("{base}:cost:{day}"), micros, 2 * DAY).await
                    };
                    if let Err(e) = added.await {
                        tracing::warn!(error = %e, "a run's spend was not added to the shared quotas");
                    }
                }
            });
        }
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
        if let Some(shared) = self.shared.take()
            && !shared.entered.is_empty()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                for key in &shared.entered {
                    if let Err(e) = shared.cluster.leave_limited(key, &shared.run_id).await {
                        tracing::warn!(error = %e, "a finished run still counts in a shared quota until its replica's lease ends");
                    }
                }
            });
        }
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
