//! Request/reply to one node: an inbox list per node read with `BLPOP`, one reply list per
//! request read with `BLPOP` by the sender.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::FutureExt;
use redis::aio::MultiplexedConnection;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::conn::{Shared, bounded, dedicated, lock, millis};
use crate::{Cluster, ClusterError, ControlReply, ControlRequest};

/// How long the server's `BLPOP` waits before it looks at the stop signal again.
const SERVE_BLOCK: Duration = Duration::from_secs(1);
/// How long an unread reply stays.
const REPLY_TTL: Duration = Duration::from_secs(30);
/// The least time an inbox stays after a push (a dead node's inbox then goes away).
const INBOX_TTL: Duration = Duration::from_secs(60);
/// Pause before the server reconnects after a failure, doubled while failures go on.
const RETRY_PAUSE: Duration = Duration::from_millis(250);
/// The longest pause between reconnection attempts of the server.
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(4);

/// What travels through an inbox.
#[derive(Debug, Serialize, Deserialize)]
struct Envelope {
    /// The list the reply goes to.
    reply_to: String,
    /// Unix milliseconds after which the sender no longer waits: the request is dropped.
    deadline_ms: u64,
    /// The sending node (for logs).
    from: String,
    request: ControlRequest,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

/// A `BLPOP` timeout argument in seconds (never 0, which would block forever).
fn blpop_secs(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64().max(0.001))
}

