//! The in-process fake model: an OpenAI-compatible streaming endpoint on loopback, lean enough
//! that the load generator stays cheap next to agw.
//!
//! Chunk shapes come from `agw_testkit::Transcript` (the project's scripted provider), so
//! agw parses exactly what it parses in its tests. Per request, by the `x-agw-stage` header:
//! * `…step-1` (the REACT agent's first turn): one `mock_city_weather` tool call — a start
//!   fragment, two argument fragments, finish `tool_calls`, usage, `[DONE]`, no delays;
//! * anything else: `tokens` content chunks `delay` apart, then finish `stop`, usage, `[DONE]`.
//!
//! Every token's text is `~T<ns>~`: the instant (ns since [`epoch`]) the chunk was handed to
//! the connection. The client, in the same process, reads it back from the `content.delta` and
//! subtracts it from its receive instant: the added latency of that delta through agw.
//!
//! Every chunk is written and flushed on its own (like a real provider, and like the project's
//! `FixtureServer`): after each frame the body returns `Pending` once so hyper flushes.
//!
//! Each request body names its run (`bench-run-<n>`, put into the user message by the client);
//! the fixture adds the time it spent answering (request received → last frame handed over) to
//! that run in [`ModelTimes`], so the client can subtract the model's own time from the run's
//! duration: what is left was added by agw.
//!
//! The optional gate holds each text response before its first token until `expected` text
//! requests have arrived (or a timeout), so that N streams really are open at the same time;
//! each stream then starts at a random phase within one token interval, so tokens of different
//! streams are spread out instead of arriving in bursts.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use agw_testkit::Transcript;

/// Stand-in for the token text while building templates.
const MARK: &str = "@@MARK@@";

/// The shared time origin of send and receive stamps (same process).
pub fn epoch() -> std::time::Instant {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// Nanoseconds since [`epoch`].
pub fn now_ns() -> u64 {
    epoch().elapsed().as_nanos() as u64
}

/// What the fixture answers in one scenario.
#[derive(Debug, Clone)]
pub struct Script {
    pub tokens: usize,
    pub delay: Duration,
    /// Time to first token of a text answer (after the gate and the stream's phase offset).
    pub first_token: Duration,
}

/// The marker of a run's number in a request body.
pub const RUN_MARK: &[u8] = b"bench-run-";

/// Per run: the model's own time (ns, summed over the run's model calls) and when its last
/// call handed over its last frame (ns since [`epoch`]).
#[derive(Default)]
pub struct ModelTimes(Mutex<HashMap<u64, ModelTime>>);

#[derive(Debug, Default, Clone, Copy)]
pub struct ModelTime {
    pub spent_ns: u64,
    pub last_frame_at: u64,
}

impl ModelTimes {
    fn add(&self, run: u64, ns: u64) {
        let mut times = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let time = times.entry(run).or_default();
        time.spent_ns += ns;
        time.last_frame_at = time.last_frame_at.max(now_ns());
    }

    /// The run's model time, forgotten once read.
    pub fn take(&self, run: u64) -> Option<ModelTime> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&run)
    }
}

/// The run number after [`RUN_MARK`] in `body`, if any.
pub fn run_of(body: &[u8]) -> Option<u64> {
    let at = memchr::memmem::find(body, RUN_MARK)? + RUN_MARK.len();
    let digits = &body[at..];
    let end = digits.iter().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
    std::str::from_utf8(&digits[..end]).ok()?.parse().ok()
}

/// Gate of one measured phase: text responses wait until `expected` of them arrived.
struct Gate {
    expected: usize,
    arrived: AtomicUsize,
    open: watch::Sender<bool>,
    timeout: Duration,
}

/// Counters the benchmark reports.
#[derive(Default)]
pub struct Counters {
    pub requests: AtomicUsize,
    pub text_streams_open: AtomicUsize,
    pub text_streams_peak: AtomicUsize,
    pub frames: AtomicU64,
}

struct Templates {
    /// Token frame = prefix + token + suffix; the first frame of a response carries `role`.
    first_prefix: Bytes,
    prefix: Bytes,
    suffix: Bytes,
    /// finish `stop`, usage, `[DONE]` (usage counts are fixed; agw does not read them).
    tail: Vec<Bytes>,
    tool_call: Vec<Bytes>,
}

