//! Citations in a run (issue 35, docs/protocols.md "Citations"): the records the run's citable
//! tools returned, the instruction that tells the model how to cite them, and the markers of its
//! answer turned into citations as the answer streams.
//!
//! An agent cites when its `citations` block is enabled (the default) and one of its tools
//! declares `citations`; nothing here runs for any other agent.

use std::collections::HashMap;

use agw_protocol::citation::{Citation, CitationRecord, CiteFilter, Piece};
use agw_tools::CitationFields;
use serde_json::Value;

use super::RunContext;

/// Counter: citations streamed, by `agent`.
pub const CITATIONS_METRIC: &str = "agw_citations_total";
/// Counter: markers naming an id no tool of the run returned (removed from the text), by `agent`.
pub const UNKNOWN_CITATIONS_METRIC: &str = "agw_citations_unknown_total";

/// The most records a run keeps: a tool that returns more is cut off here.
const MAX_RECORDS: usize = 4096;
/// The longest `content` a record keeps (characters); a citation repeats it on every protocol.
const MAX_CONTENT_CHARS: usize = 2000;

/// The built-in instruction; `{marker}` is the marker with `<id>`, `{fields}` one line per
/// citable tool saying where its ids are.
const INSTRUCTION: &str = "Citations: when a sentence states something from a record a tool returned, write \
{marker} right after that sentence, with the record's id in place of <id>. Cite only ids that a tool returned, \
one marker per record. Never explain the markers; they are turned into links.\n{fields}";

/// The records a run's tools returned, by id, and how many citations it streamed.
#[derive(Debug, Clone, Default)]
pub(crate) struct CitationBook {
    records: HashMap<String, (CitationRecord, String)>,
    next_index: u32,
}

impl CitationBook {
    /// Keeps the records of a citable tool's result (`tool_id`: the call).
    pub fn collect(&mut self, fields: &CitationFields, result: &Value, tool_id: &str) {
        let found = if fields.records.is_empty() { Some(result) } else { result.pointer(&fields.records) };
        let items: Vec<&Value> = match found {
            Some(Value::Array(items)) => items.iter().collect(),
            Some(one @ Value::Object(_)) => vec![one],
            _ => return,
        };
        for item in items {
            if self.records.len() >= MAX_RECORDS {
                tracing::warn!(tool_id, "a run keeps at most {MAX_RECORDS} citable records; the rest are not citable");
                return;
            }
            if let Some(record) = record_of(fields, item) {
                self.records.insert(record.message_id.clone(), (record, tool_id.to_owned()));
            }
        }
    }

    /// The citation of record `id` at `offset`, numbered; `None` for an id no tool returned.
    pub fn cite(&mut self, id: &str, offset: u64) -> Option<Citation> {
        let (record, tool_id) = self.records.get(id)?;
        let index = self.next_index;
        self.next_index += 1;
        Some(Citation { index, offset, tool_id: Some(tool_id.clone()), record: record.clone() })
    }

    /// Takes the records a forked task found (a plan task run beside others, a sub-agent's run
    /// is separate), so later turns of the run can cite them.
    pub fn absorb(&mut self, other: CitationBook) {
        for (id, record) in other.records {
            if self.records.len() >= MAX_RECORDS {
                break;
            }
            self.records.entry(id).or_insert(record);
        }
        self.next_index = self.next_index.max(other.next_index);
    }
}

/// A value as text: strings as they are, numbers and booleans written out.
fn text_of(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// One record of a result item; `None` without an id.
fn record_of(fields: &CitationFields, item: &Value) -> Option<CitationRecord> {
    let get = |field: &str| CitationFields::get(field, item).and_then(text_of);
    let timestamp = CitationFields::get(&fields.timestamp, item).and_then(|v| match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    });
    Some(CitationRecord {
        message_id: get(&fields.id)?,
        content: get(&fields.content).map(|c| c.chars().take(MAX_CONTENT_CHARS).collect()),
        sender_name: get(&fields.sender_name),
        sender_id: get(&fields.sender_id),
        timestamp,
        chat_id: get(&fields.chat_id),
        url: get(&fields.url),
        title: get(&fields.title),
    })
}

/// The citable tools among the agent's, with their fields; empty when the agent does not cite.
fn citable_tools(ctx: &RunContext) -> Vec<(&str, &CitationFields)> {
    if !ctx.agent.citations.enabled {
        return Vec::new();
    }
    ctx.agent
        .declared_tools
        .iter()
        .filter_map(|name| {
            let def = ctx.services.tools.get(name)?;
            Some((def.name.as_str(), def.citations.as_ref()?))
        })
        .collect()
}

