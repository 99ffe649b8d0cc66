//! [`McpHub`]: one connection per MCP server, shared by every run, supervised and restarted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant, SystemTime};

use agw_tools::{Tool, ToolError, ToolOutput};
use rmcp::ServiceError;
use rmcp::model::{CallToolRequestParams, ErrorCode};
use rmcp::service::{Peer, QuitReason, RoleClient, RunningServiceCancellationToken};
use serde_json::{Map, Value};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use crate::config::{McpServerConfig, Startup};
use crate::connect::{
    Connection, EnvLookup, Handler, Listing, STOP_GRACE, Skipped, StderrTail, connect, describe_service_error,
    list_tools, process_env,
};
use crate::convert::convert_result;
use crate::limits::{McpLimits, REFRESH_INTERVAL};
use crate::naming::{NameCollision, assign_names};

mod tool;

pub use tool::McpTool;

/// First delay before restarting a server that failed or died.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(500);
/// The delay doubles after each failure up to this; a successful call resets it.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What a server is doing, for `agw check`, logs and health endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// A lazy server nobody has used yet.
    NotStarted,
    /// Being started or restarted.
    Starting,
    /// Connected; its tools are listed.
    Connected,
    /// The last start failed or the connection died; a restart is scheduled (with backoff).
    Failed {
        /// Why, for people (the spawn or handshake error, or how the connection ended).
        reason: String,
        /// When it failed.
        since: SystemTime,
    },
    /// `enabled: false`.
    Disabled,
    /// The hub was shut down.
    Stopped,
}

/// Why [`McpHub::ensure`] has no connection to offer. The display text is for people (logs).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerUnavailable {
    /// No server of that name is declared.
    #[error("no MCP server named \"{0}\"")]
    NotDeclared(String),
    /// Not started (the hub is shutting down, so it will not be).
    #[error("not started")]
    NotStarted,
    /// Still starting when its `connectMs` (plus a second) ran out.
    #[error("still starting")]
    StillStarting,
    /// The last start failed or the connection died; a restart is scheduled (with backoff).
    #[error("{reason}")]
    Failed {
        /// Why, as [`ServerState::Failed`] says.
        reason: String,
    },
    /// `enabled: false`.
    #[error("disabled (enabled: false)")]
    Disabled,
    /// The hub was shut down.
    #[error("agw's MCP client is shut down")]
    ShutDown,
}

/// One server's state and what it offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerStatus {
    /// Its state.
    pub state: ServerState,
    /// How many tools it last listed (kept while it restarts).
    pub tools: usize,
    /// The process id of a connected stdio server.
    pub pid: Option<u32>,
}

/// The MCP client of a process: every declared server, its connection and its tools.
///
/// Shared as `Arc<McpHub>` by all runs. Servers with `startup: boot` start in [`Self::start`],
/// lazy ones on first use ([`Self::ensure`]); one connection per server serves every call. A
/// connection that dies (transport closed, stdio child exited) or cannot be opened is retried
/// with exponential backoff ([`INITIAL_BACKOFF`] doubling to [`MAX_BACKOFF`], reset by a
/// successful call); meanwhile calls fail at once with the reason. Tool lists are taken within
/// [`McpLimits`], cached, and refreshed when a server sends `notifications/tools/list_changed`
/// (at most once per [`REFRESH_INTERVAL`] per server); [`Self::subscribe`] tells when the catalog
/// changed. [`Self::shutdown`] (or dropping the hub) stops every connection and its stdio process.
pub struct McpHub {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub").field("servers", &self.servers()).finish()
    }
}

/// What [`McpHub`] shares with its supervisors and (weakly) with its [`McpTool`]s.
struct Inner {
    slots: BTreeMap<String, Arc<Slot>>,
    env: EnvLookup,
    limits: McpLimits,
    catalog: Mutex<Arc<Catalog>>,
    catalog_changes: watch::Sender<u64>,
    stopping: watch::Sender<bool>,
}

#[derive(Default)]
struct Catalog {
    tools: Vec<Arc<McpTool>>,
    collisions: Vec<NameCollision>,
}

