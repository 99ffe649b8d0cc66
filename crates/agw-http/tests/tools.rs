//! Tools over real HTTP: native function calling, REACT, frontend tools, actions, budgets,
//! viewports and data files.

mod common;

use std::time::Duration;

use agw_testkit::Transcript;
use common::{Gateway, LiveStream, oneshot_agent};
use serde_json::{Value, json};

fn agent(key: &str, mode: &str, tools: Value, extra: &str) -> (String, String) {
    let stage = if mode == "REACT" { "react" } else { "plain" };
    let text = format!(
        r#"{{"key":"{key}","mode":"{mode}","modelConfig":{{"providerKey":"fixture","model":"m","reasoning":{{"enabled":true,"effort":"LOW"}}}},
            "toolConfig":{tools},{extra}
            "{stage}":{{"systemPrompt":"You are a test agent.","maxSteps":3}}}}"#
    );
    (format!("{key}.json"), text)
}

fn text_reply(texts: &[&str]) -> Transcript {
    Transcript::openai_text(texts)
}

/// The §10.2 example: REACT with one backend tool call, in an existing chat.
#[tokio::test]
async fn react_example_stream_of_the_contract() {
    let tools_dir = std::env::temp_dir().join(format!("agw-tools-10-2-{}", std::process::id()));
    std::fs::create_dir_all(&tools_dir).unwrap();
    std::fs::write(
        tools_dir.join("city_datetime.backend"),
        r#"{"tools":[{"type":"function","name":"city_datetime","description":"根据 city 查询当前日期和时间（实时系统时钟）",
            "parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]}"#,
    )
    .unwrap();
    let react = (
        "demoModeReact.json".to_string(),
        r#"{"key":"demoModeReact","mode":"REACT","modelConfig":{"providerKey":"fixture","model":"m","reasoning":{"enabled":true,"effort":"LOW"}},
            "toolConfig":{"backends":["city_datetime"]},"react":{"systemPrompt":"你是助手。","maxSteps":10}}"#
            .to_string(),
    );
    let gw = Gateway::start(
        &[react, oneshot_agent("warmup", false, 5000)],
        &[("AGENT_TOOLS_EXTERNAL_DIR", tools_dir.to_str().unwrap())],
    )
    .await;
    let chat = "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01";
    gw.fixture.on_stage("agent-oneshot", text_reply(&["hello"]));
    gw.run(&json!({"agentKey": "warmup", "message": "hi", "chatId": chat})).await;

    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::new()
            .reasoning("需要查询上海的实时时间。")
            .content("我先查询上海当前时间。")
            .tool_call_start(0, "call_1", "city_datetime")
            .tool_args(0, "{\"city\":")
            .tool_args(0, "\"Shanghai\"}")
            .finish("tool_calls")
            .usage(812, 46)
            .done(),
    );
    gw.fixture.on_stage(
        "agent-react-step-2",
        Transcript::new()
            .reasoning("已拿到时间，直接回答。")
            .content("上海现在是 2026-02-13（星期五）")
            .content(" 10:15:30。")
            .finish("stop")
            .usage(1020, 38)
            .done(),
    );
    let stream = gw
        .run(&json!({"chatId": chat, "requestId": "req-42", "message": "上海现在几点？", "agentKey": "demoModeReact"}))
        .await;
    let events = stream.events();
    let run = events[1]["runId"].as_str().unwrap().to_string();
    let result = events.iter().find(|e| e["type"] == "tool.result").unwrap()["result"].as_str().unwrap().to_string();
    let expected = [
        json!({"seq":1,"type":"request.query","requestId":"req-42","chatId":chat,"role":"user","message":"上海现在几点？","agentKey":"demoModeReact"}),
        json!({"seq":2,"type":"run.start","runId":run,"chatId":chat}),
        json!({"seq":3,"type":"reasoning.start","reasoningId":format!("{run}_r_1"),"runId":run}),
        json!({"seq":4,"type":"reasoning.delta","reasoningId":format!("{run}_r_1"),"delta":"需要查询上海的实时时间。"}),
        json!({"seq":5,"type":"reasoning.end","reasoningId":format!("{run}_r_1")}),
        json!({"seq":6,"type":"content.start","contentId":format!("{run}_c_1"),"runId":run}),
        json!({"seq":7,"type":"content.delta","contentId":format!("{run}_c_1"),"delta":"我先查询上海当前时间。"}),
        json!({"seq":8,"type":"content.end","contentId":format!("{run}_c_1")}),
        json!({"seq":9,"type":"tool.start","toolId":"call_1","runId":run,"toolName":"city_datetime","toolType":"function","description":"根据 city 查询当前日期和时间（实时系统时钟）"}),
        json!({"seq":10,"type":"tool.args","toolId":"call_1","delta":"{\"city\":","chunkIndex":0}),
        json!({"seq":11,"type":"tool.args","toolId":"call_1","delta":"\"Shanghai\"}","chunkIndex":1}),
        json!({"seq":12,"type":"tool.end","toolId":"call_1"}),
        json!({"seq":13,"type":"tool.result","toolId":"call_1","result":result}),
        json!({"seq":14,"type":"reasoning.start","reasoningId":format!("{run}_r_2"),"runId":run}),
        json!({"seq":15,"type":"reasoning.delta","reasoningId":format!("{run}_r_2"),"delta":"已拿到时间，直接回答。"}),
        json!({"seq":16,"type":"reasoning.end","reasoningId":format!("{run}_r_2")}),
        json!({"seq":17,"type":"content.start","contentId":format!("{run}_c_2"),"runId":run}),
        json!({"seq":18,"type":"content.delta","contentId":format!("{run}_c_2"),"delta":"上海现在是 2026-02-13（星期五）"}),
        json!({"seq":19,"type":"content.delta","contentId":format!("{run}_c_2"),"delta":" 10:15:30。"}),
        json!({"seq":20,"type":"content.end","contentId":format!("{run}_c_2")}),
        json!({"seq":21,"type":"run.complete","runId":run,"finishReason":"stop"}),
    ];
    assert_eq!(events.len(), expected.len(), "{:?}", stream.types());
    for (got, want) in events.iter().zip(&expected) {
        let mut got = (*got).clone();
        got.as_object_mut().unwrap().shift_remove("timestamp");
        // agw adds the run's usage (every model call of this script reports some) to the
        // contract's example.
        if got["type"] == "run.complete" {
            assert!(got["usage"]["calls"].as_u64().unwrap_or(0) > 0, "{got}");
            got.as_object_mut().unwrap().shift_remove("usage");
        }
        assert_eq!(&got, want);
        // Key order is part of the contract: compare the serialised keys too.
        let keys: Vec<&String> = got.as_object().unwrap().keys().collect();
        let want_keys: Vec<&String> = want.as_object().unwrap().keys().collect();
        assert_eq!(keys, want_keys);
    }
    // The tool really ran: the system clock for Shanghai.
    let result: Value = serde_json::from_str(&result).unwrap();
    assert_eq!(
        (result["city"].as_str(), result["timezone"].as_str(), result["source"].as_str()),
        (Some("Shanghai"), Some("UTC+8"), Some("system-clock"))
    );

    // What the provider saw on the second step: the tools, and the call paired with its result.
    let step2 = gw.fixture.requests().into_iter().find(|r| r.stage() == Some("agent-react-step-2")).unwrap();
    assert_eq!(step2.body["tool_choice"], "auto");
    assert_eq!(step2.body["parallel_tool_calls"], false);
    assert_eq!(step2.body["tools"][0]["function"]["name"], "city_datetime");
    assert_eq!(step2.body["tools"][0]["function"]["strict"], false);
    let messages = step2.body["messages"].as_array().unwrap();
    let system = messages[0]["content"].as_str().unwrap();
    assert!(
        system.starts_with("你是助手。") && system.contains("- city_datetime: 根据 city"),
        "tool appendix: {system}"
    );
    let n = messages.len();
    assert_eq!(
        messages[n - 2],
        json!({"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"city_datetime","arguments":"{\"city\":\"Shanghai\"}"}}]})
    );
    assert_eq!(messages[n - 1]["role"], "tool");
    assert_eq!(messages[n - 1]["tool_call_id"], "call_1");
    assert_eq!(messages[n - 1]["name"], "city_datetime");
    let _ = std::fs::remove_dir_all(tools_dir);
}

