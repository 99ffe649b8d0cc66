//! One run as a server-side object: its event buffer, its observers, its status and the
//! controls (cancel) other requests use on it. The run task publishes into it; any number of
//! observers (the query's own response, attaches) read from it.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;

use agw_memory::Owner;
use agw_modes::runtime::SteerQueue;
use agw_protocol::{Event, EventPayload, sse};

use crate::buffer::{BufferLimits, FrameBuffer, Read, ReadEvents};

/// Where a run is in its life (`docs/run-lifecycle.md` has the diagram).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Queued behind another run of its chat, or streaming, or running tools.
    Running,
    /// Ended with `run.complete`.
    Completed,
    /// Ended with `run.error`.
    Failed,
    /// Ended with `run.cancel`.
    Cancelled,
}

impl RunStatus {
    /// The status as the HTTP API names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Whether the run has ended.
    pub fn is_finished(self) -> bool {
        self != Self::Running
    }
}

/// Why a run is being cancelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancelReason {
    /// `POST /api/ap/interrupt`.
    Interrupted,
    /// Nobody watched the run for the detach grace period (or the query asked
    /// `onDisconnect: cancel` and its client left).
    Detached,
    /// Another replica took the run over (this one's lease had expired): it stops here without
    /// a word, its new replica goes on (crash recovery, clustered).
    TakenOver,
}

/// What a run does when its last observer leaves (per query `onDisconnect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisconnectPolicy {
    /// Cancel at once.
    Cancel,
    /// Keep going to the end.
    Continue,
    /// Keep going for this long; cancel unless someone attached meanwhile.
    Grace(Duration),
}

/// Why an observer cannot attach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachError {
    /// The buffer no longer holds the event after `last_seq`.
    Expired {
        /// The oldest seq held.
        oldest: u64,
        /// The newest seq.
        latest: u64,
    },
    /// The run already has as many observers as allowed.
    TooManyObservers(usize),
}

struct State {
    buffer: FrameBuffer,
    status: RunStatus,
    observers: usize,
    /// Calls (awaiting ids) whose submit was taken, kept as long as the handle: a second
    /// answer is told so even after the run ended.
    answered: Vec<String>,
    /// Where the run stands for crash recovery (clustered mode): noted by its sink at every
    /// publish, copied to Redis by its mirror for a replica that takes the run over.
    progress: Option<agw_memory::LedgerEntry>,
}

/// A run registered with the server.
pub struct RunHandle {
    /// The run's id.
    pub run_id: String,
    /// Its chat.
    pub chat_id: String,
    /// Its agent.
    pub agent_key: String,
    /// Who started it (`None`: without auth).
    pub owner: Option<Owner>,
    /// User messages queued by `POST /api/ap/steer`; the run takes them at its next model turn.
    pub steers: Arc<SteerQueue>,
    policy: DisconnectPolicy,
    max_observers: usize,
    state: Mutex<State>,
    /// Bumped on every publish and at the end; observers wait on it.
    wake: watch::Sender<u64>,
    cancel: watch::Sender<Option<CancelReason>>,
    /// The number of observers, for [`Self::abandoned`].
    watchers: watch::Sender<usize>,
    /// Input and output tokens of every model call so far, as the providers reported them.
    usage: [std::sync::atomic::AtomicU64; 2],
    /// The run waits for a person and its wait is recorded (durable waiting): another replica
    /// may adopt it if this one is lost (agw-http's cluster glue).
    waits_durably: std::sync::atomic::AtomicBool,
    /// The run stopped without its terminal event to be resumed elsewhere (crash recovery:
    /// the server stops, or another replica took it over): its mirror leaves it running.
    left: std::sync::atomic::AtomicBool,
}

/// What the cluster mirror of a run reads from its handle ([`RunHandle::frames_after`]).
#[derive(Debug)]
pub struct Mirrored {
    /// Frames after the cursor, each with its seq (at most a few hundred per read).
    pub frames: Vec<(u64, Bytes)>,
    /// Frames between the cursor and the first of `frames` were dropped from the buffer.
    pub skipped: bool,
    /// The newest seq published (so the reader knows whether `frames` ends with it).
    pub latest: u64,
    /// The run's status at the time of the read.
    pub status: RunStatus,
    /// Whether the run waits durably for a person.
    pub waiting: bool,
    /// Where the run stands for crash recovery, when it is resumable.
    pub progress: Option<agw_memory::LedgerEntry>,
    /// The run stopped to be resumed elsewhere ([`RunHandle::leave`]).
    pub left: bool,
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle").field("run_id", &self.run_id).field("status", &self.status()).finish()
    }
}

