//! Guardrails on the wire (issue 36, `docs/contract/sse-events.md` §3.3a): where a guard
//! checked, what a guard that stopped an answer says, and the status codes of the source
//! document's status messages.
//!
//! A guard checks text at one of four [`GuardStage`]s. Its verdicts reach the stream as three
//! events: `content.revoke` withdraws a content block the client already shows
//! ([`AgentDelta::Revoke`] with a [`Revocation`]), `guard.warning` lets the run go on and
//! `guard.block` stops something that showed nothing ([`AgentDelta::GuardWarning`] /
//! [`AgentDelta::GuardBlock`] with a [`GuardNotice`]). The assembler decides which block a
//! revoke names; the runtime only says that the current answer is withdrawn.
//!
//! [`AgentDelta::Revoke`]: crate::AgentDelta::Revoke
//! [`AgentDelta::GuardWarning`]: crate::AgentDelta::GuardWarning
//! [`AgentDelta::GuardBlock`]: crate::AgentDelta::GuardBlock

use serde::{Deserialize, Serialize};

/// `statusCode` of `content.revoke` and `guard.block`: the source document's `-1006`, "block and
/// revoke" — a guard found a high risk; what was shown is withdrawn, the answer stops.
pub const STATUS_BLOCK_AND_REVOKE: i64 = -1006;

/// `statusCode` of `guard.warning`: the source document's `-1007`, "safety warning" — a guard
/// found a mild risk; the client shows a warning and the answer goes on.
pub const STATUS_SAFETY_WARNING: i64 = -1007;

/// Where a guard checked (`stage` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GuardStage {
    /// `input`: the user's message, before any model call.
    Input,
    /// `output`: the model's answer, while it streams and at its end.
    Output,
    /// `toolInput`: a tool call's arguments, before the call runs.
    ToolInput,
    /// `toolOutput`: a tool's result, before the model reads it.
    ToolOutput,
}

impl GuardStage {
    /// Every stage, in the order a run meets them.
    pub const ALL: [GuardStage; 4] = [Self::Input, Self::Output, Self::ToolInput, Self::ToolOutput];

    /// The wire spelling (`toolInput`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Input => "input",
            Self::Output => "output",
            Self::ToolInput => "toolInput",
            Self::ToolOutput => "toolOutput",
        }
    }
}

impl std::fmt::Display for GuardStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the current answer is withdrawn. Stored on the revoked content message (`_revoked` in
/// history) as `{guard, rule?, reason}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revocation {
    /// The guard that decided: `rules:<set>`, `webhook` or `judge:<agentKey>`; `output-schema`
    /// when an answer did not match the run's output schema (a repair turn follows).
    pub guard: String,
    /// The rule that matched (rule guards only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// What a person is told.
    pub reason: String,
}

/// [`Revocation::guard`] of an answer withdrawn because it did not match the run's output schema
/// (structured output): the run goes on with a repair turn, so the answer is not over.
pub const OUTPUT_SCHEMA_GUARD: &str = "output-schema";

/// A guard's warning or block that withdraws nothing ([`crate::AgentDelta::GuardWarning`],
/// [`crate::AgentDelta::GuardBlock`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardNotice {
    /// Where the guard checked.
    pub stage: GuardStage,
    /// The guard that decided: `rules:<set>`, `webhook` or `judge:<agentKey>`.
    pub guard: String,
    /// The rule that matched (rule guards only).
    pub rule: Option<String>,
    /// What a person is told: `message` of `guard.warning`, `reason` of `guard.block`.
    pub message: String,
    /// The call checked, at the tool stages.
    pub tool_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_are_camel_case_on_the_wire() {
        for stage in GuardStage::ALL {
            let text = serde_json::to_string(&stage).expect("serialise");
            assert_eq!(text, format!("\"{stage}\""));
            assert_eq!(serde_json::from_str::<GuardStage>(&text).expect("parse"), stage);
        }
        assert_eq!(GuardStage::ToolOutput.as_str(), "toolOutput");
    }

    #[test]
    fn a_revocation_omits_a_rule_it_has_not() {
        let revocation = Revocation { guard: "webhook".into(), rule: None, reason: "unsafe".into() };
        assert_eq!(serde_json::to_string(&revocation).expect("json"), r#"{"guard":"webhook","reason":"unsafe"}"#);
    }
}
