//! Sub-agents over loopback HTTP (issue 34, `docs/multi-agent.md`): `agent_invoke` runs other
//! agents in parallel inside the run, streams every child live and framed by `task.*` into the
//! parent's stream and replay, keeps the children out of the parent model's context, narrows
//! their permissions by the parent's, answers their asks through the root run, rolls their
//! usage up, and stops them with the parent.

mod common;

use std::time::{Duration, Instant};

use agw_testkit::Transcript;
use common::{Gateway, LiveStream, assert_chat_files_valid, assert_chat_replayable};
use serde_json::{Value, json};

fn agents(lead_approvals: Value) -> Vec<(String, String)> {
    let model = json!({"providerKey": "fixture", "model": "m"});
    let lead = json!({"key": "lead", "mode": "REACT", "modelConfig": model,
        "toolConfig": {"backends": [], "subAgents": ["researcher", "writer"], "approvals": lead_approvals},
        "react": {"systemPrompt": "LEAD: you run a team.", "maxSteps": 4}});
    let researcher = json!({"key": "researcher", "description": "Looks things up.", "mode": "REACT",
        "modelConfig": model, "toolConfig": {"backends": ["mock_city_weather"]},
        "react": {"systemPrompt": "RESEARCHER: you look things up.", "maxSteps": 3}});
    let writer = json!({"key": "writer", "description": "Writes short texts.", "mode": "ONESHOT",
        "modelConfig": model, "plain": {"systemPrompt": "WRITER: you write."}});
    let outsider = json!({"key": "outsider", "mode": "ONESHOT", "modelConfig": model,
        "plain": {"systemPrompt": "OUTSIDER"}});
    [("lead", lead), ("researcher", researcher), ("writer", writer), ("outsider", outsider)]
        .into_iter()
        .map(|(key, text)| (format!("{key}.json"), text.to_string()))
        .collect()
}

fn system(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap_or("")
}

fn has_tool_result(body: &Value) -> bool {
    body["messages"].as_array().is_some_and(|m| m.iter().any(|m| m["role"] == "tool"))
}

fn invoke(tasks: Value) -> Transcript {
    let args = json!({ "tasks": tasks }).to_string();
    Transcript::openai_tool_call("call_team", "agent_invoke", &[&args])
}

/// The lead invokes both agents, then answers; the researcher calls the weather tool once, the
/// writer writes. Each child's first model call takes `child_delay_ms` to answer.
fn script_team(gw: &Gateway, child_delay_ms: u64) {
    gw.fixture.set_responder(move |_, body| {
        let system = system(body);
        let answered = has_tool_result(body);
        Some(if system.starts_with("LEAD") {
            if answered {
                Transcript::openai_text(&["Team ", "done."])
            } else {
                invoke(json!([
                    {"subAgentKey": "researcher", "task": "Weather in Paris?", "taskName": "research"},
                    {"subAgentKey": "writer", "task": "A haiku about rain."}
                ]))
            }
        } else if system.starts_with("RESEARCHER") {
            if answered {
                // Still thinking while the writer streams: the two overlap for certain.
                Transcript::openai_text(&["Paris ", "is sunny."]).with_headers_delay_ms(child_delay_ms)
            } else {
                Transcript::openai_tool_call("call_w", "mock_city_weather", &["{\"city\":\"Paris\"}"])
                    .with_headers_delay_ms(child_delay_ms)
            }
        } else if system.starts_with("WRITER") {
            Transcript::openai_text(&["Soft ", "rain ", "falls."])
                .with_headers_delay_ms(child_delay_ms)
                .with_chunk_delay_ms(child_delay_ms * 3 / 20)
        } else {
            Transcript::openai_text(&["?"])
        })
    });
}

fn lead_run_id(events: &[Value]) -> String {
    events.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_owned()
}