/// One declared server.
pub(crate) struct Slot {
    pub(crate) config: McpServerConfig,
    state: Mutex<SlotState>,
    /// Bumped at every phase change, so waiters need not poll.
    changes: watch::Sender<u64>,
    stderr: Arc<StderrTail>,
    supervisor: Mutex<Option<JoinHandle<()>>>,
    /// The last failure logged at `warn`, so a server failing the same way every 30 s warns once.
    last_logged: Mutex<Option<String>>,
    /// What the last listing skipped, so a server refreshed every second warns once.
    last_skipped: Mutex<Option<Skipped>>,
}

struct SlotState {
    phase: Phase,
    /// The last listed tools (kept while the server restarts, so the catalog does not churn).
    tools: Option<Arc<Vec<rmcp::model::Tool>>>,
    backoff: Duration,
    generation: u64,
}

#[derive(Clone)]
enum Phase {
    NotStarted,
    Starting,
    Connected(Arc<Live>),
    Failed { reason: String, since: SystemTime, retry_at: Instant },
    Disabled,
    Stopped,
}

/// An open connection.
struct Live {
    peer: Peer<RoleClient>,
    pid: Option<u32>,
    cancel: Mutex<Option<RunningServiceCancellationToken>>,
}

impl Live {
    fn stop(&self) {
        if let Some(token) = lock(&self.cancel).take() {
            token.cancel();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not take the MCP client down with it: the data stays consistent
    // because every critical section is a plain assignment.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl McpHub {
    /// A hub for these servers, reading `envPassthrough` and `bearerTokenEnv` from the process
    /// environment, with the default [`McpLimits`]. Nothing starts until [`Self::start`] or first
    /// use. A second server with an already used name is ignored (logged); [`crate::load_dir`]
    /// never produces one.
    pub fn new(configs: Vec<McpServerConfig>) -> Arc<McpHub> {
        McpHub::with_env(configs, process_env())
    }

    /// [`Self::new`] with another source of environment variables.
    pub fn with_env(configs: Vec<McpServerConfig>, env: EnvLookup) -> Arc<McpHub> {
        McpHub::with_env_and_limits(configs, env, McpLimits::default())
    }

    /// [`Self::new`] with other limits on what a server may offer.
    pub fn with_limits(configs: Vec<McpServerConfig>, limits: McpLimits) -> Arc<McpHub> {
        McpHub::with_env_and_limits(configs, process_env(), limits)
    }

    /// [`Self::new`] with another source of environment variables and other limits.
    pub fn with_env_and_limits(configs: Vec<McpServerConfig>, env: EnvLookup, limits: McpLimits) -> Arc<McpHub> {
        let mut slots = BTreeMap::new();
        for config in configs {
            if slots.contains_key(&config.name) {
                tracing::warn!(server = %config.name, "MCP server declared twice; the second one is ignored");
                continue;
            }
            let phase = if config.enabled { Phase::NotStarted } else { Phase::Disabled };
            let slot = Slot {
                config,
                state: Mutex::new(SlotState { phase, tools: None, backoff: INITIAL_BACKOFF, generation: 0 }),
                changes: watch::Sender::new(0),
                stderr: Arc::default(),
                supervisor: Mutex::new(None),
                last_logged: Mutex::new(None),
                last_skipped: Mutex::new(None),
            };
            slots.insert(slot.config.name.clone(), Arc::new(slot));
        }
        let inner = Inner {
            slots,
            env,
            limits,
            catalog: Mutex::default(),
            catalog_changes: watch::Sender::new(0),
            stopping: watch::Sender::new(false),
        };
        Arc::new(McpHub { inner: Arc::new(inner) })
    }

    /// Starts every enabled `startup: boot` server and waits until each is connected or has
    /// failed (each within its `connectMs`). Failures are recorded in [`Self::status`] and
    /// logged; they never fail the caller.
    pub async fn start(&self) {
        let boot: Vec<&Arc<Slot>> = self
            .inner
            .slots
            .values()
            .filter(|slot| slot.config.enabled && slot.config.startup == Startup::Boot)
            .collect();
        futures::future::join_all(boot.into_iter().map(|slot| async {
            slot.start(&self.inner);
            let _ = slot.settled().await;
        }))
        .await;
    }

    /// Starts `server` if it has not started yet (a lazy server's first use) and waits for the
    /// outcome: `Ok` once connected (its tools are then in [`Self::tools`]), else why not.
    pub async fn ensure(&self, server: &str) -> Result<(), ServerUnavailable> {
        let slot = self.inner.slots.get(server).ok_or_else(|| ServerUnavailable::NotDeclared(server.to_owned()))?;
        slot.start(&self.inner);
        slot.settled().await?;
        // The server's task lists its tools in the catalog just after it records the
        // connection: a caller that goes on at once must find them there.
        self.inner.rebuild_catalog();
        Ok(())
    }

    /// The declared servers' names, sorted.
    pub fn servers(&self) -> Vec<String> {
        self.inner.slots.keys().cloned().collect()
    }

    /// The declaration of `server`.
    pub fn config(&self, server: &str) -> Option<&McpServerConfig> {
        self.inner.slots.get(server).map(|slot| &slot.config)
    }

    /// What `server` is doing; `None` when no such server is declared.
    pub fn status(&self, server: &str) -> Option<ServerStatus> {
        self.inner.slots.get(server).map(|slot| slot.status())
    }

    /// Every tool currently known, of all enabled servers, sorted by server then MCP tool name.
    /// A server's tools appear once it has connected and stay while it restarts.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.mcp_tools().into_iter().map(|tool| tool as Arc<dyn Tool>).collect()
    }

    /// [`Self::tools`] with their concrete type (server and MCP name available).
    pub fn mcp_tools(&self) -> Vec<Arc<McpTool>> {
        lock(&self.inner.catalog).tools.clone()
    }

    /// The tools of `server` (empty for an unknown or never connected server).
    pub fn tools_of(&self, server: &str) -> Vec<Arc<dyn Tool>> {
        self.mcp_tools().into_iter().filter(|tool| tool.server() == server).map(|tool| tool as Arc<dyn Tool>).collect()
    }

    /// The model-facing names (`mcp__<server>__<tool>`) of the tools of `server`.
    pub fn tool_names_of(&self, server: &str) -> Vec<String> {
        self.mcp_tools().iter().filter(|tool| tool.server() == server).map(|tool| tool.name().to_owned()).collect()
    }

    /// Tools left out of the catalog because another tool has their name (after sanitising).
    pub fn name_collisions(&self) -> Vec<NameCollision> {
        lock(&self.inner.catalog).collisions.clone()
    }

    /// Calls `tool` (its MCP name) on `server`, exactly as its [`McpTool`] does; starts a lazy
    /// server first. Errors as [`McpTool`] describes; never panics.
    pub async fn call(&self, server: &str, tool: &str, args: Value) -> Result<ToolOutput, ToolError> {
        self.inner.call(server, tool, args).await
    }

    /// Changes whenever the set of tools, their names, descriptions or schemas change (a server
    /// connected, or sent `tools/list_changed`): the gateway rebuilds its tool catalog then.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.catalog_changes.subscribe()
    }

