//! Steers: taken at model-turn boundaries only, shown as `request.steer`, sent to the model as a
//! user message, in every mode — against the fixture provider over loopback.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agw_llm::ProviderRegistry;
use agw_modes::definition::AgentDefinition;
use agw_modes::runtime::{
    DeltaSink, EmitError, RunContext, RunOutcome, RunServices, Steer, SteerQueue, SteerRefused, execute,
};
use agw_protocol::{AgentDelta, Assembler, Event, EventPayload};
use agw_testkit::{FixtureServer, RecordedRequest, Transcript};
use agw_tools::ToolRegistry;
use agw_tools::tool::{Tool, ToolContext, ToolError, ToolOutput};
use futures::future::BoxFuture;
use serde_json::{Value, json};

const RUN: &str = "run-1";
const CHAT: &str = "chat-1";

fn steer(id: &str, message: &str) -> Steer {
    Steer { steer_id: id.into(), message: message.into(), request_id: Some(format!("req-{id}")) }
}

/// A backend tool that may push a steer into the run while it runs, then takes `delay`.
struct Lookup {
    delay: Duration,
    steer_while_running: Option<(Arc<SteerQueue>, Steer)>,
}

impl Tool for Lookup {
    fn name(&self) -> &str {
        "lookup"
    }
    fn description(&self) -> &str {
        "Looks something up."
    }
    fn parameters(&self) -> Value {
        json!({"type":"object","properties":{"q":{"type":"string"}}})
    }
    fn call<'a>(&'a self, _args: Value, _ctx: &'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            if let Some((queue, steer)) = &self.steer_while_running {
                queue.push(steer.clone()).expect("the run is open");
            }
            tokio::time::sleep(self.delay).await;
            Ok(ToolOutput::Json(json!({"found": true})))
        })
    }
}

/// The plan tools (definitions and their built-in implementations); the run answers them from
/// its plan.
fn plan_registry() -> ToolRegistry {
    let files = agw_tools::bundled::TOOL_FILES.iter().copied().filter(|(name, _)| name.starts_with("_plan_"));
    let builtins =
        vec![Arc::new(agw_tools::PlanTool::add_tasks()) as Arc<dyn Tool>, Arc::new(agw_tools::PlanTool::update_task())];
    ToolRegistry::from_sources(files, builtins)
}

fn ctx(fixture: &FixtureServer, agent: &str, tools: ToolRegistry, steers: Arc<SteerQueue>) -> RunContext {
    let services = RunServices {
        frontend_timeout: Duration::from_secs(1),
        ..RunServices::new(Arc::new(ProviderRegistry::new(vec![fixture.provider_config("fx")])), Arc::new(tools))
    };
    let agent = Arc::new(AgentDefinition::from_json("a.json", agent).expect("valid agent"));
    RunContext { steers, ..RunContext::new(RUN, CHAT, agent, "what is up?", Arc::new(services)) }
}

fn react_agent(max_steps: u32) -> String {
    format!(
        r#"{{"key":"r","mode":"REACT","modelConfig":{{"providerKey":"fx","model":"m"}},
            "toolConfig":{{"backends":["lookup"]}},"react":{{"systemPrompt":"Be useful.","maxSteps":{max_steps}}}}}"#
    )
}

fn lookup_registry(tool: Lookup) -> ToolRegistry {
    ToolRegistry::from_sources(Vec::<(String, String)>::new(), vec![Arc::new(tool)])
}

type Trigger = Box<dyn FnMut(&AgentDelta) -> Option<Steer> + Send>;

/// Assembles the run's deltas into events (as the HTTP sink does) and keeps both; `trigger`
/// may push a steer into the run's queue right after a delta was delivered.
struct SteeringSink {
    assembler: Assembler,
    deltas: Vec<AgentDelta>,
    events: Vec<Event>,
    queue: Arc<SteerQueue>,
    trigger: Trigger,
}

impl SteeringSink {
    fn new(queue: &Arc<SteerQueue>, trigger: impl FnMut(&AgentDelta) -> Option<Steer> + Send + 'static) -> Self {
        let mut tick = 1_000;
        let clock = Box::new(move || {
            tick += 1;
            tick
        });
        Self {
            assembler: Assembler::new(RUN, CHAT, clock),
            deltas: Vec::new(),
            events: Vec::new(),
            queue: queue.clone(),
            trigger: Box::new(trigger),
        }
    }

