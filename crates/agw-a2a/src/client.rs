//! Talking to one remote A2A agent: its card, a message (streamed or not), a cancel.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::config::RemoteAgentConfig;

/// Most bytes of a card read.
const MAX_CARD_BYTES: usize = 256 * 1024;
/// Most bytes of one answer read (the whole stream, or a blocking answer).
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// How long a card read stays good.
const CARD_TTL: Duration = Duration::from_secs(300);
/// The protocol version agw speaks.
const VERSION: &str = "1.0";

/// What a card says that a call needs.
#[derive(Debug, Clone)]
pub(crate) struct Card {
    pub name: String,
    pub description: String,
    pub skills: Vec<(String, String)>,
    pub streaming: bool,
    /// The JSON-RPC endpoint: the card's, when on the declared origin, else the declared URL.
    pub endpoint: reqwest::Url,
}

/// How a remote task stands after a call.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    pub task_id: String,
    pub context_id: String,
    /// `completed`, `input_required`, `failed`, `canceled`, `rejected`, `working`, …
    pub state: String,
    /// The task's artifacts' text (or a direct message's).
    pub answer: String,
    /// What the agent said with its status (why it failed, what it asks for).
    pub status_text: Option<String>,
    /// The data parts of its status message (what an input-required task asks, for clients).
    pub asked: Option<Value>,
}

/// Why a call to a remote agent failed (its text is the reason, for the model and the log).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CallError(pub String);

/// One remote agent's connection.
pub(crate) struct Remote {
    pub config: RemoteAgentConfig,
    http: reqwest::Client,
    card: tokio::sync::Mutex<Option<(Instant, Card)>>,
}

