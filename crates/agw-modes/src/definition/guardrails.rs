//! `guardrails` (agw extension, issue 36, docs/guardrails.md): the guards that check this agent's
//! input, its streamed answer, and its tools' arguments and results.
//!
//! A guard is named by a string: `rules:<set>` (a rule file of the guardrails directory),
//! `webhook` (the classifier of `agw.guardrails.webhook.*`) or `judge:<agentKey>` (an agent whose
//! answer is the verdict). The lists add to the server's defaults (`agw.guardrails.*`): an agent
//! file cannot switch off what the operator requires — `agent_file_create` writes agent files
//! from a model's arguments.

use std::fmt;
use std::str::FromStr;

use agw_guard::Granularity;

use super::error::DefinitionError;
use super::raw::Obj;

/// One guard, as an agent file or a setting names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GuardRef {
    /// `rules:<set>`: the rule set of that name in the guardrails catalog.
    Rules(String),
    /// `webhook`: the server's classifier webhook.
    Webhook,
    /// `judge:<agentKey>`: that agent judges; its answer is the verdict.
    Judge(String),
}

/// A guard name that is none of the three forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("\"{0}\" is not a guard (expected rules:<set>, webhook or judge:<agentKey>)")]
pub struct BadGuardRef(pub String);

impl FromStr for GuardRef {
    type Err = BadGuardRef;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let named = |rest: &str| {
            let rest = rest.trim();
            (!rest.is_empty() && !rest.contains(char::is_whitespace)).then(|| rest.to_owned())
        };
        let parsed = if s == "webhook" {
            Some(GuardRef::Webhook)
        } else if let Some(set) = s.strip_prefix("rules:") {
            named(set).map(GuardRef::Rules)
        } else if let Some(agent) = s.strip_prefix("judge:") {
            named(agent).map(GuardRef::Judge)
        } else {
            None
        };
        parsed.ok_or_else(|| BadGuardRef(s.to_owned()))
    }
}

impl fmt::Display for GuardRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuardRef::Rules(set) => write!(f, "rules:{set}"),
            GuardRef::Webhook => f.write_str("webhook"),
            GuardRef::Judge(agent) => write!(f, "judge:{agent}"),
        }
    }
}

/// The guards of each stage: an agent's `guardrails`, or the server's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuardLists {
    /// `input`: the user's message, before any model call.
    pub input: Vec<GuardRef>,
    /// `output`: the answer, while it streams.
    pub output: Vec<GuardRef>,
    /// `toolInput`: a call's arguments, before it runs.
    pub tool_input: Vec<GuardRef>,
    /// `toolOutput`: a call's result, before the model sees it.
    pub tool_output: Vec<GuardRef>,
}

impl GuardLists {
    /// No guard at any stage.
    pub fn is_empty(&self) -> bool {
        self.input.is_empty() && self.output.is_empty() && self.tool_input.is_empty() && self.tool_output.is_empty()
    }

    /// These lists followed by `more`'s, each guard once per stage.
    pub fn with(&self, more: &GuardLists) -> GuardLists {
        let join = |a: &[GuardRef], b: &[GuardRef]| {
            let mut out = a.to_vec();
            for guard in b {
                if !out.contains(guard) {
                    out.push(guard.clone());
                }
            }
            out
        };
        GuardLists {
            input: join(&self.input, &more.input),
            output: join(&self.output, &more.output),
            tool_input: join(&self.tool_input, &more.tool_input),
            tool_output: join(&self.tool_output, &more.tool_output),
        }
    }

    /// Every guard named at any stage.
    pub fn all(&self) -> impl Iterator<Item = &GuardRef> {
        self.input.iter().chain(&self.output).chain(&self.tool_input).chain(&self.tool_output)
    }
}

/// A validated `guardrails` block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuardrailPolicy {
    /// The agent's guards per stage (the server's defaults are added at run time).
    pub lists: GuardLists,
    /// `classifyEvery`: how often the webhook and judges see a streaming answer (`"sentence"` or
    /// a number of characters); `None`: the server's setting.
    pub classify_every: Option<Granularity>,
}

const KNOWN_KEYS: [&str; 5] = ["input", "output", "toolInput", "toolOutput", "classifyEvery"];

