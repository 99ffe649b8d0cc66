//! Runs that outlive their connection (issue 15), over loopback HTTP with the fixture provider:
//! attach and resume (`lastSeq`, `Last-Event-ID`), retention, `seq_expired`, the detach grace
//! period, interrupt in each place a run can wait, slow observers, one run per chat.

mod common;

use std::time::{Duration, Instant};

use agw_testkit::{StreamOutcome, Transcript};
use common::{Gateway, LiveStream, assert_chat_files_valid, assert_chat_replayable, oneshot_agent, read_stream};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CANCELLED: &str = r#"{"executed":false,"reason":"cancelled"}"#;

/// An agent on the fixture provider with these tools (`toolConfig`), REACT with 3 steps.
fn react_agent(key: &str, tools: Value, extra: &str) -> (String, String) {
    let text = format!(
        r#"{{"key":"{key}","mode":"REACT","modelConfig":{{"providerKey":"fixture","model":"m","reasoning":{{"enabled":false}}}},
            "toolConfig":{tools},{extra}
            "react":{{"systemPrompt":"You are a test agent.","maxSteps":3}}}}"#
    );
    (format!("{key}.json"), text)
}

fn pieces(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("piece{i} ")).collect()
}

fn long_text(n: usize, delay_ms: u64) -> Transcript {
    let pieces = pieces(n);
    let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
    Transcript::openai_text(&refs).with_chunk_delay_ms(delay_ms)
}

async fn attach(gw: &Gateway, run_id: &str, last_seq: Option<u64>) -> reqwest::Response {
    let mut url = format!("{}/api/ap/attach?runId={run_id}", gw.base);
    if let Some(seq) = last_seq {
        url.push_str(&format!("&lastSeq={seq}"));
    }
    gw.client.get(url).send().await.expect("attach request")
}

async fn post(gw: &Gateway, path: &str, body: &Value) -> (u16, Value) {
    let resp = gw.client.post(format!("{}{path}", gw.base)).json(body).send().await.expect("post");
    let status = resp.status().as_u16();
    (status, resp.json().await.expect("json body"))
}

fn run_id_of(events: &[Value]) -> String {
    events.iter().find(|e| e["type"] == "run.start").expect("run.start")["runId"].as_str().unwrap().to_owned()
}

fn chat_id_of(events: &[Value]) -> String {
    events.iter().find(|e| e["type"] == "run.start").expect("run.start")["chatId"].as_str().unwrap().to_owned()
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events.iter().map(|e| e["seq"].as_u64().expect("seq")).collect()
}

fn content(events: &[Value]) -> String {
    events.iter().filter(|e| e["type"] == "content.delta").map(|e| e["delta"].as_str().unwrap()).collect()
}

/// Every call that started has exactly one result; returns the results by tool id.
fn results_by_tool(events: &[Value]) -> Vec<(String, String)> {
    let started: Vec<&str> =
        events.iter().filter(|e| e["type"] == "tool.start").map(|e| e["toolId"].as_str().unwrap()).collect();
    let results: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["type"] == "tool.result")
        .map(|e| (e["toolId"].as_str().unwrap().to_owned(), e["result"].as_str().unwrap().to_owned()))
        .collect();
    let answered: Vec<&str> = results.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(started, answered, "every started call has exactly one result, in order");
    results
}

#[tokio::test]
async fn every_frame_carries_its_seq_as_the_sse_id() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["one ", "two"]));
    let body = gw.post_query(&json!({"agentKey": "a", "message": "q"})).await.text().await.unwrap();
    let mut frames = Vec::new();
    agw_protocol::SseDecoder::new().feed(body.as_bytes(), &mut frames);
    let events: Vec<_> = frames.iter().filter(|f| !f.is_heartbeat()).collect();
    assert!(events.len() >= 6, "{body}");
    for frame in events {
        let event: Value = serde_json::from_str(&frame.data).unwrap();
        assert_eq!(frame.id.as_deref(), Some(event["seq"].to_string().as_str()), "{body}");
    }
}

