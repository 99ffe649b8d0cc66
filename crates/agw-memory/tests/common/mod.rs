//! Shared test helpers: a temporary directory, the storages of both backends (files, and a
//! PostgreSQL schema of its own when `AGW_TEST_DATABASE_URL` is set), a scripted run (assembler +
//! recorder on one clock), and a log capture for warnings.

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

/// The variable naming the PostgreSQL database of the store tests (CI:
/// `postgres://postgres@127.0.0.1:5432/test`).
pub const DATABASE_URL_VAR: &str = "AGW_TEST_DATABASE_URL";

/// The test database's URL; `None` (with a note on stderr) when the variable is unset.
pub fn pg_url() -> Option<String> {
    let url = std::env::var(DATABASE_URL_VAR).ok().filter(|u| !u.trim().is_empty());
    if url.is_none() {
        eprintln!("skipped: {DATABASE_URL_VAR} is not set (PostgreSQL store tests)");
    }
    url
}

/// Where a test's chats are kept: a fresh directory, or a fresh PostgreSQL schema. Either is
/// removed when dropped.
pub enum Storage {
    Files(TempDir),
    #[cfg(feature = "postgres")]
    Postgres(PgSchema),
}

/// A fresh storage of each backend: files, and PostgreSQL when the `postgres` feature is on and
/// `AGW_TEST_DATABASE_URL` is set.
pub fn storages() -> Vec<Storage> {
    #[allow(unused_mut)]
    let mut out = vec![Storage::Files(TempDir::new())];
    #[cfg(feature = "postgres")]
    if let Some(url) = pg_url() {
        out.push(Storage::Postgres(PgSchema::new(&url)));
    }
    out
}

impl Storage {
    pub fn name(&self) -> &'static str {
        match self {
            Storage::Files(_) => "files",
            #[cfg(feature = "postgres")]
            Storage::Postgres(_) => "postgres",
        }
    }

    /// A store on this storage (another "process" or "replica" when called again).
    pub fn open(&self, k: usize, action_tools: &[&str]) -> ChatStore {
        eprintln!("backend: {}", self.name());
        match self {
            Storage::Files(dir) => store_in(dir.path(), k, action_tools),
            #[cfg(feature = "postgres")]
            Storage::Postgres(schema) => schema.open(k, action_tools),
        }
    }

    /// The chat's history as stored, one string per line (files: the file's lines; PostgreSQL:
    /// the rows in order).
    pub fn raw_lines(&self, chat_id: &str) -> Vec<String> {
        match self {
            Storage::Files(dir) => std::fs::read_to_string(dir.path().join(format!("{chat_id}.json")))
                .map(|text| text.lines().map(str::to_owned).collect())
                .unwrap_or_default(),
            #[cfg(feature = "postgres")]
            Storage::Postgres(schema) => schema.raw_lines(chat_id),
        }
    }

    /// Replaces the chat's history with `text` as it would be on disk (files: the file's bytes;
    /// PostgreSQL: one row per line — an empty text is one blank row, so the chat has history
    /// as an empty file gives it).
    pub fn write_raw(&self, chat_id: &str, text: &str) {
        match self {
            Storage::Files(dir) => std::fs::write(dir.path().join(format!("{chat_id}.json")), text).expect("write"),
            #[cfg(feature = "postgres")]
            Storage::Postgres(schema) => schema.write_raw(chat_id, text),
        }
    }

    /// The index as stored (files: the lines of `_chats.jsonl`, none when it is missing;
    /// PostgreSQL: the records of `chats` in the order the chats were first written).
    pub fn index_lines(&self) -> Vec<String> {
        match self {
            Storage::Files(dir) => std::fs::read_to_string(dir.path().join("_chats.jsonl"))
                .map(|text| text.lines().map(str::to_owned).collect())
                .unwrap_or_default(),
            #[cfg(feature = "postgres")]
            Storage::Postgres(schema) => schema.index_lines(),
        }
    }

    /// Seeds the index with these record lines, as an older or hand-edited index would have
    /// them (files: the file; PostgreSQL: one row per line, in order).
    pub fn seed_index(&self, lines: &[String]) {
        match self {
            Storage::Files(dir) => {
                let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
                std::fs::write(dir.path().join("_chats.jsonl"), text).expect("seed")
            }
            #[cfg(feature = "postgres")]
            Storage::Postgres(schema) => schema.seed_index(lines),
        }
    }
}

