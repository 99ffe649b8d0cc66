//! The storage seam of [`crate::ChatStore`]: a sealed enum of backends, each offering the same
//! few primitives — append whole lines, read a chat's lines, whether a chat has history, trim
//! (rewrite) a chat's history, apply an update to one chat's index record atomically, get/list
//! index records, waiting marks, ping. Everything built on them lives in `store.rs`, `index.rs`
//! and `lines.rs` and is shared.
//!
//! The caller (`ChatStore`) has already checked that chat and run ids are canonical UUIDs.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, PoisonError};

use agw_protocol::history::HistoryLine;
use agw_protocol::usage::{Cost, RunUsage};

use crate::config::{FsyncPolicy, MemoryConfig};
use crate::encoded::EncodedLines;
use crate::error::MemoryError;
use crate::file;
use crate::flusher::{Flusher, Target};
use crate::ids::is_canonical;
use crate::index::{ChatIndex, ChatSummary, Refused, UpsertRequest, Upserted};
use crate::lines::{Trim, parse_history, trim_selection};

/// Number of append locks. Chats hash onto them: memory stays bounded however many chats
/// exist, and two chats sharing a lock only wait for one short write.
const LOCK_STRIPES: usize = 64;

/// Under the chat directory: one mark per run that waits for a person.
const WAITING_DIR: &str = "_waiting";

/// Where a [`crate::ChatStore`] keeps its chats.
// One per store, made once and never moved on a hot path: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Backend {
    /// JSONL files under a directory.
    Files(FileBackend),
    /// Tables in a PostgreSQL schema shared by replicas.
    #[cfg(feature = "postgres")]
    Postgres(crate::pg::PgBackend),
}

/// Dispatches one primitive to the backend.
macro_rules! dispatch {
    ($self:ident, $backend:ident => $call:expr) => {
        match $self {
            Backend::Files($backend) => $call,
            #[cfg(feature = "postgres")]
            Backend::Postgres($backend) => $call,
        }
    };
}