    /// Stops every connection and waits (up to a few seconds per server) for stdio servers to
    /// exit: stdin is closed, then SIGTERM, then SIGKILL. Calls made afterwards fail.
    pub async fn shutdown(&self) {
        let supervisors = self.inner.stop();
        futures::future::join_all(supervisors.into_iter().map(|mut handle| async move {
            if tokio::time::timeout(STOP_GRACE, &mut handle).await.is_err() {
                // Dropping the connection kills the process (kill-on-drop).
                handle.abort();
            }
        }))
        .await;
    }
}

impl Drop for McpHub {
    /// Stops every connection; stdio processes are killed by their connection's cleanup (or, at
    /// the latest, when the runtime drops it).
    fn drop(&mut self) {
        self.inner.stop();
    }
}

impl Inner {
    fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Marks every server stopped, closes every connection and hands back the supervisors.
    fn stop(&self) -> Vec<JoinHandle<()>> {
        self.stopping.send_replace(true);
        self.slots
            .values()
            .filter_map(|slot| {
                let previous = std::mem::replace(&mut lock(&slot.state).phase, Phase::Stopped);
                if let Phase::Connected(live) = previous {
                    live.stop();
                }
                slot.bump();
                lock(&slot.supervisor).take()
            })
            .collect()
    }