fn chat_id_of(events: &[&Value]) -> String {
    events.iter().find(|e| e["type"] == "run.start").unwrap()["chatId"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn children_run_in_parallel_stream_live_with_their_task_ids_and_the_parent_gets_one_aggregate() {
    let gw = Gateway::start(&agents(json!({})), &[]).await;
    script_team(&gw, 1000);
    let started = Instant::now();
    let stream = gw.run(&json!({"agentKey": "lead", "message": "Research and write."})).await;
    let took = started.elapsed();
    let events = stream.events();
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());

    // Framing: task.start per task with the agent and the invoking call, in input order.
    let starts = stream.of_type("task.start");
    assert_eq!(starts.len(), 2, "{:?}", stream.types());
    assert_eq!(
        (starts[0]["subAgentKey"].as_str(), starts[0]["taskName"].as_str()),
        (Some("researcher"), Some("research"))
    );
    assert_eq!(starts[1]["subAgentKey"], "writer");
    assert!(starts.iter().all(|s| s["toolId"] == "call_team"), "{starts:?}");
    let (research, write) = (starts[0]["taskId"].as_str().unwrap(), starts[1]["taskId"].as_str().unwrap());
    assert_eq!(stream.of_type("task.complete").len(), 2);

    // Every event between a child's task.start and its end carries its taskId; the writer's text
    // streams before the researcher has finished: they ran at the same time.
    let position = |pred: &dyn Fn(&Value) -> bool| events.iter().position(|e| pred(e)).unwrap();
    let research_end = position(&|e| e["type"] == "task.complete" && e["taskId"] == research);
    let write_text = position(&|e| e["type"] == "content.delta" && e["taskId"] == write);
    let research_text = position(&|e| e["type"] == "content.delta" && e["taskId"] == research);
    assert!(write_text < research_end, "the writer streamed while the researcher ran: {:?}", stream.types());
    for event in events.iter().filter(|e| e["type"] != "task.start" && e["type"] != "task.complete") {
        if event["taskId"] == research || event["taskId"] == write {
            continue;
        }
        assert!(
            !(event["type"] == "content.delta" && (event["delta"] == "Soft " || event["delta"] == "Paris ")),
            "child text without its taskId: {event}"
        );
    }
    assert!(research_text < research_end);
    // The researcher waits 2 × 1 s on its model, the writer 1 s and streams for about 0.75 s more
    // (0.15 s before each chunk): one after the other would take 3.75 s, at once 2 s.
    assert!(took < Duration::from_millis(3000), "the children ran one after the other: {took:?}");

    // One aggregate, in input order, is the parent's tool result — and all the lead's model saw.
    let result = stream.of_type("tool.result").into_iter().find(|r| r["toolId"] == "call_team").unwrap();
    let aggregate: Value = serde_json::from_str(result["result"].as_str().unwrap()).unwrap();
    let tasks = aggregate["tasks"].as_array().unwrap();
    assert_eq!(tasks[0]["subAgentKey"], "researcher");
    assert_eq!(
        (tasks[0]["status"].as_str(), tasks[0]["answer"].as_str()),
        (Some("completed"), Some("Paris is sunny."))
    );
    assert_eq!(
        (tasks[1]["status"].as_str(), tasks[1]["answer"].as_str()),
        (Some("completed"), Some("Soft rain falls."))
    );
    let lead_second = gw.fixture.requests().into_iter().filter(|r| system(&r.body).starts_with("LEAD")).nth(1).unwrap();
    let messages = lead_second.body["messages"].as_array().unwrap();
    assert!(
        !messages.iter().any(|m| m["role"] == "assistant" && m.to_string().contains("mock_city_weather")),
        "a child's call reached the parent's context: {messages:?}"
    );
    assert_eq!(messages.iter().filter(|m| m["role"] == "tool").count(), 1, "only the aggregate");

    // Child call ids never collide with the parent's: they are prefixed with their task.
    let weather = stream.of_type("tool.start").into_iter().find(|t| t["toolName"] == "mock_city_weather").unwrap();
    assert!(weather["toolId"].as_str().unwrap().starts_with(research), "{weather}");
    assert_eq!(weather["taskId"], research);

    // Usage rolls up: two lead calls, two researcher calls, one writer call.
    let usage = &stream.last()["usage"];
    assert_eq!(usage["calls"], 5, "{usage}");
    assert_chat_files_valid(&gw);
}

#[tokio::test]
async fn the_replay_shows_the_children_where_they_ran_and_the_next_turn_sees_only_what_the_parent_saw() {
    let gw = Gateway::start(&agents(json!({})), &[]).await;
    script_team(&gw, 0);
    let stream = gw.run(&json!({"agentKey": "lead", "message": "Research and write."})).await;
    let chat_id = chat_id_of(&stream.events());
    let replay = assert_chat_replayable(&gw, &chat_id).await;
    let types: Vec<&str> = replay.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let invoke_at =
        replay.iter().position(|e| e["type"] == "tool.snapshot" && e["toolName"] == "agent_invoke").unwrap();
    let result_at = replay.iter().position(|e| e["type"] == "tool.result" && e["toolId"] == "call_team").unwrap();
    let starts: Vec<usize> = (0..replay.len()).filter(|i| replay[*i]["type"] == "task.start").collect();
    assert_eq!(starts.len(), 2, "{types:?}");
    assert!(starts.iter().all(|i| *i > invoke_at && *i < result_at), "children between call and result: {types:?}");

    // The same children, ids and texts as live.
    let live_starts = stream.of_type("task.start");
    for (replayed, live) in starts.iter().map(|i| &replay[*i]).zip(&live_starts) {
        for key in ["taskId", "subAgentKey", "taskName", "toolId", "description"] {
            assert_eq!(replayed[key], live[key], "{key}");
        }
    }
    let research = live_starts[0]["taskId"].as_str().unwrap();
    let replayed_text = replay
        .iter()
        .find(|e| e["type"] == "content.snapshot" && e["taskId"] == research)
        .expect("researcher's answer");
    assert_eq!(replayed_text["text"], "Paris is sunny.");
    let live_content_id =
        stream.of_type("content.start").into_iter().find(|e| e["taskId"] == research).unwrap()["contentId"].clone();
    assert_eq!(replayed_text["contentId"], live_content_id);
    let weather = replay.iter().find(|e| e["type"] == "tool.result" && e["taskId"] == research).expect("child result");
    assert!(weather["toolId"].as_str().unwrap().starts_with(research));
    assert_eq!(replay.iter().filter(|e| e["type"] == "task.complete").count(), 2);

    // The next turn of the chat: the lead's model sees its own call and the aggregate only.
    gw.fixture.forget_requests();
    let again = gw.run(&json!({"agentKey": "lead", "message": "Thanks!", "chatId": chat_id})).await;
    assert_eq!(again.last()["type"], "run.complete");
    let first = gw.fixture.requests().into_iter().find(|r| system(&r.body).starts_with("LEAD")).unwrap();
    let text = first.body["messages"].to_string();
    assert!(text.contains("agent_invoke"), "the parent's own call is in its history");
    assert!(!text.contains("RESEARCHER") && !text.contains("call_w"), "a child's step leaked into the history: {text}");
}

#[tokio::test]
async fn a_parent_deny_is_a_deny_in_the_child_and_unlisted_agents_cannot_be_invoked() {
    let gw = Gateway::start(&agents(json!({"mock_city_weather": "deny"})), &[]).await;
    script_team(&gw, 0);
    let stream = gw.run(&json!({"agentKey": "lead", "message": "Research."})).await;
    let weather = stream
        .of_type("tool.result")
        .into_iter()
        .find(|r| r["toolId"].as_str().is_some_and(|id| id.ends_with("call_w")))
        .expect("the child's call got a result");
    assert!(weather["result"].as_str().unwrap().contains("denied"), "{weather}");
    assert!(!weather["result"].as_str().unwrap().contains("temperatureC"), "the tool must not have run");

    // The model names an agent outside `subAgents`: an error result, nothing started.
    gw.fixture.set_responder(|_, body| {
        Some(if has_tool_result(body) {
            Transcript::openai_text(&["ok"])
        } else {
            invoke(json!([{"subAgentKey": "outsider", "task": "Hi"}]))
        })
    });
    let stream = gw.run(&json!({"agentKey": "lead", "message": "Ask the outsider."})).await;
    assert!(stream.of_type("task.start").is_empty());
    let result = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_owned();
    assert!(result.contains("not an agent this agent may invoke"), "{result}");
    assert!(!gw.fixture.requests().iter().any(|r| system(&r.body).starts_with("OUTSIDER")));
}

#[tokio::test]
async fn a_childs_approval_is_asked_and_answered_through_the_root_run() {
    let gw = Gateway::start(&agents(json!({"mock_city_weather": "ask"})), &[]).await;
    script_team(&gw, 0);
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "lead", "message": "Research."})).await);
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    let start = live.seen.iter().find(|e| e["type"] == "task.start" && e["subAgentKey"] == "researcher").unwrap();
    assert_eq!(ask["taskId"], start["taskId"], "the ask names its child: {ask}");
    let run_id = lead_run_id(&live.seen);
    assert_eq!(ask["runId"], run_id, "asked on the root run");
    let awaiting_id = ask["awaitingId"].as_str().unwrap().to_owned();
    let resp = gw
        .client
        .post(format!("{}/api/ap/submit", gw.base))
        .json(&json!({"runId": run_id, "awaitingId": awaiting_id, "params": {"decision": "once"}}))
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["data"]["status"], "accepted", "{body}");
    let result = live.until(|e| e["type"] == "tool.result" && e["toolId"] == awaiting_id.as_str()).await;
    assert!(result["result"].as_str().unwrap().contains("temperatureC"), "{result}");
    let rest = live.rest().await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete");
}

