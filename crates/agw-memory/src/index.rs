//! The chat index `<dir>/_chats.jsonl` (`docs/contract/memory-jsonl.md` §6, listing rules `docs/contract/http-api.md` §3).
//!
//! One JSON record per chat. Reading is lenient: unknown keys are ignored, duplicate records of
//! a chat collapse onto the first one's position (the later record's values win), lines that do
//! not parse are kept verbatim on rewrite rather than silently dropped, and a torn last line (no
//! `\n`: a write cut by a crash) is skipped.
//!
//! Writing is append-mostly, so an upsert costs the size of one record, not of the whole index.
//! The index this process last wrote is kept in memory ([`Written`]) in its canonical form, one
//! line per chat — what a full rewrite would write. While the file on disk is still the file we
//! left (same device, inode, length and mtime), an upsert changes that one line in memory and
//! appends it to the file; readers collapse the duplicate onto the earlier record and see the
//! same index a rewrite would have produced. Once the file is twice the canonical size it is
//! compacted: the canonical lines are written to a temp file that replaces it (rename), as is
//! every upsert that finds the file changed by someone else (after reading it again). So the
//! file holds at most one extra copy's worth of superseded records, and the cost of rewriting
//! is paid once per as many bytes appended (`docs/compatibility.md`).
//!
//! With auth on, a record also carries its chat's [`Owner`] (`"owner":{"sub","tenant"?}`, written
//! only when there is one, after the six contract keys; older agw readers ignore it). The owner is
//! set when the record is created and never changed; an upsert by someone the caller's permission
//! check refuses changes nothing (`docs/security.md`, "Per-user isolation").
//!
//! Deleting a chat ([`ChatIndex::remove`]) appends a tombstone, `{"chatId":"…","deleted":true}`:
//! readers drop every record of that chat before it, and a record after it starts the chat
//! afresh. Compaction writes the canonical lines, where a deleted chat has none, so the
//! tombstone goes with the records it buried.

use std::collections::HashMap;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use agw_protocol::ids;
use agw_protocol::usage::{Cost, RunUsage};
use serde::{Deserialize, Serialize};

use crate::config::FsyncPolicy;
use crate::error::MemoryError;
use crate::file;
use crate::group_sync::GroupSync;

pub(crate) const INDEX_FILE: &str = "_chats.jsonl";

/// Who a chat — and the runs in it — belongs to: the authenticated subject (`sub`), and the
/// tenant when the deployment names a tenant claim.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Owner {
    /// The token's subject claim.
    pub sub: String,
    /// The tenant claim's value; `None` when the deployment names no tenant claim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

/// One chat as listed by `GET /api/ap/chats` and written to the index (all six keys, `null`s
/// written): `{"chatId","chatName","firstAgentKey","firstAgentName","createdAt","updatedAt"}`.
/// The owner is never part of the listing; the index line carries it after the six keys.
/// agw adds the chat's `usage` and `cost` (summed over its finished runs) when it has any.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatSummary {
    /// Canonical UUID of the chat; also the stem of its history file.
    pub chat_id: String,
    /// The first message, whitespace collapsed and cut to 30 code points (`新对话` if blank).
    pub chat_name: String,
    /// Key of the agent that ran the chat's first run; filled once, never overwritten.
    pub first_agent_key: Option<String>,
    /// Display name of that agent (its key when it has none).
    pub first_agent_name: Option<String>,
    /// When the chat was created, epoch ms.
    pub created_at: i64,
    /// When a run last touched the chat, epoch ms; listings sort on it, newest first.
    pub updated_at: i64,
    /// agw: the usage of the chat's finished runs, merged (`None`: none reported any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<RunUsage>,
    /// agw: their cost, when every run with usage was priced, in one currency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// agw: the agent the chat's last run ended with, once a handoff moved the conversation to
    /// another agent than it started with (docs/multi-agent.md, "Handoffs"); the chat's next
    /// queries go to it unless they name another agent. `None` for chats without handoffs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_agent_key: Option<String>,
    /// `None`: a chat made without auth (or before agw knew owners).
    #[serde(skip)]
    pub owner: Option<Owner>,
}

/// An index line: the listing keys, then the owner when there is one, then whether a run of
/// the chat had usage but no price (so its `cost` is not the chat's).
#[derive(Serialize)]
struct StoredLine<'a> {
    #[serde(flatten)]
    summary: &'a ChatSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a Owner>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    unpriced: bool,
}

/// Result of [`crate::ChatStore::upsert_chat`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatUpsert {
    /// The chat did not exist before this query: the run emits `chat.start`.
    pub created: bool,
    /// The chat's name (for `chat.start` and the webhook).
    pub chat_name: String,
}

/// An index record as found on disk (or in the `chats` table): every field optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Record {
    #[serde(default)]
    chat_id: Option<String>,
    #[serde(default)]
    chat_name: Option<String>,
    #[serde(default)]
    first_agent_key: Option<String>,
    #[serde(default)]
    first_agent_name: Option<String>,
    #[serde(default)]
    created_at: Option<i64>,
    #[serde(default)]
    updated_at: Option<i64>,
    /// An owner that does not read as one (hand-edited, wrong type) is no owner: the chat is then
    /// visible only to the operator when auth is on, never to the wrong user.
    #[serde(default, deserialize_with = "lenient_owner")]
    owner: Option<Owner>,
    /// Totals that do not read as totals (hand-edited) are no totals: the listing leaves them
    /// out, the chat's history still has every run's.
    // Boxed: most records have none, and the index holds many records.
    #[serde(default, deserialize_with = "lenient")]
    usage: Option<Box<RunUsage>>,
    #[serde(default, deserialize_with = "lenient")]
    cost: Option<Cost>,
    #[serde(default)]
    unpriced: Option<bool>,
    #[serde(default)]
    last_agent_key: Option<String>,
    /// A tombstone: the chat was deleted; the records before it are gone.
    #[serde(default)]
    deleted: Option<bool>,
}

/// The line that buries a chat's records ([`ChatIndex::remove`]).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Tombstone<'a> {
    chat_id: &'a str,
    deleted: bool,
}

fn lenient<'de, D: serde::Deserializer<'de>, T: serde::de::DeserializeOwned>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value::<T>(value).ok())
}