impl Cluster {
    /// Serves control requests sent to this node: a task pops the inbox
    /// `{prefix}:node:{id}:inbox` (`BLPOP` on a dedicated connection) and runs `handler` for each
    /// request in its own task; the reply goes back to the sender. Requests past their deadline
    /// are dropped; a handler that panics answers status 500. Stops on [`Cluster::shutdown`] or
    /// when the last clone of the cluster is dropped.
    pub fn serve_control<F, Fut>(&self, handler: F)
    where
        F: Fn(ControlRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ControlReply> + Send + 'static,
    {
        let inner = &self.inner;
        let server = Server {
            shared: Arc::clone(&inner.shared),
            inbox: inner.keys.inbox(&inner.cfg.node_id),
            node_id: inner.cfg.node_id.clone(),
            op_timeout: inner.cfg.op_timeout,
        };
        let task = tokio::spawn(server.run(Arc::new(handler), inner.stop.subscribe()));
        lock(&inner.servers).push(task);
    }

    /// Sends a control request to `node_id` and waits up to `timeout` for its reply.
    /// [`ClusterError::NoReply`] when the node does not answer in time, at once when its lease is
    /// already gone.
    pub async fn send_control(
        &self,
        node_id: &str,
        req: ControlRequest,
        timeout: Duration,
    ) -> Result<ControlReply, ClusterError> {
        let started = tokio::time::Instant::now();
        let no_reply = || ClusterError::NoReply { node: node_id.to_owned() };
        if !self.node_alive(node_id).await? {
            return Err(no_reply());
        }
        let keys = &self.inner.keys;
        let inbox = keys.inbox(node_id);
        let reply_to = keys.reply(&uuid::Uuid::new_v4().to_string());
        let envelope = Envelope {
            reply_to: reply_to.clone(),
            deadline_ms: now_ms().saturating_add(millis(timeout)),
            from: self.node_id().to_owned(),
            request: req,
        };
        let payload = serde_json::to_string(&envelope)
            .map_err(|e| ClusterError::Decode(format!("control request (cannot encode it: {e})")))?;
        let mut pipe = redis::pipe();
        pipe.rpush(&inbox, &payload).ignore().pexpire(&inbox, millis(timeout.max(INBOX_TTL)) as i64).ignore();
        self.inner.shared.pipe::<()>(|| format!("RPUSH {inbox}"), &pipe).await?;

        let (mut conn, pooled) = self.take_dedicated().await?;
        let popped = match self.await_reply(&mut conn, &reply_to, timeout.saturating_sub(started.elapsed())).await {
            // An idle connection may have died with a Redis restart: once more on a fresh one.
            Err(ClusterError::Redis(_, e)) if pooled && (e.is_io_error() || e.is_unrecoverable_error()) => {
                conn = self.new_dedicated().await?;
                self.await_reply(&mut conn, &reply_to, timeout.saturating_sub(started.elapsed())).await?
            }
            other => other?,
        };
        self.put_dedicated(conn);
        let Some((_, reply)) = popped else {
            // Withdraw the request if it is still queued (best effort; it would be dropped as
            // stale anyway).
            let mut lrem = redis::cmd("LREM");
            lrem.arg(&inbox).arg(1).arg(&payload);
            let _ = self.query::<i64>(|| format!("LREM {inbox}"), &lrem).await;
            return Err(no_reply());
        };
        serde_json::from_str(&reply).map_err(|e| ClusterError::Decode(format!("control reply from {node_id}: {e}")))
    }
}

impl Cluster {
    /// Pops the reply list, waiting up to `left`.
    async fn await_reply(
        &self,
        conn: &mut MultiplexedConnection,
        reply_to: &str,
        left: Duration,
    ) -> Result<Option<(String, String)>, ClusterError> {
        let mut cmd = redis::cmd("BLPOP");
        cmd.arg(reply_to).arg(blpop_secs(left));
        bounded(left + self.inner.cfg.op_timeout, || format!("BLPOP {reply_to}"), cmd.query_async(conn)).await
    }
}

/// The serving task's state. Holds no handle on the cluster, so it does not keep it alive.
struct Server {
    shared: Arc<Shared>,
    inbox: String,
    node_id: String,
    op_timeout: Duration,
}

impl Server {
    async fn run<F, Fut>(self, handler: Arc<F>, mut stop: watch::Receiver<bool>)
    where
        F: Fn(ControlRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ControlReply> + Send + 'static,
    {
        let mut conn: Option<MultiplexedConnection> = None;
        let mut pause = RETRY_PAUSE;
        loop {
            if *stop.borrow() {
                return;
            }
            let popped = tokio::select! {
                _ = stop.changed() => return,
                r = self.pop(&mut conn) => r,
            };
            match popped {
                Ok(popped) => {
                    if pause > RETRY_PAUSE {
                        tracing::info!(node = %self.node_id, "control inbox readable again");
                        pause = RETRY_PAUSE;
                    }
                    if let Some(payload) = popped {
                        self.dispatch(&payload, &handler);
                    }
                }
                Err(e) => {
                    tracing::warn!(node = %self.node_id, error = %e, retry_in = ?pause, "control inbox read failed");
                    conn = None;
                    tokio::select! {
                        _ = stop.changed() => return,
                        _ = tokio::time::sleep(pause) => {}
                    }
                    pause = (pause * 2).min(RETRY_PAUSE_MAX);
                }
            }
        }
    }

    async fn pop(&self, conn: &mut Option<MultiplexedConnection>) -> Result<Option<String>, ClusterError> {
        let c = match conn {
            Some(c) => c,
            None => conn.insert(dedicated(self.shared.client(), self.shared.url(), self.op_timeout).await?),
        };
        let mut cmd = redis::cmd("BLPOP");
        cmd.arg(&self.inbox).arg(blpop_secs(SERVE_BLOCK));
        let inbox = &self.inbox;
        let popped: Option<(String, String)> =
            bounded(SERVE_BLOCK + self.op_timeout, || format!("BLPOP {inbox}"), cmd.query_async(c)).await?;
        Ok(popped.map(|(_, payload)| payload))
    }

    fn dispatch<F, Fut>(&self, payload: &str, handler: &Arc<F>)
    where
        F: Fn(ControlRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ControlReply> + Send + 'static,
    {
        let envelope: Envelope = match serde_json::from_str(payload) {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(node = %self.node_id, error = %e, "undecodable control request dropped");
                return;
            }
        };
        if now_ms() > envelope.deadline_ms {
            tracing::debug!(
                node = %self.node_id,
                from = %envelope.from,
                kind = %envelope.request.kind,
                run = %envelope.request.run_id,
                "control request past its deadline dropped"
            );
            return;
        }
        let handler = Arc::clone(handler);
        let shared = Arc::clone(&self.shared);
        let node_id = self.node_id.clone();
        tokio::spawn(async move {
            let Envelope { reply_to, from, request, .. } = envelope;
            let kind = request.kind.clone();
            let reply = match AssertUnwindSafe(handler(request)).catch_unwind().await {
                Ok(reply) => reply,
                Err(_) => {
                    tracing::error!(node = %node_id, kind = %kind, "control handler panicked");
                    ControlReply { status: 500, body: serde_json::json!({ "error": "control handler panicked" }) }
                }
            };
            let payload = match serde_json::to_string(&reply) {
                Ok(p) => p,
                Err(e) => {
                    tracing::error!(node = %node_id, kind = %kind, error = %e, "cannot encode a control reply");
                    return;
                }
            };
            let mut pipe = redis::pipe();
            pipe.rpush(&reply_to, payload).ignore().pexpire(&reply_to, millis(REPLY_TTL) as i64).ignore();
            let sent = shared.pipe::<()>(|| format!("RPUSH {reply_to}"), &pipe).await;
            if let Err(e) = sent {
                tracing::warn!(node = %node_id, to = %from, kind = %kind, error = %e, "cannot send a control reply");
            }
        });
    }
}
