//! The run service as one of several replicas (`docs/deployment.md`): runs that any replica can
//! reach.
//!
//! With `agw.redis.url` set, every run this replica starts is *announced* (a run record naming
//! this node) and *mirrored*: a task reads the run's event buffer like an observer that never
//! counts as one and appends each frame, with its seq, to the run's Redis stream. The run task
//! itself never waits for Redis: a Redis outage delays the mirror (it retries from its cursor),
//! not the run or its own clients.
//!
//! A request for a run this replica does not hold ([`find_run`]) finds the record and:
//! - `attach` follows the run's stream ([`follow`]) — the retained frames, then live ones;
//! - `interrupt`, `steer`, `submit` are forwarded to the owner ([`forward`]) with the caller,
//!   signed with the cluster secret; the owner answers them exactly as if they had arrived
//!   there, checking the caller against the run's owner again (the forwarding replica checked it
//!   against the record's owner, which is signed too: a record rewritten in Redis reads as
//!   absent);
//! - when the owner's lease has expired, a running run's fate is settled once
//!   (`crate::takeover`): one replica takes it over from its last completed step, or appends
//!   `run.error` `node_lost` to its stream, which ends every observer's response; a run that
//!   waited durably for a person is *adopted* by the replica its answer reaches ([`adopt`]):
//!   that replica continues it from its history, as after a restart.
//!
//! The mirror's writes are fenced (the record must still name this node) and carry the run's
//! progress note ([`ProgressNote`]), what a replica taking the run over numbers on from.
//!
//! One run per chat holds across replicas through a chat lock in Redis taken next to the local
//! slot; a lock whose node lease expired is free.

use std::sync::Arc;
use std::time::Duration;

use agw_cluster::{Appended, ControlRequest, FollowItem, Frame, RunRecord};
use agw_memory::Owner;
use agw_protocol::{ErrorCode, Event, RunErrorInfo, sse};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::json;

use crate::calls::{Caller, Control, decode_reply};
use crate::node::Node;
use crate::principal::{Principal, may_access};
use crate::service::{Core, RunService};
use crate::{CancelReason, DisconnectPolicy, RunError, RunHandle, RunStatus};

/// Longest pause between retries of a mirror append while Redis is unreachable.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

fn owner_json(owner: Option<&Owner>) -> Option<String> {
    owner.and_then(|o| serde_json::to_string(o).ok())
}

fn owner_of(record: &RunRecord) -> Option<Owner> {
    record.owner.as_deref().and_then(|o| serde_json::from_str(o).ok())
}

// -- the replica that runs a run ------------------------------------------------------------

/// Takes the chat's cluster-wide lock for `run_id`; `Err(holder)` when another live run has it.
/// Without a cluster there is nothing to take.
///
/// A run's replica frees the lock just after the run's last frame (its mirror does, off the
/// run's path), so a client that sends its next query the moment it reads the terminal event
/// can find the lock still held by a run that has ended. Such a lock is taken over (the release
/// only frees it if that run still holds it) instead of answering 409.
pub(crate) async fn lock_chat(core: &Core, chat_id: &str, run_id: &str) -> Result<(), ChatLock> {
    let Some(node) = core.cluster.get() else { return Ok(()) };
    let unavailable = |e: agw_cluster::ClusterError| ChatLock::Unavailable(e.to_string());
    let Some(holder) = node.cluster.acquire_chat(chat_id, run_id).await.map_err(unavailable)? else { return Ok(()) };
    if holder == run_id || !has_ended(core, node, &holder).await {
        return Err(ChatLock::Busy(holder));
    }
    tracing::info!(chatId = chat_id, runId = run_id, previous = %holder, "chat lock taken over from a run that has ended");
    node.cluster.release_chat(chat_id, &holder).await.map_err(unavailable)?;
    match node.cluster.acquire_chat(chat_id, run_id).await.map_err(unavailable)? {
        None => Ok(()),
        Some(holder) => Err(ChatLock::Busy(holder)),
    }
}

