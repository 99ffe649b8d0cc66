//! Images and files in (issue 39, docs/models.md "Images and files") over real HTTP: a query's
//! references that carry content reach OpenAI-compatible providers as content parts and
//! Anthropic as image and document blocks; they are checked before anything runs, kept with
//! the chat so later turns still send them, refused for a model that does not take them, and
//! every protocol's own file parts arrive the same way.

mod common;

use agw_testkit::{FixtureServer, Transcript};
use common::{Gateway, oneshot_agent};
use serde_json::{Value, json};

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
/// `%PDF-1.4` and an end marker: enough to be a PDF by its signature.
const PDF: &str = "JVBERi0xLjQKJSVFT0YK";

fn png_ref() -> Value {
    json!({"id": "r1", "type": "image", "name": "dot.png", "url": format!("data:image/png;base64,{PNG}")})
}

fn user_content(request: &agw_testkit::RecordedRequest, index_from_end: usize) -> Value {
    let users: Vec<&Value> =
        request.body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "user").collect();
    users[users.len() - 1 - index_from_end]["content"].clone()
}

#[tokio::test]
async fn a_querys_images_and_files_reach_an_openai_model_and_later_turns_of_the_chat() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["A dot."]));
    let notes = json!({"name": "notes.md", "mimeType": "text/markdown", "url": "data:;base64,IyBIaQ=="});
    let linked = json!({"name": "cat", "mimeType": "image/jpeg", "url": "https://example.com/cat.jpg"});
    let echo_only = json!({"id": "x", "type": "url", "url": "http://example.com/page"});
    let query =
        json!({"agentKey": "a", "message": "What is in these?", "references": [png_ref(), notes, linked, echo_only]});
    let stream = gw.run(&query).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());

    let content = user_content(&gw.fixture.requests()[0], 0);
    assert_eq!(
        content,
        json!([
            {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}},
            {"type": "text", "text": "<file name=\"notes.md\" type=\"text/markdown\">\n# Hi\n</file>"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            {"type": "text", "text": "What is in these?"},
        ])
    );
    // Echoed as sent, all four (the contract's references), the echo-only one too.
    assert_eq!(stream.of_type("request.query")[0]["references"].as_array().map(Vec::len), Some(4));

    // The next run of the chat sends the first run's image again with its message.
    let chat = stream.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned();
    gw.fixture.forget_requests();
    let next = gw.run(&json!({"agentKey": "a", "message": "And now?", "chatId": chat})).await;
    assert_eq!(next.last()["type"], "run.complete");
    let request = &gw.fixture.requests()[0];
    assert_eq!(user_content(request, 0), "And now?");
    let earlier = user_content(request, 1);
    assert_eq!(earlier[0]["image_url"]["url"], format!("data:image/png;base64,{PNG}"), "{earlier}");
    assert_eq!(earlier.as_array().unwrap().last().unwrap()["text"], "What is in these?");
}

#[tokio::test]
async fn anthropic_gets_image_and_document_blocks_before_the_text() {
    let agent = json!({"key": "c", "mode": "ONESHOT", "modelConfig": {"providerKey": "claude", "model": "claude-x"},
        "plain": {"systemPrompt": "Describe."}});
    let (gw, claude) = Gateway::start_with_claude(&[("c.json".into(), agent.to_string())], &[]).await;
    claude.set_default(Transcript::anthropic_text(&["A report."]));
    let pdf = json!({"name": "report.pdf", "url": format!("data:application/pdf;base64,{PDF}")});
    let stream = gw.run(&json!({"agentKey": "c", "message": "Summarise.", "references": [png_ref(), pdf]})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let content = &claude.requests()[0].body["messages"][0]["content"];
    assert_eq!(
        content[0],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}})
    );
    assert_eq!(
        content[1],
        json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF}, "title": "report.pdf"})
    );
    assert_eq!(content[2]["type"], "text");
    assert_eq!(content[2]["text"], "Summarise.");
}

