//! Crash recovery across replicas (`docs/run-lifecycle.md`, `docs/deployment.md`): a run in
//! flight on a replica whose lease expired is resumed by another replica from its last
//! completed step, instead of ending with `node_lost`.
//!
//! The lost replica's run mark is in the shared database (it names its node) and its stream is
//! in Redis, with a signed progress note its mirror wrote beside the frames (what the history
//! covered, which blocks were opened). Whichever replica first notices the loss — its sweep
//! ([`start_sweep`], every lease), or a request or follower that finds the run's record naming
//! a dead node — claims the run's fate once for the whole cluster ([`settle_lost`]): it resumes
//! the run here when it can (recovery on, the mark found, the chat free), numbering on from the
//! stream's last seq, so every follower sees one gap-free sequence; otherwise it appends
//! `run.error` `node_lost` as before. The claim is per run and node, so a run whose new
//! replica dies too is settled again — bounded by the mark's attempts like a restart loop.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use agw_cluster::RunRecord;
use agw_memory::{FoundRun, InFlightRun, LedgerEntry};
use agw_protocol::history::RunMark;
use tracing::Instrument;

use crate::cluster::{self, ChatLock, ProgressNote};
use crate::recover::{covering_history, resume_run};
use crate::service::{Core, RunService};
use crate::{DisconnectPolicy, RunError, RunHandle};

impl RunService {
    /// Resumes every run that was in flight when the server last stopped (crash recovery,
    /// `docs/run-lifecycle.md`); returns how many. Call it after
    /// [`Self::restore_waiting_runs`] and before serving requests. On a single node the runs
    /// marked in this process's chat store are resumed now (`crate::recover`): one that cannot be
    /// read is logged and skipped, one resumed too often or too old ends with `run.error`
    /// `recovery_exhausted`. Clustered, the takeover sweep starts instead (0 is returned): runs
    /// of replicas whose lease is gone — this process's earlier incarnation's among them — are
    /// resumed here or elsewhere as soon as the lease has expired.
    pub async fn recover_runs(&self) -> usize {
        if self.core.cluster.get().is_some() && self.core.recovers() {
            start_sweep(self);
            return 0;
        }
        crate::recover::recover_local(self).await
    }
}

/// What became of a run whose replica was lost while it ran.
pub(crate) enum Fate {
    /// This replica resumed it.
    Here(Arc<RunHandle>),
    /// Another replica decides (or decided) it: it resumes the run, or the run waits for a
    /// person and the replica its answer reaches adopts it.
    Decided,
    /// It ended with `run.error` `node_lost`.
    Lost,
}

/// Settles the fate of the run `record` names, whose node is gone while it ran (see the module
/// docs). Exactly one replica decides; the others get [`Fate::Decided`].
pub(crate) async fn settle_lost(service: &RunService, record: &RunRecord) -> Result<Fate, RunError> {
    let core = &service.core;
    let Some(node) = core.cluster.get() else { return Ok(Fate::Decided) };
    let retention = core.settings.runs.retention.max(Duration::from_secs(60));
    let claim = format!("lost:{}:{}", record.run_id, record.node_id);
    if !node.cluster.claim(&claim, retention).await.map_err(RunError::cluster)? {
        return Ok(Fate::Decided);
    }
    if core.recovers() {
        match take_over(service, record).await {
            Ok(Taken::Here(handle)) => return Ok(Fate::Here(handle)),
            Ok(Taken::Waits) => return Ok(Fate::Decided),
            Ok(Taken::Not(why)) => {
                tracing::info!(runId = %record.run_id, node = %record.node_id, "a lost replica's run is not resumed: {why}")
            }
            Err(e) => {
                tracing::warn!(runId = %record.run_id, node = %record.node_id, error = %e, "a lost replica's run could not be resumed")
            }
        }
    }
    cluster::declare_lost(core, record).await?;
    Ok(Fate::Lost)
}

