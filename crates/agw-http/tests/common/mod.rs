//! Test harness: the real hyper service on loopback, wired to a scripted fixture provider.
//!
//! Chats are kept in JSONL files under each gateway's temp directory. With
//! `AGW_TEST_CHAT_STORE=postgres` and `AGW_TEST_DATABASE_URL=postgres://…` in the test process's
//! environment they are kept in PostgreSQL instead, each gateway in a schema of its own
//! (`agw_http_test_<pid>_<n>_<random>`, dropped when the gateway is); tests that look at the
//! stored chats go through the store ([`Gateway::history`]) or check [`Gateway::on_postgres`].

#![allow(dead_code)] // each test file uses a different subset

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use agw_http::Settings;
use agw_protocol::sse::SseDecoder;
use agw_testkit::FixtureServer;
use futures::StreamExt;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

/// The provider key test agents use; it points at the fixture server.
pub const FIXTURE_PROVIDER: &str = "fixture";
/// The key of the optional second fixture provider ([`Gateway::start_with_second_provider`]).
pub const SECOND_FIXTURE_PROVIDER: &str = "fixture2";

/// The key of the `ANTHROPIC` provider of [`Gateway::start_with_claude`].
pub const CLAUDE_PROVIDER: &str = "claude";
/// Its API key, as the fixture receives it in `x-api-key`.
pub const CLAUDE_API_KEY: &str = "sk-ant-e2e-secret";

/// A running gateway plus the fixture provider behind it.
pub struct Gateway {
    pub base: String,
    /// The server's state (catalog snapshots, stores) for tests that reach inside.
    pub state: agw_http::AppState,
    pub fixture: FixtureServer,
    /// A second fixture provider, named [`SECOND_FIXTURE_PROVIDER`], when the gateway was started
    /// with [`Gateway::start_with_second_provider`].
    pub fixture2: Option<FixtureServer>,
    pub client: reqwest::Client,
    pub agents_dir: PathBuf,
    /// Dropped first: stops the server before the schema goes.
    _stop: oneshot::Sender<()>,
    /// With `AGW_TEST_CHAT_STORE=postgres`: the schema that holds this gateway's chats (shared
    /// with gateways started on [`Gateway::store_env`]), dropped with the last of them.
    schema: Option<Arc<TestSchema>>,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.agents_dir);
    }
}

// -- the chat store under test -------------------------------------------------------------------

/// Whether this test process runs its gateways on PostgreSQL: `AGW_TEST_CHAT_STORE=postgres`
/// (with `AGW_TEST_DATABASE_URL`). Unset: the JSONL files of `MEMORY_CHAT_DIR`, as always.
pub fn postgres_requested() -> bool {
    match std::env::var("AGW_TEST_CHAT_STORE") {
        Ok(store) if store.trim().eq_ignore_ascii_case("postgres") => true,
        Ok(store) if store.trim().is_empty() || store.trim().eq_ignore_ascii_case("files") => false,
        Ok(other) => panic!("AGW_TEST_CHAT_STORE={other:?}: expected `postgres` or `files`"),
        Err(_) => false,
    }
}

fn test_database_url() -> String {
    std::env::var("AGW_TEST_DATABASE_URL").ok().filter(|url| !url.trim().is_empty()).unwrap_or_else(|| {
        panic!(
            "AGW_TEST_CHAT_STORE=postgres needs AGW_TEST_DATABASE_URL (e.g. \
             postgres://postgres@127.0.0.1:5432/test): the database in which each test gateway \
             gets a schema of its own"
        )
    })
}

/// Runs `f` with a fresh connection to `url` on a thread of its own: the synchronous client
/// must not run on a thread that drives async tasks (the test's runtime).
fn with_pg_client<T: Send + 'static>(
    url: &str,
    f: impl FnOnce(&mut postgres::Client) -> Result<T, postgres::Error> + Send + 'static,
) -> Result<T, String> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).map_err(|e| format!("connect: {e:?}"))?;
        f(&mut client).map_err(|e| format!("{e:?}"))
    })
    .join()
    .unwrap_or_else(|_| Err("the PostgreSQL client thread panicked".to_owned()))
}

