//! PLAN_EXECUTE over real HTTP with the fixture provider scripted by stage (`docs/contract/modes.md`
//! §5, `docs/contract/sse-events.md` §10.3, reference DefinitionDrivenAgentTest 13–20, 23).
//!
//! Task ids are random, so transcripts that must name a task are registered once the plan's
//! `plan.update` has been read; the first execute round is scripted beforehand, answers after a
//! pause, and never needs an id.

mod common;

use agw_testkit::{RecordedRequest, Transcript};
use common::{Gateway, LiveStream, SECOND_FIXTURE_PROVIDER};
use serde_json::{Value, json};

const GENERATE: &str = "agent-plan-generate";
const FINAL: &str = "agent-plan-final";
/// Pause of the first execute round: time for the test to script the rounds that need task ids.
const FIRST_ROUND_DELAY_MS: u64 = 400;

/// A PLAN_EXECUTE agent on the fixture provider; `extra` is merged into the top-level object and
/// `plan_execute` into `planExecute`.
fn agent(key: &str, extra: Value, plan_execute: Value) -> (String, String) {
    let mut root = json!({
        "key": key,
        "mode": "PLAN_EXECUTE",
        "modelConfig": {"providerKey": "fixture", "model": "m"},
        "planExecute": {
            "plan": {"systemPrompt": "规划系统提示"},
            "execute": {"systemPrompt": "执行系统提示"},
            "summary": {"systemPrompt": "总结系统提示"}
        }
    });
    for (k, v) in extra.as_object().unwrap() {
        root[k] = v.clone();
    }
    for (k, v) in plan_execute.as_object().unwrap() {
        root["planExecute"][k] = v.clone();
    }
    (format!("{key}.json"), root.to_string())
}

/// `_plan_add_tasks_` with these descriptions: a naming fragment, then the arguments.
fn add_tasks(call_id: &str, descriptions: &[&str]) -> Transcript {
    let tasks: Vec<Value> = descriptions.iter().map(|d| json!({"description": d})).collect();
    Transcript::openai_tool_call(call_id, "_plan_add_tasks_", &[&json!({"tasks": tasks}).to_string()])
}

/// One tool-call chunk carrying id, name and the complete arguments.
fn whole_call(t: Transcript, index: u32, id: &str, name: &str, args: &Value) -> Transcript {
    t.delta(json!({"tool_calls": [{"index": index, "id": id, "type": "function",
        "function": {"name": name, "arguments": args.to_string()}}]}))
}

fn update(call_id: &str, task_id: &str, status: &str) -> Transcript {
    whole_call(Transcript::new(), 0, call_id, "_plan_update_task_", &json!({"taskId": task_id, "status": status}))
        .finish("tool_calls")
        .done()
}

fn text(pieces: &[&str]) -> Transcript {
    Transcript::openai_text(pieces)
}

/// A first execute round that says something and calls nothing, after a pause.
fn slow_text(piece: &str) -> Transcript {
    text(&[piece]).with_headers_delay_ms(FIRST_ROUND_DELAY_MS)
}

/// Posts `body`, reads up to the `nth` (1-based) `plan.update`, lets `script` add transcripts
/// knowing the task ids of that plan, then reads the rest of the stream.
async fn run_plan(gw: &Gateway, body: Value, nth: usize, script: impl FnOnce(&[String])) -> Vec<Value> {
    let resp = gw.post_query(&body).await;
    assert_eq!(resp.status(), 200);
    let mut live = LiveStream::new(resp);
    let mut plan = Value::Null;
    for _ in 0..nth {
        plan = live.until(|e| e["type"] == "plan.update").await;
    }
    script(&task_ids(&plan));
    live.rest().await
}

fn task_ids(plan_update: &Value) -> Vec<String> {
    plan_update["plan"].as_array().unwrap().iter().map(|t| t["taskId"].as_str().unwrap().to_string()).collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn stages(gw: &Gateway) -> Vec<String> {
    gw.fixture.requests().iter().map(|r| r.stage().unwrap_or("").to_string()).collect()
}

fn request(gw: &Gateway, stage: &str) -> RecordedRequest {
    gw.fixture
        .requests()
        .into_iter()
        .find(|r| r.stage() == Some(stage))
        .unwrap_or_else(|| panic!("no {stage} request; stages: {:?}", stages(gw)))
}

fn tool_names(body: &Value) -> Vec<&str> {
    body["tools"]
        .as_array()
        .map_or_else(Vec::new, |tools| tools.iter().map(|t| t["function"]["name"].as_str().unwrap()).collect())
}

fn system_prompt(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap()
}

fn last_message(body: &Value) -> &Value {
    body["messages"].as_array().unwrap().last().unwrap()
}

/// `(type, taskId)` of every task event.
fn lifecycle(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("task."))
        .map(|e| (e["type"].as_str().unwrap().to_string(), e["taskId"].as_str().unwrap().to_string()))
        .collect()
}

fn pair(ty: &str, id: &str) -> (String, String) {
    (ty.to_string(), id.to_string())
}