/// Who a run is and how it treats its observers.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The run's id.
    pub run_id: String,
    /// Its chat.
    pub chat_id: String,
    /// Its agent.
    pub agent_key: String,
    /// Who started it.
    pub owner: Option<Owner>,
    /// When its last observer leaves.
    pub policy: DisconnectPolicy,
    /// Buffer bounds.
    pub limits: BufferLimits,
    /// Observer cap.
    pub max_observers: usize,
    /// Keep each event typed next to its frame, for observers that read events
    /// ([`Observer::next_events`]) rather than frames.
    pub keep_events: bool,
}

impl RunHandle {
    /// A running run with an empty buffer and no observer.
    pub fn new(spec: RunSpec) -> Arc<Self> {
        Arc::new(Self {
            run_id: spec.run_id,
            chat_id: spec.chat_id,
            agent_key: spec.agent_key,
            owner: spec.owner,
            steers: Arc::new(SteerQueue::default()),
            policy: spec.policy,
            max_observers: spec.max_observers,
            state: Mutex::new(State {
                buffer: if spec.keep_events {
                    FrameBuffer::with_events(spec.limits)
                } else {
                    FrameBuffer::new(spec.limits)
                },
                status: RunStatus::Running,
                observers: 0,
                answered: Vec::new(),
                progress: None,
            }),
            wake: watch::Sender::new(0),
            cancel: watch::Sender::new(None),
            watchers: watch::Sender::new(0),
            usage: Default::default(),
            waits_durably: Default::default(),
            left: Default::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that the wait of call `awaiting_id` took its answer.
    pub fn note_answered(&self, awaiting_id: &str) {
        self.lock().answered.push(awaiting_id.trim().to_owned());
    }

    /// Whether the wait of call `awaiting_id` took an answer already.
    pub fn was_answered(&self, awaiting_id: &str) -> bool {
        self.lock().answered.iter().any(|id| id == awaiting_id.trim())
    }

    /// The run's status now.
    pub fn status(&self) -> RunStatus {
        self.lock().status
    }

    /// The newest seq published.
    pub fn latest_seq(&self) -> u64 {
        self.lock().buffer.latest()
    }

    /// The oldest seq still held (the newest + 1 when nothing is held yet).
    pub fn oldest_seq(&self) -> u64 {
        self.lock().buffer.oldest()
    }

    /// The run was resumed in this process after its old one stopped (crash recovery): its
    /// first seq here is `first`; an observer that had seen up to `durable` or later is served
    /// from there (see [`FrameBuffer::resumed_after`]).
    pub fn resumed_after(&self, durable: u64, first: u64) {
        self.lock().buffer.resumed_after(durable, first);
    }

    /// Bytes of frames held.
    pub fn buffered_bytes(&self) -> usize {
        self.lock().buffer.bytes()
    }

    /// Observers attached now.
    pub fn observers(&self) -> usize {
        self.lock().observers
    }

    /// Adds one model call's usage (the provider's usage object: OpenAI's `prompt_tokens` /
    /// `completion_tokens` or Anthropic's `input_tokens` / `output_tokens`).
    pub fn add_usage(&self, usage: &serde_json::Value) {
        let count =
            |keys: [&str; 2]| keys.iter().find_map(|k| usage.get(*k).and_then(serde_json::Value::as_u64)).unwrap_or(0);
        let ordering = std::sync::atomic::Ordering::Relaxed;
        self.usage[0].fetch_add(count(["prompt_tokens", "input_tokens"]), ordering);
        self.usage[1].fetch_add(count(["completion_tokens", "output_tokens"]), ordering);
    }

    /// `(input, output)` tokens of the run so far.
    pub fn usage(&self) -> (u64, u64) {
        let ordering = std::sync::atomic::Ordering::Relaxed;
        (self.usage[0].load(ordering), self.usage[1].load(ordering))
    }

    /// Appends the frames of `events` (one delta's worth, written out as one chunk to observers
    /// that keep up) — and the events themselves when the run keeps them — and wakes the
    /// observers. A terminal event ends the run.
    pub fn publish(&self, events: impl IntoIterator<Item = Event>) {
        let mut state = self.lock();
        let mut published = false;
        for event in events {
            let frame = Bytes::from(sse::event_frame(&event));
            match event.payload {
                EventPayload::RunComplete(_) => state.status = RunStatus::Completed,
                EventPayload::RunError(_) => state.status = RunStatus::Failed,
                EventPayload::RunCancel(_) => state.status = RunStatus::Cancelled,
                _ => {}
            }
            state.buffer.push(event, frame);
            published = true;
        }
        drop(state);
        if published {
            self.wake.send_modify(|n| *n += 1);
        }
    }

    /// Marks the run as waiting durably for a person (or not any more) and wakes its readers.
    pub fn set_waiting(&self, waiting: bool) {
        let ordering = std::sync::atomic::Ordering::Relaxed;
        if self.waits_durably.swap(waiting, ordering) != waiting {
            self.wake.send_modify(|n| *n += 1);
        }
    }

    /// Whether the run waits durably for a person now.
    pub fn is_waiting(&self) -> bool {
        self.waits_durably.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A receiver woken at every publish and state change (for readers that are not observers:
    /// they neither count for the disconnect policy nor for the observer cap).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.wake.subscribe()
    }

    /// The frames after `cursor` one by one, for the cluster mirror (see [`Mirrored`]).
    pub fn frames_after(&self, cursor: u64) -> Mirrored {
        let state = self.lock();
        let (frames, skipped) = state.buffer.frames_after(cursor, 256);
        Mirrored {
            frames,
            skipped,
            latest: state.buffer.latest(),
            status: state.status,
            waiting: self.is_waiting(),
            progress: state.progress,
            left: self.left.load(std::sync::atomic::Ordering::Acquire),
        }
    }

    /// Notes where the run stands for crash recovery (clustered mode); `wake`: its readers (the
    /// mirror) are told, for a change no publish follows.
    pub fn note_progress(&self, progress: agw_memory::LedgerEntry, wake: bool) {
        self.lock().progress = Some(progress);
        if wake {
            self.wake.send_modify(|n| *n += 1);
        }
    }

    /// The run stops without its terminal event, to be resumed by the next start or another
    /// replica (crash recovery). Called before its task ends.
    pub fn leave(&self) {
        self.left.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Ends a run that could not publish its terminal event (its task failed); observers end.
    pub fn finish_abruptly(&self) {
        let mut state = self.lock();
        if state.status == RunStatus::Running {
            state.status = RunStatus::Failed;
        }
        drop(state);
        self.wake.send_modify(|n| *n += 1);
    }

    /// Asks the run task to stop; the first reason wins. Returns false when it had finished.
    pub fn cancel(&self, reason: CancelReason) -> bool {
        if self.status().is_finished() {
            return false;
        }
        self.cancel.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(reason);
                true
            } else {
                false
            }
        });
        true
    }

    /// Resolves with the reason once [`Self::cancel`] was called.
    pub async fn cancelled(&self) -> CancelReason {
        let mut rx = self.cancel.subscribe();
        let reason = match rx.wait_for(Option::is_some).await {
            Ok(reason) => *reason,
            // The sender lives in `self`: unreachable while `self` is borrowed.
            Err(_) => None,
        };
        match reason {
            Some(reason) => reason,
            None => std::future::pending().await,
        }
    }

    /// Waits up to `timeout` for the run to end; returns its status then.
    pub async fn wait_finished(&self, timeout: Duration) -> RunStatus {
        let mut rx = self.wake.subscribe();
        let _ = tokio::time::timeout(timeout, async {
            loop {
                if self.status().is_finished() {
                    return;
                }
                if rx.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
        self.status()
    }

    /// Registers an observer that has seen every event up to `after` (0: none).
    pub fn observe(self: &Arc<Self>, after: u64) -> Result<Observer, AttachError> {
        let mut state = self.lock();
        if !state.buffer.can_serve(after) {
            return Err(AttachError::Expired { oldest: state.buffer.oldest(), latest: state.buffer.latest() });
        }
        if state.observers >= self.max_observers {
            return Err(AttachError::TooManyObservers(self.max_observers));
        }
        state.observers += 1;
        self.watchers.send_replace(state.observers);
        // Subscribed under the lock: a publish after this point bumps the version it sees.
        let rx = self.wake.subscribe();
        Ok(Observer { handle: Arc::clone(self), cursor: after, rx, done: false })
    }

    fn observer_left(&self) {
        let mut state = self.lock();
        state.observers -= 1;
        self.watchers.send_replace(state.observers);
        if state.observers == 0 && !state.status.is_finished() {
            tracing::info!(runId = %self.run_id, policy = ?self.policy, "last observer left");
        }
    }

    /// Resolves when the run should be cancelled for lack of observers, per its disconnect
    /// policy: at once when the last one leaves (`Cancel`), after the grace period unless someone
    /// attached meanwhile (`Grace`), never (`Continue`). Awaited by the run task itself, so a
    /// detached run costs no timer task of its own.
    pub async fn abandoned(&self) {
        let grace = match self.policy {
            DisconnectPolicy::Continue => return std::future::pending().await,
            DisconnectPolicy::Cancel => Duration::ZERO,
            DisconnectPolicy::Grace(grace) => grace,
        };
        let mut rx = self.watchers.subscribe();
        loop {
            let gone = async { rx.wait_for(|n| *n == 0).await.is_ok() };
            if !gone.await {
                return std::future::pending().await;
            }
            if grace.is_zero() {
                return;
            }
            let back = async { rx.wait_for(|n| *n > 0).await.is_ok() };
            match tokio::time::timeout(grace, back).await {
                // Nobody came back within the grace period.
                Err(_) => return,
                Ok(true) => {}
                Ok(false) => return std::future::pending().await,
            }
        }
    }
}

/// One reader of a run's events: the response of the query that started it, or an attach.
/// Dropping it (the client went away) applies the run's disconnect policy when it was the last.
pub struct Observer {
    handle: Arc<RunHandle>,
    cursor: u64,
    rx: watch::Receiver<u64>,
    done: bool,
}

impl Drop for Observer {
    fn drop(&mut self) {
        self.handle.observer_left();
    }
}

/// The final frame of an observer that fell so far behind that the buffer dropped events it had
/// not read yet: it may re-attach (the 409 then names the oldest seq still held) or read the
/// chat's history.
pub fn lagged_frame(last_seq: u64, oldest: u64, latest: u64) -> Bytes {
    Bytes::from(format!(
        "event:lagged\ndata:{{\"code\":\"observer_lagged\",\"message\":\"this stream fell behind the run's event buffer and was closed; re-attach or read the chat\",\"lastSeq\":{last_seq},\"oldestSeq\":{oldest},\"latestSeq\":{latest}}}\n\n"
    ))
}

impl Observer {
    /// The next chunk of frames; `None` after the terminal event (or after the lag frame).
    pub async fn next_chunk(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        loop {
            self.rx.borrow_and_update();
            let (read, finished) = {
                let state = self.handle.lock();
                (state.buffer.read_after(self.cursor), state.status.is_finished())
            };
            match read {
                Read::Frames { bytes, last } => {
                    self.cursor = last;
                    return Some(bytes);
                }
                Read::Expired { oldest, latest } => {
                    self.done = true;
                    tracing::info!(runId = %self.handle.run_id, last_seq = self.cursor, oldest, "observer lagged; closing its stream");
                    return Some(lagged_frame(self.cursor, oldest, latest));
                }
                Read::Nothing if finished => {
                    self.done = true;
                    return None;
                }
                Read::Nothing => {}
            }
            if self.rx.changed().await.is_err() {
                return None;
            }
        }
    }

    /// The next events, typed: kept by the run ([`RunSpec::keep_events`]), or decoded from its
    /// frames when it keeps none (a run started by the native endpoint, attached to by another
    /// protocol). `None` after the terminal event, or when the observer fell behind the buffer
    /// (logged). Cancel-safe: nothing is lost when the future is dropped between reads.
    pub async fn next_events(&mut self) -> Option<Vec<Arc<Event>>> {
        loop {
            if self.done {
                return None;
            }
            self.rx.borrow_and_update();
            let (read, finished) = {
                let state = self.handle.lock();
                (state.buffer.events_after(self.cursor), state.status.is_finished())
            };
            match read {
                ReadEvents::Events { events, last } => {
                    self.cursor = last;
                    return Some(events);
                }
                ReadEvents::Frames { bytes, last } => {
                    self.cursor = last;
                    // Whole frames: each chunk decodes on its own.
                    let mut frames = Vec::new();
                    agw_protocol::SseDecoder::new().feed(&bytes, &mut frames);
                    let events: Vec<Arc<Event>> = frames
                        .iter()
                        .filter(|f| f.event == "message")
                        .filter_map(|f| f.parse_event().ok())
                        .map(Arc::new)
                        .collect();
                    if !events.is_empty() {
                        return Some(events);
                    }
                    continue;
                }
                ReadEvents::Expired { oldest, .. } => {
                    self.done = true;
                    tracing::info!(runId = %self.handle.run_id, last_seq = self.cursor, oldest, "observer lagged; closing its stream");
                    return None;
                }
                ReadEvents::Nothing if finished => {
                    self.done = true;
                    return None;
                }
                ReadEvents::Nothing => {}
            }
            if self.rx.changed().await.is_err() {
                return None;
            }
        }
    }

    /// The seq of the last event handed out.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }
}
