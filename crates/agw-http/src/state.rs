//! Shared server state.

use std::sync::Arc;

use arc_swap::ArcSwap;

use agw_llm::ProviderRegistry;
use agw_memory::ChatStore;
use agw_modes::definition::AgentCatalog;
use agw_modes::runtime::{FrontendSubmits, RunServices};
use agw_skills::SkillRegistry;
use agw_tools::ToolRegistry;
use agw_tools::viewport::ViewportRegistry;

use crate::auth::Authenticator;
use crate::config::Settings;
use crate::runs::RunTracker;
use crate::webhook::Webhook;

/// What every request handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The shared state; reached through `Deref`.
    pub inner: Arc<Inner>,
}

/// The state itself: settings, swappable registries, and the services runs share.
pub struct Inner {
    /// Settings as loaded at startup; reloads swap registries, never these.
    pub settings: Settings,
    /// Catalogs are swapped atomically on reload; a run holds the snapshots it started with. The
    /// agent catalog is shared with `agent_file_create`, which must know every loaded key.
    pub agents: Arc<ArcSwap<AgentCatalog>>,
    /// Tool registry (built-ins plus definition files), swapped on reload.
    pub tools: ArcSwap<ToolRegistry>,
    /// Viewport registry, swapped on reload.
    pub viewports: ArcSwap<ViewportRegistry>,
    /// Skill catalog, swapped on reload.
    pub skills: ArcSwap<SkillRegistry>,
    /// Model providers by key; fixed for the life of the process.
    pub providers: Arc<ProviderRegistry>,
    /// Frontend tools waiting for `POST /api/ap/submit`, across all runs.
    pub submits: Arc<FrontendSubmits>,
    /// Chat history and the chat index (files, or PostgreSQL with `agw.database.url`).
    pub chats: Arc<ChatStore>,
    /// Bearer-token verification; `None` when auth is not enforced.
    pub auth: Option<Authenticator>,
    /// Runs in flight, for graceful shutdown and the active-runs metric.
    pub runs: Arc<RunTracker>,
    /// The chat-event webhook, when configured.
    pub webhook: Option<Webhook>,
    /// Quota counters per owner (subject and tenant) and agent (`agw.quotas.*`), on one node.
    pub quotas: Arc<crate::quotas::Quotas>,
    /// MCP servers and their tools (`None`: no `AGENT_MCP_EXTERNAL_DIR`).
    pub mcp: Option<Arc<crate::mcp::Mcp>>,
    /// `/mcp`: the agents as MCP tools, set up on first use.
    pub mcp_mount: std::sync::OnceLock<Arc<crate::mcp_server::Mount>>,
    /// This replica's place in a cluster (`agw.redis.url`), set by [`crate::cluster::join`].
    pub cluster: std::sync::OnceLock<Arc<crate::cluster::Node>>,
}

/// The registries a server starts with.
pub struct Catalogs {
    /// The agent catalog, in the `ArcSwap` that `agent_file_create` also reads.
    pub agents: Arc<ArcSwap<AgentCatalog>>,
    /// Tool registry, built-ins included.
    pub tools: ToolRegistry,
    /// Viewport registry.
    pub viewports: ViewportRegistry,
    /// Skill catalog.
    pub skills: SkillRegistry,
    /// Model providers by key, the demo model included when enabled.
    pub providers: ProviderRegistry,
    /// MCP servers declared for this process.
    pub mcp: Option<Arc<crate::mcp::Mcp>>,
    /// The chat store ([`crate::open_chat_store`]); `None`: the files of `memory.chat.dir`.
    pub chats: Option<Arc<ChatStore>>,
}

impl AppState {
    /// Wires the catalogs with the stores, auth and webhook that `settings` describe.
    pub fn new(settings: Settings, catalogs: Catalogs) -> Self {
        let chats = catalogs.chats.unwrap_or_else(|| Arc::new(ChatStore::new(settings.memory.chat.clone())));
        Self {
            inner: Arc::new(Inner {
                agents: catalogs.agents,
                tools: ArcSwap::from_pointee(catalogs.tools),
                viewports: ArcSwap::from_pointee(catalogs.viewports),
                skills: ArcSwap::from_pointee(catalogs.skills),
                providers: Arc::new(catalogs.providers),
                submits: Arc::new(FrontendSubmits::default()),
                chats,
                runs: Arc::new(RunTracker::new(settings.runs.clone())),
                webhook: Webhook::new(settings.webhook.clone()),
                quotas: Arc::new(crate::quotas::Quotas::new(settings.quotas)),
                auth: Authenticator::new(&settings.auth),
                mcp: catalogs.mcp,
                mcp_mount: std::sync::OnceLock::new(),
                cluster: std::sync::OnceLock::new(),
                settings,
            }),
        }
    }

    /// [`Self::run_services`] with frontend tools a client declared for one run added to the
    /// tool registry's snapshot (names the registry already has are skipped).
    pub fn run_services_with(&self, client_tools: Vec<agw_tools::ToolDef>) -> Arc<RunServices> {
        let services = self.run_services();
        if client_tools.is_empty() {
            return services;
        }
        let (tools, names) = services.tools.with_client_tools(client_tools);
        Arc::new(RunServices {
            providers: services.providers.clone(),
            tools: Arc::new(tools),
            viewports: services.viewports.clone(),
            submits: services.submits.clone(),
            frontend_timeout: services.frontend_timeout,
            tool_output_limit: services.tool_output_limit,
            skills: services.skills.clone(),
            skill_max_prompt_chars: services.skill_max_prompt_chars,
            prices: services.prices.clone(),
            client_tools: names,
            tracing: services.tracing.clone(),
            mcp_tools: services.mcp_tools.clone(),
            mcp_request_tool_bytes: services.mcp_request_tool_bytes,
        })
    }

    /// The services a new run uses: today's snapshots of every registry.
    pub fn run_services(&self) -> Arc<RunServices> {
        Arc::new(RunServices {
            providers: self.providers.clone(),
            tools: self.tools.load_full(),
            viewports: self.viewports.load_full(),
            submits: self.submits.clone(),
            frontend_timeout: self.settings.tools.frontend_submit_timeout,
            tool_output_limit: self.settings.tools.max_output_bytes,
            skills: self.skills.load_full(),
            skill_max_prompt_chars: self.settings.resources.skill_max_prompt_chars,
            prices: self.settings.prices.clone(),
            client_tools: Vec::new(),
            tracing: crate::telemetry::run_tracing(),
            mcp_tools: self.mcp.as_ref().map(|m| m.index.load_full()).unwrap_or_default(),
            mcp_request_tool_bytes: self.settings.mcp.max_request_tool_bytes,
        })
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}
