//! MCP servers' tools in the gateway (docs/mcp.md): the server files of `AGENT_MCP_EXTERNAL_DIR`
//! loaded at start into one [`McpHub`], their tools kept in the tool registry under `mcp__`, and
//! the index `toolConfig.mcpServers` resolves against.

use std::sync::Arc;

use agw_mcp::{McpHub, McpLimits, ServerState};
use agw_modes::definition::{AgentDefinition, StageKind};
use agw_modes::runtime::McpToolIndex;
use agw_tools::{Tool, ToolRegistry};
use arc_swap::ArcSwap;
use futures::future::BoxFuture;

/// The tool-name namespace of MCP tools in the tool registry.
pub const NAMESPACE: &str = "mcp__";

/// How long a replaced hub keeps serving the calls already running on it.
pub const RECONFIGURE_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// The process's MCP servers.
pub struct Mcp {
    /// Connections and tool lists; replaced when the server files change.
    hub: ArcSwap<McpHub>,
    /// `agw.mcp.*`: what a server's listing may add, for every hub.
    limits: McpLimits,
    /// Server → its tools, as runs resolve `mcpServers`.
    pub index: ArcSwap<McpToolIndex>,
}

impl std::fmt::Debug for Mcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mcp").field("servers", &self.hub().servers()).finish()
    }
}

impl Mcp {
    /// The servers declared in `dir`, their tools taken within `limits`; a broken file is logged
    /// and skipped. `None`: no directory.
    pub fn load(dir: Option<&std::path::Path>, limits: McpLimits) -> Option<Arc<Mcp>> {
        let dir = dir?;
        let (configs, problems) = agw_mcp::load_dir(dir);
        for problem in &problems {
            tracing::warn!(file = %problem.file, "MCP server file skipped: {}", problem.message);
        }
        tracing::info!(dir = %dir.display(), servers = configs.len(), "MCP servers declared");
        Some(Arc::new(Mcp {
            hub: ArcSwap::new(McpHub::with_limits(configs, limits)),
            limits,
            index: ArcSwap::from_pointee(McpToolIndex::new()),
        }))
    }

    /// The current hub.
    pub fn hub(&self) -> Arc<McpHub> {
        self.hub.load_full()
    }

    /// Stops every server (at shutdown).
    pub async fn shutdown(&self) {
        self.hub().shutdown().await;
    }

    /// The server files changed: when the declarations differ, a new hub takes over (its boot
    /// servers start, the tool registry follows it) and the old one is stopped after
    /// [`RECONFIGURE_GRACE`], so calls already running on it can finish. Runs started after the
    /// swap see the new servers' tools.
    pub fn reconfigure(self: &Arc<Self>, tools: &Arc<ArcSwap<ToolRegistry>>, configs: Vec<agw_mcp::McpServerConfig>) {
        let old = self.hub();
        let comparable = |configs: Vec<agw_mcp::McpServerConfig>| {
            let mut configs: Vec<_> =
                configs.into_iter().map(|c| agw_mcp::McpServerConfig { source: None, ..c }).collect();
            configs.sort_by(|a, b| a.name.cmp(&b.name));
            configs
        };
        let current = comparable(old.servers().iter().filter_map(|name| old.config(name).cloned()).collect());
        if comparable(configs.clone()) == current {
            return;
        }
        tracing::info!(servers = configs.len(), "MCP server files changed: reconnecting");
        self.hub.store(McpHub::with_limits(configs, self.limits));
        self.start(tools);
        tokio::spawn(async move {
            tokio::time::sleep(RECONFIGURE_GRACE).await;
            old.shutdown().await;
        });
    }

    /// The servers `agent` names in any stage's `toolConfig.mcpServers`.
    fn servers_of(agent: &AgentDefinition) -> Vec<String> {
        let mut servers: Vec<String> = Vec::new();
        let kinds = [StageKind::Plain, StageKind::React, StageKind::Plan, StageKind::Execute, StageKind::Summary];
        for kind in kinds {
            for selection in agent.stage_tools(kind).mcp_servers {
                if !servers.contains(&selection.server) {
                    servers.push(selection.server);
                }
            }
        }
        servers
    }

