//! OpenTelemetry traces of real runs (issue 18): the gateway over loopback with the fixture
//! provider, its spans exported over OTLP/HTTP to an in-process receiver that decodes the real
//! protobuf; the tree and the GenAI attributes of a REACT run and a PLAN_EXECUTE run, the
//! caller's `traceparent` honoured and passed on to the provider.
//!
//! One test function: the exporter and the `tracing` subscriber are process-wide.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agw_http::telemetry::Telemetry;

use agw_testkit::Transcript;
use agw_testkit::otlp::{OtlpReceiver, ReceivedSpan};
use common::{Gateway, LiveStream, header, read_stream, webhook_receiver};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

fn react_agent() -> (String, String) {
    let text = r#"{"key":"weather","name":"Weather","mode":"REACT",
        "modelConfig":{"providerKey":"fixture","model":"m","temperature":0.2,"max_tokens":512},
        "toolConfig":{"backends":["mock_city_weather"]},
        "react":{"systemPrompt":"You are a test agent.","maxSteps":4}}"#;
    ("weather.json".to_owned(), text.to_owned())
}

fn guarded_agent() -> (String, String) {
    let text = json!({"key": "guarded", "mode": "ONESHOT", "modelConfig": {"providerKey": "fixture", "model": "m"},
        "guardrails": {"output": ["rules:demo"]}, "plain": {"systemPrompt": "guarded"}});
    ("guarded.json".to_owned(), text.to_string())
}

fn plan_agent() -> (String, String) {
    let text = json!({
        "key": "planner", "mode": "PLAN_EXECUTE",
        "modelConfig": {"providerKey": "fixture", "model": "m"},
        "planExecute": {"plan": {"systemPrompt": "plan"}, "execute": {"systemPrompt": "execute"},
                        "summary": {"systemPrompt": "summary"}}
    });
    ("planner.json".to_owned(), text.to_string())
}

fn children<'a>(spans: &'a [ReceivedSpan], parent: &ReceivedSpan) -> Vec<&'a ReceivedSpan> {
    let mut out: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.parent_span_id == parent.span_id).collect();
    out.sort_by_key(|s| s.start_end.0);
    out
}

fn names(spans: &[&ReceivedSpan]) -> Vec<String> {
    spans.iter().map(|s| s.name.clone()).collect()
}

fn in_trace(spans: &[ReceivedSpan], trace_id: &str) -> Vec<ReceivedSpan> {
    spans.iter().filter(|s| s.trace_id == trace_id).cloned().collect()
}

