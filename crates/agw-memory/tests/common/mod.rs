//! Shared test helpers: a temporary directory, a scripted run (assembler + recorder on one
//! clock), and a log capture for warnings.

#![allow(dead_code)] // each test binary uses a different subset

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use agw_memory::{ChatStore, FsyncPolicy, MemoryConfig, Recorder, RecorderInit};
use agw_protocol::event::ChatStart;
use agw_protocol::history::{HistoryLine, PendingStep, SystemSnapshot};
use agw_protocol::request::QueryRequest;
use agw_protocol::{AgentDelta, Assembler, Event, RunErrorInfo};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let path = std::env::temp_dir().join(format!("agw-memory-test-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        Self(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn store_in(dir: &Path, k: usize, action_tools: &[&str]) -> ChatStore {
    ChatStore::new(MemoryConfig {
        dir: dir.to_owned(),
        k,
        fsync: FsyncPolicy::Never,
        action_tools: action_tools.iter().map(|s| (*s).to_owned()).collect(),
    })
}

pub fn query(message: &str) -> QueryRequest {
    QueryRequest { message: Some(message.to_owned()), ..QueryRequest::default() }
}

/// One scripted run: every call sets the clock, pushes a delta through the assembler and feeds
/// the recorder with the delta and the events it produced. The recorder reads the same clock,
/// except that values queued with [`Self::flush_times`] are returned first (flushes read the
/// clock twice: flush time, then `updatedAt`).
pub struct Run {
    now: Arc<AtomicI64>,
    queued: Arc<Mutex<VecDeque<i64>>>,
    asm: Assembler,
    pub recorder: Recorder,
    resume: Box<dyn Fn(i64, PendingStep) -> Recorder>,
    /// Every live event, bootstrap included.
    pub events: Vec<Event>,
    /// Every line the recorder returned, in order.
    pub lines: Vec<HistoryLine>,
}

impl Run {
    pub fn new(
        chat_id: &str,
        run_id: &str,
        query: QueryRequest,
        system: Option<SystemSnapshot>,
        action_tools: &[&str],
    ) -> Self {
        let now = Arc::new(AtomicI64::new(1_000));
        let queued = Arc::new(Mutex::new(VecDeque::new()));
        let asm_now = Arc::clone(&now);
        let asm = Assembler::new(run_id, chat_id, Box::new(move || asm_now.load(Ordering::SeqCst)));
        let (rec_now, rec_queue) = (Arc::clone(&now), Arc::clone(&queued));
        let clock = move || {
            let queued = rec_queue.lock().expect("queue").pop_front();
            queued.unwrap_or_else(|| rec_now.load(Ordering::SeqCst))
        };
        let init = RecorderInit {
            chat_id: chat_id.to_owned(),
            run_id: run_id.to_owned(),
            query,
            system,
            action_tools: action_tools.iter().map(|s| (*s).to_owned()).collect(),
        };
        let recorder = Recorder::with_clock(init.clone(), Box::new(clock.clone()));
        let resume = Box::new(move |steps: i64, step: PendingStep| {
            Recorder::resumed(init.clone(), Box::new(clock.clone()), steps, step)
        });
        Self { now, queued, asm, recorder, resume, events: Vec::new(), lines: Vec::new() }
    }

    /// Replaces the recorder by one that continues from a checkpoint (a new process), on the
    /// same clock.
    pub fn resume_recorder(&mut self, steps_written: i64, step: PendingStep) {
        self.recorder = (self.resume)(steps_written, step);
    }

    pub fn bootstrap(&mut self, ts: i64, request: &QueryRequest, new_chat: bool) {
        self.now.store(ts, Ordering::SeqCst);
        let chat_id = self.asm.chat_id().to_owned();
        let query = request.to_event(self.asm.run_id(), &chat_id);
        let chat_start = new_chat.then(|| ChatStart { chat_id, chat_name: "chat".into() });
        self.asm.bootstrap(query, chat_start, &mut self.events);
    }

    /// The next flush reads these clock values first.
    pub fn flush_times(&mut self, times: &[i64]) {
        self.queued.lock().expect("queue").extend(times.iter().copied());
    }

    /// Pushes a delta at `ts`; returns the lines the recorder produced for it.
    pub fn push(&mut self, ts: i64, delta: AgentDelta) -> Vec<HistoryLine> {
        self.now.store(ts, Ordering::SeqCst);
        let before = self.events.len();
        self.asm.push(delta.clone(), &mut self.events).expect("delta accepted");
        let lines = self.recorder.observe(&delta, &self.events[before..]);
        self.lines.extend(lines.iter().cloned());
        lines
    }

    pub fn complete(&mut self, ts: i64) -> Vec<HistoryLine> {
        self.now.store(ts, Ordering::SeqCst);
        let before = self.events.len();
        self.asm.complete("stop", &mut self.events);
        self.finish_with(before)
    }

    pub fn fail(&mut self, ts: i64, error: RunErrorInfo) -> Vec<HistoryLine> {
        self.now.store(ts, Ordering::SeqCst);
        let before = self.events.len();
        self.asm.fail(error, &mut self.events);
        self.finish_with(before)
    }

    fn finish_with(&mut self, before: usize) -> Vec<HistoryLine> {
        let lines = self.recorder.finish(&self.events[before..]);
        self.lines.extend(lines.iter().cloned());
        lines
    }

    /// The lines as they would be written (compact JSON, one per line).
    pub fn jsonl(&self) -> Vec<String> {
        self.lines.iter().map(|l| l.to_json().expect("serialise")).collect()
    }
}

/// Captures `tracing` output of `f` as text.
pub fn capture_logs<T>(f: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log buffer").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::DEBUG)
        .finish();
    let result = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8_lossy(&buffer.0.lock().expect("log buffer")).into_owned();
    (result, text)
}