/// One test schema: `agw_http_test_<pid>_<n>_<random>`, dropped (`CASCADE`) with the last
/// gateway that uses it.
struct TestSchema {
    url: String,
    name: String,
}

/// The schemas of live gateways by name, so that a gateway started on another's
/// [`Gateway::store_env`] shares (and keeps alive) the same one.
static SCHEMAS: Mutex<Option<HashMap<String, Weak<TestSchema>>>> = Mutex::new(None);
static NEXT_SCHEMA: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl TestSchema {
    /// A new, unique schema name (the store creates the schema when the gateway starts).
    fn fresh() -> Arc<TestSchema> {
        let n = NEXT_SCHEMA.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let random = uuid::Uuid::new_v4().simple().to_string();
        let name = format!("agw_http_test_{}_{n}_{}", std::process::id(), &random[..12]);
        let schema = Arc::new(TestSchema { url: test_database_url(), name: name.clone() });
        SCHEMAS.lock().unwrap().get_or_insert_with(HashMap::new).insert(name, Arc::downgrade(&schema));
        schema
    }

    /// The live test schema of that name (a gateway sharing another's chats).
    fn existing(name: &str) -> Option<Arc<TestSchema>> {
        SCHEMAS.lock().unwrap().as_ref().and_then(|all| all.get(name)).and_then(Weak::upgrade)
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        if let Ok(mut all) = SCHEMAS.lock()
            && let Some(all) = all.as_mut()
        {
            all.remove(&self.name);
        }
        let sql = format!("SET lock_timeout = '20s'; DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name);
        if let Err(e) = with_pg_client(&self.url, move |client| client.batch_execute(&sql)) {
            eprintln!("could not drop the test schema {}: {e}", self.name);
        }
    }
}

/// A ONESHOT agent on the fixture provider.
pub fn oneshot_agent(key: &str, reasoning: bool, model_timeout_ms: u64) -> (String, String) {
    let text = format!(
        r#"{{
  "key": "{key}",
  "mode": "ONESHOT",
  "modelConfig": {{ "providerKey": "{FIXTURE_PROVIDER}", "model": "fixture-model", "reasoning": {{ "enabled": {reasoning}, "effort": "HIGH" }} }},
  "budget": {{ "runTimeoutMs": 20000, "model": {{ "maxCalls": 3, "timeoutMs": {model_timeout_ms} }} }},
  "plain": {{ "systemPrompt": """
    You are a test agent.
  """ }}
}}"#
    );
    (format!("{key}.json"), text)
}

static NEXT_DIR: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

impl Gateway {
    /// Starts the gateway with these agent files and extra settings (`(ENV_NAME, value)`).
    pub async fn start(agents: &[(String, String)], env: &[(&str, &str)]) -> Gateway {
        Self::start_inner(agents, env, false).await
    }

    /// Like [`Gateway::start`], plus a second fixture provider named [`SECOND_FIXTURE_PROVIDER`]
    /// (in [`Gateway::fixture2`]).
    pub async fn start_with_second_provider(agents: &[(String, String)], env: &[(&str, &str)]) -> Gateway {
        Self::start_inner(agents, env, true).await
    }

    /// Like [`Gateway::start`], plus an Anthropic Messages API fixture (returned) configured as
    /// provider [`CLAUDE_PROVIDER`] (protocol `ANTHROPIC`, default model `claude-sonnet-4-5`).
    pub async fn start_with_claude(agents: &[(String, String)], env: &[(&str, &str)]) -> (Gateway, FixtureServer) {
        let claude = FixtureServer::start().await.expect("anthropic fixture");
        let base_url = claude.base_url();
        let mut vars = vec![
            ("AGENT_PROVIDERS_CLAUDE_BASE_URL", base_url.as_str()),
            ("AGENT_PROVIDERS_CLAUDE_API_KEY", CLAUDE_API_KEY),
            ("AGENT_PROVIDERS_CLAUDE_MODEL", "claude-sonnet-4-5"),
            ("AGENT_PROVIDERS_CLAUDE_PROTOCOL", "ANTHROPIC"),
        ];
        vars.extend_from_slice(env);
        (Self::start_inner(agents, &vars, false).await, claude)
    }

