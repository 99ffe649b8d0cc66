//! `mock_sensitive_data_detector` (§4.12): pattern rules, first match wins; not random.
//!
//! The reference patterns use Java look-arounds, which the `regex` crate does not have. The two
//! rules bounded by `(?<!\d)…(?!\d)` are evaluated on maximal digit runs instead, which is what
//! those look-arounds mean. `\b` and `\d` are ASCII here, as in Java without `UNICODE_CHARACTER_CLASS`
//! (so `邮箱test@example.com` still has a word boundary before `t`).

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use crate::builtin::args;

pub(crate) const NAME: &str = "mock_sensitive_data_detector";

const TEXT_KEYS: [&str; 6] = ["text", "content", "message", "query", "document", "input"];

static EMAIL: LazyLock<Regex> = LazyLock::new(|| rule(r"(?i-u)\b[A-Z0-9._%+-]+@[A-Z0-9.-]+\.[A-Z]{2,}\b"));
static ID_CARD: LazyLock<Regex> =
    LazyLock::new(|| rule(r"(?i-u)\b[1-9]\d{5}(18|19|20)\d{2}(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])\d{3}[0-9X]\b"));
static OPENAI_KEY: LazyLock<Regex> = LazyLock::new(|| rule(r"(?-u)\bsk-[A-Za-z0-9_-]{16,}\b"));
static AWS_KEY: LazyLock<Regex> = LazyLock::new(|| rule(r"(?-u)\bAKIA[0-9A-Z]{16}\b"));
/// A chain of ASCII digits, each optionally preceded by one space or dash (bank card candidates).
static DIGIT_CHAIN: LazyLock<Regex> = LazyLock::new(|| rule(r"[0-9](?:[ -]?[0-9])*"));
static DIGIT_RUN: LazyLock<Regex> = LazyLock::new(|| rule(r"[0-9]+"));

fn rule(pattern: &str) -> Regex {
    // The patterns are constants covered by tests; failing here is a programming error.
    Regex::new(pattern).unwrap_or_else(|e| panic!("invalid built-in pattern {pattern}: {e}"))
}

pub(crate) fn run(arguments: &Value) -> Value {
    let text = TEXT_KEYS.iter().find_map(|key| args::text(arguments, key)).unwrap_or_default();
    if text.trim().is_empty() {
        return verdict(false, "未检测到可分析文本。");
    }
    match detect(&text) {
        Some(label) => verdict(true, &format!("检测到疑似{label}信息，建议脱敏后再传输。")),
        None => verdict(false, "未发现明显敏感字段特征。"),
    }
}

fn verdict(found: bool, description: &str) -> Value {
    json!({
        "hasSensitiveData": found,
        "result": if found { "有敏感数据" } else { "没有敏感数据" },
        "description": description,
    })
}

/// The label of the first rule that matches, in the reference's order.
fn detect(text: &str) -> Option<&'static str> {
    if has_phone_number(text) {
        Some("手机号")
    } else if EMAIL.is_match(text) {
        Some("邮箱")
    } else if ID_CARD.is_match(text) {
        Some("身份证号")
    } else if has_bank_card(text) {
        Some("银行卡号")
    } else if OPENAI_KEY.is_match(text) {
        Some("OpenAI Key")
    } else if AWS_KEY.is_match(text) {
        Some("AWS Access Key")
    } else {
        None
    }
}

/// `(?<!\d)1[3-9]\d{9}(?!\d)`: a maximal digit run of exactly 11 digits starting `1[3-9]`.
fn has_phone_number(text: &str) -> bool {
    DIGIT_RUN.find_iter(text).any(|run| {
        let digits = run.as_str().as_bytes();
        digits.len() == 11 && digits[0] == b'1' && (b'3'..=b'9').contains(&digits[1])
    })
}

