//! The PostgreSQL store (feature `postgres`) against a real server: what the file store's crash
//! tests promise, in database terms (an append is all or nothing, a commit is visible to other
//! replicas, an unreachable server is an error within the timeout), replicas racing on one
//! schema, use from `spawn_blocking`, and the migration of a JSONL directory.
//!
//! The server is `AGW_TEST_DATABASE_URL` (CI: `postgres://postgres@127.0.0.1:5432/test`); without
//! it each test says so on stderr and passes. Each test works in a schema of its own, dropped at
//! the end. The backend-neutral store and index tests run against PostgreSQL too, from
//! `tests/store.rs` and `tests/index.rs`.

#![cfg(feature = "postgres")]

mod common;

use std::io::{self, ErrorKind};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use agw_memory::{ChatStore, MemoryConfig, MemoryError, Owner, PgConfig, migrate_chats};
use agw_protocol::history::{HistoryLine, StepLine, StoredMessage};
use agw_protocol::{AgentDelta, ToolStartMeta, replay_chat};
use common::{PgSchema, Run, TempDir, pg_url, query, store_in};

const CHAT: &str = "123e4567-e89b-12d3-a456-426614174000";

fn step(run_id: &str, text: &str) -> HistoryLine {
    HistoryLine::Step(StepLine {
        chat_id: CHAT.into(),
        run_id: run_id.into(),
        stage: "oneshot".into(),
        seq: 1,
        messages: vec![StoredMessage::user(text, 1)],
        ..StepLine::default()
    })
}

fn pg_config(schema: &PgSchema, url: &str, timeout: Duration) -> PgConfig {
    PgConfig { url: url.to_owned(), connect_timeout: timeout, ..schema.config() }
}

fn memory_config() -> MemoryConfig {
    MemoryConfig { dir: "/nonexistent/agw-memory-pg-test".into(), ..MemoryConfig::default() }
}

// ---- crash safety, in database terms ----

#[test]
fn an_append_that_fails_part_way_stores_nothing_and_the_next_one_works() {
    let Some(url) = pg_url() else { return };
    let schema = PgSchema::new(&url);
    let store = schema.open(20, &[]);
    // The second line of the append will be refused by the server: a constraint stands in for
    // a failure mid-transaction (a NUL byte cannot get there: JSON escapes it, see below).
    schema
        .client()
        .batch_execute(&format!(
            "ALTER TABLE {} ADD CONSTRAINT refuse_poison CHECK (position('poison' in line) = 0)",
            schema.table("history")
        ))
        .expect("constraint");
    let err = store.append(CHAT, &[step("run_1", "fine"), step("run_1", "poison")]).expect_err("refused");
    match &err {
        MemoryError::Database { op, chat_id, .. } => {
            assert_eq!((*op, chat_id.as_deref()), ("append to the history", Some(CHAT)));
        }
        other => panic!("not a database error: {other:?}"),
    }
    let message = err.to_string();
    eprintln!("{message}");
    assert!(message.contains(CHAT) && message.contains("refuse_poison"), "{message}");
    assert!(schema.raw_lines(CHAT).is_empty(), "neither line is stored");
    assert!(store.read_lines(CHAT).expect("read").is_empty());
    assert!(!store.chat_exists(CHAT).expect("exists"));

    // The connection went back to the pool clean: the next append (of good lines) works.
    let lines = [step("run_2", "one"), step("run_2", "two"), step("run_2", "three")];
    store.append(CHAT, &lines).expect("append");
    assert_eq!(store.read_lines(CHAT).expect("read"), lines);

    // A NUL in a message is escaped by the JSON encoding: stored, and read back equal.
    let nul = step("run_3", "before\u{0}after");
    assert!(!nul.to_json().expect("json").contains('\0'));
    store.append(CHAT, std::slice::from_ref(&nul)).expect("append");
    assert_eq!(store.read_lines(CHAT).expect("read").last(), Some(&nul));
}

