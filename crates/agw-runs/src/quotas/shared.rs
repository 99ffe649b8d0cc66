//! The quota counters of a cluster, in Redis (`agw-cluster`), with the semantics of
//! [`super::local`] across replicas. Keys, under the cluster's prefix, start with
//! `quota:owner:[tenant,subject]` or `quota:agent:<key>`:
//! - runs in flight: a limited set `…:running` whose members on lost replicas do not count;
//! - runs per minute: a fixed-minute window `…:minute`;
//! - spend: counters `…:tokens:<day>` and `…:cost:<day>` (millionths), kept two days;
//! - reservations: a hash `…:reserved:<day>` of `node|run` → tokens still reserved.
//!
//! Redis unreachable: the run is admitted and its calls allowed (quotas protect cost, they must
//! not stop service), and the failure is logged. After a failure a run asks Redis again only
//! [`RETRY_AFTER_FAILURE`] later, so an outage costs each run one operation timeout, not one
//! per model call.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agw_memory::Owner;
use agw_modes::runtime::CallSpend;

use super::QuotaSettings;
use super::{
    Account, DAY, HELD_RETRY, MINUTE, QuotaExceeded, QuotaPermit, Scope, Store, scopes, today, until_midnight,
};

/// How long a run does without Redis after one of its quota operations failed.
pub(super) const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);

/// A run's handle on the shared counters.
#[derive(Debug)]
pub(super) struct SharedStore {
    cluster: agw_cluster::Cluster,
    run_id: String,
    /// Until when this run does not ask Redis (after a failure).
    skip_until: Mutex<Option<Instant>>,
}

fn tokens_key(scope: &Scope, day: i64) -> String {
    format!("{}:tokens:{day}", scope.key.shared_base())
}

fn cost_key(scope: &Scope, day: i64) -> String {
    format!("{}:cost:{day}", scope.key.shared_base())
}

fn reserved_key(scope: &Scope, day: i64) -> String {
    format!("{}:reserved:{day}", scope.key.shared_base())
}

/// An amount of the prices' currency in whole millionths (Redis counts integers).
fn micros(amount: f64) -> i64 {
    (amount * 1e6).round() as i64
}

impl SharedStore {
    pub(super) fn new(cluster: &agw_cluster::Cluster, run_id: &str) -> Self {
        SharedStore { cluster: cluster.clone(), run_id: run_id.to_owned(), skip_until: Mutex::new(None) }
    }

    /// Whether Redis is worth asking now (no recent failure of this run's).
    fn reachable(&self) -> bool {
        let skip = self.skip_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        skip.is_none_or(|until| Instant::now() >= until)
    }

    fn failed(&self, error: &agw_cluster::ClusterError, what: &str) {
        tracing::warn!(%error, run_id = %self.run_id, "shared quotas unavailable ({what}); the run goes on unchecked");
        *self.skip_until.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(Instant::now() + RETRY_AFTER_FAILURE);
    }

    /// Before a model call: the first daily limit the day's shared spend reached.
    pub(super) async fn check_daily(&self, account: &Account) -> Option<QuotaExceeded> {
        if !self.reachable() {
            return None;
        }
        let day = today();
        let mut keys = Vec::new();
        for scope in account.scopes.iter().filter(|s| s.limits.daily()) {
            if scope.limits.tokens_per_day > 0 {
                keys.push((scope, "tokens-per-day", tokens_key(scope, day)));
            }
            if scope.limits.cost_per_day > 0.0 {
                keys.push((scope, "cost-per-day", cost_key(scope, day)));
            }
        }
        let names: Vec<&str> = keys.iter().map(|(_, _, k)| k.as_str()).collect();
        let values = match self.cluster.get_counters(&names).await {
            Ok(values) => values,
            Err(e) => {
                self.failed(&e, "check before a model call");
                return None;
            }
        };
        keys.iter().zip(values).find_map(|((scope, name, _), value)| {
            let limits = &scope.limits;
            let (reached, limit) = if *name == "tokens-per-day" {
                (value >= 0 && value as u64 >= limits.tokens_per_day, limits.tokens_per_day.to_string())
            } else {
                (value as f64 / 1e6 >= limits.cost_per_day, limits.cost_per_day.to_string())
            };
            reached.then(|| QuotaExceeded::new(&scope.key, name, limit, until_midnight()))
        })
    }

    /// One model call's usage, added to today's shared spend of each key and taken off the
    /// run's reservations, in one atomic step.
    pub(super) async fn spend(&self, account: &Account, spend: CallSpend, settled: u64) {
        if !self.reachable() {
            return;
        }
        let day = today();
        let tokens = i64::try_from(spend.tokens).unwrap_or(i64::MAX);
        let cost = spend.cost.map_or(0, micros);
        let mut counters = Vec::new();
        let mut reservations = Vec::new();
        for scope in account.scopes.iter().filter(|s| s.limits.daily()) {
            counters.push((tokens_key(scope, day), tokens));
            counters.push((cost_key(scope, day), cost));
            if scope.reserves() {
                reservations.push(reserved_key(scope, account.day));
            }
        }
        let counters: Vec<(&str, i64)> = counters.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let reservations: Vec<&str> = reservations.iter().map(String::as_str).collect();
        if let Err(e) = self.cluster.spend(&counters, &reservations, &self.run_id, settled, 2 * DAY).await {
            self.failed(&e, "a model call's spend");
        }
    }

