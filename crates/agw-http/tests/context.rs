//! Long conversations (issue 19) over loopback HTTP with the fixture provider: pruning old tool
//! outputs, summarising older runs into a checkpoint the next run reuses, the fallback when the
//! summary fails, `POST /api/ap/compact`, and doom-loop detection both ways.

mod common;

use agw_llm::tokens::estimate_text;
use agw_testkit::Transcript;
use common::{Gateway, assert_chat_files_valid, assert_chat_replayable};
use serde_json::{Value, json};

/// contextWindow 14,000 - maxOutputTokens 2,000 = 12,000 usable; compaction from 9,600.
const LIMITS: &str = r#""contextWindow":14000,"maxOutputTokens":2000"#;
const TRIGGER: u64 = 9_600;

fn react_agent(key: &str, tools: Value, context: Value) -> (String, String) {
    react_agent_with(key, tools, context, LIMITS)
}

fn react_agent_with(key: &str, tools: Value, context: Value, limits: &str) -> (String, String) {
    let text = format!(
        r#"{{"key":"{key}","mode":"REACT","modelConfig":{{"providerKey":"fixture","model":"m",{limits}}},
            "toolConfig":{tools},"contextConfig":{context},
            "react":{{"systemPrompt":"You are a test agent.","maxSteps":6}}}}"#
    );
    (format!("{key}.json"), text)
}

/// The fixture's usage chunk says 10 prompt tokens, which would (rightly) shrink every estimate
/// of the run; real providers report real counts. These transcripts report none.
fn text(answer: &str) -> Transcript {
    Transcript::new().content(answer).finish("stop").done()
}

fn tool_call(id: &str, name: &str, arguments: &str) -> Transcript {
    Transcript::new().tool_call_start(0, id, name).tool_args(0, arguments).finish("tool_calls").done()
}

/// About `tokens` tokens of English-like text (agw's estimate: 1.05 per "word ").
fn words(tokens: usize) -> String {
    "word ".repeat(tokens * 20 / 21)
}

async fn ask(gw: &Gateway, agent: &str, chat: Option<&str>, message: &str) -> Vec<Value> {
    let mut body = json!({"agentKey": agent, "message": message});
    if let Some(chat) = chat {
        body["chatId"] = json!(chat);
    }
    let stream = gw.run(&body).await;
    stream.events().into_iter().cloned().collect()
}

fn of_type<'a>(events: &'a [Value], ty: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == ty).collect()
}

fn chat_of(events: &[Value]) -> String {
    of_type(events, "run.start")[0]["chatId"].as_str().unwrap().to_owned()
}

fn run_of(events: &[Value]) -> String {
    of_type(events, "run.start")[0]["runId"].as_str().unwrap().to_owned()
}

/// agw's estimate of what a provider request held (text of every message and tool).
fn request_tokens(body: &Value) -> u64 {
    let mut tokens = 0;
    for message in body["messages"].as_array().unwrap() {
        tokens += 4 + estimate_text(message["content"].as_str().unwrap_or(""));
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            tokens += 4 + estimate_text(call["function"]["arguments"].as_str().unwrap_or(""));
        }
    }
    tokens + body.get("tools").map_or(0, |t| estimate_text(&t.to_string()))
}

