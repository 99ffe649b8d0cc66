//! `toolConfig.handoffs` (agw extension, docs/multi-agent.md "Handoffs"): the agents this one
//! may hand the conversation to, each offered to the model as one `transfer_to_<agentKey>` tool.

use serde::{Deserialize, Serialize};

use super::error::DefinitionError;
use super::raw::{Either, Obj, non_blank};

/// What the tool name of a handoff starts with; the target's key (lower-cased) follows.
pub const TRANSFER_TOOL_PREFIX: &str = "transfer_to_";

/// Providers accept function names of at most 64 characters.
const MAX_TOOL_NAME_LEN: usize = 64;

const KNOWN_KEYS: [&str; 3] = ["agentKey", "description", "inputFilter"];

/// The accepted `inputFilter` names.
pub const INPUT_FILTER_NAMES: &str = "all, noToolCalls, lastUserMessage";

/// What of the conversation so far the next agent receives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum InputFilter {
    /// Everything: the chat's earlier turns and this run's messages, tool calls included.
    #[default]
    All,
    /// The same without tool calls and tool results (assistant text and user messages only):
    /// the next agent does not see tools it does not have.
    NoToolCalls,
    /// Only the run's user message (and the steers the run took): a fresh start on the
    /// question.
    LastUserMessage,
}

/// One entry of `toolConfig.handoffs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// The agent that continues the conversation (case-sensitive, as in the catalog).
    pub agent_key: String,
    /// What the tool's description says about when to hand over; `None`: the target agent's
    /// own description.
    pub description: Option<String>,
    /// What the next agent receives.
    pub input_filter: InputFilter,
}

impl Handoff {
    /// `transfer_to_<agentKey>`, lower-cased like every tool name the model sends back.
    pub fn tool_name(&self) -> String {
        transfer_tool_name(&self.agent_key)
    }
}

/// The tool name a handoff to `agent_key` is offered as.
pub fn transfer_tool_name(agent_key: &str) -> String {
    format!("{TRANSFER_TOOL_PREFIX}{}", agent_key.to_lowercase())
}

/// Parses `toolConfig.handoffs`: agent keys, or `{"agentKey", "description"?, "inputFilter"?}`.
/// `own_key`: an agent cannot hand over to itself.
pub fn parse(tools: &Obj<'_>, own_key: &str) -> Result<Vec<Handoff>, DefinitionError> {
    let field = tools.field("handoffs");
    let mut out: Vec<Handoff> = Vec::new();
    for (i, item) in tools.str_or_obj_list("handoffs")?.into_iter().enumerate() {
        let at = format!("{field}[{i}]");
        let handoff = match item {
            Either::Left(key) => {
                Handoff { agent_key: key.trim().to_owned(), description: None, input_filter: InputFilter::All }
            }
            Either::Right(entry) => {
                entry.only(&KNOWN_KEYS)?;
                let input_filter = match entry.str("inputFilter")? {
                    None => InputFilter::All,
                    Some(name) => super::raw::named(name).ok_or_else(|| DefinitionError::InvalidEnum {
                        field: entry.field("inputFilter"),
                        value: name.to_owned(),
                        expected: INPUT_FILTER_NAMES,
                    })?,
                };
                Handoff {
                    agent_key: entry.str("agentKey")?.unwrap_or_default().trim().to_owned(),
                    description: non_blank(entry.str("description")?).map(|d| d.trim().to_owned()),
                    input_filter,
                }
            }
        };
        let invalid = |reason: String| DefinitionError::InvalidHandoff { field: at.clone(), reason };
        if handoff.agent_key.is_empty() {
            return Err(invalid("agentKey is required".to_owned()));
        }
        if handoff.agent_key == own_key {
            return Err(invalid(format!("an agent cannot hand off to itself ({own_key})")));
        }
        let name = handoff.tool_name();
        if name.len() > MAX_TOOL_NAME_LEN
            || !handoff.agent_key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            return Err(invalid(format!(
                "agent key \"{}\" cannot name a tool: use letters, digits, '_' and '-', at most {} characters",
                handoff.agent_key,
                MAX_TOOL_NAME_LEN - TRANSFER_TOOL_PREFIX.len()
            )));
        }
        // Tool names are compared lower-cased: `Billing` and `billing` would be one tool.
        if out.iter().any(|h| h.tool_name() == name) {
            return Err(invalid(format!("\"{}\" is listed twice (tool {name})", handoff.agent_key)));
        }
        out.push(handoff);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::AgentDefinition;

    fn agent(handoffs: &str) -> Result<AgentDefinition, DefinitionError> {
        let text = format!(
            r#"{{"key":"triage","mode":"REACT","modelConfig":{{"providerKey":"p","model":"m"}},
                "react":{{"systemPrompt":"s"}},"toolConfig":{{"handoffs":{handoffs}}}}}"#
        );
        AgentDefinition::from_json("triage.json", &text)
    }

    #[test]
    fn keys_and_objects_parse_with_their_filters() {
        let def = agent(
            r#"["billing", {"agentKey":" Refunds ","description":"money back","inputFilter":"lastUserMessage"},
                {"agentKey":"tech","inputFilter":"noToolCalls"}]"#,
        )
        .unwrap();
        let got: Vec<(&str, Option<&str>, InputFilter, String)> = def
            .handoffs
            .iter()
            .map(|h| (h.agent_key.as_str(), h.description.as_deref(), h.input_filter, h.tool_name()))
            .collect();
        assert_eq!(
            got,
            [
                ("billing", None, InputFilter::All, "transfer_to_billing".to_owned()),
                ("Refunds", Some("money back"), InputFilter::LastUserMessage, "transfer_to_refunds".to_owned()),
                ("tech", None, InputFilter::NoToolCalls, "transfer_to_tech".to_owned()),
            ]
        );
    }

    #[test]
    fn bad_entries_are_rejected_with_the_field_named() {
        let message = |json: &str| agent(json).unwrap_err().to_string();
        assert_eq!(
            message(r#"[{"agentKey":"b","inputFilter":"some"}]"#),
            "field \"toolConfig.handoffs[0].inputFilter\" has invalid value \"some\" (expected one of all, noToolCalls, lastUserMessage)"
        );
        assert!(
            message(r#"[{"description":"x"}]"#)
                .contains("toolConfig.handoffs[0]\" is not a usable handoff: agentKey is required")
        );
        assert!(message(r#"["triage"]"#).contains("cannot hand off to itself"));
        assert!(
            message(r#"["billing", "Billing"]"#)
                .contains("toolConfig.handoffs[1]\" is not a usable handoff: \"Billing\" is listed twice")
        );
        assert!(message(r#"["bill ing"]"#).contains("cannot name a tool"));
        assert!(
            message(r#"[{"agentKey":"b","filter":"all"}]"#)
                .contains("toolConfig.handoffs[0].filter\" is not supported")
        );
        assert!(message(r#"[3]"#).contains("must be an array of strings or objects"));
        assert!(message(r#""billing""#).contains("must be an array"));
    }

    #[test]
    fn a_oneshot_agent_with_only_handoffs_offers_tools() {
        let text = r#"{"key":"a","mode":"ONESHOT","modelConfig":{"providerKey":"p","model":"m"},
            "plain":{"systemPrompt":"s"},"toolConfig":{"handoffs":["b"]}}"#;
        let def = AgentDefinition::from_json("a.json", text).unwrap();
        assert_eq!(def.tool_choice, crate::definition::ToolChoicePolicy::Auto);
    }
}
