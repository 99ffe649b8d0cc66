//! The end-of-run fsync of [`FsyncPolicy::EveryRun`](crate::FsyncPolicy::EveryRun), off the
//! path a client waits on.
//!
//! A run's last lines are written (one `O_APPEND` write: from then on a crash of agw cannot
//! lose them) before its `run.complete` is sent; the fsync that makes them survive a power cut
//! follows on this one thread, which takes every file handed over since its last round and
//! fdatasyncs each. At 1,000 runs ending together the fsyncs used to sit between each run's
//! last write and its terminal event, on the blocking pool, where they queued behind each other
//! (docs/performance.md, round two). [`Flusher::drain`] waits for every handed-over file (a
//! graceful shutdown, tests); dropping the flusher drains it too.
//!
//! Failures cannot reach the run any more (it has ended): they are logged as errors with the
//! file's path.

use std::fs::File;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;

/// What to fsync: the handle that wrote the run's last lines, or a history file by path (a run
/// whose last step had no lines of its own).
pub(crate) enum Target {
    File(File, PathBuf),
    Path(PathBuf),
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
        state.pending.push(target);
        state.scheduled += 1;
        drop(state);
        self.shared.work.notify_one();
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
        let batch = std::mem::take(&mut state.pending);
        let upto = state.scheduled;
        drop(state);
        for target in batch {
            sync(target);
        }
        shared.lock().flushed = upto;
        shared.done.notify_all();
    }
}

fn sync(target: Target) {
    let result = match &target {
        Target::File(file, path) => file.sync_data().map_err(crate::MemoryError::io("fsync", path)),
        Target::Path(path) => crate::file::sync(path),
    };
    if let Err(e) = result {
        tracing::error!(error = %e, "end-of-run fsync of a chat history failed; its last run may not survive a power cut");
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
    fn a_flusher_that_never_got_work_starts_no_thread() {
        let flusher = Flusher::default();
        flusher.drain();
        assert!(flusher.thread.get().is_none());
    }
}
