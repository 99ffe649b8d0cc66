//! `toolConfig.approvals`: which backend tool calls need a person's approval (issue 15,
//! `docs/approvals.md`). A pattern names a tool (or a glob over tool names, `*`, `?`, `[a-z]`);
//! `_bash_:<glob>` matches `_bash_` calls by their `command`. Several matching rules: `deny`
//! beats `ask` beats `allow`; no matching rule: allow (the behaviour without approvals).

use serde_json::Value;

use super::error::DefinitionError;
use super::raw::Obj;

/// What a rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ApprovalDecision {
    /// Run without asking.
    Allow,
    /// Pause the run until a person answers `once`, `always` or `reject`.
    Ask,
    /// Never run; the model is told the policy denied it.
    Deny,
}

/// One `"pattern": "allow" | "ask" | "deny"` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRule {
    /// The pattern as written (trimmed), also the key `always` remembers.
    pub pattern: String,
    tool: String,
    command: Option<String>,
    /// What it decides.
    pub decision: ApprovalDecision,
}

/// An agent's approval rules (empty: every call runs without asking).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Approvals {
    rules: Vec<ApprovalRule>,
}

impl Approvals {
    /// Reads `toolConfig.approvals` (an object of pattern → decision).
    pub(super) fn parse(obj: Option<Obj<'_>>) -> Result<Self, DefinitionError> {
        let Some(obj) = obj else { return Ok(Self::default()) };
        let mut rules = Vec::new();
        for key in obj.keys() {
            let decision = match obj.str(key)?.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
                Some("allow") => ApprovalDecision::Allow,
                Some("ask") => ApprovalDecision::Ask,
                Some("deny") => ApprovalDecision::Deny,
                None => continue,
                Some(other) => {
                    return Err(DefinitionError::InvalidEnum {
                        field: obj.field(key),
                        value: other.to_owned(),
                        expected: "allow, ask, deny",
                    });
                }
            };
            let pattern = key.trim().to_owned();
            let (tool, command) = match pattern.split_once(':') {
                Some((tool, command)) => (tool.trim().to_lowercase(), Some(command.trim().to_owned())),
                None => (pattern.to_lowercase(), None),
            };
            if tool.is_empty() {
                return Err(DefinitionError::InvalidEnum {
                    field: obj.field(key),
                    value: pattern,
                    expected: "a tool name or glob, optionally `_bash_:<command glob>`",
                });
            }
            rules.push(ApprovalRule { pattern, tool, command, decision });
        }
        Ok(Self { rules })
    }

    /// No rules at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The rule that decides a call of `tool` (normalized name) with `args`: the strictest of
    /// the matching rules; `None` when none matches (allow).
    pub fn decide(&self, tool: &str, args: &Value) -> Option<&ApprovalRule> {
        let command = args.get("command").and_then(Value::as_str).map(str::trim);
        self.rules
            .iter()
            .filter(|rule| agw_tools::glob_matches(&rule.tool, tool))
            .filter(|rule| match (&rule.command, command) {
                (None, _) => true,
                (Some(pattern), Some(command)) => agw_tools::glob_matches(pattern, command),
                (Some(_), None) => false,
            })
            .max_by_key(|rule| rule.decision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    fn approvals(value: Value) -> Result<Approvals, DefinitionError> {
        let Value::Object(map) = json!({"approvals": value}) else { unreachable!() };
        let map: Map<String, Value> = map;
        let root = Obj::root(&map);
        Approvals::parse(root.obj("approvals")?)
    }

    #[test]
    fn the_strictest_matching_rule_decides_and_no_rule_allows() {
        let a = approvals(json!({"*": "allow", "mock_*": "ask", "mock_secret": "deny", "_bash_:git push*": "ask"}))
            .unwrap();
        assert_eq!(a.decide("mock_secret", &json!({})).unwrap().decision, ApprovalDecision::Deny);
        assert_eq!(a.decide("mock_weather", &json!({})).unwrap().pattern, "mock_*");
        assert_eq!(a.decide("city_datetime", &json!({})).unwrap().decision, ApprovalDecision::Allow);
        let push = a.decide("_bash_", &json!({"command": " git push origin main"})).unwrap();
        assert_eq!((push.decision, push.pattern.as_str()), (ApprovalDecision::Ask, "_bash_:git push*"));
        assert_eq!(a.decide("_bash_", &json!({"command": "ls"})).unwrap().decision, ApprovalDecision::Allow);
        assert!(approvals(json!({"x": "ask"})).unwrap().decide("y", &json!({})).is_none());
    }

    #[test]
    fn a_wrong_decision_names_the_field() {
        let err = approvals(json!({"_bash_": "maybe"})).unwrap_err().to_string();
        assert!(err.contains("approvals._bash_") && err.contains("maybe"), "{err}");
        assert!(approvals(json!({"_bash_": 1})).is_err());
        assert!(approvals(json!({":ls": "ask"})).is_err());
        assert!(approvals(json!({})).unwrap().is_empty());
    }
}
