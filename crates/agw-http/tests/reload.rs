//! Hot reload: edits reach the next run, broken files keep their last good version, and runs in
//! flight keep the definitions they started with.

mod common;

use std::time::{Duration, Instant};

use agw_http::reload::{Catalog, Reloader, WatchedDir};
use agw_testkit::Transcript;
use common::Gateway;
use serde_json::{Value, json};

fn react_agent(prompt: &str) -> String {
    format!(
        r#"{{"key":"live","mode":"REACT","modelConfig":{{"providerKey":"fixture","model":"m"}},
            "toolConfig":{{"backends":["mock_city_weather"]}},"react":{{"systemPrompt":"{prompt}","maxSteps":3}}}}"#
    )
}

async fn instructions(gw: &Gateway) -> Value {
    gw.get_json("/api/ap/agent?agentKey=live").await.1["data"]["instructions"].clone()
}

async fn wait_for_instructions(gw: &Gateway, want: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while instructions(gw).await != want {
        assert!(Instant::now() < deadline, "reload did not pick up {want:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn edits_reach_the_next_run_and_broken_files_keep_their_last_good_version() {
    let gw = Gateway::start(&[("live.json".to_string(), react_agent("Version one."))], &[]).await;
    let _reload = Reloader::new(
        gw.state.clone(),
        vec![WatchedDir {
            catalog: Catalog::Agents,
            dir: gw.agents_dir.clone(),
            rescan_every: Duration::from_millis(200),
        }],
    )
    .start();
    gw.fixture.set_default(Transcript::openai_text(&["ok"]));
    assert_eq!(instructions(&gw).await, "Version one.");

    std::fs::write(gw.agents_dir.join("live.json"), react_agent("Version two.")).unwrap();
    wait_for_instructions(&gw, "Version two.").await;
    gw.run(&json!({"agentKey":"live","message":"q"})).await;
    let system = gw.fixture.requests().last().unwrap().body["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(system.starts_with("Version two."), "{system}");

    // Broken edit: the last good version keeps serving.
    std::fs::write(gw.agents_dir.join("live.json"), "{ \"key\": \"live\", broken").unwrap();
    std::fs::write(gw.agents_dir.join("other.json"), react_agent("Other.").replace("\"live\"", "\"other\"")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while gw.get_json("/api/ap/agent?agentKey=other").await.0 != 200 {
        assert!(Instant::now() < deadline, "the new file was not picked up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(instructions(&gw).await, "Version two.", "a broken file keeps its last good version");
    let stream = gw.run(&json!({"agentKey":"live","message":"q"})).await;
    assert_eq!(stream.last()["type"], "run.complete");

    // Deleting the file removes the agent.
    std::fs::remove_file(gw.agents_dir.join("live.json")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while gw.get_json("/api/ap/agent?agentKey=live").await.0 != 404 {
        assert!(Instant::now() < deadline, "the deleted agent is still served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_run_in_flight_keeps_the_definition_it_started_with() {
    let gw = Gateway::start(&[("live.json".to_string(), react_agent("Before."))], &[]).await;
    let _reload = Reloader::new(
        gw.state.clone(),
        vec![WatchedDir {
            catalog: Catalog::Agents,
            dir: gw.agents_dir.clone(),
            rescan_every: Duration::from_millis(100),
        }],
    )
    .start();
    // Step 1 calls a tool slowly; step 2 (after the edit) must still use the old prompt.
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call(
            "call_1",
            "mock_city_weather",
            &["{\"city\":", "\"Shanghai\",\"date\":\"2026-02-13\"}"],
        )
        .with_chunk_delay_ms(150),
    );
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["done"]));
    let body = json!({"agentKey":"live","message":"q"});
    let query = gw.post_query(&body);
    let edit = async {
        gw.fixture.wait_for_requests(1).await;
        std::fs::write(gw.agents_dir.join("live.json"), react_agent("After.")).unwrap();
        wait_for_instructions(&gw, "After.").await;
    };
    let (resp, ()) = tokio::join!(query, edit);
    let stream = common::read_stream(resp).await;
    assert_eq!(stream.last()["type"], "run.complete");
    let requests = gw.fixture.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        let system = r.body["messages"][0]["content"].as_str().unwrap();
        assert!(system.starts_with("Before."), "{:?} used {system}", r.stage());
    }
    // The next run sees the edit.
    gw.fixture.on_stage("agent-react-step-1", Transcript::openai_text(&["fresh"]));
    gw.run(&json!({"agentKey":"live","message":"q"})).await;
    let last = gw.fixture.requests().last().unwrap().body["messages"][0]["content"].as_str().unwrap().to_string();
    assert!(last.starts_with("After."), "{last}");
}

#[tokio::test]
async fn tools_and_viewports_reload_too() {
    let gw = Gateway::start(&[], &[]).await;
    let tools = gw.agents_dir.join("tools");
    let viewports = gw.agents_dir.join("viewports");
    std::fs::create_dir_all(&tools).unwrap();
    std::fs::create_dir_all(&viewports).unwrap();
    std::fs::write(viewports.join("card.html"), "<p>v1</p>").unwrap();
    let _reload = Reloader::new(
        gw.state.clone(),
        vec![
            WatchedDir { catalog: Catalog::Tools, dir: tools.clone(), rescan_every: Duration::from_millis(100) },
            WatchedDir {
                catalog: Catalog::Viewports,
                dir: viewports.clone(),
                rescan_every: Duration::from_millis(100),
            },
        ],
    )
    .start();
    assert_eq!(gw.get_json("/api/ap/viewport?viewportKey=card").await.1["data"]["html"], "<p>v1</p>");
    std::fs::write(viewports.join("card.html"), "<p>v2</p>").unwrap();
    std::fs::write(
        tools.join("extra.action"),
        r#"{"tools":[{"type":"function","name":"ring_bell","description":"Rings"}]}"#,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let html = gw.get_json("/api/ap/viewport?viewportKey=card").await.1["data"]["html"].clone();
        let has_tool = gw.state.catalogs().tools.load().get("ring_bell").is_some();
        if html == "<p>v2</p>" && has_tool {
            break;
        }
        assert!(Instant::now() < deadline, "reload missed: html={html} tool={has_tool}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gw.state.catalogs().tools.load().get("_bash_").is_some(), "built-ins survive a tools reload");
}
