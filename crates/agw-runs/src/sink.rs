//! Where a run's deltas go: assembler + chat-memory recorder + publishing into the run's handle,
//! which its observers (the query's response, attaches, mirrors) read.

use std::sync::Arc;

use agw_memory::{ChatStore, LedgerEntry, LedgerSlot, Recorder, SeqLedger};

use crate::RunHandle;
use crate::webhook::RunTrigger;
use agw_modes::runtime::{BatchPoint, DeltaSink, EmitError, TaskPoint, WaitPoint};
use agw_protocol::event::{ChatStart, RequestQuery};
use agw_protocol::history::{
    AwaitingLine, BatchCheckpoint, HistoryLine, RoundCheckpoint, RunMark, TaskBatch, TaskCheckpoint,
};
use agw_protocol::{AgentDelta, Assembler, ErrorCode, Event, RunErrorInfo};

/// Where a run's history goes.
pub struct Persistence {
    /// The chat store the steps are appended to.
    pub store: Arc<ChatStore>,
    /// The chat (canonical id) the run belongs to.
    pub chat_id: String,
    /// Turns the run's events into history lines at stage boundaries.
    pub recorder: Recorder,
}

/// Turns a run's deltas into events and publishes each batch (the events one delta produced) to
/// the run's observers at once; flushed steps are appended to the chat's history.
///
/// Publishing never waits for an observer: a slow client falls behind in the run's buffer (and
/// is dropped once the buffer lost what it had not read), it does not slow the run.
pub struct RunSink {
    assembler: Assembler,
    handle: Arc<RunHandle>,
    events: Vec<Event>,
    persistence: Option<Persistence>,
    webhook: Option<RunTrigger>,
    /// The run's wait is recorded (an `awaiting` line and the chat store's mark): the mark goes
    /// when the run ends.
    marked: bool,
    /// The run waits for a person right now (between [`DeltaSink::waiting`] and
    /// [`DeltaSink::wait_over`]).
    waiting: bool,
    /// The agent running the conversation now (it changes with every `agent.handoff`).
    agent: AgentTrail,
    /// The run can be resumed after its process stops (crash recovery); `None`: recovery is off,
    /// or the run is not recorded.
    recovery: Option<Box<Recovering>>,
}

/// What a run keeps so that a restarted server (or, clustered, another replica) can resume it
/// (`docs/run-lifecycle.md`, crash recovery): its run mark in the chat store, rewritten at
/// checkpoints, and where its stream stands, noted at every publish — in this process's seq
/// ledger on a single node, on its handle for the cluster mirror to copy to Redis otherwise.
pub(crate) struct Recovering {
    mark: RunMark,
    /// The mark is written: the run must clear it when it ends.
    written: bool,
    /// The first write, not waited for (the model call need not wait for it): whether it
    /// succeeded, once it is done.
    pending: Option<tokio::task::JoinHandle<bool>>,
    slot: Option<LedgerSlot>,
    entry: LedgerEntry,
}

impl Recovering {
    /// A new run: its mark is written at bootstrap. `node`: this replica's id (clustered).
    pub(crate) fn new(
        ledger: Option<&std::sync::Arc<SeqLedger>>,
        run_id: &str,
        chat_id: &str,
        node: Option<&str>,
    ) -> Box<Self> {
        let mark = RunMark { node: node.map(str::to_owned), ..RunMark::new(chat_id, run_id, now_ms()) };
        Self::resumed(ledger, mark, LedgerEntry::default(), false)
    }

    /// A run resumed from `mark` (already rewritten with its new attempt and node), numbering
    /// on after `entry`.
    pub(crate) fn resumed(
        ledger: Option<&std::sync::Arc<SeqLedger>>,
        mark: RunMark,
        entry: LedgerEntry,
        written: bool,
    ) -> Box<Self> {
        let slot = ledger.and_then(|l| l.slot(&mark.run_id, entry));
        Box::new(Recovering { mark, written, pending: None, slot, entry })
    }