fn lenient_owner<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Owner>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value::<Owner>(value).ok().filter(|owner| !owner.sub.trim().is_empty()))
}

/// An upsert the caller's permission check refused: the chat exists and is not theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused;

/// Applies an upsert to the chat's record (`None`: there is none; then it returns the new one).
pub(crate) type Update<'a> = dyn Fn(Option<&mut Record>) -> Result<Option<Record>, Refused> + 'a;
/// A record as its index line, plus the chat's name.
type Encode<'a> = dyn Fn(&Record) -> Result<(String, String), MemoryError> + 'a;

/// A record as the index writes it ([`encode`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Encoded {
    /// The index line (without `\n`).
    pub(crate) line: String,
    /// The chat's name after the rewrite rules.
    pub(crate) chat_name: String,
    /// The stored `updatedAt` (what listings sort on).
    pub(crate) updated_at: i64,
}

/// The index line of a record as every backend stores it: the six listing keys with the rewrite
/// rules applied (`now_ms` fills a missing `createdAt`), then the owner, then `unpriced`.
pub(crate) fn encode(record: &Record, now_ms: i64) -> Result<Encoded, serde_json::Error> {
    let stored = record.to_stored(now_ms);
    let unpriced = record.unpriced == Some(true);
    let line = serde_json::to_string(&StoredLine { summary: &stored, owner: stored.owner.as_ref(), unpriced })?;
    Ok(Encoded { line, chat_name: stored.chat_name, updated_at: stored.updated_at })
}

/// A stored index line as a record; `None` when it is not one (not JSON, no chat id, a
/// tombstone).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) fn parse_record(line: &str) -> Option<Record> {
    serde_json::from_str::<Record>(line.trim()).ok().filter(|r| !r.id().trim().is_empty() && !r.is_tombstone())
}

/// The listing of some records (`docs/contract/http-api.md` §3): chats with a UUID id, with the listing rules,
/// newest first (`updatedAt` descending, ties in the given order).
pub(crate) fn listing<'a>(records: impl IntoIterator<Item = &'a Record>) -> Vec<ChatSummary> {
    let mut chats: Vec<ChatSummary> =
        records.into_iter().filter(|r| ids::canonical_uuid(r.id()).is_some()).map(Record::to_listed).collect();
    chats.sort_by_key(|c| std::cmp::Reverse(c.updated_at));
    chats
}

/// An upsert of a chat's record for an accepted query ([`crate::ChatStore::upsert_owned_chat`]),
/// independent of where the record is kept.
pub(crate) struct UpsertRequest<'a> {
    pub(crate) chat_id: &'a str,
    pub(crate) first_message: &'a str,
    pub(crate) agent_key: Option<&'a str>,
    pub(crate) agent_name: Option<&'a str>,
    pub(crate) owner: Option<&'a Owner>,
    pub(crate) permit: &'a dyn Fn(Option<&Owner>) -> bool,
    pub(crate) now_ms: i64,
}

impl UpsertRequest<'_> {
    /// Applies the upsert to the chat's record (`None`: there is none; then the new record is
    /// returned). Refused when `permit` refuses the owner of the existing chat. An `orphan` (a chat
    /// with history but no record) counts as an existing chat without an owner: its new record
    /// gets no owner either.
    pub(crate) fn update(&self, existing: Option<&mut Record>, orphan: bool) -> Result<Option<Record>, Refused> {
        let agent_key = self.agent_key.map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned);
        let agent_name =
            self.agent_name.map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned).or(agent_key.clone());
        let permit = self.permit;
        match existing {
            Some(record) if !permit(record.owner.as_ref()) => Err(Refused),
            None if orphan && !permit(None) => Err(Refused),
            Some(record) => {
                // Fill what is missing, never overwrite (the owner included).
                if non_blank(&record.chat_name).is_none() {
                    record.chat_name = Some(ids::chat_name(self.first_message));
                }
                if non_blank(&record.first_agent_key).is_none() {
                    record.first_agent_key = agent_key;
                }
                if non_blank(&record.first_agent_name).is_none() {
                    record.first_agent_name = agent_name;
                }
                if record.created_at.is_none_or(|t| t <= 0) {
                    record.created_at = Some(self.now_ms);
                }
                record.updated_at = Some(self.now_ms);
                Ok(None)
            }
            None => Ok(Some(Record {
                chat_id: Some(self.chat_id.to_owned()),
                chat_name: Some(ids::chat_name(self.first_message)),
                first_agent_key: agent_key,
                first_agent_name: agent_name,
                created_at: Some(self.now_ms),
                updated_at: Some(self.now_ms),
                // A chat found without a record keeps having no owner: nobody may claim it.
                owner: if orphan { None } else { self.owner.cloned() },
                ..Record::default()
            })),
        }
    }
}

/// The outcome of an index upsert that was not refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Upserted {
    /// The chat had an index record before.
    pub(crate) was_indexed: bool,
    /// The chat had history before (without a record: an orphan).
    pub(crate) had_history: bool,
    /// The chat's name after the upsert.
    pub(crate) chat_name: String,
}

/// Adds a finished run's usage and cost to the chat's record; [`Refused`] (nothing to write)
/// when there is no record.
pub(crate) fn add_totals(
    existing: Option<&mut Record>,
    usage: &RunUsage,
    cost: Option<&Cost>,
) -> Result<Option<Record>, Refused> {
    match existing {
        Some(record) => {
            record.add_run(usage, cost);
            Ok(None)
        }
        None => Err(Refused),
    }
}

/// Notes the agent a finished run of the chat ended with ([`crate::ChatStore::note_last_agent`]):
/// written when the run handed over, or when the chat already has one (a later run may end with
/// another agent); [`Refused`] (nothing to write) otherwise, or when nothing changes.
pub(crate) fn note_agent(
    existing: Option<&mut Record>,
    agent_key: &str,
    handed_off: bool,
) -> Result<Option<Record>, Refused> {
    match existing {
        Some(record)
            if (handed_off || record.last_agent_key.is_some())
                && record.last_agent_key.as_deref() != Some(agent_key) =>
        {
            record.last_agent_key = Some(agent_key.to_owned());
            Ok(None)
        }
        _ => Err(Refused),
    }
}

impl Record {
    pub(crate) fn id(&self) -> &str {
        self.chat_id.as_deref().unwrap_or_default()
    }

