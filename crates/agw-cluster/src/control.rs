//! Request/reply to one node: an inbox list per node read with `BLPOP`, one reply list per
//! request read with `BLPOP` by the sender. Both directions are signed (`envelope.rs`); what
//! does not verify, is late, misdirected or replayed is dropped with a warning.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::FutureExt;
use redis::aio::MultiplexedConnection;
use tokio::sync::watch;
use tracing::Instrument;

use crate::conn::{Shared, bounded, dedicated, lock, millis};
use crate::envelope::{self, Envelope, Refusal};
use crate::replay::ReplayCache;
use crate::secret::ClusterSecret;
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
    /// request in its own task; the signed reply goes back to the sender. Requests that are not
    /// signed with the cluster secret, are addressed to another node, are past their deadline
    /// or were seen before are dropped with a warning, unanswered; a handler that panics answers
    /// status 500. The handler runs in a `control` span naming the sending node. Stops on
    /// [`Cluster::shutdown`] or when the last clone of the cluster is dropped.
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
            secret: inner.secret.clone(),
            replay: Arc::clone(&inner.replay),
            max_ttl_ms: millis(inner.cfg.control_ttl),
        };
        let task = tokio::spawn(server.run(Arc::new(handler), inner.stop.subscribe()));
        lock(&inner.servers).push(task);
    }

    /// Sends a control request to `node_id`, signed, valid until its deadline — `timeout`, at most
    /// [`crate::ClusterConfig::control_ttl`] — and waits that long for its signed reply (a reply
    /// that does not verify is ignored with a warning). [`ClusterError::NoReply`] when the node
    /// does not answer in time, at once when its lease is already gone.
    pub async fn send_control(
        &self,
        node_id: &str,
        req: ControlRequest,
        timeout: Duration,
    ) -> Result<ControlReply, ClusterError> {
        let started = tokio::time::Instant::now();
        let timeout = timeout.min(self.inner.cfg.control_ttl);
        let no_reply = || ClusterError::NoReply { node: node_id.to_owned() };
        if !self.node_alive(node_id).await? {
            return Err(no_reply());
        }
        let keys = &self.inner.keys;
        let inbox = keys.inbox(node_id);
        let nonce = uuid::Uuid::new_v4().simple().to_string();
        let issued_ms = now_ms();
        let envelope = Envelope {
            from: self.node_id().to_owned(),
            to: node_id.to_owned(),
            reply_to: keys.reply(&nonce),
            nonce,
            issued_ms,
            deadline_ms: issued_ms.saturating_add(millis(timeout)),
            request: req,
        };
        let payload = envelope::seal(&self.inner.secret, &envelope)
            .map_err(|e| ClusterError::Decode(format!("control request (cannot encode it: {e})")))?;
        let mut pipe = redis::pipe();
        pipe.rpush(&inbox, &payload).ignore().pexpire(&inbox, millis(timeout.max(INBOX_TTL)) as i64).ignore();
        self.inner.shared.pipe::<()>(|| format!("RPUSH {inbox}"), &pipe).await?;

        let reply_to = &envelope.reply_to;
        let (mut conn, mut pooled) = self.take_dedicated().await?;
        let reply = loop {
            let left = timeout.saturating_sub(started.elapsed());
            let popped = match self.await_reply(&mut conn, reply_to, left).await {
                // An idle connection may have died with a Redis restart: once more on a fresh one.
                Err(ClusterError::Redis(_, e)) if pooled && (e.is_io_error() || e.is_unrecoverable_error()) => {
                    conn = self.new_dedicated().await?;
                    pooled = false;
                    self.await_reply(&mut conn, reply_to, timeout.saturating_sub(started.elapsed())).await?
                }
                other => other?,
            };
            let Some((_, wire)) = popped else { break None };
            match envelope::open_reply(&self.inner.secret, &envelope.nonce, &wire) {
                Ok(reply) => break Some(reply),
                Err(Refusal::Undecodable(e)) => {
                    self.put_dedicated(conn);
                    return Err(ClusterError::Decode(format!("control reply from {node_id}: {e}")));
                }
                Err(refusal) => tracing::warn!(
                    node = %self.node_id(),
                    to = %node_id,
                    reason = %refusal,
                    "control reply refused; still waiting for the real one"
                ),
            }
        };
        self.put_dedicated(conn);
        let Some(reply) = reply else {
            // Withdraw the request if it is still queued (best effort; it would be refused as
            // late anyway).
            let mut lrem = redis::cmd("LREM");
            lrem.arg(&inbox).arg(1).arg(&payload);
            let _ = self.query::<i64>(|| format!("LREM {inbox}"), &lrem).await;
            return Err(no_reply());
        };
        Ok(reply)
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
    secret: ClusterSecret,
    /// Shared by every server of the node: a replay popped by another server is still one.
    replay: Arc<Mutex<ReplayCache>>,
    /// The longest validity a request may claim ([`crate::ClusterConfig::control_ttl`]).
    max_ttl_ms: u64,
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

    /// The request in `payload` if this node may act on it; else why not, logged. Only what
    /// verified is named in the log line (the rest is whatever someone wrote to Redis).
    fn accept(&self, payload: &str) -> Option<Envelope> {
        let envelope = match envelope::verify(&self.secret, payload) {
            Ok(envelope) => envelope,
            Err(refusal) => {
                tracing::warn!(node = %self.node_id, reason = %refusal, bytes = payload.len(), "control request refused");
                return None;
            }
        };
        let now = now_ms();
        let checked = envelope
            .check(&self.node_id, now, self.max_ttl_ms)
            .and_then(|()| lock(&self.replay).admit(&envelope.nonce, envelope.deadline_ms, now));
        if let Err(refusal) = checked {
            tracing::warn!(
                node = %self.node_id,
                from = %envelope.from,
                kind = %envelope.request.kind,
                run = %envelope.request.run_id,
                reason = %refusal,
                "control request refused"
            );
            return None;
        }
        Some(envelope)
    }

    fn dispatch<F, Fut>(&self, payload: &str, handler: &Arc<F>)
    where
        F: Fn(ControlRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ControlReply> + Send + 'static,
    {
        let Some(envelope) = self.accept(payload) else { return };
        let handler = Arc::clone(handler);
        let shared = Arc::clone(&self.shared);
        let secret = self.secret.clone();
        let node_id = self.node_id.clone();
        let Envelope { reply_to, from, nonce, request, .. } = envelope;
        let span = tracing::info_span!("control", from = %from, kind = %request.kind, run = %request.run_id);
        tokio::spawn(
            async move {
                let kind = request.kind;
                let reply = match AssertUnwindSafe(handler(request)).catch_unwind().await {
                    Ok(reply) => reply,
                    Err(_) => {
                        tracing::error!(node = %node_id, kind = %kind, "control handler panicked");
                        ControlReply { status: 500, body: serde_json::json!({ "error": "control handler panicked" }) }
                    }
                };
                let payload = match envelope::seal_reply(&secret, &nonce, &reply) {
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
            }
            .instrument(span),
        );
    }
}
