//! A scripted OpenAI-compatible provider as a process, for test suites in other languages (the
//! AI SDK, AG-UI and OpenAI SDK clients in `scripts/protocols/`): it serves the real wire format
//! (SSE chunks, `tool_calls` deltas, `reasoning_content`, usage, `[DONE]`) from a scenario file.
//!
//! ```text
//! cargo run -p agw-testkit --example fixture_provider -- scenario.json addr-file
//! ```
//!
//! It writes `http://127.0.0.1:<port>` to `addr-file` once it listens, and serves until killed.
//! A scenario is `{"rules":[…]}`; the first rule whose `whenMessage` is contained in one of the
//! request's user messages (and whose `whenStage`, if given, equals the `x-agw-stage` header, and
//! whose `whenToolResult`, if given, says whether the request's last message is a tool result,
//! and whose `whenImage`, if given, says whether that user message carries an image) answers. `updateCurrentTask` answers a PLAN_EXECUTE task round with `_plan_update_task_` for
//! the task the request names (`Current task ID: …`):
//!
//! ```json
//! {"whenMessage": "weather", "whenToolResult": false,
//!  "toolCall": {"id": "call_w", "name": "mock_city_weather", "arguments": "{\"city\":\"Paris\"}"}}
//! {"whenMessage": "think", "reasoning": ["Let me ", "think."], "text": ["4", "2"]}
//! {"whenMessage": "fail", "httpError": 400}
//! {"whenMessage": "plan", "whenStage": "agent-plan-execute-step-1", "updateCurrentTask": "completed"}
//! ```
//! Requests no rule matches get the text "ok".

use std::time::Duration;

use agw_testkit::{FixtureServer, Transcript};
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ToolCall {
    id: String,
    name: String,
    arguments: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Rule {
    when_message: String,
    #[serde(default)]
    when_stage: Option<String>,
    #[serde(default)]
    when_tool_result: Option<bool>,
    #[serde(default)]
    when_image: Option<bool>,
    #[serde(default)]
    reasoning: Vec<String>,
    #[serde(default)]
    text: Vec<String>,
    #[serde(default)]
    tool_call: Option<ToolCall>,
    #[serde(default)]
    http_error: Option<u16>,
    #[serde(default)]
    chunk_delay_ms: u64,
    #[serde(default)]
    update_current_task: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Scenario {
    rules: Vec<Rule>,
}

impl Rule {
    fn matches(&self, stage: Option<&str>, body: &Value) -> bool {
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let mentioned = messages
            .iter()
            .filter(|m| m["role"] == "user")
            .find(|m| agw_testkit::message_text(&m["content"]).is_some_and(|t| t.contains(&self.when_message)));
        let has_tool_result = messages.last().is_some_and(|m| m["role"] == "tool");
        let has_image =
            |m: &Value| m["content"].as_array().is_some_and(|parts| parts.iter().any(|p| p["type"] == "image_url"));
        mentioned.is_some_and(|m| self.when_image.is_none_or(|want| want == has_image(m)))
            && self.when_stage.as_deref().is_none_or(|s| Some(s) == stage)
            && self.when_tool_result.is_none_or(|want| want == has_tool_result)
    }

    fn transcript(&self, body: &Value) -> Transcript {
        if let Some(status) = &self.update_current_task {
            let task_id = current_task_id(body).unwrap_or_default();
            let args = serde_json::json!({"taskId": task_id, "status": status}).to_string();
            return Transcript::openai_tool_call("call_update", "_plan_update_task_", &[&args]);
        }
        if let Some(status) = self.http_error {
            return Transcript::http_error(status, r#"{"error":{"message":"scripted provider error"}}"#);
        }
        let mut t = Transcript::new();
        for piece in &self.reasoning {
            t = t.reasoning(piece);
        }
        for piece in &self.text {
            t = t.content(piece);
        }
        let finish = match &self.tool_call {
            Some(call) => {
                t = t.tool_call_start(0, &call.id, &call.name).tool_args(0, &call.arguments);
                "tool_calls"
            }
            None => "stop",
        };
        t.finish(finish).usage(10, 5).done().with_chunk_delay_ms(self.chunk_delay_ms)
    }
}

/// The task id a PLAN_EXECUTE task round names in its prompt (`Current task ID: <id>`).
fn current_task_id(body: &Value) -> Option<String> {
    const MARK: &str = "Current task ID:";
    body["messages"].as_array()?.iter().rev().find_map(|m| {
        let text = m["content"].as_str()?;
        let at = text.rfind(MARK)? + MARK.len();
        text[at..].split_whitespace().next().map(str::to_owned)
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(scenario), Some(addr_file)) = (args.next(), args.next()) else {
        return Err("usage: fixture_provider <scenario.json> <addr-file>".into());
    };
    let scenario: Scenario = serde_json::from_str(&std::fs::read_to_string(&scenario)?)?;
    let server = FixtureServer::start().await?;
    server.set_default(Transcript::openai_text(&["ok"]));
    server.set_request_log(false);
    server.set_responder(move |stage, body| {
        scenario.rules.iter().find(|rule| rule.matches(stage, body)).map(|rule| rule.transcript(body))
    });
    std::fs::write(&addr_file, server.base_url())?;
    eprintln!("fixture provider on {}", server.base_url());
    loop {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}
