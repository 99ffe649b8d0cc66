//! The run loop: one for every way a run is driven — started live, continued after a restart,
//! adopted from a lost replica. The mode runs until it returns or the run is stopped (cancelled,
//! abandoned by its observers, or the server's grace period ends), then the terminal event.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agw_modes::runtime::{self, FrontendSubmits, Recovery, Resume, RunContext, RunOutcome, SteerQueue};
use agw_protocol::{ErrorCode, RunErrorInfo};

use crate::quotas::QuotaPermit;
use crate::service::Core;
use crate::sink::RunSink;
use crate::{CancelReason, ChatSlot, RunGuard, RunHandle};

/// Where the mode starts.
pub(crate) enum Entry {
    /// From the beginning (a new run).
    Fresh,
    /// Where it waited for a person, with the answer (durable waiting).
    Resume(Box<Resume>),
    /// After its last completed step, its process having stopped (crash recovery).
    Recover(Box<Recovery>),
}

/// A run that has started streaming: what the rest of it needs, and what it holds until it ends.
pub(crate) struct LiveRun {
    // Fields drop in this order, as the locals of the one `async fn` this was did: the sink
    // first, then the chat's slot, the frontend answers, the registry's count (`RunGuards`), the
    // quota last (released earlier, when the mode ended).
    pub(crate) ctx: RunContext,
    pub(crate) entry: Entry,
    pub(crate) sink: RunSink,
    pub(crate) steers: Arc<SteerQueue>,
    pub(crate) _guards: RunGuards,
    pub(crate) handle: Arc<RunHandle>,
    /// The run's place in its quotas (in flight, its token reservation), released when the
    /// mode ended.
    pub(crate) quota: QuotaPermit,
}

/// Held for a run's whole life; fields drop in order.
pub(crate) struct RunGuards {
    pub(crate) _slot: ChatSlot,
    pub(crate) _answers: ForgetAnswers,
    pub(crate) _guard: RunGuard,
}

impl LiveRun {
    /// The mode, until it returns or the run is stopped, then the terminal event. Boxed, and
    /// its fields used in place: an `async fn` keeps its arguments' slots and `mut self` gets a
    /// second one, so a `LiveRun` by value (2 KB) would be held twice; the fields drop in
    /// declaration order.
    pub(crate) async fn run(mut self: Box<Self>, core: &Core) {
        // Boxed: the mode's states are only paid for while it runs. Dropping the mode's future
        // stops it wherever it is: the provider request is aborted, a tool's processes are
        // killed, a frontend wait is unregistered.
        let mode: Pin<Box<dyn Future<Output = RunOutcome> + Send + '_>> = match self.entry {
            Entry::Fresh => Box::pin(runtime::execute(self.ctx, &mut self.sink)),
            Entry::Resume(resume) => Box::pin(runtime::resume(self.ctx, *resume, &mut self.sink)),
            Entry::Recover(recovery) => Box::pin(runtime::recover(self.ctx, *recovery, &mut self.sink)),
        };
        let ended = tokio::select! {
            outcome = mode => Ended::Mode(outcome),
            reason = self.handle.cancelled() => match reason {
                CancelReason::TakenOver => Ended::TakenOver,
                reason => Ended::Cancelled(reason),
            },
            () = self.handle.abandoned() => Ended::Cancelled(CancelReason::Detached),
            () = core.tracker.stopped() => Ended::Shutdown,
        };
        // Before the terminal event: a client that asks again the moment it sees it is not
        // refused by this run's place or reservation.
        self.quota.release();
        end_run(&mut self.sink, ended, &self.steers).await;
    }
}

/// Forgets the run's answered submits when its task ends, however it ends: a second answer is
/// told `already_answered` while the run lasts, and nothing is kept after it.
pub(crate) struct ForgetAnswers(pub(crate) Arc<FrontendSubmits>, pub(crate) String);

impl Drop for ForgetAnswers {
    fn drop(&mut self) {
        self.0.forget_run(&self.1);
    }
}

/// How the mode's part of a run ended, from the run task's point of view.
pub(crate) enum Ended {
    Mode(RunOutcome),
    Cancelled(CancelReason),
    Shutdown,
    /// Another replica resumed the run: nothing more is written here.
    TakenOver,
}

/// Counts a run's end in `agw_runs_total`.
pub(crate) fn count_outcome(outcome: &'static str, code: &str) {
    metrics::counter!(crate::RUNS_TOTAL, "outcome" => outcome, "code" => code.to_string()).increment(1);
}

/// Ends a run whose mode returned (or was stopped): closes its steers, then the terminal
/// event the way it ended says — unless the server stops while the run waits durably for a
/// person: then nothing is written, and a restart continues it (`crate::durable`).
pub(crate) async fn end_run(sink: &mut RunSink, ended: Ended, steers: &SteerQueue) {
    if matches!(ended, Ended::Shutdown) && sink.waits_durably() {
        steers.close();
        tracing::info!("the server stops while the run waits; it continues after a restart");
        return;
    }
    if matches!(ended, Ended::TakenOver) {
        steers.close();
        sink.leave_for_recovery();
        tracing::warn!("another replica took the run over (this one's lease had expired); it stops here");
        return;
    }
    if matches!(ended, Ended::Shutdown) && sink.resumable().await {
        steers.close();
        sink.leave_for_recovery();
        tracing::info!("the server stops while the run is in flight; the next start resumes it");
        return;
    }
    // Before the terminal event: a steer into a finished run is refused from here on.
    let untaken = steers.close();
    if !untaken.is_empty() {
        let steer_ids: Vec<&str> = untaken.iter().map(|s| s.steer_id.as_str()).collect();
        tracing::info!(?steer_ids, "the run ended before taking these steers");
    }
    match ended {
        Ended::Mode(RunOutcome::Completed { finish_reason }) => {
            count_outcome("completed", "");
            let _ = sink.complete(&finish_reason).await;
            tracing::info!(%finish_reason, "run completed");
        }
        Ended::Mode(RunOutcome::Failed(e)) => {
            count_outcome("failed", e.code.as_str());
            tracing::warn!(code = ?e.code, message = %e.message, "run ended with run.error");
            let _ = sink.fail(e).await;
        }
        Ended::Mode(RunOutcome::Disconnected) => {
            // The sink never reports a closed consumer (observers come and go); kept for
            // completeness: what was streamed is persisted.
            count_outcome("disconnected", "");
            sink.abandon().await;
        }
        Ended::Cancelled(reason) => {
            count_outcome("cancelled", if reason == CancelReason::Interrupted { "interrupted" } else { "detached" });
            tracing::info!(?reason, "run cancelled");
            let _ = sink.cancel().await;
        }
        Ended::Shutdown => {
            count_outcome("failed", "internal");
            // Shutdown grace period over: end with run.error (what was streamed stays recorded).
            let error =
                RunErrorInfo::new(ErrorCode::Internal, "the server is shutting down; the run was stopped", true);
            let _ = sink.fail(error).await;
        }
        // Left above, before any terminal event.
        Ended::TakenOver => {}
    }
}
