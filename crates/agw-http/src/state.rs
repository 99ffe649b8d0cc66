//! What every request handler reaches: the settings, the run service, and the edge's own parts
//! (authentication, the MCP client glue, the `/mcp` mount).

use std::sync::Arc;

use arc_swap::ArcSwap;

use agw_llm::ProviderRegistry;
use agw_memory::ChatStore;
use agw_modes::definition::AgentCatalog;
use agw_skills::SkillRegistry;
use agw_tools::ToolRegistry;
use agw_tools::viewport::ViewportRegistry;

use crate::auth::Authenticator;
use crate::config::Settings;
use crate::runs::{Parts, RunService, ToolSources};

/// What every request handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    /// The shared state; reached through `Deref`.
    pub inner: Arc<Inner>,
}

/// The state itself.
pub struct Inner {
    /// Settings as loaded at startup; reloads swap registries, never these.
    pub settings: Settings,
    /// The run service: runs, their registries and stores, quotas, the cluster.
    pub runs: RunService,
    /// Bearer-token verification; `None` when auth is not enforced.
    pub(crate) auth: Option<Authenticator>,
    /// MCP servers and their tools (`None`: no `AGENT_MCP_EXTERNAL_DIR`).
    pub(crate) mcp: Option<Arc<crate::mcp::Mcp>>,
    /// `/mcp`: the agents as MCP tools, set up on first use by `mcp_server` (held here as `Any`
    /// so the state does not import the protocol module that reads it).
    pub(crate) mcp_mount: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
    /// A2A push-notification webhooks, set up on first use by the A2A routes (as `Any`, like
    /// `mcp_mount`).
    pub(crate) a2a_push: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
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
    /// The guardrails' rule sets.
    pub guard_rules: agw_guard::GuardCatalog,
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
        let runs = RunService::new(Parts {
            settings: settings.service(),
            catalogs: crate::runs::Catalogs {
                agents: catalogs.agents,
                tools: Arc::new(ArcSwap::from_pointee(catalogs.tools)),
                viewports: ArcSwap::from_pointee(catalogs.viewports),
                skills: ArcSwap::from_pointee(catalogs.skills),
                guard_rules: ArcSwap::from_pointee(catalogs.guard_rules),
                providers: Arc::new(catalogs.providers),
            },
            chats,
            tool_sources: catalogs.mcp.clone().map(|m| m as Arc<dyn ToolSources>),
            telemetry: Arc::new(crate::telemetry::OtelTelemetry),
        });
        Self {
            inner: Arc::new(Inner {
                runs,
                auth: Authenticator::new(&settings.auth),
                mcp: catalogs.mcp,
                mcp_mount: std::sync::OnceLock::new(),
                a2a_push: std::sync::OnceLock::new(),
                settings,
            }),
        }
    }

    /// The MCP servers' connections and their status (`None`: no `AGENT_MCP_EXTERNAL_DIR`).
    pub fn mcp_hub(&self) -> Option<Arc<agw_mcp::McpHub>> {
        self.mcp.as_ref().map(|m| m.hub())
    }

    /// The registries runs snapshot (agents, tools, viewports, skills, providers).
    pub fn catalogs(&self) -> &crate::runs::Catalogs {
        self.runs.catalogs()
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}
