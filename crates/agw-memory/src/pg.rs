//! The PostgreSQL backend (feature `postgres`): chat memory in tables of one schema, shared by
//! several agw replicas.
//!
//! * `history (id bigserial, chat_id, line)`: one row per history line, the exact JSON text the
//!   file store would write. An append is one transaction; reads order by `id`.
//! * `chats (chat_id, record, updated_at, seq)`: one row per chat, `record` being the chat's
//!   index line exactly as `_chats.jsonl` writes it. Updates go through the shared rules of
//!   `index.rs` inside one transaction.
//! * `waiting (run_id, chat_id, marked_at)`: the waiting marks.
//! * `migrated`: bookkeeping of [`crate::migrate_chats`].
//!
//! Every write to one chat (append, trim, index update, migration copy) runs in a transaction
//! that first takes the chat's transaction-scoped advisory lock
//! (`pg_advisory_xact_lock(hashtextextended('agw-memory:<schema>:<chatId>', 0))`): writes of one
//! chat are serialised across replicas, the ids of a chat's lines grow in commit order, and an
//! index record is read (`FOR UPDATE`), changed and written back without another replica's
//! change in between.
//!
//! The client is rust-postgres's synchronous one, pooled with r2d2. It drives a runtime of its
//! own: call it from plain threads (`spawn_blocking`), never from an async task's thread.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::mpsc;
use std::time::Duration;

use agw_protocol::history::HistoryLine;
use agw_protocol::usage::{Cost, RunUsage};
use postgres::{Client, NoTls, Transaction};
use r2d2::{Pool, PooledConnection};
use r2d2_postgres::PostgresConnectionManager;

use crate::error::MemoryError;
use crate::index::{self, ChatSummary, Encoded, Record, Refused, UpsertRequest, Upserted};
use crate::lines::{Trim, parse_history, trim_selection};

/// The embedded migrations, in order: (version, name, SQL). Each is applied once per schema, in
/// its own transaction, and recorded in `schema_migrations`. Append new ones; never edit one
/// that was released.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "chats, history, waiting", include_str!("pg/migrations/0001_init.sql")),
    (2, "migrated", include_str!("pg/migrations/0002_migrated.sql")),
    (3, "running", include_str!("pg/migrations/0003_running.sql")),
];

/// The longest a readiness ping waits (less when the connect timeout is shorter).
const PING_TIMEOUT: Duration = Duration::from_secs(2);
/// The shortest connect timeout used (the pool refuses zero).
const MIN_TIMEOUT: Duration = Duration::from_millis(100);
/// How long starting replicas wait for one another's migrations before giving up.
const MIGRATION_LOCK_TIMEOUT: &str = "60s";
/// How long sent data may stay unacknowledged before the connection counts as dead.
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);
/// TCP keepalive probes on idle connections: after this long, then every `KEEPALIVE_INTERVAL`.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(30);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// How to reach the database of a PostgreSQL chat store ([`crate::ChatStore::postgres`]).
///
/// `Debug` masks the password of `url`.
#[derive(Clone, PartialEq, Eq)]
pub struct PgConfig {
    /// The connection string: a URL (`postgres://user:password@host:5432/db?sslmode=disable`)
    /// or libpq key/value pairs (`host=… user=… dbname=…`). TLS is not supported: connect over
    /// a trusted network or a local socket.
    pub url: String,
    /// The schema that holds agw's tables; created when missing. Letters, digits and `_`, not
    /// starting with a digit, at most 63 bytes. Replicas that share chats use the same schema.
    pub schema: String,
    /// The most connections this store opens (per replica; opened on demand, at least 1).
    pub pool_size: u32,
    /// How long connecting, or waiting for a free pooled connection, may take before the
    /// operation fails with [`MemoryError::Database`].
    pub connect_timeout: Duration,
}

impl Default for PgConfig {
    /// No URL, schema `agw`, 8 connections, 5 s connect timeout.
    fn default() -> Self {
        Self { url: String::new(), schema: "agw".to_owned(), pool_size: 8, connect_timeout: Duration::from_secs(5) }
    }
}

