//! `outputSchema` (agw extension, docs/models.md "Structured output"): the JSON a run's answer
//! must be. Compiled once, when the agent file (or the request that carries one) is read; every
//! answer is checked against it.

use std::sync::Arc;

use agw_llm::request::ResponseFormat;
use serde_json::Value;

/// Largest schema accepted, serialised: it is sent with every answer turn.
pub const MAX_OUTPUT_SCHEMA_BYTES: usize = 64 * 1024;

/// How many of an answer's problems the model is told (and `run.error` says).
const MAX_PROBLEMS: usize = 8;

/// Why a schema cannot be an output schema.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputSchemaError {
    /// Not a JSON object.
    #[error("must be a JSON Schema object")]
    NotAnObject,
    /// Providers only take object answers (OpenAI's `response_format`, Anthropic's tool input).
    #[error("must describe an object: its root needs \"type\": \"object\"")]
    RootNotObject,
    /// Over [`MAX_OUTPUT_SCHEMA_BYTES`].
    #[error("is {0} bytes; at most 65536 are allowed")]
    TooLarge(usize),
    /// The validator refused it (not a valid JSON Schema, or a `$ref` outside the schema).
    #[error("is not a usable JSON Schema: {0}")]
    Invalid(String),
}

/// Why an answer is not what the schema asks for. Its text is what the model is told in the
/// repair turn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerMismatch {
    /// The answer does not parse as JSON.
    #[error("the answer is not JSON ({0})")]
    NotJson(String),
    /// It parses, but breaks these rules of the schema (the first eight).
    #[error("the answer does not match the schema: {}", .0.join("; "))]
    Invalid(Vec<String>),
}

/// A compiled output schema. Cheap to clone.
#[derive(Clone)]
pub struct OutputSchema(Arc<Compiled>);

struct Compiled {
    /// The name providers get (from the schema's `title`, else `output`).
    name: String,
    schema: Value,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputSchema").field("name", &self.0.name).field("schema", &self.0.schema).finish()
    }
}

impl PartialEq for OutputSchema {
    fn eq(&self, other: &Self) -> bool {
        self.0.schema == other.0.schema
    }
}

impl OutputSchema {
    /// Compiles `schema`: a JSON Schema object whose root describes an object, at most
    /// [`MAX_OUTPUT_SCHEMA_BYTES`], with no reference to anything outside itself.
    ///
    /// # Errors
    /// What makes it unusable.
    pub fn compile(schema: Value) -> Result<Self, OutputSchemaError> {
        let Some(root) = schema.as_object() else { return Err(OutputSchemaError::NotAnObject) };
        if root.get("type").and_then(Value::as_str) != Some("object") {
            return Err(OutputSchemaError::RootNotObject);
        }
        let size = serde_json::to_string(&schema).map_or(usize::MAX, |text| text.len());
        if size > MAX_OUTPUT_SCHEMA_BYTES {
            return Err(OutputSchemaError::TooLarge(size));
        }
        // Built without remote or file resolution: a `$ref` elsewhere fails here.
        let validator = jsonschema::validator_for(&schema).map_err(|e| OutputSchemaError::Invalid(e.to_string()))?;
        let name = root.get("title").and_then(Value::as_str).map(format_name).unwrap_or_default();
        let name = if name.is_empty() { "output".to_owned() } else { name };
        Ok(Self(Arc::new(Compiled { name, schema, validator })))
    }

    /// The name providers get.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The schema as written.
    pub fn schema(&self) -> &Value {
        &self.0.schema
    }

    /// What a model call carries.
    pub fn response_format(&self) -> ResponseFormat {
        ResponseFormat { name: self.0.name.clone(), schema: self.0.schema.clone() }
    }

    /// The answer as JSON when it matches. The text may be wrapped in one Markdown code fence
    /// (```` ```json ````), as models often write it.
    ///
    /// # Errors
    /// What is wrong with it, for the model to correct.
    pub fn check(&self, answer: &str) -> Result<Value, AnswerMismatch> {
        let value: Value =
            serde_json::from_str(unfenced(answer)).map_err(|e| AnswerMismatch::NotJson(e.to_string()))?;
        let problems: Vec<String> = self
            .0
            .validator
            .iter_errors(&value)
            .take(MAX_PROBLEMS)
            .map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() { e.to_string() } else { format!("at {at}: {e}") }
            })
            .collect();
        if problems.is_empty() { Ok(value) } else { Err(AnswerMismatch::Invalid(problems)) }
    }
}

