//! The gateway in one piece: everything built from [`Settings`], served over HTTP or stdio MCP,
//! and shut down in the right order. The binary only parses its arguments and calls this; an
//! embedder calls it too, and either lets it listen ([`Gateway::bind`]) or mounts
//! [`Gateway::state`] in its own server through [`crate::routes::handle`].
//!
//! The order lives here once: start — the state (catalogs, chat store, run service, auth), the
//! cluster (before the first request, so other replicas' runs are reachable), runs that waited
//! for a person before the last stop, MCP servers that start at boot, the directory watcher,
//! the chat retention sweep; stop — the retention sweep ends, runs get the grace period, the
//! chat store's pending fsyncs finish, the cluster lease goes, MCP servers' processes end.

use std::future::Future;

use crate::config::{Settings, masked_url};
use crate::mcp_server::McpServeError;
use crate::reload::{ReloadHandle, Reloader, watched_dirs};
use crate::server::Server;
use crate::state::AppState;
use crate::{StartError, build_state};

/// Whether the gateway follows changes in its configured directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    /// Watch the agents, tools, MCP, viewports and skills directories and reload on change.
    Watch,
    /// Keep what was loaded at start.
    Off,
}

/// A started gateway.
pub struct Gateway {
    state: AppState,
    _reload: Option<ReloadHandle>,
    /// `agw.memory.retention`'s sweep, when on. Dropping the gateway leaves it to end with the
    /// run service (the state's last clone); [`Gateway::shutdown`] stops it first.
    retention: Option<crate::runs::RetentionTask>,
}

impl Gateway {
    /// Builds everything `settings` describe and starts it ([`Reload::Watch`]). Fails when the
    /// chat store cannot be opened or the cluster cannot be joined.
    pub async fn start(settings: Settings) -> Result<Self, StartError> {
        Self::from_state(build_state(settings)?, Reload::Watch).await
    }

    /// Starts a gateway on a state built by [`build_state`] (or by hand).
    pub async fn from_state(state: AppState, reload: Reload) -> Result<Self, StartError> {
        join_cluster(&state).await?;
        // Before the first request: a submit or attach for a run that waited across the
        // restart finds it registered.
        state.runs.restore_waiting_runs().await;
        if let Some(mcp) = &state.mcp {
            mcp.start(&state.catalogs().tools);
        }
        if let Some(dir) = &state.settings.resources.a2a_dir {
            crate::a2a_agents::load(dir, &state.catalogs().tools).await;
        }
        // After the MCP servers start: a resumed run may call their tools at once.
        state.runs.recover_runs().await;
        let reload = match reload {
            Reload::Watch => Some(Reloader::new(state.clone(), watched_dirs(&state.settings)).start()),
            Reload::Off => None,
        };
        let memory = &state.settings.memory;
        let retention =
            memory.enabled.then(|| state.runs.start_retention(memory.retention, memory.retention_sweep)).flatten();
        Ok(Self { state, _reload: reload, retention })
    }

    /// What every request handler reaches; pass it to [`crate::routes::handle`].
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Binds the configured address and port (port 0 picks a free one) and logs who the server
    /// answers (its auth mode, its accepted `Host` values); [`Server::run`] serves.
    pub async fn bind(&self) -> std::io::Result<Server> {
        let server = Server::bind(self.state.clone()).await?;
        let addr = server.local_addr()?;
        let settings = &self.state.settings;
        let auth = &settings.auth;
        if auth.enforced() {
            tracing::info!(keys = %auth.describe(), "auth: bearer JWT required on /api/** and /v1/** (except OPTIONS)");
        } else if auth.enabled == Some(false) {
            tracing::warn!(
                %addr,
                "auth disabled by AGENT_AUTH_ENABLED=false: /api/** and /v1/** answer anyone who can reach this address"
            );
        } else {
            tracing::info!(
                "auth is not configured (no agent.auth.local-public-key or agent.auth.jwks-uri): serving without auth, listening on loopback only"
            );
        }
        tracing::info!(
            hosts = %settings.server.allowed_hosts.describe(),
            "accepted Host values (server.allowed-hosts; others get 403)"
        );
        Ok(server)
    }

    /// Serves the agents as MCP tools over stdin/stdout until the host closes stdin or
    /// `shutdown` resolves.
    pub async fn serve_stdio(&self, shutdown: impl Future<Output = ()>) -> Result<(), McpServeError> {
        crate::mcp_server::serve_stdio(&self.state, shutdown).await
    }

    /// Stops, after the listener (or the host's server) stopped accepting: the retention sweep
    /// stops; runs in flight get `server.shutdown-grace-ms` to finish and the rest end with
    /// `run.error`; pending chat fsyncs finish; the cluster lease is deleted at once (a stopped
    /// replica is not a lost one); MCP servers' processes end; the directory watcher stops.
    pub async fn shutdown(self) {
        if let Some(retention) = self.retention {
            retention.stop();
        }
        let state = self.state;
        state.runs.drain(state.settings.server.shutdown_grace).await;
        let chats = state.runs.chat_store().clone();
        let _ = tokio::task::spawn_blocking(move || chats.flush()).await;
        state.runs.leave_cluster().await;
        if let Some(mcp) = &state.mcp {
            mcp.shutdown().await;
        }
        tracing::info!("agw stopped");
    }
}

/// Joins the cluster `agw.redis.url` names (nothing without one). Idempotent.
async fn join_cluster(state: &AppState) -> Result<(), StartError> {
    let Some(config) = state.settings.cluster_config() else { return Ok(()) };
    let url = masked_url(&config.url);
    state.runs.join_cluster(config).await.map_err(|e| StartError::Cluster(format!("Redis at {url} is unusable: {e}")))
}
