//! The shared connection: one auto-reconnecting multiplexed connection for every non-blocking
//! command, each bounded by `op_timeout`, plus the dedicated connections for blocking commands.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};
use redis::{AsyncConnectionConfig, Client, FromRedisValue, RedisResult};

use crate::ClusterError;
use crate::config::redact_url;

/// Commands in a row without any answer after which the shared connection is replaced. The
/// connection manager reconnects by itself on I/O errors only; a link that silently stopped
/// answering (a vanished peer, a failover behind a stale address) would otherwise time out every
/// command until the OS gives up on the socket, which takes many minutes.
const REPLACE_AFTER_TIMEOUTS: u32 = 3;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs one Redis future bounded by `limit`; `what` names it in the error. A timeout (ours or
/// the client's response timeout) is [`ClusterError::Timeout`].
pub(crate) async fn bounded<T>(
    limit: Duration,
    what: impl FnOnce() -> String,
    fut: impl Future<Output = RedisResult<T>>,
) -> Result<T, ClusterError> {
    match tokio::time::timeout(limit, fut).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) if e.is_timeout() => Err(ClusterError::Timeout),
        Ok(Err(e)) => Err(ClusterError::Redis(what(), e)),
        Err(_) => Err(ClusterError::Timeout),
    }
}

/// Opens a dedicated connection (for blocking commands) within `limit`. Its commands have no
/// response timeout of their own: callers bound them.
pub(crate) async fn dedicated(
    client: &Client,
    url: &str,
    limit: Duration,
) -> Result<MultiplexedConnection, ClusterError> {
    let config = AsyncConnectionConfig::new().set_connection_timeout(Some(limit)).set_response_timeout(None);
    let what = || format!("connect to {}", redact_url(url));
    match tokio::time::timeout(limit, client.get_multiplexed_async_connection_with_config(&config)).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(ClusterError::Redis(what(), e)),
        Err(_) => Err(ClusterError::Redis(
            what(),
            std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no connection within {limit:?}")).into(),
        )),
    }
}

/// Milliseconds for a PX/PEXPIRE argument (at least 1).
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// The shared connection. Held by the cluster handle and by its background tasks (heartbeat,
/// control server), which must not keep the handle itself alive.
pub(crate) struct Shared {
    client: Client,
    url: String,
    op_timeout: Duration,
    manager_config: ConnectionManagerConfig,
    conn: Mutex<ConnectionManager>,
    timeouts: AtomicU32,
}

impl Shared {
    /// Connects the shared connection within `limit`.
    pub(crate) async fn connect(
        client: Client,
        url: &str,
        op_timeout: Duration,
        max_retry_delay: Duration,
        limit: Duration,
    ) -> Result<Self, ClusterError> {
        let manager_config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(op_timeout))
            .set_response_timeout(Some(op_timeout))
            .set_number_of_retries(4)
            .set_max_delay(max_retry_delay);
        let conn = match tokio::time::timeout(
            limit,
            ConnectionManager::new_with_config(client.clone(), manager_config.clone()),
        )
        .await
        {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(ClusterError::Redis(format!("connect to {}", redact_url(url)), e)),
            Err(_) => return Err(ClusterError::Timeout),
        };
        Ok(Self {
            client,
            url: url.to_owned(),
            op_timeout,
            manager_config,
            conn: Mutex::new(conn),
            timeouts: AtomicU32::new(0),
        })
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn op_timeout(&self) -> Duration {
        self.op_timeout
    }

    /// One command, bounded by `op_timeout`.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        what: impl FnOnce() -> String,
        cmd: &redis::Cmd,
    ) -> Result<T, ClusterError> {
        let mut conn = lock(&self.conn).clone();
        let result = bounded(self.op_timeout, what, cmd.query_async(&mut conn)).await;
        self.observe(&result);
        result
    }

    /// One pipeline, bounded by `op_timeout`.
    pub(crate) async fn pipe<T: FromRedisValue>(
        &self,
        what: impl FnOnce() -> String,
        pipe: &redis::Pipeline,
    ) -> Result<T, ClusterError> {
        let mut conn = lock(&self.conn).clone();
        let result = bounded(self.op_timeout, what, pipe.query_async(&mut conn)).await;
        self.observe(&result);
        result
    }

    /// One script, bounded by `op_timeout`.
    pub(crate) async fn eval<T: FromRedisValue>(
        &self,
        what: impl FnOnce() -> String,
        inv: &redis::ScriptInvocation<'_>,
    ) -> Result<T, ClusterError> {
        let mut conn = lock(&self.conn).clone();
        let result = bounded(self.op_timeout, what, inv.invoke_async(&mut conn)).await;
        self.observe(&result);
        result
    }

    /// Counts commands in a row that got no answer and replaces the connection after a few.
    fn observe<T>(&self, result: &Result<T, ClusterError>) {
        if !matches!(result, Err(ClusterError::Timeout)) {
            self.timeouts.store(0, Ordering::Relaxed);
            return;
        }
        if self.timeouts.fetch_add(1, Ordering::Relaxed) + 1 < REPLACE_AFTER_TIMEOUTS {
            return;
        }
        self.timeouts.store(0, Ordering::Relaxed);
        match ConnectionManager::new_lazy_with_config(self.client.clone(), self.manager_config.clone()) {
            Ok(fresh) => {
                *lock(&self.conn) = fresh;
                tracing::warn!(
                    url = %redact_url(&self.url),
                    "redis did not answer {REPLACE_AFTER_TIMEOUTS} commands in a row; opening a new connection"
                );
            }
            Err(e) => tracing::warn!(error = %e, "cannot replace the unresponsive redis connection"),
        }
    }
}
