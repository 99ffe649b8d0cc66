//! `mock_chat_messages` (agw, issue 35): the messages of a demo team chat, as records a model can
//! cite (`citations` in its definition). Fixed data: the design document's example of a week of
//! feedback, so an offline demo and the tests show citations with known ids.

use serde_json::{Value, json};

pub(crate) const NAME: &str = "mock_chat_messages";

/// The demo chat's id.
const CHAT_ID: &str = "11200463399";

/// `(messageId, senderName, senderId, timestamp, content)`.
const MESSAGES: [(&str, &str, &str, i64, &str); 5] = [
    ("361", "Coral", "123456", 1_736_985_600_000, "The translation in the input box cannot be turned off"),
    ("362", "Coral", "123456", 1_736_985_660_000, "With translation on, typing pinyin keeps triggering translation"),
    ("401", "Mandy", "789012", 1_736_990_000_000, "Voice to text is not accurate"),
    ("431", "Mason", "345678", 1_737_000_000_000, "Sent some design change suggestions; can we review them on Monday?"),
    ("432", "Mason", "345678", 1_737_000_060_000, "The new icons are in the shared folder"),
];

/// Every message of the demo chat: they are all within the week, so `days` changes nothing.
pub(crate) fn run(_arguments: &Value) -> Value {
    let messages: Vec<Value> = MESSAGES
        .iter()
        .map(|(id, sender, sender_id, ts, content)| {
            json!({"messageId": id, "senderName": sender, "senderId": sender_id, "timestamp": ts,
                "content": content, "chatId": CHAT_ID})
        })
        .collect();
    json!({"chatId": CHAT_ID, "total": messages.len(), "messages": messages})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_fixed_records() {
        let all = run(&json!({}));
        assert_eq!(all["total"], 5);
        assert_eq!(all["messages"][0]["messageId"], "361");
        assert_eq!(all["messages"][0]["chatId"], CHAT_ID);
        assert_eq!(run(&json!({"days": 1})), all);
    }
}
