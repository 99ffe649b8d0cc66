//! Run a REACT agent with a tool written in Rust, and print every event it streams — the same
//! SSE frames agw's server would send.
//!
//! ```sh
//! cargo run -p agw-modes --example react_tool
//! ```
//!
//! The model is agw-testkit's scripted provider (a real OpenAI-compatible SSE endpoint on
//! loopback): its first turn calls `word_count`, its second answers from the result. Point
//! `ProviderRegistry` at a real provider instead and nothing else changes.

use std::sync::Arc;
use std::time::Duration;

use agw_llm::ProviderRegistry;
use agw_modes::definition::AgentDefinition;
use agw_modes::runtime::{DeltaSink, EmitError, RunContext, RunOutcome, RunServices, execute};
use agw_protocol::event::{ChatStart, RequestQuery};
use agw_protocol::{AgentDelta, Assembler, Event, SystemClock, sse};
use agw_testkit::{FixtureServer, Transcript};
use agw_tools::ToolRegistry;
use agw_tools::tool::{Tool, ToolContext, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::{Value, json};

/// A backend tool in plain Rust: the model sees its name, description and schema.
struct WordCount;

impl Tool for WordCount {
    fn name(&self) -> &str {
        "word_count"
    }
    fn description(&self) -> &str {
        "Counts the words of a text."
    }
    fn parameters(&self) -> Value {
        json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]})
    }
    fn call<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let text = args["text"].as_str().unwrap_or_default();
            Ok(ToolOutput::Json(json!({"words": text.split_whitespace().count()})))
        })
    }
}

/// Turns the run's deltas into numbered events with agw-protocol's assembler and prints each as
/// an SSE frame the moment it exists.
struct PrintingSink {
    assembler: Assembler,
    events: Vec<Event>,
}

impl PrintingSink {
    fn print(&mut self) {
        for event in self.events.drain(..) {
            print!("{}", String::from_utf8_lossy(&sse::event_frame(&event)));
        }
    }
}

impl DeltaSink for PrintingSink {
    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        let result = self.assembler.push(delta, &mut self.events).map_err(|e| EmitError::Protocol(e.to_string()));
        self.print();
        result
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The model: turn 1 calls the tool (arguments streamed in two pieces), turn 2 answers.
    let model = FixtureServer::start().await?;
    model.push(Transcript::openai_tool_call("call_1", "word_count", &[r#"{"text":"one two"#, r#" three"}"#]));
    model.push(Transcript::openai_text(&["The text has ", "3 words."]));

    let agent = AgentDefinition::from_json(
        "counter.json",
        r#"{"key":"counter","name":"Counter","mode":"REACT",
            "modelConfig":{"providerKey":"scripted","model":"any"},
            "toolConfig":{"backends":["word_count"]},
            "react":{"systemPrompt":"Use tools to count."}}"#,
    )?;
    let services = RunServices {
        frontend_timeout: Duration::from_secs(60),
        ..RunServices::new(
            Arc::new(ProviderRegistry::new([model.provider_config("scripted")])),
            Arc::new(ToolRegistry::from_sources(Vec::<(String, String)>::new(), vec![Arc::new(WordCount)])),
        )
    };
    let (run_id, chat_id) = ("run-1", "00000000-0000-4000-8000-000000000001");
    let message = "How many words are in 'one two three'?";
    // A run in a new chat; whoever accepts steers for it pushes into `ctx.steers`. No quotas
    // shared with other runs.
    let ctx = RunContext::new(run_id, chat_id, Arc::new(agent), message, Arc::new(services));

    let mut sink = PrintingSink { assembler: Assembler::new(run_id, chat_id, Box::new(SystemClock)), events: vec![] };
    let query = RequestQuery {
        request_id: run_id.into(),
        chat_id: chat_id.into(),
        role: "user".into(),
        message: message.into(),
        agent_key: Some("counter".into()),
        references: None,
        params: None,
        scene: None,
        stream: None,
    };
    let chat_start = ChatStart { chat_id: chat_id.into(), chat_name: message.into() };
    sink.assembler.bootstrap(query, Some(chat_start), &mut sink.events);
    sink.print();

    match execute(ctx, &mut sink).await {
        RunOutcome::Completed { finish_reason } => sink.assembler.complete(&finish_reason, &mut sink.events),
        RunOutcome::Failed(error) => sink.assembler.fail(error, &mut sink.events),
        RunOutcome::Disconnected => {}
    }
    sink.print();

    // The second model request carried the tool result back, paired with its call.
    let second = model.request(1).ok_or("the model was asked twice")?;
    let tool_message = &second.body["messages"].as_array().ok_or("messages")?.last().cloned().unwrap_or_default();
    assert_eq!(tool_message["role"], "tool");
    assert_eq!(tool_message["content"], r#"{"words":3}"#);
    Ok(())
}
