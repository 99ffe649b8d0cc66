//! Quotas per owner and per agent (`docs/observability.md#quotas`): runs in flight, runs per
//! minute, tokens and cost per UTC day. An owner is the caller's subject within its tenant
//! (the pair that owns chats), so `alice` of one tenant never spends `alice` of another's
//! quota; with auth off every caller is the one anonymous owner.
//!
//! Admission — before anything is streamed or any provider is called — checks every limit and
//! counts the run under one lock (in a cluster: one atomic Redis script per limit), so
//! concurrent requests can never start more runs than a limit allows; refused runs get 429
//! `quota_exceeded` with `Retry-After`. It also reserves `agw.quotas.reserve-tokens` against
//! each daily token limit: a run is admitted only while the day's spend plus the reservations
//! of runs in flight is below the limit.
//!
//! Daily tokens and cost are then checked again before every model call and each call's usage
//! is counted as soon as it is known (the run's [`QuotaGate`], [`QuotaPermit::gate`]), which
//! settles the run's reservation. So runs in flight see each other's spend as it happens, and
//! the day's spend passes a limit by at most one model call per run in flight: the call that
//! was allowed while the spend was still below it.
//!
//! On one node the counters live in this process (`local`); in a cluster (`agw.redis.url`)
//! in Redis, the same semantics across replicas (`shared`).

mod local;
mod settings;
mod shared;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agw_memory::Owner;
use agw_modes::runtime::{CallSpend, QuotaGate, QuotaRefused};
use futures::future::BoxFuture;

pub use local::Quotas;
pub use settings::{QuotaLimits, QuotaSettings};
pub(crate) use shared::admit_shared;

const MINUTE: Duration = Duration::from_secs(60);
const DAY: Duration = Duration::from_secs(86_400);

/// Which quota refused a run or a model call.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QuotaExceeded {
    /// `subject.concurrent-runs`, `agent.tokens-per-day`, …
    pub quota: String,
    /// The owner or agent it counts, as messages name it (`alice`, `alice (tenant t1)`).
    pub key: String,
    /// The limit, as configured.
    pub limit: String,
    /// When trying again can succeed.
    pub retry_after: Duration,
}

impl QuotaExceeded {
    fn new(key: &Key, name: &str, limit: String, retry_after: Duration) -> Self {
        QuotaExceeded { quota: format!("{}.{name}", key.scope()), key: key.who(), limit, retry_after }
    }

    /// Seconds until trying again can succeed, at least 1.
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_secs().max(1)
    }

    /// What the 429 answer and the `run.error` say.
    pub fn message(&self) -> String {
        format!(
            "quota {} of {} reached (limit {}); retry in {} s",
            self.quota,
            self.key,
            self.limit,
            self.retry_after_secs()
        )
    }
}

/// Whose quota a counter is.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    /// A user: subject and tenant.
    Owner(Owner),
    /// An agent, all users together.
    Agent(String),
}

impl Key {
    /// The first part of the quota's name (the settings say `subject-…` and `agent-…`).
    fn scope(&self) -> &'static str {
        match self {
            Key::Owner(_) => "subject",
            Key::Agent(_) => "agent",
        }
    }

    /// As messages and logs name it.
    fn who(&self) -> String {
        match self {
            Key::Owner(Owner { sub, tenant: Some(tenant) }) => format!("{sub} (tenant {tenant})"),
            Key::Owner(owner) => owner.sub.clone(),
            Key::Agent(agent) => agent.clone(),
        }
    }

    /// The prefix of its Redis keys. Tenant and subject are a JSON array: either may contain
    /// `:`, and no two pairs may name the same key.
    fn shared_base(&self) -> String {
        match self {
            Key::Owner(owner) => format!("quota:owner:{}", serde_json::json!([owner.tenant, owner.sub])),
            Key::Agent(agent) => format!("quota:agent:{agent}"),
        }
    }
}

/// One key a run counts under, with its limits.
#[derive(Debug)]
struct Scope {
    key: Key,
    limits: QuotaLimits,
    /// Holds (or may hold: set before the reservation is asked for) a reservation against the
    /// daily token limit.
    reserves: AtomicBool,
    /// In a cluster: the concurrency set the run entered (or tried to), left when the permit
    /// is dropped.
    entered: OnceLock<String>,
}

impl Scope {
    fn reserves(&self) -> bool {
        self.reserves.load(Ordering::Relaxed)
    }
}

/// The keys of a run: its owner's and its agent's, those with any limit set.
fn scopes(settings: &QuotaSettings, owner: &Owner, agent: &str) -> Vec<Scope> {
    [(Key::Owner(owner.clone()), settings.subject), (Key::Agent(agent.to_owned()), settings.agent)]
        .into_iter()
        .filter(|(_, limits)| limits.any())
        .map(|(key, limits)| Scope { key, limits, reserves: AtomicBool::new(false), entered: OnceLock::new() })
        .collect()
}

fn epoch() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// Days since the epoch, UTC.
fn today() -> i64 {
    (epoch().as_secs() / 86_400) as i64
}

fn until_midnight() -> Duration {
    Duration::from_secs(86_400 - epoch().as_secs() % 86_400)
}

/// Where a run's counters are.
#[derive(Debug)]
enum Store {
    Local(Arc<Quotas>),
    Shared(shared::SharedStore),
}

