//! `phaseStream` (agw extension, issue 35, docs/protocols.md "The phase stream"): what this
//! agent's `phase_change` events say, per language.

use std::collections::BTreeMap;

use agw_protocol::adapters::phase::{Phase, PhaseMessages};

use super::error::DefinitionError;
use super::raw::Obj;

/// Parses `phaseStream` (absent: the built-in messages):
/// `{"messages": {"<language tag or *>": {"thinking": "…", "tool_calling": "…", …}}}`.
pub(super) fn parse(block: Option<&Obj<'_>>) -> Result<PhaseMessages, DefinitionError> {
    let Some(block) = block else { return Ok(PhaseMessages::default()) };
    block.only(&["messages"])?;
    let Some(messages) = block.obj("messages")? else { return Ok(PhaseMessages::default()) };
    let mut own = BTreeMap::new();
    for lang in messages.keys() {
        let Some(per_phase) = messages.obj(lang)? else { continue };
        let mut map = BTreeMap::new();
        for name in per_phase.keys() {
            let Some(phase) = Phase::parse(name) else {
                return Err(DefinitionError::InvalidValue {
                    field: per_phase.field(name),
                    reason: "is not a phase (thinking, tool_calling, generating, completed, error)".into(),
                });
            };
            if let Some(text) = per_phase.str(name)? {
                map.insert(phase, text.to_owned());
            }
        }
        own.insert(lang.to_owned(), map);
    }
    Ok(PhaseMessages::new(own))
}

#[cfg(test)]
mod tests {
    use agw_protocol::adapters::phase::Phase;

    use crate::definition::AgentDefinition;

    fn agent(block: &str) -> Result<AgentDefinition, crate::definition::DefinitionError> {
        let text = format!(
            r#"{{"key":"a","modelConfig":{{"providerKey":"p","model":"m"}},"mode":"REACT",
                "react":{{"systemPrompt":"s"}},"phaseStream":{block}}}"#
        );
        AgentDefinition::from_json("a.json", &text)
    }

    #[test]
    fn messages_per_language_override_the_built_in_ones() {
        let a = agent(r#"{"messages":{"en":{"thinking":"Hmm..."},"*":{"generating":"Typing"}}}"#).unwrap();
        let m = &a.phase_messages;
        assert_eq!(m.message(Some("en-GB"), Phase::Thinking), "Hmm...");
        assert_eq!(m.message(Some("en"), Phase::ToolCalling), "Looking up data...");
        assert_eq!(m.message(None, Phase::Generating), "Typing");
        assert_eq!(m.message(None, Phase::Thinking), "正在分析您的问题...");
        assert_eq!(m.message(Some("fr"), Phase::ToolCalling), "正在查询数据...", "the document's language");
    }

    #[test]
    fn an_unknown_phase_names_the_field() {
        let e = agent(r#"{"messages":{"en":{"planning":"x"}}}"#).unwrap_err().to_string();
        assert!(e.contains("phaseStream.messages.en.planning"), "{e}");
    }
}
