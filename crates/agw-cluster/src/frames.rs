//! A run's event frames as a Redis stream: idempotent appends and followers. Each entry carries
//! the frame's bytes (`f`) and a MAC over the run, the seq and the bytes (`m`): a follower drops
//! an entry whose MAC does not verify, so nothing written to Redis by anyone else reaches the
//! clients that follow the run on another node.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use redis::aio::MultiplexedConnection;
use redis::streams::{StreamId, StreamRangeReply, StreamReadReply};
use redis::{Client, Value};

use crate::conn::{bounded, dedicated};
use crate::secret::ClusterSecret;
use crate::{Appended, Cluster, ClusterError, FollowItem, Frame};

/// MAC domain of frames.
const FRAME_DOMAIN: &str = "agw-cluster frame";
/// MAC domain of a run's progress note.
const PROGRESS_DOMAIN: &str = "agw-cluster run progress";

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

fn frame_mac(secret: &ClusterSecret, run_id: &str, seq: u64, bytes: &[u8]) -> [u8; crate::secret::MAC_LEN] {
    secret.mac(FRAME_DOMAIN, &[run_id.as_bytes(), &seq.to_be_bytes(), bytes])
}

fn progress_mac(secret: &ClusterSecret, run_id: &str, progress: &[u8]) -> [u8; crate::secret::MAC_LEN] {
    secret.mac(PROGRESS_DOMAIN, &[run_id.as_bytes(), progress])
}

fn field<'a>(entry: &'a StreamId, name: &str) -> Option<&'a [u8]> {
    match entry.map.get(name) {
        Some(Value::BulkString(b)) => Some(b),
        Some(Value::SimpleString(s)) => Some(s.as_bytes()),
        _ => None,
    }
}

/// The frame of a stream entry of run `run_id`; `None` when its MAC does not verify (logged):
/// someone other than a node of this deployment wrote it.
fn frame_of(entry: &StreamId, run_id: &str, secret: &ClusterSecret) -> Result<Option<Frame>, ClusterError> {
    let seq = seq_of(&entry.id)?;
    let bytes =
        field(entry, "f").ok_or_else(|| ClusterError::Decode(format!("frame {seq}: field \"f\" is missing")))?;
    let genuine = field(entry, "m")
        .is_some_and(|mac| secret.verify(FRAME_DOMAIN, &[run_id.as_bytes(), &seq.to_be_bytes(), bytes], mac));
    if !genuine {
        tracing::warn!(
            run = run_id,
            entry = %entry.id,
            "frame refused: its MAC does not verify (written to Redis by something other than a node of this deployment); not forwarded"
        );
        return Ok(None);
    }
    Ok(Some(Frame { seq, bytes: Bytes::copy_from_slice(bytes) }))
}

impl Cluster {
    /// Appends frames to the run's stream in one round trip (`XADD MAXLEN ~ stream_max_events`,
    /// entry id `{seq}-0`, field `f`, and `m`, the frame's MAC). A frame whose seq is at or below
    /// the stream's last id is skipped silently, so a retry after a partial failure is idempotent.
    /// Atomic: a Lua script. Unfenced: for a node that speaks for a run it does not run (the
    /// `node_lost` notice); the node running the run uses [`Cluster::mirror_frames`].
    pub async fn append_frames(&self, run_id: &str, frames: &[Frame]) -> Result<(), ClusterError> {
        self.append(run_id, frames, None, None).await.map(drop)
    }

    /// [`Cluster::append_frames`] by the node that runs the run: refused
    /// ([`Appended::TakenOver`]) when its record names another node — this node's lease had
    /// expired and another replica resumed the run. `progress`, when given, is stored on the
    /// record in the same step, signed ([`Cluster::run_progress`] reads it back): what a replica
    /// that takes the run over needs to number on (opaque text to this crate).
    pub async fn mirror_frames(
        &self,
        run_id: &str,
        frames: &[Frame],
        progress: Option<&str>,
    ) -> Result<Appended, ClusterError> {
        self.append(run_id, frames, Some(self.node_id()), progress).await
    }