/// What a run counts under, shared by its permit and its gate.
#[derive(Debug)]
struct Account {
    scopes: Vec<Scope>,
    store: Store,
    /// The UTC day the reservation was taken.
    day: i64,
    /// Tokens the run still holds reserved, in every scope that `reserves`.
    reserved: Mutex<u64>,
    /// Counted as a run in flight (admitted; a run continued after a restart is not).
    in_flight: bool,
}

impl Account {
    /// Takes up to `tokens` off the reservation; returns how much.
    fn settle(&self, tokens: u64) -> u64 {
        let mut reserved = self.reserved.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let settled = tokens.min(*reserved);
        *reserved -= settled;
        settled
    }

    /// Whether any of its scopes has a daily limit.
    fn daily(&self) -> bool {
        self.scopes.iter().any(|s| s.limits.daily())
    }

    /// The daily limits allow a model call now.
    async fn may_call(&self) -> Result<(), QuotaExceeded> {
        let refused = match &self.store {
            Store::Local(quotas) => quotas.check_daily(self),
            Store::Shared(store) => store.check_daily(self).await,
        };
        match refused {
            Some(e) => {
                tracing::info!(quota = %e.quota, key = %e.key, limit = %e.limit, "model call refused by a quota");
                Err(e)
            }
            None => Ok(()),
        }
    }

    /// Counts a model call's usage, settling the reservation.
    async fn spent(&self, spend: CallSpend) {
        let settled = self.settle(spend.tokens);
        match &self.store {
            Store::Local(quotas) => quotas.spend(self, spend, settled),
            Store::Shared(store) => store.spend(self, spend, settled).await,
        }
    }
}

/// A run's place in its owner's and agent's quotas, from `admit_run` or `continue_run`: it
/// counts as in flight and holds its reservation until released (or dropped); its model calls
/// go through [`Self::gate`].
#[derive(Debug)]
pub struct QuotaPermit {
    account: Option<Arc<Account>>,
}

impl QuotaPermit {
    /// A permit that counts nothing (no limit configured).
    fn unlimited() -> Self {
        QuotaPermit { account: None }
    }

    /// The gate every model call of the run asks first and tells its usage; `None` when no
    /// daily token or cost limit applies to the run.
    pub fn gate(&self) -> Option<Arc<dyn QuotaGate>> {
        let account = self.account.as_ref().filter(|a| a.daily())?;
        Some(Arc::new(Gate(account.clone())))
    }

    /// What the gate asks, for a model call made outside a run (`POST /api/ap/compact`): the
    /// daily limits allow it now.
    pub async fn may_call(&self) -> Result<(), QuotaExceeded> {
        match &self.account {
            Some(account) => account.may_call().await,
            None => Ok(()),
        }
    }

    /// What the gate is told, for a model call made outside a run.
    pub async fn spent(&self, spend: CallSpend) {
        if let Some(account) = &self.account {
            account.spent(spend).await;
        }
    }

    /// The run ended: it leaves the runs in flight and gives back what it still reserved (on
    /// one node at once, in a cluster in the background). Dropping the permit does the same.
    pub fn release(&mut self) {
        let Some(account) = self.account.take() else { return };
        // The gate, if still held, has nothing left to settle.
        let left = account.settle(u64::MAX);
        match &account.store {
            Store::Local(quotas) => quotas.release(&account, left),
            Store::Shared(store) => store.release(&account),
        }
    }
}

impl Drop for QuotaPermit {
    fn drop(&mut self) {
        self.release();
    }
}

/// The run's side of its quotas, as the runtime sees it.
struct Gate(Arc<Account>);

impl QuotaGate for Gate {
    fn may_call(&self) -> BoxFuture<'_, Result<(), QuotaRefused>> {
        Box::pin(async move { self.0.may_call().await.map_err(|e| QuotaRefused(e.message())) })
    }

    fn spent(&self, spend: CallSpend) -> BoxFuture<'_, ()> {
        Box::pin(self.0.spent(spend))
    }
}

impl Quotas {
    /// Admits a run of `agent` for `owner`: counted in this process, or in the cluster's Redis.
    pub(crate) async fn admit_run(
        self: &Arc<Self>,
        cluster: Option<&agw_cluster::Cluster>,
        owner: &Owner,
        agent: &str,
        run_id: &str,
    ) -> Result<QuotaPermit, QuotaExceeded> {
        match cluster {
            Some(cluster) if self.settings().any() => {
                admit_shared(cluster, self.settings(), owner, agent, run_id).await
            }
            _ => self.admit(owner, agent),
        }
    }

    /// The quotas of a run that continues after a restart (durable waiting): not admitted again
    /// (it was, before the restart), but its model calls are checked and counted like any run's.
    /// Also those of a model call outside any run (a compaction).
    pub(crate) fn continue_run(
        self: &Arc<Self>,
        cluster: Option<&agw_cluster::Cluster>,
        owner: &Owner,
        agent: &str,
        run_id: &str,
    ) -> QuotaPermit {
        let scopes: Vec<Scope> =
            scopes(self.settings(), owner, agent).into_iter().filter(|s| s.limits.daily()).collect();
        if scopes.is_empty() {
            return QuotaPermit::unlimited();
        }
        let store = match cluster {
            Some(cluster) => Store::Shared(shared::SharedStore::new(cluster, run_id)),
            None => Store::Local(self.clone()),
        };
        let account = Account { scopes, store, day: today(), reserved: Mutex::new(0), in_flight: false };
        QuotaPermit { account: Some(Arc::new(account)) }
    }
}

/// How long admission says to wait when the day's tokens are held by runs in flight (their
/// reservations go when they end), not spent.
const HELD_RETRY: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests;