    fn note(&mut self, assembler: &Assembler, handle: &RunHandle, changed: bool) {
        self.entry.last_seq = assembler.next_seq().saturating_sub(1);
        self.entry.shown = assembler.block_counts();
        if let Some(slot) = &self.slot {
            slot.note(&self.entry);
        } else if self.mark.node.is_some() {
            handle.note_progress(self.entry, changed);
        }
    }

    /// Everything streamed so far is on record (a step line, the mark).
    fn durable(&mut self, assembler: &Assembler, handle: &RunHandle) {
        self.entry.durable_seq = assembler.next_seq().saturating_sub(1);
        self.entry.durable = assembler.block_counts();
        self.note(assembler, handle, true);
    }
}

/// Which agent a run ends with, for the chat's next queries (handoffs, docs/multi-agent.md).
#[derive(Debug, Default)]
struct AgentTrail {
    /// The agent running the conversation now; empty: not tracked.
    current: String,
    /// The run handed the conversation over at least once.
    handed_off: bool,
    /// The chat's index record names an agent already: it is updated even without a handoff.
    chat_tracks: bool,
}

impl RunSink {
    /// A sink with no webhook; `persistence` `None`: the run is not recorded (memory disabled).
    pub fn new(assembler: Assembler, handle: Arc<RunHandle>, persistence: Option<Persistence>) -> Self {
        Self {
            assembler,
            handle,
            events: Vec::with_capacity(4),
            persistence,
            webhook: None,
            marked: false,
            waiting: false,
            agent: AgentTrail::default(),
            recovery: None,
        }
    }

    /// Keeps the run resumable after a crash (a recorded run only).
    pub(crate) fn recoverable(mut self, recovery: Option<Box<Recovering>>) -> Self {
        self.recovery = recovery.filter(|_| self.persistence.is_some());
        self
    }

    /// `run.resume` first in a resumed run: what its client was shown after `durable` is
    /// superseded.
    pub(crate) async fn resumed(
        &mut self,
        attempt: u32,
        durable: &LedgerEntry,
        shown: agw_protocol::BlockCounts,
        task_ids: Vec<String>,
    ) {
        self.assembler.resume_run(attempt, durable.durable_seq + 1, durable.durable, shown, task_ids, &mut self.events);
        let _ = self.flush().await;
    }

    /// The run's mark is written: stopping the server now (or a crash) leaves it to be
    /// resumed by the next start.
    pub async fn resumable(&mut self) -> bool {
        self.settle_mark().await;
        self.recovery.as_ref().is_some_and(|r| r.written)
    }

    /// Waits for the mark's first write, if it is still under way.
    async fn settle_mark(&mut self) {
        let Some(recovery) = self.recovery.as_mut() else { return };
        if let Some(pending) = recovery.pending.take()
            && let Ok(true) = pending.await
        {
            recovery.written = true;
        }
    }

    /// The server stops while the run is in flight and it is resumable (or another replica
    /// took it over): nothing more is written, its ledger note stays for the next process, its
    /// mirror leaves it running.
    pub(crate) fn leave_for_recovery(&mut self) {
        self.handle.leave();
        if let Some(slot) = self.recovery.take().and_then(|r| r.slot) {
            slot.keep();
        }
    }

    /// Notes, when the run ends, which agent it ended with in the chat's index record if it
    /// handed over or the record names one already (`chat_tracks`).
    pub fn tracking_agent(mut self, agent_key: &str, chat_tracks: bool) -> Self {
        self.agent = AgentTrail { current: agent_key.to_owned(), handed_off: false, chat_tracks };
        self
    }

    /// The run goes on with the agent it had been handed over to (a run resumed after a crash):
    /// when it ends, the chat's index names that agent, as after a live handoff.
    pub(crate) fn continued_by(&mut self, agent_key: &str) {
        self.agent = AgentTrail { current: agent_key.to_owned(), handed_off: true, chat_tracks: true };
    }

