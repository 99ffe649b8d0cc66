//! How the demo model answers after an image tool (issue 36, the `demoCredits` agent): a result
//! with an `imageUrl` is shown as a Markdown image; a call that did not run (the user cancelled
//! the tool's pause, nobody answered it: `{"executed": false, "detail": …}`) is explained.

use serde_json::Value;

/// The answer, when a result is an image or a call that did not run.
pub(crate) fn answer(results: &[(&str, &str)]) -> Option<String> {
    let mut lines = Vec::new();
    for (name, result) in results {
        let Ok(value) = serde_json::from_str::<Value>(result) else { continue };
        if let Some(url) = value.get("imageUrl").and_then(Value::as_str) {
            let prompt = value.get("prompt").and_then(Value::as_str).unwrap_or("the image");
            lines.push(format!("Your image is ready (from `{name}`):\n\n![{prompt}]({url})"));
        } else if value.get("executed") == Some(&Value::Bool(false)) {
            let detail = value.get("detail").and_then(Value::as_str).unwrap_or("it did not run");
            lines.push(format!("I could not use `{name}`: {detail}"));
        }
    }
    (!lines.is_empty()).then(|| lines.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_shown_and_calls_that_did_not_run_explained() {
        let image = r#"{"imageUrl":"https://images.example.com/a.png","prompt":"a fox"}"#;
        let answer = answer(&[("mock_image_generate", image)]).unwrap();
        assert!(answer.ends_with("![a fox](https://images.example.com/a.png)"), "{answer}");
        let declined = r#"{"executed":false,"reason":"declined","detail":"the user declined: Not enough credits"}"#;
        let answer = super::answer(&[("mock_image_generate", declined)]).unwrap();
        assert_eq!(answer, "I could not use `mock_image_generate`: the user declined: Not enough credits");
        assert_eq!(super::answer(&[("mock_city_weather", r#"{"city":"x"}"#)]), None);
    }
}
