//! Response body types: a boxed body for JSON responses and the live SSE body.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use futures::stream::BoxStream;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{BodyExt, Full};
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::runs::Observer;

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

/// The body of `POST /api/ap/query` and `GET /api/ap/attach`: one observer's frames of a run as
/// they are published, and `event:heartbeat` frames while the run is quiet.
///
/// No buffering: the frames a delta produced are handed to hyper the moment they are published
/// (the observer is woken), and hyper writes them out because nothing else is ready. When hyper
/// drops this body (the client went away) the observer is dropped, which applies the run's
/// disconnect policy if it was the last one.
pub struct SseBody {
    frames: BoxStream<'static, Bytes>,
    heartbeat: Option<Interval>,
    heartbeat_frame: &'static [u8],
    /// When the last frame went out, if after the heartbeat timer was armed. The timer is not
    /// re-armed per frame (a timer-wheel update per event, measurable at thousands of events per
    /// second); when it fires after activity it is moved to one period after the last frame.
    last_frame: Option<Instant>,
}

impl SseBody {
    /// A body streaming `observer`'s frames until the run's terminal event; `heartbeat_every`
    /// zero sends no heartbeats.
    pub fn new(observer: Observer, heartbeat_every: Duration) -> Self {
        let frames = futures::stream::unfold(observer, |mut observer| async move {
            observer.next_chunk().await.map(|chunk| (chunk, observer))
        });
        Self::from_stream(frames, heartbeat_every)
    }

    /// A body streaming any frames (each item is written as one chunk), with heartbeats.
    pub fn from_stream(frames: impl Stream<Item = Bytes> + Send + 'static, heartbeat_every: Duration) -> Self {
        let heartbeat = (!heartbeat_every.is_zero()).then(|| {
            let mut iv = tokio::time::interval_at(Instant::now() + heartbeat_every, heartbeat_every);
            iv.set_missed_tick_behavior(MissedTickBehavior::Delay);
            iv
        });
        Self { frames: Box::pin(frames), heartbeat, heartbeat_frame: HEARTBEAT_FRAME, last_frame: None }
    }

    /// Sends `frame` as the heartbeat instead of agw's `event:heartbeat` (e.g. an SSE comment for
    /// clients of other protocols).
    pub fn with_heartbeat_frame(mut self, frame: &'static [u8]) -> Self {
        self.heartbeat_frame = frame;
        self
    }
}

impl Body for SseBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        match this.frames.as_mut().poll_next(cx) {
            Poll::Ready(Some(bytes)) => {
                // Heartbeats only fill silences (see `last_frame`).
                if this.heartbeat.is_some() {
                    this.last_frame = Some(Instant::now());
                }
                return Poll::Ready(Some(Ok(Frame::data(bytes))));
            }
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Pending => {}
        }
        let Some(hb) = this.heartbeat.as_mut() else { return Poll::Pending };
        while hb.poll_tick(cx).is_ready() {
            match this.last_frame.take() {
                // Frames went out during this period: the silence started at the last one.
                Some(last) if last + hb.period() > Instant::now() => hb.reset_at(last + hb.period()),
                _ => return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(this.heartbeat_frame))))),
            }
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

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    /// Heartbeats fill silences only, one period after the last frame — without re-arming the
    /// timer per frame.
    #[tokio::test]
    async fn heartbeats_only_fill_silences() {
        let period = Duration::from_millis(100);
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
        let mut body = SseBody::from_stream(tokio_stream_of(rx), period);
        let feeder = tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(40)).await;
                if tx.send(Bytes::from_static(b"data:x\n\n")).is_err() {
                    return;
                }
            }
            // Then silence; keep the sender so the stream does not end.
            tokio::time::sleep(Duration::from_secs(5)).await;
            drop(tx);
        });
        let mut last_data = Instant::now();
        let mut frames = 0;
        loop {
            let frame = body.frame().await.expect("body continues").expect("infallible");
            let data = frame.into_data().expect("data frame");
            if &data[..] == HEARTBEAT_FRAME {
                let silence = last_data.elapsed();
                assert_eq!(frames, 10, "a heartbeat while frames flowed (after {frames} frames)");
                assert!(silence >= period, "heartbeat after {silence:?} of silence, before one period");
                break;
            }
            frames += 1;
            last_data = Instant::now();
        }
        feeder.abort();
    }

    fn tokio_stream_of(mut rx: tokio::sync::mpsc::UnboundedReceiver<Bytes>) -> impl Stream<Item = Bytes> + Send {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
