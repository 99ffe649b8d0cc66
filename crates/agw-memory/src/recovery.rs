//! Runs in flight, for crash recovery (`docs/run-lifecycle.md`): their run marks, and what a
//! run's history says of it when a restarted server finds its mark.

use agw_protocol::chat::ChatMessage;
use agw_protocol::history::{
    self, BatchCheckpoint, HistoryLine, ROLE_ASSISTANT, RecoveredTask, RoundCheckpoint, RunMark, Stage,
};

use crate::error::MemoryError;
use crate::ids::is_canonical;
use crate::store::{ChatContext, ChatStore};
use crate::window;

/// What a marked run's history says of it ([`ChatStore::found_run`]).
#[derive(Debug, Clone, PartialEq)]
pub enum FoundRun {
    /// Its last line is `awaiting`: it waits for a person, and durable waiting restores it.
    Waiting,
    /// Its history shows its end: it stopped between writing its last lines and removing its
    /// mark.
    Ended,
    /// It was in flight: resume it.
    InFlight(Box<InFlightRun>),
}

/// A run that was in flight when the process running it stopped, as its history and mark left
/// it.
#[derive(Debug, Clone, PartialEq)]
pub struct InFlightRun {
    /// Its mark.
    pub mark: RunMark,
    /// Its step lines on record (the run's own, sub-agents' included).
    pub steps_written: i64,
    /// Its own step lines, in order, as the model is sent them.
    pub steps: Vec<history::RecoveredStep>,
    /// The current batch's step as far as it was recorded (in `conversation` too).
    pub pending: Vec<ChatMessage>,
    /// The mark's tool batch when it is still current (its step was not written whole):
    /// the run goes on inside it.
    pub batch: Option<BatchCheckpoint>,
    /// The run's messages so far: its user message, its written steps, and the current batch's
    /// step as far as it was recorded (the batch's calls are not in it).
    pub conversation: Vec<ChatMessage>,
    /// The chat without this run: the model's window, the plan, remembered approvals.
    pub context: ChatContext,
    /// The highest reasoning and content block numbers its history names.
    pub blocks: agw_protocol::BlockCounts,
    /// The plan its last step line with a plan recorded.
    pub plan: Option<history::PlanSnapshot>,
    /// An agent handed the conversation over in it: another agent was running it.
    pub handed_off: bool,
    /// The round of parallel plan tasks it was in, when its tasks' lines are not written yet.
    pub round: Option<RoundCheckpoint>,
    /// That round's tasks, as a mode resumes them.
    pub tasks: Vec<RecoveredTask>,
}

impl ChatStore {
    /// Writes the mark of a run in flight (files: `<dir>/_waiting/<runId>.a.run` or `.b.run` by
    /// its revision — call [`RunMark::next_revision`] before each write; PostgreSQL: a row of
    /// `running`). Rewritten at every checkpoint of the run; removed with
    /// [`Self::clear_running`] when it ends.
    pub fn mark_running(&self, mark: &RunMark) -> Result<(), MemoryError> {
        if !is_canonical(&mark.run_id) || !is_canonical(&mark.chat_id) {
            return Ok(());
        }
        let json = serde_json::to_string(mark)
            .map_err(|source| MemoryError::Encode { path: format!("run mark {}", mark.run_id).into(), source })?;
        self.backend.put_run_mark(&mark.run_id, &mark.chat_id, &json, mark.revision)
    }

    /// Removes the mark of a run that ended.
    pub fn clear_running(&self, run_id: &str) -> Result<(), MemoryError> {
        if !is_canonical(run_id) {
            return Ok(());
        }
        self.backend.clear_run_mark(run_id)
    }

    /// Every run mark, sorted by start; a mark that does not read as one is logged and skipped.
    pub fn running_runs(&self) -> Result<Vec<RunMark>, MemoryError> {
        let mut marks: Vec<RunMark> = self
            .backend
            .run_marks()?
            .into_iter()
            .filter_map(|json| match serde_json::from_str::<RunMark>(&json) {
                Ok(mark) if is_canonical(&mark.run_id) && is_canonical(&mark.chat_id) => Some(mark),
                Ok(mark) => {
                    tracing::warn!(runId = %mark.run_id, "skipping a run mark with a malformed id");
                    None
                }
                Err(e) => {
                    tracing::warn!(error = %e, "skipping a run mark that does not parse");
                    None
                }
            })
            .collect();
        // Of a run's two copies (files), the newer; a copy a crash cut short did not parse.
        marks.sort_by(|a, b| (&a.run_id, b.revision).cmp(&(&b.run_id, a.revision)));
        marks.dedup_by(|later, first| later.run_id == first.run_id);
        marks.sort_by(|a, b| (a.started_at, &a.run_id).cmp(&(b.started_at, &b.run_id)));
        Ok(marks)
    }

