//! The end-of-run fsync of [`FsyncPolicy::EveryRun`](crate::FsyncPolicy::EveryRun), off the
//! path a client waits on.
//!
//! A run's last lines are written (one `O_APPEND` write: from then on a crash of agw cannot
//! lose them) before its `run.complete` is sent; the fsync that makes them survive a power cut
//! follows on this one thread, which takes every file handed over since its last round and
//! fdatasyncs each — or, when [`SYNCFS_FROM`] or more wait (runs that ended together; a round
//! gathers for [`GATHER`] after its first file), makes the whole round durable with one
//! `syncfs(2)` of the chat directory's file system (Linux): one writeback and one device cache
//! flush for the round instead of one per file, falling back to each file's fdatasync if it
//! fails. A new history file's directory entry is synced here too ([`Target::Dir`]). At 1,000
//! runs ending together the fsyncs used to sit between each run's last write and its terminal
//! event, on the blocking pool, where they queued behind each other (docs/performance.md,
//! round two). [`Flusher::drain`] waits for every handed-over file (a
//! graceful shutdown, tests); dropping the flusher drains it too.
//!
//! Failures cannot reach the run any more (it has ended): they are logged as errors with the
//! file's path.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// From this many files in one round on, one `syncfs(2)` covers them (Linux only). A round of
/// a few stays with each file's fdatasync: `syncfs` also writes back whatever else is dirty on
/// that file system, which pays off only when it replaces several device flushes.
const SYNCFS_FROM: usize = if cfg!(target_os = "linux") { 4 } else { usize::MAX };

/// How long a round gathers files after its first before it syncs them. At 1,000 runs ending
/// within ~100 ms this makes rounds of ~20 files (one syncfs each) instead of one or two; a lone
/// run's fsync starts this much later.
const GATHER: Duration = Duration::from_millis(2);

/// What to fsync: the handle that wrote the run's last lines, a history file by path (a run
/// whose last step had no lines of its own), or the chat directory (a history file was created).
pub(crate) enum Target {
    File(File, PathBuf),
    Path(PathBuf),
    /// The chat directory, after a history file was created in it.
    Dir(PathBuf),
}

#[derive(Default)]
struct State {
    pending: Vec<Target>,
    /// Targets handed over so far / fsynced (or failed) so far.
    scheduled: u64,
    flushed: u64,
    stop: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// Wakes the thread (work or stop) and the drainers (a round finished).
    work: Condvar,
    done: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One background fsync thread, started with the first file handed over.
#[derive(Default)]
pub(crate) struct Flusher {
    shared: Arc<Shared>,
    thread: OnceLock<Option<JoinHandle<()>>>,
}

impl Flusher {
    /// Hands `target` over for an fsync soon; never blocks on the disk.
    pub(crate) fn schedule(&self, target: Target) {
        let thread = self.thread.get_or_init(|| {
            let shared = self.shared.clone();
            std::thread::Builder::new()
                .name("agw-chat-fsync".into())
                .spawn(move || run(&shared))
                .map_err(|e| tracing::error!(error = %e, "could not start the chat fsync thread; fsyncing inline"))
                .ok()
        });
        if thread.is_none() {
            sync(target);
            return;
        }
        let mut state = self.shared.lock();
        let first = state.pending.is_empty();
        state.pending.push(target);
        state.scheduled += 1;
        drop(state);
        // The first file of a round wakes the thread; the rest join the round it gathers.
        if first {
            self.shared.work.notify_one();
        }
    }

    /// Targets handed over so far.
    #[cfg(test)]
    pub(crate) fn scheduled(&self) -> u64 {
        self.shared.lock().scheduled
    }

