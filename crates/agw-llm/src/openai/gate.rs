//! Backpressure from the run to the provider's response body.
//!
//! async-openai reads a streamed response in a task of its own and hands the parsed chunks over
//! through an *unbounded* channel, as fast as the provider sends them. A run whose client reads
//! slowly waits on its client, so without a limit the whole upstream answer would pile up in that
//! channel (`tests/reliability.rs`: a 32 MiB answer was read completely for a client that had
//! read 30 bytes). The gate restores pull semantics: the response body hands out its next frame
//! only while the run is waiting for a chunk ([`Demand`] signals that), one frame per wait. So
//! the provider is read at the pace the run consumes, the kernel's socket buffers fill and TCP
//! flow control slows the provider down.
//!
//! Only the (temporary) async-openai path needs this: the direct path reads the body itself, and
//! only when the run asks for the next delta.
//!
//! Wiring: [`super::byot::Chunks::open`] opens each attempt inside [`CURRENT`]'s scope; the
//! transport (running in that scope, async-openai calls it inline) wraps the successful
//! response's body with [`gated`]; `Chunks` wraps the chunk stream in [`Demand`] with the same
//! gate.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::task::AtomicWaker;
use futures::{Stream, StreamExt};
use http_body::{Body, Frame, SizeHint};
use reqwest::ResponseBuilderExt;

use crate::LlmError;
use crate::transport::{ResponseLimits, ResponseMeter};

impl BodyGate {
    pub(crate) fn new(limits: ResponseLimits) -> Self {
        Self { limits, ..Self::default() }
    }

