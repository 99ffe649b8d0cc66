//! agw-http — the gateway's edge: everything between a socket (or stdio) and the run service.
//!
//! Owns: settings (TOML file + environment, [`config::SETTINGS`]) and their builder; the door
//! (Host allow-list, the cross-site rule, CORS, per-client limits, auth); reading bodies and the
//! `{code,msg,data}` envelope; one module per protocol — native (`routes::query`, `runs`,
//! `submit`, `compact`), AI SDK, AG-UI, OpenAI, the MCP server — each decoding a request, calling
//! [`runs::RunService`] and mapping its [`runs::RunError`] to a status; the SSE response body
//! with heartbeats; reloading catalogs; the MCP client glue; OpenTelemetry and Prometheus; the
//! browser console's static files ([`console`], which call the API like any client); and
//! [`Gateway`], which starts and stops all of it in one order.
//!
//! Must never: keep a run's state or decide a run's life (the run service does: a run outlives
//! its connection by design), contain mode logic, provider wire formats or event-shaping rules
//! (agw-modes, agw-llm, agw-protocol), or merge stream frames; give the console an endpoint of
//! its own (it is a client of the public API).

#![forbid(unsafe_code)]
// What an embedder reaches is re-exported below or lives in one of the `pub` modules; the rest
// is the edge's own machinery.
mod a2a_agents;
pub mod auth;
mod body;
pub mod check;
mod code_roots;
pub mod config;
pub mod console;
mod cors;
mod cross_site;
mod envelope;
mod gateway;
mod hosts;
mod limits;
mod mcp;
mod mcp_server;
pub mod metrics;
pub mod reload;
mod request;
pub mod routes;
mod server;
mod state;
mod sync;
pub mod telemetry;

/// The run core: the run service the routes call ([`runs::RunService`]), its registry, quotas
/// and webhook.
pub use agw_runs as runs;

use std::sync::Arc;

use agw_demo::{DEMO_MODEL, DEMO_PROVIDER_KEY, DemoProvider};
use agw_llm::ProviderRegistry;
use agw_modes::definition::{
    AgentCatalog, AgentFileCreate, AgentFileCreateConfig, AgentLookup, DEFAULT_GRANTABLE_TOOLS,
};
use agw_skills::{SkillRegistry, SkillRunScript, SkillScriptConfig};
use agw_tools::ToolRegistry;
use agw_tools::builtin::{BashConfig, BuiltinsConfig, builtins};
use agw_tools::viewport::ViewportRegistry;
use arc_swap::ArcSwap;

pub use body::BoxBody;
pub use config::Settings;
pub use gateway::{Gateway, Reload};
pub use mcp_server::McpServeError;
pub use server::Server;
pub use state::{AppState, Catalogs};

/// Opens the chat store the settings name: PostgreSQL with `agw.database.url` (connects and
/// applies the schema's migrations — on a thread of its own, so this may be called from async
/// code), else the files of `memory.chat.dir` (nothing touches the disk yet).
pub fn open_chat_store(settings: &Settings) -> Result<Arc<agw_memory::ChatStore>, StartError> {
    let Some(database) = &settings.cluster.database else {
        return Ok(Arc::new(agw_memory::ChatStore::new(settings.memory.chat.clone())));
    };
    let pg = agw_memory::PgConfig {
        url: database.url.clone(),
        schema: database.schema.clone(),
        pool_size: database.pool_size,
        ..agw_memory::PgConfig::default()
    };
    let memory = settings.memory.chat.clone();
    // The PostgreSQL client blocks: never on a runtime worker.
    let opened = std::thread::scope(|scope| scope.spawn(move || agw_memory::ChatStore::postgres(memory, pg)).join());
    match opened {
        Ok(Ok(store)) => {
            tracing::info!(url = %config::masked_url(&database.url), schema = %database.schema, "chat memory in PostgreSQL");
            Ok(Arc::new(store))
        }
        Ok(Err(e)) => {
            Err(StartError::ChatStore(format!("PostgreSQL at {} is unusable: {e}", config::masked_url(&database.url))))
        }
        Err(_) => Err(StartError::ChatStore("opening the PostgreSQL chat store failed".into())),
    }
}

/// `agw migrate-chats`: copies the chat directory `from` (default `memory.chat.dir`) into the
/// PostgreSQL store of `agw.database.url` (see [`agw_memory::migrate_chats`]). Blocks.
pub fn migrate_chats(
    settings: &Settings,
    from: Option<std::path::PathBuf>,
    limit: Option<usize>,
) -> Result<agw_memory::MigrateReport, StartError> {
    if settings.cluster.database.is_none() {
        return Err(StartError::ChatStore(
            "set agw.database.url (AGW_DATABASE_URL) to the database to copy into".into(),
        ));
    }
    let store = open_chat_store(settings)?;
    let mut source = settings.memory.chat.clone();
    if let Some(from) = from {
        source.dir = from;
    }
    if !source.dir.is_dir() {
        return Err(StartError::ChatStore(format!("{} is not a chat directory", source.dir.display())));
    }
    tracing::info!(from = %source.dir.display(), ?limit, "copying chats into PostgreSQL");
    agw_memory::migrate_chats(&source, &store, limit).map_err(|e| StartError::ChatStore(e.to_string()))
}

