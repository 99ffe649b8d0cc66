//! Model cool-downs (docs/models.md, "Fallbacks") shared by the replicas of a cluster: a model one
//! replica saw fail is skipped by the runs of every replica, until its cool-down expires in Redis
//! (`agw-cluster`, keys `{prefix}:cooldown:{provider}/{model}`).
//!
//! Redis unreachable: this replica's own memory answers (every cool-down is also kept there), and
//! Redis is not asked again for [`RETRY_AFTER_FAILURE`], so an outage costs the process one
//! operation timeout every so often, not one per model call. A cool-down only orders the models
//! a call tries; it never stops a run.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agw_modes::definition::ModelRef;
use agw_modes::runtime::{CooldownStore, Cooldowns, LocalCooldowns, cooldown_key};
use futures::future::BoxFuture;

/// How long the process does without Redis for cool-downs after an operation failed.
pub(crate) const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(10);

/// What the process keeps of cool-downs: its own copy, and when Redis last failed.
#[derive(Debug, Default)]
pub(crate) struct CooldownMemory {
    local: LocalCooldowns,
    skip_until: Mutex<Option<Instant>>,
}

/// The cool-down store of a clustered run.
pub(crate) struct SharedCooldowns {
    cluster: agw_cluster::Cluster,
    memory: Arc<CooldownMemory>,
}

impl SharedCooldowns {
    pub(crate) fn new(cluster: &agw_cluster::Cluster, memory: Arc<CooldownMemory>) -> Self {
        SharedCooldowns { cluster: cluster.clone(), memory }
    }

    /// Whether Redis is worth asking now (no recent failure).
    fn reachable(&self) -> bool {
        let skip = self.memory.skip_until.lock().unwrap_or_else(PoisonError::into_inner);
        skip.is_none_or(|until| Instant::now() >= until)
    }

    fn failed(&self, error: &agw_cluster::ClusterError) {
        tracing::warn!(%error, "shared model cool-downs unavailable; this replica's own are used");
        *self.memory.skip_until.lock().unwrap_or_else(PoisonError::into_inner) =
            Some(Instant::now() + RETRY_AFTER_FAILURE);
    }
}

impl CooldownStore for SharedCooldowns {
    fn cooling<'a>(&'a self, models: &'a [ModelRef]) -> BoxFuture<'a, Vec<bool>> {
        Box::pin(async move {
            let own = || models.iter().map(|m| self.memory.local.is_cooling(m)).collect();
            if !self.reachable() {
                return own();
            }
            let keys: Vec<String> = models.iter().map(cooldown_key).collect();
            let names: Vec<&str> = keys.iter().map(String::as_str).collect();
            match self.cluster.cooling(&names).await {
                Ok(cooling) => cooling,
                Err(error) => {
                    self.failed(&error);
                    own()
                }
            }
        })
    }

    fn cool_down<'a>(&'a self, model: &'a ModelRef, duration: Duration) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.memory.local.set(model, duration);
            if self.reachable()
                && let Err(error) = self.cluster.set_cooldown(&cooldown_key(model), duration).await
            {
                self.failed(&error);
            }
        })
    }
}

/// The cool-downs of a new run: shared through `cluster` when the replica is in one, else the
/// process's own memory.
pub(crate) fn for_run(
    cluster: Option<&agw_cluster::Cluster>,
    memory: &Arc<CooldownMemory>,
    min: Duration,
    max: Duration,
) -> Cooldowns {
    let store: Arc<dyn CooldownStore> = match cluster {
        Some(cluster) => Arc::new(SharedCooldowns::new(cluster, memory.clone())),
        None => Arc::new(LocalMemory(memory.clone())),
    };
    Cooldowns { store, min, max }
}

/// The process's memory as a store of its own (one replica, no Redis).
struct LocalMemory(Arc<CooldownMemory>);

impl CooldownStore for LocalMemory {
    fn cooling<'a>(&'a self, models: &'a [ModelRef]) -> BoxFuture<'a, Vec<bool>> {
        self.0.local.cooling(models)
    }

    fn cool_down<'a>(&'a self, model: &'a ModelRef, duration: Duration) -> BoxFuture<'a, ()> {
        self.0.local.cool_down(model, duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(p: &str, m: &str) -> ModelRef {
        ModelRef { provider_key: p.into(), model: m.into() }
    }

    /// Two replicas' stores on one Redis: what one cools down, the other skips, until it expires.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn replicas_share_cool_downs_through_redis() {
        let Some(url) = std::env::var("AGW_TEST_REDIS_URL").ok().filter(|u| !u.is_empty()) else {
            eprintln!("skipped: AGW_TEST_REDIS_URL is not set (Redis cool-down test)");
            return;
        };
        let prefix = format!("agwtest:{}", uuid_like());
        let config = || agw_cluster::ClusterConfig {
            url: url.clone(),
            prefix: prefix.clone(),
            secret: Some(agw_cluster::ClusterSecret::new("agw-runs-cooldown-tests-shared-secret-0123").unwrap()),
            ..agw_cluster::ClusterConfig::default()
        };
        let (one, two) = (
            agw_cluster::Cluster::connect(config()).await.expect("connect to the test redis"),
            agw_cluster::Cluster::connect(config()).await.expect("connect to the test redis"),
        );
        let a = SharedCooldowns::new(&one, Arc::default());
        let b = SharedCooldowns::new(&two, Arc::default());
        let (primary, spare) = (model("Main", "org/big"), model("spare", "small"));
        assert_eq!(b.cooling(&[primary.clone(), spare.clone()]).await, [false, false]);

        a.cool_down(&primary, Duration::from_millis(700)).await;
        assert_eq!(b.cooling(&[primary.clone(), spare.clone()]).await, [true, false], "seen by the other replica");
        assert_eq!(b.cooling(&[model("main", "org/big")]).await, [true], "provider keys are case-insensitive");
        assert!(!b.memory.local.is_cooling(&primary), "from Redis, not from its own memory");

        tokio::time::sleep(Duration::from_millis(900)).await;
        assert_eq!(b.cooling(std::slice::from_ref(&primary)).await, [false], "expired in Redis");

        // A later failure sets a new end on every replica.
        b.cool_down(&spare, Duration::from_secs(60)).await;
        a.cool_down(&spare, Duration::from_millis(300)).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(b.cooling(std::slice::from_ref(&spare)).await, [false]);
        one.shutdown().await;
        two.shutdown().await;
    }

    /// One replica: the process's memory, shared by its runs.
    #[tokio::test]
    async fn alone_the_process_memory_is_shared_by_its_runs() {
        let memory = Arc::new(CooldownMemory::default());
        let store = for_run(None, &memory, Duration::from_secs(30), Duration::from_secs(600));
        store.store.cool_down(&model("p", "m"), Duration::from_secs(30)).await;
        assert_eq!(store.store.cooling(&[model("p", "m"), model("p", "n")]).await, [true, false]);
        let again = for_run(None, &memory, Duration::from_secs(30), Duration::from_secs(600));
        assert_eq!(again.store.cooling(&[model("P", "m")]).await, [true]);
    }

    fn uuid_like() -> String {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        format!("{nanos:x}-{}", std::process::id())
    }
}