    /// Like [`Gateway::start`], with `script` run on the fixture before the gateway starts: for
    /// a run the start itself continues (a restored wait that expired, a resumed run), whose
    /// model request may come before the test could script it afterwards.
    pub async fn start_scripted(
        agents: &[(String, String)],
        env: &[(&str, &str)],
        script: impl FnOnce(&FixtureServer),
    ) -> Gateway {
        Self::start_inner_scripted(agents, env, false, script).await
    }

    async fn start_inner(agents: &[(String, String)], env: &[(&str, &str)], second: bool) -> Gateway {
        Self::start_inner_scripted(agents, env, second, |_| {}).await
    }

    async fn start_inner_scripted(
        agents: &[(String, String)],
        env: &[(&str, &str)],
        second: bool,
        script: impl FnOnce(&FixtureServer),
    ) -> Gateway {
        let fixture = FixtureServer::start().await.expect("fixture server");
        script(&fixture);
        let fixture2 = if second { Some(FixtureServer::start().await.expect("second fixture server")) } else { None };
        let agents_dir = std::env::temp_dir().join(format!(
            "agw-http-test-{}-{}",
            std::process::id(),
            NEXT_DIR.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&agents_dir).unwrap();
        for (name, text) in agents {
            std::fs::write(agents_dir.join(name), text).unwrap();
        }
        let mut vars: Vec<(String, String)> = vec![
            ("SERVER_PORT".into(), "0".into()),
            ("AGENT_EXTERNAL_DIR".into(), agents_dir.display().to_string()),
            ("MEMORY_CHAT_DIR".into(), agents_dir.join("chats").display().to_string()),
            ("AGENT_DATA_EXTERNAL_DIR".into(), agents_dir.join("data").display().to_string()),
            ("MEMORY_CHAT_FSYNC".into(), "never".into()),
            // `_bash_` works in a directory of the test's own, not in the crate directory.
            ("AGENT_BASH_WORKING_DIRECTORY".into(), agents_dir.join("bash").display().to_string()),
            // Tests choose their own agents; no bundled demos copied next to them.
            ("AGW_RESOURCES_SYNC_BUNDLED".into(), "false".into()),
        ];
        let schema = if postgres_requested() {
            // A test that names the schema (a restart on another gateway's chats) shares it.
            let named = env.iter().find(|(k, _)| *k == "AGW_DATABASE_SCHEMA").map(|(_, v)| *v);
            let schema = named.and_then(TestSchema::existing).unwrap_or_else(TestSchema::fresh);
            vars.push(("AGW_DATABASE_URL".into(), schema.url.clone()));
            vars.push(("AGW_DATABASE_SCHEMA".into(), schema.name.clone()));
            Some(schema)
        } else {
            None
        };
        vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let mut settings = Settings::load(None, vars).expect("settings");
        settings.providers.push(fixture.provider_config(FIXTURE_PROVIDER));
        if let Some(second) = &fixture2 {
            settings.providers.push(second.provider_config(SECOND_FIXTURE_PROVIDER));
        }
        let state = agw_http::build_state(settings).expect("state");
        let gateway = agw_http::Gateway::from_state(state.clone(), agw_http::Reload::Off).await.expect("start");
        let server = gateway.bind().await.expect("bind");
        let base = format!("http://{}", server.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(server.run(async move {
            let _ = stopped.await;
        }));
        Gateway { base, state, fixture, fixture2, client: reqwest::Client::new(), agents_dir, schema, _stop: stop }
    }

    /// Whether this gateway keeps its chats in PostgreSQL (`AGW_TEST_CHAT_STORE=postgres`).
    pub fn on_postgres(&self) -> bool {
        self.state.runs.chat_store().backend_name() == "postgres"
    }

    /// The settings that start another gateway on this one's chats (as after a restart): its
    /// chat directory, and on PostgreSQL its schema.
    pub fn store_env(&self) -> Vec<(&'static str, String)> {
        let mut vars = vec![("MEMORY_CHAT_DIR", self.state.runs.chat_store().config().dir.display().to_string())];
        if let Some(schema) = &self.schema {
            vars.push(("AGW_DATABASE_SCHEMA", schema.name.clone()));
        }
        vars
    }

    /// Runs a query on this gateway's PostgreSQL schema (`{schema}` in `sql` is replaced by the
    /// quoted schema name) on a client of its own, off the async thread. Panics on files.
    pub fn pg_query(&self, sql: &str) -> Vec<postgres::Row> {
        let schema = self.schema.as_ref().expect("pg_query: the gateway is not on PostgreSQL");
        let sql = sql.replace("{schema}", &format!("\"{}\"", schema.name));
        with_pg_client(&schema.url, move |client| client.query(&sql, &[]))
            .unwrap_or_else(|e| panic!("query on the test schema: {e}"))
    }

    /// [`agw_memory::ChatStore::read_lines`] of the gateway's store, on a blocking thread (the
    /// PostgreSQL store must not be called on the async test thread).
    pub async fn history(&self, chat_id: &str) -> Vec<agw_protocol::history::HistoryLine> {
        let (store, id) = (self.state.runs.chat_store().clone(), chat_id.to_owned());
        tokio::task::spawn_blocking(move || store.read_lines(&id)).await.unwrap().expect("read the chat's history")
    }

    /// [`Gateway::history`], each line as the JSON object the store keeps.
    pub async fn history_json(&self, chat_id: &str) -> Vec<Value> {
        self.history(chat_id)
            .await
            .iter()
            .map(|line| serde_json::from_str(&line.to_json().expect("encode a history line")).unwrap())
            .collect()
    }

    /// [`agw_memory::ChatStore::waiting_runs`] of the gateway's store, on a blocking thread.
    pub async fn waiting_runs(&self) -> Vec<(String, String)> {
        let store = self.state.runs.chat_store().clone();
        tokio::task::spawn_blocking(move || store.waiting_runs()).await.unwrap().expect("list the waiting runs")
    }

    pub async fn post_query(&self, body: &Value) -> reqwest::Response {
        self.client.post(format!("{}/api/ap/query", self.base)).json(body).send().await.expect("query request")
    }

    pub async fn post_raw(&self, body: impl Into<reqwest::Body>) -> reqwest::Response {
        self.client
            .post(format!("{}/api/ap/query", self.base))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("query request")
    }

    pub async fn get_json(&self, path: &str) -> (u16, Value) {
        let resp = self.client.get(format!("{}{path}", self.base)).send().await.expect("get");
        let status = resp.status().as_u16();
        (status, resp.json().await.expect("json body"))
    }

    /// Posts a query and reads the whole SSE stream.
    pub async fn run(&self, body: &Value) -> Stream {
        let resp = self.post_query(body).await;
        assert_eq!(resp.status(), 200, "query must stream");
        read_stream(resp).await
    }
}

/// One frame as the client saw it.
#[derive(Debug, Clone)]
pub struct Received {
    pub at: Instant,
    /// `None` for heartbeats.
    pub event: Option<Value>,
}

#[derive(Debug, Default)]
pub struct Stream {
    pub frames: Vec<Received>,
}

impl Stream {
    pub fn events(&self) -> Vec<&Value> {
        self.frames.iter().filter_map(|f| f.event.as_ref()).collect()
    }
    pub fn types(&self) -> Vec<String> {
        self.events().iter().map(|e| e["type"].as_str().unwrap_or("?").to_string()).collect()
    }
    pub fn of_type(&self, ty: &str) -> Vec<&Value> {
        self.events().into_iter().filter(|e| e["type"] == ty).collect()
    }
    pub fn last(&self) -> &Value {
        self.events().last().copied().expect("at least one event")
    }
    pub fn heartbeats(&self) -> usize {
        self.frames.iter().filter(|f| f.event.is_none()).count()
    }
}

/// Reads SSE frames until the response ends, stamping each with its arrival time.
pub async fn read_stream(resp: reqwest::Response) -> Stream {
    let mut out = Stream::default();
    let mut decoder = SseDecoder::default();
    let mut body = resp.bytes_stream();
    let mut frames = Vec::new();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), body.next()).await.expect("stream stalled") {
        let chunk = chunk.expect("body chunk");
        let at = Instant::now();
        decoder.feed(&chunk, &mut frames);
        for frame in frames.drain(..) {
            let event =
                if frame.is_heartbeat() { None } else { Some(serde_json::from_str(&frame.data).expect("event JSON")) };
            out.frames.push(Received { at, event });
        }
    }
    out
}