    /// Fires the chat-event webhook at the run's first content delta.
    pub fn with_webhook(mut self, trigger: Option<RunTrigger>) -> Self {
        self.webhook = trigger;
        self
    }

    /// The run's usage and cost so far (on its terminal event once it ended).
    pub fn totals(&self) -> agw_protocol::event::RunTotals {
        self.assembler.totals()
    }

    /// `request.query`, optional `chat.start`, `run.start`.
    pub async fn bootstrap(&mut self, query: RequestQuery, chat_start: Option<ChatStart>) -> Result<(), EmitError> {
        self.assembler.bootstrap(query, chat_start, &mut self.events);
        if let Some(p) = self.persistence.as_mut() {
            p.recorder.observe_events(&self.events);
        }
        self.flush().await?;
        // Beside the mode's first model call, not before it: the run does not wait for it. A
        // crash within that write's few hundred µs loses the run, as before recovery.
        self.write_mark(false).await;
        Ok(())
    }

    /// `run.complete` — after the last step is persisted, so a client that saw `run.complete` can
    /// replay the whole run. If that write fails the run ends with `run.error` `internal` instead.
    pub async fn complete(&mut self, finish_reason: &str) -> Result<(), EmitError> {
        if let Some(p) = self.persistence.as_mut() {
            p.recorder.set_totals(self.assembler.totals());
            p.recorder.set_output(self.assembler.output().cloned());
        }
        match self.persist_final(&[]).await {
            Ok(()) => self.assembler.complete(finish_reason, &mut self.events),
            Err(message) => {
                self.assembler.fail(RunErrorInfo::new(ErrorCode::Internal, message, false), &mut self.events)
            }
        }
        self.flush().await
    }

    /// `run.error` (what the client saw before the failure stays in the history).
    pub async fn fail(&mut self, error: RunErrorInfo) -> Result<(), EmitError> {
        self.assembler.fail(error, &mut self.events);
        // The run already failed; a storage error on top is only logged.
        let events = std::mem::take(&mut self.events);
        let _ = self.persist_final(&events).await;
        self.events = events;
        self.flush().await
    }

    /// `run.cancel` after closing open blocks and answering every unanswered call with
    /// `{"executed":false,"reason":"cancelled"}`; all of it goes into the history.
    pub async fn cancel(&mut self) -> Result<(), EmitError> {
        self.assembler.cancel(&mut self.events);
        let events = std::mem::take(&mut self.events);
        if let Err(message) = self.persist_final(&events).await {
            tracing::error!(%message, "history of a cancelled run not fully written");
        }
        self.events = events;
        self.flush().await
    }

    /// Persists what was streamed of a run that ends without a terminal event.
    pub async fn abandon(&mut self) {
        let _ = self.persist_final(&[]).await;
    }

    /// The run waits for a person and its wait is recorded: stopping the server now leaves it
    /// to be continued after a restart (durable waiting), nothing more is written.
    pub fn waits_durably(&self) -> bool {
        self.waiting && self.marked
    }

    /// Continues a run whose wait was recorded by another process: the mark is its already.
    pub fn adopt_mark(&mut self) {
        self.marked = true;
    }

    fn stop_waiting(&mut self) {
        if std::mem::take(&mut self.waiting) {
            self.handle.set_waiting(false);
        }
    }

    /// Whether the run's final event has been emitted: nothing more may follow.
    pub fn is_finished(&self) -> bool {
        self.assembler.is_finished()
    }

    async fn flush(&mut self) -> Result<(), EmitError> {
        if self.events.is_empty() {
            return Ok(());
        }
        if let Some(trigger) = self.webhook.as_mut() {
            trigger.observe(&self.events);
        }
        metrics::counter!(crate::EVENTS_STREAMED).increment(self.events.len() as u64);
        // Noted before any observer can read the events: a resumed run never reuses a seq.
        if let Some(recovery) = self.recovery.as_mut() {
            recovery.note(&self.assembler, &self.handle, false);
        }
        self.handle.publish(self.events.drain(..));
        Ok(())
    }

