//! What the next run sends back to the model (`docs/contract/memory-jsonl.md` §7–§8): the last k runs,
//! converted to provider chat messages, with every tool call answered exactly once.

use std::collections::{HashMap, HashSet};

use agw_protocol::chat::{ChatMessage, HistoryRun, ToolCallMessage, summary_turn};
use agw_protocol::history::{self, CheckpointLine, HistoryLine, ROLE_SYSTEM, StepLine, StoredMessage};

/// The tool message added for a call whose result was never recorded (a crash mid-batch, a
/// PLAN_EXECUTE call that was streamed but not executed in an older file): providers reject a
/// history where an assistant tool call is not followed by its result.
pub const UNRECORDED_RESULT: &str = r#"{"executed":false,"reason":"no result recorded"}"#;

/// History messages for the model: for each of the last `k` runs that have step lines (runs in
/// order of first appearance), steps by `_seq`, messages in stored order, converted per §8:
/// user/assistant/tool/system messages kept (a steer a run took is a stored user message, so it
/// comes back as a user message where the run took it), reasoning dropped, tool calls paired with their
/// results (missing results synthesised as [`UNRECORDED_RESULT`], orphan results dropped). What
/// a guard stopped never comes back (issue 36): text it withdrew (`_revoked`; the message's
/// calls, if any, stay with their results) and a user message an input guard blocked.
pub fn history_messages(lines: &[HistoryLine], k: usize) -> Vec<ChatMessage> {
    window(lines, k).messages
}

/// [`history_messages`] with where each run begins in it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    /// The messages, as [`history_messages`] returns them.
    pub messages: Vec<ChatMessage>,
    /// Where each run begins in `messages`, in order. A checkpoint's summary counts as one run
    /// named after the last run it covers.
    pub runs: Vec<HistoryRun>,
}

/// The model window of the chat: when the chat has a checkpoint (context compaction,
/// `docs/context.md`), its summary stands for the runs it covers, followed by the last `k` of
/// the runs after them; otherwise the last `k` runs. Messages as in [`history_messages`].
pub fn window(lines: &[HistoryLine], k: usize) -> Window {
    let (checkpoint, lines) = match after_checkpoint(lines) {
        Some((checkpoint, rest)) => (Some(checkpoint), rest),
        None => (None, lines.iter().collect()),
    };
    let mut out = Window::default();
    if let Some(checkpoint) = checkpoint {
        out.runs.push(HistoryRun { run_id: checkpoint.through_run_id.clone(), start: 0 });
        out.messages.extend(summary_turn(&checkpoint.summary));
    }
    for (run_id, steps) in last_runs_with_steps(&lines, k.max(1)) {
        let mut messages = conversation(steps.iter().flat_map(|step| not_refused(step)));
        if messages.is_empty() {
            continue;
        }
        let query = lines.iter().filter_map(|l| l.as_query()).find(|q| q.run_id == run_id);
        if let Some(query) = query {
            restore_attachments(&mut messages, &query.query);
        }
        out.runs.push(HistoryRun { run_id: run_id.to_owned(), start: out.messages.len() });
        out.messages.extend(messages);
    }
    out
}

/// The images and files of a run's query go back with its message, the run's first user
/// message (docs/models.md "Images and files"): they were checked when the run started; should
/// one no longer pass, the run's message goes without them.
pub fn restore_attachments(messages: &mut [ChatMessage], query: &agw_protocol::QueryRequest) {
    let Some(references) = query.references.as_deref().filter(|r| !r.is_empty()) else { return };
    let attachments = match agw_protocol::attachment::from_references(references) {
        Ok(attachments) => attachments,
        Err(error) => {
            tracing::warn!(run_id = ?query.request_id, %error, "a stored query's attachments no longer pass; left out");
            return;
        }
    };
    if let Some(ChatMessage::User { attachments: slot, .. }) =
        messages.iter_mut().find(|m| matches!(m, ChatMessage::User { .. }))
    {
        *slot = attachments;
    }
}