/// Why the server state could not be built.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configured chat store cannot be opened.
    #[error("chat memory: {0}")]
    ChatStore(String),
    /// The cluster's Redis cannot be joined.
    #[error("cannot join the cluster: {0}")]
    Cluster(String),
}

/// Builds the server state from settings: loads agents, tools and viewports (a configured
/// directory, or the bundled demo set) and the provider registry. Broken files are logged and
/// skipped; the rest load. Fails only when the configured chat store cannot be opened.
pub fn build_state(settings: Settings) -> Result<AppState, StartError> {
    let chats = open_chat_store(&settings)?;
    if settings.resources.sync_bundled {
        sync_bundled(&settings);
    }
    let agents = match &settings.resources.agents.dir {
        Some(dir) => AgentCatalog::load_dir(dir),
        None => AgentCatalog::from_sources(
            agw_demo::bundled::AGENT_FILES.iter().map(|(name, text)| ((*name).to_string(), (*text).to_string())),
        ),
    };
    for problem in agents.problems() {
        tracing::warn!(file = %problem.file, "agent file skipped: {}", problem.message);
    }
    let agents = Arc::new(ArcSwap::from_pointee(agents));
    let skills_root = skills_root(&settings);
    let skills = SkillRegistry::load(&skills_root);
    report_sandbox(&settings.sandbox);
    code_roots::warn_unreadable(&settings);
    let bash = bash_config(&settings);
    warn_if_bash_reaches_chats(&bash, &settings);
    let loaded = Arc::clone(&agents);
    let mut builtins = builtins(BuiltinsConfig { bash });
    // agw-modes' tool, next to the agent file format it writes.
    builtins.push(Arc::new(AgentFileCreate::new(AgentFileCreateConfig {
        agents_dir: settings.resources.agents.dir.clone().unwrap_or_else(|| "agents".into()),
        default_system_prompt: settings
            .tools
            .agent_file_default_prompt
            .clone()
            .unwrap_or_else(|| AgentFileCreateConfig::default().default_system_prompt),
        allowed_tools: settings
            .tools
            .agent_file_allowed_tools
            .clone()
            .unwrap_or_else(|| DEFAULT_GRANTABLE_TOOLS.iter().map(|t| (*t).to_string()).collect()),
        allowed_skills: settings.tools.agent_file_allowed_skills.clone(),
        allow_overwrite: settings.tools.agent_file_allow_overwrite,
        protected_keys: bundled_agent_keys(),
        existing_agents: Some(AgentLookup::new(move |key| {
            loaded.load().keys().any(|loaded| loaded.eq_ignore_ascii_case(key))
        })),
    })));
    let mut script_config = SkillScriptConfig::new(&skills_root);
    script_config.sandbox = settings.sandbox.clone();
    builtins.push(Arc::new(SkillRunScript::new(script_config)));
    let tools = match &settings.resources.tools.dir {
        Some(dir) => ToolRegistry::load(Some(dir), builtins),
        None => ToolRegistry::from_sources(bundled_tool_files(), builtins),
    };
    for problem in tools.problems() {
        tracing::warn!(file = %problem.file, "tool definition skipped: {}", problem.message);
    }
    let viewports = match &settings.resources.viewports.dir {
        Some(dir) => ViewportRegistry::load(dir),
        None => ViewportRegistry::from_sources(agw_tools::bundled::VIEWPORT_FILES.iter().copied()),
    };
    tracing::info!(
        agents = agents.load().len(),
        tools = tools.list().len(),
        viewports = viewports.len(),
        skills = skills.len(),
        "catalogs loaded"
    );
    let mut providers = ProviderRegistry::with_limits(settings.providers.clone(), settings.provider_limits);
    // The demo model fills the `demo` key only when no real provider claims it.
    if settings.demo.enabled && !providers.keys().iter().any(|k| k == DEMO_PROVIDER_KEY) {
        providers.insert(
            DEMO_PROVIDER_KEY,
            DEMO_MODEL,
            Arc::new(DemoProvider::with_chunk_delay(settings.demo.chunk_delay)),
        );
    }
    let mcp = crate::mcp::Mcp::load(settings.resources.mcp_dir.as_deref(), settings.mcp.limits);
    let guard_rules = guard_rules(&settings);
    for missing in agents.load().iter().flat_map(|a| {
        agw_modes::runtime::missing_rule_sets(&a.guardrails.lists, &guard_rules)
            .into_iter()
            .map(|set| (a.key.clone(), set.to_owned()))
            .collect::<Vec<_>>()
    }) {
        tracing::warn!(agent = %missing.0, rules = %missing.1, "an agent names a guardrails rule set that does not exist: its runs will fail until it does");
    }
    let catalogs = Catalogs { agents, tools, viewports, skills, guard_rules, providers, mcp, chats: Some(chats) };
    Ok(AppState::new(settings, catalogs))
}