    /// What the history of `mark`'s run says of it: waiting, ended, or in flight with what
    /// resuming it needs.
    pub fn found_run(&self, mark: RunMark) -> Result<FoundRun, MemoryError> {
        let lines = self.read_lines(&mark.chat_id)?;
        let run_id = mark.run_id.as_str();
        let own: Vec<&HistoryLine> = lines.iter().filter(|l| l.run_id() == run_id).collect();
        if matches!(own.last(), Some(HistoryLine::Awaiting(_))) {
            return Ok(FoundRun::Waiting);
        }
        let mut steps: Vec<&history::StepLine> = own.iter().filter_map(|l| l.as_step()).collect();
        steps.sort_by_key(|s| s.seq);
        if steps.iter().any(|s| s.run_usage.is_some() || s.run_cost.is_some()) || ended_with_answer(&steps) {
            return Ok(FoundRun::Ended);
        }
        let steps_written = steps.last().map_or(0, |s| s.seq);
        // The batch is current until a step line of the run's own follows it (a sub-agent's
        // line, written when the child ends, does not end the batch that started it). A batch
        // where the mode cannot go on (a plan stage's) is begun again with its stage.
        let batch = mark.batch.clone().filter(|b| {
            let written_after = steps.iter().any(|s| s.sub_agent.is_none() && s.seq > b.steps_written);
            !written_after && b.resume_at != history::ResumeAt::Nowhere
        });
        let handed_off = steps.iter().any(|s| s.handoff.is_some());
        // A round of parallel plan tasks is current until its tasks' lines are written; the
        // sub-agents of an `agent_invoke` call while the batch has it running (their lines,
        // written when the last one ended, then stand for them).
        let round = mark.round.clone().filter(|r| match &r.call_id {
            None => !steps.iter().any(|s| s.sub_agent.is_none() && s.seq > r.steps_written),
            Some(call) => batch.as_ref().is_some_and(|b| b.running.as_ref() == Some(call)),
        });
        let written = |task: &str| steps.iter().find(|s| s.sub_agent.is_some() && s.task_id.as_deref() == Some(task));
        let tasks = round
            .iter()
            .flat_map(|r| r.tasks.iter())
            .map(|t| match written(&t.task_id) {
                Some(line) => {
                    recovered_task(&history::TaskCheckpoint { ended: Some(Box::new((*line).clone())), ..t.clone() })
                }
                None => recovered_task(t),
            })
            .collect();
        // What the recorder goes on with: nothing of sub-agents whose lines are written.
        let round = round.filter(|r| r.call_id.is_none() || !r.tasks.iter().any(|t| written(&t.task_id).is_some()));
        // The run's first own step line starts with its user message; before it, the mark has it.
        let user = steps
            .iter()
            .all(|s| s.sub_agent.is_some())
            .then(|| history::StoredMessage::user(mark.query.message.clone().unwrap_or_default(), 0));
        let own_steps = steps.iter().filter(|s| s.sub_agent.is_none());
        let pending = batch.iter().flat_map(|b| b.step.messages.iter());
        let stored = own_steps.clone().flat_map(|s| s.messages.iter()).chain(user.iter()).chain(pending);
        let conversation = window::conversation(stored);
        let recovered = window::recovered_steps(own_steps);
        let pending_messages = window::conversation(batch.iter().flat_map(|b| b.step.messages.iter()));
        let plan = steps.iter().rev().find_map(|s| s.plan.clone()).filter(|p| !p.is_empty());
        let messages =
            steps.iter().flat_map(|s| s.messages.iter()).chain(batch.iter().flat_map(|b| b.step.messages.iter()));
        let blocks = crate::blocks::block_counts(run_id, messages);
        let others: Vec<HistoryLine> = lines
            .into_iter()
            .filter(|l| l.as_approval().is_some() || l.as_checkpoint().is_some() || l.run_id() != run_id)
            .collect();
        Ok(FoundRun::InFlight(Box::new(InFlightRun {
            mark,
            steps_written,
            steps: recovered,
            pending: pending_messages,
            batch,
            conversation,
            context: self.chat_context_of(others)?,
            blocks,
            plan,
            handed_off,
            round,
            tasks,
        })))
    }
}