/// The client drops the stream mid-run and attaches with the last seq it saw: the two streams
/// concatenated are the run's whole event list — no gap, no duplicate.
#[tokio::test]
async fn disconnect_then_attach_with_the_last_seen_seq_loses_and_repeats_nothing() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(long_text(20, 40));

    let mut first = LiveStream::new(gw.post_query(&json!({"agentKey": "a", "message": "q"})).await);
    let mut seen = Vec::new();
    while seen.len() < 8 {
        seen.push(first.next_event().await.unwrap());
    }
    drop(first); // the phone changes networks
    let run_id = run_id_of(&seen);
    let last_seq = seen.last().unwrap()["seq"].as_u64().unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;

    let resumed = attach(&gw, &run_id, Some(last_seq)).await;
    assert_eq!(resumed.status(), 200);
    assert_eq!(resumed.headers()["content-type"], "text/event-stream");
    let rest = LiveStream::new(resumed).rest().await;
    let mut joined = seen.clone();
    joined.extend(rest);
    assert_eq!(seqs(&joined), (1..=joined.len() as u64).collect::<Vec<_>>(), "no gap, no duplicate");
    assert_eq!(joined.last().unwrap()["type"], "run.complete");
    assert_eq!(content(&joined), pieces(20).concat());

    let reference = read_stream(attach(&gw, &run_id, Some(0)).await).await;
    let reference: Vec<Value> = reference.events().into_iter().cloned().collect();
    assert_eq!(joined, reference, "equal to the run's whole event list");
    assert_chat_files_valid(&gw);
}

#[tokio::test]
async fn last_event_id_resumes_and_an_explicit_last_seq_wins() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["a ", "b ", "c"]));
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    let events: Vec<Value> = stream.events().into_iter().cloned().collect();
    let run_id = run_id_of(&events);
    let url = format!("{}/api/ap/attach?runId={run_id}", gw.base);

    let by_header = gw.client.get(&url).header("Last-Event-ID", "4").send().await.unwrap();
    let by_header = read_stream(by_header).await;
    assert_eq!(by_header.events().first().unwrap()["seq"], 5);

    let both = gw.client.get(format!("{url}&lastSeq=6")).header("Last-Event-ID", "2").send().await.unwrap();
    let both = read_stream(both).await;
    assert_eq!(both.events().first().unwrap()["seq"], 7, "lastSeq wins over Last-Event-ID");
    assert_eq!(both.last()["type"], "run.complete");

    let bad = gw.client.get(format!("{url}&lastSeq=x")).send().await.unwrap();
    assert_eq!(bad.status(), 400);
    let ahead = attach(&gw, &run_id, Some(events.len() as u64 + 5)).await;
    assert_eq!(ahead.status(), 400, "a finished run has nothing after its last event");
}

