//! The outbound chat-event webhook (`docs/contract/http-api.md` §11): at the first `content.delta` of
//! a run, POST `{"chatId","runId","chatName","updatedAt"}` signed with HMAC-SHA256.
//!
//! Fire and forget: the request runs in its own task with short timeouts, so a slow or dead
//! receiver never delays the stream; failures are only logged.

use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Webhook settings (`agent.chat-event-callback.*`).
#[derive(Debug, Clone, Default)]
pub struct WebhookConfig {
    /// `agent.chat-event-callback.enabled`; calls also need a URL and a secret ([`WebhookConfig::active`]).
    pub enabled: bool,
    /// Where the event is POSTed.
    pub url: String,
    /// HMAC-SHA256 key of the `X-AGENT-Signature` header.
    pub secret: String,
    /// Connect timeout (at least 100 ms is used).
    pub connect_timeout: Duration,
    /// Whole-request timeout (at least 200 ms is used).
    pub request_timeout: Duration,
}

impl WebhookConfig {
    /// Whether calls are made at all: enabled, with a URL and a secret.
    pub fn active(&self) -> bool {
        self.enabled && !self.url.trim().is_empty() && !self.secret.trim().is_empty()
    }
}

/// Sends chat events. Cheap to clone.
#[derive(Clone)]
pub struct Webhook {
    config: Arc<WebhookConfig>,
    client: reqwest::Client,
    warned: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for Webhook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhook")
            .field("url", &self.config.url)
            .field("enabled", &self.config.enabled)
            .finish_non_exhaustive()
    }
}

/// Lower-case hex HMAC-SHA256 of `"<timestamp>.<body>"`.
pub fn signature(secret: &str, timestamp: i64, body: &str) -> String {
    // HMAC accepts keys of any length; this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(format!("{timestamp}.{body}").as_bytes());
    hex::encode(mac.finalize().into_bytes())
}

impl Webhook {
    /// `None` when the webhook is off or incomplete.
    pub fn new(config: WebhookConfig) -> Option<Self> {
        if !config.active() {
            return None;
        }
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout.max(Duration::from_millis(100)))
            .timeout(config.request_timeout.max(Duration::from_millis(200)))
            .build()
            .ok()?;
        Some(Self { config: Arc::new(config), client, warned: Arc::default() })
    }

    /// Sends one chat event in the background, with `trace_headers` (the run's trace context,
    /// so the receiver's trace continues the run's).
    pub fn notify(&self, chat_id: &str, run_id: &str, chat_name: &str, trace_headers: Vec<(String, String)>) {
        if chat_id.trim().is_empty() || run_id.trim().is_empty() {
            return;
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let body = serde_json::json!({
            "chatId": chat_id,
            "runId": run_id,
            "chatName": chat_name,
            "updatedAt": now.as_millis() as i64,
        })
        .to_string();
        let timestamp = now.as_secs() as i64;
        let sig = signature(&self.config.secret, timestamp, &body);
        let mut request = self
            .client
            .post(&self.config.url)
            .header("Content-Type", "application/json")
            .header("X-AGENT-Timestamp", timestamp.to_string())
            .header("X-AGENT-Signature", sig)
            .body(body);
        for (name, value) in trace_headers {
            request = request.header(name, value);
        }
        let run_id = run_id.to_string();
        let warned = self.warned.clone();
        tokio::spawn(async move {
            let failure = match request.send().await {
                Ok(resp) if resp.status().is_success() => {
                    tracing::debug!(%run_id, "chat event delivered");
                    return;
                }
                Ok(resp) => format!("HTTP {}", resp.status().as_u16()),
                Err(e) => e.to_string(),
            };
            // The default URL usually has no listener: say so once, then keep quiet.
            if !warned.swap(true, std::sync::atomic::Ordering::Relaxed) {
                tracing::warn!(%run_id, error = %failure, "chat event webhook failed (further failures are logged at debug)");
            } else {
                tracing::debug!(%run_id, error = %failure, "chat event webhook failed");
            }
        });
    }
}

/// Fires the webhook once per run, at its first content delta.
pub struct RunTrigger {
    webhook: Webhook,
    chat_id: String,
    run_id: String,
    chat_name: String,
    /// The run's trace headers, taken when it fires (W3C trace context while tracing is on).
    propagate: Option<agw_modes::runtime::Propagate>,
    fired: bool,
}

impl std::fmt::Debug for RunTrigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunTrigger").field("runId", &self.run_id).field("fired", &self.fired).finish_non_exhaustive()
    }
}

impl RunTrigger {
    /// A trigger for one run that has not fired yet.
    pub fn new(
        webhook: Webhook,
        chat_id: String,
        run_id: String,
        chat_name: String,
        propagate: Option<agw_modes::runtime::Propagate>,
    ) -> Self {
        Self { webhook, chat_id, run_id, chat_name, propagate, fired: false }
    }

    /// Looks at a batch of events about to be streamed.
    pub fn observe(&mut self, events: &[agw_protocol::Event]) {
        use agw_protocol::EventPayload;
        if self.fired {
            return;
        }
        if events.iter().any(|e| matches!(e.payload, EventPayload::ContentDelta(_) | EventPayload::ContentSnapshot(_)))
        {
            self.fired = true;
            let headers = self.propagate.as_ref().map(|p| p()).unwrap_or_default();
            self.webhook.notify(&self.chat_id, &self.run_id, &self.chat_name, headers);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_hex_hmac_of_timestamp_dot_body() {
        // Known answer, computed independently: printf '1700000000.{"a":1}' | openssl dgst -sha256 -hmac change-me
        let sig = signature("change-me", 1_700_000_000, r#"{"a":1}"#);
        assert_eq!(sig, "b47c13f4169d67ae1e788900c902e5d4f926cbd3f25c56311d47b811894cbc83");
    }

    #[test]
    fn incomplete_config_means_no_webhook() {
        let base = WebhookConfig {
            enabled: true,
            url: "http://127.0.0.1:1/x".into(),
            secret: "s".into(),
            connect_timeout: Duration::from_millis(10),
            request_timeout: Duration::from_millis(10),
        };
        assert!(!WebhookConfig { enabled: false, ..base.clone() }.active());
        assert!(!WebhookConfig { secret: " ".into(), ..base.clone() }.active());
        assert!(!WebhookConfig { url: String::new(), ..base.clone() }.active());
        assert!(base.active());
    }
}
