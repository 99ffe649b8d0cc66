//! Where a stream that continues a run (after the client answered a client-side call or an
//! approval in the AI SDK's or AG-UI's way) picks the run up (issue 34).
//!
//! The previous stream ended at the event that made the run wait for the client (a frontend
//! call's end, an approval's ask). While the client decided, the run's other lanes (sub-agents
//! running beside the one that waits) went on: following from the run's latest event at the
//! answer would lose those. So the continuation reads every held event: those up to that event
//! prime the protocol mapper (what the client already has), the rest are streamed.

use std::sync::Arc;

use agw_protocol::{Event, EventPayload};
use agw_runs::Observer;

/// Splits the run's held events at the end of the previous stream.
pub(crate) struct Continuation {
    /// The run's latest seq when the client answered: everything the previous stream can have
    /// shown is at or before it.
    latest: u64,
    /// The calls the client answered.
    calls: Vec<String>,
    held: Vec<Arc<Event>>,
    split: bool,
}

/// What a batch of events is, for the stream.
pub(crate) enum Fed {
    /// Still reading the held events.
    Collecting,
    /// The split: `primed` the previous stream showed (map them silently, suspend, resume),
    /// `rest` is new to the client.
    Split { primed: Vec<Arc<Event>>, rest: Vec<Arc<Event>> },
    /// After the split: stream as usual.
    Live(Vec<Arc<Event>>),
}

/// What a façade's stream handles next ([`next_batch`]).
pub(crate) enum Next {
    /// Events to map and send.
    Live(Vec<Arc<Event>>),
    /// A continuation's split (see [`Fed::Split`]).
    Split { primed: Vec<Arc<Event>>, rest: Vec<Arc<Event>> },
}

/// The next batch a façade's stream handles: the observer's, or — while `resume` collects the
/// held events — the split once it is known. `None`: the run's events ended.
pub(crate) async fn next_batch(events: &mut Observer, mut resume: Option<&mut Continuation>) -> Option<Next> {
    loop {
        let batch = events.next_events().await?;
        let Some(resume) = resume.as_deref_mut() else { return Some(Next::Live(batch)) };
        match resume.feed(batch) {
            Fed::Collecting => continue,
            Fed::Live(batch) => return Some(Next::Live(batch)),
            Fed::Split { primed, rest } => return Some(Next::Split { primed, rest }),
        }
    }
}

impl Continuation {
    /// A continuation of a run whose latest seq was `latest` when the client answered `calls`;
    /// observe it from its oldest held event.
    pub(crate) fn new(latest: u64, calls: Vec<String>) -> Self {
        Self { latest, calls, held: Vec::new(), split: false }
    }

    /// The calls the client answered.
    pub(crate) fn calls(&self) -> &[String] {
        &self.calls
    }

    /// Whether `event` made the run wait for one of the answered calls.
    fn waited_here(&self, event: &Event) -> bool {
        match &event.payload {
            EventPayload::ToolEnd(e) => self.calls.contains(&e.tool_id),
            EventPayload::ActionEnd(e) => self.calls.contains(&e.action_id),
            EventPayload::AwaitingAsk(e) => {
                self.calls.contains(&e.awaiting_id) || e.approvals.iter().any(|a| self.calls.contains(&a.id))
            }
            _ => false,
        }
    }

    /// Takes the next batch the observer read (`None`: nothing held at all yet).
    pub(crate) fn feed(&mut self, batch: Vec<Arc<Event>>) -> Fed {
        if self.split {
            return Fed::Live(batch);
        }
        self.held.extend(batch);
        if self.held.last().is_some_and(|e| e.seq < self.latest) {
            return Fed::Collecting;
        }
        self.split = true;
        let mut held = std::mem::take(&mut self.held);
        // The last event that made the run wait for an answered call; without one (the buffer
        // no longer holds it), the run's latest event at the answer, as before.
        let cut =
            held.iter().rev().find(|e| e.seq <= self.latest && self.waited_here(e)).map_or(self.latest, |e| e.seq);
        let at = held.partition_point(|e| e.seq <= cut);
        let rest = held.split_off(at);
        Fed::Split { primed: held, rest }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agw_protocol::event::{ContentDelta, ToolEnd};

    fn ev(seq: u64, payload: impl Into<EventPayload>) -> Arc<Event> {
        Arc::new(Event::new(seq, 0, payload))
    }

    fn delta(seq: u64) -> Arc<Event> {
        ev(seq, ContentDelta { content_id: "c".into(), delta: "x".into() })
    }

    #[test]
    fn events_after_the_wait_are_streamed_even_when_they_came_before_the_answer() {
        let mut c = Continuation::new(5, vec!["f1".into()]);
        assert!(matches!(c.feed(vec![delta(1), ev(2, ToolEnd { tool_id: "f1".into() })]), Fed::Collecting));
        let Fed::Split { primed, rest } = c.feed(vec![delta(3), delta(4), delta(5), delta(6)]) else {
            panic!("split at the latest seq")
        };
        let seqs = |v: &[Arc<Event>]| v.iter().map(|e| e.seq).collect::<Vec<_>>();
        assert_eq!((seqs(&primed), seqs(&rest)), (vec![1, 2], vec![3, 4, 5, 6]));
        assert!(matches!(c.feed(vec![delta(7)]), Fed::Live(v) if v.len() == 1));
    }

    #[test]
    fn without_the_waiting_event_it_follows_from_the_latest() {
        let mut c = Continuation::new(2, vec!["gone".into()]);
        let Fed::Split { primed, rest } = c.feed(vec![delta(1), delta(2), delta(3)]) else { panic!() };
        assert_eq!((primed.len(), rest.len()), (2, 1));
    }
}