#[tokio::test]
async fn a_finished_run_is_attachable_for_the_retention_window_then_404() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[("AGW_RUNS_RETENTION", "400ms")]).await;
    gw.fixture.set_default(Transcript::openai_text(&["done"]));
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    let live: Vec<Value> = stream.events().into_iter().cloned().collect();
    let run_id = run_id_of(&live);

    let replayed = read_stream(attach(&gw, &run_id, None).await).await;
    let replayed: Vec<Value> = replayed.events().into_iter().cloned().collect();
    assert_eq!(replayed, live, "the whole run, as it streamed");
    let (status, body) = post(&gw, "/api/ap/interrupt", &json!({"runId": run_id})).await;
    assert_eq!(status, 200, "interrupting a finished run is not an error");
    assert_eq!((body["data"]["accepted"].as_bool(), body["data"]["status"].as_str()), (Some(false), Some("completed")));

    tokio::time::sleep(Duration::from_millis(500)).await;
    let gone = attach(&gw, &run_id, None).await;
    assert_eq!(gone.status(), 404);
    let (status, _) = post(&gw, "/api/ap/interrupt", &json!({"runId": run_id})).await;
    assert_eq!(status, 404);
    assert_eq!(attach(&gw, "no-such-run", None).await.status(), 404);
    assert_eq!(gw.client.get(format!("{}/api/ap/attach", gw.base)).send().await.unwrap().status(), 400);
    let (status, _) = post(&gw, "/api/ap/interrupt", &json!({"runId": "no-such-run"})).await;
    assert_eq!(status, 404);
    let (status, _) = post(&gw, "/api/ap/interrupt", &json!({"run": 1})).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_last_seq_older_than_the_buffer_gets_409_seq_expired() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[("AGW_RUNS_BUFFER_EVENTS", "5")]).await;
    gw.fixture.set_default(long_text(12, 0));
    let stream = gw.run(&json!({"agentKey": "a", "message": "q"})).await;
    let events: Vec<Value> = stream.events().into_iter().cloned().collect();
    assert_eq!(seqs(&events), (1..=events.len() as u64).collect::<Vec<_>>(), "the live stream is whole");
    let run_id = run_id_of(&events);
    let latest = events.len() as u64;

    let expired = attach(&gw, &run_id, Some(0)).await;
    assert_eq!(expired.status(), 409);
    let body: Value = expired.json().await.unwrap();
    assert_eq!(body["code"], "seq_expired");
    assert_eq!((body["oldestSeq"].as_u64(), body["latestSeq"].as_u64()), (Some(latest - 4), Some(latest)));
    assert_eq!(body["lastSeq"], 0);
    assert!(body["msg"].as_str().unwrap().contains("no longer buffered"), "{body}");

    let held = read_stream(attach(&gw, &run_id, Some(latest - 5)).await).await;
    assert_eq!(held.events().len(), 5, "the oldest held event and everything after it");
    let no_seq = read_stream(attach(&gw, &run_id, None).await).await;
    assert_eq!(no_seq.events()[0]["seq"], latest - 4, "without lastSeq: from the oldest held, no 409");
}

/// Nobody watching: the run keeps going (default grace 30 s), records its history as usual and
/// can be attached to afterwards.
#[tokio::test]
async fn a_run_without_observers_keeps_going_and_records_everything() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(long_text(10, 40));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "a", "message": "q"})).await);
    live.until(|e| e["type"] == "content.delta").await;
    let run_id = run_id_of(&live.seen);
    let chat_id = chat_id_of(&live.seen);
    drop(live);

    let upstream = gw.fixture.request(0).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(5), upstream.wait_outcome()).await.unwrap();
    assert_eq!(outcome, StreamOutcome::Completed, "the provider stream was read to the end");
    let after = read_stream(attach(&gw, &run_id, None).await).await;
    assert_eq!(after.last()["type"], "run.complete");
    let replay = assert_chat_replayable(&gw, &chat_id).await;
    let text: String =
        replay.iter().filter(|e| e["type"] == "content.snapshot").map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(text, pieces(10).concat(), "the whole answer is in the history");
}

#[tokio::test]
async fn nobody_attaching_within_the_grace_period_cancels_the_run() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 10_000)], &[("AGW_RUNS_DETACH_GRACE", "300ms")]).await;
    gw.fixture.set_default(long_text(60, 100));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "a", "message": "q"})).await);
    live.until(|e| e["type"] == "content.delta").await;
    let run_id = run_id_of(&live.seen);
    let chat_id = chat_id_of(&live.seen);
    let left = Instant::now();
    drop(live);

    let upstream = gw.fixture.request(0).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(5), upstream.wait_outcome()).await.unwrap();
    assert_eq!(outcome, StreamOutcome::ClientClosed);
    assert!(left.elapsed() >= Duration::from_millis(300), "not before the grace period: {:?}", left.elapsed());
    let after = read_stream(attach(&gw, &run_id, None).await).await;
    assert_eq!(after.last()["type"], "run.cancel");
    assert_chat_files_valid(&gw);
    assert_chat_replayable(&gw, &chat_id).await;
}

