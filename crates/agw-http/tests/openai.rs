//! The OpenAI Chat Completions façade over loopback (issue 16): `/v1/models`, streaming and
//! non-streaming completions, stateless history and agw chat memory, errors in OpenAI's shape.
//! The official `openai` SDK drives the same endpoints in `.ci/protocols` (scripts/protocols).

mod common;

use agw_testkit::Transcript;
use common::{Gateway, oneshot_agent};
use serde_json::{Value, json};

async fn post(gw: &Gateway, body: &Value) -> reqwest::Response {
    gw.client.post(format!("{}/v1/chat/completions", gw.base)).json(body).send().await.unwrap()
}

#[tokio::test]
async fn models_list_the_agents() {
    let gw = Gateway::start(&[oneshot_agent("alpha", false, 5000), oneshot_agent("beta", false, 5000)], &[]).await;
    let body: Value = gw.client.get(format!("{}/v1/models", gw.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(body["object"], "list");
    let ids: Vec<&str> = body["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["alpha", "beta"]);
    assert_eq!(body["data"][0]["object"], "model");
}

#[tokio::test]
async fn a_streaming_completion_sends_one_chunk_per_delta_then_usage_and_done() {
    let gw = Gateway::start(&[oneshot_agent("a", true, 5000)], &[]).await;
    gw.fixture.set_default(
        Transcript::new().reasoning("hmm").content("Hel").content("lo").finish("stop").usage(12, 3).done(),
    );
    let resp = post(
        &gw,
        &json!({"model": "a", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "system", "content": "ignored"}, {"role": "user", "content": "hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let text = resp.text().await.unwrap();
    let data: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    assert_eq!(data.last(), Some(&"[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1].iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    let deltas: Vec<&Value> = chunks.iter().filter_map(|c| c["choices"].get(0)).map(|c| &c["delta"]).collect();
    assert_eq!(
        deltas,
        [
            &json!({"role": "assistant", "content": ""}),
            &json!({"reasoning_content": "hmm"}),
            &json!({"content": "Hel"}),
            &json!({"content": "lo"}),
            &json!({})
        ]
    );
    let finish = chunks.iter().filter_map(|c| c["choices"].get(0)).next_back().unwrap();
    assert_eq!(finish["finish_reason"], "stop");
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"], json!({"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}));
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["model"] == "a"));

    // The client's messages were the conversation; its system message was not sent upstream.
    let upstream = gw.fixture.request(0).unwrap();
    let roles: Vec<&str> =
        upstream.body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user"], "the agent's prompt, then the user message");
    assert_eq!(upstream.body["messages"][0]["content"], "You are a test agent.");
    assert_eq!(gw.state.runs.chat_store().list_chats().unwrap_or_default().len(), 0, "stateless: nothing recorded");
}

#[tokio::test]
async fn a_non_streaming_completion_and_the_history_the_client_sent() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["Paris", "."]));
    let resp = post(
        &gw,
        &json!({"model": "a", "messages": [
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Which country again?"},
        {"role": "user", "content": [{"type": "text", "text": "France"}]}]}),
    )
    .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"], json!({"role": "assistant", "content": "Paris."}));
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    let upstream = gw.fixture.request(0).unwrap();
    let contents: Vec<&str> =
        upstream.body["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap_or("")).collect();
    assert_eq!(contents[1..], ["Capital of France?", "Which country again?", "France"]);
}

#[tokio::test]
async fn errors_have_openais_shape_and_status() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    let resp = post(&gw, &json!({"model": "nope", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let resp = post(&gw, &json!({"model": "a", "messages": [{"role": "assistant", "content": "x"}]})).await;
    assert_eq!(resp.status(), 400);
    let resp = post(&gw, &json!({"model": "a"})).await;
    assert_eq!(resp.status(), 400);

    gw.fixture.set_default(Transcript::http_error(400, r#"{"error":{"message":"bad"}}"#));
    let resp = post(&gw, &json!({"model": "a", "messages": [{"role": "user", "content": "x"}]})).await;
    assert_eq!(resp.status(), 502);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "provider_error");
}

#[tokio::test]
async fn a_chat_id_header_continues_an_agw_chat() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["first"]));
    let stream = gw.run(&json!({"agentKey": "a", "message": "remember 42"})).await;
    let chat_id = stream.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned();
    gw.fixture.set_default(Transcript::openai_text(&["42"]));
    let resp = gw
        .client
        .post(format!("{}/v1/chat/completions", gw.base))
        .header("x-agw-chat-id", &chat_id)
        .json(&json!({"model": "a", "messages": [{"role": "user", "content": "what number?"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let upstream = gw.fixture.request(1).unwrap();
    let contents: Vec<&str> =
        upstream.body["messages"].as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap_or("")).collect();
    assert!(contents.contains(&"remember 42") && contents.contains(&"first"), "agw's memory: {contents:?}");
}
