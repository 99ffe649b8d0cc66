//! The run service: what every way of starting, watching and steering a run goes through — the
//! HTTP routes of every protocol, the MCP server, the cluster's forwarded requests, and runs
//! continued after a restart. It owns the registries a run snapshots, the stores, quotas, the
//! webhook and this replica's place in a cluster.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use futures::future::BoxFuture;

use agw_llm::ProviderRegistry;
use agw_memory::ChatStore;
use agw_modes::definition::{AgentCatalog, AgentDefinition};
use agw_modes::runtime::{FrontendSubmits, McpToolIndex, RunServices, RunTracing};
use agw_protocol::usage::PriceTable;
use agw_skills::SkillRegistry;
use agw_tools::viewport::ViewportRegistry;
use agw_tools::{ToolDef, ToolRegistry};

use crate::node::Node;
use crate::quotas::{QuotaSettings, Quotas};
use crate::webhook::{Webhook, WebhookConfig};
use crate::{RunError, RunSettings, RunTracker};

/// What the run core is told by whoever builds it (agw-http's `Settings::service` gives it,
/// defaults included).
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    /// The registry's limits (`agw.runs.*`).
    pub runs: RunSettings,
    /// Chat memory on: runs read and write the chat's history.
    pub memory: bool,
    /// Model prices, for usage cost.
    pub prices: Arc<PriceTable>,
    /// How long a frontend tool waits for its submit.
    pub frontend_submit_timeout: Duration,
    /// Most bytes of one tool result the model sees.
    pub tool_output_limit: usize,
    /// How many tasks one `agent_invoke` starts, how deep sub-agents nest.
    pub sub_agents: agw_modes::runtime::SubAgentLimits,
    /// Most characters of skill prompts in one system prompt.
    pub skill_max_prompt_chars: usize,
    /// Most bytes of MCP tool definitions one model request carries.
    pub mcp_request_tool_bytes: usize,
    /// `agw.quotas.*`.
    pub quotas: QuotaSettings,
    /// The chat-event webhook.
    pub webhook: WebhookConfig,
    /// Callers are authenticated: a request forwarded by another replica must name its caller.
    pub callers_authenticated: bool,
    /// `agw.guardrails.*`: default guards, the classifier webhook, judge and failure settings.
    pub guards: crate::guards::GuardSettings,
    /// `agw.recovery.*`: runs in flight are resumed after a crash (`docs/run-lifecycle.md`).
    pub recovery: RecoverySettings,
    /// `agw.provider.fallback-cooldown`: the least time a model that failed is skipped by calls
    /// that have other models to try (docs/models.md, "Fallbacks").
    pub fallback_cooldown: Duration,
    /// `agw.provider.fallback-cooldown-max`: the most, whatever `Retry-After` asked.
    pub fallback_cooldown_max: Duration,
}

/// Crash recovery (`agw.recovery.*`, `docs/run-lifecycle.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoverySettings {
    /// Runs in flight keep a run mark and a seq ledger slot, and a start resumes them. Off: a
    /// run in flight when the process stops is gone, as before.
    pub enabled: bool,
    /// A run that started longer ago than this when the server comes back ends with
    /// `recovery_exhausted` instead of being resumed.
    pub max_age: Duration,
    /// A run resumed this many times already ends with `recovery_exhausted` (a server that
    /// crashes while it resumes converges).
    pub max_attempts: u32,
}

impl Default for RecoverySettings {
    fn default() -> Self {
        Self { enabled: true, max_age: Duration::from_secs(3600), max_attempts: 3 }
    }
}

/// The registries a run snapshots when it starts; reloads swap them, a run keeps its snapshot.
pub struct Catalogs {
    /// Agent definitions. Shared with `agent_file_create`, which must know every loaded key.
    pub agents: Arc<ArcSwap<AgentCatalog>>,
    /// Tools: built-ins, definition files, MCP servers' tools (`mcp__…`).
    pub tools: Arc<ArcSwap<ToolRegistry>>,
    /// Viewports.
    pub viewports: ArcSwap<ViewportRegistry>,
    /// Skills.
    pub skills: ArcSwap<SkillRegistry>,
    /// The guardrails catalog's rule sets.
    pub guard_rules: ArcSwap<agw_guard::GuardCatalog>,
    /// Model providers by key; fixed for the life of the process.
    pub providers: Arc<ProviderRegistry>,
}