    fn is_tombstone(&self) -> bool {
        self.deleted == Some(true)
    }

    /// The record's `updatedAt`, when it has a positive one.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn updated_at(&self) -> Option<i64> {
        self.updated_at.filter(|t| *t > 0)
    }

    /// Duplicates: the later record's values win where it has them.
    fn merge(&mut self, later: Record) {
        fn take<T>(mine: &mut Option<T>, theirs: Option<T>) {
            if theirs.is_some() {
                *mine = theirs;
            }
        }
        take(&mut self.chat_name, later.chat_name);
        take(&mut self.first_agent_key, later.first_agent_key);
        take(&mut self.first_agent_name, later.first_agent_name);
        take(&mut self.created_at, later.created_at);
        take(&mut self.updated_at, later.updated_at);
        take(&mut self.owner, later.owner);
        take(&mut self.usage, later.usage);
        take(&mut self.cost, later.cost);
        take(&mut self.unpriced, later.unpriced);
        take(&mut self.last_agent_key, later.last_agent_key);
    }

    /// Adds one finished run's totals (a run with usage but no cost makes the chat's cost
    /// unknown from then on, as `GET /api/ap/chat` computes it from the history).
    fn add_run(&mut self, usage: &RunUsage, cost: Option<&Cost>) {
        self.usage.get_or_insert_with(Box::default).merge(usage);
        if self.unpriced == Some(true) {
            return;
        }
        let priced = match (cost, &mut self.cost) {
            (Some(run), None) => {
                self.cost = Some(run.clone());
                true
            }
            (Some(run), Some(total)) => total.add(run),
            (None, _) => false,
        };
        if !priced {
            self.unpriced = Some(true);
            self.cost = None;
        }
    }

    fn listed_cost(&self) -> Option<Cost> {
        self.cost.clone().filter(|_| self.unpriced != Some(true))
    }

    /// The rewrite rules: blank name → chatId; createdAt ≤ 0 → now; updatedAt ≤ 0 → createdAt.
    fn to_stored(&self, now_ms: i64) -> ChatSummary {
        let created_at = self.created_at.filter(|t| *t > 0).unwrap_or(now_ms);
        ChatSummary {
            chat_id: self.id().to_owned(),
            chat_name: non_blank(&self.chat_name).unwrap_or_else(|| self.id().to_owned()),
            first_agent_key: self.first_agent_key.clone(),
            first_agent_name: self.first_agent_name.clone(),
            created_at,
            updated_at: self.updated_at.filter(|t| *t > 0).unwrap_or(created_at),
            usage: self.usage.as_deref().cloned(),
            cost: self.cost.clone(),
            last_agent_key: self.last_agent_key.clone(),
            owner: self.owner.clone(),
        }
    }

    /// The listing rules: blank name → chatId; no agent name → agent key; a missing timestamp
    /// borrows the other one.
    pub(crate) fn to_listed(&self) -> ChatSummary {
        let created = self.created_at.filter(|t| *t > 0);
        let updated = self.updated_at.filter(|t| *t > 0);
        ChatSummary {
            chat_id: self.id().to_owned(),
            chat_name: non_blank(&self.chat_name).unwrap_or_else(|| self.id().to_owned()),
            first_agent_key: self.first_agent_key.clone(),
            first_agent_name: non_blank(&self.first_agent_name).or_else(|| self.first_agent_key.clone()),
            created_at: created.or(updated).unwrap_or(0),
            updated_at: updated.or(created).unwrap_or(0),
            usage: self.usage.as_deref().cloned(),
            cost: self.listed_cost(),
            last_agent_key: non_blank(&self.last_agent_key),
            owner: self.owner.clone(),
        }
    }
}

fn non_blank(value: &Option<String>) -> Option<String> {
    value.as_deref().filter(|v| !v.trim().is_empty()).map(str::to_owned)
}

/// A line of the index file.
enum Entry {
    // Boxed: a record is several times the size of a raw line.
    Record(Box<Record>),
    /// Not an index record we can read: kept verbatim.
    Raw(String),
    /// A chat a later tombstone deleted: neither read nor written.
    Gone,
}

/// The index file and the mutex that serialises its writes (and guards [`Written`]).
///
/// Durability (any policy but [`FsyncPolicy::Never`]): an upsert returns once its line is
/// durable, but it does not fsync under the mutex. It appends, takes a ticket of [`GroupSync`]
/// under the mutex, releases the mutex, and waits for a group fsync that covers the ticket: one
/// fsync of the file then serves every upsert that appended before it began, instead of each
/// waiting in line behind the others' (see `group_sync.rs`). The group fsyncs the file at
/// `path`, so that path must keep naming the file that holds the appended lines until they are
/// settled: the only in-process replacement of the file, `replace` (under the mutex, where no
/// ticket can be taken), first settles every ticket issued — waiting for a running group fsync,
/// or leading one of the old file — and only then renames.
pub(crate) struct ChatIndex {
    path: PathBuf,
    fsync: FsyncPolicy,
    lock: Mutex<Option<Written>>,
    /// Group commit of the appended lines' fsyncs; tickets are taken under `lock`.
    group: GroupSync,
    /// fsyncs the file at a path (`file::sync_data`; tests inject failures).
    sync_file: fn(&Path) -> io::Result<()>,
}

/// What an index write leaves to do once the mutex is released.
struct Change {
    /// Whether a record existed before and the chat's name, or refused.
    result: Result<(bool, String), Refused>,
    /// The appended line's ticket, when it must be durable before the caller returns.
    ticket: Option<u64>,
}

impl Change {
    fn unticketed(result: Result<(bool, String), Refused>) -> Self {
        Self { result, ticket: None }
    }
}

/// The index as this process last left it, canonical (one line per chat, in file order), in
/// three allocations: the lines' text, the byte range of each line (without `\n`), and the line
/// of each chat's record keyed by the chat's UUID as a number; plus the identity of the file on
/// disk right after the last write. Used only while the file still has that identity. About as
/// large as the canonical file.
struct Written {
    stamp: Stamp,
    content: String,
    lines: Vec<Range<usize>>,
    positions: HashMap<u128, usize>,
}