    async fn persist_final(&mut self, events: &[Event]) -> Result<(), String> {
        let Some(p) = self.persistence.as_mut() else { return Ok(()) };
        let lines = p.recorder.finish(events);
        let written = write_lines(p.store.clone(), p.chat_id.clone(), lines, true).await;
        let trail = &self.agent;
        if !trail.current.is_empty() && (trail.handed_off || trail.chat_tracks) {
            let (store, chat_id) = (p.store.clone(), p.chat_id.clone());
            let (agent_key, handed_off) = (trail.current.clone(), trail.handed_off);
            let noted =
                tokio::task::spawn_blocking(move || store.note_last_agent(&chat_id, &agent_key, handed_off)).await;
            if let Ok(Err(e)) = noted {
                // The next query goes to the query's agent instead; the history has the handoff.
                tracing::warn!(error = %e, "chat index: the agent the run ended with was not noted");
            }
        }
        self.settle_mark().await;
        let Some(p) = self.persistence.as_mut() else { return written };
        if let Some(recovery) = self.recovery.take()
            && recovery.written
        {
            // After the final lines, like the waiting mark below.
            let (store, run_id) = (p.store.clone(), self.assembler.run_id().to_owned());
            let cleared = tokio::task::spawn_blocking(move || store.clear_running(&run_id)).await;
            if let Ok(Err(e)) = cleared {
                tracing::warn!(error = %e, "could not clear the run mark of a run that ended");
            }
        }
        if std::mem::take(&mut self.marked) {
            // After the final lines: a crash in between leaves a mark whose run no longer
            // waits (its last line is not `awaiting`), which a restart clears.
            let (store, run_id) = (p.store.clone(), self.assembler.run_id().to_owned());
            let cleared = tokio::task::spawn_blocking(move || store.clear_waiting(&run_id)).await;
            if let Ok(Err(e)) = cleared {
                tracing::warn!(error = %e, "could not clear the mark of a run that no longer waits");
            }
        }
        written
    }

    /// Writes the run mark as it stands (crash recovery); `wait`: returns once it is written (a
    /// checkpoint before a call with effects), else in the background. A failure is logged,
    /// not fatal: the run goes on, it just would not be resumed after a crash.
    async fn write_mark(&mut self, wait: bool) {
        self.settle_mark().await;
        let (Some(recovery), Some(p)) = (self.recovery.as_mut(), self.persistence.as_ref()) else { return };
        if recovery.mark.query.chat_id.is_none() {
            let (query, system) = p.recorder.query_and_system();
            recovery.mark.query = query.clone();
            recovery.mark.system = system.cloned();
        }
        recovery.mark.updated_at = now_ms();
        recovery.mark.next_revision(now_us());
        recovery.mark.last_seq = self.assembler.next_seq().saturating_sub(1);
        let (store, mark) = (p.store.clone(), recovery.mark.clone());
        let write = tokio::task::spawn_blocking(move || match store.mark_running(&mark) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = %e, "the run mark is not written; the run would not be resumed after a crash");
                false
            }
        });
        // What it records is covered from now on (if the write fails, nothing finds the run).
        recovery.durable(&self.assembler, &self.handle);
        if wait {
            recovery.written |= write.await.unwrap_or(false);
        } else {
            recovery.pending = Some(write);
        }
    }

    /// Records the wait: the step so far and where the run stands as an `awaiting` line, and
    /// the store's mark of the run. A failure is logged, not fatal: the wait still works in
    /// this process, it just would not survive a restart.
    async fn record_wait(&mut self, wait: &WaitPoint) {
        let Some(p) = self.persistence.as_mut() else { return };
        let step = p.recorder.checkpoint();
        let (query, system) = p.recorder.query_and_system();
        let now = now_ms();
        let line = AwaitingLine {
            chat_id: p.chat_id.clone(),
            run_id: self.assembler.run_id().to_owned(),
            updated_at: now,
            awaiting_id: wait.ask.awaiting_id.clone(),
            last_seq: self.assembler.next_seq().saturating_sub(1),
            timeout_at: now.saturating_add(i64::try_from(wait.timeout.as_millis()).unwrap_or(i64::MAX)),
            resume_at: wait.resume_at.clone(),
            calls: wait.calls.clone(),
            results: wait.results.clone(),
            ask: wait.ask.clone(),
            continued: wait.continued,
            query: query.clone(),
            system: system.cloned(),
            steps_written: p.recorder.steps_written(),
            step,
        };
        let (store, chat_id, run_id) = (p.store.clone(), p.chat_id.clone(), line.run_id.clone());
        let written = tokio::task::spawn_blocking(move || {
            store.append(&chat_id, &[HistoryLine::Awaiting(Box::new(line))])?;
            store.mark_waiting(&run_id, &chat_id)
        })
        .await;
        match written {
            Ok(Ok(())) => self.marked = true,
            Ok(Err(e)) => tracing::warn!(error = %e, "the wait is not recorded; it will not survive a restart"),
            Err(e) => tracing::warn!(error = %e, "the wait is not recorded; it will not survive a restart"),
        }
    }
}