/// Whether `holder`, a run holding a chat's lock, has ended, so that its lock only waits for
/// its mirror to free it. A run that waits durably has not ended (it keeps its chat).
async fn has_ended(core: &Core, node: &Node, holder: &str) -> bool {
    if let Some(handle) = core.tracker.get(holder) {
        return handle.status().is_finished() && !handle.is_waiting();
    }
    // Another replica's run: its record says so once the mirror got there; before that, the
    // last frame of its stream in Redis is its terminal event.
    let record = match node.cluster.get_run(holder).await {
        Ok(Some(record)) => record,
        _ => return false,
    };
    if matches!(record.status.as_str(), "completed" | "failed" | "cancelled") {
        return true;
    }
    let Ok(Some(last)) = node.cluster.last_seq(holder).await else { return false };
    let mut frames = node.cluster.follow(holder, last.saturating_sub(1));
    matches!(
        tokio::time::timeout(Duration::from_secs(2), frames.next()).await,
        Ok(Some(Ok(FollowItem::Frame(frame)))) if is_terminal(&frame.bytes)
    )
}

/// Why [`lock_chat`] did not take the lock.
#[derive(Debug)]
pub(crate) enum ChatLock {
    /// This run holds it.
    Busy(String),
    /// Redis did not answer.
    Unavailable(String),
}

