//! The agent that goes on with a run continued in this process (crash recovery, durable
//! waiting): the run's first agent, or the one it was last handed over to.

use agw_modes::runtime::RecoveredHandoff;
use agw_protocol::chat::ChatMessage;
use agw_protocol::history::RecoveredStep;

use crate::service::Core;
use crate::sink::RunSink;

/// The part of a run that goes on in this process (crash recovery, durable waiting): the whole
/// run, or — when it was handed over to another agent — that agent's part, with what the
/// handoff gave it (`conversation`: the run's messages so far, `pending` at their end). The
/// agent it went to continues it: its MCP servers start, and the chat names it when the run
/// ends.
pub(crate) async fn continued_part(
    core: &Core,
    sink: &mut RunSink,
    conversation: Vec<ChatMessage>,
    steps: Vec<RecoveredStep>,
    pending: &[ChatMessage],
) -> (Vec<ChatMessage>, Vec<RecoveredStep>, Option<RecoveredHandoff>) {
    let Some(last) = steps.iter().rposition(|s| s.handoff.is_some()) else {
        return (conversation, steps, None);
    };
    let (from, to) = steps[last].handoff.clone().unwrap_or_default();
    let count = steps.iter().filter(|s| s.handoff.is_some()).count() as u32;
    let handing = steps[..=last].iter().flat_map(|s| s.messages.iter().cloned()).collect();
    let own: Vec<RecoveredStep> = steps[last + 1..].to_vec();
    let mut so_far: Vec<_> = own.iter().flat_map(|s| s.messages.iter().cloned()).collect();
    so_far.extend(pending.iter().cloned());
    if let (Some(sources), Ok(target)) = (&core.tool_sources, core.agent(Some(&to))) {
        sources.prepare(&target, &core.catalogs.tools).await;
    }
    sink.continued_by(&to);
    (so_far, own, Some(RecoveredHandoff { from_agent_key: from, to_agent_key: to, handing, count }))
}