    /// Returns once every target handed over before the call has been fsynced (or failed).
    pub(crate) fn drain(&self) {
        let mut state = self.shared.lock();
        let target = state.scheduled;
        while state.flushed < target {
            state = self.shared.done.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.work.notify_one();
        if let Some(Some(thread)) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(shared: &Shared) {
    loop {
        let mut state = shared.lock();
        while state.pending.is_empty() && !state.stop {
            state = shared.work.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        if state.pending.is_empty() {
            return;
        }
        // Runs that end together become durable together: the round gathers for a moment
        // (not when stopping), so one syncfs can replace many fdatasyncs.
        let deadline = Instant::now() + GATHER;
        while !state.stop {
            let Some(left) = deadline.checked_duration_since(Instant::now()).filter(|d| !d.is_zero()) else { break };
            state = shared.work.wait_timeout(state, left).unwrap_or_else(PoisonError::into_inner).0;
        }
        let batch = std::mem::take(&mut state.pending);
        let upto = state.scheduled;
        drop(state);
        sync_round(batch);
        shared.lock().flushed = upto;
        shared.done.notify_all();
    }
}

/// How a round was made durable.
#[derive(Debug, PartialEq, Eq)]
enum Synced {
    FileSystem,
    EachFile,
}

/// Every history file of `batch` (all under the one chat directory, so on one file system)
/// durable: one `syncfs` of that file system for a large round, else (or if it fails) each
/// file's fdatasync. Since Linux 5.8 `syncfs` reports writeback errors of the file system; on
/// an error the files are fdatasynced one by one, which reports each file's own.
fn sync_round(batch: Vec<Target>) -> Synced {
    if batch.len() >= SYNCFS_FROM {
        match sync_file_system(&batch[0]) {
            Ok(()) => return Synced::FileSystem,
            Err(e) => {
                tracing::warn!(error = %e, files = batch.len(), "syncfs of the chat directory's file system failed; fsyncing each file")
            }
        }
    }
    for target in batch {
        sync(target);
    }
    Synced::EachFile
}

#[cfg(target_os = "linux")]
fn sync_file_system(target: &Target) -> std::io::Result<()> {
    match target {
        Target::File(file, _) => rustix::fs::syncfs(file)?,
        Target::Path(path) | Target::Dir(path) => rustix::fs::syncfs(File::open(path)?)?,
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn sync_file_system(_: &Target) -> std::io::Result<()> {
    Err(std::io::ErrorKind::Unsupported.into())
}

fn sync(target: Target) {
    let result = match &target {
        Target::File(file, path) => file.sync_data().map_err(crate::MemoryError::io("fsync", path)),
        Target::Path(path) => crate::file::sync(path),
        Target::Dir(dir) => crate::file::sync_dir(dir),
    };
    if let Err(e) = result {
        tracing::error!(error = %e, "chat history fsync (a run's last lines or a new chat's directory entry) failed; the last run may not survive a power cut");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn drain_waits_for_every_scheduled_file_and_drop_flushes_the_rest() {
        let dir = std::env::temp_dir().join(format!("agw-flusher-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let flusher = Flusher::default();
        for i in 0..50 {
            let path = dir.join(format!("{i}.jsonl"));
            let mut file = File::create(&path).unwrap();
            file.write_all(b"{}\n").unwrap();
            if i % 2 == 0 {
                flusher.schedule(Target::File(file, path));
            } else {
                flusher.schedule(Target::Path(path));
            }
        }
        flusher.drain();
        let state = flusher.shared.lock();
        assert_eq!((state.scheduled, state.flushed), (50, 50));
        assert!(state.pending.is_empty());
        drop(state);
        // A missing file is logged, never a panic, and still counts as handled.
        flusher.schedule(Target::Path(dir.join("missing.jsonl")));
        drop(flusher);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_large_round_is_one_syncfs_and_a_small_one_or_a_failed_one_each_files_fsync() {
        let dir = std::env::temp_dir().join(format!("agw-flusher-round-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let targets = |n: usize| -> Vec<Target> {
            (0..n)
                .map(|i| {
                    let path = dir.join(format!("{i}.jsonl"));
                    let mut file = File::create(&path).unwrap();
                    file.write_all(b"{}\n").unwrap();
                    Target::File(file, path)
                })
                .collect()
        };
        let large = if cfg!(target_os = "linux") { Synced::FileSystem } else { Synced::EachFile };
        assert_eq!(sync_round(targets(SYNCFS_FROM.min(64))), large);
        assert_eq!(sync_round(targets(3)), Synced::EachFile);
        // A file that cannot be opened for the syncfs: each file is fsynced instead (the missing
        // one logged), never a panic.
        let mut failing = vec![Target::Path(dir.join("missing.jsonl"))];
        failing.extend(targets(SYNCFS_FROM.min(64)));
        assert_eq!(sync_round(failing), Synced::EachFile);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_flusher_that_never_got_work_starts_no_thread() {
        let flusher = Flusher::default();
        flusher.drain();
        assert!(flusher.thread.get().is_none());
    }
}