/// Reads a live SSE response event by event (for tests that act in the middle of a stream).
pub struct LiveStream {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Send>>,
    decoder: SseDecoder,
    pending: std::collections::VecDeque<Value>,
    pub seen: Vec<Value>,
}

impl LiveStream {
    pub fn new(resp: reqwest::Response) -> Self {
        Self {
            body: Box::pin(resp.bytes_stream()),
            decoder: SseDecoder::default(),
            pending: Default::default(),
            seen: Vec::new(),
        }
    }

    /// The next event (heartbeats skipped); `None` at the end of the response.
    pub async fn next_event(&mut self) -> Option<Value> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                self.seen.push(e.clone());
                return Some(e);
            }
            let chunk =
                tokio::time::timeout(Duration::from_secs(10), self.body.next()).await.expect("stream stalled")?;
            let mut frames = Vec::new();
            self.decoder.feed(&chunk.expect("body chunk"), &mut frames);
            for f in frames.into_iter().filter(|f| !f.is_heartbeat()) {
                self.pending.push_back(serde_json::from_str(&f.data).expect("event JSON"));
            }
        }
    }

    /// Reads until an event satisfies `pred`, returning it.
    pub async fn until(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        while let Some(e) = self.next_event().await {
            if pred(&e) {
                return e;
            }
        }
        panic!(
            "stream ended before the expected event; saw {:?}",
            self.seen.iter().map(|e| e["type"].clone()).collect::<Vec<_>>()
        );
    }

    /// Reads to the end.
    pub async fn rest(&mut self) -> Vec<Value> {
        while self.next_event().await.is_some() {}
        self.seen.clone()
    }
}