#[tokio::test]
async fn interrupting_the_parent_cancels_every_child() {
    let gw = Gateway::start(&agents(json!({})), &[]).await;
    gw.fixture.set_responder(|_, body| {
        let system = system(body);
        Some(if system.starts_with("LEAD") {
            invoke(json!([{"subAgentKey": "writer", "task": "A long poem."}, {"subAgentKey": "writer", "task": "Another."}]))
        } else {
            Transcript::openai_text(&["One ", "line ", "a ", "second"]).with_chunk_delay_ms(1000)
        })
    });
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "lead", "message": "Poems."})).await);
    live.until(|e| e["type"] == "content.delta" && e["taskId"].is_string()).await;
    let run_id = lead_run_id(&live.seen);
    let resp =
        gw.client.post(format!("{}/api/ap/interrupt", gw.base)).json(&json!({"runId": run_id})).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let rest = live.rest().await;
    let types: Vec<&str> = rest.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(rest.iter().filter(|e| e["type"] == "task.cancel").count(), 2, "{types:?}");
    assert_eq!(types.last(), Some(&"run.cancel"));
    let chat_id = chat_id_of(&live.seen.iter().collect::<Vec<_>>());
    let replay = assert_chat_replayable(&gw, &chat_id).await;
    assert_eq!(replay.iter().filter(|e| e["type"] == "task.cancel").count(), 2, "the cancelled children are kept");
}

