//! The run registry: runs by id while they run and, once finished, for the retention window;
//! how many run tasks are in flight, waiting for them, and ending them at a shutdown deadline.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agw_memory::Owner;
use dashmap::DashMap;
use tokio::sync::{Notify, watch};

use crate::chats::ChatSlots;
use crate::handle::{DisconnectPolicy, RunHandle, RunSpec};
use crate::settings::RunSettings;
use crate::{BufferLimits, RUNS_ACTIVE};

/// Tracks the runs of this server: the registry by run id, and the count of run tasks.
#[derive(Debug)]
pub struct RunTracker {
    settings: RunSettings,
    active: AtomicUsize,
    changed: Notify,
    /// Becomes true when the shutdown grace period is over: remaining runs must stop.
    stop: watch::Sender<bool>,
    /// Running and retained runs by id.
    runs: DashMap<String, Arc<RunHandle>>,
    /// Finished runs in the order they finished, with their buffer size, for retention.
    finished: Mutex<Retained>,
    /// One run at a time per chat (or a queue), per `agw.runs.chat-concurrency`.
    chats: ChatSlots,
}

#[derive(Debug, Default)]
struct Retained {
    runs: VecDeque<(Instant, String, usize)>,
    bytes: usize,
    /// A task forgets expired runs while any are retained (one task, gone when none are).
    sweeper: bool,
}

impl Default for RunTracker {
    fn default() -> Self {
        Self::new(RunSettings::default())
    }
}

/// Held by a run task for its whole life.
#[derive(Debug)]
pub struct RunGuard {
    tracker: Arc<RunTracker>,
    handle: Option<Arc<RunHandle>>,
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            // A task that ended without its terminal event (a panic) still ends its observers,
            // and a run that never reached its own close (cancelled while queued) refuses steers.
            handle.finish_abruptly();
            handle.steers.close();
            RunTracker::retain(&self.tracker, &handle);
        }
        self.tracker.active.fetch_sub(1, Ordering::SeqCst);
        metrics::gauge!(RUNS_ACTIVE).decrement(1.0);
        self.tracker.changed.notify_waiters();
    }
}

impl RunTracker {
    /// An empty registry with these settings.
    pub fn new(settings: RunSettings) -> Self {
        Self {
            settings,
            active: AtomicUsize::new(0),
            changed: Notify::new(),
            stop: watch::Sender::new(false),
            runs: DashMap::new(),
            finished: Mutex::new(Retained::default()),
            chats: ChatSlots::default(),
        }
    }

    /// The registry's settings.
    pub fn settings(&self) -> &RunSettings {
        &self.settings
    }

    /// The per-chat run slots.
    pub fn chats(&self) -> &ChatSlots {
        &self.chats
    }

    /// Counts a run in flight until the guard is dropped; no id is registered (see [`Self::enter_run`]).
    pub fn enter(self: &Arc<Self>) -> RunGuard {
        self.active.fetch_add(1, Ordering::SeqCst);
        metrics::gauge!(RUNS_ACTIVE).increment(1.0);
        RunGuard { tracker: self.clone(), handle: None }
    }

    /// A new run's handle, registered under its id (buffer bounds and observer cap from the
    /// settings; `keep_events`: its buffer keeps typed events for readers that map them to
    /// another protocol). Start its task with [`Self::enter_run`].
    pub fn register(
        &self,
        run_id: &str,
        chat_id: &str,
        agent_key: &str,
        owner: Option<Owner>,
        policy: DisconnectPolicy,
        keep_events: bool,
    ) -> Arc<RunHandle> {
        self.sweep();
        let handle = RunHandle::new(RunSpec {
            run_id: run_id.trim().to_string(),
            chat_id: chat_id.to_string(),
            agent_key: agent_key.to_string(),
            owner,
            policy,
            limits: BufferLimits { max_events: self.settings.buffer_events, max_bytes: self.settings.buffer_bytes },
            max_observers: self.settings.max_observers,
            keep_events,
        });
        self.runs.insert(handle.run_id.clone(), handle.clone());
        handle
    }

    /// [`Self::enter`] for a registered run: when the guard drops, the run is finished and kept
    /// for the retention window.
    pub fn enter_run(self: &Arc<Self>, handle: &Arc<RunHandle>) -> RunGuard {
        let mut guard = self.enter();
        guard.handle = Some(handle.clone());
        guard
    }

    /// A running or retained run.
    pub fn get(&self, run_id: &str) -> Option<Arc<RunHandle>> {
        self.sweep();
        self.runs.get(run_id.trim()).map(|r| r.value().clone())
    }

