//! `agent.chat-event-callback.*`: the outbound chat-event webhook.

use super::source::Source;
use super::table::{
    AGENT_CHAT_EVENT_CALLBACK_CONNECT_TIMEOUT_MS, AGENT_CHAT_EVENT_CALLBACK_ENABLED,
    AGENT_CHAT_EVENT_CALLBACK_REQUEST_TIMEOUT_MS, AGENT_CHAT_EVENT_CALLBACK_SECRET, AGENT_CHAT_EVENT_CALLBACK_URL,
};
use super::{ConfigError, value};
use agw_runs::webhook::WebhookConfig;

pub(super) fn load(src: &Source) -> Result<WebhookConfig, ConfigError> {
    Ok(WebhookConfig {
        enabled: src.parse(&AGENT_CHAT_EVENT_CALLBACK_ENABLED, value::bool)?,
        url: src.parse(&AGENT_CHAT_EVENT_CALLBACK_URL, value::text)?,
        secret: src.parse(&AGENT_CHAT_EVENT_CALLBACK_SECRET, value::text)?,
        connect_timeout: src.parse(&AGENT_CHAT_EVENT_CALLBACK_CONNECT_TIMEOUT_MS, value::millis)?,
        request_timeout: src.parse(&AGENT_CHAT_EVENT_CALLBACK_REQUEST_TIMEOUT_MS, value::millis)?,
    })
}
