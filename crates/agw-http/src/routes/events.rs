//! The streaming response of the endpoints that speak other protocols. They read their run as
//! typed events (`Observer::next_events`: the run keeps them, so nothing decodes agw's own SSE
//! bytes back) and write their own frames.

use std::time::Duration;

use bytes::Bytes;
use http::Response;

use super::query::sse_body_response;
use crate::body::{BoxBody, SseBody};

/// The streaming response of another protocol: its frames as they come, an SSE comment as the
/// heartbeat (their clients skip comments; agw's `event:heartbeat` would be a frame to them); the
/// same headers as agw's own streams.
pub fn frames_response(
    frames: impl futures::Stream<Item = Bytes> + Send + 'static,
    heartbeat: Duration,
) -> Response<BoxBody> {
    sse_body_response(SseBody::from_stream(frames, heartbeat).with_heartbeat_frame(b": keep-alive\n\n"))
}