// -- chat memory checks (reliability, soak) ------------------------------------------------------

/// What [`assert_chat_files_valid`] found on disk.
#[derive(Debug, Default)]
pub struct ChatFiles {
    /// Chat ids with a history file.
    pub chats: Vec<String>,
    /// History lines read, all of them valid.
    pub lines: usize,
    /// `(chatId, runId)` of every run with at least one line.
    pub runs: std::collections::BTreeSet<(String, String)>,
    /// Chats with a record in the chat index (`_chats.jsonl`; an upsert appends a newer copy
    /// of a record, which readers collapse onto the first).
    pub index_records: usize,
}

/// Checks the gateway's chat memory directory as a reader would: every history file ends with a
/// complete line and every line is a valid query/step line of its own chat; every index line is
/// a JSON object with a `chatId`. Panics naming the file and line otherwise.
///
/// On PostgreSQL the same checks run over the schema's rows, as stored: every `history` row is
/// one valid query/step line of the chat it is filed under, every `chats` record a JSON object
/// naming its own chat.
pub fn assert_chat_files_valid(gw: &Gateway) -> ChatFiles {
    use agw_protocol::history::HistoryLine;

    if gw.on_postgres() {
        return assert_chat_rows_valid(gw);
    }
    let dir = gw.state.runs.chat_store().config().dir.clone();
    let mut out = ChatFiles::default();
    let Ok(entries) = std::fs::read_dir(&dir) else { return out };
    // Files only: `_waiting/` holds the marks of runs that wait for a person.
    let mut paths: Vec<PathBuf> = entries.filter_map(Result::ok).map(|e| e.path()).filter(|p| p.is_file()).collect();
    paths.sort();
    for path in paths {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
        if name == "_chats.jsonl" {
            assert!(text.is_empty() || text.ends_with('\n'), "the chat index ends with a torn line: {:?}", tail(&text));
            let mut ids = std::collections::HashSet::new();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let record: Value =
                    serde_json::from_str(line).unwrap_or_else(|e| panic!("index line {line:?} is not JSON: {e}"));
                let id = record["chatId"].as_str().unwrap_or_else(|| panic!("index record without chatId: {line}"));
                ids.insert(id.to_owned());
            }
            out.index_records = ids.len();
            continue;
        }
        let Some(chat_id) = name.strip_suffix(".json") else { continue };
        assert!(text.is_empty() || text.ends_with('\n'), "{name} ends with a torn line: {:?}", tail(&text));
        for (n, line) in text.lines().enumerate() {
            let parsed = HistoryLine::parse(line)
                .unwrap_or_else(|e| panic!("{name} line {}: not a valid history line ({e}): {line}", n + 1))
                .unwrap_or_else(|| panic!("{name} line {}: not a query/step line: {line}", n + 1));
            assert_eq!(parsed.chat_id(), chat_id, "{name} line {} belongs to another chat", n + 1);
            out.runs.insert((chat_id.to_string(), parsed.run_id().to_string()));
            out.lines += 1;
        }
        out.chats.push(chat_id.to_string());
    }
    out
}