/// A PostgreSQL schema of its own on the test database (`agw_test_<uuid>`), dropped on drop.
#[cfg(feature = "postgres")]
pub struct PgSchema {
    pub url: String,
    pub name: String,
}

#[cfg(feature = "postgres")]
impl PgSchema {
    pub fn new(url: &str) -> Self {
        Self { url: url.to_owned(), name: format!("agw_test_{}", uuid::Uuid::new_v4().simple()) }
    }

    pub fn config(&self) -> agw_memory::PgConfig {
        agw_memory::PgConfig {
            url: self.url.clone(),
            schema: self.name.clone(),
            pool_size: 4,
            connect_timeout: std::time::Duration::from_secs(5),
        }
    }

    /// A store (a "replica") on this schema; the first one creates the schema.
    pub fn open(&self, k: usize, action_tools: &[&str]) -> ChatStore {
        let config = MemoryConfig {
            dir: PathBuf::from("/nonexistent/agw-memory-pg-test"),
            k,
            fsync: FsyncPolicy::EveryRun,
            action_tools: action_tools.iter().map(|s| (*s).to_owned()).collect(),
        };
        ChatStore::postgres(config, self.config()).expect("connect to the test database")
    }

    /// A plain client on the test database (for looking at rows).
    pub fn client(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).expect("connect to the test database")
    }

    pub fn table(&self, table: &str) -> String {
        format!("\"{}\".{table}", self.name)
    }

    pub fn raw_lines(&self, chat_id: &str) -> Vec<String> {
        let sql = format!("SELECT line FROM {} WHERE chat_id = $1 ORDER BY id", self.table("history"));
        self.client().query(&sql, &[&chat_id]).expect("history").iter().map(|r| r.get(0)).collect()
    }

    /// Makes the schema and its tables (opening a store does).
    pub fn ensure(&self) {
        drop(self.open(1, &[]));
    }

    pub fn write_raw(&self, chat_id: &str, text: &str) {
        self.ensure();
        let mut client = self.client();
        let mut tx = client.transaction().expect("begin");
        tx.execute(&format!("DELETE FROM {} WHERE chat_id = $1", self.table("history")), &[&chat_id]).expect("delete");
        let mut lines: Vec<&str> = text.split('\n').collect();
        if lines.len() > 1 && lines.last() == Some(&"") {
            lines.pop();
        }
        let insert = format!("INSERT INTO {} (chat_id, line) VALUES ($1, $2)", self.table("history"));
        for line in lines {
            tx.execute(&insert, &[&chat_id, &line]).expect("insert");
        }
        tx.commit().expect("commit");
    }

    pub fn index_lines(&self) -> Vec<String> {
        let sql = format!("SELECT record FROM {} ORDER BY seq", self.table("chats"));
        self.client().query(&sql, &[]).expect("chats").iter().map(|r| r.get(0)).collect()
    }

    /// Each line becomes the record of the chat it names (`updated_at` from its `updatedAt`,
    /// 0 without one); lines without a chat id are left out.
    pub fn seed_index(&self, lines: &[String]) {
        self.ensure();
        let mut client = self.client();
        let insert = format!("INSERT INTO {} (chat_id, record, updated_at) VALUES ($1, $2, $3)", self.table("chats"));
        for line in lines {
            let value: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
            let Some(chat_id) = value.get("chatId").and_then(|v| v.as_str()) else { continue };
            let updated_at = value.get("updatedAt").and_then(|v| v.as_i64()).unwrap_or(0);
            client.execute(&insert, &[&chat_id, line, &updated_at]).expect("seed");
        }
    }
}

#[cfg(feature = "postgres")]
impl Drop for PgSchema {
    fn drop(&mut self) {
        let dropped = postgres::Client::connect(&self.url, postgres::NoTls)
            .and_then(|mut client| client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name)));
        if let Err(error) = dropped {
            eprintln!("could not drop the test schema {}: {error}", self.name);
        }
    }
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