#[test]
fn a_committed_append_is_visible_to_another_replica() {
    let Some(url) = pg_url() else { return };
    let schema = PgSchema::new(&url);
    let first = schema.open(20, &[]);
    let second = schema.open(20, &[]);
    first.append(CHAT, &[step("run_1", "a"), step("run_1", "b")]).expect("append");
    assert_eq!(second.read_lines(CHAT).expect("read"), first.read_lines(CHAT).expect("read"));
    assert!(second.chat_exists(CHAT).expect("exists"));
    second.append_final(CHAT, &[step("run_2", "c")]).expect("append");
    let texts: Vec<String> = first
        .read_lines(CHAT)
        .expect("read")
        .iter()
        .map(|l| l.as_step().expect("step").messages[0].text().to_owned())
        .collect();
    assert_eq!(texts, ["a", "b", "c"]);
    // A replica started later (a restart) sees the same.
    assert_eq!(schema.open(20, &[]).read_lines(CHAT).expect("read").len(), 3);
}

/// A port on loopback that nothing listens on.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

#[test]
fn an_unreachable_server_is_a_clear_error_within_the_timeout() {
    let Some(url) = pg_url() else { return };
    let schema = PgSchema::new(&url);
    let timeout = Duration::from_secs(1);

    // Nothing listens: refused at once.
    let wrong = format!("postgres://postgres@127.0.0.1:{}/test", closed_port());
    let started = Instant::now();
    let err = ChatStore::postgres(memory_config(), pg_config(&schema, &wrong, timeout)).expect_err("no server");
    assert!(started.elapsed() < timeout + Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(matches!(err, MemoryError::Database { op: "connect to the database", chat_id: None, .. }), "{err:?}");
    let message = err.to_string();
    eprintln!("{message}");
    assert!(message.contains("connect to the database") && message.contains("refused"), "{message}");

    // Something accepts the connection and never answers: the timeout still holds.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    let started = Instant::now();
    let err = ChatStore::postgres(
        memory_config(),
        pg_config(&schema, &format!("postgres://postgres@127.0.0.1:{port}/test"), timeout),
    )
    .expect_err("no answer");
    assert!(started.elapsed() < timeout + Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(matches!(err, MemoryError::Database { op: "connect to the database", .. }), "{err:?}");
    eprintln!("{err}");
    drop(silent);

    // A URL that is not one, and a schema name that is not one, are errors too.
    let err =
        ChatStore::postgres(memory_config(), pg_config(&schema, "postgres://h:port/db", timeout)).expect_err("bad URL");
    assert!(matches!(err, MemoryError::Database { op: "read the database URL", .. }), "{err:?}");
    let bad_schema = PgConfig { schema: "no-dashes".into(), ..schema.config() };
    assert!(ChatStore::postgres(memory_config(), bad_schema).is_err());
}

/// A TCP proxy to the test server that can be cut: every connection through it is shut down
/// and new ones are refused.
struct Proxy {
    port: u16,
    stop: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    thread: Option<JoinHandle<()>>,
}

impl Proxy {
    fn start(target: (String, u16)) -> io::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let streams: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (stop_flag, open) = (Arc::clone(&stop), Arc::clone(&streams));
        let thread = std::thread::spawn(move || {
            while !stop_flag.load(Ordering::SeqCst) {
                let client = match listener.accept() {
                    Ok((client, _)) => client,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    Err(_) => break,
                };
                let Ok(server) = TcpStream::connect((target.0.as_str(), target.1)) else { continue };
                let _ = client.set_nonblocking(false);
                let pipes = [(client.try_clone(), server.try_clone()), (server.try_clone(), client.try_clone())];
                for (from, to) in pipes {
                    if let (Ok(mut from), Ok(mut to)) = (from, to) {
                        std::thread::spawn(move || {
                            let _ = io::copy(&mut from, &mut to);
                            let _ = to.shutdown(Shutdown::Both);
                        });
                    }
                }
                open.lock().expect("streams").extend([client, server]);
            }
        });
        Ok(Proxy { port, stop, streams, thread: Some(thread) })
    }

    fn cut(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        for stream in self.streams.lock().expect("streams").drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.cut();
    }
}

#[test]
fn a_server_that_goes_away_is_an_error_within_the_timeout_not_a_hang() {
    let Some(url) = pg_url() else { return };
    let real: postgres::Config = url.parse().expect("test URL");
    let Some(postgres::config::Host::Tcp(host)) = real.get_hosts().first().cloned() else {
        eprintln!("skipped: the test database is not reached over TCP (no proxy to cut)");
        return;
    };
    let port = real.get_ports().first().copied().unwrap_or(5432);
    let schema = PgSchema::new(&url);
    schema.ensure();
    let mut proxy = Proxy::start((host, port)).expect("proxy");
    let mut through = format!("host=127.0.0.1 port={} dbname={}", proxy.port, real.get_dbname().unwrap_or("postgres"));
    if let Some(user) = real.get_user() {
        through.push_str(&format!(" user={user}"));
    }
    if let Some(password) = real.get_password() {
        let password = String::from_utf8_lossy(password).replace('\\', "\\\\").replace('\'', "\\'");
        through.push_str(&format!(" password='{password}'"));
    }
    let timeout = Duration::from_secs(1);
    let store = ChatStore::postgres(memory_config(), pg_config(&schema, &through, timeout)).expect("via the proxy");
    store.append(CHAT, &[step("run_1", "a")]).expect("append");
    store.ping().expect("ready");

    proxy.cut();
    let started = Instant::now();
    let err = store.ping().expect_err("the server is gone");
    assert!(started.elapsed() < timeout + Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(matches!(err, MemoryError::Database { op: "ping the database", .. }), "{err:?}");
    eprintln!("{err}");
    let started = Instant::now();
    let err = store.append(CHAT, &[step("run_2", "b")]).expect_err("the server is gone");
    assert!(started.elapsed() < timeout + Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(
        matches!(&err, MemoryError::Database { op: "append to the history", chat_id: Some(c), .. } if c == CHAT),
        "{err:?}"
    );
    assert!(store.read_lines(CHAT).is_err());
    assert!(store.list_chats().is_err());
    // Nothing of the failed append reached the database.
    assert_eq!(schema.raw_lines(CHAT).len(), 1);
}

// ---- agw calls the store from spawn_blocking ----

#[test]
fn the_store_works_from_spawn_blocking_on_a_multi_thread_runtime() {
    let Some(url) = pg_url() else { return };
    let schema = PgSchema::new(&url);
    let config = schema.config();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(async move {
        // Opening blocks, but works on any thread (it connects on one of its own).
        let store = Arc::new(ChatStore::postgres(memory_config(), config).expect("open"));
        let tasks: Vec<_> = (0..8)
            .map(|i| {
                let store = Arc::clone(&store);
                tokio::task::spawn_blocking(move || {
                    let chat_id = format!("00000000-0000-4000-8000-{i:012x}");
                    let upsert = store.upsert_chat(&chat_id, "hi", Some("agent"), None, 1_000 + i).expect("upsert");
                    assert!(upsert.created);
                    let mut run = Run::new(&chat_id, &format!("run_{i}"), query("hi"), None, &[]);
                    run.push(1, AgentDelta::StageMarker("oneshot".into()));
                    store.append(&chat_id, &run.push(2, AgentDelta::Content("hello".into()))).expect("append");
                    store.append_final(&chat_id, &run.complete(3)).expect("append final");
                    assert_eq!(store.read_lines(&chat_id).expect("read"), run.lines);
                    store.ping().expect("ping");
                    store.chat_context(&chat_id).expect("context").history.len()
                })
            })
            .collect();
        for task in tasks {
            assert_eq!(task.await.expect("task"), 2, "user and assistant message");
        }
        let listed = {
            let store = Arc::clone(&store);
            tokio::task::spawn_blocking(move || store.list_chats().expect("list")).await.expect("task")
        };
        assert_eq!(listed.len(), 8);
        assert_eq!(listed[0].chat_id, "00000000-0000-4000-8000-000000000007", "newest first");
        // The last reference is dropped on a runtime thread: the connections close elsewhere.
        drop(store);
    });
}

// ---- replicas on one schema ----

const RACERS: usize = 8;

/// Runs `f(i)` on `RACERS` threads released together, alternating between the two stores.
fn race<T: Send + 'static>(
    stores: &[Arc<ChatStore>; 2],
    f: impl Fn(&ChatStore, usize) -> T + Send + Sync + 'static,
) -> Vec<T> {
    let barrier = Arc::new(Barrier::new(RACERS));
    let f = Arc::new(f);
    let handles: Vec<_> = (0..RACERS)
        .map(|i| {
            let (store, barrier, f) = (Arc::clone(&stores[i % 2]), Arc::clone(&barrier), Arc::clone(&f));
            std::thread::spawn(move || {
                barrier.wait();
                f(&store, i)
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().expect("racer")).collect()
}

#[test]
fn replicas_racing_on_a_new_chat_create_it_once() {
    let Some(url) = pg_url() else { return };
    let schema = PgSchema::new(&url);
    let stores = [Arc::new(schema.open(20, &[])), Arc::new(schema.open(20, &[]))];
    for round in 0..5 {
        let chat_id = format!("00000000-0000-4000-8000-{round:012x}");
        let id = chat_id.clone();
        let upserts = race(&stores, move |store, i| {
            store.upsert_chat(&id, &format!("message {i}"), Some("agent"), None, 1_000 + i as i64).expect("upsert")
        });
        assert_eq!(upserts.iter().filter(|u| u.created).count(), 1, "round {round}: {upserts:?}");
        let names: std::collections::HashSet<&str> = upserts.iter().map(|u| u.chat_name.as_str()).collect();
        assert_eq!(names.len(), 1, "every racer got the name the winner gave: {upserts:?}");
        assert_eq!(schema.index_lines().len(), round + 1);
    }
}

#[test]
fn replicas_racing_with_owners_record_one_owner() {
    let Some(url) = pg_url() else { return };
    let schema = PgSchema::new(&url);
    let stores = [Arc::new(schema.open(20, &[])), Arc::new(schema.open(20, &[]))];
    let upserts = race(&stores, |store, i| {
        let me = Owner { sub: format!("user{i}"), tenant: None };
        let mine = |owner: Option<&Owner>| owner == Some(&me);
        store.upsert_owned_chat(CHAT, "hi", None, None, Some(&me), &mine, 10).expect("upsert").map(|u| (i, u.created))
    });
    let accepted: Vec<(usize, bool)> = upserts.into_iter().flatten().collect();
    assert_eq!(accepted.len(), 1, "everyone else is refused: {accepted:?}");
    let (winner, created) = accepted[0];
    assert!(created);
    let owner = Owner { sub: format!("user{winner}"), tenant: None };
    for store in &stores {
        assert_eq!(store.chat_owner(CHAT).expect("owner"), Some(Some(owner.clone())));
    }
    // A later user on the other replica is refused too, and changes nothing.
    let before = schema.index_lines();
    let other = Owner { sub: "late".into(), tenant: None };
    let refused = stores[1 - winner % 2]
        .upsert_owned_chat(CHAT, "mine?", None, None, Some(&other), &|o| o == Some(&other), 20)
        .expect("upsert");
    assert_eq!(refused, None);
    assert_eq!(schema.index_lines(), before);
}

#[test]
fn replicas_see_the_same_chats_and_waiting_marks() {
    let Some(url) = pg_url() else { return };
    let schema = PgSchema::new(&url);
    let stores = [Arc::new(schema.open(20, &[])), Arc::new(schema.open(20, &[]))];
    race(&stores, |store, i| {
        let chat_id = format!("00000000-0000-4000-8000-{i:012x}");
        // Equal times in pairs: ties list in the order the chats were first written.
        store.upsert_chat(&chat_id, &format!("chat {i}"), Some("agent"), None, 1_000 + (i / 2) as i64).expect("upsert");
        store.append(&chat_id, &[step(&format!("run_{i}"), "hi")]).expect("append");
        store.mark_waiting(&format!("10000000-0000-4000-8000-{i:012x}"), &chat_id).expect("mark");
    });
    let listed = stores[0].list_chats().expect("list");
    assert_eq!(listed.len(), RACERS);
    assert_eq!(listed, stores[1].list_chats().expect("list"));
    assert!(listed.windows(2).all(|w| w[0].updated_at >= w[1].updated_at));
    let marks = stores[0].waiting_runs().expect("marks");
    assert_eq!(marks.len(), RACERS);
    assert_eq!(marks, stores[1].waiting_runs().expect("marks"));
    stores[1].clear_waiting(&marks[0].0).expect("clear");
    assert_eq!(stores[0].waiting_runs().expect("marks"), marks[1..]);
}

#[test]
fn replicas_starting_together_migrate_once() {
    let Some(url) = pg_url() else { return };
    let schema = PgSchema::new(&url);
    let barrier = Arc::new(Barrier::new(3));
    let handles: Vec<_> = (0..3)
        .map(|_| {
            let (barrier, config) = (Arc::clone(&barrier), schema.config());
            std::thread::spawn(move || {
                barrier.wait();
                ChatStore::postgres(memory_config(), config).map(|store| store.backend_name())
            })
        })
        .collect();
    for handle in handles {
        assert_eq!(handle.join().expect("replica").expect("started"), "postgres");
    }
    let versions: Vec<i32> = schema
        .client()
        .query(&format!("SELECT version FROM {} ORDER BY version", schema.table("schema_migrations")), &[])
        .expect("migrations")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [1, 2, 3]);
    // A fourth start finds nothing to do.
    schema.open(20, &[]).ping().expect("ready");
}

// ---- migrating a JSONL directory ----

const CHATS: usize = 1_000;

/// A directory of `CHATS` chats made by the file store from real recorded runs: most with one
/// run, some with two or a tool call, some waiting, some with only a record or only a history
/// file, one with an unreadable line and one with a torn last line; `updatedAt` ties in threes.
/// Returns the store and the chat ids.
fn source_directory(dir: &TempDir) -> (ChatStore, Vec<String>) {
    let store = store_in(dir.path(), 20, &[]);
    let mut chats = Vec::with_capacity(CHATS);
    for i in 0..CHATS {
        let chat_id = uuid::Uuid::new_v4().to_string();
        let history_only = i % 97 == 5;
        let record_only = i % 89 == 7;
        if !history_only {
            let owner = (i % 4 == 0).then(|| Owner { sub: format!("user{}", i % 7), tenant: None });
            store
                .upsert_owned_chat(
                    &chat_id,
                    &format!("question {i}"),
                    Some("agent"),
                    None,
                    owner.as_ref(),
                    &|_| true,
                    1_700_000_000_000 + (i / 3) as i64,
                )
                .expect("upsert");
        }
        if !record_only {
            for r in 0..(1 + usize::from(i % 10 == 0)) {
                let run_id = format!("run_{i}_{r}");
                let mut run = Run::new(&chat_id, &run_id, query(&format!("question {i}.{r}")), None, &[]);
                run.push(1, AgentDelta::StageMarker("react-step-1".into()));
                if i % 50 == 0 {
                    let meta = ToolStartMeta {
                        tool_name: "_bash_".into(),
                        tool_type: "function".into(),
                        ..Default::default()
                    };
                    run.push(
                        2,
                        AgentDelta::ToolArgs { tool_id: "call_1".into(), meta, delta: r#"{"command":"ls"}"#.into() },
                    );
                    run.push(3, AgentDelta::ToolResult { tool_id: "call_1".into(), result: "file.txt".into() });
                    store
                        .append(&chat_id, &run.push(4, AgentDelta::StageMarker("react-step-2".into())))
                        .expect("append");
                }
                run.push(5, AgentDelta::Content(format!("answer {i}.{r}")));
                store.append_final(&chat_id, &run.complete(6)).expect("append");
                if i % 40 == 3 && r == 0 {
                    store.mark_waiting(&uuid::Uuid::new_v4().to_string(), &chat_id).expect("mark");
                }
            }
        }
        chats.push(chat_id);
    }
    use std::io::Write;
    let append_raw = |chat_id: &str, bytes: &[u8]| {
        std::fs::OpenOptions::new()
            .append(true)
            .open(store.history_path(chat_id).expect("uuid"))
            .and_then(|mut f| f.write_all(bytes))
            .expect("raw append");
    };
    append_raw(&chats[1], b"not json at all\n\n");
    append_raw(&chats[2], br#"{"_type":"step","chatId":"torn"#);
    (store, chats)
}

/// History lines in the directory, as the migration counts them (a torn last line included).
fn source_line_count(dir: &TempDir, chats: &[String]) -> usize {
    chats
        .iter()
        .filter_map(|id| std::fs::read(dir.path().join(format!("{id}.json"))).ok())
        .map(|bytes| {
            let segments = bytes.split(|b| *b == b'\n').count();
            if bytes.ends_with(b"\n") || bytes.is_empty() { segments - 1 } else { segments }
        })
        .sum()
}

#[test]
fn a_directory_migrates_resumably_idempotently_and_verified() {
    let Some(url) = pg_url() else { return };
    let dir = TempDir::new();
    let (files, chats) = source_directory(&dir);
    let src = files.config().clone();
    let schema = PgSchema::new(&url);
    let pg = schema.open(20, &[]);

    let first = migrate_chats(&src, &pg, Some(300)).expect("first part");
    assert_eq!((first.chats_seen, first.chats_copied, first.chats_skipped), (300, 300, 0), "{first:?}");
    let second = migrate_chats(&src, &pg, None).expect("the rest");
    assert_eq!((second.chats_seen, second.chats_copied, second.chats_skipped), (CHATS, 700, 300), "{second:?}");
    assert!(first.mismatches.is_empty() && second.mismatches.is_empty(), "{first:?} {second:?}");
    assert_eq!(first.lines_copied + second.lines_copied, source_line_count(&dir, &chats));
    let marks = files.waiting_runs().expect("marks");
    assert!(!marks.is_empty());
    assert_eq!(first.waiting_copied + second.waiting_copied, marks.len());
    let third = migrate_chats(&src, &pg, None).expect("nothing left");
    assert_eq!((third.chats_seen, third.chats_copied, third.chats_skipped), (CHATS, 0, CHATS), "{third:?}");
    assert_eq!((third.lines_copied, third.waiting_copied), (0, 0));
    let report = serde_json::to_value(&third).expect("report JSON");
    assert_eq!(report["chats_skipped"], CHATS);
    assert_eq!(report["mismatches"], serde_json::json!([]));

    // What the database holds reads like the directory, chat by chat and as a list.
    for chat_id in &chats {
        let (expected, copied) = (files.read_lines(chat_id).expect("file"), pg.read_lines(chat_id).expect("pg"));
        assert_eq!(copied, expected, "{chat_id}");
        assert_eq!(replay_chat(chat_id, None, &copied, 0), replay_chat(chat_id, None, &expected, 0));
        assert_eq!(pg.chat_exists(chat_id).expect("pg"), files.chat_exists(chat_id).expect("files"));
        assert_eq!(pg.chat_owner(chat_id).expect("pg"), files.chat_owner(chat_id).expect("files"));
    }
    let listed = pg.list_chats().expect("pg list");
    assert_eq!(listed.len(), CHATS - chats.iter().enumerate().filter(|(i, _)| i % 97 == 5).count());
    assert_eq!(listed, files.list_chats().expect("file list"), "same chats, names, totals and order");
    assert_eq!(pg.waiting_runs().expect("pg marks"), marks);
    // The chats with lines no reader can use still replay the same (checked above) and are
    // copied as they were.
    assert!(schema.raw_lines(&chats[1]).iter().any(|l| l == "not json at all"));
    assert!(schema.raw_lines(&chats[2]).last().is_some_and(|l| l.ends_with("\"torn")));

    // A chat that grew in the directory since is copied again, alone.
    let grown = &chats[10];
    let mut run = Run::new(grown, "run_more", query("one more"), None, &[]);
    run.push(1, AgentDelta::StageMarker("oneshot".into()));
    run.push(2, AgentDelta::Content("more".into()));
    files.append_final(grown, &run.complete(3)).expect("append");
    files.upsert_chat(grown, "one more", Some("agent"), None, 1_800_000_000_000).expect("upsert");
    let fourth = migrate_chats(&src, &pg, None).expect("catch up");
    assert_eq!((fourth.chats_copied, fourth.chats_skipped), (1, CHATS - 1), "{fourth:?}");
    assert!(fourth.mismatches.is_empty());
    assert_eq!(pg.read_lines(grown).expect("pg"), files.read_lines(grown).expect("files"));
    assert_eq!(pg.list_chats().expect("pg list")[0].chat_id, *grown);
    assert_eq!(pg.list_chats().expect("pg list"), files.list_chats().expect("file list"));
}

#[test]
fn migrating_into_a_file_store_is_an_error() {
    let (src, dst) = (TempDir::new(), TempDir::new());
    let err = migrate_chats(&store_in(src.path(), 20, &[]).config().clone(), &store_in(dst.path(), 20, &[]), None)
        .expect_err("not a database");
    assert!(matches!(err, MemoryError::Database { op: "migrate chats", .. }), "{err:?}");
}