    fn types(&self) -> Vec<&'static str> {
        self.events.iter().map(Event::type_name).collect()
    }

    /// The index of the first delta matching `f`.
    fn position(&self, f: impl Fn(&AgentDelta) -> bool) -> usize {
        self.deltas.iter().position(f).expect("delta present")
    }
}

impl DeltaSink for SteeringSink {
    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        self.assembler.push(delta.clone(), &mut self.events).map_err(|e| EmitError::Protocol(e.to_string()))?;
        if let Some(steer) = (self.trigger)(&delta) {
            self.queue.push(steer).expect("the run is open");
        }
        self.deltas.push(delta);
        Ok(())
    }
}

fn messages(request: &RecordedRequest) -> Vec<Value> {
    request.body["messages"].as_array().expect("messages").clone()
}

fn is_steer(delta: &AgentDelta) -> bool {
    matches!(delta, AgentDelta::Steer { .. })
}

#[tokio::test]
async fn react_a_steer_queued_before_step_two_reaches_its_turn_and_the_stream() {
    let fixture = FixtureServer::start().await.unwrap();
    fixture.push(Transcript::openai_tool_call("call_1", "lookup", &[r#"{"q":"x"}"#]));
    fixture.push(Transcript::openai_text(&["In ", "Celsius: 20."]));
    let queue = Arc::new(SteerQueue::default());
    let tool = Lookup { delay: Duration::ZERO, steer_while_running: None };
    // Queued right after step 1's tool result, before step 2's model turn.
    let mut once = Some(steer("s1", "answer in Celsius"));
    let mut sink = SteeringSink::new(&queue, move |d| match d {
        AgentDelta::ToolResult { .. } => once.take(),
        _ => None,
    });
    let outcome = execute(ctx(&fixture, &react_agent(4), lookup_registry(tool), queue.clone()), &mut sink).await;
    assert_eq!(outcome, RunOutcome::Completed { finish_reason: "stop".into() });

    let steer_at = sink.position(is_steer);
    assert_eq!(sink.deltas[steer_at - 1], AgentDelta::StageMarker("react-step-2".into()));
    assert_eq!(
        sink.deltas[steer_at],
        AgentDelta::Steer {
            steer_id: "s1".into(),
            message: "answer in Celsius".into(),
            request_id: Some("req-s1".into())
        }
    );
    assert_eq!(sink.deltas[steer_at + 1], AgentDelta::Content("In ".into()));
    let types = sink.types();
    let at = types.iter().position(|t| *t == "request.steer").expect("request.steer");
    assert_eq!(&types[at - 1..at + 3], ["tool.result", "request.steer", "content.start", "content.delta"]);
    let event = serde_json::to_value(&sink.events[at]).unwrap();
    assert_eq!(
        (event["requestId"].clone(), event["chatId"].clone(), event["runId"].clone(), event["steerId"].clone()),
        (json!("req-s1"), json!(CHAT), json!(RUN), json!("s1"))
    );
    assert_eq!((event["message"].clone(), event["role"].clone()), (json!("answer in Celsius"), json!("user")));

    let first = messages(&fixture.request(0).unwrap());
    assert!(!first.iter().any(|m| m["content"] == "answer in Celsius"), "step 1 saw no steer");
    let second = messages(&fixture.request(1).unwrap());
    let tail: Vec<&str> = second.iter().rev().take(3).map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(tail, ["user", "tool", "assistant"], "after everything so far");
    assert_eq!(second.last().unwrap(), &json!({"role": "user", "content": "answer in Celsius"}));
    assert!(queue.close().is_empty(), "the steer was taken");
}

#[tokio::test]
async fn react_a_steer_pushed_while_a_tool_runs_waits_for_its_result() {
    let fixture = FixtureServer::start().await.unwrap();
    fixture.push(Transcript::openai_tool_call("call_1", "lookup", &[r#"{"q":"x"}"#]));
    fixture.push(Transcript::openai_text(&["done"]));
    let queue = Arc::new(SteerQueue::default());
    let tool = Lookup {
        delay: Duration::from_millis(300),
        steer_while_running: Some((queue.clone(), steer("s1", "also check y"))),
    };
    let mut sink = SteeringSink::new(&queue, |_| None);
    let outcome = execute(ctx(&fixture, &react_agent(4), lookup_registry(tool), queue.clone()), &mut sink).await;
    assert_eq!(outcome, RunOutcome::Completed { finish_reason: "stop".into() });

    let result_at = sink.position(|d| matches!(d, AgentDelta::ToolResult { .. }));
    let steer_at = sink.position(is_steer);
    assert!(steer_at > result_at, "never mid-tool: {:?}", sink.deltas);
    assert_eq!(sink.deltas.iter().filter(|d| is_steer(d)).count(), 1);
    assert_eq!(fixture.request_count(), 2);
    let second = messages(&fixture.request(1).unwrap());
    let n = second.len();
    assert_eq!(second[n - 2]["role"], "tool", "the tool's result comes first");
    assert_eq!(second[n - 1], json!({"role": "user", "content": "also check y"}));
}

#[tokio::test]
async fn react_a_final_answer_with_a_steer_waiting_runs_another_step() {
    let fixture = FixtureServer::start().await.unwrap();
    fixture.push(Transcript::openai_text(&["It is ", "sunny."]));
    fixture.push(Transcript::openai_text(&["68F."]));
    let queue = Arc::new(SteerQueue::default());
    // Pushed while the model streams its (final) answer.
    let mut once = Some(steer("s1", "in Fahrenheit"));
    let mut sink = SteeringSink::new(&queue, move |d| match d {
        AgentDelta::Content(_) => once.take(),
        _ => None,
    });
    let tool = Lookup { delay: Duration::ZERO, steer_while_running: None };
    let outcome = execute(ctx(&fixture, &react_agent(4), lookup_registry(tool), queue.clone()), &mut sink).await;
    assert_eq!(outcome, RunOutcome::Completed { finish_reason: "stop".into() });

    let markers: Vec<&AgentDelta> = sink.deltas.iter().filter(|d| matches!(d, AgentDelta::StageMarker(_))).collect();
    assert_eq!(
        markers,
        [&AgentDelta::StageMarker("react-step-1".into()), &AgentDelta::StageMarker("react-step-2".into())]
    );
    assert_eq!(fixture.request_count(), 2);
    assert_eq!(fixture.request(1).unwrap().stage(), Some("agent-react-step-2"));
    let second = messages(&fixture.request(1).unwrap());
    let n = second.len();
    assert_eq!(second[n - 2], json!({"role": "assistant", "content": "It is sunny."}), "the answer is kept");
    assert_eq!(second[n - 1], json!({"role": "user", "content": "in Fahrenheit"}));
    assert_eq!(
        sink.types()
            .iter()
            .filter(|t| t.starts_with("content.") || **t == "request.steer")
            .copied()
            .collect::<Vec<_>>(),
        [
            "content.start",
            "content.delta",
            "content.delta",
            "content.end",
            "request.steer",
            "content.start",
            "content.delta"
        ]
    );
}

#[tokio::test]
async fn react_at_max_steps_the_forced_final_turn_takes_the_waiting_steer() {
    let fixture = FixtureServer::start().await.unwrap();
    fixture.push(Transcript::openai_text(&["first answer"]));
    fixture.push(Transcript::openai_text(&["final answer"]));
    let queue = Arc::new(SteerQueue::default());
    let mut once = Some(steer("s1", "shorter"));
    let mut sink = SteeringSink::new(&queue, move |d| match d {
        AgentDelta::Content(_) => once.take(),
        _ => None,
    });
    let tool = Lookup { delay: Duration::ZERO, steer_while_running: None };
    let outcome = execute(ctx(&fixture, &react_agent(1), lookup_registry(tool), queue.clone()), &mut sink).await;
    assert_eq!(outcome, RunOutcome::Completed { finish_reason: "stop".into() });
    assert_eq!(fixture.request_count(), 2);
    let last = fixture.request(1).unwrap();
    assert_eq!(last.stage(), Some("agent-react-final"));
    assert!(last.body.get("tools").is_none(), "the forced final turn offers no tools");
    assert_eq!(messages(&last).last().unwrap(), &json!({"role": "user", "content": "shorter"}));
    assert!(sink.deltas.contains(&AgentDelta::StageMarker("react-step-2".into())));
}

#[tokio::test]
async fn plan_execute_takes_a_steer_at_the_next_model_turn_inside_the_task() {
    let fixture = FixtureServer::start().await.unwrap();
    let task_ids: Arc<Mutex<Vec<String>>> = Arc::default();
    let known = task_ids.clone();
    fixture.set_responder(move |stage, _body| match stage? {
        "agent-plan-generate" => Some(Transcript::openai_tool_call(
            "call_p1",
            "_plan_add_tasks_",
            &[r#"{"tasks":[{"description":"check the weather"}]}"#],
        )),
        "agent-plan-execute-step-1" => {
            let task_id = known.lock().unwrap().first().cloned().expect("plan known");
            let args = json!({"taskId": task_id, "status": "completed"}).to_string();
            Some(Transcript::openai_tool_call("call_u1", "_plan_update_task_", &[&args]))
        }
        "agent-plan-final" => Some(Transcript::openai_text(&["all done"])),
        _ => None,
    });
    let queue = Arc::new(SteerQueue::default());
    // Pushed while the plan tool's batch runs: after the planning turn, before the first task round.
    let mut once = Some(steer("s1", "prefer Celsius"));
    let seen = task_ids.clone();
    let mut sink = SteeringSink::new(&queue, move |d| match d {
        AgentDelta::PlanUpdate { plan, .. } => {
            *seen.lock().unwrap() = plan.iter().map(|t| t.task_id.clone()).collect();
            once.take()
        }
        _ => None,
    });
    let agent = r#"{"key":"p","mode":"PLAN_EXECUTE","modelConfig":{"providerKey":"fx","model":"m"},
        "planExecute":{"plan":{"systemPrompt":"plan"},"execute":{"systemPrompt":"exec"},"summary":{"systemPrompt":"sum"}}}"#;
    let registry = plan_registry();
    let outcome = execute(ctx(&fixture, agent, registry, queue.clone()), &mut sink).await;
    assert_eq!(outcome, RunOutcome::Completed { finish_reason: "stop".into() });

    let task_start = sink.position(|d| matches!(d, AgentDelta::TaskStart { .. }));
    let steer_at = sink.position(is_steer);
    assert_eq!(sink.deltas[steer_at - 1], AgentDelta::StageMarker("execute-task-1".into()));
    assert!(task_start < steer_at);
    let task_id = task_ids.lock().unwrap()[0].clone();
    let event = sink.events.iter().find(|e| e.type_name() == "request.steer").expect("request.steer");
    let EventPayload::RequestSteer(payload) = &event.payload else { unreachable!() };
    assert_eq!(payload.task_id.as_deref(), Some(task_id.as_str()), "inside a task it carries the taskId");

    let requests = fixture.requests();
    let by_stage = |stage: &str| requests.iter().find(|r| r.stage() == Some(stage)).expect(stage);
    let steered = json!({"role": "user", "content": "prefer Celsius"});
    assert!(!messages(by_stage("agent-plan-generate")).contains(&steered));
    let round = messages(by_stage("agent-plan-execute-step-1"));
    assert_eq!(round.last().unwrap(), &steered, "after the task prompt: everything so far");
    assert!(messages(by_stage("agent-plan-final")).contains(&steered), "later turns keep it");
}

#[tokio::test]
async fn plan_execute_a_steer_taken_by_the_plan_stage_stays_for_the_tasks_and_summary() {
    let fixture = FixtureServer::start().await.unwrap();
    let task_ids: Arc<Mutex<Vec<String>>> = Arc::default();
    let known = task_ids.clone();
    fixture.set_responder(move |stage, _body| match stage? {
        "agent-plan-generate" => Some(Transcript::openai_tool_call(
            "call_p1",
            "_plan_add_tasks_",
            &[r#"{"tasks":[{"description":"do it"}]}"#],
        )),
        "agent-plan-execute-step-1" => {
            let task_id = known.lock().unwrap().first().cloned().expect("plan known");
            let args = json!({"taskId": task_id, "status": "completed"}).to_string();
            Some(Transcript::openai_tool_call("call_u1", "_plan_update_task_", &[&args]))
        }
        "agent-plan-final" => Some(Transcript::openai_text(&["ok"])),
        _ => None,
    });
    let queue = Arc::new(SteerQueue::default());
    queue.push(steer("s0", "only one task")).unwrap();
    let seen = task_ids.clone();
    let mut sink = SteeringSink::new(&queue, move |d| {
        if let AgentDelta::PlanUpdate { plan, .. } = d {
            *seen.lock().unwrap() = plan.iter().map(|t| t.task_id.clone()).collect();
        }
        None
    });
    let agent = r#"{"key":"p","mode":"PLAN_EXECUTE","modelConfig":{"providerKey":"fx","model":"m"},
        "planExecute":{"plan":{"systemPrompt":"plan"},"execute":{"systemPrompt":"exec"},"summary":{"systemPrompt":"sum"}}}"#;
    let registry = plan_registry();
    let outcome = execute(ctx(&fixture, agent, registry, queue.clone()), &mut sink).await;
    assert_eq!(outcome, RunOutcome::Completed { finish_reason: "stop".into() });

    let steered = json!({"role": "user", "content": "only one task"});
    let requests = fixture.requests();
    let plan = messages(&requests[0]);
    assert_eq!(requests[0].stage(), Some("agent-plan-generate"));
    assert_eq!(plan.last().unwrap(), &steered, "after the user's message");
    for request in &requests[1..] {
        let seen = messages(request);
        let at = seen.iter().position(|m| *m == steered).expect("kept");
        let call = seen.iter().position(|m| m["tool_calls"][0]["function"]["name"] == "_plan_add_tasks_").unwrap();
        assert!(at < call, "in the order the run took it: before the plan call");
    }
    let steers: Vec<_> = sink.deltas.iter().filter(|d| is_steer(d)).collect();
    assert_eq!(steers.len(), 1, "taken once");
}

#[tokio::test]
async fn oneshot_takes_steers_before_its_turn_and_close_returns_the_late_ones() {
    let fixture = FixtureServer::with_default(Transcript::openai_text(&["an", "swer"])).await.unwrap();
    let queue = Arc::new(SteerQueue::default());
    queue.push(steer("early", "be brief")).unwrap();
    // Pushed during the only turn: ONESHOT ends with its answer.
    let mut once = Some(steer("late", "never mind"));
    let mut sink = SteeringSink::new(&queue, move |d| match d {
        AgentDelta::Content(_) => once.take(),
        _ => None,
    });
    let agent =
        r#"{"key":"o","mode":"ONESHOT","modelConfig":{"providerKey":"fx","model":"m"},"plain":{"systemPrompt":"s"}}"#;
    let outcome = execute(ctx(&fixture, agent, ToolRegistry::default(), queue.clone()), &mut sink).await;
    assert_eq!(outcome, RunOutcome::Completed { finish_reason: "stop".into() });
    assert_eq!(fixture.request_count(), 1);
    assert_eq!(messages(&fixture.request(0).unwrap()).last().unwrap(), &json!({"role": "user", "content": "be brief"}));
    assert_eq!(sink.types()[..2], ["request.steer", "content.start"]);

    assert_eq!(queue.close(), [steer("late", "never mind")], "untaken steers come back");
    assert!(matches!(queue.push(steer("after", "x")), Err(SteerRefused::Closed(_))), "a finished run refuses");
}

/// A sink whose consumer went away when the steer was to be delivered.
struct GoneAtSteer(Vec<AgentDelta>);

impl DeltaSink for GoneAtSteer {
    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        if is_steer(&delta) {
            return Err(EmitError::Closed);
        }
        self.0.push(delta);
        Ok(())
    }
}

#[tokio::test]
async fn steers_the_sink_could_not_deliver_are_returned_by_close() {
    let fixture = FixtureServer::with_default(Transcript::openai_text(&["x"])).await.unwrap();
    let queue = Arc::new(SteerQueue::default());
    queue.push(steer("a", "one")).unwrap();
    queue.push(steer("b", "two")).unwrap();
    let agent =
        r#"{"key":"o","mode":"ONESHOT","modelConfig":{"providerKey":"fx","model":"m"},"plain":{"systemPrompt":"s"}}"#;
    let mut sink = GoneAtSteer(Vec::new());
    let outcome = execute(ctx(&fixture, agent, ToolRegistry::default(), queue.clone()), &mut sink).await;
    assert_eq!(outcome, RunOutcome::Disconnected);
    assert_eq!(fixture.request_count(), 0, "no model call after the consumer left");
    assert_eq!(queue.close(), [steer("a", "one"), steer("b", "two")]);
}

/// A sink that never finishes delivering a steer (a client that stopped reading).
struct StuckAtSteer;

impl DeltaSink for StuckAtSteer {
    async fn emit(&mut self, delta: AgentDelta) -> Result<(), EmitError> {
        if is_steer(&delta) {
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_run_cancelled_while_delivering_a_steer_leaves_it_for_close() {
    let fixture = FixtureServer::with_default(Transcript::openai_text(&["x"])).await.unwrap();
    let queue = Arc::new(SteerQueue::default());
    queue.push(steer("a", "one")).unwrap();
    let agent =
        r#"{"key":"o","mode":"ONESHOT","modelConfig":{"providerKey":"fx","model":"m"},"plain":{"systemPrompt":"s"}}"#;
    let mut sink = StuckAtSteer;
    let run = execute(ctx(&fixture, agent, ToolRegistry::default(), queue.clone()), &mut sink);
    // The driver gives up on the run (client gone, shutdown): the future is dropped mid-delivery.
    assert!(tokio::time::timeout(Duration::from_millis(100), run).await.is_err());
    assert_eq!(queue.close(), [steer("a", "one")]);
}