impl fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgConfig")
            .field("url", &mask_password(&self.url))
            .field("schema", &self.schema)
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// `url` with the password replaced by `***` (URL user info, `password=` pairs and parameters).
fn mask_password(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest = scheme_end + 3;
        let authority_end = out[rest..].find(['/', '?']).map_or(out.len(), |i| rest + i);
        if let Some(at) = out[rest..authority_end].rfind('@').map(|i| rest + i)
            && let Some(colon) = out[rest..at].find(':').map(|i| rest + i)
        {
            out.replace_range(colon + 1..at, "***");
        }
    }
    let mut from = 0;
    while let Some(i) = out[from..].find("password=").map(|i| from + i) {
        let start = i + "password=".len();
        let end = out[start..].find(['&', ' ']).map_or(out.len(), |j| start + j);
        out.replace_range(start..end, "***");
        from = start + 3;
    }
    out
}

/// A [`MemoryError::Database`] maker for `op` on `chat_id`.
fn db<E>(op: &'static str, chat_id: Option<&str>) -> impl FnOnce(E) -> MemoryError
where
    E: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let chat_id = chat_id.map(str::to_owned);
    move |source| MemoryError::Database { op, chat_id, source: Box::new(Cause::of(source.into())) }
}

/// An error with its whole chain in one message. The driver's errors say only their kind
/// (`db error`, `error connecting to server`) and keep the server's message (`ERROR: …`, `Connection
/// refused`) in their source, which a log line of the outer error would not show.
#[derive(Debug)]
struct Cause(String);