#[tokio::test]
async fn reattaching_within_the_grace_period_keeps_the_run_alive() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 10_000)], &[("AGW_RUNS_DETACH_GRACE", "400ms")]).await;
    gw.fixture.set_default(long_text(15, 60));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "a", "message": "q"})).await);
    live.until(|e| e["type"] == "content.delta").await;
    let run_id = run_id_of(&live.seen);
    let last = live.seen.last().unwrap()["seq"].as_u64().unwrap();
    drop(live);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut back = LiveStream::new(attach(&gw, &run_id, Some(last)).await);
    // Leave and come back twice: a stale grace timer must not cancel the run.
    back.next_event().await.unwrap();
    let last = back.seen.last().unwrap()["seq"].as_u64().unwrap();
    drop(back);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rest = LiveStream::new(attach(&gw, &run_id, Some(last)).await).rest().await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete");
}

/// Starts a query and reads until `ready`; interrupts; checks the answer, the time the stream
/// took to end, `run.cancel` last, and that every call has a result. Returns the whole stream.
async fn interrupt_when(gw: &Gateway, body: Value, ready: impl Fn(&Value) -> bool) -> Vec<Value> {
    interrupt_when_recorded(gw, body, ready, true).await
}

/// [`interrupt_when`]; `recorded`: whether the run streamed anything the history keeps (a run
/// cancelled before any output leaves no lines, like a run that fails before any).
async fn interrupt_when_recorded(
    gw: &Gateway,
    body: Value,
    ready: impl Fn(&Value) -> bool,
    recorded: bool,
) -> Vec<Value> {
    let mut live = LiveStream::new(gw.post_query(&body).await);
    live.until(ready).await;
    let run_id = run_id_of(&live.seen);
    let asked = Instant::now();
    let (status, answer) = post(gw, "/api/ap/interrupt", &json!({"runId": run_id})).await;
    let answered = asked.elapsed();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["data"]["accepted"], true, "{answer}");
    assert_eq!(answer["data"]["status"], "cancelled", "{answer}");
    assert_eq!(answer["data"]["runId"], run_id.as_str());
    let events = live.rest().await;
    // The issue's target is 100 ms; the bound leaves room for a loaded CI machine.
    assert!(answered < Duration::from_millis(1000), "cancelled in {answered:?}");
    eprintln!("interrupt answered after {answered:?}");
    assert_eq!(
        events.last().unwrap()["type"],
        "run.cancel",
        "{:?}",
        events.iter().map(|e| &e["type"]).collect::<Vec<_>>()
    );
    assert_eq!(events.last().unwrap()["runId"], run_id.as_str());
    assert_eq!(events.iter().filter(|e| e["type"] == "run.cancel").count(), 1);
    results_by_tool(&events);
    let files = assert_chat_files_valid(gw);
    if recorded {
        assert!(files.runs.iter().any(|(_, r)| *r == run_id), "the cancelled run is in the history");
        assert_chat_replayable(gw, &chat_id_of(&events)).await;
    }
    events
}

#[tokio::test]
async fn interrupt_while_waiting_for_the_provider() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 20_000)], &[]).await;
    gw.fixture.set_default(Transcript::openai_text(&["late"]).with_headers_delay_ms(10_000));
    interrupt_when_recorded(&gw, json!({"agentKey": "a", "message": "q"}), |e| e["type"] == "run.start", false).await;
    let upstream = gw.fixture.request(0).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(3), upstream.wait_outcome()).await.unwrap();
    assert_eq!(outcome, StreamOutcome::ClientClosed, "the provider request was aborted");
}

