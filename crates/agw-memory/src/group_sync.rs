//! Group commit of the fsyncs of one file: many writers, one `fdatasync` per group.
//!
//! A writer appends under whatever lock orders its writes, takes a [ticket](GroupSync::ticket)
//! while still holding that lock (tickets are numbered in write order), releases the lock, then
//! calls [`GroupSync::wait_durable`] with its ticket and a closure that fsyncs the file:
//!
//! - every ticket up to the caller's already has an outcome: it returns that outcome at once;
//! - another caller is syncing (the leader): it waits on a condition variable and checks again;
//! - otherwise it becomes the leader: it notes the highest ticket issued so far (the target),
//!   runs the closure — one fsync, outside the state lock — and publishes the outcome of every
//!   ticket up to the target, waking everyone.
//!
//! Why a successful sync covers a ticket: the writer's `write` returned before it took its
//! ticket, the ticket was issued under the state lock before the leader read the target under
//! the same lock, and the leader calls the closure after that. So every byte written by a ticket
//! ≤ target was in the file before the fsync began, and the fsync makes it durable. (The closure
//! must fsync the file that holds those bytes: a caller that replaces the file first settles
//! every issued ticket with [`GroupSync::sync_issued`], see `index.rs`.)
//!
//! A failed sync fails every ticket it covered — the ones whose callers wait now, and the ones
//! whose callers arrive later — and never counts them as durable: after a failed `fsync` the
//! kernel may have dropped the dirty pages, so a later successful `fsync` proves nothing about
//! them. Later tickets are not affected: the next caller past the failed target leads a new
//! sync (the retry). A leader that panics in the closure publishes nothing; the waiters then
//! elect a new leader.
//!
//! No thread of its own, no polling: waiters sleep on the condition variable until a leader
//! finishes. Every issued ticket must be waited on once (the record of a failure is kept until
//! every ticket it covered has been told).

use std::io;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

/// Group commit for one file (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct GroupSync {
    state: Mutex<State>,
    /// Signalled whenever a leader finishes (or gives up).
    done: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The highest ticket issued (0: none yet).
    issued: u64,
    /// Every ticket ≤ `settled` has an outcome: durable, unless it is in a [`Failure`].
    settled: u64,
    /// A leader is running a sync now.
    syncing: bool,
    /// Failed syncs some of whose tickets have not been told yet (few: usually none).
    failed: Vec<Failure>,
}

/// The tickets `after+1 ..= upto` were covered by a sync that failed with `error`.
#[derive(Debug)]
struct Failure {
    after: u64,
    upto: u64,
    /// How many of those tickets have not been told yet.
    untold: u64,
    error: io::Error,
}

impl Failure {
    fn covers(&self, ticket: u64) -> bool {
        self.after < ticket && ticket <= self.upto
    }
}

/// Resets `syncing` when the leader's closure panics, so the waiters elect another leader.
struct Abandoned<'a>(&'a GroupSync);

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        self.0.lock().syncing = false;
        self.0.done.notify_all();
    }
}

impl GroupSync {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// The next ticket: take it after the write returned, under the lock that orders the writes.
    pub(crate) fn ticket(&self) -> u64 {
        let mut state = self.lock();
        state.issued += 1;
        state.issued
    }

    /// Returns once a sync that began after `ticket` was issued has succeeded (`Ok`), or once one
    /// that covered it has failed (that error; the ticket is not durable). Leads a sync with
    /// `sync` when none is running and the ticket is not settled yet. Call it without holding
    /// the lock under which the ticket was taken, or nobody else can join the group.
    pub(crate) fn wait_durable(&self, ticket: u64, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let mut state = self.settle(ticket, sync)?;
        let Some(i) = state.failed.iter().position(|f| f.covers(ticket)) else { return Ok(()) };
        let failure = &mut state.failed[i];
        failure.untold -= 1;
        let error = copy(&failure.error);
        if failure.untold == 0 {
            state.failed.swap_remove(i);
        }
        Err(error)
    }

