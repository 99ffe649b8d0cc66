//! Shared by the binary's tests: reading an SSE response event by event.

#![allow(dead_code)] // each test binary uses a different subset

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agw_protocol::sse::SseDecoder;
use serde_json::{Value, json};

/// SSE events of one response, read one at a time (heartbeats skipped; a frame whose data is
/// not an event, e.g. `event:error`, becomes `{"type": <event name>, "raw": <data>}`).
pub struct Events {
    pub resp: reqwest::Response,
    decoder: SseDecoder,
    pending: std::collections::VecDeque<Value>,
    /// Every event handed out so far.
    pub seen: Vec<Value>,
}

impl Events {
    pub fn new(resp: reqwest::Response) -> Self {
        Self { resp, decoder: SseDecoder::new(), pending: Default::default(), seen: Vec::new() }
    }

    /// The next event; `None` when the response ended. Panics when nothing arrives for 20 s.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.seen.push(event.clone());
                return Some(event);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.resp.chunk())
                .await
                .expect("stream stalled")
                .expect("body chunk")?;
            let mut frames = Vec::new();
            self.decoder.feed(&chunk, &mut frames);
            for frame in frames.into_iter().filter(|f| !f.is_heartbeat()) {
                match serde_json::from_str(&frame.data) {
                    Ok(event) => self.pending.push_back(event),
                    Err(_) => self.pending.push_back(json!({"type": frame.event, "raw": frame.data})),
                }
            }
        }
    }

    /// The next event; `None` when the response ended or its connection broke (a server that
    /// stopped). Panics when nothing arrives for 20 s.
    #[allow(dead_code)]
    pub async fn next_or_end(&mut self) -> Option<Value> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                self.seen.push(event.clone());
                return Some(event);
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.resp.chunk()).await.expect("stream stalled");
            let chunk = chunk.ok()??;
            let mut frames = Vec::new();
            self.decoder.feed(&chunk, &mut frames);
            for frame in frames.into_iter().filter(|f| !f.is_heartbeat()) {
                if let Ok(event) = serde_json::from_str(&frame.data) {
                    self.pending.push_back(event);
                }
            }
        }
    }

    /// Reads up to and including the first event of type `ty`.
    pub async fn until(&mut self, ty: &str) -> Value {
        loop {
            let event =
                self.next().await.unwrap_or_else(|| panic!("stream ended before {ty}: {:?}", types(&self.seen)));
            if event["type"] == ty {
                return event;
            }
        }
    }

    /// Reads to the end; every event of the response.
    pub async fn all(mut self) -> Vec<Value> {
        while self.next().await.is_some() {}
        self.seen
    }
}

/// The `type` of each event.
pub fn types(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["type"].as_str().unwrap_or("?").to_owned()).collect()
}

/// One `agw serve` process, started with `--port 0`; killed on drop.
pub struct Agw {
    pub child: Child,
    /// `http://127.0.0.1:<port>`, from the line it prints once listening.
    pub base: String,
}

impl Agw {
    /// Spawns `cmd` (an `agw serve --port 0` command) with stdout piped and waits for its
    /// "listening" line.
    pub fn spawn(cmd: &mut Command) -> Agw {
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn agw");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("read listening line");
        let base = line
            .trim()
            .strip_prefix("agw listening on ")
            .unwrap_or_else(|| panic!("agw did not start: {line:?}"))
            .to_owned();
        Agw { child, base }
    }

    /// SIGKILL (what `Child::kill` sends on Unix): no shutdown code runs.
    pub fn kill(&mut self) {
        self.child.kill().expect("kill agw");
        let status = self.child.wait().expect("reap agw");
        assert!(!status.success(), "killed, not exited: {status:?}");
    }
}

impl Drop for Agw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