/// Waits for the chat's cluster-wide lock (the `queue` policy): polls until it is free.
pub(crate) async fn wait_chat(core: &Core, chat_id: &str, run_id: &str) {
    loop {
        match lock_chat(core, chat_id, run_id).await {
            Ok(()) => return,
            Err(ChatLock::Busy(_)) => {}
            Err(ChatLock::Unavailable(e)) => tracing::warn!(error = %e, "chat lock unavailable; retrying"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Frees the chat's lock when a run that could not start took it.
pub(crate) async fn unlock_chat(core: &Core, chat_id: &str, run_id: &str) {
    if let Some(node) = core.cluster.get()
        && let Err(e) = node.cluster.release_chat(chat_id, run_id).await
    {
        tracing::warn!(error = %e, chatId = chat_id, runId = run_id, "chat lock not released");
    }
}

/// Announces a run this replica starts (its record, naming this node) and starts its mirror.
/// Awaited before the query answers, so an attach on another replica right after finds it.
pub(crate) async fn announce(core: &Core, handle: &Arc<RunHandle>, status: &str) -> Result<(), RunError> {
    let Some(node) = core.cluster.get() else { return Ok(()) };
    let record = RunRecord {
        run_id: handle.run_id.clone(),
        chat_id: handle.chat_id.clone(),
        agent_key: handle.agent_key.clone(),
        node_id: node.id().to_owned(),
        owner: owner_json(handle.owner.as_ref()),
        status: status.to_owned(),
    };
    node.cluster.put_run(&record).await.map_err(RunError::cluster)?;
    tokio::spawn(mirror(node.clone(), handle.clone(), 0));
    Ok(())
}

/// What a replica that takes a run over needs of where it stood (the run's progress note in
/// Redis, written with its frames): what its history covered, and the blocks it had opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ProgressNote {
    /// The last seq its history (or run mark) covered; never beyond the frames in Redis.
    pub durable_seq: u64,
    /// Reasoning and content blocks the history covered.
    pub durable: [u32; 2],
    /// Reasoning and content blocks it had opened.
    pub shown: [u32; 2],
}

impl ProgressNote {
    fn of(entry: &agw_memory::LedgerEntry) -> Self {
        ProgressNote {
            durable_seq: entry.durable_seq,
            durable: [entry.durable.reasoning, entry.durable.content],
            shown: [entry.shown.reasoning, entry.shown.content],
        }
    }

    /// The ledger entry a run taken over numbers on from: after `last_seq`, the stream's last.
    pub(crate) fn entry(&self, last_seq: u64) -> agw_memory::LedgerEntry {
        let counts = |[reasoning, content]: [u32; 2]| agw_protocol::BlockCounts { reasoning, content };
        agw_memory::LedgerEntry {
            last_seq,
            durable_seq: self.durable_seq.min(last_seq),
            shown: counts(self.shown),
            durable: counts(self.durable),
        }
    }
}

/// Copies a run's frames to its Redis stream, in order, from after `cursor` until the run ended
/// and its last frame is there; keeps the record's status and the run's progress note current;
/// releases the chat's lock at the end. Its writes are fenced: once another replica took the
/// run over, the run is stopped here ([`CancelReason::TakenOver`]).
pub(crate) async fn mirror(node: Arc<Node>, handle: Arc<RunHandle>, mut cursor: u64) {
    let run_id = handle.run_id.clone();
    let mut wake = handle.subscribe();
    let mut reported_waiting = false;
    let mut noted: Option<ProgressNote> = None;
    let mut backoff = Duration::from_millis(50);
    let mut failing = false;
    // Past this long without reaching Redis the mirror gives up (the run itself is unaffected);
    // it would otherwise keep the run's buffer alive for as long as Redis stays away.
    let give_up_after = node.cluster.config().retention.max(Duration::from_secs(60));
    let mut failing_since = tokio::time::Instant::now();
    loop {
        wake.borrow_and_update();
        let read = handle.frames_after(cursor);
        if read.skipped {
            tracing::warn!(runId = %run_id, cursor, "the run's buffer dropped frames before they reached Redis");
        }
        // The run has ended and nothing waits durably: its last frames, its status and its
        // chat's lock go to Redis in one step (a replica reading the terminal frame finds the
        // chat free).
        let ended = read.status.is_finished() && !read.waiting && !read.left;
        let last = read.frames.last().map_or(cursor, |(seq, _)| *seq);
        // The note goes with frames that reach past what it covers: a replica taking over never
        // reads a note ahead of the stream.
        let note = read.progress.map(|p| ProgressNote::of(&p)).filter(|n| n.durable_seq <= last && noted != Some(*n));
        let step = if !read.frames.is_empty() || note.is_some() {
            let frames: Vec<Frame> = read.frames.into_iter().map(|(seq, bytes)| Frame { seq, bytes }).collect();
            if ended && last == read.latest {
                node.cluster
                    .finish_run(&run_id, &handle.chat_id, &frames, read.status.as_str())
                    .await
                    .map(|a| (a, true))
            } else {
                let text = note.and_then(|n| serde_json::to_string(&n).ok());
                node.cluster.mirror_frames(&run_id, &frames, text.as_deref()).await.map(|a| {
                    cursor = last;
                    noted = note.or(noted);
                    (a, false)
                })
            }
        } else if read.waiting != reported_waiting {
            let status = if read.waiting { "waiting" } else { "running" };
            node.cluster.set_run_status(&run_id, status, false).await.map(|()| {
                reported_waiting = read.waiting;
                (Appended::Done, false)
            })
        } else if ended {
            node.cluster.finish_run(&run_id, &handle.chat_id, &[], read.status.as_str()).await.map(|a| (a, true))
        } else if read.left {
            // Stopped to be resumed (shutdown, or taken over): the record stays `running` for
            // the replica that resumes it; the chat's lock goes with this node's lease.
            tracing::info!(runId = %run_id, "the run left to be resumed; its mirror stops");
            return;
        } else if read.status.is_finished() {
            // A run that stops (server shutdown) while it waits durably stays adoptable.
            match node.cluster.set_run_status(&run_id, "waiting", false).await {
                Ok(()) => {
                    if let Err(e) = node.cluster.release_chat(&handle.chat_id, &run_id).await {
                        tracing::warn!(runId = %run_id, error = %e, "chat lock not released");
                    }
                    return;
                }
                Err(e) => Err(e),
            }
        } else {
            if wake.changed().await.is_err() {
                return;
            }
            continue;
        };
        match step {
            Ok((Appended::TakenOver, _)) => {
                tracing::error!(
                    runId = %run_id,
                    "another replica took this run over (this replica's lease had expired); it stops here"
                );
                handle.cancel(CancelReason::TakenOver);
                return;
            }
            Ok((Appended::Done, finished)) => {
                if finished {
                    return;
                }
                if failing {
                    tracing::info!(runId = %run_id, "the run's frames reach Redis again");
                }
                failing = false;
                backoff = Duration::from_millis(50);
            }
            Err(e) => {
                if !failing {
                    tracing::warn!(runId = %run_id, error = %e, "the run's frames do not reach Redis; retrying");
                    failing_since = tokio::time::Instant::now();
                } else if failing_since.elapsed() > give_up_after {
                    tracing::error!(runId = %run_id, error = %e, "Redis unreachable for too long; the run is no longer mirrored");
                    return;
                }
                failing = true;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

// -- a replica that does not hold the run ---------------------------------------------------

/// A run held by another replica (or by none, since its node was lost).
pub(crate) struct Remote {
    /// Its record.
    pub record: RunRecord,
    /// Whether the node that holds it is alive.
    pub alive: bool,
}

impl Remote {
    /// The run has ended.
    pub fn finished(&self) -> bool {
        matches!(self.record.status.as_str(), "completed" | "failed" | "cancelled")
    }

    /// The run waits durably for a person.
    pub fn waiting(&self) -> bool {
        self.record.status == "waiting"
    }

    /// Its node is gone while it was running (not waiting): it is lost.
    pub fn lost(&self) -> bool {
        !self.alive && !self.finished() && !self.waiting()
    }

    /// It waits for a person on a node that is gone: the next replica its answer reaches adopts it.
    pub fn orphaned_wait(&self) -> bool {
        !self.alive && self.waiting()
    }

    /// Its status as answers about it name it (a lost run has failed).
    pub fn status(&self) -> &str {
        if self.lost() { RunStatus::Failed.as_str() } else { &self.record.status }
    }
}

/// The record of a run this replica does not hold, when the caller may see it. `Ok(None)`:
/// no cluster, or no such run (or not the caller's): the caller answers 404.
pub(crate) async fn locate(
    core: &Core,
    run_id: &str,
    principal: Option<&Principal>,
) -> Result<Option<Remote>, RunError> {
    let Some(node) = core.cluster.get() else { return Ok(None) };
    let Some(record) = node.cluster.get_run(run_id.trim()).await.map_err(RunError::cluster)? else { return Ok(None) };
    if !may_access(principal, owner_of(&record).as_ref()) {
        return Ok(None);
    }
    // A record naming this node that is not in the registry is from before a restart.
    let alive =
        record.node_id != node.id() && node.cluster.node_alive(&record.node_id).await.map_err(RunError::cluster)?;
    Ok(Some(Remote { record, alive }))
}

/// The record of a run this replica holds, as the cluster has it (`None` without a cluster or
/// a record).
pub(crate) async fn own_record(core: &Core, handle: &RunHandle) -> Option<Remote> {
    let node = core.cluster.get()?;
    let record = node.cluster.get_run(&handle.run_id).await.ok().flatten()?;
    Some(Remote { record, alive: true })
}

/// Sends a control request on behalf of `principal` to the replica that holds the run and
/// returns its answer, or its refusal. The request is signed with the cluster secret, valid for
/// the cluster's control deadline.
pub(crate) async fn forward<T: serde::de::DeserializeOwned>(
    core: &Core,
    remote: &Remote,
    control: Control,
    principal: Option<&Principal>,
) -> Result<T, RunError> {
    let Some(node) = core.cluster.get() else { return Err(RunError::internal("not in a cluster")) };
    let kind = control.kind();
    let run_id = remote.record.run_id.clone();
    let request = ControlRequest {
        kind,
        run_id: run_id.clone(),
        body: control.body(),
        principal: principal.map(Caller::of).and_then(|c| serde_json::to_value(c).ok()),
    };
    let deadline = node.cluster.config().control_ttl;
    let reply = node.cluster.send_control(&remote.record.node_id, request, deadline).await.map_err(|e| {
        tracing::warn!(node = %remote.record.node_id, error = %e, %kind, "forwarded request not answered");
        RunError::OwnerUnreachable { run_id: run_id.clone() }
    })?;
    tracing::info!(runId = %run_id, node = %remote.record.node_id, %kind, status = reply.status, "forwarded");
    decode_reply(reply)
}

/// Whether an SSE frame carries a run's terminal event (its `type` is the first one in it).
pub(crate) fn is_terminal(frame: &[u8]) -> bool {
    const KEY: &[u8] = b"\"type\":\"";
    let Some(at) = frame.windows(KEY.len()).position(|w| w == KEY) else { return false };
    let rest = &frame[at + KEY.len()..];
    [&b"run.complete\""[..], b"run.error\"", b"run.cancel\""].iter().any(|t| rest.starts_with(t))
}

/// The last frame of a follow that lost Redis: the client may attach again.
pub(crate) fn unavailable_frame(error: &str) -> Bytes {
    let data = json!({
        "code": "cluster_unavailable",
        "message": format!("the run's stream in Redis cannot be read ({error}); attach again"),
    });
    Bytes::from(format!("event:error\ndata:{data}\n\n"))
}

/// Ends a run whose node was lost for every observer: appends `run.error` `node_lost` to its
/// stream and marks the record failed. The caller decided the run's fate (a claim,
/// [`crate::takeover::settle_lost`]): it is written once.
pub(crate) async fn declare_lost(core: &Core, record: &RunRecord) -> Result<(), RunError> {
    let Some(node) = core.cluster.get() else { return Ok(()) };
    let seq = node.cluster.last_seq(&record.run_id).await.map_err(RunError::cluster)?.unwrap_or(0) + 1;
    let error = RunErrorInfo::new(
        ErrorCode::NodeLost,
        format!(
            "the replica running this run ({}) was lost; the chat's history holds the run up to its last saved step",
            record.node_id
        ),
        true,
    );
    let event = Event::new(
        seq,
        crate::sink::now_ms(),
        agw_protocol::event::RunError { run_id: record.run_id.clone(), error, totals: Default::default() },
    );
    let frame = Frame { seq, bytes: Bytes::from(sse::event_frame(&event)) };
    node.cluster.append_frames(&record.run_id, &[frame]).await.map_err(RunError::cluster)?;
    node.cluster.set_run_status(&record.run_id, "failed", true).await.map_err(RunError::cluster)?;
    tracing::warn!(runId = %record.run_id, node = %record.node_id, "run ended with node_lost: its replica is gone");
    crate::drive::count_outcome("failed", "node_lost");
    Ok(())
}

/// The first seq an attach without `lastSeq` starts after, and whether `last_seq` can still be
/// served: `Err((oldest, latest))` when the stream no longer holds the next event.
pub(crate) async fn stream_bounds(core: &Core, run_id: &str) -> Result<(u64, u64), RunError> {
    let Some(node) = core.cluster.get() else { return Ok((1, 0)) };
    let first = node.cluster.first_seq(run_id).await.map_err(RunError::cluster)?;
    let last = node.cluster.last_seq(run_id).await.map_err(RunError::cluster)?.unwrap_or(0);
    Ok((first.unwrap_or(last + 1), last))
}

/// Continues on this replica a run that waited durably for a person on a replica that is gone:
/// registers it here under its id (the chat's lock and the record move to this node) and waits
/// for its answer again, as after a restart (`crate::durable`). Returns once the run's waiters
/// are registered, so the submit that triggered the adoption is matched.
pub(crate) async fn adopt(service: &RunService, remote: &Remote) -> Result<Arc<RunHandle>, RunError> {
    let core = &service.core;
    let Some(node) = core.cluster.get().cloned() else { return Err(RunError::internal("not in a cluster")) };
    let record = &remote.record;
    let claim = format!("adopt:{}:{}", record.run_id, record.node_id);
    if !node.cluster.claim(&claim, Duration::from_secs(30)).await.map_err(RunError::cluster)? {
        return Err(RunError::RunMoving { run_id: record.run_id.clone() });
    }
    let store = core.chats.clone();
    let (chat_id, run_id) = (record.chat_id.clone(), record.run_id.clone());
    let waiting = tokio::task::spawn_blocking(move || store.waiting_run(&chat_id, &run_id))
        .await
        .map_err(RunError::memory)?
        .map_err(RunError::memory)?;
    let Some(waiting) = waiting else {
        return Err(RunError::NotWaiting { run_id: record.run_id.clone() });
    };
    if let Err(ChatLock::Unavailable(e)) = lock_chat(core, &record.chat_id, &record.run_id).await {
        return Err(RunError::cluster(e));
    }
    let slot = core
        .tracker
        .chats()
        .try_acquire(&record.chat_id, &record.run_id)
        .map_err(|busy| RunError::ChatBusy { chat_id: record.chat_id.clone(), run_id: busy.run_id })?;
    let handle = core.tracker.register(
        &record.run_id,
        &record.chat_id,
        &record.agent_key,
        owner_of(record),
        DisconnectPolicy::Continue,
        false,
    );
    node.cluster.set_run_node(&record.run_id, node.id()).await.map_err(RunError::cluster)?;
    tokio::spawn(mirror(node.clone(), handle.clone(), 0));
    let (ready, registered) = tokio::sync::oneshot::channel();
    crate::durable::spawn_wait_again(service, handle.clone(), slot, waiting, Some(ready));
    let _ = tokio::time::timeout(Duration::from_secs(5), registered).await;
    tracing::info!(runId = %record.run_id, from = %record.node_id, "adopted a waiting run of a lost replica");
    Ok(handle)
}

#[cfg(test)]
mod tests {
    use super::is_terminal;

    #[test]
    fn terminal_frames_are_recognised_by_their_type() {
        assert!(is_terminal(b"id:9\nevent:message\ndata:{\"seq\":9,\"type\":\"run.complete\",\"runId\":\"r\"}\n\n"));
        assert!(is_terminal(b"id:9\nevent:message\ndata:{\"seq\":9,\"type\":\"run.error\"}\n\n"));
        assert!(!is_terminal(b"id:3\nevent:message\ndata:{\"seq\":3,\"type\":\"content.delta\",\"delta\":\"\\\"type\\\":\\\"run.error\\\"\"}\n\n"));
    }
}