struct Shared {
    script: Script,
    templates: Templates,
    gate: Mutex<Arc<Gate>>,
    counters: Counters,
    model_times: Arc<ModelTimes>,
    /// xorshift state for the stream phases.
    rng: AtomicU64,
}

/// A running fixture provider. Dropping it stops accepting (open connections end with their
/// responses).
pub struct Fixture {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

fn split_template(raw: &str) -> (Bytes, Bytes) {
    let (prefix, suffix) = raw.split_once(MARK).expect("template contains the mark");
    (Bytes::copy_from_slice(prefix.as_bytes()), Bytes::copy_from_slice(suffix.as_bytes()))
}

fn frames(transcript: Transcript) -> Vec<Bytes> {
    transcript.frames.into_iter().map(|f| Bytes::from(f.raw)).collect()
}

impl Fixture {
    pub async fn start(script: Script) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let content = Transcript::new().content(MARK).content(MARK);
        let (first_prefix, _) = split_template(&content.frames[0].raw);
        let (prefix, suffix) = split_template(&content.frames[1].raw);
        let templates = Templates {
            first_prefix,
            prefix,
            suffix,
            tail: frames(Transcript::new().finish("stop").usage(180, script.tokens as u64).done()),
            tool_call: frames(Transcript::openai_tool_call(
                "call_weather_1",
                "mock_city_weather",
                &["{\"city\":\"Tokyo\",", "\"date\":\"2026-02-13\"}"],
            )),
        };
        let shared = Arc::new(Shared {
            script,
            templates,
            gate: Mutex::new(Arc::new(Gate::open())),
            counters: Counters::default(),
            model_times: Arc::new(ModelTimes::default()),
            rng: AtomicU64::new(0x9E37_79B9_7F4A_7C15),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(Self { addr, shared, accept })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn model_times(&self) -> Arc<ModelTimes> {
        self.shared.model_times.clone()
    }

    pub fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// From now on, text responses wait until `expected` of them arrived (at most `timeout`).
    /// `expected == 0` removes the gate.
    pub fn set_gate(&self, expected: usize, timeout: Duration) {
        let gate = if expected == 0 { Gate::open() } else { Gate::closed(expected, timeout) };
        *self.shared.gate.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(gate);
    }

    /// Resets the peak of concurrently open text streams.
    pub fn reset_peak(&self) {
        let c = &self.shared.counters;
        c.text_streams_peak.store(c.text_streams_open.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

impl Gate {
    fn open() -> Self {
        Self { expected: 0, arrived: AtomicUsize::new(0), open: watch::Sender::new(true), timeout: Duration::ZERO }
    }

    fn closed(expected: usize, timeout: Duration) -> Self {
        Self { expected, arrived: AtomicUsize::new(0), open: watch::Sender::new(false), timeout }
    }

    /// Counts one arrival; the last expected one opens the gate.
    fn arrive(&self) {
        if self.expected > 0 && self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.expected {
            self.open.send_replace(true);
        }
    }
}

/// The next accepted connection, `TCP_NODELAY` set (each frame goes out at once). EMFILE and
/// friends back off, bounded by the benchmark's own deadlines.
pub async fn accept(listener: &TcpListener) -> tokio::net::TcpStream {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                return stream;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = accept(&listener).await;
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(respond(shared, request).await) }
            });
            // HTTP/1.1 (agw's upstream) or h2c (the generator-alone check at 10,000 streams).
            let _ = auto::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

async fn respond(shared: Arc<Shared>, request: Request<Incoming>) -> Response<ScriptBody> {
    shared.counters.requests.fetch_add(1, Ordering::Relaxed);
    let tool_turn = request
        .headers()
        .get("x-agw-stage")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|stage| stage.ends_with("step-1"));
    let received = Instant::now();
    // The request body is read (so the connection can be reused) for its run number.
    let run = request.into_body().collect().await.ok().and_then(|b| run_of(&b.to_bytes()));
    let mut body = if tool_turn {
        ScriptBody::tool_call(shared)
    } else {
        let gate = shared.gate.lock().unwrap_or_else(|e| e.into_inner()).clone();
        gate.arrive();
        ScriptBody::text(shared, gate)
    };
    body.run = run.map(|run| (run, received));
    let mut response = Response::new(body);
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    response
}

enum Phase {
    /// Waiting for the gate; then the first token is due after the stream's phase offset.
    Gate(Pin<Box<dyn Future<Output = ()> + Send>>),
    Tokens,
    Tail,
    Done,
}

/// One streamed response (see the module docs).
pub struct ScriptBody {
    shared: Arc<Shared>,
    tool_call: bool,
    phase: Phase,
    /// Next token (text) or next frame (tool call / tail).
    next: usize,
    /// When token 0 is due; token k is due at `base + k * delay` (no drift).
    base: Instant,
    sleep: Pin<Box<Sleep>>,
    yield_for_flush: bool,
    /// The run this answer belongs to and when its request arrived.
    run: Option<(u64, Instant)>,
}

impl ScriptBody {
    fn tool_call(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            tool_call: true,
            phase: Phase::Tail,
            next: 0,
            base: Instant::now(),
            sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
            yield_for_flush: false,
            run: None,
        }
    }

    fn text(shared: Arc<Shared>, gate: Arc<Gate>) -> Self {
        let counters = &shared.counters;
        let open = counters.text_streams_open.fetch_add(1, Ordering::Relaxed) + 1;
        counters.text_streams_peak.fetch_max(open, Ordering::Relaxed);
        let first_token = shared.script.first_token;
        let phase = if gate.expected == 0 {
            Phase::Tokens
        } else {
            Phase::Gate(Box::pin(async move {
                let mut open = gate.open.subscribe();
                let _ = tokio::time::timeout(gate.timeout, open.wait_for(|open| *open)).await;
            }))
        };
        Self {
            shared,
            tool_call: false,
            phase,
            next: 0,
            base: Instant::now() + first_token,
            sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
            yield_for_flush: false,
            run: None,
        }
    }

    /// A pseudo-random offset in `[0, delay)`.
    fn phase_offset(&self) -> Duration {
        let delay = self.shared.script.delay;
        if delay.is_zero() {
            return Duration::ZERO;
        }
        let mut x = self.shared.rng.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
        x ^= x >> 30;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 27;
        Duration::from_nanos(x % delay.as_nanos() as u64)
    }

    fn token_frame(&self) -> Bytes {
        let t = &self.shared.templates;
        let prefix = if self.next == 0 { &t.first_prefix } else { &t.prefix };
        let mut buf = Vec::with_capacity(prefix.len() + t.suffix.len() + 24);
        buf.extend_from_slice(prefix);
        buf.extend_from_slice(format!("~T{}~", now_ns()).as_bytes());
        buf.extend_from_slice(&t.suffix);
        Bytes::from(buf)
    }

    fn frame(&mut self, bytes: Bytes) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.yield_for_flush = true;
        self.shared.counters.frames.fetch_add(1, Ordering::Relaxed);
        Poll::Ready(Some(Ok(Frame::data(bytes))))
    }
}

impl Drop for ScriptBody {
    fn drop(&mut self) {
        if !self.tool_call {
            self.shared.counters.text_streams_open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Body for ScriptBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.yield_for_flush {
            // hyper flushes when the body is not ready: one `Pending` per frame sends each
            // chunk in its own write, as a provider does.
            this.yield_for_flush = false;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        loop {
            match &mut this.phase {
                Phase::Gate(wait) => {
                    if wait.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    this.base = Instant::now() + this.phase_offset() + this.shared.script.first_token;
                    this.phase = Phase::Tokens;
                }
                Phase::Tokens => {
                    let script = &this.shared.script;
                    if this.next >= script.tokens {
                        this.next = 0;
                        this.phase = Phase::Tail;
                        continue;
                    }
                    let due = this.base + script.delay * this.next as u32;
                    if due > Instant::now() {
                        this.sleep.as_mut().reset(due);
                        if this.sleep.as_mut().poll(cx).is_pending() {
                            return Poll::Pending;
                        }
                    }
                    let bytes = this.token_frame();
                    this.next += 1;
                    return this.frame(bytes);
                }
                Phase::Tail => {
                    let templates = &this.shared.templates;
                    let frames = if this.tool_call { &templates.tool_call } else { &templates.tail };
                    match frames.get(this.next).cloned() {
                        Some(bytes) => {
                            this.next += 1;
                            return this.frame(bytes);
                        }
                        None => {
                            this.phase = Phase::Done;
                            if let Some((run, received)) = this.run.take() {
                                this.shared.model_times.add(run, received.elapsed().as_nanos() as u64);
                            }
                        }
                    }
                }
                Phase::Done => return Poll::Ready(None),
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
