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

pub type BoxBody = http_body_util::combinators::UnsyncBoxBody<Bytes, std::convert::Infallible>;

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