// -- PLAN_EXECUTE with `planExecute.parallel` ------------------------------------------------------

fn planner(parallel: u32) -> (String, String) {
    let text = json!({"key": "planner", "mode": "PLAN_EXECUTE", "modelConfig": {"providerKey": "fixture", "model": "m"},
        "toolConfig": {"backends": ["mock_city_weather"]},
        "planExecute": {"parallel": parallel, "maxSteps": 8,
            "plan": {"systemPrompt": "PLAN"}, "execute": {"systemPrompt": "EXECUTE"}, "summary": {"systemPrompt": "SUMMARY"}}});
    ("planner.json".into(), text.to_string())
}

/// The task the request works on: `Current task ID:` of its last user message.
fn task_of(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let prompt = messages.iter().rev().find(|m| m["role"] == "user")?["content"].as_str()?;
    let line = prompt.lines().find_map(|l| l.strip_prefix("Current task ID:"))?;
    Some(line.trim().to_owned())
}

/// Whether the request's last message is a tool result (the task's weather call came back).
fn after_tool(body: &Value) -> bool {
    body["messages"].as_array().and_then(|m| m.last()).is_some_and(|m| m["role"] == "tool")
}

/// Plans `tasks` (`_plan_add_tasks_` arguments); every task calls the weather tool (its model
/// answering after `delay_ms`) and then marks itself completed; `replan` answers the planner's
/// look after each round (`None`: a short note, no tool).
fn script_plan(
    gw: &Gateway,
    tasks: Value,
    delay_ms: u64,
    replan: impl Fn(u32) -> Option<Transcript> + Send + Sync + 'static,
) {
    gw.fixture.set_responder(move |stage, body| {
        let stage = stage.unwrap_or("");
        Some(if stage == "agent-plan-generate" {
            Transcript::openai_tool_call("call_plan", "_plan_add_tasks_", &[&json!({"tasks": tasks}).to_string()])
        } else if let Some(round) = stage.strip_prefix("agent-plan-replan-") {
            replan(round.parse().unwrap_or(0)).unwrap_or_else(|| Transcript::openai_text(&["Nothing to change."]))
        } else if stage == "agent-plan-final" {
            Transcript::openai_text(&["All ", "done."])
        } else if let Some(task) = task_of(body) {
            if after_tool(body) && body["messages"].as_array().unwrap().last().unwrap()["name"] == "mock_city_weather" {
                let args = json!({"taskId": task, "status": "completed"}).to_string();
                // Half the delay again: every task has called its tool before any task ends.
                Transcript::openai_tool_call(&format!("call_done_{task}"), "_plan_update_task_", &[&args])
                    .with_headers_delay_ms(delay_ms / 2)
            } else {
                Transcript::openai_tool_call(&format!("call_w_{task}"), "mock_city_weather", &["{\"city\":\"Oslo\"}"])
                    .with_headers_delay_ms(delay_ms)
            }
        } else {
            Transcript::openai_text(&["?"])
        })
    });
}

