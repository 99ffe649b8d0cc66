//! Tools that pause for the user (`docs/pausing-tools.md`) in the run loop: each pause is an
//! `awaiting.ask` `mode: "status"` and a durable wait point; `continue` runs the same call again
//! with `ToolContext::continued` one higher — at most `MAX_PAUSES` pauses per call, then the model
//! is told the user could not resolve it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agw_llm::ProviderRegistry;
use agw_modes::definition::AgentDefinition;
use agw_modes::runtime::{
    DeltaSink, EmitError, FrontendSubmits, MAX_PAUSES, RunContext, RunOutcome, RunServices, WaitPoint, execute,
};
use agw_protocol::{AgentDelta, EventPayload};
use agw_testkit::{FixtureServer, Transcript};
use agw_tools::ToolRegistry;
use agw_tools::tool::{Tool, ToolContext, ToolError, ToolOutput, UserStatus};
use futures::future::BoxFuture;
use serde_json::{Value, json};

const RUN: &str = "run-1";

/// A tool that never has enough credits; it records the `continued` of every call.
struct Broke {
    seen: Arc<Mutex<Vec<u32>>>,
}

impl Tool for Broke {
    fn name(&self) -> &str {
        "paint"
    }
    fn call<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        self.seen.lock().unwrap().push(ctx.continued);
        assert_eq!(args, json!({"what": "fox"}), "the same arguments every time");
        let status = UserStatus::new("Top up first").with_data(json!({"balance": 0}));
        Box::pin(async move { Ok(ToolOutput::NeedsUser(status)) })
    }
}

/// Keeps the deltas and wait points; answers every status ask with `continue` right away.
struct Continuing {
    submits: Arc<FrontendSubmits>,
    deltas: Vec<AgentDelta>,
    waits: Vec<WaitPoint>,
}

impl DeltaSink for Continuing {
    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        if let AgentDelta::Awaiting(EventPayload::AwaitingAsk(ask)) = &delta {
            // The waiter is registered before the ask is shown: an early answer is matched.
            let status = self.submits.submit(RUN, &ask.awaiting_id, json!("continue"));
            assert_eq!(status, agw_modes::runtime::SubmitStatus::Accepted);
        }
        self.deltas.push(delta);
        Ok(())
    }

    async fn waiting(&mut self, wait: &WaitPoint) -> Result<(), EmitError> {
        self.waits.push(wait.clone());
        Ok(())
    }
}

#[tokio::test]
async fn a_call_pauses_at_most_max_pauses_times_then_the_model_is_told() {
    let fixture = FixtureServer::start().await.unwrap();
    fixture.on_stage("agent-react-step-1", Transcript::openai_tool_call("call_p", "paint", &["{\"what\":\"fox\"}"]));
    fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Sorry."]));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tools =
        ToolRegistry::from_sources(Vec::<(String, String)>::new(), vec![Arc::new(Broke { seen: seen.clone() })]);
    let submits = Arc::new(FrontendSubmits::default());
    let agent = r#"{"key":"r","mode":"REACT","modelConfig":{"providerKey":"fx","model":"m"},
        "toolConfig":{"backends":["paint"]},"react":{"systemPrompt":"Paint.","maxSteps":3}}"#;
    let services = RunServices {
        submits: submits.clone(),
        frontend_timeout: Duration::from_secs(5),
        ..RunServices::new(Arc::new(ProviderRegistry::new(vec![fixture.provider_config("fx")])), Arc::new(tools))
    };
    let agent = Arc::new(AgentDefinition::from_json("r.json", agent).expect("valid agent"));
    let ctx = RunContext::new(RUN, "chat-1", agent, "paint a fox", Arc::new(services));
    let mut sink = Continuing { submits: submits.clone(), deltas: Vec::new(), waits: Vec::new() };
    let outcome = execute(ctx, &mut sink).await;
    assert!(matches!(outcome, RunOutcome::Completed { .. }), "{outcome:?}");

    // Called once more than it paused: the last call's pause is not shown.
    let expected: Vec<u32> = (0..=MAX_PAUSES).collect();
    assert_eq!(*seen.lock().unwrap(), expected);
    let asks: Vec<_> = sink
        .deltas
        .iter()
        .filter_map(|d| match d {
            AgentDelta::Awaiting(EventPayload::AwaitingAsk(ask)) => Some(ask.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(asks.len(), MAX_PAUSES as usize);
    let status = asks[0].status.as_ref().unwrap();
    assert_eq!((asks[0].mode.as_str(), status.code, status.message.as_str()), ("status", -1002, "Top up first"));
    assert_eq!(asks[0].arguments, Some(json!({"what": "fox"})));
    let answers = sink.deltas.iter().filter(|d| matches!(d, AgentDelta::Awaiting(EventPayload::AwaitingAnswer(_))));
    assert_eq!(answers.count(), MAX_PAUSES as usize);
    // Each wait is durable and says how often the call was continued before it.
    let continued: Vec<u32> = sink.waits.iter().map(|w| w.continued).collect();
    assert_eq!(continued, (0..MAX_PAUSES).collect::<Vec<_>>());
    assert!(sink.waits.iter().all(|w| w.ask.mode == "status" && w.calls.len() == 1 && w.results.is_empty()));

    // One result for the call, telling the model the user could not resolve it.
    let results: Vec<&String> = sink
        .deltas
        .iter()
        .filter_map(|d| match d {
            AgentDelta::ToolResult { tool_id, result } if tool_id == "call_p" => Some(result),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 1);
    let result: Value = serde_json::from_str(results[0]).unwrap();
    assert_eq!((result["executed"].as_bool(), result["reason"].as_str()), (Some(false), Some("needs_user_unresolved")));
    assert!(result["detail"].as_str().unwrap().ends_with("Top up first"), "{result}");
    let sent = fixture.requests().last().unwrap().body["messages"].clone();
    assert!(sent.to_string().contains("needs_user_unresolved"), "the model's next request holds it: {sent}");
    assert_eq!(submits.pending(), 0);
}
