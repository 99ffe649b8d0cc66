//! The chat index `<dir>/_chats.jsonl` (`memory-jsonl.md` §6, listing rules `http-api.md` §3).
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

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use agw_protocol::ids;
use serde::{Deserialize, Serialize};

use crate::config::FsyncPolicy;
use crate::error::MemoryError;
use crate::file;

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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
    /// `None`: a chat made without auth (or before agw knew owners).
    #[serde(skip)]
    pub owner: Option<Owner>,
}

/// An index line: the listing keys, then the owner when there is one.
#[derive(Serialize)]
struct StoredLine<'a> {
    #[serde(flatten)]
    summary: &'a ChatSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<&'a Owner>,
}

/// Result of [`crate::ChatStore::upsert_chat`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatUpsert {
    /// The chat did not exist before this query: the run emits `chat.start`.
    pub created: bool,
    /// The chat's name (for `chat.start` and the webhook).
    pub chat_name: String,
}

/// An index record as found on disk: every field optional.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
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
}

fn lenient_owner<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Owner>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    Ok(serde_json::from_value::<Owner>(value).ok().filter(|owner| !owner.sub.trim().is_empty()))
}

/// An upsert the caller's permission check refused: the chat exists and is not theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refused;

/// Applies an upsert to the chat's record (`None`: there is none; then it returns the new one).
type Update<'a> = dyn Fn(Option<&mut Record>) -> Result<Option<Record>, Refused> + 'a;
/// A record as its index line, plus the chat's name.
type Encode<'a> = dyn Fn(&Record) -> Result<(String, String), MemoryError> + 'a;

impl Record {
    fn id(&self) -> &str {
        self.chat_id.as_deref().unwrap_or_default()
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
            owner: self.owner.clone(),
        }
    }

    /// The listing rules: blank name → chatId; no agent name → agent key; a missing timestamp
    /// borrows the other one.
    fn to_listed(&self) -> ChatSummary {
        let created = self.created_at.filter(|t| *t > 0);
        let updated = self.updated_at.filter(|t| *t > 0);
        ChatSummary {
            chat_id: self.id().to_owned(),
            chat_name: non_blank(&self.chat_name).unwrap_or_else(|| self.id().to_owned()),
            first_agent_key: self.first_agent_key.clone(),
            first_agent_name: non_blank(&self.first_agent_name).or_else(|| self.first_agent_key.clone()),
            created_at: created.or(updated).unwrap_or(0),
            updated_at: updated.or(created).unwrap_or(0),
            owner: self.owner.clone(),
        }
    }
}

fn non_blank(value: &Option<String>) -> Option<String> {
    value.as_deref().filter(|v| !v.trim().is_empty()).map(str::to_owned)
}

/// A line of the index file.
enum Entry {
    Record(Record),
    /// Not an index record we can read: kept verbatim.
    Raw(String),
}

