//! [`migrate_chats`]: copies a JSONL chat directory (the file store) into a PostgreSQL store.
//! It reads the one backend and writes the other, through the store: it sits above both.

use std::collections::{HashMap, HashSet};

use agw_protocol::replay_chat;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::backend::{Backend, FileBackend};
use crate::config::{MemoryConfig, normalise};
use crate::error::MemoryError;
use crate::ids::is_canonical;
use crate::index::{self, ChatSummary, Record};
use crate::lines::parse_history;
use crate::store::ChatStore;

/// What one [`migrate_chats`] call did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MigrateReport {
    /// Chats this call looked at: copied + skipped. Less than the directory holds when `limit`
    /// stopped it.
    pub chats_seen: usize,
    /// Chats copied (new, or changed in the source since they were last copied).
    pub chats_copied: usize,
    /// Chats already copied with the same source (history length and hash): left as they are.
    pub chats_skipped: usize,
    /// History lines copied.
    pub lines_copied: usize,
    /// Waiting marks copied (of chats that are copied and current; a run already marked in the
    /// database keeps its mark).
    pub waiting_copied: usize,
    /// Chats whose copy does not replay like the source (or whose listing differs), by id.
    pub mismatches: Vec<String>,
}

/// Copies the chats of the JSONL directory `src.dir` into `dst`, a store made by
/// [`ChatStore::postgres`] (any other store is an error) — feature `postgres`.
///
/// Every chat of the source (a history file `<uuid>.json`, an index record, or both) is copied
/// in one transaction of its own: its history lines verbatim (the exact line texts, in order;
/// a line that is not UTF-8 or holds a NUL byte cannot be stored as text and is left out — no
/// reader could parse it either), its index record (as the file index would write it; a
/// missing `createdAt` becomes the record's `updatedAt`), and a row of `migrated` with the
/// source's length and hash (history bytes and index record). So the call is
///
/// - **idempotent**: a chat already copied from the same source is skipped;
/// - **resumable**: `limit` stops after that many copied chats; the next call continues;
/// - **catching up**: a chat whose source changed since (a run appended to it) is copied again —
///   its rows are replaced in that chat's transaction. The source is the truth for the chats it
///   holds: migrate before replicas write to those chats in the database.
/// - **verified**: after each copy, the chat's history is read back from the database and its
///   replay (`agw_protocol::replay_chat`) compared with the replay of the source file, and its
///   listing with the source record's; a chat that differs is named in
///   [`MigrateReport::mismatches`] (and logged).
///
/// Then the waiting marks of the chats that are current in the database are copied. Chats are
/// taken in index order (then history files without a record, by id), so chats with equal
/// `updatedAt` list in the same order as from the directory.
///
/// Blocks for as long as the copy takes: run it from a blocking thread or a command.
pub fn migrate_chats(src: &MemoryConfig, dst: &ChatStore, limit: Option<usize>) -> Result<MigrateReport, MemoryError> {
    let Backend::Postgres(pg) = dst.backend() else {
        return Err(MemoryError::Database {
            op: "migrate chats",
            chat_id: None,
            source: "the destination is not a PostgreSQL store".into(),
        });
    };
    let source = FileBackend::new(&normalise(src.clone()));
    let records = source.index().records()?;
    let order = chat_order(&records, &source.history_ids()?);
    let by_id: HashMap<&str, &Record> = records.iter().map(|r| (r.id(), r)).collect();
    let copied_before = pg.migrated()?;

    let mut report = MigrateReport::default();
    let mut current: HashSet<&str> = HashSet::new();
    for chat_id in &order {
        let chat_id = chat_id.as_str();
        let record = by_id.get(chat_id).copied();
        // Only canonical ids name history files (the index may hold any id).
        let bytes = if is_canonical(chat_id) { source.read_bytes(chat_id)?.unwrap_or_default() } else { Vec::new() };
        let encoded = record
            .map(|r| index::encode(r, r.updated_at().unwrap_or_else(wall_clock_ms)))
            .transpose()
            .map_err(|e| dst.backend().encode_error(chat_id, e))?;
        let length = bytes.len() as i64;
        let hash = source_hash(&bytes, encoded.as_ref().map(|e| e.line.as_str()));
        if copied_before.get(chat_id).is_some_and(|(l, h)| *l == length && *h == hash) {
            report.chats_skipped += 1;
            report.chats_seen += 1;
            current.insert(chat_id);
            continue;
        }
        if limit.is_some_and(|limit| report.chats_copied >= limit) {
            break;
        }
        let lines = storable_lines(&bytes, chat_id);
        pg.copy_chat(chat_id, &lines, encoded.as_ref(), length, &hash)?;
        report.chats_copied += 1;
        report.chats_seen += 1;
        report.lines_copied += lines.len();
        current.insert(chat_id);

        let source_path = source.history_path(chat_id);
        let same_replay = !is_canonical(chat_id) || {
            let expected = replay_chat(chat_id, None, &parse_history(&bytes, &source_path.display()), 0);
            expected == replay_chat(chat_id, None, &pg.read_lines(chat_id)?, 0)
        };
        let same_listing = match record {
            Some(record) => pg.get_chat(chat_id)?.is_some_and(|copied| same_summary(&record.to_listed(), &copied)),
            None => pg.get_chat(chat_id)?.is_none(),
        };
        if !same_replay || !same_listing {
            tracing::warn!(chat_id, same_replay, same_listing, "chat migration: the copy differs from the source");
            report.mismatches.push(chat_id.to_owned());
        }
    }

    for (run_id, chat_id) in source.waiting_runs()? {
        if is_canonical(&run_id) && current.contains(chat_id.as_str()) && pg.copy_mark(&run_id, &chat_id)? {
            report.waiting_copied += 1;
        }
    }
    tracing::info!(
        seen = report.chats_seen,
        copied = report.chats_copied,
        skipped = report.chats_skipped,
        lines = report.lines_copied,
        waiting = report.waiting_copied,
        mismatches = report.mismatches.len(),
        "chat migration: done"
    );
    Ok(report)
}

