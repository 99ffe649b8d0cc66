//! The tools of one stage: what is offered to the model, how calls are decorated, and the
//! tool appendix of the system prompt (`docs/contract/modes.md` §6.1).

use agw_llm::ToolSpec;
use agw_protocol::delta::{ActionStartMeta, FrontendMeta, ToolStartMeta};
use agw_tools::{ToolDef, ToolKind};

use crate::definition::{RuntimePrompts, StageKind};

use super::RunContext;

/// The enabled tools of one stage, sorted by name, de-duplicated.
#[derive(Debug, Clone, Default)]
pub struct StageToolSet {
    defs: Vec<ToolDef>,
}

impl StageToolSet {
    /// The stage's configured names that exist in the run's tool registry. Unknown names are
    /// dropped with a warning (they still show in `/agents`).
    pub fn for_stage(ctx: &RunContext, kind: StageKind) -> Self {
        let config = ctx.agent.stage_tools(kind);
        let mut defs: Vec<ToolDef> = Vec::new();
        for name in config.names() {
            match ctx.services.tools.get(name) {
                Some(def) if !defs.iter().any(|d| d.name == def.name) => defs.push(def.clone()),
                Some(_) => {}
                None => tracing::warn!(tool = name, agent = %ctx.agent.key, "agent names a tool that does not exist"),
            }
        }
        // MCP servers write their own tool definitions: together they may fill one request with
        // no more than `mcp_request_tool_bytes` (each server's are already capped per tool).
        let budget = ctx.services.mcp_request_tool_bytes;
        let mut mcp_bytes = 0usize;
        for selection in &config.mcp_servers {
            let Some(tools) = ctx.services.mcp_tools.get(&selection.server) else {
                tracing::warn!(server = %selection.server, agent = %ctx.agent.key, "agent names an MCP server that is not declared or has no tools yet");
                continue;
            };
            let wanted =
                |mcp_name: &str| selection.tools.as_ref().is_none_or(|names| names.iter().any(|n| n == mcp_name));
            let mut left_out: Vec<&str> = Vec::new();
            for (_, name) in tools.iter().filter(|(mcp_name, _)| wanted(mcp_name)) {
                if let Some(def) = ctx.services.tools.get(name).filter(|d| !defs.iter().any(|x| x.name == d.name)) {
                    let bytes = definition_bytes(def);
                    if mcp_bytes.saturating_add(bytes) > budget {
                        left_out.push(&def.name);
                        continue;
                    }
                    mcp_bytes += bytes;
                    defs.push(def.clone());
                }
            }
            if let Some(first) = left_out.first() {
                tracing::warn!(
                    server = %selection.server,
                    tool = %first,
                    not_offered = left_out.len(),
                    agent = %ctx.agent.key,
                    "MCP tools not offered: the MCP tool definitions of one model request would pass {budget} bytes"
                );
            }
        }
        if matches!(kind, StageKind::Plain | StageKind::React | StageKind::Execute) {
            if let Some(def) = super::invoke::tool_def(ctx).filter(|d| !defs.iter().any(|x| x.name == d.name)) {
                defs.push(def);
            }
            // A plan's task cannot be left half done: PLAN_EXECUTE agents do not hand over.
            if kind != StageKind::Execute {
                for def in super::handoff::tool_defs(ctx) {
                    if !defs.iter().any(|x| x.name == def.name) {
                        defs.push(def);
                    }
                }
            }
            for name in &ctx.services.client_tools {
                if let Some(def) = ctx.services.tools.get(name).filter(|d| !defs.iter().any(|x| x.name == d.name)) {
                    defs.push(def.clone());
                }
            }
        }
        defs.sort_by(|a, b| a.name.cmp(&b.name));
        Self { defs }
    }

    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.defs.iter().any(|d| d.name == name)
    }

    /// These tools and `other`'s, sorted by name, each once.
    pub fn with(&self, other: &StageToolSet) -> Self {
        let mut defs = self.defs.clone();
        defs.extend(other.defs.iter().filter(|d| !self.contains(&d.name)).cloned());
        defs.sort_by(|a, b| a.name.cmp(&b.name));
        Self { defs }
    }

    /// The subset of these tools named `name` (empty when it is not among them).
    pub fn only(&self, name: &str) -> Self {
        Self { defs: self.defs.iter().filter(|d| d.name == name).cloned().collect() }
    }

    /// The tools, sorted by name.
    pub fn defs(&self) -> &[ToolDef] {
        &self.defs
    }

    pub fn get(&self, name: &str) -> Option<&ToolDef> {
        self.defs.iter().find(|d| d.name == name)
    }

    /// `- <name>: <description>` for every BACKEND tool with a description, sorted by name.
    pub fn backend_description_lines(&self) -> Vec<String> {
        self.defs
            .iter()
            .filter(|d| d.kind == ToolKind::Backend && !d.description.trim().is_empty())
            .map(|d| format!("- {}: {}", d.name, d.description.trim()))
            .collect()
    }

    /// `tools[]` of the provider request.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.defs
            .iter()
            .map(|d| ToolSpec {
                name: d.name.clone(),
                description: d.description.clone(),
                parameters: d.parameters.clone(),
            })
            .collect()
    }

    /// Tool descriptions and after-call hints of BACKEND tools (frontend and action tools are
    /// only offered through `tools`). `with_hints` is false in plan-draft/plan-generate turns.
    pub fn appendix(&self, prompts: &RuntimePrompts, with_hints: bool) -> (String, String) {
        let backend = || self.defs.iter().filter(|d| d.kind == ToolKind::Backend);
        let section = |title: &str, lines: Vec<String>| {
            if lines.is_empty() { String::new() } else { format!("{title}\n{}", lines.join("\n")) }
        };
        let descriptions = self.backend_description_lines();
        let hints = if with_hints {
            backend()
                .filter(|d| !d.after_call_hint.trim().is_empty())
                .map(|d| format!("- {}: {}", d.name, d.after_call_hint.trim()))
                .collect()
        } else {
            Vec::new()
        };
        (section(&prompts.tool_description_title, descriptions), section(&prompts.after_call_hint_title, hints))
    }
}

