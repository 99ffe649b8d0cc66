//! The chat index `<dir>/_chats.jsonl` (`memory-jsonl.md` §6, listing rules `http-api.md` §3).
//!
//! One JSON record per chat. Every upsert rewrites the whole file (temp file + rename, under one
//! mutex), so readers never see a half-written index. Reading is lenient: unknown keys are
//! ignored, duplicate records of a chat collapse, and lines that do not parse at all are kept
//! verbatim on rewrite rather than silently dropped.
//!
//! The lines this process last wrote are kept in memory ([`Written`]): while the file on disk is
//! still exactly that file (same device, inode, length and mtime), the next upsert starts from
//! them instead of reading and parsing every record again, and parses and encodes only the record
//! it changes. The bytes written are the same either way (a written line re-reads to itself);
//! the per-upsert CPU cost drops from parsing and encoding every chat to copying their lines.

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

/// One chat as listed by `GET /api/ap/chats` and written to the index (all six keys, `null`s
/// written): `{"chatId","chatName","firstAgentKey","firstAgentName","createdAt","updatedAt"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChatSummary {
    pub chat_id: String,
    pub chat_name: String,
    pub first_agent_key: Option<String>,
    pub first_agent_name: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
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
}

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

/// The index file and the mutex that serialises its rewrites (and guards [`Written`]).
pub(crate) struct ChatIndex {
    path: PathBuf,
    fsync: FsyncPolicy,
    lock: Mutex<Option<Written>>,
}

/// The index exactly as this process last wrote it, in three allocations: the file's content,
/// the byte range of each line (without `\n`), and the line of each chat's record keyed by the
/// chat's UUID as a number; plus the identity of the file right after the rename. Used only while
/// the file still has that identity. About as large as the file itself.
struct Written {
    stamp: Stamp,
    content: String,
    lines: Vec<Range<usize>>,
    positions: HashMap<u128, usize>,
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

#[cfg(unix)]
fn stamp(path: &std::path::Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        len: meta.len(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
    })
}

#[cfg(not(unix))]
fn stamp(_path: &std::path::Path) -> Option<Stamp> {
    None
}

impl ChatIndex {
    pub(crate) fn new(path: PathBuf, fsync: FsyncPolicy) -> Self {
        Self { path, fsync, lock: Mutex::new(None) }
    }

    /// Upserts one chat and rewrites the file. Returns whether a record existed before and the
    /// chat's name after the upsert.
    pub(crate) fn upsert(
        &self,
        chat_id: &str,
        first_message: &str,
        agent_key: Option<&str>,
        agent_name: Option<&str>,
        now_ms: i64,
    ) -> Result<(bool, String), MemoryError> {
        let mut guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let agent_key = agent_key.map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned);
        let agent_name = agent_name.map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned).or(agent_key.clone());
        let update = |existing: Option<&mut Record>| match existing {
            Some(record) => {
                // Fill what is missing, never overwrite.
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
                None
            }
            None => Some(Record {
                chat_id: Some(chat_id.to_owned()),
                chat_name: Some(ids::chat_name(first_message)),
                first_agent_key: agent_key.clone(),
                first_agent_name: agent_name.clone(),
                created_at: Some(now_ms),
                updated_at: Some(now_ms),
            }),
        };
        let encode = |record: &Record| {
            let stored = record.to_stored(now_ms);
            serde_json::to_string(&stored)
                .map(|line| (line, stored.chat_name))
                .map_err(|source| MemoryError::Encode { path: self.path.clone(), source })
        };

        // What this process wrote last time, while the file is still that file: only the
        // changed record is parsed and encoded; every other line is copied as it was written.
        let key = uuid_key(chat_id);
        let written = guard.take().filter(|w| key.is_some() && stamp(&self.path) == Some(w.stamp));
        let cached = written.and_then(|w| {
            let position = key.and_then(|k| w.positions.get(&k).copied());
            let mut record = match position {
                // Our own line: it parses (else fall back to reading the file).
                Some(i) => Some(serde_json::from_str::<Record>(w.content.get(w.lines.get(i)?.clone())?).ok()?),
                None => None,
            };
            let added = update(record.as_mut());
            Some((w, position, record.or(added)?))
        });
        let (content, lines, positions, existed, chat_name) = match cached {
            Some((mut w, position, record)) => {
                let (line, chat_name) = encode(&record)?;
                let mut content = String::with_capacity(w.content.len() + line.len() + 1);
                match position {
                    Some(i) => {
                        let old = w.lines[i].clone();
                        content.push_str(&w.content[..old.start]);
                        content.push_str(&line);
                        content.push_str(&w.content[old.end..]);
                        let new_end = old.start + line.len();
                        w.lines[i] = old.start..new_end;
                        for range in &mut w.lines[i + 1..] {
                            *range = range.start + new_end - old.end..range.end + new_end - old.end;
                        }
                    }
                    None => {
                        content.push_str(&w.content);
                        let start = content.len();
                        content.push_str(&line);
                        content.push('\n');
                        w.positions.extend(key.map(|k| (k, w.lines.len())));
                        w.lines.push(start..start + line.len());
                    }
                }
                (content, w.lines, w.positions, position.is_some(), chat_name)
            }
            None => {
                let mut entries = self.read()?;
                let existing = entries.iter_mut().find_map(|e| match e {
                    Entry::Record(r) if r.id() == chat_id => Some(r),
                    _ => None,
                });
                let existed = existing.is_some();
                if let Some(added) = update(existing) {
                    entries.push(Entry::Record(added));
                }
                let mut content = String::new();
                let mut lines = Vec::with_capacity(entries.len());
                let mut positions = HashMap::with_capacity(entries.len());
                let mut chat_name = String::new();
                for entry in &entries {
                    let line = match entry {
                        Entry::Record(record) => {
                            let (line, name) = encode(record)?;
                            if record.id() == chat_id {
                                chat_name = name;
                            }
                            positions.extend(uuid_key(record.id()).map(|k| (k, lines.len())));
                            line
                        }
                        Entry::Raw(raw) => raw.clone(),
                    };
                    lines.push(content.len()..content.len() + line.len());
                    content.push_str(&line);
                    content.push('\n');
                }
                (content, lines, positions, existed, chat_name)
            }
        };

        file::rewrite(&self.path, content.as_bytes(), self.fsync != FsyncPolicy::Never)?;
        // Kept only when the identity of what we just wrote is known.
        *guard = stamp(&self.path).map(|stamp| Written { stamp, content, lines, positions });
        Ok((existed, chat_name))
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
        let mut entries: Vec<Entry> = Vec::new();
        let mut positions: HashMap<String, usize> = HashMap::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
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
                Err(error) => {
                    tracing::warn!(path = %self.path.display(), %error, "keeping an unreadable chat index line as is");
                    entries.push(Entry::Raw(line.to_owned()));
                }
            }
        }
        Ok(entries)
    }
}