impl Cause {
    fn of(error: Box<dyn std::error::Error + Send + Sync>) -> Self {
        let mut text = error.to_string();
        let mut next = error.source();
        while let Some(cause) = next {
            let part = cause.to_string();
            if !text.ends_with(&part) {
                text.push_str(": ");
                text.push_str(&part);
            }
            next = cause.source();
        }
        Self(text)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Cause {}

/// An error inside a chat transaction: the driver's, or one of ours (encoding).
enum TxError {
    Pg(postgres::Error),
    Memory(MemoryError),
}

impl From<postgres::Error> for TxError {
    fn from(e: postgres::Error) -> Self {
        Self::Pg(e)
    }
}

impl From<MemoryError> for TxError {
    fn from(e: MemoryError) -> Self {
        Self::Memory(e)
    }
}

/// The SQL of every statement, with the schema's tables named.
struct Sql {
    lock: &'static str,
    append: String,
    read: String,
    exists: String,
    lines_for_trim: String,
    delete_lines: String,
    delete_history: String,
    record_for_update: String,
    record: String,
    write_record: String,
    delete_record: String,
    updated_at_for_update: String,
    list: String,
    mark: String,
    copy_mark: String,
    clear: String,
    clear_chat: String,
    waiting: String,
    put_run_mark: String,
    clear_run_mark: String,
    clear_chat_run_marks: String,
    run_marks: String,
    migrated: String,
    record_migrated: String,
}

impl Sql {
    fn new(q: &str) -> Self {
        Self {
            lock: "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
            // One statement for all the lines; `ORDER BY n` hands them to the insert in order, so
            // their ids (taken under the chat's lock) follow the order of the call.
            append: format!(
                "INSERT INTO {q}.history (chat_id, line) \
                 SELECT $1, l.line FROM unnest($2::text[]) WITH ORDINALITY AS l(line, n) ORDER BY l.n"
            ),
            read: format!("SELECT line FROM {q}.history WHERE chat_id = $1 ORDER BY id"),
            exists: format!("SELECT EXISTS (SELECT 1 FROM {q}.history WHERE chat_id = $1)"),
            lines_for_trim: format!("SELECT id, line FROM {q}.history WHERE chat_id = $1 ORDER BY id FOR UPDATE"),
            delete_lines: format!("DELETE FROM {q}.history WHERE chat_id = $1 AND id = ANY($2)"),
            delete_history: format!("DELETE FROM {q}.history WHERE chat_id = $1"),
            record_for_update: format!("SELECT record FROM {q}.chats WHERE chat_id = $1 FOR UPDATE"),
            record: format!("SELECT record FROM {q}.chats WHERE chat_id = $1"),
            write_record: format!(
                "INSERT INTO {q}.chats (chat_id, record, updated_at) VALUES ($1, $2, $3) \
                 ON CONFLICT (chat_id) DO UPDATE SET record = EXCLUDED.record, updated_at = EXCLUDED.updated_at"
            ),
            delete_record: format!("DELETE FROM {q}.chats WHERE chat_id = $1"),
            updated_at_for_update: format!("SELECT updated_at FROM {q}.chats WHERE chat_id = $1 FOR UPDATE"),
            list: format!("SELECT record FROM {q}.chats ORDER BY updated_at DESC, seq"),
            mark: format!(
                "INSERT INTO {q}.waiting (run_id, chat_id) VALUES ($1, $2) \
                 ON CONFLICT (run_id) DO UPDATE SET chat_id = EXCLUDED.chat_id, marked_at = now()"
            ),
            copy_mark: format!(
                "INSERT INTO {q}.waiting (run_id, chat_id) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING"
            ),
            clear: format!("DELETE FROM {q}.waiting WHERE run_id = $1"),
            clear_chat: format!("DELETE FROM {q}.waiting WHERE chat_id = $1"),
            waiting: format!("SELECT run_id, chat_id FROM {q}.waiting"),
            put_run_mark: format!(
                "INSERT INTO {q}.running (run_id, chat_id, mark, revision) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (run_id) DO UPDATE SET mark = EXCLUDED.mark, revision = EXCLUDED.revision, \
                 updated_at = now() WHERE {q}.running.revision < EXCLUDED.revision"
            ),
            clear_run_mark: format!("DELETE FROM {q}.running WHERE run_id = $1"),
            clear_chat_run_marks: format!("DELETE FROM {q}.running WHERE chat_id = $1"),
            run_marks: format!("SELECT mark FROM {q}.running"),
            migrated: format!("SELECT chat_id, source_bytes, source_hash FROM {q}.migrated"),
            record_migrated: format!(
                "INSERT INTO {q}.migrated (chat_id, source_bytes, source_hash) VALUES ($1, $2, $3) \
                 ON CONFLICT (chat_id) DO UPDATE SET source_bytes = EXCLUDED.source_bytes, \
                 source_hash = EXCLUDED.source_hash, migrated_at = now()"
            ),
        }
    }
}

type PgPool = Pool<Manager>;

/// r2d2-postgres's connection manager, with errors that carry their whole chain: the pool keeps
/// only the text of the last connection error for its timeout error, and the driver's own text
/// would be just `error connecting to server`.
#[derive(Debug)]
struct Manager(PostgresConnectionManager<NoTls>);

impl r2d2::ManageConnection for Manager {
    type Connection = Client;
    type Error = Cause;

    fn connect(&self) -> Result<Client, Cause> {
        self.0.connect().map_err(|e| Cause::of(Box::new(e)))
    }

    fn is_valid(&self, client: &mut Client) -> Result<(), Cause> {
        self.0.is_valid(client).map_err(|e| Cause::of(Box::new(e)))
    }

    fn has_broken(&self, client: &mut Client) -> bool {
        self.0.has_broken(client)
    }
}

/// The PostgreSQL backend: a connection pool and the schema's statements.
pub(crate) struct PgBackend {
    /// `Some` until the backend is dropped (see the `Drop` impl).
    pool: Option<PgPool>,
    schema: String,
    sql: Sql,
    connect_timeout: Duration,
}

impl Drop for PgBackend {
    /// Closes the pooled connections on a thread of its own: closing one runs the client's own
    /// runtime, which must not happen on a thread that drives async tasks — and the last
    /// reference to a store may well be dropped on one.
    fn drop(&mut self) {
        let Some(pool) = self.pool.take() else { return };
        let closing = std::thread::Builder::new().name("agw-pg-close".to_owned()).spawn(move || drop(pool));
        if let Ok(closing) = closing {
            let _ = closing.join();
        }
    }
}

/// Where lines of a chat come from, for warnings.
struct Source<'a>(&'a str, &'a str);

impl fmt::Display for Source<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "postgres:{}/history/{}", self.0, self.1)
    }
}

/// r2d2 reports failed connection attempts here (instead of the `log` crate).
#[derive(Debug)]
struct LogErrors;

impl r2d2::HandleError<Cause> for LogErrors {
    fn handle_error(&self, error: Cause) {
        tracing::warn!(%error, "chat memory: a database connection attempt failed");
    }
}

