//! The streaming response of the endpoints that speak other protocols. They read their run as
//! typed events (`Observer::next_events`: the run keeps them, so nothing decodes agw's own SSE
//! bytes back) and write their own frames.

use std::sync::Arc;
use std::time::Duration;

use agw_protocol::Event;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::Response;

use super::query::sse_body_response;
use crate::body::{BoxBody, SseBody};
use crate::runs::{Attached, Observer};

/// A run's events in the batches its observer here hands them over, to the run's end.
pub(crate) fn observed(observer: Observer) -> BoxStream<'static, Vec<Arc<Event>>> {
    futures::stream::unfold(observer, |mut observer| async move {
        let batch = observer.next_events().await?;
        Some((batch, observer))
    })
    .boxed()
}

/// A run's events as an attach gives them: from its observer when this replica holds the run,
/// else decoded from the frames of its stream in Redis.
pub(crate) fn attached_events(attached: Attached) -> BoxStream<'static, Vec<Arc<Event>>> {
    match attached {
        Attached::Here(observer) => observed(observer),
        Attached::Elsewhere(frames) => {
            let mut decoder = agw_protocol::SseDecoder::new();
            frames
                .map(move |chunk| {
                    let mut frames = Vec::new();
                    decoder.feed(&chunk, &mut frames);
                    frames
                        .iter()
                        .filter(|f| f.event == "message")
                        .filter_map(|f| f.parse_event().ok())
                        .map(Arc::new)
                        .collect::<Vec<_>>()
                })
                .boxed()
        }
    }
}

/// The streaming response of another protocol: its frames as they come, an SSE comment as the
/// heartbeat (their clients skip comments; agw's `event:heartbeat` would be a frame to them); the
/// same headers as agw's own streams.
pub fn frames_response(
    frames: impl futures::Stream<Item = Bytes> + Send + 'static,
    heartbeat: Duration,
) -> Response<BoxBody> {
    sse_body_response(SseBody::from_stream(frames, heartbeat).with_heartbeat_frame(b": keep-alive\n\n"))
}
