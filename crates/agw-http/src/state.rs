//! Shared server state.

use std::sync::Arc;

use arc_swap::ArcSwap;
use dashmap::DashSet;

use agw_llm::ProviderRegistry;
use agw_modes::definition::AgentCatalog;

use crate::config::Settings;

/// What every request handler can reach. Cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub inner: Arc<Inner>,
}

pub struct Inner {
    pub settings: Settings,
    /// Swapped atomically on reload; a run holds the `Arc<AgentDefinition>` it started with.
    pub agents: ArcSwap<AgentCatalog>,
    pub providers: Arc<ProviderRegistry>,
    /// Chats this process has seen. Decides `chat.start` until chat memory (with its on-disk
    /// index) takes over.
    pub chats: DashSet<String>,
}

impl AppState {
    pub fn new(settings: Settings, agents: AgentCatalog, providers: ProviderRegistry) -> Self {
        Self {
            inner: Arc::new(Inner {
                settings,
                agents: ArcSwap::from_pointee(agents),
                providers: Arc::new(providers),
                chats: DashSet::new(),
            }),
        }
    }
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}
