//! In-flight runs: how many, whose (for submit and, later, attach/steer/interrupt), waiting for
//! them to finish, and ending them at a shutdown deadline.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agw_memory::Owner;
use tokio::sync::{Notify, watch};

use crate::metrics::RUNS_ACTIVE;

/// Tracks the run tasks of this server.
#[derive(Debug)]
pub struct RunTracker {
    active: AtomicUsize,
    changed: Notify,
    /// Becomes true when the shutdown grace period is over: remaining runs must stop.
    stop: watch::Sender<bool>,
    /// The owner of every registered run by run id (`None`: started without auth).
    owners: Mutex<HashMap<String, Option<Owner>>>,
}

impl Default for RunTracker {
    fn default() -> Self {
        Self {
            active: AtomicUsize::new(0),
            changed: Notify::new(),
            stop: watch::Sender::new(false),
            owners: Mutex::new(HashMap::new()),
        }
    }
}

/// Held by a run task for its whole life.
#[derive(Debug)]
pub struct RunGuard {
    tracker: Arc<RunTracker>,
    run_id: Option<String>,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if let Some(run_id) = &self.run_id {
            self.tracker.owners.lock().unwrap_or_else(PoisonError::into_inner).remove(run_id);
        }
        self.tracker.active.fetch_sub(1, Ordering::SeqCst);
        metrics::gauge!(RUNS_ACTIVE).decrement(1.0);
        self.tracker.changed.notify_waiters();
    }
}

impl RunTracker {
    /// Counts a run in flight until the guard is dropped; no id is registered (see [`Self::enter_run`]).
    pub fn enter(self: &Arc<Self>) -> RunGuard {
        self.active.fetch_add(1, Ordering::SeqCst);
        metrics::gauge!(RUNS_ACTIVE).increment(1.0);
        RunGuard { tracker: self.clone(), run_id: None }
    }

    /// [`Self::enter`] for a run that can be addressed by id: registered with its owner until the
    /// guard is dropped.
    pub fn enter_run(self: &Arc<Self>, run_id: &str, owner: Option<Owner>) -> RunGuard {
        let mut guard = self.enter();
        self.owners.lock().unwrap_or_else(PoisonError::into_inner).insert(run_id.trim().to_string(), owner);
        guard.run_id = Some(run_id.trim().to_string());
        guard
    }

    /// The owner of a running run: `None` when no run has this id; `Some(None)` for a run
    /// started without auth. Check it with [`crate::auth::may_access`].
    pub fn owner(&self, run_id: &str) -> Option<Option<Owner>> {
        self.owners.lock().unwrap_or_else(PoisonError::into_inner).get(run_id.trim()).cloned()
    }

    /// Runs in flight now.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// Resolves when the shutdown deadline passed (never, unless [`Self::stop_all`] is called).
    pub async fn stopped(&self) {
        let mut rx = self.stop.subscribe();
        let _ = rx.wait_for(|stop| *stop).await;
    }

    /// Tells every remaining run to end now (with `run.error`).
    pub fn stop_all(&self) {
        self.stop.send_replace(true);
    }

    /// Waits until no run is active, or `timeout` passed. Returns whether all runs finished.
    pub async fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if self.active() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.active() == 0;
            }
        }
    }
}

/// Graceful shutdown after the server stopped accepting: let runs finish within `grace`, then
/// end the rest with `run.error` and give them a moment to write it and their history.
pub async fn drain(tracker: &RunTracker, grace: Duration) {
    let active = tracker.active();
    if active == 0 {
        return;
    }
    tracing::info!(active, grace_ms = grace.as_millis() as u64, "waiting for in-flight runs");
    if tracker.wait_idle(grace).await {
        tracing::info!("all runs finished");
        return;
    }
    tracing::warn!(active = tracker.active(), "grace period over; ending the remaining runs");
    tracker.stop_all();
    if !tracker.wait_idle(Duration::from_secs(5)).await {
        tracing::error!(active = tracker.active(), "runs did not stop in time");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_registered_with_their_owner_while_they_run() {
        let tracker = Arc::new(RunTracker::default());
        let alice = Owner { sub: "alice".into(), tenant: None };
        let guard = tracker.enter_run(" r1 ", Some(alice.clone()));
        let anonymous = tracker.enter_run("r2", None);
        assert_eq!(tracker.owner("r1"), Some(Some(alice)));
        assert_eq!(tracker.owner("r2"), Some(None));
        assert_eq!(tracker.owner("r3"), None);
        drop((guard, anonymous));
        assert_eq!(tracker.owner("r1"), None);
        assert_eq!(tracker.active(), 0);
    }

    #[tokio::test]
    async fn drain_waits_for_runs_then_stops_the_rest() {
        let tracker = Arc::new(RunTracker::default());
        let quick = tracker.enter();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(quick);
        });
        assert!(tracker.wait_idle(Duration::from_secs(2)).await);

        let slow = tracker.enter();
        let t = tracker.clone();
        let run = tokio::spawn(async move {
            t.stopped().await;
            drop(slow);
        });
        drain(&tracker, Duration::from_millis(50)).await;
        run.await.unwrap();
        assert_eq!(tracker.active(), 0);
    }
}