impl PgBackend {
    pub(crate) fn connect(pg: &PgConfig) -> Result<Self, MemoryError> {
        check_schema_name(&pg.schema)?;
        let timeout = pg.connect_timeout.max(MIN_TIMEOUT);
        let mut config: postgres::Config = pg.url.parse().map_err(db("read the database URL", None))?;
        config.connect_timeout(timeout);
        if config.get_application_name().is_none() {
            config.application_name("agw");
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(TCP_USER_TIMEOUT);
        }
        // A server that vanished without closing the connection is noticed within about a
        // minute instead of the kernel's two hours (a URL may turn keepalives off or shorten them).
        if config.get_keepalives() && config.get_keepalives_idle() > KEEPALIVE_IDLE {
            config.keepalives_idle(KEEPALIVE_IDLE);
            if config.get_keepalives_interval().is_none() {
                config.keepalives_interval(KEEPALIVE_INTERVAL);
            }
        }

        prepare_schema(&config, &pg.schema, timeout)?;

        let pool = Pool::builder()
            .max_size(pg.pool_size.max(1))
            .min_idle(Some(0))
            .connection_timeout(timeout)
            .error_handler(Box::new(LogErrors))
            .build(Manager(PostgresConnectionManager::new(config, NoTls)))
            .map_err(db("open the connection pool", None))?;
        Ok(Self {
            pool: Some(pool),
            schema: pg.schema.clone(),
            sql: Sql::new(&quote(&pg.schema)),
            connect_timeout: timeout,
        })
    }

    pub(crate) fn history_path(&self, chat_id: &str) -> std::path::PathBuf {
        std::path::PathBuf::from(Source(&self.schema, chat_id).to_string())
    }

    fn conn(&self, op: &'static str, chat_id: Option<&str>) -> Result<PooledConnection<Manager>, MemoryError> {
        self.pool(op, chat_id)?.get().map_err(db(op, chat_id))
    }

    fn pool(&self, op: &'static str, chat_id: Option<&str>) -> Result<&PgPool, MemoryError> {
        self.pool.as_ref().ok_or_else(|| db(op, chat_id)("the store is closed"))
    }

    fn lock_key(&self, chat_id: &str) -> String {
        format!("agw-memory:{}:{chat_id}", self.schema)
    }

    /// Runs `body` in a transaction that holds the chat's advisory lock; commits when it
    /// returns `Ok`, rolls back otherwise.
    fn in_chat_transaction<T>(
        &self,
        op: &'static str,
        chat_id: &str,
        body: impl FnOnce(&mut Transaction<'_>) -> Result<T, TxError>,
    ) -> Result<T, MemoryError> {
        let mut conn = self.conn(op, Some(chat_id))?;
        let run = |conn: &mut Client| -> Result<T, TxError> {
            let mut tx = conn.transaction()?;
            tx.execute(self.sql.lock, &[&self.lock_key(chat_id)])?;
            let out = body(&mut tx)?;
            tx.commit()?;
            Ok(out)
        };
        run(&mut conn).map_err(|e| match e {
            TxError::Pg(e) => db(op, Some(chat_id))(e),
            TxError::Memory(e) => e,
        })
    }

    pub(crate) fn append(&self, chat_id: &str, lines: &[&str]) -> Result<(), MemoryError> {
        self.in_chat_transaction("append to the history", chat_id, |tx| {
            tx.execute(&self.sql.append, &[&chat_id, &lines])?;
            Ok(())
        })
    }

    /// The chat's stored lines, in append order.
    pub(crate) fn read_texts(&self, chat_id: &str) -> Result<Vec<String>, MemoryError> {
        let op = "read the history";
        let rows = self.conn(op, Some(chat_id))?.query(&self.sql.read, &[&chat_id]).map_err(db(op, Some(chat_id)))?;
        rows.iter().map(|row| row.try_get::<_, String>(0).map_err(db(op, Some(chat_id)))).collect()
    }

    pub(crate) fn read_lines(&self, chat_id: &str) -> Result<Vec<HistoryLine>, MemoryError> {
        let texts = self.read_texts(chat_id)?;
        let mut bytes = Vec::with_capacity(texts.iter().map(|t| t.len() + 1).sum());
        for text in &texts {
            bytes.extend_from_slice(text.as_bytes());
            bytes.push(b'\n');
        }
        Ok(parse_history(&bytes, &Source(&self.schema, chat_id)))
    }

    pub(crate) fn history_exists(&self, chat_id: &str) -> Result<bool, MemoryError> {
        let op = "look up the history";
        let row =
            self.conn(op, Some(chat_id))?.query_one(&self.sql.exists, &[&chat_id]).map_err(db(op, Some(chat_id)))?;
        row.try_get(0).map_err(db(op, Some(chat_id)))
    }

    pub(crate) fn trim(&self, chat_id: &str, k: usize) -> Result<usize, MemoryError> {
        self.in_chat_transaction("trim the history", chat_id, |tx| {
            let rows = tx.query(&self.sql.lines_for_trim, &[&chat_id])?;
            let mut ids = Vec::with_capacity(rows.len());
            let mut texts = Vec::with_capacity(rows.len());
            for row in &rows {
                ids.push(row.try_get::<_, i64>(0)?);
                texts.push(row.try_get::<_, &str>(1)?);
            }
            let lines: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes()).collect();
            let mut removed = 0;
            let mut delete = Vec::new();
            for (id, trim) in ids.iter().zip(trim_selection(&lines, k)) {
                match trim {
                    Trim::Keep => {}
                    Trim::Remove => {
                        removed += 1;
                        delete.push(*id);
                    }
                    Trim::Blank => delete.push(*id),
                }
            }
            if !delete.is_empty() {
                tx.execute(&self.sql.delete_lines, &[&chat_id, &delete])?;
            }
            Ok(removed)
        })
    }

