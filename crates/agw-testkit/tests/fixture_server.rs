//! The fixture server itself: byte-exact, frame-by-frame delivery, routing, recording.

use std::time::{Duration, Instant};

use agw_testkit::drive::within;
use agw_testkit::{FixtureServer, StreamOutcome, Transcript};
use serde_json::json;

const GUARD: Duration = Duration::from_secs(10);

async fn post(server: &FixtureServer, stage: Option<&str>, user: &str) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", server.base_url()))
        .header("content-type", "application/json")
        .body(json!({"model": "m", "messages": [{"role": "user", "content": user}]}).to_string());
    if let Some(stage) = stage {
        request = request.header("x-agw-stage", stage);
    }
    within(GUARD, request.send()).await.expect("fixture answers")
}

async fn body_text(response: reqwest::Response) -> String {
    within(GUARD, response.text()).await.expect("body readable")
}

#[tokio::test]
async fn frames_arrive_one_by_one_byte_for_byte() {
    let transcript =
        Transcript::new().raw("data: {\"a\":1}\n\n").raw("data:  odd\u{00e9} spacing \n\n").with_chunk_delay_ms(300);
    let server = FixtureServer::with_default(transcript.clone()).await.expect("fixture server starts");
    let mut response = post(&server, None, "hi").await;
    let started = Instant::now();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");

    let first = within(GUARD, response.chunk()).await.expect("readable").expect("frame 1");
    let first_at = started.elapsed();
    assert_eq!(first.as_ref(), transcript.frames[0].raw.as_bytes());
    assert!(first_at < Duration::from_millis(250), "frame 1 arrived after {first_at:?}: it waited for frame 2");

    let second = within(GUARD, response.chunk()).await.expect("readable").expect("frame 2");
    assert_eq!(second.as_ref(), transcript.frames[1].raw.as_bytes());
    assert!(started.elapsed() >= Duration::from_millis(250));
    assert!(within(GUARD, response.chunk()).await.expect("readable").is_none());

    let recorded = server.request(0).expect("recorded");
    assert_eq!(within(GUARD, recorded.wait_outcome()).await, StreamOutcome::Completed);
    let times = recorded.frame_times();
    assert_eq!(times.len(), 2);
    assert!(times[1] - times[0] >= Duration::from_millis(300));
}

#[tokio::test]
async fn routing_by_stage_message_queue_and_default() {
    let server = FixtureServer::start().await.expect("fixture server starts");
    server.on_stage("plan", Transcript::new().raw("plan-1"));
    server.on_stage("plan", Transcript::new().raw("plan-2"));
    server.on_message("weather", Transcript::new().raw("weather"));
    server.push(Transcript::new().raw("queued"));

    assert_eq!(body_text(post(&server, Some("plan"), "weather?").await).await, "plan-1", "stage wins");
    assert_eq!(body_text(post(&server, Some("plan"), "x").await).await, "plan-2");
    assert_eq!(body_text(post(&server, Some("plan"), "x").await).await, "plan-2", "last transcript of a rule sticks");
    assert_eq!(body_text(post(&server, Some("other"), "the weather").await).await, "weather");
    assert_eq!(body_text(post(&server, None, "hello").await).await, "queued");
    let fallback = post(&server, None, "hello").await;
    assert_eq!(fallback.status(), 404, "nothing scripted → 404, which clients do not retry");
    assert!(body_text(fallback).await.contains("no transcript scripted"));

    let routes: Vec<String> = server.requests().into_iter().map(|r| r.route).collect();
    assert_eq!(routes, ["stage:plan", "stage:plan", "stage:plan", "message:weather", "queue", "default"]);
    let last = server.request(5).expect("recorded");
    assert_eq!(last.last_user_message(), Some("hello"));
    assert_eq!(last.stage(), None);
    assert_eq!(last.body["model"], "m");
}

#[tokio::test]
async fn error_transcripts_carry_status_headers_and_body() {
    let server =
        FixtureServer::with_default(Transcript::http_error(429, "{\"error\":{}}").with_header("Retry-After", "7"))
            .await
            .expect("fixture server starts");
    let response = post(&server, None, "hi").await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "7");
    assert_eq!(response.headers()["content-type"], "application/json");
    assert_eq!(body_text(response).await, "{\"error\":{}}");
}

#[tokio::test]
async fn wait_for_requests_sees_concurrent_requests() {
    let server = FixtureServer::with_default(Transcript::openai_text(&["x"])).await.expect("fixture server starts");
    let (a, b) = tokio::join!(post(&server, Some("a"), "1"), post(&server, Some("b"), "2"));
    assert!(a.status().is_success() && b.status().is_success());
    let requests = within(GUARD, server.wait_for_requests(2)).await;
    assert_eq!(requests.len(), 2);
    let mut stages: Vec<_> = requests.iter().filter_map(|r| r.stage().map(str::to_owned)).collect();
    stages.sort();
    assert_eq!(stages, ["a", "b"]);
}