    /// The limit the body broke, if it did.
    pub(crate) fn take_violation(&self) -> Option<LlmError> {
        self.violation.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// Shared between one response body ([`GatedBody`]) and the stream its chunks are read from
/// ([`Demand`]).
#[derive(Debug, Default)]
pub(crate) struct BodyGate {
    /// Caps on the body, checked on every frame before async-openai buffers it.
    limits: ResponseLimits,
    /// The cap the body broke, for the provider to report instead of async-openai's generic
    /// stream error.
    violation: Mutex<Option<LlmError>>,
    /// The consumer is waiting: the body may hand out one more frame.
    wanted: AtomicBool,
    /// The body reader, parked until a frame is wanted.
    reader: AtomicWaker,
    /// The consumer, woken when the body stops after a frame, so it asks again if that frame held
    /// no whole chunk (a whole chunk wakes it through the channel anyway; a second wake of a
    /// task that is already scheduled costs nothing).
    consumer: AtomicWaker,
}

tokio::task_local! {
    /// The gate of the attempt being opened in this task.
    pub(crate) static CURRENT: Arc<BodyGate>;
}

/// `response` with its body behind the current gate (unchanged outside a gate's scope).
pub(crate) fn gated(response: reqwest::Response) -> reqwest::Response {
    let Ok(gate) = CURRENT.try_with(Arc::clone) else { return response };
    let url = response.url().clone();
    let response: http::Response<reqwest::Body> = response.into();
    let (parts, inner) = response.into_parts();
    let mut builder = http::Response::builder().status(parts.status).version(parts.version).url(url);
    if let Some(headers) = builder.headers_mut() {
        *headers = parts.headers;
    }
    let meter = ResponseMeter::new(gate.limits);
    match builder.body(reqwest::Body::wrap(GatedBody { inner, gate, read: false, meter })) {
        Ok(response) => response.into(),
        // Unreachable: the parts come from a valid response.
        Err(error) => unreachable!("rebuilding a valid response failed: {error}"),
    }
}

/// A response body that yields a frame only when [`BodyGate::wanted`].
struct GatedBody {
    inner: reqwest::Body,
    gate: Arc<BodyGate>,
    /// A frame was handed out since the last permission.
    read: bool,
    meter: ResponseMeter,
}

impl Body for GatedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        // Register before taking the permission, so a `want` in between still wakes us.
        this.gate.reader.register(cx.waker());
        if !this.gate.wanted.swap(false, Ordering::AcqRel) {
            if std::mem::take(&mut this.read) {
                this.gate.consumer.wake();
            }
            return Poll::Pending;
        }
        let frame = match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => {
                // Nothing read: the permission still stands.
                this.gate.wanted.store(true, Ordering::Release);
                return Poll::Pending;
            }
            Poll::Ready(frame) => frame,
        };
        this.read = true;
        if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref))
            && let Err(error) = this.meter.bytes(data.map_or(&[][..], |d| &d[..]))
        {
            let message = error.to_string();
            *this.gate.violation.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
            return Poll::Ready(Some(Err(message.into())));
        }
        Poll::Ready(frame.map(|f| f.map_err(Into::into)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The chunk stream of a gated response: each time it has to wait, it lets the body read one
/// more frame.
pub(crate) struct Demand<S> {
    chunks: S,
    gate: Arc<BodyGate>,
}

impl<S> Demand<S> {
    pub(crate) fn new(chunks: S, gate: Arc<BodyGate>) -> Self {
        Self { chunks, gate }
    }
}

impl<S: Stream + Unpin> Stream for Demand<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        self.gate.consumer.register(cx.waker());
        match self.chunks.poll_next_unpin(cx) {
            Poll::Pending => {
                self.gate.wanted.store(true, Ordering::Release);
                self.gate.reader.wake();
                Poll::Pending
            }
            ready => ready,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use http_body_util::BodyExt;

    fn body_of(frames: &[&'static str]) -> reqwest::Body {
        let frames: Vec<Result<Bytes, std::io::Error>> =
            frames.iter().map(|f| Ok(Bytes::from_static(f.as_bytes()))).collect();
        reqwest::Body::wrap_stream(futures::stream::iter(frames))
    }

    #[tokio::test]
    async fn the_body_yields_one_frame_per_want() {
        let gate = Arc::new(BodyGate::default());
        let mut body =
            GatedBody { inner: body_of(&["a", "b"]), gate: gate.clone(), read: false, meter: Default::default() };
        let blocked = tokio::time::timeout(std::time::Duration::from_millis(20), body.frame()).await;
        assert!(blocked.is_err(), "nothing is read before the consumer waits");
        gate.wanted.store(true, Ordering::Release);
        let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(frame, "a");
        let blocked = tokio::time::timeout(std::time::Duration::from_millis(20), body.frame()).await;
        assert!(blocked.is_err(), "one frame per want");
        gate.wanted.store(true, Ordering::Release);
        assert_eq!(body.frame().await.unwrap().unwrap().into_data().unwrap(), "b");
    }

    #[tokio::test]
    async fn a_waiting_consumer_drives_the_body_through_frames_without_whole_chunks() {
        // The reader side: frames go through the gate into a channel, but only the second and
        // fourth frame complete a "chunk" (as an SSE event split across reads would).
        let gate = Arc::new(BodyGate::default());
        let mut body = GatedBody {
            inner: body_of(&["he", "llo|", "wor", "ld|"]),
            gate: gate.clone(),
            read: false,
            meter: ResponseMeter::new(ResponseLimits::default()),
        };
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        tokio::spawn(async move {
            let mut partial = String::new();
            while let Some(Ok(frame)) = body.frame().await {
                partial.push_str(std::str::from_utf8(&frame.into_data().unwrap()).unwrap());
                while let Some(end) = partial.find('|') {
                    let chunk: String = partial.drain(..=end).collect();
                    let _ = tx.send(chunk);
                }
            }
        });
        let mut chunks = Demand::new(tokio_stream_of(rx), gate);
        let got: Vec<String> = tokio::time::timeout(std::time::Duration::from_secs(2), (&mut chunks).collect())
            .await
            .expect("no deadlock");
        assert_eq!(got, ["hello|", "world|"]);
    }

    fn tokio_stream_of(
        mut rx: tokio::sync::mpsc::UnboundedReceiver<String>,
    ) -> Pin<Box<dyn Stream<Item = String> + Send>> {
        Box::pin(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
    }
}