    /// The registry names of the MCP tools `agent` is offered now (for `/api/ap/agent(s)`).
    pub fn tool_names_for(&self, agent: &AgentDefinition) -> Vec<String> {
        let index = self.index.load();
        let mut names: Vec<String> = Vec::new();
        let kinds = [StageKind::Plain, StageKind::React, StageKind::Plan, StageKind::Execute, StageKind::Summary];
        for kind in kinds {
            for selection in agent.stage_tools(kind).mcp_servers {
                let wanted = |mcp_name: &str| selection.tools.as_ref().is_none_or(|t| t.iter().any(|n| n == mcp_name));
                for (mcp_name, name) in index.get(&selection.server).into_iter().flatten() {
                    if wanted(mcp_name) && !names.contains(name) {
                        names.push(name.clone());
                    }
                }
            }
        }
        names
    }

    /// Starts the servers `agent` uses that nobody started yet (lazy ones) and waits for those
    /// still connecting (a boot server agw has just started, a restart), each up to its
    /// `connectMs`, all at once: the run then sees their tools instead of none. A server that
    /// fails is logged by the hub and its tools stay absent; a failed one waiting for its next
    /// attempt is not waited for.
    pub async fn ensure_for(&self, tools: &ArcSwap<ToolRegistry>, agent: &AgentDefinition) {
        let hub = self.hub();
        let pending: Vec<String> = Self::servers_of(agent)
            .into_iter()
            .filter(|server| {
                hub.status(server).is_some_and(|s| matches!(s.state, ServerState::NotStarted | ServerState::Starting))
            })
            .collect();
        if pending.is_empty() {
            // Connected a moment ago, and the task that puts its tools into the registry has not
            // run yet (a run resumed right at start): put them in now.
            let index = self.index.load();
            let unlisted: Vec<String> = Self::servers_of(agent)
                .into_iter()
                .filter(|server| {
                    !index.contains_key(server) && hub.status(server).is_some_and(|s| s.state == ServerState::Connected)
                })
                .collect();
            if !unlisted.is_empty() {
                // The hub's own catalog may lag the connection too: settled servers rebuild it.
                for server in &unlisted {
                    let _ = hub.ensure(server).await;
                }
                self.refresh(tools);
            }
            return;
        }
        futures::future::join_all(pending.iter().map(|server| {
            let hub = &hub;
            async move {
                if let Err(reason) = hub.ensure(server).await {
                    tracing::warn!(server = %server, agent = %agent.key, "MCP server could not start: {reason}");
                }
            }
        }))
        .await;
        self.refresh(tools);
    }

    /// Puts the hub's current tools into the tool registry and the index.
    pub fn refresh(&self, registry: &ArcSwap<ToolRegistry>) {
        let tools = self.hub().mcp_tools();
        let mut index = McpToolIndex::new();
        for tool in &tools {
            index
                .entry(tool.server().to_owned())
                .or_default()
                .push((tool.mcp_name().to_owned(), tool.name().to_owned()));
        }
        let tools: Vec<Arc<dyn Tool>> = tools.into_iter().map(|t| t as Arc<dyn Tool>).collect();
        registry.store(Arc::new(registry.load().with_namespace(NAMESPACE, tools)));
        self.index.store(Arc::new(index));
    }

    /// Starts the boot servers, loads their tools, and keeps the registry in step with every
    /// later change (a lazy server started, `tools/list_changed`, a restart).
    pub fn start(self: &Arc<Self>, tools: &Arc<ArcSwap<ToolRegistry>>) {
        let mcp = self.clone();
        let tools = tools.clone();
        let hub = self.hub();
        tokio::spawn(async move {
            let mut changes = hub.subscribe();
            hub.start().await;
            // Until a reconfiguration replaced this hub.
            while Arc::ptr_eq(&mcp.hub(), &hub) {
                mcp.refresh(&tools);
                if changes.changed().await.is_err() {
                    break;
                }
            }
        });
    }
}

impl agw_runs::ToolSources for Mcp {
    fn prepare<'a>(&'a self, agent: &'a AgentDefinition, tools: &'a ArcSwap<ToolRegistry>) -> BoxFuture<'a, ()> {
        Box::pin(self.ensure_for(tools, agent))
    }

    fn index(&self) -> Arc<McpToolIndex> {
        self.index.load_full()
    }
}