/// The latest checkpoint and the lines of the runs after the one it goes through (in the
/// order runs first appear); `None` when there is no checkpoint or its run is not in the file.
fn after_checkpoint(lines: &[HistoryLine]) -> Option<(&CheckpointLine, Vec<&HistoryLine>)> {
    let checkpoint = history::latest_checkpoint(lines)?;
    let mut order: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    for line in lines.iter().filter(|l| l.as_checkpoint().is_none()) {
        if seen.insert(line.run_id()) {
            order.push(line.run_id());
        }
    }
    let through = order.iter().position(|id| *id == checkpoint.through_run_id)?;
    let covered: HashSet<&str> = order[..=through].iter().copied().collect();
    Some((checkpoint, lines.iter().filter(|l| !covered.contains(l.run_id())).collect()))
}

/// Stored messages (in order) → chat messages, converted and paired as in [`history_messages`].
pub fn conversation<'a>(messages: impl IntoIterator<Item = &'a StoredMessage>) -> Vec<ChatMessage> {
    let mut pairing = Pairing::default();
    for converted in messages.into_iter().filter_map(convert) {
        pairing.push(converted);
    }
    pairing.finish()
}

/// A step's messages but a user message an input guard blocked: the last user message before
/// the block's place (the run ended there, before any model call).
fn not_refused(step: &StepLine) -> impl Iterator<Item = &StoredMessage> + '_ {
    let refused: Vec<usize> = step
        .guards
        .iter()
        .filter(|guard| guard.event.blocks_input())
        .filter_map(|guard| step.messages[..guard.at.min(step.messages.len())].iter().rposition(StoredMessage::is_user))
        .collect();
    step.messages.iter().enumerate().filter(move |(i, _)| !refused.contains(i)).map(|(_, m)| m)
}

/// Step lines of the last `k` runs that have any, each run's steps sorted by `_seq` (stable).
fn last_runs_with_steps<'a>(lines: &[&'a HistoryLine], k: usize) -> Vec<(&'a str, Vec<&'a StepLine>)> {
    let mut order: Vec<&str> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut runs: HashMap<&str, Vec<&StepLine>> = HashMap::new();
    for &line in lines {
        let run_id = line.run_id();
        if seen.insert(run_id) {
            order.push(run_id);
        }
        // A sub-agent's step is not part of what the run's model saw: only its aggregate is.
        if let HistoryLine::Step(step) = line
            && step.sub_agent.is_none()
        {
            runs.entry(run_id).or_default().push(step);
        }
    }
    let with_steps: Vec<&str> = order.into_iter().filter(|id| runs.contains_key(id)).collect();
    let skip = with_steps.len().saturating_sub(k);
    with_steps[skip..]
        .iter()
        .filter_map(|id| runs.remove(id).map(|steps| (*id, steps)))
        .map(|(id, mut steps)| {
            steps.sort_by_key(|s| s.seq);
            (id, steps)
        })
        .collect()
}

/// One stored message → at most one chat message (§8.1). Text a guard withdrew is left out; the
/// message's calls stay, so that their results keep a call to answer.
fn convert(message: &StoredMessage) -> Option<ChatMessage> {
    let text = if message.is_assistant() && message.is_revoked() { "" } else { message.text() };
    if message.is_user() {
        return (!text.is_empty()).then(|| ChatMessage::user(text.to_owned()));
    }
    if message.is_tool() {
        let tool_call_id = message.tool_call_id.clone().filter(|id| !id.trim().is_empty())?;
        let name = message.name.clone().unwrap_or_default();
        return Some(ChatMessage::Tool { tool_call_id, name, content: text.to_owned() });
    }
    if message.role == ROLE_SYSTEM {
        return (!text.is_empty()).then(|| ChatMessage::System { content: text.to_owned() });
    }
    if !message.is_assistant() {
        return None;
    }
    let tool_calls: Vec<ToolCallMessage> = message
        .calls()
        .iter()
        .filter(|c| !c.id.trim().is_empty() && !c.function.name.trim().is_empty())
        .map(|c| ToolCallMessage {
            id: c.id.clone(),
            call_type: if c.call_type.trim().is_empty() { "function".to_owned() } else { c.call_type.clone() },
            name: c.function.name.clone(),
            arguments: if c.function.arguments.trim().is_empty() {
                "{}".to_owned()
            } else {
                c.function.arguments.clone()
            },
        })
        .collect();
    // Reasoning is never sent back; a (legacy) message carrying text next to reasoning keeps
    // its text.
    if tool_calls.is_empty() && text.is_empty() {
        return None;
    }
    Some(ChatMessage::Assistant { content: text.to_owned(), tool_calls })
}