#[tokio::test]
async fn frontend_tool_pauses_the_run_until_submit() {
    let gw = Gateway::start(
        &[agent("ask", "REACT", json!({"frontends":["confirm_dialog"]}), "")],
        &[("AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS", "5000")],
    )
    .await;
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call(
            "call_fe",
            "confirm_dialog",
            &["{\"question\":\"Go?\",", "\"options\":[\"A\",\"B\"]}"],
        ),
    );
    gw.fixture.on_stage("agent-react-step-2", text_reply(&["You picked A."]));

    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey":"ask","message":"plan my day"})).await);
    let start = live.until(|e| e["type"] == "tool.start").await;
    assert_eq!(start["toolName"], "confirm_dialog");
    assert_eq!(start["toolType"], "html");
    assert_eq!(start["toolKey"], "confirm_dialog");
    assert_eq!(start["toolTimeout"], 5000);
    let keys: Vec<&String> = start.as_object().unwrap().keys().collect();
    assert_eq!(keys[keys.len() - 2..], ["toolKey", "toolTimeout"], "frontend fields come last");
    live.until(|e| e["type"] == "tool.end").await;
    let run_id = live.seen.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_string();

    // The run is paused: nothing more arrives until the person answers.
    let paused = tokio::time::timeout(Duration::from_millis(300), live.next_event()).await;
    assert!(paused.is_err(), "the stream must wait for the submit");
    assert_eq!(gw.fixture.request_count(), 1);

    let submit = |tool: &str| {
        gw.client
            .post(format!("{}/api/ap/submit", gw.base))
            .json(&json!({"runId": run_id, "toolId": tool, "params": {"selectedOption":"A","selectedIndex":1}}))
            .send()
    };
    let wrong: Value = submit("call_other").await.unwrap().json().await.unwrap();
    assert_eq!((wrong["code"].as_i64(), wrong["data"]["accepted"].as_bool()), (Some(0), Some(false)));
    assert_eq!(wrong["data"]["status"], "unmatched");
    let ok: Value = submit("call_fe").await.unwrap().json().await.unwrap();
    assert_eq!(ok["data"]["accepted"], true);
    assert_eq!(ok["data"]["status"], "accepted");
    assert_eq!(ok["data"]["detail"], format!("Frontend submit accepted for runId={run_id}, toolId=call_fe"));

    let result = live.until(|e| e["type"] == "tool.result").await;
    assert_eq!(result["result"], "{\"selectedOption\":\"A\",\"selectedIndex\":1}");
    let rest = live.rest().await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete");
    assert_eq!(rest.iter().filter(|e| e["type"] == "tool.end").count(), 1, "no second tool.end after the wait");

    let again: Value = submit("call_fe").await.unwrap().json().await.unwrap();
    assert_eq!(
        (again["data"]["accepted"].as_bool(), again["data"]["status"].as_str()),
        (Some(false), Some("already_answered")),
        "a key matches once; after the run ended too (while it is attachable)"
    );
    let step2 = gw.fixture.request(1).unwrap();
    let last = step2.body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"], "{\"selectedOption\":\"A\",\"selectedIndex\":1}");
}