/// Appends on a blocking thread: file I/O must not stall the runtime's workers.
async fn write_lines(
    store: Arc<ChatStore>,
    chat_id: String,
    lines: Vec<HistoryLine>,
    last: bool,
) -> Result<(), String> {
    if lines.is_empty() && !last {
        return Ok(());
    }
    let result = tokio::task::spawn_blocking(move || {
        if last { store.append_final(&chat_id, &lines) } else { store.append(&chat_id, &lines) }
    })
    .await;
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "chat history write failed");
            Err(format!("chat history write failed: {e}"))
        }
        Err(e) => Err(format!("chat history writer stopped: {e}")),
    }
}

/// Wall-clock epoch µs (run mark revisions).
pub(crate) fn now_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// Wall-clock epoch ms (history timestamps, wait deadlines).
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl RunSink {
    /// A sub-agent with checkpoints began a stage: its checkpoint moves there (its last batch
    /// is over), as a run's own step line would be written.
    async fn child_stage_began(&mut self, task_id: &str) {
        let (Some(recovery), Some(p)) = (self.recovery.as_mut(), self.persistence.as_mut()) else { return };
        let Some(entry) = recovery
            .mark
            .round
            .as_mut()
            .filter(|r| r.call_id.is_some())
            .and_then(|r| r.tasks.iter_mut().find(|t| t.task_id == task_id && t.ended.is_none()))
        else {
            return;
        };
        entry.step = p.recorder.task_checkpoint(task_id).unwrap_or_default();
        entry.batch = None;
        self.write_mark(true).await;
    }
}

impl DeltaSink for RunSink {
    async fn waiting(&mut self, wait: &WaitPoint) -> Result<(), EmitError> {
        self.record_wait(wait).await;
        self.waiting = true;
        if self.marked {
            self.handle.set_waiting(true);
        }
        Ok(())
    }

    fn wait_over(&mut self) {
        self.stop_waiting();
    }

    fn checkpoints(&self) -> bool {
        self.recovery.is_some()
    }

    async fn checkpoint(&mut self, point: &BatchPoint) {
        let (Some(recovery), Some(p)) = (self.recovery.as_mut(), self.persistence.as_mut()) else { return };
        recovery.mark.batch = Some(BatchCheckpoint {
            resume_at: point.resume_at.clone(),
            steps_written: p.recorder.steps_written(),
            step: p.recorder.checkpoint(),
            calls: point.calls.clone(),
            results: point.results.clone(),
            running: point.running.clone(),
            done: point.done,
        });
        self.write_mark(true).await;
    }

