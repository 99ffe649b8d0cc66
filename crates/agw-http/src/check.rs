//! `agw check`: validate a configuration and its directories without serving.

use std::collections::BTreeSet;

use agw_modes::definition::{AgentCatalog, GuardLists, GuardRef, StageKind};

use crate::config::Settings;

/// How bad a finding is: errors make `agw check` exit non-zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Probably a mistake; the configuration still serves.
    Warning,
    /// The server would refuse to start, or the file would be skipped.
    Error,
}

/// One finding, with the file (or setting) it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// How bad it is.
    pub severity: Severity,
    /// The file (or setting) the finding is about.
    pub file: String,
    /// What is wrong, in one line.
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let level = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{level}: {}: {}", self.file, self.message)
    }
}

/// Loads every catalog the way the server would and reports every problem.
pub fn check(settings: &Settings) -> Vec<Finding> {
    // Checking must not write: no copying of bundled resources into the directories.
    let mut settings = settings.clone();
    settings.resources.sync_bundled = false;
    let mut out: Vec<Finding> = settings
        .warnings
        .iter()
        .map(|w| Finding { severity: Severity::Warning, file: "environment".into(), message: w.to_string() })
        .collect();
    let state = match crate::build_state(settings) {
        Ok(state) => state,
        Err(e) => {
            out.push(Finding { severity: Severity::Error, file: "environment".into(), message: e.to_string() });
            return out;
        }
    };
    let mut error = |file: &str, message: String| {
        out.push(Finding { severity: Severity::Error, file: file.to_string(), message });
    };
    let agents = state.catalogs().agents.load();
    for p in agents.problems() {
        error(&p.file, p.message.clone());
    }
    for p in state.catalogs().tools.load().problems() {
        error(&p.file, p.message.clone());
    }
    for p in state.catalogs().viewports.load().problems() {
        error(&p.file, p.message.clone());
    }
    for p in state.catalogs().skills.load().problems() {
        error(&p.file, p.message.clone());
    }
    if let Some(dir) = &state.settings.guardrails.rules.dir {
        for problem in agw_guard::GuardCatalog::load_dir(dir).1 {
            error(&dir.display().to_string(), problem.to_string());
        }
    }
    let defaults = &state.settings.guardrails.guards.defaults;
    for problem in guard_problems("agw.guardrails", defaults, &agents, &state) {
        error("agw.guardrails", problem);
    }
    for agent in agents.iter() {
        for problem in guard_problems(&format!("agent {}", agent.key), &agent.guardrails.lists, &agents, &state) {
            error(&agent.source_file, problem);
        }
    }
    let mut declared: Option<Vec<String>> = None;
    if let Some(dir) = &state.settings.resources.mcp_dir {
        let (configs, problems) = agw_mcp::load_dir(dir);
        for p in problems {
            error(&p.file, p.message);
        }
        for (config, result) in connect_all(&configs, state.settings.mcp.limits) {
            let file = config.source.as_ref().map_or_else(|| config.name.clone(), |p| p.display().to_string());
            if let Err(reason) = result {
                error(&file, format!("MCP server {:?} could not be started: {reason}", config.name));
            }
        }
        declared = Some(configs.into_iter().map(|c| c.name).collect());
    }
    out.extend(references(&agents, &state));
    // Agents that opt into MCP servers nobody declared.
    for agent in agents.iter() {
        let kinds = [StageKind::Plain, StageKind::React, StageKind::Plan, StageKind::Execute, StageKind::Summary];
        let servers: BTreeSet<String> =
            kinds.into_iter().flat_map(|k| agent.stage_tools(k).mcp_servers).map(|s| s.server).collect();
        for server in servers {
            if !declared.as_ref().is_some_and(|names| names.contains(&server)) {
                out.push(Finding {
                    severity: Severity::Warning,
                    file: agent.source_file.clone(),
                    message: format!(
                        "agent {} names MCP server {server:?}, which is not declared in AGENT_MCP_EXTERNAL_DIR",
                        agent.key
                    ),
                });
            }
        }
    }
    let sandbox = &state.settings.sandbox;
    if !sandbox.support.confines() {
        // Not an error: the server runs; its code tools are refused (or, accepted, unconfined).
        out.push(Finding { severity: Severity::Warning, file: "agw.sandbox".into(), message: sandbox.report() });
    }
    // Not errors either: the server runs, and only that tool's calls fail (saying why).
    for root in crate::code_roots::unreadable(&state.settings) {
        out.push(Finding { severity: Severity::Warning, file: root.setting.into(), message: root.to_string() });
    }
    out.sort_by(|a, b| (b.severity, &a.file).cmp(&(a.severity, &b.file)));
    out
}