impl Remote {
    pub(crate) fn new(config: RemoteAgentConfig) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        Remote { config, http, card: tokio::sync::Mutex::new(None) }
    }

    fn request(&self, method: reqwest::Method, url: reqwest::Url) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, url).header("A2A-Version", VERSION).timeout(self.config.timeout);
        if let Some(token) = &self.config.token {
            request = request.bearer_auth(token);
        }
        request
    }

    /// The agent's card (read at most every [`CARD_TTL`]).
    pub(crate) async fn card(&self) -> Result<Card, CallError> {
        self.read_card().await.map_err(CallError)
    }

    async fn read_card(&self) -> Result<Card, String> {
        let mut cached = self.card.lock().await;
        if let Some((at, card)) = cached.as_ref()
            && at.elapsed() < CARD_TTL
        {
            return Ok(card.clone());
        }
        let url = match &self.config.card_url {
            Some(url) => url.clone(),
            None => {
                let base = self.config.url.as_str().trim_end_matches('/');
                reqwest::Url::parse(&format!("{base}/.well-known/agent-card.json")).map_err(|e| e.to_string())?
            }
        };
        let response = self.request(reqwest::Method::GET, url).send().await.map_err(|e| format!("card: {e}"))?;
        if !response.status().is_success() {
            return Err(format!("card: HTTP {}", response.status()));
        }
        let card: Value = serde_json::from_slice(&read_capped(response, MAX_CARD_BYTES).await?)
            .map_err(|e| format!("card: not JSON: {e}"))?;
        let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();
        let endpoint = card
            .get("supportedInterfaces")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|i| text(i, "protocolBinding") == "JSONRPC" && text(i, "protocolVersion").starts_with("1."))
            .filter_map(|i| reqwest::Url::parse(&text(i, "url")).ok())
            // The token goes to the declared origin only.
            .find(|url| url.origin() == self.config.url.origin())
            .unwrap_or_else(|| self.config.url.clone());
        let skills = card
            .get("skills")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|s| (text(s, "name"), text(s, "description")))
            .collect();
        let card = Card {
            name: text(&card, "name"),
            description: text(&card, "description"),
            skills,
            streaming: card.pointer("/capabilities/streaming").and_then(Value::as_bool).unwrap_or(false),
            endpoint,
        };
        *cached = Some((Instant::now(), card.clone()));
        Ok(card)
    }

    /// Sends `text` in the remote conversation `context_id` (answering task `task_id` when it
    /// asked for input); `on_task` learns the remote task's id as soon as it is known.
    pub(crate) async fn send(
        &self,
        text: &str,
        context_id: &str,
        task_id: Option<&str>,
        on: Observers<'_>,
    ) -> Result<Outcome, CallError> {
        self.exchange(text, context_id, task_id, on).await.map_err(CallError)
    }

    async fn exchange(
        &self,
        text: &str,
        context_id: &str,
        task_id: Option<&str>,
        on: Observers<'_>,
    ) -> Result<Outcome, String> {
        let Observers { task: on_task, text: on_text } = on;
        let card = self.read_card().await?;
        let mut message =
            json!({"messageId": new_id(), "role": "ROLE_USER", "parts": [{"text": text}], "contextId": context_id});
        if let Some(task) = task_id {
            message["taskId"] = json!(task);
        }
        let streaming = card.streaming && self.config.streaming;
        let method = if streaming { "SendStreamingMessage" } else { "SendMessage" };
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}});
        let response = self
            .request(reqwest::Method::POST, card.endpoint.clone())
            .json(&body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !response.status().is_success() {
            return Err(format!("HTTP {}", response.status()));
        }
        let mut outcome = Outcome::default();
        let mut fold = Fold::default();
        if !streaming {
            let answer: Value = serde_json::from_slice(&read_capped(response, MAX_ANSWER_BYTES).await?)
                .map_err(|e| format!("not JSON: {e}"))?;
            let result = rpc_result(answer)?;
            fold.apply(&result, &mut outcome, on_task);
            let outcome = fold.finish(outcome);
            on_text(&outcome.answer);
            return Ok(outcome);
        }
        let mut response = response;
        let (mut buffer, mut read) = (Vec::<u8>::new(), 0usize);
        while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
            read += chunk.len();
            if read > MAX_ANSWER_BYTES {
                return Err(format!("the answer passed {MAX_ANSWER_BYTES} bytes"));
            }
            buffer.extend_from_slice(&chunk);
            while let Some(end) = frame_end(&buffer) {
                let frame: Vec<u8> = buffer.drain(..end.0).collect();
                buffer.drain(..end.1);
                let data: String = String::from_utf8_lossy(&frame)
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:").map(str::trim_start))
                    .collect::<Vec<_>>()
                    .join("\n");
                if data.is_empty() {
                    continue;
                }
                let value: Value =
                    serde_json::from_str(&data).map_err(|e| format!("a stream frame is not JSON: {e}"))?;
                let result = rpc_result(value)?;
                if let Some(delta) = result.pointer("/artifactUpdate/artifact/parts").map(|p| answer_text(Some(p))) {
                    on_text(&delta);
                }
                fold.apply(&result, &mut outcome, on_task);
                if fold.stops(&outcome) {
                    return Ok(fold.finish(outcome));
                }
            }
        }
        Ok(fold.finish(outcome))
    }

    /// Asks the agent to cancel `task_id` (best effort, a few seconds at most).
    pub(crate) async fn cancel(&self, task_id: &str) {
        let Ok(card) = self.card().await else { return };
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "CancelTask", "params": {"id": task_id}});
        let sent =
            self.request(reqwest::Method::POST, card.endpoint).timeout(Duration::from_secs(5)).json(&body).send().await;
        match sent {
            Ok(_) => tracing::info!(agent = %self.config.name, taskId = %task_id, "remote A2A task cancelled"),
            Err(e) => {
                tracing::warn!(agent = %self.config.name, taskId = %task_id, error = %e, "remote A2A task not cancelled")
            }
        }
    }
}

/// Who learns what while a message is answered: the remote task's id once it is known, and each
/// piece of the answer's text as it arrives.
pub(crate) struct Observers<'a> {
    pub task: &'a mut (dyn FnMut(&str) + Send),
    pub text: &'a mut (dyn FnMut(&str) + Send),
}

/// Folds stream responses (or one blocking result) into an [`Outcome`].
#[derive(Default)]
struct Fold {
    /// Artifact id → its text, in first-seen order.
    artifacts: Vec<(String, String)>,
}

