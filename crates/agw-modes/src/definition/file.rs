//! An agent file as a program writes it: the schema's keys as typed fields, serialised in the
//! contract's key order (struct order IS key order; do not reorder), with the enum names the
//! parser reads. Whatever is written is checked by [`AgentDefinition::from_json`], the parser that
//! loads agent files, so a written file is never judged by a second set of rules.

use agw_llm::ReasoningEffort;
use serde::Serialize;

use super::agent::AgentDefinition;
use super::error::DefinitionError;
use super::model::{AgentMode, ToolChoicePolicy};

/// The top level of an agent file. Only what a writer sets is written; everything left out takes
/// the loader's default (provider and model included).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentFile {
    pub key: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub icon: Option<String>,
    pub description: String,
    pub mode: AgentMode,
    /// Always written: the loader requires a `modelConfig`, even an empty one.
    pub model_config: ModelConfigFile,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_config: Option<ToolConfigFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skill_config: Option<SkillConfigFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoicePolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<BudgetFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plain: Option<StageFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub react: Option<ReactFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_execute: Option<PlanExecuteFile>,
}

/// `modelConfig`; `providerKey` and `model` absent mean the loader's defaults.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModelConfigFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(rename = "top_p", skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    #[serde(rename = "max_tokens", skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<i64>,
}

/// `modelConfig.reasoning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub(crate) struct ReasoningFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
}

/// `toolConfig`: all three lists written, even when empty.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub(crate) struct ToolConfigFile {
    pub backends: Vec<String>,
    pub frontends: Vec<String>,
    pub actions: Vec<String>,
}

/// `skillConfig`. `allowInlineCode` is not a field: granting inline code is the operator's
/// decision, so a written file never has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct SkillConfigFile {
    pub skills: Vec<String>,
}

/// `budget`, the v2 keys only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BudgetFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_timeout_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<BudgetScopeFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<BudgetScopeFile>,
}

/// `budget.model` / `budget.tool`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BudgetScopeFile {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_calls: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_count: Option<i64>,
}

/// A stage block with its prompt only (`plain`, `planExecute.plan|execute|summary`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StageFile {
    pub system_prompt: String,
}

/// `react`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReactFile {
    pub system_prompt: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<i64>,
}

/// `planExecute`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PlanExecuteFile {
    pub plan: StageFile,
    pub execute: StageFile,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<StageFile>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<i64>,
}

impl AgentFile {
    /// The file's text: two-space indented JSON with `"key" : value` (as the reference writes
    /// agent files) and a final newline.
    pub fn to_text(&self) -> String {
        let mut out = Vec::new();
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, SpacedColonFormatter::default());
        self.serialize(&mut serializer).expect(INFALLIBLE);
        out.push(b'\n');
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The file as a JSON value (the key order of [`Self::to_text`]).
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).expect(INFALLIBLE)
    }

    /// Reads [`Self::to_text`] back with the loader's own parser: the definition the catalog
    /// will load from this file, or why it would skip it.
    pub fn load(&self) -> Result<(String, AgentDefinition), DefinitionError> {
        let text = self.to_text();
        let definition = AgentDefinition::from_json(&format!("{}.json", self.key), &text)?;
        Ok((text, definition))
    }
}

/// Why serialising cannot fail: plain structs with string keys, written into memory.
const INFALLIBLE: &str = "an agent file serialises into memory";

/// serde_json's pretty formatter with a space before the colon.
#[derive(Default)]
struct SpacedColonFormatter<'a>(serde_json::ser::PrettyFormatter<'a>);

impl serde_json::ser::Formatter for SpacedColonFormatter<'_> {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b" : ")
    }
    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal(mode: AgentMode) -> AgentFile {
        AgentFile {
            key: "k".into(),
            name: "k".into(),
            icon: None,
            description: "d".into(),
            mode,
            model_config: ModelConfigFile::default(),
            tool_config: None,
            skill_config: None,
            tool_choice: None,
            budget: None,
            plain: None,
            react: None,
            plan_execute: None,
        }
    }

    #[test]
    fn pretty_printing() {
        let mut file = minimal(AgentMode::Oneshot);
        file.tool_config = Some(ToolConfigFile { backends: vec!["a".into(), "b".into()], ..Default::default() });
        file.plain = Some(StageFile { system_prompt: "p".into() });
        assert_eq!(
            file.to_text(),
            "{\n  \"key\" : \"k\",\n  \"name\" : \"k\",\n  \"description\" : \"d\",\n  \"mode\" : \"ONESHOT\",\n  \
             \"modelConfig\" : {},\n  \"toolConfig\" : {\n    \"backends\" : [\n      \"a\",\n      \"b\"\n    ],\n    \
             \"frontends\" : [],\n    \"actions\" : []\n  },\n  \"plain\" : {\n    \"systemPrompt\" : \"p\"\n  }\n}\n"
        );
    }

    #[test]
    fn enums_are_written_as_the_parser_reads_them() {
        let mut file = minimal(AgentMode::PlanExecute);
        file.tool_choice = Some(ToolChoicePolicy::Required);
        file.model_config.reasoning = Some(ReasoningFile { enabled: Some(true), effort: Some(ReasoningEffort::High) });
        file.plan_execute = Some(PlanExecuteFile {
            plan: StageFile { system_prompt: "p".into() },
            execute: StageFile { system_prompt: "e".into() },
            summary: None,
            max_steps: Some(3),
        });
        let value = file.to_value();
        assert_eq!(value["mode"], "PLAN_EXECUTE");
        assert_eq!(value["toolChoice"], "REQUIRED");
        assert_eq!(value["modelConfig"], json!({"reasoning":{"enabled":true,"effort":"HIGH"}}));
        let (_, definition) = file.load().unwrap();
        assert_eq!(definition.mode_kind(), AgentMode::PlanExecute);
        assert_eq!(definition.tool_choice, ToolChoicePolicy::Required);
        let model = definition.model_config.unwrap().reasoning.unwrap();
        assert_eq!((model.enabled, model.effort), (true, ReasoningEffort::High));
    }

    #[test]
    fn what_the_loader_refuses_is_refused() {
        // A mode without its block: the loader's own rule, not one of the writer's.
        let error = minimal(AgentMode::React).load().unwrap_err();
        assert_eq!(error, DefinitionError::MissingPrompt("react.systemPrompt is required"));
    }
}