/// Guards that name rule sets or judge agents that do not exist (runs fail on them), and a
/// `webhook` guard without a configured webhook (its checks get no verdict).
fn guard_problems(who: &str, lists: &GuardLists, agents: &AgentCatalog, state: &crate::AppState) -> Vec<String> {
    let rules = state.catalogs().guard_rules.load();
    let mut out: Vec<String> = agw_modes::runtime::missing_rule_sets(lists, &rules)
        .into_iter()
        .map(|set| format!("{who} names guard rules:{set}, which is not in the guardrails catalog"))
        .collect();
    for guard in lists.all() {
        match guard {
            GuardRef::Judge(key) if agents.get(key).is_none() => {
                out.push(format!("{who} names guard judge:{key}, which is not a loaded agent"));
            }
            GuardRef::Webhook if state.settings.guardrails.guards.webhook.is_none() => {
                out.push(format!("{who} names guard webhook, but agw.guardrails.webhook.url is not set"));
            }
            _ => {}
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Agents that name providers, tools or skills that do not exist.
fn references(agents: &AgentCatalog, state: &crate::AppState) -> Vec<Finding> {
    let mut out = Vec::new();
    let tools = state.catalogs().tools.load();
    let skills = state.catalogs().skills.load();
    for agent in agents.iter() {
        let mut providers = BTreeSet::new();
        for kind in [StageKind::Plain, StageKind::React, StageKind::Plan, StageKind::Execute, StageKind::Summary] {
            if agent.stage(kind).is_some() {
                // A fallback's provider is checked like the stage's own: it is called the same way.
                let model = agent.resolve_model(kind, |k| state.catalogs().providers.default_model(k));
                providers.extend(model.fallbacks.into_iter().map(|f| f.provider_key));
                providers.insert(model.provider_key);
            }
        }
        for key in providers {
            if state.catalogs().providers.get(&key).is_err() {
                out.push(Finding {
                    severity: Severity::Error,
                    file: agent.source_file.clone(),
                    message: format!(
                        "agent {} uses provider {key:?}, which is not configured (AGENT_PROVIDERS_{}_BASE_URL / _API_KEY / _MODEL)",
                        agent.key,
                        key.to_uppercase()
                    ),
                });
            }
        }
        for tool in agent.tool_names() {
            if tools.get(&tool).is_none() {
                out.push(Finding {
                    severity: Severity::Warning,
                    file: agent.source_file.clone(),
                    message: format!("agent {} names tool {tool:?}, which does not exist", agent.key),
                });
            }
        }
        for skill in &agent.skills {
            if skills.get(skill).is_none() {
                out.push(Finding {
                    severity: Severity::Warning,
                    file: agent.source_file.clone(),
                    message: format!("agent {} names skill {skill:?}, which does not exist", agent.key),
                });
            }
        }
        for sub_agent in agent.sub_agents.iter().filter(|key| agents.get(key).is_none()) {
            out.push(Finding {
                severity: Severity::Warning,
                file: agent.source_file.clone(),
                message: format!("agent {} lists sub-agent {sub_agent:?}, which is not loaded", agent.key),
            });
        }
    }
    out
}

/// Connects to every enabled MCP server once (each within its `connectMs`), lists its tools
/// (within `limits`, as a run would) and stops it: a server that cannot start is an error of
/// `agw check`, with the reason. On a thread of its own: `check` is synchronous and may be called
/// inside a Tokio runtime.
fn connect_all(
    configs: &[agw_mcp::McpServerConfig],
    limits: agw_mcp::McpLimits,
) -> Vec<(&agw_mcp::McpServerConfig, Result<usize, String>)> {
    let enabled: Vec<&agw_mcp::McpServerConfig> = configs.iter().filter(|c| c.enabled).collect();
    if enabled.is_empty() {
        return Vec::new();
    }
    let owned: Vec<agw_mcp::McpServerConfig> = enabled.iter().map(|c| (*c).clone()).collect();
    let results = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        Ok::<_, String>(runtime.block_on(futures::future::join_all(owned.iter().map(|config| async move {
            agw_mcp::check_with(config, agw_mcp::process_env(), limits)
                .await
                .map(|tools| tools.len())
                .map_err(|e| e.to_string())
        }))))
    })
    .join()
    .unwrap_or_else(|_| Err("the check thread panicked".to_owned()));
    match results {
        Ok(results) => enabled.into_iter().zip(results).collect(),
        Err(reason) => enabled.into_iter().map(|c| (c, Err(reason.clone()))).collect(),
    }
}