impl Fold {
    fn apply(&mut self, result: &Value, outcome: &mut Outcome, on_task: &mut (dyn FnMut(&str) + Send)) {
        let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
        if let Some(task) = result.get("task") {
            if let Some(id) = text(task, "id") {
                if outcome.task_id.is_empty() {
                    on_task(&id);
                }
                outcome.task_id = id;
            }
            outcome.context_id = text(task, "contextId").unwrap_or_else(|| outcome.context_id.clone());
            self.status(task.get("status"), outcome);
            for artifact in task.get("artifacts").and_then(Value::as_array).into_iter().flatten() {
                self.artifact(artifact, false);
            }
        } else if let Some(update) = result.get("statusUpdate") {
            if outcome.task_id.is_empty()
                && let Some(id) = text(update, "taskId")
            {
                on_task(&id);
                outcome.task_id = id;
            }
            self.status(update.get("status"), outcome);
        } else if let Some(update) = result.get("artifactUpdate") {
            let append = update.get("append").and_then(Value::as_bool).unwrap_or(false);
            if let Some(artifact) = update.get("artifact") {
                self.artifact(artifact, append);
            }
        } else if let Some(message) = result.get("message") {
            // A direct answer, no task.
            outcome.state = "completed".into();
            self.artifacts.push((String::new(), answer_text(message.get("parts"))));
        }
    }

    fn status(&mut self, status: Option<&Value>, outcome: &mut Outcome) {
        let Some(status) = status else { return };
        if let Some(state) = status.get("state").and_then(Value::as_str) {
            outcome.state = state.trim_start_matches("TASK_STATE_").to_lowercase();
        }
        let parts = status.pointer("/message/parts");
        let said = parts_text(parts);
        // Progress notes (agw's tool activity, reasoning) are not what the agent says to the caller.
        let note = status
            .pointer("/message/metadata/agw/event")
            .and_then(Value::as_str)
            .is_some_and(|event| event != "input_required");
        if !said.is_empty() && !note {
            outcome.status_text = Some(said);
        }
        if outcome.state == "input_required" {
            let data: Vec<Value> =
                parts.and_then(Value::as_array).into_iter().flatten().filter_map(|p| p.get("data").cloned()).collect();
            outcome.asked = data.into_iter().next();
        }
    }

    fn artifact(&mut self, artifact: &Value, append: bool) {
        let id = artifact.get("artifactId").and_then(Value::as_str).unwrap_or_default().to_owned();
        let text = answer_text(artifact.get("parts"));
        match self.artifacts.iter_mut().find(|(a, _)| *a == id) {
            Some((_, existing)) if append => existing.push_str(&text),
            Some((_, existing)) => *existing = text,
            None => self.artifacts.push((id, text)),
        }
    }

    /// The task ended or waits for its caller: the stream has said all it will.
    fn stops(&self, outcome: &Outcome) -> bool {
        matches!(
            outcome.state.as_str(),
            "completed" | "failed" | "canceled" | "rejected" | "input_required" | "auth_required"
        )
    }

    fn finish(self, mut outcome: Outcome) -> Outcome {
        outcome.answer = self.artifacts.into_iter().map(|(_, text)| text).collect::<Vec<_>>().join("\n");
        outcome
    }
}

/// The text parts of a `parts` array, joined (a status message's: its data parts are read apart).
fn parts_text(parts: Option<&Value>) -> String {
    parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("")
}

/// An answer's `parts` as the text the model reads: text parts as they are, a data part as a
/// JSON block, a file part as a line that names it (the model gets no bytes of a remote file:
/// the answer is a tool result, which is text).
fn answer_text(parts: Option<&Value>) -> String {
    parts.and_then(Value::as_array).into_iter().flatten().filter_map(part_text).collect::<Vec<_>>().join("")
}