#[tokio::test]
async fn interrupt_while_streaming_closes_the_open_block() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 20_000)], &[]).await;
    gw.fixture.set_default(long_text(50, 100));
    let events = interrupt_when(&gw, json!({"agentKey": "a", "message": "q"}), |e| e["type"] == "content.delta").await;
    let n = events.len();
    assert_eq!(events[n - 2]["type"], "content.end", "the open block is closed before run.cancel");
    let upstream = gw.fixture.request(0).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(3), upstream.wait_outcome()).await.unwrap();
    assert_eq!(outcome, StreamOutcome::ClientClosed);
}

/// A skill script that would run for 30 s: the interrupt kills it (no process left) and the call
/// gets the cancelled result, which the chat's next run sends back to the model.
#[tokio::test]
async fn interrupt_while_a_script_runs_kills_it() {
    let skills = std::env::temp_dir().join(format!("agw-lifecycle-skills-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&skills);
    std::fs::create_dir_all(skills.join("sleepy/scripts")).unwrap();
    std::fs::write(skills.join("sleepy/SKILL.md"), "---\nname: sleepy\ndescription: sleeps\n---\nSleeps.\n").unwrap();
    let marker = format!("lifecycle_sleep_{}", std::process::id());
    std::fs::write(skills.join(format!("sleepy/scripts/{marker}.py")), "import time\ntime.sleep(30)\n").unwrap();
    let extra = r#""skillConfig":{"skills":["sleepy"]},"#;
    let gw = Gateway::start(
        &[react_agent("s", json!({"backends": ["_skill_run_script_"]}), extra)],
        &[("AGENT_SKILL_EXTERNAL_DIR", skills.to_str().unwrap())],
    )
    .await;
    let args = json!({"skill": "sleepy", "script": format!("scripts/{marker}.py"), "timeoutMs": 60_000});
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call("call_sleep", "_skill_run_script_", &[&args.to_string()]),
    );
    // The chat's next run (below) gets this one: a stage's transcripts are used in order.
    gw.fixture.on_stage("agent-react-step-1", Transcript::openai_text(&["ok"]));
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["never"]));
    let running = |marker: &str| {
        std::fs::read_dir("/proc").unwrap().filter_map(Result::ok).any(|p| {
            std::fs::read(p.path().join("cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
    };
    let body = json!({"agentKey": "s", "message": "sleep"});
    let mut live = LiveStream::new(gw.post_query(&body).await);
    live.until(|e| e["type"] == "tool.end").await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !running(&marker) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(running(&marker), "the script is running");
    let run_id = run_id_of(&live.seen);
    let (_, answer) = post(&gw, "/api/ap/interrupt", &json!({"runId": run_id})).await;
    assert_eq!(answer["data"]["status"], "cancelled", "{answer}");
    let events = live.rest().await;
    assert_eq!(events.last().unwrap()["type"], "run.cancel");
    assert_eq!(results_by_tool(&events), [("call_sleep".to_owned(), CANCELLED.to_owned())]);
    let deadline = Instant::now() + Duration::from_secs(2);
    while running(&marker) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(!running(&marker), "the script's process was killed");

    // The next run of the chat sends the call with its cancelled result back to the model.
    let chat_id = chat_id_of(&events);
    let next = gw.run(&json!({"agentKey": "s", "message": "again", "chatId": chat_id})).await;
    assert_eq!(next.last()["type"], "run.complete");
    let request = gw.fixture.requests().last().unwrap().clone();
    let messages = request.body["messages"].as_array().unwrap();
    let tool = messages.iter().find(|m| m["role"] == "tool").expect("the cancelled call's result is in the history");
    assert_eq!(tool["content"], CANCELLED);
    assert_eq!(tool["tool_call_id"], "call_sleep");
    let _ = std::fs::remove_dir_all(&skills);
}

#[tokio::test]
async fn interrupt_while_waiting_for_a_frontend_submit() {
    let gw = Gateway::start(
        &[react_agent("ask", json!({"frontends": ["confirm_dialog"]}), "")],
        &[("AGENT_TOOLS_FRONTEND_SUBMIT_TIMEOUT_MS", "30000")],
    )
    .await;
    gw.fixture
        .on_stage("agent-react-step-1", Transcript::openai_tool_call("call_fe", "confirm_dialog", &["{\"q\":1}"]));
    let events = interrupt_when(&gw, json!({"agentKey": "ask", "message": "q"}), |e| e["type"] == "tool.end").await;
    assert_eq!(results_by_tool(&events), [("call_fe".to_owned(), CANCELLED.to_owned())]);
    let run_id = run_id_of(&events);
    let (_, late) =
        post(&gw, "/api/ap/submit", &json!({"runId": run_id, "toolId": "call_fe", "params": {"ok": true}})).await;
    assert_eq!(late["data"]["accepted"], false, "nothing waits any more: {late}");
    assert_eq!(gw.state.runs.submits().pending(), 0);
}

/// Two observers of one run, one of them reading nothing: the other gets every event at the
/// run's pace; the stalled one falls out of the (small) buffer and, when it reads again, finds
/// the lag frame as its last frame; it may re-attach from what is still held.
#[tokio::test]
async fn a_slow_observer_slows_neither_the_run_nor_the_other_observer() {
    // 12 MiB: more than the kernel's socket buffers can take for the observer that reads nothing
    // (and more than the default cap on one response, raised here).
    let env = [("AGW_RUNS_BUFFER_EVENTS", "100"), ("AGW_PROVIDER_MAX_OUTPUT_BYTES", "33554432")];
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &env).await;
    let big: Vec<String> = (0..3000).map(|i| format!("{i:04}{}", "x".repeat(4096))).collect();
    let refs: Vec<&str> = big.iter().map(String::as_str).collect();
    gw.fixture.set_default(Transcript::openai_text(&refs).with_chunk_delay_ms(1));

    let mut fast = LiveStream::new(gw.post_query(&json!({"agentKey": "a", "message": "q"})).await);
    let start = fast.until(|e| e["type"] == "run.start").await;
    let run_id = start["runId"].as_str().unwrap().to_owned();

    // The slow observer: a raw connection with a tiny receive buffer that reads nothing yet.
    let attach_path = format!("/api/ap/attach?runId={run_id}&lastSeq=3");
    let mut slow = agw_testkit::slow_client(&gw.base, "GET", &attach_path, None).await;

    let started = Instant::now();
    let events = fast.rest().await;
    let took = started.elapsed();
    assert_eq!(events.last().unwrap()["type"], "run.complete");
    assert_eq!(seqs(&events), (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(content(&events), big.concat(), "the fast observer got every delta");
    assert!(took < Duration::from_secs(10), "the run went at the provider's pace: {took:?}");

    let mut received = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), slow.read_to_end(&mut received)).await;
    let text = String::from_utf8_lossy(&received);
    assert!(text.starts_with("HTTP/1.1 200"), "{}", &text[..text.len().min(200)]);
    let lag = text.rfind("event:lagged").expect("the slow observer's stream ends with the lag frame");
    assert!(text[lag..].contains("\"code\":\"observer_lagged\""), "{}", &text[lag..]);
    assert!(!text[lag..].contains("event:message"), "nothing after the lag frame");

    let latest = events.len() as u64;
    let again = read_stream(attach(&gw, &run_id, Some(latest - 10)).await).await;
    assert_eq!(again.events().len(), 10, "re-attached from what the buffer still holds");
}

/// One run per chat: by default a second query into a busy chat gets 409 naming the run; with
/// `queue` it waits for the first run and then runs.
#[tokio::test]
async fn a_busy_chat_rejects_a_second_query_by_default_and_queues_it_when_configured() {
    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[]).await;
    gw.fixture.set_default(long_text(10, 50));
    let mut first = LiveStream::new(gw.post_query(&json!({"agentKey": "a", "message": "q"})).await);
    first.until(|e| e["type"] == "run.start").await;
    let (run_id, chat_id) = (run_id_of(&first.seen), chat_id_of(&first.seen));
    let (status, body) =
        post(&gw, "/api/ap/query", &json!({"agentKey": "a", "message": "q2", "chatId": chat_id})).await;
    assert_eq!(status, 409, "{body}");
    assert_eq!((body["code"].as_str(), body["runId"].as_str()), (Some("chat_busy"), Some(run_id.as_str())));
    first.rest().await;
    let second = gw.run(&json!({"agentKey": "a", "message": "q2", "chatId": chat_id})).await;
    assert_eq!(second.last()["type"], "run.complete", "the chat is free again");

    let gw = Gateway::start(&[oneshot_agent("a", false, 5000)], &[("AGW_RUNS_CHAT_CONCURRENCY", "queue")]).await;
    gw.fixture.set_default(long_text(10, 50));
    let mut first = LiveStream::new(gw.post_query(&json!({"agentKey": "a", "message": "q"})).await);
    first.until(|e| e["type"] == "run.start").await;
    let chat_id = chat_id_of(&first.seen);
    let queued = gw.post_query(&json!({"agentKey": "a", "message": "q2", "chatId": chat_id})).await;
    assert_eq!(queued.status(), 200);
    let queued = tokio::spawn(read_stream(queued));
    let first_events = first.rest().await;
    let second = queued.await.unwrap();
    let first_end = first_events.last().unwrap();
    assert_eq!(first_end["type"], "run.complete");
    assert_eq!(second.last()["type"], "run.complete");
    let first_done = first_end["timestamp"].as_i64().unwrap();
    let second_start = second.events()[0]["timestamp"].as_i64().unwrap();
    assert!(second_start >= first_done, "the queued run started after the first ended");
    let replay = assert_chat_replayable(&gw, &chat_id).await;
    assert_eq!(replay.iter().filter(|e| e["type"] == "run.start").count(), 2);
}

/// A steer sent while the model streams its first turn is taken at the next model turn: the
/// stream shows `request.steer` after the tool result, the second provider request ends with it
/// as a user message, and the chat history replays it.
#[tokio::test]
async fn a_steer_is_taken_at_the_next_model_turn_and_recorded() {
    let gw = Gateway::start(&[react_agent("r", json!({"backends": ["mock_city_weather"]}), "")], &[]).await;
    gw.fixture.on_stage(
        "agent-react-step-1",
        Transcript::openai_tool_call("call_w", "mock_city_weather", &["{\"city\":", "\"Paris\"}"])
            .with_chunk_delay_ms(150),
    );
    gw.fixture.on_stage("agent-react-step-2", Transcript::openai_text(&["Warm, ", "and in Celsius."]));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "r", "message": "weather?"})).await);
    live.until(|e| e["type"] == "tool.start").await;
    let run_id = run_id_of(&live.seen);
    let steer = json!({"runId": run_id, "message": "use Celsius", "steerId": "s1"});
    let (status, answer) = post(&gw, "/api/ap/steer", &steer).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        (answer["data"]["accepted"].as_bool(), answer["data"]["status"].as_str(), answer["data"]["steerId"].as_str()),
        (Some(true), Some("queued"), Some("s1"))
    );
    let events = live.rest().await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let steered = types.iter().position(|t| *t == "request.steer").expect("request.steer in the stream");
    let result = types.iter().position(|t| *t == "tool.result").unwrap();
    assert!(steered > result, "taken at the model-turn boundary, never mid-tool: {types:?}");
    let event = &events[steered];
    assert_eq!((event["steerId"].as_str(), event["message"].as_str()), (Some("s1"), Some("use Celsius")));
    assert_eq!((event["role"].as_str(), event["runId"].as_str()), (Some("user"), Some(run_id.as_str())));
    assert_eq!(types.last(), Some(&"run.complete"));

    let second = gw.fixture.requests().into_iter().find(|r| r.stage() == Some("agent-react-step-2")).unwrap();
    let last = second.body["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!((last["role"].as_str(), last["content"].as_str()), (Some("user"), Some("use Celsius")));
    let replay = assert_chat_replayable(&gw, &chat_id_of(&events)).await;
    assert!(replay.iter().any(|e| e["type"] == "request.steer" && e["steerId"] == "s1"), "history records it");

    let (status, late) = post(&gw, "/api/ap/steer", &steer).await;
    assert_eq!((status, late["code"].as_str()), (409, Some("run_finished")), "{late}");
    let (status, _) = post(&gw, "/api/ap/steer", &json!({"runId": "nope", "message": "x"})).await;
    assert_eq!(status, 404);
    let (status, _) = post(&gw, "/api/ap/steer", &json!({"runId": run_id, "message": "  "})).await;
    assert_eq!(status, 400);
}

