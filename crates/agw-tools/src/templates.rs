//! Argument templates: `{{tool.field}}` and `{{tool.field±Nd}}` string values replaced by values
//! from earlier tool results of the same run (docs/contract/tools-skills-viewports.md §6).

use serde_json::Value;

use crate::dates;

/// One executed tool call of the current run.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    /// The tool's name, as templates refer to it (`{{name.field}}`).
    pub name: String,
    /// The result parsed as JSON, when it was JSON; only objects can supply fields.
    pub result_json: Option<Value>,
}

impl RecordedCall {
    /// Records a call from its result text, parsing the text as JSON when it is JSON.
    pub fn from_result_text(name: impl Into<String>, result_text: &str) -> RecordedCall {
        RecordedCall { name: name.into(), result_json: serde_json::from_str(result_text).ok() }
    }
}

/// Returns `args` with every template string (at any depth) replaced; `calls` is oldest first.
/// A template that finds nothing stays as written.
pub fn resolve(args: &Value, calls: &[RecordedCall]) -> Value {
    match args {
        Value::String(text) => {
            parse_template(text).and_then(|template| lookup(&template, calls)).unwrap_or_else(|| args.clone())
        }
        Value::Array(items) => Value::Array(items.iter().map(|item| resolve(item, calls)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), resolve(v, calls))).collect()),
        other => other.clone(),
    }
}

#[derive(Debug, PartialEq)]
struct Template<'a> {
    tool: &'a str,
    field: &'a str,
    offset_days: Option<i64>,
}

/// Matches `^\{\{\s*([a-zA-Z0-9_]+)\.([a-zA-Z0-9_]+)([+-]\d+d)?\s*}}$` against the trimmed text.
fn parse_template(text: &str) -> Option<Template<'_>> {
    let inner = text.trim().strip_prefix("{{")?.strip_suffix("}}")?.trim_matches(is_regex_space);
    let (tool, rest) = inner.split_once('.')?;
    if !is_identifier(tool) {
        return None;
    }
    let field_end = rest.find(|c: char| !is_identifier_char(c)).unwrap_or(rest.len());
    let (field, offset) = rest.split_at(field_end);
    if field.is_empty() {
        return None;
    }
    let offset_days = if offset.is_empty() { None } else { Some(parse_offset(offset)?) };
    Some(Template { tool, field, offset_days })
}

/// `+3d` / `-10d`. Digits that overflow make the template not match, like a bad date would.
fn parse_offset(offset: &str) -> Option<i64> {
    let digits = offset.strip_suffix('d')?;
    let (sign, digits) = match digits.as_bytes().first()? {
        b'+' => (1, &digits[1..]),
        b'-' => (-1, &digits[1..]),
        _ => return None,
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse::<i64>().ok().map(|n| sign * n)
}

fn is_identifier(text: &str) -> bool {
    !text.is_empty() && text.chars().all(is_identifier_char)
}

fn is_identifier_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Java's `\s`: ASCII whitespace including vertical tab.
fn is_regex_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0b}' | '\u{0c}' | '\r')
}