fn part_text(part: &Value) -> Option<String> {
    if let Some(text) = part.get("text").and_then(Value::as_str) {
        return Some(text.to_owned());
    }
    if let Some(data) = part.get("data") {
        return Some(format!("\n```json\n{data}\n```\n"));
    }
    let name = part.get("filename").and_then(Value::as_str).unwrap_or("unnamed");
    let media_type = part.get("mediaType").and_then(Value::as_str).unwrap_or("unknown type");
    if let Some(raw) = part.get("raw").and_then(Value::as_str) {
        // Base64 is 4/3 of the bytes.
        return Some(format!("\n[file {name} ({media_type}, {} bytes)]\n", raw.len() * 3 / 4));
    }
    let url = part.get("url").and_then(Value::as_str)?;
    Some(format!("\n[file {name} ({media_type}) at {url}]\n"))
}

/// A JSON-RPC response's `result`, or its error as text.
fn rpc_result(mut response: Value) -> Result<Value, String> {
    if let Some(error) = response.get("error") {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or_default();
        let message = error.get("message").and_then(Value::as_str).unwrap_or("error");
        return Err(format!("the agent answered error {code}: {message}"));
    }
    Ok(response.get_mut("result").map(Value::take).unwrap_or(Value::Null))
}

/// Where the first SSE frame of `buffer` ends: its length and the separator's.
fn frame_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2));
    let crlf = buffer.windows(4).position(|w| w == b"\r\n\r\n").map(|i| (i, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// A body read whole, at most `cap` bytes.
async fn read_capped(mut response: reqwest::Response, cap: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > cap {
            return Err(format!("the answer passed {cap} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A fresh message id.
fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_folds_into_the_task_its_answer_and_its_question() {
        let mut fold = Fold::default();
        let mut outcome = Outcome::default();
        let mut seen = Vec::new();
        let mut on_task = |id: &str| seen.push(id.to_owned());
        let results = [
            json!({"task": {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_SUBMITTED"}}}),
            json!({"statusUpdate": {"taskId": "t1", "status": {"state": "TASK_STATE_WORKING",
                "message": {"parts": [{"data": {"kind": "tool_call"}}], "metadata": {"agw": {}}}}}}),
            json!({"artifactUpdate": {"artifact": {"artifactId": "a", "parts": [{"text": "Sun"}]}, "append": false}}),
            json!({"artifactUpdate": {"artifact": {"artifactId": "a", "parts": [{"text": "ny."}]}, "append": true}}),
            json!({"statusUpdate": {"taskId": "t1", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
                "message": {"parts": [{"text": "Which city?"}, {"data": {"kind": "form"}}]}}}}),
        ];
        for result in &results {
            fold.apply(result, &mut outcome, &mut on_task);
        }
        assert!(fold.stops(&outcome));
        let outcome = fold.finish(outcome);
        assert_eq!((outcome.task_id.as_str(), outcome.context_id.as_str()), ("t1", "c1"));
        assert_eq!(outcome.state, "input_required");
        assert_eq!(outcome.answer, "Sunny.");
        assert_eq!(outcome.status_text.as_deref(), Some("Which city?"));
        assert_eq!(outcome.asked, Some(json!({"kind": "form"})));
        assert_eq!(seen, ["t1"]);
        assert_eq!(frame_end(b"data: x\r\n\r\nrest"), Some((7, 4)));
        assert!(rpc_result(json!({"error": {"code": -32001, "message": "no task"}})).unwrap_err().contains("-32001"));
    }

    #[test]
    fn an_answers_data_and_file_parts_reach_the_model_as_text() {
        let parts = json!([
            {"text": "Here:"},
            {"data": {"n": 1}},
            {"raw": "aGVsbG8h", "mediaType": "text/plain", "filename": "a.txt"},
            {"url": "https://example.com/r.pdf", "mediaType": "application/pdf"},
        ]);
        assert_eq!(
            answer_text(Some(&parts)),
            "Here:\n```json\n{\"n\":1}\n```\n\n[file a.txt (text/plain, 6 bytes)]\n\n[file unnamed (application/pdf) at https://example.com/r.pdf]\n"
        );
        assert_eq!(parts_text(Some(&parts)), "Here:", "a status message's text is its text parts");
    }
}
