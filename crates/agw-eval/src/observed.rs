//! What a run did, read from its events (live or replayed): the tool and action calls of the
//! run's own lane with their arguments, its answer, its structured output, usage, cost and how
//! it ended. A child task's events (a sub-agent's, a parallel plan task's) are its own.

use agw_protocol::event::{Event, EventPayload};
use serde_json::Value;

/// One call the run made.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedCall {
    /// The tool or action name.
    pub name: String,
    /// Its arguments as JSON (`{}` when they were empty; a string when they were not JSON).
    pub args: Value,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// Its calls, in the order they started.
    pub calls: Vec<ObservedCall>,
    /// Its answer: the text of its own lane after its last tool or action result (withdrawn
    /// blocks left out).
    pub answer: String,
    /// `run.complete`'s `output`.
    pub output: Option<Value>,
    /// Model calls that reported usage.
    pub model_calls: u64,
    /// Input and output tokens.
    pub tokens: u64,
    /// What it cost, when priced.
    pub cost: Option<f64>,
    /// From its first event to its last, in milliseconds.
    pub wall_ms: u64,
    /// `None`: completed; else the error code (`cancelled` for a cancel, `unfinished` when no
    /// terminal event came).
    pub error: Option<String>,
}

impl Observed {
    /// Reads `events` of one run, in order.
    pub fn from_events(events: &[Event]) -> Self {
        let mut out = Observed { error: Some("unfinished".into()), ..Observed::default() };
        // Argument text of each call, by its id.
        let mut args: Vec<(String, String)> = Vec::new();
        // The answer's blocks since the last result: (contentId, text).
        let mut blocks: Vec<(String, String)> = Vec::new();
        let first = events.first().map_or(0, |e| e.timestamp);
        for event in events {
            out.wall_ms = u64::try_from(event.timestamp.saturating_sub(first)).unwrap_or(0);
            if event.task_id.is_some() {
                continue;
            }
            match &event.payload {
                EventPayload::ToolStart(e) => {
                    out.calls.push(ObservedCall { name: e.tool_name.clone().unwrap_or_default(), args: Value::Null });
                    args.push((e.tool_id.clone(), String::new()));
                }
                EventPayload::ActionStart(e) => {
                    out.calls.push(ObservedCall { name: e.action_name.clone().unwrap_or_default(), args: Value::Null });
                    args.push((e.action_id.clone(), String::new()));
                }
                // A replay gives each call whole.
                EventPayload::ToolSnapshot(e) => {
                    out.calls.push(ObservedCall { name: e.tool_name.clone(), args: Value::Null });
                    args.push((e.tool_id.clone(), e.arguments.clone()));
                }
                EventPayload::ActionSnapshot(e) => {
                    out.calls.push(ObservedCall { name: e.action_name.clone(), args: Value::Null });
                    args.push((e.action_id.clone(), e.arguments.clone()));
                }
                EventPayload::ToolArgs(e) => append(&mut args, &e.tool_id, &e.delta),
                EventPayload::ActionArgs(e) => append(&mut args, &e.action_id, &e.delta),
                EventPayload::ToolResult(_) | EventPayload::ActionResult(_) => blocks.clear(),
                EventPayload::ContentStart(e) => blocks.push((e.content_id.clone(), String::new())),
                EventPayload::ContentDelta(e) => match blocks.iter_mut().find(|(id, _)| *id == e.content_id) {
                    Some((_, text)) => text.push_str(&e.delta),
                    None => blocks.push((e.content_id.clone(), e.delta.clone())),
                },
                EventPayload::ContentSnapshot(e) => blocks.push((e.content_id.clone(), e.text.clone())),
                EventPayload::ContentRevoke(e) => blocks.retain(|(id, _)| *id != e.content_id),
                EventPayload::RunComplete(e) => {
                    out.output.clone_from(&e.output);
                    out.error = None;
                    totals(&mut out, &e.totals);
                }
                EventPayload::RunError(e) => {
                    out.error = Some(e.error.code.as_str().to_owned());
                    totals(&mut out, &e.totals);
                }
                EventPayload::RunCancel(e) => {
                    out.error = Some("cancelled".into());
                    totals(&mut out, &e.totals);
                }
                _ => {}
            }
        }
        for (call, (_, text)) in out.calls.iter_mut().zip(&args) {
            call.args = match text.trim() {
                "" => Value::Object(Default::default()),
                text => serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_owned())),
            };
        }
        out.answer = blocks.into_iter().map(|(_, text)| text).collect::<Vec<_>>().join("\n\n");
        out
    }
}

fn append(args: &mut [(String, String)], id: &str, delta: &str) {
    if let Some((_, text)) = args.iter_mut().find(|(call, _)| call == id) {
        text.push_str(delta);
    }
}

fn totals(out: &mut Observed, totals: &agw_protocol::event::RunTotals) {
    if let Some(usage) = &totals.usage {
        out.model_calls = usage.calls;
        out.tokens = usage.total_tokens;
    }
    out.cost = totals.cost.as_ref().map(|c| c.amount);
}