/// The §10.3 example stream, event by event (timestamps aside), key order included.
#[tokio::test]
async fn plan_execute_example_stream_of_the_contract() {
    // The example's tool descriptions are the reference's Chinese ones.
    let tools_dir = std::env::temp_dir().join(format!("agw-tools-10-3-{}", std::process::id()));
    std::fs::create_dir_all(&tools_dir).unwrap();
    let tool_file = |name: &str, description: &str, params: Value| {
        let text =
            json!({"tools": [{"type": "function", "name": name, "description": description, "parameters": params}]});
        std::fs::write(tools_dir.join(format!("{name}.backend")), text.to_string()).unwrap();
    };
    let add_description =
        "创建计划任务（追加模式），支持一次添加一个或多个任务。成功返回多行文本：taskId | status | description。";
    let update_description =
        "更新计划中的任务状态。status 仅支持 init/completed/failed/canceled；成功返回 OK，失败返回 失败: 原因。";
    let weather_description = "[MOCK] 根据 city 和 date 查询天气（伪造数据）。";
    tool_file(
        "_plan_add_tasks_",
        add_description,
        json!({"type": "object", "properties": {"tasks": {"type": "array"}}}),
    );
    tool_file(
        "_plan_update_task_",
        update_description,
        json!({"type": "object", "properties": {"taskId": {"type": "string"}, "status": {"type": "string"}}}),
    );
    tool_file(
        "mock_city_weather",
        weather_description,
        json!({"type": "object", "properties": {"city": {"type": "string"}, "date": {"type": "string"}}}),
    );
    let gw = Gateway::start(
        &[agent("demoModePlanExecute", json!({"toolConfig": {"backends": ["mock_city_weather"]}}), json!({}))],
        &[("AGENT_TOOLS_EXTERNAL_DIR", tools_dir.to_str().unwrap())],
    )
    .await;
    gw.fixture.on_stage(
        GENERATE,
        Transcript::new()
            .content("我将规划两个任务。")
            .tool_call_start(0, "call_p1", "_plan_add_tasks_")
            .tool_args(0, r#"{"tasks":[{"description":"查询上海明天天气"},"#)
            .tool_args(0, r#"{"description":"给出搬迁建议"}]}"#)
            .finish("tool_calls")
            .done(),
    );
    gw.fixture.on_stage(
        "agent-plan-execute-step-1",
        whole_call(
            Transcript::new().content("先查询天气。"),
            0,
            "call_w1",
            "mock_city_weather",
            &json!({"city": "Shanghai", "date": "2026-02-13"}),
        )
        .finish("tool_calls")
        .done()
        .with_headers_delay_ms(FIRST_ROUND_DELAY_MS),
    );
    let chat = "5d2e8c41-9a7b-4c3d-8e1f-2a3b4c5d6e7f";
    let body = json!({"chatId": chat, "message": "明天上海机房搬迁，关注天气", "agentKey": "demoModePlanExecute"});
    let events = run_plan(&gw, body, 1, |ids| {
        gw.fixture.on_stage("agent-plan-execute-step-1-work-2", update("call_u1", &ids[0], "completed"));
        gw.fixture.on_stage(
            "agent-plan-execute-step-2",
            whole_call(
                Transcript::new().content("明天有雾，建议上午晚些时候再运输。"),
                0,
                "call_u2",
                "_plan_update_task_",
                &json!({"taskId": ids[1], "status": "completed"}),
            )
            .finish("tool_calls")
            .done(),
        );
        gw.fixture.on_stage(FINAL, text(&["最终结论\n- 明天上海有雾，", "可按计划搬迁但需推迟出发。"]));
    })
    .await;

    let run = events[2]["runId"].as_str().unwrap().to_string();
    let added = events.iter().find(|e| e["type"] == "tool.result").unwrap()["result"].as_str().unwrap().to_string();
    let ids: Vec<String> = added.lines().map(|l| l.split(" | ").next().unwrap().to_string()).collect();
    assert_eq!(ids.len(), 2, "{added}");
    assert!(ids.iter().all(|id| id.len() == 8 && id.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())));
    let (t1, t2) = (ids[0].as_str(), ids[1].as_str());
    let plan_id = "plan_3b085dac2d36";
    let task =
        |id: &str, description: &str, status: &str| json!({"taskId": id, "description": description, "status": status});
    let c = |n: u32| format!("{run}_c_{n}");
    let expected = [
        json!({"seq":1,"type":"request.query","requestId":run,"chatId":chat,"role":"user","message":"明天上海机房搬迁，关注天气","agentKey":"demoModePlanExecute"}),
        json!({"seq":2,"type":"chat.start","chatId":chat,"chatName":"明天上海机房搬迁，关注天气"}),
        json!({"seq":3,"type":"run.start","runId":run,"chatId":chat}),
        json!({"seq":4,"type":"content.start","contentId":c(1),"runId":run}),
        json!({"seq":5,"type":"content.delta","contentId":c(1),"delta":"我将规划两个任务。"}),
        json!({"seq":6,"type":"content.end","contentId":c(1)}),
        json!({"seq":7,"type":"tool.start","toolId":"call_p1","runId":run,"toolName":"_plan_add_tasks_","toolType":"function","description":add_description}),
        json!({"seq":8,"type":"tool.args","toolId":"call_p1","delta":"{\"tasks\":[{\"description\":\"查询上海明天天气\"},","chunkIndex":0}),
        json!({"seq":9,"type":"tool.args","toolId":"call_p1","delta":"{\"description\":\"给出搬迁建议\"}]}","chunkIndex":1}),
        json!({"seq":10,"type":"tool.end","toolId":"call_p1"}),
        json!({"seq":11,"type":"tool.result","toolId":"call_p1","result":format!("{t1} | init | 查询上海明天天气\n{t2} | init | 给出搬迁建议")}),
        json!({"seq":12,"type":"plan.update","planId":plan_id,"chatId":chat,"plan":[task(t1,"查询上海明天天气","init"),task(t2,"给出搬迁建议","init")]}),
        json!({"seq":13,"type":"task.start","taskId":t1,"runId":run,"taskName":t1,"description":"查询上海明天天气"}),
        json!({"seq":14,"type":"content.start","contentId":c(2),"runId":run,"taskId":t1}),
        json!({"seq":15,"type":"content.delta","contentId":c(2),"delta":"先查询天气。"}),
        json!({"seq":16,"type":"content.end","contentId":c(2)}),
        json!({"seq":17,"type":"tool.start","toolId":"call_w1","runId":run,"taskId":t1,"toolName":"mock_city_weather","toolType":"function","toolParams":{"city":"Shanghai","date":"2026-02-13"},"description":weather_description}),
        json!({"seq":18,"type":"tool.args","toolId":"call_w1","delta":"{\"city\":\"Shanghai\",\"date\":\"2026-02-13\"}","chunkIndex":0}),
        json!({"seq":19,"type":"tool.end","toolId":"call_w1"}),
        json!({"seq":20,"type":"tool.result","toolId":"call_w1","result":"{\"city\":\"上海\",\"date\":\"2026-02-13\",\"temperatureC\":23,\"humidity\":66,\"windLevel\":2,\"condition\":\"雾\",\"mockTag\":\"幂等随机数据\"}"}),
        json!({"seq":21,"type":"tool.start","toolId":"call_u1","runId":run,"taskId":t1,"toolName":"_plan_update_task_","toolType":"function","toolParams":{"taskId":t1,"status":"completed"},"description":update_description}),
        json!({"seq":22,"type":"tool.args","toolId":"call_u1","delta":format!("{{\"taskId\":\"{t1}\",\"status\":\"completed\"}}"),"chunkIndex":0}),
        json!({"seq":23,"type":"tool.end","toolId":"call_u1"}),
        json!({"seq":24,"type":"tool.result","toolId":"call_u1","result":"OK"}),
        json!({"seq":25,"type":"plan.update","planId":plan_id,"chatId":chat,"plan":[task(t1,"查询上海明天天气","completed"),task(t2,"给出搬迁建议","init")]}),
        json!({"seq":26,"type":"task.complete","taskId":t1}),
        json!({"seq":27,"type":"task.start","taskId":t2,"runId":run,"taskName":t2,"description":"给出搬迁建议"}),
        json!({"seq":28,"type":"content.start","contentId":c(3),"runId":run,"taskId":t2}),
        json!({"seq":29,"type":"content.delta","contentId":c(3),"delta":"明天有雾，建议上午晚些时候再运输。"}),
        json!({"seq":30,"type":"content.end","contentId":c(3)}),
        json!({"seq":31,"type":"tool.start","toolId":"call_u2","runId":run,"taskId":t2,"toolName":"_plan_update_task_","toolType":"function","toolParams":{"taskId":t2,"status":"completed"},"description":update_description}),
        json!({"seq":32,"type":"tool.args","toolId":"call_u2","delta":format!("{{\"taskId\":\"{t2}\",\"status\":\"completed\"}}"),"chunkIndex":0}),
        json!({"seq":33,"type":"tool.end","toolId":"call_u2"}),
        json!({"seq":34,"type":"tool.result","toolId":"call_u2","result":"OK"}),
        json!({"seq":35,"type":"plan.update","planId":plan_id,"chatId":chat,"plan":[task(t1,"查询上海明天天气","completed"),task(t2,"给出搬迁建议","completed")]}),
        json!({"seq":36,"type":"task.complete","taskId":t2}),
        json!({"seq":37,"type":"content.start","contentId":c(4),"runId":run}),
        json!({"seq":38,"type":"content.delta","contentId":c(4),"delta":"最终结论\n- 明天上海有雾，"}),
        json!({"seq":39,"type":"content.delta","contentId":c(4),"delta":"可按计划搬迁但需推迟出发。"}),
        json!({"seq":40,"type":"content.end","contentId":c(4)}),
        json!({"seq":41,"type":"run.complete","runId":run,"finishReason":"stop"}),
    ];
    assert_eq!(events.len(), expected.len(), "{:?}", types(&events));
    for (got, want) in events.iter().zip(&expected) {
        let mut got = got.clone();
        assert!(got["timestamp"].is_i64(), "{got}");
        got.as_object_mut().unwrap().shift_remove("timestamp");
        // agw adds the run's usage (every model call of this script reports some) to the
        // contract's example.
        if got["type"] == "run.complete" {
            assert!(got["usage"]["calls"].as_u64().unwrap_or(0) > 0, "{got}");
            got.as_object_mut().unwrap().shift_remove("usage");
        }
        assert_eq!(&got, want);
        let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
        let want_keys: Vec<&String> = want.as_object().unwrap().keys().collect();
        assert_eq!(keys, want_keys, "key order of {}", want["type"]);
    }
    assert_eq!(
        stages(&gw),
        [GENERATE, "agent-plan-execute-step-1", "agent-plan-execute-step-1-work-2", "agent-plan-execute-step-2", FINAL]
    );
    // The summary sees everything the tasks did.
    let summary = request(&gw, FINAL).body;
    let messages = summary["messages"].as_array().unwrap();
    assert_eq!(messages[1], json!({"role": "user", "content": "明天上海机房搬迁，关注天气"}));
    assert!(messages.iter().any(|m| m["tool_call_id"] == "call_w1"));
    assert!(messages.iter().any(|m| m["role"] == "assistant" && m["content"] == "明天有雾，建议上午晚些时候再运输。"));
    let _ = std::fs::remove_dir_all(tools_dir);
}

/// DefinitionDrivenAgentTest 14: the draft turn thinks out loud without tools, the generate turn
/// must call the plan tool with reasoning off and sees the draft.
#[tokio::test]
async fn deep_thinking_drafts_then_generates() {
    let gw = Gateway::start(
        &[agent(
            "deep",
            json!({
                "modelConfig": {"providerKey": "fixture", "model": "m", "reasoning": {"enabled": true, "effort": "HIGH"}},
                "toolConfig": {"backends": ["mock_city_weather", "city_datetime"]}
            }),
            json!({"plan": {"systemPrompt": "规划系统提示", "deepThinking": true}}),
        )],
        &[],
    )
    .await;
    gw.fixture.on_stage("agent-plan-draft", Transcript::openai_reasoning_text(&["先想一想"], &["草稿：", "一个任务"]));
    gw.fixture.on_stage(
        GENERATE,
        Transcript::new()
            .reasoning("生成时的推理不外发")
            .tool_call_start(0, "call_p", "_plan_add_tasks_")
            .tool_args(0, r#"{"tasks":[{"description":"任务1"}]}"#)
            .finish("tool_calls")
            .done(),
    );
    gw.fixture.on_stage("agent-plan-execute-step-1", slow_text("执行中"));
    gw.fixture.on_stage(FINAL, text(&["总结"]));
    let events = run_plan(&gw, json!({"agentKey": "deep", "message": "测试深度规划"}), 1, |ids| {
        gw.fixture.on_stage("agent-plan-execute-step-1-work-2", update("call_u", &ids[0], "completed"));
    })
    .await;
    assert_eq!(events.last().unwrap()["type"], "run.complete", "{:?}", types(&events));
    assert_eq!(
        stages(&gw),
        ["agent-plan-draft", GENERATE, "agent-plan-execute-step-1", "agent-plan-execute-step-1-work-2", FINAL]
    );

    // The draft: reasoning forced on, no tools, only the request.
    let draft = request(&gw, "agent-plan-draft").body;
    assert_eq!(draft["reasoning"], json!({"effort": "high"}));
    assert!(draft.get("tools").is_none() && draft.get("tool_choice").is_none(), "{draft}");
    let draft_messages = draft["messages"].as_array().unwrap();
    assert_eq!(draft_messages.len(), 2);
    assert_eq!(draft_messages[1], json!({"role": "user", "content": "测试深度规划"}));
    let deltas: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "reasoning.delta" || e["type"] == "content.delta")
        .map(|e| (e["type"].as_str().unwrap(), e["delta"].as_str().unwrap()))
        .collect();
    assert_eq!(
        deltas[..3],
        [("reasoning.delta", "先想一想"), ("content.delta", "草稿："), ("content.delta", "一个任务")],
        "the draft is streamed"
    );
    assert!(!deltas.iter().any(|(_, d)| d.contains("不外发")), "generate reasoning is never emitted: {deltas:?}");

    // The generate turn: reasoning off, only the plan tool, required, the draft appended.
    let generate = request(&gw, GENERATE).body;
    assert!(generate.get("reasoning").is_none(), "{generate}");
    assert_eq!(tool_names(&generate), ["_plan_add_tasks_"]);
    assert_eq!(generate["tool_choice"], "required");
    let messages = generate["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[1], json!({"role": "user", "content": "测试深度规划"}));
    assert_eq!(messages[2], json!({"role": "assistant", "content": "草稿：一个任务"}));
    let system = system_prompt(&generate);
    assert!(system.starts_with("规划系统提示"), "{system}");
    assert!(system.contains("Tools available in the execution stage"), "{system}");
    assert!(system.contains("- mock_city_weather: "), "execute tools listed for reference: {system}");
    assert!(
        system.contains("(you must call _plan_add_tasks_ to create the plan):\n- _plan_add_tasks_: Create plan tasks")
    );
    assert!(!system.contains("Recommended instructions after tool calls:"), "no hints while planning: {system}");

    // Execute and summary keep their stage settings (reasoning of the top level here).
    let step1 = request(&gw, "agent-plan-execute-step-1").body;
    assert_eq!(step1["reasoning"], json!({"effort": "high"}));
    let system = system_prompt(&step1);
    assert!(
        system.starts_with("执行系统提示") && system.contains("- _plan_update_task_: Update the status"),
        "{system}"
    );
    assert!(system.contains("Recommended instructions after tool calls:\n- city_datetime: "), "{system}");
    assert_eq!(tool_names(&step1), ["_plan_update_task_", "city_datetime", "mock_city_weather"]);
    assert_eq!(step1["tool_choice"], "auto");
    let final_req = request(&gw, FINAL).body;
    assert!(final_req.get("tools").is_none());
    assert!(system_prompt(&final_req).contains("Recommended instructions after tool calls:"));
}

/// DefinitionDrivenAgentTest 13: no draft; the exact tools, choices, prompts and messages of each
/// stage; tool events inside a task carry its id.
#[tokio::test]
async fn without_deep_thinking_each_stage_gets_its_own_request() {
    let gw = Gateway::start(&[agent("plain", json!({}), json!({}))], &[]).await;
    gw.fixture.on_stage(GENERATE, add_tasks("call_p", &["任务1"]));
    gw.fixture.on_stage("agent-plan-execute-step-1", slow_text("开始"));
    gw.fixture.on_stage(FINAL, text(&["完成"]));
    let events = run_plan(&gw, json!({"agentKey": "plain", "message": "简单计划"}), 1, |ids| {
        // DefinitionDrivenAgentTest 18: text after the call (split over two chunks) is not streamed.
        let args = json!({"taskId": ids[0], "status": "completed"}).to_string();
        let (head, tail) = args.split_at(10);
        gw.fixture.on_stage(
            "agent-plan-execute-step-1-work-2",
            Transcript::new()
                .content("更新前")
                .tool_call_start(0, "call_u", "_plan_update_task_")
                .tool_args(0, head)
                .tool_args(0, tail)
                .reasoning("工具后推理不应外发")
                .content("工具后内容不应外发")
                .finish("tool_calls")
                .done(),
        );
    })
    .await;
    let texts: String = events
        .iter()
        .filter(|e| e["type"] == "content.delta" || e["type"] == "reasoning.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(texts.contains("更新前") && !texts.contains("不应外发"), "{texts}");
    assert!(events.iter().any(|e| e["type"] == "tool.result" && e["toolId"] == "call_u" && e["result"] == "OK"));
    let ids = task_ids(events.iter().find(|e| e["type"] == "plan.update").unwrap());
    assert_eq!(lifecycle(&events), [pair("task.start", &ids[0]), pair("task.complete", &ids[0])]);
    assert_eq!(events.last().unwrap()["type"], "run.complete");
    assert!(!stages(&gw).iter().any(|s| s == "agent-plan-draft"));

    let generate = request(&gw, GENERATE).body;
    assert!(system_prompt(&generate).starts_with("规划系统提示"));
    assert_eq!(tool_names(&generate), ["_plan_add_tasks_"]);
    assert_eq!(generate["tool_choice"], "required");
    assert!(generate.get("reasoning").is_none());
    assert_eq!(generate["messages"].as_array().unwrap().len(), 2, "system + the request only");
    assert_eq!(last_message(&generate), &json!({"role": "user", "content": "简单计划"}));

    let step1 = request(&gw, "agent-plan-execute-step-1").body;
    assert!(system_prompt(&step1).starts_with("执行系统提示"));
    assert_eq!(tool_names(&step1), ["_plan_update_task_"]);
    let prompt = last_message(&step1)["content"].as_str().unwrap();
    assert!(prompt.starts_with(&format!("Task list:\n- {} | init | 任务1\nCurrent task ID: {}\n", ids[0], ids[0])));
    assert!(prompt.ends_with("you MUST call _plan_update_task_ to update its status.\n"), "{prompt:?}");
    // The plan call and its result went to the execute messages.
    let messages = step1["messages"].as_array().unwrap();
    assert_eq!(messages[2]["tool_calls"][0]["function"]["name"], "_plan_add_tasks_");
    assert_eq!(messages[3]["tool_call_id"], "call_p");
    assert!(system_prompt(&request(&gw, FINAL).body).starts_with("总结系统提示"));

    let update_start = events.iter().find(|e| e["type"] == "tool.start" && e["toolId"] == "call_u").unwrap();
    assert_eq!(update_start["taskId"], ids[0].as_str());
    let content = events.iter().find(|e| e["type"] == "content.start" && e.get("taskId").is_some()).unwrap();
    assert_eq!(content["taskId"], ids[0].as_str());
}

/// A task the model marks failed ends the run: task.fail `task_failed`, then plan_stalled; the
/// later task never starts and no summary is asked for. `toolConfig: null` on the execute stage
/// leaves only the forced update tool.
#[tokio::test]
async fn a_task_marked_failed_stops_the_plan() {
    let gw = Gateway::start(
        &[agent(
            "fails",
            json!({"toolConfig": {"backends": ["mock_city_weather"]}}),
            json!({"execute": {"systemPrompt": "执行系统提示", "toolConfig": null}}),
        )],
        &[],
    )
    .await;
    gw.fixture.on_stage(GENERATE, add_tasks("call_p", &["任务A", "任务B"]));
    gw.fixture.on_stage("agent-plan-execute-step-1", slow_text("检查中"));
    gw.fixture.on_stage(FINAL, text(&["不应出现"]));
    let events = run_plan(&gw, json!({"agentKey": "fails", "message": "会失败的计划"}), 1, |ids| {
        gw.fixture.on_stage("agent-plan-execute-step-1-work-2", update("call_u", &ids[0], "failed"));
    })
    .await;
    let ids = task_ids(events.iter().find(|e| e["type"] == "plan.update").unwrap());
    assert_eq!(lifecycle(&events), [pair("task.start", &ids[0]), pair("task.fail", &ids[0])]);
    let fail = events.iter().find(|e| e["type"] == "task.fail").unwrap();
    assert_eq!(fail["error"], json!({"code": "task_failed", "message": "Task status updated to failed"}));
    let last = events.last().unwrap();
    assert_eq!(last["type"], "run.error", "{:?}", types(&events));
    assert_eq!(last["error"]["code"], "plan_stalled");
    assert!(last["error"]["message"].as_str().unwrap().contains(&ids[0]), "{last}");
    assert_eq!(last["error"]["retriable"], false);
    assert!(!stages(&gw).iter().any(|s| s == FINAL));
    let failed_plan = events.iter().rev().find(|e| e["type"] == "plan.update").unwrap();
    assert_eq!(failed_plan["plan"][0]["status"], "failed");

    let step1 = request(&gw, "agent-plan-execute-step-1").body;
    assert_eq!(tool_names(&step1), ["_plan_update_task_"], "toolConfig null clears the execute tools");
}

/// DefinitionDrivenAgentTest 20: a model that never updates its task gets 6 work rounds, then the
/// update and repair rounds (tool_choice required), then the run stops with plan_stalled.
#[tokio::test]
async fn a_task_never_updated_stalls_the_plan() {
    let gw = Gateway::start(&[agent("stalls", json!({}), json!({}))], &[]).await;
    gw.fixture.on_stage(GENERATE, add_tasks("call_p", &["任务1", "任务2"]));
    gw.fixture.set_default(text(&["还在想"]));
    let stream = gw.run(&json!({"agentKey": "stalls", "message": "不会更新的计划"})).await;
    let events: Vec<Value> = stream.events().into_iter().cloned().collect();
    let ids = task_ids(events.iter().find(|e| e["type"] == "plan.update").unwrap());
    assert_eq!(lifecycle(&events), [pair("task.start", &ids[0]), pair("task.fail", &ids[0])]);
    let fail = events.iter().find(|e| e["type"] == "task.fail").unwrap();
    assert_eq!(fail["error"]["code"], "task_execution_error");
    let last = events.last().unwrap();
    assert_eq!((last["type"].as_str(), last["error"]["code"].as_str()), (Some("run.error"), Some("plan_stalled")));
    assert!(last["error"]["message"].as_str().unwrap().contains(&ids[0]));

    let mut expected = vec![GENERATE.to_string(), "agent-plan-execute-step-1".to_string()];
    expected.extend((2..=6).map(|r| format!("agent-plan-execute-step-1-work-{r}")));
    expected.push("agent-plan-execute-step-1-update".into());
    expected.push("agent-plan-execute-step-1-update-repair".into());
    assert_eq!(stages(&gw), expected, "no summary after a stall");
    let requests = gw.fixture.requests();
    for r in &requests[1..] {
        let want = if r.stage().unwrap().contains("-update") { "required" } else { "auto" };
        assert_eq!(r.body["tool_choice"], want, "{:?}", r.stage());
    }
    // Text-only rounds of one task continue one content block; each text is kept for the model.
    let task_contents: Vec<&Value> = events.iter().filter(|e| e["type"] == "content.start").collect();
    assert_eq!(task_contents.len(), 1, "{:?}", types(&events));
    let repair = requests.last().unwrap();
    let assistant_texts =
        repair.body["messages"].as_array().unwrap().iter().filter(|m| m["content"] == "还在想").count();
    assert_eq!(assistant_texts, 7);
}

/// More tasks than `maxSteps`: the loop stops, the summary still runs, later tasks never start.
/// Also: a custom task template (DefinitionDrivenAgentTest 23) and `_plan_get_tasks_` (17).
#[tokio::test]
async fn max_steps_bounds_the_executed_tasks() {
    let gw = Gateway::start(
        &[agent(
            "bounded",
            json!({"runtimePrompts": {"planExecute": {"taskExecutionPromptTemplate":
                "  RUNTIME_TASK_PROMPT\n当前要执行的 taskId: {{task_id}}\n当前任务描述: {{ task_description }}\n{{unknown}}\n  "}}}),
            json!({"maxSteps": 1, "execute": {"systemPrompt": "执行系统提示", "toolConfig": {"backends": ["_plan_get_tasks_"]}}}),
        )],
        &[],
    )
    .await;
    gw.fixture.on_stage(GENERATE, add_tasks("call_p", &["任务A", "任务B"]));
    gw.fixture.on_stage(
        "agent-plan-execute-step-1",
        Transcript::openai_tool_call("call_g", "_plan_get_tasks_", &["{}"]).with_headers_delay_ms(FIRST_ROUND_DELAY_MS),
    );
    gw.fixture.on_stage(FINAL, text(&["只完成了第一个任务"]));
    let events = run_plan(&gw, json!({"agentKey": "bounded", "message": "两个任务"}), 1, |ids| {
        gw.fixture.on_stage("agent-plan-execute-step-1-work-2", update("call_u", &ids[0], "completed"));
    })
    .await;
    let ids = task_ids(events.iter().find(|e| e["type"] == "plan.update").unwrap());
    assert_eq!(lifecycle(&events), [pair("task.start", &ids[0]), pair("task.complete", &ids[0])]);
    assert_eq!(events.last().unwrap()["type"], "run.complete");
    assert_eq!(
        stages(&gw),
        [GENERATE, "agent-plan-execute-step-1", "agent-plan-execute-step-1-work-2", FINAL],
        "the second task is never run"
    );
    let last_plan = events.iter().rev().find(|e| e["type"] == "plan.update").unwrap();
    assert_eq!(last_plan["plan"][1]["status"], "init");

    let step1 = request(&gw, "agent-plan-execute-step-1").body;
    assert_eq!(
        last_message(&step1)["content"],
        format!("RUNTIME_TASK_PROMPT\n当前要执行的 taskId: {}\n当前任务描述: 任务A\n{{{{unknown}}}}", ids[0])
    );
    assert_eq!(tool_names(&step1), ["_plan_get_tasks_", "_plan_update_task_"]);
    let got = events.iter().find(|e| e["type"] == "tool.result" && e["toolId"] == "call_g").unwrap();
    let plan_id = events.iter().find(|e| e["type"] == "plan.update").unwrap()["planId"].as_str().unwrap().to_string();
    assert_eq!(
        got["result"],
        format!(
            "计划ID: {plan_id}\n任务列表:\n- {} | init | 任务A\n- {} | init | 任务B\n当前应执行 taskId: {}",
            ids[0], ids[1], ids[0]
        )
    );
}

/// A stage whose `modelConfig` names another provider sends its turns there.
#[tokio::test]
async fn a_stage_model_config_selects_its_provider() {
    let gw = Gateway::start_with_second_provider(
        &[agent(
            "split",
            json!({}),
            json!({"summary": {"systemPrompt": "总结系统提示",
                "modelConfig": {"providerKey": SECOND_FIXTURE_PROVIDER, "model": "summary-model"}}}),
        )],
        &[],
    )
    .await;
    let second = gw.fixture2.as_ref().unwrap();
    gw.fixture.on_stage(GENERATE, add_tasks("call_p", &["任务1"]));
    gw.fixture.on_stage("agent-plan-execute-step-1", slow_text("开始"));
    second.on_stage(FINAL, text(&["来自第二个模型的总结"]));
    let events = run_plan(&gw, json!({"agentKey": "split", "message": "分两个模型"}), 1, |ids| {
        gw.fixture.on_stage("agent-plan-execute-step-1-work-2", update("call_u", &ids[0], "completed"));
    })
    .await;
    assert_eq!(events.last().unwrap()["type"], "run.complete", "{:?}", types(&events));
    assert!(!stages(&gw).iter().any(|s| s == FINAL));
    let summary = second.requests();
    assert_eq!(summary.len(), 1);
    assert_eq!(summary[0].stage(), Some(FINAL));
    assert_eq!(summary[0].body["model"], "summary-model");
    assert_eq!(request(&gw, GENERATE).body["model"], "m");
    let answer: String =
        events.iter().filter(|e| e["type"] == "content.delta").map(|e| e["delta"].as_str().unwrap()).collect();
    assert!(answer.ends_with("来自第二个模型的总结"));
}

/// A chat with a stored plan: the next run shows it first, keeps its id, and its unfinished task
/// runs before the new ones. (The second run uses an agent on the second fixture provider, so
/// its stages are scripted afresh; plans belong to the chat, not to the agent.)
#[tokio::test]
async fn a_stored_plan_is_shown_and_continued() {
    let gw = Gateway::start_with_second_provider(
        &[
            agent("resume", json!({}), json!({"maxSteps": 1})),
            agent(
                "resume2",
                json!({"modelConfig": {"providerKey": SECOND_FIXTURE_PROVIDER, "model": "m2"}}),
                json!({}),
            ),
        ],
        &[],
    )
    .await;
    let chat = "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01";
    gw.fixture.on_stage(GENERATE, add_tasks("call_p1", &["旧任务1", "旧任务2"]));
    gw.fixture.on_stage("agent-plan-execute-step-1", slow_text("开始"));
    gw.fixture.on_stage(FINAL, text(&["总结"]));
    let first = run_plan(&gw, json!({"agentKey": "resume", "chatId": chat, "message": "第一轮"}), 1, |ids| {
        gw.fixture.on_stage("agent-plan-execute-step-1-work-2", update("call_u1", &ids[0], "completed"));
    })
    .await;
    assert_eq!(first.last().unwrap()["type"], "run.complete", "{:?}", types(&first));
    let old = task_ids(first.iter().find(|e| e["type"] == "plan.update").unwrap());
    let plan_id = first.iter().find(|e| e["type"] == "plan.update").unwrap()["planId"].clone();

    // Second run: a new task is planned, but the restored one runs first and finishes at once.
    let second_fixture = gw.fixture2.as_ref().unwrap();
    second_fixture.on_stage(GENERATE, add_tasks("call_p2", &["新任务3"]));
    second_fixture.on_stage("agent-plan-execute-step-1", update("call_u2", &old[1], "completed"));
    second_fixture.on_stage("agent-plan-execute-step-2", slow_text("开始"));
    second_fixture.on_stage(FINAL, text(&["总结"]));
    let second = run_plan(&gw, json!({"agentKey": "resume2", "chatId": chat, "message": "第二轮"}), 2, |ids| {
        assert_eq!(ids.len(), 3, "new tasks are appended to the restored ones");
        second_fixture.on_stage("agent-plan-execute-step-2-work-2", update("call_u3", &ids[2], "completed"));
    })
    .await;
    assert_eq!(types(&second)[..3], ["request.query", "run.start", "plan.update"], "the stored plan comes first");
    let restored = &second[2];
    assert_eq!(restored["seq"], 3);
    assert_eq!(restored["planId"], plan_id);
    assert_eq!(
        restored["plan"],
        json!([{"taskId": old[0], "description": "旧任务1", "status": "completed"},
               {"taskId": old[1], "description": "旧任务2", "status": "init"}])
    );
    let extended = second.iter().filter(|e| e["type"] == "plan.update").nth(1).unwrap();
    assert_eq!(extended["planId"], plan_id);
    let new = task_ids(extended);
    assert_eq!(
        lifecycle(&second),
        [
            pair("task.start", &old[1]),
            pair("task.complete", &old[1]),
            pair("task.start", &new[2]),
            pair("task.complete", &new[2])
        ]
    );
    assert_eq!(second.last().unwrap()["type"], "run.complete", "{:?}", types(&second));
    let step1 = second_fixture.requests().into_iter().find(|r| r.stage() == Some("agent-plan-execute-step-1")).unwrap();
    let prompt = last_message(&step1.body)["content"].as_str().unwrap().to_string();
    assert!(prompt.contains(&format!("Current task ID: {}\n", old[1])), "{prompt}");
    assert!(prompt.contains(&format!("- {} | completed | 旧任务1\n", old[0])), "{prompt}");
    assert_eq!(prompt.lines().filter(|l| l.starts_with("- ")).count(), 3, "{prompt}");
}

/// Only the first call of a round runs; the others stay open without a result until the task
/// ends, and the provider history still answers every call.
#[tokio::test]
async fn only_the_first_call_of_a_round_runs_but_every_call_is_answered() {
    let gw = Gateway::start(
        &[agent("two_calls", json!({"toolConfig": {"backends": ["mock_city_weather", "city_datetime"]}}), json!({}))],
        &[],
    )
    .await;
    gw.fixture.on_stage(GENERATE, add_tasks("call_p", &["查天气"]));
    let two_calls = whole_call(
        whole_call(
            Transcript::new().content("两个都查。"),
            0,
            "call_a",
            "mock_city_weather",
            &json!({"city": "Shanghai", "date": "2026-02-13"}),
        ),
        1,
        "call_b",
        "city_datetime",
        &json!({"city": "Shanghai"}),
    )
    .finish("tool_calls")
    .done()
    .with_headers_delay_ms(FIRST_ROUND_DELAY_MS);
    gw.fixture.on_stage("agent-plan-execute-step-1", two_calls);
    gw.fixture.on_stage(FINAL, text(&["总结"]));
    let events = run_plan(&gw, json!({"agentKey": "two_calls", "message": "查天气"}), 1, |ids| {
        gw.fixture.on_stage("agent-plan-execute-step-1-work-2", update("call_u", &ids[0], "completed"));
    })
    .await;
    assert_eq!(events.last().unwrap()["type"], "run.complete", "{:?}", types(&events));
    let of = |ty: &str, id: &str| events.iter().position(|e| e["type"] == ty && e["toolId"] == id);
    assert!(of("tool.start", "call_a").is_some() && of("tool.start", "call_b").is_some());
    assert!(of("tool.result", "call_a").is_some());
    assert_eq!(of("tool.result", "call_b"), None, "the second call never runs");
    // Its tool.end comes when the task ends, right before task.complete.
    let complete = events.iter().position(|e| e["type"] == "task.complete").unwrap();
    assert_eq!(of("tool.end", "call_b"), Some(complete - 1));

    let work2 = request(&gw, "agent-plan-execute-step-1-work-2").body;
    let messages = work2["messages"].as_array().unwrap();
    let answer_to = |id: &str| {
        messages
            .iter()
            .filter(|m| m["role"] == "tool" && m["tool_call_id"] == id)
            .map(|m| m["content"].clone())
            .collect::<Vec<_>>()
    };
    let calls: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["call_p", "call_a", "call_b"]);
    assert_eq!(answer_to("call_a").len(), 1);
    assert_eq!(
        answer_to("call_b"),
        [json!(r#"{"executed":false,"reason":"only the first tool call of a round is executed"}"#)]
    );
    assert_eq!(messages.iter().filter(|m| m["content"] == "两个都查。").count(), 1, "the round's text is kept");
}

/// DefinitionDrivenAgentTest 19 and the preconditions: no plan → plan_stalled with no execute
/// turn; toolChoice NONE → internal before any model call.
#[tokio::test]
async fn plan_stage_failures() {
    let gw = Gateway::start(
        &[agent("noplan", json!({}), json!({})), agent("none", json!({"toolChoice": "NONE"}), json!({}))],
        &[],
    )
    .await;
    gw.fixture.on_stage(GENERATE, text(&["我只想说话"]));
    let events: Vec<Value> =
        gw.run(&json!({"agentKey": "noplan", "message": "不规划"})).await.events().into_iter().cloned().collect();
    let last = events.last().unwrap();
    assert_eq!((last["type"].as_str(), last["error"]["code"].as_str()), (Some("run.error"), Some("plan_stalled")));
    assert!(last["error"]["message"].as_str().unwrap().contains("_plan_add_tasks_"));
    assert!(lifecycle(&events).is_empty());
    assert!(!events.iter().any(|e| e["type"] == "plan.update"));
    assert_eq!(stages(&gw), [GENERATE], "no execute turn");

    let events: Vec<Value> =
        gw.run(&json!({"agentKey": "none", "message": "不规划"})).await.events().into_iter().cloned().collect();
    let last = events.last().unwrap();
    assert_eq!((last["type"].as_str(), last["error"]["code"].as_str()), (Some("run.error"), Some("internal")));
    assert!(last["error"]["message"].as_str().unwrap().contains("toolChoice NONE"));
    assert_eq!(gw.fixture.request_count(), 1, "no model call");
}
