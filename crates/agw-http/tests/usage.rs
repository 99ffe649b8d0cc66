//! What runs cost (issue 18, first part) over loopback HTTP with the fixture provider: usage
//! summed over every model call of a run on its terminal event, priced with configured prices,
//! kept in history, replayed, totalled per chat; `budget.maxTokens` / `maxCost`; quotas per
//! owner and per agent, at admission and before every model call (issue 32).

mod common;

use agw_testkit::Transcript;
use common::{Gateway, assert_chat_files_valid, assert_chat_replayable};
use serde_json::{Value, json};

/// input $2, cached input $0.5, output $8 per million tokens for every fixture model.
const PRICES: (&str, &str) = ("AGENT_PROVIDERS_FIXTURE_PRICES", r#"{"*":{"input":2,"output":8,"cached-input":0.5}}"#);

fn react_agent(key: &str, budget: &str) -> (String, String) {
    let text = format!(
        r#"{{"key":"{key}","mode":"REACT","modelConfig":{{"providerKey":"fixture","model":"m"}},{budget}
            "toolConfig":{{"backends":["mock_city_weather"]}},
            "react":{{"systemPrompt":"You are a test agent.","maxSteps":4}}}}"#
    );
    (format!("{key}.json"), text)
}

/// A weather call, then an answer, with these usages.
fn script(gw: &Gateway, first: (u64, u64), second: (u64, u64)) {
    weather_call(gw, first);
    gw.fixture.push(Transcript::new().content("Foggy.").finish("stop").usage(second.0, second.1).done());
}