#[tokio::test]
async fn a_bad_file_or_a_model_without_images_is_refused_before_anything_runs() {
    let lab = FixtureServer::start().await.expect("fixture");
    let base_url = lab.base_url();
    let text_only = json!({"key": "t", "mode": "ONESHOT", "modelConfig": {"providerKey": "lab", "model": "m"},
        "plain": {"systemPrompt": "Answer."}});
    let gw = Gateway::start(
        &[oneshot_agent("a", false, 5000), ("t.json".into(), text_only.to_string())],
        &[
            ("AGENT_PROVIDERS_LAB_BASE_URL", base_url.as_str()),
            ("AGENT_PROVIDERS_LAB_API_KEY", "sk-lab"),
            ("AGENT_PROVIDERS_LAB_MODEL", "m"),
            ("AGENT_PROVIDERS_LAB_ATTACHMENTS", "none"),
        ],
    )
    .await;
    let refused = |agent: &str, reference: Value| {
        let body = json!({"agentKey": agent, "message": "Look.", "references": [reference]});
        let gw = &gw;
        async move {
            let resp = gw.post_query(&body).await;
            let status = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap();
            (status, body["msg"].as_str().unwrap_or_default().to_owned())
        }
    };
    let fake = json!({"name": "cat.png", "url": format!("data:image/jpeg;base64,{PNG}")});
    let (status, msg) = refused("a", fake).await;
    assert_eq!(status, 400);
    assert_eq!(msg, "references[0] (cat.png): the bytes are not image/jpeg");
    let (status, msg) = refused("a", json!({"url": "data:application/zip;base64,UEsDBA=="})).await;
    assert_eq!(status, 400);
    assert!(msg.contains("application/zip is not supported"), "{msg}");
    let (status, msg) = refused("t", png_ref()).await;
    assert_eq!(status, 400);
    assert!(msg.contains("lab/m, which does not take images (dot.png)"), "{msg}");
    // A text file every model takes.
    lab.set_default(Transcript::openai_text(&["Read."]));
    let text = json!({"name": "a.txt", "url": "data:text/plain;base64,aGk="});
    let stream = gw.run(&json!({"agentKey": "t", "message": "Read it.", "references": [text]})).await;
    assert_eq!(stream.last()["type"], "run.complete");
    assert_eq!(gw.fixture.request_count(), 0, "nothing refused reached a model");
    assert_eq!(lab.request_count(), 1);
}

#[tokio::test]
async fn every_protocols_file_parts_reach_the_model() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["Seen."]));
    let data_url = format!("data:image/png;base64,{PNG}");
    let has_image = |gw: &Gateway| {
        let request = gw.fixture.requests().pop().expect("a model call");
        let content = user_content(&request, 0);
        content[0]["image_url"]["url"] == json!(data_url)
    };

    // AI SDK: a file part of the UIMessage.
    let body = json!({"id": "chat-ai", "trigger": "submit-message", "messages": [{"id": "u1", "role": "user",
        "parts": [{"type": "file", "mediaType": "image/png", "url": data_url, "filename": "dot.png"},
                  {"type": "text", "text": "What is it?"}]}]});
    let resp = gw.client.post(format!("{}/api/ai-sdk/a/chat", gw.base)).json(&body).send().await.unwrap();
    assert!(resp.text().await.unwrap().contains("\"finish\""));
    assert!(has_image(&gw), "AI SDK");

    // AG-UI: a binary part of the user message.
    let input = json!({"threadId": "t-1", "runId": "r", "state": {}, "tools": [], "context": [], "forwardedProps": {},
        "messages": [{"id": "m1", "role": "user", "content": [
            {"type": "binary", "mimeType": "image/png", "data": PNG, "filename": "dot.png"},
            {"type": "text", "text": "What is it?"}]}]});
    let resp = gw.client.post(format!("{}/api/ag-ui/a", gw.base)).json(&input).send().await.unwrap();
    assert!(resp.text().await.unwrap().contains("RUN_FINISHED"));
    assert!(has_image(&gw), "AG-UI");

    // OpenAI façade: an image_url content part.
    let completion = json!({"model": "a", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": {"url": data_url}}]}]});
    let resp = gw.client.post(format!("{}/v1/chat/completions", gw.base)).json(&completion).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(has_image(&gw), "OpenAI façade");

    // A2A: a file part with raw bytes.
    let message = json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
        "messageId": "m1", "role": "ROLE_USER",
        "parts": [{"text": "What is it?"}, {"raw": PNG, "mediaType": "image/png", "filename": "dot.png"}]}}});
    let resp =
        gw.client.post(format!("{}/a2a/a", gw.base)).header("A2A-Version", "1.0").json(&message).send().await.unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED", "{body}");
    assert!(has_image(&gw), "A2A");
    let (_, card) = gw.get_json("/a2a/a/.well-known/agent-card.json").await;
    assert!(card["defaultInputModes"].as_array().unwrap().contains(&json!("image/png")), "{card}");
}