/// Enforces the provider rule: an assistant message with tool calls is followed by exactly one
/// tool message per call before anything else.
#[derive(Default)]
struct Pairing {
    out: Vec<ChatMessage>,
    /// Calls of the last assistant message still waiting for a result: (id, name).
    open: Vec<(String, String)>,
}

impl Pairing {
    fn push(&mut self, message: ChatMessage) {
        if let ChatMessage::Tool { tool_call_id, name, content } = message {
            let Some(pos) = self.open.iter().position(|(id, _)| *id == tool_call_id) else {
                tracing::debug!(%tool_call_id, "dropping a stored tool result without a matching call");
                return;
            };
            let (_, call_name) = self.open.remove(pos);
            let name = if name.is_empty() { call_name } else { name };
            self.out.push(ChatMessage::Tool { tool_call_id, name, content });
            return;
        }
        self.close_open_calls();
        if let ChatMessage::Assistant { tool_calls, .. } = &message {
            self.open = tool_calls.iter().map(|c| (c.id.clone(), c.name.clone())).collect();
        }
        self.out.push(message);
    }

    fn close_open_calls(&mut self) {
        for (tool_call_id, name) in self.open.drain(..) {
            self.out.push(ChatMessage::Tool { tool_call_id, name, content: UNRECORDED_RESULT.to_owned() });
        }
    }

    fn finish(mut self) -> Vec<ChatMessage> {
        self.close_open_calls();
        self.out
    }
}

