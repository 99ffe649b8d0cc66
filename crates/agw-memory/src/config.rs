//! Settings of the chat memory (`docs/contract/config.md` §6) plus agw's durability knob.

use std::path::PathBuf;

/// Default window size in runs (`memory.chat.k`).
pub const DEFAULT_K: usize = 20;

/// Where and how chat memory is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryConfig {
    /// `memory.chat.dir`: history files `<chatId>.json` and the index `_chats.jsonl`. Created on
    /// first write. Made absolute when the store is built.
    pub dir: PathBuf,
    /// `memory.chat.k`: how many of the latest runs are sent back to the model (min 1).
    pub k: usize,
    /// When appended history is forced to stable storage (agw-only; not in `docs/contract/config.md`).
    pub fsync: FsyncPolicy,
    /// `memory.chat.action-tools`: tool names (case-insensitive) whose calls are persisted with
    /// `_actionId` instead of `_toolId`.
    pub action_tools: Vec<String>,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        Self { dir: PathBuf::from("./chats"), k: DEFAULT_K, fsync: FsyncPolicy::default(), action_tools: Vec::new() }
    }
}

/// `dir` absolute, `k` at least 1.
pub(crate) fn normalise(mut config: MemoryConfig) -> MemoryConfig {
    if let Ok(absolute) = std::path::absolute(&config.dir) {
        config.dir = absolute;
    }
    config.k = config.k.max(1);
    config
}

/// When appended history is forced to stable storage.
///
/// Every append is one `write` of whole lines to a file opened with `O_APPEND`; once `write`
/// returns the bytes are in the kernel's page cache and survive a crash or kill of the agw
/// process. `fsync` only adds protection against losing them to a power cut or kernel crash, at
/// the cost of a disk flush (milliseconds on SSDs, more on network or spinning disks).
///
/// The chat index is rewritten as temp file + rename; under every policy but [`Self::Never`]
/// the temp file is fsynced before the rename so that a power cut leaves the old or the new
/// index, never an empty one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Never fsync (tests, tmpfs, or when the platform's durability is enough).
    Never,
    /// fsync after every append (each flushed step). Adds a disk flush between the steps of a
    /// streaming run — visible latency on slow disks for a small gain.
    EveryStep,
    /// Default: fsync once when a run ends, right after its last lines are written
    /// ([`crate::ChatStore::append_final`]), on the store's fsync thread — not on the path the
    /// client waits on: `run.complete` is sent once the lines are *written* (a crash of agw
    /// cannot lose them), their fsync follows within the fsync thread's next round (a few
    /// milliseconds: a round gathers for 2 ms; a round of several files is one `syncfs(2)` on
    /// Linux; a new history file's directory entry is synced there too). A power cut or
    /// kernel crash can lose the steps of runs still in flight and, within that round, the last
    /// step of a run that just completed; streaming never waits for a disk flush.
    #[default]
    EveryRun,
    /// As [`FsyncPolicy::EveryRun`], but the fsync happens before
    /// [`crate::ChatStore::append_final`] returns, so `run.complete` is sent only once the run is
    /// on disk. At many runs ending together the fsyncs queue on the client's path
    /// (docs/performance.md, round two).
    Complete,
}