    /// The run ended: leaves the concurrency sets and drops its reservations, in the background
    /// (the run's end does not wait for Redis).
    pub(super) fn release(&self, account: &Account) {
        let entered: Vec<String> = account.scopes.iter().filter_map(|s| s.entered.get().cloned()).collect();
        let reservations: Vec<String> =
            account.scopes.iter().filter(|s| s.reserves()).map(|s| reserved_key(s, account.day)).collect();
        if entered.is_empty() && reservations.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (cluster, run_id) = (self.cluster.clone(), self.run_id.clone());
        runtime.spawn(async move {
            for key in &entered {
                if let Err(e) = cluster.leave_limited(key, &run_id).await {
                    tracing::warn!(error = %e, "a finished run still counts in a shared quota until its replica's lease ends");
                }
            }
            let reservations: Vec<&str> = reservations.iter().map(String::as_str).collect();
            if let Err(e) = cluster.release_reservation(&reservations, &run_id).await {
                tracing::warn!(error = %e, "a finished run's token reservation stays until its replica's lease ends");
            }
        });
    }
}

/// [`super::Quotas::admit`] across replicas: the same limits, counted in Redis, each decision
/// one atomic script. Redis unreachable: the run is admitted (see the module docs).
pub async fn admit_shared(
    cluster: &agw_cluster::Cluster,
    settings: &QuotaSettings,
    owner: &Owner,
    agent: &str,
    run_id: &str,
) -> Result<QuotaPermit, QuotaExceeded> {
    let scopes = scopes(settings, owner, agent);
    if scopes.is_empty() {
        return Ok(QuotaPermit::unlimited());
    }
    let day = today();
    let store = SharedStore::new(cluster, run_id);
    let reserve = settings.reserve_tokens;
    let account =
        Arc::new(Account { scopes, store: Store::Shared(store), day, reserved: Mutex::new(reserve), in_flight: true });
    // Held from the start: dropped on a refusal — or with this future, when the request goes
    // away — it leaves the sets entered and drops the reservations taken so far.
    let permit = QuotaPermit { account: Some(account.clone()) };
    for scope in &account.scopes {
        match admit_scope(cluster, scope, run_id, day, reserve).await {
            Ok(None) => {}
            Ok(Some(exceeded)) => return Err(exceeded),
            Err(e) => {
                let who = scope.key.who();
                tracing::warn!(error = %e, scope = scope.key.scope(), %who, "shared quotas unavailable; the run is admitted");
            }
        }
    }
    if !account.scopes.iter().any(Scope::reserves) {
        account.settle(u64::MAX);
    }
    Ok(permit)
}

/// One key's limits at admission; counts the run where it is admitted.
async fn admit_scope(
    cluster: &agw_cluster::Cluster,
    scope: &Scope,
    run_id: &str,
    day: i64,
    reserve: u64,
) -> Result<Option<QuotaExceeded>, agw_cluster::ClusterError> {
    let (limits, base) = (scope.limits, scope.key.shared_base());
    let refuse =
        |name: &str, limit: String, wait: Duration| Ok(Some(QuotaExceeded::new(&scope.key, name, limit, wait)));
    if limits.concurrent_runs > 0 {
        // Noted before it is asked for: leaving a set one never entered is harmless.
        let key = scope.entered.get_or_init(|| format!("{base}:running"));
        if !cluster.enter_limited(key, run_id, u64::from(limits.concurrent_runs)).await? {
            return refuse("concurrent-runs", limits.concurrent_runs.to_string(), Duration::from_secs(1));
        }
    }
    if limits.runs_per_minute > 0 {
        let (count, left) = cluster.hit_window(&format!("{base}:minute"), MINUTE).await?;
        if count > u64::from(limits.runs_per_minute) {
            let wait = left.max(Duration::from_secs(1));
            return refuse("runs-per-minute", limits.runs_per_minute.to_string(), wait);
        }
    }
    if limits.tokens_per_day > 0 {
        let (spent, held) = (tokens_key(scope, day), reserved_key(scope, day));
        scope.reserves.store(reserve > 0, Ordering::Relaxed);
        let reservation = cluster.reserve(&spent, &held, run_id, reserve, limits.tokens_per_day, 2 * DAY).await?;
        if !reservation.granted {
            // Not taken: nothing to settle or release.
            scope.reserves.store(false, Ordering::Relaxed);
            let spent_out = reservation.spent >= 0 && reservation.spent as u64 >= limits.tokens_per_day;
            let wait = if spent_out { until_midnight() } else { HELD_RETRY };
            return refuse("tokens-per-day", limits.tokens_per_day.to_string(), wait);
        }
    }
    if limits.cost_per_day > 0.0 {
        let spent = cluster.get_counter(&cost_key(scope, day)).await?;
        if spent as f64 / 1e6 >= limits.cost_per_day {
            return refuse("cost-per-day", limits.cost_per_day.to_string(), until_midnight());
        }
    }
    Ok(None)
}
