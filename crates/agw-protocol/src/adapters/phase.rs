//! agw events → the phase stream (issue 35, docs/protocols.md "The phase stream"): one JSON
//! object `{type, phase, data}` per line, for mobile and chat-app clients that show the phase a
//! run is in and nothing of its inner structure.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// What a run is doing, as the phase stream tells a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// The model is working out the question (its reasoning, the wait before its first words).
    Thinking,
    /// Tools run.
    ToolCalling,
    /// The answer streams.
    Generating,
    /// The run ended normally.
    Completed,
    /// The run failed.
    Error,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 5] =
        [Phase::Thinking, Phase::ToolCalling, Phase::Generating, Phase::Completed, Phase::Error];

    /// The wire name (`tool_calling`).
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Thinking => "thinking",
            Phase::ToolCalling => "tool_calling",
            Phase::Generating => "generating",
            Phase::Completed => "completed",
            Phase::Error => "error",
        }
    }

    /// The phase of a wire name.
    pub fn parse(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// The built-in messages: the design document's (Chinese), and English.
fn built_in(lang: &str, phase: Phase) -> Option<&'static str> {
    Some(match (lang, phase) {
        ("zh", Phase::Thinking) => "正在分析您的问题...",
        ("zh", Phase::ToolCalling) => "正在查询数据...",
        ("zh", Phase::Generating) => "正在整理答案...",
        ("zh", Phase::Completed) => "回答完成",
        ("zh", Phase::Error) => "出错了",
        ("en", Phase::Thinking) => "Analyzing your question...",
        ("en", Phase::ToolCalling) => "Looking up data...",
        ("en", Phase::Generating) => "Writing the answer...",
        ("en", Phase::Completed) => "Done",
        ("en", Phase::Error) => "Something went wrong",
        _ => return None,
    })
}

/// The language the built-in messages default to: the design document's.
pub const DEFAULT_LANGUAGE: &str = "zh";

/// The `message` of each `phase_change`, per language: an agent's own (`phaseStream.messages`
/// in its definition) over the built-in ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhaseMessages {
    /// Language tag (lower-case; `*` for any language) → phase → message.
    own: BTreeMap<String, BTreeMap<Phase, String>>,
}

impl PhaseMessages {
    /// An agent's messages: language tag → phase → message.
    pub fn new(own: BTreeMap<String, BTreeMap<Phase, String>>) -> Self {
        let own = own.into_iter().map(|(lang, messages)| (lang.to_ascii_lowercase(), messages)).collect();
        Self { own }
    }

    /// Whether the agent set none.
    pub fn is_empty(&self) -> bool {
        self.own.is_empty()
    }

    /// The message for `phase` in `lang` (a tag such as `en-US`; `None`: the default language):
    /// the agent's for the tag, its primary subtag, or `*`; else the built-in one for the
    /// language, else the built-in default language's.
    pub fn message(&self, lang: Option<&str>, phase: Phase) -> String {
        let tag = lang.map(str::to_ascii_lowercase).unwrap_or_else(|| DEFAULT_LANGUAGE.to_owned());
        let primary = tag.split(['-', '_']).next().unwrap_or_default().to_owned();
        for key in [tag.as_str(), primary.as_str(), "*"] {
            if let Some(message) = self.own.get(key).and_then(|m| m.get(&phase)) {
                return message.clone();
            }
        }
        built_in(&primary, phase).or_else(|| built_in(DEFAULT_LANGUAGE, phase)).unwrap_or_default().to_owned()
    }
}
