//! The load generator's client: lean hyper HTTP/1.1 connections (one per concurrent stream,
//! reused between runs), a byte-level SSE scan that finds each delta's send stamp without
//! parsing JSON, and the per-run record.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use memchr::memmem;
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::{Instant, timeout_at};

use crate::fixture::{ModelTimes, RUN_MARK, now_ns};

/// Run numbers, unique over the whole benchmark (warm-up included): each run's body names its
/// number so the fixture can report the model's own time for it.
static NEXT_RUN: AtomicU64 = AtomicU64::new(1);

/// Where the load goes.
pub struct Target {
    /// agw's replicas (or the fixture): run number `i` goes to `addrs[i % addrs.len()]`,
    /// round-robin like a load balancer without stickiness. Never empty.
    pub addrs: Vec<SocketAddr>,
    /// `POST /api/ap/query` on agw, or (generator-alone check) the fixture's chat completions.
    pub path: &'static str,
    /// Request body; its `bench-run-` marker gets the run's number appended.
    pub body: String,
    /// The fixture's time per run, subtracted from the run's duration for the added latency.
    pub model_times: Arc<ModelTimes>,
    /// Talking to the fixture directly: the stream ends with `[DONE]`, not `run.complete`.
    pub direct: bool,
    /// Content deltas a complete run carries.
    pub expected_tokens: usize,
}

/// How much load, for how long.
pub struct Plan {
    pub runs: usize,
    pub concurrency: usize,
    pub run_timeout: Duration,
    /// No run starts after this instant.
    pub deadline: Instant,
    /// At most this many streams between connect and response headers at once (ramp-up).
    pub connect_parallelism: usize,
    /// 0: HTTP/1.1, one connection per concurrent stream (reused between runs). N > 0: every
    /// stream multiplexed over N HTTP/2 (h2c) connections.
    pub http2_connections: usize,
    /// Worker `i` of `n` starts its first run `i * stagger / n` after the others: arrivals
    /// spread over one run instead of all streams starting in the same instant.
    pub stagger: Duration,
}

/// What one run looked like from the client.
#[derive(Debug, Default)]
struct RunRecord {
    error: Option<String>,
    ttfb_ns: Option<u64>,
    ttft_ns: Option<u64>,
    total_ns: u64,
    /// `total_ns` minus the model's own time (request received → last frame, every call).
    added_ns: Option<u64>,
    /// From the model's last frame to the end of the stream (the terminal event).
    end_added_ns: Option<u64>,
    latencies_ns: Vec<u64>,
    heartbeats: usize,
}

/// Everything recorded in one measured phase.
#[derive(Debug, Default)]
pub struct Outcome {
    pub ok: usize,
    pub errors: BTreeMap<String, usize>,
    pub ttfb_ns: Vec<u64>,
    pub ttft_ns: Vec<u64>,
    pub run_ns: Vec<u64>,
    pub run_added_ns: Vec<u64>,
    pub end_added_ns: Vec<u64>,
    pub delta_ns: Vec<u64>,
    pub heartbeats: usize,
    pub wall: Duration,
    /// From the first request until the last stream had its response headers.
    pub ramp: Duration,
    pub peak_open_streams: usize,
}

impl Outcome {
    pub fn error_count(&self) -> usize {
        self.errors.values().sum()
    }

    fn add(&mut self, record: RunRecord) {
        match record.error {
            Some(kind) => *self.errors.entry(kind).or_default() += 1,
            None => {
                self.ok += 1;
                self.run_ns.push(record.total_ns);
                self.run_added_ns.extend(record.added_ns);
                self.end_added_ns.extend(record.end_added_ns);
            }
        }
        self.ttfb_ns.extend(record.ttfb_ns);
        self.ttft_ns.extend(record.ttft_ns);
        self.delta_ns.extend(record.latencies_ns);
        self.heartbeats += record.heartbeats;
    }
}

struct Shared {
    target: Arc<Target>,
    plan: Plan,
    next_run: AtomicUsize,
    connect: Semaphore,
    open: AtomicUsize,
    peak_open: AtomicUsize,
    last_headers: Mutex<Instant>,
    outcome: Mutex<Outcome>,
    h2: Vec<tokio::sync::Mutex<Option<H2Sender>>>,
}

type H1Sender = SendRequest<Full<Bytes>>;
type H2Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// This worker's HTTP/1.1 connections (one slot per address of [`Target::addrs`]), or its
/// index among the HTTP/2 connections each address gets.
enum Connection {
    H1(Vec<Option<H1Sender>>),
    H2(usize),
}