/// An attach storm: 1,000 streams of one run (the query's own plus 999 attaches, the default
/// cap) each get every event exactly once, the next attach gets 429, and the gateway's memory
/// grows by connections, not by copies of the run's events.
#[tokio::test]
async fn an_attach_storm_is_capped_and_shares_one_buffer() {
    const ATTACHES: usize = 999;
    let gw = Gateway::start(&[oneshot_agent("a", false, 20_000)], &[]).await;
    gw.fixture.set_default(long_text(20, 100));
    let mut live = LiveStream::new(gw.post_query(&json!({"agentKey": "a", "message": "q"})).await);
    live.until(|e| e["type"] == "run.start").await;
    let run_id = run_id_of(&live.seen);
    let addr: std::net::SocketAddr = gw.base.trim_start_matches("http://").parse().unwrap();
    let rss_before = common::rss_bytes();

    let mut observers = Vec::with_capacity(ATTACHES);
    for _ in 0..ATTACHES {
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!(
            "GET /api/ap/attach?runId={run_id}&lastSeq=0 HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        );
        conn.write_all(request.as_bytes()).await.unwrap();
        observers.push(conn);
    }
    // Wait until every attach is registered, then one more is refused.
    let handle = gw.state.runs.tracker().get(&run_id).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while handle.observers() < ATTACHES + 1 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(handle.observers(), ATTACHES + 1);
    let rss_attached = common::rss_bytes();
    let refused = attach(&gw, &run_id, Some(0)).await;
    assert_eq!(refused.status(), 429);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "too_many_observers");

    let reads = observers.into_iter().map(|mut conn| {
        tokio::spawn(async move {
            let mut received = Vec::new();
            conn.read_to_end(&mut received).await.unwrap();
            received
        })
    });
    let reference = live.rest().await;
    let expected: Vec<u64> = seqs(&reference);
    for read in futures::future::join_all(reads).await {
        let received = read.unwrap();
        let text = String::from_utf8_lossy(&received);
        let body = &text[text.find("\r\n\r\n").unwrap() + 4..];
        // Chunked transfer encoding: the SSE decoder skips the chunk-size lines as junk fields.
        let mut frames = Vec::new();
        agw_protocol::SseDecoder::new().feed(body.as_bytes(), &mut frames);
        let got: Vec<u64> = frames
            .iter()
            .filter(|f| f.event == "message")
            .map(|f| serde_json::from_str::<Value>(&f.data).unwrap()["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(got, expected, "every observer gets every event once, in order");
    }
    let growth = rss_attached.saturating_sub(rss_before);
    eprintln!("attach storm: {} observers, RSS +{} KiB while attached", ATTACHES + 1, growth / 1024);
    assert!(growth < 96 * 1024 * 1024, "bounded: +{} KiB for {ATTACHES} attaches", growth / 1024);
}
