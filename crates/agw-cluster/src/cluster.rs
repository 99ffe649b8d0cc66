//! The cluster handle: connection, node lease and heartbeat, run records, chat locks, claims
//! and quotas. Frames live in `frames.rs`, control messages in `control.rs`.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{Client, FromRedisValue, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use crate::config::redact_url;
use crate::conn::{Shared, bounded, dedicated, lock, millis};
use crate::keys::Keys;
use crate::replay::{self, ReplayCache};
use crate::scripts::Scripts;
use crate::{ClusterConfig, ClusterConfigError, ClusterError, ClusterSecret, RunRecord};

/// Idle dedicated connections kept for blocking reads of control replies.
const POOL_MAX: usize = 8;
/// MAC domain of run records.
const RECORD_DOMAIN: &str = "agw-cluster run record";

/// A handle on the shared cluster state. Cheap to clone (one `Arc` inside); the node's
/// heartbeat and control server stop on [`Cluster::shutdown`] or when the last clone is dropped.
#[derive(Clone)]
pub struct Cluster {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) cfg: ClusterConfig,
    pub(crate) keys: Keys,
    /// The shared, auto-reconnecting multiplexed connection. Never used for blocking commands.
    pub(crate) shared: Arc<Shared>,
    pub(crate) scripts: Scripts,
    /// What control requests, replies and run records are signed with.
    pub(crate) secret: ClusterSecret,
    /// Nonces of the control requests this node accepted (shared by its control servers).
    pub(crate) replay: Arc<Mutex<ReplayCache>>,
    /// Idle dedicated connections for blocking commands (control replies).
    pub(crate) pool: Mutex<Vec<MultiplexedConnection>>,
    /// `true` once shut down; dropping the sender (last clone gone) also stops the tasks.
    pub(crate) stop: watch::Sender<bool>,
    pub(crate) heartbeat: Mutex<Option<JoinHandle<()>>>,
    pub(crate) servers: Mutex<Vec<JoinHandle<()>>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(h) = lock(&self.heartbeat).take() {
            h.abort();
        }
        for h in lock(&self.servers).drain(..) {
            h.abort();
        }
    }
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster").field("config", &self.inner.cfg).finish_non_exhaustive()
    }
}

impl Cluster {
    /// Connects to Redis (failing with a clear error within `op_timeout` when it is unreachable),
    /// takes this node's lease `{prefix}:node:{id}` and starts the heartbeat that refreshes it
    /// every lease/3.
    pub async fn connect(cfg: ClusterConfig) -> Result<Cluster, ClusterError> {
        cfg.validate()?;
        let secret = cfg.secret.clone().ok_or(ClusterConfigError::MissingSecret)?;
        let shown = redact_url(&cfg.url);
        let client =
            Client::open(cfg.url.as_str()).map_err(|e| ClusterError::Redis(format!("invalid redis url {shown}"), e))?;
        let started = Instant::now();

        // One plain attempt first: the connection manager retries with backoff, which would turn
        // a refused connection into a timeout without the reason.
        let mut probe = dedicated(&client, &cfg.url, cfg.op_timeout).await?;
        let left = cfg.op_timeout.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
        bounded(left, || format!("PING {shown}"), redis::cmd("PING").query_async::<()>(&mut probe)).await?;

        let left = cfg.op_timeout.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
        let shared = Shared::connect(client, &cfg.url, cfg.op_timeout, cfg.lease / 3, left).await?;

        let (stop, _) = watch::channel(false);
        let keys = Keys::new(&cfg.prefix);
        let cluster = Cluster {
            inner: Arc::new(Inner {
                keys,
                shared: Arc::new(shared),
                scripts: Scripts::new(),
                secret,
                replay: Arc::new(Mutex::new(ReplayCache::new(replay::CAPACITY))),
                pool: Mutex::new(vec![probe]),
                stop,
                heartbeat: Mutex::new(None),
                servers: Mutex::new(Vec::new()),
                cfg,
            }),
        };
        let inner = &cluster.inner;
        let lease_key = inner.keys.node(&inner.cfg.node_id);
        let mut set = redis::cmd("SET");
        set.arg(&lease_key).arg(&inner.cfg.node_id).arg("PX").arg(millis(inner.cfg.lease)).arg("GET");
        if cluster.query::<Option<String>>(|| format!("SET {lease_key}"), &set).await?.is_some() {
            tracing::warn!(
                node = %inner.cfg.node_id,
                "this node's lease was already held: another process uses the same node id, or this node restarted within its lease"
            );
        }

        let task = tokio::spawn(heartbeat(
            Arc::clone(&inner.shared),
            lease_key,
            inner.cfg.node_id.clone(),
            inner.cfg.lease,
            inner.stop.subscribe(),
        ));
        *lock(&inner.heartbeat) = Some(task);
        tracing::info!(node = %inner.cfg.node_id, prefix = %inner.cfg.prefix, url = %shown, "joined the agw cluster");
        Ok(cluster)
    }

