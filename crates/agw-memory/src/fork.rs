//! Forking a chat ([`crate::ChatStore::fork_chat`], `POST /api/ap/chat/fork`): which of the
//! source chat's stored lines the new chat gets, and how they are rewritten. Pure: the store
//! reads the source's lines and writes what [`select`] returns.
//!
//! The lines are handled as JSON objects, not as [`agw_protocol::history::HistoryLine`]s, so a
//! copied line keeps every key it had, those this agw does not know included; only the ids are
//! rewritten. Copied: `query` and `step` lines of the runs up to the point, and `checkpoint`
//! lines whose `throughRunId` is one of the fully copied runs. Never copied: `awaiting` lines (a
//! wait belongs to the source's run), `approval` lines (an `always` belongs to the person who
//! answered it in the source chat: the fork asks again), and lines of a `_type` agw does not
//! know.
//!
//! Each copied run gets a new run id (and a checkpoint made by a run that is not copied, or by
//! `POST /api/ap/compact`, a new id of its own): a run id names one run wherever it is used —
//! attach, interrupt, submit, the cluster's run records, the waiting marks — so two chats never
//! share one.

use std::collections::HashMap;

use agw_protocol::usage::{Cost, RunUsage};
use serde_json::Value;

use crate::error::MemoryError;

/// Where a fork cuts the source chat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForkPoint {
    /// Every run of the chat as stored (its last run must have finished).
    Whole,
    /// The runs up to and including `run_id` (which must have finished); with `step_seq`, of
    /// that run only its step lines with `_seq` up to that step (a step-level fork).
    After {
        /// The run, as the source chat names it.
        run_id: String,
        /// The last step of the run to keep.
        step_seq: Option<i64>,
    },
    /// The runs before `run_id` (edit and resend: fork before the run, then query).
    Before {
        /// The run, as the source chat names it.
        run_id: String,
    },
}

impl ForkPoint {
    /// The run the fork is cut at, when it names one.
    pub fn run_id(&self) -> Option<&str> {
        match self {
            ForkPoint::Whole => None,
            ForkPoint::After { run_id, .. } | ForkPoint::Before { run_id } => Some(run_id),
        }
    }
}

/// Why a chat could not be forked.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    /// The source chat has no run with this id.
    #[error("run {run_id} is not a run of chat {chat_id}")]
    RunNotFound {
        /// The source chat.
        chat_id: String,
        /// The run asked for.
        run_id: String,
    },
    /// The run has no step line with this `_seq`.
    #[error("run {run_id} of chat {chat_id} has no step {step_seq}")]
    StepNotFound {
        /// The source chat.
        chat_id: String,
        /// The run.
        run_id: String,
        /// The step asked for.
        step_seq: i64,
    },
    /// The run the fork would end with still waits for a person (its last line is `awaiting`).
    #[error("run {run_id} of chat {chat_id} has not finished")]
    RunWaiting {
        /// The source chat.
        chat_id: String,
        /// The run.
        run_id: String,
    },
    /// The new chat's id is taken (it never is: the caller mints a fresh UUID).
    #[error("chat {chat_id} exists already")]
    ChatExists {
        /// The id.
        chat_id: String,
    },
    /// The store failed.
    #[error(transparent)]
    Memory(#[from] MemoryError),
}

/// What a fork made ([`crate::ChatStore::fork_chat`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Forked {
    /// The new chat.
    pub chat_id: String,
    /// Its name (the source's).
    pub chat_name: String,
    /// The copied runs in order: (the source's run id, the fork's).
    pub runs: Vec<(String, String)>,
    /// How many lines were copied.
    pub lines: usize,
}

/// The lines a fork writes, and what its index record needs.
#[derive(Debug, Default)]
pub(crate) struct Selection {
    /// The new chat's lines, encoded, in the source's order.
    pub(crate) lines: Vec<String>,
    /// (source run id, new run id) of each copied run, in run order.
    pub(crate) runs: Vec<(String, String)>,
    /// The usage (and cost) of each fully copied run that recorded one.
    pub(crate) totals: Vec<(RunUsage, Option<Cost>)>,
    /// The agent the last copied handoff passed the conversation to.
    pub(crate) handed_to: Option<String>,
    /// The first copied query's message and agent (for a source without an index record).
    pub(crate) first_message: Option<String>,
    pub(crate) first_agent: Option<String>,
}

fn text<'a>(line: &'a Value, key: &str) -> &'a str {
    line.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// The `_type`s that belong to a run (their `runId` orders the chat's runs).
fn is_run_line(kind: &str) -> bool {
    matches!(kind, "query" | "step" | "awaiting")
}