    async fn append(
        &self,
        run_id: &str,
        frames: &[Frame],
        fence: Option<&str>,
        progress: Option<&str>,
    ) -> Result<Appended, ClusterError> {
        let frames: Vec<&Frame> = frames.iter().filter(|f| f.seq > 0).collect();
        if frames.is_empty() && progress.is_none() {
            return Ok(Appended::Done);
        }
        let keys = &self.inner.keys;
        let key = keys.frames(run_id);
        let mut inv = self.inner.scripts.append_frames.key(&key);
        inv.key(keys.run(run_id)).arg(self.inner.cfg.stream_max_events).arg(fence.unwrap_or(""));
        let secret = &self.inner.secret;
        match progress {
            Some(p) => inv.arg(p).arg(hex::encode(progress_mac(secret, run_id, p.as_bytes()))),
            None => inv.arg("").arg(""),
        };
        for f in &frames {
            inv.arg(format!("{}-0", f.seq)).arg(f.bytes.as_ref()).arg(&frame_mac(secret, run_id, f.seq, &f.bytes)[..]);
        }
        let added: i64 = self.eval(|| format!("XADD {key}"), &inv).await?;
        if added < 0 {
            return Ok(Appended::TakenOver);
        }
        if (added as u64) < frames.len() as u64 {
            tracing::debug!(
                run = run_id,
                skipped = frames.len() as u64 - added as u64,
                "frames already in the stream skipped"
            );
        }
        Ok(Appended::Done)
    }

    /// The progress the node running the run last stored with its frames
    /// ([`Cluster::mirror_frames`]); `None` when there is none, and when its signature does not
    /// verify (logged).
    pub async fn run_progress(&self, run_id: &str) -> Result<Option<String>, ClusterError> {
        let key = self.inner.keys.run(run_id);
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&key).arg("progress").arg("progress_mac");
        let (progress, mac): (Option<String>, Option<String>) = self.query(|| format!("HMGET {key}"), &cmd).await?;
        let Some(progress) = progress else { return Ok(None) };
        let genuine = mac
            .and_then(|m| hex::decode(m).ok())
            .is_some_and(|m| self.inner.secret.verify(PROGRESS_DOMAIN, &[run_id.as_bytes(), progress.as_bytes()], &m));
        if !genuine {
            tracing::warn!(run = run_id, "run progress refused: its MAC does not verify; treated as absent");
            return Ok(None);
        }
        Ok(Some(progress))
    }

    /// Ends a run in Redis in one atomic step: appends its last `frames` (the terminal one among
    /// them), sets its final `status` with the retention expiry on its record and stream, and
    /// frees `chat_id`'s lock if the run still holds it. A replica that reads the terminal frame
    /// from the stream can take the chat at once. Fenced like [`Cluster::mirror_frames`]: a run
    /// another node took over is not ended by this one.
    pub async fn finish_run(
        &self,
        run_id: &str,
        chat_id: &str,
        frames: &[Frame],
        status: &str,
    ) -> Result<Appended, ClusterError> {
        let keys = &self.inner.keys;
        let key = keys.frames(run_id);
        let mut inv = self.inner.scripts.finish_run.key(&key);
        inv.key(keys.run(run_id)).key(keys.chat(chat_id));
        inv.arg(self.inner.cfg.stream_max_events)
            .arg(status)
            .arg(crate::conn::millis(self.inner.cfg.retention))
            .arg(run_id)
            .arg(self.node_id());
        let secret = &self.inner.secret;
        for f in frames.iter().filter(|f| f.seq > 0) {
            inv.arg(format!("{}-0", f.seq)).arg(f.bytes.as_ref()).arg(&frame_mac(secret, run_id, f.seq, &f.bytes)[..]);
        }
        let added: i64 = self.eval(|| format!("finish {key}"), &inv).await?;
        Ok(if added < 0 { Appended::TakenOver } else { Appended::Done })
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
    /// simply not there: compare with [`Cluster::first_seq`] to detect the gap. An entry whose
    /// MAC does not verify is skipped with a warning.
    pub fn follow(&self, run_id: &str, after_seq: u64) -> BoxStream<'static, Result<FollowItem, ClusterError>> {
        let state = Follower {
            client: self.inner.shared.client().clone(),
            url: self.inner.cfg.url.clone(),
            key: self.inner.keys.frames(run_id),
            run_id: run_id.to_owned(),
            secret: self.inner.secret.clone(),
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
    run_id: String,
    secret: ClusterSecret,
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
            let seq = seq_of(&entry.id)?;
            if seq <= self.cursor {
                continue;
            }
            // A refused entry is passed over too, or the next read would return it again.
            self.cursor = seq;
            if let Some(frame) = frame_of(&entry, &self.run_id, &self.secret)? {
                self.pending.push_back(frame);
            }
        }
        Ok(match self.pending.pop_front() {
            Some(f) => FollowItem::Frame(f),
            None => FollowItem::Idle,
        })
    }
}
