//! Chat retention (`agw.memory.retention`, off by default): the server deletes chats nobody has
//! touched for the configured time. A sweep every `agw.memory.retention-sweep` lists the chats
//! whose index record's `updatedAt` (set when a run of the chat starts) is older than the
//! retention and deletes each one as `DELETE /api/ap/chat` does — holding the chat's slot and,
//! in a cluster, its lock — except a chat with a run in flight or waiting for a person, which
//! stays until a later sweep finds it idle and still old.
//!
//! Several replicas on one PostgreSQL may sweep at once: the deletion checks the age again in
//! its own transaction under the chat's lock (`ChatStore::delete_chat_untouched_since`), so a
//! chat is deleted once, and a chat a run touched since the listing stays.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tracing::Instrument;

use crate::control::hold_chat;
use crate::service::{Core, RunService};
use crate::sink::now_ms;
use crate::{CHATS_EXPIRED, RunError};

/// What one retention sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Chats older than the retention when listed.
    pub old: usize,
    /// Deleted.
    pub expired: usize,
    /// Kept: a run of the chat was in flight or waiting for a person.
    pub busy: usize,
    /// Kept: touched since the listing, or already deleted (by another replica).
    pub untouched: usize,
    /// Not deleted because the store or the cluster failed (logged; the next sweep tries again).
    pub failed: usize,
}

/// The retention sweep running in the background ([`RunService::start_retention`]). It ends
/// by itself when the run service is gone; [`Self::stop`] ends it at once (shutdown).
#[derive(Debug)]
pub struct RetentionTask {
    task: tokio::task::JoinHandle<()>,
}

impl RetentionTask {
    /// Stops the sweep (a sweep in progress stops at its next await; each chat's deletion is
    /// one store call that either happened or did not).
    pub fn stop(self) {
        self.task.abort();
    }
}

impl RunService {
    /// Deletes the chats untouched for `retention` (see the module doc). A chat store that
    /// cannot list the chats is an error; a chat that cannot be deleted is counted and logged.
    pub async fn expire_chats(&self, retention: Duration) -> Result<Swept, RunError> {
        let core = &self.core;
        let cutoff = now_ms().saturating_sub(i64::try_from(retention.as_millis()).unwrap_or(i64::MAX));
        let store = core.chats.clone();
        let (old, waiting) = tokio::task::spawn_blocking(move || {
            Ok::<_, agw_memory::MemoryError>((store.chats_untouched_since(cutoff)?, store.waiting_runs()?))
        })
        .await
        .map_err(RunError::memory)?
        .map_err(RunError::memory)?;
        let mut swept = Swept { old: old.len(), ..Swept::default() };
        for chat in old {
            let chat_id = chat.chat_id;
            // A run waiting for a person that no replica holds right now (not restored yet, or its
            // replica is gone) has no slot or lock to say so: its mark does.
            if waiting.iter().any(|(_, waiting_chat)| *waiting_chat == chat_id) {
                swept.busy += 1;
                continue;
            }
            let (store, id) = (core.chats.clone(), chat_id.clone());
            let deleted =
                hold_chat(core, &chat_id, "expire", false, move || store.delete_chat_untouched_since(&id, cutoff))
                    .await;
            match deleted {
                Ok(Ok(true)) => {
                    swept.expired += 1;
                    core.tracker.forget_chat(&chat_id);
                }
                Ok(Ok(false)) => swept.untouched += 1,
                Err(RunError::ChatBusy { .. }) => swept.busy += 1,
                Ok(Err(error)) => {
                    swept.failed += 1;
                    tracing::warn!(chatId = %chat_id, %error, "an expired chat was not deleted");
                }
                Err(error) => {
                    swept.failed += 1;
                    tracing::warn!(chatId = %chat_id, %error, "an expired chat was not deleted");
                }
            }
        }
        metrics::counter!(CHATS_EXPIRED).increment(swept.expired as u64);
        Ok(swept)
    }

    /// Starts the retention sweep: every `every`, [`Self::expire_chats`] with `retention`, one
    /// log line per sweep. `None` (nothing started) when `retention` is zero (keep forever).
    /// The task holds the service weakly: it ends when the service is dropped, or at
    /// [`RetentionTask::stop`]. Needs a Tokio runtime.
    pub fn start_retention(&self, retention: Duration, every: Duration) -> Option<RetentionTask> {
        if retention.is_zero() {
            return None;
        }
        let every = every.max(Duration::from_millis(10));
        let core = Arc::downgrade(&self.core);
        let span = tracing::info_span!("chat_retention", retention_ms = retention.as_millis() as u64);
        tracing::info!(
            retention_ms = retention.as_millis() as u64,
            every_ms = every.as_millis() as u64,
            "chat retention on"
        );
        let task = tokio::spawn(sweep_every(core, retention, every).instrument(span));
        Some(RetentionTask { task })
    }
}

async fn sweep_every(core: Weak<Core>, retention: Duration, every: Duration) {
    let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(core) = core.upgrade() else { return };
        let service = RunService { core };
        match service.expire_chats(retention).await {
            Ok(Swept { old, expired, busy, untouched, failed }) => {
                tracing::info!(old, expired, busy, untouched, failed, "chat retention sweep")
            }
            Err(error) => tracing::warn!(%error, "chat retention sweep failed; trying again at the next"),
        }
    }
}