impl Backend {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Backend::Files(_) => "files",
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => "postgres",
        }
    }

    /// The error of a line that cannot be encoded (unreachable with agw's own types).
    pub(crate) fn encode_error(&self, chat_id: &str, source: serde_json::Error) -> MemoryError {
        dispatch!(self, b => MemoryError::Encode { path: b.history_path(chat_id), source })
    }

    /// Appends encoded lines to the chat's history, all or nothing.
    pub(crate) fn append(&self, chat_id: &str, lines: &EncodedLines) -> Result<(), MemoryError> {
        match self {
            Backend::Files(files) => files.append(chat_id, lines, false),
            #[cfg(feature = "postgres")]
            Backend::Postgres(b) => b.append(chat_id, &lines.texts()),
        }
    }

    /// [`Self::append`] for a run's last lines, durable with all the chat's history before it
    /// when it returns (files under [`FsyncPolicy::EveryRun`]: fdatasync on the handle that
    /// wrote them; a database commit already is).
    pub(crate) fn append_last(&self, chat_id: &str, lines: &EncodedLines) -> Result<(), MemoryError> {
        match self {
            Backend::Files(files) => files.append(chat_id, lines, true),
            #[cfg(feature = "postgres")]
            Backend::Postgres(b) => b.append(chat_id, &lines.texts()),
        }
    }

    /// Makes the chat's appended history durable (files: fsync; a database commit already is).
    pub(crate) fn sync_history(&self, chat_id: &str) -> Result<(), MemoryError> {
        match self {
            Backend::Files(files) => files.sync_history(chat_id),
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => Ok(()),
        }
    }

    pub(crate) fn read_lines(&self, chat_id: &str) -> Result<Vec<HistoryLine>, MemoryError> {
        dispatch!(self, b => b.read_lines(chat_id))
    }

    pub(crate) fn history_exists(&self, chat_id: &str) -> Result<bool, MemoryError> {
        dispatch!(self, b => b.history_exists(chat_id))
    }

    /// Rewrites the chat's history per [`trim_selection`]; returns the number of removed lines.
    pub(crate) fn trim(&self, chat_id: &str, k: usize) -> Result<usize, MemoryError> {
        dispatch!(self, b => b.trim(chat_id, k))
    }

    /// Applies `request` to the chat's index record atomically (see [`UpsertRequest::update`]).
    pub(crate) fn upsert(&self, request: &UpsertRequest<'_>) -> Result<Result<Upserted, Refused>, MemoryError> {
        dispatch!(self, b => b.upsert(request))
    }

    /// Adds a finished run's totals to the chat's index record (none: nothing happens).
    pub(crate) fn add_run_totals(
        &self,
        chat_id: &str,
        usage: &RunUsage,
        cost: Option<&Cost>,
        now_ms: i64,
    ) -> Result<(), MemoryError> {
        dispatch!(self, b => b.add_run_totals(chat_id, usage, cost, now_ms))
    }

    pub(crate) fn note_agent(
        &self,
        chat_id: &str,
        agent_key: &str,
        handed_off: bool,
        now_ms: i64,
    ) -> Result<(), MemoryError> {
        dispatch!(self, b => b.note_agent(chat_id, agent_key, handed_off, now_ms))
    }

    pub(crate) fn get_chat(&self, chat_id: &str) -> Result<Option<ChatSummary>, MemoryError> {
        dispatch!(self, b => b.get_chat(chat_id))
    }

    pub(crate) fn list_chats(&self) -> Result<Vec<ChatSummary>, MemoryError> {
        dispatch!(self, b => b.list_chats())
    }

    pub(crate) fn mark_waiting(&self, run_id: &str, chat_id: &str) -> Result<(), MemoryError> {
        dispatch!(self, b => b.mark_waiting(run_id, chat_id))
    }

    /// Deletes everything stored of the chat: its waiting marks, its history, its index record.
    /// Returns whether there was anything. With `untouched_since` (epoch ms), only a chat whose
    /// index record says it was last updated before then (retention): a chat without a record,
    /// or touched since, is left alone (`false`).
    pub(crate) fn delete_chat(&self, chat_id: &str, untouched_since: Option<i64>) -> Result<bool, MemoryError> {
        dispatch!(self, b => b.delete_chat(chat_id, untouched_since))
    }

    /// The chat's stored lines as text, in append order (a torn last line of a file included:
    /// it does not parse, and callers skip what does not).
    pub(crate) fn read_texts(&self, chat_id: &str) -> Result<Vec<String>, MemoryError> {
        dispatch!(self, b => b.read_texts(chat_id))
    }

    pub(crate) fn clear_waiting(&self, run_id: &str) -> Result<(), MemoryError> {
        dispatch!(self, b => b.clear_waiting(run_id))
    }

    /// Writes (or rewrites) the run mark of a run in flight (crash recovery): its JSON, at its
    /// `revision` (`RunMark::next_revision`). The chat id is a column of the database's row.
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub(crate) fn put_run_mark(
        &self,
        run_id: &str,
        chat_id: &str,
        mark: &str,
        revision: u64,
    ) -> Result<(), MemoryError> {
        match self {
            Backend::Files(files) => files.put_run_mark(run_id, mark, revision),
            #[cfg(feature = "postgres")]
            Backend::Postgres(pg) => pg.put_run_mark(run_id, chat_id, mark, revision),
        }
    }

    pub(crate) fn clear_run_mark(&self, run_id: &str) -> Result<(), MemoryError> {
        dispatch!(self, b => b.clear_run_mark(run_id))
    }

    /// Every run mark's JSON, in no particular order (files: a run's two copies, see
    /// `FileBackend::put_run_mark`; the caller keeps the newest that parses).
    pub(crate) fn run_marks(&self) -> Result<Vec<String>, MemoryError> {
        dispatch!(self, b => b.run_marks())
    }

    /// Every mark as `(runId, chatId)`, in no particular order.
    pub(crate) fn waiting_runs(&self) -> Result<Vec<(String, String)>, MemoryError> {
        dispatch!(self, b => b.waiting_runs())
    }

    pub(crate) fn ping(&self) -> Result<(), MemoryError> {
        dispatch!(self, b => b.ping())
    }

    /// Waits until the end-of-run fsyncs of finished runs are done (files; a database commit
    /// is durable already).
    pub(crate) fn flush(&self) {
        match self {
            Backend::Files(files) => files.flush(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => {}
        }
    }
}

/// The file backend: `<dir>/<chatId>.json`, `<dir>/_chats.jsonl`, `<dir>/_waiting/<runId>.wait`.
pub(crate) struct FileBackend {
    dir: PathBuf,
    fsync: FsyncPolicy,
    locks: Vec<Mutex<()>>,
    index: ChatIndex,
    /// End-of-run fsyncs under [`FsyncPolicy::EveryRun`].
    flusher: Flusher,
}