#[tokio::test]
async fn frontend_tool_timeout_ends_the_run() {
    let gw = Gateway::start(
        &[agent("ask", "REACT", json!({"frontends":["confirm_dialog"]}), "")],
        &[("AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS", "200")],
    )
    .await;
    gw.fixture.set_default(Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{\"question\":\"Go?\"}"]));
    let stream = gw.run(&json!({"agentKey":"ask","message":"q"})).await;
    let result: Value = serde_json::from_str(stream.of_type("tool.result")[0]["result"].as_str().unwrap()).unwrap();
    assert_eq!(result["code"], "frontend_submit_timeout");
    assert_eq!(result["ok"], false);
    assert!(result["error"].as_str().unwrap().starts_with("Frontend tool submit timeout runId="));
    assert_eq!(stream.last()["type"], "run.error");
    assert_eq!(stream.last()["error"]["code"], "frontend_submit_timeout");
    assert_eq!(gw.fixture.request_count(), 1, "no model turn after the timeout");
}

#[tokio::test]
async fn action_run_emits_action_events_and_does_not_wait() {
    let gw = Gateway::start(&[agent("act", "ONESHOT", json!({"actions":["switch_theme"]}), "")], &[]).await;
    gw.fixture.on_stage(
        "agent-oneshot-tool-first",
        Transcript::openai_tool_call("call_a", "switch_theme", &["{\"theme\":", "\"dark\"}"]),
    );
    gw.fixture.on_stage("agent-oneshot-tool-final", text_reply(&["Switched."]));
    let stream = gw.run(&json!({"agentKey":"act","message":"dark mode please"})).await;
    let kinds: Vec<String> =
        stream.types().into_iter().filter(|t| t.starts_with("action.") || t.starts_with("tool.")).collect();
    assert_eq!(kinds, ["action.start", "action.args", "action.args", "action.end", "action.result"]);
    let start = stream.of_type("action.start")[0];
    assert_eq!(start["actionName"], "switch_theme");
    assert_eq!(stream.of_type("action.result")[0]["result"], "OK");
    assert_eq!(stream.last()["type"], "run.complete");
    let stages: Vec<String> = gw.fixture.requests().iter().map(|r| r.stage().unwrap().to_string()).collect();
    assert_eq!(stages, ["agent-oneshot-tool-first", "agent-oneshot-tool-final"]);
    let final_req = gw.fixture.request(1).unwrap();
    assert!(final_req.body.get("tools").is_none(), "the final ONESHOT turn offers no tools");
}

