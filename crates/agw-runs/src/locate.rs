//! Where a run is, for a request that acts on it ([`find_run`]): on this replica, on another
//! (followed through its Redis stream, [`follow`], or reached by forwarding), on one that is
//! gone (its fate settled once, `crate::takeover`: taken over here or elsewhere, or ended with
//! `node_lost`; a waiting run is adopted), or nowhere the caller may see.

use std::sync::Arc;
use std::time::Duration;

use agw_cluster::FollowItem;
use bytes::Bytes;
use futures::StreamExt;

use crate::cluster::{Remote, is_terminal, locate, unavailable_frame};
use crate::node::Node;
use crate::principal::{Principal, may_access};
use crate::service::{Core, RunService};
use crate::takeover::Fate;
use crate::{RunError, RunHandle};

/// Where a run is, for a caller: the one answer every route that acts on a run asks for
/// ([`find_run`]), so "here, elsewhere, orphaned or ended" is decided in one place.
pub(crate) enum Located {
    /// No run the caller may see has this id (none at all, or another owner's): 404.
    Nowhere,
    /// This replica holds it (running, waiting, or retained after it ended).
    Here(Arc<RunHandle>),
    /// A live replica runs it: requests are forwarded there.
    Elsewhere(Remote),
    /// Its replica is gone while it waited for a person: whoever acts on it adopts it first.
    Orphaned(Remote),
    /// It has ended: on a live replica, or its replica was lost while it ran (then `run.error`
    /// `node_lost` has been appended to its stream, once).
    Ended(Remote),
}

/// Finds the run `run_id` for `principal`: this replica's registry first, then the cluster.
/// A run this replica holds but the caller may not see is [`Located::Nowhere`], as is one held
/// elsewhere for another owner.
pub(crate) async fn find_run(
    service: &RunService,
    run_id: &str,
    principal: Option<&Principal>,
) -> Result<Located, RunError> {
    let core = &service.core;
    if let Some(handle) = core.tracker.get(run_id) {
        let visible = may_access(principal, handle.owner.as_ref());
        return Ok(if visible { Located::Here(handle) } else { Located::Nowhere });
    }
    let Some(remote) = locate(core, run_id, principal).await? else { return Ok(Located::Nowhere) };
    if remote.lost() {
        return match crate::takeover::settle_lost(service, &remote.record).await? {
            Fate::Here(handle) => Ok(Located::Here(handle)),
            Fate::Lost => Ok(Located::Ended(remote)),
            // Another replica is resuming it (or it waits for a person): look again once it
            // says where.
            Fate::Decided => Ok(relocate(core, remote, principal).await),
        };
    }
    Ok(placed(remote))
}

/// Where a located run is, by its record.
fn placed(remote: Remote) -> Located {
    if remote.orphaned_wait() {
        Located::Orphaned(remote)
    } else if remote.finished() || remote.lost() {
        Located::Ended(remote)
    } else {
        Located::Elsewhere(remote)
    }
}

/// A lost run whose fate another replica decides: its record, once it names the run's new node
/// (a few milliseconds after the decision; at most two seconds are waited).
async fn relocate(core: &Core, lost: Remote, principal: Option<&Principal>) -> Located {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    loop {
        if let Ok(Some(remote)) = locate(core, &lost.record.run_id, principal).await
            && (remote.record.node_id != lost.record.node_id || !remote.lost())
        {
            return placed(remote);
        }
        if tokio::time::Instant::now() >= deadline {
            // Followed through its stream meanwhile; a request forwarded to it waits for the
            // new node's record.
            return Located::Elsewhere(lost);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The frames of a remote run after `last_seq`, then live, ending after its terminal event.
/// While the stream is quiet, the owner's lease is checked: a lost owner's running run gets
/// `run.error` `node_lost` ([`declare_lost`]); a waiting run keeps waiting for its adopter.
pub(crate) fn follow(
    service: &RunService,
    remote: Remote,
    last_seq: u64,
) -> futures::stream::BoxStream<'static, Bytes> {
    let Some(node) = service.core.cluster.get().cloned() else { return futures::stream::empty().boxed() };
    let frames = node.cluster.follow(&remote.record.run_id, last_seq);
    struct Follow {
        service: RunService,
        node: Arc<Node>,
        frames: futures::stream::BoxStream<'static, Result<FollowItem, agw_cluster::ClusterError>>,
        run_id: String,
        done: bool,
        quiet_after_end: u8,
    }
    let follow = Follow {
        service: service.clone(),
        node,
        frames,
        run_id: remote.record.run_id.clone(),
        done: false,
        quiet_after_end: 0,
    };
    futures::stream::unfold(follow, |mut f| async move {
        loop {
            if f.done {
                return None;
            }
            match f.frames.next().await {
                Some(Ok(FollowItem::Frame(frame))) => {
                    f.done = is_terminal(&frame.bytes);
                    return Some((frame.bytes, f));
                }
                Some(Ok(FollowItem::Idle)) => match f.node.cluster.get_run(&f.run_id).await {
                    Ok(Some(record)) => {
                        let remote =
                            Remote { alive: f.node.cluster.node_alive(&record.node_id).await.unwrap_or(true), record };
                        if remote.finished() {
                            // The terminal frame is appended before the record says finished;
                            // two quiet reads after that mean it will not come (trimmed).
                            f.quiet_after_end += 1;
                            f.done = f.quiet_after_end >= 2;
                        } else if remote.lost()
                            && let Err(e) = crate::takeover::settle_lost(&f.service, &remote.record).await
                        {
                            tracing::warn!(runId = %f.run_id, error = %e, "could not settle the fate of a lost run");
                        }
                    }
                    // Expired with its retention: nothing more will come.
                    Ok(None) => return None,
                    Err(e) => tracing::warn!(runId = %f.run_id, error = %e, "run record unreadable while following"),
                },
                Some(Err(e)) => {
                    f.done = true;
                    tracing::warn!(runId = %f.run_id, error = %e, "following a remote run failed");
                    return Some((unavailable_frame(&e.to_string()), f));
                }
                None => return None,
            }
        }
    })
    .boxed()
}