    /// The owner of a registered run: `None` when no run has this id; `Some(None)` for a run
    /// started without auth. The edge checks it against the caller ([`crate::may_access`]).
    pub fn owner(&self, run_id: &str) -> Option<Option<Owner>> {
        self.get(run_id).map(|h| h.owner.clone())
    }

    /// The ids of the runs registered now (running and retained), in no particular order.
    pub fn ids(&self) -> Vec<String> {
        self.runs.iter().map(|r| r.key().clone()).collect()
    }

    /// Runs registered now (running and retained).
    pub fn registered(&self) -> usize {
        self.runs.len()
    }

    /// Forgets the chat's finished runs (its deletion): their buffers are no longer attachable.
    /// Runs still in flight or waiting are left alone (the caller refuses to delete under
    /// them). Returns how many were forgotten.
    pub fn forget_chat(&self, chat_id: &str) -> usize {
        let gone: Vec<String> = self
            .runs
            .iter()
            .filter(|r| r.chat_id == chat_id && r.status().is_finished() && !r.is_waiting())
            .map(|r| r.key().clone())
            .collect();
        let mut retained = self.finished.lock().unwrap_or_else(PoisonError::into_inner);
        for run_id in &gone {
            self.runs.remove(run_id);
        }
        let mut freed = 0;
        retained.runs.retain(|(_, run_id, bytes)| {
            let keep = !gone.contains(run_id);
            if !keep {
                freed += *bytes;
            }
            keep
        });
        retained.bytes -= freed;
        gone.len()
    }

    /// Moves a finished run into retention (or forgets it at once with a zero retention).
    fn retain(self: &Arc<Self>, handle: &Arc<RunHandle>) {
        let bytes = handle.buffered_bytes();
        if self.settings.retention.is_zero() || self.settings.retained_bytes == 0 {
            self.runs.remove(&handle.run_id);
            return;
        }
        let mut retained = self.finished.lock().unwrap_or_else(PoisonError::into_inner);
        retained.runs.push_back((Instant::now(), handle.run_id.clone(), bytes));
        retained.bytes += bytes;
        let start_sweeper = !retained.sweeper && tokio::runtime::Handle::try_current().is_ok();
        retained.sweeper |= start_sweeper;
        drop(retained);
        self.sweep();
        if start_sweeper {
            tokio::spawn(Self::sweeper(Arc::downgrade(self)));
        }
    }

    /// Forgets retained runs as they expire, also when no request comes to trigger it; ends
    /// when nothing is retained.
    async fn sweeper(tracker: std::sync::Weak<Self>) {
        loop {
            let next = {
                let Some(tracker) = tracker.upgrade() else { return };
                tracker.sweep();
                let mut retained = tracker.finished.lock().unwrap_or_else(PoisonError::into_inner);
                match retained.runs.front() {
                    Some((at, _, _)) => *at + tracker.settings.retention,
                    None => {
                        retained.sweeper = false;
                        return;
                    }
                }
            };
            tokio::time::sleep_until(next.into()).await;
        }
    }