/// [`assert_chat_files_valid`] on PostgreSQL.
fn assert_chat_rows_valid(gw: &Gateway) -> ChatFiles {
    use agw_protocol::history::HistoryLine;

    let mut out = ChatFiles::default();
    let mut chats = std::collections::BTreeSet::new();
    for row in gw.pg_query("SELECT chat_id, line FROM {schema}.history ORDER BY id") {
        let (chat_id, line): (String, String) = (row.get(0), row.get(1));
        assert!(!line.contains('\n'), "a history row of {chat_id} holds more than one line: {line}");
        let parsed = HistoryLine::parse(&line)
            .unwrap_or_else(|e| panic!("history row of {chat_id}: not a valid history line ({e}): {line}"))
            .unwrap_or_else(|| panic!("history row of {chat_id}: not a query/step line: {line}"));
        assert_eq!(parsed.chat_id(), chat_id, "a history row filed under {chat_id} belongs to another chat: {line}");
        out.runs.insert((chat_id.clone(), parsed.run_id().to_string()));
        out.lines += 1;
        chats.insert(chat_id);
    }
    out.chats = chats.into_iter().collect();
    for row in gw.pg_query("SELECT chat_id, record FROM {schema}.chats") {
        let (chat_id, record): (String, String) = (row.get(0), row.get(1));
        let parsed: Value =
            serde_json::from_str(&record).unwrap_or_else(|e| panic!("index record {record:?} is not JSON: {e}"));
        assert_eq!(parsed["chatId"], chat_id.as_str(), "index record filed under {chat_id}: {record}");
        out.index_records += 1;
    }
    out
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(80);
    let start = (start..text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
    &text[start..]
}

/// `GET /api/ap/chat?chatId=…` answers 200 with replay events numbered 1..N; returns them.
pub async fn assert_chat_replayable(gw: &Gateway, chat_id: &str) -> Vec<Value> {
    let (status, body) = gw.get_json(&format!("/api/ap/chat?chatId={chat_id}")).await;
    assert_eq!(status, 200, "replay of {chat_id}: {body}");
    assert_eq!(body["code"], 0, "replay of {chat_id}: {body}");
    let events = body["data"]["events"].as_array().cloned().unwrap_or_default();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(event["seq"], i as u64 + 1, "replay of {chat_id}: seq must be 1..N: {event}");
    }
    events
}

