//! The server's guardrails (docs/guardrails.md): default guards, judge and failure settings,
//! and the classifier webhook — agw POSTs a text with its context and acts on the verdict.
//!
//! The webhook crosses a trust boundary both ways, so it is bounded like the chat-event webhook
//! and more: every request is signed (HMAC-SHA256 of `"<timestamp>.<body>"`, the same headers),
//! redirects are not followed, the whole call has a timeout, and at most
//! [`MAX_VERDICT_BYTES`] of the answer are read; anything that is not a verdict is an error,
//! which the run treats as the failure setting says (closed by default).

use std::sync::Arc;
use std::time::Duration;

use agw_guard::{Granularity, Verdict};
use agw_modes::definition::GuardLists;
use agw_modes::runtime::{ClassifyError, ClassifyRequest, FailMode, GuardClassifier, GuardServices};
use futures::FutureExt;
use futures::future::BoxFuture;

use crate::webhook::signature;

/// Most bytes of a verdict read from the webhook.
pub const MAX_VERDICT_BYTES: usize = 64 * 1024;

/// `agw.guardrails.*` as the run core reads them.
#[derive(Debug, Clone)]
pub struct GuardSettings {
    /// Guards every agent gets, besides its own.
    pub defaults: GuardLists,
    /// How often classifiers see a streaming answer.
    pub classify_every: Granularity,
    /// What a classifier that gives no verdict means.
    pub fail: FailMode,
    /// How long a judge agent may take.
    pub judge_timeout: Duration,
    /// The classifier webhook; `None`: not configured.
    pub webhook: Option<GuardWebhookConfig>,
}

impl Default for GuardSettings {
    fn default() -> Self {
        Self {
            defaults: GuardLists::default(),
            classify_every: Granularity::Sentence,
            fail: FailMode::Closed,
            judge_timeout: Duration::from_secs(15),
            webhook: None,
        }
    }
}

/// `agw.guardrails.webhook.*`.
#[derive(Debug, Clone)]
pub struct GuardWebhookConfig {
    /// Where texts are POSTed (http or https).
    pub url: String,
    /// HMAC-SHA256 key of the `X-AGENT-Signature` header.
    pub secret: String,
    /// The whole call, connection included.
    pub timeout: Duration,
}

impl GuardSettings {
    /// The runtime's view, with the webhook's client built.
    pub fn services(&self) -> GuardServices {
        GuardServices {
            defaults: self.defaults.clone(),
            classifier: self
                .webhook
                .as_ref()
                .and_then(GuardWebhook::new)
                .map(|w| Arc::new(w) as Arc<dyn GuardClassifier>),
            classify_every: self.classify_every,
            judge_timeout: self.judge_timeout,
            fail: self.fail,
        }
    }
}

/// The classifier webhook's client.
pub struct GuardWebhook {
    config: Arc<GuardWebhookConfig>,
    client: reqwest::Client,
}

impl GuardWebhook {
    /// `None` when the client cannot be built (logged).
    pub fn new(config: &GuardWebhookConfig) -> Option<Self> {
        let timeout = config.timeout.max(Duration::from_millis(50));
        let client = reqwest::Client::builder()
            .connect_timeout(timeout)
            .timeout(timeout)
            // A classifier that redirects is misconfigured or hostile: its answer is not followed.
            .redirect(reqwest::redirect::Policy::none())
            .build();
        match client {
            Ok(client) => Some(Self { config: Arc::new(GuardWebhookConfig { timeout, ..config.clone() }), client }),
            Err(error) => {
                tracing::error!(%error, "the guardrails webhook client could not be built; webhook guards get no verdict");
                None
            }
        }
    }
}

impl GuardClassifier for GuardWebhook {
    fn classify(&self, request: ClassifyRequest) -> BoxFuture<'static, Result<Verdict, ClassifyError>> {
        let body = serde_json::json!({
            "stage": request.stage,
            "text": request.text,
            "complete": request.complete,
            "runId": request.run_id,
            "chatId": request.chat_id,
            "agentKey": request.agent_key,
            "tool": request.tool,
        })
        .to_string();
        let timestamp =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        let sent = self
            .client
            .post(&self.config.url)
            .header("Content-Type", "application/json")
            .header("X-AGENT-Timestamp", timestamp.to_string())
            .header("X-AGENT-Signature", signature(&self.config.secret, timestamp, &body))
            .body(body)
            .send();
        let timeout_ms = self.config.timeout.as_millis() as u64;
        async move {
            let failed = |e: reqwest::Error| {
                if e.is_timeout() { ClassifyError::Timeout(timeout_ms) } else { ClassifyError::Failed(e.to_string()) }
            };
            let mut response = sent.await.map_err(failed)?;
            if !response.status().is_success() {
                return Err(ClassifyError::Failed(format!("the webhook answered HTTP {}", response.status().as_u16())));
            }
            let mut bytes = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(failed)? {
                if bytes.len() + chunk.len() > MAX_VERDICT_BYTES {
                    return Err(ClassifyError::Failed(format!("the verdict is over {MAX_VERDICT_BYTES} bytes")));
                }
                bytes.extend_from_slice(&chunk);
            }
            let value: serde_json::Value = serde_json::from_slice(&bytes)
                .map_err(|e| ClassifyError::Failed(format!("the verdict is not JSON: {e}")))?;
            Verdict::from_webhook(&value).map_err(|e| ClassifyError::Failed(e.to_string()))
        }
        .boxed()
    }
}
