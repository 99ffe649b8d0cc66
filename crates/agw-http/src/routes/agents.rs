//! `GET /api/ap/agents` and `GET /api/ap/agent` (`docs/contract/http-api.md` §1–§2).

use std::collections::HashMap;

use serde::Serialize;

use agw_modes::definition::AgentDefinition;

use super::HandlerResult;
use crate::envelope::{ApiError, success};
use crate::state::AppState;

#[derive(Serialize)]
struct Meta<'a> {
    model: String,
    mode: String,
    icon: Option<&'a str>,
    tools: Vec<String>,
    skills: &'a [String],
}

#[derive(Serialize)]
struct Summary<'a> {
    key: &'a str,
    name: &'a str,
    description: &'a str,
    /// Always `null` in the contract.
    capabilities: Option<()>,
    meta: Meta<'a>,
}

#[derive(Serialize)]
struct Detail<'a> {
    key: &'a str,
    name: &'a str,
    description: &'a str,
    instructions: &'a str,
    capabilities: Option<()>,
    meta: Meta<'a>,
    /// agw: the agent's tools that wait for a person's answer (`POST /api/ap/submit`), so a
    /// client (the console, `agw eval record`) knows which calls a person answered.
    #[serde(rename = "frontendTools")]
    frontend_tools: Vec<String>,
}

fn meta<'a>(state: &AppState, agent: &'a AgentDefinition) -> Meta<'a> {
    let provider_default = state.catalogs().providers.default_model(&agent.agent_provider_key());
    let mut tools = agent.tool_names();
    // agw: the tools of the MCP servers the agent opts into, as they are offered now.
    if let Some(mcp) = &state.mcp {
        tools.extend(mcp.tool_names_for(agent));
    }
    Meta {
        model: agent.agent_model(provider_default.as_deref()),
        mode: agent.mode_kind().to_string(),
        icon: agent.icon.as_deref(),
        tools,
        skills: &agent.skills,
    }
}

pub fn list(state: &AppState, params: &HashMap<String, String>) -> HandlerResult {
    let catalog = state.catalogs().agents.load();
    let tag = params.get("tag").map(|t| t.trim().to_lowercase()).filter(|t| !t.is_empty());
    let items: Vec<Summary> = catalog
        .iter()
        .filter(|agent| match &tag {
            None => true,
            Some(tag) => {
                agent.key.to_lowercase().contains(tag)
                    || agent.description.to_lowercase().contains(tag)
                    || agent.tool_names().iter().any(|t| t.contains(tag))
                    || agent.skills.iter().any(|s| s.contains(tag))
            }
        })
        .map(|agent| Summary {
            key: &agent.key,
            name: &agent.name,
            description: &agent.description,
            capabilities: None,
            meta: meta(state, agent),
        })
        .collect();
    Ok(success(&items))
}

pub fn detail(state: &AppState, params: &HashMap<String, String>) -> HandlerResult {
    let key = params.get("agentKey").ok_or_else(|| ApiError::bad_request("agentKey is required"))?;
    let catalog = state.catalogs().agents.load();
    let agent = catalog.get(key).ok_or_else(|| ApiError::not_found(format!("agent not found: {key}")))?;
    Ok(success(&Detail {
        key: &agent.key,
        name: &agent.name,
        description: &agent.description,
        instructions: agent.primary_system_prompt(),
        capabilities: None,
        meta: meta(state, &agent),
        frontend_tools: {
            let tools = state.catalogs().tools.load();
            agent.tool_names().into_iter().filter(|t| tools.kind_of(t) == agw_tools::ToolKind::Frontend).collect()
        },
    }))
}