#[tokio::test]
async fn react_max_steps_without_an_answer_is_a_max_steps_error() {
    let gw = Gateway::start(&[agent("loop", "REACT", json!({"backends":["mock_city_weather"]}), "")], &[]).await;
    gw.fixture.set_default(Transcript::openai_tool_call(
        "call_w",
        "mock_city_weather",
        &["{\"city\":\"Shanghai\",\"date\":\"2026-02-13\"}"],
    ));
    gw.fixture.on_stage("agent-react-final", Transcript::new().finish("stop").done());
    let stream = gw.run(&json!({"agentKey":"loop","message":"q"})).await;
    assert_eq!(stream.last()["error"]["code"], "max_steps");
    let stages: Vec<String> = gw.fixture.requests().iter().map(|r| r.stage().unwrap().to_string()).collect();
    assert_eq!(stages, ["agent-react-step-1", "agent-react-step-2", "agent-react-step-3", "agent-react-final"]);
    // The model reused its call id in every step; each call still got its own id in the stream.
    let ids: Vec<&str> = stream.of_type("tool.start").iter().map(|e| e["toolId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["call_w", "call_w_2", "call_w_3"]);
    assert_eq!(stream.of_type("tool.result").len(), 3);
    let weather: Value = serde_json::from_str(stream.of_type("tool.result")[0]["result"].as_str().unwrap()).unwrap();
    assert_eq!(
        weather,
        json!({"city":"上海","date":"2026-02-13","temperatureC":23,"humidity":66,"windLevel":2,"condition":"雾","mockTag":"幂等随机数据"})
    );
    let final_req = gw.fixture.requests().into_iter().find(|r| r.stage() == Some("agent-react-final")).unwrap();
    assert!(final_req.body.get("tools").is_none());
}

#[tokio::test]
async fn tool_budget_exceeded_ends_the_run() {
    let budget = r#""budget":{"runTimeoutMs":10000,"tool":{"maxCalls":1}},"#;
    let gw = Gateway::start(&[agent("b", "REACT", json!({"backends":["mock_city_weather"]}), budget)], &[]).await;
    gw.fixture.set_default(Transcript::openai_tool_call("call_w", "mock_city_weather", &["{}"]));
    let stream = gw.run(&json!({"agentKey":"b","message":"q"})).await;
    let error = &stream.last()["error"];
    assert_eq!(error["code"], "budget_exceeded");
    assert!(error["message"].as_str().unwrap().contains("tool.maxCalls=1"));
    assert_eq!(stream.of_type("tool.result").len(), 2, "the batch that overran still reports its result");
}

#[tokio::test]
async fn a_failing_tool_is_reported_to_the_model_and_the_run_goes_on() {
    let gw = Gateway::start(&[agent("sh", "REACT", json!({"backends":["_bash_"]}), "")], &[]).await;
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call("call_b", "_bash_", &["{\"command\":\"rm -rf /\"}"]),
    );
    gw.fixture.on_stage("agent-react-step-2", text_reply(&["I may not do that."]));
    let stream = gw.run(&json!({"agentKey":"sh","message":"clean up"})).await;
    let result = stream.of_type("tool.result")[0]["result"].as_str().unwrap().to_string();
    assert!(result.starts_with("exitCode: -1") && result.contains("Command not allowed: rm"), "{result}");
    assert_eq!(stream.last()["type"], "run.complete");
    let step2 = gw.fixture.request(1).unwrap();
    let tool_msg = step2.body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(tool_msg["role"], "tool");
    assert!(tool_msg["content"].as_str().unwrap().contains("Command not allowed"));
}

#[tokio::test]
async fn a_tool_outside_the_agent_is_refused_with_an_error_result() {
    let gw = Gateway::start(&[agent("w", "REACT", json!({"backends":["mock_city_weather"]}), "")], &[]).await;
    gw.fixture
        .on_stage("agent-react-step-1", Transcript::openai_tool_call("call_x", "_bash_", &["{\"command\":\"ls\"}"]));
    gw.fixture.on_stage("agent-react-step-2", text_reply(&["ok"]));
    let stream = gw.run(&json!({"agentKey":"w","message":"q"})).await;
    assert_eq!(
        stream.of_type("tool.result")[0]["result"],
        "{\"tool\":\"_bash_\",\"ok\":false,\"error\":\"Tool is not enabled for this agent: _bash_\"}"
    );
    assert_eq!(stream.last()["type"], "run.complete");
}

#[tokio::test]
async fn oneshot_required_without_a_call_is_tool_required_after_repairs() {
    let gw = Gateway::start(
        &[agent("req", "ONESHOT", json!({"backends":["mock_city_weather"]}), r#""toolChoice":"REQUIRED","#)],
        &[],
    )
    .await;
    gw.fixture.set_default(text_reply(&["no tools for me"]));
    let stream = gw.run(&json!({"agentKey":"req","message":"q"})).await;
    assert_eq!(stream.last()["error"]["code"], "tool_required");
    let stages: Vec<String> = gw.fixture.requests().iter().map(|r| r.stage().unwrap().to_string()).collect();
    assert_eq!(
        stages,
        ["agent-oneshot-tool-first", "agent-oneshot-tool-first-repair", "agent-oneshot-tool-first-repair-2"]
    );
    assert!(gw.fixture.requests().iter().all(|r| r.body["tool_choice"] == "required"));
}

#[tokio::test]
async fn empty_arguments_still_open_the_tool() {
    let gw = Gateway::start(&[agent("e", "REACT", json!({"backends":["mock_todo_tasks"]}), "")], &[]).await;
    gw.fixture.on_stage("agent-react-step-1", Transcript::openai_tool_call("call_t", "mock_todo_tasks", &[]));
    gw.fixture.on_stage("agent-react-step-2", text_reply(&["done"]));
    let stream = gw.run(&json!({"agentKey":"e","message":"todo"})).await;
    let kinds: Vec<String> = stream.types().into_iter().filter(|t| t.starts_with("tool.")).collect();
    assert_eq!(kinds, ["tool.start", "tool.end", "tool.result"]);
    assert_eq!(stream.last()["type"], "run.complete");
}

#[tokio::test]
async fn viewports_are_served_by_key() {
    let dir = std::env::temp_dir().join(format!("agw-viewports-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("weather_card.html"), "<div>sunny</div>").unwrap();
    std::fs::write(dir.join("flight_form.qlc"), r#"{"schema":{"type":"object"},"packages":["pkg-a"]}"#).unwrap();
    std::fs::write(dir.join("form.json_schema"), r#"{"type":"object"}"#).unwrap();
    let gw =
        Gateway::start(&[oneshot_agent("a", false, 1000)], &[("AGENT_VIEWPORT_EXTERNAL_DIR", dir.to_str().unwrap())])
            .await;
    let (status, body) = gw.get_json("/api/ap/viewport?viewportKey=weather_card").await;
    assert_eq!((status, body["data"]["html"].as_str()), (200, Some("<div>sunny</div>")));
    let (_, body) = gw.get_json("/api/ap/viewport?viewportKey=Flight_Form").await;
    assert_eq!(body["data"]["schema"]["type"], "object");
    assert_eq!(body["data"]["packages"][0], "pkg-a");
    let (_, body) = gw.get_json("/api/ap/viewport?viewportKey=form").await;
    assert_eq!(body["data"]["type"], "object", "json_schema viewports are served too");
    let (status, body) = gw.get_json("/api/ap/viewport?viewportKey=missing_viewport").await;
    assert_eq!((status, body["code"].as_i64()), (404, Some(404)));
    assert_eq!(body["msg"], "Viewport not found: missing_viewport");
    let (status, _) = gw.get_json("/api/ap/viewport?viewportKey=%20").await;
    assert_eq!(status, 400);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn data_files_are_served_without_traversal() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 1000)], &[]).await;
    let data = gw.agents_dir.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("test_image.png"), b"\x89PNG\r\n\x1a\nfake").unwrap();
    std::fs::write(data.join("test_report.pdf"), b"%PDF-1.4").unwrap();
    std::fs::write(data.join("test_data.csv"), b"a,b\n1,2\n").unwrap();
    std::fs::write(gw.agents_dir.join("secret.txt"), b"top secret").unwrap();
    std::os::unix::fs::symlink(gw.agents_dir.join("secret.txt"), data.join("link.txt")).unwrap();

    let get = |path: &str| gw.client.get(format!("{}/api/ap/data/{path}", gw.base)).send();
    let png = get("test_image.png").await.unwrap();
    assert_eq!(png.status(), 200);
    assert_eq!(png.headers()["content-type"], "image/png");
    assert!(
        png.headers()["content-disposition"].to_str().unwrap().starts_with("inline; filename*=UTF-8''test_image.png")
    );
    let dl = get("test_image.png?download=true").await.unwrap();
    assert!(dl.headers()["content-disposition"].to_str().unwrap().starts_with("attachment"));
    let pdf = get("test_report.pdf").await.unwrap();
    assert_eq!(pdf.headers()["content-type"], "application/pdf");
    assert!(pdf.headers()["content-disposition"].to_str().unwrap().starts_with("attachment"));
    let csv = get("test_data.csv").await.unwrap();
    assert_eq!(csv.headers()["content-type"], "text/csv");
    assert_eq!(csv.bytes().await.unwrap().as_ref(), b"a,b\n1,2\n");
    let ranged = gw
        .client
        .get(format!("{}/api/ap/data/test_data.csv", gw.base))
        .header("range", "bytes=0-2")
        .send()
        .await
        .unwrap();
    assert_eq!(ranged.status(), 206);
    assert_eq!(ranged.bytes().await.unwrap().as_ref(), b"a,b");

    // HTTP clients normalise a literal `..` away, so that one goes over a raw socket.
    let raw = raw_get(&gw.base, "/api/ap/data/..").await;
    assert!(raw.starts_with("HTTP/1.1 400"), "{raw}");
    assert!(raw.contains("Invalid filename"));
    for attack in ["..%2Fsecret.txt", "%2E%2E%2Fsecret.txt", "a%5C..%5Csecret.txt", "..%2F..%2Fetc%2Fpasswd"] {
        let resp = get(attack).await.unwrap();
        assert_eq!(resp.status(), 400, "{attack}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["msg"], "Invalid filename");
    }
    let link = get("link.txt").await.unwrap();
    assert_eq!(link.status(), 404, "symlinks are never followed");
    let missing: Value = get("nonexistent.txt").await.unwrap().json().await.unwrap();
    assert_eq!((missing["code"].as_i64(), missing["msg"].as_str()), (Some(404), Some("File not found")));
}

/// A GET sent byte for byte, without any client-side path normalisation.
async fn raw_get(base: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    out
}