/// Runs `plan.runs` runs with `plan.concurrency` streams at a time and collects the records.
pub async fn drive(target: Arc<Target>, plan: Plan) -> Outcome {
    let workers = plan.concurrency.min(plan.runs).max(1);
    let started = Instant::now();
    let plan_h2 = plan.http2_connections;
    let replicas = target.addrs.len().max(1);
    let shared = Arc::new(Shared {
        target,
        connect: Semaphore::new(plan.connect_parallelism.max(1)),
        plan,
        next_run: AtomicUsize::new(0),
        open: AtomicUsize::new(0),
        peak_open: AtomicUsize::new(0),
        last_headers: Mutex::new(started),
        outcome: Mutex::new(Outcome::default()),
        h2: (0..plan_h2 * replicas).map(|_| tokio::sync::Mutex::new(None)).collect(),
    });
    let mut tasks = tokio::task::JoinSet::new();
    for index in 0..workers {
        let connection = if plan_h2 == 0 {
            Connection::H1((0..replicas).map(|_| None).collect())
        } else {
            Connection::H2(index % plan_h2)
        };
        let delay = shared.plan.stagger.mul_f64(index as f64 / workers as f64);
        tasks.spawn(worker(shared.clone(), connection, delay));
    }
    while tasks.join_next().await.is_some() {}
    let mut outcome = std::mem::take(&mut *shared.outcome.lock().unwrap_or_else(|e| e.into_inner()));
    outcome.wall = started.elapsed();
    outcome.ramp = shared.last_headers.lock().unwrap_or_else(|e| e.into_inner()).duration_since(started);
    outcome.peak_open_streams = shared.peak_open.load(Ordering::Relaxed);
    outcome
}

async fn worker(shared: Arc<Shared>, mut connection: Connection, delay: Duration) {
    tokio::time::sleep(delay).await;
    loop {
        let run = shared.next_run.fetch_add(1, Ordering::Relaxed);
        if run >= shared.plan.runs || Instant::now() >= shared.plan.deadline {
            return;
        }
        let replica = run % shared.target.addrs.len().max(1);
        let record = one_run(&shared, &mut connection, replica).await;
        shared.outcome.lock().unwrap_or_else(|e| e.into_inner()).add(record);
    }
}

async fn tcp(addr: SocketAddr) -> Result<TokioIo<TcpStream>, String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {}", e.kind()))?;
    let _ = stream.set_nodelay(true);
    Ok(TokioIo::new(stream))
}

