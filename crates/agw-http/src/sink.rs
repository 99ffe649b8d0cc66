//! The HTTP side of a run: assembler + SSE framing + the channel to the response body.

use bytes::Bytes;
use tokio::sync::mpsc;

use agw_modes::runtime::{DeltaSink, EmitError};
use agw_protocol::event::{ChatStart, RequestQuery};
use agw_protocol::{AgentDelta, Assembler, Event, RunErrorInfo, sse};

/// Turns a run's deltas into SSE frames and sends each batch (the events one delta produced)
/// as one body chunk, immediately.
pub struct SseSink {
    assembler: Assembler,
    tx: mpsc::Sender<Bytes>,
    events: Vec<Event>,
}

impl SseSink {
    pub fn new(assembler: Assembler, tx: mpsc::Sender<Bytes>) -> Self {
        Self { assembler, tx, events: Vec::with_capacity(4) }
    }

    /// `request.query`, optional `chat.start`, `run.start`.
    pub async fn bootstrap(&mut self, query: RequestQuery, chat_start: Option<ChatStart>) -> Result<(), EmitError> {
        self.assembler.bootstrap(query, chat_start, &mut self.events);
        self.flush().await
    }

    pub async fn complete(&mut self, finish_reason: &str) -> Result<(), EmitError> {
        self.assembler.complete(finish_reason, &mut self.events);
        self.flush().await
    }

    pub async fn fail(&mut self, error: RunErrorInfo) -> Result<(), EmitError> {
        self.assembler.fail(error, &mut self.events);
        self.flush().await
    }

    /// A clone of the sender, to watch for the client going away while the run is quiet.
    pub fn watch_closed(&self) -> mpsc::Sender<Bytes> {
        self.tx.clone()
    }

    async fn flush(&mut self) -> Result<(), EmitError> {
        if self.events.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(256 * self.events.len());
        for event in self.events.drain(..) {
            sse::write_event(&event, &mut buf);
        }
        self.tx.send(Bytes::from(buf)).await.map_err(|_| EmitError::Closed)
    }
}

impl DeltaSink for SseSink {
    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        if let Err(e) = self.assembler.push(delta, &mut self.events) {
            self.events.clear();
            return Err(EmitError::Protocol(e.to_string()));
        }
        self.flush().await
    }
}
