//! Response body types: a boxed body for JSON responses and the live SSE body.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use agw_protocol::sse::HEARTBEAT_FRAME;

/// Every response body agw produces.
pub type BoxBody = http_body_util::combinators::UnsyncBoxBody<Bytes, std::convert::Infallible>;

/// Error of a request body from any server (hyper's `Incoming`, axum's `Body`, …).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A failure while reading a request body, from whichever server delivered it.
///
/// A named type rather than a bare `Box<dyn Error>`: trait objects in the body type make rustc's
/// `Send` check of the request future fail ("not general enough").
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct BodyError(BoxError);

impl BodyError {
    /// Wraps any body error.
    pub fn new(error: impl Into<BoxError>) -> Self {
        Self(error.into())
    }
}

/// Every request body agw reads: whatever body type the embedding server uses, boxed once at
/// the door, so agw's routes run under hyper directly or inside another framework.
pub type RequestBody = http_body_util::combinators::UnsyncBoxBody<Bytes, BodyError>;

/// A response body of one chunk.
pub fn full(bytes: impl Into<Bytes>) -> BoxBody {
    Full::new(bytes.into()).boxed_unsync()
}

/// The body of `POST /api/ap/query`: frames from the run task as they are produced, and
/// `event:heartbeat` frames while the run is quiet.
///
/// No buffering: every frame the run task sends is handed to hyper the moment it is polled, and
/// hyper writes it out because nothing else is ready. When hyper drops this body (the client went
/// away) the receiver closes, which the run task observes and uses to cancel the run.
pub struct SseBody {
    rx: mpsc::Receiver<Bytes>,
    heartbeat: Option<Interval>,
}

impl SseBody {
    /// A body reading `rx` until the run task drops its sender; `heartbeat_every` zero sends no heartbeats.
    pub fn new(rx: mpsc::Receiver<Bytes>, heartbeat_every: Duration) -> Self {
        let heartbeat = (!heartbeat_every.is_zero()).then(|| {
            let mut iv = tokio::time::interval_at(Instant::now() + heartbeat_every, heartbeat_every);
            iv.set_missed_tick_behavior(MissedTickBehavior::Delay);
            iv
        });
        Self { rx, heartbeat }
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match this.rx.poll_recv(cx) {
            Poll::Ready(Some(bytes)) => {
                // Activity resets the heartbeat clock: heartbeats only fill silences.
                if let Some(hb) = this.heartbeat.as_mut() {
                    hb.reset();
                }
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        if let Some(hb) = this.heartbeat.as_mut()
            && hb.poll_tick(cx).is_ready()
        {
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(HEARTBEAT_FRAME)))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        false
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
