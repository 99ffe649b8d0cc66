//! The streaming contract over real HTTP: exact event sequence, zero buffering, heartbeats.

mod common;

use agw_testkit::Transcript;
use common::{Gateway, oneshot_agent};
use serde_json::json;

#[tokio::test]
async fn oneshot_with_reasoning_streams_the_exact_event_sequence() {
    let gw = Gateway::start(&[oneshot_agent("thinker", true, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_reasoning_text(
        &["Carbon is ", "element 6."],
        &["Carbon (C) ", "is element 6."],
    ));

    let stream = gw.run(&json!({"agentKey": "thinker", "message": "Tell me about carbon"})).await;
    assert_eq!(
        stream.types(),
        [
            "request.query",
            "chat.start",
            "run.start",
            "reasoning.start",
            "reasoning.delta",
            "reasoning.delta",
            "reasoning.end",
            "content.start",
            "content.delta",
            "content.delta",
            "content.end",
            "run.complete"
        ]
    );
    let events = stream.events();
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "seq is gapless from 1: {e}");
        assert!(e["timestamp"].as_i64().unwrap() > 0);
    }
    let run_id = events[2]["runId"].as_str().unwrap().to_string();
    let chat_id = events[0]["chatId"].as_str().unwrap().to_string();
    assert_eq!(events[0]["requestId"], run_id.as_str(), "requestId defaults to runId");
    assert_eq!(events[0]["message"], "Tell me about carbon");
    assert_eq!(events[0]["agentKey"], "thinker");
    assert_eq!(events[1]["chatName"], "Tell me about carbon");
    assert_eq!(events[2]["chatId"], chat_id.as_str());
    let rid = format!("{run_id}_r_1");
    let cid = format!("{run_id}_c_1");
    assert_eq!(events[3]["reasoningId"], rid.as_str());
    assert_eq!(events[4]["delta"], "Carbon is ");
    assert_eq!(events[5]["delta"], "element 6.");
    assert_eq!(events[6]["reasoningId"], rid.as_str());
    assert_eq!(events[7]["contentId"], cid.as_str());
    assert_eq!(events[8]["delta"], "Carbon (C) ");
    assert_eq!(events[9]["delta"], "is element 6.");
    assert_eq!(
        *events[11],
        json!({"seq":12,"type":"run.complete","timestamp":events[11]["timestamp"],"runId":run_id,"finishReason":"stop",
               "usage":{"inputTokens":10,"outputTokens":4,"totalTokens":14,"calls":1,
                        "byModel":[{"provider":"fixture","model":"fixture-model","calls":1,"inputTokens":10,"outputTokens":4}]}})
    );

    // What the provider was asked: the stage, usage reporting, reasoning switched on.
    let req = gw.fixture.request(0).expect("one upstream request");
    assert_eq!(req.stage(), Some("agent-oneshot"));
    assert_eq!(req.body["stream"], true);
    assert_eq!(req.body["stream_options"]["include_usage"], true);
    assert_eq!(req.body["reasoning"]["effort"], "high");
    assert_eq!(req.body["messages"][0], json!({"role":"system","content":"You are a test agent."}));
    assert_eq!(req.body["messages"][1], json!({"role":"user","content":"Tell me about carbon"}));
}

#[tokio::test]
async fn second_query_in_the_same_chat_has_no_chat_start_and_keeps_the_request_id() {
    let gw = Gateway::start(&[oneshot_agent("plain", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["ok"]));
    let chat = "123E4567-E89B-12D3-A456-426614174000";
    let first = gw.run(&json!({"agentKey": "plain", "message": "hi", "chatId": chat})).await;
    assert_eq!(first.types()[1], "chat.start", "{:?}", first.events());
    assert_eq!(first.events()[0]["chatId"], "123e4567-e89b-12d3-a456-426614174000", "chatId is canonicalised");
    let second =
        gw.run(&json!({"agentKey": "plain", "message": "again", "chatId": chat, "requestId": " req_001 "})).await;
    assert_eq!(second.types()[..2], ["request.query", "run.start"]);
    assert_eq!(second.events()[0]["requestId"], "req_001");
    assert_eq!(second.last()["type"], "run.complete");
}

#[tokio::test]
async fn reasoning_is_not_streamed_when_the_stage_has_it_off() {
    let gw = Gateway::start(&[oneshot_agent("plain", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_reasoning_text(&["hidden"], &["shown"]));
    let stream = gw.run(&json!({"agentKey": "plain", "message": "q"})).await;
    assert!(stream.of_type("reasoning.delta").is_empty());
    assert_eq!(stream.of_type("content.delta")[0]["delta"], "shown");
    let req = gw.fixture.request(0).unwrap();
    assert!(req.body.get("reasoning").is_none(), "no reasoning switch when disabled");
}

/// Zero buffering: the provider waits 200 ms between chunks; every delta event must reach the
/// HTTP client before the provider even writes the next chunk.
#[tokio::test]
async fn every_delta_reaches_the_client_before_the_next_upstream_chunk_is_sent() {
    let gw = Gateway::start(&[oneshot_agent("thinker", true, 5000)], &[]).await;
    let reasoning = ["r1 ", "r2 ", "r3"];
    let content = ["c1 ", " ", "c3", "\n\n"];
    gw.fixture.set_default(Transcript::openai_reasoning_text(&reasoning, &content).with_chunk_delay_ms(200));

    let stream = gw.run(&json!({"agentKey": "thinker", "message": "stream please"})).await;
    let deltas: Vec<_> = stream
        .frames
        .iter()
        .filter(|f| f.event.as_ref().is_some_and(|e| e["type"] == "reasoning.delta" || e["type"] == "content.delta"))
        .collect();
    let texts: Vec<&str> = deltas.iter().map(|f| f.event.as_ref().unwrap()["delta"].as_str().unwrap()).collect();
    // One upstream chunk → one event, whitespace-only chunks included, nothing merged or split.
    assert_eq!(texts, reasoning.iter().chain(content.iter()).copied().collect::<Vec<_>>());

    let sent = gw.fixture.request(0).unwrap().frame_times();
    assert!(sent.len() > deltas.len(), "the fixture wrote the finish/usage frames after the deltas");
    for (i, delta) in deltas.iter().enumerate() {
        assert!(
            delta.at < sent[i + 1],
            "delta {i} ({:?}) arrived {:?} after upstream chunk {} was sent",
            texts[i],
            delta.at.duration_since(sent[i + 1]),
            i + 1
        );
    }
}

#[tokio::test]
async fn heartbeats_fill_silences_and_are_not_events() {
    let gw = Gateway::start(&[oneshot_agent("plain", false, 5000)], &[("AGW_SSE_HEARTBEAT_INTERVAL", "100ms")]).await;
    gw.fixture.set_default(Transcript::openai_text(&["late"]).with_headers_delay_ms(450));
    let stream = gw.run(&json!({"agentKey": "plain", "message": "q"})).await;
    assert!(stream.heartbeats() >= 2, "expected heartbeats during the 450 ms silence, got {}", stream.heartbeats());
    let seqs: Vec<u64> = stream.events().iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "heartbeats consume no seq");
    assert!(stream.frames.last().unwrap().event.is_some(), "the terminal event is the last frame");
    assert!(stream.frames[..3].iter().all(|f| f.event.is_some()), "bootstrap events come first");
}