/// A run's own step lines as a mode rebuilds its conversation from them.
pub(crate) fn recovered_steps<'a>(
    steps: impl Iterator<Item = &'a &'a history::StepLine>,
) -> Vec<history::RecoveredStep> {
    steps
        .map(|s| history::RecoveredStep {
            stage: s.stage.clone(),
            messages: conversation(s.messages.iter()),
            plan: s.plan.clone().filter(|p| !p.is_empty()),
            task_id: s.task_id.clone(),
            handoff: s.handoff.as_ref().map(|h| (h.event.from_agent_key.clone(), h.event.to_agent_key.clone())),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agw_protocol::history::HistoryLine;

    fn line(text: &str) -> HistoryLine {
        HistoryLine::parse(text).expect("valid").expect("known")
    }

    fn call(id: &str) -> String {
        format!(
            r#"{{"role":"assistant","tool_calls":[{{"id":"{id}","type":"function","function":{{"name":"t","arguments":""}}}}]}}"#
        )
    }

    fn result(id: &str) -> String {
        format!(r#"{{"role":"tool","content":[{{"type":"text","text":"r-{id}"}}],"name":"t","tool_call_id":"{id}"}}"#)
    }

    fn step(messages: &[String]) -> HistoryLine {
        line(&format!(r#"{{"_type":"step","runId":"r","_seq":1,"messages":[{}]}}"#, messages.join(",")))
    }

    fn tool_ids(messages: &[ChatMessage]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m {
                ChatMessage::Assistant { content, tool_calls } if tool_calls.is_empty() => {
                    format!("assistant:{content}")
                }
                ChatMessage::Assistant { tool_calls, .. } => format!("call:{}", tool_calls[0].id),
                ChatMessage::Tool { tool_call_id, content, .. } => format!("result:{tool_call_id}:{content}"),
                ChatMessage::User { content, .. } => format!("user:{content}"),
                ChatMessage::System { content } => format!("system:{content}"),
            })
            .collect()
    }

    #[test]
    fn unanswered_calls_get_a_synthetic_result_and_orphans_are_dropped() {
        let lines = [step(&[
            call("a"),
            call("b"),
            result("b"),
            result("x"),
            r#"{"role":"user","content":"next"}"#.to_owned(),
            call("c"),
        ])];
        let messages = history_messages(&lines, 5);
        assert_eq!(
            tool_ids(&messages),
            [
                "call:a".to_owned(),
                format!("result:a:{UNRECORDED_RESULT}"),
                "call:b".to_owned(),
                "result:b:r-b".to_owned(),
                "user:next".to_owned(),
                "call:c".to_owned(),
                format!("result:c:{UNRECORDED_RESULT}"),
            ]
        );
        let ChatMessage::Assistant { tool_calls, content } = &messages[0] else { panic!("assistant") };
        assert_eq!((tool_calls[0].arguments.as_str(), content.as_str()), ("{}", ""));
    }

    #[test]
    fn steered_user_messages_come_back_as_user_messages_in_order() {
        let steered =
            r#"{"role":"user","content":[{"type":"text","text":"steered"}],"ts":5,"_steerId":"s1","_requestId":"r"}"#;
        let lines = [step(&[
            r#"{"role":"user","content":[{"type":"text","text":"q"}],"ts":9}"#.to_owned(),
            call("a"),
            result("a"),
            steered.to_owned(),
            r#"{"role":"assistant","content":"answer"}"#.to_owned(),
        ])];
        let messages = history_messages(&lines, 1);
        assert_eq!(tool_ids(&messages[..4]), ["user:q", "call:a", "result:a:r-a", "user:steered"]);
        assert_eq!(messages[4], ChatMessage::Assistant { content: "answer".into(), tool_calls: vec![] });
        assert_eq!(messages.len(), 5);
    }

    #[test]
    fn duplicate_results_are_dropped() {
        let lines = [step(&[call("a"), result("a"), result("a")])];
        assert_eq!(tool_ids(&history_messages(&lines, 1)), ["call:a", "result:a:r-a"]);
    }

    #[test]
    fn reasoning_dropped_system_kept_blank_user_dropped() {
        let lines = [step(&[
            r#"{"role":"system","content":"sys"}"#.to_owned(),
            r#"{"role":"user","content":""}"#.to_owned(),
            r#"{"role":"assistant","reasoning_content":"think"}"#.to_owned(),
            r#"{"role":"assistant","reasoning_content":"think","content":"both"}"#.to_owned(),
            r#"{"role":"narrator","content":"?"}"#.to_owned(),
        ])];
        let messages = history_messages(&lines, 1);
        assert_eq!(
            messages,
            [
                ChatMessage::System { content: "sys".into() },
                ChatMessage::Assistant { content: "both".into(), tool_calls: vec![] }
            ]
        );
    }

    /// Issue 36: revoked text never reaches the model again; a (legacy) message holding text and
    /// a call keeps the call, so its result still answers it; a user message an input guard
    /// blocked is left out with its run.
    #[test]
    fn what_a_guard_stopped_is_left_out() {
        let revoked = r#"{"role":"assistant","content":"leak","_contentId":"r_c_1","_revoked":{"guard":"rules:pii","reason":"pii"}}"#;
        let with_call = r#"{"role":"assistant","content":"leak too","tool_calls":[{"id":"a","type":"function","function":{"name":"t","arguments":""}}],"_revoked":{"guard":"g","reason":"r"}}"#;
        let lines = [step(&[
            r#"{"role":"user","content":"q"}"#.to_owned(),
            with_call.to_owned(),
            result("a"),
            revoked.to_owned(),
        ])];
        let messages = history_messages(&lines, 1);
        assert_eq!(tool_ids(&messages), ["user:q", "call:a", "result:a:r-a"]);
        let ChatMessage::Assistant { content, .. } = &messages[1] else { panic!("assistant") };
        assert_eq!(content, "", "the call stays, its text does not");

        // The blocked question of one run is not sent; the next run's is.
        let blocked = line(
            r#"{"_type":"step","runId":"r1","_seq":1,"messages":[{"role":"user","content":"bad"}],
                "_guards":[{"at":1,"ts":1,"type":"guard.block","stage":"input","guard":"rules:x","reason":"no"}]}"#,
        );
        let next = line(
            r#"{"_type":"step","runId":"r2","_seq":1,"messages":[{"role":"user","content":"good"},{"role":"assistant","content":"ok"}],
                "_guards":[{"at":2,"ts":1,"type":"guard.warning","stage":"output","guard":"g","message":"m","contentId":"r2_c_1"}]}"#,
        );
        let window = window(&[blocked, next], 5);
        assert_eq!(tool_ids(&window.messages), ["user:good", "assistant:ok"]);
        assert_eq!(window.runs.len(), 1, "a run with nothing left is no run of the window");
    }
}
