//! The HTTP side of a run: assembler + chat-memory recorder + publishing into the run's handle,
//! which its observers (the query's response, attaches) read.

use std::sync::Arc;

use agw_memory::{ChatStore, Recorder};

use crate::runs::RunHandle;
use crate::webhook::RunTrigger;
use agw_modes::runtime::{DeltaSink, EmitError};
use agw_protocol::event::{ChatStart, RequestQuery};
use agw_protocol::history::HistoryLine;
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
pub struct SseSink {
    assembler: Assembler,
    handle: Arc<RunHandle>,
    events: Vec<Event>,
    persistence: Option<Persistence>,
    webhook: Option<RunTrigger>,
}

impl SseSink {
    /// A sink with no webhook; `persistence` `None`: the run is not recorded (memory disabled).
    pub fn new(assembler: Assembler, handle: Arc<RunHandle>, persistence: Option<Persistence>) -> Self {
        Self { assembler, handle, events: Vec::with_capacity(4), persistence, webhook: None }
    }

    /// Fires the chat-event webhook at the run's first content delta.
    pub fn with_webhook(mut self, trigger: Option<RunTrigger>) -> Self {
        self.webhook = trigger;
        self
    }

    /// `request.query`, optional `chat.start`, `run.start`.
    pub async fn bootstrap(&mut self, query: RequestQuery, chat_start: Option<ChatStart>) -> Result<(), EmitError> {
        self.assembler.bootstrap(query, chat_start, &mut self.events);
        if let Some(p) = self.persistence.as_mut() {
            p.recorder.observe_events(&self.events);
        }
        self.flush().await
    }

    /// `run.complete` — after the last step is persisted, so a client that saw `run.complete` can
    /// replay the whole run. If that write fails the run ends with `run.error` `internal` instead.
    pub async fn complete(&mut self, finish_reason: &str) -> Result<(), EmitError> {
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
        metrics::counter!(crate::metrics::EVENTS_STREAMED).increment(self.events.len() as u64);
        self.handle.publish(&self.events);
        self.events.clear();
        Ok(())
    }

    async fn persist_final(&mut self, events: &[Event]) -> Result<(), String> {
        let Some(p) = self.persistence.as_mut() else { return Ok(()) };
        let lines = p.recorder.finish(events);
        write_lines(p.store.clone(), p.chat_id.clone(), lines, true).await
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

impl DeltaSink for SseSink {
    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        if let AgentDelta::Usage(usage) = &delta {
            self.handle.add_usage(usage);
        }
        let mut lines = Vec::new();
        // Markers and usage produce no events; the recorder reads them from the delta itself.
        if let (Some(p), AgentDelta::StageMarker(_) | AgentDelta::Usage(_)) = (self.persistence.as_mut(), &delta) {
            lines = p.recorder.observe(&delta, &[]);
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
                write_lines(p.store.clone(), p.chat_id.clone(), lines, false).await.map_err(EmitError::Storage)?;
            }
        }
        self.flush().await
    }
}