    /// This node's id.
    pub fn node_id(&self) -> &str {
        &self.inner.cfg.node_id
    }

    /// The configuration the cluster was connected with.
    pub fn config(&self) -> &ClusterConfig {
        &self.inner.cfg
    }

    /// Whether Redis answers (for readiness probes).
    pub async fn ping(&self) -> Result<(), ClusterError> {
        self.query::<()>(|| "PING".into(), &redis::cmd("PING")).await
    }

    /// Stops the heartbeat and the control server and deletes this node's lease at once: a
    /// graceful exit is not a node loss. Other operations keep working afterwards; calling it
    /// again does nothing more.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        inner.stop.send_replace(true);
        let heartbeat = lock(&inner.heartbeat).take();
        if let Some(h) = heartbeat {
            h.abort();
            let _ = h.await;
        }
        let servers: Vec<_> = lock(&inner.servers).drain(..).collect();
        for h in servers {
            h.abort();
            let _ = h.await;
        }
        let key = inner.keys.node(&inner.cfg.node_id);
        let mut del = redis::cmd("DEL");
        del.arg(&key);
        match self.query::<()>(|| format!("DEL {key}"), &del).await {
            Ok(()) => tracing::info!(node = %inner.cfg.node_id, "left the agw cluster"),
            Err(e) => {
                tracing::warn!(node = %inner.cfg.node_id, error = %e, "cannot delete the node lease; it expires by itself")
            }
        }
    }

    /// Stops the heartbeat without deleting the lease, so that the node looks dead once its lease
    /// runs out. Tests only: simulates a crashed replica.
    #[doc(hidden)]
    pub fn stop_heartbeat_for_test(&self) {
        if let Some(h) = lock(&self.inner.heartbeat).take() {
            h.abort();
        }
    }

    /// Whether the node's lease is live.
    pub async fn node_alive(&self, node_id: &str) -> Result<bool, ClusterError> {
        let key = self.inner.keys.node(node_id);
        let mut cmd = redis::cmd("EXISTS");
        cmd.arg(&key);
        Ok(self.query::<i64>(|| format!("EXISTS {key}"), &cmd).await? == 1)
    }

    // ----- run records -----

    /// Writes (replaces) a run record. It has no expiry while the run is not finished. The run,
    /// chat and agent ids and the owner are signed (field `mac`); the node and the status, which
    /// Lua scripts change in place, are not.
    pub async fn put_run(&self, run: &RunRecord) -> Result<(), ClusterError> {
        let key = self.inner.keys.run(&run.run_id);
        let mac = hex::encode(self.record_mac(run));
        let mut fields: Vec<(&str, &str)> = vec![
            ("run_id", &run.run_id),
            ("chat_id", &run.chat_id),
            ("agent_key", &run.agent_key),
            ("node_id", &run.node_id),
            ("status", &run.status),
            ("mac", &mac),
        ];
        if let Some(owner) = &run.owner {
            fields.push(("owner", owner));
        }
        let mut pipe = redis::pipe();
        pipe.atomic().del(&key).ignore().hset_multiple(&key, &fields).ignore();
        self.inner.shared.pipe(|| format!("HSET {key}"), &pipe).await
    }

    /// Reads a run record; `None` when there is none (never written, or expired) and when its
    /// signature does not verify (rewritten in Redis, written with another secret or by an agw
    /// that did not sign records): logged, and treated as absent.
    pub async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, ClusterError> {
        let key = self.inner.keys.run(run_id);
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(&key);
        let mut map: HashMap<String, String> = self.query(|| format!("HGETALL {key}"), &cmd).await?;
        if map.is_empty() {
            return Ok(None);
        }
        let mac = map.remove("mac");
        let mut take = |field: &str| {
            map.remove(field).ok_or_else(|| ClusterError::Decode(format!("run record {key}: field {field} is missing")))
        };
        let record = RunRecord {
            run_id: take("run_id")?,
            chat_id: take("chat_id")?,
            agent_key: take("agent_key")?,
            node_id: take("node_id")?,
            status: take("status")?,
            owner: map.remove("owner"),
        };
        let genuine = record.run_id == run_id
            && mac.and_then(|m| hex::decode(m).ok()).is_some_and(|m| self.verify_record(&record, &m));
        if !genuine {
            tracing::warn!(
                run = run_id,
                "run record refused: its signature does not verify (rewritten in Redis, or written with another cluster secret); treated as absent"
            );
            return Ok(None);
        }
        Ok(Some(record))
    }

    /// The parts of a record that are signed: who may act on the run, and what it is.
    fn record_parts(run: &RunRecord) -> [&[u8]; 5] {
        let (has_owner, owner): (&[u8], &[u8]) = match &run.owner {
            Some(owner) => (b"1", owner.as_bytes()),
            None => (b"0", b""),
        };
        [run.run_id.as_bytes(), run.chat_id.as_bytes(), run.agent_key.as_bytes(), has_owner, owner]
    }

    fn record_mac(&self, run: &RunRecord) -> [u8; crate::secret::MAC_LEN] {
        self.inner.secret.mac(RECORD_DOMAIN, &Self::record_parts(run))
    }

    fn verify_record(&self, run: &RunRecord, mac: &[u8]) -> bool {
        self.inner.secret.verify(RECORD_DOMAIN, &Self::record_parts(run), mac)
    }

    /// Sets a run's status. `finished`: the record and the frame stream expire after
    /// [`ClusterConfig::retention`]; otherwise both lose any expiry. Does nothing when the record
    /// does not exist (never written, or already expired).
    pub async fn set_run_status(&self, run_id: &str, status: &str, finished: bool) -> Result<(), ClusterError> {
        let keys = &self.inner.keys;
        let (key, frames) = (keys.run(run_id), keys.frames(run_id));
        let mut inv = self.inner.scripts.set_run_status.key(&key);
        inv.key(&frames).arg(status).arg(if finished { "1" } else { "0" }).arg(millis(self.inner.cfg.retention));
        let found: i64 = self.eval(|| format!("set status of {key}"), &inv).await?;
        if found == 0 {
            tracing::debug!(run = run_id, status, "no run record to set the status of");
        }
        Ok(())
    }

    /// Records that `node_id` now executes the run (adoption by another node). Does nothing
    /// when the record does not exist.
    pub async fn set_run_node(&self, run_id: &str, node_id: &str) -> Result<(), ClusterError> {
        let key = self.inner.keys.run(run_id);
        let mut inv = self.inner.scripts.hset_if_exists.key(&key);
        inv.arg("node_id").arg(node_id);
        let found: i64 = self.eval(|| format!("set node of {key}"), &inv).await?;
        if found == 0 {
            tracing::debug!(run = run_id, node = node_id, "no run record to set the node of");
        }
        Ok(())
    }

    // ----- chat locks -----

    /// Takes the chat's run lock for `run_id`: `None` when acquired (or already held by this
    /// run), `Some(holder_run_id)` when another run of a live node holds it. A holder whose
    /// node lease is gone is replaced.
    pub async fn acquire_chat(&self, chat_id: &str, run_id: &str) -> Result<Option<String>, ClusterError> {
        let key = self.inner.keys.chat(chat_id);
        let mut inv = self.inner.scripts.acquire_chat.key(&key);
        inv.arg(self.node_id()).arg(run_id).arg(self.inner.keys.node_prefix());
        self.eval(|| format!("acquire {key}"), &inv).await
    }

    /// Releases the chat's run lock if `run_id` still holds it.
    pub async fn release_chat(&self, chat_id: &str, run_id: &str) -> Result<(), ClusterError> {
        let key = self.inner.keys.chat(chat_id);
        let mut inv = self.inner.scripts.release_chat.key(&key);
        inv.arg(run_id);
        self.eval::<i64>(|| format!("release {key}"), &inv).await.map(drop)
    }

    // ----- claims and quotas -----

    /// Claims `key` for this node for `ttl` (`SET {prefix}:claim:{key} node NX PX ttl`): `true`
    /// for exactly one caller across replicas until the claim expires. A zero `ttl` never
    /// expires.
    pub async fn claim(&self, key: &str, ttl: Duration) -> Result<bool, ClusterError> {
        let key = self.inner.keys.claim(key);
        let mut cmd = redis::cmd("SET");
        cmd.arg(&key).arg(self.node_id()).arg("NX");
        if !ttl.is_zero() {
            cmd.arg("PX").arg(millis(ttl));
        }
        let v: Value = self.query(|| format!("SET NX {key}"), &cmd).await?;
        Ok(!matches!(v, Value::Nil))
    }

    /// Enters `member` into the limited set `key` when fewer than `limit` live members are in it
    /// (members of nodes whose lease is gone are dropped first). `true` when in (also when it
    /// already was), `false` when full.
    pub async fn enter_limited(&self, key: &str, member: &str, limit: u64) -> Result<bool, ClusterError> {
        let key = self.inner.keys.limit(key);
        let mut inv = self.inner.scripts.enter_limited.key(&key);
        inv.arg(format!("{}|{member}", self.node_id())).arg(limit).arg(self.inner.keys.node_prefix());
        Ok(self.eval::<i64>(|| format!("enter {key}"), &inv).await? == 1)
    }

    /// Removes this node's `member` from the limited set `key`.
    pub async fn leave_limited(&self, key: &str, member: &str) -> Result<(), ClusterError> {
        let key = self.inner.keys.limit(key);
        let mut cmd = redis::cmd("SREM");
        cmd.arg(&key).arg(format!("{}|{member}", self.node_id()));
        self.query::<()>(|| format!("SREM {key}"), &cmd).await
    }

    /// How many members of live nodes the limited set `key` has (dropping the others).
    pub async fn count_limited(&self, key: &str) -> Result<u64, ClusterError> {
        let key = self.inner.keys.limit(key);
        let mut inv = self.inner.scripts.count_limited.key(&key);
        inv.arg(self.inner.keys.node_prefix());
        self.eval(|| format!("count {key}"), &inv).await
    }

    /// Counts one hit in a fixed window that starts with the first hit and lasts `window`:
    /// returns the count after this hit and the time left in the window.
    pub async fn hit_window(&self, key: &str, window: Duration) -> Result<(u64, Duration), ClusterError> {
        let key = self.inner.keys.window(key);
        let mut inv = self.inner.scripts.hit_window.key(&key);
        inv.arg(millis(window));
        let (count, left): (u64, i64) = self.eval(|| format!("hit {key}"), &inv).await?;
        Ok((count, Duration::from_millis(u64::try_from(left).unwrap_or(0))))
    }

    /// Adds `amount` to the counter `key` (`INCRBY`), giving it `ttl` when it is new (a zero
    /// `ttl`: no expiry). Returns the new value.
    pub async fn add_counter(&self, key: &str, amount: i64, ttl: Duration) -> Result<i64, ClusterError> {
        let key = self.inner.keys.counter(key);
        let ttl_ms = if ttl.is_zero() { 0 } else { millis(ttl) };
        let mut inv = self.inner.scripts.add_counter.key(&key);
        inv.arg(amount).arg(ttl_ms);
        self.eval(|| format!("INCRBY {key}"), &inv).await
    }

    /// The counter's value (0 when it does not exist).
    pub async fn get_counter(&self, key: &str) -> Result<i64, ClusterError> {
        let key = self.inner.keys.counter(key);
        let mut cmd = redis::cmd("GET");
        cmd.arg(&key);
        Ok(self.query::<Option<i64>>(|| format!("GET {key}"), &cmd).await?.unwrap_or(0))
    }

    // ----- plumbing -----

    /// One command on the shared connection, bounded by `op_timeout`.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        what: impl FnOnce() -> String,
        cmd: &redis::Cmd,
    ) -> Result<T, ClusterError> {
        self.inner.shared.query(what, cmd).await
    }

    /// One script on the shared connection, bounded by `op_timeout`.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        what: impl FnOnce() -> String,
        inv: &redis::ScriptInvocation<'_>,
    ) -> Result<T, ClusterError> {
        self.inner.shared.eval(what, inv).await
    }

    /// A dedicated connection for a blocking command: an idle one (`true`) or a new one.
    pub(crate) async fn take_dedicated(&self) -> Result<(MultiplexedConnection, bool), ClusterError> {
        let idle = lock(&self.inner.pool).pop();
        match idle {
            Some(c) => Ok((c, true)),
            None => Ok((self.new_dedicated().await?, false)),
        }
    }

    /// A new dedicated connection for a blocking command.
    pub(crate) async fn new_dedicated(&self) -> Result<MultiplexedConnection, ClusterError> {
        let shared = &self.inner.shared;
        dedicated(shared.client(), shared.url(), shared.op_timeout()).await
    }

    /// Returns a dedicated connection whose last command completed normally.
    pub(crate) fn put_dedicated(&self, conn: MultiplexedConnection) {
        let mut pool = lock(&self.inner.pool);
        if pool.len() < POOL_MAX {
            pool.push(conn);
        }
    }
}

/// Refreshes the node lease every lease/3 until stopped (shutdown or last clone dropped).
async fn heartbeat(
    shared: Arc<Shared>,
    key: String,
    node_id: String,
    lease: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let period = lease / 3;
    let mut tick = tokio::time::interval_at(Instant::now() + period, period);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => {}
        }
        let mut cmd = redis::cmd("SET");
        cmd.arg(&key).arg(&node_id).arg("PX").arg(millis(lease)).arg("GET");
        match shared.query::<Option<String>>(|| format!("SET {key}"), &cmd).await {
            Ok(Some(_)) => {
                if failing {
                    tracing::info!(node = %node_id, "node lease refreshed again");
                    failing = false;
                }
            }
            Ok(None) => {
                tracing::error!(
                    node = %node_id,
                    "node lease had expired: other nodes may have taken over this node's runs; lease re-established"
                );
                failing = false;
            }
            Err(e) => {
                tracing::warn!(node = %node_id, error = %e, "cannot refresh the node lease");
                failing = true;
            }
        }
    }
}