/// A weather call with this usage.
fn weather_call(gw: &Gateway, (input, output): (u64, u64)) {
    gw.fixture.push(
        Transcript::new()
            .tool_call_start(0, "call_w", "mock_city_weather")
            .tool_args(0, r#"{"city":"Shanghai","date":"2026-02-13"}"#)
            .finish("tool_calls")
            .usage(input, output)
            .done(),
    );
}

async fn ask(gw: &Gateway, agent: &str, chat: Option<&str>) -> Vec<Value> {
    let mut body = json!({"agentKey": agent, "message": "weather?"});
    if let Some(chat) = chat {
        body["chatId"] = json!(chat);
    }
    gw.run(&body).await.events().into_iter().cloned().collect()
}

#[tokio::test]
async fn a_runs_usage_and_cost_are_on_run_complete_in_history_and_summed_per_chat() {
    let gw = Gateway::start(&[react_agent("w", "")], &[PRICES]).await;
    script(&gw, (1_000, 100), (1_200, 50));
    let first = ask(&gw, "w", None).await;
    let done = first.last().unwrap();
    assert_eq!(done["type"], "run.complete");
    assert_eq!(
        done["usage"],
        json!({"inputTokens": 2200, "outputTokens": 150, "totalTokens": 2350, "calls": 2,
               "byModel": [{"provider": "fixture", "model": "m", "calls": 2, "inputTokens": 2200, "outputTokens": 150}]})
    );
    // (2,200 × 2 + 150 × 8) / 1e6
    assert_eq!(done["cost"], json!({"currency": "USD", "amount": 0.0056}));

    let chat = first.iter().find(|e| e["type"] == "run.start").unwrap()["chatId"].as_str().unwrap().to_owned();
    script(&gw, (3_000, 10), (3_100, 20));
    let second = ask(&gw, "w", Some(&chat)).await;
    assert_eq!(second.last().unwrap()["usage"]["totalTokens"], 6_130);

    // The replay repeats each run's totals; the chat shows the sum.
    let replay = assert_chat_replayable(&gw, &chat).await;
    let completes: Vec<&Value> = replay.iter().filter(|e| e["type"] == "run.complete").collect();
    assert_eq!(completes[0]["usage"], done["usage"]);
    assert_eq!(completes[0]["cost"], done["cost"]);
    assert_eq!(completes[1]["usage"]["totalTokens"], 6_130);
    let (status, detail) = gw.get_json(&format!("/api/ap/chat?chatId={chat}")).await;
    assert_eq!(status, 200);
    let data = &detail["data"];
    assert_eq!((data["usage"]["totalTokens"].as_u64(), data["usage"]["calls"].as_u64()), (Some(8_480), Some(4)));
    // 0.0056 + (6,100 × 2 + 30 × 8) / 1e6
    assert_eq!(data["cost"], json!({"currency": "USD", "amount": 0.01804}));
    // The chat list carries the same totals (kept in the chat index as runs end).
    let (status, list) = gw.get_json("/api/ap/chats").await;
    assert_eq!(status, 200);
    let listed = list["data"].as_array().unwrap().iter().find(|c| c["chatId"] == chat.as_str()).unwrap();
    assert_eq!(listed["usage"], data["usage"]);
    assert_eq!(listed["cost"], data["cost"]);
    assert_chat_files_valid(&gw);
}

#[tokio::test]
async fn without_prices_there_is_usage_but_never_a_cost() {
    let gw = Gateway::start(&[react_agent("w", "")], &[]).await;
    script(&gw, (1_000, 100), (1_200, 50));
    let events = ask(&gw, "w", None).await;
    let done = events.last().unwrap();
    assert_eq!(done["usage"]["totalTokens"], 2_350);
    assert!(done.get("cost").is_none(), "{done}");
    let (_, list) = gw.get_json("/api/ap/chats").await;
    assert_eq!(list["data"][0]["usage"]["totalTokens"], 2_350);
    assert!(list["data"][0].get("cost").is_none(), "{list}");
}

#[tokio::test]
async fn max_tokens_and_max_cost_end_the_run_before_the_next_model_call() {
    let gw = Gateway::start(
        &[
            react_agent("tokens", r#""budget":{"maxTokens":1000},"#),
            react_agent("money", r#""budget":{"maxCost":0.002},"#),
        ],
        &[PRICES],
    )
    .await;
    // Only the first call happens: the budget stops the run before the second.
    weather_call(&gw, (1_000, 100));
    let events = ask(&gw, "tokens", None).await;
    let error = events.last().unwrap();
    assert_eq!(error["type"], "run.error");
    assert_eq!(error["error"]["code"], "budget_exceeded");
    assert!(error["error"]["message"].as_str().unwrap().contains("maxTokens=1000 (used 1100)"), "{error}");
    assert_eq!(error["usage"]["totalTokens"], 1_100, "run.error carries what was used");
    assert_eq!(events.iter().filter(|e| e["type"] == "tool.result").count(), 1, "the tool round finished first");
    assert_eq!(gw.fixture.request_count(), 1, "no model call past the limit");

    gw.fixture.forget_requests();
    weather_call(&gw, (1_000, 100));
    let events = ask(&gw, "money", None).await;
    let error = events.last().unwrap();
    assert_eq!(error["error"]["code"], "budget_exceeded");
    // (1,000 × 2 + 100 × 8) / 1e6 = 0.0028
    assert!(error["error"]["message"].as_str().unwrap().contains("maxCost=0.002 USD (spent 0.0028)"), "{error}");
    assert_eq!(error["cost"], json!({"currency": "USD", "amount": 0.0028}));
    assert_eq!(gw.fixture.request_count(), 1);
}

#[tokio::test]
async fn bad_prices_and_budgets_are_clear_errors() {
    let bad = agw_http::Settings::load(None, [(PRICES.0.to_owned(), r#"{"m":{"input":-1,"output":2}}"#.to_owned())]);
    let message = bad.expect_err("negative price").to_string();
    assert!(message.contains("fixture") && message.contains("m.input must be a non-negative number"), "{message}");
    let missing = agw_http::Settings::load(None, [(PRICES.0.to_owned(), r#"{"m":{"input":1}}"#.to_owned())]);
    assert!(missing.expect_err("no output price").to_string().contains("needs both input and output"));
    let text = react_agent("x", r#""budget":{"maxCost":-1},"#).1;
    let err = agw_modes::definition::AgentDefinition::from_json("x.json", &text).expect_err("negative maxCost");
    assert!(err.to_string().contains("budget.maxCost"), "{err}");
}

async fn post_query(gw: &Gateway, agent: &str) -> reqwest::Response {
    gw.post_query(&json!({"agentKey": agent, "message": "weather?"})).await
}

async fn refused(resp: reqwest::Response, quota: &str) -> u64 {
    assert_eq!(resp.status(), 429);
    let retry_after: u64 = resp.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    let body: Value = resp.json().await.unwrap();
    assert_eq!((body["code"].as_str(), body["quota"].as_str()), (Some("quota_exceeded"), Some(quota)), "{body}");
    assert_eq!(body["retryAfter"], retry_after);
    retry_after
}

#[tokio::test]
async fn concurrent_requests_never_start_more_runs_than_the_quota_allows() {
    let gw = Gateway::start(&[react_agent("w", "")], &[("AGW_QUOTAS_SUBJECT_CONCURRENT_RUNS", "2")]).await;
    gw.fixture.set_default(Transcript::openai_text(&["slow ", "answer"]).with_chunk_delay_ms(300));
    let responses = futures::future::join_all((0..6).map(|_| post_query(&gw, "w"))).await;
    let (accepted, rejected): (Vec<_>, Vec<_>) = responses.into_iter().partition(|r| r.status() == 200);
    assert_eq!((accepted.len(), rejected.len()), (2, 4));
    for resp in rejected {
        assert!(refused(resp, "subject.concurrent-runs").await >= 1);
    }
    for resp in accepted {
        let stream = common::read_stream(resp).await;
        assert_eq!(stream.last()["type"], "run.complete");
    }
    // Finished runs free their places (the run task ends right after its terminal event).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let resp = post_query(&gw, "w").await;
        if resp.status() == 200 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "a place should free up");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn runs_per_minute_count_per_agent() {
    let gw =
        Gateway::start(&[react_agent("a", ""), react_agent("b", "")], &[("AGW_QUOTAS_AGENT_RUNS_PER_MINUTE", "2")])
            .await;
    gw.fixture.set_default(Transcript::openai_text(&["ok"]));
    for _ in 0..2 {
        assert_eq!(common::read_stream(post_query(&gw, "a").await).await.last()["type"], "run.complete");
    }
    let wait = refused(post_query(&gw, "a").await, "agent.runs-per-minute").await;
    assert!((1..=60).contains(&wait), "{wait}");
    assert_eq!(post_query(&gw, "b").await.status(), 200, "another agent has its own count");
}

// -- daily quotas are checked before every model call (issue 32) ------------------------------

/// The `run.error` of a run a daily quota stopped before a model call.
fn assert_quota_error(event: &Value, quota_and_key: &str, limit: &str) {
    assert_eq!(event["type"], "run.error", "{event}");
    assert_eq!(event["error"]["code"], "quota_exceeded", "{event}");
    assert_eq!(event["error"]["retriable"], true, "{event}");
    let message = event["error"]["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("quota {quota_and_key} reached (limit {limit}); retry in ")), "{message}");
}

#[tokio::test]
async fn a_run_whose_next_call_a_daily_quota_refuses_ends_before_it_with_no_provider_request() {
    // Tokens, per subject: the first call uses 1,100 of 1,000, so the second is never sent.
    let gw = Gateway::start(&[react_agent("w", "")], &[("AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY", "1000")]).await;
    script(&gw, (1_000, 100), (1_200, 50));
    let events = ask(&gw, "w", None).await;
    let error = events.last().unwrap();
    assert_quota_error(error, "subject.tokens-per-day of anonymous", "1000");
    assert_eq!(error["usage"]["totalTokens"], 1_100, "run.error carries what was used");
    assert_eq!(events.iter().filter(|e| e["type"] == "tool.result").count(), 1, "the tool round finished first");
    assert_eq!(gw.fixture.request_count(), 1, "no provider request past the quota");
    // The next run is refused at admission, before any provider call.
    refused(post_query(&gw, "w").await, "subject.tokens-per-day").await;
    assert_eq!(gw.fixture.request_count(), 1);

    // Cost, per agent: the first call costs 0.0028 of 0.002.
    let gw = Gateway::start(&[react_agent("w", "")], &[PRICES, ("AGW_QUOTAS_AGENT_COST_PER_DAY", "0.002")]).await;
    script(&gw, (1_000, 100), (1_200, 50));
    let events = ask(&gw, "w", None).await;
    let error = events.last().unwrap();
    assert_quota_error(error, "agent.cost-per-day of w", "0.002");
    assert_eq!(error["cost"], json!({"currency": "USD", "amount": 0.0028}));
    assert_eq!(gw.fixture.request_count(), 1, "no provider request past the quota");
    refused(post_query(&gw, "w").await, "agent.cost-per-day").await;
    assert_eq!(gw.fixture.request_count(), 1);
}

/// Every model call is a weather call using 20 tokens: a REACT run goes on calling until
/// something stops it.
fn every_call_uses_20_tokens(gw: &Gateway) {
    gw.fixture.set_default(
        Transcript::new()
            .tool_call_start(0, "call_w", "mock_city_weather")
            .tool_args(0, r#"{"city":"Shanghai","date":"2026-02-13"}"#)
            .finish("tool_calls")
            .usage(10, 10)
            .done()
            .with_chunk_delay_ms(10),
    );
}

/// Sends `n` queries at once; returns the streams of those admitted and how many `quota`
/// refused.
async fn at_once(gw: &Gateway, n: usize, quota: &str) -> (Vec<common::Stream>, usize) {
    let responses = futures::future::join_all((0..n).map(|_| post_query(gw, "w"))).await;
    let (mut admitted, mut refusals) = (Vec::new(), 0);
    for resp in responses {
        if resp.status() == 429 {
            refused(resp, quota).await;
            refusals += 1;
        } else {
            assert_eq!(resp.status(), 200);
            admitted.push(resp);
        }
    }
    (futures::future::join_all(admitted.into_iter().map(common::read_stream)).await, refusals)
}

#[tokio::test]
async fn parallel_runs_pass_a_daily_token_quota_by_at_most_one_call_each() {
    // No reservation: every run is admitted while the day's spend is below 30 tokens; what
    // bounds them is the check before each call. Unchecked, 8 runs spent ~1,040 (issue 32).
    let gw = Gateway::start(
        &[react_agent("w", "")],
        &[("AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY", "30"), ("AGW_QUOTAS_RESERVE_TOKENS", "0")],
    )
    .await;
    every_call_uses_20_tokens(&gw);
    let (runs, refusals) = at_once(&gw, 8, "subject.tokens-per-day").await;
    assert_eq!(runs.len() + refusals, 8);
    let requests = gw.fixture.request_count() as u64;
    let spent = requests * 20;
    let bound = 30 + runs.len() as u64 * 20;
    assert!(spent <= bound, "{requests} calls spent {spent} tokens; {} runs in flight allow {bound}", runs.len());
    let reported: u64 = runs.iter().map(|run| run.last()["usage"]["calls"].as_u64().unwrap_or(0)).sum();
    assert_eq!(reported, requests, "every provider request is a call some run counted; refused calls sent none");
    for run in &runs {
        assert_quota_error(run.last(), "subject.tokens-per-day of anonymous", "30");
    }
    refused(post_query(&gw, "w").await, "subject.tokens-per-day").await;
    assert_eq!(gw.fixture.request_count() as u64, requests, "a refused run calls no provider");
}

#[tokio::test]
async fn admission_reserves_tokens_so_parallel_runs_cannot_all_start_on_a_small_daily_quota() {
    // The default reservation (1,000 tokens) is more than the day's 30: while one run holds
    // it, or once it spent the day, no other run starts.
    let gw = Gateway::start(&[react_agent("w", "")], &[("AGW_QUOTAS_SUBJECT_TOKENS_PER_DAY", "30")]).await;
    every_call_uses_20_tokens(&gw);
    let (runs, refusals) = at_once(&gw, 8, "subject.tokens-per-day").await;
    assert_eq!((runs.len(), refusals), (1, 7));
    // Its second call was allowed at 20 of 30, its third refused before it was sent: one call
    // past the quota for the one run in flight.
    let end = runs[0].last();
    assert_quota_error(end, "subject.tokens-per-day of anonymous", "30");
    assert_eq!((end["usage"]["totalTokens"].as_u64(), gw.fixture.request_count()), (Some(40), 2));
}