/// The guardrails' rule sets: the directory's (a broken file is skipped with a log line, the
/// others load), and the bundled `demo` set unless the directory has its own.
fn guard_rules(settings: &Settings) -> agw_guard::GuardCatalog {
    let bundled = agw_guard::GuardCatalog::bundled();
    let Some(dir) = &settings.guardrails.rules.dir else { return bundled };
    let (catalog, problems) = agw_guard::GuardCatalog::load_dir(dir);
    let catalog = catalog.or_sets_of(&bundled);
    for problem in problems {
        tracing::warn!(dir = %dir.display(), "guardrails rule file skipped: {problem}");
    }
    tracing::info!(dir = %dir.display(), rule_sets = catalog.len(), "guardrails loaded");
    catalog
}

/// The bundled tool definition files: agw-tools' and those of agw-modes' tools.
fn bundled_tool_files() -> impl Iterator<Item = (&'static str, &'static str)> {
    agw_tools::bundled::TOOL_FILES.iter().chain(agw_modes::bundled::TOOL_FILES).copied()
}

/// `_bash_`'s configuration from the settings, confined by the settings' sandbox.
pub(crate) fn bash_config(settings: &Settings) -> BashConfig {
    let mut bash = BashConfig::from_lists(
        settings.tools.bash.working_directory.as_deref().and_then(|p| p.to_str()),
        settings.tools.bash.allowed_paths.iter().map(String::as_str),
        settings.tools.bash.allowed_commands.iter().map(String::as_str),
        settings.tools.bash.path_checked_commands.iter().map(String::as_str),
    );
    bash.sandbox = settings.sandbox.clone();
    bash
}

/// The keys of the bundled demo agents: `agent_file_create` never replaces them, even when their
/// file is missing from the agents directory.
fn bundled_agent_keys() -> Vec<String> {
    let bundled = AgentCatalog::from_sources(
        agw_demo::bundled::AGENT_FILES.iter().map(|(name, text)| ((*name).to_string(), (*text).to_string())),
    );
    bundled.keys().map(str::to_string).collect()
}

/// `_bash_` reads whatever lies under its roots: a chat directory there would hand every user's
/// history to any agent with `_bash_`. Only a configuration can do that (the default root is a
/// directory of its own), so it is reported, not refused.
fn warn_if_bash_reaches_chats(bash: &BashConfig, settings: &Settings) {
    let real =
        |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or_else(|_| std::path::absolute(p).unwrap_or_default());
    let chats = real(&settings.memory.chat.dir);
    let roots = std::iter::once(&bash.working_directory).chain(&bash.allowed_paths);
    for root in roots {
        if chats.starts_with(real(root)) {
            tracing::warn!(
                root = %root.display(),
                chats = %chats.display(),
                "the chat directory is inside a _bash_ root: agents with _bash_ can read every user's chats"
            );
        }
    }
}

/// Logs which protections confine model-started processes (`sandbox::probe()` ran when the
/// settings were loaded), and which Python scripts get.
fn report_sandbox(sandbox: &agw_tools::sandbox::SandboxConfig) {
    let report = sandbox.report();
    if sandbox.support.confines() {
        let python = agw_tools::sandbox::describe_python("python3", sandbox.support.root);
        tracing::info!(%python, "sandbox: {report}");
    } else {
        tracing::warn!("sandbox: {report}");
    }
}

/// The skills root: the configured directory, or the bundled skills unpacked to a fixed
/// directory under the system temp dir (scripts must exist on disk to run).
pub fn skills_root(settings: &Settings) -> std::path::PathBuf {
    let dir = skills_dir(settings);
    if settings.resources.skills.dir.is_none()
        && let Err(e) = agw_skills::bundled::materialize(&dir)
    {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot unpack the bundled skills");
    }
    dir
}

/// Where the skills root is, without unpacking anything (see [`skills_root`]).
pub(crate) fn skills_dir(settings: &Settings) -> std::path::PathBuf {
    match &settings.resources.skills.dir {
        Some(dir) => dir.clone(),
        None => std::env::temp_dir().join("agw-bundled-skills"),
    }
}

/// Copies the bundled demo resources into the configured directories, never overwriting.
fn sync_bundled(settings: &Settings) {
    type Files = &'static [(&'static str, &'static str)];
    let targets: [(Option<&std::path::PathBuf>, Files); 5] = [
        (settings.resources.agents.dir.as_ref(), agw_demo::bundled::AGENT_FILES),
        (settings.resources.tools.dir.as_ref(), agw_tools::bundled::TOOL_FILES),
        (settings.resources.tools.dir.as_ref(), agw_modes::bundled::TOOL_FILES),
        (settings.resources.viewports.dir.as_ref(), agw_tools::bundled::VIEWPORT_FILES),
        (settings.resources.skills.dir.as_ref(), agw_skills::bundled::SKILL_FILES),
    ];
    for (dir, files) in targets {
        let Some(dir) = dir else { continue };
        match sync::sync_files(dir, files) {
            Ok(report) if !report.written.is_empty() => {
                tracing::info!(dir = %dir.display(), written = report.written.len(), kept = report.kept.len(), "bundled resources copied")
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(dir = %dir.display(), error = %e, "cannot copy bundled resources"),
        }
    }
}