    /// Recomputes the tool catalog from every server's last listing; announces it when it differs.
    pub(crate) fn rebuild_catalog(self: &Arc<Self>) {
        let mut current = lock(&self.catalog);
        let mut listed: Vec<(&str, rmcp::model::Tool)> = Vec::new();
        for slot in self.slots.values().filter(|slot| slot.config.enabled) {
            if let Some(tools) = lock(&slot.state).tools.clone() {
                listed.extend(tools.iter().map(|tool| (slot.config.name.as_str(), tool.clone())));
            }
        }
        listed.sort_by(|a, b| (a.0, a.1.name.as_ref()).cmp(&(b.0, b.1.name.as_ref())));
        let pairs: Vec<(&str, &str)> = listed.iter().map(|(server, tool)| (*server, tool.name.as_ref())).collect();
        let (names, collisions) = assign_names(&pairs);
        let tools: Vec<Arc<McpTool>> = listed
            .iter()
            .zip(names)
            .filter_map(|((server, tool), name)| {
                Some(Arc::new(McpTool::new(Arc::downgrade(self), server, tool, name?)))
            })
            .collect();
        let unchanged = current.tools.len() == tools.len()
            && current.tools.iter().zip(&tools).all(|(old, new)| old.same_definition(new));
        // A tool skipped for its name changes no name, but is still news (a second server whose
        // tools all collide leaves the catalog as it was).
        for collision in collisions.iter().filter(|c| !current.collisions.contains(c)) {
            collision.log();
        }
        if unchanged {
            if current.collisions != collisions {
                *current = Arc::new(Catalog { tools: current.tools.clone(), collisions });
            }
            return;
        }
        *current = Arc::new(Catalog { tools, collisions });
        drop(current);
        self.catalog_changes.send_modify(|generation| *generation += 1);
    }

