//! Token estimates from text: how big a request is before it is sent, so a run can compact its
//! conversation before the provider rejects it (`docs/context.md`).
//!
//! One estimate for every provider: counting with each model's real tokenizer would mean a
//! vocabulary per model family, and an estimate only has to be good enough to decide when to
//! compact (runs correct it with the provider's reported usage, see `agw-modes`). Weights per
//! character class, chosen against the o200k and cl100k tokenizers (the tests hold the estimate
//! within ±30 % of o200k and cl100k on English prose, code, JSON, Chinese and Japanese):
//!
//! | characters | tokens each | why |
//! |---|---|---|
//! | ASCII letters and digits | 1/4 | English words average ~4 characters per token |
//! | ASCII punctuation | 3/5 | JSON and code punctuation is often its own token |
//! | ASCII whitespace | 1/20 | mostly merged into the next word's token |
//! | CJK (Han, kana, Hangul) | 3/4 | o200k needs ~0.6 per character, cl100k ~1 |
//! | other non-ASCII | 1/2 | accented Latin, Cyrillic, symbols: between the two |

use agw_protocol::chat::{ChatMessage, ToolSpec};

/// Tokens a provider adds around each message (role markers), on top of its text.
pub const PER_MESSAGE_OVERHEAD: u64 = 4;

/// Estimated tokens of `text`.
pub fn estimate_text(text: &str) -> u64 {
    // In twentieths of a token, so every weight is a whole number.
    let mut twentieths: u64 = 0;
    for c in text.chars() {
        twentieths += match c {
            c if c.is_ascii_alphanumeric() => 5,
            c if c.is_ascii_whitespace() => 1,
            c if c.is_ascii() => 12,
            c if is_cjk(c) => 15,
            _ => 10,
        };
    }
    twentieths.div_ceil(20)
}

/// Estimated tokens of one message: its text, tool-call names and arguments, and the overhead.
pub fn estimate_message(message: &ChatMessage) -> u64 {
    PER_MESSAGE_OVERHEAD
        + match message {
            ChatMessage::System { content } => estimate_text(content),
            ChatMessage::User { content, attachments } => {
                estimate_text(content) + attachments.iter().map(estimate_attachment).sum::<u64>()
            }
            ChatMessage::Assistant { content, tool_calls } => {
                estimate_text(content)
                    + tool_calls
                        .iter()
                        .map(|c| PER_MESSAGE_OVERHEAD + estimate_text(&c.name) + estimate_text(&c.arguments))
                        .sum::<u64>()
            }
            ChatMessage::Tool { content, name, .. } => estimate_text(content) + estimate_text(name),
        }
}

/// Tokens an image is counted as without knowing its size: Anthropic's for a 1.15-megapixel
/// image (its largest before downscaling), OpenAI's high detail is within it.
pub const IMAGE_TOKENS: u64 = 1_600;

/// Estimated tokens of an attachment: [`IMAGE_TOKENS`] for an image; a PDF as its bytes over 20
/// (providers read each page as text and as an image: ~1,500–3,000 tokens for a page of ~50 KB);
/// a text file as its text.
pub fn estimate_attachment(attachment: &agw_protocol::chat::Attachment) -> u64 {
    use agw_protocol::chat::{AttachmentKind, AttachmentSource};
    match (&attachment.source, attachment.kind()) {
        (AttachmentSource::Text(text), _) => estimate_text(text),
        (_, AttachmentKind::Image) => IMAGE_TOKENS,
        // Base64 is 4/3 of the bytes.
        (AttachmentSource::Base64(data), _) => (data.len() as u64 * 3 / 4) / 20,
        (AttachmentSource::Url(_), _) => IMAGE_TOKENS,
    }
}

/// Estimated tokens of a conversation.
pub fn estimate_messages(messages: &[ChatMessage]) -> u64 {
    messages.iter().map(estimate_message).sum()
}

/// Estimated tokens of the offered tools (name, description and JSON schema of each).
pub fn estimate_tools(tools: &[ToolSpec]) -> u64 {
    tools
        .iter()
        .map(|t| {
            PER_MESSAGE_OVERHEAD
                + estimate_text(&t.name)
                + estimate_text(&t.description)
                + estimate_text(&t.parameters.to_string())
        })
        .sum()
}