async fn connect_h1(addr: SocketAddr) -> Result<H1Sender, String> {
    let (sender, connection) =
        hyper::client::conn::http1::handshake(tcp(addr).await?).await.map_err(|_| "handshake".to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

async fn connect_h2(addr: SocketAddr) -> Result<H2Sender, String> {
    let (sender, connection) = hyper::client::conn::http2::handshake(TokioExecutor::new(), tcp(addr).await?)
        .await
        .map_err(|_| "h2 handshake".to_string())?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// A sender to replica `replica` ready for one request: this worker's HTTP/1.1 connection to
/// it (reused when still usable) or a clone of its shared HTTP/2 connection to it.
async fn sender(shared: &Shared, connection: &mut Connection, replica: usize) -> Result<Sender, String> {
    let addr = shared.target.addrs[replica];
    match connection {
        Connection::H1(slots) => {
            let mut reused = slots[replica].take();
            if let Some(sender) = reused.as_mut()
                && sender.ready().await.is_err()
            {
                reused = None;
            }
            match reused {
                Some(sender) => Ok(Sender::H1(sender)),
                None => connect_h1(addr).await.map(Sender::H1),
            }
        }
        Connection::H2(index) => {
            let mut slot = shared.h2[replica * shared.plan.http2_connections + *index].lock().await;
            if slot.as_ref().is_none_or(H2Sender::is_closed) {
                *slot = Some(connect_h2(addr).await?);
            }
            let mut sender = slot.as_ref().cloned().ok_or("h2 connection")?;
            drop(slot);
            sender.ready().await.map_err(|_| "h2 not ready".to_string())?;
            Ok(Sender::H2(sender))
        }
    }
}

enum Sender {
    H1(H1Sender),
    H2(H2Sender),
}

impl Sender {
    async fn send(&mut self, request: Request<Full<Bytes>>) -> hyper::Result<http::Response<hyper::body::Incoming>> {
        match self {
            Self::H1(sender) => sender.send_request(request).await,
            Self::H2(sender) => sender.send_request(request).await,
        }
    }
}

async fn one_run(shared: &Shared, connection: &mut Connection, replica: usize) -> RunRecord {
    let target = &shared.target;
    let mut record = RunRecord::default();
    let permit = shared.connect.acquire().await.ok();
    let deadline = Instant::now() + shared.plan.run_timeout;
    let start = now_ns();
    let run = NEXT_RUN.fetch_add(1, Ordering::Relaxed);
    let mark = std::str::from_utf8(RUN_MARK).expect("ASCII");
    let body = target.body.replacen(mark, &format!("{mark}{run}"), 1);

    let mut sender = match timeout_at(deadline, sender(shared, connection, replica)).await {
        Ok(Ok(sender)) => sender,
        Ok(Err(kind)) => return fail(record, kind, start),
        Err(_) => return fail(record, "timeout: connect".into(), start),
    };
    let request = Request::post(target.path)
        .header(header::HOST, HeaderValue::from_static("127.0.0.1"))
        .header(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .header(header::ACCEPT, HeaderValue::from_static("text/event-stream"))
        .header("x-agw-stage", HeaderValue::from_static("agent-react-step-2"))
        .body(Full::new(Bytes::from(body)))
        .expect("static request parts are valid");
    let response = match timeout_at(deadline, sender.send(request)).await {
        Ok(Ok(response)) => response,
        Ok(Err(_)) => return fail(record, "request failed".into(), start),
        Err(_) => return fail(record, "timeout: headers".into(), start),
    };
    drop(permit);
    {
        let now = Instant::now();
        let mut last = shared.last_headers.lock().unwrap_or_else(|e| e.into_inner());
        *last = (*last).max(now);
    }
    if response.status() != StatusCode::OK {
        return fail(record, format!("http {}", response.status().as_u16()), start);
    }

    let open = shared.open.fetch_add(1, Ordering::Relaxed) + 1;
    shared.peak_open.fetch_max(open, Ordering::Relaxed);
    let mut body = response.into_body();
    let mut scan = Scanner::new(target.direct);
    let error = loop {
        match timeout_at(deadline, body.frame()).await {
            Err(_) => break Some("timeout: body".to_string()),
            Ok(None) => break None,
            Ok(Some(Err(_))) => break Some("body error".to_string()),
            Ok(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let now = now_ns();
                    record.ttfb_ns.get_or_insert(now.saturating_sub(start));
                    scan.feed(data, now);
                }
            }
        }
    };
    shared.open.fetch_sub(1, Ordering::Relaxed);
    let end = now_ns();
    record.total_ns = end.saturating_sub(start);
    record.ttft_ns = scan.first_token_at.map(|t| t.saturating_sub(start));
    record.heartbeats = scan.heartbeats;
    record.error = error.or_else(|| scan.verdict(target.expected_tokens));
    record.latencies_ns = scan.latencies;
    if let Some(model) = target.model_times.take(run) {
        record.added_ns = Some(record.total_ns.saturating_sub(model.spent_ns));
        record.end_added_ns = Some(scan.ended_at.unwrap_or(end).saturating_sub(model.last_frame_at));
    }
    if let (None, Connection::H1(slots), Sender::H1(sender)) = (&record.error, connection, sender) {
        slots[replica] = Some(sender);
    }
    record
}

fn fail(mut record: RunRecord, kind: String, start: u64) -> RunRecord {
    record.error = Some(kind);
    record.total_ns = now_ns().saturating_sub(start);
    record
}

/// Byte-level SSE reader: splits frames on the blank line and looks only for what the
/// benchmark needs — the `~T<ns>~` send stamp inside a delta, the terminal event, heartbeats.
pub struct Scanner {
    direct: bool,
    /// Bytes of a frame split across reads.
    pending: Vec<u8>,
    pub latencies: Vec<u64>,
    pub first_token_at: Option<u64>,
    pub complete: bool,
    /// When the terminal event arrived.
    pub ended_at: Option<u64>,
    pub run_error: Option<String>,
    pub heartbeats: usize,
}

const FRAME_END: &[u8] = b"\n\n";

impl Scanner {
    pub fn new(direct: bool) -> Self {
        Self {
            direct,
            pending: Vec::new(),
            latencies: Vec::with_capacity(64),
            first_token_at: None,
            complete: false,
            ended_at: None,
            run_error: None,
            heartbeats: 0,
        }
    }

    /// Feeds one body chunk received at `now` (ns since the epoch).
    pub fn feed(&mut self, chunk: &[u8], now: u64) {
        if self.pending.is_empty() {
            let rest = self.frames(chunk, now);
            self.pending.extend_from_slice(rest);
        } else {
            let mut buf = std::mem::take(&mut self.pending);
            buf.extend_from_slice(chunk);
            let rest = self.frames(&buf, now).to_vec();
            self.pending = rest;
        }
    }

    /// Handles every complete frame of `data`; returns the unfinished tail.
    fn frames<'a>(&mut self, mut data: &'a [u8], now: u64) -> &'a [u8] {
        while let Some(end) = memmem::find(data, FRAME_END) {
            self.frame(&data[..end], now);
            data = &data[end + FRAME_END.len()..];
        }
        data
    }

    fn frame(&mut self, frame: &[u8], now: u64) {
        if let Some(at) = memmem::find(frame, b"~T") {
            let digits = &frame[at + 2..];
            let end = digits.iter().position(|b| !b.is_ascii_digit()).unwrap_or(digits.len());
            if let Some(sent) = std::str::from_utf8(&digits[..end]).ok().and_then(|d| d.parse::<u64>().ok()) {
                self.latencies.push(now.saturating_sub(sent));
                self.first_token_at.get_or_insert(now);
            }
            return;
        }
        if self.direct {
            if memmem::find(frame, b"[DONE]").is_some() {
                self.complete = true;
                self.ended_at = Some(now);
            }
            return;
        }
        if frame.starts_with(b"event:heartbeat") {
            self.heartbeats += 1;
        } else if memmem::find(frame, b"\"type\":\"run.complete\"").is_some() {
            self.complete = true;
            self.ended_at = Some(now);
        } else if memmem::find(frame, b"\"type\":\"run.error\"").is_some() {
            let text = String::from_utf8_lossy(frame);
            let code = text.split("\"code\":\"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("?");
            self.run_error = Some(format!("run.error {code}"));
        }
    }

    /// `None` when the stream was a complete, successful run with every delta.
    pub fn verdict(&self, expected_tokens: usize) -> Option<String> {
        if let Some(error) = &self.run_error {
            return Some(error.clone());
        }
        if !self.complete {
            return Some("stream ended without terminal event".into());
        }
        if self.latencies.len() != expected_tokens {
            return Some(format!("{} of {expected_tokens} deltas", self.latencies.len()));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = concat!(
        "event:message\ndata:{\"seq\":1,\"type\":\"request.query\",\"message\":\"hi\"}\n\n",
        "event:heartbeat\n\n",
        "event:message\ndata:{\"seq\":5,\"type\":\"content.delta\",\"timestamp\":1,\"contentId\":\"r_c_1\",\"delta\":\"~T1000~\"}\n\n",
        "event:message\ndata:{\"seq\":6,\"type\":\"content.delta\",\"timestamp\":1,\"contentId\":\"r_c_1\",\"delta\":\"~T1500~\"}\n\n",
        "event:message\ndata:{\"seq\":7,\"type\":\"run.complete\",\"timestamp\":1,\"runId\":\"r\",\"finishReason\":\"stop\"}\n\n",
    );

    #[test]
    fn any_split_gives_the_same_result() {
        for split in 1..STREAM.len() {
            let mut scan = Scanner::new(false);
            for (i, chunk) in STREAM.as_bytes().chunks(split).enumerate() {
                scan.feed(chunk, 2000 + i as u64);
            }
            assert!(scan.complete, "split {split}");
            assert_eq!(scan.heartbeats, 1, "split {split}");
            assert_eq!(scan.latencies.len(), 2, "split {split}");
            assert_eq!(scan.verdict(2), None);
            assert!(scan.pending.is_empty());
        }
        let mut scan = Scanner::new(false);
        scan.feed(STREAM.as_bytes(), 3000);
        assert_eq!(scan.latencies, vec![2000, 1500]);
        assert_eq!(scan.verdict(3).as_deref(), Some("2 of 3 deltas"));
    }

    #[test]
    fn the_end_of_a_run_is_when_its_terminal_event_arrived() {
        let mut scan = Scanner::new(false);
        scan.feed(b"event:message\ndata:{\"type\":\"content.delta\",\"delta\":\"~T3~\"}\n\n", 5);
        assert_eq!(scan.ended_at, None);
        scan.feed(b"event:message\ndata:{\"type\":\"run.complete\"}\n\n", 8);
        assert_eq!(scan.ended_at, Some(8));
        let mut scan = Scanner::new(true);
        scan.feed(b"data: [DONE]\n\n", 11);
        assert_eq!(scan.ended_at, Some(11));
        // The fake model finds the run's number in the request body agw forwards.
        assert_eq!(crate::fixture::run_of(br#"{"content":"Tokyo? bench-run-42"}"#), Some(42));
        assert_eq!(crate::fixture::run_of(b"no marker"), None);
    }

    #[test]
    fn run_error_and_direct_mode() {
        let mut scan = Scanner::new(false);
        scan.feed(b"event:message\ndata:{\"type\":\"run.error\",\"error\":{\"code\":\"provider_error\"}}\n\n", 1);
        assert_eq!(scan.verdict(0).as_deref(), Some("run.error provider_error"));
        let mut scan = Scanner::new(true);
        scan.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"~T5~\"}}]}\n\ndata: [DONE]\n\n", 9);
        assert_eq!((scan.latencies.clone(), scan.verdict(1)), (vec![4], None));
    }
}
