//! `citations` (agw extension, issue 35, docs/protocols.md "Citations"): how this agent's model
//! cites the records its citable tools return. Only agents with a citable tool cite at all; the
//! block changes the marker and the instruction, or turns citing off.

use agw_protocol::citation::CiteMarker;

use super::error::DefinitionError;
use super::raw::{Obj, non_blank};

/// A validated `citations` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CitationPolicy {
    /// `enabled` (default true): with a citable tool, the model is told to cite and its markers
    /// become citations. Off: no instruction, markers stay in the text.
    pub enabled: bool,
    /// `marker` (default `[cite:{id}]`).
    pub marker: CiteMarker,
    /// `instruction`: replaces the built-in one; `{marker}` stands for the marker with `<id>`.
    pub instruction: Option<String>,
}

impl Default for CitationPolicy {
    fn default() -> Self {
        Self { enabled: true, marker: CiteMarker::default(), instruction: None }
    }
}

const KNOWN_KEYS: [&str; 3] = ["enabled", "marker", "instruction"];

/// Parses `citations` (absent: the defaults).
pub(super) fn parse(block: Option<&Obj<'_>>) -> Result<CitationPolicy, DefinitionError> {
    let Some(block) = block else { return Ok(CitationPolicy::default()) };
    block.only(&KNOWN_KEYS)?;
    let marker = match non_blank(block.str("marker")?) {
        Some(format) => CiteMarker::parse(format)
            .map_err(|e| DefinitionError::InvalidValue { field: block.field("marker"), reason: e.to_string() })?,
        None => CiteMarker::default(),
    };
    Ok(CitationPolicy {
        enabled: block.bool("enabled")?.unwrap_or(true),
        marker,
        instruction: non_blank(block.str("instruction")?).map(|s| s.trim().to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use crate::definition::AgentDefinition;

    fn agent(citations: &str) -> Result<AgentDefinition, crate::definition::DefinitionError> {
        let text = format!(
            r#"{{"key":"a","modelConfig":{{"providerKey":"p","model":"m"}},"mode":"REACT",
                "react":{{"systemPrompt":"s"}},"citations":{citations}}}"#
        );
        AgentDefinition::from_json("a.json", &text)
    }

    #[test]
    fn a_citations_block_sets_marker_and_instruction() {
        let a = agent(r#"{"marker":"<<{id}>>","instruction":" cite with {marker} "}"#).unwrap();
        assert_eq!(a.citations.marker.of("7"), "<<7>>");
        assert_eq!(a.citations.instruction.as_deref(), Some("cite with {marker}"));
        assert!(a.citations.enabled);
        assert!(!agent(r#"{"enabled":false}"#).unwrap().citations.enabled);
        let plain = AgentDefinition::from_json(
            "a.json",
            r#"{"key":"a","modelConfig":{"providerKey":"p","model":"m"},"mode":"REACT","react":{"systemPrompt":"s"}}"#,
        )
        .unwrap();
        assert_eq!(plain.citations, super::CitationPolicy::default());
    }

    #[test]
    fn a_bad_marker_or_key_names_the_field() {
        let e = agent(r#"{"marker":"[cite]"}"#).unwrap_err().to_string();
        assert!(e.contains("citations.marker") && e.contains("{id}"), "{e}");
        let e = agent(r#"{"format":"x"}"#).unwrap_err().to_string();
        assert!(e.contains("citations.format") && e.contains("not supported"), "{e}");
    }
}
