//! A run's event frames as a Redis stream: idempotent appends and followers.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use redis::aio::MultiplexedConnection;
use redis::streams::{StreamId, StreamRangeReply, StreamReadReply};
use redis::{Client, Value};

use crate::conn::{bounded, dedicated};
use crate::{Cluster, ClusterError, FollowItem, Frame};

/// How long one `XREAD BLOCK` waits before the follower yields [`FollowItem::Idle`].
const FOLLOW_BLOCK: Duration = Duration::from_millis(1000);
/// Entries fetched per `XREAD`.
const FOLLOW_BATCH: usize = 512;

/// The sequence number of a stream entry id `{seq}-0`.
fn seq_of(id: &str) -> Result<u64, ClusterError> {
    id.split('-')
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| ClusterError::Decode(format!("stream entry id {id:?}")))
}

fn frame_of(entry: StreamId) -> Result<Frame, ClusterError> {
    let seq = seq_of(&entry.id)?;
    let bytes = match entry.map.get("f") {
        Some(Value::BulkString(b)) => Bytes::copy_from_slice(b),
        Some(Value::SimpleString(s)) => Bytes::copy_from_slice(s.as_bytes()),
        _ => return Err(ClusterError::Decode(format!("frame {seq}: field \"f\" is missing"))),
    };
    Ok(Frame { seq, bytes })
}

impl Cluster {
    /// Appends frames to the run's stream in one round trip (`XADD MAXLEN ~ stream_max_events`,
    /// entry id `{seq}-0`, field `f`). A frame whose seq is at or below the stream's last id is
    /// skipped silently, so a retry after a partial failure is idempotent. Atomic: a Lua script.
    pub async fn append_frames(&self, run_id: &str, frames: &[Frame]) -> Result<(), ClusterError> {
        let frames: Vec<&Frame> = frames.iter().filter(|f| f.seq > 0).collect();
        if frames.is_empty() {
            return Ok(());
        }
        let keys = &self.inner.keys;
        let key = keys.frames(run_id);
        let mut inv = self.inner.scripts.append_frames.key(&key);
        inv.key(keys.run(run_id)).arg(self.inner.cfg.stream_max_events);
        for f in &frames {
            inv.arg(format!("{}-0", f.seq)).arg(f.bytes.as_ref());
        }
        let added: u64 = self.eval(|| format!("XADD {key}"), &inv).await?;
        if added < frames.len() as u64 {
            tracing::debug!(
                run = run_id,
                skipped = frames.len() as u64 - added,
                "frames already in the stream skipped"
            );
        }
        Ok(())
    }

    /// The seq of the oldest retained frame, `None` when the stream is empty or gone.
    pub async fn first_seq(&self, run_id: &str) -> Result<Option<u64>, ClusterError> {
        self.edge_seq(run_id, "XRANGE", "-", "+").await
    }

    /// The seq of the newest frame, `None` when the stream is empty or gone.
    pub async fn last_seq(&self, run_id: &str) -> Result<Option<u64>, ClusterError> {
        self.edge_seq(run_id, "XREVRANGE", "+", "-").await
    }

    async fn edge_seq(&self, run_id: &str, op: &str, from: &str, to: &str) -> Result<Option<u64>, ClusterError> {
        let key = self.inner.keys.frames(run_id);
        let mut cmd = redis::cmd(op);
        cmd.arg(&key).arg(from).arg(to).arg("COUNT").arg(1);
        let reply: StreamRangeReply = self.query(|| format!("{op} {key}"), &cmd).await?;
        reply.ids.first().map(|e| seq_of(&e.id)).transpose()
    }

    /// Every retained frame with seq > `after_seq`, then new ones as they are appended, in order.
    /// Reads with `XREAD BLOCK` on a dedicated connection; yields [`FollowItem::Idle`] when
    /// nothing came for about a second. Never ends by itself (drop it to stop); an error is
    /// yielded and then the stream ends. Frames trimmed away (`first_seq` > `after_seq + 1`) are
    /// simply not there: compare with [`Cluster::first_seq`] to detect the gap.
    pub fn follow(&self, run_id: &str, after_seq: u64) -> BoxStream<'static, Result<FollowItem, ClusterError>> {
        let state = Follower {
            client: self.inner.shared.client().clone(),
            url: self.inner.cfg.url.clone(),
            key: self.inner.keys.frames(run_id),
            op_timeout: self.inner.cfg.op_timeout,
            conn: None,
            cursor: after_seq,
            pending: VecDeque::new(),
            done: false,
        };
        futures::stream::unfold(state, |mut st| async move {
            if st.done {
                return None;
            }
            let item = st.next().await;
            if item.is_err() {
                st.done = true;
            }
            Some((item, st))
        })
        .boxed()
    }
}

/// The state of one follower. Holds no handle on the cluster: following does not keep the
/// node's heartbeat alive.
struct Follower {
    client: Client,
    url: String,
    key: String,
    op_timeout: Duration,
    conn: Option<MultiplexedConnection>,
    cursor: u64,
    pending: VecDeque<Frame>,
    done: bool,
}

impl Follower {
    async fn next(&mut self) -> Result<FollowItem, ClusterError> {
        if let Some(f) = self.pending.pop_front() {
            return Ok(FollowItem::Frame(f));
        }
        let conn = match &mut self.conn {
            Some(c) => c,
            None => self.conn.insert(dedicated(&self.client, &self.url, self.op_timeout).await?),
        };
        let mut cmd = redis::cmd("XREAD");
        cmd.arg("COUNT")
            .arg(FOLLOW_BATCH)
            .arg("BLOCK")
            .arg(FOLLOW_BLOCK.as_millis() as u64)
            .arg("STREAMS")
            .arg(&self.key)
            .arg(format!("{}-0", self.cursor));
        let key = &self.key;
        let reply: Option<StreamReadReply> =
            bounded(FOLLOW_BLOCK + self.op_timeout, || format!("XREAD {key}"), cmd.query_async(conn)).await?;
        for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
            let frame = frame_of(entry)?;
            if frame.seq > self.cursor {
                self.cursor = frame.seq;
                self.pending.push_back(frame);
            }
        }
        Ok(match self.pending.pop_front() {
            Some(f) => FollowItem::Frame(f),
            None => FollowItem::Idle,
        })
    }
}
