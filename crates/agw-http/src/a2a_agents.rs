//! Remote A2A agents' tools in the gateway (docs/a2a.md): the files of `agent.a2a.external-dir`,
//! loaded at start and again when they change, kept in the tool registry under `a2a__`.

use std::path::Path;
use std::sync::Arc;

use agw_tools::{A2A_NAMESPACE, ToolRegistry};
use arc_swap::ArcSwap;

/// Loads the declarations of `dir` (a broken file is logged and skipped; the others load) and
/// puts their tools into the registry in place of the previous ones. Each card is read for the
/// tool's description, a few seconds at most, all at once.
pub async fn load(dir: &Path, tools: &ArcSwap<ToolRegistry>) {
    let (configs, problems) = agw_a2a::load_dir(dir);
    for problem in &problems {
        tracing::warn!(file = %problem.file, "remote A2A agent file skipped: {}", problem.message);
    }
    let agents = configs.len();
    let loaded = agw_a2a::tools_of(configs).await;
    tools.store(Arc::new(tools.load().with_namespace(A2A_NAMESPACE, loaded)));
    tracing::info!(dir = %dir.display(), agents, "remote A2A agents loaded");
}
