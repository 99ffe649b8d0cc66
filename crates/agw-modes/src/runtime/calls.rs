//! Attributing upstream tool-call fragments to calls (`docs/contract/sse-events.md` §6.2).
//!
//! Providers stream parallel calls one after another, each starting with its id; later fragments
//! carry only an index and argument text. Attribution therefore follows ids, not indexes: a
//! fragment without an id belongs to the most recently seen call. A provider that sends no ids at
//! all gets synthetic ones (`call_native_{k}`), unique for the whole run. A model that reuses an
//! id from an earlier turn of the run (some providers number calls per response) gets a
//! suffixed id (`call_0_2`), so every tool id of a run's stream — and of the history sent back —
//! names exactly one call.

use std::collections::HashSet;

use agw_protocol::ToolCallFragment;
use agw_protocol::history::{AwaitingCall, StreamedAs};
use agw_protocol::ids;
use serde_json::{Map, Value};

/// One call as streamed by the model in the current turn.
#[derive(Debug, Clone)]
pub struct StreamedCall {
    /// The run-unique id used in events and history.
    pub id: String,
    /// The id as the model sent it (fragments are attributed by it).
    wire_id: String,
    /// Function name as sent by the model (untrimmed); empty until a fragment names it.
    pub name: String,
    /// Raw argument text, every fragment concatenated verbatim.
    pub arguments: String,
    /// True once the call is known by name (its `tool.start`/`action.start` is due, unless it
    /// is withheld).
    pub started: bool,
    /// How the client was shown the call; `None`: as its tool's kind says (an action as an
    /// action, everything else as a tool). `Some(Withheld)`: held back until its approval rule
    /// is satisfied (`approval::withholds`).
    pub streamed_as: Option<StreamedAs>,
    /// What is wrong with a call a prompted model wrote (`modelConfig.toolCalling: prompted`):
    /// it is answered with this error, not run. Native calls keep the contract's reading
    /// (invalid arguments become `{}`) and never have one.
    pub problem: Option<agw_llm::prompted::CallProblem>,
}

impl StreamedCall {
    /// A call streamed before the run waited in another process (durable waiting).
    pub fn restored(call: &AwaitingCall) -> Self {
        Self {
            id: call.id.clone(),
            wire_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            started: true,
            streamed_as: call.streamed_as,
            problem: None,
        }
    }

    /// Trimmed, lower-cased name: how the registry knows the tool.
    pub fn normalized_name(&self) -> String {
        self.name.trim().to_lowercase()
    }

    /// The arguments as a JSON object; `{}` when empty, invalid or not an object.
    pub fn arguments_object(&self) -> Value {
        match serde_json::from_str::<Value>(&self.arguments) {
            Ok(Value::Object(m)) => Value::Object(m),
            _ => Value::Object(Map::new()),
        }
    }
}

/// What the turn must stream for one fragment.
#[derive(Debug, PartialEq, Eq)]
pub enum FragmentEffect {
    /// Nothing to emit (e.g. an empty continuation, or the call has no name yet).
    None,
    /// The call `index` (into [`CallAccumulator::calls`]) starts now; `delta` is every argument
    /// text seen so far (usually empty or this fragment's text).
    Start { index: usize, delta: String },
    /// More arguments for an already started call.
    Args { index: usize, delta: String },
}

/// Accumulates the tool calls of one model turn.
#[derive(Debug, Default)]
pub struct CallAccumulator {
    calls: Vec<StreamedCall>,
}

impl CallAccumulator {
    pub fn calls(&self) -> &[StreamedCall] {
        &self.calls
    }

    pub fn into_calls(self) -> Vec<StreamedCall> {
        self.calls
    }

    pub fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }

    /// Folds one fragment in. `next_synthetic` mints a run-unique synthetic id.
    pub fn on_fragment(&mut self, fragment: ToolCallFragment, ids_used: &mut RunCallIds) -> FragmentEffect {
        let id = fragment.id.filter(|id| !id.trim().is_empty());
        let index = match id {
            Some(id) => match self.calls.iter().position(|c| c.wire_id == id) {
                Some(i) => i,
                None => {
                    let unique = ids_used.claim(&id);
                    self.push(id, unique)
                }
            },
            None => match self.calls.len() {
                0 => {
                    let synthetic = ids_used.synthetic();
                    self.push(synthetic.clone(), synthetic)
                }
                n => n - 1,
            },
        };
        let call = &mut self.calls[index];
        if let Some(name) = fragment.name.filter(|n| !n.trim().is_empty()) {
            call.name = name;
        }
        call.arguments.push_str(&fragment.arguments);
        if !call.started {
            if call.name.is_empty() {
                return FragmentEffect::None;
            }
            call.started = true;
            return FragmentEffect::Start { index, delta: call.arguments.clone() };
        }
        if fragment.arguments.is_empty() {
            FragmentEffect::None
        } else {
            FragmentEffect::Args { index, delta: fragment.arguments }
        }
    }

    /// Holds call `index` back from the client: nothing of it streams until it is decided.
    pub fn withhold(&mut self, index: usize) {
        self.calls[index].streamed_as = Some(StreamedAs::Withheld);
    }

    fn push(&mut self, wire_id: String, id: String) -> usize {
        let call = StreamedCall {
            id,
            wire_id,
            name: String::new(),
            arguments: String::new(),
            started: false,
            streamed_as: None,
            problem: None,
        };
        self.calls.push(call);
        self.calls.len() - 1
    }
}