/// The spans of the run's trace once its root span was exported (the root ends last, just after
/// the stream's last event, so flush until it arrives).
async fn run_trace(
    receiver: &OtlpReceiver,
    telemetry: &Arc<Telemetry>,
    agent: &str,
    trace_id: Option<&str>,
) -> Vec<ReceivedSpan> {
    let is_root =
        |s: &ReceivedSpan| s.name == format!("invoke_agent {agent}") && trace_id.is_none_or(|t| s.trace_id == t);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        // Blocking, and the receiver runs on this test's runtime: off to the blocking pool.
        let t = telemetry.clone();
        tokio::task::spawn_blocking(move || t.flush()).await.unwrap();
        let spans = receiver.spans();
        if let Some(root) = spans.iter().find(|s| is_root(s)) {
            return in_trace(&spans, &root.trace_id);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no invoke_agent {agent} span among {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn react_and_plan_execute_runs_are_traced_with_genai_spans() {
    let receiver = OtlpReceiver::start().await.unwrap();
    let endpoint = receiver.endpoint();
    let vars = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("OTEL_SERVICE_NAME", "agw-test")];
    let telemetry = Telemetry::from_vars(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| (*v).to_owned()))
        .unwrap()
        .expect("an endpoint turns tracing on");
    tracing_subscriber::registry().with(telemetry.layer()).init();
    let telemetry = Arc::new(telemetry);

    let (hook, hooks) = webhook_receiver(Duration::ZERO).await;
    let gw =
        Gateway::start(&[react_agent(), plan_agent(), guarded_agent()], &[("AGENT_CHAT_EVENT_CALLBACK_URL", &hook)])
            .await;

    // REACT: a weather call, then the answer; the caller names its trace.
    gw.fixture.push(
        Transcript::new()
            .tool_call_start(0, "call_w", "mock_city_weather")
            .tool_args(0, r#"{"city":"Shanghai","date":"2026-02-13"}"#)
            .finish("tool_calls")
            .usage(1_000, 100)
            .done(),
    );
    gw.fixture.push(Transcript::new().content("Foggy.").finish("stop").usage(1_200, 50).done());
    let resp = gw
        .client
        .post(format!("{}/api/ap/query", gw.base))
        .header("traceparent", format!("00-{TRACE_ID}-{CALLER_SPAN}-01"))
        .json(&json!({"agentKey": "weather", "message": "weather?"}))
        .send()
        .await
        .unwrap();
    let stream = read_stream(resp).await;
    let events = stream.events();
    assert_eq!(events.last().unwrap()["type"], "run.complete");
    let run_id = events.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_owned();
    let chat_id = events.iter().find(|e| e["type"] == "run.start").unwrap()["chatId"].as_str().unwrap().to_owned();

    let spans = run_trace(&receiver, &telemetry, "weather", Some(TRACE_ID)).await;
    let root = spans.iter().find(|s| s.name == "invoke_agent weather").unwrap();
    assert_eq!(root.parent_span_id, CALLER_SPAN, "the run continues the caller's trace");
    assert_eq!(root.service_name, "agw-test");
    assert_eq!(root.attr("gen_ai.operation.name"), "invoke_agent");
    assert_eq!(root.attr("gen_ai.agent.id"), "weather");
    assert_eq!(root.attr("gen_ai.agent.name"), "Weather");
    assert_eq!(root.attr("gen_ai.conversation.id"), chat_id.as_str());
    assert_eq!(root.attr("agw.run.id"), run_id.as_str());
    assert_eq!(root.attr("agw.agent.mode"), "REACT");
    assert_eq!(root.attr("agw.run.outcome"), "complete");
    assert_eq!(
        (root.attr("gen_ai.usage.input_tokens"), root.attr("gen_ai.usage.output_tokens")),
        (&json!(2200), &json!(150))
    );
    assert_eq!(root.status_code, 0, "no error");

    let steps = children(&spans, root);
    assert_eq!(names(&steps), ["chat m", "execute_tool mock_city_weather", "chat m"]);
    let (first, tool, second) = (steps[0], steps[1], steps[2]);
    assert_eq!(first.kind, 3, "a model call is a client span");
    for (key, value) in [
        ("gen_ai.operation.name", json!("chat")),
        ("gen_ai.provider.name", json!("openai")),
        ("gen_ai.request.model", json!("m")),
        ("gen_ai.request.temperature", json!(0.2)),
        ("gen_ai.request.max_tokens", json!(512)),
        ("gen_ai.response.finish_reasons", json!(["tool_calls"])),
        ("gen_ai.usage.input_tokens", json!(1000)),
        ("gen_ai.usage.output_tokens", json!(100)),
        ("agw.provider.key", json!("fixture")),
        ("agw.stage", json!("agent-react-step-1")),
    ] {
        assert_eq!(first.attr(key), &value, "{key} of the first model call");
    }
    assert!(first.attr("agw.response.time_to_first_chunk_ms").is_i64());
    assert!(first.attr("gen_ai.input.messages").is_null(), "contents only when asked for");
    assert_eq!(second.attr("gen_ai.response.finish_reasons"), &json!(["stop"]));
    assert_eq!(second.attr("gen_ai.usage.input_tokens"), &json!(1200));
    for (key, value) in [
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "mock_city_weather"),
        ("gen_ai.tool.call.id", "call_w"),
        ("gen_ai.tool.type", "extension"),
        ("agw.tool.kind", "backend"),
    ] {
        assert_eq!(tool.attr(key), value, "{key} of the tool call");
    }
    assert!(spans.iter().all(|s| s.start_end.0 >= root.start_end.0 && s.start_end.1 <= root.start_end.1));

    // The provider saw the trace context of the model call's span.
    let sent: Vec<String> =
        gw.fixture.requests().iter().map(|r| r.header("traceparent").unwrap_or_default().to_owned()).collect();
    assert_eq!(sent, [format!("00-{TRACE_ID}-{}-01", first.span_id), format!("00-{TRACE_ID}-{}-01", second.span_id)]);

    // The webhook continues the run's trace too.
    let hook_deadline = std::time::Instant::now() + Duration::from_secs(5);
    while hooks.lock().unwrap().is_empty() && std::time::Instant::now() < hook_deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let traceparent = header(&hooks.lock().unwrap()[0].0, "traceparent").to_owned();
    assert!(traceparent.starts_with(&format!("00-{TRACE_ID}-")), "webhook traceparent {traceparent:?}");
    let parent = traceparent.split('-').nth(2).unwrap();
    assert!(spans.iter().any(|s| s.span_id == parent), "the webhook's parent {parent} is a span of the run");

    // PLAN_EXECUTE without a caller trace: a trace of its own, the task's calls under its span.
    gw.fixture.forget_requests();
    gw.fixture.on_stage(
        "agent-plan-generate",
        Transcript::openai_tool_call("call_p", "_plan_add_tasks_", &[r#"{"tasks":[{"description":"look"}]}"#]),
    );
    gw.fixture.on_stage("agent-plan-execute-step-1", Transcript::openai_text(&["working"]).with_headers_delay_ms(300));
    gw.fixture.on_stage("agent-plan-final", Transcript::openai_text(&["done"]));
    let resp = gw.post_query(&json!({"agentKey": "planner", "message": "plan it"})).await;
    let mut live = LiveStream::new(resp);
    let plan = live.until(|e| e["type"] == "plan.update").await;
    let task_id = plan["plan"][0]["taskId"].as_str().unwrap().to_owned();
    let update = json!({"taskId": task_id, "status": "completed"}).to_string();
    gw.fixture.on_stage(
        "agent-plan-execute-step-1-work-2",
        Transcript::openai_tool_call("call_u", "_plan_update_task_", &[update.as_str()]),
    );
    let rest = live.rest().await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete", "{rest:?}");

    let spans = run_trace(&receiver, &telemetry, "planner", None).await;
    let root = spans.iter().find(|s| s.name == "invoke_agent planner").unwrap();
    assert_ne!(root.trace_id, TRACE_ID);
    assert_eq!(root.parent_span_id, "", "no caller trace: the run is the root");
    assert_eq!(root.attr("agw.agent.mode"), "PLAN_EXECUTE");
    let top = children(&spans, root);
    assert_eq!(
        names(&top),
        ["chat m", "execute_tool _plan_add_tasks_", format!("execute_task {task_id}").as_str(), "chat m"]
    );
    assert_eq!(top[0].attr("agw.stage"), "agent-plan-generate");
    assert_eq!(top[3].attr("agw.stage"), "agent-plan-final");
    let task = top[2];
    assert_eq!(task.attr("agw.task.id"), task_id.as_str());
    assert_eq!(task.attr("agw.task.description"), "look");
    assert_eq!(task.attr("agw.task.status"), "completed");
    let inside = children(&spans, task);
    assert_eq!(names(&inside), ["chat m", "chat m", "execute_tool _plan_update_task_"]);
    assert_eq!(inside[1].attr("agw.stage"), "agent-plan-execute-step-1-work-2");
    let sent: Vec<Value> = gw.fixture.requests().iter().map(|r| json!(r.header("traceparent"))).collect();
    assert_eq!(sent.len(), 4);
    assert!(sent.iter().all(|t| t.as_str().is_some_and(|t| t.contains(&root.trace_id))), "{sent:?}");
    assert!(receiver.transports().iter().all(|t| *t == "http"));

    // A guard's decision is a span of the run's trace: the bundled set redacts an address.
    gw.fixture.push(Transcript::openai_text(&["write to ann@", "example.com"]));
    let stream = gw.run(&json!({"agentKey": "guarded", "message": "mail?"})).await;
    assert_eq!(stream.last()["type"], "run.complete");
    let spans = run_trace(&receiver, &telemetry, "guarded", None).await;
    let guard = spans.iter().find(|s| s.name == "guard rules:demo").expect("a guard span");
    assert_eq!(
        (guard.attr("agw.guard.stage"), guard.attr("agw.guard.action"), guard.attr("agw.guard.rule")),
        (&json!("output"), &json!("redact"), &json!("email"))
    );
}