fn contents(body: &Value, role: &str) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == role)
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test]
async fn old_tool_outputs_are_pruned_before_the_call_that_would_overflow() {
    // `_bash_` returns at most 2,000 characters (~420 tokens), so the window is small:
    // 2,500 - 500 = 2,000 usable, compaction from 1,600.
    let (usable, trigger) = (2_000, 1_600);
    let limits = r#""contextWindow":2500,"maxOutputTokens":500"#;
    let context = json!({"pruneProtectTokens": 300, "pruneMinimumTokens": 100});
    let gw = Gateway::start(&[react_agent_with("reader", json!({"backends":["_bash_"]}), context, limits)], &[]).await;
    let dir = gw.agents_dir.join("bash");
    std::fs::create_dir_all(&dir).unwrap();
    let output = |n: usize| format!("{n} {}", words(400));
    for n in 1..=3 {
        std::fs::write(dir.join(format!("big{n}.txt")), output(n)).unwrap();
        gw.fixture.on_stage(
            "agent-react-step-1",
            tool_call("call_1", "_bash_", &format!(r#"{{"command":"cat big{n}.txt"}}"#)),
        );
    }
    gw.fixture.on_stage("agent-react-step-2", text("read it"));

    let first = ask(&gw, "reader", None, "read big1").await;
    let chat = chat_of(&first);
    assert!(of_type(&first, "context.compact").is_empty());
    let second = ask(&gw, "reader", Some(&chat), "read big2").await;
    assert!(of_type(&second, "context.compact").is_empty(), "1.2k of 1.6k: nothing to do yet");
    let third = ask(&gw, "reader", Some(&chat), "read big3").await;
    assert_eq!(third.last().unwrap()["type"], "run.complete");

    // The third run's second call would have carried three outputs: the oldest is pruned.
    let compacts = of_type(&third, "context.compact");
    assert_eq!(compacts.len(), 1, "{compacts:?}");
    let compact = compacts[0];
    assert_eq!((compact["level"].as_str(), compact["prunedResults"].as_u64()), (Some("prune"), Some(1)));
    assert_eq!(compact["budget"], usable);
    let (before, after) = (compact["tokensBefore"].as_u64().unwrap(), compact["tokensAfter"].as_u64().unwrap());
    assert!(before >= trigger && after < trigger, "{before} -> {after}");
    // Before the model call it was made for.
    let types: Vec<&str> = third.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let at = types.iter().position(|t| *t == "context.compact").unwrap();
    assert_eq!(types[at - 1], "tool.result");

    let sent = gw.fixture.requests().last().unwrap().body.clone();
    let results = contents(&sent, "tool");
    assert_eq!(results.len(), 3);
    assert!(results[0].starts_with("[tool output pruned: ") && results[0].ends_with(" tokens]"), "{}", results[0]);
    assert!(results[1].contains(&output(2)) && results[2].contains(&output(3)));
    assert!(request_tokens(&sent) < trigger, "the request sent fits: {}", request_tokens(&sent));

    // Nothing is lost: the history keeps every output, and the replay shows the compaction.
    let files = assert_chat_files_valid(&gw);
    assert_eq!(files.chats, std::slice::from_ref(&chat));
    let (status, detail) = gw.get_json(&format!("/api/ap/chat?chatId={chat}&includeRawMessages=true")).await;
    assert_eq!(status, 200);
    let raw = detail["data"]["rawMessages"].to_string();
    for n in 1..=3 {
        assert!(raw.contains(&output(n)), "output {n} stays in the history");
    }
    let replay = assert_chat_replayable(&gw, &chat).await;
    let replayed: Vec<&Value> = replay.iter().filter(|e| e["type"] == "context.compact").collect();
    assert_eq!(replayed.len(), 1);
    for key in ["level", "tokensBefore", "tokensAfter", "budget", "prunedResults", "runId"] {
        assert_eq!(replayed[0][key], compact[key], "{key}");
    }
}

/// Three runs of ~3,400 tokens each (long answers) in one chat; returns the chat id and the
/// run ids.
async fn long_chat(gw: &Gateway, agent: &str) -> (String, Vec<String>) {
    let mut runs = Vec::new();
    let mut chat: Option<String> = None;
    for n in 1..=3 {
        gw.fixture.on_message(&format!("question {n}"), text(&format!("answer {n}: {}", words(3_400))));
        let events = ask(gw, agent, chat.as_deref(), &format!("question {n}")).await;
        assert!(of_type(&events, "context.compact").is_empty(), "run {n} fits");
        chat.get_or_insert_with(|| chat_of(&events));
        runs.push(run_of(&events));
    }
    (chat.unwrap(), runs)
}

#[tokio::test]
async fn older_runs_are_summarised_once_and_the_next_run_starts_from_the_checkpoint() {
    let context = json!({"summaryMaxTokens": 500});
    let gw = Gateway::start(&[react_agent("talker", json!({}), context)], &[]).await;
    gw.fixture.on_stage("context-summary", text("SUMMARY: the user asked questions 1 and 2; both were answered."));
    let (chat, runs) = long_chat(&gw, "talker").await;

    // 10k of history: nothing to prune, so runs 1-2 are summarised (run 3 and this one kept).
    gw.fixture.on_message("question 4", text("answer 4"));
    let fourth = ask(&gw, "talker", Some(&chat), "question 4").await;
    assert_eq!(fourth.last().unwrap()["type"], "run.complete");
    let compacts = of_type(&fourth, "context.compact");
    assert_eq!(compacts.len(), 1, "{compacts:?}");
    let compact = compacts[0];
    assert_eq!(compact["level"], "summary");
    assert_eq!(compact["throughRunId"], runs[1].as_str());
    assert_eq!(compact["replacedMessages"], 4);
    assert!(compact["summary"].as_str().unwrap().starts_with("SUMMARY:"));
    assert!(compact["tokensAfter"].as_u64().unwrap() < TRIGGER);

    let requests = gw.fixture.requests();
    let summary_calls: Vec<_> = requests.iter().filter(|r| r.stage() == Some("context-summary")).collect();
    assert_eq!(summary_calls.len(), 1);
    // The summary call itself: the older turns as a transcript, no tools, capped output.
    let call = &summary_calls[0].body;
    assert!(call.get("tools").is_none());
    assert_eq!(call["max_tokens"], 500);
    let prompt = contents(call, "system").join("");
    assert!(prompt.contains("goals") && prompt.contains("decisions") && prompt.contains("errors"), "{prompt}");
    let transcript = contents(call, "user").join("");
    assert!(transcript.contains("User: question 1") && transcript.contains("Assistant: answer 2"));
    assert!(!transcript.contains("question 3"), "the kept run is not summarised");

    // The model call after it: the summary turn, then run 3, then the new message.
    let sent = &requests.last().unwrap().body;
    let users = contents(sent, "user");
    assert_eq!(users[0], agw_protocol::chat::SUMMARY_REQUEST);
    assert_eq!(users[1..], ["question 3", "question 4"]);
    assert!(contents(sent, "assistant")[0].starts_with("SUMMARY:"));
    assert!(request_tokens(sent) < TRIGGER);

    // The next run reuses the checkpoint: no second summary call, same window shape.
    gw.fixture.on_message("question 5", text("answer 5"));
    let fifth = ask(&gw, "talker", Some(&chat), "question 5").await;
    assert!(of_type(&fifth, "context.compact").is_empty());
    let requests = gw.fixture.requests();
    assert_eq!(requests.iter().filter(|r| r.stage() == Some("context-summary")).count(), 1, "one summary, not two");
    let users = contents(&requests.last().unwrap().body, "user");
    assert_eq!(users[0], agw_protocol::chat::SUMMARY_REQUEST);
    assert_eq!(users[1..], ["question 3", "question 4", "question 5"]);

    // The chat API still shows every run, and the replay the compaction.
    let replay = assert_chat_replayable(&gw, &chat).await;
    assert_eq!(replay.iter().filter(|e| e["type"] == "run.start").count(), 5);
    let replayed: Vec<&Value> = replay.iter().filter(|e| e["type"] == "context.compact").collect();
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["summary"], compact["summary"]);
    assert_chat_files_valid(&gw);
}

#[tokio::test]
async fn a_failed_summary_falls_back_to_dropping_older_turns_and_the_run_goes_on() {
    let gw = Gateway::start(&[react_agent("talker", json!({}), json!({}))], &[]).await;
    gw.fixture.on_stage("context-summary", Transcript::http_error(400, r#"{"error":{"message":"no"}}"#));
    let (chat, _) = long_chat(&gw, "talker").await;
    gw.fixture.on_message("question 4", text("answer 4"));
    let fourth = ask(&gw, "talker", Some(&chat), "question 4").await;
    assert_eq!(fourth.last().unwrap()["type"], "run.complete", "compaction never fails the run");
    let compacts = of_type(&fourth, "context.compact");
    assert_eq!(compacts.len(), 1, "{compacts:?}");
    assert_eq!(compacts[0]["level"], "truncate");
    assert!(compacts[0]["reason"].as_str().unwrap().contains("400"), "{}", compacts[0]);
    assert!(compacts[0].get("summary").is_none());
    let sent = gw.fixture.requests().last().unwrap().body.clone();
    let sent = &sent;
    let users = contents(sent, "user");
    assert_eq!(users[1..], ["question 3", "question 4"]);
    assert!(contents(sent, "assistant")[0].contains("4 earlier messages"));
    assert!(request_tokens(sent) < TRIGGER);
    // No checkpoint: the next run tries to summarise again.
    let lines = std::fs::read_to_string(gw.state.runs.chat_store().history_path(&chat).unwrap()).unwrap();
    assert!(!lines.contains(r#""_type":"checkpoint""#));
    assert_chat_files_valid(&gw);
}

#[tokio::test]
async fn compact_on_demand_writes_the_checkpoint_the_next_run_starts_from() {
    let gw = Gateway::start(&[react_agent("talker", json!({}), json!({}))], &[]).await;
    gw.fixture.on_stage("context-summary", text("SUMMARY: two questions so far."));
    let (chat, runs) = long_chat(&gw, "talker").await;
    let post = |body: Value| {
        let gw = &gw;
        async move {
            let resp = gw.client.post(format!("{}/api/ap/compact", gw.base)).json(&body).send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = post(json!({"chatId": chat})).await;
    assert_eq!(status, 200, "{body}");
    let data = &body["data"];
    assert_eq!((data["compacted"].as_bool(), data["throughRunId"].as_str()), (Some(true), Some(runs[1].as_str())));
    assert!(data["tokensAfter"].as_u64() < data["tokensBefore"].as_u64());

    gw.fixture.on_message("question 4", text("answer 4"));
    let fourth = ask(&gw, "talker", Some(&chat), "question 4").await;
    assert!(of_type(&fourth, "context.compact").is_empty(), "the run starts from the checkpoint");
    let users = contents(&gw.fixture.requests().last().unwrap().body, "user");
    assert_eq!(users[0], agw_protocol::chat::SUMMARY_REQUEST);
    assert_eq!(users[1..], ["question 3", "question 4"]);

    let (status, body) = post(json!({"chatId": "not-a-uuid"})).await;
    assert_eq!((status, body["msg"].as_str()), (400, Some("chatId must be a valid UUID")));
    let (status, _) = post(json!({"chatId": "0b8f6a52-7c1e-4d3a-9f2b-5e6d7c8b9a01"})).await;
    assert_eq!(status, 404);
    let (status, _) = post(json!({"chat": chat})).await;
    assert_eq!(status, 400);
}

/// An on-demand summary is a model call like a run's (issue 32): the daily quotas count it, and
/// once they are spent refuse the next one before it reaches the provider.
#[tokio::test]
async fn compact_on_demand_is_checked_and_counted_against_daily_quotas() {
    let gw =
        Gateway::start(&[react_agent("talker", json!({}), json!({}))], &[("AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY", "100")])
            .await;
    // The chat's runs report no usage; each summary uses 150 tokens.
    gw.fixture.on_stage("context-summary", Transcript::new().content("SUMMARY.").finish("stop").usage(100, 50).done());
    let (chat, _) = long_chat(&gw, "talker").await;
    let compact = || gw.client.post(format!("{}/api/ap/compact", gw.base)).json(&json!({"chatId": chat})).send();
    assert_eq!(compact().await.unwrap().status(), 200);
    let requests = gw.fixture.request_count();
    let refused = compact().await.unwrap();
    assert_eq!(refused.status(), 429, "the first summary spent the day");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(
        (body["code"].as_str(), body["quota"].as_str()),
        (Some("quota_exceeded"), Some("subject.tokens-per-day"))
    );
    assert_eq!(gw.fixture.request_count(), requests, "no summary call past the quota");
}

#[tokio::test]
async fn a_doom_loop_is_refused_once_and_ends_the_run_the_second_time() {
    let weather = json!({"backends":["mock_city_weather"]});
    let gw = Gateway::start(&[react_agent("loop", weather, json!({}))], &[]).await;
    let same = r#"{"city":"Shanghai","date":"2026-02-13"}"#;
    gw.fixture.set_default(tool_call("call_w", "mock_city_weather", same));
    let events = ask(&gw, "loop", None, "weather?").await;
    let results: Vec<&str> = of_type(&events, "tool.result").iter().map(|e| e["result"].as_str().unwrap()).collect();
    assert_eq!(results.len(), 4, "two executed, the third refused, the fourth refused and the run ends");
    assert!(results[0].contains("temperatureC") && results[1].contains("temperatureC"));
    for refused in &results[2..] {
        let value: Value = serde_json::from_str(refused).unwrap();
        assert_eq!((value["executed"].as_bool(), value["reason"].as_str()), (Some(false), Some("doom_loop")));
    }
    let last = events.last().unwrap();
    assert_eq!(last["type"], "run.error");
    assert_eq!(last["error"]["code"], "doom_loop");
    assert!(last["error"]["message"].as_str().unwrap().contains("mock_city_weather"));
    // The model saw the refusal before it repeated itself again.
    let step4 = gw.fixture.requests().into_iter().find(|r| r.stage() == Some("agent-react-step-4")).unwrap();
    assert!(contents(&step4.body, "tool").last().unwrap().contains("doom_loop"));
    assert_chat_files_valid(&gw);
}

#[tokio::test]
async fn a_model_that_changes_course_after_the_warning_finishes_normally() {
    let weather = json!({"backends":["mock_city_weather"]});
    let gw = Gateway::start(&[react_agent("loop", weather, json!({"doomLoopThreshold": 2}))], &[]).await;
    let same = r#"{"city":"Shanghai","date":"2026-02-13"}"#;
    for _ in 0..2 {
        gw.fixture.push(tool_call("call_w", "mock_city_weather", same));
    }
    gw.fixture.push(text("It is foggy in Shanghai."));
    let events = ask(&gw, "loop", None, "weather?").await;
    let results: Vec<&str> = of_type(&events, "tool.result").iter().map(|e| e["result"].as_str().unwrap()).collect();
    assert_eq!(results.len(), 2);
    assert!(results[1].contains("doom_loop"), "threshold 2: the second identical call is refused");
    assert_eq!(events.last().unwrap()["type"], "run.complete");

    // Off: the same calls all run.
    let gw = Gateway::start(
        &[react_agent("free", json!({"backends":["mock_city_weather"]}), json!({"doomLoopThreshold": 0}))],
        &[],
    )
    .await;
    for _ in 0..4 {
        gw.fixture.push(tool_call("call_w", "mock_city_weather", same));
    }
    gw.fixture.push(text("done"));
    let events = ask(&gw, "free", None, "weather?").await;
    assert!(of_type(&events, "tool.result").iter().all(|e| e["result"].as_str().unwrap().contains("temperatureC")));
    assert_eq!(events.last().unwrap()["type"], "run.complete");
}
