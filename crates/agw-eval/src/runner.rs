//! Plays cases against a running agw over its HTTP API (docs/evals.md): each case's turns in one
//! chat, the waits it meets answered with the case's answers, the last run's events kept. The
//! same code serves `agw eval run` in-process (it starts agw on a loopback port first) and
//! against a server.

use std::time::{Duration, Instant};

use agw_protocol::event::{Event, EventPayload};
use agw_protocol::sse::SseDecoder;
use serde_json::{Value, json};

use crate::evalset::{Case, EvalSet};

/// Where the runs go.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://127.0.0.1:8080`.
    pub base: String,
    /// A bearer token, when agw has auth on.
    pub token: Option<String>,
    /// Longest wait for the next bytes of a run's stream.
    pub idle_timeout: Duration,
}

/// Why a case could not be played (its run's own failure is in its events instead).
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    /// The request could not be made or read.
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    /// agw refused the query or an answer.
    #[error("{what}: HTTP {status}: {body}")]
    Refused {
        /// Which request.
        what: &'static str,
        /// Its status.
        status: u16,
        /// Its body.
        body: String,
    },
    /// The stream went quiet for longer than the target allows.
    #[error("no bytes from the run for {0:?}")]
    Idle(Duration),
    /// The run waits for something the case has no answer for.
    #[error("the run waits for {0}, and the case has no answer for it")]
    Unanswered(String),
    /// An event that does not parse.
    #[error("an event that does not parse: {0}")]
    Event(#[from] serde_json::Error),
}

/// One played case.
#[derive(Debug, Clone)]
pub struct Played {
    /// The last turn's run, every event.
    pub events: Vec<Event>,
    /// From sending the last turn to its run's end.
    pub elapsed: Duration,
}

/// Plays `case` of `set` against `target`.
///
/// # Errors
/// See [`PlayError`].
pub async fn play(client: &reqwest::Client, target: &Target, set: &EvalSet, case: &Case) -> Result<Played, PlayError> {
    let mut chat: Option<String> = None;
    let mut played = Played { events: Vec::new(), elapsed: Duration::ZERO };
    for turn in &case.turns {
        let mut answers = turn.answers.iter();
        let mut body = json!({"agentKey": set.agent_of(case), "message": turn.message});
        if let Some(chat) = &chat {
            body["chatId"] = json!(chat);
        }
        let started = Instant::now();
        let mut stream = RunStream::open(client, target, "the query", &body).await?;
        played.events.clear();
        // Frontend calls seen, with their tool names: their `tool.end` waits for an answer.
        let mut frontend: Vec<(String, String)> = Vec::new();
        while let Some(batch) = stream.next_batch().await? {
            for value in batch {
                if let Some((key, id, tool)) = waits(&value, &mut frontend) {
                    let answer = answers.next().filter(|a| a.tool == tool).ok_or(PlayError::Unanswered(tool))?;
                    let run_id = value["runId"]
                        .as_str()
                        .map(str::to_owned)
                        .or_else(|| run_start(&played.events).map(|start| start.run_id.clone()));
                    let submit = json!({"runId": run_id, key: id, "params": answer.params});
                    let sent = post(client, target, "/api/ap/submit", &submit).send().await?;
                    if !sent.status().is_success() {
                        let status = sent.status().as_u16();
                        return Err(PlayError::Refused {
                            what: "an answer",
                            status,
                            body: sent.text().await.unwrap_or_default(),
                        });
                    }
                }
                played.events.push(serde_json::from_value(value)?);
            }
        }
        played.elapsed = started.elapsed();
        chat = run_start(&played.events).map(|start| start.chat_id.clone());
    }
    Ok(played)
}

/// What `event` waits for: the submit key and id, and the tool's name.
fn waits(event: &Value, frontend: &mut Vec<(String, String)>) -> Option<(&'static str, String, String)> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    match event["type"].as_str()? {
        // A frontend tool (it has a viewport key) waits once its arguments are complete.
        "tool.start" if event["toolKey"].is_string() => {
            frontend.push((text(&event["toolId"]), text(&event["toolName"])));
            None
        }
        "tool.end" => {
            let (id, name) = frontend.iter().find(|(id, _)| event["toolId"] == id.as_str())?;
            Some(("toolId", id.clone(), name.clone()))
        }
        // An approval names its tool in its approval; a paused tool at the top.
        "awaiting.ask" => {
            let tool = event["toolName"].as_str().or_else(|| event["approvals"][0]["toolName"].as_str());
            Some(("awaitingId", text(&event["awaitingId"]), tool.unwrap_or_default().to_owned()))
        }
        _ => None,
    }
}

