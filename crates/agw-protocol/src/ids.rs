//! Identifier formats (`docs/contract/sse-events.md` §4) and the chat-name rule.

use md5::{Digest, Md5};
use uuid::Uuid;

/// Name given to a chat whose first message is blank.
pub const DEFAULT_CHAT_NAME: &str = "新对话";

/// Maximum length of a chat name, in Unicode code points.
pub const CHAT_NAME_MAX_CHARS: usize = 30;

/// A fresh run id: random UUID v4, canonical lower-case.
pub fn new_run_id() -> String {
    Uuid::new_v4().to_string()
}

/// A fresh chat id (same format as a run id).
pub fn new_chat_id() -> String {
    new_run_id()
}

/// `{runId}_r_{n}`, n = 1, 2, … per run.
pub fn reasoning_id(run_id: &str, n: u32) -> String {
    format!("{run_id}_r_{n}")
}

/// `{runId}_c_{n}`, n = 1, 2, … per run (independent of the reasoning counter).
pub fn content_id(run_id: &str, n: u32) -> String {
    format!("{run_id}_c_{n}")
}

/// `plan_` + the first 12 hex chars of MD5(UTF-8 bytes of `chat_id`).
pub fn plan_id_for_chat(chat_id: &str) -> String {
    let digest = Md5::digest(chat_id.as_bytes());
    // 6 bytes = 12 hex chars; encoding only those avoids formatting the whole digest.
    format!("plan_{}", hex::encode(&digest[..6]))
}

/// The id of the `index`-th task of an `agent_invoke` call (`call_id` unique in its run): 8
/// lower-case hex chars of MD5(`call_id` NUL `index`). Derived, not drawn: a run resumed after a
/// crash names the tasks of the call it runs again, so its clients can drop them (`run.resume`
/// `taskIds`).
pub fn task_id_for_call(call_id: &str, index: usize) -> String {
    let digest = Md5::digest(format!("{call_id}\0{index}").as_bytes());
    hex::encode(&digest[..4])
}

/// A fresh task id: 8 lower-case hex chars. The first 8 hex chars of a v4 UUID are all random
/// bits (the version nibble comes later). Callers keep ids unique within a plan.
pub fn new_task_id() -> String {
    let id = Uuid::new_v4();
    hex::encode(&id.as_bytes()[..4])
}

/// A fresh history message id (`_msgId`): `m_` + 8 random lower-case hex chars.
pub fn new_msg_id() -> String {
    format!("m_{}", new_task_id())
}

/// Synthetic tool-call id for a provider that sends none: `call_native_{k}`. agw keeps `k`
/// unique per run (not per model turn, unlike the reference).
pub fn native_tool_id(k: u32) -> String {
    format!("call_native_{k}")
}

/// Canonical lower-case 8-4-4-4-12 form of a UUID, or `None` if `raw` is not one. Accepts the
/// hyphenated form in any case, plus the simple (32 hex), braced and `urn:uuid:` forms; the
/// input is not trimmed.
pub fn canonical_uuid(raw: &str) -> Option<String> {
    Uuid::try_parse(raw).ok().map(|u| u.hyphenated().to_string())
}

/// Chat name from the first message: trimmed, whitespace runs collapsed to one space, first
/// [`CHAT_NAME_MAX_CHARS`] code points; [`DEFAULT_CHAT_NAME`] when blank.
pub fn chat_name(message: &str) -> String {
    let mut name = String::new();
    let mut chars = 0;
    'words: for (i, word) in message.split_whitespace().enumerate() {
        if i > 0 {
            if chars == CHAT_NAME_MAX_CHARS {
                break;
            }
            name.push(' ');
            chars += 1;
        }
        for c in word.chars() {
            if chars == CHAT_NAME_MAX_CHARS {
                break 'words;
            }
            name.push(c);
            chars += 1;
        }
    }
    if name.is_empty() { DEFAULT_CHAT_NAME.to_owned() } else { name }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_id_vectors() {
        assert_eq!(plan_id_for_chat("123e4567-e89b-12d3-a456-426614174000"), "plan_3b32b2dc26c4");
        assert_eq!(plan_id_for_chat("5d2e8c41-9a7b-4c3d-8e1f-2a3b4c5d6e7f"), "plan_3b085dac2d36");
    }

    #[test]
    fn block_and_tool_ids() {
        assert_eq!(reasoning_id("run", 1), "run_r_1");
        assert_eq!(content_id("run", 12), "run_c_12");
        assert_eq!(native_tool_id(3), "call_native_3");
    }

    #[test]
    fn run_id_is_lower_case_v4() {
        let id = new_run_id();
        assert_eq!(id.len(), 36);
        assert_eq!(id, id.to_lowercase());
        assert_eq!(id.as_bytes()[14], b'4');
        assert_eq!(canonical_uuid(&id), Some(id.clone()));
        assert_ne!(new_run_id(), id);
    }

    #[test]
    fn msg_id_is_m_and_8_lower_hex() {
        let id = new_msg_id();
        assert_eq!(id.len(), 10);
        assert!(id.starts_with("m_"), "{id}");
        assert!(id[2..].chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')), "{id}");
    }

    #[test]
    fn task_id_is_8_lower_hex() {
        let id = new_task_id();
        assert_eq!(id.len(), 8);
        assert!(id.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')), "{id}");
    }

    #[test]
    fn canonical_uuid_forms() {
        let canonical = "123e4567-e89b-12d3-a456-426614174000";
        for raw in [
            "123E4567-E89B-12D3-A456-426614174000",
            "123e4567e89b12d3a456426614174000",
            "{123e4567-e89b-12d3-a456-426614174000}",
        ] {
            assert_eq!(canonical_uuid(raw).as_deref(), Some(canonical), "{raw}");
        }
        for bad in ["", "not-a-uuid", "1-2-3-4-5", "123e4567-e89b-12d3-a456-42661417400g"] {
            assert_eq!(canonical_uuid(bad), None, "{bad}");
        }
    }

    #[test]
    fn chat_name_rules() {
        assert_eq!(chat_name("碳的简介，50字"), "碳的简介，50字");
        assert_eq!(chat_name("  a \t\n b   c  "), "a b c");
        assert_eq!(chat_name(" \n\t "), DEFAULT_CHAT_NAME);
        assert_eq!(chat_name(""), DEFAULT_CHAT_NAME);
        // 30 code points, not bytes: 40 CJK chars → 30 chars
        let long: String = "汉".repeat(40);
        assert_eq!(chat_name(&long).chars().count(), 30);
        assert_eq!(chat_name("0123456789ABCDEFGHI"), "0123456789ABCDEFGHI");
        // collapsing happens before truncation
        let spaced = format!("{}     {}", "a".repeat(28), "bcdef");
        assert_eq!(chat_name(&spaced), format!("{} b", "a".repeat(28)));
        // a space that would be the 31st code point is not written
        let exact = format!("{} tail", "x".repeat(30));
        assert_eq!(chat_name(&exact), "x".repeat(30));
    }
}