#[tokio::test]
async fn independent_plan_tasks_run_at_once_interleave_with_their_task_ids_and_replay() {
    let gw = Gateway::start(&[planner(3)], &[]).await;
    let tasks = json!([{"description": "Weather in Oslo"}, {"description": "Weather in Rome"}, {"description": "Weather in Lima"}]);
    script_plan(&gw, tasks, 1000, |_| None);
    let started = Instant::now();
    let stream = gw.run(&json!({"agentKey": "planner", "message": "Three forecasts."})).await;
    let took = started.elapsed();
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    // Each task waits 1.5 s on its model; one after the other would take 4.5 s.
    assert!(took < Duration::from_millis(3000), "the tasks ran one after the other: {took:?}");

    let events = stream.events();
    let starts: Vec<usize> = (0..events.len()).filter(|i| events[*i]["type"] == "task.start").collect();
    let first_end = events.iter().position(|e| e["type"] == "task.complete").unwrap();
    assert_eq!(starts.len(), 3);
    assert!(starts.iter().all(|i| *i < first_end), "all three started before one ended: {:?}", stream.types());
    let ids: Vec<&str> = starts.iter().map(|i| events[*i]["taskId"].as_str().unwrap()).collect();
    // Their calls interleave, each tagged with its task.
    let calls: Vec<&str> = stream
        .of_type("tool.start")
        .iter()
        .filter(|t| t["toolName"] == "mock_city_weather")
        .map(|t| t["taskId"].as_str().unwrap())
        .collect();
    assert_eq!(calls.len(), 3);
    let weather_starts = events
        .iter()
        .enumerate()
        .filter(|(_, e)| e["type"] == "tool.start" && e["toolName"] == "mock_city_weather")
        .map(|(i, _)| i);
    assert!(weather_starts.clone().all(|i| i < first_end), "every task called its tool before any task ended");
    for id in &ids {
        assert!(calls.contains(id));
    }
    // The merged plan is shown once the round ended: all three completed. A task's own copy of
    // the plan is never shown.
    assert!(stream.of_type("plan.update").iter().all(|u| u["taskId"].is_null()), "{:?}", stream.of_type("plan.update"));
    let plan = stream.of_type("plan.update").last().unwrap()["plan"].clone();
    assert!(plan.as_array().unwrap().iter().all(|t| t["status"] == "completed"), "{plan}");

    let chat_id = chat_id_of(&events);
    let replay = assert_chat_replayable(&gw, &chat_id).await;
    let replayed: Vec<&str> =
        replay.iter().filter(|e| e["type"] == "task.start").map(|e| e["taskId"].as_str().unwrap()).collect();
    assert_eq!(replayed, ids, "the tasks replay framed, in plan order");
    assert_eq!(replay.iter().filter(|e| e["type"] == "task.complete").count(), 3);
    for id in &ids {
        assert!(
            replay.iter().any(|e| e["type"] == "tool.result" && e["taskId"] == *id),
            "task {id}'s result replays with its id"
        );
    }
    assert_chat_files_valid(&gw);
}