/// The newest call of that tool whose object result has the field (non-null) supplies the value.
fn lookup(template: &Template<'_>, calls: &[RecordedCall]) -> Option<Value> {
    let value = calls
        .iter()
        .rev()
        .filter(|call| call.name.trim().eq_ignore_ascii_case(template.tool))
        .find_map(|call| call.result_json.as_ref()?.as_object()?.get(template.field).filter(|v| !v.is_null()))?;
    match template.offset_days {
        None => Some(value.clone()),
        Some(days) => {
            let date = dates::parse_ymd(value.as_str()?)?;
            Some(Value::String(dates::format_ymd(dates::add_days(date, days)?)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, result: Value) -> RecordedCall {
        RecordedCall { name: name.to_owned(), result_json: Some(result) }
    }

    #[test]
    fn parses_the_template_grammar() {
        assert_eq!(parse_template("{{a.b}}"), Some(Template { tool: "a", field: "b", offset_days: None }));
        assert_eq!(
            parse_template("  {{ a_1.B2-3d }} "),
            Some(Template { tool: "a_1", field: "B2", offset_days: Some(-3) })
        );
        assert_eq!(parse_template("{{a.b+10d}}").and_then(|t| t.offset_days), Some(10));
        for no in [
            "{{a}}",
            "{{.b}}",
            "{{a.}}",
            "{{a.b+d}}",
            "{{a.b+1}}",
            "{{a.b*1d}}",
            "x{{a.b}}",
            "{{a.b}}x",
            "{{a-b.c}}",
            "{{a.b.c}}",
            "{a.b}",
            "{{a.b+99999999999999999999d}}",
        ] {
            assert_eq!(parse_template(no), None, "{no}");
        }
    }

    #[test]
    fn replaces_with_any_json_type_and_keeps_order() {
        let calls = [call("city_datetime", json!({"date":"2026-02-13","n":3,"obj":{"k":[1]}}))];
        let args =
            json!({"date":"{{city_datetime.date}}","n":"{{CITY_DATETIME.n}}","o":["{{city_datetime.obj}}"],"k":"v"});
        let out = resolve(&args, &calls);
        assert_eq!(out, json!({"date":"2026-02-13","n":3,"o":[{"k":[1]}],"k":"v"}));
        assert_eq!(out.as_object().unwrap().keys().collect::<Vec<_>>(), ["date", "n", "o", "k"]);
    }

    #[test]
    fn date_offsets() {
        let calls = [call("city_datetime", json!({"date":"2026-02-13"}))];
        assert_eq!(resolve(&json!("{{city_datetime.date+1d}}"), &calls), json!("2026-02-14"));
        assert_eq!(resolve(&json!("{{city_datetime.date+16d}}"), &calls), json!("2026-03-01"));
        assert_eq!(resolve(&json!("{{city_datetime.date-44d}}"), &calls), json!("2025-12-31"));
        assert_eq!(resolve(&json!("{{city_datetime.date+0d}}"), &calls), json!("2026-02-13"));
    }

    #[test]
    fn offsets_on_non_dates_keep_the_template() {
        let calls = [call("t", json!({"n":5,"s":"tomorrow","bad":"2026-02-30"}))];
        for field in ["n", "s", "bad"] {
            let template = format!("{{{{t.{field}+1d}}}}");
            assert_eq!(resolve(&json!(template), &calls), json!(template));
        }
    }

    #[test]
    fn newest_call_with_the_field_wins_and_older_ones_are_searched() {
        let calls = [
            call("weather", json!({"city":"old","temp":1})),
            call("weather", json!({"city":"new"})),
            call("other", json!({"temp":99})),
            RecordedCall::from_result_text("weather", "plain text"),
            call("weather", json!({"temp":null})),
        ];
        assert_eq!(resolve(&json!("{{weather.city}}"), &calls), json!("new"));
        assert_eq!(resolve(&json!("{{weather.temp}}"), &calls), json!(1));
    }

    #[test]
    fn chained_references_across_calls() {
        // A later call's result may itself have been produced from a resolved template.
        let mut calls = vec![call("city_datetime", json!({"date":"2026-02-13","city":"Shanghai"}))];
        let weather_args =
            resolve(&json!({"city":"{{city_datetime.city}}","date":"{{city_datetime.date+1d}}"}), &calls);
        assert_eq!(weather_args, json!({"city":"Shanghai","date":"2026-02-14"}));
        calls.push(call("mock_city_weather", json!({"date": weather_args["date"].clone()})));
        assert_eq!(resolve(&json!("{{mock_city_weather.date+1d}}"), &calls), json!("2026-02-15"));
    }

    #[test]
    fn no_match_keeps_the_original() {
        let calls = [call("a", json!({"x":1})), RecordedCall { name: "b".into(), result_json: None }];
        for text in ["{{missing.x}}", "{{a.y}}", "{{b.x}}", "not a template", " {{a.x}} tail"] {
            assert_eq!(resolve(&json!(text), &calls), json!(text));
        }
        assert_eq!(resolve(&json!(["{{a.x}}", 2, null, true]), &[]), json!(["{{a.x}}", 2, null, true]));
    }

    #[test]
    fn surrounding_whitespace_is_allowed() {
        let calls = [call("a", json!({"x":"v"}))];
        assert_eq!(resolve(&json!("  {{  a.x  }}\n"), &calls), json!("v"));
    }
}