/// Selects and rewrites the source chat's `lines` (JSON texts in stored order) for a fork at
/// `point` into `new_chat`; `mint` makes new run ids. Lines that are not JSON objects are
/// skipped, as readers skip them.
pub(crate) fn select(
    source_chat: &str,
    texts: &[String],
    point: &ForkPoint,
    new_chat: &str,
    mint: &mut dyn FnMut() -> String,
) -> Result<Selection, ForkError> {
    let lines: Vec<Value> =
        texts.iter().filter_map(|t| serde_json::from_str::<Value>(t).ok()).filter(Value::is_object).collect();
    // Runs in the order they first appear, and each run's last line.
    let mut order: Vec<&str> = Vec::new();
    let mut last: HashMap<&str, &Value> = HashMap::new();
    for line in &lines {
        let (kind, run) = (text(line, "_type"), text(line, "runId"));
        if is_run_line(kind) && !run.is_empty() {
            if !last.contains_key(run) {
                order.push(run);
            }
            last.insert(run, line);
        }
    }
    let position = |run_id: &str| {
        order
            .iter()
            .position(|r| *r == run_id)
            .ok_or_else(|| ForkError::RunNotFound { chat_id: source_chat.to_owned(), run_id: run_id.to_owned() })
    };
    let unfinished = |run_id: &str| {
        last.get(run_id)
            .is_some_and(|l| text(l, "_type") == "awaiting")
            .then(|| ForkError::RunWaiting { chat_id: source_chat.to_owned(), run_id: run_id.to_owned() })
    };
    // How many runs are kept, and the last one's step cut.
    let (kept, cut) = match point {
        ForkPoint::Whole => {
            if let Some(error) = order.last().and_then(|r| unfinished(r)) {
                return Err(error);
            }
            (order.len(), None)
        }
        ForkPoint::After { run_id, step_seq } => {
            let at = position(run_id)?;
            if let Some(error) = unfinished(run_id) {
                return Err(error);
            }
            if let Some(seq) = *step_seq {
                let has_step = lines.iter().any(|l| {
                    text(l, "_type") == "step"
                        && text(l, "runId") == run_id
                        && l.get("_seq").and_then(Value::as_i64) == Some(seq)
                });
                if !has_step {
                    return Err(ForkError::StepNotFound {
                        chat_id: source_chat.to_owned(),
                        run_id: run_id.clone(),
                        step_seq: seq,
                    });
                }
            }
            (at + 1, step_seq.map(|seq| (order[at], seq)))
        }
        ForkPoint::Before { run_id } => (position(run_id)?, None),
    };
    let renamed: HashMap<&str, String> = order[..kept].iter().map(|r| (*r, mint())).collect();
    // A run cut at a step is not whole: a checkpoint through it summarises steps the fork has not.
    let whole = |run: &str| renamed.contains_key(run) && cut.is_none_or(|(cut_run, _)| cut_run != run);

    let mut out = Selection {
        runs: order[..kept].iter().map(|r| ((*r).to_owned(), renamed[r].clone())).collect(),
        ..Selection::default()
    };
    for mut line in lines.iter().cloned() {
        let kind = text(&line, "_type").to_owned();
        let run = text(&line, "runId").to_owned();
        let keep = match kind.as_str() {
            "query" => renamed.contains_key(run.as_str()),
            "step" => {
                renamed.contains_key(run.as_str())
                    && match cut {
                        Some((cut_run, seq)) if cut_run == run => {
                            line.get("_seq").and_then(Value::as_i64).is_some_and(|s| s <= seq)
                        }
                        _ => true,
                    }
            }
            "checkpoint" => whole(text(&line, "throughRunId")),
            _ => false,
        };
        if !keep {
            continue;
        }
        let Some(object) = line.as_object_mut() else { continue };
        object.insert("chatId".into(), Value::from(new_chat));
        let new_run = renamed.get(run.as_str()).cloned().unwrap_or_else(&mut *mint);
        object.insert("runId".into(), Value::from(new_run));
        match kind.as_str() {
            "query" => {
                if let Some(query) = object.get_mut("query").and_then(Value::as_object_mut) {
                    query.insert("chatId".into(), Value::from(new_chat));
                    if out.first_message.is_none() {
                        out.first_message = query.get("message").and_then(Value::as_str).map(str::to_owned);
                        out.first_agent = query.get("agentKey").and_then(Value::as_str).map(str::to_owned);
                    }
                }
            }
            "checkpoint" => {
                let through = renamed.get(text(&line, "throughRunId")).cloned().unwrap_or_default();
                if let Some(object) = line.as_object_mut() {
                    object.insert("throughRunId".into(), Value::from(through));
                }
            }
            _ => {
                if let Some(to) = line.pointer("/_handoff/toAgentKey").and_then(Value::as_str) {
                    out.handed_to = Some(to.to_owned());
                }
                if whole(&run)
                    && let Some(usage) = line.get("_runUsage").and_then(|u| serde_json::from_value(u.clone()).ok())
                {
                    let cost = line.get("_runCost").and_then(|c| serde_json::from_value(c.clone()).ok());
                    out.totals.push((usage, cost));
                }
            }
        }
        match serde_json::to_string(&line) {
            Ok(encoded) => out.lines.push(encoded),
            Err(source) => {
                let path = std::path::PathBuf::from(format!("{new_chat} (fork)"));
                return Err(MemoryError::Encode { path, source }.into());
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NEW: &str = "9f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f";

    /// r1 (two steps, usage), an approval, r2 (one step), a checkpoint through r1 made by r3,
    /// r3 (waiting).
    fn chat() -> Vec<String> {
        let query = |run: &str, msg: &str| {
            json!({"_type":"query","chatId":"src","runId":run,"updatedAt":1,
                "query":{"chatId":"src","message":msg,"agentKey":"a"},"future":"kept"})
        };
        let step = |run: &str, seq: i64, extra: Value| {
            let mut line = json!({"_type":"step","chatId":"src","runId":run,"_stage":"react","_seq":seq,
                "updatedAt":2,"messages":[{"role":"assistant","content":format!("{run} step {seq}")}]});
            line.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            line
        };
        [
            query("r1", "first"),
            step("r1", 1, json!({})),
            json!({"_type":"approval","chatId":"src","runId":"r1","agentKey":"a","toolName":"t","rule":"x"}),
            step("r1", 2, json!({"_runUsage":{"inputTokens":3,"outputTokens":4}})),
            query("r2", "second"),
            step("r2", 1, json!({"_handoff":{"ts":1,"runId":"r2","fromAgentKey":"a","toAgentKey":"b","toolId":"c"}})),
            json!({"_type":"checkpoint","chatId":"src","runId":"r3","throughRunId":"r1","summary":"s"}),
            query("r3", "third"),
            json!({"_type":"awaiting","chatId":"src","runId":"r3","awaitingId":"w"}),
            json!({"_type":"something-new","chatId":"src","runId":"r1"}),
        ]
        .iter()
        .map(Value::to_string)
        .chain(["not json".to_owned()])
        .collect()
    }

    fn fork(point: ForkPoint) -> Result<(Selection, Vec<Value>), ForkError> {
        let mut n = 0;
        let mut mint = || {
            n += 1;
            format!("new{n}")
        };
        let selection = select("src", &chat(), &point, NEW, &mut mint)?;
        let lines = selection.lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
        Ok((selection, lines))
    }

    fn shape(lines: &[Value]) -> Vec<String> {
        lines
            .iter()
            .map(|l| {
                let seq = l.get("_seq").map(|s| format!(" {s}")).unwrap_or_default();
                format!("{} {}{seq}", text(l, "_type"), text(l, "runId"))
            })
            .collect()
    }

    #[test]
    fn after_a_run_copies_its_runs_and_checkpoints_with_new_ids_and_nothing_of_later_runs() {
        let (selection, lines) = fork(ForkPoint::After { run_id: "r2".into(), step_seq: None }).unwrap();
        assert_eq!(
            shape(&lines),
            ["query new1", "step new1 1", "step new1 2", "query new2", "step new2 1", "checkpoint new3"]
        );
        assert_eq!(selection.runs, [("r1".into(), "new1".into()), ("r2".into(), "new2".into())]);
        assert!(lines.iter().all(|l| l["chatId"] == NEW));
        assert_eq!(lines[0]["query"]["chatId"], NEW);
        assert_eq!(lines[0]["future"], "kept", "keys this agw does not know are carried");
        assert_eq!(lines[5]["throughRunId"], "new1");
        assert_eq!(selection.totals.len(), 1);
        assert_eq!(selection.handed_to.as_deref(), Some("b"));
        assert_eq!((selection.first_message.as_deref(), selection.first_agent.as_deref()), (Some("first"), Some("a")));
    }

    #[test]
    fn before_a_run_and_at_a_step() {
        let (selection, lines) = fork(ForkPoint::Before { run_id: "r2".into() }).unwrap();
        assert_eq!(shape(&lines), ["query new1", "step new1 1", "step new1 2", "checkpoint new2"]);
        assert_eq!(selection.runs.len(), 1);
        let (_, lines) = fork(ForkPoint::Before { run_id: "r1".into() }).unwrap();
        assert!(lines.is_empty(), "before the first run: an empty chat");

        let (selection, lines) = fork(ForkPoint::After { run_id: "r1".into(), step_seq: Some(1) }).unwrap();
        assert_eq!(shape(&lines), ["query new1", "step new1 1"], "no checkpoint through a cut run");
        assert!(selection.totals.is_empty(), "a cut run's usage is not the fork's");
    }

    #[test]
    fn refusals() {
        let not_found = fork(ForkPoint::After { run_id: "r9".into(), step_seq: None }).unwrap_err();
        assert!(matches!(not_found, ForkError::RunNotFound { .. }), "{not_found}");
        let no_step = fork(ForkPoint::After { run_id: "r1".into(), step_seq: Some(7) }).unwrap_err();
        assert!(matches!(no_step, ForkError::StepNotFound { step_seq: 7, .. }), "{no_step}");
        for point in [ForkPoint::Whole, ForkPoint::After { run_id: "r3".into(), step_seq: None }] {
            let waiting = fork(point).unwrap_err();
            assert!(matches!(&waiting, ForkError::RunWaiting { run_id, .. } if run_id == "r3"), "{waiting}");
        }
        // Before a waiting run: only finished runs are copied.
        assert_eq!(fork(ForkPoint::Before { run_id: "r3".into() }).unwrap().0.runs.len(), 2);
    }
}
