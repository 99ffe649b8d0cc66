//! The evalset format (docs/evals.md): `{"version": 1, "name", "agentKey"?, "thresholds"?,
//! "cases": [...]}`, every key camelCase, unknown keys refused (a typo must not turn a check
//! off).

use serde::Deserialize;
use serde_json::Value;

/// The format version this crate reads.
pub const EVALSET_VERSION: u32 = 1;

/// Why an evalset cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum EvalSetError {
    /// Not JSON of the format; serde's message names the key and the place.
    #[error("not an evalset: {0}")]
    Format(#[from] serde_json::Error),
    /// Another version of the format.
    #[error("evalset version {0} is not supported (this agw reads version 1)")]
    Version(u32),
    /// A rule the types cannot say (a case without an agent, two cases with one id, …).
    #[error("case {case}: {reason}")]
    Case {
        /// The case's id.
        case: String,
        /// What is wrong.
        reason: String,
    },
}

/// One evalset: cases run against agents, with the set's pass thresholds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EvalSet {
    /// [`EVALSET_VERSION`].
    pub version: u32,
    /// A name for reports.
    pub name: String,
    /// The agent of cases that name none.
    #[serde(default)]
    pub agent_key: Option<String>,
    /// What the set as a whole must reach.
    #[serde(default)]
    pub thresholds: Thresholds,
    /// The cases, in order.
    pub cases: Vec<Case>,
}

/// A set's pass thresholds.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Thresholds {
    /// Share of cases that must pass, 0..=1 (default 1: all).
    #[serde(default = "one")]
    pub pass_rate: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self { pass_rate: 1.0 }
    }
}

fn one() -> f64 {
    1.0
}

/// One case: the user's turns to one agent, and what must come of them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Case {
    /// Unique in the set.
    pub id: String,
    /// The agent; else the set's.
    #[serde(default)]
    pub agent_key: Option<String>,
    /// The user's turns, in order (a multi-turn case continues one chat).
    pub turns: Vec<Turn>,
    /// What the last turn's run must do.
    #[serde(default)]
    pub expect: Expectations,
}

/// One user turn, with the answers a person would give to what its run waits for.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Turn {
    /// The user's message.
    pub message: String,
    /// Answers to what the run waits for (frontend tools, approvals, paused tools), in the order
    /// it asks.
    #[serde(default)]
    pub answers: Vec<ToolAnswer>,
}

/// A person's answer to one wait of a run.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolAnswer {
    /// The tool that waits (`confirm_dialog`, `mock_city_weather` for its approval).
    pub tool: String,
    /// What `POST /api/ap/submit` sends as `params` (`{"decision": "once"}`, the form's values).
    pub params: Value,
}

/// What a case expects.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expectations {
    /// The tool calls.
    #[serde(default)]
    pub trajectory: Option<TrajectoryExpectation>,
    /// The final answer.
    #[serde(default)]
    pub answer: Option<AnswerExpectation>,
    /// Most steps, tokens, cost and time.
    #[serde(default)]
    pub limits: Option<Limits>,
    /// A rubric an agent judges the answer by.
    #[serde(default)]
    pub judge: Option<JudgeExpectation>,
}

/// A rubric judged by an agent: the judge is asked, with an output schema, for a score from 0 to
/// 1 and its reason.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JudgeExpectation {
    /// The agent that judges (any agent key).
    pub agent_key: String,
    /// What a good answer is.
    pub rubric: String,
    /// Least score that passes (default 0.5).
    #[serde(default = "half")]
    pub threshold: f64,
}

/// The expected tool calls and how they are compared.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrajectoryExpectation {
    /// The calls, in the order expected.
    pub calls: Vec<ExpectedCall>,
    /// `exact` (default), `inOrder` or `anyOrder`.
    #[serde(default)]
    pub order: Order,
    /// Least score (0..=1) that passes; default 1.
    #[serde(default = "one")]
    pub threshold: f64,
}

/// How the observed calls are compared with the expected ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Order {
    /// The same calls, in the same order, nothing else.
    #[default]
    Exact,
    /// The expected calls appear in this order; other calls may come between them.
    InOrder,
    /// The expected calls appear, in any order; others may come too.
    AnyOrder,
}

/// One expected call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedCall {
    /// The tool's name.
    pub name: String,
    /// Its arguments; absent: any.
    #[serde(default)]
    pub args: Option<Value>,
    /// How `args` is compared: `exact` (default), `subset` (every expected key, recursively), or
    /// `schema` (`args` is a JSON Schema the arguments must match).
    #[serde(default)]
    pub args_match: ArgsMatch,
}

/// How expected arguments are compared.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ArgsMatch {
    /// Equal JSON.
    #[default]
    Exact,
    /// Every key the expectation has, with the same value (objects compared the same way).
    Subset,
    /// The expectation is a JSON Schema.
    Schema,
}

/// Checks of the final answer; every one given must pass.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AnswerExpectation {
    /// Texts the answer contains (case-sensitive).
    #[serde(default)]
    pub contains: Vec<String>,
    /// A regular expression the answer matches (Rust `regex` syntax).
    #[serde(default)]
    pub regex: Option<String>,
    /// The whole answer, whitespace at the ends ignored.
    #[serde(default)]
    pub equals: Option<String>,
    /// A reference answer, compared by ROUGE-1 F (token overlap)…
    #[serde(default)]
    pub reference: Option<String>,
    /// …which must reach this (default 0.5).
    #[serde(default = "half")]
    pub rouge1_threshold: f64,
    /// A JSON Schema the answer (parsed as JSON; the run's structured output when it has one)
    /// must match.
    #[serde(default)]
    pub schema: Option<Value>,
}

fn half() -> f64 {
    0.5
}

/// Most a run may use.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Limits {
    /// Model calls.
    #[serde(default)]
    pub steps: Option<u64>,
    /// Input and output tokens together.
    #[serde(default)]
    pub tokens: Option<u64>,
    /// Cost, in the prices' currency.
    #[serde(default)]
    pub cost: Option<f64>,
    /// Wall time from the query to the run's end, in milliseconds.
    #[serde(default)]
    pub wall_ms: Option<u64>,
}

impl EvalSet {
    /// Reads an evalset.
    ///
    /// # Errors
    /// Not the format, another version, or a case that breaks a rule.
    pub fn from_json(text: &str) -> Result<Self, EvalSetError> {
        let set: EvalSet = serde_json::from_str(text)?;
        if set.version != EVALSET_VERSION {
            return Err(EvalSetError::Version(set.version));
        }
        let mut seen = std::collections::HashSet::new();
        for case in &set.cases {
            let bad = |reason: &str| EvalSetError::Case { case: case.id.clone(), reason: reason.to_owned() };
            if !seen.insert(case.id.as_str()) {
                return Err(bad("another case has this id"));
            }
            if case.agent_key.is_none() && set.agent_key.is_none() {
                return Err(bad("names no agent, and the set has no agentKey"));
            }
            if case.turns.is_empty() {
                return Err(bad("has no turns"));
            }
            if let Some(answer) = &case.expect.answer
                && let Some(pattern) = &answer.regex
                && let Err(e) = regex::Regex::new(pattern)
            {
                return Err(bad(&format!("answer.regex does not compile: {e}")));
            }
        }
        Ok(set)
    }

    /// The agent of `case`.
    pub fn agent_of<'a>(&'a self, case: &'a Case) -> &'a str {
        case.agent_key.as_deref().or(self.agent_key.as_deref()).unwrap_or_default()
    }
}
