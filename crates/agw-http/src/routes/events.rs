//! Reading a run's observer as typed events, for the endpoints that speak other protocols (their
//! adapters map events, not agw's SSE bytes).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, header};
use http_body_util::BodyExt;

use agw_protocol::{Event, SseDecoder};

use crate::body::{BoxBody, SseBody};
use crate::runs::Observer;

/// The streaming response of another protocol: its frames as they come, an SSE comment as the
/// heartbeat (their clients skip comments; agw's `event:heartbeat` would be a frame to them).
pub fn sse_response(
    frames: impl futures::Stream<Item = Bytes> + Send + 'static,
    heartbeat: Duration,
) -> Response<BoxBody> {
    let body = SseBody::from_stream(frames, heartbeat).with_heartbeat_frame(b": keep-alive\n\n");
    let mut resp = Response::new(BodyExt::boxed_unsync(body));
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

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
