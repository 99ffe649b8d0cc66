//! [`ChatStore`]: chat memory behind one API, whatever keeps it — per-chat history files
//! `<dir>/<chatId>.json` ([`ChatStore::new`]) or PostgreSQL (`ChatStore::postgres`, feature
//! `postgres`). Everything derived from the stored lines and records (window, run context,
//! waiting runs, trim's selection in `lines.rs`, the index update rules of `index.rs`) is shared;
//! a backend (`backend.rs`, `pg.rs`) only stores and returns lines, records and marks.

use std::path::PathBuf;

use agw_protocol::chat::ChatMessage;
use agw_protocol::history::{self, HistoryLine, PlanSnapshot, SystemSnapshot};
use agw_protocol::ids;
use agw_protocol::request::QueryRequest;

use crate::backend::{Backend, FileBackend};
use crate::config::{FsyncPolicy, MemoryConfig, normalise};
use crate::encoded::EncodedLines;
use crate::error::MemoryError;
use crate::fork::{ForkError, ForkPoint, Forked};
use crate::ids::is_canonical;
use crate::index::{ChatSummary, ChatUpsert, Owner, UpsertRequest};
#[cfg(feature = "postgres")]
use crate::pg::{PgBackend, PgConfig};
use crate::recorder::{Recorder, RecorderInit};
use crate::window;

/// A run that waits for a person, as its chat's history describes it ([`ChatStore::waiting_run`]).
#[derive(Debug, Clone, PartialEq)]
pub struct WaitingRun {
    /// The run's last line.
    pub awaiting: history::AwaitingLine,
    /// The run's messages up to the turn that waits (the user's message first; the waiting
    /// turn's calls are not in it).
    pub conversation: Vec<ChatMessage>,
    /// The run's own step lines (not its sub-agents'), as a mode rebuilds its conversation
    /// from them: where it was handed over to another agent, say.
    pub steps: Vec<history::RecoveredStep>,
    /// The waiting turn's step as far as it was recorded (at the end of `conversation` too).
    pub pending: Vec<ChatMessage>,
    /// The chat without this run: the model's window, the plan, remembered approvals.
    pub context: ChatContext,
    /// The highest block numbers the run's history names: its new blocks are numbered after.
    pub blocks: agw_protocol::BlockCounts,
}

/// What a run needs from memory before it starts (one read of the history file).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatContext {
    /// [`ChatStore::history_for_model`].
    pub history: Vec<ChatMessage>,
    /// Where each run begins in `history` (a checkpoint's summary counts as one run).
    pub history_runs: Vec<agw_protocol::chat::HistoryRun>,
    /// [`ChatStore::latest_plan`].
    pub plan: Option<PlanSnapshot>,
    /// The chat's approval lines (calls answered `always`), in order; each is honoured only
    /// for the agent, tool and rule it names ([`history::ApprovalLine::remembers`]).
    pub remembered_approvals: Vec<history::ApprovalLine>,
}

/// Chat memory: history, the chat index, the model window, waiting marks.
///
/// Two backends keep it, behind the same API and behaviour:
///
/// - **Files** ([`Self::new`]): one JSONL history file per chat under `dir`, the index
///   `_chats.jsonl`, waiting marks under `_waiting/`. Share one store per directory
///   (`Arc<ChatStore>`): the in-process locks that keep appends and rewrites of one chat apart
///   live here. Another process appending to the same files is safe for appends (each is one
///   `O_APPEND` write of whole lines) but not for [`Self::trim`] or the index rewrite; agw runs
///   one process per directory.
/// - **PostgreSQL** (`ChatStore::postgres`, feature `postgres`): tables in one schema that several
///   agw replicas share. Each append is one transaction, lines read back in append order, and
///   the writes of one chat are serialised across replicas (see `ChatStore::postgres`).
///
/// Every method is synchronous I/O on small amounts of data: one write per flushed step, one
/// read per run start. On an async runtime call them from `spawn_blocking`. For the PostgreSQL
/// backend that is required: its client drives a runtime of its own, which must not be started
/// from a thread that runs async tasks. With files, an append blocks only briefly (it never
/// waits for a disk flush unless [`FsyncPolicy::EveryStep`] is set).
///
/// Chat ids must be canonical lower-case UUIDs (`agw_protocol::ids::canonical_uuid`); for any
/// other id every operation is a silent no-op (empty history, nothing written).
///
/// History is never deleted implicitly: [`Self::trim`] (the reference's window trimming)
/// exists, but nothing calls it; the window `k` only limits what is sent to the model.
/// [`Self::delete_chat`] deletes a whole chat when asked to (`DELETE /api/ap/chat`), and
/// [`Self::delete_chat_untouched_since`] one that retention expired.
pub struct ChatStore {
    config: MemoryConfig,
    /// Lower-cased `action_tools`.
    pub(crate) action_tools: Vec<String>,
    pub(crate) backend: Backend,
}