/// Tools that come from outside the process (MCP servers): started for an agent before its run,
/// and indexed by server. The MCP client glue implements it; without one, runs see no MCP tools.
pub trait ToolSources: Send + Sync {
    /// Starts the sources `agent` uses that are not up yet and waits (bounded) for those still
    /// connecting, putting their tools into `tools`.
    fn prepare<'a>(&'a self, agent: &'a AgentDefinition, tools: &'a ArcSwap<ToolRegistry>) -> BoxFuture<'a, ()>;

    /// Server → its tools, as runs resolve `mcpServers`.
    fn index(&self) -> Arc<McpToolIndex>;
}

/// How runs report to tracing. The default reports nothing beyond `tracing` spans; agw-http
/// installs OpenTelemetry's.
pub trait Telemetry: Send + Sync {
    /// What a new run's model and tool calls report.
    fn run_tracing(&self) -> RunTracing {
        RunTracing::default()
    }

    /// Wraps a run's task so its spans continue the trace current where it was started.
    fn carry(&self, run: BoxFuture<'static, ()>) -> BoxFuture<'static, ()> {
        run
    }
}

/// No telemetry beyond `tracing` spans.
#[derive(Debug, Default)]
pub struct NoTelemetry;

impl Telemetry for NoTelemetry {}

/// What the run service is built from.
pub struct Parts {
    /// The settings.
    pub settings: ServiceSettings,
    /// The registries.
    pub catalogs: Catalogs,
    /// Chat history and the chat index.
    pub chats: Arc<ChatStore>,
    /// MCP servers' tools, when any are declared.
    pub tool_sources: Option<Arc<dyn ToolSources>>,
    /// Tracing hooks.
    pub telemetry: Arc<dyn Telemetry>,
}

/// The run service. Cheap to clone; every clone is the same service.
#[derive(Clone)]
pub struct RunService {
    pub(crate) core: Arc<Core>,
}

pub(crate) struct Core {
    pub(crate) settings: ServiceSettings,
    pub(crate) catalogs: Catalogs,
    pub(crate) submits: Arc<FrontendSubmits>,
    pub(crate) chats: Arc<ChatStore>,
    pub(crate) tracker: Arc<RunTracker>,
    pub(crate) webhook: Option<Webhook>,
    /// What every run's guards share (the webhook's client is built once).
    pub(crate) guards: Arc<agw_modes::runtime::GuardServices>,
    pub(crate) quotas: Arc<Quotas>,
    pub(crate) tool_sources: Option<Arc<dyn ToolSources>>,
    pub(crate) telemetry: Arc<dyn Telemetry>,
    /// This replica's place in a cluster, once joined.
    pub(crate) cluster: OnceLock<Arc<Node>>,
    /// The seq ledger of this process, once runs are recovered (`crate::recover`).
    pub(crate) ledger: OnceLock<Arc<agw_memory::SeqLedger>>,
    /// Models that failed recently, as this process knows them (clustered: also in Redis).
    pub(crate) cooldowns: Arc<crate::cooldowns::CooldownMemory>,
}

impl RunService {
    /// Builds the service; nothing runs until asked.
    pub fn new(parts: Parts) -> Self {
        let Parts { settings, catalogs, chats, tool_sources, telemetry } = parts;
        let core = Core {
            submits: Arc::new(FrontendSubmits::default()),
            tracker: Arc::new(RunTracker::new(settings.runs.clone())),
            webhook: Webhook::new(settings.webhook.clone()),
            guards: Arc::new(settings.guards.services()),
            quotas: Arc::new(Quotas::new(settings.quotas)),
            catalogs,
            chats,
            tool_sources,
            telemetry,
            cluster: OnceLock::new(),
            ledger: OnceLock::new(),
            cooldowns: Arc::default(),
            settings,
        };
        Self { core: Arc::new(core) }
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &ServiceSettings {
        &self.core.settings
    }

    /// The registries.
    pub fn catalogs(&self) -> &Catalogs {
        &self.core.catalogs
    }

    /// The chat store.
    pub fn chat_store(&self) -> &Arc<ChatStore> {
        &self.core.chats
    }

    /// The run registry: runs by id, their count, draining them.
    pub fn tracker(&self) -> &Arc<RunTracker> {
        &self.core.tracker
    }

    /// Frontend tools and approvals waiting for their answer, across all runs.
    pub fn submits(&self) -> &Arc<FrontendSubmits> {
        &self.core.submits
    }

    /// This replica's place in a cluster, once joined.
    pub fn node(&self) -> Option<&Arc<Node>> {
        self.core.cluster.get()
    }

    /// The agent `requested` names; none, blank, `auto` or `default`: the catalog's first.
    pub fn agent(&self, requested: Option<&str>) -> Result<Arc<AgentDefinition>, RunError> {
        self.core.agent(requested)
    }

    /// The services a new run uses: today's snapshots of every registry, with the frontend
    /// tools a client declared for this run added (names the registry already has are skipped).
    pub fn run_services(&self, client_tools: Vec<ToolDef>) -> Arc<RunServices> {
        self.core.run_services(client_tools)
    }

    /// Stops waiting runs' tasks, then waits up to `grace` for the rest to finish (graceful
    /// shutdown; see [`crate::drain`]).
    pub async fn drain(&self, grace: Duration) {
        crate::drain(&self.core.tracker, grace).await;
    }
}

/// A requested agent key that names none: blank, `auto` or `default` (the catalog's first runs).
pub(crate) fn names_no_agent(key: &str) -> bool {
    key.is_empty() || key.eq_ignore_ascii_case("auto") || key.eq_ignore_ascii_case("default")
}

impl Core {
    /// The cluster's shared state, once joined.
    pub(crate) fn cluster(&self) -> Option<&agw_cluster::Cluster> {
        self.cluster.get().map(|node| &node.cluster)
    }