/// A task of a round as its mode resumes it: ended (its line's messages and, for a sub-agent,
/// its frame), or from its last checkpoint (the batch it was in).
fn recovered_task(task: &history::TaskCheckpoint) -> RecoveredTask {
    let (messages, batch, sub_agent) = match &task.ended {
        Some(line) => {
            // A sub-agent's line starts with its task, which is not part of what it did.
            let skip = usize::from(line.sub_agent.is_some());
            (window::conversation(line.messages.iter().skip(skip)), None, line.sub_agent.clone())
        }
        None => (window::conversation(task.step.messages.iter()), task.batch.clone(), None),
    };
    // A sub-agent's stages, cut from its messages where each began.
    let segments = if task.ended.is_some() { &[][..] } else { &task.step.segments[..] };
    let stored = &task.step.messages;
    let stages = segments
        .iter()
        .enumerate()
        .map(|(i, segment)| {
            let end = segments.get(i + 1).map_or(stored.len(), |next| next.at).min(stored.len());
            let start = segment.at.min(end);
            history::RecoveredStep {
                stage: segment.stage.clone(),
                messages: window::conversation(stored[start..end].iter()),
                plan: segment.plan.clone().filter(|p| !p.is_empty()),
                task_id: None,
                handoff: None,
            }
        })
        .collect();
    RecoveredTask {
        task_id: task.task_id.clone(),
        task: task.task.clone(),
        messages,
        batch,
        ended: task.ended.is_some(),
        sub_agent,
        stages,
    }
}

/// A ONESHOT run writes its one step line when it ends; a REACT step line whose last message is
/// an answer without calls was the run's last (a step is written when the next one begins, and
/// an answer ends the loop): either means the run had ended.
fn ended_with_answer(steps: &[&history::StepLine]) -> bool {
    let Some(last) = steps.iter().rev().find(|s| s.sub_agent.is_none()) else { return false };
    if last.stage == Stage::Oneshot.as_str() {
        return true;
    }
    last.stage == Stage::React.as_str()
        && last.messages.last().is_some_and(|m| {
            m.role == ROLE_ASSISTANT && m.tool_calls.as_ref().is_none_or(Vec::is_empty) && m.content.is_some()
        })
}

impl ChatStore {
    /// A recorder that continues `run` in this process: its written steps stay, the current
    /// batch's step (if any) goes on.
    pub fn recovered_recorder(&self, run: &InFlightRun) -> crate::Recorder {
        let init = crate::RecorderInit {
            chat_id: run.mark.chat_id.clone(),
            run_id: run.mark.run_id.clone(),
            query: run.mark.query.clone(),
            system: run.mark.system.clone(),
            action_tools: self.action_tools.clone(),
        };
        let step = run.batch.as_ref().map(|b| b.step.clone()).unwrap_or_default();
        let mut recorder = crate::Recorder::resumed(init, Box::new(agw_protocol::SystemClock), run.steps_written, step);
        if let Some(round) = &run.round {
            recorder.resume_round(round);
        }
        recorder
    }
}

#[cfg(test)]
mod tests {
    use agw_protocol::history::RunMark;

    use crate::{ChatStore, MemoryConfig};

    const CHAT: &str = "0b9c3f1e-6d3a-4c1b-9a55-1f2e3d4c5b6a";
    const RUN: &str = "1c9c3f1e-6d3a-4c1b-9a55-1f2e3d4c5b6a";

    #[test]
    fn the_newest_whole_copy_of_a_mark_wins_and_a_torn_one_is_passed_over() {
        let dir = std::env::temp_dir().join(format!("agw-run-marks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = ChatStore::new(MemoryConfig { dir: dir.clone(), ..MemoryConfig::default() });
        let mut mark = RunMark::new(CHAT, RUN, 1);
        for attempts in 0..3 {
            mark.attempts = attempts;
            mark.next_revision(1_000);
            store.mark_running(&mark).unwrap();
        }
        let found = store.running_runs().unwrap();
        assert_eq!((found.len(), found[0].attempts), (1, 2), "the newest of two copies");
        // A crash in the middle of the next write: that copy does not parse.
        let newest = if mark.revision.is_multiple_of(2) { "a" } else { "b" };
        let path = dir.join("_waiting").join(format!("{RUN}.{newest}.run"));
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, &text[..text.len() / 2]).unwrap();
        let found = store.running_runs().unwrap();
        assert_eq!((found.len(), found[0].attempts), (1, 1), "the other copy, one write older");
        store.clear_running(RUN).unwrap();
        assert!(store.running_runs().unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn revisions_grow_and_alternate_in_parity() {
        let mut mark = RunMark::new(CHAT, RUN, 1);
        let mut last = mark.revision;
        for now in [5, 5, 6, 100, 3] {
            mark.next_revision(now);
            assert!(mark.revision > last && mark.revision % 2 != last % 2, "{last} → {}", mark.revision);
            last = mark.revision;
        }
    }
}
