//! Steering a running run (`POST /api/ap/steer`, successor protocol): the queue the HTTP layer
//! pushes user messages into and the run takes them from.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard, PoisonError};

use agw_protocol::AgentDelta;

/// How many untaken steers a [`SteerQueue::default`] holds before refusing more.
pub const DEFAULT_STEER_CAPACITY: usize = 32;

/// One steered user message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steer {
    /// The steer's id (`steerId`): the client's, or one the endpoint generated.
    pub steer_id: String,
    /// The user message, sent to the model verbatim. The endpoint should refuse blank ones:
    /// providers reject empty user messages and the history window drops them.
    pub message: String,
    /// The steer request's `requestId`, echoed in `request.steer` when present.
    pub request_id: Option<String>,
}

impl Steer {
    /// The delta a run emits when it takes this steer (`request.steer`).
    pub fn to_delta(&self) -> AgentDelta {
        AgentDelta::Steer {
            steer_id: self.steer_id.clone(),
            message: self.message.clone(),
            request_id: self.request_id.clone(),
        }
    }
}

/// Why [`SteerQueue::push`] refused a steer; the steer comes back unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SteerRefused {
    /// The run ended ([`SteerQueue::close`] was called): steering a finished run is a conflict.
    #[error("the run has finished and takes no more steers")]
    Closed(Steer),
    /// The run has not taken the steers it already holds.
    #[error("the run already holds {capacity} steers it has not taken yet")]
    Full {
        /// The refused steer.
        steer: Steer,
        /// The queue's capacity.
        capacity: usize,
    },
}

impl SteerRefused {
    /// The steer that was refused.
    pub fn into_steer(self) -> Steer {
        match self {
            Self::Closed(steer) | Self::Full { steer, .. } => steer,
        }
    }
}

/// The steers pushed into one run and not taken yet, shared (`Arc`) between the HTTP layer and
/// the run. Thread-safe; every call holds a lock only for one queue operation.
///
/// # Semantics
///
/// What a run does with the queue in [`RunContext::steers`](super::RunContext::steers):
///
/// * **When** — a run takes every waiting steer at the start of each model turn, in every mode
///   (ONESHOT, REACT, PLAN_EXECUTE: plan, task rounds, summary), after the turn's budget check
///   and before the request is sent. Never during a model turn or a tool batch: a steer pushed
///   while a tool runs waits for the tool's result and is taken by the next turn.
/// * **What the client sees** — per steer, in push order: the open text block ends, then
///   `request.steer {requestId?, chatId, runId, steerId, message, role:"user", taskId?}`; the
///   turn's text opens a new block.
/// * **What the model sees** — the message as a user message after everything so far, in the
///   conversation of the mode (so every later turn of the run keeps it; in PLAN_EXECUTE a steer
///   taken during the plan stage also goes into the list the tasks and the summary see).
/// * **History** — a user message with `_steerId` at its position in the step; the next run's
///   model window sends it back as a user message in order.
/// * **A final answer with steers waiting** — REACT does not end: the answer is kept in the
///   conversation and the next step takes the steers. When that answer came in the last step
///   (`maxSteps`), the run's forced final turn (no tools, `react-step-{maxSteps+1}`) takes them
///   and its answer ends the run. ONESHOT and PLAN_EXECUTE end after their answer / summary.
/// * **The end of a run** — the run never closes the queue itself. Whoever drives the run calls
///   [`close`](Self::close) once `execute` returned: later pushes are refused
///   ([`SteerRefused::Closed`], the endpoint's 409), and the steers no turn took (pushed during
///   the last turn, after a ONESHOT/summary answer, or when the run failed) come back so they
///   can be logged or reported. A push that succeeded is therefore either taken by the run
///   (exactly once) or returned by `close`: a steer leaves the queue only once its
///   `request.steer` was delivered, so one whose delivery was refused or cancelled (the run is
///   ending) is still there for `close`.
/// * **Bounded** — a queue holds at most its capacity of untaken steers
///   ([`DEFAULT_STEER_CAPACITY`]); more are refused ([`SteerRefused::Full`]) until the run takes
///   them. The message length is bounded by the request body limit of the endpoint.
#[derive(Debug)]
pub struct SteerQueue {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    pending: VecDeque<Steer>,
    closed: bool,
}

impl Default for SteerQueue {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_STEER_CAPACITY)
    }
}

impl SteerQueue {
    /// A queue that holds at most `capacity` (≥ 1) untaken steers.
    pub fn with_capacity(capacity: usize) -> Self {
        Self { capacity: capacity.max(1), inner: Mutex::new(Inner::default()) }
    }

    /// Queues a steer for the run's next model turn. Refused once the queue is closed, or while
    /// it holds `capacity` untaken steers.
    pub fn push(&self, steer: Steer) -> Result<(), SteerRefused> {
        let mut inner = self.lock();
        if inner.closed {
            return Err(SteerRefused::Closed(steer));
        }
        if inner.pending.len() >= self.capacity {
            return Err(SteerRefused::Full { steer, capacity: self.capacity });
        }
        inner.pending.push_back(steer);
        Ok(())
    }

