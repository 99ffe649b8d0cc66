//! The LLM interaction log: every request body, upstream chunk and outcome at debug level under
//! the target `agw::llm`, with runId and stage, secrets masked.
//!
//! Switched process-wide at startup ([`configure`]) — like the tracing subscriber itself — and
//! cheap when off: nothing is rendered unless the switch is on AND debug is enabled for the
//! target (`AGW_LOG=agw::llm=debug`).

use std::sync::RwLock;
use std::sync::atomic::{AtomicU8, Ordering};

use serde_json::Value;

/// The tracing target of every interaction log line.
pub const TARGET: &str = "agw::llm";

const ENABLED: u8 = 1;
const MASK: u8 = 2;
static SETTINGS: AtomicU8 = AtomicU8::new(ENABLED | MASK);

/// `enabled`: log at all (`agent.llm.interaction-log.enabled`); `mask`: mask secrets
/// (`agent.llm.interaction-log.mask-sensitive`). Both default to true.
pub fn configure(enabled: bool, mask: bool) {
    SETTINGS.store((u8::from(enabled) * ENABLED) | (u8::from(mask) * MASK), Ordering::Relaxed);
}

/// Whether an interaction line would be written now.
pub fn active() -> bool {
    SETTINGS.load(Ordering::Relaxed) & ENABLED != 0 && tracing::enabled!(target: TARGET, tracing::Level::DEBUG)
}

fn masking() -> bool {
    SETTINGS.load(Ordering::Relaxed) & MASK != 0
}

/// Secrets known to this process (configured provider API keys): redacted wherever they appear.
static KNOWN_SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Registers a secret to redact from every interaction log line (called for each provider key).
pub fn register_secret(secret: &str) {
    let secret = secret.trim();
    // Very short values would mask ordinary text; such keys are not real credentials anyway.
    if secret.len() < 8 {
        return;
    }
    let mut known = KNOWN_SECRETS.write().unwrap_or_else(std::sync::PoisonError::into_inner);
    if !known.iter().any(|s| s == secret) {
        known.push(secret.to_owned());
    }
}

/// Words after which free text usually carries a secret (`apiKey: …`, `password=…`).
const SECRET_WORDS: [&str; 9] =
    ["authorization", "api_key", "api-key", "apikey", "access_token", "refresh_token", "token", "secret", "password"];

/// JSON keys whose values are secrets (compared case-insensitively, `-`/`_` ignored).
const SECRET_KEYS: [&str; 8] =
    ["authorization", "apikey", "accesstoken", "refreshtoken", "token", "secret", "password", "xapikey"];

fn is_secret_key(key: &str) -> bool {
    let folded: String = key.chars().filter(|c| *c != '_' && *c != '-').flat_map(char::to_lowercase).collect();
    SECRET_KEYS.contains(&folded.as_str())
}

/// Masks secrets in free text: configured API keys, `Bearer <token>`, and the value after a
/// secret-named word (`apiKey sk-…`, `password=…`). Errs on the side of masking.
pub fn mask_text(text: &str) -> String {
    let mut out = mask_bearer(text);
    for word in SECRET_WORDS {
        out = mask_after_word(&out, word);
    }
    let known = KNOWN_SECRETS.read().unwrap_or_else(std::sync::PoisonError::into_inner);
    for secret in known.iter() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), "***");
        }
    }
    out
}

/// `<word><separators><value>` → `<word><separators>***` (case-insensitive, word at a boundary,
/// at least one of space, tab, `:`, `=`, quote between them).
fn mask_after_word(text: &str, word: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut from = 0;
    while let Some(i) = lower[from..].find(word) {
        let start = from + i;
        let end = start + word.len();
        from = end;
        let at_boundary = start == 0 || !lower.as_bytes()[start - 1].is_ascii_alphanumeric();
        let sep_len = lower[end..].len() - lower[end..].trim_start_matches([' ', '\t', ':', '=', '"', '\'']).len();
        if !at_boundary || sep_len == 0 || lower[end..].starts_with(|c: char| c.is_ascii_alphanumeric()) {
            continue;
        }
        let value_start = end + sep_len;
        let value_len = text[value_start..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';' | '&' | '}' | ']'))
            .unwrap_or(text.len() - value_start);
        if value_len == 0 || text[value_start..value_start + value_len] == *"***" {
            continue;
        }
        out.push_str(&text[copied..value_start]);
        out.push_str("***");
        copied = value_start + value_len;
        from = copied;
    }
    out.push_str(&text[copied..]);
    out
}

/// Replaces `Bearer <token>` sequences in free text by `Bearer ***`.
fn mask_bearer(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = find_bearer(rest) {
        let after = i + "bearer".len();
        out.push_str(&rest[..after]);
        let tail = &rest[after..];
        let spaces = tail.len() - tail.trim_start_matches([' ', '\t']).len();
        let token_len = tail[spaces..]
            .find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ',')
            .unwrap_or(tail.len() - spaces);
        out.push_str(&tail[..spaces]);
        if token_len > 0 {
            out.push_str("***");
        }
        rest = &tail[spaces + token_len..];
    }
    out.push_str(rest);
    out
}

/// Byte index of the next case-insensitive `bearer` followed by whitespace.
fn find_bearer(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find("bearer") {
        let at = from + i;
        if lower[at + 6..].starts_with([' ', '\t']) {
            return Some(at);
        }
        from = at + 6;
    }
    None
}

/// A copy of `value` with secret-named fields replaced by `"***"` and bearer tokens masked in
/// every string.
pub fn mask_value(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        if is_secret_key(k) && !v.is_null() { Value::String("***".into()) } else { mask_value(v) },
                    )
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(mask_value).collect()),
        Value::String(s) => Value::String(mask_text(s)),
        other => other.clone(),
    }
}

/// `value` as log text: masked unless masking was switched off.
pub fn render(value: &Value) -> String {
    if masking() { mask_value(value).to_string() } else { value.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_fields_and_bearer_tokens_are_masked() {
        let v = json!({
            "model": "m",
            "apiKey": "sk-live-123",
            "nested": {"Authorization": "Bearer abc.def", "refresh_token": "r1", "x-api-key": "k"},
            "messages": [{"role": "user", "content": "my header is Bearer eyJhbGciOi.x.y, thanks; BEARER\tzz"}],
            "password": null
        });
        let masked = mask_value(&v).to_string();
        for secret in ["sk-live-123", "abc.def", "r1\"", "eyJhbGciOi", "zz"] {
            assert!(!masked.contains(secret), "{secret} leaked: {masked}");
        }
        assert!(masked.contains("\"model\":\"m\""));
        assert!(masked.contains("Bearer ***, thanks"));
        assert!(masked.contains("\"password\":null"), "null stays null");
    }

    #[test]
    fn free_text_secrets_and_known_keys_are_masked() {
        register_secret("sk-known-0123456789");
        let text = mask_text("my apiKey sk-abc, password=hunter2; token: \"t0k\" and key sk-known-0123456789 here");
        for secret in ["sk-abc", "hunter2", "t0k", "sk-known-0123456789"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        assert!(text.contains("apiKey ***") && text.contains("password=***"), "{text}");
        assert_eq!(mask_text("tokens are counted"), "tokens are counted", "only whole words");
    }

    #[test]
    fn text_without_tokens_is_unchanged() {
        // Prose that looks like a token gets masked too: erring on the safe side.
        assert_eq!(mask_text("a bearer of news"), "a bearer *** news");
        assert_eq!(mask_text("no secrets here"), "no secrets here");
        assert_eq!(mask_text("ends with Bearer"), "ends with Bearer");
    }
}