/// The fields of tool `name` when the run keeps its records.
pub(crate) fn fields_of<'a>(ctx: &'a RunContext, name: &str) -> Option<&'a CitationFields> {
    if !ctx.agent.citations.enabled {
        return None;
    }
    ctx.services.tools.get(name)?.citations.as_ref()
}

/// The marker filter of one model turn, when the agent cites.
pub(crate) fn filter(ctx: &RunContext) -> Option<CiteFilter> {
    (!citable_tools(ctx).is_empty()).then(|| CiteFilter::new(ctx.agent.citations.marker.clone()))
}

/// The instruction a citing agent's system prompt ends with; empty for the others.
pub(crate) fn instruction(ctx: &RunContext) -> String {
    let tools = citable_tools(ctx);
    if tools.is_empty() {
        return String::new();
    }
    let marker = ctx.agent.citations.marker.of("<id>");
    let fields: Vec<String> = tools
        .iter()
        .map(|(name, fields)| {
            let place = if fields.records.is_empty() {
                String::new()
            } else {
                format!(" of each record in `{}`", fields.records.trim_start_matches('/'))
            };
            format!("- {name}: the id is the `{}` field{place}", fields.id.trim_start_matches('/'))
        })
        .collect();
    let template = ctx.agent.citations.instruction.as_deref().unwrap_or(INSTRUCTION);
    template.replace("{marker}", &marker).replace("{fields}", &fields.join("\n")).trim().to_owned()
}

/// What one piece of filtered text becomes: text for the stream, or citations (unknown ids are
/// dropped, logged and counted).
pub(crate) fn resolve(ctx: &RunContext, book: &mut CitationBook, piece: Piece) -> Resolved {
    match piece {
        Piece::Text(text) => Resolved::Text(text),
        Piece::Cite(marker) => {
            let mut cited = Vec::with_capacity(marker.ids.len());
            for id in &marker.ids {
                match book.cite(id, marker.offset) {
                    Some(citation) => {
                        metrics::counter!(CITATIONS_METRIC, "agent" => ctx.agent.key.clone()).increment(1);
                        cited.push(citation);
                    }
                    None => {
                        metrics::counter!(UNKNOWN_CITATIONS_METRIC, "agent" => ctx.agent.key.clone()).increment(1);
                        tracing::info!(run_id = %ctx.run_id, agent = %ctx.agent.key, id = %id.chars().take(64).collect::<String>(), "the model cited an id no tool returned; removed");
                    }
                }
            }
            Resolved::Cited(cited)
        }
    }
}

/// A resolved piece ([`resolve`]).
pub(crate) enum Resolved {
    Text(String),
    Cited(Vec<Citation>),
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn records_are_read_where_the_definition_says_and_numbered_when_cited() {
        let mut book = CitationBook::default();
        let fields = CitationFields { records: "/messages".into(), ..CitationFields::default() };
        let result = json!({"messages": [
            {"messageId": 361, "content": "a", "senderName": "Coral", "timestamp": "1736985600000", "chatId": "c"},
            {"content": "no id"},
            {"messageId": "362", "senderName": "Coral"}
        ]});
        book.collect(&fields, &result, "call_1");
        let first = book.cite("361", 5).unwrap();
        assert_eq!((first.index, first.offset, first.tool_id.as_deref()), (0, 5, Some("call_1")));
        assert_eq!(first.record.timestamp, Some(1_736_985_600_000));
        assert_eq!(first.record.sender_name.as_deref(), Some("Coral"));
        assert_eq!(book.cite("362", 9).unwrap().index, 1);
        assert!(book.cite("999", 9).is_none());
        assert_eq!(book.cite("361", 12).unwrap().index, 2, "citing again numbers again");
    }

    #[test]
    fn fields_may_be_pointers_and_a_single_object_is_one_record() {
        let mut book = CitationBook::default();
        let fields =
            CitationFields { id: "/meta/id".into(), sender_name: "/from/name".into(), ..CitationFields::default() };
        book.collect(&fields, &json!({"meta": {"id": "d1"}, "from": {"name": "Ann"}}), "call_2");
        assert_eq!(book.cite("d1", 0).unwrap().record.sender_name.as_deref(), Some("Ann"));
    }
}
