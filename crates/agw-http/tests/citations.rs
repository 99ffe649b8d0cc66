//! Citations on the native stream over loopback HTTP (issue 35, docs/protocols.md "Citations"):
//! an agent with a citable tool is told how to cite, the model's `[cite:<id>]` markers leave the
//! streamed text (also when a marker is split across provider chunks), each known id becomes a
//! `content.citation` right after the text it follows, unknown ids are removed and counted, the
//! history keeps the citations for replays, and the next turn's model context has no markers.

mod common;

use agw_testkit::Transcript;
use common::{Gateway, assert_chat_files_valid, assert_chat_replayable};
use serde_json::{Value, json};

fn agents() -> Vec<(String, String)> {
    let model = json!({"providerKey": "fixture", "model": "m"});
    let cited = json!({"key": "cited", "mode": "REACT", "modelConfig": model,
        "toolConfig": {"backends": ["mock_chat_messages"]},
        "react": {"systemPrompt": "CITED: you summarise the chat.", "maxSteps": 3}});
    let custom = json!({"key": "custom", "mode": "REACT", "modelConfig": model,
        "toolConfig": {"backends": ["mock_chat_messages"]},
        "citations": {"marker": "【{id}】", "instruction": "Cite like {marker}.\n{fields}"},
        "react": {"systemPrompt": "CUSTOM", "maxSteps": 3}});
    let off = json!({"key": "off", "mode": "REACT", "modelConfig": model,
        "toolConfig": {"backends": ["mock_chat_messages"]}, "citations": {"enabled": false},
        "react": {"systemPrompt": "OFF", "maxSteps": 3}});
    let plain = json!({"key": "plain", "mode": "REACT", "modelConfig": model,
        "toolConfig": {"backends": ["mock_city_weather"]}, "react": {"systemPrompt": "PLAIN", "maxSteps": 3}});
    [("cited", cited), ("custom", custom), ("off", off), ("plain", plain)]
        .into_iter()
        .map(|(key, text)| (format!("{key}.json"), text.to_string()))
        .collect()
}

fn system(body: &Value) -> &str {
    body["messages"][0]["content"].as_str().unwrap_or("")
}