/// Parses `guardrails` (absent: none of the agent's own).
pub(super) fn parse(block: Option<&Obj<'_>>) -> Result<GuardrailPolicy, DefinitionError> {
    let Some(block) = block else { return Ok(GuardrailPolicy::default()) };
    block.only(&KNOWN_KEYS)?;
    let list = |key: &str| -> Result<Vec<GuardRef>, DefinitionError> {
        let mut guards = Vec::new();
        for (i, name) in block.str_list(key)?.into_iter().enumerate() {
            let guard = name.parse::<GuardRef>().map_err(|e| DefinitionError::InvalidValue {
                field: format!("{}[{i}]", block.field(key)),
                reason: e.to_string(),
            })?;
            if !guards.contains(&guard) {
                guards.push(guard);
            }
        }
        Ok(guards)
    };
    let lists = GuardLists {
        input: list("input")?,
        output: list("output")?,
        tool_input: list("toolInput")?,
        tool_output: list("toolOutput")?,
    };
    // A number of characters, or "sentence".
    let classify_every = match block.i64("classifyEvery") {
        Ok(Some(n)) => Some(n.to_string()),
        Ok(None) => None,
        Err(_) => block.str("classifyEvery")?.map(str::to_owned),
    }
    .map(|text| {
        text.parse::<Granularity>()
            .map_err(|e| DefinitionError::InvalidValue { field: block.field("classifyEvery"), reason: e.to_string() })
    })
    .transpose()?;
    Ok(GuardrailPolicy { lists, classify_every })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::AgentDefinition;

    fn agent(guardrails: &str) -> Result<AgentDefinition, DefinitionError> {
        let text = format!(
            r#"{{"key":"a","modelConfig":{{"providerKey":"p","model":"m"}},"mode":"REACT",
                "react":{{"systemPrompt":"s"}},"guardrails":{guardrails}}}"#
        );
        AgentDefinition::from_json("a.json", &text)
    }

    #[test]
    fn guard_names_parse_and_print_back() {
        for name in ["rules:demo", "webhook", "judge:guardAgent"] {
            assert_eq!(name.parse::<GuardRef>().unwrap().to_string(), name);
        }
        for bad in ["rules:", "judge: ", "rules:a b", "model:x", ""] {
            assert!(bad.parse::<GuardRef>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_guardrails_block_lists_guards_per_stage() {
        let a = agent(
            r#"{"input":["rules:demo","rules:demo"],"output":["rules:demo","webhook","judge:j"],
                "toolOutput":["rules:pii"],"classifyEvery":120}"#,
        )
        .unwrap();
        let g = &a.guardrails;
        assert_eq!(g.lists.input, [GuardRef::Rules("demo".into())]);
        assert_eq!(g.lists.output.len(), 3);
        assert!(g.lists.tool_input.is_empty());
        assert_eq!(g.classify_every, Some(Granularity::Chars(120)));
        assert_eq!(
            agent(r#"{"classifyEvery":"sentence"}"#).unwrap().guardrails.classify_every,
            Some(Granularity::Sentence)
        );
    }

    #[test]
    fn bad_guardrails_name_the_field() {
        let e = agent(r#"{"output":["regex:x"]}"#).unwrap_err().to_string();
        assert!(e.contains("guardrails.output[0]") && e.contains("regex:x"), "{e}");
        let e = agent(r#"{"outputs":[]}"#).unwrap_err().to_string();
        assert!(e.contains("guardrails.outputs"), "{e}");
        let e = agent(r#"{"classifyEvery":"paragraph"}"#).unwrap_err().to_string();
        assert!(e.contains("guardrails.classifyEvery"), "{e}");
        let e = agent(r#"{"classifyEvery":true}"#).unwrap_err().to_string();
        assert!(e.contains("guardrails.classifyEvery"), "{e}");
    }

    #[test]
    fn lists_join_without_repeats() {
        let mine = GuardLists { output: vec![GuardRef::Webhook], ..Default::default() };
        let defaults = GuardLists {
            output: vec![GuardRef::Rules("demo".into()), GuardRef::Webhook],
            input: vec![GuardRef::Rules("demo".into())],
            ..Default::default()
        };
        let joined = defaults.with(&mine);
        assert_eq!(joined.output, [GuardRef::Rules("demo".into()), GuardRef::Webhook]);
        assert_eq!(joined.input.len(), 1);
        assert!(!joined.is_empty() && GuardLists::default().is_empty());
    }
}