/// Index records in file order, then history files without a record, by id.
fn chat_order(records: &[Record], history_ids: &[String]) -> Vec<String> {
    let mut seen = HashSet::new();
    let mut order = Vec::with_capacity(records.len() + history_ids.len());
    for id in records.iter().map(Record::id).chain(history_ids.iter().map(String::as_str)) {
        if seen.insert(id) {
            order.push(id.to_owned());
        }
    }
    order
}

/// SHA-256 of the history bytes and the index line the copy writes, hex.
fn source_hash(history: &[u8], record: Option<&str>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(history);
    // A byte no UTF-8 text holds separates the two.
    hasher.update([0xff]);
    hasher.update(record.unwrap_or_default().as_bytes());
    format!("{:x}", hasher.finalize())
}

/// The file's lines (an unterminated last one included), minus those PostgreSQL text cannot
/// hold (not UTF-8, or with a NUL): no reader parses such a line anyway.
fn storable_lines(bytes: &[u8], chat_id: &str) -> Vec<String> {
    let mut segments: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if segments.last().is_some_and(|tail| tail.is_empty()) {
        segments.pop();
    }
    segments
        .into_iter()
        .enumerate()
        .filter_map(|(i, segment)| match std::str::from_utf8(segment) {
            Ok(text) if !text.contains('\0') => Some(text.to_owned()),
            _ => {
                tracing::warn!(chat_id, line = i + 1, "chat migration: leaving out a line that is not text");
                None
            }
        })
        .collect()
}

/// The copied listing equals the source's; timestamps only when the source record had one (a
/// record without either gets the copy's time, as a rewrite of the file index would).
fn same_summary(source: &ChatSummary, copied: &ChatSummary) -> bool {
    let mut copied = copied.clone();
    // The listing borrows one timestamp for the other: 0 means the record had neither.
    if source.created_at <= 0 {
        copied.created_at = source.created_at;
        copied.updated_at = source.updated_at;
    }
    *source == copied
}

fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_like_the_file_reader_and_non_text_is_left_out() {
        assert_eq!(storable_lines(b"a\n\nb\n", "c"), ["a", "", "b"]);
        assert_eq!(storable_lines(b"a\ntorn", "c"), ["a", "torn"]);
        assert_eq!(storable_lines(b"", "c"), Vec::<String>::new());
        assert_eq!(storable_lines(b"a\n\xff\nb\0c\nd\n", "c"), ["a", "d"]);
    }

    #[test]
    fn the_hash_covers_history_and_record() {
        let base = source_hash(b"line\n", Some("{}"));
        assert_ne!(base, source_hash(b"line\n", None));
        assert_ne!(base, source_hash(b"line\nmore\n", Some("{}")));
        assert_eq!(base, source_hash(b"line\n", Some("{}")));
        assert_eq!(base.len(), 64);
    }
}