impl Written {
    /// The record at line `i`, parsed (our own line: it parses unless memory is corrupt).
    fn record(&self, i: usize) -> Option<Record> {
        serde_json::from_str(self.content.get(self.lines.get(i)?.clone())?).ok()
    }

    /// Replaces line `i` with `line` (shifting the lines after it when the length changed —
    /// rare: usually only `updatedAt` changes, and it keeps its width).
    fn replace(&mut self, i: usize, line: &str) {
        let old = self.lines[i].clone();
        self.content.replace_range(old.clone(), line);
        let new_end = old.start + line.len();
        self.lines[i] = old.start..new_end;
        if new_end != old.end {
            for range in &mut self.lines[i + 1..] {
                *range = range.start + new_end - old.end..range.end + new_end - old.end;
            }
        }
    }

    /// Removes line `i` (a deleted chat's) and its `\n`, shifting the lines after it.
    fn remove(&mut self, i: usize) {
        let range = self.lines.remove(i);
        let width = range.end + 1 - range.start;
        self.content.replace_range(range.start..range.end + 1, "");
        for later in &mut self.lines[i..] {
            *later = later.start - width..later.end - width;
        }
        self.positions.retain(|_, p| *p != i);
        for p in self.positions.values_mut() {
            if *p > i {
                *p -= 1;
            }
        }
    }

    fn push(&mut self, key: Option<u128>, line: &str) {
        let start = self.content.len();
        self.content.push_str(line);
        self.content.push('\n');
        self.positions.extend(key.map(|k| (k, self.lines.len())));
        self.lines.push(start..start + line.len());
    }
}

/// A canonical chat id (lower-case hyphenated UUID, the only ids upserts use) as a number.
fn uuid_key(id: &str) -> Option<u128> {
    let canonical = id.len() == 36
        && id.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_digit() || ('a'..='f').contains(&c),
        });
    canonical.then(|| u128::from_str_radix(&id.replace('-', ""), 16).ok()).flatten()
}

/// What tells the file we wrote from any other file at that path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

impl Stamp {
    #[cfg(unix)]
    fn of(meta: &std::fs::Metadata) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        Some(Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        })
    }

    #[cfg(not(unix))]
    fn of(_meta: &std::fs::Metadata) -> Option<Self> {
        None
    }
}

fn stamp(path: &std::path::Path) -> Option<Stamp> {
    Stamp::of(&std::fs::metadata(path).ok()?)
}

impl ChatIndex {
    pub(crate) fn new(path: PathBuf, fsync: FsyncPolicy) -> Self {
        Self { path, fsync, lock: Mutex::new(None), group: GroupSync::new(), sync_file: file::sync_data }
    }

    /// Upserts one chat and writes the change. Returns whether a record existed before and the
    /// chat's name after the upsert, or [`Refused`] (nothing written) when the request's permit
    /// refuses the owner of the existing chat ([`UpsertRequest::update`]; `orphan`: the chat has
    /// a history file but no record).
    pub(crate) fn upsert(
        &self,
        request: &UpsertRequest<'_>,
        orphan: bool,
    ) -> Result<Result<(bool, String), Refused>, MemoryError> {
        let guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let update = |existing: Option<&mut Record>| request.update(existing, orphan);
        let durable = self.fsync != FsyncPolicy::Never;
        let now_ms = request.now_ms;
        // `apply_with` consumes the guard: the mutex is free again while we wait for the fsync.
        let change =
            self.apply_with(guard, request.chat_id, &update, &|record| self.encode(record, now_ms), durable)?;
        if let Some(ticket) = change.ticket {
            self.group
                .wait_durable(ticket, || (self.sync_file)(&self.path))
                .map_err(MemoryError::io("fsync", &self.path))?;
        }
        Ok(change.result)
    }

    /// Adds a finished run's usage and cost to its chat's record (no record: nothing to do).
    /// Not fsynced: the history holds every run's totals; the index only sums them up.
    pub(crate) fn add_run_totals(
        &self,
        chat_id: &str,
        usage: &RunUsage,
        cost: Option<&Cost>,
        now_ms: i64,
    ) -> Result<(), MemoryError> {
        let guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        // `Refused` here means "nothing to write".
        let update = |existing: Option<&mut Record>| add_totals(existing, usage, cost);
        self.apply_with(guard, chat_id, &update, &|record| self.encode(record, now_ms), false).map(|_| ())
    }

    pub(crate) fn note_agent(
        &self,
        chat_id: &str,
        agent_key: &str,
        handed_off: bool,
        now_ms: i64,
    ) -> Result<(), MemoryError> {
        let guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        // `Refused` here means "nothing to write".
        let update = |existing: Option<&mut Record>| note_agent(existing, agent_key, handed_off);
        self.apply_with(guard, chat_id, &update, &|record| self.encode(record, now_ms), false).map(|_| ())
    }

    fn encode(&self, record: &Record, now_ms: i64) -> Result<(String, String), MemoryError> {
        encode(record, now_ms)
            .map(|encoded| (encoded.line, encoded.chat_name))
            .map_err(|source| MemoryError::Encode { path: self.path.clone(), source })
    }