/// Every tool-call id used so far in a run.
#[derive(Debug, Default)]
pub struct RunCallIds {
    used: HashSet<String>,
    synthetic: u32,
    /// Put before every id (a sub-agent's task id: its calls never share an id with the
    /// parent's or a sibling's in the stream they share).
    prefix: String,
}

impl RunCallIds {
    /// Ids that all begin with `prefix` (empty: the ids as the model sent them).
    pub fn with_prefix(prefix: &str) -> Self {
        Self { prefix: prefix.to_owned(), ..Self::default() }
    }

    /// `id` if the run has not used it yet, else `id_2`, `id_3`, … (the first free one).
    pub fn claim(&mut self, id: &str) -> String {
        let id = format!("{}{id}", self.prefix);
        let mut candidate = id.clone();
        let mut n = 1;
        while self.used.contains(&candidate) {
            n += 1;
            candidate = format!("{id}_{n}");
        }
        self.used.insert(candidate.clone());
        candidate
    }

    /// The next `call_native_{k}` not yet used in the run.
    pub fn synthetic(&mut self) -> String {
        loop {
            self.synthetic += 1;
            let id = format!("{}{}", self.prefix, ids::native_tool_id(self.synthetic));
            if self.used.insert(id.clone()) {
                return id;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(id: Option<&str>, name: Option<&str>, args: &str) -> ToolCallFragment {
        ToolCallFragment {
            index: Some(0),
            id: id.map(str::to_string),
            call_type: None,
            name: name.map(str::to_string),
            arguments: args.to_string(),
        }
    }

    #[test]
    fn openai_shape_starts_on_the_naming_fragment_even_with_empty_arguments() {
        let mut acc = CallAccumulator::default();
        let mut synth = RunCallIds::default();
        assert_eq!(
            acc.on_fragment(frag(Some("call_1"), Some("city_datetime"), ""), &mut synth),
            FragmentEffect::Start { index: 0, delta: String::new() }
        );
        assert_eq!(
            acc.on_fragment(frag(None, None, "{\"city\":"), &mut synth),
            FragmentEffect::Args { index: 0, delta: "{\"city\":".into() }
        );
        assert_eq!(
            acc.on_fragment(frag(None, None, " "), &mut synth),
            FragmentEffect::Args { index: 0, delta: " ".into() },
            "whitespace arguments are kept and streamed"
        );
        assert_eq!(
            acc.on_fragment(frag(None, None, "\"x\"}"), &mut synth),
            FragmentEffect::Args { index: 0, delta: "\"x\"}".into() }
        );
        assert_eq!(acc.on_fragment(frag(None, None, ""), &mut synth), FragmentEffect::None);
        assert_eq!(acc.calls()[0].arguments, "{\"city\": \"x\"}");
        assert_eq!(acc.calls()[0].arguments_object()["city"], "x");
        assert_eq!(acc.calls()[0].id, "call_1");
    }

    #[test]
    fn parallel_calls_follow_ids_and_synthetic_ids_are_run_unique() {
        let mut acc = CallAccumulator::default();
        let mut synth = RunCallIds::default();
        acc.on_fragment(frag(Some("a"), Some("t1"), "{}"), &mut synth);
        acc.on_fragment(frag(Some("b"), Some("t2"), "{"), &mut synth);
        acc.on_fragment(frag(None, None, "}"), &mut synth);
        assert_eq!(acc.calls()[1].arguments, "{}");
        assert_eq!(acc.calls().len(), 2);

        let mut next_turn = CallAccumulator::default();
        next_turn.on_fragment(frag(None, Some("t3"), "{}"), &mut synth);
        let mut third_turn = CallAccumulator::default();
        third_turn.on_fragment(frag(None, Some("t3"), "{}"), &mut synth);
        assert_eq!(next_turn.calls()[0].id, "call_native_1");
        assert_eq!(third_turn.calls()[0].id, "call_native_2", "never reused across turns");

        let mut again = CallAccumulator::default();
        again.on_fragment(frag(Some("a"), Some("t1"), "{"), &mut synth);
        again.on_fragment(frag(Some("a"), None, "}"), &mut synth);
        assert_eq!(again.calls()[0].id, "a_2", "an id reused by the model in a later turn is made unique");
        assert_eq!(again.calls()[0].arguments, "{}", "fragments still follow the model's id");
    }

    #[test]
    fn a_call_without_a_name_yet_starts_when_named() {
        let mut acc = CallAccumulator::default();
        let mut synth = RunCallIds::default();
        assert_eq!(acc.on_fragment(frag(Some("c"), None, "{\"a\""), &mut synth), FragmentEffect::None);
        assert_eq!(
            acc.on_fragment(frag(None, Some("late"), ":1}"), &mut synth),
            FragmentEffect::Start { index: 0, delta: "{\"a\":1}".into() }
        );
        assert_eq!(acc.calls()[0].arguments_object()["a"], 1);
        assert_eq!(acc.calls()[0].normalized_name(), "late");
    }

    #[test]
    fn invalid_arguments_become_an_empty_object() {
        let call = StreamedCall {
            id: "x".into(),
            wire_id: "x".into(),
            name: " Echo ".into(),
            arguments: "[1]".into(),
            started: true,
            streamed_as: None,
            problem: None,
        };
        assert_eq!(call.arguments_object(), serde_json::json!({}));
        assert_eq!(call.normalized_name(), "echo");
    }
}
