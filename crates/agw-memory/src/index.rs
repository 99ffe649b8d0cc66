//! The chat index `<dir>/_chats.jsonl` (`memory-jsonl.md` §6, listing rules `http-api.md` §3).
//!
//! One JSON record per chat. Every upsert rewrites the whole file (temp file + rename, under one
//! mutex), so readers never see a half-written index. Reading is lenient: unknown keys are
//! ignored, duplicate records of a chat collapse, and lines that do not parse at all are kept
//! verbatim on rewrite rather than silently dropped.

use std::collections::HashMap;
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

/// The index file and the mutex that serialises its rewrites.
pub(crate) struct ChatIndex {
    path: PathBuf,
    fsync: FsyncPolicy,
    lock: Mutex<()>,
}

impl ChatIndex {
    pub(crate) fn new(path: PathBuf, fsync: FsyncPolicy) -> Self {
        Self { path, fsync, lock: Mutex::new(()) }
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
        let _guard = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut entries = self.read()?;
        let agent_key = agent_key.map(str::trim).filter(|k| !k.is_empty()).map(str::to_owned);
        let agent_name = agent_name.map(str::trim).filter(|n| !n.is_empty()).map(str::to_owned).or(agent_key.clone());

        let existing = entries.iter_mut().find_map(|e| match e {
            Entry::Record(r) if r.id() == chat_id => Some(r),
            _ => None,
        });
        let existed = existing.is_some();
        match existing {
            Some(record) => {
                // Fill what is missing, never overwrite.
                if non_blank(&record.chat_name).is_none() {
                    record.chat_name = Some(ids::chat_name(first_message));
                }
                if non_blank(&record.first_agent_key).is_none() {
                    record.first_agent_key = agent_key;
                }
                if non_blank(&record.first_agent_name).is_none() {
                    record.first_agent_name = agent_name;
                }
                if record.created_at.is_none_or(|t| t <= 0) {
                    record.created_at = Some(now_ms);
                }
                record.updated_at = Some(now_ms);
            }
            None => entries.push(Entry::Record(Record {
                chat_id: Some(chat_id.to_owned()),
                chat_name: Some(ids::chat_name(first_message)),
                first_agent_key: agent_key,
                first_agent_name: agent_name,
                created_at: Some(now_ms),
                updated_at: Some(now_ms),
            })),
        }

        let mut content = String::new();
        let mut chat_name = String::new();
        for entry in &entries {
            let line = match entry {
                Entry::Record(record) => {
                    let stored = record.to_stored(now_ms);
                    if stored.chat_id == chat_id {
                        chat_name.clone_from(&stored.chat_name);
                    }
                    serde_json::to_string(&stored)
                        .map_err(|source| MemoryError::Encode { path: self.path.clone(), source })?
                }
                Entry::Raw(raw) => raw.clone(),
            };
            content.push_str(&line);
            content.push('\n');
        }
        file::rewrite(&self.path, content.as_bytes(), self.fsync != FsyncPolicy::Never)?;
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