/// A schema title as a name providers accept: letters, digits, `_` and `-`, at most 64; spaces
/// become `_`, anything else is dropped.
fn format_name(title: &str) -> String {
    title
        .trim()
        .chars()
        .filter_map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => Some(c),
            c if c.is_whitespace() => Some('_'),
            _ => None,
        })
        .take(64)
        .collect()
}

/// `text` without surrounding whitespace and one surrounding Markdown code fence.
fn unfenced(text: &str) -> &str {
    let text = text.trim();
    let Some(rest) = text.strip_prefix("```") else { return text };
    let Some(body) = rest.strip_suffix("```") else { return text };
    // The fence's info string (`json`) runs to the end of its line.
    body.split_once('\n').map_or(body, |(_, inner)| inner).trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn weather() -> OutputSchema {
        OutputSchema::compile(json!({
            "title": "Weather report!",
            "type": "object",
            "properties": {"city": {"type": "string"}, "celsius": {"type": "number", "minimum": -90}},
            "required": ["city", "celsius"],
            "additionalProperties": false
        }))
        .expect("compiles")
    }

    #[test]
    fn a_matching_answer_is_its_json_fenced_or_not() {
        let schema = weather();
        assert_eq!(schema.name(), "Weather_report");
        let expected = json!({"city": "Paris", "celsius": 21.5});
        assert_eq!(schema.check(r#" {"city":"Paris","celsius":21.5} "#), Ok(expected.clone()));
        assert_eq!(schema.check("```json\n{\"city\":\"Paris\",\"celsius\":21.5}\n```"), Ok(expected));
    }

    #[test]
    fn a_wrong_answer_says_where_and_what() {
        let schema = weather();
        let Err(AnswerMismatch::Invalid(problems)) = schema.check(r#"{"city":7,"celsius":-100,"x":1}"#) else {
            panic!("invalid")
        };
        let all = problems.join("\n");
        assert!(all.contains("at /city") && all.contains("string"), "{all}");
        assert!(all.contains("at /celsius") && all.contains("-90"), "{all}");
        assert!(all.contains("x"), "additional property named: {all}");
        let missing = schema.check(r#"{"city":"Paris"}"#).unwrap_err().to_string();
        assert!(
            missing.starts_with("the answer does not match the schema: ") && missing.contains("celsius"),
            "{missing}"
        );
        let prose = schema.check("It is sunny in Paris.").unwrap_err();
        assert!(matches!(prose, AnswerMismatch::NotJson(_)) && prose.to_string().starts_with("the answer is not JSON"));
    }

    #[test]
    fn an_agent_file_names_the_field_of_a_bad_schema() {
        let file = |schema: &str| {
            crate::definition::AgentDefinition::from_json(
                "a.json",
                &format!(
                    r#"{{"key":"a","modelConfig":{{"providerKey":"p","model":"m"}},"mode":"ONESHOT",
                        "plain":{{"systemPrompt":"s"}},"outputSchema":{schema}}}"#
                ),
            )
        };
        let e = file(r#"{"type":"array"}"#).unwrap_err().to_string();
        assert!(e.contains("outputSchema") && e.contains("\"type\": \"object\""), "{e}");
        assert_eq!(file("null").unwrap().output_schema, None);
        let ok = file(r#"{"type":"object","title":"Report"}"#).unwrap();
        assert_eq!(ok.output_schema.map(|s| s.name().to_owned()), Some("Report".to_owned()));
    }

    #[test]
    fn unusable_schemas_are_refused_with_the_reason() {
        assert_eq!(OutputSchema::compile(json!("object")).unwrap_err(), OutputSchemaError::NotAnObject);
        assert_eq!(OutputSchema::compile(json!({"type": "array"})).unwrap_err(), OutputSchemaError::RootNotObject);
        let invalid = OutputSchema::compile(json!({"type": "object", "properties": {"a": {"type": "nope"}}}));
        assert!(matches!(invalid, Err(OutputSchemaError::Invalid(_))), "{invalid:?}");
        let remote = OutputSchema::compile(json!({"type": "object", "$ref": "https://example.com/s.json"}));
        assert!(matches!(remote, Err(OutputSchemaError::Invalid(_))), "never fetched: {remote:?}");
        let big = json!({"type": "object", "description": "x".repeat(MAX_OUTPUT_SCHEMA_BYTES)});
        assert!(matches!(OutputSchema::compile(big), Err(OutputSchemaError::TooLarge(_))));
        let untitled = OutputSchema::compile(json!({"type": "object", "title": "§§"})).unwrap();
        assert_eq!(untitled.name(), "output");
    }
}