    /// The chat's record, locked for the rest of the transaction. A row that does not read as a
    /// record counts as none (as an unreadable line of the file index does), with a warning.
    fn record_for_update(&self, tx: &mut Transaction<'_>, chat_id: &str) -> Result<Option<Record>, TxError> {
        let Some(row) = tx.query_opt(&self.sql.record_for_update, &[&chat_id])? else { return Ok(None) };
        let text: &str = row.try_get(0)?;
        let record = index::parse_record(text);
        if record.is_none() {
            tracing::warn!(chat_id, schema = %self.schema, "chat index: a stored record does not read as one; replacing it");
        }
        Ok(record)
    }

    fn write_record(&self, tx: &mut Transaction<'_>, chat_id: &str, encoded: &Encoded) -> Result<(), TxError> {
        tx.execute(&self.sql.write_record, &[&chat_id, &encoded.line, &encoded.updated_at])?;
        Ok(())
    }

    fn encode(&self, record: &Record, now_ms: i64) -> Result<Encoded, MemoryError> {
        let chat_id = record.id().to_owned();
        index::encode(record, now_ms).map_err(|source| MemoryError::Encode {
            path: std::path::PathBuf::from(format!("postgres:{}/chats/{chat_id}", self.schema)),
            source,
        })
    }

    pub(crate) fn upsert(&self, request: &UpsertRequest<'_>) -> Result<Result<Upserted, Refused>, MemoryError> {
        let chat_id = request.chat_id;
        self.in_chat_transaction("upsert the index record", chat_id, |tx| {
            let mut record = self.record_for_update(tx, chat_id)?;
            let was_indexed = record.is_some();
            let had_history: bool = tx.query_one(&self.sql.exists, &[&chat_id])?.try_get(0)?;
            let record = match (request.update(record.as_mut(), had_history), record) {
                (Err(refused), _) => return Ok(Err(refused)),
                (Ok(Some(added)), _) | (Ok(None), Some(added)) => added,
                // An update without a record always adds one.
                (Ok(None), None) => return Ok(Err(Refused)),
            };
            let encoded = self.encode(&record, request.now_ms)?;
            self.write_record(tx, chat_id, &encoded)?;
            Ok(Ok(Upserted { was_indexed, had_history, chat_name: encoded.chat_name }))
        })
    }

    pub(crate) fn add_run_totals(
        &self,
        chat_id: &str,
        usage: &RunUsage,
        cost: Option<&Cost>,
        now_ms: i64,
    ) -> Result<(), MemoryError> {
        self.in_chat_transaction("add a run's totals to the index record", chat_id, |tx| {
            let mut record = self.record_for_update(tx, chat_id)?;
            if index::add_totals(record.as_mut(), usage, cost).is_err() {
                return Ok(());
            }
            if let Some(record) = record {
                let encoded = self.encode(&record, now_ms)?;
                self.write_record(tx, chat_id, &encoded)?;
            }
            Ok(())
        })
    }

    pub(crate) fn note_agent(
        &self,
        chat_id: &str,
        agent_key: &str,
        handed_off: bool,
        now_ms: i64,
    ) -> Result<(), MemoryError> {
        self.in_chat_transaction("note the agent a run ended with", chat_id, |tx| {
            let mut record = self.record_for_update(tx, chat_id)?;
            if index::note_agent(record.as_mut(), agent_key, handed_off).is_err() {
                return Ok(());
            }
            if let Some(record) = record {
                let encoded = self.encode(&record, now_ms)?;
                self.write_record(tx, chat_id, &encoded)?;
            }
            Ok(())
        })
    }