    /// Applies `update` to the chat's record and writes the change: appended to the file we
    /// left, or the whole index rewritten when it changed under us (or is half superseded).
    /// Releases the mutex (`guard`) before it returns. `durable`: an appended line gets a
    /// ticket, for the caller to wait on after the release; a rewrite is durable already.
    fn apply_with(
        &self,
        mut guard: std::sync::MutexGuard<'_, Option<Written>>,
        chat_id: &str,
        update: &Update<'_>,
        encode: &Encode<'_>,
        durable: bool,
    ) -> Result<Change, MemoryError> {
        // The index as we left it, while the file is still that file: only the changed record
        // is parsed and encoded, and only its line is written.
        let key = uuid_key(chat_id);
        let written = guard.take().filter(|w| key.is_some() && stamp(&self.path) == Some(w.stamp));
        let cached = written.and_then(|w| {
            let position = key.and_then(|k| w.positions.get(&k).copied());
            let mut record = match position {
                Some(i) => Some(w.record(i)?),
                None => None,
            };
            let added = update(record.as_mut());
            Some((w, position, added.map(|added| record.or(added))))
        });
        if let Some((w, position, outcome)) = cached {
            let (mut w, record) = match outcome {
                Err(refused) => {
                    // Nothing changed: the file is still the one we know.
                    *guard = Some(w);
                    return Ok(Change::unticketed(Err(refused)));
                }
                Ok(Some(record)) => (w, record),
                // Unreachable (an update without a record adds one); read the file instead.
                Ok(None) => return self.upsert_uncached(guard, chat_id, update, encode),
            };
            let (line, chat_name) = encode(&record)?;
            match position {
                Some(i) => w.replace(i, &line),
                None => w.push(key, &line),
            }
            let appended = w.stamp.len + line.len() as u64 + 1;
            let (stamp, ticket) = if appended <= 2 * w.content.len() as u64 {
                let mut payload = line.into_bytes();
                payload.push(b'\n');
                let meta = file::append_existing(&self.path, &payload)?;
                // After the write, under the mutex: tickets follow the order of the lines.
                (Stamp::of(&meta), durable.then(|| self.group.ticket()))
            } else {
                // Compaction: superseded records make up half the file.
                self.replace(w.content.as_bytes())?;
                (stamp(&self.path), None)
            };
            let existed = position.is_some();
            // Kept only when the identity of what we just wrote is known.
            *guard = stamp.map(|stamp| Written { stamp, ..w });
            return Ok(Change { result: Ok((existed, chat_name)), ticket });
        }
        self.upsert_uncached(guard, chat_id, update, encode)
    }

    /// First upsert, or someone else changed the file: read it all and rewrite it.
    fn upsert_uncached(
        &self,
        mut guard: std::sync::MutexGuard<'_, Option<Written>>,
        chat_id: &str,
        update: &Update<'_>,
        encode: &Encode<'_>,
    ) -> Result<Change, MemoryError> {
        let mut entries = self.read()?;
        let existing = entries.iter_mut().find_map(|e| match e {
            Entry::Record(r) if r.id() == chat_id => Some(&mut **r),
            _ => None,
        });
        let existed = existing.is_some();
        match update(existing) {
            Err(refused) => return Ok(Change::unticketed(Err(refused))),
            Ok(Some(added)) => entries.push(Entry::Record(Box::new(added))),
            Ok(None) => {}
        }
        let mut w = Written {
            stamp: Stamp { dev: 0, ino: 0, len: 0, mtime_ns: 0 },
            content: String::new(),
            lines: Vec::with_capacity(entries.len()),
            positions: HashMap::with_capacity(entries.len()),
        };
        let mut chat_name = String::new();
        for entry in &entries {
            match entry {
                Entry::Record(record) => {
                    let (line, name) = encode(record)?;
                    if record.id() == chat_id {
                        chat_name = name;
                    }
                    w.push(uuid_key(record.id()), &line);
                }
                Entry::Raw(raw) => w.push(None, raw),
                Entry::Gone => {}
            }
        }
        self.replace(w.content.as_bytes())?;
        // Kept only when the identity of what we just wrote is known.
        *guard = stamp(&self.path).map(|stamp| Written { stamp, ..w });
        Ok(Change::unticketed(Ok((existed, chat_name))))
    }