#[tokio::test]
async fn a_task_waits_for_its_dependencies_and_the_planner_adds_a_task_after_a_round() {
    let gw = Gateway::start(&[planner(3)], &[]).await;
    let tasks = json!([{"description": "Fetch A"}, {"description": "Fetch B"}, {"description": "Compare", "dependsOn": [1, 2]}]);
    script_plan(&gw, tasks, 0, |round| {
        (round == 1).then(|| {
            let args = json!({"tasks": [{"description": "Double-check"}]}).to_string();
            Transcript::openai_tool_call("call_more", "_plan_add_tasks_", &[&args])
        })
    });
    let stream = gw.run(&json!({"agentKey": "planner", "message": "Compare A and B."})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let events = stream.events();
    let frames: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"] == "task.start" || e["type"] == "task.complete")
        .map(|e| (e["type"].as_str().unwrap().to_owned(), e["taskId"].as_str().unwrap().to_owned()))
        .collect();
    let plan = stream.of_type("plan.update").last().unwrap()["plan"].as_array().unwrap().clone();
    let id = |description: &str| {
        plan.iter().find(|t| t["description"] == description).unwrap()["taskId"].as_str().unwrap().to_owned()
    };
    let at = |kind: &str, task: &str| frames.iter().position(|(k, t)| k == kind && *t == task).unwrap();
    // Round 1: A and B at once; Compare only once both completed; the planner's new task runs
    // beside it in round 2.
    assert!(at("task.start", &id("Fetch B")) < at("task.complete", &id("Fetch A")));
    assert!(at("task.start", &id("Compare")) > at("task.complete", &id("Fetch A")));
    assert!(at("task.start", &id("Compare")) > at("task.complete", &id("Fetch B")));
    assert!(at("task.start", &id("Double-check")) < at("task.complete", &id("Compare")));
    assert_eq!(plan.len(), 4);
    assert!(plan.iter().all(|t| t["status"] == "completed"), "{plan:?}");
}

#[tokio::test]
async fn the_childrens_tokens_count_against_the_parents_budget() {
    let mut team = agents(json!({}));
    let mut lead: Value = serde_json::from_str(&team[0].1).unwrap();
    // The lead alone uses 11 tokens before its second call; with its children's, 47.
    lead["budget"] = json!({"maxTokens": 30});
    team[0].1 = lead.to_string();
    let gw = Gateway::start(&team, &[]).await;
    script_team(&gw, 0);
    let stream = gw.run(&json!({"agentKey": "lead", "message": "Research and write."})).await;
    assert_eq!(stream.of_type("task.complete").len(), 2, "the children ran");
    let error = &stream.last()["error"];
    assert_eq!(stream.last()["type"], "run.error", "{:?}", stream.types());
    assert_eq!(error["code"], "budget_exceeded", "{error}");
    assert!(error["message"].as_str().unwrap().contains("maxTokens=30"), "{error}");
    let lead_calls = gw.fixture.requests().iter().filter(|r| system(&r.body).starts_with("LEAD")).count();
    assert_eq!(lead_calls, 1, "the lead's second call was refused");
}

#[tokio::test]
async fn sub_agents_cannot_invoke_agents_unless_the_depth_setting_allows_it() {
    let mut team = agents(json!({}));
    let mut researcher: Value = serde_json::from_str(&team[1].1).unwrap();
    researcher["toolConfig"]["subAgents"] = json!(["writer"]);
    team[1].1 = researcher.to_string();
    for (depth, offered) in [("1", false), ("2", true)] {
        let gw = Gateway::start(&team, &[("AGW_SUB_AGENTS_MAX_DEPTH", depth)]).await;
        script_team(&gw, 0);
        let stream = gw.run(&json!({"agentKey": "lead", "message": "Research."})).await;
        assert_eq!(stream.last()["type"], "run.complete");
        let researcher_call =
            gw.fixture.requests().into_iter().find(|r| system(&r.body).starts_with("RESEARCHER")).unwrap();
        let tools = researcher_call.body["tools"].to_string();
        assert_eq!(tools.contains("agent_invoke"), offered, "depth {depth}: {tools}");
        let lead_call = gw.fixture.requests().into_iter().find(|r| system(&r.body).starts_with("LEAD")).unwrap();
        assert!(lead_call.body["tools"].to_string().contains("agent_invoke"), "the lead is at depth 0");
    }
}

#[tokio::test]
async fn the_childrens_tokens_count_against_the_owners_daily_quota() {
    // 30 tokens a day: the lead alone would use 23 in its two calls; its children use 36 more.
    let env = [("AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY", "30"), ("AGW_QUOTAS_RESERVE_TOKENS", "0")];
    let gw = Gateway::start(&agents(json!({})), &env).await;
    script_team(&gw, 0);
    let stream = gw.run(&json!({"agentKey": "lead", "message": "Research and write."})).await;
    assert!(!stream.of_type("task.start").is_empty(), "{:?}", stream.types());
    let quota_hit = stream.events().iter().any(|e| e.to_string().contains("quota_exceeded"));
    assert!(quota_hit, "a call past the quota was refused: {:?}", stream.types());
    // The next run is refused at admission: the day's tokens are spent.
    let resp = gw.post_query(&json!({"agentKey": "lead", "message": "Again."})).await;
    assert_eq!(resp.status(), 429, "{}", resp.text().await.unwrap());
}

#[tokio::test]
async fn a_childs_frontend_tool_waits_on_the_root_run_and_is_answered_through_it() {
    let mut team = agents(json!({}));
    let mut writer: Value = serde_json::from_str(&team[2].1).unwrap();
    writer["mode"] = json!("REACT");
    writer["react"] = json!({"systemPrompt": "WRITER: you write.", "maxSteps": 3});
    writer["toolConfig"] = json!({"frontends": ["confirm_dialog"]});
    team[2].1 = writer.to_string();
    let gw = Gateway::start(&team, &[]).await;
    gw.fixture.set_responder(|_, body| {
        let system = system(body);
        let answered = has_tool_result(body);
        Some(if system.starts_with("LEAD") {
            if answered {
                Transcript::openai_text(&["ok"])
            } else {
                invoke(json!([{"subAgentKey": "writer", "task": "Ask first."}]))
            }
        } else if answered {
            Transcript::openai_text(&["Confirmed."])
        } else {
            Transcript::openai_tool_call(
                "call_ask",
                "confirm_dialog",
                &["{\"question\":\"Go?\",\"options\":[\"Yes\",\"No\"]}"],
            )
        })
    });
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "lead", "message": "Write."})).await);
    let start = live.until(|e| e["type"] == "tool.start" && e["toolName"] == "confirm_dialog").await;
    let task = live.seen.iter().find(|e| e["type"] == "task.start").unwrap()["taskId"].clone();
    assert_eq!(start["taskId"], task, "the form names its child: {start}");
    assert!(start["toolKey"].is_string(), "a frontend tool's start: {start}");
    let tool_id = start["toolId"].as_str().unwrap().to_owned();
    let run_id = lead_run_id(&live.seen);
    let resp = gw
        .client
        .post(format!("{}/api/ap/submit", gw.base))
        .json(&json!({"runId": run_id, "toolId": tool_id, "params": {"selectedOption": "Yes"}}))
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["data"]["accepted"], true, "{body}");
    let result = live.until(|e| e["type"] == "tool.result" && e["toolId"] == tool_id.as_str()).await;
    assert_eq!(result["result"], "{\"selectedOption\":\"Yes\"}");
    assert_eq!(result["taskId"], task);
    assert_eq!(live.rest().await.last().unwrap()["type"], "run.complete");
}