    pub(crate) fn get_chat(&self, chat_id: &str) -> Result<Option<ChatSummary>, MemoryError> {
        let op = "read the index record";
        let row =
            self.conn(op, Some(chat_id))?.query_opt(&self.sql.record, &[&chat_id]).map_err(db(op, Some(chat_id)))?;
        let Some(row) = row else { return Ok(None) };
        let text: &str = row.try_get(0).map_err(db(op, Some(chat_id)))?;
        Ok(index::parse_record(text).map(|r| r.to_listed()))
    }

    pub(crate) fn list_chats(&self) -> Result<Vec<ChatSummary>, MemoryError> {
        let op = "list the chats";
        let rows = self.conn(op, None)?.query(&self.sql.list, &[]).map_err(db(op, None))?;
        let mut records = Vec::with_capacity(rows.len());
        for row in &rows {
            let text: &str = row.try_get(0).map_err(db(op, None))?;
            match index::parse_record(text) {
                Some(record) => records.push(record),
                None => {
                    tracing::warn!(schema = %self.schema, "chat index: skipping a stored record that does not read as one")
                }
            }
        }
        Ok(index::listing(&records))
    }

    pub(crate) fn mark_waiting(&self, run_id: &str, chat_id: &str) -> Result<(), MemoryError> {
        let op = "mark a waiting run";
        self.conn(op, Some(chat_id))?.execute(&self.sql.mark, &[&run_id, &chat_id]).map_err(db(op, Some(chat_id)))?;
        Ok(())
    }

    pub(crate) fn clear_waiting(&self, run_id: &str) -> Result<(), MemoryError> {
        let op = "clear a waiting run's mark";
        self.conn(op, None)?.execute(&self.sql.clear, &[&run_id]).map_err(db(op, None))?;
        Ok(())
    }

    /// The chat's waiting marks, history rows and index record, in one transaction under the
    /// chat's lock. (A `migrated` row stays: `migrate_chats` does not bring the chat back from
    /// the same source.) With `untouched_since`, the record's `updated_at` is read `FOR UPDATE`
    /// in that transaction first: replicas sweeping at once delete a chat once, and a run that
    /// started in between (its upsert moved `updated_at`, under the same lock) keeps it.
    pub(crate) fn delete_chat(&self, chat_id: &str, untouched_since: Option<i64>) -> Result<bool, MemoryError> {
        self.in_chat_transaction("delete the chat", chat_id, |tx| {
            if let Some(cutoff) = untouched_since {
                let row = tx.query_opt(&self.sql.updated_at_for_update, &[&chat_id])?;
                let updated_at = row.map(|row| row.try_get::<_, i64>(0)).transpose()?;
                if updated_at.is_none_or(|at| at >= cutoff) {
                    return Ok(false);
                }
            }
            let marks = tx.execute(&self.sql.clear_chat, &[&chat_id])?
                + tx.execute(&self.sql.clear_chat_run_marks, &[&chat_id])?;
            let lines = tx.execute(&self.sql.delete_history, &[&chat_id])?;
            let records = tx.execute(&self.sql.delete_record, &[&chat_id])?;
            Ok(marks + lines + records > 0)
        })
    }

    pub(crate) fn put_run_mark(
        &self,
        run_id: &str,
        chat_id: &str,
        mark: &str,
        revision: u64,
    ) -> Result<(), MemoryError> {
        let revision = i64::try_from(revision).unwrap_or(i64::MAX);
        let op = "write a run mark";
        self.conn(op, Some(chat_id))?
            .execute(&self.sql.put_run_mark, &[&run_id, &chat_id, &mark, &revision])
            .map_err(db(op, Some(chat_id)))?;
        Ok(())
    }

    pub(crate) fn clear_run_mark(&self, run_id: &str) -> Result<(), MemoryError> {
        let op = "clear a run mark";
        self.conn(op, None)?.execute(&self.sql.clear_run_mark, &[&run_id]).map_err(db(op, None))?;
        Ok(())
    }

    pub(crate) fn run_marks(&self) -> Result<Vec<String>, MemoryError> {
        let op = "list the run marks";
        let rows = self.conn(op, None)?.query(&self.sql.run_marks, &[]).map_err(db(op, None))?;
        rows.iter().map(|row| row.try_get(0).map_err(db(op, None))).collect()
    }

    pub(crate) fn waiting_runs(&self) -> Result<Vec<(String, String)>, MemoryError> {
        let op = "list the waiting runs";
        let rows = self.conn(op, None)?.query(&self.sql.waiting, &[]).map_err(db(op, None))?;
        rows.iter()
            .map(|row| Ok((row.try_get(0).map_err(db(op, None))?, row.try_get(1).map_err(db(op, None))?)))
            .collect()
    }