    /// Deletes the chat's record: a tombstone appended to the file we left (compacted instead
    /// when the file is twice its canonical size), or the whole index rewritten without it when
    /// the file changed under us. Returns whether there was a record; without one nothing is
    /// written. Durable when it returns, as an upsert is (any policy but `never`).
    pub(crate) fn remove(&self, chat_id: &str) -> Result<bool, MemoryError> {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let key = uuid_key(chat_id);
        let written = guard.take().filter(|w| key.is_some() && stamp(&self.path) == Some(w.stamp));
        let ticket = match written {
            Some(mut w) => {
                let Some(i) = key.and_then(|k| w.positions.get(&k).copied()) else {
                    *guard = Some(w);
                    return Ok(false);
                };
                w.remove(i);
                let line = serde_json::to_string(&Tombstone { chat_id, deleted: true })
                    .map_err(|source| MemoryError::Encode { path: self.path.clone(), source })?;
                let appended = w.stamp.len + line.len() as u64 + 1;
                let (stamp, ticket) = if appended <= 2 * w.content.len() as u64 {
                    let mut payload = line.into_bytes();
                    payload.push(b'\n');
                    let meta = file::append_existing(&self.path, &payload)?;
                    (Stamp::of(&meta), (self.fsync != FsyncPolicy::Never).then(|| self.group.ticket()))
                } else {
                    self.replace(w.content.as_bytes())?;
                    (stamp(&self.path), None)
                };
                *guard = stamp.map(|stamp| Written { stamp, ..w });
                drop(guard);
                ticket
            }
            None => {
                let mut entries = self.read()?;
                let Some(entry) = entries.iter_mut().find(|e| matches!(e, Entry::Record(r) if r.id() == chat_id))
                else {
                    return Ok(false);
                };
                *entry = Entry::Gone;
                let mut w = Written {
                    stamp: Stamp { dev: 0, ino: 0, len: 0, mtime_ns: 0 },
                    content: String::new(),
                    lines: Vec::with_capacity(entries.len()),
                    positions: HashMap::with_capacity(entries.len()),
                };
                // Only a record without `createdAt` (hand-edited) takes it.
                let now_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as i64);
                for entry in &entries {
                    match entry {
                        Entry::Record(record) => w.push(uuid_key(record.id()), &self.encode(record, now_ms)?.0),
                        Entry::Raw(raw) => w.push(None, raw),
                        Entry::Gone => {}
                    }
                }
                self.replace(w.content.as_bytes())?;
                *guard = stamp(&self.path).map(|stamp| Written { stamp, ..w });
                None
            }
        };
        if let Some(ticket) = ticket {
            self.group
                .wait_durable(ticket, || (self.sync_file)(&self.path))
                .map_err(MemoryError::io("fsync", &self.path))?;
        }
        Ok(true)
    }

    /// Replaces the file with `content` (temp file + rename; call under the mutex). Under every
    /// policy but [`FsyncPolicy::Never`] the temp file is fsynced before the rename, so a power
    /// cut leaves the old or the new index, never an empty one — and first every ticket issued
    /// so far is settled by an fsync of the file being replaced (joining one that runs, or
    /// leading one): each line appended to it is durable there, as the upsert that wrote it
    /// promises, even when the rename itself does not survive a power cut (the directory is
    /// not fsynced). No ticket can be taken meanwhile (the caller holds the mutex), and no
    /// group fsync is left running, so none can open the new file for lines of the old one.
    fn replace(&self, content: &[u8]) -> Result<(), MemoryError> {
        let sync = self.fsync != FsyncPolicy::Never;
        if sync {
            self.group.sync_issued(|| (self.sync_file)(&self.path)).map_err(MemoryError::io("fsync", &self.path))?;
        }
        file::rewrite(&self.path, content, sync)
    }

    /// One chat's record, with the listing rules; `None` when the index has none.
    pub(crate) fn get(&self, chat_id: &str) -> Result<Option<ChatSummary>, MemoryError> {
        {
            let guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            if let (Some(w), Some(key)) = (guard.as_ref(), uuid_key(chat_id))
                && stamp(&self.path) == Some(w.stamp)
            {
                let Some(&i) = w.positions.get(&key) else { return Ok(None) };
                if let Some(record) = w.record(i) {
                    return Ok(Some(record.to_listed()));
                }
            }
        }
        Ok(self.list()?.into_iter().find(|c| c.chat_id == chat_id))
    }

    /// Chats with a UUID id, newest first (`updatedAt` descending, ties in file order).
    pub(crate) fn list(&self) -> Result<Vec<ChatSummary>, MemoryError> {
        Ok(listing(&self.records()?))
    }

    /// Every readable record of the file, duplicates collapsed, in file order.
    pub(crate) fn records(&self) -> Result<Vec<Record>, MemoryError> {
        let entries = {
            let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.read()?
        };
        Ok(entries
            .into_iter()
            .filter_map(|e| match e {
                Entry::Record(r) => Some(*r),
                Entry::Raw(_) | Entry::Gone => None,
            })
            .collect())
    }

    /// Reads the file (missing → empty), collapsing duplicate records onto the first position.
    fn read(&self) -> Result<Vec<Entry>, MemoryError> {
        let Some(bytes) = file::read(&self.path)? else { return Ok(Vec::new()) };
        let text = String::from_utf8_lossy(&bytes);
        // Every write ends its lines with `\n`: an unreadable last line without one was cut by
        // a crash mid-append, and is dropped rather than kept (a readable one is an edit).
        let ends_complete = text.ends_with('\n');
        let mut entries: Vec<Entry> = Vec::new();
        let mut positions: HashMap<String, usize> = HashMap::new();
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match serde_json::from_str::<Record>(line) {
                // A record without an id names no chat: nothing to keep.
                Ok(record) if record.id().trim().is_empty() => {}
                // A tombstone buries the chat's records so far; a later record starts it afresh.
                Ok(record) if record.is_tombstone() => {
                    if let Some(i) = positions.remove(record.id())
                        && let Some(entry) = entries.get_mut(i)
                    {
                        *entry = Entry::Gone;
                    }
                }
                Ok(record) => match positions.get(record.id()).and_then(|&i| entries.get_mut(i)) {
                    Some(Entry::Record(first)) => first.merge(record),
                    _ => {
                        positions.insert(record.id().to_owned(), entries.len());
                        entries.push(Entry::Record(Box::new(record)));
                    }
                },
                Err(error) if !ends_complete && lines.peek().is_none() => {
                    tracing::warn!(path = %self.path.display(), %error, "dropping the torn last line of the chat index");
                }
                Err(error) => {
                    tracing::warn!(path = %self.path.display(), %error, "keeping an unreadable chat index line as is");
                    entries.push(Entry::Raw(line.to_owned()));
                }
            }
        }
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: &str = "7f1c2a3b-4d5e-4f60-8a9b-0c1d2e3f4a5b";

    /// A directory of its own, removed at the end.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("agw-index-unit-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn usage(input: u64, output: u64) -> RunUsage {
        let mut usage = RunUsage::default();
        usage.add("openai", "m", &serde_json::json!({"prompt_tokens": input, "completion_tokens": output}));
        usage
    }

    fn usd(amount: f64) -> Cost {
        Cost { currency: "USD".into(), amount }
    }

    fn index(dir: &Scratch) -> ChatIndex {
        ChatIndex::new(dir.0.as_path().join(INDEX_FILE), FsyncPolicy::Never)
    }

    fn new_chat(index: &ChatIndex) {
        let request = UpsertRequest {
            chat_id: CHAT,
            first_message: "hello",
            agent_key: Some("a"),
            agent_name: None,
            owner: None,
            permit: &|_| true,
            now_ms: 100,
        };
        let upsert = index.upsert(&request, false).unwrap();
        assert!(upsert.is_ok());
    }

    #[test]
    fn run_totals_add_up_in_the_listing_and_survive_a_fresh_read() {
        let dir = Scratch::new();
        let first = index(&dir);
        new_chat(&first);
        first.add_run_totals(CHAT, &usage(1_000, 100), Some(&usd(0.5)), 200).unwrap();
        first.add_run_totals(CHAT, &usage(2_000, 10), Some(&usd(0.25)), 300).unwrap();
        let listed = first.get(CHAT).unwrap().unwrap();
        assert_eq!(listed.usage.as_ref().map(|u| (u.totals.input_tokens, u.totals.output_tokens)), Some((3_000, 110)));
        assert_eq!(listed.cost, Some(usd(0.75)));
        // A reader that starts from the file (another process, a restart) sees the same.
        let again = index(&dir).list().unwrap();
        assert_eq!(again, vec![listed]);
    }

    #[test]
    fn one_unpriced_run_or_another_currency_makes_the_chat_cost_unknown_for_good() {
        let dir = Scratch::new();
        let index = index(&dir);
        new_chat(&index);
        index.add_run_totals(CHAT, &usage(10, 1), Some(&usd(0.1)), 200).unwrap();
        index.add_run_totals(CHAT, &usage(10, 1), None, 300).unwrap();
        index.add_run_totals(CHAT, &usage(10, 1), Some(&usd(0.1)), 400).unwrap();
        let listed = index.get(CHAT).unwrap().unwrap();
        assert_eq!(listed.usage.unwrap().totals.input_tokens, 30);
        assert_eq!(listed.cost, None);
        assert!(index_text(&dir).lines().last().unwrap().contains(r#""unpriced":true"#));

        let other = Scratch::new();
        let mixed = super::tests::index(&other);
        new_chat(&mixed);
        mixed.add_run_totals(CHAT, &usage(10, 1), Some(&usd(0.1)), 200).unwrap();
        mixed.add_run_totals(CHAT, &usage(10, 1), Some(&Cost { currency: "EUR".into(), amount: 0.1 }), 300).unwrap();
        assert_eq!(mixed.get(CHAT).unwrap().unwrap().cost, None);
    }

    #[test]
    fn totals_for_a_chat_without_a_record_write_nothing_and_bad_totals_read_as_none() {
        let dir = Scratch::new();
        let index = index(&dir);
        index.add_run_totals(CHAT, &usage(10, 1), None, 200).unwrap();
        assert!(!dir.0.as_path().join(INDEX_FILE).exists());
        let line =
            format!(r#"{{"chatId":"{CHAT}","chatName":"x","createdAt":1,"updatedAt":2,"usage":"lots","cost":7}}"#);
        std::fs::write(dir.0.as_path().join(INDEX_FILE), line + "\n").unwrap();
        let listed = index.get(CHAT).unwrap().unwrap();
        assert_eq!((listed.usage, listed.cost), (None, None));
    }

    // ---- deleting a chat: the tombstone ----

    #[test]
    fn a_deleted_chat_is_gone_for_this_reader_and_a_fresh_one_and_its_id_starts_a_new_chat() {
        let dir = Scratch::new();
        let index = index(&dir);
        for n in 0..3 {
            upsert_at(&index, &chat_id(n), 100 + n as i64).unwrap();
        }
        // The middle line: the cached lines after it move up.
        assert!(index.remove(&chat_id(1)).unwrap());
        assert!(!index.remove(&chat_id(1)).unwrap(), "nothing left to delete");
        assert!(!index.remove(&chat_id(9)).unwrap(), "never there");
        let text = index_text(&dir);
        assert!(text.ends_with(&format!("{{\"chatId\":\"{}\",\"deleted\":true}}\n", chat_id(1))), "{text}");
        let ids = |chats: Vec<ChatSummary>| chats.into_iter().map(|c| c.chat_id).collect::<Vec<_>>();
        assert_eq!(ids(index.list().unwrap()), [chat_id(2), chat_id(0)]);
        assert_eq!(ids(super::tests::index(&dir).list().unwrap()), [chat_id(2), chat_id(0)]);
        assert_eq!(index.get(&chat_id(1)).unwrap(), None);
        assert_eq!(index.get(&chat_id(2)).unwrap().unwrap().updated_at, 102, "the lines after it still read");
        // The same id again: a new chat (no record existed), not the old one back.
        let (existed, _) = upsert_at(&index, &chat_id(1), 500).unwrap();
        assert!(!existed);
        let again = super::tests::index(&dir).get(&chat_id(1)).unwrap().unwrap();
        assert_eq!((again.created_at, again.updated_at), (500, 500));
        assert_eq!(super::tests::index(&dir).list().unwrap(), index.list().unwrap());
    }

    #[test]
    fn compaction_keeps_a_deleted_chat_gone_and_drops_its_tombstone() {
        let dir = Scratch::new();
        let index = index(&dir);
        for n in 0..4 {
            upsert_at(&index, &chat_id(n), 100).unwrap();
        }
        assert!(index.remove(&chat_id(0)).unwrap());
        // Upserts of the others until the file is compacted (it shrinks back to one line each).
        let mut compacted = false;
        for step in 0..20 {
            upsert_at(&index, &chat_id(1 + step % 3), 200 + step as i64).unwrap();
            if index_text(&dir).lines().count() == 3 {
                compacted = true;
                break;
            }
        }
        assert!(compacted, "{}", index_text(&dir));
        let text = index_text(&dir);
        assert!(!text.contains(&chat_id(0)), "neither its records nor its tombstone: {text}");
        let fresh = super::tests::index(&dir).list().unwrap();
        assert_eq!(fresh.len(), 3);
        assert_eq!(fresh, index.list().unwrap());
    }

    #[test]
    fn a_reader_that_did_not_write_the_file_deletes_by_rewriting_it() {
        let dir = Scratch::new();
        let writer = index(&dir);
        for n in 0..3 {
            upsert_at(&writer, &chat_id(n), 100).unwrap();
        }
        // Someone else's tombstone and a record after it, as the file can hold them.
        let mut text = index_text(&dir);
        text.push_str(&format!("{{\"chatId\":\"{}\",\"deleted\":true}}\nnot json\n", chat_id(2)));
        std::fs::write(dir.0.as_path().join(INDEX_FILE), &text).unwrap();
        let other = index(&dir);
        assert_eq!(other.list().unwrap().len(), 2, "the tombstone buries its chat");
        assert!(other.remove(&chat_id(0)).unwrap());
        let text = index_text(&dir);
        assert_eq!(text.lines().count(), 2, "one record and the unreadable line, kept: {text}");
        assert!(text.contains(&chat_id(1)) && text.contains("not json"), "{text}");
        assert_eq!(writer.list().unwrap().into_iter().map(|c| c.chat_id).collect::<Vec<_>>(), [chat_id(1)]);
    }

    #[test]
    fn a_tombstone_is_not_a_record_for_the_database_either() {
        assert!(parse_record(&format!("{{\"chatId\":\"{CHAT}\",\"deleted\":true}}")).is_none());
        assert!(parse_record(&format!("{{\"chatId\":\"{CHAT}\",\"deleted\":false}}")).is_some());
    }

    fn index_text(dir: &Scratch) -> String {
        std::fs::read_to_string(dir.0.as_path().join(INDEX_FILE)).unwrap()
    }

    // ---- group commit of the index's fsyncs ----

    /// An index that fsyncs (policy `run`) through `sync_file`.
    fn synced_index(dir: &Scratch, sync_file: fn(&Path) -> io::Result<()>) -> ChatIndex {
        ChatIndex { sync_file, ..ChatIndex::new(dir.0.as_path().join(INDEX_FILE), FsyncPolicy::EveryRun) }
    }

    fn upsert_at(index: &ChatIndex, chat_id: &str, now_ms: i64) -> Result<(bool, String), MemoryError> {
        let request = UpsertRequest {
            chat_id,
            first_message: "hello",
            agent_key: Some("a"),
            agent_name: None,
            owner: None,
            permit: &|_| true,
            now_ms,
        };
        Ok(index.upsert(&request, false)?.expect("nothing is refused"))
    }

    fn chat_id(n: usize) -> String {
        format!("00000000-0000-4000-8000-{n:012x}")
    }

    #[test]
    fn an_upsert_returns_only_once_an_fsync_that_began_after_its_append_has_finished() {
        // The chats of the file as each fsync began, recorded once it finished: what is durable.
        static DURABLE: Mutex<Option<std::collections::HashSet<String>>> = Mutex::new(None);
        static SYNCS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        fn recording(path: &Path) -> io::Result<()> {
            let text = std::fs::read_to_string(path)?;
            file::sync_data(path)?;
            SYNCS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let chats = text.lines().filter_map(parse_record).map(|record| record.id().to_owned());
            DURABLE.lock().unwrap().get_or_insert_default().extend(chats);
            Ok(())
        }
        const THREADS: usize = 8;
        const CHATS: usize = 100;
        let dir = Scratch::new();
        let index = synced_index(&dir, recording);
        // The first upsert writes the file whole (temp file fsynced, renamed): no group fsync.
        upsert_at(&index, &chat_id(0), 1).unwrap();
        assert_eq!(SYNCS.load(std::sync::atomic::Ordering::SeqCst), 0);
        // New chats only: every other upsert appends one line (the file never needs compacting).
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                let index = &index;
                scope.spawn(move || {
                    for c in 0..CHATS {
                        let id = chat_id(1 + t * CHATS + c);
                        let (existed, _) = upsert_at(index, &id, 1).unwrap();
                        assert!(!existed);
                        let durable = DURABLE.lock().unwrap();
                        assert!(
                            durable.as_ref().is_some_and(|d| d.contains(&id)),
                            "{id} returned before it was durable"
                        );
                    }
                });
            }
        });
        let upserts = THREADS * CHATS;
        let syncs = SYNCS.load(std::sync::atomic::Ordering::SeqCst);
        assert!(syncs <= upserts, "at most one fsync per upsert: {syncs} for {upserts}");
        eprintln!("{upserts} concurrent upserts, {syncs} fsyncs of the index");
        assert_eq!(index_text(&dir).lines().count(), upserts + 1, "appended, not rewritten");
        assert_eq!(index.list().unwrap().len(), upserts + 1);
    }

    #[test]
    fn concurrent_upserts_with_compactions_keep_every_chat() {
        let dir = Scratch::new();
        let index = ChatIndex::new(dir.0.as_path().join(INDEX_FILE), FsyncPolicy::EveryRun);
        std::thread::scope(|scope| {
            for t in 0..8i64 {
                let index = &index;
                scope.spawn(move || {
                    for step in 0..150i64 {
                        // Ten chats, each upserted again and again: the file is compacted often.
                        let id = chat_id((t * 150 + step) as usize % 10);
                        upsert_at(index, &id, 1_000 + t * 1_000 + step).unwrap();
                    }
                });
            }
        });
        let listed = index.list().unwrap();
        assert_eq!(listed.len(), 10);
        let text = index_text(&dir);
        assert!(text.lines().count() <= 20, "compacted to at most twice its canonical size: {text}");
        // A reader starting from the file sees what this process keeps.
        assert_eq!(super::tests::index(&dir).list().unwrap(), listed);
    }

    #[test]
    fn a_compaction_first_makes_the_lines_appended_to_the_old_file_durable() {
        static SYNCED: Mutex<Vec<String>> = Mutex::new(Vec::new());
        fn recording(path: &Path) -> io::Result<()> {
            SYNCED.lock().unwrap().push(std::fs::read_to_string(path)?);
            file::sync_data(path)
        }
        let dir = Scratch::new();
        let index = synced_index(&dir, recording);
        upsert_at(&index, CHAT, 100).unwrap();
        // An upsert that has appended and taken its ticket but not yet waited for its fsync.
        let request = UpsertRequest {
            chat_id: CHAT,
            first_message: "hello",
            agent_key: None,
            agent_name: None,
            owner: None,
            permit: &|_| true,
            now_ms: 200,
        };
        let update = |existing: Option<&mut Record>| request.update(existing, false);
        let guard = index.lock.lock().unwrap();
        let change = index.apply_with(guard, CHAT, &update, &|record| index.encode(record, 200), true).unwrap();
        let ticket = change.ticket.expect("an appended line gets a ticket");
        assert_eq!(index_text(&dir).lines().count(), 2);
        assert!(SYNCED.lock().unwrap().is_empty());
        // The next upsert compacts (the file is twice its canonical size): before the rename it
        // fsyncs the old file, which holds the pending line.
        upsert_at(&index, CHAT, 300).unwrap();
        let synced = SYNCED.lock().unwrap().clone();
        assert_eq!(synced.len(), 1, "{synced:?}");
        assert!(synced[0].lines().count() == 2 && synced[0].contains(r#""updatedAt":200"#), "{synced:?}");
        assert_eq!(index_text(&dir).lines().count(), 1, "compacted");
        index.group.wait_durable(ticket, || panic!("settled by the compaction")).expect("durable");
    }

    #[test]
    fn an_index_fsync_error_fails_the_upsert_and_the_next_one_retries() {
        static FAIL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        fn failing(path: &Path) -> io::Result<()> {
            if FAIL.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(io::Error::from_raw_os_error(5));
            }
            file::sync_data(path)
        }
        let dir = Scratch::new();
        let index = synced_index(&dir, failing);
        upsert_at(&index, CHAT, 100).unwrap();
        FAIL.store(true, std::sync::atomic::Ordering::SeqCst);
        let error = upsert_at(&index, &chat_id(1), 200).expect_err("the fsync failed");
        assert!(matches!(&error, MemoryError::Io { op: "fsync", .. }), "{error}");
        assert_eq!(error.io_error().and_then(io::Error::raw_os_error), Some(5));
        FAIL.store(false, std::sync::atomic::Ordering::SeqCst);
        upsert_at(&index, &chat_id(2), 300).expect("a new fsync");
        assert_eq!(index.list().unwrap().len(), 3, "the failed upsert's line was written, not known durable");
    }
}
