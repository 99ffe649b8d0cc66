//! Verdicts of the guards that are not rules: a judge model's answer ([`Verdict::parse_answer`])
//! and a webhook's JSON body ([`Verdict::from_webhook`]).

use serde_json::Value;

use crate::error::VerdictError;
use crate::rules::Action;

/// A judge's or webhook's decision on a text: `Allow`, `Warn` or `Block` (never `Redact`: only
/// rules know what to replace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `Allow`, `Warn` or `Block`.
    pub action: Action,
    /// Why, as the judge or webhook said it; empty when it said nothing.
    pub reason: String,
}

/// The verdict words, case-insensitive.
fn verdict_action(word: &str) -> Option<Action> {
    match word.to_ascii_lowercase().as_str() {
        "allow" => Some(Action::Allow),
        "warn" => Some(Action::Warn),
        "block" => Some(Action::Block),
        _ => None,
    }
}

impl Verdict {
    /// Reads a judge model's answer: a JSON object `{"action": …, "reason": …}` (`"verdict"` is
    /// accepted for `"action"`; other keys are ignored), bare or in a ```` ``` ```` / ```` ```json ````
    /// fence; or text whose first word is `ALLOW`, `WARN` or `BLOCK` (any case, optionally in
    /// `*`/`_` emphasis), the rest (after `:`, `-`, `.`, `,`) being the reason.
    ///
    /// `None` when the answer says none of these — the caller decides what an unreadable judge
    /// means. An object with another action (`"redact"`, `"deny"`) is `None` too, never a guess.
    pub fn parse_answer(text: &str) -> Option<Verdict> {
        let text = unfence(text.trim());
        if text.starts_with('{') {
            let value: Value = serde_json::from_str(text).ok()?;
            let object = value.as_object()?;
            let action = match (object.get("action"), object.get("verdict")) {
                (Some(a), Some(v)) if a != v => return None,
                (Some(a), _) | (None, Some(a)) => verdict_action(a.as_str()?)?,
                (None, None) => return None,
            };
            let reason = match object.get("reason") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.trim().to_owned(),
                Some(_) => return None,
            };
            return Some(Verdict { action, reason });
        }
        let rest = text.trim_start_matches(['*', '_', '"', '\'', '`']);
        let word_end = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
        let action = verdict_action(&rest[..word_end])?;
        let reason = rest[word_end..]
            .trim_start_matches(['*', '_', '"', '\'', '`'])
            .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ':' | '-' | '.' | ',' | '—' | '–'))
            .trim();
        Some(Verdict { action, reason: reason.to_owned() })
    }

    /// Reads a webhook's JSON body `{"action": "allow"|"warn"|"block", "reason"?: string}`.
    /// Other keys are ignored (a webhook may say more); the action is exact (lowercase, as
    /// documented) and any other, `"redact"` included, is an error.
    pub fn from_webhook(value: &Value) -> Result<Verdict, VerdictError> {
        let object = value.as_object().ok_or(VerdictError::NotAnObject)?;
        let word = object.get("action").and_then(Value::as_str).ok_or(VerdictError::NoAction)?;
        let action = match word {
            "allow" => Action::Allow,
            "warn" => Action::Warn,
            "block" => Action::Block,
            _ => return Err(VerdictError::UnknownAction(word.to_owned())),
        };
        let reason = match object.get("reason") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(VerdictError::ReasonNotString),
        };
        Ok(Verdict { action, reason })
    }
}

/// The inside of a Markdown code fence (```` ```json … ``` ````), or the text itself.
fn unfence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    // The info string ("json") runs to the end of the first line.
    let body = rest.split_once('\n').map_or("", |(_, body)| body);
    body.trim_end().strip_suffix("```").unwrap_or(body).trim()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(text: &str) -> Option<(Action, String)> {
        Verdict::parse_answer(text).map(|v| (v.action, v.reason))
    }

    #[test]
    fn a_json_answer_is_read_bare_or_fenced() {
        assert_eq!(answer(r#"{"action":"block","reason":"weapons"}"#), Some((Action::Block, "weapons".into())));
        assert_eq!(
            answer("```json\n{\"verdict\": \"WARN\", \"reason\": \"medical\"}\n```"),
            Some((Action::Warn, "medical".into()))
        );
        assert_eq!(answer("```\n{\"action\": \"allow\"}\n```\n"), Some((Action::Allow, String::new())));
        assert_eq!(answer(r#"{"action":"allow","confidence":0.9}"#), Some((Action::Allow, String::new())));
    }

    #[test]
    fn a_json_answer_with_another_action_is_not_a_verdict() {
        assert_eq!(answer(r#"{"action":"redact"}"#), None);
        assert_eq!(answer(r#"{"action":"deny"}"#), None);
        assert_eq!(answer(r#"{"reason":"no action"}"#), None);
        assert_eq!(answer(r#"{"action":"allow","verdict":"block"}"#), None);
        assert_eq!(answer(r#"{"action":1}"#), None);
        assert_eq!(answer(r#"{"action":"block","reason":7}"#), None);
        assert_eq!(answer("{not json"), None);
        assert_eq!(answer("```json\n[\"block\"]\n```"), None);
    }

    #[test]
    fn a_first_word_answer_is_read_with_its_reason() {
        assert_eq!(answer("BLOCK: describes a nerve agent"), Some((Action::Block, "describes a nerve agent".into())));
        assert_eq!(answer("  allow"), Some((Action::Allow, String::new())));
        assert_eq!(answer("Warn - dosage advice."), Some((Action::Warn, "dosage advice.".into())));
        assert_eq!(answer("**BLOCK** — unsafe"), Some((Action::Block, "unsafe".into())));
        assert_eq!(answer("block\nit is unsafe"), Some((Action::Block, "it is unsafe".into())));
    }

    #[test]
    fn other_first_words_are_not_verdicts() {
        assert_eq!(answer("ALLOWED"), None);
        assert_eq!(answer("I would block this"), None);
        assert_eq!(answer("REDACT"), None);
        assert_eq!(answer(""), None);
        assert_eq!(answer("```"), None);
    }

    #[test]
    fn a_webhook_body_is_read_strictly() {
        let v = Verdict::from_webhook(&json!({"action":"block","reason":"policy 7","ticket":1})).expect("verdict");
        assert_eq!((v.action, v.reason.as_str()), (Action::Block, "policy 7"));
        let v = Verdict::from_webhook(&json!({"action":"allow"})).expect("verdict");
        assert_eq!((v.action, v.reason.as_str()), (Action::Allow, ""));
        assert_eq!(Verdict::from_webhook(&json!("block")), Err(VerdictError::NotAnObject));
        assert_eq!(Verdict::from_webhook(&json!({"reason":"x"})), Err(VerdictError::NoAction));
        assert_eq!(
            Verdict::from_webhook(&json!({"action":"redact"})),
            Err(VerdictError::UnknownAction("redact".into()))
        );
        assert_eq!(Verdict::from_webhook(&json!({"action":"BLOCK"})), Err(VerdictError::UnknownAction("BLOCK".into())));
        assert_eq!(Verdict::from_webhook(&json!({"action":"warn","reason":["x"]})), Err(VerdictError::ReasonNotString));
        assert_eq!(
            VerdictError::UnknownAction("redact".into()).to_string(),
            "`action` must be \"allow\", \"warn\" or \"block\", not \"redact\""
        );
    }
}