    /// A pooled connection answers an empty statement (the cheapest `SELECT 1`) within
    /// [`PING_TIMEOUT`] (or the connect timeout, when shorter) — waiting for the connection
    /// and for the answer each.
    pub(crate) fn ping(&self) -> Result<(), MemoryError> {
        let op = "ping the database";
        let timeout = self.connect_timeout.min(PING_TIMEOUT);
        let mut conn = self.pool(op, None)?.get_timeout(timeout).map_err(db(op, None))?;
        conn.is_valid(timeout).map_err(db(op, None))
    }

    // -- for `migrate_chats` ----------------------------------------------------------------

    /// What `migrated` says was copied: chat id → (source length, source hash).
    pub(crate) fn migrated(&self) -> Result<HashMap<String, (i64, String)>, MemoryError> {
        let op = "read the migration records";
        let rows = self.conn(op, None)?.query(&self.sql.migrated, &[]).map_err(db(op, None))?;
        let mut out = HashMap::with_capacity(rows.len());
        for row in &rows {
            let chat_id: String = row.try_get(0).map_err(db(op, None))?;
            let bytes: i64 = row.try_get(1).map_err(db(op, None))?;
            let hash: String = row.try_get(2).map_err(db(op, None))?;
            out.insert(chat_id, (bytes, hash));
        }
        Ok(out)
    }

    /// Replaces the chat's history and record with the source's, and records the copy, in one
    /// transaction.
    pub(crate) fn copy_chat(
        &self,
        chat_id: &str,
        lines: &[String],
        record: Option<&Encoded>,
        source_bytes: i64,
        source_hash: &str,
    ) -> Result<(), MemoryError> {
        self.in_chat_transaction("copy a chat", chat_id, |tx| {
            tx.execute(&self.sql.delete_history, &[&chat_id])?;
            if !lines.is_empty() {
                tx.execute(&self.sql.append, &[&chat_id, &lines])?;
            }
            match record {
                Some(encoded) => self.write_record(tx, chat_id, encoded)?,
                None => {
                    tx.execute(&self.sql.delete_record, &[&chat_id])?;
                }
            }
            tx.execute(&self.sql.record_migrated, &[&chat_id, &source_bytes, &source_hash])?;
            Ok(())
        })
    }

    /// Copies a waiting mark unless the run has one; whether it was copied.
    pub(crate) fn copy_mark(&self, run_id: &str, chat_id: &str) -> Result<bool, MemoryError> {
        let op = "copy a waiting run's mark";
        let n = self
            .conn(op, Some(chat_id))?
            .execute(&self.sql.copy_mark, &[&run_id, &chat_id])
            .map_err(db(op, Some(chat_id)))?;
        Ok(n > 0)
    }
}

/// `"name"`: the schema as an SQL identifier (checked by [`check_schema_name`]).
fn quote(schema: &str) -> String {
    format!("\"{}\"", schema.replace('"', "\"\""))
}

fn check_schema_name(schema: &str) -> Result<(), MemoryError> {
    let valid = !schema.is_empty()
        && schema.len() <= 63
        && !schema.starts_with(|c: char| c.is_ascii_digit())
        && !schema.to_ascii_lowercase().starts_with("pg_")
        && schema.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if valid {
        return Ok(());
    }
    Err(db("use the schema name", None)(format!(
        "{schema:?} is not a schema name agw uses (letters, digits and `_`, not starting with a digit or `pg_`, at most 63 bytes)"
    )))
}