/// The `run.start` of a run's events.
fn run_start(events: &[Event]) -> Option<&agw_protocol::event::RunStart> {
    events.iter().find_map(|e| match &e.payload {
        EventPayload::RunStart(start) => Some(start),
        _ => None,
    })
}

/// A run's event stream from `POST /api/ap/query`, read a network chunk at a time.
struct RunStream {
    resp: reqwest::Response,
    decoder: SseDecoder,
    idle_timeout: Duration,
}

impl RunStream {
    async fn open(
        client: &reqwest::Client,
        target: &Target,
        what: &'static str,
        body: &Value,
    ) -> Result<Self, PlayError> {
        let resp = post(client, target, "/api/ap/query", body).send().await?;
        if !resp.status().is_success() {
            let status = resp.status().as_u16();
            return Err(PlayError::Refused { what, status, body: resp.text().await.unwrap_or_default() });
        }
        Ok(Self { resp, decoder: SseDecoder::new(), idle_timeout: target.idle_timeout })
    }

    /// The events the next chunk completed (heartbeats left out); `None` at the stream's end.
    async fn next_batch(&mut self) -> Result<Option<Vec<Value>>, PlayError> {
        let chunk = match tokio::time::timeout(self.idle_timeout, self.resp.chunk()).await {
            Ok(chunk) => chunk?,
            Err(_) => return Err(PlayError::Idle(self.idle_timeout)),
        };
        let Some(chunk) = chunk else { return Ok(None) };
        let mut frames = Vec::new();
        self.decoder.feed(&chunk, &mut frames);
        let events = frames.into_iter().filter(|f| !f.is_heartbeat()).map(|f| serde_json::from_str(&f.data));
        Ok(Some(events.collect::<Result<_, _>>()?))
    }
}

fn post(client: &reqwest::Client, target: &Target, path: &str, body: &Value) -> reqwest::RequestBuilder {
    let request = client.post(format!("{}{path}", target.base)).json(body);
    match &target.token {
        Some(token) => request.bearer_auth(token),
        None => request,
    }
}

/// Plays every case of `set` `repeat` times (at least once), `concurrency` runs at a time (at
/// least one), scoring each run; `progress` hears of each run as it ends.
pub async fn run_set(
    client: &reqwest::Client,
    target: &Target,
    set: &EvalSet,
    concurrency: usize,
    repeat: usize,
    progress: impl Fn(&Case, &crate::RunResult),
) -> crate::SetReport {
    use futures::StreamExt;
    let jobs = set.cases.iter().enumerate().flat_map(|(i, case)| std::iter::repeat_n((i, case), repeat.max(1)));
    let mut results = futures::stream::iter(jobs)
        .map(|(i, case)| async move {
            let result = match play(client, target, set, case).await {
                Ok(played) => {
                    let observed = crate::Observed::from_events(&played.events);
                    let score = crate::score(&case.expect, &observed);
                    let ms = u64::try_from(played.elapsed.as_millis()).unwrap_or(u64::MAX);
                    let mut result = crate::RunResult::scored(score, observed.tokens, observed.cost, ms);
                    if let Some(rubric) = &case.expect.judge {
                        match judge(client, target, rubric, case, &observed.answer).await {
                            Ok((score, reason)) => {
                                if score < rubric.threshold {
                                    result.pass = false;
                                    result.failures.push(format!(
                                        "the judge scored {score:.2} (at least {:.2} needed): {reason}",
                                        rubric.threshold
                                    ));
                                }
                                result.judge = Some(score);
                                result.judge_reason = Some(reason);
                            }
                            Err(error) => {
                                result.pass = false;
                                result.failures.push(format!("not judged: {error}"));
                            }
                        }
                    }
                    result
                }
                Err(error) => crate::RunResult::unplayed(error.to_string()),
            };
            (i, case, result)
        })
        .buffer_unordered(concurrency.max(1));
    let mut cases: Vec<crate::CaseResult> = set
        .cases
        .iter()
        .map(|case| crate::CaseResult {
            id: case.id.clone(),
            agent_key: set.agent_of(case).to_owned(),
            runs: Vec::new(),
        })
        .collect();
    while let Some((i, case, result)) = results.next().await {
        progress(case, &result);
        cases[i].runs.push(result);
    }
    crate::SetReport { name: set.name.clone(), threshold: set.thresholds.pass_rate, cases }
}