    /// Forgets finished runs past the retention window, and the oldest beyond the byte cap.
    fn sweep(&self) {
        let mut retained = self.finished.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        while let Some((at, _, bytes)) = retained.runs.front() {
            let expired = now.duration_since(*at) >= self.settings.retention;
            if !expired && retained.bytes <= self.settings.retained_bytes {
                break;
            }
            let bytes = *bytes;
            if let Some((_, run_id, _)) = retained.runs.pop_front() {
                self.runs.remove(&run_id);
            }
            retained.bytes -= bytes;
        }
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
    use crate::handle::RunStatus;

    fn register(tracker: &Arc<RunTracker>, run_id: &str, owner: Option<Owner>) -> (Arc<RunHandle>, RunGuard) {
        let handle = tracker.register(run_id, "chat", "agent", owner, DisconnectPolicy::Continue, false);
        let guard = tracker.enter_run(&handle);
        (handle, guard)
    }

    #[test]
    fn runs_are_registered_with_their_owner_and_retained_after_they_end() {
        let tracker = Arc::new(RunTracker::default());
        let alice = Owner { sub: "alice".into(), tenant: None };
        let (_, guard) = register(&tracker, " r1 ", Some(alice.clone()));
        let (_, anonymous) = register(&tracker, "r2", None);
        assert_eq!(tracker.owner("r1"), Some(Some(alice.clone())));
        assert_eq!(tracker.owner("r2"), Some(None));
        assert_eq!(tracker.owner("r3"), None);
        drop((guard, anonymous));
        assert_eq!(tracker.active(), 0);
        assert_eq!(tracker.owner("r1"), Some(Some(alice)), "attachable for the retention window");
        assert_eq!(tracker.get("r1").unwrap().status(), RunStatus::Failed, "a task gone without a terminal event");
    }

    #[test]
    fn retention_ends_by_time_and_by_bytes_oldest_first() {
        let settings =
            RunSettings { retention: Duration::from_millis(50), retained_bytes: 1 << 20, ..RunSettings::default() };
        let tracker = Arc::new(RunTracker::new(settings));
        let (_, guard) = register(&tracker, "old", None);
        drop(guard);
        assert!(tracker.get("old").is_some());
        std::thread::sleep(Duration::from_millis(60));
        assert!(tracker.get("old").is_none(), "forgotten after the retention window");

        let settings = RunSettings { retained_bytes: 1, ..RunSettings::default() };
        let tracker = Arc::new(RunTracker::new(settings));
        for id in ["a", "b"] {
            let (handle, guard) = register(&tracker, id, None);
            let event = agw_protocol::Event::new(
                1,
                0,
                agw_protocol::event::RunCancel { run_id: id.into(), totals: Default::default() },
            );
            handle.publish([event]);
            drop(guard);
        }
        assert!(tracker.get("a").is_none() && tracker.get("b").is_none(), "over the byte cap nothing is kept");
        assert_eq!(tracker.registered(), 0);
    }

    #[test]
    fn forgetting_a_chat_drops_its_finished_runs_only() {
        let tracker = Arc::new(RunTracker::default());
        let finished = |run_id: &str, chat_id: &str| {
            let handle = tracker.register(run_id, chat_id, "agent", None, DisconnectPolicy::Continue, false);
            let event = agw_protocol::Event::new(
                1,
                0,
                agw_protocol::event::RunCancel { run_id: run_id.into(), totals: Default::default() },
            );
            handle.publish([event]);
            drop(tracker.enter_run(&handle));
        };
        finished("done", "chat");
        finished("other", "another chat");
        let running = tracker.register("running", "chat", "agent", None, DisconnectPolicy::Continue, false);
        let _guard = tracker.enter_run(&running);
        let before = tracker.finished.lock().unwrap().bytes;
        assert_eq!(tracker.forget_chat("chat"), 1);
        assert!(tracker.get("done").is_none(), "no longer attachable");
        assert!(tracker.get("other").is_some() && tracker.get("running").is_some());
        let retained = tracker.finished.lock().unwrap();
        assert_eq!(retained.runs.len(), 1);
        assert!(retained.bytes < before && retained.bytes > 0, "its bytes no longer count");
    }

    #[tokio::test]
    async fn drain_waits_for_runs_then_stops_the_rest() {
        let tracker = Arc::new(RunTracker::default());
        let quick = tracker.enter();
        assert_eq!(tracker.registered(), 0, "a counted run without an id is not registered");
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

    /// Protocol adapters read a run as typed events: the events the run kept, or, for a run
    /// that keeps none (started by the native endpoint), the same events decoded from its
    /// frames; either way up to and including the terminal event, then the end.
    #[tokio::test]
    async fn observers_read_the_same_typed_events_whether_the_run_keeps_them_or_not() {
        use agw_protocol::event::{ContentDelta, RunComplete};
        let tracker = Arc::new(RunTracker::default());
        let mut read = Vec::new();
        for keep_events in [true, false] {
            let run_id = if keep_events { "kept" } else { "decoded" };
            let handle = tracker.register(run_id, "chat", "agent", None, DisconnectPolicy::Continue, keep_events);
            let mut observer = handle.observe(0).expect("observer");
            let delta = |seq, text: &str| {
                agw_protocol::Event::new(seq, 0, ContentDelta { content_id: "c".into(), delta: text.into() })
            };
            handle.publish([delta(1, "Hel"), delta(2, "lo")]);
            let first = observer.next_events().await.expect("a batch");
            let complete = RunComplete {
                run_id: run_id.into(),
                finish_reason: "stop".into(),
                output: None,
                totals: Default::default(),
            };
            handle.publish([agw_protocol::Event::new(3, 0, complete)]);
            let second = observer.next_events().await.expect("the terminal event");
            assert!(observer.next_events().await.is_none(), "the end after the terminal event");
            let seqs: Vec<u64> = first.iter().chain(&second).map(|e| e.seq).collect();
            assert_eq!(seqs, [1, 2, 3], "keep_events: {keep_events}");
            read.push(first.iter().map(|e| e.payload.clone()).collect::<Vec<_>>());
        }
        assert_eq!(read[0], read[1], "kept and decoded events are the same");
    }
}