/// Connects and applies the migrations ([`migrate_schema`]) on a helper thread of its own, so
/// that [`crate::ChatStore::postgres`] may be called on any thread. Waits at most `timeout` (plus a
/// little) for the connection: the driver bounds the TCP connect, this also bounds a server that
/// accepts and then never answers. The migrations themselves wait at most
/// [`MIGRATION_LOCK_TIMEOUT`] for another replica's.
fn prepare_schema(config: &postgres::Config, schema: &str, timeout: Duration) -> Result<(), MemoryError> {
    enum Step {
        Connected,
        Done(Result<(), MemoryError>),
    }
    let op = "connect to the database";
    let (tx, rx) = mpsc::channel();
    let (config, schema) = (config.clone(), schema.to_owned());
    std::thread::Builder::new()
        .name("agw-pg-migrate".to_owned())
        .spawn(move || {
            let done = match config.connect(NoTls) {
                Ok(mut client) => {
                    let _ = tx.send(Step::Connected);
                    migrate_schema(&mut client, &schema)
                }
                Err(e) => Err(db(op, None)(e)),
            };
            let _ = tx.send(Step::Done(done));
        })
        .map_err(db(op, None))?;
    let ended = || db("apply the schema migrations", None)("the migration thread ended without an answer");
    match rx.recv_timeout(timeout + Duration::from_millis(500)) {
        Ok(Step::Connected) => match rx.recv() {
            Ok(Step::Done(done)) => done,
            _ => Err(ended()),
        },
        Ok(Step::Done(done)) => done,
        Err(mpsc::RecvTimeoutError::Timeout) => Err(db(op, None)(format!("no answer within {timeout:?}"))),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(ended()),
    }
}

/// Creates the schema when missing and applies the migrations it has not seen, holding a
/// session advisory lock (per schema) so that concurrent starts take turns.
fn migrate_schema(client: &mut Client, schema: &str) -> Result<(), MemoryError> {
    let op = "apply the schema migrations";
    let key = format!("agw-memory migrations:{schema}");
    client.batch_execute(&format!("SET lock_timeout = '{MIGRATION_LOCK_TIMEOUT}'")).map_err(db(op, None))?;
    client.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&key]).map_err(db(op, None))?;
    let applied = apply_migrations(client, schema);
    // Closing the connection (right after) releases the lock too.
    if let Err(error) = client.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", &[&key]) {
        tracing::debug!(%error, "could not release the migration lock; closing the connection releases it");
    }
    applied.map_err(db(op, None))
}

fn apply_migrations(client: &mut Client, schema: &str) -> Result<(), postgres::Error> {
    let q = quote(schema);
    // Checked first: a schema made beforehand by an administrator needs no CREATE privilege.
    let exists: bool =
        client.query_one("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", &[&schema])?.try_get(0)?;
    if !exists {
        client.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {q}"))?;
    }
    client.batch_execute(&format!(
        "CREATE TABLE IF NOT EXISTS {q}.schema_migrations (\
            version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
    ))?;
    let applied: HashSet<i32> = client
        .query(&format!("SELECT version FROM {q}.schema_migrations"), &[])?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<Result<_, _>>()?;
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        let mut tx = client.transaction()?;
        tx.batch_execute(&format!("SET LOCAL search_path TO {q}"))?;
        tx.batch_execute(sql)?;
        tx.execute(&format!("INSERT INTO {q}.schema_migrations (version, name) VALUES ($1, $2)"), &[version, name])?;
        tx.commit()?;
        tracing::info!(schema, version, name, "chat memory: applied a database migration");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked() {
        assert_eq!(mask_password("postgres://agw:s3cret@db:5432/chats"), "postgres://agw:***@db:5432/chats");
        assert_eq!(mask_password("postgres://agw@db/chats"), "postgres://agw@db/chats");
        assert_eq!(
            mask_password("host=db user=agw password=s3cret dbname=x"),
            "host=db user=agw password=*** dbname=x"
        );
        assert_eq!(
            mask_password("postgres://db/x?user=a&password=p&sslmode=disable"),
            "postgres://db/x?user=a&password=***&sslmode=disable"
        );
        let debug = format!("{:?}", PgConfig { url: "postgres://u:pw@h/d".into(), ..PgConfig::default() });
        assert!(!debug.contains("pw@"), "{debug}");
    }

    #[test]
    fn schema_names_are_checked() {
        for good in ["agw", "agw_test_0123abcd", "A_b"] {
            assert!(check_schema_name(good).is_ok(), "{good}");
        }
        for bad in ["", "1agw", "pg_catalog", "agw;drop", "a\"b", "sch-ema", &"a".repeat(64)] {
            assert!(check_schema_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn migrations_are_numbered_in_order() {
        let versions: Vec<i32> = MIGRATIONS.iter().map(|m| m.0).collect();
        assert_eq!(versions, (1..=MIGRATIONS.len() as i32).collect::<Vec<_>>());
    }

    #[test]
    fn a_bad_url_is_an_error() {
        let err = PgBackend::connect(&PgConfig { url: "postgres://h:notaport/db".into(), ..PgConfig::default() })
            .err()
            .expect("bad port");
        assert!(matches!(err, MemoryError::Database { op: "read the database URL", .. }), "{err}");
    }
}