/// What taking a lost run over came to.
enum Taken {
    Here(Arc<RunHandle>),
    /// Its history ends waiting for a person: the record says so now, the answer adopts it.
    Waits,
    /// Nothing to resume, and why.
    Not(&'static str),
}

async fn take_over(service: &RunService, record: &RunRecord) -> Result<Taken, RunError> {
    let core = &service.core;
    let Some(node) = core.cluster.get().cloned() else { return Ok(Taken::Not("not in a cluster")) };
    let (run_id, chat_id) = (record.run_id.clone(), record.chat_id.clone());
    let store = core.chats.clone();
    let found = {
        let run_id = run_id.clone();
        tokio::task::spawn_blocking(move || {
            let Some(mark) = store.running_runs()?.into_iter().find(|m| m.run_id == run_id) else { return Ok(None) };
            store.found_run(mark).map(Some)
        })
        .await
        .map_err(RunError::memory)?
        .map_err(RunError::memory)?
    };
    let run = match found {
        None => return Ok(Taken::Not("it has no run mark (it stopped before its first was written)")),
        Some(FoundRun::Waiting) => {
            node.cluster.set_run_status(&run_id, "waiting", false).await.map_err(RunError::cluster)?;
            return Ok(Taken::Waits);
        }
        Some(FoundRun::Ended) => return Ok(Taken::Not("its history shows it had ended")),
        Some(FoundRun::InFlight(run)) => run,
    };
    if run.mark.chat_id != chat_id {
        return Ok(Taken::Not("its mark names another chat"));
    }
    match cluster::lock_chat(core, &chat_id, &run_id).await {
        Ok(()) => {}
        Err(ChatLock::Busy(_)) => return Ok(Taken::Not("its chat has moved on to another run")),
        Err(ChatLock::Unavailable(e)) => return Err(RunError::cluster(e)),
    }
    let Ok(slot) = core.tracker.chats().try_acquire(&chat_id, &run_id) else {
        return Ok(Taken::Not("its chat has moved on to another run"));
    };
    // Numbered on from the stream every follower reads.
    let last = node.cluster.last_seq(&run_id).await.map_err(RunError::cluster)?.unwrap_or(0);
    let note = match node.cluster.run_progress(&run_id).await {
        Ok(note) => note.and_then(|n| serde_json::from_str::<ProgressNote>(&n).ok()),
        Err(e) => return Err(RunError::cluster(e)),
    };
    let entry = taken_numbering(note, last, &run);
    let owner = record.owner.as_deref().and_then(|o| serde_json::from_str(o).ok());
    let handle = core.tracker.register(&run_id, &chat_id, &record.agent_key, owner, DisconnectPolicy::Continue, false);
    node.cluster.set_run_node(&run_id, node.id()).await.map_err(RunError::cluster)?;
    tokio::spawn(cluster::mirror(node.clone(), handle.clone(), last));
    let span = tracing::info_span!("run", runId = %run_id, chatId = %chat_id, agentKey = %record.agent_key);
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    tokio::spawn(resume_run(service.clone(), handle.clone(), slot, run, entry, ready_tx).instrument(span));
    let _ = ready.await;
    tracing::info!(runId = %run_id, from = %record.node_id, lastSeq = last, "took over a run of a lost replica");
    Ok(Taken::Here(handle))
}

/// Where a run taken over numbers on: after `last`, the stream's last seq (what every follower
/// has), superseding what came after its progress note's durable point; without a note (its
/// mirror never wrote one), after its mark's — never beyond the stream.
fn taken_numbering(note: Option<ProgressNote>, last: u64, run: &InFlightRun) -> LedgerEntry {
    let entry = match note {
        Some(note) => note.entry(last),
        None => LedgerEntry {
            last_seq: last,
            durable_seq: run.mark.last_seq.min(last),
            shown: run.blocks,
            durable: run.blocks,
        },
    };
    covering_history(entry, run)
}

/// Starts the takeover sweep: at once, then every lease, the run marks of the shared database
/// whose node's lease is gone are settled ([`settle_lost`]). The task holds the service weakly
/// and ends with it.
fn start_sweep(service: &RunService) {
    let Some(node) = service.core.cluster.get() else { return };
    let every = node.cluster.config().lease.max(Duration::from_millis(100));
    let core = Arc::downgrade(&service.core);
    tracing::info!(every_ms = every.as_millis() as u64, "crash recovery: runs of lost replicas are taken over");
    tokio::spawn(sweep_every(core, every).instrument(tracing::info_span!("takeover_sweep")));
}

async fn sweep_every(core: Weak<Core>, every: Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(core) = core.upgrade() else { return };
        let service = RunService { core };
        if let Err(e) = sweep(&service).await {
            tracing::warn!(error = %e, "takeover sweep failed; trying again at the next");
        }
    }
}

/// One sweep: every marked run of another node whose lease is gone, settled.
async fn sweep(service: &RunService) -> Result<(), RunError> {
    let core = &service.core;
    let Some(node) = core.cluster.get() else { return Ok(()) };
    let store = core.chats.clone();
    let marks: Vec<RunMark> = tokio::task::spawn_blocking(move || store.running_runs())
        .await
        .map_err(RunError::memory)?
        .map_err(RunError::memory)?;
    let mut alive: HashMap<String, bool> = HashMap::new();
    for mark in marks {
        // A mark without a node is a single node's (not clustered) on the same database.
        let Some(marked) = mark.node.as_deref() else { continue };
        if marked == node.id() || core.tracker.get(&mark.run_id).is_some() {
            continue;
        }
        if is_alive(node, &mut alive, marked).await? {
            continue;
        }
        let Some(record) = node.cluster.get_run(&mark.run_id).await.map_err(RunError::cluster)? else { continue };
        // Taken over already (its mark is rewritten by the run itself, a moment later).
        if record.node_id != marked
            && (record.node_id == node.id() || is_alive(node, &mut alive, &record.node_id).await?)
        {
            continue;
        }
        if matches!(record.status.as_str(), "running") {
            settle_lost(service, &record).await?;
        }
    }
    Ok(())
}

async fn is_alive(node: &crate::node::Node, known: &mut HashMap<String, bool>, id: &str) -> Result<bool, RunError> {
    if let Some(alive) = known.get(id) {
        return Ok(*alive);
    }
    let alive = node.cluster.node_alive(id).await.map_err(RunError::cluster)?;
    known.insert(id.to_owned(), alive);
    Ok(alive)
}
