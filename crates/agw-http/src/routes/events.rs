//! The streaming response of the endpoints that speak other protocols. They read their run as
//! typed events (`Observer::next_events`: the run keeps them, so nothing decodes agw's own SSE
//! bytes back) and write their own frames.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, header};
use http_body_util::BodyExt;

use crate::body::{BoxBody, SseBody};

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