/// What a tool's definition adds to a model request: its name, description and schema.
fn definition_bytes(def: &ToolDef) -> usize {
    let schema = serde_json::to_vec(&def.parameters).map_or(0, |json| json.len());
    def.name.len() + def.description.len() + schema
}

/// How a call shows up in the stream, decided from the tool registry by name.
pub enum Decoration {
    Tool(ToolStartMeta),
    Action(ActionStartMeta),
}

/// Registry decoration for a call named `raw_name` (as the model sent it).
pub fn decorate(ctx: &RunContext, raw_name: &str) -> Decoration {
    let name = raw_name.trim().to_lowercase();
    let tools = &ctx.services.tools;
    let def = tools.get(&name);
    let description = def.map(|d| d.description.trim().to_string()).filter(|d| !d.is_empty());
    match tools.kind_of(&name) {
        ToolKind::Action => Decoration::Action(ActionStartMeta { action_name: raw_name.to_string(), description }),
        ToolKind::Frontend => {
            let key = def.and_then(|d| d.viewport_key.clone()).unwrap_or_else(|| name.clone());
            let tool_type = ctx
                .services
                .viewports
                .get(&key)
                .map_or_else(|| "html".to_string(), |v| v.viewport_type_str().to_string());
            Decoration::Tool(ToolStartMeta {
                tool_name: raw_name.to_string(),
                tool_type,
                tool_api: def.and_then(|d| d.tool_api.clone()),
                description,
                frontend: Some(FrontendMeta {
                    tool_key: key,
                    tool_timeout: (ctx.services.frontend_timeout.as_millis() as u64).max(1),
                }),
            })
        }
        ToolKind::Backend => Decoration::Tool(plain_tool_meta(ctx, raw_name)),
    }
}

/// A call shown as a plain function call, whatever its kind: a backend tool, or a frontend tool
/// or action that was refused before the client saw it (nothing to render, nothing to perform).
pub fn plain_tool_meta(ctx: &RunContext, raw_name: &str) -> ToolStartMeta {
    let def = ctx.services.tools.get(&raw_name.trim().to_lowercase());
    ToolStartMeta {
        tool_name: raw_name.to_string(),
        tool_type: "function".into(),
        tool_api: def.and_then(|d| d.tool_api.clone()),
        description: def.map(|d| d.description.trim().to_string()).filter(|d| !d.is_empty()),
        frontend: None,
    }
}