    /// Removes and returns every waiting steer, oldest first — for an embedder that runs its own
    /// turns. agw's model turns take them one by one and remove each only once its
    /// `request.steer` was delivered.
    pub fn take_all(&self) -> Vec<Steer> {
        self.lock().pending.drain(..).collect()
    }

    /// Whether steers are waiting to be taken.
    pub fn has_pending(&self) -> bool {
        !self.lock().pending.is_empty()
    }

    /// Refuses every later push and returns the steers never taken, oldest first. Call it once
    /// the run has returned; a second call returns nothing.
    pub fn close(&self) -> Vec<Steer> {
        let mut inner = self.lock();
        inner.closed = true;
        inner.pending.drain(..).collect()
    }

    /// Whether [`Self::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// How many steers are waiting.
    pub(crate) fn pending(&self) -> usize {
        self.lock().pending.len()
    }

    /// The oldest waiting steer, left in the queue until [`Self::confirm`]: a turn cancelled or
    /// refused while delivering it leaves it for [`Self::close`].
    pub(crate) fn peek(&self) -> Option<Steer> {
        self.lock().pending.front().cloned()
    }

    /// Removes the oldest waiting steer once it was delivered (only if it is still `steer_id`).
    pub(crate) fn confirm(&self, steer_id: &str) {
        let mut inner = self.lock();
        if inner.pending.front().is_some_and(|s| s.steer_id == steer_id) {
            inner.pending.pop_front();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The queue's state is valid after any panic (each operation is one VecDeque call).
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steer(id: &str) -> Steer {
        Steer { steer_id: id.into(), message: format!("m-{id}"), request_id: None }
    }

    #[test]
    fn take_all_returns_pushes_in_order_once() {
        let queue = SteerQueue::default();
        queue.push(steer("a")).expect("open");
        queue.push(steer("b")).expect("open");
        assert!(queue.has_pending());
        assert_eq!(queue.take_all(), [steer("a"), steer("b")]);
        assert!(queue.take_all().is_empty() && !queue.has_pending());
    }

    #[test]
    fn close_refuses_later_pushes_and_returns_what_was_never_taken() {
        let queue = SteerQueue::default();
        queue.push(steer("a")).expect("open");
        queue.take_all();
        queue.push(steer("b")).expect("open");
        queue.push(steer("c")).expect("open");
        assert!(!queue.is_closed());
        assert_eq!(queue.close(), [steer("b"), steer("c")]);
        assert!(queue.is_closed());
        assert_eq!(queue.push(steer("d")), Err(SteerRefused::Closed(steer("d"))));
        assert!(queue.take_all().is_empty());
        assert!(queue.close().is_empty(), "a second close returns nothing");
    }

    #[test]
    fn a_full_queue_refuses_until_the_run_takes() {
        let queue = SteerQueue::with_capacity(2);
        queue.push(steer("a")).expect("room");
        queue.push(steer("b")).expect("room");
        let refused = queue.push(steer("c")).expect_err("full");
        assert_eq!(refused.to_string(), "the run already holds 2 steers it has not taken yet");
        assert_eq!(refused.into_steer(), steer("c"));
        queue.take_all();
        queue.push(steer("c")).expect("room again");
    }

    #[test]
    fn peek_leaves_the_steer_until_confirmed() {
        let queue = SteerQueue::default();
        assert_eq!(queue.peek(), None);
        queue.push(steer("a")).expect("open");
        queue.push(steer("b")).expect("open");
        assert_eq!((queue.peek(), queue.pending()), (Some(steer("a")), 2));
        queue.confirm("b");
        assert_eq!(queue.pending(), 2, "only the front steer is confirmed");
        queue.confirm("a");
        assert_eq!(queue.close(), [steer("b")]);
        queue.confirm("b");
    }

    #[test]
    fn shared_between_threads() {
        let queue = std::sync::Arc::new(SteerQueue::with_capacity(1000));
        let pushers: Vec<_> = (0..4)
            .map(|t| {
                let queue = queue.clone();
                std::thread::spawn(move || {
                    for i in 0..100 {
                        queue.push(steer(&format!("{t}-{i}"))).expect("room");
                    }
                })
            })
            .collect();
        let mut taken = Vec::new();
        for pusher in pushers {
            pusher.join().expect("pusher");
            taken.extend(queue.take_all());
        }
        taken.extend(queue.close());
        assert_eq!(taken.len(), 400);
        let per_thread: Vec<Vec<&str>> = (0..4)
            .map(|t| {
                let prefix = format!("{t}-");
                taken.iter().filter(|s| s.steer_id.starts_with(&prefix)).map(|s| s.steer_id.as_str()).collect()
            })
            .collect();
        for (t, ids) in per_thread.iter().enumerate() {
            let expected: Vec<String> = (0..100).map(|i| format!("{t}-{i}")).collect();
            assert_eq!(ids, &expected, "each pusher's steers keep their order");
        }
    }
}