/// `(?<!\d)(?:\d[ -]?){16,19}(?!\d)`. A match starts at a digit not preceded by a digit: the start
/// of a chain or a digit right after a separator. From there, taking `k` digits (16..=19) ends the
/// match either where the chain ends or right after digit `k` when a separator follows it (the
/// separator is not a digit, so the look-ahead holds).
fn has_bank_card(text: &str) -> bool {
    DIGIT_CHAIN.find_iter(text).any(|chain| {
        // For each digit of the chain: is it followed by a separator inside the chain?
        let bytes = chain.as_str().as_bytes();
        let mut separator_after = Vec::new();
        for (i, b) in bytes.iter().enumerate() {
            if b.is_ascii_digit() {
                separator_after.push(matches!(bytes.get(i + 1), Some(b' ' | b'-')));
            }
        }
        let digits = separator_after.len();
        (0..digits).filter(|&start| start == 0 || separator_after[start - 1]).any(|start| {
            let remaining = digits - start;
            (16..=19.min(remaining)).any(|k| k == remaining || separator_after[start + k - 1])
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(text: &str) -> Option<&'static str> {
        detect(text)
    }

    #[test]
    fn reference_suite_email_in_long_text() {
        let filler = "这是一段普通的说明文字，用于测试检测器的表现。".repeat(90);
        let text = format!("{filler}联系邮箱test.user@example.com，{filler}");
        assert!(text.chars().count() > 2000);
        let out = run(&json!({"text": text}));
        assert_eq!(out["hasSensitiveData"], true);
        assert_eq!(out["result"], "有敏感数据");
        assert_eq!(out["description"], "检测到疑似邮箱信息，建议脱敏后再传输。");
    }

    #[test]
    fn reference_suite_safe_text() {
        let out = run(&json!({"text":"今天上海天气晴朗，适合散步。"}));
        assert_eq!(
            out.to_string(),
            r#"{"hasSensitiveData":false,"result":"没有敏感数据","description":"未发现明显敏感字段特征。"}"#
        );
    }

    #[test]
    fn blank_or_absent_text() {
        for args in [json!({}), json!({"text":"   "}), json!({"text":null})] {
            assert_eq!(run(&args)["description"], "未检测到可分析文本。");
        }
    }

    #[test]
    fn first_present_field_is_analysed() {
        let out = run(&json!({"input":"13812345678","content":"nothing here"}));
        assert_eq!(out["hasSensitiveData"], false);
        assert_eq!(run(&json!({"document":"call 13812345678"}))["hasSensitiveData"], true);
    }

    #[test]
    fn phone_numbers() {
        assert_eq!(label("电话13812345678。"), Some("手机号"));
        assert_eq!(label("x13812345678y"), Some("手机号"));
        assert_eq!(label("12812345678"), None);
        assert_eq!(label("138123456789"), None, "12 digits are not a phone number");
        assert_eq!(label("013812345678"), None);
    }

    #[test]
    fn emails_ids_and_keys() {
        assert_eq!(label("邮箱Test.User@Example.COM。"), Some("邮箱"));
        assert_eq!(label("身份证 11010519491231002X 号"), Some("身份证号"));
        assert_eq!(label("id 110105194912310021"), Some("身份证号"));
        assert_eq!(label("key sk-abcdefghijklmnop1234 here"), Some("OpenAI Key"));
        assert_eq!(label("sk-short"), None);
        assert_eq!(label("AKIAABCDEFGHIJKLMNOP"), Some("AWS Access Key"));
        assert_eq!(label("xAKIAABCDEFGHIJKLMNOP"), None);
    }

    #[test]
    fn bank_cards() {
        assert_eq!(label("卡号 6222 0202 0000 1234 尾号"), Some("银行卡号"));
        assert_eq!(label("6222-0202-0000-1234-567"), Some("银行卡号"));
        assert_eq!(label("card 62220202000012345"), Some("银行卡号"));
        assert_eq!(label("123456789012345"), None, "15 digits");
        // 20 digits in a row: no start inside a run of digits.
        assert_eq!(label("12345678901234567890"), None);
        // 20 digits in groups: Java finds 16 digits starting after the first separator.
        assert_eq!(label("1111 2222 3333 4444 5555"), Some("银行卡号"));
        // Double separators break the chain.
        assert_eq!(label("1111  2222  3333  4444"), None);
    }
}