    async fn task_checkpoint(&mut self, point: TaskPoint) {
        let (Some(recovery), Some(p)) = (self.recovery.as_mut(), self.persistence.as_mut()) else { return };
        let task_id = match &point {
            TaskPoint::Round { tasks, call } => {
                let tasks =
                    tasks.iter().map(|id| TaskCheckpoint { task_id: id.clone(), ..Default::default() }).collect();
                let steps_written = p.recorder.steps_written();
                recovery.mark.round = Some(RoundCheckpoint { steps_written, call_id: call.clone(), tasks });
                return self.write_mark(true).await;
            }
            TaskPoint::Batch { task_id, .. } | TaskPoint::Ended { task_id, .. } => task_id.clone(),
        };
        let Some(entry) = recovery.mark.round.as_mut().and_then(|r| r.tasks.iter_mut().find(|t| t.task_id == task_id))
        else {
            return;
        };
        match point {
            TaskPoint::Batch { point, .. } => {
                entry.step = p.recorder.task_checkpoint(&task_id).unwrap_or_default();
                entry.task = point.forked_plan.and_then(|plan| plan.into_iter().find(|t| t.task_id == task_id));
                let BatchPoint { resume_at, calls, results, running, done, .. } = point;
                entry.batch = Some(TaskBatch { resume_at, calls, results, running, done });
            }
            TaskPoint::Ended { task, .. } => {
                entry.ended = p.recorder.ended_task(&task_id).map(Box::new);
                entry.task = task;
                entry.step = Default::default();
                entry.batch = None;
            }
            TaskPoint::Round { .. } => {}
        }
        self.write_mark(true).await;
    }

    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        self.stop_waiting();
        if let AgentDelta::Handoff { to_agent_key, .. } = &delta
            && !self.agent.current.is_empty()
        {
            self.agent.current.clone_from(to_agent_key);
            self.agent.handed_off = true;
        }
        // A child's usage is the run's (sub-agents, docs/multi-agent.md).
        if let Some(call) = delta.usage() {
            self.handle.add_usage(&call.usage);
        }
        let mut lines = Vec::new();
        // Markers and usage produce no events; the recorder reads them from the delta itself.
        let child_stage = match &delta {
            AgentDelta::Child { task_id, delta } if matches!(delta.as_ref(), AgentDelta::StageMarker(_)) => {
                Some(task_id.clone())
            }
            _ => None,
        };
        if let (Some(p), AgentDelta::StageMarker(_) | AgentDelta::Usage(_) | AgentDelta::ChildStart(_)) =
            (self.persistence.as_mut(), &delta)
        {
            lines = p.recorder.observe(&delta, &[]);
        } else if let (Some(p), Some(_)) = (self.persistence.as_mut(), &child_stage) {
            p.recorder.observe(&delta, &[]);
        }
        if let Some(task_id) = child_stage {
            self.child_stage_began(&task_id).await;
        }
        if let Err(e) = self.assembler.push(delta, &mut self.events) {
            self.events.clear();
            return Err(EmitError::Protocol(e.to_string()));
        }
        if let Some(p) = self.persistence.as_mut() {
            p.recorder.observe_events(&self.events);
            // An approval answered `always` is remembered for the chat at once.
            lines.extend(p.recorder.take_pending());
            if !lines.is_empty() {
                let steps = lines.iter().any(|l| matches!(l, HistoryLine::Step(_)));
                write_lines(p.store.clone(), p.chat_id.clone(), lines, false).await.map_err(EmitError::Storage)?;
                if steps && let Some(recovery) = self.recovery.as_mut() {
                    recovery.durable(&self.assembler, &self.handle);
                }
            }
        }
        self.flush().await
    }
}