    /// Settles every ticket issued so far (leading a sync when needed): afterwards each has its
    /// outcome, and a caller that holds the lock under which tickets are taken may replace the
    /// file. `Err` when the last issued ticket was covered by a failed sync. Tells no ticket
    /// holder: they still get their outcomes from [`Self::wait_durable`].
    pub(crate) fn sync_issued(&self, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let target = self.lock().issued;
        let state = self.settle(target, sync)?;
        match state.failed.iter().find(|f| f.covers(target)) {
            Some(failure) => Err(copy(&failure.error)),
            None => Ok(()),
        }
    }

    /// Waits, or leads syncs, until `ticket` is settled; returns the state lock.
    fn settle(&self, ticket: u64, sync: impl FnOnce() -> io::Result<()>) -> io::Result<MutexGuard<'_, State>> {
        let mut state = self.lock();
        if ticket > state.issued {
            // Not a ticket of this group: no sync could ever cover it.
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "group sync: a ticket that was never issued"));
        }
        while ticket > state.settled && state.syncing {
            state = self.done.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
        if ticket > state.settled {
            // Lead. The target is ≥ `ticket`, so this one sync settles it (unless the closure
            // panics, which unwinds from here).
            let target = state.issued;
            state.syncing = true;
            drop(state);
            let abandoned = Abandoned(self);
            let result = sync();
            std::mem::forget(abandoned);
            state = self.lock();
            let after = state.settled;
            if let Err(error) = result {
                state.failed.push(Failure { after, upto: target, untold: target - after, error });
            }
            state.settled = target;
            state.syncing = false;
            self.done.notify_all();
        }
        Ok(state)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing under this lock can panic half-way through an update.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Another `io::Error` like `error` (the OS error, or its kind and message): every covered
/// waiter gets one.
fn copy(error: &io::Error) -> io::Error {
    match error.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(error.kind(), error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Arc, mpsc};
    use std::thread;
    use std::time::Duration;

    use super::*;

    const EIO: i32 = 5;

    /// A stand-in for a file: appends counted under a lock, tickets taken under it.
    #[derive(Default)]
    struct File {
        /// The lock that orders the writes, holding the number of writes.
        writes: Mutex<u64>,
        /// Writes done (mirrors `writes`, readable without the lock).
        written: AtomicU64,
        /// The highest write count a finished fsync covered.
        durable: AtomicU64,
        syncs: AtomicUsize,
        group: GroupSync,
    }

    impl File {
        fn append(&self) -> u64 {
            let mut writes = self.writes.lock().unwrap();
            *writes += 1;
            self.written.store(*writes, Ordering::SeqCst);
            let ticket = self.group.ticket();
            assert_eq!(ticket, *writes, "tickets are numbered in write order");
            ticket
        }

        /// An fsync that covers what was written when it began, and takes a while.
        fn fsync(&self) -> io::Result<()> {
            let covered = self.written.load(Ordering::SeqCst);
            self.syncs.fetch_add(1, Ordering::SeqCst);
            thread::sleep(Duration::from_micros(500));
            self.durable.fetch_max(covered, Ordering::SeqCst);
            Ok(())
        }
    }

    #[test]
    fn concurrent_callers_return_after_a_sync_that_covered_them_and_share_syncs() {
        const THREADS: usize = 16;
        const APPENDS: usize = 200;
        let file = Arc::new(File::default());
        let threads: Vec<_> = (0..THREADS)
            .map(|_| {
                let file = Arc::clone(&file);
                thread::spawn(move || {
                    for _ in 0..APPENDS {
                        let ticket = file.append();
                        file.group.wait_durable(ticket, || file.fsync()).expect("no failure injected");
                        let durable = file.durable.load(Ordering::SeqCst);
                        assert!(durable >= ticket, "ticket {ticket} returned with only {durable} durable");
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().expect("no panic");
        }
        let calls = THREADS * APPENDS;
        let syncs = file.syncs.load(Ordering::SeqCst);
        eprintln!("{calls} overlapping callers, {syncs} syncs");
        assert!(syncs <= calls / 4, "{syncs} syncs for {calls} overlapping callers");
        let state = file.group.lock();
        assert_eq!((state.issued, state.settled, state.syncing), (calls as u64, calls as u64, false));
        assert!(state.failed.is_empty());
    }

    #[test]
    fn a_settled_ticket_returns_at_once() {
        let group = GroupSync::new();
        group.wait_durable(0, || panic!("nothing to sync")).expect("ticket 0 is nothing written");
        let ticket = group.ticket();
        group.wait_durable(ticket, || Ok(())).expect("synced");
        group.sync_issued(|| panic!("already settled")).expect("nothing new");
        assert!(group.wait_durable(ticket + 1, || Ok(())).is_err(), "a ticket never issued");
    }

    #[test]
    fn a_failed_sync_fails_exactly_the_tickets_it_covered_and_the_next_caller_retries() {
        let group = Arc::new(GroupSync::new());
        let (one, two, three) = (group.ticket(), group.ticket(), group.ticket());
        let (started_tx, started) = mpsc::channel();
        let (release, release_rx) = mpsc::channel::<()>();
        let leader = {
            let group = Arc::clone(&group);
            thread::spawn(move || {
                group.wait_durable(one, || {
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Err(io::Error::from_raw_os_error(EIO))
                })
            })
        };
        started.recv().unwrap();
        // Waits for the leader's sync, which covers it (target 3).
        let follower = {
            let group = Arc::clone(&group);
            thread::spawn(move || group.wait_durable(two, || panic!("the leader's sync covers ticket 2")))
        };
        // Issued while that sync runs: not covered by it; its caller leads the retry.
        let four = group.ticket();
        let retries = Arc::new(AtomicUsize::new(0));
        let later = {
            let (group, retries) = (Arc::clone(&group), Arc::clone(&retries));
            thread::spawn(move || {
                group.wait_durable(four, || {
                    retries.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            })
        };
        release.send(()).unwrap();
        for (name, outcome) in [("leader", leader.join().unwrap()), ("follower", follower.join().unwrap())] {
            assert_eq!(outcome.expect_err(name).raw_os_error(), Some(EIO), "{name}");
        }
        later.join().unwrap().expect("ticket 4 is synced by a retry");
        assert_eq!(retries.load(Ordering::SeqCst), 1);
        // A covered ticket whose caller comes late is failed too, without another sync (which
        // could succeed although its bytes were lost).
        let late = group.wait_durable(three, || panic!("ticket 3 is settled"));
        assert_eq!(late.expect_err("covered").raw_os_error(), Some(EIO));
        assert!(group.lock().failed.is_empty(), "every covered ticket was told");
        group.sync_issued(|| panic!("everything is settled")).expect("the last ticket is durable");
    }

    #[test]
    fn sync_issued_settles_tickets_not_yet_waited_on_without_telling_them() {
        let group = GroupSync::new();
        let (one, two) = (group.ticket(), group.ticket());
        let err = group.sync_issued(|| Err(io::Error::other("disk gone"))).expect_err("covered");
        assert_eq!(err.to_string(), "disk gone");
        for ticket in [one, two] {
            assert!(group.wait_durable(ticket, || panic!("settled")).is_err(), "ticket {ticket}");
        }
        let three = group.ticket();
        group.sync_issued(|| Ok(())).expect("the retry succeeds");
        group.wait_durable(three, || panic!("settled")).expect("durable");
        assert!(group.lock().failed.is_empty());
    }

    #[test]
    fn a_leader_that_panics_leaves_the_next_caller_to_lead() {
        let group = Arc::new(GroupSync::new());
        let (one, two) = (group.ticket(), group.ticket());
        let panicking = {
            let group = Arc::clone(&group);
            thread::spawn(move || group.wait_durable(one, || panic!("injected")))
        };
        assert!(panicking.join().is_err());
        assert!(!group.lock().syncing);
        group.wait_durable(two, || Ok(())).expect("a new leader syncs");
        group.wait_durable(one, || panic!("covered by ticket 2's sync")).expect("durable");
    }
}