impl FileBackend {
    /// `config` normalised (absolute `dir`).
    pub(crate) fn new(config: &MemoryConfig) -> Self {
        Self {
            dir: config.dir.clone(),
            fsync: config.fsync,
            locks: (0..LOCK_STRIPES).map(|_| Mutex::new(())).collect(),
            flusher: Flusher::default(),
            index: ChatIndex::new(config.dir.join(crate::index::INDEX_FILE), config.fsync),
        }
    }

    pub(crate) fn history_path(&self, chat_id: &str) -> PathBuf {
        self.dir.join(format!("{chat_id}.json"))
    }

    /// The chat index of this directory.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn index(&self) -> &ChatIndex {
        &self.index
    }

    /// `last`: a run's last lines, fsynced with the file under [`FsyncPolicy::EveryRun`] too.
    fn append(&self, chat_id: &str, lines: &EncodedLines, last: bool) -> Result<(), MemoryError> {
        let path = self.history_path(chat_id);
        let appended = {
            let _guard = self.lock(chat_id);
            file::append(&path, lines, self.fsync, last)?
        };
        // The directory first: a round syncs its targets in order, and the run's last fsync
        // comes in this round or a later one.
        if appended.created {
            self.flusher.schedule(Target::Dir(self.dir.clone()));
        }
        if let Some(file) = appended.file {
            self.flusher.schedule(Target::File(file, path));
        }
        Ok(())
    }

    fn sync_history(&self, chat_id: &str) -> Result<(), MemoryError> {
        let path = self.history_path(chat_id);
        if self.fsync == FsyncPolicy::EveryRun {
            self.flusher.schedule(Target::Path(path));
            return Ok(());
        }
        let _guard = self.lock(chat_id);
        file::sync(&path)
    }

    /// Waits for the end-of-run fsyncs handed to the fsync thread so far.
    pub(crate) fn flush(&self) {
        self.flusher.drain();
    }

    /// The chat's history file as it is on disk (`None`: there is none).
    pub(crate) fn read_bytes(&self, chat_id: &str) -> Result<Option<Vec<u8>>, MemoryError> {
        let path = self.history_path(chat_id);
        let _guard = self.lock(chat_id);
        file::read(&path)
    }

    fn read_texts(&self, chat_id: &str) -> Result<Vec<String>, MemoryError> {
        let bytes = self.read_bytes(chat_id)?.unwrap_or_default();
        Ok(String::from_utf8_lossy(&bytes).lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect())
    }

    fn read_lines(&self, chat_id: &str) -> Result<Vec<HistoryLine>, MemoryError> {
        let path = self.history_path(chat_id);
        let bytes = self.read_bytes(chat_id)?;
        Ok(bytes.map(|bytes| parse_history(&bytes, &path.display())).unwrap_or_default())
    }

    fn history_exists(&self, chat_id: &str) -> Result<bool, MemoryError> {
        Ok(self.history_path(chat_id).is_file())
    }

    fn trim(&self, chat_id: &str, k: usize) -> Result<usize, MemoryError> {
        let path = self.history_path(chat_id);
        let _guard = self.lock(chat_id);
        let Some(bytes) = file::read(&path)? else { return Ok(0) };
        let lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
        let mut content = Vec::with_capacity(bytes.len());
        let mut removed = 0;
        for (line, trim) in lines.iter().zip(trim_selection(&lines, k)) {
            match trim {
                Trim::Keep => {
                    content.extend_from_slice(line);
                    content.push(b'\n');
                }
                Trim::Remove => removed += 1,
                Trim::Blank => {}
            }
        }
        if content != bytes {
            file::rewrite(&path, &content, self.fsync != FsyncPolicy::Never)?;
        }
        Ok(removed)
    }

    fn upsert(&self, request: &UpsertRequest<'_>) -> Result<Result<Upserted, Refused>, MemoryError> {
        let had_history = self.history_path(request.chat_id).exists();
        Ok(self.index.upsert(request, had_history)?.map(|(was_indexed, chat_name)| Upserted {
            was_indexed,
            had_history,
            chat_name,
        }))
    }

    fn add_run_totals(
        &self,
        chat_id: &str,
        usage: &RunUsage,
        cost: Option<&Cost>,
        now_ms: i64,
    ) -> Result<(), MemoryError> {
        self.index.add_run_totals(chat_id, usage, cost, now_ms)
    }

    fn note_agent(&self, chat_id: &str, agent_key: &str, handed_off: bool, now_ms: i64) -> Result<(), MemoryError> {
        self.index.note_agent(chat_id, agent_key, handed_off, now_ms)
    }

    fn get_chat(&self, chat_id: &str) -> Result<Option<ChatSummary>, MemoryError> {
        self.index.get(chat_id)
    }

    fn list_chats(&self) -> Result<Vec<ChatSummary>, MemoryError> {
        self.index.list()
    }

    /// The marks first, the index record last: a deletion cut short by a crash leaves at worst
    /// a record without history, which its owner can still see and delete again (history
    /// without a record would be ownerless, only the operator's).
    ///
    /// `untouched_since` is checked against the record first. One process writes a chat
    /// directory, and agw holds the chat's slot while it deletes, so no run can touch the chat
    /// between the check and the deletion.
    fn delete_chat(&self, chat_id: &str, untouched_since: Option<i64>) -> Result<bool, MemoryError> {
        if let Some(cutoff) = untouched_since
            && self.index.get(chat_id)?.is_none_or(|record| record.updated_at >= cutoff)
        {
            return Ok(false);
        }
        for (run_id, _) in self.waiting_runs()?.into_iter().filter(|(_, chat)| chat == chat_id) {
            self.clear_waiting(&run_id)?;
        }
        let path = self.history_path(chat_id);
        let had_history = {
            let _guard = self.lock(chat_id);
            match std::fs::remove_file(&path) {
                Ok(()) => true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => return Err(MemoryError::io("remove", &path)(e)),
            }
        };
        if had_history && self.fsync != FsyncPolicy::Never {
            file::sync_dir(&self.dir)?;
        }
        let had_record = self.index.remove(chat_id)?;
        Ok(had_history || had_record)
    }

    fn waiting_path(&self, run_id: &str) -> PathBuf {
        self.dir.join(WAITING_DIR).join(format!("{run_id}.wait"))
    }

    fn mark_waiting(&self, run_id: &str, chat_id: &str) -> Result<(), MemoryError> {
        file::rewrite(&self.waiting_path(run_id), chat_id.as_bytes(), self.fsync != FsyncPolicy::Never)
    }

    fn clear_waiting(&self, run_id: &str) -> Result<(), MemoryError> {
        let path = self.waiting_path(run_id);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(MemoryError::io("remove", &path)(e)),
            _ => Ok(()),
        }
    }

    /// A run's mark alternates between two files (`<runId>.a.run`, `<runId>.b.run`) by the
    /// parity of its revision (which alternates), each rewritten in place: a rename over an existing file makes ext4 start the
    /// new file's writeback at once (`auto_da_alloc`), ~80 µs a rewrite on the run's path; an
    /// in-place write is a few µs. A write cut short by a crash leaves that copy unparseable and
    /// the other, one revision older, whole.
    fn run_mark_path(&self, run_id: &str, revision: u64) -> PathBuf {
        let copy = if revision.is_multiple_of(2) { "a" } else { "b" };
        self.dir.join(WAITING_DIR).join(format!("{run_id}.{copy}.run"))
    }

    /// Written in place, not synced (the page cache survives a crash of agw, which is what
    /// recovery is for), except under [`FsyncPolicy::EveryStep`].
    fn put_run_mark(&self, run_id: &str, mark: &str, revision: u64) -> Result<(), MemoryError> {
        use std::os::unix::fs::FileExt;
        let path = self.run_mark_path(run_id, revision);
        let open = || std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(&path);
        let file = match open() {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                file::create_dir(&self.dir.join(WAITING_DIR))?;
                open()
            }
            other => other,
        }
        .map_err(MemoryError::io("open", &path))?;
        file.write_all_at(mark.as_bytes(), 0).map_err(MemoryError::io("write", &path))?;
        file.set_len(mark.len() as u64).map_err(MemoryError::io("truncate", &path))?;
        if self.fsync == FsyncPolicy::EveryStep {
            file.sync_data().map_err(MemoryError::io("fsync", &path))?;
        }
        Ok(())
    }

    fn clear_run_mark(&self, run_id: &str) -> Result<(), MemoryError> {
        for copy in 0..2 {
            let path = self.run_mark_path(run_id, copy);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(MemoryError::io("remove", &path)(e));
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn run_marks(&self) -> Result<Vec<String>, MemoryError> {
        let dir = self.dir.join(WAITING_DIR);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(MemoryError::io("list", &dir)(e)),
        };
        let mut marks = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let id = name.strip_suffix(".a.run").or_else(|| name.strip_suffix(".b.run"));
            if id.is_none_or(|id| !is_canonical(id)) {
                continue;
            }
            match std::fs::read_to_string(entry.path()) {
                Ok(mark) => marks.push(mark),
                Err(e) => tracing::warn!(path = %entry.path().display(), error = %e, "skipping an unreadable run mark"),
            }
        }
        Ok(marks)
    }

    pub(crate) fn waiting_runs(&self) -> Result<Vec<(String, String)>, MemoryError> {
        let dir = self.dir.join(WAITING_DIR);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(MemoryError::io("list", &dir)(e)),
        };
        let mut runs = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(run_id) = name.strip_suffix(".wait").filter(|id| is_canonical(id)) else { continue };
            match std::fs::read_to_string(entry.path()) {
                Ok(chat_id) if is_canonical(chat_id.trim()) => {
                    runs.push((run_id.to_owned(), chat_id.trim().to_owned()))
                }
                _ => tracing::warn!(path = %entry.path().display(), "skipping an unreadable waiting-run mark"),
            }
        }
        Ok(runs)
    }

    /// The directory exists or can be created, and is a directory.
    /// The chats that have a history file, by id (sorted).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn history_ids(&self) -> Result<Vec<String>, MemoryError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(MemoryError::io("list", &self.dir)(e)),
        };
        let mut ids: Vec<String> = entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().to_string_lossy().into_owned();
                name.strip_suffix(".json").filter(|id| is_canonical(id)).map(str::to_owned)
            })
            .collect();
        ids.sort();
        Ok(ids)
    }

    fn ping(&self) -> Result<(), MemoryError> {
        file::create_dir(&self.dir)?;
        match std::fs::metadata(&self.dir) {
            Ok(meta) if meta.is_dir() => Ok(()),
            Ok(_) => Err(MemoryError::Io {
                op: "use as the chat directory",
                path: self.dir.clone(),
                source: std::io::Error::from(std::io::ErrorKind::NotADirectory),
            }),
            Err(e) => Err(MemoryError::io("inspect", &self.dir)(e)),
        }
    }

    fn lock(&self, chat_id: &str) -> MutexGuard<'_, ()> {
        let mut hasher = DefaultHasher::new();
        chat_id.hash(&mut hasher);
        let stripe = (hasher.finish() % LOCK_STRIPES as u64) as usize;
        // The guarded data is `()`: a panic elsewhere cannot leave it inconsistent.
        self.locks[stripe].lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under `run` no append on a run's path waits for a device flush: the new file's directory
    /// entry and the last lines go to the fsync thread. `complete` and `step` sync both inline.
    #[test]
    fn under_run_the_new_files_directory_is_synced_by_the_fsync_thread_not_the_append() {
        let dir = std::env::temp_dir().join(format!("agw-backend-dir-{}", std::process::id()));
        let chat = "0b7e9c1a-2f3d-4a5b-8c6d-7e8f9a0b1c2d";
        for (policy, after_first, after_last) in
            [(FsyncPolicy::EveryRun, 1, 2), (FsyncPolicy::Complete, 0, 0), (FsyncPolicy::EveryStep, 0, 0)]
        {
            let _ = std::fs::remove_dir_all(&dir);
            let config = MemoryConfig { dir: dir.clone(), k: 20, fsync: policy, action_tools: Vec::new() };
            let files = FileBackend::new(&config);
            files.append(chat, &EncodedLines::from_texts(&["{\"a\":1}"]), false).unwrap();
            assert_eq!(files.flusher.scheduled(), after_first, "{policy:?}: the creating append");
            files.append(chat, &EncodedLines::from_texts(&["{\"a\":2}"]), true).unwrap();
            assert_eq!(files.flusher.scheduled(), after_last, "{policy:?}: the run's last append");
            files.flush();
            assert_eq!(std::fs::read_to_string(files.history_path(chat)).unwrap(), "{\"a\":1}\n{\"a\":2}\n");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