impl std::fmt::Debug for ChatStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStore")
            .field("backend", &self.backend_name())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ChatStore {
    /// The file store. Nothing touches the disk until the first write. `dir` is made absolute,
    /// `k` at least 1.
    pub fn new(config: MemoryConfig) -> Self {
        let config = normalise(config);
        let backend = Backend::Files(FileBackend::new(&config));
        Self::with_backend(config, backend)
    }

    #[cfg(feature = "postgres")]
    /// The chat store on PostgreSQL (feature `postgres`), for several agw replicas sharing
    /// one database. `config.k` and `config.action_tools` apply as for files; `config.dir` and
    /// `config.fsync` are not used (a commit is durable).
    ///
    /// Connects (within `pg.connect_timeout`: an unreachable server is an error, not a hang),
    /// creates the schema when missing and applies the embedded migrations that the schema has
    /// not seen (`schema_migrations` records them), under a session advisory lock so that
    /// replicas starting together apply each migration once. Then opens the connection pool
    /// (connections on demand, at most `pg.pool_size`).
    ///
    /// What the backend guarantees:
    /// - An append is one transaction: all its lines are stored, or none (an error is
    ///   returned). A committed append is visible to every replica at once.
    /// - [`Self::read_lines`] returns a chat's lines in append order; appends to one chat are
    ///   serialised by the chat's advisory lock, so two appends never interleave.
    /// - Index updates ([`Self::upsert_chat`], [`Self::upsert_owned_chat`], run totals) read
    ///   the record `FOR UPDATE` in a transaction that holds the chat's advisory lock: when
    ///   replicas upsert the same new chat at once, exactly one gets `created: true`, and only
    ///   the first owner is recorded.
    /// - [`Self::trim`] rewrites the chat's history in one transaction.
    /// - Failures are [`MemoryError::Database`] naming the operation and the chat.
    ///
    /// Every method blocks on the network: call them from `spawn_blocking` (the synchronous
    /// client runs a small runtime of its own, which must not be entered on a thread that drives
    /// async tasks: that would panic). This function blocks too, but does its work on a thread
    /// of its own, and dropping the store closes its connections on one: both are safe on any
    /// thread.
    pub fn postgres(config: MemoryConfig, pg: PgConfig) -> Result<ChatStore, MemoryError> {
        let backend = PgBackend::connect(&pg)?;
        Ok(ChatStore::with_backend(normalise(config), Backend::Postgres(backend)))
    }

    /// A store on an opened backend; `config` is normalised ([`normalise`]).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn with_backend(config: MemoryConfig, backend: Backend) -> Self {
        let action_tools =
            config.action_tools.iter().map(|t| t.trim().to_lowercase()).filter(|t| !t.is_empty()).collect();
        Self { config, action_tools, backend }
    }

    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Which backend keeps this store's chats: `"files"` or `"postgres"`.
    pub fn backend_name(&self) -> &'static str {
        self.backend.name()
    }

    /// Whether the store can serve requests (for a readiness probe such as `/readyz`). Files:
    /// the chat directory exists or can be created, and is a directory. PostgreSQL: a pooled
    /// connection answers a trivial statement, within a short timeout (at most the connect
    /// timeout). Blocks.
    pub fn ping(&self) -> Result<(), MemoryError> {
        self.backend.ping()
    }

    /// The settings in effect: `dir` absolute, `k` at least 1.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    /// The history file of a chat; `None` when `chat_id` is not a canonical UUID, and always
    /// `None` for the PostgreSQL backend, which keeps no files.
    pub fn history_path(&self, chat_id: &str) -> Option<PathBuf> {
        match &self.backend {
            Backend::Files(files) if is_canonical(chat_id) => Some(files.history_path(chat_id)),
            _ => None,
        }
    }

    /// A recorder for one run of this chat, with this store's action-tool list.
    pub fn recorder(
        &self,
        chat_id: &str,
        run_id: &str,
        query: QueryRequest,
        system: Option<SystemSnapshot>,
    ) -> Recorder {
        Recorder::new(RecorderInit {
            chat_id: chat_id.to_owned(),
            run_id: run_id.to_owned(),
            query,
            system,
            action_tools: self.action_tools.clone(),
        })
    }

    /// A recorder that continues a run which waited in another process (durable waiting),
    /// from its `awaiting` line.
    pub fn resumed_recorder(&self, awaiting: &history::AwaitingLine) -> Recorder {
        let init = RecorderInit {
            chat_id: awaiting.chat_id.clone(),
            run_id: awaiting.run_id.clone(),
            query: awaiting.query.clone(),
            system: awaiting.system.clone(),
            action_tools: self.action_tools.clone(),
        };
        Recorder::resumed(init, Box::new(agw_protocol::SystemClock), awaiting.steps_written, awaiting.step.clone())
    }

    // -- history ----------------------------------------------------------------------------

    /// Appends lines in one write (so a run's query line and first step land together), under
    /// the chat's lock. Empty `lines` is a no-op. See [`FsyncPolicy`] for durability. On
    /// PostgreSQL the lines are one transaction: all of them are stored, or none.
    pub fn append(&self, chat_id: &str, lines: &[HistoryLine]) -> Result<(), MemoryError> {
        self.append_lines(chat_id, lines, false)
    }

    /// `last`: the run's last lines ([`Self::append_final`]).
    fn append_lines(&self, chat_id: &str, lines: &[HistoryLine], last: bool) -> Result<(), MemoryError> {
        if !is_canonical(chat_id) || lines.is_empty() {
            return Ok(());
        }
        let encoded = EncodedLines::encode(lines).map_err(|source| self.backend.encode_error(chat_id, source))?;
        if last { self.backend.append_last(chat_id, &encoded) } else { self.backend.append(chat_id, &encoded) }
    }

    /// Returns once every end-of-run fsync handed to the fsync thread before the call is done
    /// ([`FsyncPolicy::EveryRun`]); a graceful shutdown calls it after the last run ended.
    pub fn flush(&self) {
        self.backend.flush();
    }

    /// [`Self::append`] for the last lines of a run, with the end-of-run fsync: under
    /// [`FsyncPolicy::Complete`], when it returns `Ok` the chat's history up to these lines is
    /// durable (the fsync runs on the handle that wrote them; when `lines` is empty the file is
    /// fsynced all the same, as earlier steps may be unsynced); under [`FsyncPolicy::EveryRun`]
    /// they are written and that fsync is handed to the store's fsync thread ([`Self::flush`]
    /// waits for it). A PostgreSQL commit is durable already.
    /// The run's usage and cost (on its last step line) are then added to the chat's index record
    /// for the chat list; failing that is a log line, never the run's failure.
    pub fn append_final(&self, chat_id: &str, lines: &[HistoryLine]) -> Result<(), MemoryError> {
        if !lines.is_empty() {
            self.append_lines(chat_id, lines, true)?;
        } else if matches!(self.config.fsync, FsyncPolicy::EveryRun | FsyncPolicy::Complete) && is_canonical(chat_id) {
            self.backend.sync_history(chat_id)?;
        }
        if let Some(step) = lines.iter().rev().filter_map(HistoryLine::as_step).find(|s| s.run_usage.is_some())
            && let Some(usage) = &step.run_usage
            && let Err(e) = self.backend.add_run_totals(chat_id, usage, step.run_cost.as_ref(), wall_clock_ms())
        {
            tracing::warn!(chat_id, error = %e, "chat index: the run's usage was not added to the chat's totals");
        }
        Ok(())
    }

    /// Notes in the chat's index record the agent a finished run ended with (handoffs,
    /// docs/multi-agent.md): the chat's next queries go to it. Only chats whose conversation was
    /// handed over keep one: `handed_off` is whether this run handed over; without it the note
    /// only updates a chat that has one already.
    pub fn note_last_agent(&self, chat_id: &str, agent_key: &str, handed_off: bool) -> Result<(), MemoryError> {
        if !is_canonical(chat_id) {
            return Ok(());
        }
        self.backend.note_agent(chat_id, agent_key, handed_off, wall_clock_ms())
    }

    /// Every readable line of the chat's history, in append (file) order; empty when there is
    /// none.
    ///
    /// Blank lines, non-objects and unknown `_type`s are skipped silently; lines that are not
    /// JSON are skipped with a warning — typically the last line torn by a crash mid-write,
    /// which never blocks later appends (they start on a fresh line).
    pub fn read_lines(&self, chat_id: &str) -> Result<Vec<HistoryLine>, MemoryError> {
        if !is_canonical(chat_id) {
            return Ok(Vec::new());
        }
        self.backend.read_lines(chat_id)
    }

    /// The history messages sent to the model before the new user message (last k runs, §8).
    pub fn history_for_model(&self, chat_id: &str) -> Result<Vec<ChatMessage>, MemoryError> {
        Ok(window::history_messages(&self.read_lines(chat_id)?, self.config.k))
    }

    /// The plan a new run restores: the last non-empty plan in the file, statuses normalised.
    pub fn latest_plan(&self, chat_id: &str) -> Result<Option<PlanSnapshot>, MemoryError> {
        Ok(history::latest_plan(&self.read_lines(chat_id)?).cloned())
    }

    /// History and plan from one read of the file.
    pub fn chat_context(&self, chat_id: &str) -> Result<ChatContext, MemoryError> {
        self.chat_context_of(self.read_lines(chat_id)?)
    }

    /// [`Self::chat_context`] for regenerating the chat's last answer: the chat's last run is left
    /// out of the history the model sees (it stays in the file and in the replay).
    pub fn chat_context_regenerating(&self, chat_id: &str) -> Result<ChatContext, MemoryError> {
        let mut lines = self.read_lines(chat_id)?;
        // Approvals and checkpoints are the chat's, not a run's lines.
        let last_run = lines
            .iter()
            .rev()
            .find(|l| l.as_approval().is_none() && l.as_checkpoint().is_none())
            .map(|l| l.run_id().to_owned());
        if let Some(last_run) = last_run {
            lines.retain(|l| l.as_approval().is_some() || l.run_id() != last_run);
        }
        self.chat_context_of(lines)
    }

    // -- runs waiting for a person ----------------------------------------------------------

    /// Marks `run_id` of `chat_id` as waiting (files: `<dir>/_waiting/<runId>.wait`, holding the
    /// chat id; PostgreSQL: a row of `waiting`), so a restarted server finds its waiting runs
    /// without reading every chat. The truth stays in the chat's history: see
    /// [`Self::waiting_run`].
    pub fn mark_waiting(&self, run_id: &str, chat_id: &str) -> Result<(), MemoryError> {
        if !is_canonical(run_id) || !is_canonical(chat_id) {
            return Ok(());
        }
        self.backend.mark_waiting(run_id, chat_id)
    }

    /// Removes the mark of a run that no longer waits (ended, or gone on).
    pub fn clear_waiting(&self, run_id: &str) -> Result<(), MemoryError> {
        if !is_canonical(run_id) {
            return Ok(());
        }
        self.backend.clear_waiting(run_id)
    }

    /// Every marked run as `(runId, chatId)`, sorted; unreadable or malformed marks are skipped.
    pub fn waiting_runs(&self) -> Result<Vec<(String, String)>, MemoryError> {
        let mut runs = self.backend.waiting_runs()?;
        runs.retain(|(run_id, chat_id)| is_canonical(run_id) && is_canonical(chat_id));
        runs.sort();
        Ok(runs)
    }

    /// The state of `run_id` if it still waits: its last line in the chat is an `awaiting`
    /// line. With it, what the run's next model turn needs: the chat's window without this run,
    /// the chat's plan and remembered approvals, and this run's conversation so far (up to the
    /// turn that waits, whose calls the caller answers).
    pub fn waiting_run(&self, chat_id: &str, run_id: &str) -> Result<Option<WaitingRun>, MemoryError> {
        let lines = self.read_lines(chat_id)?;
        let Some(HistoryLine::Awaiting(awaiting)) = lines.iter().rev().find(|l| l.run_id() == run_id) else {
            return Ok(None);
        };
        let awaiting = awaiting.as_ref().clone();
        // A sub-agent's line holds its own conversation, not the run's.
        let mut steps: Vec<&history::StepLine> = lines
            .iter()
            .filter(|l| l.run_id() == run_id)
            .filter_map(HistoryLine::as_step)
            .filter(|s| s.sub_agent.is_none())
            .collect();
        steps.sort_by_key(|s| s.seq);
        let user = steps
            .is_empty()
            .then(|| history::StoredMessage::user(awaiting.query.message.clone().unwrap_or_default(), 0));
        let stored =
            steps.iter().flat_map(|s| s.messages.iter()).chain(user.iter()).chain(awaiting.step.messages.iter());
        let conversation = window::conversation(stored.clone());
        let blocks = crate::blocks::block_counts(run_id, stored);
        let pending = window::conversation(awaiting.step.messages.iter());
        let steps = window::recovered_steps(steps.iter());
        let others: Vec<HistoryLine> =
            // A checkpoint this run made before it waited still stands for the runs it covers.
            lines
                .into_iter()
                .filter(|l| l.as_approval().is_some() || l.as_checkpoint().is_some() || l.run_id() != run_id)
                .collect();
        Ok(Some(WaitingRun { awaiting, conversation, steps, pending, context: self.chat_context_of(others)?, blocks }))
    }

    pub(crate) fn chat_context_of(&self, lines: Vec<HistoryLine>) -> Result<ChatContext, MemoryError> {
        let window = window::window(&lines, self.config.k);
        Ok(ChatContext {
            history: window.messages,
            history_runs: window.runs,
            plan: history::latest_plan(&lines).cloned(),
            remembered_approvals: lines.iter().filter_map(HistoryLine::as_approval).cloned().collect(),
        })
    }

    /// The reference's window trimming (`docs/contract/memory-jsonl.md` §7), as an explicit operation that
    /// agw never calls by itself: rewrites the history keeping only lines of the last k runs
    /// (by first appearance), lines without a `runId`, and lines it cannot parse (it never
    /// deletes what it does not understand); blank lines go. Returns how many lines were
    /// removed. On PostgreSQL the rewrite is one transaction.
    pub fn trim(&self, chat_id: &str) -> Result<usize, MemoryError> {
        if !is_canonical(chat_id) {
            return Ok(0);
        }
        self.backend.trim(chat_id, self.config.k)
    }

    // -- chat index -------------------------------------------------------------------------

    /// Records an accepted query in the chat index (`docs/contract/memory-jsonl.md` §6). `created` is true
    /// when the chat was new — no index record and no history file — i.e. the run emits
    /// `chat.start` with `chat_name`. A non-UUID chat id changes nothing (`created: false`).
    pub fn upsert_chat(
        &self,
        chat_id: &str,
        first_message: &str,
        agent_key: Option<&str>,
        agent_name: Option<&str>,
        now_ms: i64,
    ) -> Result<ChatUpsert, MemoryError> {
        let upsert = self.upsert_owned_chat(chat_id, first_message, agent_key, agent_name, None, &|_| true, now_ms)?;
        Ok(upsert.expect("a permit that allows everything refuses nothing"))
    }

    /// [`Self::upsert_chat`] for a caller with an identity: a new chat gets `owner`; an existing
    /// chat (an index record, or only a history file: then it has no owner) is upserted only when
    /// `permit` accepts its owner, else nothing is written and the answer is `None`. The check and
    /// the write happen under the index lock (PostgreSQL: in one transaction holding the chat's
    /// lock), so two callers — on two replicas too — cannot both claim a new chat id.
    #[allow(clippy::too_many_arguments)]
    pub fn upsert_owned_chat(
        &self,
        chat_id: &str,
        first_message: &str,
        agent_key: Option<&str>,
        agent_name: Option<&str>,
        owner: Option<&Owner>,
        permit: &dyn Fn(Option<&Owner>) -> bool,
        now_ms: i64,
    ) -> Result<Option<ChatUpsert>, MemoryError> {
        if !is_canonical(chat_id) {
            return Ok(Some(ChatUpsert { created: false, chat_name: ids::chat_name(first_message) }));
        }
        let request = UpsertRequest { chat_id, first_message, agent_key, agent_name, owner, permit, now_ms };
        Ok(self.backend.upsert(&request)?.ok().map(|upserted| ChatUpsert {
            created: !upserted.was_indexed && !upserted.had_history,
            chat_name: upserted.chat_name,
        }))
    }

    /// Whether the chat exists and who owns it: `None` when it has neither an index record nor a
    /// history file; `Some(None)` when it exists without an owner (made without auth, or its
    /// record is gone and only the history file remains).
    pub fn chat_owner(&self, chat_id: &str) -> Result<Option<Option<Owner>>, MemoryError> {
        if let Some(summary) = self.get_chat(chat_id)? {
            return Ok(Some(summary.owner));
        }
        Ok(self.chat_exists(chat_id)?.then_some(None))
    }

    /// Deletes the chat: its waiting marks, its history and its index record (files: the
    /// history file is removed and a tombstone appended to the index; PostgreSQL: the rows, in
    /// one transaction). Afterwards the chat reads as one that never existed, and a query with
    /// its id starts a new chat. Returns whether there was anything to delete. The caller
    /// makes sure no run of the chat is writing to it (agw holds the chat's slot) and checks
    /// who may delete it. A non-UUID id deletes nothing.
    pub fn delete_chat(&self, chat_id: &str) -> Result<bool, MemoryError> {
        if !is_canonical(chat_id) {
            return Ok(false);
        }
        self.delete(chat_id, None)
    }

    /// [`Self::delete_chat`] for retention: deletes the chat only if its index record says it
    /// was last updated before `cutoff_ms` (epoch ms), checked again in the deletion itself
    /// (PostgreSQL: in its transaction, under the chat's lock), so that of replicas sweeping
    /// at once one deletes it, and a chat a run touched in between stays. A chat without an
    /// index record is left alone. Returns whether it was deleted.
    pub fn delete_chat_untouched_since(&self, chat_id: &str, cutoff_ms: i64) -> Result<bool, MemoryError> {
        if !is_canonical(chat_id) {
            return Ok(false);
        }
        self.delete(chat_id, Some(cutoff_ms))
    }

    fn delete(&self, chat_id: &str, untouched_since: Option<i64>) -> Result<bool, MemoryError> {
        match self.backend.delete_chat(chat_id, untouched_since) {
            Ok(existed) => {
                tracing::info!(
                    chat_id,
                    existed,
                    expired = untouched_since.is_some(),
                    backend = self.backend_name(),
                    "chat deleted"
                );
                Ok(existed)
            }
            Err(e) => {
                tracing::warn!(chat_id, error = %e, "chat not (fully) deleted");
                Err(e)
            }
        }
    }

    /// The chats whose index record was last updated before `cutoff_ms` (epoch ms), oldest
    /// first: what retention deletes.
    pub fn chats_untouched_since(&self, cutoff_ms: i64) -> Result<Vec<ChatSummary>, MemoryError> {
        let mut chats = self.list_chats()?;
        chats.retain(|chat| chat.updated_at < cutoff_ms);
        chats.reverse();
        Ok(chats)
    }

    /// Forks `source` into the new chat `new_chat` (`POST /api/ap/chat/fork`): its lines up to
    /// `point` are copied with the chat and run ids rewritten (which lines: `fork.rs`), and the
    /// new chat gets an index record of its own — owned by `owner`, with the source's name and
    /// first agent (from its first copied query when the source has no record), the totals of
    /// the whole runs it holds, and the agent its last copied handoff went to. The record is
    /// written first: a fork cut short leaves an owned chat with less history, never history
    /// without an owner. The caller checks that the caller may read `source`. Blocks.
    pub fn fork_chat(
        &self,
        source: &str,
        new_chat: &str,
        point: &ForkPoint,
        owner: Option<&Owner>,
        now_ms: i64,
    ) -> Result<Forked, ForkError> {
        if !is_canonical(new_chat) {
            return Err(ForkError::ChatExists { chat_id: new_chat.to_owned() });
        }
        let texts = if is_canonical(source) { self.backend.read_texts(source)? } else { Vec::new() };
        let selection = crate::fork::select(source, &texts, point, new_chat, &mut ids::new_run_id)?;
        let summary = self.get_chat(source)?;
        let name =
            summary.as_ref().map(|s| s.chat_name.clone()).or(selection.first_message.clone()).unwrap_or_default();
        let agent_key = summary.as_ref().and_then(|s| s.first_agent_key.clone()).or(selection.first_agent.clone());
        let agent_name = summary.as_ref().and_then(|s| s.first_agent_name.clone());
        let refuse = |_: Option<&Owner>| false;
        let upserted = self.upsert_owned_chat(
            new_chat,
            &name,
            agent_key.as_deref(),
            agent_name.as_deref(),
            owner,
            &refuse,
            now_ms,
        )?;
        let Some(upserted) = upserted.filter(|u| u.created) else {
            return Err(ForkError::ChatExists { chat_id: new_chat.to_owned() });
        };
        if !selection.lines.is_empty() {
            let written = self.backend.append_last(new_chat, &EncodedLines::from_texts(&selection.lines));
            if let Err(e) = written {
                // Best effort: the empty chat would only confuse its owner.
                let _ = self.backend.delete_chat(new_chat, None);
                return Err(e.into());
            }
        }
        for (usage, cost) in &selection.totals {
            if let Err(e) = self.backend.add_run_totals(new_chat, usage, cost.as_ref(), now_ms) {
                tracing::warn!(chat_id = new_chat, error = %e, "chat index: a copied run's usage was not added to the fork's totals");
            }
        }
        if let Some(agent) = &selection.handed_to {
            self.note_last_agent(new_chat, agent, true)?;
        }
        Ok(Forked {
            chat_id: new_chat.to_owned(),
            chat_name: upserted.chat_name,
            runs: selection.runs,
            lines: selection.lines.len(),
        })
    }

    /// Every chat of the index, newest first (`docs/contract/http-api.md` §3).
    pub fn list_chats(&self) -> Result<Vec<ChatSummary>, MemoryError> {
        self.backend.list_chats()
    }

    /// The index record of one chat.
    pub fn get_chat(&self, chat_id: &str) -> Result<Option<ChatSummary>, MemoryError> {
        if !is_canonical(chat_id) {
            return Ok(None);
        }
        self.backend.get_chat(chat_id)
    }

    /// Whether the chat has an index record or a history file (history lines, on PostgreSQL;
    /// `GET /api/ap/chat` answers 404 otherwise).
    pub fn chat_exists(&self, chat_id: &str) -> Result<bool, MemoryError> {
        if !is_canonical(chat_id) {
            return Ok(false);
        }
        Ok(self.backend.history_exists(chat_id)? || self.get_chat(chat_id)?.is_some())
    }
}

/// Only a fallback for a record without `createdAt` (hand-edited) that gets totals.
fn wall_clock_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
