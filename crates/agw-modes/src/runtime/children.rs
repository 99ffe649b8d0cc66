//! Child tasks: runs of a mode that stream into their parent's stream while siblings run beside
//! them (sub-agents of `agent_invoke`; docs/multi-agent.md).
//!
//! Every child emits into a [`ChildSink`], which wraps each delta as [`AgentDelta::Child`] and
//! sends it down one bounded channel shared by the siblings; [`run_children`] polls the children
//! and forwards what arrives to the parent's sink in arrival order. Nothing is spawned: the
//! children live inside the parent's future, so dropping the parent (an interrupt, a timeout)
//! drops them, and a slow client slows them through the channel like any run.

use agw_protocol::{AgentDelta, CallUsage, ChildEnd};
use futures::future::join_all;
use tokio::sync::{mpsc, oneshot};

use agw_protocol::history::StreamedAs;

use super::calls::StreamedCall;
use super::tools::{Decoration, decorate, plain_tool_meta};
use super::{BatchPoint, DeltaSink, EmitError, RunContext, RunFailure, RunOutcome, TaskPoint, WaitPoint};

/// Deltas the children may have in flight before they wait for the parent's sink.
const CHILD_DELTA_BUFFER: usize = 32;

/// What a child left besides its deltas and its own result: its answer and its usage.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ChildReport {
    /// The text of the child's last stage (its final answer), as streamed.
    pub answer: String,
    /// Every model call's usage.
    pub usage: Vec<CallUsage>,
}

/// How a child's run ended, as its frame shows it.
pub(crate) fn end_of(outcome: &RunOutcome) -> ChildEnd {
    match outcome {
        RunOutcome::Completed { .. } => ChildEnd::Complete,
        RunOutcome::Failed(info) => {
            ChildEnd::Fail(agw_protocol::TaskError::new(info.code.as_str(), info.message.clone()))
        }
        RunOutcome::Disconnected => ChildEnd::Cancel,
    }
}

/// What a child sends its parent: its deltas and, in a round of plan tasks, its checkpoints
/// (through the same channel, so each follows the deltas before it).
enum ChildMsg {
    Delta(AgentDelta),
    /// Told (when there is someone to tell) once the parent kept it.
    Checkpoint(TaskPoint, Option<oneshot::Sender<()>>),
}

/// Where a child's mode emits: into its parent's stream, tagged with the child's task.
pub(crate) struct ChildSink {
    task_id: String,
    tx: mpsc::Sender<ChildMsg>,
    answer: String,
    usage: Vec<CallUsage>,
    /// The child is a plan task whose progress the parent keeps (crash recovery).
    checkpoints: bool,
    /// The task as its copy of the plan had it when it ended.
    ended_as: Option<agw_protocol::PlanTask>,
}

impl ChildSink {
    async fn send(&self, delta: AgentDelta) -> Result<(), EmitError> {
        self.tx.send(ChildMsg::Delta(delta)).await.map_err(|_| EmitError::Closed)
    }

    /// The plan task as it ended, for its last checkpoint.
    pub(crate) fn ended_as(&mut self, task: Option<agw_protocol::PlanTask>) {
        self.ended_as = task;
    }

    /// Ends the child in the parent's stream and hands back what it left.
    async fn finish(self, end: ChildEnd) -> ChildReport {
        // The parent gone, nobody is left to tell.
        let _ = self.send(AgentDelta::ChildEnd { task_id: self.task_id.clone(), end }).await;
        if self.checkpoints {
            let point = TaskPoint::Ended { task_id: self.task_id.clone(), task: self.ended_as };
            let _ = self.tx.send(ChildMsg::Checkpoint(point, None)).await;
        }
        ChildReport { answer: self.answer, usage: self.usage }
    }
}

