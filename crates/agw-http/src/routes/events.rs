//! Reading a run's observer as typed events, for the endpoints that speak other protocols (their
//! adapters map events, not agw's SSE bytes).

use agw_protocol::{Event, SseDecoder};

use crate::runs::Observer;

/// Reads an observer's frames as events (shared by the other-protocol endpoints).
pub struct Events {
    observer: Observer,
    decoder: SseDecoder,
    pending: std::collections::VecDeque<Event>,
}

impl Events {
    pub fn new(observer: Observer) -> Self {
        Self { observer, decoder: SseDecoder::new(), pending: Default::default() }
    }

    /// The next batch of events (one published delta's worth); `None` at the end of the run.
    pub async fn next_batch(&mut self) -> Option<Vec<Event>> {
        loop {
            if !self.pending.is_empty() {
                return Some(self.pending.drain(..).collect());
            }
            let chunk = self.observer.next_chunk().await?;
            let mut frames = Vec::new();
            self.decoder.feed(&chunk, &mut frames);
            for frame in frames.iter().filter(|f| f.event == "message") {
                if let Ok(event) = frame.parse_event() {
                    self.pending.push_back(event);
                }
            }
        }
    }
}