/// The judge's question: the rubric, the user's turns and the answer; its answer must be
/// `{score, reason}` (asked for with an output schema).
fn judge_query(judge: &crate::JudgeExpectation, case: &Case, answer: &str) -> Value {
    let turns: Vec<&str> = case.turns.iter().map(|t| t.message.as_str()).collect();
    let message = format!(
        "Judge an assistant's answer by this rubric.\n\nRubric:\n{}\n\nThe user wrote:\n{}\n\nThe answer:\n{}\n\n\
         Give a score from 0 (fails the rubric) to 1 (meets it fully) and the reason, in one or two sentences.",
        judge.rubric,
        turns.join("\n"),
        answer
    );
    json!({
        "agentKey": judge.agent_key,
        "message": message,
        "outputSchema": {
            "title": "judgement",
            "type": "object",
            "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}, "reason": {"type": "string"}},
            "required": ["score", "reason"]
        }
    })
}

/// Asks the case's judge about `answer`: its score and reason.
///
/// # Errors
/// The judge's run could not be made, or it gave no structured answer.
pub async fn judge(
    client: &reqwest::Client,
    target: &Target,
    judge: &crate::JudgeExpectation,
    case: &Case,
    answer: &str,
) -> Result<(f64, String), PlayError> {
    let mut stream = RunStream::open(client, target, "the judge's query", &judge_query(judge, case, answer)).await?;
    let mut output = None;
    while let Some(batch) = stream.next_batch().await? {
        for event in batch {
            if event["type"] == "run.complete" {
                output = Some(event["output"].clone());
            }
        }
    }
    let output = output.unwrap_or(Value::Null);
    match (output["score"].as_f64(), output["reason"].as_str()) {
        (Some(score), Some(reason)) => Ok((score.clamp(0.0, 1.0), reason.to_owned())),
        _ => Err(PlayError::Unanswered(format!("the judge's score (it answered {output})"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judge_gets_the_rubric_the_turns_and_the_answer_and_must_answer_score_and_reason() {
        let case: Case = serde_json::from_value(
            json!({"id": "c", "turns": [{"message": "Weather?"}, {"message": "And tomorrow?"}]}),
        )
        .unwrap();
        let judge =
            crate::JudgeExpectation { agent_key: "judge".into(), rubric: "Names the city.".into(), threshold: 0.5 };
        let query = judge_query(&judge, &case, "Sunny in Paris.");
        assert_eq!(query["agentKey"], "judge");
        let message = query["message"].as_str().unwrap();
        assert!(
            message.contains("Names the city.")
                && message.contains("Weather?\nAnd tomorrow?")
                && message.contains("Sunny in Paris.")
        );
        assert_eq!(query["outputSchema"]["required"], json!(["score", "reason"]));
        let mut frontend = Vec::new();
        let ask = json!({"type": "awaiting.ask", "awaitingId": "a1", "approvals": [{"toolName": "t"}]});
        assert_eq!(waits(&ask, &mut frontend), Some(("awaitingId", "a1".into(), "t".into())));
        let start = json!({"type": "tool.start", "toolId": "c1", "toolName": "form", "toolKey": "form"});
        assert_eq!(waits(&start, &mut frontend), None);
        assert_eq!(
            waits(&json!({"type": "tool.end", "toolId": "c1"}), &mut frontend),
            Some(("toolId", "c1".into(), "form".into()))
        );
        assert_eq!(waits(&json!({"type": "tool.end", "toolId": "backend"}), &mut frontend), None);
    }
}