/// First turn: read the chat; second turn: answer with `chunks`.
fn script(gw: &Gateway, chunks: &'static [&'static str]) {
    gw.fixture.set_responder(move |_, body| {
        let last = body["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or(Value::Null);
        Some(if last["role"] == "tool" {
            Transcript::openai_text(chunks)
        } else {
            Transcript::openai_tool_call("call_m", "mock_chat_messages", &["{}"])
        })
    });
}

fn streamed_text(events: &[&Value]) -> String {
    events.iter().filter(|e| e["type"] == "content.delta").map(|e| e["delta"].as_str().unwrap()).collect()
}

#[tokio::test]
async fn markers_become_citations_right_after_their_text_and_the_model_was_told_how_to_cite() {
    let gw = Gateway::start(&agents(), &[]).await;
    script(&gw, &["Coral reported the translation bug [ci", "te:361]. Mandy", " said voice input is off[cite:401]."]);
    let stream = gw.run(&json!({"agentKey": "cited", "message": "What did the team report?"})).await;
    assert_eq!(stream.last()["type"], "run.complete", "{:?}", stream.types());
    let events = stream.events();
    assert_eq!(streamed_text(&events), "Coral reported the translation bug . Mandy said voice input is off.");

    let citations = stream.of_type("content.citation");
    assert_eq!(citations.len(), 2, "{:?}", stream.types());
    let first = citations[0];
    let content_id = stream.of_type("content.start").last().unwrap()["contentId"].clone();
    assert_eq!(first["contentId"], content_id);
    assert_eq!(first["index"], 0);
    assert_eq!(first["record"]["messageId"], "361");
    assert_eq!(first["record"]["senderName"], "Coral");
    assert_eq!(first["record"]["senderId"], "123456");
    assert_eq!(first["record"]["timestamp"], 1_736_985_600_000_i64);
    assert_eq!(first["record"]["chatId"], "11200463399");
    assert_eq!(first["record"]["content"], "The translation in the input box cannot be turned off");
    assert_eq!(first["offset"], "Coral reported the translation bug ".len());
    assert_eq!(first["toolId"], stream.of_type("tool.start")[0]["toolId"]);
    assert_eq!((citations[1]["index"].as_i64(), citations[1]["record"]["messageId"].as_str()), (Some(1), Some("401")));
    // Each citation follows the delta whose text it belongs to: the text before it is shown.
    let at = |e: &Value| events.iter().position(|x| *x == e).unwrap();
    let before: String = events[..at(first)]
        .iter()
        .filter(|e| e["type"] == "content.delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(before, "Coral reported the translation bug ");
    // The key order of the contract.
    let keys: Vec<&str> = first.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["seq", "type", "timestamp", "contentId", "index", "offset", "toolId", "record"]);

    // The model was told how to cite, and where the ids are.
    let answer_request = gw.fixture.requests().into_iter().last().unwrap().body;
    let prompt = system(&answer_request);
    assert!(prompt.starts_with("CITED"), "{prompt}");
    assert!(prompt.contains("[cite:<id>]"), "{prompt}");
    assert!(prompt.contains("mock_chat_messages: the id is the `messageId` field of each record in `messages`"));

    // History keeps the citations; the replay shows them after the answer's snapshot.
    let chat_id = stream.of_type("run.start")[0]["chatId"].as_str().unwrap().to_owned();
    let replay = assert_chat_replayable(&gw, &chat_id).await;
    let snapshot = replay.iter().position(|e| e["type"] == "content.snapshot" && e["contentId"] == content_id).unwrap();
    assert_eq!(replay[snapshot]["text"], "Coral reported the translation bug . Mandy said voice input is off.");
    let replayed: Vec<&Value> = replay.iter().filter(|e| e["type"] == "content.citation").collect();
    assert_eq!(replayed.len(), 2);
    for (live, again) in citations.iter().zip(&replayed) {
        for key in ["contentId", "index", "offset", "toolId", "record"] {
            assert_eq!(live[key], again[key], "{key}");
        }
    }
    assert!(replay.iter().position(|e| *e == *replayed[0]).unwrap() > snapshot);
    assert_chat_files_valid(&gw);

    // The next turn's model context holds the answer without markers.
    gw.fixture.forget_requests();
    script(&gw, &["Nothing new."]);
    gw.run(&json!({"agentKey": "cited", "message": "Anything else?", "chatId": chat_id})).await;
    let next = gw.fixture.requests()[0].body.to_string();
    assert!(next.contains("Mandy said voice input is off."), "{next}");
    assert!(!next.contains("[cite:361]") && !next.contains("[cite:401]"), "{next}");
}

#[tokio::test]
async fn unknown_ids_are_removed_and_counted_and_non_markers_stay_text() {
    // The binary installs the recorder at start-up; this test binary does it here.
    agw_http::metrics::install();
    let gw = Gateway::start(&agents(), &[]).await;
    script(&gw, &["See [cite:999] and [cite: 362 , 431]", " and [not a cite] [cite:line\nbreak]."]);
    let stream = gw.run(&json!({"agentKey": "cited", "message": "Report"})).await;
    assert_eq!(stream.last()["type"], "run.complete");
    assert_eq!(streamed_text(&stream.events()), "See  and  and [not a cite] [cite:line\nbreak].");
    let ids: Vec<&str> =
        stream.of_type("content.citation").iter().map(|e| e["record"]["messageId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["362", "431"], "one marker may cite several records");
    let metrics = gw.client.get(format!("{}/metrics", gw.base)).send().await.unwrap().text().await.unwrap();
    let unknown = metrics
        .lines()
        .find(|l| l.starts_with("agw_citations_unknown_total") && l.contains("agent=\"cited\""))
        .unwrap_or_else(|| panic!("no unknown-citation counter in\n{metrics}"));
    assert!(unknown.ends_with(" 1"), "{unknown}");
}

#[tokio::test]
async fn an_agent_sets_its_own_marker_or_turns_citing_off_and_others_are_untouched() {
    let gw = Gateway::start(&agents(), &[]).await;
    script(&gw, &["Coral 【36", "1】 and [cite:401]."]);
    let stream = gw.run(&json!({"agentKey": "custom", "message": "Report"})).await;
    assert_eq!(streamed_text(&stream.events()), "Coral  and [cite:401].");
    assert_eq!(stream.of_type("content.citation")[0]["record"]["messageId"], "361");
    let prompt = system(&gw.fixture.requests().last().unwrap().body).to_owned();
    assert!(
        prompt.ends_with(
            "Cite like 【<id>】.\n- mock_chat_messages: the id is the `messageId` field of each record in `messages`"
        ),
        "{prompt}"
    );

    for agent in ["off", "plain"] {
        gw.fixture.forget_requests();
        script(&gw, &["Coral [cite:361]."]);
        let stream = gw.run(&json!({"agentKey": agent, "message": "Report"})).await;
        assert_eq!(streamed_text(&stream.events()), "Coral [cite:361].", "{agent}");
        assert!(stream.of_type("content.citation").is_empty());
        for request in gw.fixture.requests() {
            assert!(!system(&request.body).contains("<id>"), "{agent}: no instruction");
        }
    }
}

/// A run that waits for an approval across a restart still cites what its tools returned before
/// the wait: the records are read again from the stored results when the run continues.
#[tokio::test]
async fn a_run_continued_after_a_restart_cites_records_found_before_its_wait() {
    let model = json!({"providerKey": "fixture", "model": "m"});
    let guarded = json!({"key": "guarded", "mode": "REACT", "modelConfig": model,
        "toolConfig": {"backends": ["mock_chat_messages", "mock_city_weather"],
            "approvals": {"mock_city_weather": "ask"}},
        "react": {"systemPrompt": "GUARDED", "maxSteps": 4}})
    .to_string();
    let agents = [("guarded.json".to_owned(), guarded)];
    // Read the chat, then ask for the weather (an approval), then answer citing the chat.
    let respond = |_: Option<&str>, body: &Value| {
        let tools = body["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").count();
        Some(match tools {
            0 => Transcript::openai_tool_call("call_m", "mock_chat_messages", &["{}"]),
            1 => Transcript::openai_tool_call("call_w", "mock_city_weather", &["{\"city\":\"Rome\"}"]),
            _ => Transcript::openai_text(&["Coral reported it[cite:361]."]),
        })
    };
    let first = Gateway::start(&agents, &[]).await;
    first.fixture.set_responder(respond);
    let mut live =
        common::LiveStream::new(first.post_query(&json!({"agentKey": "guarded", "message": "Report"})).await);
    let ask = live.until(|e| e["type"] == "awaiting.ask").await;
    let run_id = ask["runId"].as_str().map(str::to_owned).unwrap_or_else(|| {
        live.seen.iter().find(|e| e["type"] == "run.start").unwrap()["runId"].as_str().unwrap().to_owned()
    });
    for _ in 0..200 {
        if first.waiting_runs().await.iter().any(|(a, b)| *a == run_id || *b == run_id) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(first.waiting_runs().await.iter().any(|(a, b)| *a == run_id || *b == run_id), "the wait was recorded");
    drop(live);

    first.state.runs.tracker().stop_all();
    let store = first.store_env();
    let vars: Vec<(&str, &str)> = store.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let second = Gateway::start(&agents, &vars).await;
    second.fixture.set_responder(respond);
    let url = format!("{}/api/ap/attach?runId={run_id}&lastSeq={}", second.base, ask["seq"]);
    let mut attached = common::LiveStream::new(second.client.get(url).send().await.unwrap());
    attached.until(|e| e["type"] == "awaiting.ask").await;
    let submit = json!({"runId": run_id, "awaitingId": "call_w", "params": {"decision": "once"}});
    let resp = second.client.post(format!("{}/api/ap/submit", second.base)).json(&submit).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let rest = attached.rest().await;
    assert_eq!(rest.last().unwrap()["type"], "run.complete", "{rest:?}");
    let cited: Vec<&Value> = rest.iter().filter(|e| e["type"] == "content.citation").collect();
    assert_eq!(cited.len(), 1, "{rest:?}");
    assert_eq!(cited[0]["record"]["messageId"], "361");
    assert_eq!(cited[0]["toolId"], "call_m", "the record of the call before the wait");
    let text: String =
        rest.iter().filter(|e| e["type"] == "content.delta").map(|e| e["delta"].as_str().unwrap()).collect();
    assert_eq!(text, "Coral reported it.");
}