impl DeltaSink for ChildSink {
    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        match &delta {
            AgentDelta::StageMarker(_) => self.answer.clear(),
            AgentDelta::Content(text) => self.answer.push_str(text),
            AgentDelta::Usage(call) => self.usage.push(call.clone()),
            // A grandchild's usage is this child's too.
            AgentDelta::Child { .. } => self.usage.extend(delta.usage().cloned()),
            _ => {}
        }
        self.send(AgentDelta::Child { task_id: self.task_id.clone(), delta: Box::new(delta) }).await
    }

    /// A child's wait is not made durable: it lasts as long as this process (a restart ends
    /// the run, docs/multi-agent.md).
    async fn waiting(&mut self, _wait: &WaitPoint) -> Result<(), EmitError> {
        Ok(())
    }

    fn checkpoints(&self) -> bool {
        self.checkpoints
    }

    async fn checkpoint(&mut self, point: &BatchPoint) {
        let point = TaskPoint::Batch { task_id: self.task_id.clone(), point: point.clone() };
        // Kept before the call it names runs: the child waits for the parent to say so. The
        // parent gone, the run is over.
        let (kept, wait) = oneshot::channel();
        if self.tx.send(ChildMsg::Checkpoint(point, Some(kept))).await.is_ok() {
            let _ = wait.await;
        }
    }
}

/// Runs every child (task id and input) at once, each with its own [`ChildSink`] (`run(input, sink)` makes the
/// child's future, which hands the sink back with how the child ended and its result),
/// forwarding their deltas into `sink`; their `task.start`s must have been emitted already.
/// Returns the reports and results in input order once all ended — a failing child never stops
/// its siblings — or the parent sink's error (the children are dropped with it). With
/// `checkpoints` (plan tasks of a run kept for crash recovery) the children's
/// [`TaskPoint`]s reach `sink` too.
pub(crate) async fn run_children<S, I, F, Fut, T>(
    sink: &mut S,
    children: Vec<(String, I)>,
    checkpoints: bool,
    mut run: F,
) -> Result<Vec<(ChildReport, T)>, EmitError>
where
    S: DeltaSink,
    F: FnMut(I, ChildSink) -> Fut,
    Fut: Future<Output = (ChildSink, ChildEnd, T)>,
{
    let (tx, mut rx) = mpsc::channel(CHILD_DELTA_BUFFER);
    let children = children.into_iter().map(|(task_id, input)| {
        let child = ChildSink {
            task_id,
            tx: tx.clone(),
            answer: String::new(),
            usage: Vec::new(),
            checkpoints,
            ended_as: None,
        };
        let fut = run(input, child);
        async move {
            let (child, end, result) = fut.await;
            (child.finish(end).await, result)
        }
    });
    let all = join_all(children);
    drop(tx);
    tokio::pin!(all);
    let mut reports = None;
    loop {
        tokio::select! {
            // Deltas first: a child's end reaches the stream before the parent moves on.
            biased;
            Some(msg) = rx.recv() => match msg {
                ChildMsg::Delta(delta) => sink.emit(delta).await?,
                ChildMsg::Checkpoint(point, kept) => {
                    sink.task_checkpoint(point).await;
                    if let Some(kept) = kept {
                        let _ = kept.send(());
                    }
                }
            },
            done = &mut all, if reports.is_none() => reports = Some(done),
            else => break,
        }
    }
    Ok(reports.unwrap_or_default())
}

/// The calls of a child task's interrupted batch, shown again (crash recovery): the task starts
/// over in the stream (`run.resume` superseded what it showed before), and its batch's results
/// follow.
pub(super) async fn show_again<S: DeltaSink>(
    ctx: &RunContext,
    calls: &[StreamedCall],
    sink: &mut S,
) -> Result<(), RunFailure> {
    for call in calls {
        let delta = call.arguments.clone();
        match (call.streamed_as, decorate(ctx, &call.name)) {
            (Some(StreamedAs::Withheld), _) => {}
            (Some(StreamedAs::Action), Decoration::Action(meta)) => {
                sink.emit(AgentDelta::ActionArgs { action_id: call.id.clone(), meta, delta }).await?;
            }
            (_, decoration) => {
                let meta = match decoration {
                    Decoration::Tool(meta) => meta,
                    Decoration::Action(_) => plain_tool_meta(ctx, &call.name),
                };
                sink.emit(AgentDelta::ToolArgs { tool_id: call.id.clone(), meta, delta }).await?;
                sink.emit(AgentDelta::ToolEnd { tool_id: call.id.clone() }).await?;
            }
        }
    }
    Ok(())
}
