//! How the demo model answers a request with a response format (structured output, the
//! `demoStructuredOutput` agent): one JSON object of the schema. A property takes the value of the
//! same name in a tool result when its type fits, else a placeholder of its type — so the
//! answer always validates against schemas of the usual shapes (objects, arrays, strings,
//! numbers, booleans, `enum`, `const`).

use serde_json::{Map, Value, json};

use agw_llm::ChatRequest;

/// The answer's JSON text, when the request asks for a response format.
pub(crate) fn answer(request: &ChatRequest, results: &[(&str, &str)]) -> Option<String> {
    let format = request.response_format.as_ref()?;
    let found: Vec<Map<String, Value>> = results
        .iter()
        .filter_map(|(_, result)| match serde_json::from_str(result) {
            Ok(Value::Object(map)) => Some(map),
            _ => None,
        })
        .collect();
    Some(instance(&format.schema, None, &found).to_string())
}

/// A value of `schema`; `name` is the property it fills.
fn instance(schema: &Value, name: Option<&str>, found: &[Map<String, Value>]) -> Value {
    if let Some(value) = schema.get("const") {
        return value.clone();
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|values| values.first()) {
        return first.clone();
    }
    let kind = schema.get("type").and_then(Value::as_str).unwrap_or(if schema.get("properties").is_some() {
        "object"
    } else {
        "string"
    });
    if let Some(value) = name.and_then(|name| found.iter().find_map(|map| map.get(name))).filter(|v| fits(kind, v)) {
        return value.clone();
    }
    match kind {
        "object" => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let filled: Map<String, Value> = properties
                .into_iter()
                .flatten()
                .map(|(key, sub)| (key.clone(), instance(sub, Some(key), found)))
                .collect();
            Value::Object(filled)
        }
        "array" => json!([instance(schema.get("items").unwrap_or(&Value::Null), None, found)]),
        "integer" | "number" => json!(1),
        "boolean" => json!(true),
        "null" => Value::Null,
        _ => json!(format!("{} (offline demo model)", name.unwrap_or("text"))),
    }
}

/// Whether `value` is of JSON Schema type `kind`.
fn fits(kind: &str, value: &Value) -> bool {
    match kind {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agw_llm::request::ResponseFormat;

    #[test]
    fn the_answer_fills_the_schema_from_the_tool_results_else_with_placeholders() {
        let schema = json!({"type": "object", "properties": {
            "city": {"type": "string"}, "temperatureC": {"type": "number"}, "humidity": {"type": "string"},
            "advice": {"type": "string"}, "level": {"enum": ["low", "high"]}, "tags": {"type": "array", "items": {"type": "string"}},
            "ok": {"type": "boolean"}}});
        let request = ChatRequest {
            response_format: Some(ResponseFormat { name: "w".into(), schema }),
            ..ChatRequest::default()
        };
        let result = r#"{"city":"Tokyo","temperatureC":21,"humidity":60}"#;
        let text = answer(&request, &[("mock_city_weather", result)]).unwrap();
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            json!({"city": "Tokyo", "temperatureC": 21, "humidity": "humidity (offline demo model)",
                "advice": "advice (offline demo model)", "level": "low", "tags": ["text (offline demo model)"], "ok": true})
        );
        assert!(answer(&ChatRequest::default(), &[]).is_none(), "no format, no JSON");
    }
}