    pub(crate) fn agent(&self, requested: Option<&str>) -> Result<Arc<AgentDefinition>, RunError> {
        let catalog = self.catalogs.agents.load();
        let key = requested.map(str::trim).unwrap_or("");
        if names_no_agent(key) {
            return catalog.iter().next().cloned().ok_or(RunError::NoAgents);
        }
        catalog.get(key).ok_or_else(|| RunError::AgentNotFound { key: key.to_owned() })
    }

    /// A new run's crash-recovery state: `None` when recovery is off, the run not recorded, or
    /// the run marks are not shared by the replicas of a cluster (files).
    pub(crate) fn recovering(&self, run_id: &str, chat_id: &str) -> Option<Box<crate::sink::Recovering>> {
        self.recovers().then(|| crate::sink::Recovering::new(self.ledger.get(), run_id, chat_id, self.node_id()))
    }

    /// [`Self::recovering`] for a run that goes on in this process (after a wait, or taken over)
    /// from `mark`, numbering on after `entry`; its mark may still be in the store.
    pub(crate) fn recovering_from(
        &self,
        mut mark: agw_protocol::history::RunMark,
        entry: agw_memory::LedgerEntry,
    ) -> Option<Box<crate::sink::Recovering>> {
        mark.node = self.node_id().map(str::to_owned);
        self.recovers().then(|| crate::sink::Recovering::resumed(self.ledger.get(), mark, entry, true))
    }

    /// Runs are resumable: recovery is on, runs are recorded, and — clustered — their marks are
    /// in the shared database where every replica finds them.
    pub(crate) fn recovers(&self) -> bool {
        self.settings.recovery.enabled
            && self.settings.memory
            && (self.cluster.get().is_none() || self.chats.backend_name() == "postgres")
    }

    /// This replica's node id, clustered.
    pub(crate) fn node_id(&self) -> Option<&str> {
        self.cluster.get().map(|node| node.id())
    }

    pub(crate) fn run_services(&self, client_tools: Vec<ToolDef>) -> Arc<RunServices> {
        let (tools, client_tools) = if client_tools.is_empty() {
            (self.catalogs.tools.load_full(), Vec::new())
        } else {
            let (tools, names) = self.catalogs.tools.load().with_client_tools(client_tools);
            (Arc::new(tools), names)
        };
        Arc::new(RunServices {
            providers: self.catalogs.providers.clone(),
            tools,
            viewports: self.catalogs.viewports.load_full(),
            submits: self.submits.clone(),
            frontend_timeout: self.settings.frontend_submit_timeout,
            tool_output_limit: self.settings.tool_output_limit,
            skills: self.catalogs.skills.load_full(),
            skill_max_prompt_chars: self.settings.skill_max_prompt_chars,
            prices: self.settings.prices.clone(),
            client_tools,
            tracing: self.telemetry.run_tracing(),
            mcp_tools: self.tool_sources.as_ref().map(|s| s.index()).unwrap_or_default(),
            mcp_request_tool_bytes: self.settings.mcp_request_tool_bytes,
            agents: self.catalogs.agents.load_full(),
            sub_agents: self.settings.sub_agents,
            guards: self.guards.clone(),
            guard_rules: self.catalogs.guard_rules.load_full(),
            cooldowns: crate::cooldowns::for_run(
                self.cluster(),
                &self.cooldowns,
                self.settings.fallback_cooldown,
                self.settings.fallback_cooldown_max,
            ),
        })
    }
}