// -- process resources (Linux /proc) -------------------------------------------------------------

/// Resident set size of this process in bytes (`VmRSS`), 0 where /proc is not available.
pub fn rss_bytes() -> u64 {
    proc_status_bytes("VmRSS:")
}

/// The anonymous part of the resident set (heap, stacks): RSS without the pages of the mapped
/// binary, which grow as more of its code runs and say nothing about memory use.
pub fn rss_anon_bytes() -> u64 {
    proc_status_bytes("RssAnon:")
}

fn proc_status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Open file descriptors of this process (entries of `/proc/self/fd`), 0 where not available.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |entries| entries.count())
}

pub type Webhooks = Arc<Mutex<Vec<(Vec<(String, String)>, String)>>>;

/// A minimal HTTP receiver (webhook target): records each request's headers and body, answers 200 after `delay`.
pub async fn webhook_receiver(delay: Duration) -> (String, Webhooks) {
    let received: Webhooks = Arc::default();
    let log = received.clone();
    let url = http_receiver(move |headers, body| {
        log.lock().unwrap().push((headers, body));
        (delay, String::new())
    })
    .await;
    (url, received)
}

/// A minimal HTTP server on loopback: each request's headers (lower-case names) and body go to
/// `respond`, which says how long to wait and what body to answer with (200, JSON).
pub async fn http_receiver(
    respond: impl Fn(Vec<(String, String)>, String) -> (Duration, String) + Send + Sync + 'static,
) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let respond = Arc::new(respond);
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let respond = respond.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body) = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if body.len() >= len {
                            break (head.to_string(), body.to_string());
                        }
                    }
                };
                let headers = head
                    .lines()
                    .skip(1)
                    .filter_map(|l| {
                        l.split_once(':').map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                    })
                    .collect();
                let (delay, answer) = respond(headers, body);
                tokio::time::sleep(delay).await;
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = sock.write_all(reply.as_bytes()).await;
            });
        }
    });
    url
}

pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("")
}

// -- whole chats: deletion, fork, retention ------------------------------------------------------

/// A REACT agent `ask` whose run waits for its frontend tool `confirm_dialog` (a run that waits
/// for a person).
pub fn ask_agent() -> (String, String) {
    let text = r#"{"key":"ask","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m"},
        "toolConfig":{"frontends":["confirm_dialog"]},"react":{"systemPrompt":"You ask.","maxSteps":3}}"#;
    ("ask.json".into(), text.into())
}

impl Gateway {
    /// Answers a waiting frontend tool call (`POST /api/ap/submit`) and checks it was accepted.
    pub async fn submit_accepted(&self, run_id: &str, tool_id: &str, params: Value) {
        let resp = self
            .client
            .post(format!("{}/api/ap/submit", self.base))
            .json(&serde_json::json!({"runId": run_id, "toolId": tool_id, "params": params}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.json::<Value>().await.unwrap()["data"]["accepted"], true);
    }

    /// Whether the store keeps anything of the chat: its history file or index record (files),
    /// its rows in `history`, `chats` or `waiting` (PostgreSQL).
    pub fn stored_anywhere(&self, chat_id: &str) -> bool {
        if self.on_postgres() {
            let count = |table: &str| -> i64 {
                self.pg_query(&format!("SELECT count(*) FROM {{schema}}.{table} WHERE chat_id = '{chat_id}'"))[0].get(0)
            };
            return count("history") + count("chats") + count("waiting") > 0;
        }
        let path = self.state.runs.chat_store().history_path(chat_id).unwrap();
        let index = std::fs::read_to_string(path.with_file_name("_chats.jsonl")).unwrap_or_default();
        path.exists() || index.lines().any(|l| l.contains(chat_id) && !l.contains(r#""deleted":true"#))
    }
}
