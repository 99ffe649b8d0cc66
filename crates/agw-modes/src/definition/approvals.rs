//! `toolConfig.approvals`: which calls need a person's approval (issue 15, `docs/approvals.md`)
//! — every kind of call the model can make: backend and MCP tools (`mcp__<server>__<tool>`),
//! frontend tools and actions (issue 32). A pattern names a tool (or a glob over tool names, `*`,
//! `?`, `[a-z]`); `_bash_:<glob>` matches `_bash_` calls by their command as `_bash_` reads it
//! ([`BashCommand::approval_text`]: the words joined by one space, git's neutral global options
//! dropped), and a command `_bash_` would refuse to read is refused before any rule. Several
//! matching rules: `deny` beats `ask` beats `allow`; no matching rule: allow (the behaviour
//! without approvals).

use agw_tools::{BashCommand, BashCommandError};
use serde_json::Value;

use super::error::DefinitionError;
use super::raw::Obj;

/// The tool whose rules may name a command.
const BASH: &str = "_bash_";

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
    /// The pattern as written (trimmed): what `awaiting.ask` shows and, with the agent and the
    /// tool, what `always` remembers.
    pub pattern: String,
    tool: String,
    /// `_bash_` rules: the command glob, read like a command ([`BashCommand::approval_text`]).
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
            let invalid = |reason: String| DefinitionError::InvalidRule { field: obj.field(key), reason };
            let (tool, command) = match pattern.split_once(':') {
                Some((tool, command)) => {
                    let tool = tool.trim().to_lowercase();
                    if tool != BASH {
                        return Err(invalid(format!(
                            "only `_bash_` calls have a command to match (`_bash_:<command glob>`), not `{tool}`"
                        )));
                    }
                    // Read like the commands it is compared with, so `git  log*` is `git log*`;
                    // a glob `_bash_` could never run (shell syntax, a control character) would
                    // match nothing.
                    let command = BashCommand::parse(command)
                        .map_err(|e| invalid(format!("the command glob is not a command `_bash_` runs: {e}")))?;
                    (tool, Some(command.approval_text()))
                }
                None => (pattern.to_lowercase(), None),
            };
            if tool.is_empty() {
                return Err(invalid("no tool name or glob".into()));
            }
            rules.push(ApprovalRule { pattern, tool, command, decision });
        }
        Ok(Self { rules })
    }

    /// No rules at all.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// These rules and `parent`'s together: the strictest matching rule decides, so a sub-agent
    /// run under `parent` is asked or denied whatever either asks or denies, and a parent's
    /// `allow` never loosens the child's own `ask` (docs/multi-agent.md).
    pub fn narrowed_by(&self, parent: &Approvals) -> Approvals {
        let mut rules = self.rules.clone();
        rules.extend(parent.rules.iter().filter(|rule| !self.rules.contains(rule)).cloned());
        Approvals { rules }
    }

    /// The rule that decides a call of `tool` (normalized name) with `args`: the strictest of
    /// the matching rules; `Ok(None)` when none matches (allow). A `_bash_` call whose command
    /// `_bash_` would refuse to read is `Err` whatever the rules say: it never runs, and what a
    /// person would be asked about would not be what `_bash_` sees.
    pub fn decide(&self, tool: &str, args: &Value) -> Result<Option<&ApprovalRule>, BashCommandError> {
        let command = match tool {
            BASH => Some(BashCommand::from_args(args)?.approval_text()),
            _ => None,
        };
        Ok(self.strictest(tool, command.as_deref()))
    }

    /// The rule that decides a call of `tool`, which is not `_bash_`: only `_bash_` rules look
    /// at arguments, so this is known as soon as the call's name streams.
    pub fn decide_by_name(&self, tool: &str) -> Option<&ApprovalRule> {
        debug_assert_ne!(tool, BASH, "`_bash_` is decided by its command");
        self.strictest(tool, None)
    }

    fn strictest(&self, tool: &str, command: Option<&str>) -> Option<&ApprovalRule> {
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

    fn decided<'a>(a: &'a Approvals, tool: &str, args: Value) -> Option<&'a ApprovalRule> {
        a.decide(tool, &args).expect("a command _bash_ reads")
    }

    #[test]
    fn the_strictest_matching_rule_decides_and_no_rule_allows() {
        let a = approvals(json!({"*": "allow", "mock_*": "ask", "mock_secret": "deny", "_bash_:git push*": "ask"}))
            .unwrap();
        assert_eq!(decided(&a, "mock_secret", json!({})).unwrap().decision, ApprovalDecision::Deny);
        assert_eq!(decided(&a, "mock_weather", json!({})).unwrap().pattern, "mock_*");
        assert_eq!(decided(&a, "city_datetime", json!({})).unwrap().decision, ApprovalDecision::Allow);
        let push = decided(&a, "_bash_", json!({"command": " git push origin main"})).unwrap();
        assert_eq!((push.decision, push.pattern.as_str()), (ApprovalDecision::Ask, "_bash_:git push*"));
        assert_eq!(decided(&a, "_bash_", json!({"command": "ls"})).unwrap().decision, ApprovalDecision::Allow);
        assert!(decided(&approvals(json!({"x": "ask"})).unwrap(), "y", json!({})).is_none());
        assert_eq!(a.decide_by_name("mock_secret").unwrap().decision, ApprovalDecision::Deny);
    }

    #[test]
    fn bash_rules_match_the_command_as_bash_reads_it() {
        let a = approvals(json!({"_bash_:cat *": "deny", "_bash_:git  log*": "deny", "_bash_:head *": "ask"})).unwrap();
        for command in ["cat secret.txt", "cat\tsecret.txt", "cat   secret.txt", "\tcat secret.txt "] {
            let rule = decided(&a, "_bash_", json!({"command": command})).unwrap();
            assert_eq!((rule.decision, rule.pattern.as_str()), (ApprovalDecision::Deny, "_bash_:cat *"), "{command:?}");
        }
        for command in
            ["git log", "git  log", "git\tlog", "git --no-pager log", "git -P log -p", "git -P --no-pager log"]
        {
            let rule = decided(&a, "_bash_", json!({"command": command})).unwrap();
            assert_eq!(rule.pattern, "_bash_:git  log*", "{command:?}");
        }
        assert_eq!(decided(&a, "_bash_", json!({"command": "head\t-n 1 x"})).unwrap().decision, ApprovalDecision::Ask);
        assert!(decided(&a, "_bash_", json!({"command": "git status"})).is_none());
        for command in ["cat\u{a0}secret.txt", "cat\u{3000}secret.txt", "cat\u{2028}secret.txt", "cat\u{1}x", ""] {
            assert!(
                a.decide("_bash_", &json!({"command": command})).is_err(),
                "{command:?} is refused before any rule"
            );
        }
        // Another tool's `command` argument is not a command.
        assert!(decided(&a, "mock_x", json!({"command": "cat x"})).is_none());
    }

    #[test]
    fn a_wrong_decision_or_a_rule_that_cannot_match_names_the_field() {
        let err = approvals(json!({"_bash_": "maybe"})).unwrap_err().to_string();
        assert!(err.contains("approvals._bash_") && err.contains("maybe"), "{err}");
        assert!(approvals(json!({"_bash_": 1})).is_err());
        assert!(approvals(json!({":ls": "ask"})).is_err());
        assert!(approvals(json!({})).unwrap().is_empty());
        let err = approvals(json!({"mock_*:x": "deny"})).unwrap_err().to_string();
        assert!(err.contains("approvals.mock_*:x") && err.contains("only `_bash_`"), "{err}");
        let err = approvals(json!({"_bash_:cat\u{a0}*": "deny"})).unwrap_err().to_string();
        assert!(err.contains("U+00A0"), "{err}");
        assert!(approvals(json!({"_bash_:ls | x": "deny"})).is_err());
        assert!(approvals(json!({"_bash_:": "deny"})).is_err());
    }
}