    /// One `tools/call` of `tool` (its MCP name) on `server`, within the server's `callMs`.
    /// Dropping the future cancels the request (rmcp sends `notifications/cancelled`).
    async fn call(self: &Arc<Self>, server: &str, tool: &str, args: Value) -> Result<ToolOutput, ToolError> {
        let failed = |reason: String| ToolError::Failed(format!("MCP server {server}: {reason}"));
        let slot = self.slots.get(server).ok_or_else(|| failed("not declared".to_owned()))?;
        let live = slot.live(self).await.map_err(failed)?;
        let arguments = match args {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        let limit = slot.config.timeouts.call;
        let outcome = tokio::time::timeout(limit, live.peer.call_tool(params)).await;
        match outcome {
            Err(_elapsed) => {
                Err(failed(format!("tool `{tool}` did not answer within {} ms (timeouts.callMs)", limit.as_millis())))
            }
            Ok(Ok(result)) => {
                slot.healthy();
                convert_result(result)
            }
            Ok(Err(ServiceError::McpError(error))) => {
                slot.healthy();
                if error.code == ErrorCode::INVALID_PARAMS {
                    Err(ToolError::InvalidArguments(format!("MCP server {server}: {}", error.message)))
                } else {
                    Err(failed(format!("tool `{tool}` failed: {} (error {})", error.message, error.code.0)))
                }
            }
            Ok(Err(ServiceError::TransportClosed)) => {
                Err(failed(slot.stderr.explain("the connection was lost during the call; restarting".to_owned())))
            }
            Ok(Err(error @ ServiceError::TransportSend(_))) => {
                Err(failed(format!("could not send `{tool}`: {}", describe_service_error(&error))))
            }
            Ok(Err(error)) => Err(failed(format!("tool `{tool}`: {}", describe_service_error(&error)))),
        }
    }
}

impl Slot {
    fn bump(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    fn status(&self) -> ServerStatus {
        let state = lock(&self.state);
        let tools = state.tools.as_ref().map_or(0, |tools| tools.len());
        let (state, pid) = match &state.phase {
            Phase::NotStarted => (ServerState::NotStarted, None),
            Phase::Starting => (ServerState::Starting, None),
            Phase::Connected(live) => (ServerState::Connected, live.pid),
            Phase::Failed { reason, since, .. } => {
                (ServerState::Failed { reason: reason.clone(), since: *since }, None)
            }
            Phase::Disabled => (ServerState::Disabled, None),
            Phase::Stopped => (ServerState::Stopped, None),
        };
        ServerStatus { state, tools, pid }
    }

    /// Spawns the supervisor unless it runs already (or the server is disabled or stopped).
    fn start(self: &Arc<Self>, hub: &Arc<Inner>) {
        {
            let mut state = lock(&self.state);
            if !matches!(state.phase, Phase::NotStarted) || hub.is_stopping() {
                return;
            }
            state.phase = Phase::Starting;
        }
        self.bump();
        let handle = tokio::spawn(supervise(
            Arc::downgrade(hub),
            self.clone(),
            hub.env.clone(),
            hub.limits,
            hub.stopping.subscribe(),
        ));
        *lock(&self.supervisor) = Some(handle);
    }

    /// Waits until the server is connected (`Ok`) or is not going to be soon (`Err` with why).
    async fn settled(&self) -> Result<(), ServerUnavailable> {
        let mut changes = self.changes.subscribe();
        let deadline = tokio::time::Instant::now() + self.config.timeouts.connect + Duration::from_secs(1);
        loop {
            let phase = lock(&self.state).phase.clone();
            match phase {
                Phase::Connected(_) => return Ok(()),
                Phase::Starting => {}
                Phase::NotStarted => return Err(ServerUnavailable::NotStarted),
                Phase::Failed { reason, .. } => return Err(ServerUnavailable::Failed { reason }),
                Phase::Disabled => return Err(ServerUnavailable::Disabled),
                Phase::Stopped => return Err(ServerUnavailable::ShutDown),
            }
            if tokio::time::timeout_at(deadline, changes.changed()).await.is_err() {
                return Err(ServerUnavailable::StillStarting);
            }
        }
    }

    /// The connection to call through, starting the server on first use. A failed server is not
    /// waited for: its restart is already scheduled, and a model is better served by the reason.
    async fn live(self: &Arc<Self>, hub: &Arc<Inner>) -> Result<Arc<Live>, String> {
        loop {
            let phase = lock(&self.state).phase.clone();
            match phase {
                Phase::Connected(live) if live.peer.is_transport_closed() => {
                    return Err(self.stderr.explain("the connection was lost; restarting".to_owned()));
                }
                Phase::Connected(live) => return Ok(live),
                Phase::NotStarted if hub.is_stopping() => return Err("agw's MCP client is shut down".to_owned()),
                Phase::NotStarted => self.start(hub),
                Phase::Starting => self.settled().await.map_err(|e| e.to_string())?,
                Phase::Failed { reason, retry_at, .. } => {
                    let wait = retry_at.saturating_duration_since(Instant::now());
                    return Err(format!("{reason} (next start attempt in {} ms)", wait.as_millis()));
                }
                Phase::Disabled => return Err("disabled (enabled: false)".to_owned()),
                Phase::Stopped => return Err("agw's MCP client is shut down".to_owned()),
            }
        }
    }

    /// A call got an answer: the server works, so the next failure restarts it quickly again.
    fn healthy(&self) {
        lock(&self.state).backoff = INITIAL_BACKOFF;
    }

    /// Enters `Starting` for a new attempt; `None` once stopped.
    fn begin_attempt(&self) -> Option<u64> {
        let generation = {
            let mut state = lock(&self.state);
            if matches!(state.phase, Phase::Stopped) {
                return None;
            }
            state.generation += 1;
            state.phase = Phase::Starting;
            state.generation
        };
        self.stderr.clear();
        self.bump();
        Some(generation)
    }

    /// Records the new connection and its tools; `false` when stopped meanwhile.
    fn set_connected(&self, live: Arc<Live>, tools: Vec<rmcp::model::Tool>) -> bool {
        {
            let mut state = lock(&self.state);
            if matches!(state.phase, Phase::Stopped) {
                return false;
            }
            state.phase = Phase::Connected(live);
            state.tools = Some(Arc::new(tools));
        }
        *lock(&self.last_logged) = None;
        self.bump();
        true
    }

    /// Replaces the tool list if `generation` is the current, connected connection's; `true` when
    /// replaced.
    fn set_tools(&self, generation: u64, tools: Vec<rmcp::model::Tool>) -> bool {
        let mut state = lock(&self.state);
        if state.generation != generation || !matches!(state.phase, Phase::Connected(_)) {
            return false;
        }
        state.tools = Some(Arc::new(tools));
        true
    }

    /// Logs what `listing` skipped: at `warn` when it differs from the previous listing's.
    fn report_skipped(&self, listing: &Listing) {
        let mut last = lock(&self.last_skipped);
        let again = last.as_ref() == Some(&listing.skipped);
        listing.skipped.log(&self.config.name, again);
        if !again {
            *last = Some(listing.skipped.clone());
        }
    }

    /// Records a failure and schedules the next attempt; returns the delay before it.
    fn set_failed(&self, reason: String) -> Duration {
        let delay = {
            let mut state = lock(&self.state);
            if matches!(state.phase, Phase::Stopped) {
                return Duration::ZERO;
            }
            let delay = state.backoff;
            state.backoff = (delay * 2).min(MAX_BACKOFF);
            state.phase =
                Phase::Failed { reason: reason.clone(), since: SystemTime::now(), retry_at: Instant::now() + delay };
            delay
        };
        self.bump();
        let mut last = lock(&self.last_logged);
        if last.as_deref() == Some(reason.as_str()) {
            tracing::debug!(server = %self.config.name, retry_ms = delay.as_millis() as u64, "MCP server still failing: {reason}");
        } else {
            tracing::warn!(server = %self.config.name, retry_ms = delay.as_millis() as u64, "MCP server failed: {reason}");
            *last = Some(reason);
        }
        delay
    }
}

/// One server's life: connect, wait for the connection to end, back off, again — until the hub
/// stops. The only task that changes a started server's phase (besides the hub stopping it).
async fn supervise(
    hub: Weak<Inner>,
    slot: Arc<Slot>,
    env: EnvLookup,
    limits: McpLimits,
    mut stopping: watch::Receiver<bool>,
) {
    let name = slot.config.name.clone();
    while let Some(generation) = slot.begin_attempt() {
        let refresh = Arc::new(Notify::new());
        let handler = Handler::new(refresh.clone());
        let attempt = connect(&slot.config, handler, &env, Some(slot.stderr.clone()), &limits);
        // Stopping mid-connect drops the attempt, which stops a started process.
        let outcome = tokio::select! {
            outcome = attempt => outcome,
            _ = stopping.wait_for(|stop| *stop) => return,
        };
        let delay = match outcome {
            Ok(Connection { running, pid, listing }) => {
                slot.report_skipped(&listing);
                let count = listing.tools.len();
                let peer = running.peer().clone();
                let live =
                    Arc::new(Live { peer: peer.clone(), pid, cancel: Mutex::new(Some(running.cancellation_token())) });
                if !slot.set_connected(live, listing.tools) {
                    let _ = tokio::time::timeout(STOP_GRACE, running.cancel()).await;
                    return;
                }
                tracing::info!(server = %name, pid = ?pid, tools = count, "MCP server connected");
                if let Some(hub) = hub.upgrade() {
                    hub.rebuild_catalog();
                }
                // Until the transport closes (server exited, stream ended) or the hub stops it;
                // the refresher lives exactly as long.
                let quit = tokio::select! {
                    quit = running.waiting() => quit,
                    never = refresh_tools(&hub, &slot, generation, &peer, &refresh, &limits) => match never {},
                };
                if matches!(lock(&slot.state).phase, Phase::Stopped) {
                    return;
                }
                let reason = match quit {
                    Ok(QuitReason::Closed) => {
                        "the server closed the connection (process exited or stream ended)".to_owned()
                    }
                    Ok(QuitReason::Cancelled) => "the connection was cancelled".to_owned(),
                    Ok(other) => format!("the connection ended: {other:?}"),
                    Err(e) => format!("the connection task failed: {e}"),
                };
                slot.set_failed(slot.stderr.explain(reason))
            }
            Err(error) => slot.set_failed(slot.stderr.explain(error.to_string())),
        };
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stopping.wait_for(|stop| *stop) => return,
        }
    }
}

/// Lists the server's tools again each time it said they changed, at most once per
/// [`REFRESH_INTERVAL`]: notifications that arrive while a listing runs or during the pause after
/// it are one pending wake-up of `refresh`, so a flood of them costs one listing a second. A
/// `list_changed` that overtook the connection's first listing is that wake-up too, and lists
/// again right away. Each listing is bounded by `connectMs` and [`McpLimits`].
async fn refresh_tools(
    hub: &Weak<Inner>,
    slot: &Slot,
    generation: u64,
    peer: &Peer<RoleClient>,
    refresh: &Notify,
    limits: &McpLimits,
) -> std::convert::Infallible {
    let server = &slot.config.name;
    loop {
        refresh.notified().await;
        tracing::debug!(server = %server, "MCP server says its tools changed; listing them");
        match tokio::time::timeout(slot.config.timeouts.connect, list_tools(peer, limits)).await {
            Ok(Ok(listing)) => {
                slot.report_skipped(&listing);
                if slot.set_tools(generation, listing.tools)
                    && let Some(hub) = hub.upgrade()
                {
                    hub.rebuild_catalog();
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(server = %server, error = %describe_service_error(&e), "MCP tools/list after list_changed failed")
            }
            Err(_) => tracing::warn!(server = %server, "MCP tools/list after list_changed timed out"),
        }
        tokio::time::sleep(REFRESH_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{McpTransport, StdioConfig, Timeouts};

    fn stdio(name: &str, command: &str, enabled: bool, startup: Startup) -> McpServerConfig {
        McpServerConfig {
            name: name.to_owned(),
            enabled,
            transport: McpTransport::Stdio(StdioConfig {
                command: command.to_owned(),
                args: Vec::new(),
                env: BTreeMap::new(),
                env_passthrough: Vec::new(),
                cwd: None,
            }),
            startup,
            timeouts: Timeouts { connect: Duration::from_millis(500), call: Duration::from_millis(500) },
            source: None,
        }
    }

    #[tokio::test]
    async fn states_before_anything_starts() {
        let hub = McpHub::new(vec![
            stdio("lazy", "/nonexistent/agw-mcp", true, Startup::Lazy),
            stdio("off", "/nonexistent/agw-mcp", false, Startup::Boot),
        ]);
        hub.start().await;
        assert_eq!(hub.status("lazy").unwrap().state, ServerState::NotStarted);
        assert_eq!(hub.status("off").unwrap().state, ServerState::Disabled);
        assert!(hub.status("missing").is_none());
        assert_eq!(hub.ensure("off").await, Err(ServerUnavailable::Disabled));
        assert_eq!(hub.ensure("off").await.unwrap_err().to_string(), "disabled (enabled: false)");
        assert_eq!(hub.ensure("missing").await.unwrap_err().to_string(), "no MCP server named \"missing\"");
        assert!(hub.tools().is_empty());
        hub.shutdown().await;
        assert_eq!(hub.status("lazy").unwrap().state, ServerState::Stopped);
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_a_success_resets_it() {
        let hub = McpHub::new(vec![stdio("s", "/nonexistent/agw-mcp", true, Startup::Lazy)]);
        let slot = hub.inner.slots.get("s").unwrap();
        let mut delays = Vec::new();
        for _ in 0..8 {
            delays.push(slot.set_failed("boom".to_owned()).as_millis());
        }
        assert_eq!(delays, [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000]);
        slot.healthy();
        assert_eq!(slot.set_failed("boom".to_owned()), INITIAL_BACKOFF);
    }
}
