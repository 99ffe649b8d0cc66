//! The arguments of `_skill_run_script_` (docs/contract/tools-skills-viewports.md §4.5 steps 1–5), checked in the
//! contract's order; the error is the `error` text of the failure object.

use std::time::Duration;

use serde_json::Value;

/// A call whose arguments are well-formed (the file system is not consulted yet).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// Trimmed, case as given.
    pub skill: String,
    pub source: Source,
    pub args: Vec<String>,
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Source {
    /// A path relative to the skill directory (trimmed).
    File(String),
    /// Python source (as given).
    Inline(String),
}

/// Arguments that do not make a call (§4.5 steps 1–4). The display text is the `error` of the
/// failure object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ArgsError {
    #[error("Missing argument: skill")]
    MissingSkill,
    #[error("Missing argument: script or pythonCode")]
    MissingSource,
    #[error("Arguments script and pythonCode are mutually exclusive.")]
    BothSources,
    /// Longer than the limit, which it carries (in characters).
    #[error("pythonCode too long. Maximum length is {0} characters.")]
    InlineTooLong(usize),
    #[error("Invalid args. Expected array of strings.")]
    InvalidArgs,
}

pub(crate) struct Limits {
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    pub inline_max_chars: usize,
}

pub(crate) fn parse(input: &Value, limits: &Limits) -> Result<Request, ArgsError> {
    // 1.
    let skill = text(input.get("skill")).map(|s| s.trim().to_owned()).unwrap_or_default();
    if skill.is_empty() {
        return Err(ArgsError::MissingSkill);
    }
    // 2.
    let script = text(input.get("script")).map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
    let code = text(input.get("pythonCode")).filter(|s| !s.trim().is_empty());
    let source = match (script, code) {
        (None, None) => return Err(ArgsError::MissingSource),
        (Some(_), Some(_)) => return Err(ArgsError::BothSources),
        (Some(script), None) => Source::File(script),
        (None, Some(code)) => {
            // 3.
            if code.chars().count() > limits.inline_max_chars {
                return Err(ArgsError::InlineTooLong(limits.inline_max_chars));
            }
            Source::Inline(code)
        }
    };
    // 4. Null items are dropped, other non-strings stringified (numbers as JSON writes them).
    let args = match input.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .filter(|item| !item.is_null())
            .map(|item| match item {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect(),
        Some(_) => return Err(ArgsError::InvalidArgs),
    };
    // 5.
    let timeout_ms = timeout_ms(input.get("timeoutMs"), limits);
    Ok(Request { skill, source, args, timeout_ms })
}

/// A number or numeric string (fractions truncated); absent, invalid or below 1 ms → the default;
/// above the maximum → the maximum.
fn timeout_ms(value: Option<&Value>, limits: &Limits) -> u64 {
    let requested = match value {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    let max = millis(limits.max_timeout);
    match requested {
        Some(ms) if ms.is_finite() && ms >= 1.0 => {
            // Saturating float→int conversion; then capped.
            (ms as u64).min(max)
        }
        _ => millis(limits.default_timeout).min(max),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const LIMITS: Limits = Limits {
        default_timeout: Duration::from_secs(10),
        max_timeout: Duration::from_secs(120),
        inline_max_chars: 10,
    };

    fn err(args: Value) -> String {
        parse(&args, &LIMITS).unwrap_err().to_string()
    }

    fn ok(args: Value) -> Request {
        parse(&args, &LIMITS).unwrap()
    }

    #[test]
    fn failures_in_contract_order() {
        assert_eq!(err(json!({})), "Missing argument: skill");
        assert_eq!(err(json!({"skill":"  ","script":"a.py"})), "Missing argument: skill");
        assert_eq!(err(json!({"skill":null})), "Missing argument: skill");
        assert_eq!(err(json!({"skill":"s"})), "Missing argument: script or pythonCode");
        assert_eq!(err(json!({"skill":"s","script":" ","pythonCode":"\n"})), "Missing argument: script or pythonCode");
        assert_eq!(
            err(json!({"skill":"s","script":"a.py","pythonCode":"print(1)"})),
            "Arguments script and pythonCode are mutually exclusive."
        );
        assert_eq!(
            err(json!({"skill":"s","pythonCode":"print(12345)","args":"x"})),
            "pythonCode too long. Maximum length is 10 characters."
        );
        assert_eq!(err(json!({"skill":"s","script":"a.py","args":"x"})), "Invalid args. Expected array of strings.");
        assert_eq!(
            err(json!({"skill":"s","script":"a.py","args":{"a":1}})),
            "Invalid args. Expected array of strings."
        );
    }

    #[test]
    fn inline_limit_counts_characters() {
        // 10 characters, 30 bytes.
        assert_eq!(
            ok(json!({"skill":"s","pythonCode":"数数数数数数数数数数"})).source,
            Source::Inline("数数数数数数数数数数".into())
        );
    }

    #[test]
    fn values_are_normalised() {
        let request = ok(
            json!({"skill":"  Math_Basic ","script":" scripts/calc.py ","args":["--a", 12, null, 1.5, true, {"k":"v"}]}),
        );
        assert_eq!(
            request,
            Request {
                skill: "Math_Basic".into(),
                source: Source::File("scripts/calc.py".into()),
                args: vec!["--a".into(), "12".into(), "1.5".into(), "true".into(), "{\"k\":\"v\"}".into()],
                timeout_ms: 10_000,
            }
        );
        assert!(ok(json!({"skill":"s","script":"a.py","args":null})).args.is_empty());
    }

    #[test]
    fn timeouts() {
        let t = |v: Value| ok(json!({"skill":"s","script":"a.py","timeoutMs":v})).timeout_ms;
        assert_eq!(t(json!(1500)), 1500);
        assert_eq!(t(json!(" 2500 ")), 2500);
        assert_eq!(t(json!("1500.9")), 1500);
        assert_eq!(t(json!(0)), 10_000);
        assert_eq!(t(json!(-5)), 10_000);
        assert_eq!(t(json!(0.5)), 10_000);
        assert_eq!(t(json!("soon")), 10_000);
        assert_eq!(t(json!(null)), 10_000);
        assert_eq!(t(json!(true)), 10_000);
        assert_eq!(t(json!(999_999_999)), 120_000);
        assert_eq!(t(json!(1e300)), 120_000);
        assert_eq!(ok(json!({"skill":"s","script":"a.py"})).timeout_ms, 10_000);
    }
}