/// The index file and the mutex that serialises its writes (and guards [`Written`]).
pub(crate) struct ChatIndex {
    path: PathBuf,
    fsync: FsyncPolicy,
    lock: Mutex<Option<Written>>,
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
        Self { path, fsync, lock: Mutex::new(None) }
    }

    /// Upserts one chat and rewrites the file. Returns whether a record existed before and the
    /// chat's name after the upsert, or [`Refused`] (nothing written) when `permit` refuses the
    /// owner of the existing chat. A new record gets `owner`; an `orphan` (a chat with a history
    /// file but no record) counts as an existing chat without an owner.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn upsert(
        &self,
        chat_id: &str,
        first_message: &str,
        agent_key: Option<&str>,
        agent_name: Option<&str>,
        owner: Option<&Owner>,
        orphan: bool,
        permit: &dyn Fn(Option<&Owner>) -> bool,
        now_ms: i64,
    ) -> Result<Result<(bool, String), Refused>, MemoryError> {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let agent_key = agent_key.map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned);
        let agent_name = agent_name.map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned).or(agent_key.clone());
        let update = |existing: Option<&mut Record>| match existing {
            Some(record) if !permit(record.owner.as_ref()) => Err(Refused),
            None if orphan && !permit(None) => Err(Refused),
            Some(record) => {
                // Fill what is missing, never overwrite (the owner included).
                if non_blank(&record.chat_name).is_none() {
                    record.chat_name = Some(ids::chat_name(first_message));
                }
                if non_blank(&record.first_agent_key).is_none() {
                    record.first_agent_key = agent_key.clone();
                }
                if non_blank(&record.first_agent_name).is_none() {
                    record.first_agent_name = agent_name.clone();
                }
                if record.created_at.is_none_or(|t| t <= 0) {
                    record.created_at = Some(now_ms);
                }
                record.updated_at = Some(now_ms);
                Ok(None)
            }
            None => Ok(Some(Record {
                chat_id: Some(chat_id.to_owned()),
                chat_name: Some(ids::chat_name(first_message)),
                first_agent_key: agent_key.clone(),
                first_agent_name: agent_name.clone(),
                created_at: Some(now_ms),
                updated_at: Some(now_ms),
                // A chat found without a record keeps having no owner: nobody may claim it.
                owner: if orphan { None } else { owner.cloned() },
            })),
        };
        let encode = |record: &Record| {
            let stored = record.to_stored(now_ms);
            serde_json::to_string(&StoredLine { summary: &stored, owner: stored.owner.as_ref() })
                .map(|line| (line, stored.chat_name))
                .map_err(|source| MemoryError::Encode { path: self.path.clone(), source })
        };

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
                    return Ok(Err(refused));
                }
                Ok(Some(record)) => (w, record),
                // Unreachable (an update without a record adds one); read the file instead.
                Ok(None) => return self.upsert_uncached(guard, chat_id, &update, &encode),
            };
            let (line, chat_name) = encode(&record)?;
            match position {
                Some(i) => w.replace(i, &line),
                None => w.push(key, &line),
            }
            let sync = self.fsync != FsyncPolicy::Never;
            let appended = w.stamp.len + line.len() as u64 + 1;
            let stamp = if appended <= 2 * w.content.len() as u64 {
                let mut payload = line.into_bytes();
                payload.push(b'\n');
                Stamp::of(&file::append_existing(&self.path, &payload, sync)?)
            } else {
                // Compaction: superseded records make up half the file.
                file::rewrite(&self.path, w.content.as_bytes(), sync)?;
                stamp(&self.path)
            };
            let existed = position.is_some();
            // Kept only when the identity of what we just wrote is known.
            *guard = stamp.map(|stamp| Written { stamp, ..w });
            return Ok(Ok((existed, chat_name)));
        }
        self.upsert_uncached(guard, chat_id, &update, &encode)
    }

    /// First upsert, or someone else changed the file: read it all and rewrite it.
    fn upsert_uncached(
        &self,
        mut guard: std::sync::MutexGuard<'_, Option<Written>>,
        chat_id: &str,
        update: &Update<'_>,
        encode: &Encode<'_>,
    ) -> Result<Result<(bool, String), Refused>, MemoryError> {
        let mut entries = self.read()?;
        let existing = entries.iter_mut().find_map(|e| match e {
            Entry::Record(r) if r.id() == chat_id => Some(r),
            _ => None,
        });
        let existed = existing.is_some();
        match update(existing) {
            Err(refused) => return Ok(Err(refused)),
            Ok(Some(added)) => entries.push(Entry::Record(added)),
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
            }
        }
        file::rewrite(&self.path, w.content.as_bytes(), self.fsync != FsyncPolicy::Never)?;
        // Kept only when the identity of what we just wrote is known.
        *guard = stamp(&self.path).map(|stamp| Written { stamp, ..w });
        Ok(Ok((existed, chat_name)))
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
        let entries = {
            let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.read()?
        };
        let mut chats: Vec<ChatSummary> = entries
            .iter()
            .filter_map(|e| match e {
                Entry::Record(r) if ids::canonical_uuid(r.id()).is_some() => Some(r.to_listed()),
                _ => None,
            })
            .collect();
        chats.sort_by_key(|c| std::cmp::Reverse(c.updated_at));
        Ok(chats)
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
                Ok(record) => match positions.get(record.id()).and_then(|&i| entries.get_mut(i)) {
                    Some(Entry::Record(first)) => first.merge(record),
                    _ => {
                        positions.insert(record.id().to_owned(), entries.len());
                        entries.push(Entry::Record(record));
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
