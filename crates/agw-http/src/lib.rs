//! agw-http — the gateway's HTTP face: hyper server, routes, SSE bodies, configuration.
//!
//! Owns: settings (TOML file + environment, [`config::SETTINGS`]), the shared state (agent
//! catalog behind `arc-swap`, provider registry), routing and the `{code,msg,data}` envelope,
//! the SSE response body with heartbeats, and the run driver that connects a mode to a client
//! through the event assembler.
//!
//! Must never: contain mode logic, provider wire formats or event-shaping rules (those live in
//! agw-modes, agw-llm and agw-protocol), buffer or merge stream frames, or keep a run going after
//! its client is gone.

pub mod body;
pub mod bundled;
pub mod config;
pub mod envelope;
pub mod routes;
pub mod server;
pub mod sink;
pub mod state;

use std::sync::Arc;

use agw_llm::ProviderRegistry;
use agw_llm::demo::{DEMO_MODEL, DEMO_PROVIDER_KEY, DemoProvider};
use agw_modes::definition::AgentCatalog;

pub use config::Settings;
pub use server::Server;
pub use state::AppState;

/// Builds the server state from settings: loads agents (a directory, or the bundled demo agents)
/// and the provider registry. Broken agent files are logged and skipped.
pub fn build_state(settings: Settings) -> AppState {
    let agents = match &settings.agents_dir {
        Some(dir) => AgentCatalog::load_dir(dir),
        None => AgentCatalog::from_sources(
            bundled::AGENT_FILES.iter().map(|(name, text)| ((*name).to_string(), (*text).to_string())),
        ),
    };
    for problem in agents.problems() {
        tracing::warn!(file = %problem.file, "agent file skipped: {}", problem.message);
    }
    tracing::info!(agents = agents.len(), "agent catalog loaded");
    let mut providers = ProviderRegistry::new(settings.providers.clone(), false);
    // The demo model fills the `demo` key only when no real provider claims it.
    if settings.demo_enabled && !providers.keys().iter().any(|k| k == DEMO_PROVIDER_KEY) {
        providers.insert(
            DEMO_PROVIDER_KEY,
            DEMO_MODEL,
            Arc::new(DemoProvider::with_chunk_delay(settings.demo_chunk_delay)),
        );
    }
    AppState::new(settings, agents, providers)
}