/// The input tokens a provider reported in a usage object, whatever its dialect: OpenAI's
/// `prompt_tokens` (cached tokens included), or Anthropic's `input_tokens` plus its cache reads
/// and writes. `None` when it reported none.
pub fn reported_input_tokens(usage: &serde_json::Value) -> Option<u64> {
    if let Some(n) = usage.get("prompt_tokens").and_then(serde_json::Value::as_u64) {
        return Some(n);
    }
    let input = usage.get("input_tokens").and_then(serde_json::Value::as_u64)?;
    let cached = ["cache_read_input_tokens", "cache_creation_input_tokens"]
        .iter()
        .filter_map(|k| usage.get(*k).and_then(serde_json::Value::as_u64))
        .sum::<u64>();
    Some(input + cached)
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF       // Hangul Jamo
        | 0x2E80..=0x2FDF     // CJK radicals
        | 0x3000..=0x303F     // CJK punctuation
        | 0x3040..=0x30FF     // Hiragana, Katakana
        | 0x3130..=0x318F     // Hangul compatibility Jamo
        | 0x3400..=0x4DBF     // CJK extension A
        | 0x4E00..=0x9FFF     // CJK unified ideographs
        | 0xAC00..=0xD7AF     // Hangul syllables
        | 0xF900..=0xFAFF     // CJK compatibility ideographs
        | 0xFF00..=0xFFEF     // full-width forms
        | 0x20000..=0x2FA1F   // CJK extensions B–F and supplement
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachments_count_as_an_image_a_pdfs_size_or_a_files_text() {
        use agw_protocol::chat::{Attachment, AttachmentSource};
        let of = |media_type: &str, source: AttachmentSource| {
            estimate_attachment(&Attachment { media_type: media_type.into(), name: None, source })
        };
        assert_eq!(of("image/png", AttachmentSource::Base64("AAAA".into())), IMAGE_TOKENS);
        assert_eq!(of("image/jpeg", AttachmentSource::Url("https://x/y.jpg".into())), IMAGE_TOKENS);
        assert_eq!(of("application/pdf", AttachmentSource::Base64("A".repeat(80_000))), 3_000);
        assert_eq!(of("text/plain", AttachmentSource::Text("abcd".into())), 1);
        let user = ChatMessage::User {
            content: String::new(),
            attachments: vec![Attachment {
                media_type: "image/png".into(),
                name: None,
                source: AttachmentSource::Base64("AAAA".into()),
            }],
        };
        assert_eq!(estimate_message(&user), PER_MESSAGE_OVERHEAD + IMAGE_TOKENS);
    }

    #[test]
    fn classes_are_weighted_as_documented() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("abcd"), 1);
        assert_eq!(estimate_text("abcdefgh"), 2);
        assert_eq!(estimate_text("{}"), 2);
        assert_eq!(estimate_text("上海天气"), 3);
        assert_eq!(estimate_text("éé"), 1);
    }

    #[test]
    fn reported_input_tokens_reads_both_dialects() {
        use serde_json::json;
        assert_eq!(reported_input_tokens(&json!({"prompt_tokens": 812, "completion_tokens": 46})), Some(812));
        let anthropic = json!({"input_tokens": 9, "cache_read_input_tokens": 100, "output_tokens": 7});
        assert_eq!(reported_input_tokens(&anthropic), Some(109));
        assert_eq!(reported_input_tokens(&json!({"output_tokens": 7})), None);
    }

    #[test]
    fn messages_count_calls_and_overhead() {
        let call = agw_protocol::chat::ToolCallMessage {
            id: "call_1".into(),
            call_type: "function".into(),
            name: "abcd".into(),
            arguments: "abcd".into(),
        };
        let assistant = ChatMessage::Assistant { content: "abcd".into(), tool_calls: vec![call] };
        assert_eq!(estimate_message(&assistant), 4 + 1 + 4 + 1 + 1);
        assert_eq!(estimate_messages(&[assistant.clone(), assistant]), 22);
    }
}
